"""Finite mechanisms on graphs of datasets: DP, VDP, influence, and min-entropy leakage.

One kernel for two seeds:

- seed 003 (D'Oliveira, Salamatian, Médard, Sadeghi, "Low influence, utility, and
  independence in differential privacy"): a mechanism M : D -> V on a finite set of datasets
  D whose neighbour relation is a graph. An *independent* mechanism is a row-stochastic
  |D| x |V| matrix (Definition 3); a *joint* mechanism is a probability distribution over
  functions h : D -> V (Definition 4, Proposition 2), stored sparsely as its support.
- seed 004 (Zhang thesis, chapter 5): a channel M : A -> A on the same kind of graph, its
  utility trace(M)/|A| under a uniform prior, min-entropy leakage, and the automorphism
  symmetrisation of Lemma 5.3.2.

Conventions: datasets are the graph's vertices 0..|D|-1; output values are 0..|V|-1;
``edges`` is an (m, 2) int array of undirected edges; "lambda" is e^eps. All LPs use
scipy's HiGHS with scipy.sparse constraint matrices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components, shortest_path

from pipeline.kernels import graphs as G

ZERO_TOL = 1e-12  # probabilities below this (LP noise) count as zero


# =========================================================================== graphs
def dataset_graph(name: str, n: int = 4, u: int = 3, v: int = 3, degree: int = 3,
                  rng: np.random.Generator | None = None) -> G.Graph:
    """The dataset graph (D, ~) of a family name: K2, path(n), cycle(n), complete(n),
    star(n) (n vertices: centre 0 and n-1 leaves), hypercube(u) = F_2^u, hamming(u, v) =
    H(u, v) (u individuals with v values each), petersen, random_regular(n, degree)."""
    if name == "K2":
        return G.complete_graph(2)
    if name == "path":
        return G.path_graph(n)
    if name == "cycle":
        return G.cycle_graph(n)
    if name == "complete":
        return G.complete_graph(n)
    if name == "star":
        return G.star_graph(n)
    if name == "hypercube":
        return G.hypercube_graph(u)
    if name == "hamming":
        return G.hamming_graph(u, v)
    if name == "petersen":
        return G.petersen_graph()
    if name == "random_regular":
        if rng is None:
            raise ValueError("random_regular needs an rng")
        return G.random_regular(n, degree, rng)
    raise ValueError(f"unknown graph family {name!r}")


def dataset_count(name: str, n: int = 4, u: int = 3, v: int = 3) -> int:
    """|D| of a family without building it."""
    return {"K2": 2, "petersen": 10, "hypercube": 2 ** u, "hamming": v ** u}.get(name, n)


def ordered_edges(edges: np.ndarray) -> np.ndarray:
    """Both orientations (d, d') of every undirected edge, shape (2m, 2)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return np.concatenate([edges, edges[:, ::-1]])


def distance_matrix(graph: G.Graph) -> np.ndarray:
    """All-pairs graph distance (int; -1 when unreachable), by BFS (scipy csgraph)."""
    d = shortest_path(graph.adjacency(), method="D", unweighted=True)
    out = np.where(np.isinf(d), -1, d).astype(np.int64)
    return out


def distance_matrix_row(graph: G.Graph, root: int = 0) -> np.ndarray:
    """Graph distances from one vertex (int; -1 when unreachable)."""
    d = shortest_path(graph.adjacency(), method="D", unweighted=True, indices=[root])[0]
    return np.where(np.isinf(d), -1, d).astype(np.int64)


def border_profile(dist_row: np.ndarray) -> np.ndarray:
    """|Border_d(a)| for d = 0..ecc(a) (thesis Definition 5.2.4), from one distance row."""
    return np.bincount(dist_row[dist_row >= 0])


def reference_query(dist_from_root: np.ndarray, k: int) -> np.ndarray:
    """The query f : D -> {0..k-1} used by the marginal mechanisms:
    f(d) = floor(k * dist(d0, d) / (ecc(d0) + 1)), d0 = vertex 0.

    On K2 it is the identity (the voting example, seed 003 Sec. I); on a path it is the
    count quantised to k levels; on the hypercube with k = 2 and odd dimension it is the
    majority vote. It is 1-Lipschitz on the graph whenever k <= ecc(d0) + 1."""
    ecc = int(dist_from_root.max())
    return (k * dist_from_root) // (ecc + 1)


# =========================================================================== automorphisms
def _perm(arr) -> np.ndarray:
    return np.asarray(arr, dtype=np.int64)


def hamming_generators(u: int, v: int) -> list[np.ndarray]:
    """Generators of Aut H(u, v) = S_v wr S_u on base-v word indices: swap/rotate the
    coordinates, and swap/rotate the letters of coordinate 0."""
    n = v ** u
    idx = np.arange(n)
    digits = np.stack([(idx // v ** p) % v for p in range(u)], axis=1)  # (n, u)
    place = v ** np.arange(u)

    def from_digits(dg):
        return dg @ place

    gens = []
    if u >= 2:
        sw = digits.copy()
        sw[:, [0, 1]] = sw[:, [1, 0]]
        gens.append(from_digits(sw))
        gens.append(from_digits(np.roll(digits, 1, axis=1)))
    letter_swap = digits.copy()
    letter_swap[:, 0] = np.where(digits[:, 0] == 0, 1, np.where(digits[:, 0] == 1, 0, digits[:, 0]))
    gens.append(from_digits(letter_swap))
    if v >= 3:
        rot = digits.copy()
        rot[:, 0] = (digits[:, 0] + 1) % v
        gens.append(from_digits(rot))
    return [_perm(g) for g in gens]


def networkx_automorphisms(graph: G.Graph, limit: int = 100_000) -> list[np.ndarray]:
    """Every automorphism of a small graph (networkx VF2), at most ``limit``."""
    from networkx.algorithms.isomorphism import GraphMatcher

    g = graph.to_networkx()
    out = []
    for mapping in GraphMatcher(g, g).isomorphisms_iter():
        out.append(_perm([mapping[i] for i in range(graph.n)]))
        if len(out) > limit:
            raise ValueError(f"more than {limit} automorphisms")
    return out


def automorphism_generators(name: str, graph: G.Graph, u: int = 3, v: int = 3) -> list[np.ndarray]:
    """Generators of the full automorphism group of a named family (analytic where known,
    networkx VF2 enumeration for Petersen and random regular graphs)."""
    n = graph.n
    idx = np.arange(n)
    if name == "K2" or n == 2:
        return [_perm([1, 0])]
    if name == "path":
        return [_perm(n - 1 - idx)]
    if name == "cycle":
        return [_perm((idx + 1) % n), _perm((-idx) % n)]
    if name == "complete":
        swap = idx.copy()
        swap[[0, 1]] = [1, 0]
        return [_perm(swap), _perm((idx + 1) % n)]
    if name == "star":
        gens = []
        leaves = idx[1:]
        if n >= 3:
            rot = idx.copy()
            rot[1:] = np.roll(leaves, 1)
            gens.append(_perm(rot))
        if n >= 4:
            swap = idx.copy()
            swap[[1, 2]] = [2, 1]
            gens.append(_perm(swap))
        return gens or [_perm(idx)]
    if name == "hypercube":
        return hamming_generators(u, 2)
    if name == "hamming":
        return hamming_generators(u, v)
    return networkx_automorphisms(graph)


def group_closure(generators: list[np.ndarray], limit: int = 50_000) -> list[np.ndarray]:
    """All elements of the permutation group generated by ``generators`` (BFS closure)."""
    n = len(generators[0])
    identity = tuple(range(n))
    seen = {identity}
    frontier = [np.arange(n)]
    elements = [np.arange(n)]
    while frontier:
        nxt = []
        for g in frontier:
            for s in generators:
                h = s[g]
                key = tuple(h.tolist())
                if key not in seen:
                    seen.add(key)
                    elements.append(h)
                    nxt.append(h)
                    if len(elements) > limit:
                        raise ValueError(f"group has more than {limit} elements")
        frontier = nxt
    return elements


def vertex_orbits(n: int, generators: list[np.ndarray]) -> np.ndarray:
    """Orbit label of each vertex under the group generated by ``generators``."""
    rows = np.concatenate([np.arange(n)] * len(generators)) if generators else np.arange(0)
    cols = np.concatenate(generators) if generators else np.arange(0)
    a = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return connected_components(a, directed=False)[1]


def orbitals(n: int, generators: list[np.ndarray]) -> np.ndarray:
    """Orbit label of each ordered pair (h, k), flattened as h*n + k, under the diagonal
    action g(h, k) = (g(h), g(k)) (the orbits that index an orbit-reduced channel)."""
    pairs = np.arange(n * n)
    h, k = pairs // n, pairs % n
    rows = np.concatenate([pairs] * len(generators))
    cols = np.concatenate([g[h] * n + g[k] for g in generators])
    a = sp.coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n * n, n * n))
    return connected_components(a, directed=False)[1]


def is_vertex_transitive(graph: G.Graph, generators: list[np.ndarray] | None = None,
                         dist: np.ndarray | None = None) -> bool:
    """True when Aut(graph) acts transitively. With generators of the full group the answer
    is the number of vertex orbits; otherwise compare distance profiles (a necessary
    condition) and then test rooted isomorphisms with networkx."""
    if generators is not None:
        return bool(vertex_orbits(graph.n, generators).max() == 0)
    dist = distance_matrix(graph) if dist is None else dist
    profiles = {tuple(border_profile(r)) for r in dist}
    if len(profiles) > 1:
        return False
    import networkx as nx

    g = graph.to_networkx()
    for target in range(1, graph.n):
        g1, g2 = g.copy(), g.copy()
        nx.set_node_attributes(g1, {i: i == 0 for i in g1}, "root")
        nx.set_node_attributes(g2, {i: i == target for i in g2}, "root")
        if not nx.is_isomorphic(g1, g2, node_match=lambda a, b: a["root"] == b["root"]):
            return False
    return True


# =========================================================================== independent mechanisms
def randomized_response(f: np.ndarray, k: int, eps: float) -> np.ndarray:
    """k-ary randomized response on the query f: Pr[M(d) = f(d)] = e^eps/(e^eps + k - 1),
    every other value 1/(e^eps + k - 1). k = 2 is the binary coin of the voting example."""
    f = np.asarray(f)
    other = 1.0 / (math.exp(eps) + k - 1)
    truth = 1.0 - (k - 1) * other
    m = np.full((f.size, k), other)
    m[np.arange(f.size), f] = truth
    return m


def truncated_geometric(f: np.ndarray, k: int, eps: float) -> np.ndarray:
    """Truncated (range-restricted) geometric mechanism on {0..k-1} (Ghosh, Roughgarden and
    Sundararajan; seed 003 refs [14]-[16]): Pr[M(d) = v] proportional to a^|v - f(d)|,
    a = e^-eps, with the two tails folded onto 0 and k-1:
    interior (1-a)/(1+a) a^|v-f|, end points a^|v-f|/(1+a)."""
    f = np.asarray(f)
    a = math.exp(-eps)
    vals = np.arange(k)
    power = np.abs(vals[None, :] - f[:, None]).astype(float)
    m = (1 - a) / (1 + a) * a ** power
    if k == 1:
        return np.ones((f.size, 1))
    m[:, 0] = a ** power[:, 0] / (1 + a)
    m[:, -1] = a ** power[:, -1] / (1 + a)
    return m


def dirichlet_rows(n_datasets: int, k: int, rng: np.random.Generator,
                   concentration: float = 1.0) -> np.ndarray:
    """A random independent mechanism: each row drawn from Dirichlet(concentration * 1_k)."""
    return rng.dirichlet(np.full(k, concentration), size=n_datasets)


# =========================================================================== joint mechanisms
@dataclass
class JointMechanism:
    """A distribution over functions h : D -> V (seed 003, Proposition 2), stored by its
    support: ``functions[s]`` is the vector (h(d_1), ..., h(d_|D|)) and ``probs[s]`` its
    probability."""

    functions: np.ndarray  # (S, |D|) int
    probs: np.ndarray  # (S,)
    n_values: int

    @property
    def n_datasets(self) -> int:
        return int(self.functions.shape[1])

    def marginals(self) -> np.ndarray:
        """M[d, v] = Pr[M(d) = v] = sum of P over functions with h(d) = v (Proposition 8)."""
        nd, k = self.n_datasets, self.n_values
        out = np.zeros((nd, k))
        for d in range(nd):
            out[d] = np.bincount(self.functions[:, d], weights=self.probs, minlength=k)
        return out

    def pruned(self, tol: float = ZERO_TOL) -> "JointMechanism":
        keep = self.probs > tol
        p = self.probs[keep]
        return JointMechanism(self.functions[keep], p / p.sum(), self.n_values)


def all_functions(n_datasets: int, k: int, allowed: np.ndarray | None = None) -> np.ndarray:
    """Every function D -> V as rows of an (S, |D|) array, optionally only those with
    ``allowed[d, h(d)]`` true for every d."""
    if allowed is None:
        grids = np.indices((k,) * n_datasets).reshape(n_datasets, -1).T
        return grids.astype(np.int64)
    choices = [np.flatnonzero(allowed[d]) for d in range(n_datasets)]
    grids = np.array(np.meshgrid(*choices, indexing="ij")).reshape(n_datasets, -1).T
    return grids.astype(np.int64)


def product_mechanism(m: np.ndarray, max_support: int = 1 << 16) -> JointMechanism:
    """The independent mechanism of a row-stochastic matrix as a joint distribution:
    P(h) = prod_d M[d, h(d)] (Proposition 1), over the functions with positive probability."""
    allowed = m > 0
    size = int(np.prod(allowed.sum(axis=1), dtype=object))
    if size > max_support:
        raise ValueError(f"product support {size} exceeds {max_support}")
    funcs = all_functions(m.shape[0], m.shape[1], allowed)
    logp = np.log(m[np.arange(m.shape[0])[None, :], funcs]).sum(axis=1)
    return JointMechanism(funcs, np.exp(logp), m.shape[1])


def shared_uniform_coupling(m: np.ndarray) -> JointMechanism:
    """Quantile coupling with one shared uniform U: h(d) = F_d^{-1}(U), F_d the CDF of row d.

    It has the same marginals as the independent mechanism M (so the same eps, delta and
    VDP values) and at most |D|(|V|-1)+1 functions in its support. On K2 with binary
    randomized response it is exactly the joint mechanism of seed 003 eq. (2)."""
    cdf = np.cumsum(m, axis=1)
    cdf[:, -1] = 1.0
    cuts = np.unique(np.concatenate([[0.0], cdf[:, :-1].ravel(), [1.0]]))
    cuts = np.clip(cuts, 0.0, 1.0)
    lo, hi = cuts[:-1], cuts[1:]
    keep = hi - lo > 0
    lo, hi = lo[keep], hi[keep]
    mid = 0.5 * (lo + hi)
    # h(d) = smallest v with cdf[d, v] > U
    funcs = np.stack([np.searchsorted(cdf[d], mid, side="right") for d in range(m.shape[0])], axis=1)
    funcs = np.minimum(funcs, m.shape[1] - 1)
    return JointMechanism(funcs.astype(np.int64), hi - lo, m.shape[1])


def theorem3_mechanism(n_datasets: int, edge: tuple[int, int], k: int, alpha: float) -> JointMechanism:
    """Seed 003, Theorem 3: with d1 ~ d2 the given edge, P(1,...,1) = P(2,...,2) = (1-alpha)/2
    and P(1,2,1,...,1) = alpha (d2 alone gets value 2). Values 1, 2 are stored as 0, 1.
    Nontrivial, with influence alpha."""
    d1, d2 = edge
    ones = np.zeros(n_datasets, dtype=np.int64)
    twos = np.ones(n_datasets, dtype=np.int64)
    mixed = ones.copy()
    mixed[d2] = 1
    return JointMechanism(np.stack([ones, twos, mixed]),
                          np.array([(1 - alpha) / 2, (1 - alpha) / 2, alpha]), k)


def is_independent(joint: JointMechanism, tol: float = 1e-9) -> bool:
    """Proposition 1 check: P(h) = prod_d Pr[M(d) = h(d)] for every h in V^D.

    An independent mechanism's support is the product of its marginals' supports, so a
    smaller support already decides "not independent" without enumerating V^D."""
    j = joint.pruned(0.0)
    m = j.marginals()
    product_size = int(np.prod((m > tol).sum(axis=1), dtype=object))
    support = int((j.probs > tol).sum())
    if support != product_size:
        return False
    funcs = j.functions[j.probs > tol]
    prod = np.exp(np.log(np.maximum(m[np.arange(m.shape[0])[None, :], funcs], 1e-300)).sum(axis=1))
    return bool(np.allclose(prod, j.probs[j.probs > tol], rtol=1e-7, atol=tol))


# =========================================================================== measures
def influence_independent(m: np.ndarray, edges: np.ndarray) -> float:
    """Max over edges of Pr[M(d) != M(d')] = 1 - sum_v M[d,v] M[d',v] (Proposition 5)."""
    e = np.asarray(edges).reshape(-1, 2)
    return float(np.max(1.0 - np.einsum("ij,ij->i", m[e[:, 0]], m[e[:, 1]])))


def influence_joint(joint: JointMechanism, edges: np.ndarray) -> float:
    """Max over edges of Pr[M(d) != M(d')] = sum of P over h with h(d) != h(d') (Prop. 9)."""
    e = np.asarray(edges).reshape(-1, 2)
    differ = joint.functions[:, e[:, 0]] != joint.functions[:, e[:, 1]]  # (S, m)
    return float(np.max(joint.probs @ differ))


def eps_pure(m: np.ndarray, edges: np.ndarray, zero_tol: float = 0.0) -> float:
    """The exact eps at delta = 0: max over ordered edges and values of ln(p_v / q_v)
    (inf when some p_v > 0 = q_v). Singletons suffice at delta = 0."""
    oe = ordered_edges(edges)
    p, q = m[oe[:, 0]], m[oe[:, 1]]
    p = np.where(p > zero_tol, p, 0.0)
    q = np.where(q > zero_tol, q, 0.0)
    if np.any((p > 0) & (q == 0)):
        return math.inf
    mask = p > 0
    if not mask.any():
        return 0.0
    return float(max(0.0, np.max(np.log(p[mask]) - np.log(q[mask]))))


def hockey_stick_delta(m: np.ndarray, edges: np.ndarray, eps: float) -> float:
    """Smallest delta with (eps, delta)-DP (Definition 1): max over ordered edges of
    sum_v max(0, p_v - e^eps q_v), the worst set being {v : p_v > e^eps q_v}."""
    oe = ordered_edges(edges)
    p, q = m[oe[:, 0]], m[oe[:, 1]]
    return float(max(0.0, np.max(np.maximum(p - math.exp(eps) * q, 0.0).sum(axis=1))))


def vdp_delta(m: np.ndarray, edges: np.ndarray, eps: float) -> float:
    """Smallest delta with (eps, delta)-VDP (Definition 5): max over ordered edges and
    values of p_v - e^eps q_v."""
    oe = ordered_edges(edges)
    p, q = m[oe[:, 0]], m[oe[:, 1]]
    return float(max(0.0, np.max(p - math.exp(eps) * q)))


def argmax_set(row: np.ndarray, tol: float = 1e-12) -> frozenset:
    return frozenset(np.flatnonzero(row >= row.max() - tol).tolist())


def is_nontrivial(m: np.ndarray, edges: np.ndarray, tol: float = 1e-12) -> bool:
    """Definition 7: some edge d ~ d' where the most likely output differs. Ties are
    read as sets (footnote 3 and the tight example in the proof of Theorem 1): the edge
    counts when the two argmax sets differ."""
    sets = [argmax_set(r, tol) for r in m]
    return any(sets[a] != sets[b] for a, b in np.asarray(edges).reshape(-1, 2))


def balanced_utility(m: np.ndarray, f: np.ndarray) -> float:
    """min_d Pr[M(d) = f(d)]; on K2 with f = identity and the balancing constraint this is
    U(M) = Pr[M(d1) = 1] of seed 003 Examples 5 and 6."""
    return float(np.min(m[np.arange(m.shape[0]), f]))


# =========================================================================== LPs (seed 003)
def _dp_rows_for_marginals(marg_matrix: sp.csr_matrix, n_datasets: int, k: int,
                           edges: np.ndarray, eps: float, n_vars: int, t_offset: int):
    """(eps, delta)-DP on all subsets as linear rows through hockey-stick auxiliaries:
    t_{e,v} >= m_{d,v} - e^eps m_{d',v}, t >= 0, sum_v t_{e,v} <= delta (per ordered edge e).
    ``marg_matrix`` maps the variable vector to the |D|*k marginals (row d*k+v).
    Returns (A_ub, b_ub_without_delta, n_aux)."""
    oe = ordered_edges(edges)
    lam = math.exp(eps)
    ne = oe.shape[0]
    vals = np.arange(k)
    ia = (oe[:, 0, None] * k + vals[None, :]).ravel()
    ib = (oe[:, 1, None] * k + vals[None, :]).ravel()
    t = sp.csr_matrix((-np.ones(ne * k), (np.arange(ne * k), t_offset + np.arange(ne * k))),
                      shape=(ne * k, n_vars))
    a1 = (marg_matrix[ia] - lam * marg_matrix[ib] + t).tocsr()
    sums = sp.csr_matrix((np.ones(ne * k), (np.repeat(np.arange(ne), k), t_offset + np.arange(ne * k))),
                         shape=(ne, n_vars))
    return a1, sums, ne * k


def _solve(c, a_ub=None, b_ub=None, a_eq=None, b_eq=None, bounds=(0, None), method="highs"):
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method=method)
    if res.status != 0:
        raise RuntimeError(f"LP failed: {res.message}")
    return res


def min_influence_coupling(m: np.ndarray, edges: np.ndarray, max_functions: int = 1 << 14):
    """LP-optimal joint mechanism with the marginals of M: minimise iota subject to
    sum over h with h(d) != h(d') of P(h) <= iota on every edge (Proposition 9) and
    Pr[M(d) = v] = M[d, v]. Variables: P over the functions allowed by M's support, and iota.
    Returns (iota, JointMechanism)."""
    nd, k = m.shape
    funcs = all_functions(nd, k, m > 0)
    s = funcs.shape[0]
    if s > max_functions:
        raise ValueError(f"{s} functions exceed the LP limit {max_functions}")
    e = np.asarray(edges).reshape(-1, 2)
    nvar = s + 1
    # marginal equalities
    rows = (np.arange(nd)[None, :] * k + funcs).ravel()
    cols = np.repeat(np.arange(s), nd)
    a_eq = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(nd * k, nvar))
    b_eq = m.ravel()
    differ = funcs[:, e[:, 0]] != funcs[:, e[:, 1]]  # (s, m)
    si, ei = np.nonzero(differ)
    a_ub = sp.csr_matrix((np.ones(si.size), (ei, si)), shape=(e.shape[0], nvar)).tolil()
    a_ub[:, s] = -1.0
    c = np.zeros(nvar)
    c[s] = 1.0
    res = _solve(c, a_ub.tocsr(), np.zeros(e.shape[0]), a_eq, b_eq)
    p = np.maximum(res.x[:s], 0.0)
    joint = JointMechanism(funcs, p / p.sum(), k).pruned()
    return float(res.x[s]), joint


def optimise_balanced_joint(n_datasets: int, edges: np.ndarray, f: np.ndarray, k: int,
                            eps: float, delta: float, max_functions: int = 1 << 14):
    """Seed 003 Example 6 on a general graph, by two LPs over joint mechanisms:
    (1) maximise U subject to (eps, delta)-DP and the balancing constraint
    Pr[M(d) = f(d)] = U for every d; (2) among the optima, minimise the influence iota.
    Returns (U*, iota*, JointMechanism)."""
    funcs = all_functions(n_datasets, k)
    s = funcs.shape[0]
    if s > max_functions:
        raise ValueError(f"{s} functions exceed the LP limit {max_functions}")
    e = np.asarray(edges).reshape(-1, 2)
    ne2 = 2 * e.shape[0]
    t0 = s
    iu, ii = s + ne2 * k, s + ne2 * k + 1
    nvar = ii + 1
    rows = (np.arange(n_datasets)[None, :] * k + funcs).ravel()
    cols = np.repeat(np.arange(s), n_datasets)
    marg = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_datasets * k, nvar))
    a_dp, a_sum, _ = _dp_rows_for_marginals(marg, n_datasets, k, e, eps, nvar, t0)
    # equalities: sum P = 1; Pr[M(d) = f(d)] - U = 0
    total = sp.csr_matrix((np.ones(s), (np.zeros(s), np.arange(s))), shape=(1, nvar))
    bal = marg[np.arange(n_datasets) * k + np.asarray(f)].tolil()
    bal[:, iu] = -1.0
    a_eq = sp.vstack([total, bal.tocsr()]).tocsr()
    b_eq = np.concatenate([[1.0], np.zeros(n_datasets)])
    differ = funcs[:, e[:, 0]] != funcs[:, e[:, 1]]
    si, ei = np.nonzero(differ)
    a_inf = sp.csr_matrix((np.ones(si.size), (ei, si)), shape=(e.shape[0], nvar)).tolil()
    a_inf[:, ii] = -1.0
    a_ub = sp.vstack([a_dp, a_sum, a_inf.tocsr()]).tocsr()
    b_ub = np.concatenate([np.zeros(a_dp.shape[0]), np.full(a_sum.shape[0], delta), np.zeros(e.shape[0])])
    c = np.zeros(nvar)
    c[iu] = -1.0
    res = _solve(c, a_ub, b_ub, a_eq, b_eq)
    u_star = float(res.x[iu])
    # Stage 2: pin U = U* exactly, minimise iota. A slack (U >= U* - 1e-9) let iota fall
    # 2e-9 below its optimum (iota is increasing in U); U* is a simplex vertex value, exact
    # to float precision, and the solver's feasibility tolerance absorbs its last ulp.
    c2 = np.zeros(nvar)
    c2[ii] = 1.0
    bounds = [(0, None)] * nvar
    bounds[iu] = (u_star, u_star)
    res2 = _solve(c2, a_ub, b_ub, a_eq, b_eq, bounds=bounds)
    p = np.maximum(res2.x[:s], 0.0)
    joint = JointMechanism(funcs, p / p.sum(), k).pruned()
    return u_star, float(res2.x[ii]), joint


def optimise_balanced_independent_utility(n_datasets: int, edges: np.ndarray, f: np.ndarray,
                                          k: int, eps: float, delta: float):
    """Seed 003 Example 5 as an LP over independent mechanisms (row-stochastic M, linear DP
    by Proposition 4): maximise U with Pr[M(d) = f(d)] = U for every d. Returns (U*, M)."""
    nm = n_datasets * k
    e = np.asarray(edges).reshape(-1, 2)
    ne2 = 2 * e.shape[0]
    iu = nm + ne2 * k
    nvar = iu + 1
    marg = sp.csr_matrix((np.ones(nm), (np.arange(nm), np.arange(nm))), shape=(nm, nvar))
    a_dp, a_sum, _ = _dp_rows_for_marginals(marg, n_datasets, k, e, eps, nvar, nm)
    rows = sp.csr_matrix((np.ones(nm), (np.repeat(np.arange(n_datasets), k), np.arange(nm))),
                         shape=(n_datasets, nvar))
    bal = marg[np.arange(n_datasets) * k + np.asarray(f)].tolil()
    bal[:, iu] = -1.0
    a_eq = sp.vstack([rows, bal.tocsr()]).tocsr()
    b_eq = np.concatenate([np.ones(n_datasets), np.zeros(n_datasets)])
    a_ub = sp.vstack([a_dp, a_sum]).tocsr()
    b_ub = np.concatenate([np.zeros(a_dp.shape[0]), np.full(a_sum.shape[0], delta)])
    c = np.zeros(nvar)
    c[iu] = -1.0
    res = _solve(c, a_ub, b_ub, a_eq, b_eq)
    return float(res.x[iu]), np.maximum(res.x[:nm], 0.0).reshape(n_datasets, k)


def example5_closed_form(eps: float, delta: float) -> tuple[float, float]:
    """Seed 003 Example 5 (independent, K2, binary, balanced): x* = (e^eps + delta)/(e^eps + 1),
    influence 1 - 2(1 - delta)(e^eps + delta)/(e^eps + 1)^2. Returns (utility, influence)."""
    lam = math.exp(eps)
    x = (lam + delta) / (lam + 1)
    return x, 1.0 - 2.0 * (1.0 - delta) * (lam + delta) / (lam + 1) ** 2


def example6_closed_form(eps: float, delta: float) -> tuple[float, float]:
    """Seed 003 Example 6 (joint, K2, binary, balanced): x* = (e^eps + 2 delta - 1)/(e^eps + 1),
    y* = 0, utility (1 + x*)/2 = (e^eps + delta)/(e^eps + 1), influence x*.
    Returns (utility, influence)."""
    lam = math.exp(eps)
    x = (lam + 2 * delta - 1) / (lam + 1)
    return (1 + x) / 2, x


def example5_dense_search(eps: float, delta: float, points: int = 200_001) -> tuple[float, float]:
    """Example 5 by brute force: scan x = Pr[M(d1)=1] = Pr[M(d2)=2] on a grid, keep the
    (eps, delta)-DP points, return (max x, influence x + y - 2xy at y = 1 - x)."""
    lam = math.exp(eps)
    x = np.linspace(0.0, 1.0, points)
    ok = (x <= lam * (1 - x) + delta + 1e-15) & (1 - x <= lam * x + delta + 1e-15)
    best = float(x[ok].max())
    return best, 1.0 - 2.0 * best * (1.0 - best)


# =========================================================================== leakage (thesis ch. 5)
def min_entropy_leakage_bits(channel: np.ndarray) -> float:
    """Worst-case (uniform prior) min-entropy leakage I_inf = log2 sum_j max_i M[i, j]
    (thesis Sec. 5.1, Braun et al. 2009)."""
    return float(math.log2(np.max(channel, axis=0).sum()))


def bayes_utility(channel: np.ndarray) -> float:
    """U(Y, Z) = sum_z max_y p(y, z) under the uniform prior (thesis Sec. 5.1)."""
    return float(np.max(channel, axis=0).sum() / channel.shape[0])


def conditional_min_entropy_bits(channel: np.ndarray) -> float:
    """H_inf(A | B) = -log2 sum_j max_i p(i) M[i, j] with a uniform prior (Dodis et al.)."""
    return -math.log2(bayes_utility(channel))


def is_dp_channel(channel: np.ndarray, edges: np.ndarray, eps: float, tol: float = 1e-9) -> bool:
    """M[h, k] <= e^eps M[l, k] + tol for every ordered edge h ~ l and output k."""
    oe = ordered_edges(edges)
    return bool(np.all(channel[oe[:, 0]] <= math.exp(eps) * channel[oe[:, 1]] + tol))


def bayes_remap(channel: np.ndarray) -> np.ndarray:
    """Post-process outputs by the Bayes guess z -> argmax_y M[y, z]: the result is still
    eps-DP, has each column's maximum on the diagonal, and trace = sum_z max_y M[y, z]."""
    guess = np.argmax(channel, axis=0)
    out = np.zeros_like(channel)
    for z in range(channel.shape[1]):
        out[:, guess[z]] += channel[:, z]
    return out


def symmetrise(channel: np.ndarray, group: list[np.ndarray]) -> np.ndarray:
    """Thesis Lemma 5.3.2, eq. (5.1): M'[h, k] = (1/|G|) sum_g M[g(h), g(k)]."""
    acc = np.zeros_like(channel)
    for g in group:
        acc += channel[np.ix_(g, g)]
    return acc / len(group)


def lemma532_properties(channel: np.ndarray, sym: np.ndarray, edges: np.ndarray, eps: float,
                        tol: float = 1e-9) -> dict:
    """The four claims of Lemma 5.3.2 for M' = symmetrise(M): (1) eps-DP; (2) constant
    diagonal; (3) each column's maximum on the diagonal; (4) H_inf^M = H_inf^M'."""
    diag = np.diag(sym)
    return {
        "sym_dp": is_dp_channel(sym, edges, eps, tol),
        "sym_diagonal_constant": bool(np.ptp(diag) <= tol),
        "sym_diagonal_is_column_max": bool(np.all(diag >= sym.max(axis=0) - tol)),
        "sym_min_entropy_equal": bool(abs(conditional_min_entropy_bits(channel)
                                          - conditional_min_entropy_bits(sym)) <= 1e-7),
    }


def dp_channel_lp_full(graph: G.Graph, eps: float, method: str = "highs-ipm"):
    """max trace(M)/|A| over eps-DP channels M : A -> A (uniform prior), as one LP with
    |A|^2 variables, |A| row-sum equalities and 2|E||A| DP rows M[h,k] - e^eps M[l,k] <= 0.
    HiGHS interior point (with crossover to a vertex) is ~10x faster here than dual simplex
    (see benchmarks/bench_leakage.py). Returns (utility, channel, info)."""
    n = graph.n
    oe = ordered_edges(graph.edges)
    ne = oe.shape[0]
    lam = math.exp(eps)
    h = np.repeat(oe[:, 0], n)
    l = np.repeat(oe[:, 1], n)
    k = np.tile(np.arange(n), ne)
    r = np.arange(ne * n)
    a_ub = sp.csr_matrix((np.concatenate([np.ones(r.size), np.full(r.size, -lam)]),
                          (np.concatenate([r, r]), np.concatenate([h * n + k, l * n + k]))),
                         shape=(r.size, n * n))
    a_eq = sp.csr_matrix((np.ones(n * n), (np.repeat(np.arange(n), n), np.arange(n * n))), shape=(n, n * n))
    c = np.zeros(n * n)
    c[np.arange(n) * (n + 1)] = -1.0 / n
    res = _solve(c, a_ub, np.zeros(r.size), a_eq, np.ones(n), method=method)
    channel = np.maximum(res.x, 0.0).reshape(n, n)
    return -float(res.fun), channel, {"variables": n * n, "constraints": int(r.size + n)}


def dp_channel_lp_orbits(graph: G.Graph, eps: float, generators: list[np.ndarray]):
    """The same LP reduced to the orbitals of a group G <= Aut(graph) (orbits of G on A x A).

    Exact for any subgroup: the symmetrisation of Lemma 5.3.2 maps an optimum to a
    G-invariant channel with the same trace, so a G-invariant optimum exists. One row-sum
    equality per vertex orbit; DP rows x_a <= e^eps x_b for the distinct orbital pairs
    (orb(h,k), orb(l,k)) with h a vertex-orbit representative and l ~ h.
    Returns (utility, orbital labels (n*n,), orbital values x, info)."""
    n = graph.n
    lab = orbitals(n, generators)
    r = int(lab.max()) + 1
    lab2 = lab.reshape(n, n)
    vorb = vertex_orbits(n, generators)
    reps = np.array([np.flatnonzero(vorb == o)[0] for o in range(vorb.max() + 1)])
    nbrs = graph.neighbours()
    pairs = []
    for h in reps:
        for l in nbrs[h]:
            pairs.append(np.stack([lab2[h], lab2[l]], axis=1))
    pairs = np.unique(np.concatenate(pairs), axis=0) if pairs else np.zeros((0, 2), np.int64)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    lam = math.exp(eps)
    m = pairs.shape[0]
    a_ub = sp.csr_matrix((np.concatenate([np.ones(m), np.full(m, -lam)]),
                          (np.concatenate([np.arange(m)] * 2), np.concatenate([pairs[:, 0], pairs[:, 1]]))),
                         shape=(m, r))
    a_eq = sp.vstack([sp.csr_matrix(np.bincount(lab2[h], minlength=r)[None, :].astype(float)) for h in reps])
    c = -np.bincount(np.diag(lab2), minlength=r) / n
    res = _solve(c, a_ub if m else None, np.zeros(m) if m else None, a_eq, np.ones(len(reps)))
    x = np.maximum(res.x, 0.0)
    return -float(res.fun), lab, x, {"variables": r, "constraints": int(m + len(reps))}


def distance_class_lp(borders: np.ndarray, pairs: np.ndarray, eps: float):
    """The orbit-reduced LP of a distance-transitive graph, whose orbitals are the distance
    classes: variables y_d = |Border_d| x_d (mass a row puts at distance d), constraints
    sum_d y_d = 1 and x_d <= e^eps x_d' for each realisable (d, d') on an edge.
    Returns (utility = x_0, x)."""
    b = np.asarray(borders, dtype=float)
    dmax = b.size
    lam = math.exp(eps)
    pairs = np.asarray(pairs).reshape(-1, 2)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    m = pairs.shape[0]
    # y_d / b_d <= lam y_d' / b_d'  <=>  y_d - lam (b_d / b_d') y_d' <= 0
    coef = lam * b[pairs[:, 0]] / b[pairs[:, 1]]
    a_ub = sp.csr_matrix((np.concatenate([np.ones(m), -coef]),
                          (np.concatenate([np.arange(m)] * 2), np.concatenate([pairs[:, 0], pairs[:, 1]]))),
                         shape=(m, dmax))
    c = np.zeros(dmax)
    c[0] = -1.0
    res = _solve(c, a_ub, np.zeros(m), np.ones((1, dmax)), np.ones(1))
    y = np.maximum(res.x, 0.0)
    return float(y[0]), y / b


def distance_class_data(graph: G.Graph, root: int = 0):
    """Border sizes from ``root`` and the realisable distance pairs (d(root,k), d(l,k)) over
    neighbours l of root and all k: the input of :func:`distance_class_lp`."""
    adj = graph.adjacency()
    nb = graph.neighbours()[root]
    d = shortest_path(adj, method="D", unweighted=True, indices=np.concatenate([[root], nb])).astype(np.int64)
    borders = np.bincount(d[0])
    pairs = np.unique(np.concatenate([np.stack([d[0], d[i]], axis=1) for i in range(1, d.shape[0])]), axis=0)
    return borders, pairs


def hamming_distance_class_data(u: int, v: int):
    """Closed-form border sizes C(u, d)(v-1)^d and adjacent distance pairs of H(u, v)."""
    borders = np.array([math.comb(u, d) * (v - 1) ** d for d in range(u + 1)], dtype=float)
    pairs = [(d, d + 1) for d in range(u)] + [(d + 1, d) for d in range(u)]
    return borders, np.array(pairs)


def hamming_utility_closed_form(u: int, v: int, eps: float) -> float:
    """U = (lambda/(lambda + v - 1))^u on H(u, v), lambda = e^eps; in log space as
    exp(-u log1p((v-1) e^-eps))."""
    return math.exp(-u * math.log1p((v - 1) * math.exp(-eps)))


def hamming_leakage_closed_form_bits(u: int, v: int, eps: float) -> float:
    """Leakage u log2(v lambda/(lambda + v - 1)) on H(u, v)."""
    return u * (math.log2(v) - math.log1p((v - 1) * math.exp(-eps)) / math.log(2))


def tight_utility_bound_from_borders(border_rows: list[np.ndarray], eps: float) -> float:
    """1 / min_k sum_h e^{-eps d(h, k)} from each vertex's border profile. Any eps-DP channel
    has M[h,k] >= e^{-eps d(h,k)} M[k,k]; summing rows gives trace <= |A| / min_k S_k.
    Equality when S_k is constant (e.g. vertex-transitive graphs), attained by
    M[h,k] = e^{-eps d(h,k)}/S."""
    s = min(float(np.sum(b * np.exp(-eps * np.arange(b.size)))) for b in border_rows)
    return 1.0 / s


def thesis_bound_single(ecc: int, c: int, eps: float) -> float:
    """Thesis Theorem 5.3.3, eq. (5.6): lambda^n (1 - lambda) / (lambda^n (1 - lambda) +
    c (1 - lambda^n)), n = ecc(a), c = min_{1<=d<=n} |Border_d(a)|; written stably as
    expm1(eps) / (expm1(eps) - c expm1(-n eps)), with the eps -> 0 limit 1 / (1 + c n)."""
    if ecc == 0:
        return 1.0
    if eps == 0.0:
        return 1.0 / (1.0 + c * ecc)
    a = math.expm1(eps)
    return a / (a - c * math.expm1(-ecc * eps))


def thesis_bounds_from_borders(border_rows: list[np.ndarray], eps: float) -> np.ndarray:
    """Eq. (5.6) at every vertex a (one border profile per vertex)."""
    out = []
    for b in border_rows:
        ecc = b.size - 1
        c = int(b[1:].min()) if ecc >= 1 else 0
        out.append(thesis_bound_single(ecc, c, eps))
    return np.array(out)


def channel_from_orbitals(labels: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    return x[labels].reshape(n, n)
