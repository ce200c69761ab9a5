"""The trusted side of one evaluation, in five rooms, each entered only through its `__init__`
(tests/test_imports.py holds the arrows):

- `run/`: one evaluation end to end (`run_evaluation`), the candidate phase that drives the
  solution process, the seconds per phase, warm zygotes;
- `reference/`: the reference, its caches, and the baseline in a reference-only child;
- `verdict/`: the checks and the judgement, the custom-kernel rule, the static scan, the
  record's scored figures;
- `timing/`: everything that times a call, for a solution (`time_solution`) and for its
  baseline (`time_reference`) on one setup;
- `session/`: one solution-side process as the supervisor holds it (the conversation, the pause).

Arrows: run -> reference, verdict, timing, session; reference -> verdict, timing; verdict ->
timing, session; timing -> session. Nothing here imports the solution's side but
`solution.zygote`, to start it; nothing outside `evaluate/` imports it but through
`kernelbench_v3.evaluate`.
"""
