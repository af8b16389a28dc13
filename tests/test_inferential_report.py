"""Reports of the inferential family write the expected tables and figures from result rows."""

import math

import numpy as np
import pandas as pd
import pytest

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
