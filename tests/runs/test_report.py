"""`kbv3 report` (issue 22, point 5): evaluator records as a table in the terminal and as one
self-contained HTML page, checked in a real headless browser with a screenshot."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import main
from tests.paths import RUNS_FIXTURES

TEMPLATE = json.loads((RUNS_FIXTURES / "eval_record.json").read_text())


def _records(tmp_path: Path) -> Path:
    """A batch's JSONL: a GPU-timed correct record, a CPU-timed one, an incorrect and a failed one."""
    gpu = {
        **TEMPLATE,
        "model": "m",
        "device": "cuda",
        "timing_method": "cuda_events",
        "timing_meaningful": True,
        "sizes": {},
        "sol_ms": 0.0123,
        "ref_ms": 0.0246,
        "speedup": 2.0,
        "sol_fraction": 0.42,
    }
    cpu = {**TEMPLATE, "model": "m", "problem": "26_GELU_.py", "problem_id": "level1/26_GELU_", "op_type": "gelu"}
    wrong = {
        **TEMPLATE,
        "model": "m",
        "problem": "40_LayerNorm.py",
        "problem_id": "level1/40_LayerNorm",
        "op_type": "layernorm",
        "status": "incorrect",
        "correct": False,
        "speedup": None,
        "failed_check": "correctness",
        "error": "seed42: max abs error 0.5 exceeds allclose(atol=0.01, rtol=0.01)\nsecond line",
    }
    broken = {
        **TEMPLATE,
        "model": "m",
        "problem": "1_Square_matrix_multiplication_.py",
        "problem_id": "level1/1_Square_matrix_multiplication_",
        "op_type": "gemm",
        "status": "failed",
        "correct": False,
        "compiled": False,
        "speedup": None,
        "sol_ms": None,
        "failed_check": "import",
        "error": "SyntaxError: expected ':' (solution.py, line 30)",
    }
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (gpu, cpu, wrong, broken)))
    return path


def test_report_prints_one_row_per_problem_with_the_failed_check_and_reason(tmp_path, capsys):
    path = _records(tmp_path)
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("m on H100: 4 samples of 4 problems")  # the per-model summary comes first
    start = next(i for i, line in enumerate(lines) if line.startswith("problem "))
    header = lines[start].split()
    assert (
        header[:7] == ["problem", "model", "sample", "split", "ran", "on", "status"]
        and "speedup" in header
        and "SOL" in header
    )
    row = {line.split()[0]: line for line in lines[start + 1 : start + 5]}
    assert "2.000x" in row["level1/23_Softmax"] and "42.0%" in row["level1/23_Softmax"]
    assert "n/a on CPU" in row["level1/26_GELU_"] and "0.000" not in row["level1/26_GELU_"]
    assert re.search(r"incorrect\s+correctness\s+seed42: max abs error 0.5", row["level1/40_LayerNorm"])
    assert "second line" not in out
    assert re.search(r"failed\s+import\s+SyntaxError: expected ':'", row["level1/1_Square_matrix_multiplication_"])
    assert "4 record(s): 2 correct, 1 incorrect, 1 failed" in out
    assert "tests the machinery" in out


def test_report_of_a_missing_file_is_usage(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.parquet")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_report_html_is_self_contained(tmp_path, capsys):
    page = tmp_path / "report.html"
    assert main(["report", str(_records(tmp_path)), "--html", str(page)]) == 0
    text = page.read_text()
    assert text.count("<tr class=") == 4 and 'id="leaderboard"' in text
    assert text.count('src="data:image/png;base64,') >= 2  # fast_p per model, speedup by level
    assert not re.search(r'(src|href)="(https?:|//|file:)', text)  # nothing fetched from elsewhere
    assert "SyntaxError: expected &#39;:&#39;" in text and "n/a on CPU" in text


def _browser() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _png_rows(path: Path) -> tuple[int, int, int, list[bytes]]:
    """(width, height, channels, raw scanlines) of an 8-bit RGB(A) PNG, with the filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def _render(page: Path, tmp_path: Path) -> tuple[str, Path]:
    """(the DOM as the browser parsed it, a 1200x1400 screenshot) of `page` in headless Chromium."""
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    shot = page.with_suffix(".png")
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return dom, shot


def _drawn(shot: Path, coloured_rows: int = 20) -> None:
    width, height, channels, rows = _png_rows(shot)
    assert (width, height) == (1200, 1400)
    # The page is drawn: text rows near the top, and the figures (wide runs of colour) below the tables.
    inked = [y for y, row in enumerate(rows) if sum(v < 200 for v in row) > 30]
    assert inked and inked[0] < 100 and len(inked) > 200
    coloured = [
        y for y, row in enumerate(rows) if any(abs(row[i] - row[i + 2]) > 60 for i in range(0, len(row) - 2, channels))
    ]
    assert len(coloured) > coloured_rows  # the curves and boxes of the figures (blue), not only black text


@pytest.mark.slow
def test_report_html_renders_in_a_headless_browser(tmp_path, capsys):
    page = tmp_path / "report.html"
    assert main(["report", str(_records(tmp_path)), "--html", str(page)]) == 0
    dom, shot = _render(page, tmp_path)
    assert dom.count("<tr class=") == 4 and "seed42: max abs error 0.5" in dom  # what the browser parsed
    _drawn(shot)


def _cells(dom: str, table_id: str) -> list[str]:
    part = dom[dom.index(f'id="{table_id}"') :]
    return re.findall(r"<td[^>]*>([^<]*)</td>", part[: part.index("</table>")])


@pytest.mark.slow
def test_report_html_of_cpu_demo_records_shows_na_in_a_browser(tmp_path, capsys):
    """Issue 29, point 1: the demo's CPU records, as a browser shows them: n/a wherever no
    speedup exists, the note that they count for correctness only."""
    from tests.runs.test_report_truth import cpu_records

    page = tmp_path / "cpu_demo.html"
    assert main(["report", str(cpu_records(tmp_path)), "--html", str(page)]) == 0
    dom, shot = _render(page, tmp_path)
    records = _cells(dom, "records")
    assert records.count("n/a on CPU") == 3 and records.count("n/a") == 3  # speedup, SOL
    board = _cells(dom, "leaderboard")
    assert "0" not in board and all(c not in board for c in ("NaN", "nan", "-"))
    assert board.count("n/a") >= 6  # geomean, fast_1, fast_1.5, fast_2, mean and median SOL
    assert "count for correctness only" in dom
    _drawn(shot, coloured_rows=5)


@pytest.mark.slow
def test_report_html_of_the_runs_fixture_flags_in_a_browser(tmp_path, capsys):
    """Issue 29, point 2: the published-schema fixture: SOL on every timed row, the
    faster-than-light row flagged with its reason."""
    from tests.paths import PUBLISHED

    page = tmp_path / "runs_fixture.html"
    assert main(["report", str(PUBLISHED / "results.csv"), "--html", str(page)]) == 0
    dom, shot = _render(page, tmp_path)
    assert "1483.9%" in _cells(dom, "records") and "faster than physically possible" in dom
    assert dom.count('class="flags"') >= 1 and "faster_than_light" in dom
    _drawn(shot)
