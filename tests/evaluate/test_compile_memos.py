"""What the warm parents compute for their forks (`evaluate.compile_memos`): Triton's hash of
itself, memoized, reaches a fork; what cannot be computed is named, never raised; nothing is
computed where Triton only interprets."""

from __future__ import annotations

import os

from kernelbench_v3.evaluate import compile_memos


def test_a_fork_inherits_the_hash_that_keys_tritons_cache(monkeypatch):
    # The zygote computes it once (0.3-1 s: a SHA-256 of libtriton); a forked solution process
    # finds it memoized instead of hashing again at its first compile.
    from triton.runtime.cache import triton_key

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    triton_key.cache_clear()
    missed = compile_memos.warm_triton()
    assert not [m for m in missed if m.startswith("triton_key")]
    pid = os.fork()
    if pid == 0:
        os._exit(0 if triton_key.cache_info().currsize == 1 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_warming_names_what_it_could_not_compute_and_never_raises(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def no_ldconfig() -> None:
        raise FileNotFoundError("/sbin/ldconfig")

    monkeypatch.setattr(compile_memos, "_triton_key", lambda: None)
    monkeypatch.setattr(compile_memos, "_libcuda_dirs", no_ldconfig)
    monkeypatch.setattr(compile_memos, "_ptxas", lambda: None)
    assert compile_memos.warm_triton() == ["libcuda_dirs: FileNotFoundError: /sbin/ldconfig"]


def test_nothing_is_warmed_where_triton_only_interprets(monkeypatch):
    def must_not_run() -> None:
        raise AssertionError("warmed on the CPU")

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(compile_memos, "_triton_key", must_not_run)
    assert compile_memos.warm_triton() == []
