"""Experiment-level tests for the composition family (issue 3): resolve + run, limits, PLD fallback."""

from __future__ import annotations

import math
import sys

import numpy as np
import pyarrow as pa
import pytest

from pipeline.experiments.base import ParamError, get_experiment
from pipeline.experiments import composition as ec
from pipeline.kernels import composition as kc


def run(name, seed=0, **params):
    exp = get_experiment(name)
    return exp.run(exp.resolve(**params), seed)


def typed(name, rows):
    """Rows must type-check against the declared Arrow columns."""
    exp = get_experiment(name)
    rows = rows if isinstance(rows, list) else [rows]
    assert set().union(*(r.keys() for r in rows)) <= set(exp.columns)
    for col, typ in exp.columns.items():
        pa.array([r.get(col) for r in rows], type=typ)


def test_composition_row_matches_seed_values_and_pld():
    row = run("composition", eps=0.1, k=100, delta=0.0, delta_target=1e-6)
    typed("composition", row)
    # dp-accounting (PLD, eps on its grid) as the independent oracle
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    common = pytest.importorskip("dp_accounting.pld.common")
    ref = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.1, 0.0)).self_compose(100)
    assert row["eps_optimal"] == pytest.approx(ref.get_epsilon_for_delta(1e-6), abs=1e-6)
    assert row["eps_basic"] == pytest.approx(10.0)
    # Theorem 3.4 written out: 100*0.1*tanh(0.05) + 0.1*sqrt(200*log(1/1e-6)) (second form is the min)
    kov = 10 * math.tanh(0.05) + 0.1 * math.sqrt(200 * math.log(1e6))
    assert row["eps_kov_bound"] == pytest.approx(kov, rel=1e-12)
    drv = 0.1 * math.sqrt(200 * math.log(1e6)) + 10 * math.expm1(0.1)
    assert row["eps_drv"] == pytest.approx(drv, rel=1e-12)
    assert row["eps_optimal"] < row["eps_kov_bound"] < row["eps_drv"] < row["eps_basic"]


def test_composition_infinite_below_delta_floor():
    row = run("composition", eps=0.5, k=1000, delta=1e-6, delta_target=1e-4)
    assert row["delta_floor"] == pytest.approx(1 - (1 - 1e-6) ** 1000, rel=1e-12)
    assert math.isinf(row["eps_optimal"]) and math.isinf(row["eps_kov_bound"]) and math.isinf(row["eps_drv"])
    assert row["eps_basic"] == 500.0


def test_composition_large_k_is_finite():
    row = run("composition", eps=1.0, k=10**6, delta=0.0, delta_target=1e-10)
    assert math.isfinite(row["eps_optimal"]) and row["eps_optimal"] < row["eps_kov_bound"] < 1e6


def test_composition_delta_round_trip():
    eps_total = run("composition", eps=0.3, k=500, delta=1e-7, delta_target=1e-3)["eps_optimal"]
    row = run("composition_delta", eps=0.3, k=500, delta=1e-7, eps_total=eps_total)
    typed("composition_delta", row)
    assert row["delta_optimal"] == pytest.approx(1e-3, rel=1e-9)
    assert row["log_delta_optimal"] == pytest.approx(math.log(1e-3), rel=1e-9)


def test_composition_delta_tiny_values_stay_finite_in_log():
    row = run("composition_delta", eps=1.0, k=1000, eps_total=999.0)
    # only l = 0 has loss 1000 > 999: delta = p^k (1 - e^{-1}), p = e/(1+e)
    want = 1000 * -math.log1p(math.exp(-1.0)) + math.log1p(-math.exp(-1.0))
    assert row["log_delta_optimal"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("delta", [0.0, 0.1])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_region_rows(k, delta):
    rows = run("composition_region", eps=0.4, delta=delta, k=k)
    typed("composition_region", rows)
    lines = [r for r in rows if r["kind"] == "line"]
    verts = [r for r in rows if r["kind"] == "vertex"]
    assert [r["i"] for r in lines] == list(range(k // 2 + 1))
    assert lines[0]["delta_i"] == pytest.approx(1 - (1 - delta) ** k, abs=1e-15)
    md = np.array([r["p_md"] for r in verts])
    fa = np.array([r["p_fa"] for r in verts])
    assert (md[0], fa[0]) == (0.0, 1.0) and (md[-1], fa[-1]) == (1.0, 0.0)
    assert np.all(np.diff(md) >= -1e-15) and np.all(np.diff(fa) <= 1e-15)
    # every vertex lies on or above every line of the region: P_FA >= 1 - delta_i - e^{eps_i} P_MD
    for r in lines:
        assert np.all(fa >= 1 - r["delta_i"] - math.exp(r["eps_i"]) * md - 1e-12)


def test_hetero_list_matches_kernel_and_brute_force_size():
    eps_list = [0.1, 0.2, 0.3, 0.1, 0.7]
    row = run("composition_hetero", eps_source="list", eps_list=eps_list, delta=1e-4,
              delta_target=1e-3, eta=0.05)
    typed("composition_hetero", row)
    assert row["k_steps"] == 5 and row["n_distinct"] == 4
    assert row["eps_values"] == eps_list
    assert row["eps_exact"] == pytest.approx(kc.hetero_eps_exact(eps_list, 1e-4, 1e-3), rel=1e-14)
    assert row["eps_approx_lower"] <= row["eps_exact"] <= row["eps_approx"]
    assert row["eps_exact"] <= row["eps_kov_bound"] <= row["eps_basic"] * (1 + 1e-12)
    if row["eps_pld"] is not None:
        assert row["eps_pld"] == pytest.approx(row["eps_exact"], abs=5 * 1e-4)


@pytest.mark.parametrize("source", ["uniform", "two_level", "geometric"])
def test_hetero_generated_sources(source):
    params = dict(eps_source=source, k=12, eps_min=0.1, eps_max=0.6, delta_target=1e-5, pld=False)
    a = run("composition_hetero", seed=7, **params)
    b = run("composition_hetero", seed=7, **params)
    c = run("composition_hetero", seed=8, **params)
    assert a["eps_values"] == b["eps_values"]  # all randomness from the task seed
    vals = np.array(a["eps_values"])
    assert vals.size == 12 and np.all((vals >= 0.1 - 1e-15) & (vals <= 0.6 + 1e-15))
    if source == "geometric":
        assert a["eps_values"] == c["eps_values"]
        np.testing.assert_allclose(vals[1:] / vals[:-1], (0.1 / 0.6) ** (1 / 11), rtol=1e-12)
    else:
        assert a["eps_values"] != c["eps_values"]
    if source == "two_level":
        assert set(vals) <= {0.1, 0.6}
    assert a["eps_pld"] is None
    assert a["eps_approx_lower"] <= a["eps_exact"] <= a["eps_approx"]


def test_hetero_exact_null_beyond_combo_limit():
    row = run("composition_hetero", eps_source="uniform", k=40, eps_max=0.2, pld=False)
    assert row["log_exact_combos"] == pytest.approx(40 * math.log(2))
    assert row["eps_exact"] is None
    assert row["eps_approx_lower"] <= row["eps_approx"] <= row["eps_kov_bound"] + 1e-9


def test_hetero_pld_null_without_dp_accounting(monkeypatch):
    for mod in [m for m in list(sys.modules) if m == "dp_accounting" or m.startswith("dp_accounting.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "dp_accounting", None)  # import now raises ImportError
    row = run("composition_hetero", eps_source="list", eps_list=[0.2, 0.3], pld=True)
    assert row["eps_pld"] is None
    assert math.isfinite(row["eps_exact"])


@pytest.mark.parametrize("name,params", [
    ("composition", dict(eps=0.0)),
    ("composition", dict(eps=-1.0)),
    ("composition", dict(delta=1.0)),
    ("composition", dict(k=0)),
    ("composition", dict(k=ec.K_MAX + 1)),
    ("composition", dict(k=2.5)),
    ("composition", dict(delta_target=0.0)),
    ("composition", dict(delta_target=1.0)),
    ("composition_delta", dict(eps_total=-0.1)),
    ("composition_region", dict(k=ec.REGION_K_MAX + 1)),
    ("composition_hetero", dict(eps_source="list")),
    ("composition_hetero", dict(eps_source="list", eps_list=[0.1, -0.2])),
    ("composition_hetero", dict(eps_source="uniform", eps_list=[0.1])),
    ("composition_hetero", dict(eps_source="bogus")),
    ("composition_hetero", dict(eps_min=0.9, eps_max=0.5)),
    ("composition_hetero", dict(k=1000, pld=True)),
    ("composition_hetero", dict(k=50_000, eps_max=1.0, eta=1e-3, pld=False)),
    ("composition_hetero", dict(eta=0.0)),
])
def test_bad_values_raise(name, params):
    exp = get_experiment(name)
    with pytest.raises(ParamError) as info:
        exp.resolve(**params)
    assert any(p in str(info.value) for p in params)  # the message names the parameter


def test_reports_write_figures_and_tables(tmp_path):
    import pandas as pd

    from pipeline.report import composition as rc
    from pipeline.report.core import ReportWriter

    exp = get_experiment("composition")
    rows = []
    for eps in (0.01, 0.1, 1.0):
        for k in (1, 10, 100, 1000):
            p = exp.resolve(eps=eps, k=k, delta=0.0, delta_target=1e-6)
            rows.append({**p, **exp.run(p, 0), "status": "ok"})
    rows.append({**exp.resolve(eps=0.1, k=5), "status": "failed"})  # failed rows are ignored
    df = pd.DataFrame(rows)
    out = ReportWriter(tmp_path / "composition")
    rc.eps_against_k(df, out)
    png = tmp_path / "composition" / "eps_vs_k.png"
    assert png.exists() and png.stat().st_size > 10_000
    table = pd.read_csv(tmp_path / "composition" / "eps_vs_k.csv")
    want = df[(df.status == "ok") & (df.eps == 0.1)].sort_values("k")
    np.testing.assert_allclose(table["eps_optimal"], want["eps_optimal"], rtol=1e-11)

    region = get_experiment("composition_region")
    rrows = []
    for delta in (0.0, 0.1):
        for k in range(1, 6):
            p = region.resolve(eps=0.4, delta=delta, k=k)
            rrows += [{**p, **r, "status": "ok"} for r in region.run(p, 0)]
    out = ReportWriter(tmp_path / "region")
    rc.privacy_region(pd.DataFrame(rrows), out)
    assert (tmp_path / "region" / "privacy_region.png").stat().st_size > 10_000
    lines = pd.read_csv(tmp_path / "region" / "region_lines.csv")
    assert len(lines) == 2 * sum(k // 2 + 1 for k in range(1, 6))


def test_hetero_sizes_beyond_int64_are_logs():
    row = run("composition_hetero", eps_source="geometric", k=64, pld=False)
    typed("composition_hetero", row)
    assert row["log_exact_terms"] == pytest.approx(64 * math.log(2))
    assert row["eps_exact"] is None and math.isfinite(row["eps_approx"])


@pytest.mark.parametrize("name,params", [
    ("composition", dict(eps=math.inf)),
    ("composition_delta", dict(eps_total=math.inf)),
    ("composition_region", dict(eps=math.inf)),
    ("composition_hetero", dict(eps_source="list", eps_list=[0.1, math.inf])),
    ("composition_hetero", dict(eps_max=math.inf)),
])
def test_infinite_values_are_rejected(name, params):
    """Interval(0, None) admits inf; these domains are finite (inf used to crash the hetero
    tasks with ValueError/OverflowError instead of a ParamError before the sweep)."""
    with pytest.raises(ParamError) as info:
        get_experiment(name).resolve(**params)
    assert any(p in str(info.value) for p in params)


@pytest.mark.parametrize("name,params", [
    ("composition", dict(eps=1e-15)), ("composition_region", dict(eps=1e-20)),
    ("composition_hetero", dict(eps_source="list", eps_list=[0.1, 1e-16])),
])
def test_eps_below_minimum_is_rejected(name, params):
    """Below ~1e-15 the piecewise inverse returned 0 instead of ~k eps (wrong, and
    anti-conservative): eps < EPS_MIN = 1e-12 is refused before any task runs."""
    with pytest.raises(ParamError) as info:
        get_experiment(name).resolve(**params)
    assert any(p in str(info.value) for p in params)
    get_experiment(name).resolve(**{**params, **{k: ([0.1, ec.EPS_MIN] if isinstance(v, list)
                                                     else ec.EPS_MIN) for k, v in params.items()
                                                 if k != "eps_source"}})


@pytest.mark.parametrize("source,eps_min,eps_max,eta", [
    ("uniform", 0.01, 1.0, 0.001), ("geometric", 0.1, 2.0, 0.002), ("uniform", 0.05, 0.5, 0.01)])
def test_hetero_lattice_limit_by_bisection_matches_each_point(source, eps_min, eps_max, eta):
    """The lattice-cost check finds the first k over LATTICE_MAX_WORK once per setting and
    compares k with it: it must agree with the work computed point by point (brute force)
    around that k and far from it, and reject with the exact work in its message."""
    setting = dict(eps_source=source, eps_list=[], eps_min=eps_min, eps_max=eps_max, eta=eta,
                   delta_target=1e-6)
    first = ec._first_k_over_work_limit(source, eps_min, eps_max, eta, 1e-6)
    ks = [1, 50, 1000, ec.HETERO_K_MAX, *range(max(1, first - 40), min(ec.HETERO_K_MAX, first + 40))]
    for k in ks:
        over = ec._lattice_work({**setting, "k": k}) > ec.LATTICE_MAX_WORK
        message = ec._check_lattice({**setting, "k": k})
        assert (message is not None) == over == (k >= first), k
    if first <= ec.HETERO_K_MAX:  # the first two settings: a limit inside the domain
        assert 1000 < first < ec.HETERO_K_MAX
        work = ec._lattice_work({**setting, "k": first})
        assert f"~{work:.2g} operations" in ec._check_lattice({**setting, "k": first})


def test_hetero_validation_of_a_long_k_axis_costs_a_bisection_per_setting(monkeypatch):
    """k = 1..10^5 x 3 eps_min: point by point, each check built arrays of k values, and the
    validation ran for minutes before the sweep could start. Now the work is computed about
    log2(10^5) times per setting (counted, not timed), and a k over the limit still fails."""
    from pipeline.engine.grid import Grid

    ec._first_k_over_work_limit.cache_clear()
    calls = []
    real = ec._lattice_work
    monkeypatch.setattr(ec, "_lattice_work", lambda p: calls.append(p["k"]) or real(p))
    exp = get_experiment("composition_hetero")
    grid = Grid(exp, {"k": {"range": [1, 100_001]}, "eps_min": [0.1, 0.2, 0.3]},
                {"eps_source": "uniform", "pld": False})
    assert grid.total == 300_000
    assert len(calls) <= 3 * 18
    with pytest.raises(ParamError, match=r"lattice bounds would cost .* \(at eps_source='uniform'"):
        Grid(exp, {"k": {"range": [1, 100_001]}, "eps_min": [0.01, 0.1]},
             {"eps_source": "uniform", "pld": False, "eta": 0.001, "eps_max": 1.0})


@pytest.mark.parametrize("pld", [False, True])
def test_hetero_report_caption_names_the_pld_accountant_only_when_it_ran(tmp_path, pld):
    """With pld=false the caption still named dp-accounting's PLD accountant over an empty
    eps_pld column."""
    import pandas as pd

    from pipeline.report.core import ReportWriter, reports

    exp = get_experiment("composition_hetero")
    p = exp.resolve(eps_source="list", eps_list=[0.2, 0.3], pld=pld)
    row = exp.run(p, 0)
    assert (row["eps_pld"] is not None) == pld  # dp-accounting is a test dependency
    out = ReportWriter(tmp_path)
    for fn in reports("composition_hetero"):
        fn(pd.DataFrame([{**p, **row, "status": "ok"}]), out)
    caption = {e["name"]: e["caption"] for e in out.entries}["hetero"]
    assert ("dp-accounting's PLD accountant" in caption) == pld, caption
    assert ("the PLD accountant was not run: pld=false" in caption) == (not pld), caption


def test_eps_vs_k_single_k_y_axis_has_readable_ticks(tmp_path):
    """One k: the log y axis spans 0.96 to 1.8, under a decade, and showed one label ("1")."""
    import pandas as pd

    from pipeline.report import composition as rc
    from pipeline.report.core import ReportWriter

    exp = get_experiment("composition")
    p = exp.resolve(eps=0.1, k=10, delta=0.0, delta_target=1e-6)
    df = pd.DataFrame([{**p, **exp.run(p, 0), "status": "ok"}])
    figures = {}

    class Capture(ReportWriter):
        def figure(self, name, fig, caption=""):
            super().figure(name, fig, caption)  # sets the ticks, then closes
            figures[name] = fig

    rc.eps_against_k(df, Capture(tmp_path))
    fig = figures["eps_vs_k"]
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    shown = [(t.get_loc(), t.label1.get_text()) for t in ax.yaxis.get_major_ticks()
             if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()]
    assert len(shown) >= 2, shown
    assert hi / lo < 10 and lo <= df["eps_optimal"].iloc[0] and df["eps_drv"].iloc[0] <= hi
    for loc, text in shown:  # each label is its tick's value
        assert float(text) == pytest.approx(loc)
