"""The workspace's walls: every path a file tool gets stays inside the folder, `reference.py` and
`README.md` are never written, and a refusal is an answer to the model, never an exception."""

from __future__ import annotations

import json
import os

import pytest

from kernelbench_v3.agent.tools import parse_call, run_file_tool
from kernelbench_v3.agent.workspace import MAX_FILE_BYTES, Workspace, WorkspaceError

REFERENCE = b"import torch\n\nclass Model(torch.nn.Module):\n    pass\n"


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "secret.txt").write_text("outside the workspace")
    return Workspace.create(tmp_path / "ws", REFERENCE, "# rules\n")


def tool(workspace, name, **arguments) -> str:
    return run_file_tool(workspace, parse_call({"id": "c", "name": name, "arguments": json.dumps(arguments)}))


@pytest.mark.parametrize(
    "path, expected",
    [
        ("../secret.txt", "leaves the workspace"),
        ("sub/../../secret.txt", "leaves the workspace"),
        ("/etc/passwd", "is outside the workspace"),
        ("~/.bashrc", "is outside the workspace"),
        ("a\\..\\..\\secret.txt", "no NUL or backslash"),
        ("", "must be a file name"),
    ],
)
def test_paths_that_leave_the_workspace_are_refused(workspace, path, expected):
    for answer in (
        tool(workspace, "read_file", path=path),
        tool(workspace, "write_file", path=path, content="x"),
        tool(workspace, "edit_file", path=path, old_str="a", new_str="b"),
    ):
        assert answer.startswith("error: ") and expected in answer, answer
    assert (workspace.root.parent / "secret.txt").read_text() == "outside the workspace"


def test_a_symlink_out_of_the_workspace_is_not_followed(workspace):
    os.symlink(workspace.root.parent / "secret.txt", workspace.root / "link.txt")
    assert tool(workspace, "read_file", path="link.txt") == "error: 'link.txt' resolves outside the workspace"
    assert tool(workspace, "write_file", path="link.txt", content="x").startswith("error: ")
    assert (workspace.root.parent / "secret.txt").read_text() == "outside the workspace"


@pytest.mark.parametrize("name", ["reference.py", "./reference.py", "README.md", "sub/./../README.md"])
def test_reference_and_readme_are_never_written(workspace, name):
    assert tool(workspace, "write_file", path=name, content="class Model: pass").startswith("error: ")
    assert tool(workspace, "edit_file", path=name, old_str="torch", new_str="numpy").startswith("error: ")
    assert (workspace.root / "reference.py").read_bytes() == REFERENCE
    assert (workspace.root / "README.md").read_text() == "# rules\n"


def test_the_file_tools_inside_the_workspace(workspace):
    assert tool(workspace, "read_file", path="reference.py") == REFERENCE.decode()
    assert tool(workspace, "write_file", path="solution.py", content="a = 1\nb = 2\n") == (
        "wrote solution.py (12 bytes, 2 lines)"
    )
    assert tool(workspace, "edit_file", path="solution.py", old_str="b = 2", new_str="b = 3") == (
        "edited solution.py at line 2 (12 bytes now)"
    )
    assert workspace.solution() == "a = 1\nb = 3\n"
    assert tool(workspace, "edit_file", path="solution.py", old_str="c", new_str="d") == (
        "error: `old_str` does not occur in solution.py; it must occur exactly once"
    )
    tool(workspace, "write_file", path="solution.py", content="x\nx\n")
    assert "occurs 2 times" in tool(workspace, "edit_file", path="solution.py", old_str="x", new_str="y")
    assert tool(workspace, "write_file", path="notes/plan.md", content="tile 128").startswith("wrote notes/plan.md")
    assert tool(workspace, "read_file", path=".") == "files: README.md, notes/plan.md, reference.py, solution.py"
    assert "no file 'nope.py'; the workspace holds: README.md" in tool(workspace, "read_file", path="nope.py")
    assert "more than a workspace file may hold" in tool(
        workspace, "write_file", path="solution.py", content="x" * (MAX_FILE_BYTES + 1)
    )


def test_a_refusal_is_a_workspace_error_with_the_answer(workspace):
    with pytest.raises(WorkspaceError, match="read only; write your solution to solution.py"):
        workspace.write("reference.py", "")
