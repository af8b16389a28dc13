"""Reports of the inferential family write the expected tables and figures from result rows."""

import math

import numpy as np
import pandas as pd
import pytest
from figure_probes import KeepFigures, line_shown

from pipeline.experiments.inferential import BETHE_LIMIT, INFERENTIAL
from pipeline.report.core import ReportWriter
from pipeline.report.inferential import (bethe_limit_against_coupling, critical_coupling,
                                         nu_against_coupling)


def test_inferential_report_files_and_values(result_frame, tmp_path):
    pts = [dict(graph=g, target=t, J=j, eps=e, mechanism="worst_case", rows=4, cols=4, radius=3)
           for g, t in (("path", "3"), ("grid", "5"), ("bethe", "0")) for j in (0.0, 0.3, 0.6)
           for e in (0.2, 1.0)]
    df = result_frame(INFERENTIAL, failed=1, points=pts)
    out = ReportWriter(tmp_path)
    nu_against_coupling(df, out)
    for name in ("inferential_nu.csv", "inferential_nu.md", "inferential_nu.tex",
                 "inferential_bound_check.csv", "inferential_nu_vs_J.png", "inferential_nu_vs_J.pdf"):
        assert (tmp_path / name).stat().st_size > 0
    table = pd.read_csv(tmp_path / "inferential_nu.csv")
    ok = df[df.status == "ok"]
    assert len(table) == len(ok)
    row = table[(table.graph == "grid") & (table.J_effective == 0.3) & (table.eps == 1.0)].iloc[0]
    src = ok[(ok.graph == "grid") & (ok.J == 0.3) & (ok.eps == 1.0)].iloc[0]
    assert row.nu == pytest.approx(src.nu, rel=1e-10)
    check = pd.read_csv(tmp_path / "inferential_bound_check.csv")
    # every finite bound holds, and an infinite one is not counted as a check passed
    assert (check.nu_below_bound == check.bound_finite).all()
    bound = ok.nu_influence_bound.astype(float)
    assert 0 < check.bound_finite.sum() == np.isfinite(bound).sum() < len(ok)
    assert (check.nu_equals_formula6 == check.n_points).all()  # affiliated: worst case = (6)
    from matplotlib.image import imread
    img = imread(tmp_path / "inferential_nu_vs_J.png")
    assert img.shape[0] > 400 and img.shape[1] > 1000 and img.std() > 0


def test_critical_couplings():
    assert critical_coupling({"graph": "grid"}) == pytest.approx(0.5 * math.log(1 + math.sqrt(2)))
    assert math.sinh(2 * critical_coupling({"graph": "grid"})) == pytest.approx(1.0)  # Onsager
    assert math.tanh(critical_coupling({"graph": "bethe", "degree": 4})) == pytest.approx(1 / 3)
    assert math.tanh(critical_coupling({"graph": "tree", "branching": 2})) == pytest.approx(1 / 2)
    assert critical_coupling({"graph": "path"}) is None


def test_bethe_limit_report(result_frame, tmp_path):
    df = result_frame(BETHE_LIMIT, failed=1, points=[dict(degree=d, J=j, eps=e) for d in (3, 4)
                              for j in np.linspace(0, 1, 6) for e in (0.1, 1.0)])
    out = ReportWriter(tmp_path)
    bethe_limit_against_coupling(df, out)
    assert (tmp_path / "inferential_bethe_limit_vs_J.png").stat().st_size > 0
    table = pd.read_csv(tmp_path / "inferential_bethe_limit.csv")
    assert len(table) == 24
    src = df[(df.status == "ok") & (df.degree == 4) & (df.eps == 0.1)].sort_values("J").iloc[3]
    row = table[(table.degree == 4) & (table.eps == 0.1)].sort_values("J").iloc[3]
    assert row.nu == pytest.approx(src.nu, rel=1e-10)


def test_row_sum_bound_is_weaker_than_phi_bound(result_frame, tmp_path):
    df = result_frame(INFERENTIAL, failed=1, points=[dict(graph="path", n=9, J=j, eps=0.5, target="all") for j in (0.1, 0.2)])
    nu_against_coupling(df, ReportWriter(tmp_path))
    table = pd.read_csv(tmp_path / "inferential_nu.csv")
    finite = table[np.isfinite(table.row_sum_bound)]
    assert len(finite) == len(table)  # path, J <= 0.2: max row sum < 1
    assert (finite.nu <= finite.nu_influence_bound + 1e-9).all()
    assert (finite.nu_influence_bound <= finite.row_sum_bound + 1e-9).all()


_KIND = {"--": "Thm 4.2 bound", ":": "formula (6)", "-.": "critical $J$"}


def _legend_and_drawn(fig):
    """The legend's line-style entries and the kinds the panels show (by line style)."""
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    in_legend = {kind for kind in _KIND.values() if any(lab.startswith(kind) for lab in labels)}
    drawn = {_KIND[ln.get_linestyle()] for ax in fig.axes if ax.get_visible()
             for ln in ax.get_lines() if ln.get_linestyle() in _KIND and line_shown(ln)}
    return labels, in_legend, drawn


def test_nu_vs_J_legend_lists_only_what_the_panels_show(result_frame, tmp_path):
    """The legend listed the bound (finite at J = 0 only, drawn without a marker: invisible),
    formula (6) (not drawn: equal to nu) and the critical J (none for these graphs)."""
    pts = [dict(graph=g, n=5, target="0", J=j, eps=1.0, mechanism="worst_case")
           for g in ("path", "cycle", "star", "complete") for j in (0.0, 0.5, 1.0)]
    out = KeepFigures(tmp_path / "a")
    nu_against_coupling(result_frame(INFERENTIAL, points=pts), out)
    labels, in_legend, drawn = _legend_and_drawn(out.figs["inferential_nu_vs_J"])
    # the bound, finite at J = 0 only, is marked there and so listed
    assert in_legend == drawn == {"Thm 4.2 bound"}
    assert labels[:2] == [r"$\varepsilon=1$", r"exact $\nu$"] and len(labels) == 3
    assert "a short dash where that holds at a single J" in out.entries[-1]["caption"]
    # J >= 0.5: the bound is infinite everywhere, so not drawn and not listed
    out = KeepFigures(tmp_path / "b")
    nu_against_coupling(result_frame(INFERENTIAL, points=[p for p in pts if p["J"] > 0]), out)
    assert _legend_and_drawn(out.figs["inferential_nu_vs_J"]) == (
        [r"$\varepsilon=1$", r"exact $\nu$"], set(), set())
    # nor in the caption, which described the bound and its dash whatever was drawn
    caption = out.entries[-1]["caption"]
    assert "Theorem 4.2" not in caption and "short dash" not in caption, caption


def test_nu_vs_J_legend_keeps_every_entry_that_is_drawn(result_frame, tmp_path):
    # path with J < 0 (not affiliated): nu differs from formula (6), the bound is finite at
    # J = -0.2 and 0.1 (a segment); a binary tree has a critical J
    pts = [dict(graph="path", n=4, target="0", J=j, eps=e, mechanism="worst_case")
           for j in (-0.5, -0.2, 0.1) for e in (0.5, 1.0)]
    pts += [dict(graph="tree", branching=2, depth=2, target="0", J=j, eps=0.5,
                 mechanism="worst_case") for j in (0.0, 0.8)]
    out = KeepFigures(tmp_path)
    nu_against_coupling(result_frame(INFERENTIAL, points=pts), out)
    labels, in_legend, drawn = _legend_and_drawn(out.figs["inferential_nu_vs_J"])
    assert in_legend == drawn == set(_KIND.values())
    assert labels[:3] == [r"$\varepsilon=0.5$", r"$\varepsilon=1$", r"exact $\nu$"]
    assert len(labels) == 6
    caption = out.entries[-1]["caption"]
    assert "critical couplings" in caption and "Theorem 4.2's bound" in caption, caption
