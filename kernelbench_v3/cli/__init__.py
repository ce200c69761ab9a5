"""The `kbv3` command line: the verbs (`main`), argument types and up-front checks (`args`),
and the README's first command (`demo`). Thin over the wings; nothing imports it."""
