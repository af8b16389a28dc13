"""Reports of the edge_dp family write the expected tables and figures from result rows."""

import numpy as np
import pandas as pd
import pytest
from figure_probes import KeepFigures, line_shown

from pipeline.experiments.edge_dp import EDGE_DP, EDGE_TEST
from pipeline.report.core import ReportWriter
from pipeline.report.edge_dp import edge_dp_loss_against_n, edge_test_power_against_n


def test_edge_dp_report_files_and_values(result_frame, tmp_path):
    df = result_frame(EDGE_DP, failed=1, points=[dict(prior=p, n=n) for p in ("er", "hive", "ergm") for n in (4, 5)]
                + [dict(prior="ergm", n=8, mcmc_sweeps=200, mcmc_burn_in=20)])
    out = ReportWriter(tmp_path)
    edge_dp_loss_against_n(df, out)
    for name in ("edge_dp_loss.csv", "edge_dp_loss.md", "edge_dp_loss.tex", "edge_dp_lemma_check.csv",
                 "edge_dp_loss_vs_n.png", "edge_dp_loss_vs_n.pdf"):
        assert (tmp_path / name).stat().st_size > 0
    table = pd.read_csv(tmp_path / "edge_dp_loss.csv")
    ok = df[df.status == "ok"]
    assert len(table) == len(ok)
    queen = table[(table.prior == "hive") & (table.edge_class == "queen") & (table.n == 5)].iloc[0]
    src = ok[(ok.prior == "hive") & (ok.edge_class == "queen") & (ok.n == 5)].iloc[0]
    assert queen.loss == pytest.approx(src.pufferfish_loss, rel=1e-10)
    mc = table[table.method == "mcmc"].iloc[0]
    assert mc.loss == pytest.approx(ok[ok.method == "mcmc"].iloc[0].pufferfish_loss_mcmc, rel=1e-10)
    check = pd.read_csv(tmp_path / "edge_dp_lemma_check.csv")
    assert (check.exact_rows == check.rows_lemma_holds).all() and (check.max_loss_minus_bound <= 1e-9).all()


def test_edge_test_report_files_and_values(result_frame, tmp_path):
    df = result_frame(EDGE_TEST, failed=1, points=[dict(n=n, eps=e) for n in (4, 10, 30) for e in (0.5, 1.0)])
    out = ReportWriter(tmp_path)
    edge_test_power_against_n(df, out)
    assert (tmp_path / "edge_test_power_vs_n.png").stat().st_size > 0
    table = pd.read_csv(tmp_path / "edge_test_size_power.csv")
    assert len(table) == 6
    row = table[(table.n == 10) & (table.eps == 1.0)].iloc[0]
    src = df[(df.status == "ok") & (df.n == 10) & (df.eps == 1.0)].iloc[0]
    assert row.power_threshold == pytest.approx(src.power_threshold, rel=1e-10)


def _lines(ax, ls):
    """The data lines of a style (not the grey eps reference, whose dotted dashes read "--")."""
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == ls and ln.get_color() != "grey"]


def test_edge_dp_bound_at_a_single_n_is_drawn(result_frame, tmp_path):
    """ergm and sbm at one n each: the dashed bound (no marker) drew nothing though listed."""
    pts = [dict(prior="er", n=n) for n in (3, 4)] + [dict(prior="ergm", n=3), dict(prior="sbm", n=3)]
    df = result_frame(EDGE_DP, points=pts)
    out = KeepFigures(tmp_path)
    edge_dp_loss_against_n(df, out)
    fig = out.figs["edge_dp_loss_vs_n"]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible() and ax.get_title()}
    ok = df[df.status == "ok"]
    for prior in ("ergm", "sbm"):
        ax = panels[f"prior: {prior}, Laplace count"]
        bounds = _lines(ax, "--")
        assert bounds and all(line_shown(ln) for ln in bounds)
        assert bounds[0].get_marker() == "_"
        assert sorted(float(ln.get_ydata()[0]) for ln in bounds) == pytest.approx(
            sorted(ok[ok.prior == prior]["bound"]), rel=1e-12)
    # er has two n: a plain dashed segment, no dash marker
    er = _lines(panels["prior: er, Laplace count"], "--")
    assert er and all(ln.get_marker() in ("", "None") for ln in er)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert r"Lemma 4.1 bound $\varepsilon+\alpha$" in labels
    assert "short dash where a curve has a single n" in out.entries[-1]["caption"]


def test_edge_dp_legend_omits_a_bound_never_drawn(result_frame, tmp_path):
    df = result_frame(EDGE_DP, points=[dict(prior="er", n=n) for n in (3, 4)])
    df["bound"] = np.nan  # no bound in any row: neither drawn nor listed nor captioned
    out = KeepFigures(tmp_path)
    edge_dp_loss_against_n(df, out)
    labels = [t.get_text() for t in out.figs["edge_dp_loss_vs_n"].legends[0].get_texts()]
    assert not any("Lemma" in lab for lab in labels)
    assert "Lemma 4.1 bound" not in out.entries[-1]["caption"]


def test_edge_test_single_n_marks_and_linear_log10_axis(result_frame, tmp_path):
    """One n: e^loss and e^(eps+alpha) drew nothing but were in the legend; the right panel put
    log10 values on a log axis (ticks 2-7 only, none by the data near 1.2)."""
    df = result_frame(EDGE_TEST, points=[dict(n=6, eps=1.0)])
    out = KeepFigures(tmp_path)
    edge_test_power_against_n(df, out)
    fig = out.figs["edge_test_power_vs_n"]
    right = fig.axes[1]
    assert right.get_yscale() == "linear"
    row = df[df.status == "ok"].iloc[0]
    want = np.array([row.log_ratio_threshold, row.pufferfish_loss, row.bound]) / np.log(10)
    got = np.array([ln.get_ydata()[0] for ln in right.get_lines()], float)
    assert sorted(got) == pytest.approx(sorted(want), rel=1e-12)
    assert all(line_shown(ln) for ln in right.get_lines())
    assert {ln.get_marker() for ln in _lines(right, "-.") + _lines(right, "--")} == {"x", "_"}
    # the labelled ticks span the data
    lo, hi = right.get_ylim()
    ticks = [t for t in right.get_yticks() if lo <= t <= hi]
    assert lo <= want.min() and want.max() <= hi
    assert ticks[0] <= want.min() + 1 and ticks[-1] >= want.max() - 1 and len(ticks) >= 3
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert r"$e^{\mathrm{loss}}$ (right)" in labels and r"$e^{\varepsilon+\alpha}$ (right)" in labels
    assert "at a single n" in out.entries[-1]["caption"]
    # several n: plain lines, no marks, and the caption says nothing of them
    out = KeepFigures(tmp_path / "b")
    edge_test_power_against_n(result_frame(EDGE_TEST, points=[dict(n=n, eps=1.0) for n in (6, 10)]), out)
    right = out.figs["edge_test_power_vs_n"].axes[1]
    assert all(ln.get_marker() in ("", "None") for ln in _lines(right, "-.") + _lines(right, "--"))
    assert "at a single n" not in out.entries[-1]["caption"]
