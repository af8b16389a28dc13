"""Exact counts on finite graphs: spanning trees (matrix-tree theorem in exact integers) and
dimer coverings (perfect matchings), for seed 004, Zhang thesis, §6.3.

Spanning trees. tau(G) = det of the reduced Laplacian (Kirchhoff's matrix-tree theorem, §6.3.1).
:func:`spanning_tree_count` computes that determinant modulo several primes p < 2^31 (Gaussian
elimination in int64, only over the rows and columns that are nonzero, which is cheap after a
reverse Cuthill-McKee ordering makes the matrix banded), and joins the residues by the Chinese
remainder theorem. Enough primes are used for their product to exceed the Hadamard bound, so
the result is exact, not probabilistic. :func:`bareiss_determinant` is the fraction-free exact
elimination in Python integers, kept as an independent oracle for small matrices.

Dimers. :func:`count_perfect_matchings` is a frontier dynamic programme: vertices are taken in
a band-reducing order; the state is the set of later vertices already matched, so the cost is
about N * (number of frontier states), exact for any graph (planar or not) of small pathwidth.
Lemma 6.3.4 [Dong et al., 2013] gives M(L(G)) = 2^(m - n + 1) for 2-connected G with
Delta(G) <= 3 and m even; for C(G) = L(S(G)) with G cubic and 2-connected this is
M(C(G)) = 2^(m_G - n_G + 1) (:func:`clique_dimer_count_cubic`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from pipeline.kernels.graphs import Graph

# --------------------------------------------------------------------------- primes
_MR_BASES_32 = (2, 7, 61)  # deterministic Miller-Rabin below 4 759 123 141


def _is_prime_32(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES_32:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def primes_below(limit: int = 2**31):
    """Primes below ``limit``, descending (an endless supply for CRT)."""
    q = limit - 1
    while q > 2:
        if _is_prime_32(q):
            yield q
        q -= 1


# --------------------------------------------------------------------------- determinants
def bareiss_determinant(matrix) -> int:
    """Exact determinant of an integer matrix by fraction-free Bareiss elimination (Python ints)."""
    a = [[int(x) for x in row] for row in matrix]
    n = len(a)
    if n == 0:
        return 1
    sign, prev = 1, 1
    for k in range(n - 1):
        if a[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if a[i][k] != 0), None)
            if swap is None:
                return 0
            a[k], a[swap] = a[swap], a[k]
            sign = -sign
        akk = a[k][k]
        rowk = a[k]
        for i in range(k + 1, n):
            aik = a[i][k]
            rowi = a[i]
            for j in range(k + 1, n):
                rowi[j] = (rowi[j] * akk - aik * rowk[j]) // prev
        prev = akk
    return sign * a[n - 1][n - 1]


def _det_mod_p(m: np.ndarray, p: int) -> int:
    """det(m) mod p by Gaussian elimination over Z/p (row swaps only on a zero pivot).

    Works only on the nonzero rows/columns of each pivot step, so a banded matrix costs
    O(n * band^2) per prime.
    """
    a = m % p
    n = a.shape[0]
    det = 1
    for k in range(n):
        pivot = int(a[k, k])
        if pivot == 0:
            below = np.flatnonzero(a[k + 1:, k])
            if below.size == 0:
                return 0
            swap = k + 1 + int(below[0])
            a[[k, swap]] = a[[swap, k]]
            det = -det
            pivot = int(a[k, k])
        det = det * pivot % p
        if k == n - 1:
            break
        rows = k + 1 + np.flatnonzero(a[k + 1:, k])
        if rows.size == 0:
            continue
        cols = k + 1 + np.flatnonzero(a[k, k + 1:])
        factor = a[rows, k] * pow(pivot, p - 2, p) % p
        a[rows, k] = 0
        if cols.size:
            sub = a[np.ix_(rows, cols)]
            a[np.ix_(rows, cols)] = (sub - (factor[:, None] * a[k, cols][None, :]) % p) % p
    return det % p


def hadamard_log_bound(m: np.ndarray) -> float:
    """ln of the Hadamard bound prod_i ||row_i||_2 >= |det m|."""
    norms = np.sqrt(np.sum(m.astype(np.float64) ** 2, axis=1))
    if np.any(norms == 0):
        return -math.inf
    return float(np.sum(np.log(norms)))


def integer_determinant(m: np.ndarray) -> int:
    """Exact determinant of an integer matrix (entries < 2^31 in size) by modular elimination
    and CRT, with enough primes to pass twice the Hadamard bound (sign included)."""
    m = np.asarray(m, dtype=np.int64)
    if m.shape[0] == 0:
        return 1
    bound = hadamard_log_bound(m)
    if bound == -math.inf:
        return 0
    need = bound + math.log(2.0) + 1.0  # modulus must exceed 2 |det| to recover the sign
    residue, modulus, have = 0, 1, 0.0
    for p in primes_below():
        r = _det_mod_p(m, p)
        # CRT: x = residue (mod modulus), x = r (mod p)
        t = (r - residue) * pow(modulus, -1, p) % p
        residue += modulus * t
        modulus *= p
        have += math.log(p)
        if have > need:
            break
    return residue if residue <= modulus // 2 else residue - modulus


def band_order(graph: Graph) -> np.ndarray:
    """Reverse Cuthill-McKee order of the vertices (small bandwidth for lattices)."""
    return np.asarray(reverse_cuthill_mckee(graph.adjacency().tocsr(), symmetric_mode=True))


def spanning_tree_count(graph: Graph) -> int:
    """tau(G), exact: det of the reduced Laplacian (matrix-tree theorem) by modular CRT."""
    if graph.n <= 1:
        return 1
    order = band_order(graph)
    adj = graph.adjacency(dtype=np.int64).toarray()
    lap = (np.diag(adj.sum(axis=1)) - adj)[np.ix_(order, order)]
    return integer_determinant(lap[1:, 1:])


# --------------------------------------------------------------------------- dimers
def count_perfect_matchings(graph: Graph, max_states: int = 1 << 16,
                            order: np.ndarray | None = None,
                            max_work: int = 2_000_000) -> int | None:
    """Number of perfect matchings M(G), exact, by a frontier DP; None (too wide for this
    method) if a step needs more than ``max_states`` frontier states or the total number of
    state visits exceeds ``max_work``."""
    n = graph.n
    if n % 2:
        return 0
    if n == 0:
        return 1
    if order is None:
        order = band_order(graph)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    nbrs = graph.neighbours()
    later = [sorted(int(pos[w]) for w in nbrs[v] if pos[w] > pos[v]) for v in order.tolist()]
    states = {0: 1}  # bitmask over positions of later vertices already matched
    work = 0
    for t in range(n):
        work += len(states)
        if work > max_work:
            return None
        bit = 1 << t
        new: dict[int, int] = {}
        for mask, count in states.items():
            if mask & bit:
                key = mask ^ bit
                new[key] = new.get(key, 0) + count
            else:
                for w in later[t]:
                    wb = 1 << w
                    if not mask & wb:
                        key = mask | wb
                        new[key] = new.get(key, 0) + count
        if len(new) > max_states:
            return None
        states = new
        if not states:
            return 0
    return states.get(0, 0)


def brute_force_perfect_matchings(graph: Graph) -> int:
    """M(G) by plain recursion on the lowest unmatched vertex (tests only, tiny graphs)."""
    nbrs = [set(x.tolist()) for x in graph.neighbours()]

    def rec(free: frozenset) -> int:
        if not free:
            return 1
        v = min(free)
        rest = free - {v}
        return sum(rec(rest - {w}) for w in nbrs[v] if w in rest)

    return rec(frozenset(range(graph.n)))


def clique_dimer_count_cubic(n: int, m: int) -> int:
    """M(C(G)) = 2^(m - n + 1) for a 2-connected cubic G with n vertices, m edges
    (Lemma 6.3.4 applied to L(S(G)): S(G) has n + m vertices, 2m edges, max degree 3)."""
    return 2 ** (m - n + 1)
