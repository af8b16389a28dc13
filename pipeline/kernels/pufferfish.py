"""Exact edge-level Pufferfish losses of edge-DP mechanisms (seed 002, Hehir-Niu-Slavkovic).

Secret pair (seed 002, Theorem 4.1): sigma_e = "dyad e is an edge" against its negation.
For a mechanism M and a prior P on graphs the Pufferfish loss is

    loss = sup_omega | ln f(omega | e = 1) / f(omega | e = 0) |,

and by the hypothesis-test form of Pufferfish (seed 002, Section 4, the Theorem after
Definition 4) every test of H0: e = 0 against H1: e = 1 built on M has power <= e^loss * size.

Two eps-edge-DP mechanisms (seed 002, Definitions 2 and 3):

- ``laplace_edge_count``: M(G) = |E(G)| + Laplace(1/eps) (Section 3.2). The output density
  given the secret is sum_k p_s(k) (eps/2) exp(-eps |o - k|) with p_s the law of the edge
  count K given e = s. On [k, k+1] both densities are A e^{eps o} + B e^{-eps o}, so their
  ratio is a Moebius function of e^{2 eps o}, hence monotone: the sup is reached at an
  integer support point or in one of the two limits o -> +-inf, where the ratio tends to
  E_1[e^{+-eps K}] / E_0[e^{+-eps K}].  :func:`laplace_count_loss` is therefore exact.
- ``randomized_response``: every dyad is flipped independently with probability
  q = 1 / (1 + e^eps). The output law factorises as K(omega_e | s) * B_s(omega_rest) where
  B_s is the channel applied to the law of the other dyads given e = s, so
  loss = eps + sup_r | ln B_1(r) / B_0(r) |  (:func:`rr_loss_from_rest`).

All arithmetic is in log space (logaddexp / logsumexp); log-pmfs may hold -inf.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp, xlog1py, xlogy

# --------------------------------------------------------------------------- pmfs


def log_binom_pmf(trials: int, p: float) -> np.ndarray:
    """log Binomial(trials, p) pmf on k = 0..trials; exact zeros as -inf (p may be 0 or 1)."""
    k = np.arange(trials + 1, dtype=np.float64)
    log_choose = gammaln(trials + 1.0) - gammaln(k + 1.0) - gammaln(trials - k + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = log_choose + xlogy(k, p) + xlog1py(trials - k, -p)
    return np.where(np.isnan(out), -np.inf, out)


def log_poisson_binomial_pmf(probs) -> np.ndarray:
    """log pmf of a sum of independent Bernoulli(probs[i]) on 0..len(probs), by the
    O(len^2) convolution recursion in log space."""
    probs = np.asarray(probs, dtype=np.float64)
    out = np.array([0.0])
    with np.errstate(divide="ignore"):
        for p in probs:
            lp, lq = math.log(p) if p > 0 else -np.inf, math.log1p(-p) if p < 1 else -np.inf
            nxt = np.full(out.size + 1, -np.inf)
            nxt[:-1] = out + lq
            nxt[1:] = np.logaddexp(nxt[1:], out + lp)
            out = nxt
    return out


def shift_log_pmf(log_pmf: np.ndarray, shift: int, length: int) -> np.ndarray:
    """The log pmf of K + shift, on 0..length-1 (-inf elsewhere)."""
    out = np.full(length, -np.inf)
    top = min(length, shift + log_pmf.size)
    out[shift:top] = log_pmf[: top - shift]
    return out


def log_mixture(log_weights, log_pmfs) -> np.ndarray:
    """log of sum_i w_i pmf_i, all in log space (pmfs of equal length)."""
    stacked = np.stack([lw + lp for lw, lp in zip(log_weights, log_pmfs)])
    with np.errstate(divide="ignore"):
        return logsumexp(stacked, axis=0)


# --------------------------------------------------------------------------- Laplace


def laplace_log_density_at_integers(log_pmf: np.ndarray, eps: float) -> np.ndarray:
    """log sum_k p(k) exp(-eps |j - k|) for j = 0..len-1 (the constant log(eps/2) dropped).

    O(len) by the two one-sided geometric recursions, written as running logsumexp:
    left(j) = -eps j + log sum_{k<=j} p(k) e^{eps k}, right(j) = eps j + log sum_{k>j} p(k) e^{-eps k}.
    """
    k = np.arange(log_pmf.size, dtype=np.float64)
    left = -eps * k + np.logaddexp.accumulate(log_pmf + eps * k)
    tail = np.logaddexp.accumulate((log_pmf - eps * k)[::-1])[::-1]  # sum over k' >= j
    right = np.full(log_pmf.size, -np.inf)
    right[:-1] = eps * k[:-1] + tail[1:]
    return np.logaddexp(left, right)


def laplace_count_loss(log_pmf1: np.ndarray, log_pmf0: np.ndarray, eps: float):
    """Exact sup_o |ln f(o|1)/f(o|0)| of the Laplace(1/eps) mechanism on an integer statistic.

    ``log_pmf1``/``log_pmf0``: log pmfs of the statistic given e = 1 / e = 0 on 0..L-1.
    Returns ``(loss, where)`` with ``where`` one of ``"o=+inf"``, ``"o=-inf"``, ``"o=<j>"``.
    """
    length = max(log_pmf1.size, log_pmf0.size)
    p1 = np.full(length, -np.inf)
    p0 = np.full(length, -np.inf)
    p1[: log_pmf1.size] = log_pmf1
    p0[: log_pmf0.size] = log_pmf0
    k = np.arange(length, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        at_points = laplace_log_density_at_integers(p1, eps) - laplace_log_density_at_integers(p0, eps)
        plus = logsumexp(p1 + eps * k) - logsumexp(p0 + eps * k)
        minus = logsumexp(p1 - eps * k) - logsumexp(p0 - eps * k)
    j = int(np.argmax(np.abs(at_points)))
    candidates = [(abs(float(plus)), "o=+inf"), (abs(float(minus)), "o=-inf"),
                  (abs(float(at_points[j])), f"o={j}")]
    return max(candidates, key=lambda c: c[0])


def laplace_log_survival(x, eps: float):
    """log P(Laplace(1/eps) > x), stable for both signs of x."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        neg = np.log1p(-0.5 * np.exp(np.minimum(eps * x, 0.0)))
    return np.where(x >= 0, math.log(0.5) - eps * x, neg)


def laplace_count_log_tail(log_pmf: np.ndarray, eps: float, threshold: float) -> float:
    """log P(K + Laplace(1/eps) > threshold) for K with the given log pmf on 0..L-1."""
    k = np.arange(log_pmf.size, dtype=np.float64)
    return float(logsumexp(log_pmf + laplace_log_survival(threshold - k, eps)))


def laplace_count_log_cdf(log_pmf: np.ndarray, eps: float, threshold: float) -> float:
    """log P(K + Laplace(1/eps) <= threshold), summed directly (accurate when the tail is ~1)."""
    k = np.arange(log_pmf.size, dtype=np.float64)
    return float(logsumexp(log_pmf + laplace_log_survival(k - threshold, eps)))


# --------------------------------------------------------------------------- randomized response


def rr_flip_prob(eps: float) -> float:
    """q = 1/(1+e^eps): the flip probability that makes per-dyad randomized response eps-edge DP."""
    return float(math.exp(-np.logaddexp(0.0, eps)))


def rr_channel_log(log_joint: np.ndarray, eps: float) -> np.ndarray:
    """Apply independent randomized response to every bit of a log-probability table over
    bitmask configurations (length 2^b), by the O(b 2^b) butterfly in log space."""
    x = np.array(log_joint, dtype=np.float64)
    bits = int(x.size).bit_length() - 1
    if x.size != 1 << bits:
        raise ValueError("table length must be a power of two")
    lq = -float(np.logaddexp(0.0, eps))          # log q
    lkeep = -float(np.logaddexp(0.0, -eps))      # log (1 - q)
    for b in range(bits):
        v = x.reshape(-1, 2, 1 << b)
        x0, x1 = v[:, 0, :].copy(), v[:, 1, :]
        v[:, 0, :] = np.logaddexp(lkeep + x0, lq + x1)
        v[:, 1, :] = np.logaddexp(lq + x0, lkeep + x1)
    return x


def rr_loss_from_rest(log_rest1: np.ndarray, log_rest0: np.ndarray, eps: float) -> float:
    """Exact randomized-response loss: eps + sup_r |ln B_1(r)/B_0(r)|.

    ``log_rest1``/``log_rest0``: log P(rest = r | e = s) over the 2^(m-1) configurations of
    the other dyads (normalised or not: each is renormalised here).
    """
    b1 = rr_channel_log(log_rest1 - logsumexp(log_rest1), eps)
    b0 = rr_channel_log(log_rest0 - logsumexp(log_rest0), eps)
    return float(eps + np.max(np.abs(b1 - b0)))


def rr_loss_independent(eps: float) -> float:
    """Randomized response under independent edges: the ratio depends on omega_e only,
    ln((1-q)/q) = eps exactly (seed 002, Theorem 4.1)."""
    q = rr_flip_prob(eps)
    return float(math.log1p(-q) - math.log(q))


# --------------------------------------------------------------------------- tests of one edge


def threshold_test(log_pmf0: np.ndarray, log_pmf1: np.ndarray, eps: float, threshold: float):
    """Exact (log size, log power) of 'reject H0: e = 0 when K + Laplace(1/eps) > threshold'."""
    return (laplace_count_log_tail(log_pmf0, eps, threshold),
            laplace_count_log_tail(log_pmf1, eps, threshold))


def neyman_pearson_test(log_pmf0: np.ndarray, log_pmf1: np.ndarray, eps: float, level: float):
    """The level-``level`` test 'reject when o > c' with size exactly ``level``.

    It is the Neyman-Pearson test when the likelihood ratio f(o|1)/f(o|0) is non-decreasing
    in o; that is checked exactly (integer points and both limits, which suffice by the
    Moebius argument in the module docstring) and returned as ``monotone``.
    Returns ``(c, log_size, log_power, monotone)``.
    """
    from scipy.optimize import brentq

    length = max(log_pmf0.size, log_pmf1.size)
    lp0 = shift_log_pmf(log_pmf0, 0, length)
    lp1 = shift_log_pmf(log_pmf1, 0, length)
    k = np.arange(length, dtype=np.float64)
    ratio = laplace_log_density_at_integers(lp1, eps) - laplace_log_density_at_integers(lp0, eps)
    minus = logsumexp(lp1 - eps * k) - logsumexp(lp0 - eps * k)
    plus = logsumexp(lp1 + eps * k) - logsumexp(lp0 + eps * k)
    seq = np.concatenate([[minus], ratio, [plus]])
    monotone = bool(np.all(np.diff(seq) >= -1e-9 * (1 + np.abs(seq[1:]))))
    target = math.log(level)

    def gap(c: float) -> float:
        return laplace_count_log_tail(lp0, eps, c) - target

    lo, hi = -1.0, float(length)
    while gap(lo) < 0:
        lo -= max(1.0, abs(lo))
    while gap(hi) > 0:
        hi += max(1.0, abs(hi))
    c = brentq(gap, lo, hi, xtol=1e-12, rtol=1e-14, maxiter=500)
    return c, laplace_count_log_tail(lp0, eps, c), laplace_count_log_tail(lp1, eps, c), monotone
