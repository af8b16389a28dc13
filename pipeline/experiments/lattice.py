"""Clique-inserted lattices: energy, spanning trees, dimers, expansion (seed 004, ch. 6; issue 4).

Experiments
- ``lattice``: one finite lattice C^k(base) on L1 x L2 cells with a boundary condition.
- ``lattice_limit``: the infinite-lattice energy per vertex and spanning-tree entropy.
"""

from __future__ import annotations

import math

import pyarrow as pa

from pipeline.experiments.base import (Choice, Experiment, Interval, Param, PointCheck, exact_int,
                                       log_of_int, register)
from pipeline.experiments.base import EXACT_SCIENTIFIC, document
from pipeline.kernels import lattice_counts as counts
from pipeline.kernels import lattice_spectra as spectra
from pipeline.kernels.lattices import (BASES, BOUNDARIES, MIN_CELLS, base_cell,
                                       boundary_edge_count, build_lattice, lattice_cell,
                                       lattice_rotation, lattice_size)

# Declared size limits (vertices). See docs/lattice.md.
TORUS_MAX_VERTICES = 20_000_000      # Fourier path: O(N c^2) time, chunked memory
SPARSE_MAX_VERTICES = 1_000_000      # cylinder/free: sparse LU for ln tau
DENSE_MAX_VERTICES = 4_000           # free: dense eigvalsh -> energy, Kirchhoff index (~2 s, 128 MB)
CYLINDER_FOURIER_MAX_BLOCK = 1_200   # cylinder: 1-D Fourier blocks of size L2 * c at most ...
CYLINDER_FOURIER_MAX_WORK = 2e9      # ... and L1 * (L2 c)^3 / 2 at most
EIGSH_MAX_VERTICES = 200_000         # cylinder/free: shift-invert Lanczos for mu_2
EXACT_TREES_MAX_VERTICES = 800       # modular matrix-tree determinant
DIMER_DP_MAX_VERTICES = 2_000        # frontier DP (also capped by its number of states)
DIMER_DP_MAX_STATES = 1 << 16
DIMER_DP_MAX_WORK = 1_000_000        # total state visits before the DP gives up
DIMER_PFAFFIAN_EXACT_MAX_VERTICES = 800  # exact |Pf K| (modular det); above: ln |Pf K| by sparse LU
EXACT_MAX_DIGITS = 4_000             # longer exact integers are not stored (log column still is)


def _check_cells(p: dict) -> str | None:
    need = MIN_CELLS[p["base"]]
    if p["L1"] < need or p["L2"] < need:
        return (f"L1 and L2 must be >= {need} for base={p['base']} (got L1={p['L1']}, "
                f"L2={p['L2']}); minimum is 2 for hexagonal, 3 for square and triangular, so "
                "that the torus has no loops or multiple edges")
    return None


def _check_size(p: dict) -> str | None:
    n, _ = lattice_size(p["base"], p["insertions"], p["L1"], p["L2"])
    limit = TORUS_MAX_VERTICES if p["boundary"] == "torus" else SPARSE_MAX_VERTICES
    if n > limit:
        return (f"base={p['base']}, insertions={p['insertions']}, L1={p['L1']}, L2={p['L2']}, "
                f"boundary={p['boundary']} gives {n} vertices; allowed: at most {limit} "
                f"(torus: {TORUS_MAX_VERTICES}, cylinder/free: {SPARSE_MAX_VERTICES}); "
                "reduce L1, L2 or insertions")
    return None


def _exact_or_none(value: int | None) -> str | None:
    if value is None or value <= 0:
        return None
    if value.bit_length() * math.log10(2) > EXACT_MAX_DIGITS:
        return None
    return exact_int(value)


def _cylinder_fourier_ok(base: str, k: int, L1: int, L2: int) -> bool:
    block = lattice_cell(base, k).size * L2
    return L1 >= 3 and block <= CYLINDER_FOURIER_MAX_BLOCK and \
        L1 * block ** 3 / 2 <= CYLINDER_FOURIER_MAX_WORK


def _planar(base: str, k: int, boundary: str) -> bool:
    """Free and cylinder lattices of the base lattices and of C^k(hexagonal) are planar (the
    cylinder as an annulus); C^k(square), C^k(triangular) for k >= 1 and all tori are not."""
    return boundary != "torus" and (k == 0 or base == "hexagonal")


def run_lattice(p: dict, seed: int) -> dict:
    base, k, L1, L2, boundary = p["base"], p["insertions"], p["L1"], p["L2"], p["boundary"]
    base_c = base_cell(base)
    r = base_c.degree
    n, _ = lattice_size(base, k, L1, L2)
    n_edges = boundary_edge_count(base, k, L1, L2, boundary)
    methods = []
    graph = None

    def get_graph():
        nonlocal graph
        if graph is None:
            graph = build_lattice(base, k, L1, L2, boundary)
        return graph

    # spectrum-derived quantities
    if boundary == "torus":
        s = spectra.torus_summary(lattice_cell(base, k), L1, L2, base_c, k)
        methods.append("spectrum=fourier" + ("+clique-map" if k else ""))
    elif boundary == "cylinder" and _cylinder_fourier_ok(base, k, L1, L2):
        s = spectra.cylinder_summary(lattice_cell(base, k), L1, L2)
        methods.append("spectrum=fourier-1d")
    elif n <= DENSE_MAX_VERTICES:
        s = spectra.dense_summary(get_graph())
        methods.append("spectrum=dense-eigvalsh")
    else:
        g = get_graph()
        s = {"energy": None, "kirchhoff_index": None,
             "log_spanning_trees": spectra.sparse_log_tree_count(g),
             "algebraic_connectivity": (spectra.sparse_algebraic_connectivity(g)
                                        if n <= EIGSH_MAX_VERTICES else None)}
        methods.append("spectrum=sparse-lu" + ("+eigsh" if n <= EIGSH_MAX_VERTICES else ""))

    # exact spanning-tree count
    trees = None
    if n <= EXACT_TREES_MAX_VERTICES:
        trees = counts.spanning_tree_count(get_graph())
        methods.append("trees=modular-crt")
    elif boundary == "torus" and k >= 1:
        n0 = n // r ** k
        ns = n0 * (r - 2) * (r ** k - 1) // (2 * (r - 1))
        digits_estimate = (2 * ns) * math.log10(r + 2) + n0 * 2  # generous upper estimate
        if n0 <= EXACT_TREES_MAX_VERTICES and digits_estimate <= EXACT_MAX_DIGITS:
            tau0 = counts.spanning_tree_count(build_lattice(base, 0, L1, L2, "torus"))
            trees = spectra.clique_tree_count(tau0, n0, r, k)
            methods.append("trees=lemma-6.3.1+modular-crt")
    log_trees = log_of_int(trees) if trees is not None else s["log_spanning_trees"]

    # exact dimer count
    dimers = None
    log_dimers = None
    if n % 2:
        methods.append("dimers=none(odd N)")
    elif boundary == "torus" and base == "hexagonal" and k >= 1:
        n_g = n // 3  # C^{k-1} torus: cubic, 2-connected
        exponent = (3 * n_g) // 2 - n_g + 1
        log_dimers = exponent * math.log(2.0)
        dimers = _exact_or_none(1 << exponent) if exponent * 0.302 < EXACT_MAX_DIGITS else None
        methods.append("dimers=lemma-6.3.4")
    elif _planar(base, k, boundary):
        g = get_graph()
        K = counts.kasteleyn_matrix(g, lattice_rotation(lattice_cell(base, k), L1, L2, boundary))
        if K is None:  # cannot happen for the planar families above; never report a wrong count
            raise RuntimeError(f"{g.name}: drawing is not planar")
        if n <= DIMER_PFAFFIAN_EXACT_MAX_VERTICES:
            m_count = counts.pfaffian_abs(K, counts.band_order(g))
            log_dimers = log_of_int(m_count) if m_count else None
            dimers = _exact_or_none(m_count)
            methods.append("dimers=kasteleyn-pfaffian-exact" if m_count
                           else "dimers=none(no perfect matching)")
        else:
            lg = counts.pfaffian_log_abs(K)
            log_dimers = lg if math.isfinite(lg) else None
            methods.append("dimers=kasteleyn-pfaffian-lu" if log_dimers is not None
                           else "dimers=none(no perfect matching)")
    elif n <= DIMER_DP_MAX_VERTICES:
        m_count = counts.count_perfect_matchings(get_graph(), max_states=DIMER_DP_MAX_STATES,
                                                 max_work=DIMER_DP_MAX_WORK)
        if m_count is None:
            methods.append("dimers=infeasible")
        elif m_count == 0:
            methods.append("dimers=none(no perfect matching)")
        else:
            dimers, log_dimers = _exact_or_none(m_count), log_of_int(m_count)
            methods.append("dimers=matching-dp")
    else:
        methods.append("dimers=infeasible")

    energy = s["energy"]
    return {
        "n_vertices": int(n),
        "n_edges": int(n_edges),
        "energy": energy,
        "energy_per_vertex": None if energy is None else energy / n,
        "log_spanning_trees": log_trees,
        "spanning_tree_entropy": log_trees / n,
        "spanning_trees": _exact_or_none(trees),
        "log_dimers": log_dimers,
        "dimers": dimers,
        "kirchhoff_index": s["kirchhoff_index"],
        "algebraic_connectivity": s["algebraic_connectivity"],
        "method": "; ".join(methods),
    }


LATTICE = register(Experiment(
    name="lattice",
    version=1,
    doc="Energy, spanning trees, dimers and expansion of C^k(hexagonal|square|triangular) on "
        "L1 x L2 cells with torus, cylinder or free boundary (Zhang thesis, ch. 6).",
    params=[
        Param("base", str, "hexagonal", Choice(*BASES), "base lattice H"),
        Param("insertions", int, 0, Interval(0, 6), "number k of clique insertions: C^k(H)"),
        Param("L1", int, 8, Interval(2, 100_000), "unit cells along direction 1 (periodic "
              "for torus and cylinder)"),
        Param("L2", int, 8, Interval(2, 100_000), "unit cells along direction 2 (periodic "
              "for torus only)"),
        Param("boundary", str, "torus", Choice(*BOUNDARIES), "boundary condition"),
    ],
    columns={
        "n_vertices": pa.int64(),
        "n_edges": pa.int64(),
        "energy": pa.float64(),
        "energy_per_vertex": pa.float64(),
        "log_spanning_trees": pa.float64(),
        "spanning_tree_entropy": pa.float64(),
        "spanning_trees": pa.string(),
        "log_dimers": pa.float64(),
        "dimers": pa.string(),
        "kirchhoff_index": pa.float64(),
        "algebraic_connectivity": pa.float64(),
        "method": pa.string(),
    },
    run=run_lattice,
    checks=[PointCheck(("base", "L1", "L2"), _check_cells),
            PointCheck(("base", "insertions", "L1", "L2", "boundary"), _check_size)],
))


def run_lattice_limit(p: dict, seed: int) -> dict:
    lim = spectra.lattice_limits(p["base"], p["insertions"])
    return {
        "lattice_name": lattice_cell(p["base"], p["insertions"]).name,
        "cell_size": lim["cell_size"],
        "degree": lim["degree"],
        "energy_per_vertex_limit": lim["energy_per_vertex_limit"],
        "spanning_tree_entropy_limit": lim["spanning_tree_entropy_limit"],
        "spanning_tree_entropy_bz": lim["spanning_tree_entropy_bz"],
        "spanning_tree_entropy_prop632": lim["spanning_tree_entropy_prop632"],
        "dimer_free_energy_limit": (math.log(2.0) / 3.0
                                    if p["base"] == "hexagonal" and p["insertions"] >= 1 else None),
        "method": ("energy=" + ("closed-form-y+quad-x" if p["insertions"] == 0
                                else f"trapezoid-{lim['grid']}x{lim['grid']}+clique-map")
                   + "; trees=" + ("bz-jensen+quad" if lim["spanning_tree_entropy_bz"] is not None
                                   else "prop-6.3.2")),
    }


LATTICE_LIMIT = register(Experiment(
    name="lattice_limit",
    version=1,
    doc="Infinite-lattice energy per vertex and spanning-tree entropy of C^k(base) by "
        "integration over the Brillouin zone (Zhang thesis, §6.2, §6.3).",
    params=[
        Param("base", str, "hexagonal", Choice(*BASES), "base lattice H"),
        Param("insertions", int, 1, Interval(0, 4), "number k of clique insertions: C^k(H)"),
    ],
    columns={
        "lattice_name": pa.string(),
        "cell_size": pa.int64(),
        "degree": pa.int64(),
        "energy_per_vertex_limit": pa.float64(),
        "spanning_tree_entropy_limit": pa.float64(),
        "spanning_tree_entropy_bz": pa.float64(),
        "spanning_tree_entropy_prop632": pa.float64(),
        "dimer_free_energy_limit": pa.float64(),
        "method": pa.string(),
    },
    run=run_lattice_limit,
))


# --------------------------------------------------------------------------- named regular graphs
CLIQUE_GRAPH_MAX_VERTICES = 1_500  # dense eigenvalues and exact determinant of C^k(G)


def _named_graph(p: dict, rng):
    from pipeline.kernels.graphs import (complete_graph, hypercube_graph, petersen_graph,
                                         random_regular)

    if p["graph"] == "complete":
        return complete_graph(p["size"])
    if p["graph"] == "petersen":
        return petersen_graph()
    if p["graph"] == "hypercube":
        return hypercube_graph(p["size"])
    return random_regular(p["size"], p["degree"], rng)


def _named_size(p: dict) -> tuple[int, int]:
    """(vertices, degree) of the named graph G."""
    g, size, deg = p["graph"], p["size"], p["degree"]
    if g == "complete":
        return size, size - 1
    if g == "petersen":
        return 10, 3
    if g == "hypercube":
        return 2 ** size, size
    return size, deg


def _check_named(p: dict) -> str | None:
    g, size, deg, k = p["graph"], p["size"], p["degree"], p["insertions"]
    if g == "complete" and size < 4:
        return f"graph=complete needs size >= 4 (K_size is (size-1)-regular, r >= 3); got size={size}"
    if g == "hypercube" and not 3 <= size <= 12:
        return f"graph=hypercube needs 3 <= size <= 12 (Q_size); got size={size}"
    if g == "random_regular" and (deg < 3 or deg >= size or (size * deg) % 2):
        return (f"graph=random_regular needs 3 <= degree < size and size*degree even; "
                f"got size={size}, degree={deg}")
    n, r = _named_size(p)
    total = n * r ** k
    if total > CLIQUE_GRAPH_MAX_VERTICES:
        return (f"graph={g}, size={size}, degree={deg}, insertions={k} gives C^k(G) with {total} "
                f"vertices; allowed: at most {CLIQUE_GRAPH_MAX_VERTICES}")
    return None


def run_clique_graph(p: dict, seed: int) -> dict:
    import numpy as np

    from pipeline.kernels.lattices import iterated_clique_insertion

    rng = np.random.default_rng(seed)
    g = _named_graph(p, rng)
    k = p["insertions"]
    r = int(g.degrees()[0])
    c = iterated_clique_insertion(g, k)
    a_g = g.adjacency().toarray()
    lam_g = np.linalg.eigvalsh(a_g)
    mu_g = np.linalg.eigvalsh(g.laplacian().toarray())
    connected = mu_g[1] > 1e-9
    dense = spectra.dense_summary(c)
    # spectral maps from G (Lemma 6.2.2, corrected Cor. 6.2.3, Prop. 6.4.1)
    mu = mu_g.copy()
    mu[0] = 0.0
    for _ in range(max(k - 1, 0)):
        mu = spectra.clique_laplacian_spectrum(mu, r)
    energy_map = spectra.clique_energy(r - mu, r) if k >= 1 else float(np.sum(np.abs(lam_g)))
    f_mu2 = float(mu_g[1])
    for _ in range(k):
        f_mu2 = (r + 2 - math.sqrt((r + 2) ** 2 - 4 * f_mu2)) / 2
    tau_g = counts.spanning_tree_count(g)
    tau = counts.spanning_tree_count(c)
    m_count = counts.count_perfect_matchings(c, max_states=DIMER_DP_MAX_STATES)
    prev = iterated_clique_insertion(g, k - 1) if k >= 1 else None
    bound = 2 ** (prev.m - prev.n + 1) if prev is not None else None
    return {
        "n_vertices": c.n, "n_edges": c.m, "regular_degree": r, "connected": bool(connected),
        "energy": dense["energy"], "energy_map": energy_map,
        "spanning_trees": _exact_or_none(tau), "log_spanning_trees": log_of_int(tau),
        "spanning_trees_lemma": _exact_or_none(spectra.clique_tree_count(tau_g, g.n, r, k)),
        "dimers": _exact_or_none(m_count) if m_count else None,
        "log_dimers": log_of_int(m_count) if m_count else None,
        "dimers_lemma_bound": _exact_or_none(bound) if bound else None,
        "algebraic_connectivity": dense["algebraic_connectivity"] if connected else 0.0,
        "algebraic_connectivity_map": f_mu2,
        "kirchhoff_index": dense["kirchhoff_index"] if connected else None,
    }


CLIQUE_GRAPH = register(Experiment(
    name="clique_graph",
    version=1,
    doc="Clique insertion C^k(G) of named regular graphs (K_n, Petersen, Q_d, random regular): "
        "direct values beside the thesis's spectral maps and counting lemmas (ch. 6, §6.4 expansion).",
    stochastic=True,
    params=[
        Param("graph", str, "petersen", Choice("complete", "petersen", "hypercube",
                                              "random_regular"), "named regular graph G"),
        Param("size", int, 10, Interval(3, 1_500),
              "complete: n of K_n; hypercube: d of Q_d; random_regular: n; petersen: ignored"),
        Param("degree", int, 3, Interval(3, 1_499), "random_regular only: the degree r"),
        Param("insertions", int, 1, Interval(0, 6), "number k of clique insertions"),
    ],
    columns={
        "n_vertices": pa.int64(), "n_edges": pa.int64(), "regular_degree": pa.int64(),
        "connected": pa.bool_(),
        "energy": pa.float64(), "energy_map": pa.float64(),
        "spanning_trees": pa.string(), "log_spanning_trees": pa.float64(),
        "spanning_trees_lemma": pa.string(),
        "dimers": pa.string(), "log_dimers": pa.float64(), "dimers_lemma_bound": pa.string(),
        "algebraic_connectivity": pa.float64(), "algebraic_connectivity_map": pa.float64(),
        "kirchhoff_index": pa.float64(),
    },
    run=run_clique_graph,
    checks=[PointCheck(("graph", "size", "degree", "insertions"), _check_named)],
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/lattice.md; logarithms are natural ("nat"). The exact counts
# (spanning trees, dimers) run to thousands of digits: EXACT_SCIENTIFIC, so paper tables print
# them as 1.23457e+45 (the stored strings and the CSV keep every digit).
_SIZE = {"n_vertices": ("number of vertices N of the graph", "1"),
         "n_edges": ("number of edges of the graph", "1")}
# Parameters: "" keeps the Param.doc as the description; the entry gives the unit.
document(LATTICE, {
    "base": ("", None), "insertions": ("", "1"), "L1": ("", "1"), "L2": ("", "1"),
    "boundary": ("", None),
    **_SIZE,
    "energy": ("graph energy E(G) = sum |lambda| over the adjacency eigenvalues; null where "
               "too large for the method (docs/lattice.md, Methods)", "1"),
    "energy_per_vertex": ("E / N", "1"),
    "log_spanning_trees": ("ln tau(G), tau = number of spanning trees", "nat"),
    "spanning_tree_entropy": ("ln τ / N", "nat"),
    "spanning_trees": ("tau(G), the number of spanning trees, while exact is feasible and at "
                       "most 4,000 digits; else null", "1", EXACT_SCIENTIFIC),
    "log_dimers": ("ln M(G), M = number of perfect matchings (dimer coverings); null when "
                   "there is none or M is not computed", "nat"),
    "dimers": ("M(G), the number of perfect matchings (at most 4,000 digits); null as "
               "log_dimers", "1", EXACT_SCIENTIFIC),
    "kirchhoff_index": ("Kirchhoff index Kf = N sum 1/mu over the non-zero Laplacian "
                        "eigenvalues; null where energy is null", "1"),
    "algebraic_connectivity": ("mu_2, the second-smallest Laplacian eigenvalue", "1"),
    "method": ("the algorithms that produced the row (spectrum, trees, dimers)", None),
})
document(LATTICE_LIMIT, {
    "base": ("", None), "insertions": ("", "1"),
    "lattice_name": ("name of C^k(H), e.g. 3-12-12, 3-6-24, C^2(square)", None),
    "cell_size": ("vertices per unit cell, c r^k", "1"),
    "degree": ("vertex degree r", "1"),
    "energy_per_vertex_limit": ("lim E / N of the infinite lattice (>= 10 correct digits)", "1"),
    "spanning_tree_entropy_limit": ("lim ln tau / N (>= 10 correct digits): the Brillouin-zone "
                                    "value when computed, else Proposition 6.3.2", "nat"),
    "spanning_tree_entropy_bz": ("direct Brillouin-zone integral of ln det L(theta) (cells of "
                                 "at most 64 vertices; else null)", "nat"),
    "spanning_tree_entropy_prop632": ("Proposition 6.3.2: r^-k (z_H + s_k ln(r (r + 2))) from "
                                      "the base lattice's value", "nat"),
    "dimer_free_energy_limit": ("(2 / N) ln M -> ln 2 / 3 for C^k(hexagonal), k >= 1 "
                                "(Proposition 6.3.5); null otherwise", "nat"),
    "method": ("quadrature used", None),
})
document(CLIQUE_GRAPH, {
    "graph": ("", None), "size": ("", "1"), "degree": ("", "1"), "insertions": ("", "1"),
    **_SIZE,
    "regular_degree": ("degree r of the base graph G", "1"),
    "connected": ("whether C^k(G) is connected", None),
    "energy": ("graph energy of C^k(G) from its dense adjacency eigenvalues", "1"),
    "energy_map": ("the same by corrected Corollary 6.2.3 on the spectrum of C^(k-1)(G) from "
                   "the Laplacian map of G", "1"),
    "spanning_trees": ("exact matrix-tree count tau(C^k(G))", "1", EXACT_SCIENTIFIC),
    "log_spanning_trees": ("ln tau(C^k(G))", "nat"),
    "spanning_trees_lemma": ("tau(C^k(G)) by Lemma 6.3.1 from the exact tau(G)", "1",
                             EXACT_SCIENTIFIC),
    "dimers": ("exact number of perfect matchings M(C^k(G)) (frontier DP; null if none or "
               "infeasible)", "1", EXACT_SCIENTIFIC),
    "log_dimers": ("ln M(C^k(G))", "nat"),
    "dimers_lemma_bound": ("2^(m - n + 1) of C^(k-1)(G) (Lemma 6.3.4): equal to M for r = 3, a "
                           "lower bound for r >= 4", "1", EXACT_SCIENTIFIC),
    "algebraic_connectivity": ("mu_2(C^k(G)), computed directly", "1"),
    "algebraic_connectivity_map": ("f^k(mu_2(G)), f(x) = (r + 2 - sqrt((r + 2)^2 - 4x)) / 2 "
                                   "(section 6.4, Proposition 6.4.1)", "1"),
    "kirchhoff_index": ("Kirchhoff index of C^k(G)", "1"),
})
