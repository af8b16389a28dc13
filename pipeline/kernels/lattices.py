"""Periodic lattices on L1 x L2 unit cells and clique insertion (seed 004, Zhang thesis, ch. 6).

A lattice is described once by its unit cell (:class:`PeriodicCell`): ``c`` vertices per cell
and a list of edges ``(u, v, d1, d2)`` joining vertex ``u`` of cell ``x`` to vertex ``v`` of
cell ``x + (d1, d2)``. The same description gives

- the finite graph on an ``L1 x L2`` array of cells (:func:`lattice_graph`), with
  ``boundary`` ``torus`` (both directions wrap), ``cylinder`` (direction 1 wraps, the seam
  edges of direction 2 are cut) or ``free`` (both seams cut). Cylinder and free lattices are
  spanning subgraphs of the torus, exactly as the thesis builds T^c, T^f, S^c, S^f (§6.2.1-6.2.2);
- the Bloch matrices used by :mod:`pipeline.kernels.spectra` for the Fourier path.

Vertex numbering (user contract): vertex ``u`` of cell ``(i, j)`` is ``(i * L2 + j) * c + u``.

Clique insertion C(G) (§6.1; C(G) = L(S(G))): every vertex v of degree r becomes a K_r with one
new vertex per edge-end at v, and every old edge {u, v} becomes an edge between the new vertex
of u and the new vertex of v that stand for it. :func:`clique_insert_cell` does this on the unit
cell (so C^k of a torus, cylinder or free lattice is built directly and stays periodic);
:func:`clique_insertion` does it on any explicit :class:`~pipeline.kernels.graphs.Graph`.
Cutting a seam edge of the torus of C^k(H) cuts exactly the inter-clique edge that descends from
a seam edge of H, which is the thesis's construction of the cylindrical and free lattices.

Base cells (Bloch symbols, theta = (x, y)):

- ``square``: 1 vertex, lambda = 2 cos x + 2 cos y;
- ``triangular``: 1 vertex, lambda = 2 (cos x + cos y + cos(x - y));
- ``hexagonal`` (honeycomb, brick-wall layout): 2 vertices A, B; A(x) ~ B(x), B(x - e1),
  B(x - e2); lambda = +-|1 + e^{ix} + e^{iy}|, |f|^2 = 3 + 2 cos x + 2 cos y + 2 cos(x - y)
  (the thesis writes cos(x + y); the two differ by y -> -y and give the same spectrum).

C(hexagonal) is the 3-12-12 lattice, C^2(hexagonal) the 3-6-24 lattice (§6.2.1, §6.2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.kernels.graphs import Graph, from_edges

BASES = ("hexagonal", "square", "triangular")
BOUNDARIES = ("torus", "cylinder", "free")
# Smallest L per base for which the torus is a simple graph (no loops, no double edges).
MIN_CELLS = {"hexagonal": 2, "square": 3, "triangular": 3}


@dataclass(frozen=True)
class PeriodicCell:
    """Unit cell of a periodic lattice: ``size`` vertices and edges ``(u, v, d1, d2)``."""

    name: str
    size: int
    edges: np.ndarray  # (E, 4) int64: u, v, d1, d2
    # Planar drawing of the infinite lattice (used only for the Kasteleyn dimer path): cell
    # (d1, d2) sits at d1 * basis[0] + d2 * basis[1]; vertex u of it at that point + positions[u].
    basis: np.ndarray | None = None      # (2, 2) float
    positions: np.ndarray | None = None  # (size, 2) float

    @property
    def degrees(self) -> np.ndarray:
        """Degree of each cell vertex in the infinite lattice (= on the torus)."""
        return np.bincount(self.edges[:, :2].ravel(), minlength=self.size)

    @property
    def degree(self) -> int:
        """The common degree r; raises if the lattice is not regular."""
        deg = self.degrees
        if not np.all(deg == deg[0]):
            raise ValueError(f"{self.name} is not regular (degrees {sorted(set(deg.tolist()))})")
        return int(deg[0])


def base_cell(base: str) -> PeriodicCell:
    """Unit cell of the hexagonal, square or triangular lattice."""
    tri = np.array([[1.0, 0.0], [0.5, np.sqrt(3.0) / 2]])  # triangular Bravais basis
    if base == "square":
        e = [(0, 0, 1, 0), (0, 0, 0, 1)]
        return PeriodicCell("square", 1, np.array(e, dtype=np.int64), np.eye(2), np.zeros((1, 2)))
    if base == "triangular":
        e = [(0, 0, 1, 0), (0, 0, 0, 1), (0, 0, 1, -1)]
        return PeriodicCell("triangular", 1, np.array(e, dtype=np.int64), tri, np.zeros((1, 2)))
    if base == "hexagonal":
        e = [(0, 1, 0, 0), (0, 1, -1, 0), (0, 1, 0, -1)]
        # A at 0, B at (a1 + a2) / 3: the three bonds of A have length 1/sqrt(3) (regular honeycomb)
        pos = np.array([[0.0, 0.0], (tri[0] + tri[1]) / 3])
        return PeriodicCell("hexagonal", 2, np.array(e, dtype=np.int64), tri, pos)
    raise ValueError(f"unknown base lattice {base!r}; expected one of {BASES}")


def clique_insert_cell(cell: PeriodicCell) -> PeriodicCell:
    """C(cell): each vertex of degree r becomes a K_r, one new vertex per edge-end (§6.1).

    New vertices are numbered by old vertex, then by edge index, then by end (the ``u`` end
    before the ``v`` end), so C^k of a cell is deterministic.
    """
    edges = cell.edges
    ends = [(int(edges[e, side]), e, side) for e in range(len(edges)) for side in (0, 1)]
    ends.sort()
    new_id = {(e, side): i for i, (_, e, side) in enumerate(ends)}
    new_edges = []
    by_vertex: dict[int, list[int]] = {}
    for i, (v, _, _) in enumerate(ends):
        by_vertex.setdefault(v, []).append(i)
    for members in by_vertex.values():  # the inserted clique, inside one cell
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                new_edges.append((members[a], members[b], 0, 0))
    for e, (_, _, d1, d2) in enumerate(edges.tolist()):  # the old edge, same offset
        new_edges.append((new_id[(e, 0)], new_id[(e, 1)], d1, d2))
    name = f"C({cell.name})" if cell.name else "C"
    positions = None
    if cell.positions is not None:  # new vertex a third of the way along its edge
        positions = np.empty((len(ends), 2))
        for i, (v, e, side) in enumerate(ends):
            u0, v0, d1, d2 = edges[e].tolist()
            shift = d1 * cell.basis[0] + d2 * cell.basis[1]
            here = cell.positions[v]
            there = cell.positions[v0] + shift if side == 0 else cell.positions[u0] - shift
            positions[i] = here + (there - here) / 3.0
    return PeriodicCell(name, len(ends), np.array(new_edges, dtype=np.int64), cell.basis,
                        positions)


def lattice_cell(base: str, insertions: int = 0) -> PeriodicCell:
    """Unit cell of C^k(base); ``insertions`` = k >= 0."""
    if insertions < 0:
        raise ValueError("insertions must be >= 0")
    cell = base_cell(base)
    for _ in range(insertions):
        cell = clique_insert_cell(cell)
    names = {("hexagonal", 1): "3-12-12", ("hexagonal", 2): "3-6-24",
             ("hexagonal", 3): "3-6-12-48"}
    label = names.get((base, insertions), base if insertions == 0 else f"C^{insertions}({base})")
    return PeriodicCell(label, cell.size, cell.edges, cell.basis, cell.positions)


def lattice_size(base: str, insertions: int, L1: int, L2: int) -> tuple[int, int]:
    """(vertices, edges) of the torus of C^k(base) on L1 x L2 cells, without building it."""
    cell = base_cell(base)
    r = cell.degree
    n = cell.size * L1 * L2 * r ** insertions
    return n, n * r // 2


def boundary_edge_count(base: str, insertions: int, L1: int, L2: int, boundary: str) -> int:
    """Number of edges after cutting the seams of ``boundary``."""
    cell = base_cell(base)
    e = cell.edges
    keep1 = L1 - np.abs(e[:, 2]) if boundary == "free" else np.full(len(e), L1)
    keep2 = L2 - np.abs(e[:, 3]) if boundary in ("cylinder", "free") else np.full(len(e), L2)
    base_edges = int(np.sum(keep1 * keep2))
    r = cell.degree
    # each insertion adds a K_r per vertex, keeps the old edges
    n_cells = cell.size * L1 * L2
    total = base_edges
    for j in range(insertions):
        total += n_cells * r ** j * r * (r - 1) // 2
    return total


def _bond_copies(cell: PeriodicCell, L1: int, L2: int, boundary: str):
    """For each bond (u, v, d1, d2) of the cell: the endpoints (a, b) of its copies in the
    L1 x L2 lattice (vertex ``(i * L2 + j) * c + u``), seam copies dropped for open sides."""
    c = cell.size
    i, j = np.meshgrid(np.arange(L1), np.arange(L2), indexing="ij")
    i, j = i.ravel(), j.ravel()
    for u, v, d1, d2 in cell.edges.tolist():
        ti, tj = i + d1, j + d2
        keep = np.ones(i.size, dtype=bool)
        if boundary == "free":
            keep &= (ti >= 0) & (ti < L1)
        if boundary in ("cylinder", "free"):
            keep &= (tj >= 0) & (tj < L2)
        a = (i[keep] * L2 + j[keep]) * c + u
        b = ((ti[keep] % L1) * L2 + tj[keep] % L2) * c + v
        yield a, b, (u, v, d1, d2)


def lattice_graph(cell: PeriodicCell, L1: int, L2: int, boundary: str = "torus") -> Graph:
    """The finite lattice on L1 x L2 cells (numbering ``(i * L2 + j) * c + u``).

    ``torus``: both directions periodic; ``cylinder``: direction 1 (L1) periodic, direction 2
    open; ``free``: both open. Raises if the torus would have loops or multiple edges.
    """
    if boundary not in BOUNDARIES:
        raise ValueError(f"unknown boundary {boundary!r}; expected one of {BOUNDARIES}")
    c = cell.size
    src, dst = [], []
    for a, b, _ in _bond_copies(cell, L1, L2, boundary):
        src.append(a)
        dst.append(b)
    s, t = np.concatenate(src), np.concatenate(dst)
    n = L1 * L2 * c
    if np.any(s == t):
        raise ValueError(f"{cell.name} on {L1}x{L2} cells has loops; increase L1, L2")
    g = from_edges(n, np.column_stack([s, t]),
                   f"{cell.name}[{L1}x{L2},{boundary}]", L1=L1, L2=L2, boundary=boundary,
                   cell_size=c)
    if g.m != s.size:
        raise ValueError(f"{cell.name} on {L1}x{L2} cells has multiple edges; increase L1, L2")
    return g


def lattice_rotation(cell: PeriodicCell, L1: int, L2: int, boundary: str) -> list[np.ndarray]:
    """Rotation system of :func:`lattice_graph` ``(cell, L1, L2, boundary)``: for each vertex, its
    neighbours in counterclockwise order of the bond directions of the cell's planar drawing.

    The order is local, so it is the same drawing for every boundary: for ``free`` it is a plane
    embedding, for ``cylinder`` an annulus embedding (still genus 0), for ``torus`` a torus one.
    Whether it is planar is for the caller to check (Euler's formula on its faces).
    """
    if cell.positions is None:
        raise ValueError(f"{cell.name} has no planar drawing")
    c = cell.size
    src, dst, ang = [], [], []
    for a, b, (u, v, d1, d2) in _bond_copies(cell, L1, L2, boundary):
        vec = cell.positions[v] + d1 * cell.basis[0] + d2 * cell.basis[1] - cell.positions[u]
        fwd, back = np.arctan2(vec[1], vec[0]), np.arctan2(-vec[1], -vec[0])
        src += [a, b]
        dst += [b, a]
        ang += [np.full(a.size, fwd), np.full(a.size, back)]
    s, t, th = np.concatenate(src), np.concatenate(dst), np.concatenate(ang)
    order = np.lexsort((th, s))
    s, t = s[order], t[order]
    cuts = np.searchsorted(s, np.arange(1, L1 * L2 * c))
    return np.split(t, cuts)


def build_lattice(base: str, insertions: int, L1: int, L2: int, boundary: str = "torus") -> Graph:
    """C^insertions(base) on L1 x L2 cells with the given boundary."""
    return lattice_graph(lattice_cell(base, insertions), L1, L2, boundary)


# --------------------------------------------------------------------------- explicit graphs
def clique_insertion(graph: Graph) -> Graph:
    """C(G) of an explicit graph: vertex v of degree d becomes K_d (§6.1, C(G) = L(S(G))).

    New vertex ``2e + s`` stands for end ``s`` (0: smaller endpoint, 1: larger) of edge ``e`` of
    ``graph.edges``; so C(G) has 2m vertices and the edge {2e, 2e+1} is the old edge e.
    Isolated vertices disappear (they have no edge-ends).
    """
    m = graph.m
    ends_vertex = graph.edges.ravel()  # end 2e+s sits at vertex edges[e, s]
    order = np.argsort(ends_vertex, kind="stable")
    sorted_vertex = ends_vertex[order]
    starts = np.flatnonzero(np.r_[True, sorted_vertex[1:] != sorted_vertex[:-1]])
    stops = np.r_[starts[1:], sorted_vertex.size]
    pairs = [np.column_stack([2 * np.arange(m), 2 * np.arange(m) + 1])]
    for a, b in zip(starts.tolist(), stops.tolist()):
        members = order[a:b]
        iu, ju = np.triu_indices(members.size, k=1)
        pairs.append(np.column_stack([members[iu], members[ju]]))
    return from_edges(2 * m, np.concatenate(pairs), f"C({graph.name})")


def iterated_clique_insertion(graph: Graph, k: int) -> Graph:
    """C^k(G)."""
    for _ in range(k):
        graph = clique_insertion(graph)
    return graph
