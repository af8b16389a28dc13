"""Seed 003 (low influence vs DP): kernel tests against the seed's numbers (recomputed),
closed forms vs LPs, brute force over subsets, and random mechanisms."""

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pipeline.kernels import finite_mechanisms as fm
from pipeline.kernels import graphs as G

K2 = np.array([[0, 1]])


def brute_force_delta(m, edges, eps):
    """(eps, delta)-DP of Definition 1 by enumerating every subset S of V."""
    k = m.shape[1]
    best = 0.0
    for a, b in fm.ordered_edges(edges):
        for r in range(1, k + 1):
            for s in combinations(range(k), r):
                s = list(s)
                best = max(best, m[a, s].sum() - math.exp(eps) * m[b, s].sum())
    return best


# ----------------------------------------------------------------- the voting example (Sec. I)
def test_voting_example_biased_coin():
    m = fm.randomized_response(np.array([0, 1]), 2, math.log(0.55 / 0.45))
    assert m[0, 0] == pytest.approx(0.55) and m[1, 1] == pytest.approx(0.55)
    assert fm.eps_pure(m, K2) == pytest.approx(math.log(0.55 / 0.45))
    assert round(fm.eps_pure(m, K2), 1) == 0.2  # "epsilon = ln(0.55/0.45) ~ 0.2"
    assert fm.influence_independent(m, K2) == pytest.approx(0.505)  # 1 - 2 * 0.55 * 0.45
    assert fm.is_nontrivial(m, K2)


def test_voting_example_trivial_mechanism():
    m = np.array([[0.91, 0.09], [0.89, 0.11]])
    assert fm.influence_independent(m, K2) == pytest.approx(0.1802)
    # eps = max{ln(0.11/0.09), ln(0.91/0.89)} ~ 0.2
    assert fm.eps_pure(m, K2) == pytest.approx(math.log(0.11 / 0.09))
    assert round(fm.eps_pure(m, K2), 1) == 0.2
    assert not fm.is_nontrivial(m, K2)
    # "giving the wrong answer with probability 0.5 x (0.09 + 0.89) = 0.49"
    assert 0.5 * (m[0, 1] + m[1, 0]) == pytest.approx(0.49)


def test_voting_example_joint_matrix_eq2_is_shared_uniform_coupling():
    m = fm.randomized_response(np.array([0, 1]), 2, math.log(0.55 / 0.45))
    j = fm.shared_uniform_coupling(m)
    p = np.zeros((2, 2))
    for h, q in zip(j.functions, j.probs):
        p[h[0], h[1]] += q
    np.testing.assert_allclose(p, [[0.45, 0.10], [0.0, 0.45]], atol=1e-12)
    assert fm.influence_joint(j, K2) == pytest.approx(0.1)
    assert not fm.is_independent(j)
    np.testing.assert_allclose(j.marginals(), m, atol=1e-12)


# ----------------------------------------------------------------- Examples 5 and 6
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [0.0, 0.01, 0.2, 0.5, 1.0])
def test_examples_5_and_6_closed_forms_equal_lp(eps, delta):
    f = np.array([0, 1])
    u5, infl5 = fm.example5_closed_form(eps, delta)
    u6, infl6 = fm.example6_closed_form(eps, delta)
    u_ind, m_ind = fm.optimise_balanced_independent_utility(2, K2, f, 2, eps, delta)
    u_joint, iota, joint = fm.optimise_balanced_joint(2, K2, f, 2, eps, delta)
    assert u_ind == pytest.approx(u5, abs=1e-8)
    assert u_joint == pytest.approx(u6, abs=1e-8)
    assert u5 == pytest.approx(u6, abs=1e-12)  # same privacy-utility trade-off (Fig. 8)
    assert fm.influence_independent(m_ind, K2) == pytest.approx(infl5, abs=1e-7)
    assert iota == pytest.approx(infl6, abs=1e-7)
    assert infl6 <= infl5 + 1e-12
    # the joint optimum is (eps, delta)-DP and its influence is the LP value
    m_joint = joint.marginals()
    assert fm.hockey_stick_delta(m_joint, K2, eps) <= delta + 1e-7
    assert fm.influence_joint(joint, K2) == pytest.approx(iota, abs=1e-7)


@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.3, 0.0), (1.0, 0.05), (3.0, 0.3)])
def test_example5_dense_search(eps, delta):
    u5, infl5 = fm.example5_closed_form(eps, delta)
    u_dense, infl_dense = fm.example5_dense_search(eps, delta, points=400_001)
    assert u_dense == pytest.approx(u5, abs=5e-6)
    assert infl_dense == pytest.approx(infl5, abs=1e-5)
    assert infl5 >= 0.5 - 1e-12  # Theorem 1 at the optimum


def test_example6_trivial_at_eps_delta_zero():
    """ERRATA 003: at eps = delta = 0 the optimum is a tie, hence trivial."""
    u, iota, joint = fm.optimise_balanced_joint(2, K2, np.array([0, 1]), 2, 0.0, 0.0)
    assert u == pytest.approx(0.5) and iota == pytest.approx(0.0, abs=1e-9)
    m = joint.marginals()
    np.testing.assert_allclose(m, 0.5, atol=1e-9)
    assert not fm.is_nontrivial(m, K2, tol=1e-9)
    # and nontrivial as soon as eps > 0
    _, _, joint2 = fm.optimise_balanced_joint(2, K2, np.array([0, 1]), 2, 0.1, 0.0)
    assert fm.is_nontrivial(joint2.marginals(), K2, tol=1e-9)


# ----------------------------------------------------------------- Theorem 1
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5))
def test_theorem1_independent_nontrivial_influence_at_least_half(seed, k):
    rng = np.random.default_rng(seed)
    graph = G.path_graph(4)
    m = rng.dirichlet(np.full(k, 0.5), size=graph.n)
    if fm.is_nontrivial(m, graph.edges):
        assert fm.influence_independent(m, graph.edges) >= 0.5 - 1e-12


def test_theorem1_tight_example():
    m = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    edges = G.path_graph(3).edges
    assert fm.is_nontrivial(m, edges)
    assert fm.influence_independent(m, edges) == pytest.approx(0.5)


# ----------------------------------------------------------------- iota-LI => (0, iota)-DP
def random_joint(rng, n_datasets, k, support):
    funcs = rng.integers(0, k, size=(support, n_datasets))
    return fm.JointMechanism(funcs, rng.dirichlet(np.full(support, 0.7)), k)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.integers(1, 12))
def test_low_influence_implies_zero_iota_dp(seed, k, support):
    """Proposition 10 / ERRATA 003: iota-LI gives (0, iota)-DP (coupling inequality), not
    only (0, iota(|V|-1))-DP as Theorem 2 states."""
    rng = np.random.default_rng(seed)
    graph = G.random_regular(6, 3, rng)
    joint = random_joint(rng, graph.n, k, support)
    iota = fm.influence_joint(joint, graph.edges)
    m = joint.marginals()
    assert fm.hockey_stick_delta(m, graph.edges, 0.0) <= iota + 1e-12
    assert fm.vdp_delta(m, graph.edges, 0.0) <= iota + 1e-12
    assert fm.hockey_stick_delta(m, graph.edges, 0.0) == pytest.approx(
        brute_force_delta(m, graph.edges, 0.0), abs=1e-12)


def test_theorem2_loose_example():
    # three values, one edge: iota = 0.2 gives delta(0) = 0.1 < iota < iota (|V|-1) = 0.4
    funcs = np.array([[0, 0], [1, 2], [2, 2], [1, 1]])
    joint = fm.JointMechanism(funcs, np.array([0.5, 0.2, 0.2, 0.1]), 3)
    iota = fm.influence_joint(joint, K2)
    assert iota == pytest.approx(0.2)
    assert fm.hockey_stick_delta(joint.marginals(), K2, 0.0) == pytest.approx(0.2)
    funcs = np.array([[0, 0], [0, 1], [1, 2]])
    joint = fm.JointMechanism(funcs, np.array([0.8, 0.1, 0.1]), 3)
    assert fm.influence_joint(joint, K2) == pytest.approx(0.2)
    assert fm.hockey_stick_delta(joint.marginals(), K2, 0.0) == pytest.approx(0.1)


# ----------------------------------------------------------------- measures and couplings
@pytest.mark.parametrize("eps_eval", [0.0, 0.3, 1.0])
def test_hockey_stick_equals_subset_brute_force(eps_eval):
    rng = np.random.default_rng(5)
    graph = G.cycle_graph(5)
    m = rng.dirichlet(np.ones(4), size=graph.n)
    assert fm.hockey_stick_delta(m, graph.edges, eps_eval) == pytest.approx(
        brute_force_delta(m, graph.edges, eps_eval), abs=1e-12)
    assert fm.hockey_stick_delta(m, graph.edges, fm.eps_pure(m, graph.edges)) <= 1e-12
    assert fm.vdp_delta(m, graph.edges, eps_eval) <= fm.hockey_stick_delta(m, graph.edges, eps_eval) + 1e-15
    # Proposition 3: (eps, d)-VDP => (eps, (|V|-1) d)-DP
    assert fm.hockey_stick_delta(m, graph.edges, eps_eval) <= 3 * fm.vdp_delta(m, graph.edges, eps_eval) + 1e-12


@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0])
def test_randomized_response_and_geometric_eps(eps):
    graph = G.path_graph(6)
    f = fm.reference_query(fm.distance_matrix_row(graph, 0), 6)
    np.testing.assert_array_equal(f, np.arange(6))
    rr = fm.randomized_response(f, 6, eps)
    geo = fm.truncated_geometric(f, 6, eps)
    np.testing.assert_allclose(geo.sum(axis=1), 1.0)
    assert fm.eps_pure(rr, graph.edges) == pytest.approx(eps)
    assert fm.eps_pure(geo, graph.edges) == pytest.approx(eps)


def test_product_mechanism_independent_and_propositions_5_9_agree():
    rng = np.random.default_rng(1)
    graph = G.hypercube_graph(3)
    m = rng.dirichlet(np.ones(2), size=graph.n)
    prod = fm.product_mechanism(m)
    assert prod.probs.sum() == pytest.approx(1.0)
    assert fm.is_independent(prod)
    np.testing.assert_allclose(prod.marginals(), m, atol=1e-12)
    assert fm.influence_joint(prod, graph.edges) == pytest.approx(fm.influence_independent(m, graph.edges))


def test_couplings_order_and_marginals():
    rng = np.random.default_rng(2)
    graph = G.cycle_graph(5)
    m = rng.dirichlet(np.ones(3), size=graph.n)
    su = fm.shared_uniform_coupling(m)
    iota_lp, lp = fm.min_influence_coupling(m, graph.edges)
    np.testing.assert_allclose(su.marginals(), m, atol=1e-12)
    np.testing.assert_allclose(lp.marginals(), m, atol=1e-7)
    tv = fm.hockey_stick_delta(m, graph.edges, 0.0)
    assert tv - 1e-9 <= iota_lp <= fm.influence_joint(su, graph.edges) + 1e-9
    assert fm.influence_joint(su, graph.edges) <= fm.influence_independent(m, graph.edges) + 1e-12


def test_binary_shared_uniform_attains_total_variation():
    rng = np.random.default_rng(3)
    graph = G.petersen_graph()
    m = rng.dirichlet(np.ones(2), size=graph.n)
    su = fm.shared_uniform_coupling(m)
    assert fm.influence_joint(su, graph.edges) == pytest.approx(fm.hockey_stick_delta(m, graph.edges, 0.0))


@pytest.mark.parametrize("alpha", [0.01, 0.3, 0.9])
def test_theorem3_construction(alpha):
    graph = G.hypercube_graph(3)
    j = fm.theorem3_mechanism(graph.n, tuple(graph.edges[0]), 2, alpha)
    assert fm.influence_joint(j, graph.edges) == pytest.approx(alpha)
    m = j.marginals()
    assert m[graph.edges[0, 0], 0] == pytest.approx((1 + alpha) / 2)
    assert m[graph.edges[0, 1], 1] == pytest.approx((1 + alpha) / 2)
    assert fm.is_nontrivial(m, graph.edges)
    assert not fm.is_independent(j)
