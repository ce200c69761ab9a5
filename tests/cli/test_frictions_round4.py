"""The smaller frictions of issue 41, item 6: `eval --server` says what plain `eval` says and
`serve` logs each request; `runs summary --help` is its own; `runs anomalies` names a run by the
row a person counts and its run_dir; a refused `generate` rerun names the changed setting in
words, not a Python repr; a retried request shows in the run's summary, with counts in their
number; `baselines` on the CPU says its times are no performance figure; tables say `n/a`."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import main
from tests.cli.test_serve_verbs import EVAL, fake_service, where  # noqa: F401 - fixtures
from tests.paths import PUBLISHED


def run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- eval --server and serve


def test_eval_server_says_it_started_and_serve_logs_each_request(fake_service, capsys, caplog):  # noqa: F811
    with caplog.at_level(logging.INFO, logger="kernelbench_v3.serve.server"):
        code, out, err = run([*EVAL, "--server", fake_service, "--json"], capsys)
    assert code == 0 and json.loads(out)["problem_id"] == "level1/23_Softmax"  # stdout: the one object
    assert err.startswith(f"kbv3 eval: evaluating level1/23_Softmax on cpu through the service at {fake_service}")
    logged = [r.getMessage() for r in caplog.records]
    assert any(re.fullmatch(r"level1/23_Softmax: queued on \w+ \(1 waiting or running there\)", m) for m in logged)
    assert any(re.fullmatch(r"level1/23_Softmax: correct on \w+ in \d+\.\d s \(queued \d+\.\d s\)", m) for m in logged)


def test_eval_server_on_the_wrong_device_is_still_one_line(fake_service, capsys):  # noqa: F811
    code, _, err = run([*EVAL, "--server", fake_service, "--device", "cuda"], capsys)
    assert code == 2 and err.strip().splitlines() == [
        "kbv3 eval: this service evaluates on cpu, not 'cuda'; start one with --device cuda"
    ]


# ---------------------------------------------------------------- runs: help and row names


def test_runs_summary_help_is_its_own(capsys):
    _, runs_help, _ = run(["runs", "--help"], capsys)
    _, summary_help, _ = run(["runs", "summary", "--help"], capsys)
    _, anomalies_help, _ = run(["runs", "anomalies", "--help"], capsys)
    assert summary_help != runs_help and anomalies_help != summary_help
    assert "summary" in runs_help and "anomalies" in runs_help and "ACTION --help" in runs_help
    assert "correct/split" in summary_help and "--no-facts" not in summary_help
    assert "--no-facts" in anomalies_help and "row 1 = the first data row" in " ".join(anomalies_help.split())
    code, _, err = run(["runs", "everything"], capsys)
    assert code == 2 and "invalid choice: 'everything'" in err


def test_runs_anomalies_names_the_row_a_person_counts_and_its_run_dir(capsys):
    code, out, _ = run(["runs", "anomalies", "--source", PUBLISHED, "--no-facts"], capsys)
    assert code == 0
    lines = (PUBLISHED / "results.csv").read_text().splitlines()
    named = re.findall(r"^row (\d+) \(run_dir (\S+)\)  (.+?) / (\S+) / (\S+)  ", out, re.M)
    assert named and not re.search(r"^run \d", out, re.M)
    for row, run_dir, model, gpu, problem in named:
        cells = lines[int(row)].split(",")  # line 0 is the header: row N is line N
        assert (cells[0], cells[1], cells[3], cells[15]) == (model, gpu, problem, run_dir)
    code, out, _ = run(["runs", "anomalies", "--source", PUBLISHED, "--no-facts", "--json"], capsys)
    data = json.loads(out)
    assert all(f["row"] == f["run"] + 1 for f in data["flags"] + data["flagged_runs"])


def test_a_superseded_record_does_not_shift_the_rows_after_it(tmp_path):
    from kernelbench_v3.runs.sources import read_runs_table
    from tests.cli.test_report_samples import TEMPLATE

    rows = [{**TEMPLATE, "model": "m", "sample": 0}, {**TEMPLATE, "model": "m", "sample": 0}]
    rows.append({**TEMPLATE, "model": "other", "sample": 0})
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame, _ = read_runs_table(path)
    assert list(frame.index) == [1, 2] and frame.attrs["superseded"] == 1  # lines 2 and 3 of the file


# ---------------------------------------------------------------- generate: refusals and retries


def test_a_journal_of_other_settings_names_each_change_in_words(tmp_path):
    from kernelbench_v3.batch.journal import Journal, JournalError
    from kernelbench_v3.generate.run import GenerateSettings

    first = Journal(tmp_path / "responses.jsonl", GenerateSettings(split="h100", model="m", temperature=0.8))
    first.open()
    first.close()
    again = Journal(tmp_path / "responses.jsonl", GenerateSettings(split="h100", model="m", temperature=0.2))
    with pytest.raises(JournalError) as error:
        again.open()
    message = str(error.value)
    assert "other settings: temperature 0.8 there, 0.2 now;" in message
    assert "(" not in message.split("settings:")[1].split(";")[0]  # no tuple, no dict repr


def test_a_retried_request_shows_in_the_summary_and_counts_read_right(tmp_path):
    from kernelbench_v3.generate.client import ChatClient, RetryPolicy
    from kernelbench_v3.generate.run import GenerateSettings, describe, run_generate
    from tests.generate.fake_openai import FakeOpenAI

    code = "```python\nimport torch\n\nclass Model(torch.nn.Module):\n    pass\n```\n"
    with FakeOpenAI({"Task: level1/23_Softmax": code}) as server:
        server.script = ["500"]
        client = ChatClient(server.base_url, retry=RetryPolicy(retries=2, backoff_s=0.01), sleep=lambda s: None)
        settings = GenerateSettings(split="h100", model="m", problems=("level1/23_Softmax",))
        result = run_generate(settings, tmp_path / "run", client, progress=False)
    assert (result.retried, result.retries, result.sent) == (1, 1, 1)
    text = describe(result)
    assert text.startswith("1 sample (1 ok) in ") and "1 samples" not in text
    assert "1 request answered only after a retry (1 retry, after a 429 or 5xx" in text


def test_batch_summary_counts_in_their_number(tmp_path):
    from kernelbench_v3.batch.run import BatchResult, describe_batch

    record = {"problem_id": "level1/23_Softmax", "status": "failed", "model": None, "error": "boom"}
    result = BatchResult(
        out=tmp_path / "o.parquet", journal=tmp_path / "j", records=[record], ran=1, already_done=0, skipped=[],
        wall_s=1.0,
    )  # fmt: skip
    text = describe_batch(result)
    assert text.startswith("1 record (1 failed) in ") and "level1/23_Softmax ((unnamed)): failed" in text


# ---------------------------------------------------------------- baselines and n/a


def test_baselines_on_the_cpu_say_their_times_are_no_performance_figure(tmp_path, monkeypatch, capsys):
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    def child(role, workdir, spec, **kwargs):
        result = {"ok": True, "eager": {"median_ms": 2.0}, "compiled": {"median_ms": 1.5}, "precision": "fp32"}
        return isolate.ChildOutcome(result, 0, False, False, "", 1.0)

    monkeypatch.setattr(isolate, "run_child", child)
    argv = ["baselines", "--split", "h100", "--only", "level1/23_Softmax", "--device", "cpu", "--cache", tmp_path]
    code, out, _ = run(argv, capsys)
    assert code == 0 and out.splitlines()[0].startswith("level1/23_Softmax: 1.5 ms")
    assert "note: these are CPU times, no performance figure: no speedup is scored on the CPU" in out
    # A way that was not timed (no compiled time) reads n/a, as in every table, never nan.
    monkeypatch.setattr(
        isolate,
        "run_child",
        lambda *a, **k: isolate.ChildOutcome(
            {"ok": True, "eager": {"median_ms": 2.0}, "compiled": None, "precision": "fp32"}, 0, False, False, "", 1.0
        ),
    )
    code, out, _ = run([*argv[:-1], tmp_path / "other"], capsys)
    assert code == 0 and "compiled n/a)" in out and "nan" not in out


def test_tables_say_n_a_not_a_dash(tmp_path, capsys):
    from tests.cli.test_report_samples import _write

    _, out, _ = run(["report", PUBLISHED / "results.csv"], capsys)
    _, problems, _ = run(["report", _write(Path(tmp_path))], capsys)
    for text in (out, problems):
        table_cells = [c for line in text.splitlines() for c in re.split(r"\s{2,}", line.strip())]
        assert "-" not in table_cells
    _, board, _ = run(["runs", "summary", "--source", PUBLISHED], capsys)
    assert not re.search(r"\s-\s", board)
