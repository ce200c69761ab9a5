"""Triton's driver helper seeded by trusted code (`solution.triton_seed`): built once into a
folder of its own, all or nothing; a failed build is not retried; a solution process gets a copy
it may change without changing the seed."""

from __future__ import annotations

import textwrap

from kernelbench_v3.evaluate.solution import triton_seed

# What Triton's build leaves in TRITON_CACHE_DIR: a folder per key holding the module.
FAKE_BUILD = textwrap.dedent(
    """
    import os, pathlib
    key = pathlib.Path(os.environ["TRITON_CACHE_DIR"]) / "abc123"
    key.mkdir()
    (key / "cuda_utils.so").write_bytes(b"ELF helper")
    """
)
FAILING_BUILD = "import sys; sys.stderr.write('libcuda.so cannot found!'); sys.exit(1)"
NOTHING_BUILT = "pass"


def test_the_seed_is_built_once_and_then_found(tmp_path):
    folder = tmp_path / "triton-seed" / "triton-x-py311"
    assert triton_seed.ensure_seed(folder, FAKE_BUILD) == folder
    assert (folder / "abc123" / "cuda_utils.so").read_bytes() == b"ELF helper"
    # Found, not built again: a build that would fail is never run.
    assert triton_seed.ensure_seed(folder, FAILING_BUILD) == folder
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no half-built folder left


def test_a_failed_build_is_kept_with_its_reason_and_not_tried_again(tmp_path):
    folder = tmp_path / "triton-seed" / "triton-x-py311"
    assert triton_seed.ensure_seed(folder, FAILING_BUILD) is None
    failed = folder.parent / triton_seed.FAILED_NAME
    assert "libcuda.so cannot found" in failed.read_text()
    assert triton_seed.ensure_seed(folder, FAKE_BUILD) is None and not folder.exists()
    failed.unlink()  # deleting the note is how a user asks for another try
    assert triton_seed.ensure_seed(folder, FAKE_BUILD) == folder


def test_a_build_that_leaves_nothing_is_a_failure(tmp_path):
    folder = tmp_path / "seed"
    assert triton_seed.ensure_seed(folder, NOTHING_BUILT) is None
    assert "nothing built" in (tmp_path / triton_seed.FAILED_NAME).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [triton_seed.FAILED_NAME]


def test_a_solution_process_gets_a_copy_it_cannot_reach_the_seed_through(tmp_path):
    seed = triton_seed.ensure_seed(tmp_path / "seed", FAKE_BUILD)
    cache = tmp_path / "scratch" / "triton"
    cache.mkdir(parents=True)
    assert triton_seed.copy_seed(seed, cache)
    copied = cache / "abc123" / "cuda_utils.so"
    assert copied.read_bytes() == b"ELF helper"
    copied.write_bytes(b"the solution's own")  # what a solution writes stays its own
    assert (seed / "abc123" / "cuda_utils.so").read_bytes() == b"ELF helper"
    assert copied.stat().st_ino != (seed / "abc123" / "cuda_utils.so").stat().st_ino


def test_no_seed_means_triton_builds_as_before(tmp_path):
    assert not triton_seed.copy_seed(None, tmp_path)
    assert not triton_seed.seed_into(None, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_build_imports_nothing_from_the_callers_folder_or_pythonpath(tmp_path, monkeypatch):
    # The build runs unconfined: a module planted where the caller stands (a solution file
    # named after a package, say) or on PYTHONPATH must not be what it imports.
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "triton_helper_probe.py").write_text("raise SystemExit(0)  # would pass the build\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    folder = tmp_path / "seeds" / "seed"
    build = "import triton_helper_probe\n" + FAKE_BUILD
    assert triton_seed.ensure_seed(folder, build) is None
    assert "ModuleNotFoundError" in (folder.parent / triton_seed.FAILED_NAME).read_text()


def test_seeding_never_raises_in_a_solution_process(tmp_path, monkeypatch):
    def unreadable(*args, **kwargs):
        raise PermissionError("the cache root is not ours")

    monkeypatch.setattr(triton_seed, "ensure_seed", unreadable)
    assert triton_seed.seed_into(tmp_path / "seed", tmp_path / "cache") is False


def test_the_seed_folder_is_named_by_triton_and_python_under_the_cache_root(tmp_path, monkeypatch):
    import sys

    import triton

    monkeypatch.setenv("KBV3_CACHE_DIR", str(tmp_path))
    folder = triton_seed.seed_folder()
    assert folder is not None and folder.parent == tmp_path / "triton-seed"
    assert folder.name == f"triton-{triton.__version__}-py{sys.version_info.major}{sys.version_info.minor}"
