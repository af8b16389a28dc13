"""Optimal composition of (eps, delta)-differential privacy (seed 001, Kairouz-Oh-Viswanath).

Everything here is a pure numpy/scipy function; no I/O.

Notation (seed 001, Section 5.1, eqs. (12)-(13)). The dominating pair of one (eps, delta)-DP
step is the 4-point pair

    P0 = [delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0]
    P1 = [0,     (1-delta)/(1+e^eps),       (1-delta) e^eps/(1+e^eps), delta].

Under k-fold composition, conditioned on no "delta" outcome (probability (1-delta)^k), the
privacy loss log(P0/P1) is (k - 2l) eps where l ~ Binomial(k, q), q = 1/(1+e^eps) counts the
outcomes x=2. The hockey-stick divergence (seed Section 5.1, d_eps~) is

    d(eps~) = 1 - (1-delta)^k + (1-delta)^k * sum_{l: (k-2l)eps > eps~} w_l (1 - e^{eps~ - (k-2l)eps}),

with w_l = C(k,l) q^l (1-q)^(k-l). At eps~ = (k-2i) eps this is the seed's delta_i (the display
after Remark 5.1, eq. (6) of the paper). Theorem 3.3: the k-fold adaptive composition is
(eps~, delta~)-DP iff d(eps~) <= delta~, so the optimal epsilon is the generalised inverse of d.

Numerics:
* every sum is taken in log space over positive terms only (no cancellation): the term
  w_l (1 - e^{eps~ - L}) is exp(log w_l + log1mexp(eps~ - L));
* log w_l uses Loader's saddle-point form (stirlerr + bd0). Plain gammaln differences lose
  ~1e-9 relative at k = 1e6 (gammaln(k+1) ~ 1.3e7 has ulp 2e-9); the saddle-point form keeps the
  terms that matter to ~1e-12. gammaln is used for the small-argument Stirling corrections;
* nothing is exponentiated before it is known to be representable: no overflow at k eps > 709;
* scipy.stats.binom.logcdf is not used (it underflows at large k);
* the inverse is an exact piecewise solve: between two consecutive loss values d(eps~) = A - e^{eps~} B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

_LOG_2PI = math.log(2.0 * math.pi)


# --------------------------------------------------------------------------- small helpers
def log1mexp(x):
    """log(1 - exp(x)) for x <= 0, accurate everywhere (Maechler 2012). -inf at x = 0."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_pure_delta_floor(delta: float, k: int) -> float:
    """log(1 - (1-delta)^k): the mass of the 'delta' outcomes after k steps (seed Section 6, P0^k(B0))."""
    if delta <= 0.0:
        return -math.inf
    return math.log(-math.expm1(k * math.log1p(-delta)))


def pure_delta_floor(delta: float, k: int) -> float:
    """1 - (1-delta)^k, by expm1/log1p (no cancellation for small delta)."""
    return -math.expm1(k * math.log1p(-delta)) if delta > 0.0 else 0.0


def residual_delta(delta_target: float, delta: float, k: int) -> float:
    """delta' = (delta_target - (1 - (1-delta)^k)) / (1-delta)^k.

    The part of delta_target left for the pure-epsilon pair (seed eq. (19)); negative when
    delta_target is below the floor 1 - (1-delta)^k.
    """
    if delta <= 0.0:
        return float(delta_target)
    log_keep = k * math.log1p(-delta)  # log (1-delta)^k
    excess = delta_target + math.expm1(log_keep)  # delta_target - floor
    if excess < 0.0:
        return excess  # only the sign matters; 1/(1-delta)^k may overflow here
    return excess * math.exp(-log_keep)  # here (1-delta)^k >= 1 - delta_target > 0


def _stirlerr(n):
    """log(n!) - log(sqrt(2 pi n) (n/e)^n) for n >= 1 (Loader 2000), vectorised."""
    n = np.asarray(n, dtype=float)
    out = np.empty_like(n)
    small = n <= 15.0
    ns = n[small]
    out[small] = gammaln(ns + 1.0) - (ns + 0.5) * np.log(ns) + ns - 0.5 * _LOG_2PI
    nl = n[~small]
    nn = nl * nl
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    out[~small] = (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / nl
    return out


def _bd0(x, m, log_m: float | None = None):
    """x log(x/m) + m - x for x > 0, m > 0, without cancellation (Loader 2000), vectorised.

    ``log_m`` keeps the far-from-mean branch finite when m itself underflows (huge eps).
    """
    x = np.asarray(x, dtype=float)
    m = np.broadcast_to(np.asarray(m, dtype=float), x.shape)
    out = np.empty_like(x)
    close = np.abs(x - m) < 0.1 * (x + m)
    xc, mc = x[close], m[close]
    v = (xc - mc) / (xc + mc)
    s = (xc - mc) * v
    ej = 2.0 * xc * v
    v2 = v * v
    for j in range(1, 40):  # |v| < 0.1: each term gains two digits
        ej = ej * v2
        s_new = s + ej / (2 * j + 1)
        if np.array_equal(s_new, s):
            break
        s = s_new
    out[close] = s
    xf, mf = x[~close], m[~close]
    # log(x) - log(m): x/m may overflow when m underflows towards 0 (huge eps)
    lm = np.log(mf) if log_m is None else log_m
    out[~close] = xf * (np.log(xf) - lm) + mf - xf
    return out


def log_binom_pmf(x, n: int, p: float, log_p: float | None = None, log_q: float | None = None):
    """log P[Bin(n, p) = x] for integer 0 <= x <= n, accurate where the pmf is representable.

    Loader's saddle-point form: stirlerr(n) - stirlerr(x) - stirlerr(n-x) - bd0(x, np)
    - bd0(n-x, n(1-p)) + 0.5 log(n / (2 pi x (n-x))). ``log_p``/``log_q`` may be given for
    accuracy when p or 1-p is tiny.
    """
    x = np.asarray(x, dtype=float)
    q = 1.0 - p
    if log_p is None:
        log_p = math.log(p)
    if log_q is None:
        log_q = math.log1p(-p)
    out = np.empty_like(x)
    lo = x == 0
    hi = x == n
    out[lo] = n * log_q
    out[hi] = n * log_p
    mid = ~(lo | hi)
    xm = x[mid]
    if xm.size:
        nf = float(n)
        out[mid] = (_stirlerr(np.array([nf]))[0] - _stirlerr(xm) - _stirlerr(nf - xm)
                    - _bd0(xm, nf * p, math.log(nf) + log_p) - _bd0(nf - xm, nf * q, math.log(nf) + log_q)
                    + 0.5 * (np.log(nf / (xm * (nf - xm))) - _LOG_2PI))
    return out


def _log_p_q(eps: float) -> tuple[float, float]:
    """log(e^eps/(1+e^eps)), log(1/(1+e^eps)) without overflow."""
    return -math.log1p(math.exp(-eps)), -eps - math.log1p(math.exp(-eps))


# --------------------------------------------------------------------------- loss distributions
@dataclass(frozen=True)
class LossDistribution:
    """Positive part of a discrete privacy-loss distribution of a symmetric pair.

    ``loss`` strictly decreasing, all > 0; ``log_weight`` = log P0(loss = value). Only positive
    losses matter for d(eps~) with eps~ >= 0.
    """

    loss: np.ndarray
    log_weight: np.ndarray
    next_loss: float = 0.0  # loss just below the last kept entry (0 when nothing was cut off)


def homogeneous_loss(eps: float, k: int, ell_lo: int = 0, ell_hi: int | None = None) -> LossDistribution:
    """Positive privacy losses (k-2l) eps, l < k/2, with Binomial(k, 1/(1+e^eps)) weights (seed 5.1).

    ``ell_lo``/``ell_hi`` restrict l to a window [ell_lo, ell_hi] (used by :func:`eps_optimal`).
    """
    top = (k + 1) // 2 - 1  # largest l with (k-2l) > 0
    hi = top if ell_hi is None else min(ell_hi, top)
    ell = np.arange(ell_lo, hi + 1, dtype=float)
    log_p, log_q = _log_p_q(eps)
    q = math.exp(log_q)
    lw = log_binom_pmf(ell, k, q, log_p=log_q, log_q=log_p)
    next_loss = (k - 2.0 * (hi + 1)) * eps if hi < top else 0.0
    return LossDistribution(loss=(k - 2.0 * ell) * eps, log_weight=lw, next_loss=next_loss)


def _homogeneous_lower_cut(eps: float, k: int, log_delta_prime: float) -> int:
    """Largest l below the mode with log w_l < log delta' - 60 - log k (0 if none).

    w_l increases up to the mode, so the terms l' < l together weigh < k w_l < 1e-26 delta': dropping
    them changes nothing at double precision, and the optimum's piece lies above l.
    """
    log_p, log_q = _log_p_q(eps)
    q = math.exp(log_q)
    mode = int(math.floor((k + 1) * q))
    top = (k + 1) // 2 - 1
    cut = log_delta_prime - 60.0 - math.log(k)

    def lw(ell: int) -> float:
        return float(log_binom_pmf(np.array([float(ell)]), k, q, log_p=log_q, log_q=log_p)[0])

    b = min(mode, top)
    if b <= 0 or lw(0) >= cut:
        return 0
    if lw(b) < cut:
        return b
    a = 0
    while b - a > 1:  # invariant: lw(a) < cut <= lw(b)
        mid = (a + b) // 2
        if lw(mid) < cut:
            a = mid
        else:
            b = mid
    return a


def _eps_optimal_chunked(eps: float, k: int, log_dp: float, chunk: int = 4096) -> float:
    """Exact piecewise inverse, summing l upward from the lower cut in growing chunks and stopping
    at the piece that contains the answer (most of the k/2 terms are never touched)."""
    top = (k + 1) // 2 - 1
    start = _homogeneous_lower_cut(eps, k, log_dp)
    carry_a = carry_b = carry_c = -math.inf
    while start <= top:
        stop = min(top, start + chunk - 1)
        dist = homogeneous_loss(eps, k, start, stop)
        log_a = np.logaddexp.accumulate(np.concatenate(([carry_a], dist.log_weight)))[1:]
        log_b = np.logaddexp.accumulate(np.concatenate(([carry_b], dist.log_weight - dist.loss)))[1:]
        log_c = np.logaddexp.accumulate(np.concatenate(([carry_c], dist.log_weight
                                                        + log1mexp(-dist.loss))))[1:]
        nxt = np.append(dist.loss[1:], dist.next_loss)
        log_g = log_a + log1mexp(np.minimum(nxt + log_b - log_a, 0.0))
        j = int(np.searchsorted(log_g, log_dp, side="left"))
        if j < log_g.size:
            return _solve_piece(float(log_a[j]), float(log_b[j]), float(nxt[j]), float(dist.loss[j]), log_dp,
                                float(log_c[j]))
        carry_a, carry_b, carry_c = float(log_a[-1]), float(log_b[-1]), float(log_c[-1])
        start, chunk = stop + 1, chunk * 2
    return 0.0  # delta' >= d(0)


def _solve_piece(log_a: float, log_b: float, lower: float, upper: float, log_dp: float,
                 log_c: float | None = None) -> float:
    """Solve A - e^{x} B = delta' on [lower, upper]: x = log(A - delta') - log B.

    That difference of logs has an absolute error ~1e-16, too much when x is small (tiny eps:
    at k eps = 1e-97 it returned 0). For x < 1 we use C = A - B = sum w (1 - e^{-L}) (``log_c``,
    summed without cancellation): e^x = 1 + (C - delta')/B, x = log1p((C - delta')/B).
    """
    if log_dp >= log_a:  # impossible mathematically (g < A); guard rounding
        return lower
    x = log_a + float(log1mexp(log_dp - log_a)) - log_b
    if x < 1.0 and log_c is not None and math.isfinite(log_c):
        if log_dp >= log_c:
            x = 0.0
        else:
            x = math.log1p(math.exp(log_c + float(log1mexp(log_dp - log_c)) - log_b))
    return float(min(max(x, lower), upper))


def _prefix_logsums(dist: LossDistribution):
    """log A_j = log sum_{i<=j} w_i and log B_j = log sum_{i<=j} w_i e^{-L_i}."""
    log_a = np.logaddexp.accumulate(dist.log_weight)
    log_b = np.logaddexp.accumulate(dist.log_weight - dist.loss)
    return log_a, log_b


def log_hockey_stick(dist: LossDistribution, eps_tilde) -> np.ndarray:
    """log sum_{L > eps~} w (1 - e^{eps~ - L}) for each eps~ >= 0 (the pure-eps part of d)."""
    eps_tilde = np.atleast_1d(np.asarray(eps_tilde, dtype=float))
    out = np.full(eps_tilde.shape, -math.inf)
    for idx, t in enumerate(eps_tilde):
        active = dist.loss > t
        if np.any(active):
            terms = dist.log_weight[active] + log1mexp(t - dist.loss[active])
            out[idx] = logsumexp(terms)
    return out


def delta_for_eps(dist: LossDistribution, eps_tilde: float, delta: float = 0.0, k: int = 0) -> float:
    """d(eps~) = 1-(1-delta)^k + (1-delta)^k * hockey-stick(eps~) (seed Section 5.1 / eq. (19))."""
    return min(1.0, math.exp(log_delta_for_eps(dist, eps_tilde, delta, k)))


def log_delta_for_eps(dist: LossDistribution, eps_tilde: float, delta: float = 0.0, k: int = 0) -> float:
    """log d(eps~), accurate also when d is below the double range's comfort zone."""
    log_h = float(log_hockey_stick(dist, eps_tilde)[0])
    if delta > 0.0:
        log_h = float(np.logaddexp(log_pure_delta_floor(delta, k), k * math.log1p(-delta) + log_h))
    return min(0.0, log_h)  # a probability: clip the last-ulp excess of sums near 1


def breakpoint_deltas(dist: LossDistribution) -> np.ndarray:
    """log of the pure part of d at each breakpoint: entry j is at eps~ = L_{j+1} (0 after the last).

    Between L_{j+1} and L_j the active set is {0..j} and d = A_j - e^{eps~} B_j.
    """
    log_a, log_b = _prefix_logsums(dist)
    nxt = np.append(dist.loss[1:], dist.next_loss)
    return log_a + log1mexp(np.minimum(nxt + log_b - log_a, 0.0))


def eps_for_log_delta(dist: LossDistribution, log_delta_prime: float) -> float:
    """Smallest eps~ >= 0 with hockey-stick(eps~) <= delta' (exact piecewise inverse).

    On the piece L_{j+1} <= eps~ <= L_j: A_j - e^{eps~} B_j = delta'  =>
    eps~ = log(A_j - delta') - log B_j, all in log space.
    """
    n = dist.loss.size
    if n == 0:
        return 0.0
    if log_delta_prime == -math.inf:
        return float(dist.loss[0])
    log_a, log_b = _prefix_logsums(dist)
    nxt = np.append(dist.loss[1:], dist.next_loss)
    log_g = log_a + log1mexp(np.minimum(nxt + log_b - log_a, 0.0))  # increasing in j
    j = int(np.searchsorted(log_g, log_delta_prime, side="left"))
    if j >= n:
        if dist.next_loss > 0.0:
            return math.nan  # the window was cut too early: caller must widen it
        return 0.0  # delta' >= d(0): already (0, delta')-DP
    log_c = float(logsumexp(dist.log_weight[:j + 1] + log1mexp(-dist.loss[:j + 1])))
    return _solve_piece(float(log_a[j]), float(log_b[j]), float(nxt[j]), float(dist.loss[j]),
                        log_delta_prime, log_c)


# --------------------------------------------------------------------------- homogeneous API
def eps_optimal(eps: float, delta: float, k: int, delta_target: float) -> float:
    """Smallest eps~ with the k-fold composition of (eps, delta)-DP being (eps~, delta_target)-DP.

    Seed 001 Theorem 3.3 (Section 5): exact. inf when delta_target < 1-(1-delta)^k; k*eps at equality.
    """
    dp = residual_delta(delta_target, delta, k)
    if dp < 0.0:
        return math.inf
    if dp == 0.0:
        return k * eps
    if k <= 20_000:  # the full vectorised sum is cheaper than locating the window
        return eps_for_log_delta(homogeneous_loss(eps, k), math.log(dp))
    return _eps_optimal_chunked(eps, k, math.log(dp))


def delta_optimal(eps: float, delta: float, k: int, eps_total: float) -> float:
    """Smallest delta~ with the k-fold composition being (eps_total, delta~)-DP (forward direction)."""
    return delta_for_eps(homogeneous_loss(eps, k), eps_total, delta, k)


def log_delta_optimal(eps: float, delta: float, k: int, eps_total: float) -> float:
    """log of :func:`delta_optimal` (finite even where delta_optimal underflows)."""
    return log_delta_for_eps(homogeneous_loss(eps, k), eps_total, delta, k)


def privacy_region_lines(eps: float, delta: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(eps_i, delta_i) for i = 0..floor(k/2): eps_i = (k-2i) eps and delta_i = d(eps_i) (seed 5.1, eq. (6)).

    delta_i = 1-(1-delta)^k + (1-delta)^k sum_{l<i} C(k,l)(e^{eps(k-l)} - e^{eps(k-2i+l)})/(1+e^eps)^k.
    """
    i = np.arange(0, k // 2 + 1)
    eps_i = (k - 2.0 * i) * eps
    dist = homogeneous_loss(eps, k)
    log_pure = np.full(i.shape, -math.inf)
    if dist.loss.size:
        log_g = breakpoint_deltas(dist)  # entry j at loss L_{j+1} = (k-2(j+1)) eps, i.e. i = j+1
        m = min(log_g.size, i.size - 1)
        log_pure[1:1 + m] = log_g[:m]
    floor = pure_delta_floor(delta, k)
    keep = math.exp(k * math.log1p(-delta)) if delta > 0 else 1.0
    return eps_i, floor + keep * np.exp(log_pure)


def privacy_region_vertices(eps: float, delta: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (P_MD, P_FA) of the lower boundary of the k-fold privacy region, from (0,1) to (1,0).

    Likelihood-ratio tests of the k-fold 4-point pair (seed Section 5.1 and Remark 5.1): the
    acceptance set S grows by whole likelihood-ratio classes, P_FA = 1 - P0(S), P_MD = P1(S).
    The upper boundary is the point reflection (1 - P_MD, 1 - P_FA).
    """
    ell = np.arange(0, k + 1, dtype=float)
    log_p, log_q = _log_p_q(eps)
    q = math.exp(log_q)
    lw0 = log_binom_pmf(ell, k, q, log_p=log_q, log_q=log_p)  # P0 class l (l outcomes "2")
    lw1 = lw0 - (k - 2.0 * ell) * eps  # P1 of the same class
    log_keep = k * math.log1p(-delta) if delta > 0 else 0.0
    floor = pure_delta_floor(delta, k)
    # P_MD after adding classes 0..l: (1-delta)^k * sum_{i<=l} P1 ; P_FA: (1-delta)^k * sum_{i>l} P0
    p_md = np.exp(log_keep + np.logaddexp.accumulate(lw1))
    tail0 = np.logaddexp.accumulate(lw0[::-1])[::-1]  # sum_{i>=l}
    p_fa = np.exp(log_keep + np.append(tail0[1:], -math.inf))
    md = [0.0]
    fa = [1.0]
    if floor > 0:
        md.append(0.0)
        fa.append(1.0 - floor)
    md.extend(p_md.tolist())
    fa.extend(p_fa.tolist())
    if floor > 0:
        md.append(1.0)
        fa.append(0.0)
    md[-1], fa[-1] = 1.0, 0.0  # the full acceptance set; removes the last-ulp drift of the sum
    return np.clip(np.array(md), 0.0, 1.0), np.array(fa)


# --------------------------------------------------------------------------- closed-form bounds
def eps_kov_bound(eps: float, delta: float, k: int, delta_target: float) -> float:
    """Seed 001 Theorem 3.4 (proof in Section 6): the k-fold composition is
    (eps~, 1 - (1-delta)^k (1-delta~))-DP for

        eps~ = min{ k eps,
                    k eps tanh(eps/2) + eps sqrt(2k log(e + sqrt(k eps^2)/delta~)),
                    k eps tanh(eps/2) + eps sqrt(2k log(1/delta~)) },

    ((e^eps-1)/(e^eps+1) = tanh(eps/2)). delta~ = residual_delta(delta_target, delta, k).
    inf when delta_target < 1-(1-delta)^k; k eps when equal.
    """
    dp = residual_delta(delta_target, delta, k)
    if dp < 0.0:
        return math.inf
    basic = k * eps
    if dp == 0.0:
        return basic
    drift = k * eps * math.tanh(eps / 2.0)
    b1 = drift + eps * math.sqrt(2.0 * k * math.log(math.e + math.sqrt(k) * eps / dp))
    b2 = drift + eps * math.sqrt(2.0 * k * -math.log(dp)) if dp < 1.0 else drift
    return min(basic, b1, b2)


def eps_drv(eps: float, delta: float, k: int, delta_target: float) -> float:
    """Dwork-Rothblum-Vadhan advanced composition (cited in seed 001 as [DRV10]).

    The k-fold composition is (eps', k delta + delta')-DP with
    eps' = eps sqrt(2k ln(1/delta')) + k eps (e^eps - 1). Convention: delta' = delta_target - k delta;
    inf when delta' <= 0. Not capped at k eps (the raw DRV value).
    """
    dp = delta_target - k * delta
    if dp <= 0.0:
        return math.inf
    if eps > 700.0:
        return math.inf
    return eps * math.sqrt(2.0 * k * -math.log(dp)) + k * eps * math.expm1(eps)


# --------------------------------------------------------------------------- heterogeneous
def group_eps(eps_list) -> tuple[np.ndarray, np.ndarray]:
    """Distinct epsilon values and their multiplicities."""
    values, counts = np.unique(np.asarray(eps_list, dtype=float), return_counts=True)
    return values, counts


def _group_kernel(e: float, n: int, T: float | None):
    """Atoms s and log weights of Binomial(n, p_e) ('+' signs among n steps of value e),
    without the atoms below e^{-T} of the largest (all atoms when T is None)."""
    s = np.arange(n + 1, dtype=float)
    log_p, log_q = _log_p_q(float(e))
    lb = log_binom_pmf(s, n, math.exp(log_p), log_p=log_p, log_q=log_q)
    if T is not None:
        keep = lb >= lb.max() - T
        s, lb = s[keep], lb[keep]
    return s, lb


def hetero_exact_size(values, counts, log_delta_prime: float | None = None) -> int:
    """Number of terms of the grouped exact sum: prod_j (kept atoms of group j)."""
    T = None if log_delta_prime is None else _truncation_nats(log_delta_prime)
    out = 1
    for e, n in zip(values, counts):
        out *= int(_group_kernel(float(e), int(n), T)[0].size) if T is not None else int(n) + 1
    return out


def hetero_loss(values, counts, log_delta_prime: float | None = None) -> LossDistribution:
    """Privacy-loss distribution of the product of 4-point pairs with eps = values (mult. counts).

    Murtagh-Vadhan subset formula grouped by multiplicity: choosing s_j of the n_j steps with
    value e_j on the 'e^eps' side gives loss sum_j (2 s_j - n_j) e_j with weight
    prod_j C(n_j, s_j) p_j^{s_j} q_j^{n_j - s_j}. Equal losses are merged.

    With ``log_delta_prime`` the binomial atoms below e^{-T} of each group's largest are left out
    (T = -log delta' + 50): their total weight is < 1e-14 delta', invisible in double precision,
    and large multiplicities stay cheap (~sqrt(n) atoms per group instead of n + 1).
    """
    T = None if log_delta_prime is None else _truncation_nats(log_delta_prime)
    values = np.asarray(values, dtype=float)
    loss = np.zeros(1)
    lw = np.zeros(1)
    for e, n in zip(values, counts):
        n = int(n)
        s, lb = _group_kernel(float(e), n, T)
        loss = (loss[:, None] + (2.0 * s - n)[None, :] * e).ravel()
        lw = (lw[:, None] + lb[None, :]).ravel()
    return _merge_positive(loss, lw)


def _merge_positive(loss: np.ndarray, lw: np.ndarray) -> LossDistribution:
    """Positive losses only, sorted decreasing, equal losses (up to 1e-12 relative) merged."""
    keep = loss > 0
    loss, lw = loss[keep], lw[keep]
    if loss.size == 0:
        return LossDistribution(np.zeros(0), np.zeros(0))
    order = np.argsort(-loss, kind="stable")
    loss, lw = loss[order], lw[order]
    # merge losses equal up to rounding (sums of the same values in different orders)
    tol = 1e-12 * max(1.0, float(loss[0]))
    new_group = np.concatenate(([True], np.diff(loss) < -tol))
    starts = np.flatnonzero(new_group)
    if starts.size == loss.size:
        return LossDistribution(loss, lw)
    top = np.maximum.reduceat(lw, starts)
    group = np.cumsum(new_group) - 1
    with np.errstate(invalid="ignore"):
        merged_lw = top + np.log(np.add.reduceat(np.exp(lw - top[group]), starts))
    return LossDistribution(loss[starts], merged_lw)


def hetero_lattice_loss(units, unit: float) -> LossDistribution:
    """Loss distribution when every eps_i = units_i * unit (integers >= 0): knapsack-style DP.

    Dynamic programme over the lattice of loss/unit values, one mechanism at a time, in log
    space: new[x] = logaddexp(old[x - a] + log p(a), old[x + a] + log q(a)).
    """
    units = np.asarray(units, dtype=np.int64)
    total = int(units.sum())
    size = 2 * total + 1
    log_w = np.full(size, -math.inf)
    log_w[total] = 0.0  # offset: index = loss/unit + total
    lo = hi = total
    for a, n in zip(*np.unique(units, return_counts=True)):
        a = int(a)
        if a == 0:
            continue  # eps = 0: loss 0 with probability 1
        log_p, log_q = _log_p_q(a * unit)
        for _ in range(int(n)):
            cur = log_w[lo:hi + 1]
            new = np.full(hi - lo + 1 + 2 * a, -math.inf)
            new[2 * a:] = cur + log_p
            np.logaddexp(new[:cur.size], cur + log_q, out=new[:cur.size])
            lo, hi = lo - a, hi + a
            log_w[lo:hi + 1] = new
    idx = np.arange(size)
    loss = (idx - total) * unit
    finite = np.isfinite(log_w)
    return _merge_positive(loss[finite], log_w[finite])


def _truncation_nats(log_delta_prime: float) -> float:
    """Relative weight below which lattice entries are dropped: e^{-T}, T = -log delta' + 50 in [50, 700].

    At most ~1e7 entries are ever dropped, each < e^{-T}, so the dropped total is < 1e-14 delta'.
    """
    return float(min(700.0, max(50.0, -log_delta_prime + 50.0)))


def hetero_grouped_lattice(units, unit: float, log_delta_prime: float) -> tuple[LossDistribution, float]:
    """Loss distribution on the lattice (eps_i = units_i * unit) by convolving one binomial per
    distinct unit, with rigorous truncation; returns (kept distribution, log of dropped mass).

    Steps sharing the unit a contribute a Binomial(n, p_a) number of '+' signs, i.e. losses
    (2s - n) a with exact binomial weights. The running distribution is kept in linear scale
    (normalised to max 1, log scale tracked) and convolved directly (no FFT: sums of
    non-negative terms keep their relative accuracy). Entries below e^{-T} of the maximum are
    dropped and their mass is returned, so callers can stay rigorous: the upper bound counts it
    as loss +inf (pessimistic), the lower bound ignores it (optimistic).
    """
    T = _truncation_nats(log_delta_prime)
    w = np.ones(1)
    offset = 0  # index of loss 0 in w
    log_scale = 0.0
    log_drop = -math.inf
    cut = math.exp(-T)
    for a, n in zip(*np.unique(np.asarray(units, dtype=np.int64), return_counts=True)):
        a, n = int(a), int(n)
        if a == 0:
            continue
        log_p, log_q = _log_p_q(a * unit)
        s = np.arange(n + 1, dtype=float)
        lb = log_binom_pmf(s, n, math.exp(log_p), log_p=log_p, log_q=log_q)
        top = float(lb.max())
        keep = lb >= top - T
        log_mass = log_scale + math.log(float(w.sum()))
        if not np.all(keep):  # dropping kernel atoms removes (current mass) x (their mass)
            log_drop = float(np.logaddexp(log_drop, log_mass + logsumexp(lb[~keep])))
        idx = np.flatnonzero(keep)
        s_lo, s_hi = int(idx[0]), int(idx[-1])
        kv = np.exp(lb[s_lo:s_hi + 1] - top)
        kv[~keep[s_lo:s_hi + 1]] = 0.0
        step = 2 * a
        out = np.zeros(w.size + step * (kv.size - 1))
        if kv.size <= step:  # out[c + step*j] += w[c] kv[j]
            for j, v in enumerate(kv):
                if v > 0.0:
                    out[step * j:step * j + w.size] += v * w
        else:
            for r in range(min(step, w.size)):
                col = np.convolve(w[r::step], kv)
                out[r::step][:col.size] += col
        offset += (n - 2 * s_lo) * a
        log_scale += top
        mx = float(out.max())
        out /= mx
        log_scale += math.log(mx)
        small = (out < cut) & (out > 0.0)
        if np.any(small):
            log_drop = float(np.logaddexp(log_drop, log_scale + math.log(float(out[small].sum()))))
            out[small] = 0.0
        nz = np.flatnonzero(out)
        w = out[nz[0]:nz[-1] + 1]
        offset -= int(nz[0])
    nz = np.flatnonzero(w)
    loss = (nz - offset) * unit
    return _merge_positive(loss.astype(float), np.log(w[nz]) + log_scale), log_drop


def hetero_grouped_work(units, log_delta_prime: float) -> float:
    """Rough flop count of :func:`hetero_grouped_lattice` (for size limits)."""
    T = _truncation_nats(log_delta_prime)
    width = 1.0
    work = 0.0
    var = 0.0
    span = 0.0
    for a, n in zip(*np.unique(np.asarray(units, dtype=np.int64), return_counts=True)):
        if a == 0:
            continue
        j = min(n + 1.0, 2.0 * math.sqrt(2.0 * T * n) + 1.0)
        work += width * j
        var += n * float(a) ** 2
        span += 2.0 * n * a
        width = min(span + 1.0, 2.0 * math.sqrt(2.0 * T * var) + 1.0)
    return work


GRID_SNAP_RTOL = 1e-14  # must stay well below the 1e-12 outward widening of hetero_eps_approx


def _grid_units(eps_list, eta: float, up: bool) -> np.ndarray:
    """Multiples of eta at or above (up) / at or below (down) each eps_i.

    Ratios within a few ulps (GRID_SNAP_RTOL) of an integer are that integer, so eps given on the
    grid in decimal (0.13 with eta = 0.01) is not moved a whole step by float rounding; the
    snapping error (<= 1e-14 relative) is covered by the 1e-12 outward widening of the bounds. A
    larger tolerance would move eps_i by more than the widening covers and break the guarantee.
    """
    x = np.asarray(eps_list, dtype=float) / eta
    r = np.round(x)
    on_grid = np.abs(x - r) <= GRID_SNAP_RTOL * np.maximum(1.0, r)
    units = np.where(on_grid, r, np.ceil(x) if up else np.floor(x))
    return units.astype(np.int64)


def hetero_eps_from_dist(dist: LossDistribution, delta: float, k: int, delta_target: float) -> float:
    """eps~ for the product pair with per-step delta (common) and total target delta_target."""
    dp = residual_delta(delta_target, delta, k)
    if dp < 0.0:
        return math.inf
    if dp == 0.0:
        return float(dist.loss[0]) if dist.loss.size else 0.0
    return eps_for_log_delta(dist, math.log(dp))


def hetero_eps_exact(eps_list, delta: float, delta_target: float) -> float:
    """Exact optimal composition of (eps_i, delta)-DP steps (Murtagh-Vadhan, grouped)."""
    values, counts = group_eps(eps_list)
    dp = residual_delta(delta_target, delta, len(eps_list))
    log_dp = math.log(dp) if dp > 0.0 else None
    return hetero_eps_from_dist(hetero_loss(values, counts, log_dp), delta, len(eps_list), delta_target)


def hetero_eps_approx(eps_list, delta: float, delta_target: float, eta: float) -> tuple[float, float]:
    """(upper, lower) bounds on the optimum by rounding each eps_i up / down onto the grid eta.

    Rounding up makes each step (eps_i', delta)-DP with eps_i' >= eps_i: a larger class, so its
    optimum is a guaranteed upper bound; rounding down gives a guaranteed lower bound. The
    certified accuracy is upper - lower (the true optimum lies between).
    """
    k = len(eps_list)
    dp = residual_delta(delta_target, delta, k)
    if dp < 0.0:
        return math.inf, math.inf
    units_up = _grid_units(eps_list, eta, True)
    units_down = _grid_units(eps_list, eta, False)
    if dp == 0.0:  # delta_target equals the floor: the answer is the largest loss, sum of eps_i
        return float(units_up.sum()) * eta * (1.0 + 1e-12), float(units_down.sum()) * eta * (1.0 - 1e-12)
    if k * int(units_up.sum()) <= LATTICE_DP_MAX_WORK:  # exact lattice DP (no truncation)
        up = hetero_eps_from_dist(hetero_lattice_loss(units_up, eta), delta, k, delta_target)
        down = hetero_eps_from_dist(hetero_lattice_loss(units_down, eta), delta, k, delta_target)
    else:  # grouped binomial convolution with accounted truncation
        log_dp = math.log(dp)
        dist, log_drop = hetero_grouped_lattice(units_up, eta, log_dp)
        if log_drop >= log_dp:
            up = float(units_up.sum()) * eta  # dropped mass alone exceeds delta': fall back to basic
        else:
            up = eps_for_log_delta(dist, log_dp + float(log1mexp(log_drop - log_dp)))
        dist, _ = hetero_grouped_lattice(units_down, eta, log_dp)
        down = eps_for_log_delta(dist, log_dp)
    # outward rounding by 1e-12 relative keeps the bounds valid despite float summation order
    return (1.0 + 1e-12) * up, (1.0 - 1e-12) * down


LATTICE_DP_MAX_WORK = 2 * 10**7  # above this, hetero_eps_approx switches to the grouped convolution


def hetero_kov_bound(eps_list, delta: float, delta_target: float) -> float:
    """Seed 001 Theorem 3.5 (Section 7), with the erratum sqrt(sum eps^2)/delta~ inside the log:

        eps~ = min{ sum eps_l,
                    sum eps_l tanh(eps_l/2) + sqrt(2 sum eps_l^2 log(e + sqrt(sum eps_l^2)/delta~)),
                    sum eps_l tanh(eps_l/2) + sqrt(2 sum eps_l^2 log(1/delta~)) }

    for total delta 1 - (1-delta~) prod (1-delta_l); here delta_l = delta for all l.
    """
    e = np.asarray(eps_list, dtype=float)
    k = e.size
    dp = residual_delta(delta_target, delta, k)
    if dp < 0.0:
        return math.inf
    basic = float(e.sum())
    if dp == 0.0:
        return basic
    drift = float(np.sum(e * np.tanh(e / 2.0)))
    s2 = float(np.sum(e * e))
    b1 = drift + math.sqrt(2.0 * s2 * math.log(math.e + math.sqrt(s2) / dp))
    b2 = drift + math.sqrt(2.0 * s2 * -math.log(dp)) if dp < 1.0 else drift
    return min(basic, b1, b2)
