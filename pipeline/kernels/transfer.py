"""Independent sets (Merrifield-Simmons index) by transfer operators on bitmask states.

Seed 004 (Zhang thesis), chapter 7. Three lattices:

- ``488``: the 4-8-8 lattice of section 7.2. A strip of width ``w`` (octagon rows) is swept
  column by column. Columns alternate Q, P, P, Q, P, P, Q, ... (Fig. 7.2): a Q column has ``2w``
  vertices in ``w`` vertical pairs (one edge per pair, |Q_m| = 3^m), a P column has ``w + 1``
  vertices (``w`` when the width is periodic) and no internal edge. Two P columns are joined
  by horizontal edges (condition (i), orthogonality); in 0-based labels the first vertex of
  Q pair ``k`` is adjacent to P vertex ``k`` and the second to P vertex ``k + 1`` (condition (ii);
  ``k + 1`` taken mod ``w`` for the cylinder of the B_n construction).
- ``square``: the grid graph (hard squares, Calkin & Wilf 1998).
- ``king``: the square lattice with both diagonals in every face.

Method. The triple-step matrix T_m = T_{m1} T_{m2} T_{m3} of section 7.2 has size 3^m; it is
never formed. Its nonzero spectrum and traces equal those of the P-space operator
``T_{m2} C`` with ``C = T_{m3} T_{m1}``, ``C(v, w) = phi(v | w)``, where ``phi(z)`` counts the
Q-column configurations compatible with the P set ``z`` (a product over Q pairs of
``1 + [z_k = 0] + [z_{k+1} = 0]``). Both factors are applied with subset-sum (zeta) transforms:

    (T_{m2} x)(w) = sum_{v subset of ~w} x(v)                 (zeta, then complement)
    (C x)(w)      = sum_{t superset of w} psi(t) sum_{v subset of t} x(v),   phi = superset-zeta(psi)

so one octagon column costs O(w 2^w) additions. Counts use exact Python integers (numpy
object arrays); eigenvalues use float64 with the same operators.

Boundaries (Theorem 7.2.1): with f, g, s the free, cylindrical and toroidal counts,
``f(m, n) = 1' T_m^n 1``, ``g(m, n) = tr(T_m^n) = 1' B_n^m 1`` and ``s(m, n) = tr(B_n^m)``.
Bounds (Theorem 7.2.2, after Calkin & Wilf): ``(lambda_{p+2q} / lambda_{2q})^(1/p) <= eta_cell
<= xi_{2k}^(1/(2k))`` with lambda the Perron roots of the free strips and xi of the periodic ones;
for the site lattices (square, king) the free widths are p+2q+1 and 2q+1 (see
:func:`entropy_bounds`).

Explicit graphs (:func:`lattice_graph`) and a generic memoised counter (:func:`brute_force_count`)
are the independent oracle for small sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

LATTICES = ("488", "square", "king")
VERTICES_PER_CELL = {"488": 4, "square": 1, "king": 1}


# --------------------------------------------------------------------------- bit transforms
def subset_zeta(a: np.ndarray, nbits: int) -> np.ndarray:
    """Return b with b[..., S] = sum over T subset of S of a[..., T] (last axis has 2^nbits)."""
    b = np.array(a, copy=True)
    lead = b.shape[:-1]
    for i in range(nbits):
        v = b.reshape(*lead, -1, 2, 1 << i)
        v[..., 1, :] += v[..., 0, :]
    return b


def superset_zeta(a: np.ndarray, nbits: int) -> np.ndarray:
    """Return b with b[..., S] = sum over T superset of S of a[..., T]."""
    b = np.array(a, copy=True)
    lead = b.shape[:-1]
    for i in range(nbits):
        v = b.reshape(*lead, -1, 2, 1 << i)
        v[..., 0, :] += v[..., 1, :]
    return b


def superset_mobius(a: np.ndarray, nbits: int) -> np.ndarray:
    """Inverse of :func:`superset_zeta`."""
    b = np.array(a, copy=True)
    lead = b.shape[:-1]
    for i in range(nbits):
        v = b.reshape(*lead, -1, 2, 1 << i)
        v[..., 0, :] -= v[..., 1, :]
    return b


def popcount(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    out = np.zeros_like(x)
    while np.any(x):
        out += x & 1
        x = x >> 1
    return out


def _as_exact(a) -> np.ndarray:
    """Object array of Python ints (exact arithmetic of any size)."""
    return np.array([int(v) for v in np.asarray(a).ravel()], dtype=object).reshape(np.shape(a))


def dihedral_orbits(nbits: int, states: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Representatives and sizes of the orbits of nbits-bit masks under cyclic rotations and the
    reversal of the bit order (the symmetries of a periodic strip). ``states`` restricts to a
    union of orbits (e.g. the valid rows)."""
    masks = np.arange(1 << nbits, dtype=np.int64) if states is None else np.asarray(states, np.int64)
    full = (1 << nbits) - 1
    rev = np.zeros_like(masks)
    for i in range(nbits):
        rev |= ((masks >> i) & 1) << (nbits - 1 - i)
    canon = masks.copy()
    for images in (masks, rev):
        cur = images
        for _ in range(nbits):
            cur = ((cur << 1) & full) | (cur >> (nbits - 1))
            canon = np.minimum(canon, cur)
    reps, sizes = np.unique(canon, return_counts=True)
    return reps, sizes


# --------------------------------------------------------------------------- 4-8-8 strips
@dataclass(frozen=True)
class Strip488:
    """A 4-8-8 strip of ``width`` octagon rows, free (T_m) or periodic across the strip (B_n)."""

    width: int
    periodic: bool = False

    def __post_init__(self):
        if self.width < 1:
            raise ValueError("width must be >= 1")

    @property
    def n_p(self) -> int:
        """Vertices in a P column: w + 1 (free, P_m) or w (periodic, P_{n-1})."""
        return self.width if self.periodic else self.width + 1

    @property
    def n_states(self) -> int:
        return 1 << self.n_p

    @property
    def full(self) -> int:
        return self.n_states - 1

    def pair_neighbours(self, k: int) -> tuple[int, int]:
        """P vertices adjacent to the first and second vertex of Q pair k (0-based)."""
        return k, (k + 1) % self.n_p if self.periodic else k + 1

    @cached_property
    def phi(self) -> np.ndarray:
        """phi(z) = #Q-column configurations compatible with the P set z (int64)."""
        z = np.arange(self.n_states, dtype=np.int64)
        out = np.ones(self.n_states, dtype=np.int64)
        for k in range(self.width):
            a, b = self.pair_neighbours(k)
            out *= 1 + ((z >> a) & 1 ^ 1) + ((z >> b) & 1 ^ 1)
        return out

    @cached_property
    def psi(self) -> np.ndarray:
        return superset_mobius(self.phi, self.n_p)

    @cached_property
    def complement(self) -> np.ndarray:
        return self.full ^ np.arange(self.n_states, dtype=np.int64)

    # operators on P space (last axis); exact for object arrays, float for float arrays
    def orth(self, x: np.ndarray) -> np.ndarray:
        """T_{m2}: (T x)(w) = sum over v disjoint from w of x(v)."""
        return subset_zeta(x, self.n_p)[..., self.complement]

    def gram(self, x: np.ndarray) -> np.ndarray:
        """C = T_{m3} T_{m1}: (C x)(w) = sum_v phi(v | w) x(v)."""
        psi = self.psi if x.dtype != object else _as_exact(self.psi)
        return superset_zeta(subset_zeta(x, self.n_p) * psi, self.n_p)

    def step(self, x: np.ndarray) -> np.ndarray:
        """One octagon column: x -> C T_{m2} x."""
        return self.gram(self.orth(x))

    # counts
    def free_counts(self, length: int) -> list[int]:
        """[1' T^n 1 for n = 1..length]: f(w, n) (free strip) or g(n, w) (periodic strip)."""
        phi = _as_exact(self.phi)
        x, out = phi, []
        for _ in range(length):
            y = self.orth(x)
            out.append(int(np.dot(phi, y)))  # phi' T2 (C T2)^{n-1} phi
            x = self.gram(y)
        return out

    def trace_counts(self, length: int) -> list[int]:
        """[tr(T^n) for n = 1..length] via tr((C T_{m2})^n) on P space, propagating basis vectors.

        For a periodic strip the operator commutes with rotations and the reflection of the P
        column, so <e_s, M^n e_s> is constant on orbits: one start vector per orbit, weighted by
        the orbit size (about 2w times fewer starts)."""
        if self.periodic:
            starts, weights = dihedral_orbits(self.n_p)
        else:
            starts, weights = np.arange(self.n_states), np.ones(self.n_states, dtype=np.int64)
        return _trace_sweep(self.step, self.n_states, starts, weights, length)

    # dense matrices (for the printed examples and the dense baseline)
    def q_states(self) -> np.ndarray:
        """Conflict masks N(u) over P vertices for every Q vector u, u in base 3 (digit k for pair k:
        0 = empty, 1 = first vertex, 2 = second vertex; pair 0 least significant)."""
        masks = np.zeros(3 ** self.width, dtype=np.int64)
        for u in range(3 ** self.width):
            d, mask = u, 0
            for k in range(self.width):
                d, digit = divmod(d, 3)
                if digit:
                    mask |= 1 << self.pair_neighbours(k)[digit - 1]
            masks[u] = mask
        return masks

    def dense_t1(self) -> np.ndarray:
        """T_{m1} (3^m x 2^{m+1}, 0/1): Q vector u and P vector v may be consecutive columns."""
        n = self.q_states()
        v = np.arange(self.n_states)
        return ((n[:, None] & v[None, :]) == 0).astype(np.int64)

    def dense_t2(self) -> np.ndarray:
        """T_{m2} (2^{m+1} square, 0/1): orthogonal P vectors."""
        v = np.arange(self.n_states)
        return ((v[:, None] & v[None, :]) == 0).astype(np.int64)

    def dense_transfer(self) -> np.ndarray:
        """T_m = T_{m1} T_{m2} T_{m1}^T (3^m square), int64."""
        t1 = self.dense_t1()
        return t1 @ self.dense_t2() @ t1.T

    # spectrum
    def perron_root(self, tol: float = 0.0) -> float:
        """Largest eigenvalue of T_m (or B_n), float64.

        ARPACK on the P-space operator C T_{m2} (size 2^{m+1}, same nonzero spectrum as T_m), then
        the Rayleigh quotient of the symmetric T_m at u = T_{m1} T_{m2} z, computed in P space:
        lambda = (C T2 z)' T2 (C T2 z) / (T2 z)' C (T2 z), accurate to second order in the
        eigenvector error."""
        ns = self.n_states

        def matvec(x):
            return self.step(np.asarray(x, dtype=np.float64).ravel())

        if ns <= 64:
            mat = np.column_stack([matvec(e) for e in np.eye(ns)])
            vals, vecs = np.linalg.eig(mat)
            i = int(np.argmax(vals.real))
            z = np.abs(vecs[:, i].real)
        else:
            from scipy.sparse.linalg import LinearOperator, eigs

            op = LinearOperator((ns, ns), matvec=matvec, dtype=np.float64)
            vals, vecs = eigs(op, k=1, which="LR", tol=tol, v0=np.ones(ns))
            z = np.abs(vecs[:, 0].real)
        z /= z.max()
        t2z = self.orth(z)
        ct2z = self.gram(t2z)
        return float(np.dot(ct2z, self.orth(ct2z)) / np.dot(t2z, self.gram(t2z)))


def _trace_sweep(step, n_states: int, starts: np.ndarray, weights: np.ndarray, length: int) -> list[int]:
    """[sum_i weights[i] <e_{s_i}, M^n e_{s_i}> for n = 1..length], exact (object arrays)."""
    x = np.zeros((starts.size, n_states), dtype=object)
    x[...] = 0
    rows = np.arange(starts.size)
    x[rows, starts] = 1
    out = []
    for _ in range(length):
        x = step(x)  # row i holds M^n e_{s_i}
        out.append(sum(int(w) * int(v) for w, v in zip(weights, x[rows, starts])))
    return out


def _symmetric_perron(matvec, dim: int, tol: float = 0.0) -> float:
    """Perron root of a symmetric nonnegative operator: Lanczos (ARPACK) then Rayleigh quotient."""
    if dim <= 600:
        mat = np.column_stack([matvec(e) for e in np.eye(dim)])
        return float(np.linalg.eigvalsh((mat + mat.T) / 2)[-1])
    from scipy.sparse.linalg import LinearOperator, eigsh

    op = LinearOperator((dim, dim), matvec=matvec, dtype=np.float64)
    vals, vecs = eigsh(op, k=1, which="LA", tol=tol, v0=np.ones(dim))
    v = np.abs(vecs[:, 0])
    return float(np.dot(v, matvec(v)) / np.dot(v, v))


# --------------------------------------------------------------------------- square and king strips
@dataclass(frozen=True)
class StripGrid:
    """A strip of the square (``king=False``) or king lattice of ``width`` sites, free or periodic
    across the strip; states are bitmasks of one row (2^width array, invalid rows weigh 0)."""

    width: int
    periodic: bool = False
    king: bool = False

    def __post_init__(self):
        if self.width < 1 or (self.periodic and self.width < 3):
            raise ValueError("width must be >= 1 (>= 3 when periodic)")

    @property
    def n_states(self) -> int:
        return 1 << self.width

    @property
    def full(self) -> int:
        return self.n_states - 1

    def _shift(self, s: np.ndarray, up: bool) -> np.ndarray:
        w, full = self.width, self.full
        if up:
            out = (s << 1) & full
            return out | (s >> (w - 1)) if self.periodic else out
        out = s >> 1
        return out | ((s & 1) << (w - 1)) if self.periodic else out

    @cached_property
    def valid(self) -> np.ndarray:
        """1 where the row set is independent within the row (path or cycle)."""
        s = np.arange(self.n_states, dtype=np.int64)
        return ((s & self._shift(s, True)) == 0).astype(np.int64)

    @cached_property
    def valid_states(self) -> np.ndarray:
        return np.flatnonzero(self.valid)

    @cached_property
    def forbidden_complement(self) -> np.ndarray:
        """~N(w): the sites of the next row allowed next to row set w."""
        s = np.arange(self.n_states, dtype=np.int64)
        nb = s | self._shift(s, True) | self._shift(s, False) if self.king else s
        return self.full ^ nb

    def step(self, x: np.ndarray) -> np.ndarray:
        """(T x)(w) = valid(w) sum over valid v with v & N(w) = 0 of x(v); x already 0 off valid rows."""
        valid = self.valid if x.dtype != object else _as_exact(self.valid)
        return subset_zeta(x, self.width)[..., self.forbidden_complement] * valid

    def free_counts(self, length: int) -> list[int]:
        """[1' T^{n-1} 1 for n = 1..length]: independent sets of width x n strips."""
        x, out = _as_exact(self.valid), []
        for i in range(length):
            if i:
                x = self.step(x)
            out.append(int(x.sum()))
        return out

    def trace_counts(self, length: int) -> list[int]:
        """[tr(T^n) for n = 1..length] (periodic along the length; n = 1, 2 give the loop / double-edge
        conventions of the transfer matrix, so callers use n >= 3). Periodic strips use one start
        per dihedral orbit of valid rows, weighted by the orbit size."""
        if self.periodic:
            starts, weights = dihedral_orbits(self.width, self.valid_states)
        else:
            starts = self.valid_states
            weights = np.ones(starts.size, dtype=np.int64)
        return _trace_sweep(self.step, self.n_states, starts, weights, length)

    def perron_root(self, tol: float = 0.0) -> float:
        """Largest eigenvalue of the (symmetric) row transfer matrix, float64."""
        idx = self.valid_states
        full_dim = self.n_states

        def matvec(y):
            x = np.zeros(full_dim)
            x[idx] = np.asarray(y, dtype=np.float64).ravel()
            return self.step(x)[idx]

        return _symmetric_perron(matvec, idx.size, tol)


# --------------------------------------------------------------------------- public API
def strip(lattice: str, width: int, periodic: bool = False):
    if lattice == "488":
        return Strip488(width, periodic)
    if lattice in ("square", "king"):
        return StripGrid(width, periodic, king=(lattice == "king"))
    raise ValueError(f"unknown lattice {lattice!r}; expected one of {LATTICES}")


def count(lattice: str, m: int, n: int, boundary: str = "free") -> tuple[int, str]:
    """Exact number of independent sets (empty set included) and a short method label.

    ``488``: m rows and n columns of octagons (G_{m,n}, H_{m,n}, S_{m,n}); ``square``/``king``: m x n
    sites. The cylinder is periodic along n, the torus along both.

    free: f(m, n) = 1' T_m^n 1, a vector sweep over a free strip of width m (the symmetry
    f(m, n) = f(n, m) is not used, so tests can check it); cylinder: g(m, n) = 1' B_n^m 1, a vector
    sweep of length m across the periodic width n; torus: s(m, n) = tr(B_n^m), all basis vectors
    of the periodic strip at once.
    """
    if boundary == "free":
        st = strip(lattice, m)
        return st.free_counts(n)[-1], f"zeta-transfer vector, width {m}"
    if boundary == "cylinder":
        st = strip(lattice, n, periodic=True)
        return st.free_counts(m)[-1], f"zeta-transfer vector, periodic width {n}"
    if boundary == "torus":
        st = strip(lattice, n, periodic=True)
        return st.trace_counts(m)[-1], f"zeta-transfer trace, periodic width {n}"
    raise ValueError(f"unknown boundary {boundary!r}")


# --------------------------------------------------------------------------- bounds
def entropy_bounds(lattice: str, p: int = 2, q: int = 3, k: int = 4) -> dict:
    """Theorem 7.2.2 (Calkin & Wilf 1998): lower = (lambda_{p+2q}/lambda_{2q})^(1/p) <= eta_cell
    <= upper = xi_{2k}^(1/(2k)).

    lambda_j is the Perron root of the free strip whose *j transfer steps span j unit cells*:
    for 488, 1' T_m^n 1 = f(m, n) counts n octagon columns, so lambda_j is T_j's root (the
    thesis's widths). For square and king, 1' T_m^{n-1} 1 counts n site columns, so the same
    argument (lambda_m^p >= 1'T^{p+2q}1 / 1'T^{2q}1 for symmetric T, and 1'T_m^j 1 = f(j+1, m))
    needs the strips of width p+2q+1 and 2q+1. With widths p+2q, 2q the "lower bound" for hard
    squares at (2, 3) is 1.50304814 > 1.5030480824753 and for king it exceeds the upper bound.
    xi_{2k} is the root of the strip periodic across 2k unit cells (tr T_m^{2k} >= lambda_m^{2k}).

    eta_cell is the growth per unit cell (octagon for 488, site for square/king); per vertex it
    is eta_cell^(1/vertices_per_cell) (4 for 488: 4mn + 2m + 2n vertices).
    """
    shift = 0 if lattice == "488" else 1
    w_big, w_small = p + 2 * q + shift, 2 * q + shift
    lam_big = strip(lattice, w_big).perron_root()
    lam_small = strip(lattice, w_small).perron_root()
    xi = strip(lattice, 2 * k, periodic=True).perron_root()
    lower = math.exp((math.log(lam_big) - math.log(lam_small)) / p)
    upper = math.exp(math.log(xi) / (2 * k))
    v = VERTICES_PER_CELL[lattice]
    return {"lambda_p_plus_2q": lam_big, "lambda_2q": lam_small, "xi_2k": xi,
            "width_p_plus_2q": w_big, "width_2q": w_small, "width_2k": 2 * k,
            "lower": lower, "upper": upper,
            "eta_lower": lower ** (1.0 / v), "eta_upper": upper ** (1.0 / v)}


# --------------------------------------------------------------------------- explicit graphs (oracle)
def graph_488(width: int, length: int, periodic_width: bool = False,
              periodic_length: bool = False):
    """Explicit 4-8-8 graph with ``width`` octagon rows and ``length`` octagon columns, built from the
    column description of section 7.2 (Q, P, P, Q, ... columns). ``periodic_length`` identifies the
    first and last Q columns (the cylinder of Theorem 7.2.1), ``periodic_width`` wraps each column
    (the B_n construction). Duplicate edges of tiny periodic sizes are merged."""
    from pipeline.kernels.graphs import from_edges

    st = Strip488(width, periodic_width)
    nq, npp = 2 * width, st.n_p
    n_qcols = length if periodic_length else length + 1
    block = nq + 2 * npp  # Q column j, then P columns (j, a), (j, b)

    def q(j, i):
        return (j % n_qcols) * block + i if periodic_length else j * block + i

    def pa(j, i):
        return j * block + nq + i

    def pb(j, i):
        return j * block + nq + npp + i

    n_vertices = n_qcols * nq + length * 2 * npp
    # relabel: the last Q column of a free strip sits at index length*block
    edges = []
    for j in range(n_qcols):
        for k in range(width):
            edges.append((q(j, 2 * k), q(j, 2 * k + 1)))
    for j in range(length):
        for i in range(npp):
            edges.append((pa(j, i), pb(j, i)))
        for k in range(width):
            a, b = st.pair_neighbours(k)
            edges += [(q(j, 2 * k), pa(j, a)), (q(j, 2 * k + 1), pa(j, b)),
                      (q(j + 1, 2 * k), pb(j, a)), (q(j + 1, 2 * k + 1), pb(j, b))]
    return from_edges(n_vertices, edges, f"488({width}x{length})")


def graph_grid(m: int, n: int, periodic_rows: bool = False, periodic_cols: bool = False,
               king: bool = False):
    """m x n square (or king) lattice, node (i, j) = i * n + j; a direction wraps only if periodic
    and its size is >= 3."""
    from pipeline.kernels.graphs import from_edges

    steps = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if king else [])
    edges = []
    for i in range(m):
        for j in range(n):
            for di, dj in steps:
                a, b = i + di, j + dj
                if not 0 <= a < m:
                    if not (periodic_rows and m >= 3):
                        continue
                    a %= m
                if not 0 <= b < n:
                    if not (periodic_cols and n >= 3):
                        continue
                    b %= n
                edges.append((i * n + j, a * n + b))
    return from_edges(m * n, edges, f"{'king' if king else 'grid'}({m}x{n})")


def lattice_graph(lattice: str, m: int, n: int, boundary: str = "free"):
    """The graph whose independent sets :func:`count` counts (cylinder periodic along n)."""
    per_n = boundary in ("cylinder", "torus")
    per_m = boundary == "torus"
    if lattice == "488":
        return graph_488(m, n, periodic_width=per_m, periodic_length=per_n)
    if lattice in ("square", "king"):
        return graph_grid(m, n, periodic_rows=per_m, periodic_cols=per_n, king=lattice == "king")
    raise ValueError(f"unknown lattice {lattice!r}")


def brute_force_count(graph) -> int:
    """Independent sets of any graph by exhaustive branching (v out, or v in and N[v] out), memoised
    on the remaining vertex set; vertices are taken in label order, so sweep-ordered labels keep
    the memo small. Independent of the transfer operators; the oracle for small sizes."""
    import sys

    closed = [1 << v for v in range(graph.n)]
    for u, v in graph.edges.tolist():
        closed[u] |= 1 << v
        closed[v] |= 1 << u
    memo: dict[int, int] = {0: 1}

    def rec(mask: int) -> int:
        hit = memo.get(mask)
        if hit is not None:
            return hit
        low = mask & -mask
        v = low.bit_length() - 1
        out = rec(mask ^ low) + rec(mask & ~closed[v])
        memo[mask] = out
        return out

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * graph.n + 100))
    try:
        return rec((1 << graph.n) - 1)
    finally:
        sys.setrecursionlimit(old)
