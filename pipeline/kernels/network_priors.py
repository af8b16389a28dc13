"""Priors over graphs on n nodes and the dependence constant of seed 002 (Hehir-Niu-Slavkovic).

Graphs on n labelled nodes are bitmasks over the m = C(n, 2) dyads, dyad index d running
over pairs (i, j), i < j, in lexicographic order (``dyads(n)``). For n <= 7 (m <= 21) every
prior is enumerated exactly over all 2^m graphs with vectorised statistics (edges,
triangles, k-stars) and log-space weights.

The dependence constant (seed 002, Lemma 4.1, Eq. 2) for a dyad e is

    alpha_dep(e) = sup_r | ln P(rest = r | e = 1) / P(rest = r | e = 0) |
                 = sup_r | logit P(e = 1 | rest = r) - logit P(e = 1) |   (Bayes),

over configurations r of the other m - 1 dyads with P(r) > 0, and +inf when the two
conditional supports differ. Lemma 4.1: an eps-edge-DP mechanism is then
(eps + alpha_dep)-Pufferfish for the secret pair (e present, e absent).

Priors:

- :class:`IndependentEdges`: Erdos-Renyi(p) or heterogeneous independent edges (a beta
  model p_ij = expit(theta_i + theta_j)); alpha_dep = 0 (seed 002, Theorem 4.1).
- :class:`Hive`: Example 1 of seed 002 (queens 0 and 1; the queen prior is a parameter,
  see ERRATA); closed forms for every n.
- :class:`ERGM`: P(g) ~ exp(beta_edges E + beta_triangles T + beta_kstar S_k) (Section 4.2);
  the change statistic beta.Delta(g, i, j) (Eq. 3) equals logit P(e = 1 | rest), so
  alpha_dep = max(c_max - L, L - c_min) with L = logit P(e = 1) and [c_min, c_max] the
  exact range of the change statistic (Corollary 4.2). Beyond enumeration L comes from a
  tie-toggle Gibbs sampler (:func:`ergm_gibbs_edge_laws`).
- :class:`SBM`: stochastic block model with i.i.d. uniform latent labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np
from scipy.special import expit, logsumexp, xlog1py, xlogy

from pipeline.kernels import pufferfish as pf

MAX_ENUMERATION_N = 7


# --------------------------------------------------------------------------- bitmask graphs


def n_dyads(n: int) -> int:
    return n * (n - 1) // 2


def dyads(n: int) -> list[tuple[int, int]]:
    """Dyads (i, j), i < j, in bit order."""
    return list(combinations(range(n), 2))


def dyad_index(n: int, i: int, j: int) -> int:
    i, j = min(i, j), max(i, j)
    return i * n - i * (i + 1) // 2 + (j - i - 1)


def all_graphs(n: int) -> np.ndarray:
    m = n_dyads(n)
    if n > MAX_ENUMERATION_N:
        raise ValueError(f"enumeration needs n <= {MAX_ENUMERATION_N}, got n = {n}")
    return np.arange(1 << m, dtype=np.uint32)


def _bit(graphs: np.ndarray, d: int) -> np.ndarray:
    return ((graphs >> np.uint32(d)) & np.uint32(1)).astype(np.int8)


def edge_counts(graphs: np.ndarray) -> np.ndarray:
    return np.bitwise_count(graphs).astype(np.int64)


def degree_matrix(graphs: np.ndarray, n: int) -> np.ndarray:
    """(n, G) degrees, by summing the incident dyad bits."""
    deg = np.zeros((n, graphs.size), dtype=np.int16)
    for d, (i, j) in enumerate(dyads(n)):
        b = _bit(graphs, d)
        deg[i] += b
        deg[j] += b
    return deg


def triangle_counts(graphs: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(graphs.size, dtype=np.int64)
    for i, j, k in combinations(range(n), 3):
        mask = np.uint32((1 << dyad_index(n, i, j)) | (1 << dyad_index(n, i, k))
                         | (1 << dyad_index(n, j, k)))
        out += (graphs & mask) == mask
    return out


def kstar_counts(graphs: np.ndarray, n: int, k: int) -> np.ndarray:
    """sum_v C(deg v, k)."""
    deg = degree_matrix(graphs, n)
    table = np.array([math.comb(d, k) for d in range(n)], dtype=np.int64)
    return table[deg].sum(axis=0)


# --------------------------------------------------------------------------- priors


@dataclass(frozen=True)
class IndependentEdges:
    """Independent dyads, P(d) = probs[d]. ``er(n, p)`` or the beta model ``beta_model(n, p, spread)``."""

    n: int
    probs: tuple

    @staticmethod
    def er(n: int, p: float) -> "IndependentEdges":
        return IndependentEdges(n, tuple([float(p)] * n_dyads(n)))

    @staticmethod
    def beta_model(n: int, p: float, spread: float) -> "IndependentEdges":
        """p_ij = expit(theta_i + theta_j), theta_i = logit(p)/2 + spread * u_i, u = linspace(-1, 1, n)."""
        theta = 0.5 * math.log(p / (1 - p)) + spread * np.linspace(-1.0, 1.0, n)
        return IndependentEdges(n, tuple(float(expit(theta[i] + theta[j])) for i, j in dyads(n)))

    @property
    def homogeneous(self) -> bool:
        return len(set(self.probs)) <= 1

    def log_weights(self, graphs: np.ndarray) -> np.ndarray:
        out = np.zeros(graphs.size)
        for d, p in enumerate(self.probs):
            b = _bit(graphs, d)
            out += np.where(b == 1, _log(p), _log1m(p))
        return out

    def dyad_classes(self):
        if self.homogeneous:
            return [("any", (0, 1), n_dyads(self.n))]
        return [(f"{i}-{j}", (i, j), 1) for i, j in dyads(self.n)]

    # closed forms (Theorem 4.1)
    def alpha_dep(self, dyad) -> float:
        return 0.0

    def edge_count_log_pmfs(self, dyad):
        d = dyad_index(self.n, *dyad)
        rest = [p for i, p in enumerate(self.probs) if i != d]
        m = n_dyads(self.n)
        if len(set(rest)) <= 1:
            base = pf.log_binom_pmf(len(rest), rest[0] if rest else 0.0)
        else:
            base = pf.log_poisson_binomial_pmf(rest)
        return pf.shift_log_pmf(base, 1, m + 1), pf.shift_log_pmf(base, 0, m + 1)

    def p_edge(self, dyad) -> float:
        return float(self.probs[dyad_index(self.n, *dyad)])


@dataclass(frozen=True)
class Hive:
    """Example 1 of seed 002: the queen dyad {0, 1} is present with probability
    ``queen_prior``; given it present (absent) every other dyad is i.i.d. Bernoulli(a) (b)."""

    n: int
    queen_prior: float
    a: float
    b: float

    def log_weights(self, graphs: np.ndarray) -> np.ndarray:
        m = n_dyads(self.n)
        q = _bit(graphs, 0).astype(bool)
        k = (edge_counts(graphs) - q).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            on = _log(self.queen_prior) + xlogy(k, self.a) + xlog1py(m - 1 - k, -self.a)
            off = _log1m(self.queen_prior) + xlogy(k, self.b) + xlog1py(m - 1 - k, -self.b)
        return np.where(q, on, off)

    def dyad_classes(self):
        return [("queen", (0, 1), 1), ("other", (self.n - 2, self.n - 1), n_dyads(self.n) - 1)]

    def is_queen(self, dyad) -> bool:
        return tuple(sorted(dyad)) == (0, 1)

    def p_edge(self, dyad) -> float:
        if self.is_queen(dyad):
            return self.queen_prior
        return self.queen_prior * self.a + (1 - self.queen_prior) * self.b

    def _log_mixture_weights(self, s: int) -> tuple[float, float]:
        """Normalised log P(Q = 1 | e = s), log P(Q = 0 | e = s) for a non-queen dyad e, in log
        space: pi * a underflows (and loses all precision) for subnormal a."""
        pi, a, b = self.queen_prior, self.a, self.b
        lwa = _log(pi) + (_log(a) if s else _log1m(a))
        lwb = _log1m(pi) + (_log(b) if s else _log1m(b))
        tot = float(np.logaddexp(lwa, lwb))
        return lwa - tot, lwb - tot

    def _logit_other(self) -> float:
        """logit P(e = 1) of a non-queen dyad, from log P(e = 1) and log P(e = 0) in log space."""
        pi, a, b = self.queen_prior, self.a, self.b
        l1 = float(np.logaddexp(_log(pi) + _log(a), _log1m(pi) + _log(b)))
        l0 = float(np.logaddexp(_log(pi) + _log1m(a), _log1m(pi) + _log1m(b)))
        return l1 - l0

    def alpha_dep(self, dyad) -> float:
        """Queen: (m-1) max(ln(a/b), ln((1-b)/(1-a))) (the log ratio of Eq. 2 is linear in the
        number of other edges). Other dyad: P(e | rest) is a or b by the queen bit, so
        alpha = max |logit a - logit pbar|, |logit b - logit pbar| with pbar = pi a + (1-pi) b."""
        m = n_dyads(self.n)
        a, b = self.a, self.b
        if self.is_queen(dyad):
            if b == 0.0 or a == 1.0:
                return math.inf
            # log(a) - log(b), not log(a / b): the ratio overflows for subnormal b
            return (m - 1) * max(math.log(a) - math.log(b), math.log1p(-b) - math.log1p(-a))
        lp = self._logit_other()  # not _logit(pi a + (1 - pi) b): that underflows for subnormal a
        return max(abs(_logit(a) - lp), abs(_logit(b) - lp))

    def edge_count_log_pmfs(self, dyad):
        """Laws of |E| given e = 1 and e = 0 (mixtures of shifted binomials)."""
        m = n_dyads(self.n)
        a, b = self.a, self.b
        if self.is_queen(dyad):
            return (pf.shift_log_pmf(pf.log_binom_pmf(m - 1, a), 1, m + 1),
                    pf.shift_log_pmf(pf.log_binom_pmf(m - 1, b), 0, m + 1))
        ba, bb = pf.log_binom_pmf(m - 2, a), pf.log_binom_pmf(m - 2, b)
        out = []
        for s in (1, 0):
            lw = list(self._log_mixture_weights(s))
            out.append(pf.log_mixture(lw, [pf.shift_log_pmf(ba, s + 1, m + 1),
                                           pf.shift_log_pmf(bb, s, m + 1)]))
        return out[0], out[1]

    def rr_loss(self, dyad, eps: float) -> float:
        """Randomized response, closed form: eps + sup |ln B_1/B_0| where the rest of the
        output depends only on (queen output bit, number of other output ones)."""
        m = n_dyads(self.n)
        # all in log space: ra = a(1-q) + (1-a)q rounds to 1 for a near 1 and large eps, and
        # log1p(-ra) then fails or cancels; 1 - ra = (1-a)(1-q) + a q is summed directly
        lq = -float(np.logaddexp(0.0, eps))       # log q
        lkeep = -float(np.logaddexp(0.0, -eps))   # log (1 - q)

        def out_logs(p):  # (log P(output 1), log P(output 0)) of one Bernoulli(p) dyad after RR
            return (float(np.logaddexp(_log(p) + lkeep, _log1m(p) + lq)),
                    float(np.logaddexp(_log1m(p) + lkeep, _log(p) + lq)))

        (lra, l1ra), (lrb, l1rb) = out_logs(self.a), out_logs(self.b)
        if self.is_queen(dyad):
            k = np.arange(m, dtype=np.float64)
            d = k * (lra - lrb) + (m - 1 - k) * (l1ra - l1rb)
            return float(eps + np.max(np.abs(d)))
        k = np.arange(m - 1, dtype=np.float64)
        lpa = k * lra + (m - 2 - k) * l1ra
        lpb = k * lrb + (m - 2 - k) * l1rb
        logs = {}
        for s in (1, 0):
            lwa, lwb = self._log_mixture_weights(s)
            for wq in (0, 1):  # output bit of the queen dyad; its law given Q is RR(Q)
                ka = lkeep if wq == 1 else lq   # Q = 1
                kb = lq if wq == 1 else lkeep   # Q = 0
                logs[s, wq] = np.logaddexp(lwa + ka + lpa, lwb + kb + lpb)
        d = np.concatenate([logs[1, 0] - logs[0, 0], logs[1, 1] - logs[0, 1]])
        return float(eps + np.max(np.abs(d)))


@dataclass(frozen=True)
class ERGM:
    """P(g) ~ exp(beta_edges E(g) + beta_triangles T(g) + beta_kstar S_k(g)) (seed 002, Section 4.2)."""

    n: int
    beta_edges: float
    beta_triangles: float = 0.0
    beta_kstar: float = 0.0
    kstar: int = 2

    def log_weights(self, graphs: np.ndarray) -> np.ndarray:
        out = self.beta_edges * edge_counts(graphs).astype(np.float64)
        if self.beta_triangles != 0.0:
            out += self.beta_triangles * triangle_counts(graphs, self.n)
        if self.beta_kstar != 0.0:
            out += self.beta_kstar * kstar_counts(graphs, self.n, self.kstar)
        return out

    def dyad_classes(self):
        return [("any", (0, 1), n_dyads(self.n))]

    def change_statistic(self, common: np.ndarray, deg_i: np.ndarray, deg_j: np.ndarray) -> np.ndarray:
        """beta . Delta(g, i, j) for t common neighbours and degrees of i, j without {i, j}
        (adding {i, j} adds t triangles and C(d_i, k-1) + C(d_j, k-1) k-stars)."""
        table = np.array([math.comb(d, self.kstar - 1) for d in range(max(self.n, 2))], dtype=np.float64)
        return (self.beta_edges + self.beta_triangles * common
                + self.beta_kstar * (table[deg_i] + table[deg_j]))

    def change_statistic_range(self) -> tuple[float, float]:
        """Exact [min, max] of beta.Delta over all configurations of the other dyads.

        A configuration realises (d_i, d_j, t) iff 0 <= t <= min(d_i, d_j) and
        d_i + d_j - t <= n - 2 (t common neighbours, the rest private), so the range is a
        small exact search over these triples.
        """
        n = self.n
        di, dj, t = np.meshgrid(np.arange(n - 1), np.arange(n - 1), np.arange(n - 1), indexing="ij")
        ok = (t <= np.minimum(di, dj)) & (di + dj - t <= n - 2)
        c = self.change_statistic(t[ok].astype(np.float64), di[ok], dj[ok])
        return float(c.min()), float(c.max())

    def dependence_bounds(self) -> dict:
        """R = c_max - c_min and 2 zeta = 2 max |c| (Corollary 4.2: alpha <= R <= 2 zeta)."""
        lo, hi = self.change_statistic_range()
        return {"c_min": lo, "c_max": hi, "R": hi - lo, "two_zeta": 2 * max(abs(lo), abs(hi))}

    def alpha_from_marginal(self, logit_p: float) -> float:
        lo, hi = self.change_statistic_range()
        return max(hi - logit_p, logit_p - lo)


@dataclass(frozen=True)
class SBM:
    """Stochastic block model: labels i.i.d. uniform on ``blocks`` blocks, then dyads
    independent with p_in (same block) or p_out (different blocks)."""

    n: int
    blocks: int
    p_in: float
    p_out: float

    def within_masks(self):
        """Distinct within-block dyad bitmasks with their log label probabilities."""
        pairs = dyads(self.n)
        counts: dict[int, int] = {}
        for labels in product(range(self.blocks), repeat=self.n):
            mask = 0
            for d, (i, j) in enumerate(pairs):
                if labels[i] == labels[j]:
                    mask |= 1 << d
            counts[mask] = counts.get(mask, 0) + 1
        total = self.blocks ** self.n
        return [(mask, math.log(c) - math.log(total)) for mask, c in counts.items()]

    def log_weights(self, graphs: np.ndarray) -> np.ndarray:
        m = n_dyads(self.n)
        edges = edge_counts(graphs).astype(np.float64)
        li, lo = _logit(self.p_in), _logit(self.p_out)
        out = np.full(graphs.size, -np.inf)
        for mask, lw in self.within_masks():
            n_in = bin(mask).count("1")
            k_in = np.bitwise_count(graphs & np.uint32(mask)).astype(np.float64)
            const = lw + n_in * _log1m(self.p_in) + (m - n_in) * _log1m(self.p_out)
            out = np.logaddexp(out, const + k_in * li + (edges - k_in) * lo)
        return out

    def dyad_classes(self):
        return [("any", (0, 1), n_dyads(self.n))]


# --------------------------------------------------------------------------- exact enumeration


def enumerate_log_prob(prior) -> np.ndarray:
    """Normalised log P(G = g) for all 2^m bitmask graphs g."""
    lw = prior.log_weights(all_graphs(prior.n))
    return lw - logsumexp(lw)


def split_on_dyad(log_prob: np.ndarray, d: int):
    """(log P(rest = r, e = 1), log P(rest = r, e = 0)) indexed by the (m-1)-bit code of the
    other dyads (bit d removed, higher bits shifted down)."""
    v = log_prob.reshape(-1, 2, 1 << d)
    return v[:, 1, :].ravel(), v[:, 0, :].ravel()


def alpha_dep_from_joint(log_joint1: np.ndarray, log_joint0: np.ndarray) -> float:
    """sup over r with P(r) > 0 of |ln P(r | e=1) / P(r | e=0)|; inf if supports differ."""
    l1 = log_joint1 - logsumexp(log_joint1)
    l0 = log_joint0 - logsumexp(log_joint0)
    fin1, fin0 = np.isfinite(l1), np.isfinite(l0)
    if np.any(fin1 != fin0):
        return math.inf
    both = fin1 & fin0
    return float(np.max(np.abs(l1[both] - l0[both])))


def edge_count_log_pmfs_from_joint(log_joint1, log_joint0, m: int):
    """Laws of |E| given e = 1 and e = 0, grouped logsumexp over the rest's edge count."""
    codes = np.arange(log_joint1.size, dtype=np.uint32)
    counts = np.bitwise_count(codes)
    order = np.argsort(counts, kind="stable")
    bounds = np.searchsorted(counts[order], np.arange(m + 1))
    out = []
    for s, lj in ((1, log_joint1), (0, log_joint0)):
        lj = (lj - logsumexp(lj))[order]
        pmf = np.full(m + 1, -np.inf)
        for k in range(m):
            seg = lj[bounds[k]: bounds[k + 1]]
            if seg.size:
                pmf[k + s] = logsumexp(seg)
        out.append(pmf)
    return out[0], out[1]


def exact_edge_analysis(log_prob: np.ndarray, n: int, dyad, eps: float, mechanism: str) -> dict:
    """Enumeration: p_edge, alpha_dep and the exact Pufferfish loss of ``mechanism`` for ``dyad``."""
    m = n_dyads(n)
    l1, l0 = split_on_dyad(log_prob, dyad_index(n, *dyad))
    lp1 = logsumexp(l1)
    out = {"p_edge": float(np.exp(lp1)), "alpha_dep": alpha_dep_from_joint(l1, l0)}
    if mechanism == "laplace_edge_count":
        k1, k0 = edge_count_log_pmfs_from_joint(l1, l0, m)
        out["pufferfish_loss"], out["sup_at"] = pf.laplace_count_loss(k1, k0, eps)
    elif mechanism == "randomized_response":
        out["pufferfish_loss"], out["sup_at"] = pf.rr_loss_from_rest(l1, l0, eps), ""
    else:
        raise ValueError(f"unknown mechanism {mechanism!r}")
    return out


# --------------------------------------------------------------------------- ERGM by MCMC


def one_factorization(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rounds of disjoint dyads covering all dyads once (circle method); dyads within a
    round share no node, hence are conditionally independent under edge/triangle/k-star ERGMs."""
    size = n + (n % 2)
    rounds = []
    for r in range(size - 1):
        pairs = [(size - 1, r)]
        for k in range(1, size // 2):
            pairs.append(((r + k) % (size - 1), (r - k) % (size - 1)))
        pairs = [(min(i, j), max(i, j)) for i, j in pairs if i < n and j < n]
        rounds.append((np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])))
    return rounds


def ergm_gibbs_edge_laws(model: ERGM, rng: np.random.Generator, sweeps: int, burn_in: int,
                         chains: int) -> np.ndarray:
    """Tie-toggle Gibbs sampler (block updates over a 1-factorisation of K_n), ``chains``
    independent chains from the empty graph, all randomness from ``rng``.

    Returns per-chain Rao-Blackwellised estimates h[c, s, k] of P(e = s, |E| = k), averaged
    over all dyads e (the model is exchangeable): after each sweep every dyad contributes
    expit(c_e) at k = |rest| + 1 and 1 - expit(c_e) at k = |rest|.
    """
    n, m = model.n, n_dyads(model.n)
    A = np.zeros((chains, n, n), dtype=np.int8)
    deg = np.zeros((chains, n), dtype=np.int64)
    rounds = one_factorization(n)
    iu, ju = np.triu_indices(n, 1)
    hist = np.zeros((chains, 2, m + 1))
    offsets = (np.arange(chains) * 2 * (m + 1))[:, None]
    for sweep in range(burn_in + sweeps):
        for I, J in rounds:
            common = np.einsum("cpk,cpk->cp", A[:, I, :], A[:, J, :], dtype=np.int64)
            a_ij = A[:, I, J].astype(np.int64)
            c = model.change_statistic(common, deg[:, I] - a_ij, deg[:, J] - a_ij)
            new = (rng.random(c.shape) < expit(c)).astype(np.int8)
            change = new.astype(np.int64) - a_ij
            A[:, I, J] = new
            A[:, J, I] = new
            np.add.at(deg, (slice(None), I), change)
            np.add.at(deg, (slice(None), J), change)
        if sweep < burn_in:
            continue
        Af = A.astype(np.float64)
        common = np.matmul(Af, Af)[:, iu, ju].astype(np.int64)
        a = A[:, iu, ju].astype(np.int64)
        c = model.change_statistic(common, deg[:, iu] - a, deg[:, ju] - a)
        p1 = expit(c)
        rest = a.sum(axis=1, keepdims=True) - a
        hist.ravel()[:] += np.bincount((offsets + (m + 1) + rest + 1).ravel(), weights=p1.ravel(),
                                       minlength=hist.size)
        # expit(-c), not 1 - expit(c): the latter is exactly 0 for c >~ 37
        hist.ravel()[:] += np.bincount((offsets + rest).ravel(), weights=expit(-c).ravel(),
                                       minlength=hist.size)
    return hist / (sweeps * m)


def ergm_mcmc_summary(model: ERGM, hist: np.ndarray, hist_plus: np.ndarray,
                      hist_minus: np.ndarray, eps: float) -> dict:
    """Pooled MCMC estimates, each with a jackknife-over-chains standard error.

    ``hist`` comes from ``model``; ``hist_plus`` / ``hist_minus`` from the same model with
    beta_edges +- eps. The Laplace ratio's limits are exact tilting identities:
    E_1[e^{+-eps K}] / E_0[e^{+-eps K}] = exp(logit P_{beta_edges +- eps}(e) - logit P(e)),
    so they need only marginal edge probabilities (well estimated), not the tails of |E|.
    The integer support points use the Rao-Blackwellised laws of |E| given e, restricted to
    the range of edge counts the chains visited under both laws (a plug-in: it cannot see
    unvisited counts; when no count was visited under both, e.g. nearly empty graphs where
    |E| | e = 0 is always 0 and |E| | e = 1 always 1, the range visited under either).
    alpha_dep uses the exact change-statistic range, never a maximum over samples.
    """

    def logit_of(h: np.ndarray) -> float:
        # log of the two sums, not logit(p1): p1 rounds to 1 (log1p(-1) fails) for dense graphs
        with np.errstate(divide="ignore"):
            return float(np.log(h[:, 1].sum()) - np.log(h[:, 0].sum()))

    def estimate(h: np.ndarray, hp: np.ndarray, hm: np.ndarray):
        logit = logit_of(h)
        pooled = h.sum(axis=0)
        p1 = pooled[1].sum() / pooled.sum()
        with np.errstate(divide="ignore"):
            lk1, lk0 = np.log(pooled[1] / pooled[1].sum()), np.log(pooled[0] / pooled[0].sum())
        seen = np.flatnonzero(np.isfinite(lk1) & np.isfinite(lk0))
        if seen.size == 0:  # nearly empty / full graphs: the two laws visited disjoint counts
            seen = np.flatnonzero(np.isfinite(lk1) | np.isfinite(lk0))
        ratio = (pf.laplace_log_density_at_integers(lk1, eps)
                 - pf.laplace_log_density_at_integers(lk0, eps))[seen.min(): seen.max() + 1]
        loss = max(abs(logit_of(hp) - logit), abs(logit_of(hm) - logit), float(np.max(np.abs(ratio))))
        return np.array([p1, model.alpha_from_marginal(logit), loss])

    full = estimate(hist, hist_plus, hist_minus)
    chains = hist.shape[0]
    loo = np.array([estimate(*(np.delete(x, c, axis=0) for x in (hist, hist_plus, hist_minus)))
                    for c in range(chains)])
    se = np.sqrt((chains - 1) / chains * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
    return {"p_edge_mcmc": float(full[0]), "p_edge_se": float(se[0]),
            "alpha_dep_mcmc": float(full[1]), "alpha_dep_se": float(se[1]),
            "pufferfish_loss_mcmc": float(full[2]), "pufferfish_loss_se": float(se[2])}


def ergm_mcmc_edge_analysis(model: ERGM, eps: float, rng: np.random.Generator, sweeps: int,
                            burn_in: int, chains: int) -> dict:
    """Three Gibbs runs (beta_edges, beta_edges + eps, beta_edges - eps) and their summary."""
    from dataclasses import replace

    runs = [ergm_gibbs_edge_laws(replace(model, beta_edges=model.beta_edges + shift), rng,
                                 sweeps, burn_in, chains) for shift in (0.0, eps, -eps)]
    return ergm_mcmc_summary(model, *runs, eps)


# --------------------------------------------------------------------------- helpers


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _log1m(x: float) -> float:
    return math.log1p(-x) if x < 1 else -math.inf


def _logit(p: float) -> float:
    if p <= 0:
        return -math.inf
    if p >= 1:
        return math.inf
    return math.log(p) - math.log1p(-p)
