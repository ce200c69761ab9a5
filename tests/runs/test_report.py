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
    assert lines[0].startswith("m: 4 samples over 4 problems")  # the per-model summary comes first
    start = next(i for i, line in enumerate(lines) if line.startswith("problem "))
    header = lines[start].split()
    assert header[:4] == ["problem", "model", "gpu", "status"] and "speedup" in header and "SOL" in header
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
    assert "SyntaxError: expected &#x27;:&#x27;" in text and "n/a on CPU" in text


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


@pytest.mark.slow
def test_report_html_renders_in_a_headless_browser(tmp_path, capsys):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    page = tmp_path / "report.html"
    assert main(["report", str(_records(tmp_path)), "--html", str(page)]) == 0
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
    assert dom.count("<tr class=") == 4 and "seed42: max abs error 0.5" in dom  # what the browser parsed
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    width, height, channels, rows = _png_rows(shot)
    assert (width, height) == (1200, 1400)
    # The page is drawn: text rows near the top, and the figures (wide runs of colour) below the tables.
    inked = [y for y, row in enumerate(rows) if sum(v < 200 for v in row) > 30]
    assert inked and inked[0] < 100 and len(inked) > 200
    coloured = [
        y for y, row in enumerate(rows) if any(abs(row[i] - row[i + 2]) > 60 for i in range(0, len(row) - 2, channels))
    ]
    assert len(coloured) > 20  # the curves and boxes of the figures (blue), not only black text
