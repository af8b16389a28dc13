"""Reports of the bayes family on small result tables built in the test."""

import numpy as np
import pandas as pd
import pytest

from pipeline.report.core import ReportWriter, reports




def test_bayes_network_report_tables_match_data(result_frame, tmp_path):
    pts = [dict(mechanism=m, eps=e, d=4, n_total=120, n_train=30, repeats=2)
           for m in ("laplace", "sampling", "non_private") for e in (1.0, 10.0)]
    df = result_frame("bayes_network", pts, failed=1)
    out = ReportWriter(tmp_path)
    for fn in reports("bayes_network"):
        fn(df, out)
    names = {e["name"] for e in out.entries}
    assert {"accuracy_vs_eps", "accuracy_pivot", "kl_vs_eps"} <= names
    for ext in ("csv", "md", "tex"):
        assert (tmp_path / f"accuracy_pivot.{ext}").stat().st_size > 0
    png = tmp_path / "accuracy_vs_eps.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / "accuracy_vs_eps.pdf").exists()
    table = pd.read_csv(tmp_path / "accuracy_pivot.csv")
    ok = df[df.status == "ok"]
    for _, r in ok.iterrows():
        got = table.loc[np.isclose(table["eps"], r["eps"]), r["mechanism"]].item()
        assert got == pytest.approx(r["accuracy"], rel=1e-10)


def test_bayes_regression_and_bounds_reports(result_frame, tmp_path):
    df = result_frame("bayes_regression", [dict(b=b, n_total=300, repeats=2) for b in (1.0, 100.0)])
    out = ReportWriter(tmp_path / "reg")
    for fn in reports("bayes_regression"):
        fn(df, out)
    t = pd.read_csv(tmp_path / "reg" / "mse_vs_b.csv")
    assert list(t["b"]) == [1.0, 100.0]
    assert t["mse_private"].tolist() == pytest.approx(df.sort_values("b")["mse_private"].tolist())
    df = result_frame("bayes_bounds", [dict(family="exponential", N=1), dict(family="exponential", N=3)])
    out = ReportWriter(tmp_path / "bounds")
    for fn in reports("bayes_bounds"):
        fn(df, out)
    t = pd.read_csv(tmp_path / "bounds" / "bayes_bounds.csv")
    assert t["delta"].tolist() == pytest.approx(df.sort_values("N")["delta"].tolist())
    assert t["vacuous"].tolist() == [d >= 1 for d in t["delta"]]


class _Keep(ReportWriter):
    """Keeps each saved figure (closed, but its artists stay readable)."""

    def figure(self, name, fig, caption=""):
        super().figure(name, fig, caption)
        self.figs = {**getattr(self, "figs", {}), name: fig}


def test_mse_vs_b_labels_follow_d_and_norm_scale(result_frame, tmp_path):
    """The title said 14 features and the x label 10/sqrt(b) whatever d and norm_scale were."""
    pts = [dict(b=b, n_total=200, repeats=2, d=d, norm_scale=5.0) for b in (0.01, 1.0)
           for d in (1, 3)]
    df = result_frame("bayes_regression", pts)
    out = _Keep(tmp_path)
    for fn in reports("bayes_regression"):
        fn(df, out)
    # d varies: one figure per d, each titled with its own
    for d, word in ((1, "1 feature)"), (3, "3 features)")):
        ax = out.figs[f"mse_vs_b_d{d}"].axes[0]
        assert ax.get_title() == "Figure 4.2 reproduction\n(synthetic data, " + word
        assert ax.get_xlabel() == r"prior precision $b$ (weight bound $5/\sqrt{b}$)"
        assert "14" not in ax.get_title() and "10/" not in ax.get_xlabel()


def test_delta_vs_N_caption_names_the_constant_it_plots(result_frame, tmp_path):
    """The curve is delta with C_numeric, but the caption's formula read with the table's C (the
    printed one) gives delta_closed: exponential lam = 50, N = 1 has delta < 1 <= delta_closed."""
    df = result_frame("bayes_bounds", [dict(family="exponential", lam=50.0, c1=0.01, c2=0.02, B=0.1, N=n)
                                          for n in (1, 10)])
    out = _Keep(tmp_path)
    for fn in reports("bayes_bounds"):
        fn(df, out)
    t = df.sort_values("N")
    line = out.figs["delta_vs_N"].axes[0].get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx(t["delta"].tolist(), rel=1e-12)
    # the relation the caption states between the plotted delta and the table's C
    assert t["delta_closed"].tolist() == pytest.approx(
        (t["delta"] * np.sqrt(t["C"] / t["C_numeric"])).tolist(), rel=1e-9)
    assert t["delta"].iloc[0] < 1 <= t["delta_closed"].iloc[0]
    cap = {e["name"]: e["caption"] for e in out.entries}
    assert "√(C_numeric/2 (1 + 2L₀ + 1/c) ρ)" in cap["delta_vs_N"]
    assert "delta_closed = δ √(C/C_numeric)" in cap["delta_vs_N"]
    assert "in 1 of 2 rows only one of δ and delta_closed is ≥ 1" in cap["delta_vs_N"]
    summary = pd.read_csv(tmp_path / "bayes_bounds_summary.csv")
    assert {"C", "C_numeric", "delta", "delta_closed", "vacuous_closed"} <= set(summary.columns)
    assert "C_numeric" in cap["bayes_bounds_summary"] and "delta_closed" in cap["bayes_bounds_summary"]


def test_accuracy_vs_eps_caption_follows_the_structure(result_frame, tmp_path):
    pts = [dict(structure="chain", mechanism=m, eps=e, d=4, n_total=120, n_train=30, repeats=2)
           for m in ("laplace", "non_private") for e in (1.0, 10.0)]
    out = _Keep(tmp_path)
    for fn in reports("bayes_network"):
        fn(result_frame("bayes_network", pts), out)
    cap = next(e["caption"] for e in out.entries if e["name"] == "accuracy_vs_eps"
               and e["kind"] == "figure")
    assert cap.startswith("Bayesian chain network predictive accuracy"), cap
    assert "naive Bayes predictive" not in cap
    assert "structure=chain" in out.figs["accuracy_vs_eps"].axes[0].get_title()
