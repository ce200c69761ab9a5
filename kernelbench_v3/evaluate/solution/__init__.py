"""The code that runs on the solution's side of the trust boundary: the zygote that forks one
fresh process per solution (`zygote`), the sandbox it enters before the import (`sandbox`), the
worker that answers the supervisor's requests and reports evidence (`worker`), and the snapshots
of global state it reports (`guard`). Nothing here decides a verdict or a time. The supervisor
imports only `zygote`, to start it."""
