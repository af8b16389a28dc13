"""Private Bayesian inference on binary Bayesian networks (thesis 004, chapter 4).

Model (Example 1, section 4.1.1): binary nodes X_i, i in I, in topological order; the CPT
parameter theta_{i,j} = P(X_i = 1 | X_{pi_i} = j) has a Beta(alpha, beta) prior; after data D
the posterior is Beta(alpha + Delta alpha_{i,j}, beta + Delta beta_{i,j}) with
Delta alpha_{i,j} = #{rows : x_{pi_i} = j, x_i = 1} and Delta beta_{i,j} = #{... x_i = 0}.
Parent configuration j is the integer sum_t x_{pi_i[t]} 2^t. The flat parameter vector lists
nodes in order, each with its 2^{|pi_i|} configurations; m = sum_i 2^{|pi_i|}.

Mechanisms (Table 4.1):

* ``laplace_updates`` - Algorithm 4.2.1 (Laplace noise on the update vector, scale 2|I|/eps).
* ``fourier_updates`` - Algorithm 4.2.2 (Laplace noise on Fourier coefficients of the
  contingency table, downward closure N_I of the families pi_i + i, consistency by construction).
* ``sampling_mechanism`` - BAPS (Algorithm 3.5.1) on the posterior truncated to [w, 1 - w]
  (section 4.4.2), with w set from eps by Assumption 1 (Theorem 3.5.1 + composition).
* ``map_exp_mechanism`` - Algorithm 4.3.1 (exponential mechanism, base measure the prior).

Bit conventions: a data row x in {0,1}^k is the integer code sum_v x_v 2^v; a variable set is a
bitmask. Fourier coefficients are kept in the scaled form zhat_gamma = 2^{k/2} <f^gamma, h> =
sum_rows (-1)^{popcount(gamma & row)} (integers, free of 2^{+-k/2} overflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy import integrate, special


# --------------------------------------------------------------------------- structures
@dataclass(frozen=True)
class BinaryNetwork:
    """A binary Bayesian network; ``parents[i]`` lists nodes < i (topological order)."""

    parents: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...] = field(init=False)

    def __post_init__(self):
        for i, ps in enumerate(self.parents):
            if any(p >= i or p < 0 for p in ps) or len(set(ps)) != len(ps):
                raise ValueError(f"node {i}: parents must be distinct nodes < {i}, got {ps}")
        offs, acc = [], 0
        for ps in self.parents:
            offs.append(acc)
            acc += 2 ** len(ps)
        object.__setattr__(self, "offsets", tuple(offs))

    @property
    def n_nodes(self) -> int:
        return len(self.parents)

    @property
    def m(self) -> int:
        """m = sum_i 2^{|pi_i|} (Proposition 4.2.3), the number of Beta parameters."""
        return self.offsets[-1] + 2 ** len(self.parents[-1])

    def family_mask(self, i: int) -> int:
        """Bitmask of pi_i + e_i (the variables of node i's marginal table)."""
        return (1 << i) | sum(1 << p for p in self.parents[i])

    def children(self, i: int) -> list[int]:
        return [c for c, ps in enumerate(self.parents) if i in ps]


def naive_bayes(d: int) -> BinaryNetwork:
    """Node 0 is the class Y, nodes 1..d are features with the single parent Y (section 4.4.1)."""
    return BinaryNetwork(((),) + tuple((0,) for _ in range(d)))


def chain(n_nodes: int) -> BinaryNetwork:
    """X_0 -> X_1 -> ... -> X_{n-1}."""
    return BinaryNetwork(((),) + tuple((i - 1,) for i in range(1, n_nodes)))


def random_dag(n_nodes: int, max_indeg: int, rng: np.random.Generator) -> BinaryNetwork:
    """Random DAG in topological order: node i draws its in-degree uniformly from
    0..min(i, max_indeg), then that many distinct parents uniformly among 0..i-1."""
    parents = []
    for i in range(n_nodes):
        k = int(rng.integers(0, min(i, max_indeg) + 1))
        parents.append(tuple(sorted(int(p) for p in rng.choice(i, size=k, replace=False)))
                       if k else ())
    return BinaryNetwork(tuple(parents))


# --------------------------------------------------------------------------- data & counts
def sample_cpts(net: BinaryNetwork, rng: np.random.Generator) -> np.ndarray:
    """True CPT parameters theta_{i,j} ~ Uniform(0, 1) (the seed does not specify them)."""
    return rng.uniform(0.0, 1.0, size=net.m)


def parent_configs(net: BinaryNetwork, X: np.ndarray) -> np.ndarray:
    """(n, |I|) array of parent configuration indices j."""
    X = np.asarray(X)
    J = np.zeros((X.shape[0], net.n_nodes), dtype=np.int64)
    for i, ps in enumerate(net.parents):
        for t, p in enumerate(ps):
            J[:, i] += X[:, p].astype(np.int64) << t
    return J


def sample_data(net: BinaryNetwork, theta: np.ndarray, n: int,
                rng: np.random.Generator) -> np.ndarray:
    """n rows by ancestral sampling, as an (n, |I|) uint8 array."""
    X = np.zeros((n, net.n_nodes), dtype=np.uint8)
    for i, ps in enumerate(net.parents):
        j = np.zeros(n, dtype=np.int64)
        for t, p in enumerate(ps):
            j += X[:, p].astype(np.int64) << t
        X[:, i] = rng.random(n) < theta[net.offsets[i] + j]
    return X


def update_counts(net: BinaryNetwork, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Delta alpha, Delta beta), each of length m (Example 1)."""
    X = np.asarray(X)
    J = parent_configs(net, X)
    idx = J + np.asarray(net.offsets)[None, :]
    ones = np.bincount(idx[X == 1], minlength=net.m)
    zeros = np.bincount(idx[X == 0], minlength=net.m)
    return ones.astype(float), zeros.astype(float)


def update_vector(net: BinaryNetwork, X: np.ndarray) -> np.ndarray:
    """Delta omega = (Delta alpha, Delta beta) as one vector of length 2m."""
    a, b = update_counts(net, X)
    return np.concatenate([a, b])


def all_rows(k: int) -> np.ndarray:
    """All 2^k binary rows as a (2^k, k) uint8 array (row r has bits of r)."""
    codes = np.arange(2 ** k, dtype=np.int64)
    return ((codes[:, None] >> np.arange(k)[None, :]) & 1).astype(np.uint8)


def l1_sensitivity_bruteforce(net: BinaryNetwork) -> float:
    """max ||Delta omega(D) - Delta omega(D')||_1 over datasets differing in one row.

    The update vector is a sum over rows, so the difference is u(r) - u(r') for the replaced
    row r and its replacement r'; we take the max over all pairs of the 2^|I| possible rows.
    Lemma 4.2.1 claims 2|I|.
    """
    rows = all_rows(net.n_nodes)
    U = np.stack([update_vector(net, r[None, :]) for r in rows])
    best = 0.0
    for r in range(len(rows)):
        best = max(best, float(np.abs(U - U[r]).sum(axis=1).max()))
    return best


# --------------------------------------------------------------------------- Laplace (4.2.1)
def laplace_updates(net: BinaryNetwork, X: np.ndarray, eps: float, rng: np.random.Generator,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 4.2.1 with a corrected truncation rule.

    Delta alpha' = Delta alpha + Lap(2|I|/eps), Delta beta' likewise; Z1 = clip(Delta alpha', 0, n).
    Z2 = n - Z1 only for parentless nodes (where Delta alpha + Delta beta = n is public); for
    nodes with parents the total is the private parent-configuration count, so n - Z1 would add
    the rows of all other configurations to beta: there we use Z2 = clip(Delta beta', 0, n).
    Both rules are post-processing of the noisy vector, so privacy is unchanged.
    """
    n = X.shape[0]
    a, b = update_counts(net, X)
    scale = 2 * net.n_nodes / eps
    a_noisy = a + rng.laplace(0.0, scale, size=net.m)
    b_noisy = b + rng.laplace(0.0, scale, size=net.m)
    z1 = np.clip(a_noisy, 0.0, n)
    z2 = np.clip(b_noisy, 0.0, n)
    for i, ps in enumerate(net.parents):
        if not ps:
            z2[net.offsets[i]] = n - z1[net.offsets[i]]
    return z1, z2


# --------------------------------------------------------------------------- Fourier (4.2.2)
def downward_closure(net: BinaryNetwork) -> list[int]:
    """N_I = union over i of all subsets of pi_i + e_i, as sorted bitmasks (includes 0)."""
    out = set()
    for i in range(net.n_nodes):
        vs = [v for v in range(net.n_nodes) if net.family_mask(i) >> v & 1]
        for r in range(len(vs) + 1):
            for sub in combinations(vs, r):
                out.add(sum(1 << v for v in sub))
    return sorted(out)


def row_codes(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X).astype(np.int64)
    return (X << np.arange(X.shape[1], dtype=np.int64)[None, :]).sum(axis=1)


def _parity(x: np.ndarray) -> np.ndarray:
    """popcount(x) mod 2, elementwise, for non-negative int64."""
    x = np.asarray(x, dtype=np.uint64).copy()
    p = np.zeros(x.shape, dtype=np.uint64)
    while np.any(x):
        p ^= x & np.uint64(1)
        x >>= np.uint64(1)
    return p.astype(np.int64)


def fourier_coefficients(X: np.ndarray, gammas: list[int]) -> np.ndarray:
    """zhat_gamma = 2^{k/2} <f^gamma, h> = sum_rows (-1)^{<gamma, row>}, for each gamma."""
    codes = row_codes(X)
    g = np.asarray(gammas, dtype=np.int64)
    signs = 1 - 2 * _parity(codes[None, :] & g[:, None])
    return signs.sum(axis=1).astype(float)


def marginal_from_coefficients(zhat: dict[int, float], mask: int) -> np.ndarray:
    """Theorem 4.2.8: the marginal table on the variables of ``mask``.

    h^J_beta = 2^{-s} sum_{gamma <= J} zhat_gamma (-1)^{<gamma, beta>}, s = |J|; the cell index
    beta has bit t for the t-th smallest variable of J.
    """
    vs = [v for v in range(mask.bit_length()) if mask >> v & 1]
    s = len(vs)
    cells = np.arange(2 ** s, dtype=np.int64)
    table = np.zeros(2 ** s)
    for local in range(2 ** s):  # gamma as a subset of J, in local bits
        gamma = sum(1 << vs[t] for t in range(s) if local >> t & 1)
        table += zhat[gamma] * (1 - 2 * _parity(cells & local))
    return table / 2 ** s


def marginal_counts(X: np.ndarray, mask: int) -> np.ndarray:
    """Direct marginal contingency table on ``mask`` (same cell order as above)."""
    vs = [v for v in range(mask.bit_length()) if mask >> v & 1]
    X = np.asarray(X).astype(np.int64)
    local = np.zeros(X.shape[0], dtype=np.int64)
    for t, v in enumerate(vs):
        local += X[:, v] << t
    return np.bincount(local, minlength=2 ** len(vs)).astype(float)


def _family_cell_maps(net: BinaryNetwork, i: int) -> tuple[np.ndarray, np.ndarray]:
    """For node i: cell indices (in its family table) of (x_i = 1, j) and (x_i = 0, j), j = 0.."""
    mask = net.family_mask(i)
    vs = [v for v in range(net.n_nodes) if mask >> v & 1]
    pos = {v: t for t, v in enumerate(vs)}
    ps = net.parents[i]
    one, zero = [], []
    for j in range(2 ** len(ps)):
        base = sum(1 << pos[p] for t, p in enumerate(ps) if j >> t & 1)
        one.append(base | (1 << pos[i]))
        zero.append(base)
    return np.array(one), np.array(zero)


def fourier_noise_scale(net: BinaryNetwork, eps: float) -> float:
    """Corollary 4.2.9 noise scale on <f^gamma, h>: 2|N_I| / (eps 2^{|I|/2})."""
    return 2 * len(downward_closure(net)) / (eps * 2 ** (net.n_nodes / 2))


def fourier_increment(net: BinaryNetwork, eps: float, stealth_prob: float,
                      rng: np.random.Generator, draws: int = 2000) -> float:
    """Increment to zhat_0 that makes every released family table non-negative with probability
    >= stealth_prob whatever the data (true counts are >= 0, so it suffices to cover the noise).

    The noise law is data-independent, so the increment is calibrated by Monte Carlo of the
    noise alone (privacy-free). Corollary 4.2.11's 4 t |N_I|^2 / eps (scaled units) also
    suffices but is far larger; the thesis says t was tuned for 90% stealth.
    """
    gammas = downward_closure(net)
    col = {g: t for t, g in enumerate(gammas)}
    scale = 2 * len(gammas) / eps  # in zhat units
    noise = rng.laplace(0.0, scale, size=(draws, len(gammas)))
    need = np.zeros(draws)
    for i in range(net.n_nodes):
        mask = net.family_mask(i)
        vs = [v for v in range(net.n_nodes) if mask >> v & 1]
        s = len(vs)
        cells = np.arange(2 ** s)
        signs = np.zeros((2 ** s, 2 ** s))
        cols = []
        for local in range(2 ** s):
            cols.append(col[sum(1 << vs[t] for t in range(s) if local >> t & 1)])
            signs[:, local] = 1 - 2 * _parity(cells & local)
        cell_noise = noise[:, cols] @ signs.T  # 2^s times the noise in each cell
        need = np.maximum(need, (-cell_noise).max(axis=1))
    return float(max(np.quantile(need, stealth_prob), 0.0))


def fourier_updates(net: BinaryNetwork, X: np.ndarray, eps: float, rng: np.random.Generator,
                    increment: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
    """Algorithm 4.2.2: noisy Fourier coefficients on N_I, zhat_0 += increment, project each
    family table, read off (Z1, Z2) = (cell x_i = 1, cell x_i = 0) per parent configuration.

    Returns (Z1, Z2, negative_cells): the count of released family cells below zero before the
    final clip at 0 (which trades stealth for validity, not privacy). There is no upper clip at
    n: the increment raises every cell, and clipping at n would flatten noisy tables to 1/2.
    """
    gammas = downward_closure(net)
    z = fourier_coefficients(X, gammas) + rng.laplace(0.0, 2 * len(gammas) / eps, len(gammas))
    zhat = dict(zip(gammas, z))
    zhat[0] += increment
    z1, z2 = np.zeros(net.m), np.zeros(net.m)
    negative = 0
    for i in range(net.n_nodes):
        table = marginal_from_coefficients(zhat, net.family_mask(i))
        negative += int(np.sum(table < 0))
        one, zero = _family_cell_maps(net, i)
        sl = slice(net.offsets[i], net.offsets[i] + len(one))
        z1[sl], z2[sl] = table[one], table[zero]
    return np.maximum(z1, 0.0), np.maximum(z2, 0.0), negative


# --------------------------------------------------------------------------- sampling (BAPS)
_TAIL_MASS = 1e-250  # below this the CDF inversion cannot see the interval: exact rejection


def truncated_beta_sample(a, b, lo: float, hi: float, rng: np.random.Generator, size=None
                          ) -> np.ndarray:
    """Beta(a, b) restricted to [lo, hi], by inversion of the CDF (lower tail) or of the
    survival function (when [lo, hi] sits in the upper tail, where the CDF is ~1).

    When the interval's mass is not representable (< 1e-250: the interval lies far in a tail,
    e.g. a concentrated posterior and a narrow trim box) inversion would return an endpoint,
    often the wrong one; there we use exact rejection sampling from a linear upper bound of the
    log density on [lo, hi] (tangents of its concave terms, chords of its convex ones)."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    shape = a.shape if size is None else tuple(np.atleast_1d(size)) + a.shape
    cdf_lo, cdf_hi = special.betainc(a, b, lo), special.betainc(a, b, hi)
    sf_lo, sf_hi = special.betaincc(a, b, lo), special.betaincc(a, b, hi)
    u = rng.random(shape)
    upper = cdf_lo > 0.5
    with np.errstate(all="ignore"):
        by_cdf = special.betaincinv(a, b, cdf_lo + u * (cdf_hi - cdf_lo))
        by_sf = special.betainccinv(a, b, sf_hi + u * (sf_lo - sf_hi))
    out = np.where(upper, by_sf, by_cdf)
    mass = np.where(upper, sf_lo - sf_hi, cdf_hi - cdf_lo)
    tail = np.broadcast_to(~(mass > _TAIL_MASS), shape)
    if hi > lo and np.any(tail):
        out = np.array(out, dtype=float)
        out[tail] = _tail_rejection(np.broadcast_to(a, shape)[tail], np.broadcast_to(b, shape)[tail],
                                    np.broadcast_to(upper, shape)[tail], lo, hi, rng,
                                    out[tail])
    out = np.where(np.isfinite(out), out, (lo + hi) / 2)
    return np.clip(out, lo, hi)


def _beta_log_kernel(a, b, x):
    """(a - 1) ln x + (b - 1) ln(1 - x), the unnormalised Beta log density."""
    return special.xlogy(a - 1.0, x) + special.xlog1py(b - 1.0, -x)


def _tail_rejection(a: np.ndarray, b: np.ndarray, near_lo: np.ndarray, lo: float, hi: float,
                    rng: np.random.Generator, fallback: np.ndarray, max_rounds: int = 10_000
                    ) -> np.ndarray:
    """Exact draws of Beta(a, b) on [lo, hi] by rejection from exp(linear upper bound).

    g(x) = (a-1) ln x + (b-1) ln(1-x) is a sum of two terms, each concave (coefficient >= 0:
    bounded above by its tangent at the endpoint x_e nearer the mass) or convex (bounded above
    by its chord over [lo, hi]); the sum l(x) >= g(x) is linear, so the proposal is a truncated
    exponential and x is accepted with probability exp(g(x) - l(x)) <= 1. In a far tail the
    envelope is nearly tight (acceptance close to 1)."""
    xe = np.where(near_lo, lo, hi)
    width = hi - lo
    with np.errstate(all="ignore"):
        ca, cb = a - 1.0, b - 1.0
        # term 1: ca ln x ; term 2: cb ln(1 - x)
        s1 = np.where(ca >= 0, ca / xe, ca * (math.log(hi) - math.log(lo)) / width if lo > 0
                      else -np.inf)
        v1 = np.where(ca >= 0, special.xlogy(ca, xe),
                      special.xlogy(ca, lo) + s1 * (xe - lo))  # the bound's value at xe
        s2 = np.where(cb >= 0, -cb / (1.0 - xe),
                      cb * (math.log1p(-hi) - math.log1p(-lo)) / width if hi < 1 else np.inf)
        v2 = np.where(cb >= 0, special.xlog1py(cb, -xe),
                      special.xlog1py(cb, -lo) + s2 * (xe - lo))
        slope, base = s1 + s2, v1 + v2
    out = np.array(fallback, dtype=float)
    todo = np.isfinite(slope) & np.isfinite(base)
    for _ in range(max_rounds):
        idx = np.flatnonzero(todo)
        if idx.size == 0:
            break
        s, u = slope[idx], rng.random(idx.size)
        with np.errstate(all="ignore"):
            up = s > 0  # density increasing: mass near hi
            x = np.where(up, hi + np.log1p(-u * -np.expm1(-s * width)) / s,
                         lo + np.log1p(-u * -np.expm1(s * width)) / s)
            x = np.where(np.abs(s) * width < 1e-12, lo + u * width, x)
            x = np.clip(x, lo, hi)
            log_acc = _beta_log_kernel(a[idx], b[idx], x) - (base[idx] + s * (x - xe[idx]))
        ok = np.log(rng.random(idx.size)) < log_acc
        out[idx[ok]] = x[ok]
        todo[idx[ok]] = False
    return out


def truncated_beta_log_mass(a, b, lo: float, hi: float) -> np.ndarray:
    """ln P_{Beta(a,b)}([lo, hi]), accurate in both tails.

    Where the mass is below 1e-250 (not representable by the incomplete Beta function) it is
    computed in log space: -ln B(a, b) + g(x*) + ln int_lo^hi exp(g(x) - g(x*)) dx by quadrature,
    x* the maximiser of the log kernel g on [lo, hi]."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    mid = special.betainc(a, b, hi) - special.betainc(a, b, lo)
    alt = special.betaincc(a, b, lo) - special.betaincc(a, b, hi)
    mass = np.maximum(mid, alt)
    with np.errstate(divide="ignore"):
        out = np.array(np.log(mass), dtype=float)
    for i in np.ndindex(out.shape):
        if not mass[i] > _TAIL_MASS:
            out[i] = _log_mass_quadrature(float(a[i]), float(b[i]), lo, hi)
    return out


def _log_mass_quadrature(a: float, b: float, lo: float, hi: float) -> float:
    if not hi > lo:
        return -math.inf
    cands = [lo, hi]
    if a > 1 and b > 1:
        cands.append(min(max((a - 1) / (a + b - 2), lo), hi))
    gs = [float(_beta_log_kernel(a, b, x)) for x in cands]
    j = int(np.argmax(gs))
    xs, gs_max = cands[j], gs[j]
    if not math.isfinite(gs_max):
        return -math.inf
    # local scale of the peak: 1/|g'| at an endpoint, 1/sqrt|g''| at an interior mode
    d1 = abs((a - 1) / xs - (b - 1) / (1 - xs)) if 0 < xs < 1 else 0.0
    d2 = abs((a - 1) / xs ** 2 + (b - 1) / (1 - xs) ** 2) if 0 < xs < 1 else 0.0
    h = 1.0 / max(d1, math.sqrt(d2), 1.0 / (hi - lo))
    pts = sorted({min(max(xs + sgn * h * f, lo), hi) for f in (1, 10, 100, 1000) for sgn in (-1, 1)}
                 - {lo, hi})
    f = lambda x: math.exp(float(_beta_log_kernel(a, b, x)) - gs_max)  # noqa: E731
    val = integrate.quad(f, lo, hi, points=pts or None, limit=400, epsabs=0, epsrel=1e-10)[0]
    return -float(special.betaln(a, b)) + gs_max + math.log(val)


def sampler_trim(eps: float, n_nodes: int, n_samples: int) -> float:
    """w with 2 N L = eps for L = |I| ln((1 - w)/w), the Lipschitz constant (Assumption 1, rho =
    number of replaced rows) of a binary network whose CPT entries lie in [w, 1 - w]:
    w = 1 / (1 + exp(eps / (2 N |I|))), computed as expit(-x) (no overflow at large eps); where w
    underflows it is the smallest positive float, which is larger than the exact w (more private)."""
    w = float(special.expit(-eps / (2 * n_samples * n_nodes)))
    return w if w > 0.0 else math.ulp(0.0)


def network_lipschitz(n_nodes: int, trim: float) -> float:
    """L = |I| ln((1 - w)/w): sup over theta in [w, 1-w]^m and rows r, r' of |ln p(r) - ln p(r')|."""
    return n_nodes * math.log((1 - trim) / trim)


def sampling_mechanism(post_a: np.ndarray, post_b: np.ndarray, trim: float, n_samples: int,
                       rng: np.random.Generator) -> np.ndarray:
    """BAPS: n_samples draws of theta from the posterior truncated to [trim, 1 - trim]^m."""
    return truncated_beta_sample(post_a, post_b, trim, 1 - trim, rng, size=n_samples)


def map_exp_mechanism(prior_a: np.ndarray, prior_b: np.ndarray, da: np.ndarray, db: np.ndarray,
                      n_nodes: int, eps: float, trim: float, rng: np.random.Generator
                      ) -> tuple[np.ndarray, float]:
    """Algorithm 4.3.1 with utility u(D, theta) = ln p_theta(D) (the log posterior up to a
    theta-free shift, which the exponential mechanism ignores) on Theta = [trim, 1 - trim]^m,
    base measure the prior. Sensitivity Delta = |I| ln((1 - trim)/trim), so the output density
    is prior * p_theta(D)^kappa with kappa = eps / (2 Delta): independent truncated
    Beta(alpha + kappa Delta alpha, beta + kappa Delta beta). Returns (theta, kappa)."""
    kappa = eps / (2 * network_lipschitz(n_nodes, trim))
    theta = truncated_beta_sample(prior_a + kappa * da, prior_b + kappa * db, trim, 1 - trim, rng)
    return theta, kappa


# --------------------------------------------------------------------------- utility
def beta_kl(a1, b1, a2, b2) -> np.ndarray:
    """KL(Beta(a1, b1) || Beta(a2, b2)), closed form."""
    a1, b1, a2, b2 = (np.asarray(v, float) for v in (a1, b1, a2, b2))
    return (special.betaln(a2, b2) - special.betaln(a1, b1)
            + (a1 - a2) * special.digamma(a1) + (b1 - b2) * special.digamma(b1)
            + (a2 - a1 + b2 - b1) * special.digamma(a1 + b1))


def log_joint(net: BinaryNetwork, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """ln p_theta(x) for each row; theta of shape (m,) or (S, m) -> (n,) or (S, n)."""
    X = np.asarray(X)
    idx = parent_configs(net, X) + np.asarray(net.offsets)[None, :]
    th = np.asarray(theta, float)
    t = th[..., idx]  # (..., n, |I|)
    with np.errstate(divide="ignore"):
        lp = np.where(X == 1, np.log(t), np.log1p(-t))
    return lp.sum(axis=-1)


def predict_proba(net: BinaryNetwork, theta: np.ndarray, X: np.ndarray, target: int
                  ) -> np.ndarray:
    """P(X_target = 1 | other coordinates of each row).

    theta (m,): plug-in parameters (with posterior means this is the exact Bayesian predictive,
    since the posterior factorises and each row touches each theta_{i,j} at most once).
    theta (S, m): posterior samples; the joint probabilities are averaged over samples and then
    normalised (section 4.4.2)."""
    theta = np.asarray(theta, float)
    if theta.ndim == 2 and theta.shape[0] == 1:
        theta = theta[0]
    X1, X0 = np.array(X, copy=True), np.array(X, copy=True)
    X1[:, target], X0[:, target] = 1, 0
    l1, l0 = log_joint(net, theta, X1), log_joint(net, theta, X0)
    if l1.ndim == 2:
        l1, l0 = special.logsumexp(l1, axis=0), special.logsumexp(l0, axis=0)
    return special.expit(l1 - l0)


# --------------------------------------------------------------------------- linear regression
def synthetic_regression_data(n: int, d: int, sigma: float, rng: np.random.Generator
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic stand-in for the census data of section 4.4.3 (not shipped): rows x in the unit
    ball (x = z / max(1, |z|), z ~ N(0, I/d)), a true weight of norm 1, and
    y = clip(x.w + N(0, sigma^2), -1, 1), so |y| <= 1 and |x|_2 <= 1 as the derivation assumes."""
    Z = rng.normal(0.0, 1.0 / math.sqrt(d), size=(n, d))
    X = Z / np.maximum(1.0, np.linalg.norm(Z, axis=1))[:, None]
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    y = np.clip(X @ w + rng.normal(0.0, sigma, size=n), -1.0, 1.0)
    return X, y, w


def regression_posterior(X: np.ndarray, y: np.ndarray, b: float, sigma: float
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 4.4.1 (before truncation): mu_n = (X'X + sigma^2 b I)^{-1} X'y,
    Sigma_n = sigma^2 (X'X + sigma^2 b I)^{-1}, for the prior w ~ N(0, I/b)."""
    A = X.T @ X + sigma ** 2 * b * np.eye(X.shape[1])
    mu = np.linalg.solve(A, X.T @ y)
    cov = sigma ** 2 * np.linalg.inv(A)
    return mu, (cov + cov.T) / 2


def regression_lipschitz(radius: float, sigma: float) -> float:
    """Exact Lipschitz constant of one row's log-likelihood -(y - w.x)^2/(2 sigma^2) in (x, y)
    (Euclidean), over |x| <= 1, |y| <= 1 and |w| <= R: the gradient norm is
    |y - w.x| sqrt(1 + |w|^2) / sigma^2, largest at x = -w/|w|, y = 1: (1 + R) sqrt(1 + R^2)/sigma^2."""
    return (1 + radius) * math.sqrt(1 + radius ** 2) / sigma ** 2


def regression_lipschitz_thesis(radius: float, sigma: float, d: int) -> float:
    """Section 4.4.3's per-row bound (1 + 2|w|_1 + d|w|_2)/(2 sigma^2) at |w|_2 = R
    (|w|_1 <= sqrt(d) R); the thesis multiplies it by n once more, which we do not."""
    return (1 + 2 * math.sqrt(d) * radius + d * radius) / (2 * sigma ** 2)


def truncated_gaussian_ball_sample(mu: np.ndarray, cov: np.ndarray, radius: float, size: int,
                                   rng: np.random.Generator, rejection_budget: int = 20_000,
                                   burn_in: int = 300, thin: int = 5
                                   ) -> tuple[np.ndarray, float]:
    """Samples of N(mu, cov) restricted to {|w|_2 <= radius}.

    Exact rejection sampling while its acceptance rate allows (``rejection_budget`` proposals);
    otherwise elliptical slice sampling (Murray, Adams & MacKay 2010) with the ball indicator as
    likelihood, started inside the ball: a Markov chain whose invariant law is the truncated
    Gaussian. Returns the samples and the rejection-stage acceptance rate."""
    chol = np.linalg.cholesky(cov)
    d = len(mu)
    W = mu + rng.normal(size=(rejection_budget, d)) @ chol.T
    keep = W[np.linalg.norm(W, axis=1) <= radius]
    acceptance = len(keep) / rejection_budget
    if len(keep) >= size:
        return keep[:size], acceptance
    norm_mu = float(np.linalg.norm(mu))
    w = mu if norm_mu <= radius else mu * (0.999 * radius / norm_mu)
    out = []
    for step in range(burn_in + size * thin):
        nu = rng.normal(size=d) @ chol.T
        theta = rng.uniform(0.0, 2 * math.pi)
        lo, hi = theta - 2 * math.pi, theta
        while True:
            cand = (w - mu) * math.cos(theta) + nu * math.sin(theta) + mu
            if np.linalg.norm(cand) <= radius:
                w = cand
                break
            if theta < 0:
                lo = theta
            else:
                hi = theta
            theta = rng.uniform(lo, hi)
        if step >= burn_in and (step - burn_in) % thin == 0:
            out.append(w.copy())
    return np.array(out[:size]), acceptance
