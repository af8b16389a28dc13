"""Independent sets on randomly triangulated grids G_{m,n}(p) (seed 004, chapter 8).

G_{m,n} has m rows and n columns of square cells, (m+1)(n+1) vertices. Every cell gets one
diagonal, independently: the alpha (north-east) diagonal with probability p, the beta
(north-west) one with probability 1 - p (Fig. 8.1).

A column of m + 1 vertices is a bitmask, bit y = the vertex at height y (y = 0 at the bottom).
Column states are the masks with no two consecutive ones: C_m, of size F_{m+3} with
F_1 = F_2 = 1 (the thesis writes F_{m+2}; see ERRATA). For a left column v and right column w
(v & w == 0), cell y (between heights y and y+1) conflicts under

    alpha (joins left y to right y+1):  bit y of  v & (w >> 1)
    beta  (joins left y+1 to right y):  bit y of (v >> 1) & w

so the expected transfer matrix (section 8.2) is
``T_m(p)[v, w] = [v & w = 0] [a & b = 0] (1 - p)^|a| p^|b|`` with a, b those two masks; this
reproduces the printed T_2(0.3) in the state order (empty, top, middle, bottom, top+bottom).
Theorem 8.3.1: f(m, n; p) = 1 T_m(p)^n 1'. Theorem 8.3.2: ln f / (mn) -> ln lambda_{m,1}(p) / m.
Reflection swaps alpha and beta, so f(m, n; p) = f(m, n; 1 - p).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def column_states(m: int) -> np.ndarray:
    """All (m+1)-bit masks without two consecutive ones, increasing (int64)."""
    s = np.arange(1 << (m + 1), dtype=np.int64)
    return s[(s & (s >> 1)) == 0]


_POPCOUNT_16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.int64)


def _popcount(x: np.ndarray) -> np.ndarray:
    """Bit counts of non-negative int64 masks (lookup on 16-bit chunks)."""
    x = np.asarray(x, dtype=np.int64)
    out = _POPCOUNT_16[x & 0xFFFF]
    x = x >> 16
    while np.any(x):
        out = out + _POPCOUNT_16[x & 0xFFFF]
        x = x >> 16
    return out


@lru_cache(maxsize=8)
def conflict_tables(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compatible, alpha, beta) over pairs of column states: compatible = no horizontal edge,
    alpha / beta = masks of cells whose alpha / beta diagonal would join two chosen vertices."""
    s = column_states(m)
    v, w = s[:, None], s[None, :]
    compatible = (v & w) == 0
    alpha = v & (w >> 1)
    beta = (v >> 1) & w
    return compatible, alpha, beta


@lru_cache(maxsize=2)
def expected_transfer_matrix(m: int, p: float) -> np.ndarray:
    """T_m(p) as a dense float64 matrix over :func:`column_states` (section 8.2); cached, read-only."""
    compatible, alpha, beta = conflict_tables(m)
    ok = compatible & ((alpha & beta) == 0)
    na, nb = _popcount(alpha), _popcount(beta)
    with np.errstate(divide="ignore"):
        out = np.where(ok, np.power(1.0 - p, na) * np.power(p, nb), 0.0)
    out.setflags(write=False)
    return out


def expected_transfer_matrix_scaled(m: int, p: Fraction) -> tuple[np.ndarray, int]:
    """(M, D) with T_m(p) = M / D exactly: M an object array of Python ints, D = den(p)^m.

    With p = a/b each cell contributes (b - a), a or b over b."""
    p = Fraction(p)
    a, b = p.numerator, p.denominator
    compatible, alpha, beta = conflict_tables(m)
    ok = compatible & ((alpha & beta) == 0)
    na, nb = _popcount(alpha), _popcount(beta)
    out = np.empty(ok.shape, dtype=object)
    for (i, j), good in np.ndenumerate(ok):
        out[i, j] = ((b - a) ** int(na[i, j]) * a ** int(nb[i, j]) * b ** (m - int(na[i, j]) - int(nb[i, j]))
                     if good else 0)
    return out, b ** m


def expected_count_exact(m: int, n: int, p) -> Fraction:
    """f(m, n; p) = 1 T_m(p)^n 1' as an exact rational (Theorem 8.3.1); p read as a decimal."""
    p = Fraction(str(p)) if isinstance(p, float) else Fraction(p)
    mat, den = expected_transfer_matrix_scaled(m, p)
    x = np.array([1] * mat.shape[0], dtype=object)
    for _ in range(n):
        x = x.dot(mat)
    return Fraction(int(x.sum()), den ** n)


def log_expected_count(m: int, n: int, p: float) -> float:
    """ln f(m, n; p) = ln 1'T^n 1, float64, renormalising the vector each step."""
    mat = expected_transfer_matrix(m, p)
    x = np.ones(mat.shape[0])
    log_scale = 0.0
    for _ in range(n):
        x = mat @ x  # row-major product; 1'T^n 1 is the same from either side
        s = x.sum()
        log_scale += math.log(s)
        x /= s
    return log_scale


def perron_root(m: int, p: float) -> float:
    """lambda_{m,1}(p): the Perron root of T_m(p) (Theorem 8.3.2), refined by power iteration."""
    mat = expected_transfer_matrix(m, p)
    if mat.shape[0] <= 60:
        vals, vecs = np.linalg.eig(mat)
        i = int(np.argmax(vals.real))
        lam, x = float(vals[i].real), np.abs(vecs[:, i].real)
    else:
        from scipy.sparse.linalg import eigs

        vals, vecs = eigs(mat, k=1, which="LR", tol=0, v0=np.ones(mat.shape[0]))
        lam, x = float(vals[0].real), np.abs(vecs[:, 0].real)
    # a few power steps: the Perron vector is positive, so the ratio brackets lambda
    # (Collatz-Wielandt) and converges at rate |lambda_2 / lambda_1| from an accurate start
    x /= x.sum()
    for _ in range(50):
        y = mat @ x
        ratios = y / x
        lo, hi = ratios.min(), ratios.max()
        x = y / y.sum()
        if hi - lo <= 4e-16 * hi:
            break
    return float(0.5 * (lo + hi)) if hi - lo < 1e-12 * hi else lam


def eigen_entropy(m: int, p: float) -> float:
    """eta_m(p) = ln lambda_{m,1}(p) / m."""
    return math.log(perron_root(m, p)) / m


def shannon_entropy(p: float) -> float:
    """H(p) = -p ln p - (1-p) ln(1-p) in nats (Fig. 8.4)."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -p * math.log(p) - (1.0 - p) * math.log1p(-p)


# --------------------------------------------------------------------------- samples
def sample_diagonals(m: int, n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) int64 masks: bit y of column j set when cell (y, j) has the alpha diagonal (prob p)."""
    bits = rng.random((n, m)) < p
    return (bits * (1 << np.arange(m, dtype=np.int64))).sum(axis=1).astype(np.int64)


def _sweep_column(x: np.ndarray, m: int, d: int) -> np.ndarray:
    """One column of a fixed triangulation, site by site (broken-line transfer).

    ``x[e, mask]``: slots 0..y-1 of ``mask`` hold the new column w, slots y..m the old column v, and
    ``e`` the old bit v_{y-1} (needed by the alpha diagonal of cell y-1). Placing w_y = 1 needs
    v_y = 0 (horizontal edge), w_{y-1} = 0 (vertical edge), e = 0 if cell y-1 is alpha, and
    v_{y+1} = 0 if cell y is beta. Cost O(m 2^m) per column instead of O(F_{m+3}^2)."""
    n_masks = 1 << (m + 1)
    for y in range(m + 1):
        low, high = 1 << y, n_masks >> (y + 1)
        cur = x.reshape(2, high, 2, low)
        both = cur[0] + cur[1]
        new = np.zeros_like(cur)
        new[0, :, 0, :] = both[:, 0, :]  # w_y = 0, v_y = 0
        new[1, :, 0, :] = both[:, 1, :]  # w_y = 0, v_y = 1 -> e' = 1
        place = cur[0, :, 0, :] if (y > 0 and (d >> (y - 1)) & 1) else both[:, 0, :]
        place = place.copy()
        if y > 0:  # w_{y-1} = 0
            place[:, low // 2:] = 0
        if y < m and not (d >> y) & 1:  # beta cell y: v_{y+1} = 0
            place[1::2, :] = 0
        new[0, :, 1, :] = place
        x = new.reshape(2, n_masks)
    return x


def _sample_sweep(m: int, diagonals: np.ndarray, exact: bool):
    valid = ((np.arange(1 << (m + 1)) & (np.arange(1 << (m + 1)) >> 1)) == 0)
    x = np.zeros((2, 1 << (m + 1)), dtype=object if exact else np.float64)
    x[...] = 0
    x[0, valid] = 1
    log_scale = 0.0
    for d in np.asarray(diagonals, dtype=np.int64):
        x = _sweep_column(x, m, int(d))
        x[0] += x[1]
        x[1] = 0
        if not exact:
            total = x[0].sum()
            log_scale += math.log(total)
            x /= total
    return x[0].sum(), log_scale


def log_count_sample(m: int, diagonals: np.ndarray) -> float:
    """ln #independent sets of one triangulated grid (float64, renormalised site-by-site sweep)."""
    total, log_scale = _sample_sweep(m, diagonals, exact=False)
    return log_scale + math.log(total)


def count_sample_exact(m: int, diagonals: np.ndarray) -> int:
    """Exact #independent sets of one triangulated grid (site-by-site sweep, Python ints)."""
    return int(_sample_sweep(m, diagonals, exact=True)[0])


def count_sample_dense(m: int, diagonals: np.ndarray) -> int:
    """Exact #independent sets by the per-column 0/1 transfer matrices T_m^{(i)} of section 8.2."""
    compatible, alpha, beta = conflict_tables(m)
    full = (1 << m) - 1
    x = np.array([1] * compatible.shape[0], dtype=object)
    for d in np.asarray(diagonals, dtype=np.int64):
        ok = compatible & ((alpha & d) == 0) & ((beta & (full ^ d)) == 0)
        x = x.dot(ok.astype(np.int64).astype(object))
    return int(x.sum())


def triangulated_graph(m: int, n: int, diagonals: np.ndarray):
    """Explicit G_{m,n} with the given diagonals; vertex (x, y) = x * (m + 1) + y."""
    from pipeline.kernels.graphs import from_edges

    def vid(x, y):
        return x * (m + 1) + y

    edges = []
    for x in range(n + 1):
        for y in range(m + 1):
            if y < m:
                edges.append((vid(x, y), vid(x, y + 1)))
            if x < n:
                edges.append((vid(x, y), vid(x + 1, y)))
    for x in range(n):
        d = int(diagonals[x])
        for y in range(m):
            if (d >> y) & 1:
                edges.append((vid(x, y), vid(x + 1, y + 1)))  # alpha, north-east
            else:
                edges.append((vid(x, y + 1), vid(x + 1, y)))  # beta, north-west
    return from_edges((m + 1) * (n + 1), edges, f"triangulated({m}x{n})")
