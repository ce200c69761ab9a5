"""Test doubles for the two evaluation paths of an agent run, for the tests of the loop itself
(the evaluator is tested on its own; `test_agent_cpu.py` runs the real one end to end).

A solution's verdict follows markers in its text: `IMPORT_ERROR` fails the import, `WRONG`
fails correctness with a max error of 0.5, anything else is correct. Every call is kept, so a
test can see which files, seeds and options each path used.
"""

from __future__ import annotations

from pathlib import Path

from kernelbench_v3.evaluate import Record


def verdict(record: Record, text: str) -> Record:
    if not text.strip() or "IMPORT_ERROR" in text:
        record.fail("failed", "File solution.py, line 1: ImportError: no Model", "import")
    elif "WRONG" in text:
        record.compiled = True
        record.max_abs_error = 0.5
        record.fail("incorrect", "correctness: max abs error 0.5 > atol 0.01", "correctness")
    else:
        record.compiled, record.correct, record.status = True, True, "correct"
        record.checks = {"correctness": "pass", "custom_kernel": "pass"}
        record.max_abs_error = 1e-7
    return record


class FakeEvaluator:
    def __init__(self):
        self.checks: list[dict] = []
        self.judged: list[dict] = []

    def check(self, request) -> Record:
        text = Path(request.solution_path).read_text()
        self.checks.append(
            {"text": text, "seeds": request.seeds, "device": request.device, "path": request.solution_path}
        )
        record = Record(problem_id=request.problem_id, seeds=list(request.seeds), device=request.device)
        return verdict(record, text)

    def judge(self, item, settings) -> dict:
        text = Path(item.solution_path).read_text()
        self.judged.append({"text": text, "seeds": settings.options.seeds, "settings": settings, "item": item})
        record = Record(
            model=item.model,
            gpu=item.gpu,
            level=1,
            problem=item.problem_id.rsplit("/", 1)[1] + ".py",
            problem_id=item.problem_id,
            solution_path=item.solution_path,
            solution_sha256=item.solution_sha256,
            seeds=list(settings.options.seeds),
            device=settings.device,
            timing_meaningful=False,
        )
        return verdict(record, text).to_dict()
