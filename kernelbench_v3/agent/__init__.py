"""The agent loop: a model writes, checks and submits a kernel over turns, one episode per problem.

Owns `kbv3 agent`'s run and its parts, one concept per module: `settings` (what a run asks for,
the per-level time limits), `layout` (the run folder), `workspace` (the folder the model works
in, and its walls), `tools` (the tool schemas and the file tools), `desk` (evaluations one at a
time on the run's thread), `check` (the feedback path: public seeds, a few lines), `judge` (the
scoring path: eval-batch's evaluation with secret seeds), `transcript` (every message and tool
result, journaled, and the state read back), `episode` (the loop), `results` (results.csv in the
published runs schema, the records, the samples layout) and `run` (many episodes, resumed).

The model is reached through `generate.client` (retries, failures as replies, the key only in the
header); the prompts and the rules they state come from `prompts`; the evaluator is used only
through its public API (`evaluate`, and eval-batch's `evaluate_item` for judging).
"""
