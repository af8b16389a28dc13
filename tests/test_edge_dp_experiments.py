"""The edge_dp and edge_test experiments through exp.resolve + exp.run (seed 002)."""

import math

import pyarrow as pa
import pytest

from pipeline.experiments.base import ParamError
from pipeline.experiments.edge_dp import EDGE_DP, EDGE_TEST


def run(exp, seed=11, **kw):
    return exp.run(exp.resolve(**kw), seed)


def _typed(exp, rows):
    rows = rows if isinstance(rows, list) else [rows]
    assert set().union(*rows) <= set(exp.columns)
    pa.Table.from_pylist(rows, schema=pa.schema(list(exp.columns.items())))  # types fit


def test_edge_dp_er_closed_form_is_eps_for_both_mechanisms():
    for mech in ("laplace_edge_count", "randomized_response"):
        rows = run(EDGE_DP, prior="er", n=30, p=0.2, eps=0.6, mechanism=mech)
        _typed(EDGE_DP, rows)
        assert len(rows) == 1 and rows[0]["edge_class"] == "any" and rows[0]["n_dyads_in_class"] == 435
        assert rows[0]["method"] == "closed_form"
        assert rows[0]["alpha_dep"] == 0.0 and rows[0]["pufferfish_loss"] == pytest.approx(0.6, abs=1e-9)


def test_edge_dp_heterogeneous_all_gives_one_row_per_dyad():
    rows = run(EDGE_DP, prior="er", n=5, p=0.3, p_spread=1.0, edge="all")
    _typed(EDGE_DP, rows)
    assert [r["dyad"] for r in rows] == [f"{i}-{j}" for i in range(5) for j in range(i + 1, 5)]
    assert len({round(r["p_edge"], 12) for r in rows}) > 3
    assert all(r["pufferfish_loss"] == pytest.approx(1.0, abs=1e-9) for r in rows)


@pytest.mark.parametrize("mechanism", ["laplace_edge_count", "randomized_response"])
def test_edge_dp_hive_closed_form_equals_enumeration(mechanism):
    kw = dict(prior="hive", n=5, queen_prior=0.3, a=0.7, b=0.1, eps=0.8, mechanism=mechanism)
    closed = run(EDGE_DP, **kw)
    enum = run(EDGE_DP, solver="enumeration", **kw)
    assert [r["edge_class"] for r in closed] == ["queen", "other"] == [r["edge_class"] for r in enum]
    for c, e in zip(closed, enum):
        assert (c["method"], e["method"]) == ("closed_form", "enumeration")
        for col in ("p_edge", "alpha_dep", "pufferfish_loss", "bound"):
            assert c[col] == pytest.approx(e[col], rel=1e-10)
        assert c["lemma_holds"] and e["lemma_holds"]
    # the queen is far less protected than eps
    assert closed[0]["pufferfish_loss"] > 3 * 0.8


def test_edge_dp_hive_queen_loss_grows_with_n():
    losses = [run(EDGE_DP, prior="hive", n=n, edge="queen")[0]["pufferfish_loss"] for n in (4, 8, 16, 32)]
    assert all(b > a for a, b in zip(losses, losses[1:])) and losses[-1] > 100


def test_edge_dp_ergm_enumeration_chain_and_mcmc_labels():
    rows = run(EDGE_DP, prior="ergm", n=6, beta_edges=-0.5, beta_triangles=0.4, beta_kstar=-0.1)
    _typed(EDGE_DP, rows)
    r = rows[0]
    assert r["method"] == "enumeration"
    assert r["alpha_dep"] <= r["ergm_R"] <= r["ergm_2zeta"]
    assert r["pufferfish_loss"] <= r["bound"] <= r["bound_R"]
    assert "p_edge_mcmc" not in r and "alpha_dep_se" not in r  # exact rows carry no estimates
    edges_only = run(EDGE_DP, prior="ergm", n=6, beta_edges=-0.5)[0]
    assert edges_only["alpha_dep"] == pytest.approx(0.0, abs=1e-9) and edges_only["ergm_R"] == 0.0
    assert edges_only["pufferfish_loss"] == pytest.approx(1.0, abs=1e-9)

    kw = dict(prior="ergm", n=9, beta_edges=-0.5, beta_triangles=0.2, mcmc_sweeps=300, mcmc_burn_in=50)
    mc = run(EDGE_DP, seed=5, **kw)
    _typed(EDGE_DP, mc)
    m = mc[0]
    assert m["method"] == "mcmc" and "alpha_dep" not in m and "pufferfish_loss" not in m
    assert m["alpha_dep_se"] > 0 and m["pufferfish_loss_se"] > 0 and m["p_edge_se"] > 0
    assert m["alpha_dep_mcmc"] <= m["ergm_R"] + 5 * m["alpha_dep_se"]
    assert m["bound_mcmc"] == pytest.approx(1.0 + m["alpha_dep_mcmc"])
    assert run(EDGE_DP, seed=5, **kw) == mc
    assert run(EDGE_DP, seed=6, **kw) != mc


def test_edge_dp_sbm_enumeration_respects_lemma():
    for mech in ("laplace_edge_count", "randomized_response"):
        r = run(EDGE_DP, prior="sbm", n=5, blocks=2, p_in=0.8, p_out=0.1, mechanism=mech)[0]
        assert r["alpha_dep"] > 0 and r["lemma_holds"] and r["pufferfish_loss"] <= r["bound"]


@pytest.mark.parametrize("bad", [
    dict(prior="hive", a=0.3, b=0.5),                      # b < a
    dict(prior="sbm", n=8),                                 # enumeration only
    dict(prior="ergm", n=9, mechanism="randomized_response"),
    dict(prior="er", solver="mcmc"),
    dict(prior="ergm", solver="closed_form"),
    dict(prior="er", n=30, p_spread=0.5, edge="all"),
    dict(prior="er", n=151, p_spread=0.5, edge="queen"),
    dict(prior="sbm", n=7, blocks=4),
    dict(prior="galaxy"),
    dict(eps=0.0),
    dict(p=1.0),
    dict(n=2),
    dict(kstar=1),
])
def test_edge_dp_bad_values_raise(bad):
    with pytest.raises(ParamError):
        EDGE_DP.resolve(**bad)


def test_edge_test_example_1_size_to_zero_power_to_one():
    rows = [run(EDGE_TEST, n=n, eps=1.0, a=0.6, b=0.2) for n in (4, 8, 16, 32, 64, 128)]
    for r in rows:
        _typed(EDGE_TEST, r)
        assert r["threshold_used"] == pytest.approx(0.4)
        assert r["log_ratio_threshold"] <= r["pufferfish_loss"] + 1e-9 <= r["bound"] + 1e-9
        assert r["log_ratio_np"] <= r["pufferfish_loss"] + 1e-9
        assert r["size_np"] == pytest.approx(0.05, rel=1e-9) and r["lr_monotone"]
        assert r["power_np"] >= r["size_np"]
    sizes = [r["log_size_threshold"] for r in rows]
    type2 = [r["log_type2_threshold"] for r in rows]
    assert all(b < a for a, b in zip(sizes, sizes[1:])) and sizes[-1] < -500
    assert all(b < a for a, b in zip(type2, type2[1:])) and type2[-1] < -500
    assert rows[-1]["power_threshold"] == pytest.approx(1.0, abs=1e-10)
    assert rows[-1]["power_np"] == pytest.approx(1.0, abs=1e-10)


def test_edge_test_bad_values_raise():
    for bad in (dict(a=0.2, b=0.2), dict(level=1.0), dict(n=2), dict(threshold_density=1.5)):
        with pytest.raises(ParamError):
            EDGE_TEST.resolve(**bad)


@pytest.mark.parametrize("beta_edges, eps", [(-10.0, 1.0), (12.0, 1.0), (20.0, 20.0), (-20.0, 50.0)])
def test_edge_dp_mcmc_at_sparse_and_dense_ergms(beta_edges, eps):
    """An edges-only ERGM is Erdos-Renyi(expit(beta_edges)): alpha = 0 and loss = eps exactly
    (Theorem 4.1). Near-empty / near-full graphs used to crash the MCMC summary (no edge count
    visited under both e = 0 and e = 1; p_edge rounded to 1 in the logit)."""
    row = run(EDGE_DP, prior="ergm", n=8, beta_edges=beta_edges, eps=eps, solver="mcmc",
              mcmc_sweeps=100, mcmc_burn_in=10, mcmc_chains=2)[0]
    _typed(EDGE_DP, row)
    p = 1.0 / (1.0 + math.exp(-beta_edges))
    assert row["p_edge_mcmc"] == pytest.approx(p, rel=1e-12)
    assert row["alpha_dep_mcmc"] == pytest.approx(0.0, abs=1e-12)
    assert row["pufferfish_loss_mcmc"] == pytest.approx(eps, rel=1e-12)
