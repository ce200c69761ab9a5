"""The dataset card (`README.md`) of the Hub folder: YAML front matter and the body.

Owns the card's wording and the translation of the Parquet schema into the `dataset_info.features`
YAML that `datasets` reads. The front matter maps each split to its Parquet file (`configs`), so
`load_dataset` and the Hub viewer read the folder without any loading script. Rendering is a pure
function of its arguments, so the card is byte-identical from one build to the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

# Where each split lives inside the dataset folder (and the Hub repo); hub writes and reads it there.
DATA_DIR = "data"


def split_file(split: str) -> str:
    """The split's Parquet file, relative to the dataset folder."""
    return f"{DATA_DIR}/{split}.parquet"


LICENSE = "mit"
TAGS = ("code", "gpu", "cuda", "triton", "kernels", "benchmark", "pytorch")
# The Hub's task taxonomy: a problem is a prompt whose answer is generated code.
TASK_CATEGORIES = ("text-generation",)
RUNS_REPO_ID = "Infatoshi/kernelbench-v3-runs"
KERNELBENCH_URL = "https://github.com/ScalingIntelligence/KernelBench"
KERNELBENCH_PAPER = "https://arxiv.org/abs/2502.10517"

COLUMN_DOCS: dict[str, str] = {
    "problem_id": "`<category>/<file stem>`, e.g. `level1/40_LayerNorm`; unique within a split",
    "name": "file stem, e.g. `40_LayerNorm`",
    "file_name": "file name with `.py`, as the runs dataset's `problem` column writes it",
    "category": "source folder: level1-4, graphics, tile_specialized or cutile",
    "level": "difficulty level (int); the folder's number, or the file's *_LEVEL constant",
    "op_type": "the file's `OP_TYPE`",
    "supported_precisions": "the file's `SUPPORTED_PRECISIONS`",
    "hardware_required": "the file's `HARDWARE_REQUIRED` (metadata only: it does not select splits)",
    "gpus": "every split this problem is in",
    "code": "the complete problem file: `Model`, `get_inputs()`, `get_init_inputs()`, constants",
    "sha256": "SHA-256 of `code` (UTF-8); a row whose code does not match is refused",
    "init_inputs": "JSON of `get_init_inputs()` (tuples as lists; `json.loads` it); informational, "
    "the code is authoritative. A string, not a typed list: see below",
    "input_specs": "one entry per `get_inputs()` element: `kind` (`tensor` or a Python type), "
    "`shape` and `dtype` for tensors, JSON `value` otherwise",
    "output_spec": "`shape` and `dtype` of the forward's output at default sizes (null: see `null_reason`)",
    "flops": "FLOPs of one forward at default sizes (multiply-add = 2)",
    "bytes": "minimal bytes moved: every input, parameter and buffer read once, the output written once",
    "null_reason": "why `output_spec`, `flops` or `bytes` is null in this row; null when none is",
    "prompt": "the task prompt for this problem on this split's GPU (kernelbench_v3.prompts, default template)",
}

SPLIT_DOCS = {
    "rtx3090": "level1, level2, level3, level4 (without `9_FP4_BlockScaled_Matmul.py`), graphics",
    "h100": "level1, level2, level3, level4 (without `9_FP4_BlockScaled_Matmul.py`), tile_specialized",
    "b200": "level1, level2, level3, level4, tile_specialized, cutile",
}


def feature_yaml(dtype: pa.DataType) -> dict[str, Any]:
    """One column type as the `datasets` YAML feature fragment (`dtype:` / `list:` / `struct:`)."""
    if pa.types.is_list(dtype):
        inner = feature_yaml(dtype.value_type)
        return {"list": inner["dtype"] if set(inner) == {"dtype"} else _unwrap(inner)}
    if pa.types.is_struct(dtype):
        return {"struct": [{"name": f.name, **feature_yaml(f.type)} for f in dtype]}
    if pa.types.is_string(dtype):
        return {"dtype": "string"}
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype):
        return {"dtype": "bool" if pa.types.is_boolean(dtype) else str(dtype)}
    raise TypeError(f"no datasets feature for arrow type {dtype}")


def _unwrap(fragment: dict[str, Any]) -> Any:
    # A list of structs is written `list: [ {name, dtype}, ... ]`, of lists `list: {list: ...}`.
    return fragment["struct"] if "struct" in fragment else fragment


def front_matter(
    counts: Mapping[str, int],
    num_bytes: Mapping[str, int],
    schema: pa.Schema,
    split_files: Mapping[str, str],
) -> dict[str, Any]:
    """The YAML header. `num_bytes` is each split's Arrow size (what `datasets` records)."""
    return {
        "license": LICENSE,
        "pretty_name": "KernelBench-v3 problems",
        "language": ["en"],
        "task_categories": list(TASK_CATEGORIES),
        "tags": list(TAGS),
        "size_categories": ["n<1K"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": split_files[s]} for s in counts],
            }
        ],
        "dataset_info": {
            "features": [{"name": f.name, **feature_yaml(f.type)} for f in schema],
            "splits": [{"name": s, "num_bytes": num_bytes[s], "num_examples": n} for s, n in counts.items()],
            "dataset_size": sum(num_bytes.values()),
        },
    }


def _null_notes(tables: Mapping[str, pa.Table]) -> list[str]:
    seen: dict[str, str] = {}
    for table in tables.values():
        ids = table.column("problem_id").to_pylist()
        for pid, reason in zip(ids, table.column("null_reason").to_pylist()):
            if reason:
                seen.setdefault(pid, reason)
    return [f"- `{pid}`: {reason}" for pid, reason in seen.items()]


def render_card(tables: Mapping[str, pa.Table]) -> str:
    """The whole README.md for the split tables (split -> Arrow table, in split order)."""
    import yaml

    counts = {s: t.num_rows for s, t in tables.items()}
    num_bytes = {s: t.nbytes for s, t in tables.items()}
    schema = next(iter(tables.values())).schema
    meta = front_matter(counts, num_bytes, schema, {s: split_file(s) for s in tables})
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    columns = "\n".join(f"| `{f.name}` | {COLUMN_DOCS.get(f.name, '')} |" for f in schema)
    splits = "\n".join(f"| `{s}` | {n} | {SPLIT_DOCS.get(s, '')} |" for s, n in counts.items())
    notes = "\n".join(_null_notes(tables)) or "- none: every row has all its values."
    return f"---\n{header}---\n\n" + BODY.format(
        columns=columns,
        splits=splits,
        null_notes=notes,
        runs_repo=RUNS_REPO_ID,
        kernelbench_url=KERNELBENCH_URL,
        paper=KERNELBENCH_PAPER,
    )


BODY = """\
# KernelBench-v3 problems

The problems of KernelBench-v3, a benchmark of GPU kernel writing: each row is one PyTorch
reference problem (a `Model`, `get_inputs()` and `get_init_inputs()`), and a solution is a file
defining a faster `Model` (the v3 convention; `ModelNew`, the original KernelBench name, is also
accepted) computing the same function on the split's GPU.

```python
from datasets import load_dataset

h100 = load_dataset("Infatoshi/kernelbench-v3-problems", split="h100")
level1 = h100.filter(lambda row: row["category"] == "level1")   # one level of a split
```

Published results of models on these problems (2071 runs, with the winning solutions) are in
the runs dataset [`{runs_repo}`](https://huggingface.co/datasets/{runs_repo}). The
benchmark builds on KernelBench ([paper]({paper}), [harness]({kernelbench_url})); the
evaluator for this version is the `kernelbench-v3` Python package (the `kbv3` command), whose
repository also builds this folder.

## How to evaluate

Install the `kernelbench-v3` package (from its repository: `pip install .`; the problem files
travel with it, no checkout needed), then:

```bash
kbv3 ls --split h100                                       # the problems of a split
kbv3 prompts --split h100 --out prompts.jsonl              # one prompt per problem for a model
kbv3 extract response.md --out solution.py                 # the solution out of a model's answer
kbv3 eval --problem level1/23_Softmax --solution solution.py --gpu h100   # one solution, isolated
kbv3 eval-batch solutions/ --split h100 --out results.parquet             # a folder, every GPU
kbv3 runs summary --source results.parquet                 # correct/total, fast_p, speedups
```

`kbv3 eval` runs on the GPU when there is one (`--device cpu` uses the Triton interpreter at
reduced sizes) and exits 0 when the solution is correct, 1 when it is not, 2 on a usage error.

## Splits and configs

One split per GPU. Membership is by source folder plus an exclude list, exactly as the original
harness's hardware targets choose problems; `hardware_required` never selects.

| split | rows | folders |
|---|---|---|
{splits}

There is one config (`default`) whose splits are the GPUs, and no per-level config: a config
can only choose files, not rows, so `load_dataset(path, "level1")` would need a second copy of
every row in per-level files, kept in step with the per-GPU ones; the published runs and the
leaderboard are per GPU. A level (or any category) is a `filter` on the `category` column, as
above, or on `level` for the difficulty number (graphics and tile-specialized problems carry
their own).

The Apple-Metal problems of the original repository (its `m4max` target) are **not** published
here, and no second config for them is planned: this dataset covers the three NVIDIA targets
that the published runs measured, and the Metal problems need a Metal toolchain and a different
harness that nothing in this project runs.

## Columns

| column | meaning |
|---|---|
{columns}

Sizes, specs and roofline figures are at each problem's default sizes. `flops`/`bytes` come from
the roofline table of the `kernelbench-v3` package (`kernelbench_v3.hardware.roofline.DEFAULT_ROOFLINE`;
a problem outside that table is estimated with `torch.utils.flop_counter` on meta tensors). The
speed-of-light time on a GPU is `max(flops / peak, bytes / bandwidth)`, with the peak rates and
bandwidths (and their sources) in `kernelbench_v3.hardware.gpus`; `kernelbench_v3.hardware.roofline.speed_of_light_ms`
computes it.

`init_inputs` is a JSON string rather than a typed list because the constructor arguments of
one problem mix types: integers with floats, booleans and shapes (`[3, 16, 3, 2.0, [16, 1, 1],
2]`), and an Arrow list (hence a `datasets` `Sequence`) holds a single element type, with no
union type to fall back on. Casting everything to float would lose the integer shapes and
channel counts the constructor needs. `json.loads(row["init_inputs"])` gives the list back
(tuples as lists), and the `code` column stays the authority.

### Null values

`input_specs` and `output_spec` are computed by running `get_inputs()` and the forward on
PyTorch's meta device, which allocates nothing. A forward that needs real data (`.item()`, a
data-dependent branch, an op without a meta kernel) cannot run there, so its `output_spec` is
null rather than guessed. Rows with a null value:

{null_notes}

## Scoring

A solution runs on the split's GPU next to the reference (the reference in `eval()` mode under
`torch.no_grad()`; the solution gets the reference's state dict). It is correct when, for each
of the seeds 42, 123, 456, 789 and 1337 (the generator is seeded before `get_inputs()`), its
output is within tolerance of the reference's and has no NaN/Inf, and two runs on the same inputs
give bit-identical output. Performance is `speedup = reference time / solution time`, timed on
inputs drawn with seed 2026. Tolerance rules of the `kernelbench-v3` evaluator: `v3` (its
default) is `torch.allclose(out, ref, atol=1e-2, rtol=1e-2)`; `published` is the original
harness's `max|ref - sol| < atol + rtol * max|ref|` with the tolerance of the first tensor input's
precision (fp32 1e-3/1e-3, fp16/bf16 1e-2/1e-2, fp8 0.1/0.05, fp4 0.5/0.1); `strict` calibrates
the tolerance from the reference's own error against float64.

## Turning a row into a running model

`code` is the whole problem file. Write it to a `.py` file and import it (tracebacks and
`inspect` need a real file), or let the package do it; it checks `sha256` first and refuses
altered code:

```python
from kernelbench_v3.dataset.hub import instantiate_row, load_problems, module_from_row

row = load_problems("h100", "Infatoshi/kernelbench-v3-problems")[0]
module = module_from_row(row)                       # the imported problem file
inst = instantiate_row(row, device="cuda", seed=42)  # Model(*get_init_inputs()).eval() + get_inputs()
out = inst.run()
small = instantiate_row(row, "cpu", 0, sizes=module.REDUCED_SIZES)  # CPU-sized shapes
```

The model is built right after `torch.manual_seed(seed)` and the inputs are drawn after seeding
again, so the same row, seed and sizes give bit-identical tensors to importing the problem file.

## Citation

KernelBench, on which this benchmark is built:

```bibtex
@misc{{ouyang2025kernelbench,
  title         = {{KernelBench: Can LLMs Write Efficient GPU Kernels?}},
  author        = {{Ouyang, Anne and Guo, Simon and Arora, Simran and Zhang, Alex L. and Hu, William and R{{\\'e}}, Christopher and Mirhoseini, Azalia}},
  year          = {{2025}},
  eprint        = {{2502.10517}},
  archivePrefix = {{arXiv}},
  url           = {{{paper}}}
}}
```

This dataset:

```bibtex
@misc{{kernelbench_v3_2026,
  title        = {{KernelBench-v3: GPU kernel problems as a Hugging Face dataset}},
  author       = {{Infatoshi}},
  year         = {{2026}},
  howpublished = {{\\url{{https://huggingface.co/datasets/Infatoshi/kernelbench-v3-problems}}}},
  note         = {{Results: \\url{{https://huggingface.co/datasets/{runs_repo}}}}}
}}
```

## How this folder is built

Datasets 4 and later run no loading scripts, so this repository holds plain Parquet files
(`data/<split>.parquet`) and this card; `loading_script.py` in the kernelbench-v3 repository is
the build step that wrote them (same as `kbv3 build OUT_DIR`). The build is deterministic: the
same problem files give byte-identical Parquet files and card.
"""
