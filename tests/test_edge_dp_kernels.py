"""Kernels of the edge_dp family (seed 002): priors, enumeration, exact losses, bounds, MCMC."""

import math
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from pipeline.kernels import network_priors as npr
from pipeline.kernels import pufferfish as pf


def graph_of(code: int, n: int) -> nx.Graph:
    g = nx.empty_graph(n)
    g.add_edges_from(e for d, e in enumerate(npr.dyads(n)) if code >> d & 1)
    return g


class RandomPrior:
    """An arbitrary prior over all graphs on n nodes (random log weights)."""

    def __init__(self, n, rng, scale=1.5):
        self.n = n
        self.lw = scale * rng.standard_normal(1 << npr.n_dyads(n))

    def log_weights(self, graphs):
        return self.lw[graphs]


# --------------------------------------------------------------------------- statistics vs networkx


def test_graph_statistics_match_networkx():
    n = 6
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 1 << npr.n_dyads(n), size=60).astype(np.uint32)
    tri = npr.triangle_counts(codes, n)
    s2 = npr.kstar_counts(codes, n, 2)
    s3 = npr.kstar_counts(codes, n, 3)
    for code, t, a, b in zip(codes, tri, s2, s3):
        g = graph_of(int(code), n)
        assert t == sum(nx.triangles(g).values()) // 3
        degs = [d for _, d in g.degree()]
        assert a == sum(math.comb(d, 2) for d in degs)
        assert b == sum(math.comb(d, 3) for d in degs)
        assert npr.edge_counts(np.array([code], dtype=np.uint32))[0] == g.number_of_edges()


def test_dyad_index_and_one_factorization_cover_all_dyads():
    for n in (4, 5, 7, 10):
        assert [npr.dyad_index(n, i, j) for i, j in npr.dyads(n)] == list(range(npr.n_dyads(n)))
        seen = []
        for I, J in npr.one_factorization(n):
            nodes = np.concatenate([I, J])
            assert len(set(nodes.tolist())) == nodes.size  # a matching
            seen += list(zip(I.tolist(), J.tolist()))
        assert sorted(seen) == npr.dyads(n)


# --------------------------------------------------------------------------- pmfs and mechanisms


def test_binomial_and_poisson_binomial_pmfs():
    np.testing.assert_allclose(np.exp(pf.log_binom_pmf(30, 0.37)), stats.binom.pmf(np.arange(31), 30, 0.37),
                               rtol=1e-12, atol=1e-300)
    probs = [0.1, 0.5, 0.93, 0.27, 0.6]
    direct = np.array([1.0])
    for p in probs:
        direct = np.convolve(direct, [1 - p, p])
    np.testing.assert_allclose(np.exp(pf.log_poisson_binomial_pmf(probs)), direct, rtol=1e-12)
    assert pf.log_binom_pmf(5, 0.0)[0] == 0.0 and np.all(np.isneginf(pf.log_binom_pmf(5, 0.0)[1:]))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
def test_laplace_loss_against_dense_grid(eps):
    """Exact sup vs the density ratio on a dense output grid (scipy Laplace as the oracle)."""
    rng = np.random.default_rng(int(eps * 10))
    p1, p0 = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    p1[2] = 0.0  # a hole in one support
    p1 /= p1.sum()
    with np.errstate(divide="ignore"):
        loss, where = pf.laplace_count_loss(np.log(p1), np.log(p0), eps)
    o = np.concatenate([np.linspace(-40, 46, 20001), np.arange(-40, 47)])  # integers included
    k = np.arange(7)
    f1 = (p1[None, :] * stats.laplace.pdf(o[:, None] - k[None, :], scale=1 / eps)).sum(axis=1)
    f0 = (p0[None, :] * stats.laplace.pdf(o[:, None] - k[None, :], scale=1 / eps)).sum(axis=1)
    grid_sup = np.max(np.abs(np.log(f1) - np.log(f0)))
    assert grid_sup <= loss + 1e-9
    assert grid_sup >= loss - 1e-9  # integer points and |o| beyond the support reach the sup
    # the two limits, by their definition
    plus = math.log((p1 * np.exp(eps * k)).sum() / (p0 * np.exp(eps * k)).sum())
    minus = math.log((p1 * np.exp(-eps * k)).sum() / (p0 * np.exp(-eps * k)).sum())
    assert loss >= max(abs(plus), abs(minus)) - 1e-12


def test_rr_channel_matches_kronecker_matrix():
    eps, bits = 0.8, 4
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(1 << bits))
    q = 1 / (1 + math.exp(eps))
    single = np.array([[1 - q, q], [q, 1 - q]])
    channel = single
    for _ in range(bits - 1):
        channel = np.kron(single, channel)
    np.testing.assert_allclose(np.exp(pf.rr_channel_log(np.log(p), eps)), channel @ p, rtol=1e-12)
    assert pf.rr_loss_independent(eps) == pytest.approx(eps, abs=1e-14)


# --------------------------------------------------------------------------- Theorem 4.1


@pytest.mark.parametrize("mechanism", ["laplace_edge_count", "randomized_response"])
def test_theorem_4_1_independent_edges_loss_is_eps_by_enumeration(mechanism):
    n, eps = 5, 0.7
    for prior in (npr.IndependentEdges.er(n, 0.3), npr.IndependentEdges.beta_model(n, 0.4, 1.2)):
        lp = npr.enumerate_log_prob(prior)
        for dyad in [(0, 1), (2, 4)]:
            res = npr.exact_edge_analysis(lp, n, dyad, eps, mechanism)
            assert res["alpha_dep"] == pytest.approx(0.0, abs=1e-9)
            assert res["pufferfish_loss"] == pytest.approx(eps, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(probs=st.lists(st.floats(0.02, 0.98), min_size=6, max_size=6), eps=st.floats(0.05, 4.0))
def test_theorem_4_1_heterogeneous_closed_form_and_enumeration(probs, eps):
    n = 4
    prior = npr.IndependentEdges(n, tuple(probs))
    lp = npr.enumerate_log_prob(prior)
    dyad = (1, 3)
    k1, k0 = prior.edge_count_log_pmfs(dyad)
    assert pf.laplace_count_loss(k1, k0, eps)[0] == pytest.approx(eps, abs=1e-9)
    for mech in ("laplace_edge_count", "randomized_response"):
        assert npr.exact_edge_analysis(lp, n, dyad, eps, mech)["pufferfish_loss"] == pytest.approx(eps, abs=1e-9)


# --------------------------------------------------------------------------- Lemma 4.1


def _priors_for_lemma(n, rng):
    return [
        npr.Hive(n, float(rng.uniform(0.1, 0.9)), 0.7, 0.25),
        npr.ERGM(n, -0.5, float(rng.uniform(-1, 1)), float(rng.uniform(-0.5, 0.5)), 2),
        npr.ERGM(n, 0.2, 0.0, float(rng.uniform(-0.5, 0.5)), 3),
        npr.SBM(n, 2, float(rng.uniform(0.5, 0.9)), float(rng.uniform(0.05, 0.4))),
        RandomPrior(n, rng),
    ]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), eps=st.floats(0.05, 3.0), n=st.sampled_from([4, 5]))
def test_lemma_4_1_loss_below_eps_plus_alpha(seed, eps, n):
    rng = np.random.default_rng(seed)
    for prior in _priors_for_lemma(n, rng):
        lp = npr.enumerate_log_prob(prior)
        for dyad in [(0, 1), (n - 2, n - 1)]:
            for mech in ("laplace_edge_count", "randomized_response"):
                res = npr.exact_edge_analysis(lp, n, dyad, eps, mech)
                assert res["pufferfish_loss"] <= eps + res["alpha_dep"] + 1e-9


def test_alpha_dep_is_inf_when_supports_differ():
    # b = 0: given no queen edge the rest is empty, given the queen edge it is not
    hive = npr.Hive(4, 0.5, 0.5, 0.0)
    lp = npr.enumerate_log_prob(hive)
    res = npr.exact_edge_analysis(lp, 4, (0, 1), 1.0, "laplace_edge_count")
    assert res["alpha_dep"] == math.inf == hive.alpha_dep((0, 1))
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    assert res["pufferfish_loss"] == pytest.approx(pf.laplace_count_loss(k1, k0, 1.0)[0], rel=1e-12)
    assert math.isfinite(res["pufferfish_loss"])


# --------------------------------------------------------------------------- hive closed forms


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_hive_closed_form_equals_enumeration(n):
    hive = npr.Hive(n, 0.35, 0.65, 0.15)
    lp = npr.enumerate_log_prob(hive)
    for name, dyad, _ in hive.dyad_classes():
        for eps in (0.4, 1.5):
            for mech in ("laplace_edge_count", "randomized_response"):
                ex = npr.exact_edge_analysis(lp, n, dyad, eps, mech)
                if mech == "laplace_edge_count":
                    k1, k0 = hive.edge_count_log_pmfs(dyad)
                    closed = pf.laplace_count_loss(k1, k0, eps)[0]
                else:
                    closed = hive.rr_loss(dyad, eps)
                assert ex["pufferfish_loss"] == pytest.approx(closed, rel=1e-10)
                assert ex["alpha_dep"] == pytest.approx(hive.alpha_dep(dyad), rel=1e-10)
                assert ex["p_edge"] == pytest.approx(hive.p_edge(dyad), rel=1e-12)
    # every non-queen dyad is in the "other" class
    other = [npr.exact_edge_analysis(lp, n, d, 1.0, "laplace_edge_count")["pufferfish_loss"]
             for d in npr.dyads(n) if d != (0, 1)]
    assert np.ptp(other) < 1e-10


@pytest.mark.parametrize("n", [4, 10, 50])
def test_hive_queen_laplace_and_rr_agree(n):
    """For the queen, both losses equal eps + (m-1) ln((1-a+a e^eps)/(1-b+b e^eps)): the Laplace
    +inf limit and the all-ones output of randomized response are the same tilt."""
    hive, eps = npr.Hive(n, 0.5, 0.6, 0.2), 0.9
    m = npr.n_dyads(n)
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    expected = eps + (m - 1) * math.log((1 - 0.6 + 0.6 * math.exp(eps)) / (1 - 0.2 + 0.2 * math.exp(eps)))
    assert pf.laplace_count_loss(k1, k0, eps)[0] == pytest.approx(expected, rel=1e-10)
    assert hive.rr_loss((0, 1), eps) == pytest.approx(expected, rel=1e-10)
    assert expected < eps + hive.alpha_dep((0, 1))


# --------------------------------------------------------------------------- ERGM (Corollary 4.2)


@pytest.mark.parametrize("model", [
    npr.ERGM(5, -1.0, 0.0, 0.0, 2),
    npr.ERGM(5, -0.3, 0.8, 0.0, 2),
    npr.ERGM(6, 0.5, -0.6, 0.25, 2),
    npr.ERGM(6, -1.0, 0.3, -0.2, 3),
])
def test_ergm_alpha_R_2zeta_chain_and_change_statistic_range(model):
    n = model.n
    graphs = npr.all_graphs(n)
    lw = model.log_weights(graphs)
    lp = lw - logsumexp(lw)
    bounds = model.dependence_bounds()
    for dyad in [(0, 1), (2, 4)]:
        d = npr.dyad_index(n, *dyad)
        w1, w0 = npr.split_on_dyad(lw, d)
        change = w1 - w0  # beta . Delta(g, i, j) for every configuration of the rest (Eq. 3)
        assert change.min() == pytest.approx(bounds["c_min"], abs=1e-9)
        assert change.max() == pytest.approx(bounds["c_max"], abs=1e-9)
        alpha = npr.exact_edge_analysis(lp, n, dyad, 1.0, "laplace_edge_count")["alpha_dep"]
        logit = logsumexp(w1) - logsumexp(w0)
        assert alpha == pytest.approx(model.alpha_from_marginal(logit), abs=1e-9)
        assert alpha <= bounds["R"] + 1e-12 <= bounds["two_zeta"] + 2e-12
    if model.beta_triangles == 0 and model.beta_kstar == 0:
        assert bounds["R"] == 0.0 and alpha == pytest.approx(0.0, abs=1e-12)


def test_ergm_laplace_limit_is_the_tilted_edge_logit():
    """E_1[e^{eps K}]/E_0[e^{eps K}] = exp(logit_{beta_edges + eps} - logit_{beta_edges})."""
    model, eps = npr.ERGM(5, -0.7, 0.4, -0.1, 2), 0.6

    def logit(mod):
        w1, w0 = npr.split_on_dyad(npr.enumerate_log_prob(mod), 0)
        return logsumexp(w1) - logsumexp(w0)

    w1, w0 = npr.split_on_dyad(npr.enumerate_log_prob(model), 0)
    k1, k0 = npr.edge_count_log_pmfs_from_joint(w1, w0, npr.n_dyads(5))
    k = np.arange(k1.size)
    for sign in (1, -1):
        direct = logsumexp(k1 + sign * eps * k) - logsumexp(k0 + sign * eps * k)
        assert direct == pytest.approx(logit(replace(model, beta_edges=-0.7 + sign * eps)) - logit(model), abs=1e-10)


def test_ergm_mcmc_agrees_with_enumeration():
    model, eps = npr.ERGM(6, -1.0, 0.4, -0.15, 2), 1.0
    exact = npr.exact_edge_analysis(npr.enumerate_log_prob(model), 6, (0, 1), eps, "laplace_edge_count")
    est = npr.ergm_mcmc_edge_analysis(model, eps, np.random.default_rng(2024), 600, 100, 8)
    assert abs(est["p_edge_mcmc"] - exact["p_edge"]) < 5 * est["p_edge_se"] + 1e-4
    assert abs(est["alpha_dep_mcmc"] - exact["alpha_dep"]) < 5 * est["alpha_dep_se"] + 1e-3
    assert abs(est["pufferfish_loss_mcmc"] - exact["pufferfish_loss"]) < 5 * est["pufferfish_loss_se"] + 5e-3
    again = npr.ergm_mcmc_edge_analysis(model, eps, np.random.default_rng(2024), 600, 100, 8)
    assert again == est  # reproducible from the seed


# --------------------------------------------------------------------------- SBM


def test_sbm_single_block_is_erdos_renyi():
    n, eps = 5, 0.8
    lp_sbm = npr.enumerate_log_prob(npr.SBM(n, 1, 0.3, 0.9))
    lp_er = npr.enumerate_log_prob(npr.IndependentEdges.er(n, 0.3))
    np.testing.assert_allclose(lp_sbm, lp_er, atol=1e-12)
    res = npr.exact_edge_analysis(lp_sbm, n, (0, 1), eps, "randomized_response")
    assert res["alpha_dep"] == pytest.approx(0.0, abs=1e-9) and res["pufferfish_loss"] == pytest.approx(eps)


def test_sbm_matches_direct_mixture_over_labels():
    n, blocks, pin, pout = 4, 2, 0.8, 0.2
    sbm = npr.SBM(n, blocks, pin, pout)
    lp = npr.enumerate_log_prob(sbm)
    from itertools import product
    direct = np.zeros(1 << npr.n_dyads(n))
    for labels in product(range(blocks), repeat=n):
        probs = [pin if labels[i] == labels[j] else pout for i, j in npr.dyads(n)]
        direct += np.exp(npr.IndependentEdges(n, tuple(probs)).log_weights(npr.all_graphs(n))) / blocks ** n
    np.testing.assert_allclose(np.exp(lp), direct, rtol=1e-12)


# --------------------------------------------------------------------------- Example 1 tests


def test_example_1_power_to_one_size_to_zero():
    eps, a, b = 1.0, 0.6, 0.2
    sizes, powers, misses = [], [], []
    for n in (5, 10, 20, 50, 100):
        hive = npr.Hive(n, 0.5, a, b)
        m = npr.n_dyads(n)
        k1, k0 = hive.edge_count_log_pmfs((0, 1))
        ls, lpow = pf.threshold_test(k0, k1, eps, m * (a + b) / 2)
        loss = pf.laplace_count_loss(k1, k0, eps)[0]
        assert lpow - ls <= loss + 1e-9 <= eps + hive.alpha_dep((0, 1)) + 1e-9  # Pufferfish test bound
        sizes.append(math.exp(ls))
        powers.append(math.exp(lpow))
        misses.append(pf.laplace_count_log_cdf(k1, eps, m * (a + b) / 2))  # log(1 - power), directly
        assert math.exp(misses[-1]) == pytest.approx(1 - powers[-1], abs=1e-11)
    assert all(np.diff(sizes) < 0) and sizes[-1] < 1e-100
    assert all(np.diff(misses) < 0) and misses[-1] < -100 and powers[-1] > 1 - 1e-10


def test_threshold_test_matches_direct_sum():
    """Size and power by an independent direct sum with scipy's binomial and Laplace."""
    n, eps, a, b = 6, 0.7, 0.55, 0.3
    m = npr.n_dyads(n)
    hive = npr.Hive(n, 0.5, a, b)
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    t = m * (a + b) / 2
    ls, lpow = pf.threshold_test(k0, k1, eps, t)
    k = np.arange(m)
    size = (stats.binom.pmf(k, m - 1, b) * stats.laplace.sf(t - k, scale=1 / eps)).sum()
    power = (stats.binom.pmf(k, m - 1, a) * stats.laplace.sf(t - (k + 1), scale=1 / eps)).sum()
    assert math.exp(ls) == pytest.approx(size, rel=1e-12)
    assert math.exp(lpow) == pytest.approx(power, rel=1e-12)


def test_neyman_pearson_cutoff_reproduces_threshold_test():
    n, eps = 8, 1.0
    hive = npr.Hive(n, 0.5, 0.5, 0.3)
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    t = 11.3
    ls, lpow = pf.threshold_test(k0, k1, eps, t)
    c, ls_np, lp_np, monotone = pf.neyman_pearson_test(k0, k1, eps, math.exp(ls))
    assert monotone
    assert c == pytest.approx(t, abs=1e-8)
    assert ls_np == pytest.approx(ls, abs=1e-10) and lp_np == pytest.approx(lpow, abs=1e-10)


@settings(max_examples=12, deadline=None)
@given(pi=st.floats(0.05, 0.95), a=st.floats(0.05, 1.0), frac=st.floats(0.0, 0.95), eps=st.floats(0.1, 3.0))
@example(pi=0.5, a=0.5, frac=2.225073858507e-311, eps=1.0)  # subnormal b: a / b overflowed
def test_hive_closed_form_equals_enumeration_property(pi, a, frac, eps):
    n, b = 4, a * frac  # b may be 0 and a may be 1: infinite alpha, finite loss
    hive = npr.Hive(n, pi, a, b)
    lp = npr.enumerate_log_prob(hive)
    for _, dyad, _ in hive.dyad_classes():
        ex = npr.exact_edge_analysis(lp, n, dyad, eps, "laplace_edge_count")
        k1, k0 = hive.edge_count_log_pmfs(dyad)
        assert ex["pufferfish_loss"] == pytest.approx(pf.laplace_count_loss(k1, k0, eps)[0], rel=1e-9)
        assert ex["alpha_dep"] == pytest.approx(hive.alpha_dep(dyad), rel=1e-9)
        assert ex["pufferfish_loss"] <= eps + ex["alpha_dep"] + 1e-9
        rr = npr.exact_edge_analysis(lp, n, dyad, eps, "randomized_response")["pufferfish_loss"]
        assert rr == pytest.approx(hive.rr_loss(dyad, eps), rel=1e-9)


@pytest.mark.parametrize("pi, a, b, eps", [
    (1e-5, 1e-320, 1e-321, 0.5),   # pi * a underflowed: p_edge mixture lost its Q = 1 part
    (0.5, 3e-323, 1e-323, 1.0),    # subnormal a and b
    (0.5, 1.0, 0.2, 40.0),         # ra = a(1-q) + (1-a)q rounded to 1: log1p(-1) raised
    (0.5, 1 - 1e-16, 0.3, 30.0),   # log1p(-ra) cancelled: rr_loss off in the 6th digit
    (0.999999, 0.9, 1e-200, 2.0),
])
def test_hive_closed_forms_at_extreme_parameters(pi, a, b, eps):
    """The hive closed forms (alpha_dep of both dyad classes, the Laplace laws of |E| and the
    RR loss) stay equal to enumeration where products and 1 - x lose all precision."""
    import mpmath as mp

    n = 4
    hive = npr.Hive(n, pi, a, b)
    lp = npr.enumerate_log_prob(hive)
    for _, dyad, _ in hive.dyad_classes():
        ex = npr.exact_edge_analysis(lp, n, dyad, eps, "laplace_edge_count")
        k1, k0 = hive.edge_count_log_pmfs(dyad)
        assert pf.laplace_count_loss(k1, k0, eps)[0] == pytest.approx(ex["pufferfish_loss"], rel=1e-9)
        assert hive.alpha_dep(dyad) == pytest.approx(ex["alpha_dep"], rel=1e-9)
        rr = npr.exact_edge_analysis(lp, n, dyad, eps, "randomized_response")["pufferfish_loss"]
        assert hive.rr_loss(dyad, eps) == pytest.approx(rr, rel=1e-9)
    if a < 1:  # other-dyad alpha against 50-digit arithmetic on the same float inputs
        mp.mp.dps = 50
        P, A, B = mp.mpf(pi), mp.mpf(a), mp.mpf(b)
        pbar = P * A + (1 - P) * B
        logit = lambda x: mp.log(x) - mp.log(1 - x)  # noqa: E731
        exact = max(abs(logit(A) - logit(pbar)), abs(logit(B) - logit(pbar)))
        assert hive.alpha_dep((n - 2, n - 1)) == pytest.approx(float(exact), rel=1e-12)
