"""Extracting the solution file from model responses (kernelbench_v3.prompts.extract, `kbv3 extract`)."""

from __future__ import annotations

import ast

import pytest

from kernelbench_v3.cli.main import main
from kernelbench_v3.prompts.extract import ExtractionError, code_blocks, extract_file, extract_solution

SOLUTION = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
"""

REALISTIC = f"""I'll start by looking at the reference: it is a single ReLU, so it is memory-bound.

First, a quick check of the shapes:

```bash
python -c "import torch; print(torch.__version__)"
```

A helper I considered first:

```python
def grid(n, block):
    return (n + block - 1) // block
```

Here is a first draft:

```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)  # draft
```

And the final solution:

```python
{SOLUTION}```

To use it:

```python
model = Model()
out = model(torch.randn(4, 4))
```

It should be about 1.1x faster.
"""


def test_picks_last_block_defining_model_among_several():
    solution = extract_solution(REALISTIC)
    assert solution.code == SOLUTION
    assert solution.class_name == "Model"
    assert solution.block_count == 5
    assert REALISTIC.splitlines()[solution.line - 1] == "```python"


def test_code_blocks_lists_every_block_with_its_label():
    blocks = code_blocks(REALISTIC)
    assert [b.label for b in blocks] == ["bash", "python", "python", "python", "python"]
    assert all(b.closed for b in blocks)


def test_no_block_at_all_is_a_clear_error():
    with pytest.raises(ExtractionError, match="no fenced code block in the response"):
        extract_solution("Sorry, I cannot write a faster kernel for this problem.\n" + SOLUTION)


def test_blocks_without_model_are_a_clear_error():
    response = "```python\ndef helper():\n    return 1\n```\n\n```cpp\nclass Model { };\n```\n"
    with pytest.raises(ExtractionError) as info:
        extract_solution(response)
    message = str(info.value)
    assert "no fenced Python block defining `class Model`" in message
    assert "2 fenced block(s), 1 of them Python" in message
    assert "cpp" in message


def test_model_in_a_non_python_block_is_not_taken():
    response = f"```python\n{SOLUTION}```\n\n```cuda\nclass Model {{}};  // C++ notes\n```\n"
    assert extract_solution(response).code == SOLUTION


@pytest.mark.parametrize(
    "opening, closing",
    [
        ("```py", "```"),
        ("```Python", "```"),
        ("```python3", "```"),
        ("```", "```"),
        ("~~~python", "~~~"),
        ("~~~", "~~~~"),
        ("````python", "````"),
        ("```python title=solution.py", "```"),
    ],
)
def test_fence_kinds(opening, closing):
    response = f"Solution:\n\n{opening}\n{SOLUTION}{closing}\n\nDone."
    assert extract_solution(response).code == SOLUTION


def test_indented_fence_in_a_list_item_is_dedented():
    indented = "".join(f"  {line}" if line.strip() else line for line in SOLUTION.splitlines(True))
    response = f"1. The solution:\n\n  ```python\n{indented}  ```\n"
    solution = extract_solution(response)
    assert solution.code == SOLUTION
    ast.parse(solution.code)


def test_backticks_inside_strings_do_not_cut_the_file():
    code = (
        'import torch.nn as nn\n\nHELP = "wrap code in ```python fences"\n'
        'DOC = """\nExample:\n```\nx = 1\n```\n"""\n\n\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    ast.parse(code)
    response = f"Here it is:\n\n```python\n{code}```\n\nThat is all.\n"
    solution = extract_solution(response)
    assert solution.code == code


def test_longer_outer_fence_holds_inner_fences():
    code = 'import torch.nn as nn\n\nNOTE = """\n```\n"""\n\n\nclass Model(nn.Module):\n    pass\n'
    response = f"`````python\n{code}`````\n"
    assert extract_solution(response).code == code


def test_model_new_is_accepted_and_reported():
    code = SOLUTION.replace("class Model(", "class ModelNew(")
    solution = extract_solution(f"```python\n{code}```")
    assert solution.class_name == "ModelNew"
    assert solution.code == code


def test_class_name_must_match_exactly():
    code = SOLUTION.replace("class Model(", "class ModelFast(")
    with pytest.raises(ExtractionError):
        extract_solution(f"```python\n{code}```")


def test_truncated_response_with_unclosed_fence():
    response = f"Final answer:\n```python\n{SOLUTION}"
    solution = extract_solution(response)
    assert solution.code == SOLUTION
    assert not code_blocks(response)[0].closed


def test_windows_line_endings():
    response = f"```python\n{SOLUTION}```\n".replace("\n", "\r\n")
    assert extract_solution(response).code == SOLUTION


def test_extract_file_writes_the_solution(tmp_path):
    response = tmp_path / "response.md"
    response.write_text(REALISTIC, encoding="utf-8")
    out = tmp_path / "out" / "solution.py"
    solution = extract_file(response, out)
    assert out.read_text(encoding="utf-8") == SOLUTION == solution.code


def test_cli_extract(tmp_path, capsys):
    response = tmp_path / "response.md"
    response.write_text(REALISTIC, encoding="utf-8")
    out = tmp_path / "solution.py"
    assert main(["extract", str(response), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == SOLUTION
    assert "class Model" in capsys.readouterr().out


def test_cli_extract_failure_names_the_file_and_writes_nothing(tmp_path, capsys):
    response = tmp_path / "response.md"
    response.write_text("I could not find a faster approach.", encoding="utf-8")
    out = tmp_path / "solution.py"
    assert main(["extract", str(response), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert str(response) in err and "no fenced code block" in err
    assert not out.exists()
