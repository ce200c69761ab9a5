"""Prompts for model evaluators (kernelbench_v3.prompts, `kbv3 prompts`) and the honest path
prompt -> response -> extract -> evaluate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelbench_v3.catalog.problem import discover, get_problem
from kernelbench_v3.cli.main import main
from kernelbench_v3.hardware.gpus import get_gpu
from kernelbench_v3.prompts import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    ROW_FIELDS,
    TEMPLATES_DIR,
    TemplateError,
    prompt_rows,
    render,
    to_messages,
    write_jsonl,
)
from kernelbench_v3.prompts.extract import extract_solution
from kernelbench_v3.vocab import SPLITS

# Phrases of each rule the evaluator enforces, as the default template states them.
RULE_PHRASES = (
    "the reference's constructor signature",
    "parameters and buffers under the same names and shapes",
    "The weights load strictly",
    "the same shape and dtype as the reference's output",
    f"torch.allclose(out, ref, atol={DEFAULT_ATOL}, rtol={DEFAULT_RTOL})",
    "A stricter mode",
    "random seeds, on stress inputs",
    "do not hard-code sizes",
    "another set of sizes",
    "A custom kernel must actually run, and do the main work",
    "No library GEMM, convolution or attention",
    "body may use only `triton.language`",
    "at least 50% of your forward's device time",
    "Every timed call, first to last, has the same chance of being judged exactly as a correctness case",
    "queued behind a gate the evaluator opens",
    "running on the GPU while the evaluator writes the inputs",
    "cannot be told from a call armed on several streams waiting its turn, the time is reported as unresolved",
    "times every call of your forward on its own, by its own clock",
    "clears the L2 cache",
    "beats the GPU's roofline is never scored",
    "runs in a sandboxed process",
    "no monkeypatching of modules",
    "No precision downcast",
    "No caching",
    "side streams are allowed inside the forward if every one is joined back",
    "The output is copied the moment the call signals completion, and that copy is what is judged",
    "reported as unresolved, not as a number",
    "Do not modify the inputs",
    "do not change global PyTorch state",
    'torch.compile(mode="reduce-overhead")',  # the score's baseline
    "Only a correct solution scores",
    "one fenced Python block",
)


def _gpu_facts(split: str) -> list[str]:
    """The GPU facts a prompt for `split` must state, read from the GPU table directly."""
    spec = get_gpu(split)
    major, minor = spec.compute_capability
    return [
        spec.name,
        spec.architecture,
        f"compute capability {major}.{minor}",
        f"sm_{major}{minor}",
        f"{spec.sm_count} SMs",
        f"{int(spec.memory_gb)} GB",
        f"{int(spec.memory_bandwidth_gbs)} GB/s",
        f"L2 cache {int(spec.l2_cache_mb)} MB",
        f"fp32 {spec.peak_tflops['fp32']}",
    ]


@pytest.fixture(scope="module")
def prompt_files(tmp_path_factory) -> dict[str, Path]:
    """The JSONL prompt file of every split, written once for the module."""
    folder = tmp_path_factory.mktemp("prompts")
    files = {}
    for split in SPLITS:
        files[split] = folder / f"{split}.jsonl"
        assert write_jsonl(prompt_rows(split), files[split]) == len(discover(split=split))
    return files


@pytest.mark.parametrize("split", SPLITS)
def test_every_problem_of_every_split_has_a_complete_prompt(prompt_files, split):
    rows = [json.loads(line) for line in prompt_files[split].read_text(encoding="utf-8").splitlines()]
    problems = discover(split=split)
    assert [r["problem_id"] for r in rows] == [p.problem_id for p in problems]
    spec = get_gpu(split)
    for row, problem in zip(rows, problems):
        assert tuple(row) == ROW_FIELDS and row["gpu"] == split
        assert [m["role"] for m in row["messages"]] == ["system", "user"]
        text = row["prompt"]
        assert text == "\n\n".join(m["content"] for m in row["messages"]) + "\n"
        where = f"{split}/{problem.problem_id}"
        assert problem.source.strip() in row["messages"][1]["content"], f"{where}: source not in full"
        for fact in _gpu_facts(split):
            assert fact in text, f"{where}: GPU fact {fact!r} missing"
        for precision in problem.supported_precisions:
            peak = spec.peak_tflops.get(precision)
            expected = f"{precision} {peak}" if peak is not None else f"{precision} none (no hardware path)"
            assert expected in text, f"{where}: peak {expected!r} missing"
        for phrase in RULE_PHRASES:
            assert phrase in text, f"{where}: rule {phrase!r} missing"
        assert "- Inputs (`get_inputs()` at the default sizes): " in text, f"{where}: no input specs"
        assert "## Example" not in text  # one-shot is opt-in


def test_toolchains_follow_gpu_and_category(prompt_files):
    def toolchain_section(split, problem_id):
        for line in prompt_files[split].read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["problem_id"] == problem_id:
                return row["prompt"].split("## Allowed toolchains")[1].split("## Rules")[0]
        raise AssertionError(f"{problem_id} not in {split}")

    for split in SPLITS:
        plain = toolchain_section(split, "level1/23_Softmax")
        assert "load_inline" in plain and "Triton" in plain
        assert "CUTLASS" not in plain and "cuTile" not in plain
    for split in ("h100", "b200"):
        tiles = toolchain_section(split, "tile_specialized/gemm_bf16")
        assert "CUTLASS / CuTe" in tiles and "cuTile" not in tiles and "Triton" in tiles
    cutile = toolchain_section("b200", "cutile/persistent_gemm")
    assert cutile.strip().startswith("- cuTile") and "ct.launch" in cutile
    assert "CUTLASS" not in toolchain_section("rtx3090", "graphics/bloom")


def test_facts_of_one_problem_are_right():
    text = render(get_problem("level1/40_LayerNorm"), "h100")
    assert "Constructor: `Model(normalized_shape: tuple)`" in text
    assert "float32 tensor of shape (16, 64, 256, 256)" in text
    assert "- Output: float32 tensor of shape (16, 64, 256, 256)." in text
    assert "`batch_size = 16`" in text
    # 536,870,912 FLOP and 570,425,344 B at 3350 GB/s: memory-bound, 0.1703 ms.
    assert "0.537 GFLOP" in text and "570.4 MB" in text and "about 0.1703 ms" in text


def test_rtx3090_states_missing_fp8_path():
    text = render(get_problem("level1/2_Standard_matrix_multiplication_"), "rtx3090")
    assert "fp8 none (no hardware path)" in text and "fp4 none (no hardware path)" in text


def test_problem_outside_the_split_is_refused():
    with pytest.raises(ValueError, match="not in the 'h100' split"):
        render(get_problem("graphics/bloom"), "h100")


def test_one_shot_example_is_included_on_request():
    problem = get_problem("level1/26_GELU_")
    text = render(problem, "b200", one_shot=True)
    reference = (TEMPLATES_DIR / "one_shot_reference.py").read_text(encoding="utf-8")
    solution = (TEMPLATES_DIR / "one_shot_solution.py").read_text(encoding="utf-8")
    assert "## Example" in text
    assert reference.strip() in text and solution.strip() in text
    # A prompt with an example still hands the model the problem's own source first.
    assert text.index(problem.source.strip()) < text.index("## Example")


def test_user_template_by_path(tmp_path):
    template = tmp_path / "mine.j2"
    template.write_text(
        "{% block system %}Be fast.{% endblock %}"
        "{% block user %}Optimise {{ problem.problem_id }} for {{ gpu.name }} "
        "(cc {{ gpu.compute_capability }}).{% endblock %}",
        encoding="utf-8",
    )
    messages = to_messages(get_problem("level1/23_Softmax"), "b200", template=template)
    assert messages == [
        {"role": "system", "content": "Be fast."},
        {"role": "user", "content": "Optimise level1/23_Softmax for NVIDIA B200 (cc 10.0)."},
    ]


def test_template_without_blocks_is_one_user_message(tmp_path):
    template = tmp_path / "plain.txt"
    template.write_text("Write a kernel for:\n{{ problem.source }}\n", encoding="utf-8")
    problem = get_problem("level1/23_Softmax")
    messages = to_messages(problem, "h100", template=str(template))
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"] == "Write a kernel for:\n" + problem.source.strip()


def test_template_errors_name_the_template(tmp_path):
    problem = get_problem("level1/23_Softmax")
    with pytest.raises(TemplateError, match="neither a bundled template"):
        render(problem, "h100", template=str(tmp_path / "missing.j2"))
    typo = tmp_path / "typo.j2"
    typo.write_text("{{ gpu.nmae }}", encoding="utf-8")
    with pytest.raises(TemplateError, match="typo.j2"):
        render(problem, "h100", template=typo)
    broken = tmp_path / "broken.j2"
    broken.write_text("{% block user %}never closed", encoding="utf-8")
    with pytest.raises(TemplateError, match="broken.j2"):
        render(problem, "h100", template=broken)


def test_fence_outgrows_backticks_in_the_source(tmp_path):
    folder = tmp_path / "problems" / "level1"
    folder.mkdir(parents=True)
    source = get_problem("level1/26_GELU_").source.replace(
        '"""Elementwise GELU', '"""Elementwise GELU (see ````python blocks)', 1
    )
    (folder / "1_Fenced.py").write_text(source, encoding="utf-8")
    problem = get_problem("level1/1_Fenced", root=tmp_path / "problems")
    text = render(problem, "h100")
    assert "`````python\n" + source.strip() + "\n`````" in text


def test_cli_prompts_options(tmp_path, capsys):
    template = tmp_path / "short.j2"
    template.write_text("{% block user %}{{ problem.problem_id }}{% endblock %}", encoding="utf-8")
    out = tmp_path / "short.jsonl"
    assert main(["prompts", "--split", "rtx3090", "--template", str(template), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["prompt"] for r in rows] == [p.problem_id + "\n" for p in discover(split="rtx3090")]
    assert "wrote 43 prompts" in capsys.readouterr().out

    out = tmp_path / "one_shot.jsonl"
    assert main(["prompts", "--split", "b200", "--one-shot", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 58 and all("## Example" in r["prompt"] for r in rows)

    assert main(["prompts", "--split", "h100", "--template", "nope", "--out", str(out)]) == 2
    assert "neither a bundled template" in capsys.readouterr().err


@pytest.mark.slow  # a fresh process importing `datasets`: over 2 s on its own
def test_jsonl_loads_with_datasets(prompt_files, tmp_path):
    """The files load with `datasets.load_dataset("json", ...)`, in a fresh offline process."""
    script = textwrap.dedent("""
        import json, sys
        import datasets
        out = {}
        for path in sys.argv[1:]:
            ds = datasets.load_dataset("json", data_files=path, split="train")
            out[path] = {"columns": ds.column_names, "rows": ds.to_list()}
        print(json.dumps(out))
    """)
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf_home"),
        HF_DATASETS_CACHE=str(tmp_path / "hf_datasets"),
    )
    paths = [str(prompt_files[s]) for s in SPLITS]
    result = subprocess.run(
        [sys.executable, "-c", script, *paths], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    for path in paths:
        expected = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
        assert loaded[path]["columns"] == list(ROW_FIELDS)
        assert loaded[path]["rows"] == expected


# ---------------------------------------------------------------------------------------------
# End to end: rendered prompt -> a hand-written response with a Triton solution -> extract ->
# evaluate on CPU (Triton interpreter) -> correct.

SOFTMAX_RESPONSE = """The reference is a row-wise softmax over the last dimension: memory-bound, so a single
pass per row that keeps the row in registers reads and writes each element once.

A quick sanity check of the shapes I used while thinking:

```python
rows, cols = x.shape
```

Here is the full solution:

```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_rows[(rows,)](x, out, cols, x.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(cols))
        return out
```

It launches one program per row and never materialises intermediate tensors.
"""


@pytest.mark.slow
def test_end_to_end_prompt_response_extract_evaluate(tmp_path):
    from kernelbench_v3.evaluate import EvalRequest, evaluate

    problem = get_problem("level1/23_Softmax")
    prompt = render(problem, "h100")
    assert problem.source.strip() in prompt
    response = tmp_path / "response.md"
    response.write_text(SOFTMAX_RESPONSE, encoding="utf-8")
    out = tmp_path / "solution.py"
    assert main(["extract", str(response), "--out", str(out)]) == 0
    record = evaluate(
        # Correctness only: CPU wall-clock timing of the Triton interpreter is no score.
        EvalRequest(
            problem.problem_id, out, gpu="h100", device="cpu", timeout_s=300, time_solution=False, baseline=False
        ),
        cache_dir=tmp_path / "cache",
    )
    assert record.correct, (record.status, record.error, record.check_details, record.log_tail)
    assert record.checks["custom_kernel"] == "pass" and record.triton_launches > 0
    assert record.checks["other_shape"] == "pass" and record.checks["stress"] == "pass"


@pytest.mark.slow
def test_one_shot_example_solution_is_correct(tmp_path):
    """The worked example the prompts show must itself pass the evaluator."""
    from kernelbench_v3.evaluate import EvalRequest, evaluate

    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    shutil.copy(TEMPLATES_DIR / "one_shot_reference.py", problems / "1_Bias_ReLU.py")
    text = render(get_problem("level1/23_Softmax"), "h100", one_shot=True)
    solution = tmp_path / "solution.py"
    solution.write_text(extract_solution(text.split("## Example")[1]).code, encoding="utf-8")
    record = evaluate(
        EvalRequest(
            "level1/1_Bias_ReLU", solution, gpu="h100", device="cpu", timeout_s=300, time_solution=False, baseline=False
        ),
        problems_dir=tmp_path / "problems",
        cache_dir=tmp_path / "cache",
    )
    assert record.correct, (record.status, record.error, record.check_details, record.log_tail)


def test_the_score_names_no_gpu_as_where_it_is_timed():
    """Issue 29, point 3: the evaluator times on the GPU it runs on (an H200, a CPU), so the
    prompt never claims the baseline is timed on the split's GPU."""
    text = " ".join(render(get_problem("level1/23_Softmax"), "h100").split())
    score = text[text.index("## Score") :].split("## Output format")[0]
    assert "timed on the NVIDIA" not in score
    assert "the one the evaluation runs on" in score and "H100" in score
