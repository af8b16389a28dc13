"""The ``low_influence`` experiment through resolve + run, and its parameter limits."""

import math

import pytest

from pipeline.experiments.base import ParamError
from pipeline.experiments.low_influence import COLUMNS, EXPERIMENT as EXP
from pipeline.kernels import finite_mechanisms as fm


def run(**kw):
    row = EXP.run(EXP.resolve(**kw), 12345)
    assert set(row) <= set(COLUMNS)
    return row


def test_voting_example_rows():
    row = run(graph="K2", mechanism="rr_binary", eps=math.log(0.55 / 0.45))
    assert row["influence"] == pytest.approx(0.505)
    assert row["eps_pure"] == pytest.approx(math.log(0.55 / 0.45))
    assert row["utility"] == pytest.approx(0.55)
    assert row["nontrivial"] and row["independent"]
    assert row["delta_at_eps"] == pytest.approx(0.1)  # eps_eval = 0: total variation
    joint = run(graph="K2", mechanism="rr_binary", eps=math.log(0.55 / 0.45), coupling="shared_uniform")
    assert joint["influence"] == pytest.approx(0.1)
    assert joint["independent"] is False
    assert joint["eps_pure"] == pytest.approx(row["eps_pure"])
    assert joint["influence_independent"] == pytest.approx(0.505)


@pytest.mark.parametrize("kw", [
    dict(graph="path", n=5, mechanism="rr_kary", k=3, coupling="lp_optimal"),
    dict(graph="cycle", n=5, mechanism="truncated_geometric", k=3, coupling="shared_uniform"),
    dict(graph="hypercube", u=3, mechanism="dirichlet", k=2, coupling="independent"),
    dict(graph="petersen", mechanism="theorem3", alpha=0.2),
    dict(graph="star", n=5, mechanism="rr_binary", coupling="lp_optimal"),
    dict(graph="random_regular", n=8, degree=3, mechanism="dirichlet", k=2, coupling="lp_optimal"),
])
def test_mechanism_rows_consistent(kw):
    row = run(**kw)
    assert row["tv_max"] <= row["influence"] + 1e-7  # iota-LI => (0, iota)-DP
    assert row["influence"] <= row["influence_independent"] + 1e-7
    assert row["theorem2_delta"] == pytest.approx(row["influence"] * (row["n_values"] - 1))
    if row["independent"] and row["nontrivial"]:
        assert row["influence"] >= 0.5 - 1e-12  # Theorem 1
    if kw["mechanism"] == "theorem3":
        assert row["influence"] == pytest.approx(0.2) and row["nontrivial"]


def test_random_regular_and_dirichlet_reproducible_from_seed():
    p = EXP.resolve(graph="random_regular", n=10, degree=3, mechanism="dirichlet", k=3)
    assert EXP.run(p, 7) == EXP.run(p, 7)
    assert EXP.run(p, 7)["influence"] != EXP.run(p, 8)["influence"]


@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.5, 0.0), (1.0, 0.1)])
def test_optimise_mode_examples_5_6(eps, delta):
    row = run(mode="optimise", eps=eps, delta=delta)
    u5, i5 = fm.example5_closed_form(eps, delta)
    _, i6 = fm.example6_closed_form(eps, delta)
    assert row["utility"] == pytest.approx(u5, abs=1e-8)
    assert row["utility_independent_lp"] == pytest.approx(u5, abs=1e-8)
    assert row["influence_independent"] == pytest.approx(i5)
    assert row["influence_independent_dense"] == pytest.approx(i5, abs=1e-4)
    assert row["influence_joint"] == pytest.approx(i6, abs=1e-7)
    assert row["nontrivial"] == (eps > 0 or delta > 0)


@pytest.mark.parametrize("kw,param", [
    (dict(graph="cycle", n=2), "graph"),
    (dict(graph="path", n=20, coupling="lp_optimal"), "coupling"),
    (dict(mode="optimise", graph="path"), "mode"),
    (dict(graph="hamming", u=5, v=6), "graph"),
    (dict(eps=-1.0), "eps"),
    (dict(mechanism="laplace"), "mechanism"),
    (dict(k=1), "k"),
])
def test_bad_values_raise(kw, param):
    with pytest.raises(ParamError) as err:
        EXP.resolve(**kw)
    assert param in str(err.value)


@pytest.mark.parametrize("eps", [8.0, 15.0])
@pytest.mark.parametrize("delta", [0.0, 0.3, 1.0])
def test_optimise_mode_exact_up_to_its_eps_limit(eps, delta):
    """The optimise LPs stay equal to the closed forms of Examples 5 and 6 up to eps = 15; at
    eps = 20 they returned utility 2e-9 and influence_joint 0 (silently), at 30 'unbounded'."""
    row = run(mode="optimise", eps=eps, delta=delta)
    u6, i6 = fm.example6_closed_form(eps, delta)
    assert row["utility"] == pytest.approx(u6, abs=1e-8)
    assert row["influence_joint"] == pytest.approx(i6, abs=1e-7)
    assert row["influence_independent"] == pytest.approx(fm.example5_closed_form(eps, delta)[1], abs=1e-12)


@pytest.mark.parametrize("eps", [16.0, 20.0, 50.0])
def test_optimise_mode_rejects_eps_beyond_the_lp_limit(eps):
    with pytest.raises(ParamError) as err:
        EXP.resolve(mode="optimise", eps=eps)
    assert "eps" in str(err.value) and "15" in str(err.value)
    EXP.resolve(mode="mechanism", eps=eps)  # the mechanism mode has no LP in eps
