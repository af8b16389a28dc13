"""Chapter 4 (thesis 004): mechanisms for binary Bayesian networks."""

import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import integrate, stats

from pipeline.experiments.base import ParamError, get_experiment
from pipeline.kernels import bayes_networks as BN

SMALL_NETS = [BN.naive_bayes(2), BN.chain(3), BN.BinaryNetwork(((), (), (0, 1), (2,))),
              BN.BinaryNetwork(((), (0,), (0, 1)))]


# --------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("net", SMALL_NETS, ids=lambda n: str(n.parents))
def test_update_vector_l1_sensitivity_is_2I_over_all_neighbouring_datasets(net):
    """Lemma 4.2.1 by brute force: every dataset of 2 rows, every replacement of one row."""
    rows = BN.all_rows(net.n_nodes)
    best = 0.0
    for r1, r2 in product(range(len(rows)), repeat=2):
        D = rows[[r1, r2]]
        u = BN.update_vector(net, D)
        for pos, new in product(range(2), range(len(rows))):
            D2 = D.copy()
            D2[pos] = rows[new]
            best = max(best, float(np.abs(BN.update_vector(net, D2) - u).sum()))
    assert best == 2 * net.n_nodes
    assert BN.l1_sensitivity_bruteforce(net) == 2 * net.n_nodes


@settings(max_examples=15, deadline=None)
@given(k=st.integers(2, 6), max_indeg=st.integers(0, 4), seed=st.integers(0, 10 ** 6))
def test_sensitivity_is_2I_not_2m_on_random_dags(k, max_indeg, seed):
    """Table 4.1 writes m = sum 2^{|pi_i|} where Theorem 4.2.4 has |I|: the brute-force
    sensitivity is 2|I| whatever m is, so the noise scale is 2|I|/eps."""
    net = BN.random_dag(k, max_indeg, np.random.default_rng(seed))
    assert BN.l1_sensitivity_bruteforce(net) == 2 * k
    assert all(len(p) <= max_indeg for p in net.parents)


def test_fourier_coefficient_sensitivity_bruteforce():
    """Corollary 4.2.9 uses ||zhat(D) - zhat(D')||_1 <= 2|N_I|. Brute force: a replaced row
    r -> r' moves zhat_gamma by 2 exactly when popcount(gamma & (r xor r')) is odd, so the
    sensitivity is 2 max_delta #{gamma in N_I : <gamma, delta> odd} < 2|N_I| (zhat_0 never moves):
    the corollary's noise is valid but loose."""
    for net in SMALL_NETS:
        gam = BN.downward_closure(net)
        rows = BN.all_rows(net.n_nodes)
        Z = np.stack([BN.fourier_coefficients(r[None, :], gam) for r in rows])
        best = max(float(np.abs(Z - Z[i]).sum(axis=1).max()) for i in range(len(rows)))
        odd = max(int(np.sum(BN._parity(np.array(gam) & delta)))
                  for delta in range(1, 2 ** net.n_nodes))
        assert best == 2 * odd
        assert best < 2 * len(gam)


def test_naive_bayes_closure_size():
    """Section 4.4.2: naive Bayes with d features has |I| = d + 1 and |N_I| = 2d + 2."""
    for d in (1, 4, 16):
        net = BN.naive_bayes(d)
        assert net.n_nodes == d + 1 and len(BN.downward_closure(net)) == 2 * d + 2
        assert net.m == 1 + 2 * d


# --------------------------------------------------------------------------- Fourier
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fourier_reconstruction_exact_without_noise(seed):
    rng = np.random.default_rng(seed)
    net = BN.random_dag(7, 3, rng)
    X = BN.sample_data(net, BN.sample_cpts(net, rng), 60, rng)
    gam = BN.downward_closure(net)
    z = dict(zip(gam, BN.fourier_coefficients(X, gam)))
    for i in range(net.n_nodes):
        mask = net.family_mask(i)
        assert np.array_equal(BN.marginal_from_coefficients(z, mask), BN.marginal_counts(X, mask))
    z1, z2, neg = BN.fourier_updates(net, X, math.inf, rng)  # zero noise
    a, b = BN.update_counts(net, X)
    assert np.array_equal(z1, a) and np.array_equal(z2, b) and neg == 0
    # a direct Fourier transform of the full contingency table gives the same coefficients
    h = np.bincount(BN.row_codes(X), minlength=2 ** net.n_nodes)
    codes = np.arange(2 ** net.n_nodes)
    for g in gam:
        direct = np.sum(h * (1 - 2 * BN._parity(codes & g)))
        assert direct == z[g]


def _sum_out(table, mask, keep):
    """Marginalise a family table (cells in local bit order of ``mask``) onto ``keep``."""
    vs = [v for v in range(mask.bit_length()) if mask >> v & 1]
    ks = [v for v in vs if keep >> v & 1]
    out = np.zeros(2 ** len(ks))
    for cell, val in enumerate(table):
        idx = sum(1 << t for t, v in enumerate(ks) if cell >> vs.index(v) & 1)
        out[idx] += val
    return out


def test_overlapping_noisy_marginals_agree():
    """Consistency (section 4.2.2): noisy family tables agree on their shared variables."""
    rng = np.random.default_rng(5)
    net = BN.BinaryNetwork(((), (0,), (0, 1), (1, 2), (0, 3)))
    X = BN.sample_data(net, BN.sample_cpts(net, rng), 40, rng)
    gam = BN.downward_closure(net)
    z = dict(zip(gam, BN.fourier_coefficients(X, gam) + rng.laplace(0, 7.0, len(gam))))
    checked = 0
    for i in range(net.n_nodes):
        for j in range(i + 1, net.n_nodes):
            mi, mj = net.family_mask(i), net.family_mask(j)
            shared = mi & mj
            if shared:
                ti = _sum_out(BN.marginal_from_coefficients(z, mi), mi, shared)
                tj = _sum_out(BN.marginal_from_coefficients(z, mj), mj, shared)
                assert np.allclose(ti, tj, atol=1e-9)
                checked += 1
    assert checked >= 5
    # the independent Laplace mechanism is not consistent: its two views of X_0 differ
    z1, z2 = BN.laplace_updates(BN.naive_bayes(2), X[:, :3], 1.0, rng)
    assert not math.isclose(z1[1] + z2[1] + z1[3] + z2[3], z1[2] + z2[2] + z1[4] + z2[4])


def test_fourier_increment_gives_stated_stealth_rate():
    """The Monte Carlo increment keeps all family tables non-negative with probability about
    stealth_prob even for the empty dataset (the worst case): 400 runs, 4-sigma band."""
    net = BN.naive_bayes(4)
    eps, prob = 1.0, 0.9
    inc = BN.fourier_increment(net, eps, prob, np.random.default_rng(1), draws=4000)
    rng = np.random.default_rng(2)
    empty = np.zeros((0, net.n_nodes), dtype=np.uint8)
    ok = np.mean([BN.fourier_updates(net, empty, eps, rng, inc)[2] == 0 for _ in range(400)])
    assert abs(ok - prob) <= 4 * math.sqrt(prob * (1 - prob) / 400) + 0.01
    # the thesis's sufficient increment (Corollary 4.2.11, t = ln 10) is far larger
    t = math.log(10)
    assert 4 * t * len(BN.downward_closure(net)) ** 2 / eps > inc


# --------------------------------------------------------------------------- Laplace
def test_laplace_truncation_rule():
    net = BN.BinaryNetwork(((), (0,), (0, 1)))
    rng = np.random.default_rng(3)
    X = BN.sample_data(net, BN.sample_cpts(net, rng), 30, rng)
    a, b = BN.update_counts(net, X)
    for eps in (0.1, 1.0, 10.0):
        z1, z2 = BN.laplace_updates(net, X, eps, rng)
        assert np.all((0 <= z1) & (z1 <= 30) & (0 <= z2) & (z2 <= 30))
        assert z1[0] + z2[0] == pytest.approx(30)  # parentless: Z2 = n - Z1 (Algorithm 4.2.1)
    z1, z2 = BN.laplace_updates(net, X, math.inf, rng)
    assert np.array_equal(z1, a) and np.array_equal(z2, b)
    # with parents, n - Z1 would be wrong: it differs from the true beta update
    assert np.any(30 - a[1:] != b[1:])


# --------------------------------------------------------------------------- sampling
@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.2, 3000), b=st.floats(0.2, 3000), lo=st.floats(0.0, 0.9),
       width=st.floats(1e-4, 1.0), seed=st.integers(0, 1000))
def test_truncated_beta_stays_in_support(a, b, lo, width, seed):
    hi = min(lo + width, 1.0)
    x = BN.truncated_beta_sample(a, b, lo, hi, np.random.default_rng(seed), size=200)
    assert x.shape == (200,)
    assert np.all((x >= lo) & (x <= hi)) and np.all(np.isfinite(x))


@pytest.mark.parametrize("a,b,lo,hi", [(3.0, 5.0, 0.2, 0.6), (40.0, 2.0, 0.1, 0.5),
                                       (2.0, 40.0, 0.5, 0.9)])
def test_truncated_beta_matches_truncated_law(a, b, lo, hi):
    """Kolmogorov-Smirnov against the truncated CDF computed by quadrature (also in tails
    where the untruncated CDF is ~1 or ~0)."""
    x = BN.truncated_beta_sample(a, b, lo, hi, np.random.default_rng(0), size=4000)
    dens = lambda t: stats.beta.pdf(t, a, b)  # noqa: E731
    Z = integrate.quad(dens, lo, hi, epsabs=0, epsrel=1e-12)[0]
    grid = np.linspace(lo, hi, 401)
    cdf = np.concatenate([[0.0], np.cumsum([integrate.quad(dens, u, v, epsabs=0)[0]
                                            for u, v in zip(grid[:-1], grid[1:])])]) / Z
    res = stats.kstest(x, lambda t: np.interp(t, grid, cdf))
    assert res.pvalue > 1e-4


def test_sampler_trim_gives_lipschitz_eps():
    """2 N L = eps with L = |I| ln((1 - w)/w), and L is attained by extreme rows."""
    for eps, k, N in [(1.0, 17, 1), (10.0, 3, 4)]:
        w = BN.sampler_trim(eps, k, N)
        assert 2 * N * BN.network_lipschitz(k, w) == pytest.approx(eps)
    net = BN.naive_bayes(2)
    w = 0.2
    theta = np.full(5, 1 - w)  # all-ones row likely, all-zeros row unlikely, node by node
    ones, zeros = np.ones((1, 3), np.uint8), np.zeros((1, 3), np.uint8)
    diff = BN.log_joint(net, theta, ones) - BN.log_joint(net, theta, zeros)
    assert float(diff[0]) == pytest.approx(BN.network_lipschitz(3, w))


# --------------------------------------------------------------------------- privacy loss
def _clopper_pearson(k, n, alpha):
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


def _loss_lower_bound(x, y, edges, alpha):
    """Lower confidence bound on max_bin |ln P(bin | D) / P(bin | D')|: with probability
    >= 1 - alpha (Bonferroni over bins and both directions) the true histogram loss is at
    least the returned value."""
    cx, _ = np.histogram(x, edges)
    cy, _ = np.histogram(y, edges)
    a = alpha / (2 * len(cx))
    best = -math.inf
    for kx, ky in zip(cx, cy):
        lx, ux = _clopper_pearson(kx, len(x), a)
        ly, uy = _clopper_pearson(ky, len(y), a)
        for lo_, up_ in ((lx, uy), (ly, ux)):
            if lo_ > 0:
                best = max(best, math.log(lo_ / up_))
    return best


def test_sampling_mechanism_empirical_privacy_loss():
    """On neighbouring data (4 ones vs 3 ones + 1 zero), BAPS on the trimmed posterior: the
    histogram privacy loss stays below eps at confidence 1 - 1e-6; a mechanism trimmed for
    8 eps is caught by the same check (it is cheap: 2 x 20000 draws)."""
    eps, n_draw = 1.0, 20000
    rng = np.random.default_rng(11)
    post_D, post_E = (1 + 4.0, 1 + 0.0), (1 + 3.0, 1 + 1.0)

    def draws(w, post):
        return BN.sampling_mechanism(np.array([post[0]]), np.array([post[1]]), w, n_draw,
                                     rng)[:, 0]

    w = BN.sampler_trim(eps, 1, 1)
    edges = np.linspace(w, 1 - w, 11)
    assert _loss_lower_bound(draws(w, post_D), draws(w, post_E), edges, 1e-6) <= eps
    # exact loss of the released density, by a fine grid: also <= eps
    t = np.linspace(w, 1 - w, 2001)
    lq = lambda a, b: stats.beta.logpdf(t, a, b) - BN.truncated_beta_log_mass(a, b, w, 1 - w)  # noqa
    assert np.max(np.abs(lq(*post_D) - lq(*post_E))) <= eps + 1e-12
    w_leaky = BN.sampler_trim(8 * eps, 1, 1)
    edges = np.linspace(w_leaky, 1 - w_leaky, 11)
    assert _loss_lower_bound(draws(w_leaky, post_D), draws(w_leaky, post_E), edges, 1e-6) > eps


def test_laplace_mechanism_empirical_privacy_loss():
    """Algorithm 4.2.1 on a parentless node, D = [1,1,0] vs D' = [1,0,0]: the released Z1 has
    loss <= eps/2 (Delta alpha moves by 1 at scale 2|I|/eps); with a quarter of the noise the
    check detects a loss above eps/2."""
    net = BN.BinaryNetwork(((),))
    D = np.array([[1], [1], [0]], np.uint8)
    E = np.array([[1], [0], [0]], np.uint8)
    eps, n_draw = 1.0, 20000
    rng = np.random.default_rng(12)
    zD = np.array([BN.laplace_updates(net, D, eps, rng)[0][0] for _ in range(n_draw)])
    zE = np.array([BN.laplace_updates(net, E, eps, rng)[0][0] for _ in range(n_draw)])
    edges = np.array([-1e-9, 1e-9, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0 - 1e-9, 3.0 + 1e-9])
    assert _loss_lower_bound(zD, zE, edges, 1e-6) <= eps / 2
    zD4 = np.array([BN.laplace_updates(net, D, 4 * eps, rng)[0][0] for _ in range(n_draw)])
    zE4 = np.array([BN.laplace_updates(net, E, 4 * eps, rng)[0][0] for _ in range(n_draw)])
    assert _loss_lower_bound(zD4, zE4, edges, 1e-6) > eps / 2


def test_map_exp_output_density_ratio_is_within_eps():
    """Algorithm 4.3.1 (our utility ln p_theta(D)): exact log density ratio of the released
    theta on neighbouring data, over a grid of the box, is <= eps."""
    net = BN.naive_bayes(1)
    eps, w = 1.0, 0.1
    D = np.array([[1, 1], [0, 0], [1, 0]], np.uint8)
    E = np.array([[1, 1], [0, 0], [0, 1]], np.uint8)
    kappa = eps / (2 * BN.network_lipschitz(2, w))
    t = np.linspace(w, 1 - w, 801)
    total = 0.0
    (aD, bD), (aE, bE) = BN.update_counts(net, D), BN.update_counts(net, E)
    for c in range(net.m):  # the law is a product over components: the sup adds up
        def lq(a, b):
            return (stats.beta.logpdf(t, 1 + kappa * a, 1 + kappa * b)
                    - BN.truncated_beta_log_mass(1 + kappa * a, 1 + kappa * b, w, 1 - w))
        total += np.max(lq(aD[c], bD[c]) - lq(aE[c], bE[c]))
    assert 0 < total <= eps + 1e-12


# --------------------------------------------------------------------------- utility
def test_predictive_from_samples_matches_exact_predictive():
    """Plug-in posterior means give the exact predictive (posterior factorises); averaging
    joint probabilities over many posterior samples converges to it (section 4.4.2)."""
    rng = np.random.default_rng(4)
    net = BN.BinaryNetwork(((), (0,), (0, 1)))
    X = BN.sample_data(net, BN.sample_cpts(net, rng), 20, rng)
    a, b = BN.update_counts(net, X)
    pa_, pb_ = 1 + a, 1 + b
    test = BN.all_rows(3)
    exact = BN.predict_proba(net, pa_ / (pa_ + pb_), test, 1)
    samples = rng.beta(pa_, pb_, size=(40000, net.m))
    mc = BN.predict_proba(net, samples, test, 1)
    assert np.allclose(mc, exact, atol=0.01)
    # brute force: E[p(x_t = 1, rest)] / sum_v E[p(x_t = v, rest)] with E of a product of
    # independent Betas = product of means
    mean = pa_ / (pa_ + pb_)
    for r in range(len(test)):
        rows = np.repeat(test[r:r + 1], 2, axis=0)
        rows[:, 1] = [0, 1]
        p = np.exp(BN.log_joint(net, mean, rows))
        assert exact[r] == pytest.approx(p[1] / p.sum(), rel=1e-12)


def test_beta_kl_against_quadrature():
    a1, b1, a2, b2 = 3.5, 2.0, 1.5, 4.0
    f = lambda t: stats.beta.pdf(t, a1, b1) * (stats.beta.logpdf(t, a1, b1)  # noqa: E731
                                               - stats.beta.logpdf(t, a2, b2))
    assert float(BN.beta_kl(a1, b1, a2, b2)) == pytest.approx(integrate.quad(f, 0, 1)[0],
                                                              rel=1e-8)


# --------------------------------------------------------------------------- experiment
@pytest.mark.parametrize("mechanism", ["laplace", "fourier", "sampling", "map_exp", "non_private"])
@pytest.mark.parametrize("structure", ["naive_bayes", "chain", "random_dag"])
def test_bayes_network_runs(mechanism, structure):
    exp = get_experiment("bayes_network")
    p = exp.resolve(structure=structure, d=5, mechanism=mechanism, eps=5.0, n_total=200,
                    n_train=40, repeats=3)
    row = exp.run(p, 7)
    assert set(row) <= set(exp.columns)
    assert 0 <= row["accuracy"] <= 1
    assert row["sensitivity"] == 2 * row["n_nodes"]
    if mechanism == "non_private":
        assert row["accuracy"] == row["accuracy_nonprivate"] and row["kl"] == 0
    if mechanism in ("laplace", "fourier", "sampling"):
        assert row["kl"] >= 0
    again = exp.run(p, 7)  # reproducible from the seed
    assert all(again[k] == v or (isinstance(v, float) and math.isnan(v) and math.isnan(again[k]))
               for k, v in row.items())


def test_bayes_network_default_is_section_4_4():
    exp = get_experiment("bayes_network")
    p = exp.resolve()
    assert (p["structure"], p["d"], p["n_train"], p["prior_alpha"], p["prior_beta"],
            p["threshold"]) == ("naive_bayes", 16, 50, 1.0, 1.0, 0.5)
    with pytest.raises(ParamError):
        exp.resolve(mechanism="gaussian")
    with pytest.raises(ParamError):
        exp.resolve(n_train=1000, n_total=1000)
    with pytest.raises(ParamError):
        exp.resolve(eps=0.0)
    with pytest.raises(ParamError):
        exp.resolve(structure="random_dag", d=8, max_indeg=11)


# --------------------------------------------------------------------------- far tails (review)
def _beta_a1_trunc_cdf(a, lo, hi):
    """Exact CDF of Beta(a, 1) on [lo, hi]: (x^a - lo^a) / (hi^a - lo^a), in log space."""
    def F(x):
        x = np.asarray(x, float)
        return (np.exp(a * (np.log(x) - math.log(hi))) * -np.expm1(a * (math.log(lo) - np.log(x)))
                / -math.expm1(a * (math.log(lo) - math.log(hi))))
    return F


@pytest.mark.parametrize("a,lo,hi", [(1e4, 0.1, 0.9), (3e5, 0.4927, 0.5073), (2e3, 0.01, 0.3)])
def test_truncated_beta_far_tail_matches_exact_law(a, lo, hi):
    """The interval's mass underflows (hi^a < 1e-300): CDF inversion used to return the wrong
    endpoint lo for every draw. Beta(a, 1) has a closed-form truncated CDF: KS test, both
    orientations (Beta(1, a) is the mirror image on [1 - hi, 1 - lo])."""
    assert a * math.log(hi) < math.log(1e-250)
    F = _beta_a1_trunc_cdf(a, lo, hi)
    x = BN.truncated_beta_sample(np.array([a]), np.array([1.0]), lo, hi,
                                 np.random.default_rng(0), size=3000)[:, 0]
    assert stats.kstest(x, F).pvalue > 1e-4
    y = BN.truncated_beta_sample(np.array([1.0]), np.array([a]), 1 - hi, 1 - lo,
                                 np.random.default_rng(1), size=3000)[:, 0]
    assert stats.kstest(1 - y, F).pvalue > 1e-4
    # log mass: ln(hi^a - lo^a) (B(a, 1) = 1/a), where the old floor at 1e-300 gave -690.8
    want = a * math.log(hi) + math.log1p(-math.exp(a * (math.log(lo) - math.log(hi))))
    assert float(BN.truncated_beta_log_mass(a, 1.0, lo, hi)) == pytest.approx(want, rel=1e-9)
    assert float(BN.truncated_beta_log_mass(1.0, a, 1 - hi, 1 - lo)) == pytest.approx(want, rel=1e-9)


def test_truncated_beta_far_tail_general_shape():
    """A concentrated posterior Beta(4750, 250) in a narrow trim box around 1/2 (sampler with
    n_train ~ 5000): samples pile up at the upper end, with the law's mean; log mass against
    mpmath quadrature."""
    a, b, lo, hi = 4750.0, 250.0, 0.4927, 0.5073
    x = BN.truncated_beta_sample(np.array([a]), np.array([b]), lo, hi, np.random.default_rng(3),
                                 size=20000)[:, 0]
    # near hi the truncated law is ~ exponential with rate g'(hi): mean hi - 1/rate (to O(rate^-2))
    rate = (a - 1) / hi - (b - 1) / (1 - hi)
    assert x.mean() == pytest.approx(hi - 1 / rate, abs=5 * x.std() / math.sqrt(x.size) + 2 / rate ** 2)
    import mpmath as mp
    with mp.workdps(30):
        g = lambda t: (a - 1) * mp.log(t) + (b - 1) * mp.log(1 - t)  # noqa: E731
        top = g(mp.mpf(hi))
        val = mp.quad(lambda t: mp.e ** (g(t) - top), [lo, hi - 0.002, hi - 2e-4, hi])
        want = float(top + mp.log(val) - (mp.loggamma(a) + mp.loggamma(b) - mp.loggamma(a + b)))
    assert float(BN.truncated_beta_log_mass(a, b, lo, hi)) == pytest.approx(want, rel=1e-9)


def test_large_eps_runs_and_map_exp_reaches_nonprivate_accuracy():
    """eps = 1e6: the sampler's trim used to overflow (math.exp) and the exponential mechanism's
    Beta(kappa * counts) fell outside the box in floating point and returned the wrong end
    (accuracy 0.24 against 0.87 non-private). Both now match the non-private accuracy."""
    exp = get_experiment("bayes_network")
    for mech in ("sampling", "map_exp"):
        row = exp.run(exp.resolve(mechanism=mech, eps=1e6, d=5, n_total=400, n_train=100,
                                  repeats=5), 0)
        assert row["accuracy"] == pytest.approx(row["accuracy_nonprivate"], abs=0.03)
    assert BN.sampler_trim(1e6, 6, 1) > 0


@pytest.mark.parametrize("name,params", [
    ("bayes_network", dict(eps=math.inf)), ("bayes_network", dict(prior_alpha=math.inf)),
    ("bayes_bounds", dict(alpha=math.inf)), ("bayes_bounds", dict(mu=-math.inf)),
    ("bayes_bounds", dict(rho=math.inf)), ("bayes_regression", dict(b=math.inf)),
    ("bayes_regression", dict(noise_sd=math.inf)),
])
def test_infinite_values_are_rejected(name, params):
    """Interval(0, None) admits inf; the family's domains are finite (inf used to run: map_exp
    at eps = inf produced NaN parameters and accuracy 0.40)."""
    with pytest.raises(ParamError) as info:
        get_experiment(name).resolve(**params)
    assert next(iter(params)) in str(info.value)


def test_fourier_mechanism_empirical_privacy_loss():
    """Algorithm 4.2.2 on naive Bayes with one feature, neighbouring D / D' (one row replaced):
    the histogram loss of every released count stays below eps at confidence 1 - 1e-6
    (Bonferroni over bins); the same check catches a release with 16x too little noise."""
    net = BN.naive_bayes(1)
    D = np.array([[1, 1], [0, 0], [1, 0]], np.uint8)
    E = np.array([[1, 1], [0, 0], [0, 1]], np.uint8)
    n = 6000

    def loss(eps, seed):
        rng = np.random.default_rng(seed)
        zD = np.array([BN.fourier_updates(net, D, eps, rng)[0] for _ in range(n)])
        zE = np.array([BN.fourier_updates(net, E, eps, rng)[0] for _ in range(n)])
        out = []
        for c in range(net.m):
            edges = np.quantile(np.concatenate([zD[:, c], zE[:, c]]), np.linspace(0, 1, 9))
            edges[0] -= 1e-9
            edges[-1] += 1e-9
            out.append(_loss_lower_bound(zD[:, c], zE[:, c], edges, 1e-6))
        return max(out)

    assert loss(1.0, 13) <= 1.0
    assert loss(16.0, 14) > 1.0


@pytest.mark.parametrize("structure", ["naive_bayes", "chain", "random_dag"])
def test_a_point_too_large_for_memory_is_refused_and_the_limit_holds(structure):
    """n_total at its maximum (1e7) with d = 40 took more than 6 GiB in one point before it
    was killed (limits probe, 2026-12-06): the data and its test-set evaluation take about 50
    bytes a cell of n_total x (d + 1). Such points are refused before any task runs, and the
    bound's premise is checked here: tracemalloc's peak of one real point."""
    import tracemalloc

    from pipeline.engine.grid import Grid
    from pipeline.experiments.bayes import MAX_DATA_CELLS

    exp = get_experiment("bayes_network")
    at_limit = MAX_DATA_CELLS // 41
    Grid(exp, {"eps": [1.0]}, {"d": 40, "n_total": at_limit, "repeats": 1,
                               "structure": structure})
    with pytest.raises(ParamError, match=rf"n_total \* \(d \+ 1\) must be <= 5e7.*"
                                         rf"n_total <= {at_limit} at this d"):
        Grid(exp, {"eps": [1.0]}, {"d": 40, "n_total": at_limit + 1, "repeats": 1,
                                   "structure": structure})
    n = 100_000
    grid = Grid(exp, {"eps": [1.0]}, {"d": 40, "n_total": n, "repeats": 1,
                                      "structure": structure})
    tracemalloc.start()
    try:
        exp.run(grid.point(0), 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 20 * n * 41 < peak <= 50 * n * 41  # bytes a cell: the limit's premise
