"""Thesis ch. 5 (seed 004): optimal eps-DP channels on dataset graphs, bounds, Hamming closed
forms, orbit reduction, and the automorphism symmetrisation of Lemma 5.3.2."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pipeline.kernels import finite_mechanisms as fm
from pipeline.kernels import graphs as G

SMALL = {
    "K2": (G.complete_graph(2), "K2", {}),
    "path5": (G.path_graph(5), "path", {}),
    "cycle6": (G.cycle_graph(6), "cycle", {}),
    "cycle7": (G.cycle_graph(7), "cycle", {}),
    "complete5": (G.complete_graph(5), "complete", {}),
    "star6": (G.star_graph(6), "star", {}),
    "hypercube3": (G.hypercube_graph(3), "hypercube", {"u": 3}),
    "hamming23": (G.hamming_graph(2, 3), "hamming", {"u": 2, "v": 3}),
    "petersen": (G.petersen_graph(), "petersen", {}),
    "tree": (G.complete_tree(2, 2), "tree", {}),
}


def borders(graph):
    return [fm.border_profile(r) for r in fm.distance_matrix(graph)]


def generators(key):
    graph, family, kw = SMALL[key]
    if family == "tree":
        return fm.networkx_automorphisms(graph)
    return fm.automorphism_generators(family, graph, **kw)


@pytest.mark.parametrize("key", sorted(SMALL))
@pytest.mark.parametrize("eps", [0.0, 0.4, 1.5])
def test_lp_below_tight_bound_with_equality_on_vertex_transitive(key, eps):
    graph = SMALL[key][0]
    util, channel, _ = fm.dp_channel_lp_full(graph, eps)
    tight = fm.tight_utility_bound_from_borders(borders(graph), eps)
    assert fm.is_dp_channel(channel, graph.edges, eps, tol=1e-7)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, atol=1e-7)
    assert util <= tight * (1 + 1e-7)
    vt = fm.is_vertex_transitive(graph, generators(key))
    assert vt == fm.is_vertex_transitive(graph)  # generators vs networkx rooted isomorphisms
    if vt:
        assert util == pytest.approx(tight, rel=1e-7)
    # uniform-prior leakage of the optimum is log2(|A| U*) (Bayes post-processing argument)
    assert fm.min_entropy_leakage_bits(channel) == pytest.approx(math.log2(graph.n * util), abs=1e-6)


def test_tight_bound_strict_on_path():
    graph = G.path_graph(5)
    util, _, _ = fm.dp_channel_lp_full(graph, 1.0)
    assert util < fm.tight_utility_bound_from_borders(borders(graph), 1.0) - 1e-3


@pytest.mark.parametrize("key", sorted(SMALL))
def test_orbit_lp_equals_full_lp(key):
    graph = SMALL[key][0]
    for eps in (0.3, 2.0):
        full, _, _ = fm.dp_channel_lp_full(graph, eps)
        red, lab, x, info = fm.dp_channel_lp_orbits(graph, eps, generators(key))
        assert red == pytest.approx(full, rel=1e-7)
        channel = fm.channel_from_orbitals(lab, x, graph.n)
        assert fm.is_dp_channel(channel, graph.edges, eps, tol=1e-7)
        assert info["variables"] <= graph.n ** 2


@pytest.mark.parametrize("u,v", [(1, 2), (1, 5), (2, 2), (2, 3), (3, 2), (2, 4)])
@pytest.mark.parametrize("eps", [0.0, 0.5, 2.0, 6.0])
def test_hamming_closed_forms_equal_full_lp(u, v, eps):
    graph = G.hamming_graph(u, v)
    util, channel, _ = fm.dp_channel_lp_full(graph, eps)
    closed = fm.hamming_utility_closed_form(u, v, eps)
    lam = math.exp(eps)
    assert closed == pytest.approx((lam / (lam + v - 1)) ** u, rel=1e-12)
    assert util == pytest.approx(closed, rel=1e-7)
    assert fm.min_entropy_leakage_bits(channel) == pytest.approx(
        fm.hamming_leakage_closed_form_bits(u, v, eps), abs=1e-6)
    assert fm.hamming_leakage_closed_form_bits(u, v, eps) == pytest.approx(
        u * math.log2(v * lam / (lam + v - 1)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("u,v", [(4, 6), (12, 2), (3, 10), (6, 4), (20, 2)])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_hamming_distance_class_lp_equals_closed_form_large(u, v, eps):
    b, pairs = fm.hamming_distance_class_data(u, v)
    assert b.sum() == v ** u
    util, x = fm.distance_class_lp(b, pairs, eps)
    assert util == pytest.approx(fm.hamming_utility_closed_form(u, v, eps), rel=1e-7)


def test_distance_class_data_matches_closed_form_and_orbit_lp_on_thousands():
    graph = G.hamming_graph(3, 10)  # |D| = 1000
    b, pairs = fm.distance_class_data(graph)
    b2, pairs2 = fm.hamming_distance_class_data(3, 10)
    np.testing.assert_array_equal(b, b2)
    util, _ = fm.distance_class_lp(b, pairs, 1.0)
    assert util == pytest.approx(fm.hamming_utility_closed_form(3, 10, 1.0), rel=1e-7)
    gens = fm.hamming_generators(3, 10)
    assert fm.vertex_orbits(graph.n, gens).max() == 0
    # the generic orbitals of S_v wr S_u are exactly the distance classes
    lab = fm.orbitals(graph.n, gens)
    assert lab.max() + 1 == 4


def test_thesis_theorem_533_fails_on_star_k15():
    """ERRATA 004: Theorem 5.3.3 needs a vertex-transitive graph. On K_{1,5} the LP optimum
    exceeds the bound at the centre (the vertex with the largest c and n)."""
    graph = G.star_graph(6)
    fails = []
    for eps in np.linspace(0.1, 6.0, 30):
        util, _, _ = fm.dp_channel_lp_full(graph, float(eps))
        per_vertex = fm.thesis_bounds_from_borders(borders(graph), float(eps))
        lam = math.exp(eps)
        assert per_vertex[0] == pytest.approx(lam / (lam + 5))  # centre: n = 1, c = 5
        assert per_vertex[1] == pytest.approx(lam ** 2 / (lam ** 2 + lam + 1))  # leaf: n = 2, c = 1
        fails.append(util > per_vertex.min() * (1 + 1e-6))
        if lam >= 4:  # explicit mechanism: U = (3 lam - 2)/(3 (lam + 1)) > lam/(lam + 5)
            assert util >= (3 * lam - 2) / (3 * (lam + 1)) - 1e-9
    assert all(fails)


@pytest.mark.parametrize("key", ["cycle7", "hypercube3", "petersen", "complete5", "hamming23"])
def test_thesis_theorem_533_holds_on_vertex_transitive(key):
    graph = SMALL[key][0]
    for eps in (0.2, 1.0, 3.0):
        util, _, _ = fm.dp_channel_lp_full(graph, eps)
        assert util <= fm.thesis_bounds_from_borders(borders(graph), eps).min() * (1 + 1e-7)


def test_thesis_bound_eps_zero_limit():
    for ecc, c in [(1, 5), (3, 2), (4, 7)]:
        assert fm.thesis_bound_single(ecc, c, 0.0) == pytest.approx(fm.thesis_bound_single(ecc, c, 1e-7), rel=1e-5)
        lam = math.exp(0.7)  # the printed form (5.6)
        printed = lam ** ecc * (1 - lam) / (lam ** ecc * (1 - lam) + c * (1 - lam ** ecc))
        assert fm.thesis_bound_single(ecc, c, 0.7) == pytest.approx(printed, rel=1e-12)


def random_dp_channel(graph, eps, rng):
    """A random vertex of the eps-DP channel polytope (random objective), Bayes-remapped so
    that each column's maximum is on the diagonal (the hypothesis of Lemma 5.3.2)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    n = graph.n
    oe = fm.ordered_edges(graph.edges)
    lam = math.exp(eps)
    rows, cols, vals = [], [], []
    r = 0
    for h, l in oe:
        for k in range(n):
            rows += [r, r]
            cols += [h * n + k, l * n + k]
            vals += [1.0, -lam]
            r += 1
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(r, n * n))
    a_eq = sp.csr_matrix((np.ones(n * n), (np.repeat(np.arange(n), n), np.arange(n * n))), shape=(n, n * n))
    res = linprog(-rng.random(n * n), A_ub=a_ub, b_ub=np.zeros(r), A_eq=a_eq, b_eq=np.ones(n), method="highs")
    return fm.bayes_remap(np.maximum(res.x, 0).reshape(n, n))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["cycle6", "hypercube3", "petersen", "star6", "path5"]),
       st.floats(0.1, 3.0))
def test_lemma_532_symmetrisation(seed, key, eps):
    graph = SMALL[key][0]
    channel = random_dp_channel(graph, eps, np.random.default_rng(seed))
    assert np.all(np.diag(channel) >= channel.max(axis=0) - 1e-9)
    group = fm.group_closure(generators(key))
    sym = fm.symmetrise(channel, group)
    props = fm.lemma532_properties(channel, sym, graph.edges, eps, tol=1e-7)
    assert props["sym_dp"]
    assert props["sym_diagonal_is_column_max"]
    assert props["sym_min_entropy_equal"]
    assert np.trace(sym) == pytest.approx(np.trace(channel))
    # (2) constant diagonal holds when Aut is transitive; on the star and the path it can fail
    if fm.is_vertex_transitive(graph, generators(key)):
        assert props["sym_diagonal_constant"]


def test_lemma_532_constant_diagonal_fails_on_star():
    graph = SMALL["star6"][0]
    _, channel, _ = fm.dp_channel_lp_full(graph, 1.0)
    channel = fm.bayes_remap(channel)
    sym = fm.symmetrise(channel, fm.group_closure(generators("star6")))
    assert not fm.lemma532_properties(channel, sym, graph.edges, 1.0)["sym_diagonal_constant"]


def test_group_orders_and_automorphisms():
    assert len(fm.group_closure(fm.hamming_generators(3, 2))) == 48  # 2^3 3!
    assert len(fm.group_closure(fm.hamming_generators(2, 3))) == 72  # 3!^2 2!
    assert len(fm.networkx_automorphisms(G.petersen_graph())) == 120
    assert len(fm.group_closure(fm.automorphism_generators("cycle", G.cycle_graph(7)))) == 14
    assert len(fm.group_closure(fm.automorphism_generators("star", G.star_graph(6)))) == 120


def test_min_entropy_leakage_definition():
    rng = np.random.default_rng(0)
    channel = rng.dirichlet(np.ones(5), size=4)
    prior = np.full(4, 0.25)
    h_prior = -math.log2(prior.max())
    joint = prior[:, None] * channel
    h_post = -math.log2(joint.max(axis=0).sum())
    assert fm.min_entropy_leakage_bits(channel) == pytest.approx(h_prior - h_post)
    assert fm.conditional_min_entropy_bits(channel) == pytest.approx(h_post)


def test_lemma_532_claim_3_as_printed_fails():
    """ERRATA: claim (3) prints M'_{i,i} = max^i M (column max of the *original* M); the proof
    (5.4) shows M'_{k,k} = max^k M'. The printed form fails on a random eps-DP channel."""
    graph = SMALL["cycle6"][0]
    channel = random_dp_channel(graph, 1.0, np.random.default_rng(3))
    sym = fm.symmetrise(channel, fm.group_closure(generators("cycle6")))
    assert np.allclose(np.diag(sym), sym.max(axis=0))
    assert not np.allclose(np.diag(sym), channel.max(axis=0))


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([(8, 3), (10, 3), (12, 4)]), st.floats(0.2, 3.0))
def test_lp_below_tight_and_thesis_relation_on_random_regular(seed, shape, eps):
    n, degree = shape
    graph = G.random_regular(n, degree, np.random.default_rng(seed))
    dist = fm.distance_matrix(graph)
    if np.any(dist < 0):
        return
    util, channel, _ = fm.dp_channel_lp_full(graph, eps)
    b = borders(graph)
    assert util <= fm.tight_utility_bound_from_borders(b, eps) * (1 + 1e-7)
    # the per-vertex bound (5.6) is never below 1/S_a at that vertex
    s = np.array([np.sum(r * np.exp(-eps * np.arange(r.size))) for r in b])
    assert np.all(fm.thesis_bounds_from_borders(b, eps) >= 1 / s - 1e-12)
    if not fm.is_vertex_transitive(graph):
        assert fm.vertex_orbits(graph.n, fm.networkx_automorphisms(graph)).max() > 0
