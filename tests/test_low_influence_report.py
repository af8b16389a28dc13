"""Reports of ``low_influence`` and ``leakage`` on a small results table built in the test."""

import pandas as pd
import pytest

from pipeline.experiments.leakage import EXPERIMENT as LEAK
from pipeline.experiments.low_influence import EXPERIMENT as LI
from pipeline.report.core import ReportWriter, reports




def test_low_influence_report_files_and_numbers(result_frame, tmp_path):
    points = [dict(mode="optimise", eps=e, delta=0.0) for e in (0.0, 0.5, 1.0)]
    points += [dict(graph="K2", mechanism="rr_binary", eps=e, coupling=c)
               for e in (0.2, 1.0) for c in ("independent", "shared_uniform")]
    df = result_frame(LI, failed=1, points=points)
    out = ReportWriter(tmp_path)
    for fn in reports("low_influence"):
        fn(df, out)
    names = {e["name"] for e in out.entries}
    assert {"examples_5_6", "tradeoff_examples_5_6", "mechanism_tradeoff", "li_implies_dp"} <= names
    table = pd.read_csv(tmp_path / "examples_5_6.csv")
    ok = df[(df.status == "ok") & (df["mode"] == "optimise")].sort_values("eps")
    assert list(table["influence_joint"]) == pytest.approx(list(ok["influence_joint"]), abs=1e-11)
    assert (tmp_path / "mechanism_tradeoff.png").stat().st_size > 10_000
    li = pd.read_csv(tmp_path / "li_implies_dp.csv")
    assert (li["max_tv_minus_influence"] <= 1e-12).all()


def test_leakage_report_files_and_numbers(result_frame, tmp_path):
    points = [dict(graph=g, n=6, u=3, eps=e) for g in ("star", "hypercube") for e in (0.5, 1.5)]
    df = result_frame(LEAK, failed=1, points=points)
    out = ReportWriter(tmp_path)
    for fn in reports("leakage"):
        fn(df, out)
    where = pd.read_csv(tmp_path / "thesis_bound_where_holds.csv").set_index("graph_label")
    assert where.loc["K_1,5", "thesis_bound_holds"] == 0
    assert where.loc["Q_3", "thesis_bound_holds"] == 2 and where.loc["Q_3", "tight_bound_attained"] == 2
    table = pd.read_csv(tmp_path / "leakage_lp_vs_bounds.csv")
    ok = df[df.status == "ok"]
    assert sorted(table["utility_optimal"]) == pytest.approx(sorted(ok["utility_optimal"]), rel=1e-11)
    from matplotlib.image import imread

    img = imread(tmp_path / "lp_vs_bounds_by_graph.png")
    assert img.shape[0] > 300 and img.shape[1] > 600
