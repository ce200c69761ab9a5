"""The `kbv3` command line, thin over the wings: the parser and error handling (`main`), the verbs
(`problem_verbs`, `eval_verbs`, `runs_verbs`), the evaluator's options (`options`), argument
types and up-front checks (`args`) and the README's first command (`demo`). Nothing imports it."""
