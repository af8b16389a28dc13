"""Experiment-level tests for `inferential` and `inferential_bethe_limit`."""

import math

import numpy as np
import pytest

from pipeline.experiments.base import ParamError
from pipeline.experiments.inferential import BETHE_LIMIT, INFERENTIAL, graph_size
from pipeline.kernels import graphs as G
from pipeline.kernels import inferential as K


def run(seed=1, **kw):
    return INFERENTIAL.run(INFERENTIAL.resolve(**kw), seed)


def test_columns_declared_and_types():
    rows = run(graph="path", n=6, J=0.4, target="all", mechanism="worst_case")
    assert [r["node"] for r in rows] == list(range(6))
    for r in rows:
        assert set(r) <= set(INFERENTIAL.columns)
        assert r["nu_over_eps"] == pytest.approx(r["nu"] / 1.0)
        assert r["affiliated"] is True and r["method"] == "tree"
    # path symmetry: node i and n-1-i
    assert rows[1]["nu"] == pytest.approx(rows[4]["nu"], rel=1e-12)


@pytest.mark.parametrize("graph,extra", [("path", dict(n=7)), ("star", dict(n=6)),
                                         ("tree", dict(branching=2, depth=2)),
                                         ("bethe", dict(degree=3, radius=2)),
                                         ("grid", dict(rows=3, cols=4)),
                                         ("cycle", dict(n=7)), ("complete", dict(n=6))])
def test_every_method_matches_brute_force(graph, extra):
    """Experiment rows (tree / transfer / enumeration) against enumeration on the same prior."""
    J, h, eps = 0.35, 0.2, 0.6
    rows = run(graph=graph, J=J, h=h, eps=eps, target="all", mechanism="noisy_sum", **extra)
    g = {"path": lambda: G.path_graph(7), "star": lambda: G.star_graph(6),
         "tree": lambda: G.complete_tree(2, 2), "bethe": lambda: G.bethe_ball(3, 2),
         "grid": lambda: G.grid_graph(3, 4), "cycle": lambda: G.cycle_graph(7),
         "complete": lambda: G.complete_graph(6)}[graph]()
    assert graph_size(INFERENTIAL.resolve(graph=graph, **extra)) == g.n == len(rows)
    prior = K.ising_prior(g, J, h)
    L = K.joint_target_sum_enumeration(prior, range(g.n))
    for a, r in enumerate(rows):
        assert r["nu"] == pytest.approx(K.noisy_statistic_nu(L[a], eps), rel=1e-10)
        assert r["nu_affiliated"] == pytest.approx(K.formula6(K.restricted_log_partitions(L[a], eps)),
                                                   rel=1e-10)
        assert r["nu"] == pytest.approx(r["nu_affiliated"], rel=1e-9)  # affiliated: Lemma 3.5


def test_copy_p_is_family_tree_coupling():
    p = 0.8
    a = run(graph="tree", branching=2, depth=3, copy_p=p)
    b = run(graph="tree", branching=2, depth=3, J=math.atanh(2 * p - 1))
    assert a[0]["J_effective"] == pytest.approx(math.atanh(0.6))
    assert a[0]["nu"] == pytest.approx(b[0]["nu"], rel=1e-14)


def test_parity_mechanisms_and_lp():
    eps = 0.5
    m1 = run(prior="parity", r=3, s=2, mechanism="M1", eps=eps)[0]
    assert m1["nu"] == pytest.approx(4 * eps, rel=1e-12)
    assert m1["affiliated"] is False
    wc = run(prior="parity", r=2, s=2, mechanism="worst_case", eps=eps)[0]
    assert wc["method"] == "LP" and wc["nu"] > wc["nu_affiliated"] + 1e-3
    assert math.isinf(wc["nu_influence_bound"])  # no full support: no Theorem 4.2 bound


def test_clones_twins_and_independent():
    for n in (2, 5):
        for mech in ("noisy_sum", "randomized_response", "worst_case"):
            r = run(prior="clones", graph="complete", n=n, mechanism=mech, eps=0.3)[0]
            assert r["nu"] == pytest.approx(n * 0.3, rel=1e-7)
    r = run(graph="grid", rows=4, cols=5, J=0.0, h=0.4, mechanism="worst_case", eps=0.7, target="7")
    assert r[0]["nu"] == pytest.approx(0.7, rel=1e-10)
    assert r[0]["nu_influence_bound"] == pytest.approx(2 * 0.7, rel=1e-10)


def test_antiferromagnet_uses_lp_and_respects_theorem_4_2():
    rows = run(graph="cycle", n=7, J=-0.15, h=0.1, mechanism="worst_case", target="all", eps=0.4)
    for r in rows:
        assert r["affiliated"] is False and r["method"] == "LP"
        assert r["gamma_spectral_radius"] < 1
        assert r["nu"] <= r["nu_influence_bound"] + 1e-7
        assert r["nu"] >= r["nu_affiliated"] - 1e-7


def test_random_graphs_come_from_the_seed():
    kw = dict(graph="erdos_renyi", n=9, p=0.4, J=0.3, target="all")
    a, b, c = run(seed=5, **kw), run(seed=5, **kw), run(seed=6, **kw)
    assert [r["nu"] for r in a] == [r["nu"] for r in b]
    assert [r["nu"] for r in a] != [r["nu"] for r in c]
    t = run(seed=3, graph="random_tree", n=40, J=0.3, target="all")
    assert {r["method"] for r in t} == {"tree"} and len(t) == 40
    rr = run(seed=3, graph="random_regular", n=10, degree=3, J=0.3)
    assert rr[0]["method"] == "enumeration"


def test_large_bethe_ball_and_grid_beyond_enumeration():
    b = run(graph="bethe", degree=3, radius=9, J=0.2, eps=0.5, mechanism="worst_case")[0]
    assert b["n_nodes"] == 1534 and b["method"] == "tree"
    assert b["nu"] <= K.bethe_limit_nu(3, 0.2, 0.5) + 1e-12
    assert b["gamma_spectral_radius"] < 1 and b["nu"] <= b["nu_influence_bound"]
    g = run(graph="grid", rows=7, cols=7, J=0.2, eps=0.5, target="24")[0]
    assert g["method"] == "transfer" and g["nu"] == pytest.approx(g["nu_affiliated"], rel=1e-9)


@pytest.mark.parametrize("bad", [
    dict(graph="complete", n=25),  # enumeration limit: a PointCheck naming the faster methods
    dict(graph="cycle", n=31, J=-0.2, mechanism="worst_case"),  # odd antiferromagnet, > 24
    dict(graph="cycle", n=15, J=-0.2, mechanism="worst_case"),  # odd cycle: LP limit 12
    dict(target="eight"), dict(target="8"), dict(mechanism="M1"), dict(eps=0.0),
    dict(graph="hypercube"), dict(prior="potts"), dict(copy_p=1.0), dict(graph="cycle", n=2),
    dict(graph="random_regular", n=7, degree=3), dict(prior="parity", r=5, s=5),
])
def test_bad_values_raise_param_error(bad):
    with pytest.raises(ParamError):
        INFERENTIAL.resolve(**bad)


def test_enumeration_limit_message_names_methods():
    with pytest.raises(ParamError, match="transfer matrices"):
        INFERENTIAL.resolve(graph="erdos_renyi", n=30)


def test_bethe_limit_experiment():
    r = BETHE_LIMIT.run(BETHE_LIMIT.resolve(degree=3, J=0.3, eps=0.1), 0)
    assert r["nu"] == pytest.approx(K.bethe_limit_nu(3, 0.3, 0.1))
    assert r["J_critical"] == pytest.approx(math.atanh(0.5))
    assert r["supercritical"] is False and r["nu_eps_to_zero"] == 0.0
    hot = BETHE_LIMIT.run(BETHE_LIMIT.resolve(degree=3, J=0.8, eps=0.1), 0)
    assert hot["supercritical"] is True and hot["nu_eps_to_zero"] > 0 and hot["slope_at_zero"] is None
    # nu/eps grows without bound as J -> J_c from below (small eps)
    vals = [BETHE_LIMIT.run(BETHE_LIMIT.resolve(degree=3, J=j, eps=1e-4), 0)["nu_over_eps"]
            for j in (0.3, 0.45, 0.53, 0.545)]
    assert np.all(np.diff(vals) > 0) and vals[-1] > 50
    with pytest.raises(ParamError):
        BETHE_LIMIT.resolve(degree=3, J=-0.1)
    with pytest.raises(ParamError):
        BETHE_LIMIT.resolve(degree=1)


@pytest.mark.parametrize("graph,extra", [("star", dict(n=6)), ("grid", dict(rows=3, cols=3)),
                                         ("path", dict(n=7)), ("cycle", dict(n=8))])
def test_antiferromagnet_on_bipartite_graphs_beyond_the_lp(graph, extra):
    """Gauge transform (tree / transfer) against the LP on the same small prior."""
    rows = run(graph=graph, J=-0.3, h=0.2, eps=0.5, mechanism="worst_case", target="all", **extra)
    g = {"star": lambda: G.star_graph(6), "grid": lambda: G.grid_graph(3, 3),
         "path": lambda: G.path_graph(7), "cycle": lambda: G.cycle_graph(8)}[graph]()
    prior = K.ising_prior(g, -0.3, 0.2)
    for a, r in enumerate(rows):
        assert r["method"] in ("tree", "transfer") and r["affiliated"] is False
        assert r["nu"] == pytest.approx(K.worst_case_lp(prior, a, 0.5), rel=1e-6)
    big = run(graph="grid", rows=6, cols=7, J=-0.3, h=0.2, eps=0.5, mechanism="randomized_response",
              target="10")[0]
    assert big["method"] == "transfer" and big["nu"] >= big["nu_affiliated"] - 1e-9


def test_graph_seed_fixes_the_random_graph_across_a_sweep():
    kw = dict(graph="random_tree", n=15, target="all", graph_seed=4)
    a, b = run(seed=1, **kw), run(seed=2, **kw)
    assert [r["nu"] for r in a] == [r["nu"] for r in b]
    g = G.random_tree(15, np.random.default_rng(4))
    prior = K.ising_prior(g, 0.5, 0.0)
    logz = K.tree_logz_all(prior, 1.0)
    assert a[3]["nu"] == pytest.approx(K.formula6({k: v[3] for k, v in logz.items()}), rel=1e-12)


def test_long_cycles_by_transfer():
    r = run(graph="cycle", n=500, J=0.4, eps=0.5, mechanism="noisy_sum", target="all")
    assert len(r) == 500 and {x["method"] for x in r} == {"transfer"}
    assert r[0]["nu"] == pytest.approx(r[321]["nu"], rel=1e-12)  # rotation invariance
    # a long cycle looks like the middle of a long path (correlation length ~ 1/|ln tanh J|)
    mid = run(graph="path", n=501, J=0.4, eps=0.5, mechanism="noisy_sum", target="250")[0]
    assert r[0]["nu"] == pytest.approx(mid["nu"], rel=1e-8)


@pytest.mark.parametrize("bad", [
    dict(prior="parity", r=5, s=2, mechanism="worst_case", eps=3.0),   # HiGHS failed
    dict(graph="complete", n=5, J=-0.4, h=0.2, mechanism="worst_case", eps=15.0),  # silently low
])
def test_lp_worst_case_beyond_its_eps_limit_raises_param_error(bad):
    with pytest.raises(ParamError, match="eps"):
        INFERENTIAL.resolve(**bad)
    INFERENTIAL.resolve(**dict(bad, eps=2.5))
    if bad.get("prior") != "parity":  # formula (6) / gauge need no LP: any eps
        INFERENTIAL.resolve(**dict(bad, J=0.4))


def test_lp_worst_case_exact_at_its_eps_limit():
    """At eps = 2.5 the LP still gives M1's (r + 1) eps on the parity prior (App. A.1) and stays
    above randomized response on an antiferromagnetic K_5."""
    row = run(prior="parity", r=3, s=3, mechanism="worst_case", eps=2.5)[0]
    assert row["method"] == "LP" and row["nu"] == pytest.approx(4 * 2.5, rel=1e-9)
    lp = run(graph="complete", n=5, J=-0.4, h=0.2, mechanism="worst_case", eps=2.5)[0]
    rr = run(graph="complete", n=5, J=-0.4, h=0.2, mechanism="randomized_response", eps=2.5)[0]
    assert lp["method"] == "LP" and lp["nu"] >= rr["nu"] - 1e-9


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sizes,limit", [
    (dict(graph="tree", branching=2, depth=10**12), r"tree recursion limited.*at least 2\^64"),
    (dict(graph="tree", branching=2, depth=10**6), "tree recursion limited"),  # ValueError
    (dict(graph="bethe", degree=3, radius=10**12), r"limited.*\(got at least 2\^64\)"),  # hung
    (dict(graph="tree", branching=2, depth=20), r"limited to n <= 2000000 nodes \(got 2097151\)"),
    (dict(graph="grid", rows=3, cols=10**9, target="all"), "transfer matrices limited"),  # hung
])
def test_huge_graph_sizes_are_refused_at_once(sizes, limit):
    """Validation refuses a graph beyond the size limits at once, naming the limit: the
    exact node count of a tree of depth 10^12 (a power of 2 with 10^11 digits) and the
    orbits of a 3 x 10^9 grid were computed first, and validation never ended; a depth of
    10^6 overflowed the message's digits (ValueError with a traceback)."""
    with pytest.raises(ParamError, match=limit):
        INFERENTIAL.resolve({"target": "0", **sizes}, prior="ising", mechanism="worst_case")
    assert graph_size(dict(graph="tree", branching=3, depth=4)) == (3**5 - 1) // 2
    assert graph_size(dict(graph="bethe", degree=3, radius=6)) == 1 + 3 * (2**6 - 1)
