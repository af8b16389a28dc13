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
For plane graphs (free and cylinder lattices of the hexagonal, square and triangular lattices and
of C^k(hexagonal); C^k of the square and triangular lattices, k >= 1, are not planar, since each
inserted K_4 / K_6 has the rest of the lattice attached to all its vertices),
:func:`kasteleyn_matrix` builds a Kasteleyn orientation from a rotation system, and M(G) = |Pf K|:
exactly via :func:`pfaffian_abs` (det K by the same modular CRT, then an exact integer square
root) or as a float logarithm via :func:`pfaffian_log_abs` (sparse LU), which has no width limit.
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


# --------------------------------------------------------------------------- Kasteleyn / Pfaffian
def kasteleyn_matrix(graph: Graph, rotation: list[np.ndarray]) -> sp.csr_matrix | None:
    """Kasteleyn matrix of a connected plane graph, or None if ``rotation`` is not planar.

    ``rotation[v]`` lists the neighbours of v in counterclockwise order (a rotation system).
    Faces are traced as dart orbits (after u -> v, leave v by the neighbour just clockwise of u),
    which runs every face counterclockwise as seen from inside; the embedding is planar iff
    V - E + F = 2. Edges of a spanning tree are oriented low -> high; each remaining edge is
    dual to an edge of a spanning tree of the faces, and is oriented, leaves of that dual tree
    first, so that every face but the root one has an odd number of edges running clockwise
    (against the trace) -- Kasteleyn's condition, under which |Pf K| = M(G). A bridge is walked
    twice by the same face, once each way, so it counts once whatever its orientation.
    """
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n = graph.n
    deg = np.array([len(r) for r in rotation], dtype=np.int64)
    if n == 0 or deg.sum() != 2 * graph.m:
        raise ValueError("rotation system does not match the graph")
    ptr = np.r_[0, np.cumsum(deg)]
    src = np.repeat(np.arange(n), deg)
    dst = np.concatenate(rotation).astype(np.int64)
    key = src * n + dst
    by_key = np.argsort(key)
    rev = by_key[np.searchsorted(key[by_key], dst * n + src)]
    if not np.array_equal(key[rev], dst * n + src):
        raise ValueError("rotation system is not symmetric")
    adj = graph.adjacency().tocsr()
    if connected_components(adj, directed=False)[0] != 1:
        return None
    k = rev - ptr[dst]                       # place of u in the rotation at v, for dart u -> v
    nxt = ptr[dst] + (k - 1) % deg[dst]
    face = np.full(src.size, -1, dtype=np.int64)
    n_faces = 0
    for d0 in range(src.size):
        if face[d0] >= 0:
            continue
        d = d0
        while face[d] < 0:
            face[d] = n_faces
            d = nxt[d]
        n_faces += 1
    if n - graph.m + n_faces != 2:
        return None
    # edge id of each dart (edges as in graph.edges: u < v, sorted)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    ekey = graph.edges[:, 0] * n + graph.edges[:, 1]
    edge = np.searchsorted(ekey, lo * n + hi)
    forward = src < dst                      # dart runs along u -> v of its edge (u < v)
    # spanning tree: BFS predecessors
    _, pred = breadth_first_order(adj, 0, directed=False, return_predecessors=True)
    child = np.flatnonzero(pred >= 0)
    tkey = np.minimum(child, pred[child]) * n + np.maximum(child, pred[child])
    in_tree = np.zeros(graph.m, dtype=bool)
    in_tree[np.searchsorted(ekey, tkey)] = True
    orient = np.zeros(graph.m, dtype=np.int64)  # +1: u -> v, -1: v -> u, 0: not yet
    orient[in_tree] = 1
    # dual spanning tree over the non-tree edges, BFS from face 0
    co = np.flatnonzero(~in_tree[edge] & forward)   # one dart per non-tree edge
    fa, fb, ce = face[co], face[rev[co]], edge[co]
    dual = sp.coo_matrix((np.ones(2 * co.size), (np.r_[fa, fb], np.r_[fb, fa])),
                         shape=(n_faces, n_faces)).tocsr()
    order, dpred = breadth_first_order(dual, 0, directed=False, return_predecessors=True)
    if order.size != n_faces:
        raise ValueError("dual of the complement of a spanning tree is not connected")
    pair_edge = {}
    for a, b, e in zip(fa.tolist(), fb.tolist(), ce.tolist()):
        pair_edge.setdefault((a, b), e)
        pair_edge.setdefault((b, a), e)
    darts_of = np.argsort(face, kind="stable")
    starts = np.searchsorted(face[darts_of], np.arange(n_faces + 1))
    for f in order[:0:-1].tolist():          # leaves first, root face skipped
        darts = darts_of[starts[f]:starts[f + 1]]
        pe = pair_edge[(f, int(dpred[f]))]
        clockwise, mine = 0, None
        for d in darts.tolist():
            e = edge[d]
            if e == pe:
                mine = d
                continue
            if orient[e] == 0:
                raise AssertionError("Kasteleyn: face with two unset edges")
            clockwise += (orient[e] == 1) != bool(forward[d])
        # set pe so that the face gets an odd number of clockwise edges
        want_clockwise = clockwise % 2 == 0
        orient[pe] = (1 if not forward[mine] else -1) if want_clockwise else \
            (1 if forward[mine] else -1)
    if np.any(orient == 0):
        raise AssertionError("Kasteleyn: edge left unoriented")
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    return sp.coo_matrix((np.r_[orient, -orient], (np.r_[u, v], np.r_[v, u])),
                         shape=(n, n)).tocsr()


def pfaffian_abs(K: sp.spmatrix, order: np.ndarray | None = None) -> int:
    """|Pf K| of an integer skew-symmetric matrix, exactly: det K by modular elimination and CRT
    (Hadamard bound, so not probabilistic), then the integer square root, checked to be exact."""
    if K.shape[0] % 2:
        return 0
    if order is None:
        order = np.asarray(reverse_cuthill_mckee(sp.csr_matrix(K), symmetric_mode=True))
    K = sp.csr_matrix(K)[order][:, order]
    det = integer_determinant(K.toarray().astype(np.int64))
    root = math.isqrt(det) if det >= 0 else -1
    if root * root != det:
        raise AssertionError(f"det of a skew-symmetric matrix is not a square: {det}")
    return root


def pfaffian_log_abs(K: sp.spmatrix) -> float:
    """ln |Pf K| = (1/2) ln |det K| by sparse LU (float); -inf if K is singular."""
    from scipy.sparse.linalg import splu

    if K.shape[0] % 2:
        return -math.inf
    try:
        lu = splu(sp.csc_matrix(K, dtype=np.float64), permc_spec="COLAMD")
    except RuntimeError:  # exactly singular
        return -math.inf
    d = np.abs(lu.U.diagonal())
    if np.any(d == 0):
        return -math.inf
    return 0.5 * float(np.sum(np.log(d)))


def kasteleyn_dimer_count(graph: Graph, rotation: list[np.ndarray]) -> int | None:
    """M(G) exactly as |Pf K| of a Kasteleyn matrix; None if ``rotation`` is not planar."""
    if graph.n % 2:
        return 0
    K = kasteleyn_matrix(graph, rotation)
    return None if K is None else pfaffian_abs(K, band_order(graph))


def kasteleyn_log_dimers(graph: Graph, rotation: list[np.ndarray]) -> float | None:
    """ln M(G) = ln |Pf K| by sparse LU; -inf if no perfect matching, None if not planar."""
    if graph.n % 2:
        return -math.inf
    K = kasteleyn_matrix(graph, rotation)
    return None if K is None else pfaffian_log_abs(K)
