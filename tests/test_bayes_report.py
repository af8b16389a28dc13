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
