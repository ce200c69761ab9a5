"""The long-lived local evaluation service (`kbv3 serve`) and its Python client.

Owns the service that keeps one warm supervisor worker process (and its zygote) per GPU so that
callers who submit one solution at a time pay torch's import and CUDA's start-up once per GPU,
not once per solution:

- `server`: listens on a Unix socket with owner-only permissions (never a network port), queues
  requests per GPU (named, or the least loaded), restarts a worker that dies (that request gets
  an error Record), shuts down cleanly on SIGTERM/SIGINT or a `shutdown` request;
- `worker`: one supervisor process; every solution still gets a fresh sandboxed process from
  `evaluate()`;
- `client`: `Evaluator(socket).evaluate(problem_id, source, **options) -> Record`, `status()`,
  `shutdown()`;
- `protocol`: length-prefixed JSON frames (never pickle) and the request's fields.

    from kernelbench_v3.serve import Evaluator
    record = Evaluator("/run/user/1000/kbv3/serve.sock").evaluate("level1/23_Softmax", source)
"""

from __future__ import annotations

from .client import Evaluator, RequestError, ServiceError, ServiceTimeout, ServiceUnavailable
from .protocol import default_socket_path

__all__ = ["Evaluator", "RequestError", "ServiceError", "ServiceTimeout", "ServiceUnavailable", "default_socket_path"]
