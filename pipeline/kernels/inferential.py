"""Inferential privacy under correlated priors (Ghosh & Kleinberg, seed 000).

Conventions (the user contract):

- bits ``x in {0,1}^n`` and spins ``s_i = 1 - 2 x_i`` (so ``x_i = 0`` is spin ``+1``);
- Ising prior ``mu(x) ∝ exp(sum_{ij in E} J_ij s_i s_j + sum_i h_i s_i)``;
- ``nu_a = sup_o |ln P(o | x_a = 1) / P(o | x_a = 0)|`` (densities for continuous outputs);
- noisy sum ``= sum_i x_i + Laplace(scale 1/eps)`` (Lemma 3.5).

Everything below that a mechanism with a uniform ``eps`` needs is a function of the joint
law of ``(x_a, S)`` with ``S = sum_i x_i``: we carry ``L[z, k] = ln mu(x_a = z, S = k)``
(unnormalised) and compute it by

- enumeration over all ``2^n`` states (``n <= 24``), chunked, in log space;
- a tree recursion (sum-distribution "knapsack") on trees, and belief propagation for the
  restricted partition functions that formula (6) needs (O(n), Bethe balls of 10^5 nodes);
- a site-by-site transfer matrix on grids of width ``<= 12`` that carries the distribution
  of the partial sum.

Formula (6) (Theorem 3.4): for ``z in {0,1}``, with ``p_z(x) = exp(-eps sum_i |x_i - z|)``,
``nu_a = max_z |ln E[p_z | x_a = z] - ln E[p_z | x_a = 1 - z]|``. ``p_0`` is the field
``+eps/2`` on every spin and ``p_1`` the field ``-eps/2`` (App. A.2; ERRATA: ±eps/2, not ±eps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

MAX_ENUMERATION_NODES = 24
MAX_LP_NODES = 12
# The LP's rows p(x) - e^eps p(x') <= 0 and optimal p spanning e^{-n eps}..1 defeat HiGHS's
# 1e-7 tolerances at larger eps: 'HiGHS failed' on parity (r, s) = (5, 2) from eps = 3, and a
# silently wrong value (below randomized response's nu) on an antiferromagnetic K_5 at eps = 15.
MAX_LP_EPS = 2.5
MAX_GAMMA_DEFINITION_NODES = 20
MAX_TRANSFER_WIDTH = 12
_CHUNK = 1 << 17  # states per enumeration chunk: bits (chunk x 24 int8) + a few float64 vectors


class SizeLimitError(ValueError):
    """The requested method cannot handle this size."""


def enumeration_limit_message(n: int) -> str:
    return (f"exact enumeration is limited to n <= {MAX_ENUMERATION_NODES} nodes (got n = {n}); "
            "for larger priors use an Ising prior on a tree (graph = path, star, tree, bethe, "
            "random_tree: tree recursion / belief propagation), on a grid of width <= "
            f"{MAX_TRANSFER_WIDTH} or a cycle (transfer matrices)")


# --------------------------------------------------------------------------- small helpers
def log_cosh(x):
    """ln cosh x without overflow."""
    x = np.abs(np.asarray(x, dtype=float))
    return x + np.log1p(np.exp(-2.0 * x)) - math.log(2.0)


def log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact convolution of two sequences given by their logs: out[k] = ln sum_i e^{a_i + b_{k-i}}.

    Loops over the shorter sequence so that the Python-level work is O(min(len)).
    """
    if len(a) < len(b):
        a, b = b, a
    out = np.full(len(a) + len(b) - 1, -np.inf)
    for i, bi in enumerate(b):
        if bi == -np.inf:
            continue
        seg = out[i:i + len(a)]
        np.logaddexp(seg, a + bi, out=seg)
    return out


def _lse(x, axis=None):
    with np.errstate(divide="ignore", invalid="ignore"):
        return logsumexp(x, axis=axis)


# --------------------------------------------------------------------------- priors
@dataclass(frozen=True)
class IsingPrior:
    """mu(x) ∝ exp(sum_{ij in E} J_ij s_i s_j + sum_i h_i s_i), s = 1 - 2x.

    ``couplings`` is a symmetric sparse matrix with J_ij at (i, j) and (j, i).
    """

    couplings: sp.csr_matrix
    fields: np.ndarray

    @property
    def n(self) -> int:
        return int(self.fields.shape[0])

    def log_weight(self, bits: np.ndarray) -> np.ndarray:
        s = 1.0 - 2.0 * bits
        return 0.5 * np.einsum("ci,ci->c", (self.couplings @ s.T).T, s) + s @ self.fields

    def edges(self):
        """(u, v, J) arrays with u < v."""
        c = sp.triu(self.couplings, k=1).tocoo()
        return c.row.astype(np.int64), c.col.astype(np.int64), c.data.astype(float)


def ising_prior(graph, J: float, h: float = 0.0) -> IsingPrior:
    """Uniform coupling J on the graph's edges and uniform field h."""
    a = graph.adjacency() * float(J)
    return IsingPrior(a.tocsr(), np.full(graph.n, float(h)))


def copy_probability_to_coupling(copy_p: float) -> float:
    """Family-tree model (App. A.2.1): child copies the parent's bit with probability p;
    equivalent to the Ising prior with J = atanh(2p - 1), h = 0 on the tree."""
    return float(np.arctanh(2.0 * copy_p - 1.0))


@dataclass(frozen=True)
class ParityPrior:
    """App. A.1: n = 1 + r s bits, node 0 is Athena (x_a), node 1 + i*s + j is x_{ij};
    uniform over the solutions of x_a + sum_j x_{ij} = 0 (mod 2) for every i (eq. 14)."""

    r: int
    s: int

    @property
    def n(self) -> int:
        return 1 + self.r * self.s

    def log_weight(self, bits: np.ndarray) -> np.ndarray:
        ok = np.ones(bits.shape[0], dtype=bool)
        for i in range(self.r):
            block = bits[:, 1 + i * self.s: 1 + (i + 1) * self.s].sum(axis=1)
            ok &= (bits[:, 0] + block) % 2 == 0
        return np.where(ok, 0.0, -np.inf)

    def odd_count(self, bits: np.ndarray) -> np.ndarray:
        """Number of odd entries of the sequence (15): x_a, sum_j x_{1j}, ..., sum_j x_{rj}."""
        t = bits[:, 0].astype(np.int64) % 2
        for i in range(self.r):
            t = t + bits[:, 1 + i * self.s: 1 + (i + 1) * self.s].sum(axis=1) % 2
        return t


@dataclass(frozen=True)
class ClonesPrior:
    """n identical bits, uniform over {0^n, 1^n} (twins when n = 2; §1 and §2)."""

    n: int

    def log_weight(self, bits: np.ndarray) -> np.ndarray:
        s = bits.sum(axis=1)
        return np.where((s == 0) | (s == self.n), 0.0, -np.inf)


@dataclass(frozen=True)
class TablePrior:
    """Any prior given by its log weights over all 2^n states (state index bit i = x_i)."""

    log_table: np.ndarray

    @property
    def n(self) -> int:
        return int(round(math.log2(self.log_table.size)))

    def log_weight(self, bits: np.ndarray) -> np.ndarray:
        idx = bits.astype(np.int64) @ (1 << np.arange(bits.shape[1], dtype=np.int64))
        return self.log_table[idx]


# --------------------------------------------------------------------------- enumeration
def state_bits(start: int, stop: int, n: int) -> np.ndarray:
    """Bits of states start..stop-1 as an int8 matrix; column i is x_i (bit i of the index)."""
    idx = np.arange(start, stop, dtype=np.int64)
    return ((idx[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(np.int8)


def _check_enumerable(n: int) -> None:
    if n > MAX_ENUMERATION_NODES:
        raise SizeLimitError(enumeration_limit_message(n))


def log_table(prior, n: int | None = None) -> np.ndarray:
    """All 2^n log weights (use only for n <= 24; 128 MiB at n = 24)."""
    n = prior.n if n is None else n
    _check_enumerable(n)
    out = np.empty(1 << n)
    for start in range(0, 1 << n, _CHUNK):
        stop = min(start + _CHUNK, 1 << n)
        out[start:stop] = prior.log_weight(state_bits(start, stop, n))
    return out


def _generic_chunks(prior, targets, statistic):
    """(log weights, statistic, x_targets) for each chunk of states, from the bits matrix."""
    n = prior.n
    for start in range(0, 1 << n, _CHUNK):
        stop = min(start + _CHUNK, 1 << n)
        bits = state_bits(start, stop, n)
        k = bits.sum(axis=1, dtype=np.int64) if statistic is None else statistic(bits)
        yield prior.log_weight(bits), k, bits[:, targets].astype(np.int64)


def _ising_chunks(prior: IsingPrior, targets):
    """Ising fast path: a chunk is all states sharing the high bits m..n-1. The energy splits as
    E_low(low) + (J_low,high s_high) . s_low + E_high(high), so each chunk costs one matvec on a
    precomputed table instead of a pass over all edges."""
    n = prior.n
    m = min(n, 17)
    Jd = prior.couplings.toarray()
    h = prior.fields
    low = state_bits(0, 1 << m, m)
    s_low = 1.0 - 2.0 * low
    e_low = 0.5 * np.einsum("ci,ci->c", s_low @ Jd[:m, :m], s_low) + s_low @ h[:m]
    k_low = low.sum(axis=1, dtype=np.int64)
    j_cross = Jd[:m, m:]
    low_targets = targets < m
    x_low = low[:, np.where(low_targets, targets, 0)].astype(np.int64)
    for high in range(1 << (n - m)):
        xh = ((high >> np.arange(n - m)) & 1).astype(float)
        s_high = 1.0 - 2.0 * xh
        const = 0.5 * s_high @ Jd[m:, m:] @ s_high + s_high @ h[m:]
        lw = e_low + s_low @ (j_cross @ s_high) + const
        xt = np.where(low_targets[None, :], x_low,
                      ((high >> np.maximum(targets - m, 0)) & 1)[None, :])
        yield lw, k_low + int(xh.sum()), xt


def joint_target_sum_enumeration(prior, targets, statistic: Callable | None = None,
                                 n_values: int | None = None) -> np.ndarray:
    """L[t, z, k] = ln sum_{x: x_{a_t} = z, T(x) = k} mu(x) by enumeration of all 2^n states.

    ``T`` is the sum of the bits unless ``statistic`` (bits -> int array in 0..n_values-1) is
    given. Chunked: peak memory is O(chunk * n), independent of 2^n. Log-space accumulation
    relative to the per-value maximum of each chunk, so no bucket underflows against another.
    """
    n = prior.n
    _check_enumerable(n)
    targets = np.asarray(targets, dtype=np.int64)
    nt = len(targets)
    K = (n + 1) if statistic is None else int(n_values)
    total = np.full((nt, 2, K), -np.inf)
    if isinstance(prior, IsingPrior) and statistic is None:
        chunks = _ising_chunks(prior, targets)
    else:
        chunks = _generic_chunks(prior, targets, statistic)
    offsets = (np.arange(nt, dtype=np.int64) * 2 * K)[None, :]
    for lw, k, xt in chunks:
        finite = np.isfinite(lw)
        if not finite.all():
            if not finite.any():
                continue
            lw, k, xt = lw[finite], k[finite], xt[finite]
        kmax = np.full(K, -np.inf)
        np.maximum.at(kmax, k, lw)
        w = np.exp(lw - kmax[k])
        index = xt * K + k[:, None] + offsets
        sums = np.bincount(index.ravel(), weights=np.broadcast_to(w[:, None], index.shape).ravel(),
                           minlength=nt * 2 * K).reshape(nt, 2, K)
        with np.errstate(divide="ignore"):
            part = np.log(sums) + np.where(np.isfinite(kmax), kmax, 0.0)[None, None, :]
        part[:, :, ~np.isfinite(kmax)] = -np.inf
        np.logaddexp(total, part, out=total)
    return total


# --------------------------------------------------------------------------- from L[z, k]
def restricted_log_partitions(L: np.ndarray, eps: float) -> dict:
    """From L[z, k] (one target): ln Z restricted to x_a = z for the prior and with the
    maximally 0-biased (p_0 = e^{-eps k}) and 1-biased (p_1 = e^{-eps (n - k)}) weights.
    Returns arrays of shape (2,) indexed by z."""
    n = L.shape[-1] - 1
    k = np.arange(n + 1)
    return {"prior": _lse(L, axis=-1),
            "bias0": _lse(L - eps * k, axis=-1),
            "bias1": _lse(L - eps * (n - k), axis=-1)}


def formula6(logz: dict) -> float:
    """Formula (6): max over z of |ln E[p_z | x_a = z] - ln E[p_z | x_a = 1 - z]|.

    ``logz`` holds ln Z(x_a = z) for the prior ('prior') and for the weights p_0 ('bias0') and
    p_1 ('bias1'), each indexed by z. (The seed writes ln|.|; the sign of a ratio below 1 is a
    bias towards the other value, so we take |ln .| as in the definition of nu.)"""
    pr = np.asarray(logz["prior"])
    prior_odds = pr[1] - pr[0]
    b0 = np.asarray(logz["bias0"])
    b1 = np.asarray(logz["bias1"])
    term0 = (b0[0] - b0[1]) + prior_odds  # ln E[p_0 | x_a=0] - ln E[p_0 | x_a=1]
    term1 = (b1[1] - b1[0]) - prior_odds
    return float(max(abs(term0), abs(term1)))


def formula6_terms(logz: dict) -> tuple[float, float]:
    """The two signed terms (z = 0, z = 1) of formula (6)."""
    pr = np.asarray(logz["prior"])
    b0, b1 = np.asarray(logz["bias0"]), np.asarray(logz["bias1"])
    return float(b0[0] - b0[1] + pr[1] - pr[0]), float(b1[1] - b1[0] - pr[1] + pr[0])


def noisy_statistic_nu(L: np.ndarray, eps: float) -> float:
    """nu of T(x) + Laplace(1/eps) for an integer statistic T with joint law L[z, k].

    The output density given x_a = z is sum_k P(T = k | z) (eps/2) e^{-eps |o - k|}. On each
    interval [m, m+1] the likelihood ratio is a ratio of two functions A e^{eps o} + B e^{-eps o},
    monotone in e^{2 eps o}, and constant for o <= 0 and o >= K - 1, so the supremum over o is
    attained at an integer o = m in 0..K-1.
    """
    K = L.shape[-1]
    k = np.arange(K)
    lp = _lse(L, axis=-1)
    cond = L - lp[:, None]  # ln P(T = k | x_a = z)
    best = 0.0
    block = max(1, (1 << 22) // K)  # rows of the (m, k) distance table per block
    for start in range(0, K, block):
        m = np.arange(start, min(start + block, K))
        dist = np.abs(m[:, None] - k[None, :])
        f0 = _lse(cond[0][None, :] - eps * dist, axis=1)
        f1 = _lse(cond[1][None, :] - eps * dist, axis=1)
        best = max(best, float(np.max(np.abs(f1 - f0))))
    return best


def magnetization_spin_formula19(log_odds_prior: float, m_plus: float, m_minus: float) -> float:
    """Formula (19): nu_a = max{ln rho + ln((1+m+)/(1-m+)), -ln rho - ln((1+m-)/(1-m-))} with
    rho = mu(x_a=1)/mu(x_a=0) and m± = E[s_a] under the prior with extra field ±eps/2."""
    return float(max(log_odds_prior + 2 * np.arctanh(m_plus),
                     -log_odds_prior - 2 * np.arctanh(m_minus)))


# --------------------------------------------------------------------------- randomized response
def randomized_response_nu(prior, targets, eps: float) -> np.ndarray:
    """nu of per-bit randomized response (each bit kept with prob e^eps / (1 + e^eps)).

    P(o | x) ∝ exp(-eps d_H(o, x)), a product kernel, so F_z(o) = ln sum_{x_a = z} mu(x)
    e^{-eps d_H(o, x)} is a tensor product of 2x2 transforms [[1, e^-eps], [e^-eps, 1]] applied
    along every axis (O(n 2^n) per target, in log space). For a discrete output the supremum over
    sets of outcomes is the maximum over single outputs.
    """
    n = prior.n
    _check_enumerable(n)
    table = log_table(prior)
    out = []
    for a in targets:
        xa = ((np.arange(1 << n, dtype=np.int32) >> int(a)) & 1).astype(bool)
        f = []
        for z in (0, 1):
            mask = xa if z == 1 else ~xa
            t = np.where(mask, table, -np.inf)
            for i in range(n):  # in place along bit i: peak memory ~ 4 tables
                v = t.reshape(-1, 2, 1 << i)
                new0 = np.logaddexp(v[:, 0, :], v[:, 1, :] - eps)
                np.logaddexp(v[:, 0, :] - eps, v[:, 1, :], out=v[:, 1, :])
                v[:, 0, :] = new0
                del new0
            t -= _lse(table[mask])  # ln P(o | x_a = z) + const
            f.append(t)
        np.subtract(f[1], f[0], out=f[1])
        np.abs(f[1], out=f[1])
        out.append(float(np.max(f[1])))
        del f
    return np.asarray(out)


# --------------------------------------------------------------------------- LP worst case
def worst_case_lp(prior, target: int, eps: float, table: np.ndarray | None = None) -> float:
    """max over all eps-DP mechanisms of nu_a, as a linear-fractional programme (§3).

    Variables p(x) = P(M(x) in S) >= 0 for all 2^n databases, DP constraints
    p(x) <= e^eps p(x') for Hamming neighbours. Charnes-Cooper: fix E[p | x_a = 1 - z] = 1
    and maximise E[p | x_a = z]; the scale of p is free (shrinking p keeps 1 - p DP too).
    Solved with scipy's HiGHS, once for each direction.
    """
    from scipy.optimize import linprog

    n = prior.n
    if n > MAX_LP_NODES:
        raise SizeLimitError(f"the LP worst case is limited to n <= {MAX_LP_NODES} nodes (got {n})")
    if eps > MAX_LP_EPS:
        raise SizeLimitError(f"the LP worst case is limited to eps <= {MAX_LP_EPS} (got {eps})")
    lw = log_table(prior) if table is None else table
    N = 1 << n
    idx = np.arange(N, dtype=np.int64)
    xa = (idx >> target) & 1
    rows, cols, vals = [], [], []
    r = 0
    e = math.exp(eps)
    for i in range(n):
        lo = idx[((idx >> i) & 1) == 0]
        hi = lo | (1 << i)
        m = len(lo)
        for a_, b_ in ((lo, hi), (hi, lo)):  # p(a) - e^eps p(b) <= 0
            rr = np.arange(r, r + m)
            rows += [rr, rr]
            cols += [a_, b_]
            vals += [np.ones(m), np.full(m, -e)]
            r += m
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(r, N))
    best = -np.inf
    for z in (0, 1):
        w = np.exp(lw - lw.max())
        wz = np.where(xa == z, w, 0.0)
        wo = np.where(xa == 1 - z, w, 0.0)
        wz /= wz.sum()
        wo /= wo.sum()
        res = linprog(-wz, A_ub=A, b_ub=np.zeros(r), A_eq=wo[None, :], b_eq=[1.0],
                      bounds=(0, None), method="highs")
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed: {res.message}")
        best = max(best, math.log(-res.fun))
    return float(best)


# --------------------------------------------------------------------------- affiliation
def ising_is_affiliated(prior: IsingPrior, tol: float = 0.0) -> bool:
    """Ising log mu = sum J_ij (1-2x_i)(1-2x_j) + ...: the x_i x_j coefficient is 4 J_ij, so
    log mu is supermodular (Definition 3.1) iff every J_ij >= 0."""
    data = prior.couplings.data
    return bool(data.size == 0 or data.min() >= -tol)


def is_affiliated_enumeration(prior, tol: float = 1e-9) -> bool:
    """Definition 3.1 checked directly: mu(x v y) mu(x ^ y) >= mu(x) mu(y).

    Full support: the local test on all squares (x, x+e_i, x+e_j, x+e_i+e_j) is equivalent
    (strictly positive functions on a distributive lattice). Otherwise every pair of support
    states is tested (pairs outside the support hold trivially).
    """
    n = prior.n
    table = log_table(prior)
    if np.all(np.isfinite(table)):
        idx = np.arange(1 << n, dtype=np.int64)
        for i in range(n):
            for j in range(i + 1, n):
                base = idx[(((idx >> i) & 1) == 0) & (((idx >> j) & 1) == 0)]
                d = (table[base | (1 << i) | (1 << j)] + table[base]
                     - table[base | (1 << i)] - table[base | (1 << j)])
                if d.min() < -tol:
                    return False
        return True
    support = np.flatnonzero(np.isfinite(table))
    if support.size > 8192:
        # a violation among the first 4096 support states is a definitive witness
        if not _affiliated_on_pairs(table, support[:4096], support[:4096], tol):
            return False
        raise SizeLimitError("pairwise affiliation check limited to 8192 support states")
    return _affiliated_on_pairs(table, support, support, tol)


def _affiliated_on_pairs(table, left, support, tol) -> bool:
    ls = table[support]
    lleft = table[left]
    for start in range(0, left.size, 512):
        xs = left[start:start + 512]
        lx = lleft[start:start + 512]
        join = xs[:, None] | support[None, :]
        meet = xs[:, None] & support[None, :]
        lhs = table[join] + table[meet]
        rhs = lx[:, None] + ls[None, :]
        if np.any(lhs < rhs - tol):
            return False
    return True


def bipartite_gauge(prior: IsingPrior):
    """Gauge transform of an Ising prior on a bipartite graph: with the 2-colouring tau_i = ±1,
    s'_i = tau_i s_i gives J'_ij = tau_i tau_j J_ij and h'_i = tau_i h_i. Relabelling bits is a
    bijection of databases that maps eps-DP mechanisms to eps-DP mechanisms (and randomized
    response to itself, flipping the same output bits), so the worst case and randomized response
    have the same nu under both priors; an antiferromagnet (J <= 0) becomes affiliated.
    Returns (gauged prior, tau), or None when the graph is not bipartite."""
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n = prior.n
    adj = prior.couplings.tocsr()
    _, labels = connected_components(adj, directed=False)
    tau = np.zeros(n)
    for comp in np.unique(labels):
        root = int(np.flatnonzero(labels == comp)[0])
        order, pred = breadth_first_order(adj, root, directed=False, return_predecessors=True)
        tau[root] = 1.0
        for w in order[1:]:
            tau[w] = -tau[pred[w]]
    c = adj.tocoo()
    if np.any(tau[c.row] == tau[c.col]):
        return None
    gauged = sp.csr_matrix((c.data * tau[c.row] * tau[c.col], (c.row, c.col)), shape=(n, n))
    return IsingPrior(gauged, prior.fields * tau), tau


# --------------------------------------------------------------------------- influence matrix
def influence_matrix_ising(prior: IsingPrior) -> sp.csr_matrix:
    """Closed form of Definition 4.1 for Ising priors (nonzero only on edges):
    gamma_ij = |J_ij| + ½ ln[cosh(U + |J_ij|) / cosh(U - |J_ij|)], U = |h_i| + sum_{k≠i,j} |J_ik|.

    The conditional log-odds of s_i is 2(h_i + sum_k J_ik s_k); flipping s_j moves it by 4J_ij,
    and the ratio of conditional probabilities is largest when the other terms push against it.
    """
    c = prior.couplings.tocoo()
    absj = np.abs(c.data)
    rowsum = np.bincount(c.row, weights=absj, minlength=prior.n)
    U = np.abs(prior.fields)[c.row] + rowsum[c.row] - absj
    g = absj + 0.5 * (log_cosh(U + absj) - log_cosh(U - absj))
    return sp.csr_matrix((g, (c.row, c.col)), shape=(prior.n, prior.n))


def influence_matrix_definition(prior, table: np.ndarray | None = None) -> np.ndarray:
    """Definition 4.1 by enumeration: e^{2 gamma_ij} = max over S ⊆ {0,1} and x_{-i} ~_j x'_{-i}
    of P(x_i in S | x_{-i}) / P(x_i in S | x'_{-i}); gamma_ii = 0.

    A conditioning event of probability zero leaves the conditional law undefined; we then set
    gamma_ij = inf (Theorem 4.2's proof needs every conditional; priors without full support,
    like clones or parity, get no bound).
    """
    n = prior.n
    if n > MAX_GAMMA_DEFINITION_NODES:
        raise SizeLimitError(f"Gamma by definition is limited to n <= {MAX_GAMMA_DEFINITION_NODES}")
    lw = log_table(prior) if table is None else table
    idx = np.arange(1 << n, dtype=np.int64)
    gamma = np.zeros((n, n))
    for i in range(n):
        base = idx[((idx >> i) & 1) == 0]  # x_i = 0, x_{-i} free
        l0, l1 = lw[base], lw[base | (1 << i)]
        defined = np.isfinite(np.logaddexp(l0, l1))
        with np.errstate(invalid="ignore"):
            norm = np.logaddexp(l0, l1)
            lp0 = np.where(defined, l0 - norm, np.nan)
            lp1 = np.where(defined, l1 - norm, np.nan)
        for j in range(n):
            if j == i:
                continue
            sel = np.flatnonzero(((base >> j) & 1) == 0)
            other = np.searchsorted(base, base[sel] | (1 << j))
            if not (np.all(defined[sel]) and np.all(defined[other])):
                gamma[i, j] = np.inf
                continue
            worst = 0.0
            for lp in (lp0, lp1):
                a, b = lp[sel], lp[other]
                both_zero = np.isneginf(a) & np.isneginf(b)
                with np.errstate(invalid="ignore"):
                    d = np.abs(a - b)
                d = d[~both_zero]
                if d.size:
                    worst = max(worst, float(np.max(d)))
            gamma[i, j] = 0.5 * worst
    return gamma


@dataclass
class InfluenceSummary:
    spectral_norm: float
    spectral_radius: float
    max_row_sum: float
    bound: np.ndarray  # Theorem 4.2: 2 (Phi eps)_i, inf when the spectral radius >= 1


def influence_summary(gamma, eps: float, dense_limit: int = 400) -> InfluenceSummary:
    """Spectral norm, spectral radius, max row sum of Gamma and Theorem 4.2's bound
    nu_i <= 2 (Phi eps)_i with Phi = (I - Gamma)^{-1} (needs spectral radius < 1; ERRATA:
    the seed says spectral norm, but the Neumann series in the proof needs the radius)."""
    dense = not sp.issparse(gamma)
    n = gamma.shape[0]
    if dense:
        g = np.asarray(gamma, dtype=float)
        if not np.all(np.isfinite(g)):
            inf = np.full(n, np.inf)
            return InfluenceSummary(np.inf, np.inf, np.inf, inf)
        gs = sp.csr_matrix(g)
    else:
        gs = gamma.tocsr()
    row = float(np.max(np.asarray(gs.sum(axis=1)).ravel())) if n else 0.0
    if gs.nnz == 0:
        return InfluenceSummary(0.0, 0.0, 0.0, np.full(n, 2.0 * eps))
    if n <= dense_limit:
        g = gs.toarray()
        norm = float(np.linalg.norm(g, 2))
        radius = float(np.max(np.abs(np.linalg.eigvals(g))))
    else:
        from scipy.sparse.linalg import eigsh, eigs

        # a fixed, positive start vector: ARPACK's own is random at each call, so the same
        # point gave results some ulps apart from run to run
        start = np.random.default_rng(0).uniform(0.5, 1.5, n)
        norm = float(math.sqrt(eigsh((gs.T @ gs).tocsr(), k=1, which="LA", tol=1e-10,
                                     return_eigenvectors=False, v0=start)[0]))
        # Gamma >= 0: the Perron root is the eigenvalue of largest real part ('LR' also avoids
        # ARPACK's slow convergence on the ±lambda pairs of bipartite graphs)
        radius = float(np.max(eigs(gs, k=1, which="LR", tol=1e-10,
                                   return_eigenvectors=False, v0=start).real))
    if radius < 1.0:
        from scipy.sparse.linalg import spsolve

        phi_eps = spsolve((sp.identity(n, format="csc") - gs.tocsc()), np.full(n, float(eps)))
        bound = 2.0 * np.asarray(phi_eps)
    else:
        bound = np.full(n, np.inf)
    return InfluenceSummary(norm, radius, row, bound)


# --------------------------------------------------------------------------- trees
def _tree_order(n: int, u: np.ndarray, v: np.ndarray, root: int):
    """BFS order, parent and depth of a tree given by its edges."""
    if len(u) != n - 1:
        raise ValueError("not a tree: a tree on n nodes has n - 1 edges")
    adj = sp.csr_matrix((np.ones(2 * len(u)), (np.concatenate([u, v]), np.concatenate([v, u]))),
                        shape=(n, n))
    from scipy.sparse.csgraph import breadth_first_order

    order, pred = breadth_first_order(adj, root, directed=False, return_predecessors=True)
    if len(order) != n:
        raise ValueError("not a tree: graph is disconnected")
    return order, pred


def tree_restricted_log_partitions(prior: IsingPrior, field_shift: float = 0.0,
                                   root: int = 0) -> np.ndarray:
    """Belief propagation (exact on trees) for all nodes at once, O(n):
    out[v, z] = ln sum_{x: x_v = z} exp(sum J_ij s_i s_j + sum (h_i + shift) s_i).

    Upward pass in reverse BFS order, downward pass in BFS order; vectorised by BFS level.
    """
    n = prior.n
    u, v, J = prior.edges()
    order, pred = _tree_order(n, u, v, root)
    # coupling of each node to its parent
    parent = pred.copy()
    parent[root] = -1
    jpar = np.zeros(n)
    if len(u):
        key_u = np.minimum(u, v)
        key_v = np.maximum(u, v)
        lookup = sp.csr_matrix((J, (key_u, key_v)), shape=(n, n))
        nonroot = order[1:]
        p = parent[nonroot]
        jpar[nonroot] = np.asarray(lookup[np.minimum(nonroot, p), np.maximum(nonroot, p)]).ravel()
    h = prior.fields + field_shift
    spins = np.array([1.0, -1.0])  # column z: x = z -> s = 1 - 2z
    depth = np.zeros(n, dtype=np.int64)
    for w in order[1:]:
        depth[w] = depth[parent[w]] + 1
    levels = [order[depth[order] == d] for d in range(int(depth.max()) + 1)]
    up = h[:, None] * spins[None, :]  # ln of subtree weight given x_v
    # message from child c to parent: m_c(s_p) = ln sum_{s_c} e^{J s_p s_c + up_c(s_c)}
    msg = np.zeros((n, 2))
    for nodes in reversed(levels[1:]):
        jc = jpar[nodes][:, None, None]
        t = jc * spins[None, :, None] * spins[None, None, :] + up[nodes][:, None, :]
        msg[nodes] = np.logaddexp(t[:, :, 0], t[:, :, 1])
        np.add.at(up, parent[nodes], msg[nodes])
    belief = up.copy()
    for nodes in levels[1:]:
        p = parent[nodes]
        cavity = belief[p] - msg[nodes]  # parent's belief without this child
        jc = jpar[nodes][:, None, None]
        t = jc * spins[None, None, :] * spins[None, :, None] + cavity[:, None, :]  # [node, s_c, s_p]
        down = np.logaddexp(t[:, :, 0], t[:, :, 1])
        belief[nodes] = up[nodes] + down
    return belief


def tree_logz_all(prior: IsingPrior, eps: float, root: int = 0) -> dict:
    """The three restricted partition functions of formula (6) for every node: 'prior' (field
    h), 'bias0' (field h + eps/2, the weights e^{-eps |x|}) and 'bias1' (h - eps/2), each (n, 2).
    Constant factors e^{-eps n/2} cancel in (6)."""
    return {"prior": tree_restricted_log_partitions(prior, 0.0, root),
            "bias0": tree_restricted_log_partitions(prior, eps / 2, root),
            "bias1": tree_restricted_log_partitions(prior, -eps / 2, root)}


def tree_joint_target_sum(prior: IsingPrior, target: int) -> np.ndarray:
    """L[z, k] = ln mu(x_target = z, S = k) on a tree, exactly, by the recursion
    W_v(x_v, k) = e^{h_v s_v} conv_{c child} sum_{x_c} e^{J s_v s_c} W_c(x_c, .)   (O(n^2))."""
    n = prior.n
    u, v, J = prior.edges()
    order, pred = _tree_order(n, u, v, target)
    lookup = sp.csr_matrix((J, (np.minimum(u, v), np.maximum(u, v))), shape=(n, n)).todok()
    spins = (1.0, -1.0)
    W = {int(w): [np.array([prior.fields[w]]), np.array([-np.inf, -prior.fields[w]])]
         for w in order}  # x_w = 0 (s = +1, sum 0) and x_w = 1 (s = -1, sum 1)
    children: dict[int, list[int]] = {}
    for w in order[1:]:
        children.setdefault(int(pred[w]), []).append(int(w))
    for w in order[::-1]:
        w = int(w)
        cur = W[w]
        for c in children.get(w, ()):
            jc = lookup[min(w, c), max(w, c)]
            wc = W.pop(c)
            length = max(len(wc[0]), len(wc[1]))
            w0 = np.pad(wc[0], (0, length - len(wc[0])), constant_values=-np.inf)
            w1 = np.pad(wc[1], (0, length - len(wc[1])), constant_values=-np.inf)
            new = []
            for z in (0, 1):
                edge = np.logaddexp(jc * spins[z] * spins[0] + w0, jc * spins[z] * spins[1] + w1)
                new.append(log_convolve(cur[z], edge))
            cur = new
        W[w] = cur
    root = W[int(target)]
    L = np.full((2, n + 1), -np.inf)
    L[0, :len(root[0])] = root[0]
    L[1, :len(root[1])] = root[1]
    return L


# --------------------------------------------------------------------------- grids (transfer)
def grid_joint_target_sum(rows: int, cols: int, J: float, h, target: int) -> np.ndarray:
    """L[z, k] = ln mu(x_target = z, S = k) for the Ising prior on the rows x cols grid
    (row-major, open boundary), by a site-by-site transfer matrix.

    The state is the last w = cols spins added (the boundary) and the partial sum k; adding
    site p couples it to p - 1 (left) and p - w (up). Cost O(n * 2^w * n). The grid is
    transposed when rows < cols so that w = min(rows, cols) <= 12.
    """
    n = rows * cols
    h = np.broadcast_to(np.asarray(h, dtype=float), (n,))
    if rows < cols:  # transpose: (i, j) -> (j, i)
        perm = np.array([(p % cols) * rows + p // cols for p in range(n)])  # old -> new index
        h_new = np.empty(n)
        h_new[perm] = h
        return grid_joint_target_sum(cols, rows, J, h_new, int(perm[target]))
    w = cols
    if w > MAX_TRANSFER_WIDTH:
        raise SizeLimitError(f"transfer matrices need min(rows, cols) <= {MAX_TRANSFER_WIDTH}")
    R = 1 << (w - 1)
    spin = np.array([1.0, -1.0])
    rest = np.arange(R)
    newest_spin = spin[(rest >> (w - 2)) & 1] if w >= 2 else np.ones(R)
    A = np.full((1, 1 << w, 1), -np.inf)  # last axis: partial sum 0..p (grows by one per site)
    A[0, 0, 0] = 0.0
    for p in range(n):
        i, j = divmod(p, w)
        B = A.reshape(A.shape[0], R, 2, A.shape[2])  # state b = rest * 2 + oldest
        pad = np.full((A.shape[0], R, 1), -np.inf)
        outs = []
        for x in (0, 1):
            sx = spin[x]
            energy = np.full((R, 2), h[p] * sx)  # [rest, oldest]
            if i > 0:
                energy += (J * sx * spin)[None, :]
            if j > 0:
                energy += (J * sx * newest_spin)[:, None]
            t = np.logaddexp(B[:, :, 0, :] + energy[None, :, 0, None],
                             B[:, :, 1, :] + energy[None, :, 1, None])  # sum out the oldest spin
            outs.append(np.concatenate([t, pad] if x == 0 else [pad, t], axis=2))  # k -> k + x
        if p == target:
            # split on x_target: the z axis carries it from now on
            A = np.stack([np.concatenate([outs[0][0], np.full_like(outs[1][0], -np.inf)], axis=0),
                          np.concatenate([np.full_like(outs[0][0], -np.inf), outs[1][0]], axis=0)])
        else:
            A = np.concatenate(outs, axis=1)  # new state index = x * R + rest
    return _lse(A, axis=1)


def cycle_joint_target_sum(J: float, h, target: int) -> np.ndarray:
    """L[z, k] = ln mu(x_target = z, S = k) for the Ising prior on the n-cycle (n >= 3) with
    per-node fields h, by a transfer matrix along the cycle started at the target: the state is
    (x_target, last spin, partial sum); the closing edge is added at the end. O(n^2)."""
    hs = np.roll(np.asarray(h, dtype=float), -int(target))
    n = hs.size
    if n < 3:
        raise ValueError("a cycle needs n >= 3")
    spin = np.array([1.0, -1.0])
    A = np.full((2, 2, 1), -np.inf)  # [z, last, k]; k grows by one per site
    A[0, 0, 0] = hs[0]
    A = np.concatenate([A, np.full((2, 2, 1), -np.inf)], axis=2)
    A[1, 1, 1] = -hs[0]
    pad = np.full((2, 1), -np.inf)
    for p in range(1, n):
        outs = []
        for x in (0, 1):
            e = J * spin[x] * spin + hs[p] * spin[x]  # [previous spin]
            t = np.logaddexp(A[:, 0, :] + e[0], A[:, 1, :] + e[1])  # [z, k]
            outs.append(np.concatenate([t, pad] if x == 0 else [pad, t], axis=1))
        A = np.stack(outs, axis=1)
    closing = J * spin[:, None] * spin[None, :]  # [z, last]
    return np.logaddexp(A[:, 0, :] + closing[:, 0, None], A[:, 1, :] + closing[:, 1, None])


def grid_orbit_representative(rows: int, cols: int, node: int) -> int:
    """Smallest index in the node's orbit under the grid's symmetries (reflections, and the
    transpose when square): nodes in one orbit have the same nu for uniform J, h."""
    i, j = divmod(node, cols)
    images = {(i, j), (rows - 1 - i, j), (i, cols - 1 - j), (rows - 1 - i, cols - 1 - j)}
    if rows == cols:
        images |= {(b, a) for a, b in images}
    return min(a * cols + b for a, b in images)


# --------------------------------------------------------------------------- Bethe lattice
def bethe_fixed_point_log(J: float, h: float, d: int) -> float:
    """w = ln x(J, h) of Lemma A.3: the fixed point of ln y(x), y(x) = e^{2h} ((e^J x + e^{-J}) /
    (e^J + e^{-J} x))^d, reached from x_0 = 1; for h > 0 the unique root in (0, inf)."""
    from scipy.optimize import brentq

    if h == 0:
        return 0.0
    sign = 1.0 if h > 0 else -1.0
    hh = abs(h)

    def f(w):  # ln y(e^w) - w, with J > 0 folded in via logaddexp
        num = np.logaddexp(J + w, -J)
        den = np.logaddexp(J, -J + w)
        return 2 * hh + d * (num - den) - w

    hi = 2 * hh + 2 * d * abs(J) + 1.0
    return sign * brentq(f, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=500)


def bethe_fixed_point_plus(J: float, d: int) -> float:
    """lim_{h -> 0+} ln x(J, h): the largest root of w = d [ln(e^{J+w}+e^{-J}) - ln(e^J+e^{-J+w})]
    (0 when tanh J <= 1/d; the spontaneous-magnetisation branch otherwise, Lemma A.3)."""
    from scipy.optimize import brentq

    if math.tanh(J) * d <= 1.0:
        return 0.0

    def f(w):
        return d * (np.logaddexp(J + w, -J) - np.logaddexp(J, -J + w)) - w

    lo = 1e-12
    while f(lo) <= 0:  # f > 0 just right of 0 when d tanh J > 1
        lo *= 10
        if lo > 1:
            return 0.0
    return brentq(f, lo, 2 * d * J + 1.0, xtol=1e-15, rtol=1e-15, maxiter=500)


def bethe_limit_nu(degree: int, J: float, eps: float) -> float:
    """Corollary A.6, formula (24): nu = Delta/(Delta-1) ln x(J, eps/2) - eps/(Delta-1), the
    worst node of trees of maximum degree Delta = degree (the Bethe-lattice root)."""
    delta = degree
    w = bethe_fixed_point_log(J, eps / 2.0, delta - 1)
    return delta / (delta - 1) * w - eps / (delta - 1)


def bethe_root_log_odds_recursion(J: float, h: float, d: int, depth: int) -> float:
    """ln Z+/Z- at the root of the complete d-ary tree T_depth, by Lemma A.5's recursion with
    the corrected start x_0 = e^{2h} (ERRATA: the seed writes x_0 = 1)."""
    w = 2.0 * h
    for _ in range(depth):
        w = 2 * h + d * (np.logaddexp(J + w, -J) - np.logaddexp(J, -J + w))
    return float(w)
