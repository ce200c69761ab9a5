"""Tolerance rules, the precision check and the calibrated strict tolerance."""

from __future__ import annotations

import pytest
import torch

from kernelbench_v3.evaluate.supervisor.verdict import compare


def _saved(expected, residual=None):
    return {"expected": expected} if residual is None else {"expected": expected, "residual64": residual}


def test_compare_case_tolerance_rules_and_precision():
    ref = torch.tensor([1.0, 2.0, -0.5])
    entry = {
        "float64": {"ref_error": {"rel": 1e-7, "max_scaled": 1e-7}, "tf32_error": {"rel": 3e-4, "max_scaled": 5e-4}}
    }
    ok = compare.compare_case(
        "seed42", "correctness", ref + 0.005, _saved(ref, torch.zeros(3)), entry, "v3", "fp32", None
    )
    assert "correctness" not in ok.failures
    assert "precision" in ok.failures  # within 1e-2, but 4e-3 relative is > 3x TF32's error
    bad = compare.compare_case("seed42", "stress", ref + 0.02, _saved(ref), {}, "v3", "fp32", None)
    assert "stress" in bad.failures and bad.precision_ok is None
    # published: max|out-ref| < atol + rtol * max|ref| = 1e-3 + 1e-3 * 2
    pub = compare.compare_case("c", "correctness", ref + 0.0025, _saved(ref), {}, "published", "fp32", None)
    assert "correctness" not in pub.failures
    pub = compare.compare_case("c", "correctness", ref + 0.0035, _saved(ref), {}, "published", "fp32", None)
    assert "correctness" in pub.failures
    wrong = compare.compare_case("c", "correctness", ref.double(), _saved(ref), {}, "v3", "fp32", None)
    assert "output_dtype" in wrong.failures
    nan = compare.compare_case(
        "c", "correctness", torch.tensor([1.0, float("nan"), 0.0]), _saved(ref), {}, "v3", "fp32", None
    )
    assert "finite" in nan.failures
    shape = compare.compare_case("c", "correctness", ref[:2], _saved(ref), {}, "v3", "fp32", None)
    assert "output_shape" in shape.failures
    # Small outputs pass allclose(1e-2) whatever they are; the norm-wise bound does not.
    probs = torch.softmax(
        torch.randn(4, 4096, generator=torch.Generator().manual_seed(1)), dim=1
    )  # max|p - 1/4096| = 0.0064
    uniform = torch.full_like(probs, 1 / 4096)
    garbage = compare.compare_case("c", "recompute", uniform, _saved(probs), {}, "v3", "fp32", None)
    assert "recompute" in garbage.failures and "relative error" in garbage.failures["recompute"]


def test_strict_tolerance_scales_with_the_reference_error():
    cases_info = {
        "seed42": {
            "dtype": "torch.float32",
            "float64": {
                "ref_error": {"rel": 1e-7, "max_scaled": 2e-7},
                "tf32_error": {"rel": 3e-4, "max_scaled": 1e-3},
            },
        },
        "seed123": {"dtype": "torch.float32"},
    }
    calibrated = compare.calibrate_strict(cases_info)
    assert calibrated == pytest.approx(4e-3)
    assert compare.tolerance_for("strict", "fp32", calibrated) == (calibrated, calibrated)
    assert compare.tolerance_for("strict", "fp32", None) == (1e-3, 1e-3)
    assert compare.tolerance_for("v3", "fp8", None) == (1e-2, 1e-2)


def _reference_figures(out, expected, residual, mode, precision):
    """The comparison's figures by their definitions, one expression each (the forms the checks
    used before they were written to spare full-size temporaries)."""
    o, r = out.double(), expected.double()
    diff = (o - r).abs()
    atol, rtol = compare.tolerance_for(mode, precision)
    if mode == "v3":
        ok = bool((diff <= atol + rtol * r.abs()).all())
    else:
        ok = float(diff.max()) < atol + rtol * float(r.abs().max())
    if residual is None:
        rel = float((o - r).norm()) / (float(r.norm()) or 1.0)
    else:
        r64 = r + residual.double()
        rel = float((o - r64).norm()) / (float(r64.norm()) or 1.0)
    return float(diff.max()), rel, ok


@pytest.mark.parametrize("mode", ["v3", "published"])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("noise", [1e-6, 3e-3, 5e-2])
def test_compare_case_figures_are_exactly_their_definitions(mode, with_residual, noise):
    gen = torch.Generator().manual_seed(7)
    expected = torch.randn(64, 129, generator=gen)
    out = expected + noise * torch.randn(64, 129, generator=gen)
    residual = 1e-7 * torch.randn(64, 129, generator=gen) if with_residual else None
    saved = _saved(expected, residual)
    frozen = {k: t.clone() for k, t in saved.items()}
    v = compare.compare_case("c", "correctness", out, saved, {}, mode, "fp32", None)
    max_abs, rel, ok = _reference_figures(out, expected, residual, mode, "fp32")
    # max|.| bit for bit; the norms are sums of squares gathered piece by piece (another order of
    # the same float64 additions than torch's norm)
    assert v.max_abs == max_abs and v.rel_error == pytest.approx(rel, rel=1e-12)
    o, r = out.double(), expected.double()
    gross = float((o - r).norm()) / float(r.norm()) > compare.GROSS_RELATIVE_ERROR["fp32"]
    assert ("correctness" in v.failures) == (not ok or gross)
    assert all(torch.equal(saved[k], frozen[k]) for k in saved)  # the saved tensors are untouched


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_all_finite_is_isfinite_all(dtype):
    gen = torch.Generator().manual_seed(11)
    for n in (1, 7, 64, 1000, 100_003):  # vectorized bodies, tails and several threads' shares
        x = torch.randn(n, generator=gen).to(dtype)
        assert compare.all_finite(x) and compare.all_finite(x.reshape(-1, 1)[::2])
        for bad in (float("nan"), float("inf"), -float("inf")):
            for at in {0, n // 2, n - 1}:
                y = x.clone()
                y[at] = bad
                assert compare.all_finite(y) is False and not torch.isfinite(y).all(), (n, bad, at)
    assert compare.all_finite(torch.empty(0)) and compare.all_finite(torch.arange(5))


def _three_cases():
    gen = torch.Generator().manual_seed(11)
    expected = torch.randn(40, 77, generator=gen)
    residual = 1e-7 * torch.randn(40, 77, generator=gen)
    near = expected + 1e-6 * torch.randn(40, 77, generator=gen)
    far = expected.clone()
    far[39, 76] += 1.0  # the last element of the last piece
    nan = near.clone()
    nan[39, 70:] = float("nan")
    return _saved(expected, residual), {"near": near, "far": far, "nan": nan}


@pytest.mark.parametrize("mode", ["v3", "published"])
def test_a_comparison_in_pieces_is_the_comparison_whole(monkeypatch, mode):
    """Outputs are compared a piece at a time (bounded float64 temporaries): every figure and
    failure is that of the whole tensor, whatever piece holds the difference or the NaN."""
    saved, outs = _three_cases()
    whole = {k: compare.compare_case(k, "correctness", o, saved, {}, mode, "fp32", None) for k, o in outs.items()}
    monkeypatch.setattr(compare, "COMPARE_PIECE", 100)  # 31 pieces, the last one short
    pieces = {k: compare.compare_case(k, "correctness", o, saved, {}, mode, "fp32", None) for k, o in outs.items()}
    for k in outs:
        assert pieces[k].failures == whole[k].failures
        assert pieces[k].max_abs == whole[k].max_abs
        assert pieces[k].rel_error == (whole[k].rel_error and pytest.approx(whole[k].rel_error, rel=1e-12))
    assert "correctness" in pieces["far"].failures and not pieces["near"].failures
    assert pieces["nan"].failures == {"finite": "nan: 7 NaN/Inf value(s) in the output"}


@pytest.mark.parametrize("mode", ["v3", "published"])
def test_a_nan_in_the_reference_fails_the_comparison_in_any_piece(monkeypatch, mode):
    """A NaN where the reference has one (in any piece, first or last) makes the comparison fail
    as it does on the whole tensor: no piece's maximum may drop it."""
    saved, outs = _three_cases()
    for where in (0, -1):
        expected = saved["expected"].clone()
        expected.view(-1)[where] = float("nan")
        broken = {**saved, "expected": expected}
        whole = compare.compare_case("c", "correctness", outs["near"], broken, {}, mode, "fp32", None)
        monkeypatch.setattr(compare, "COMPARE_PIECE", 100)
        pieces = compare.compare_case("c", "correctness", outs["near"], broken, {}, mode, "fp32", None)
        monkeypatch.undo()
        assert "correctness" in whole.failures and pieces.failures == whole.failures, (where, pieces.failures)


def test_a_comparison_the_gpu_cannot_hold_is_made_on_the_cpu(monkeypatch):
    """Asked to compare on a GPU (as `judge` does for a CUDA evaluation), a piece that runs out
    of device memory sends the whole comparison to the CPU, with the same figures."""
    saved, outs = _three_cases()
    places = []
    real = compare._sums

    def sums(out, expected, residual, on, rtol, atol):
        places.append(on.type)
        if on.type == "cuda":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (a test's)")
        return real(out, expected, residual, on, rtol, atol)

    monkeypatch.setattr(compare, "_sums", sums)
    v = compare.compare_case("far", "correctness", outs["far"], saved, {}, "v3", "fp32", None, on="cuda")
    monkeypatch.setattr(compare, "_sums", real)
    assert places == ["cuda", "cpu"]
    assert v == compare.compare_case("far", "correctness", outs["far"], saved, {}, "v3", "fp32", None)
