"""The ``leakage`` experiment through resolve + run, and its parameter limits."""

import math

import pytest

from pipeline.experiments.base import ParamError
from pipeline.experiments.leakage import COLUMNS, EXPERIMENT as EXP


def run(**kw):
    row = EXP.run(EXP.resolve(**kw), 99)
    assert set(row) <= set(COLUMNS)
    return row


@pytest.mark.parametrize("kw", [
    dict(graph="hypercube", u=3, eps=1.0),
    dict(graph="petersen", eps=0.5),
    dict(graph="cycle", n=9, eps=2.0),
    dict(graph="hamming", u=2, v=3, eps=1.0),
])
def test_vertex_transitive_rows(kw):
    row = run(**kw)
    assert row["vertex_transitive"]
    assert row["tight_bound_attained"] and row["thesis_bound_holds"]
    assert row["utility_optimal"] == pytest.approx(row["utility_tight_bound"], rel=1e-7)
    assert row["leakage_bits"] == pytest.approx(math.log2(row["n_datasets"] * row["utility_optimal"]), abs=1e-6)
    assert all(row[c] for c in ("sym_dp", "sym_diagonal_constant", "sym_diagonal_is_column_max",
                                "sym_min_entropy_equal"))


def test_star_k15_row():
    row = run(graph="star", n=6, eps=1.0)
    assert not row["vertex_transitive"]
    assert not row["thesis_bound_holds"]
    assert row["thesis_bound_violations"] == 1  # only the centre's bound fails
    assert row["utility_optimal"] < row["utility_tight_bound"]
    assert row["sym_dp"] and not row["sym_diagonal_constant"]


@pytest.mark.parametrize("u,v", [(4, 6), (12, 2), (3, 10)])
def test_large_hamming_uses_distance_classes(u, v):
    row = run(graph="hamming" if v > 2 else "hypercube", u=u, v=v, eps=0.8)
    assert row["n_datasets"] == v ** u and row["n_datasets"] >= 1000
    assert row["solver_used"] == "distance_class_lp"
    assert row["utility_optimal"] == pytest.approx(row["utility_closed_form"], rel=1e-7)
    assert row["leakage_bits"] == pytest.approx(row["leakage_closed_form_bits"], abs=1e-6)


def test_solvers_agree_on_hypercube_and_star():
    full = run(graph="hypercube", u=4, eps=1.3, solver="full_lp")
    orbit = run(graph="hypercube", u=4, eps=1.3, solver="orbit_lp")
    assert full["solver_used"] == "full_lp" and orbit["solver_used"] == "distance_class_lp"
    assert full["utility_optimal"] == pytest.approx(orbit["utility_optimal"], rel=1e-7)
    big_star = run(graph="star", n=200, eps=1.0)
    assert big_star["solver_used"] == "orbit_lp" and big_star["lp_variables"] == 5
    assert not big_star["thesis_bound_holds"]


@pytest.mark.parametrize("kw,param", [
    (dict(graph="path", n=100), "graph"),
    (dict(graph="hamming", u=20, v=3), "graph"),
    (dict(graph="petersen", solver="simplex"), "solver"),
    (dict(eps=25.0), "eps"),
    (dict(graph="random_regular", n=9, degree=3), "graph"),
])
def test_bad_values_raise(kw, param):
    with pytest.raises(ParamError) as err:
        EXP.resolve(**kw)
    assert param in str(err.value)



@pytest.mark.parametrize("eps", [8.0, 15.0])
def test_large_eps_rows_against_closed_forms(eps):
    """Up to the eps limit the LP stays exact near U = 1: on K_{1,5} the optimum is
    (3 lam - 2)/(3 (lam + 1)) (lam >= 4, errata), above the centre's thesis bound lam/(lam + 5)
    and below the tight bound; both solvers agree; vertex-transitive graphs attain the tight
    bound (slack relative to 1 - bound near 1)."""
    lam = math.exp(eps)
    for solver in ("full_lp", "orbit_lp"):
        row = run(graph="star", n=6, eps=eps, solver=solver)
        assert 1 - row["utility_optimal"] == pytest.approx(1 - (3 * lam - 2) / (3 * (lam + 1)), rel=1e-6)
        assert row["utility_thesis_bound"] == pytest.approx(lam / (lam + 5), abs=1e-15)
        assert row["utility_tight_bound"] == pytest.approx(lam ** 2 / (lam ** 2 + lam + 4), abs=1e-15)
        assert not row["thesis_bound_holds"] and row["thesis_bound_violations"] == 1
        assert not row["tight_bound_attained"]
    for kw in (dict(graph="petersen"), dict(graph="complete", n=6), dict(graph="hypercube", u=12),
               dict(graph="cycle", n=100)):
        vt = run(eps=eps, **kw)
        assert vt["tight_bound_attained"] and vt["thesis_bound_holds"]


@pytest.mark.parametrize("eps", [16.0, 20.0])
def test_eps_beyond_the_lp_limit_is_rejected(eps):
    """From eps = 16 the orbit LP returned U ~ 0 on K_{1,5} (HiGHS tolerance vs e^-eps entries)."""
    with pytest.raises(ParamError) as err:
        EXP.resolve(graph="star", n=6, eps=eps)
    assert "eps" in str(err.value)
