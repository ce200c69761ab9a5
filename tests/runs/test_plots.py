"""The figures' legends (issue 22, point 4): one colour per model across every panel, one legend
naming every model, also a model present on one GPU only."""

from __future__ import annotations

import warnings

from matplotlib.colors import to_hex

from kernelbench_v3 import join_runs, load_runs
from kernelbench_v3.runs.plots import fast_p_curves
from tests.paths import PUBLISHED


def test_fast_p_curves_have_one_colour_per_model_and_one_legend():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joined = join_runs(load_runs(PUBLISHED))
    fig = fast_p_curves(joined)
    colour_of: dict[str, str] = {}
    for ax in fig.axes:
        assert ax.get_legend() is None  # no per-panel legend that could disagree with the others
        for line in ax.get_lines():
            label = line.get_label()
            if label.startswith("_"):
                continue
            colour = to_hex(line.get_color())
            assert colour_of.setdefault(label, colour) == colour, f"{label} changes colour between panels"
    assert len(set(colour_of.values())) == len(colour_of)  # no two models share a colour
    assert len(fig.legends) == 1
    legend = fig.legends[0]
    named = {t.get_text(): to_hex(h.get_color()) for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert named == colour_of
    only_one_gpu = set(joined.groupby("model")["gpu"].nunique().loc[lambda n: n == 1].index)
    assert only_one_gpu and only_one_gpu <= set(named)  # e.g. Zeta, on H100 only
