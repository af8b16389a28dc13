"""Graph families as edge lists and scipy.sparse matrices.

A :class:`Graph` is ``n`` vertices labelled ``0..n-1`` and an ``(m, 2)`` int array of
undirected edges ``u < v`` (no loops, no multi-edges). Node numbering is part of the
user contract:

- ``path_graph`` runs 0..n-1 in order; ``cycle_graph`` adds the edge (0, n-1);
- ``star_graph`` and ``complete_tree`` / ``bethe_ball`` have their centre or root at 0, and
  the rest numbered breadth-first;
- ``grid_graph`` is row-major: node (i, j) is ``i * cols + j``.

Random families take a ``numpy.random.Generator`` (experiments derive it from the task
seed) and are reproducible from it. networkx is used only where it is the better-tested
generator (random regular graphs) and for export.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations, product

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Graph:
    n: int
    edges: np.ndarray  # shape (m, 2), int64, each row u < v, rows sorted
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def m(self) -> int:
        return int(self.edges.shape[0])

    def adjacency(self, dtype=np.float64) -> sp.csr_matrix:
        """Symmetric 0/1 adjacency matrix (CSR)."""
        u, v = self.edges[:, 0], self.edges[:, 1]
        data = np.ones(2 * self.m, dtype=dtype)
        a = sp.coo_matrix((data, (np.concatenate([u, v]), np.concatenate([v, u]))),
                          shape=(self.n, self.n))
        return a.tocsr()

    def degrees(self) -> np.ndarray:
        return np.bincount(self.edges.ravel(), minlength=self.n)

    def laplacian(self, dtype=np.float64) -> sp.csr_matrix:
        a = self.adjacency(dtype)
        return (sp.diags(np.asarray(a.sum(axis=1)).ravel()) - a).tocsr()

    def neighbours(self) -> list[np.ndarray]:
        a = self.adjacency()
        return [a.indices[a.indptr[i]:a.indptr[i + 1]] for i in range(self.n)]

    def to_networkx(self):
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from(map(tuple, self.edges.tolist()))
        return g


def from_edges(n: int, edges, name: str = "", **meta) -> Graph:
    """Normalise an edge iterable into a :class:`Graph` (u < v, sorted, deduplicated)."""
    e = np.asarray(list(edges), dtype=np.int64).reshape(-1, 2)
    if e.size and (e.min() < 0 or e.max() >= n):
        raise ValueError("edge endpoint out of range")
    if e.size and np.any(e[:, 0] == e[:, 1]):
        raise ValueError("self-loops are not allowed")
    e = np.sort(e, axis=1)
    e = np.unique(e, axis=0) if e.size else e
    return Graph(n, e, name, dict(meta))


def from_networkx(g, name: str = "") -> Graph:
    nodes = sorted(g.nodes())
    index = {v: i for i, v in enumerate(nodes)}
    return from_edges(len(nodes), ((index[a], index[b]) for a, b in g.edges()), name)


# --------------------------------------------------------------------------- deterministic
def path_graph(n: int) -> Graph:
    return from_edges(n, ((i, i + 1) for i in range(n - 1)), f"path({n})")


def cycle_graph(n: int) -> Graph:
    if n < 3:
        raise ValueError("a cycle needs n >= 3")
    return from_edges(n, [(i, (i + 1) % n) for i in range(n)], f"cycle({n})")


def star_graph(n: int) -> Graph:
    """Centre 0 joined to leaves 1..n-1 (n vertices in all)."""
    return from_edges(n, ((0, i) for i in range(1, n)), f"star({n})")


def complete_graph(n: int) -> Graph:
    return from_edges(n, combinations(range(n), 2), f"complete({n})")


def grid_graph(rows: int, cols: int, periodic: bool = False) -> Graph:
    """rows x cols grid, row-major; ``periodic`` wraps both directions (needs size >= 3)."""
    def idx(i, j):
        return i * cols + j

    edges = []
    for i, j in product(range(rows), range(cols)):
        if j + 1 < cols or (periodic and cols >= 3):
            edges.append((idx(i, j), idx(i, (j + 1) % cols)))
        if i + 1 < rows or (periodic and rows >= 3):
            edges.append((idx(i, j), idx((i + 1) % rows, j)))
    return from_edges(rows * cols, edges, f"grid({rows}x{cols})")


def complete_tree(branching: int, depth: int) -> Graph:
    """Complete ``branching``-ary tree of the given depth; root 0, breadth-first labels."""
    edges, frontier, nxt = [], [0], 1
    for _ in range(depth):
        new = []
        for parent in frontier:
            for _ in range(branching):
                edges.append((parent, nxt))
                new.append(nxt)
                nxt += 1
        frontier = new
    return from_edges(nxt, edges, f"tree(b={branching},d={depth})")


def bethe_ball(degree: int, radius: int) -> Graph:
    """Ball of ``radius`` around the root of the ``degree``-regular (Bethe) tree.

    The root has ``degree`` children, every other internal node ``degree - 1``.
    Labels are breadth-first with the root at 0.
    """
    edges, frontier, nxt = [], [0], 1
    for level in range(radius):
        new = []
        for parent in frontier:
            for _ in range(degree if level == 0 else degree - 1):
                edges.append((parent, nxt))
                new.append(nxt)
                nxt += 1
        frontier = new
    return from_edges(nxt, edges, f"bethe(d={degree},r={radius})")


def petersen_graph() -> Graph:
    outer = [(i, (i + 1) % 5) for i in range(5)]
    spokes = [(i, i + 5) for i in range(5)]
    inner = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
    return from_edges(10, outer + spokes + inner, "petersen")


def hypercube_graph(d: int) -> Graph:
    """Q_d on {0,1}^d (vertex = integer bitmask), edges between Hamming neighbours."""
    n = 1 << d
    return from_edges(n, ((v, v ^ (1 << b)) for v in range(n) for b in range(d) if not v >> b & 1),
                      f"hypercube({d})")


def hamming_graph(u: int, v: int) -> Graph:
    """H(u, v): words of length u over an alphabet of v letters, adjacent when they differ in
    exactly one position. Vertex index is the base-v number of the word."""
    n = v ** u
    edges = []
    for x in range(n):
        for pos in range(u):
            place = v ** pos
            digit = (x // place) % v
            for other in range(digit + 1, v):
                edges.append((x, x + (other - digit) * place))
    return from_edges(n, edges, f"hamming({u},{v})")


# --------------------------------------------------------------------------- random
def erdos_renyi(n: int, p: float, rng: np.random.Generator) -> Graph:
    iu, ju = np.triu_indices(n, k=1)
    keep = rng.random(iu.size) < p
    return from_edges(n, np.column_stack([iu[keep], ju[keep]]), f"G({n},{p})")


def random_regular(n: int, degree: int, rng: np.random.Generator) -> Graph:
    """Uniform-ish random ``degree``-regular simple graph (networkx's pairing algorithm),
    seeded from ``rng`` so that the task seed fixes the graph."""
    import networkx as nx

    if (n * degree) % 2 or degree >= n:
        raise ValueError("random regular graph needs n*degree even and degree < n")
    g = nx.random_regular_graph(degree, n, seed=int(rng.integers(2**31)))
    return from_networkx(g, f"random_regular({n},{degree})")


def random_tree(n: int, rng: np.random.Generator) -> Graph:
    """Uniform random labelled tree on n vertices via a random Prüfer sequence."""
    if n <= 2:
        return path_graph(n)
    seq = rng.integers(0, n, size=n - 2)
    degree = np.ones(n, dtype=np.int64)
    np.add.at(degree, seq, 1)
    import heapq

    leaves = [i for i in range(n) if degree[i] == 1]
    heapq.heapify(leaves)
    edges = []
    for x in seq:
        leaf = heapq.heappop(leaves)
        edges.append((leaf, int(x)))
        degree[x] -= 1
        if degree[x] == 1:
            heapq.heappush(leaves, int(x))
    a, b = heapq.heappop(leaves), heapq.heappop(leaves)
    edges.append((a, b))
    return from_edges(n, edges, f"random_tree({n})")
