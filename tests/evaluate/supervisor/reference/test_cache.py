"""The on-disk cache of the reference's costly by-products (evaluate/supervisor/reference/cache.py).

Hermetic: every test has its own cache folder. The reference is computed on CPU at small sizes.
What is checked: a second computation takes the profile, the second shape and the float64 runs
from the cache and gives the same facts; the cache holds no expected output; every element of
the key changes the key; a corrupted, truncated or foreign entry is ignored, recomputed and
replaced; concurrent writers leave one whole entry; the switch turns it off; and a second
`evaluate` of the same problem says it used the cache.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
import torch

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate.cases import plan_cases
from kernelbench_v3.evaluate.supervisor.reference import cache as reference_cache
from kernelbench_v3.evaluate.supervisor.reference import reference_run as reference
from kernelbench_v3.evaluate.supervisor.reference.cache import (
    CacheEntryError,
    ReferenceCache,
    cache_key,
    decode,
    encode,
    for_evaluation,
    key_fields,
)
from tests.evaluate.supervisor.reference.spy import Spy
from tests.paths import PROBLEMS, REPO

SEEDS = (42, 123, 456)
CASES = [
    ("level1/23_Softmax", {"batch_size": 4, "dim": 96}),
    ("level1/1_Square_matrix_multiplication_", {"N": 24}),
]


def _problem(problem_id):
    problem = get_problem(problem_id, PROBLEMS)
    return problem, problem.path.read_text(encoding="utf-8")


def _cache(root: Path, problem_id: str, sizes, plan) -> ReferenceCache:
    problem, source = _problem(problem_id)
    import hashlib

    sha = hashlib.sha256(source.encode()).hexdigest()
    return ReferenceCache(root, key_fields(sha, sizes, "cpu", plan, 2))


def _compute(problem_id, sizes, plan, cache):
    problem, source = _problem(problem_id)
    return reference.compute(problem, source, sizes, "cpu", plan, cache)


def _same_facts(a: reference.ReferenceRun, b: reference.ReferenceRun) -> None:
    assert a.order == b.order and a.precision == b.precision and a.notes == b.notes
    assert a.ops.keys() == b.ops.keys() and a.kernel_names == b.kernel_names
    assert a.matmul_flops == b.matmul_flops
    assert {k: s.sizes for k, s in a.shapes.items()} == {k: s.sizes for k, s in b.shapes.items()}
    for name in a.order:
        assert a.cases[name].entry == b.cases[name].entry, name
        assert a.cases[name].saved.keys() == b.cases[name].saved.keys(), name
        for key, tensor in a.cases[name].saved.items():
            assert torch.equal(tensor, b.cases[name].saved[key]), (name, key)
        for x, y in zip(a.cases[name].inputs, b.cases[name].inputs):
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


@pytest.mark.parametrize("problem_id,sizes", CASES)
def test_second_computation_comes_from_the_cache_with_the_same_facts(tmp_path, monkeypatch, problem_id, sizes):
    plan = plan_cases(SEEDS, other_shape=True)
    uncached = _compute(problem_id, sizes, plan, None)
    assert uncached.cached is None
    first = _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    assert first.cached is False
    _same_facts(first, uncached)

    f64 = Spy(reference.float64_reference)
    search = Spy(reference._choose_other_shape)
    monkeypatch.setattr(reference, "float64_reference", f64)
    monkeypatch.setattr(reference, "_choose_other_shape", search)
    from kernelbench_v3.evaluate import evidence

    recorder = Spy(evidence.OpRecorder)
    monkeypatch.setattr(evidence, "OpRecorder", recorder)
    second = _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    assert second.cached is True
    assert (f64.calls, search.calls, recorder.calls) == (0, 0, 0)  # no float64 run, no search, no profile
    _same_facts(second, uncached)
    assert any("residual64" in run.saved for run in second.cases.values())


def test_the_reference_runs_once_per_case(tmp_path, monkeypatch):
    """The first case takes the profiled pass's output; a miss adds only the FLOP count's pass
    (the CPU's, on copies of the inputs), a hit not even that."""
    problem_id, sizes = CASES[1]
    plan = plan_cases(SEEDS, other_shape=True)
    main_cases = sum(c.shape == "main" for c in plan)
    calls: list[int] = []
    build = reference._build

    def counted(*args, **kwargs):
        module, model = build(*args, **kwargs)
        if not calls:  # the main shape's model, built first (float64 copies are other modules)
            calls.append(0)
            model.register_forward_pre_hook(lambda m, _: calls.__setitem__(0, calls[0] + (m is model)))
        return module, model

    monkeypatch.setattr(reference, "_build", counted)
    cache = _cache(tmp_path, problem_id, sizes, plan)
    for use, cached, extra in ((None, None, 1), (cache, False, 1), (cache, True, 0)):
        calls.clear()
        run = _compute(problem_id, sizes, plan, use)
        assert run.cached is cached
        assert calls == [main_cases + extra], (cached, calls)


def test_where_float64_runs_are_cheap_they_are_made_every_time_and_never_cached(tmp_path, monkeypatch):
    """On a GPU (the policy stands in for one here) the float64 runs cost milliseconds, less than
    storing, reading and pairing them by hash: the cache keeps the profile and the second shape,
    no float64 fact or residual, and a second evaluation runs float64 again and hashes only the
    models' states (the key's check that the same weights were drawn), never a case's tensors."""
    problem_id, sizes = CASES[1]
    plan = plan_cases(SEEDS, other_shape=True)
    uncached = _compute(problem_id, sizes, plan, None)
    monkeypatch.setattr(reference, "caches_float64", lambda device: False)
    cache = _cache(tmp_path, problem_id, sizes, plan)
    assert _compute(problem_id, sizes, plan, cache).cached is False
    entry = decode(cache.path.read_bytes(), cache.fields)
    assert entry.tensors == {} and entry.meta["cases"] == {}

    f64, hashed = Spy(reference.float64_reference), Spy(reference_cache.digest)
    search = Spy(reference._choose_other_shape)
    monkeypatch.setattr(reference, "float64_reference", f64)
    monkeypatch.setattr(reference, "_choose_other_shape", search)
    monkeypatch.setattr(reference_cache, "digest", hashed)
    second = _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    assert second.cached is True  # what the cache keeps came from it
    float64_cases = sum(c.float64 for c in plan)
    assert (f64.calls, hashed.calls, search.calls) == (float64_cases, len(second.shapes), 0)
    _same_facts(second, uncached)


def test_the_cache_holds_no_expected_output(tmp_path):
    problem_id, sizes = CASES[0]
    plan = plan_cases(SEEDS, other_shape=True)
    cache = _cache(tmp_path, problem_id, sizes, plan)
    run = _compute(problem_id, sizes, plan, cache)
    data = cache.path.read_bytes()
    for case in run.cases.values():
        expected = case.saved["expected"].contiguous().view(-1)
        chunk = expected[: min(8, expected.numel())].numpy().tobytes()
        assert chunk not in data, case.case.name  # not even the first few values
    entry = decode(data, cache.fields)
    assert all(name.endswith("/residual64") for name in entry.tensors)


def test_every_key_element_changes_the_key(monkeypatch):
    plan = plan_cases(SEEDS, other_shape=True)
    base = dict(problem_sha256="a" * 64, sizes={"N": 8}, device="cpu", cases=plan, evaluator_version=2)
    key = cache_key(key_fields(**base))
    variants = [
        {"problem_sha256": "b" * 64},
        {"sizes": {"N": 9}},
        {"sizes": {}},
        {"cases": plan_cases((42, 123, 457), other_shape=True)},  # another seed
        {"cases": plan_cases(SEEDS, other_shape=False)},
        {"evaluator_version": 3},
    ]
    keys = {cache_key(key_fields(**{**base, **v})) for v in variants}
    assert key not in keys and len(keys) == len(variants)
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    assert cache_key(key_fields(**base)) != key
    monkeypatch.undo()
    monkeypatch.setattr("kernelbench_v3.evaluate.fingerprint.cpu_name", lambda: "another CPU")
    assert cache_key(key_fields(**base)) != key
    monkeypatch.undo()
    monkeypatch.setattr(reference_cache, "CACHE_VERSION", reference_cache.CACHE_VERSION + 1)
    assert cache_key(key_fields(**base)) != key
    monkeypatch.undo()
    assert cache_key(key_fields(**base)) == key


def test_cuda_key_names_the_gpu_and_its_tf32_settings(monkeypatch):
    base = dict(problem_sha256="a" * 64, sizes={}, device="cuda", cases=plan_cases(SEEDS, True), evaluator_version=2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "NVIDIA H100 80GB HBM3")
    h100 = key_fields(**base)
    assert h100["device_name"] == "NVIDIA H100 80GB HBM3"
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "NVIDIA B200")
    assert cache_key(key_fields(**base)) != cache_key(h100)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert cache_key(key_fields(**base)) != cache_key(h100) or h100["float32_matmul_precision"] == "high"


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    ["payload_byte", "header_byte", "truncated", "magic", "empty", "other_key"],
)
def test_a_damaged_entry_is_ignored_recomputed_and_replaced(tmp_path, monkeypatch, damage):
    problem_id, sizes = CASES[0]
    plan = plan_cases(SEEDS, other_shape=True)
    cache = _cache(tmp_path, problem_id, sizes, plan)
    good = _compute(problem_id, sizes, plan, cache)
    path = cache.path
    data = path.read_bytes()
    if damage == "payload_byte":
        _flip(path, len(data) - 3)  # inside a residual tensor
    elif damage == "header_byte":
        _flip(path, 40)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "magic":
        _flip(path, 0)
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a whole, valid entry of another key renamed to this one
        other = _cache(tmp_path / "other", problem_id, {"batch_size": 4, "dim": 64}, plan)
        _compute(problem_id, {"batch_size": 4, "dim": 64}, plan, other)
        path.write_bytes(other.path.read_bytes())
    probe = _cache(tmp_path, problem_id, sizes, plan)
    assert probe.load() is None
    f64 = Spy(reference.float64_reference)
    monkeypatch.setattr(reference, "float64_reference", f64)
    again = _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    assert again.cached is False and f64.calls > 0
    _same_facts(again, good)
    replaced = _cache(tmp_path, problem_id, sizes, plan).load()  # a whole entry again
    assert replaced is not None and replaced.meta["cases"] == decode(data, cache.fields).meta["cases"]


def test_decode_rejects_what_does_not_check_out():
    fields = {"k": 1}
    meta = {"ops": {}, "kernel_names": [], "states": {}, "cases": {}, "other_sizes": None, "matmul_flops": 0.0}
    data = encode(fields, meta, {"c/residual64": torch.arange(6, dtype=torch.float32).reshape(2, 3)})
    entry = decode(data, fields)
    assert torch.equal(entry.tensors["c/residual64"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    with pytest.raises(CacheEntryError):
        decode(data, {"k": 2})  # another key's fields
    with pytest.raises(CacheEntryError):
        decode(encode(fields, {"ops": {}}, {}), fields)  # meta without its fields
    with pytest.raises(CacheEntryError):
        decode(data[:-1], fields)


def test_a_recomputed_output_that_differs_is_not_paired_with_cached_float64_facts(tmp_path, monkeypatch):
    """A reference whose outputs change between runs (a nondeterministic kernel) gets the float64
    facts of its own outputs, never those cached for other bits."""
    problem_id, sizes = CASES[0]
    plan = plan_cases(SEEDS, other_shape=False)
    _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    real = reference_cache.digest
    monkeypatch.setattr(
        reference_cache, "digest", lambda values: real(values) + ("x" if len(values) == 1 else "")
    )  # every expected output "differs"
    f64 = Spy(reference.float64_reference)
    monkeypatch.setattr(reference, "float64_reference", f64)
    run = _compute(problem_id, sizes, plan, _cache(tmp_path, problem_id, sizes, plan))
    assert run.cached is False
    assert f64.calls == sum(1 for c in plan if c.float64)


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    fields = {"k": "concurrent"}
    cache = ReferenceCache(tmp_path, fields)
    errors: list[BaseException] = []
    seen: list[int] = []

    def write(i: int) -> None:
        try:
            for j in range(20):
                meta = {
                    "ops": {"w": [i, j]},
                    "kernel_names": [],
                    "states": {},
                    "cases": {},
                    "other_sizes": None,
                    "matmul_flops": 0.0,
                }
                cache.store(meta, {"x/residual64": torch.full((256,), float(i))})
                hit = ReferenceCache(tmp_path, fields).load()
                assert hit is not None  # a reader never sees a torn file
                seen.append(int(hit.tensors["x/residual64"][0]))
                assert hit.meta["ops"]["w"][0] == seen[-1]  # header and payload of one writer
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.load() is not None
    assert not [p for p in cache.path.parent.iterdir() if p.name.endswith(".tmp")]  # no temporaries left


def test_the_switch_turns_the_cache_off(tmp_path, monkeypatch):
    plan = plan_cases(SEEDS, other_shape=True)
    assert for_evaluation(tmp_path, key_fields("a" * 64, {}, "cpu", plan, 2)) is not None
    monkeypatch.setenv("KBV3_NO_REFERENCE_CACHE", "1")
    assert for_evaluation(tmp_path, key_fields("a" * 64, {}, "cpu", plan, 2)) is None


def test_a_read_only_cache_costs_a_recomputation_only(tmp_path):
    problem_id, sizes = CASES[0]
    plan = plan_cases(SEEDS, other_shape=False)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    run = _compute(problem_id, sizes, plan, _cache(blocker, problem_id, sizes, plan))
    assert run.cached is False and run.cases


@pytest.mark.slow
def test_a_second_evaluation_says_it_used_the_cache(tmp_path, monkeypatch):
    from kernelbench_v3.evaluate import EvalRequest, evaluate

    solution = REPO / "examples" / "solutions" / "level1" / "23_Softmax.py"
    request = EvalRequest(
        "level1/23_Softmax",
        solution,
        device="cpu",
        sizes={"batch_size": 4, "dim": 96},
        baseline=False,
        time_solution=False,
        seeds=(42, 123),
    )
    first = evaluate(request, cache_dir=tmp_path)
    assert first.reference_cached is False and first.correct, first.error
    f64 = Spy(reference.float64_reference)
    monkeypatch.setattr(reference, "float64_reference", f64)
    second = evaluate(request, cache_dir=tmp_path)
    assert second.reference_cached is True and f64.calls == 0
    assert second.correct and second.checks == first.checks
    assert (second.rel_error, second.max_abs_error) == (first.rel_error, first.max_abs_error)
    assert "reference" in second.phase_s
    monkeypatch.setenv("KBV3_NO_REFERENCE_CACHE", "1")
    assert evaluate(request, cache_dir=tmp_path).reference_cached is None


def test_large_buffers_are_hashed_in_pieces_and_every_byte_counts(monkeypatch):
    monkeypatch.setattr(reference_cache, "HASH_PIECE", 1024)
    data = bytearray(torch.randn(1000, generator=torch.Generator().manual_seed(3)).numpy().tobytes())
    small = bytes(data[:1024])
    assert reference_cache.sha256_pieces(small) == hashlib.sha256(small).hexdigest()  # one piece: plain sha256
    whole = reference_cache.sha256_pieces(data)
    assert reference_cache.sha256_pieces(memoryview(data)) == whole  # the same for a view
    for at in (0, 1023, 1024, 3999):  # a byte flipped in any piece changes it
        flipped = bytearray(data)
        flipped[at] ^= 1
        assert reference_cache.sha256_pieces(flipped) != whole, at
    assert reference_cache.sha256_pieces(data[:-1]) != whole
    t = torch.frombuffer(data, dtype=torch.float32)
    assert reference_cache.digest([t]) != reference_cache.digest([t.reshape(10, 100)])  # shapes count
