"""Privacy of Bayesian posterior sampling: the assumption constants of thesis 004, chapter 3.

Seed: Zhang thesis (004), ch. 3. Notation:

* ell(theta) (3.2): Lipschitz constant of ``ln p_theta`` w.r.t. the data pseudo-metric rho.
* Assumption 1 (3.3): ell(theta) <= L for every theta.
* Assumption 2 (3.5): xi(Theta_L) >= 1 - exp(-c (L - L0)) for all L >= L0,
  with Theta_L = {theta : ell(theta) <= L} (3.4).
* C (3.11): C = sup_x sup_theta p_theta(x) / phi(x), phi(x) = int p_theta(x) dxi(theta).

Each example family of section 3.6 is given twice: the thesis's closed forms (as printed) and a
numerical recomputation (brute force over data pairs for ell, quadrature for the prior tail and
for phi). Bounds derived from them:

* KL bound, Theorem 3.4.1(2): D(xi(.|x) || xi(.|y)) <= C (1 + 2 L0 + 1/c) rho (needs c > 1).
* eps = 2 N L, Corollary 3.5.3(1) (Assumption 1, N posterior samples).
* delta = N sqrt(C/2 (1 + 2 L0 + 1/c) rho), Theorem 3.5.1(2) + composition (Corollary 3.5.3(2)).
* distinguishability, Theorem 3.5.6: the adversary with N samples can only tell x from y at
  confidence 1 - conf when rho >= 3 ln(1/conf) / (2 N K), K the KL-bound coefficient.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import integrate, optimize, special

FAMILIES = ("beta_binomial", "exponential", "laplace", "normal_precision")


# --------------------------------------------------------------------------- closed forms
def beta_binomial_closed_form(alpha: float, n: int) -> dict:
    """Lemma 3.6.3: Binomial(theta, n) with prior Beta(alpha, alpha), rho = |k1 - k2|.

    L0 = ln n, c = 2^(1 - 2 alpha) / B(alpha, alpha),
    C = B(alpha, alpha) / B((n + 2 alpha - 1)/2, (n + 2 alpha + 1)/2).
    """
    log_c = (1.0 - 2.0 * alpha) * math.log(2.0) - special.betaln(alpha, alpha)
    log_C = special.betaln(alpha, alpha) - special.betaln((n + 2 * alpha - 1) / 2,
                                                          (n + 2 * alpha + 1) / 2)
    return {"L0": math.log(n), "c": math.exp(log_c), "C": _exp(log_C)}


def exponential_closed_form(lam: float, c1: float, c2: float, B: float) -> dict:
    """Lemma 3.6.1: Exp(x; theta), prior Exp(lam) truncated to [c1, c2], x in [0, B], rho = |x - y|.

    L0 = c1, c = lam, C = c2 / min{c1 e^(-c1 B), c2 e^(-c2 B)}.
    """
    log_den = min(math.log(c1) - c1 * B, math.log(c2) - c2 * B)
    return {"L0": c1, "c": lam, "C": _exp(math.log(c2) - log_den)}


def laplace_closed_form(lam: float, c1: float, c2: float, B: float, mu: float) -> dict:
    """Lemma 3.6.2 as printed: Laplace(x; s, mu), 1/s ~ Exp(lam) truncated to [c1, c2].

    L0 = c1, c = lam, C = c2 / (2 min{1/(2 c2), exp(-(B + |mu|)/c1)/(2 c1)}) (the larger of the
    two printed cases x < mu and x >= mu, i.e. the data-independent constant). The printed form
    mixes s and 1/s; ``laplace_corrected_C`` gives the bound the proof's argument supports.
    """
    case_lo = min(1 / (2 * c2), math.exp((-B - mu) / c1) / (2 * c1))
    case_hi = min(1 / (2 * c2), math.exp((mu - B) / c1) / (2 * c1))
    return {"L0": c1, "c": lam, "C": c2 / (2 * min(case_lo, case_hi))}


def laplace_corrected_C(c1: float, c2: float, B: float, mu: float) -> float:
    """sup_theta p / inf_{x,theta} p for p = theta/2 exp(-theta |x - mu|), |x| <= B."""
    D = B + abs(mu)
    log_den = min(math.log(c1) - c1 * D, math.log(c2) - c2 * D)
    return _exp(math.log(c2) - log_den)


def normal_precision_closed_form(lam: float, c1: float, c2: float, B: float, mu: float) -> dict:
    """Lemma 3.6.4 as printed: N(x; mu, 1/theta), theta ~ Exp(lam) truncated to [c1, c2],
    rho(x, y) = |x^2 - y^2| + 2|x - y|.

    c = 2 lam / max{|mu|, 1}, L0 = c1 max{|mu|, 1} / 2,
    C = min{sqrt(c2/c1) exp(c1 c2^2 / 2), exp(c2^3 / 2)} (printed; B does not appear).
    """
    m = max(abs(mu), 1.0)
    C = min(math.sqrt(c2 / c1) * _exp(c1 * c2 ** 2 / 2), _exp(c2 ** 3 / 2))
    return {"L0": c1 * m / 2, "c": 2 * lam / m, "C": C}


def normal_precision_corrected_C(c1: float, c2: float, B: float, mu: float) -> float:
    """The proof's argument with the data bound B in place of c2 and max in place of min:
    C = max{sqrt(c2/c1) exp(c1 D^2/2), exp(c2 D^2/2)}, D = B + |mu|."""
    D2 = (B + abs(mu)) ** 2
    return max(math.sqrt(c2 / c1) * _exp(c1 * D2 / 2), _exp(c2 * D2 / 2))


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


# --------------------------------------------------------------------------- numeric side
@dataclass
class FamilyModel:
    """What the numerical recomputation needs about one (likelihood, prior) pair.

    ``loglik(x, theta)`` broadcasts; ``ell(theta)`` is the Lipschitz constant (3.2), increasing
    in |theta - theta_star|; the prior density is on [lo, hi] (normalised here by quadrature).
    """

    loglik: Callable[[np.ndarray, np.ndarray], np.ndarray]
    prior_logpdf: Callable[[np.ndarray], np.ndarray]
    lo: float
    hi: float
    data_grid: np.ndarray
    ell: Callable[[np.ndarray], np.ndarray]
    theta_star: float
    prior_cdf: Callable[[float], float] | None = None  # exact CDF and survival function, used
    prior_sf: Callable[[float], float] | None = None   # for tails where quad meets singularities


def chord_slope_range(log_weights: np.ndarray, all_pairs: bool = True) -> tuple[float, float]:
    """Min and max of (w[k1] - w[k2]) / (k1 - k2) over k1 != k2 (brute force over all pairs,
    or over adjacent pairs only, which suffices when w is concave)."""
    w = np.asarray(log_weights, dtype=float)
    if all_pairs:
        k = np.arange(len(w))
        k1, k2 = np.triu_indices(len(w), 1)
        s = (w[k2] - w[k1]) / (k[k2] - k[k1])
    else:
        s = np.diff(w)
    return float(s.min()), float(s.max())


def scale_family_kappa(g: Callable[[np.ndarray], np.ndarray],
                       rho: Callable[[np.ndarray, np.ndarray], np.ndarray],
                       grid: np.ndarray) -> float:
    """kappa = sup_{x != y} |g(x) - g(y)| / rho(x, y) over grid pairs, for log-likelihoods
    of the form a(theta) - theta g(x) (so that ell(theta) = kappa theta)."""
    i, j = np.triu_indices(len(grid), 1)
    x, y = grid[i], grid[j]
    r = rho(x, y)
    ok = r > 0
    return float(np.max(np.abs(g(x[ok]) - g(y[ok])) / r[ok]))


def _trunc_exp_logpdf(lam: float, c1: float, c2: float):
    log_k = math.log(lam) - (-lam * c1 + math.log(-math.expm1(-lam * (c2 - c1))))

    def logpdf(t):
        return log_k - lam * np.asarray(t, dtype=float)

    return logpdf


def _trunc_exp_cdf_sf(lam: float, c1: float, c2: float):
    """The truncated exponential's CDF and survival function in closed form,
    F(t) = (1 - e^{-lam (t - c1)}) / (1 - e^{-lam (c2 - c1)}), each through expm1: quadrature of
    the density found no mass (0, then a division by zero) once lam (c2 - c1) was large."""
    denom = -math.expm1(-lam * (c2 - c1))

    def cdf(t):
        t = min(max(float(t), c1), c2)
        return -math.expm1(-lam * (t - c1)) / denom

    def sf(t):
        t = min(max(float(t), c1), c2)
        return math.exp(-lam * (t - c1)) * -math.expm1(-lam * (c2 - t)) / denom

    return cdf, sf


def family_model(family: str, *, alpha: float = 2.0, n: int = 10, lam: float = 1.0,
                 c1: float = 0.5, c2: float = 2.0, B: float = 1.0, mu: float = 0.0,
                 grid_points: int = 201) -> FamilyModel:
    """The numerical model of one section 3.6 example."""
    if family == "beta_binomial":
        k = np.arange(n + 1, dtype=float)
        log_binom = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        s_min, s_max = chord_slope_range(log_binom, all_pairs=n <= 300)

        def ell(t):
            t = np.asarray(t, dtype=float)
            lg = np.log(t) - np.log1p(-t)
            return np.maximum(s_max + lg, -(s_min + lg))

        def loglik(x, t):  # sequence likelihood with k ones: binomial coefficient cancels in C
            return special.xlogy(x, t) + special.xlog1py(n - x, -t)

        def prior_logpdf(t):
            return special.xlogy(alpha - 1, t) + special.xlog1py(alpha - 1, -t) \
                - special.betaln(alpha, alpha)

        return FamilyModel(loglik, prior_logpdf, 0.0, 1.0, k, ell, 0.5,
                           prior_cdf=lambda t: float(special.betainc(alpha, alpha, t)),
                           prior_sf=lambda t: float(special.betainc(alpha, alpha, 1.0 - t)))

    if family in ("exponential", "laplace", "normal_precision"):
        prior_logpdf = _trunc_exp_logpdf(lam, c1, c2)
        if family == "exponential":
            grid = np.linspace(0.0, B, grid_points)
            g = lambda x: x  # noqa: E731
            rho = lambda x, y: np.abs(x - y)  # noqa: E731

            def loglik(x, t):
                return np.log(t) - t * x
        elif family == "laplace":
            grid = np.linspace(-B, B, grid_points)
            g = lambda x: np.abs(x - mu)  # noqa: E731
            rho = lambda x, y: np.abs(x - y)  # noqa: E731

            def loglik(x, t):
                return np.log(t / 2) - t * np.abs(x - mu)
        else:
            grid = np.linspace(-B, B, grid_points)
            g = lambda x: (x - mu) ** 2 / 2  # noqa: E731
            rho = lambda x, y: np.abs(x ** 2 - y ** 2) + 2 * np.abs(x - y)  # noqa: E731

            def loglik(x, t):
                return 0.5 * np.log(t / (2 * np.pi)) - t * (x - mu) ** 2 / 2
        kappa = scale_family_kappa(g, rho, grid)
        cdf, sf = _trunc_exp_cdf_sf(lam, c1, c2)
        return FamilyModel(loglik, prior_logpdf, c1, c2, grid,
                           lambda t: kappa * np.asarray(t, dtype=float), c1,
                           prior_cdf=cdf, prior_sf=sf)
    raise ValueError(f"unknown family {family!r}; one of {FAMILIES}")


def prior_normaliser(model: FamilyModel) -> float:
    """The prior's total mass (1 up to rounding): from its CDF where the model has one, else by
    quadrature of its density."""
    if model.prior_cdf is not None:
        return model.prior_cdf(model.hi) - model.prior_cdf(model.lo)
    val, _ = integrate.quad(lambda t: math.exp(float(model.prior_logpdf(t))), model.lo, model.hi,
                            limit=200)
    return val


def lipschitz_set(model: FamilyModel, L: float) -> tuple[float, float]:
    """Theta_L = [a, b] (3.4), by root finding on the two monotone branches of ell
    (decreasing on [lo, theta_star], increasing on [theta_star, hi])."""
    ts = model.theta_star
    tiny = 1e-15

    def end(edge: float) -> float:
        inner = edge + tiny if edge < ts else edge - tiny  # ell may be infinite at 0 and 1
        if edge == ts or float(model.ell(np.array([inner]))[0]) <= L:
            return edge
        return optimize.brentq(lambda t: float(model.ell(np.array([t]))[0]) - L,
                               min(inner, ts), max(inner, ts), xtol=1e-300, rtol=1e-15)

    return end(model.lo), end(model.hi)


def prior_tail(model: FamilyModel, L: float, norm: float | None = None) -> float:
    """1 - xi(Theta_L), by quadrature of the prior density (outside Theta_L, or inside it when
    that is the smaller part, so that tails near 1 keep their precision through log1p)."""
    return math.exp(-neg_log_tail(model, L, norm))


def neg_log_tail(model: FamilyModel, L: float, norm: float | None = None) -> float:
    """-ln(1 - xi(Theta_L)) (inf when Theta_L has full prior mass).

    Uses the prior's exact CDF when the model has one (the Beta prior's density is singular at
    the ends for alpha < 1), else quadrature of the density."""
    a, b = lipschitz_set(model, L)
    if model.prior_cdf is not None:
        inside = model.prior_cdf(b) - model.prior_cdf(a)
        tail = model.prior_cdf(a) + model.prior_sf(b)
    else:
        norm = prior_normaliser(model) if norm is None else norm
        pdf = lambda t: math.exp(float(model.prior_logpdf(t)))  # noqa: E731
        with warnings.catch_warnings():  # far tails are tiny; quad's roundoff note is harmless
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            inside = integrate.quad(pdf, a, b, limit=200, epsabs=0, epsrel=1e-11)[0] / norm
            tail = 0.0
            if a > model.lo:
                tail += integrate.quad(pdf, model.lo, a, limit=200, epsabs=0, epsrel=1e-11)[0]
            if b < model.hi:
                tail += integrate.quad(pdf, b, model.hi, limit=200, epsabs=0, epsrel=1e-11)[0]
            tail /= norm
    if inside < 0.5:
        return -math.log1p(-inside)
    return math.inf if tail <= 0 else -math.log(min(tail, 1.0))


def c_numeric(model: FamilyModel, L0: float, span: float | None = None, points: int = 60,
              norm: float | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """Largest c on a grid of L - L0 in [1e-4, span] with tail(L) <= exp(-c (L - L0)):
    c = min over the grid of -ln tail(L) / (L - L0) (grid min; the true inf may be slightly lower).
    Returns (c, L grid, tails)."""
    norm = prior_normaliser(model) if norm is None else norm
    ell_top = float(np.max(model.ell(np.array([model.lo + 1e-12, model.hi - 1e-12]))))
    if span is None:
        span = min(max(ell_top - L0, 1.0), 50.0)
    gaps = np.logspace(-4, math.log10(span), points)
    Ls = L0 + gaps
    nlt = np.array([neg_log_tail(model, L, norm) for L in Ls])
    return float(np.min(nlt / gaps)), Ls, np.exp(-nlt)


def assumption2_holds(model: FamilyModel, L0: float, c: float, points: int = 60,
                      rtol: float = 1e-9) -> bool:
    """Check (3.5), tail(L) <= exp(-c (L - L0)), on a grid of L >= L0."""
    _, Ls, tails = c_numeric(model, L0, points=points)
    return bool(np.all(tails <= np.exp(-c * (Ls - L0)) * (1 + rtol) + 1e-15))


def log_marginal(model: FamilyModel, x: float, norm: float, log_scale: float) -> float:
    """ln phi(x) by quadrature; the integrand is scaled by exp(-log_scale) against underflow."""
    def f(t):
        return math.exp(float(model.loglik(x, t) + model.prior_logpdf(t)) - log_scale)

    # Breakpoints closing in on the integrand's peak (found on a grid): a peak far narrower
    # than the prior's support (normal_precision with a large |x - mu|) fell between
    # quadrature nodes, which found 0 and ln 0 raised.
    lo, hi = model.lo, model.hi
    grid = np.linspace(lo, hi, 2001)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.asarray(model.loglik(x, grid) + model.prior_logpdf(grid), dtype=float)
    logs = np.where(np.isnan(logs), -np.inf, logs)
    i = int(np.argmax(logs))
    peak = float(grid[i])
    beside = logs[max(i - 1, 0):i + 2]
    sharp = not np.isfinite(logs[i]) or float(logs[i] - beside.min()) > 5.0  # finer than the grid
    near = [peak + side * (hi - lo) * 10.0 ** -j for j in range(1, 17) for side in (-1, 1)] \
        if sharp else []
    pts = sorted({t for t in [peak, *near] if lo < t < hi})
    with warnings.catch_warnings():  # (the far tails' roundoff notes, as in neg_log_tail)
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        val, _ = integrate.quad(f, lo, hi, limit=400, points=pts or None, epsabs=0,
                                epsrel=1e-10)
    return math.log(val) + log_scale - math.log(norm)


def sup_loglik(model: FamilyModel, x: float, theta_grid: np.ndarray) -> tuple[float, float]:
    """sup_theta ln p_theta(x): dense grid, then a bounded scalar refinement."""
    vals = model.loglik(x, theta_grid)
    i = int(np.argmax(vals))
    a = theta_grid[max(i - 1, 0)]
    b = theta_grid[min(i + 1, len(theta_grid) - 1)]
    best_t, best = float(theta_grid[i]), float(vals[i])
    if b > a:
        r = optimize.minimize_scalar(lambda t: -float(model.loglik(x, t)), bounds=(a, b),
                                     method="bounded", options={"xatol": 1e-13})
        if -r.fun > best:
            best_t, best = float(r.x), float(-r.fun)
    return best, best_t


def C_numeric(model: FamilyModel, norm: float | None = None) -> float:
    """C (3.11) = sup over the data grid of sup_theta p_theta(x) / phi(x), phi by quadrature."""
    norm = prior_normaliser(model) if norm is None else norm
    tg = np.linspace(model.lo, model.hi, 4001)
    tg = np.clip(tg, model.lo + 1e-12, model.hi - 1e-12) if model.lo == 0.0 else tg
    best = -math.inf
    for x in model.data_grid:
        top, _ = sup_loglik(model, float(x), tg)
        best = max(best, top - log_marginal(model, float(x), norm, top))
    return _exp(best)


def assumption1_L(model: FamilyModel) -> float:
    """sup_theta ell(theta) over the prior support (Assumption 1); inf when unbounded."""
    if model.lo == 0.0 and model.hi == 1.0:
        return math.inf  # Beta prior with full support: ell -> inf at the ends
    return float(max(model.ell(np.array([model.lo])), model.ell(np.array([model.hi])))[0])


# --------------------------------------------------------------------------- bounds
def kl_bound(C: float, L0: float, c: float, rho: float = 1.0) -> float:
    """Theorem 3.4.1(2): C (1 + 2 L0 + 1/c) rho."""
    return C * (1 + 2 * L0 + 1 / c) * rho


def delta_assumption2(C: float, L0: float, c: float, N: int = 1, rho: float = 1.0) -> float:
    """Theorem 3.5.1(2) with N-fold composition: N sqrt(C/2 (1 + 2 L0 + 1/c) rho)."""
    return N * math.sqrt(0.5 * kl_bound(C, L0, c, rho))


def eps_assumption1(L: float, N: int = 1) -> float:
    """Corollary 3.5.3(1): (2 N L, 0)-DP under rho."""
    return 2 * N * L


def distinguish_threshold(C: float, L0: float, c: float, N: int, conf_delta: float) -> float:
    """Theorem 3.5.6 (Assumption 2), derived from the KL bound of Theorem 3.4.1:
    rho >= 3 ln(1/conf) / (2 N C (1 + 2 L0 + 1/c))."""
    return 3 * math.log(1 / conf_delta) / (2 * N * kl_bound(C, L0, c))


def distinguish_threshold_printed(C: float, L0: float, c: float, N: int,
                                  conf_delta: float) -> float:
    """Theorem 3.5.6 as printed: rho >= 3 ln(1/conf) / (2 N (C + 2 L0 + 1/c))."""
    return 3 * math.log(1 / conf_delta) / (2 * N * (C + 2 * L0 + 1 / c))


def distinguish_threshold_lipschitz(L: float, N: int, conf_delta: float) -> float:
    """Theorem 3.5.6 (Assumption 1): rho >= 3 ln(1/conf) / (4 L N)."""
    return 3 * math.log(1 / conf_delta) / (4 * L * N)


def family_constants(family: str, **kw) -> dict:
    """Closed-form and numerical constants and all derived bounds of one family point."""
    alpha, n, lam = kw.get("alpha", 2.0), int(kw.get("n", 10)), kw.get("lam", 1.0)
    c1, c2, B, mu = kw.get("c1", 0.5), kw.get("c2", 2.0), kw.get("B", 1.0), kw.get("mu", 0.0)
    if family == "beta_binomial":
        closed = beta_binomial_closed_form(alpha, n)
    elif family == "exponential":
        closed = exponential_closed_form(lam, c1, c2, B)
    elif family == "laplace":
        closed = laplace_closed_form(lam, c1, c2, B, mu)
    elif family == "normal_precision":
        closed = normal_precision_closed_form(lam, c1, c2, B, mu)
    else:
        raise ValueError(f"unknown family {family!r}; one of {FAMILIES}")
    model = family_model(family, alpha=alpha, n=n, lam=lam, c1=c1, c2=c2, B=B, mu=mu)
    norm = prior_normaliser(model)
    L0_num = float(model.ell(np.array([model.theta_star]))[0])
    c_num, Ls, tails = c_numeric(model, L0_num, norm=norm)
    # (3.5) with the closed-form (L0, c): ln tail(L) <= -c (L - L0) on the grid
    nlt_closed = np.array([neg_log_tail(model, L, norm) for L in closed["L0"] + (Ls - L0_num)])
    tail_ok = bool(np.all(nlt_closed >= closed["c"] * (Ls - L0_num) * (1 - 1e-9) - 1e-12))
    return {**closed, "L0_numeric": L0_num, "c_numeric": c_num, "C_numeric": C_numeric(model, norm),
            "L": assumption1_L(model), "tail_ok": tail_ok}
