"""Chapter 3 (thesis 004): assumption constants, their numerical recomputation, and bounds."""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from pipeline.experiments.base import ParamError, get_experiment
from pipeline.kernels import bayes as K


@pytest.mark.parametrize("alpha", [1.5, 2.0, 5.0, 10.0, 30.0])
def test_beta_binomial_c_equals_limit_of_F(alpha):
    """Lemma 3.6.3: c(alpha) = 2^(1-2 alpha)/B(alpha, alpha) is the p -> 1 limit of
    F(p) = ln(2 I_{p/(1+p)}(alpha, alpha)) / ln p (Claim 4), computed with scipy's Beta CDF."""
    c = K.beta_binomial_closed_form(alpha, 10)["c"]
    assert c == pytest.approx(2 ** (1 - 2 * alpha) / special.beta(alpha, alpha), rel=1e-12)
    p = 1 - 1e-7
    F = math.log(2 * stats.beta.cdf(p / (1 + p), alpha, alpha)) / math.log(p)
    assert F == pytest.approx(c, rel=1e-5)
    # F is decreasing (Claim 4), so its infimum over (0, 1) is the limit: c is the best constant
    ps = np.linspace(0.01, 0.999, 200)
    Fs = np.log(2 * stats.beta.cdf(ps / (1 + ps), alpha, alpha)) / np.log(ps)
    assert np.all(np.diff(Fs) < 0)
    assert Fs.min() >= c * (1 - 1e-9)


@pytest.mark.parametrize("alpha,n", [(1.5, 5), (2.0, 10), (5.0, 10), (10.0, 50), (3.0, 200)])
def test_beta_binomial_assumption2_tail_on_grid(alpha, n):
    """(3.5): 1 - xi(Theta_L) <= exp(-c (L - L0)) for L on a grid, with the thesis's
    Theta_L = [(1 + e^L/n)^-1, (1 + n/e^L)^-1] and scipy's Beta CDF as the oracle."""
    cl = K.beta_binomial_closed_form(alpha, n)
    model = K.family_model("beta_binomial", alpha=alpha, n=n)
    for gap in np.concatenate([np.logspace(-4, 1.5, 40)]):
        L = cl["L0"] + gap
        lo, hi = 1 / (1 + math.exp(L) / n), 1 / (1 + n / math.exp(L))
        a, b = K.lipschitz_set(model, L)
        assert a == pytest.approx(lo, rel=1e-9) and b == pytest.approx(hi, rel=1e-9)
        tail = 2 * stats.beta.cdf(lo, alpha, alpha)  # symmetric prior: both ends alike
        assert tail <= math.exp(-cl["c"] * gap) * (1 + 1e-9)
        # the upper end is 1 - tiny in floating point: compare where that costs < 1e-6
        if tail > 1e-12:
            assert K.prior_tail(model, L) == pytest.approx(tail, rel=1e-6)


def test_beta_binomial_lipschitz_constant_brute_force():
    """ell(theta) = ln n + |logit theta| (proof of Lemma 3.6.3): brute force over all count pairs
    agrees with the adjacent-pair (concavity) shortcut, and L0 = ln n."""
    for n in (1, 2, 7, 40):
        k = np.arange(n + 1)
        w = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        if n >= 2:
            assert K.chord_slope_range(w, True) == pytest.approx(K.chord_slope_range(w, False))
        model = K.family_model("beta_binomial", alpha=2.0, n=n)
        th = np.linspace(0.01, 0.99, 31)
        direct = [max(abs((w[i] - w[j]) / (i - j) + math.log(t / (1 - t)))
                      for i in range(n + 1) for j in range(n + 1) if i != j) for t in th]
        assert np.allclose(model.ell(th), direct, rtol=1e-12)
        assert float(model.ell(np.array([0.5]))[0]) == pytest.approx(math.log(n), abs=1e-12)


@pytest.mark.parametrize("alpha,n", [(2.0, 10), (5.0, 7), (0.7, 20)])
def test_beta_binomial_C_quadrature_matches_exact(alpha, n):
    """C (3.11) by quadrature equals the exact max_k (k/n)^k (1-k/n)^(n-k) B(a,a)/B(a+k, a+n-k),
    and the printed closed form is an upper bound on it."""
    k = np.arange(n + 1)
    log_sup = special.xlogy(k, k / n) + special.xlogy(n - k, 1 - k / n)
    exact = np.exp(np.max(log_sup + special.betaln(alpha, alpha)
                          - special.betaln(alpha + k, alpha + n - k)))
    model = K.family_model("beta_binomial", alpha=alpha, n=n)
    assert K.C_numeric(model) == pytest.approx(exact, rel=1e-7)
    assert K.beta_binomial_closed_form(alpha, n)["C"] >= exact


def test_exponential_constants():
    """Lemma 3.6.1: c = lambda satisfies (3.5); the best c is lambda/(1 - e^{-lambda(c2 - c1)})
    (slope at L0), and the closed-form C bounds the quadrature C."""
    lam, c1, c2, B = 1.3, 0.4, 2.5, 1.5
    r = K.family_constants("exponential", lam=lam, c1=c1, c2=c2, B=B)
    assert r["L0"] == c1 and r["L0_numeric"] == pytest.approx(c1)
    assert r["tail_ok"]
    best = lam / (-math.expm1(-lam * (c2 - c1)))
    assert r["c_numeric"] == pytest.approx(best, rel=1e-3)
    assert r["C"] >= r["C_numeric"]
    # C by an independent route: phi(x) in closed form for the truncated exponential prior
    def phi(x):
        f = lambda t: t * math.exp(-t * x) * lam * math.exp(-lam * t)  # noqa: E731
        return integrate.quad(f, c1, c2)[0] / (math.exp(-lam * c1) - math.exp(-lam * c2))
    xs = np.linspace(0, B, 201)
    sup = [max(t * math.exp(-t * x) for t in (c1, c2, min(max(1 / x if x else c2, c1), c2)))
           for x in xs]
    assert r["C_numeric"] == pytest.approx(max(s / phi(x) for s, x in zip(sup, xs)), rel=1e-6)
    assert r["L"] == pytest.approx(c2)


def test_normal_precision_printed_C_is_not_an_upper_bound():
    """Lemma 3.6.4's printed C = min{sqrt(c2/c1) e^{c1 c2^2/2}, e^{c2^3/2}} ignores the data
    bound B; for B = 3, mu = 1 the true sup ratio exceeds it, while the corrected
    max{sqrt(c2/c1) e^{c1 D^2/2}, e^{c2 D^2/2}}, D = B + |mu|, bounds it."""
    r = K.family_constants("normal_precision", lam=1.0, c1=0.5, c2=2.0, B=3.0, mu=1.0)
    assert r["C_numeric"] > r["C"]
    assert K.normal_precision_corrected_C(0.5, 2.0, 3.0, 1.0) >= r["C_numeric"]
    # exact ell: sup |g(x) - g(y)| / rho = B/(2(B+1)) * ... for mu = 0 on [-B, B] (grid sup)
    m = K.family_model("normal_precision", lam=1.0, c1=0.5, c2=2.0, B=2.0, mu=0.0)
    kappa = float(m.ell(np.array([1.0]))[0])
    assert kappa <= 2.0 / (2 * 3.0) + 1e-12
    assert kappa == pytest.approx(2.0 / 6.0, rel=2e-2)


@pytest.mark.parametrize("alpha,n", [(5.0, 10), (10.0, 20)])
def test_kl_bound_holds_for_beta_binomial_neighbours(alpha, n):
    """Theorem 3.4.1(2) with the recomputed C: the exact KL between the posteriors of counts k
    and k + 1 (rho = 1) stays below C (1 + 2 L0 + 1/c)."""
    cl = K.beta_binomial_closed_form(alpha, n)
    assert cl["c"] > 1
    C = K.C_numeric(K.family_model("beta_binomial", alpha=alpha, n=n))
    bound = K.kl_bound(C, cl["L0"], cl["c"])
    from pipeline.kernels.bayes_networks import beta_kl
    kls = [float(beta_kl(alpha + k, alpha + n - k, alpha + k + 1, alpha + n - k - 1))
           for k in range(n)]
    assert max(kls) <= bound
    assert max(kls) > 0


def test_bounds_formulas():
    assert K.delta_assumption2(2.0, 0.5, 2.0, N=3) == pytest.approx(3 * math.sqrt(0.5 * 2 * 2.5))
    assert K.eps_assumption1(1.5, 4) == 12.0
    t = K.distinguish_threshold(2.0, 0.5, 2.0, 10, 0.05)
    assert t == pytest.approx(3 * math.log(20) / (2 * 10 * 2 * 2.5))
    assert K.distinguish_threshold_lipschitz(2.0, 5, 0.05) == pytest.approx(3 * math.log(20) / 40)


def test_bayes_bounds_experiment_and_vacuous_flag():
    exp = get_experiment("bayes_bounds")
    row = exp.run(exp.resolve(family="beta_binomial", alpha=5.0, n=10, N=1), 0)
    assert set(row) == set(exp.columns)
    assert row["vacuous"] == (row["delta"] >= 1)
    assert row["eps"] == math.inf  # the untruncated Beta prior fails Assumption 1
    row2 = exp.run(exp.resolve(family="exponential", lam=50.0, c1=0.01, c2=0.02, B=0.1, N=1), 0)
    assert row2["delta"] < 1 and not row2["vacuous"]
    assert row2["eps"] == pytest.approx(2 * 0.02)
    with pytest.raises(ParamError):
        exp.resolve(family="poisson")
    with pytest.raises(ParamError):
        exp.resolve(family="exponential", c1=2.0, c2=1.0)
    with pytest.raises(ParamError):
        exp.resolve(alpha=-1.0)


@pytest.mark.parametrize("family", ["exponential", "laplace", "normal_precision"])
@pytest.mark.parametrize("lam,c1,c2", [(1.0, 0.5, 2.0), (3.0, 0.1, 5.0), (0.2, 1.0, 1.5)])
def test_truncated_exponential_tail_on_grid(family, lam, c1, c2):
    """(3.5) for Lemmas 3.6.1, 3.6.2, 3.6.4: the quadrature tail equals the analytic tail of the
    truncated exponential, (e^{-lam t} - e^{-lam c2}) / (e^{-lam c1} - e^{-lam c2}) at
    t = L / kappa, and stays below exp(-c (L - L0)) with the printed (L0, c)."""
    cl = {"exponential": K.exponential_closed_form(lam, c1, c2, 1.0),
          "laplace": K.laplace_closed_form(lam, c1, c2, 1.0, 0.0),
          "normal_precision": K.normal_precision_closed_form(lam, c1, c2, 1.0, 0.0)}[family]
    model = K.family_model(family, lam=lam, c1=c1, c2=c2, B=1.0, mu=0.0)
    kappa = float(model.ell(np.array([1.0]))[0])
    for t in np.linspace(c1, c2, 25)[1:-1]:
        L = kappa * t
        exact = (math.exp(-lam * t) - math.exp(-lam * c2)) / (math.exp(-lam * c1)
                                                              - math.exp(-lam * c2))
        assert K.prior_tail(model, L) == pytest.approx(exact, rel=1e-8, abs=1e-14)
        if L >= cl["L0"]:
            assert exact <= math.exp(-cl["c"] * (L - cl["L0"])) * (1 + 1e-12)
    r = K.family_constants(family, lam=lam, c1=c1, c2=c2, B=1.0, mu=0.0)
    assert r["tail_ok"]
    assert r["C_numeric"] >= 1 - 1e-9  # sup_theta p_theta(x) >= its prior average phi(x)


def test_extreme_priors_and_data_are_computed_not_raised():
    """Values the experiment accepts broke the numerics (review, 2026-12-06): quadrature of a
    truncated exponential prior found no mass when lam (c2 - c1) was large (ZeroDivisionError),
    and of phi(x) none when the integrand's peak was far narrower than the support (ln 0).
    Oracle: mpmath at 50 digits, in closed form through the incomplete gamma function."""
    import mpmath as mp

    mp.mp.dps = 50
    # normal_precision, mu far from the data: phi(x) = K int sqrt(t/2pi) e^{-(a+lam) t} dt
    lam, c1, c2, mu = 1.0, 0.5, 2.0, 1e6
    model = K.family_model("normal_precision", lam=lam, c1=c1, c2=c2, B=1000.0, mu=mu)
    norm = K.prior_normaliser(model)
    log_k = mp.log(lam) + lam * c1 - mp.log(-mp.expm1(-lam * (c2 - c1)))
    for x in (-1000.0, 0.0, 1000.0):
        b = (mp.mpf(x) - mu) ** 2 / 2 + lam
        exact = log_k - mp.log(mp.sqrt(2 * mp.pi)) + mp.log(
            mp.gammainc(1.5, b * c1, b * c2)) - 1.5 * mp.log(b)
        top, _ = K.sup_loglik(model, x, np.linspace(c1, c2, 4001))
        assert K.log_marginal(model, x, norm, top) == pytest.approx(float(exact), rel=1e-9)
    # exponential, a prior 10^15 times narrower than its support: phi(x) = K int t e^{-(x+lam) t}
    lam, c1, c2 = 1e6, 1e-9, 1e9
    model = K.family_model("exponential", lam=lam, c1=c1, c2=c2, B=1e9)
    norm = K.prior_normaliser(model)
    assert norm == 1.0
    log_k = mp.log(lam) + lam * mp.mpf(c1) - mp.log(-mp.expm1(-lam * (mp.mpf(c2) - c1)))
    for x in (0.0, 1.0, 1e3, 1e9):
        b = mp.mpf(x) + lam
        exact = log_k + mp.log(mp.gammainc(2, b * c1, b * c2)) - 2 * mp.log(b)
        top, _ = K.sup_loglik(model, x, np.linspace(c1, c2, 4001))
        assert K.log_marginal(model, x, norm, top) == pytest.approx(float(exact), rel=1e-9)
    # its tails, and the laplace family's with c2 = 1e6: the closed form, not 1/0
    for family, lam, c1, c2 in (("exponential", 1e6, 1e-9, 1e9), ("laplace", 1.0, 0.5, 1e6)):
        model = K.family_model(family, lam=lam, c1=c1, c2=c2, B=100.0)
        kappa = float(model.ell(np.array([1.0]))[0])
        for t in (c1 + 1e-7, c1 + 3 / lam, c1 + 30 / lam):
            exact = (mp.exp(-lam * (mp.mpf(t) - c1)) * -mp.expm1(-lam * (mp.mpf(c2) - t))
                     / -mp.expm1(-lam * (mp.mpf(c2) - c1)))
            assert K.neg_log_tail(model, kappa * t) == pytest.approx(float(-mp.log(exact)),
                                                                     rel=1e-9)
    r = K.family_constants("exponential", lam=1e6, c1=1e-9, c2=1e9, B=1e9)
    # C = sup_x sup_theta p_theta(x) / phi(x): at x = 0, c2 / E[theta] = 1e9 / (c1 + 1/lam)
    assert r["C_numeric"] == pytest.approx(1e9 / (1e-9 + 1e-6), rel=1e-6)
