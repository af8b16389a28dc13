"""Reports of the edge_dp family write the expected tables and figures from result rows."""

import pandas as pd
import pytest

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
