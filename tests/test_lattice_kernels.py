"""Kernels of the lattice family (seed 004, ch. 6): builders, clique insertion, spectral maps,
exact counts, Fourier paths and infinite-lattice limits, each against an independent oracle."""

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.kernels import lattice_counts as counts
from pipeline.kernels import lattice_spectra as spectra
from pipeline.kernels.graphs import (complete_graph, from_networkx, hypercube_graph,
                                     petersen_graph, random_regular)
from pipeline.kernels.lattices import (BASES, BOUNDARIES, MIN_CELLS, base_cell,
                                       boundary_edge_count, build_lattice, clique_insertion,
                                       iterated_clique_insertion, lattice_cell, lattice_graph,
                                       lattice_rotation, lattice_size)

CATALAN = 0.915965594177219015054603514932384110774


def _edge_set(g):
    return set(map(tuple, g.edges.tolist()))


# --------------------------------------------------------------------------- builders
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("k", [0, 1, 2])
def test_torus_is_regular_and_boundaries_are_spanning_subgraphs(base, k):
    L1, L2 = MIN_CELLS[base] + 1, MIN_CELLS[base] + 2
    torus = build_lattice(base, k, L1, L2, "torus")
    r = {"hexagonal": 3, "square": 4, "triangular": 6}[base]
    assert np.all(torus.degrees() == r)
    assert (torus.n, torus.m) == lattice_size(base, k, L1, L2)
    assert nx.is_connected(torus.to_networkx())
    for boundary in BOUNDARIES:
        g = build_lattice(base, k, L1, L2, boundary)
        assert g.n == torus.n
        assert g.m == boundary_edge_count(base, k, L1, L2, boundary)
        assert _edge_set(g) <= _edge_set(torus)
    # the cut edges are the inter-clique edges that descend from base seam edges
    cut = torus.m - build_lattice(base, k, L1, L2, "free").m
    base_cut = build_lattice(base, 0, L1, L2, "torus").m - build_lattice(base, 0, L1, L2, "free").m
    assert cut == base_cut


def test_square_torus_matches_networkx_grid():
    g = build_lattice("square", 0, 5, 4, "torus")
    assert nx.is_isomorphic(g.to_networkx(), nx.grid_2d_graph(5, 4, periodic=True))
    free = build_lattice("square", 0, 5, 4, "free")
    assert nx.is_isomorphic(free.to_networkx(), nx.grid_2d_graph(5, 4))


def test_hexagonal_and_triangular_torus_local_structure():
    """networkx's periodic honeycomb uses a different (rectangular) torus, so check the local
    structure instead: honeycomb = bipartite, girth 6; triangular = 6 triangles at each vertex."""
    hexa = build_lattice("hexagonal", 0, 5, 6, "torus").to_networkx()
    assert nx.is_bipartite(hexa) and nx.girth(hexa) == 6
    tri = build_lattice("triangular", 0, 5, 6, "torus").to_networkx()
    assert set(nx.triangles(tri).values()) == {6}
    # 3-12-12: each vertex in exactly one triangle; the free 3-12-12 patch is planar
    t31212 = build_lattice("hexagonal", 1, 4, 4, "torus").to_networkx()
    assert set(nx.triangles(t31212).values()) == {1}
    assert nx.check_planarity(build_lattice("hexagonal", 1, 4, 4, "free").to_networkx())[0]


def test_clique_insertion_of_k4_is_the_truncated_tetrahedron():
    assert nx.is_isomorphic(clique_insertion(complete_graph(4)).to_networkx(),
                            nx.truncated_tetrahedron_graph())


@pytest.mark.parametrize("base,k,L", [("hexagonal", 1, 3), ("hexagonal", 2, 2),
                                      ("square", 1, 3), ("triangular", 1, 3)])
def test_cell_clique_insertion_equals_explicit_clique_insertion(base, k, L):
    """C^k built on the unit cell = C^k applied to the explicit torus graph."""
    via_cell = build_lattice(base, k, L, L, "torus")
    explicit = iterated_clique_insertion(build_lattice(base, 0, L, L, "torus"), k)
    assert (via_cell.n, via_cell.m) == (explicit.n, explicit.m)
    assert nx.vf2pp_is_isomorphic(via_cell.to_networkx(), explicit.to_networkx())


def test_too_small_torus_raises():
    with pytest.raises(ValueError):
        lattice_graph(base_cell("square"), 2, 5, "torus")


# --------------------------------------------------------------------------- spectral maps
def _named_regular_graphs():
    rng = np.random.default_rng(7)
    return [complete_graph(4), petersen_graph(), hypercube_graph(3), complete_graph(5),
            hypercube_graph(4), build_lattice("hexagonal", 0, 3, 3, "torus"),
            random_regular(12, 3, rng), random_regular(10, 4, rng)]


@pytest.mark.parametrize("g", _named_regular_graphs(), ids=lambda g: g.name)
def test_lemma_6_2_2_adjacency_and_laplacian_maps(g):
    r = int(g.degrees()[0])
    c = clique_insertion(g)
    lam = np.linalg.eigvalsh(g.adjacency().toarray())
    direct = np.linalg.eigvalsh(c.adjacency().toarray())
    np.testing.assert_allclose(np.sort(spectra.clique_adjacency_spectrum(lam, r)), direct,
                               atol=1e-9)
    mu = np.linalg.eigvalsh(g.laplacian().toarray())
    direct_mu = np.linalg.eigvalsh(c.laplacian().toarray())
    np.testing.assert_allclose(np.sort(spectra.clique_laplacian_spectrum(mu, r)), direct_mu,
                               atol=1e-9)


@pytest.mark.parametrize("g", _named_regular_graphs(), ids=lambda g: g.name)
def test_corrected_corollary_6_2_3(g):
    """E(C(G)) = sum sqrt(r^2 + 4(lambda + 1)) + (r - 2) n; the printed '+ n' is right only for r = 3."""
    r, n = int(g.degrees()[0]), g.n
    lam = np.linalg.eigvalsh(g.adjacency().toarray())
    direct = np.sum(np.abs(np.linalg.eigvalsh(clique_insertion(g).adjacency().toarray())))
    core = np.sum(np.sqrt(r * r + 4 * (lam + 1)))
    assert spectra.clique_energy(lam, r) == pytest.approx(direct, abs=1e-8)
    assert core + (r - 2) * n == pytest.approx(direct, abs=1e-8)
    printed = core + n
    if r == 3:
        assert printed == pytest.approx(direct, abs=1e-8)
    else:
        assert abs(printed - direct) == pytest.approx((r - 3) * n, abs=1e-8)


def test_proposition_6_4_1_algebraic_connectivity_map():
    g = petersen_graph()
    mu2 = np.linalg.eigvalsh(g.laplacian().toarray())[1]
    r = 3
    f = (r + 2 - math.sqrt((r + 2) ** 2 - 4 * mu2)) / 2
    assert np.linalg.eigvalsh(clique_insertion(g).laplacian().toarray())[1] == pytest.approx(f)


# --------------------------------------------------------------------------- exact counts
@settings(max_examples=25, deadline=None)
@given(st.integers(3, 14), st.floats(0.3, 0.9), st.integers(0, 10**6))
def test_matrix_tree_against_networkx(n, p, seed):
    g = nx.gnp_random_graph(n, p, seed=seed)
    graph = from_networkx(g)
    expected = round(nx.number_of_spanning_trees(g)) if nx.is_connected(g) else 0
    assert counts.spanning_tree_count(graph) == expected


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 7).flatmap(
    lambda n: st.lists(st.lists(st.integers(-50, 50), min_size=n, max_size=n),
                       min_size=n, max_size=n)))
def test_modular_determinant_against_bareiss(rows):
    m = np.array(rows, dtype=np.int64)
    exact = counts.bareiss_determinant(rows)
    assert counts.integer_determinant(m) == exact
    assert exact == round(np.linalg.det(m.astype(float)))  # |det| <= 350^7 < 2^53: floats exact enough


def test_exact_tree_count_of_hexagonal_torus_equals_fourier_product():
    g = build_lattice("hexagonal", 0, 4, 5, "torus")
    tau = counts.spanning_tree_count(g)
    mu = spectra.torus_eigenvalues(base_cell("hexagonal"), 4, 5, laplacian=True)
    assert math.log(tau) == pytest.approx(np.sum(np.log(mu[1:])) - math.log(g.n), rel=1e-12)
    assert tau == counts.bareiss_determinant(g.laplacian().toarray().astype(int)[1:, 1:])


@pytest.mark.parametrize("g,k", [(complete_graph(4), 1), (complete_graph(4), 2),
                                 (petersen_graph(), 1), (petersen_graph(), 2),
                                 (complete_graph(5), 1), (hypercube_graph(3), 2),
                                 (build_lattice("hexagonal", 0, 3, 3, "torus"), 1),
                                 (build_lattice("square", 0, 3, 3, "torus"), 1)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_lemma_6_3_1_exact(g, k):
    r = int(g.degrees()[0])
    tau = counts.spanning_tree_count(g)
    direct = counts.spanning_tree_count(iterated_clique_insertion(g, k))
    assert direct == spectra.clique_tree_count(tau, g.n, r, k)
    assert math.log(direct) == pytest.approx(
        spectra.clique_log_tree_count(math.log(tau), g.n, r, k), rel=1e-12)


def test_lemma_6_3_1_on_random_regular_graphs():
    rng = np.random.default_rng(11)
    for n, r in [(10, 3), (12, 3), (9, 4), (8, 5)]:
        g = random_regular(n, r, rng)
        if not nx.is_connected(g.to_networkx()):
            continue
        tau = counts.spanning_tree_count(g)
        assert counts.spanning_tree_count(clique_insertion(g)) == \
            spectra.clique_tree_count(tau, n, r, 1)


@pytest.mark.parametrize("g", [complete_graph(4), petersen_graph(), hypercube_graph(3),
                               build_lattice("hexagonal", 0, 2, 3, "torus")],
                         ids=lambda g: g.name)
def test_dimers_of_clique_inserted_cubic_graphs_lemma_6_3_4(g):
    c = clique_insertion(g)
    expected = counts.clique_dimer_count_cubic(g.n, g.m)
    assert counts.count_perfect_matchings(c) == expected
    if c.n <= 24:
        assert counts.brute_force_perfect_matchings(c) == expected


@pytest.mark.parametrize("g", [complete_graph(5), hypercube_graph(4)], ids=lambda g: g.name)
def test_dimers_for_r4_only_lower_bound(g):
    """r = 4: Lemma 6.3.4 gives only M(C(G)) >= 2^(m - n + 1), and here it is strict."""
    c = clique_insertion(g)
    exact = counts.count_perfect_matchings(c)
    assert exact is not None
    assert exact > 2 ** (g.m - g.n + 1)
    if c.n <= 20:
        assert exact == counts.brute_force_perfect_matchings(c)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_dimer_dp_against_brute_force_on_small_lattices(base, boundary):
    L = MIN_CELLS[base]
    g = build_lattice(base, 0, L, L + 1, boundary) if base != "hexagonal" else \
        build_lattice(base, 0, 2, 3, boundary)
    assert counts.count_perfect_matchings(g) == counts.brute_force_perfect_matchings(g)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 16), st.floats(0.2, 0.8), st.integers(0, 10**6))
def test_dimer_dp_against_brute_force_random(n, p, seed):
    graph = from_networkx(nx.gnp_random_graph(n, p, seed=seed))
    assert counts.count_perfect_matchings(graph) == counts.brute_force_perfect_matchings(graph)


def test_square_grid_dimers_against_kasteleyn_formula():
    """Kasteleyn: M(P_m x P_n) = prod_{j,k} (4 cos^2(j pi/(m+1)) + 4 cos^2(k pi/(n+1)))^(1/4)."""
    m, n = 6, 8
    g = build_lattice("square", 0, m, n, "free")
    j = np.arange(1, m + 1)[:, None]
    k = np.arange(1, n + 1)[None, :]
    prod = np.prod((4 * np.cos(j * np.pi / (m + 1)) ** 2 + 4 * np.cos(k * np.pi / (n + 1)) ** 2)
                   ** 0.25)
    assert counts.count_perfect_matchings(g) == round(prod) == 167089  # Kasteleyn product, independent of the DP


# --------------------------------------------------------------------------- Kasteleyn / Pfaffian
def _planar_case(base, k, L1, L2, boundary):
    cell = lattice_cell(base, k)
    return lattice_graph(cell, L1, L2, boundary), lattice_rotation(cell, L1, L2, boundary)


@pytest.mark.parametrize("base,k", [("square", 0), ("triangular", 0), ("hexagonal", 0),
                                    ("hexagonal", 1), ("hexagonal", 2)])
@pytest.mark.parametrize("boundary", ["cylinder", "free"])
@pytest.mark.parametrize("L1,L2", [(3, 3), (3, 4), (4, 3)])
def test_kasteleyn_pfaffian_equals_dimer_dp_and_brute_force(base, k, boundary, L1, L2):
    g, rot = _planar_case(base, k, L1, L2, boundary)
    exact = counts.kasteleyn_dimer_count(g, rot)
    assert exact == counts.count_perfect_matchings(g, max_states=1 << 18, max_work=10**8)
    if g.n <= 24:
        assert exact == counts.brute_force_perfect_matchings(g)
    if exact:
        assert counts.kasteleyn_log_dimers(g, rot) == pytest.approx(math.log(exact), rel=1e-11)


@pytest.mark.parametrize("base,k", [("hexagonal", 0), ("hexagonal", 1), ("hexagonal", 2),
                                    ("square", 0), ("triangular", 0)])
@pytest.mark.parametrize("boundary", ["cylinder", "free"])
def test_kasteleyn_on_the_smallest_allowed_lattices(base, k, boundary):
    """Circumference MIN_CELLS (2 for the honeycomb): the annulus drawing must still be planar."""
    L = MIN_CELLS[base]
    for L1, L2 in [(L, L), (L, L + 2)]:
        g, rot = _planar_case(base, k, L1, L2, boundary)
        assert counts.kasteleyn_dimer_count(g, rot) == counts.count_perfect_matchings(
            g, max_states=1 << 18, max_work=10**8)


@pytest.mark.parametrize("L,expected", [(8, 12988816), (10, 258584046368),
                                        (12, 53060477521960000)])
def test_kasteleyn_square_grid_against_oeis_a004003(L, expected):
    """Domino tilings of the 2n x 2n board (OEIS A004003), beyond the DP's reach at 12 x 12."""
    g, rot = _planar_case("square", 0, L, L, "free")
    assert counts.kasteleyn_dimer_count(g, rot) == expected


@pytest.mark.parametrize("boundary", ["cylinder", "free"])
def test_kasteleyn_cut_3_12_12_matches_lemma_6_3_4_beyond_dp(boundary):
    """C(G) = L(S(G)) with G the cut hexagonal lattice (max degree 3): M = 2^(m - n + 1),
    checked exactly at 6 x 6 and as a logarithm at 40 x 40 (19,200 vertices)."""
    for L, exact in [(6, True), (40, False)]:
        base = build_lattice("hexagonal", 0, L, L, boundary)
        g, rot = _planar_case("hexagonal", 1, L, L, boundary)
        e = base.m - base.n + 1
        if exact:
            assert counts.kasteleyn_dimer_count(g, rot) == 2 ** e
        assert counts.kasteleyn_log_dimers(g, rot) == pytest.approx(e * math.log(2), rel=1e-10)


@pytest.mark.parametrize("base,k,boundary", [("square", 0, "torus"), ("hexagonal", 1, "torus"),
                                             ("square", 1, "free"), ("triangular", 1, "cylinder")])
def test_kasteleyn_refuses_non_planar_drawings(base, k, boundary):
    g, rot = _planar_case(base, k, 4, 4, boundary)
    assert counts.kasteleyn_matrix(g, rot) is None
    assert counts.kasteleyn_dimer_count(g, rot) is None


def test_kasteleyn_no_perfect_matching():
    """A star K_{1,3} drawn in the plane has no perfect matching: |Pf K| = 0 and ln = -inf."""
    from pipeline.kernels.graphs import from_edges
    g = from_edges(4, [(0, 1), (0, 2), (0, 3)])
    rot = [np.array([1, 2, 3]), np.array([0]), np.array([0]), np.array([0])]
    assert counts.kasteleyn_dimer_count(g, rot) == 0
    assert counts.kasteleyn_log_dimers(g, rot) == -math.inf


# --------------------------------------------------------------------------- Fourier vs explicit
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("k", [0, 1, 2])
def test_fourier_paths_agree_with_dense_explicit_graph(base, k):
    L1, L2 = MIN_CELLS[base] + 1, MIN_CELLS[base]
    cell = lattice_cell(base, k)
    checks = [("torus", spectra.torus_summary(cell, L1, L2)),
              ("torus", spectra.torus_summary(cell, L1, L2, base_cell(base), k))]
    if L1 >= 3:
        checks.append(("cylinder", spectra.cylinder_summary(cell, L1, L2)))
    for boundary, fast in checks:
        dense = spectra.dense_summary(lattice_graph(cell, L1, L2, boundary))
        for key in ("energy", "log_spanning_trees", "kirchhoff_index", "algebraic_connectivity"):
            assert fast[key] == pytest.approx(dense[key], rel=1e-9), (boundary, key)


@pytest.mark.parametrize("boundary", ["cylinder", "free"])
def test_sparse_lu_log_det_against_dense_and_exact(boundary):
    g = build_lattice("hexagonal", 1, 4, 5, boundary)
    exact = counts.spanning_tree_count(g)
    assert spectra.sparse_log_tree_count(g) == pytest.approx(math.log(exact), rel=1e-11)
    assert spectra.dense_log_tree_count(g) == pytest.approx(math.log(exact), rel=1e-11)
    mu = np.linalg.eigvalsh(g.laplacian().toarray())
    assert spectra.sparse_algebraic_connectivity(g) == pytest.approx(mu[1], rel=1e-8)


# --------------------------------------------------------------------------- limits
def test_base_limits_against_closed_forms_and_literature():
    assert spectra.base_energy_limit("square") == pytest.approx(16 / math.pi ** 2, rel=1e-12)
    assert spectra.base_tree_entropy_limit("square") == pytest.approx(4 * CATALAN / math.pi,
                                                                      rel=1e-12)
    # z_hc = 0.8076649... [Shrock and Wu, 2000] as quoted in §6.3.1; z_tri = 2 z_hc
    assert round(spectra.base_tree_entropy_limit("hexagonal"), 7) == 0.8076649
    assert spectra.base_tree_entropy_limit("triangular") == pytest.approx(
        2 * spectra.base_tree_entropy_limit("hexagonal"), rel=1e-13)
    # honeycomb energy per vertex 1.5746 [Yan and Zhang, 2009]
    assert round(spectra.base_energy_limit("hexagonal"), 4) == 1.5746


@pytest.mark.parametrize("base", BASES)
def test_base_energy_limit_against_brute_force_2d_grid(base):
    """Independent check: midpoint rule on a 600 x 600 grid of the Bloch eigenvalues."""
    m = 600
    t = 2 * np.pi * (np.arange(m) + 0.5) / m
    x, y = np.meshgrid(t, t, indexing="ij")
    cell = base_cell(base)
    lam = np.linalg.eigvalsh(spectra.bloch_matrices(cell, x, y)) if cell.size > 1 else \
        spectra.bloch_matrices(cell, x, y)[:, 0, 0].real
    brute = np.mean(np.abs(lam)) * (cell.size if cell.size > 1 else 1) / cell.size
    assert spectra.base_energy_limit(base) == pytest.approx(brute, abs=2e-5)


@pytest.mark.parametrize("k", [1, 2])
def test_clique_energy_limit_against_direct_bloch_trapezoid(k):
    """The map-based limit against the Bloch spectrum of C^{k-1}(hex) itself (no map)."""
    r = 3
    value, _ = spectra.clique_energy_limit(base_cell("hexagonal"), k)
    cell = lattice_cell("hexagonal", k - 1)
    mu = spectra.torus_eigenvalues(cell, 96, 96, laplacian=True)
    direct = (np.mean(np.sqrt((r + 2) ** 2 - 4 * mu)) + (r - 2)) / r
    assert value == pytest.approx(direct, abs=1e-13)
    # and the energy of a 96x96 torus of C^k itself (absolute values of its own Bloch bands)
    lam = spectra.torus_eigenvalues(lattice_cell("hexagonal", k), 96, 96)
    assert np.mean(np.abs(lam)) == pytest.approx(value, abs=1e-12)


def test_thesis_limits_3_12_12_and_3_6_24():
    l1 = spectra.lattice_limits("hexagonal", 1)
    l2 = spectra.lattice_limits("hexagonal", 2)
    # printed: 1.4825..., 1.4908... (energy); 0.7205633..., 0.6915295... (spanning trees)
    assert math.floor(l1["energy_per_vertex_limit"] * 1e4 + 0.5) / 1e4 == 1.4825
    assert math.floor(l2["energy_per_vertex_limit"] * 1e4) / 1e4 == 1.4908
    assert round(l1["spanning_tree_entropy_limit"], 7) == 0.7205633
    assert round(l2["spanning_tree_entropy_limit"], 7) == 0.6915295
    # the thesis's own integral for 3-12-12 (§6.2.1), evaluated independently
    m = 256
    t = 2 * np.pi * np.arange(m) / m
    x, y = np.meshgrid(t, t, indexing="ij")
    integrand = np.sqrt(26 + 2 * np.sqrt(121 - 32 * np.cos(x) - 32 * np.cos(y)
                                         - 32 * np.cos(x + y)))
    assert 1 / 3 + np.mean(integrand) / 6 == pytest.approx(l1["energy_per_vertex_limit"],
                                                            abs=1e-13)
    # ... and the 3-6-24 integral of §6.2.2 with the (sqrt5 + sqrt13 + 6)/18 term
    f = np.sqrt(3 + 2 * np.cos(x) + 2 * np.cos(y) + 2 * np.cos(x + y))
    g = np.sqrt(30 + 2 * np.sqrt(173 - 16 * f)) + np.sqrt(30 + 2 * np.sqrt(173 + 16 * f))
    assert np.mean(g) / 18 + (math.sqrt(5) + math.sqrt(13) + 6) / 18 == pytest.approx(
        l2["energy_per_vertex_limit"], abs=1e-13)
    # erratum: the thesis's "approx 26.8344 mn" for E(S^t) is 18 * 1.490833... = 26.8350 mn
    assert round(18 * l2["energy_per_vertex_limit"], 4) == 26.8350
    assert round(6 * l1["energy_per_vertex_limit"], 3) == 8.895


@pytest.mark.parametrize("base,k", [(b, k) for b in BASES for k in (0, 1, 2)])
def test_tree_entropy_bz_equals_proposition_6_3_2(base, k):
    lim = spectra.lattice_limits(base, k)
    assert lim["spanning_tree_entropy_bz"] == pytest.approx(lim["spanning_tree_entropy_prop632"],
                                                            abs=1e-12)


def test_proposition_6_3_5_dimer_free_energy():
    """Z = (2/N) ln M(C^k(H)) = ln 2 / 3 up to the +1 in the exponent, for the hexagonal torus."""
    for k in (1, 2):
        torus = build_lattice("hexagonal", k - 1, 3, 3, "torus")
        n = 3 * torus.n
        m_count = counts.clique_dimer_count_cubic(torus.n, torus.m)
        assert 2 / n * math.log(m_count) == pytest.approx(math.log(2) / 3, abs=2 / n)


@pytest.mark.parametrize("boundary", ["cylinder", "free"])
@pytest.mark.parametrize("L1,L2", [(3, 3), (4, 4), (3, 5)])
def test_example_6_3_6_dimers_of_cut_3_12_12(boundary, L1, L2):
    """Example 6.3.6: cylinder and free 3-12-12 lattices have the same free energy per dimer
    ln 2 / 3. Exactly (DP): M = 2^(N/6 + 1 - #cut seam edges), and #cut = O(L), so
    (2/N) ln M -> ln 2 / 3."""
    g = build_lattice("hexagonal", 1, L1, L2, boundary)
    cut = (build_lattice("hexagonal", 0, L1, L2, "torus").m
           - build_lattice("hexagonal", 0, L1, L2, boundary).m)
    assert counts.count_perfect_matchings(g, max_states=1 << 18) == 2 ** (g.n // 6 + 1 - cut)
    assert abs(2 / g.n * math.log(2) * (g.n // 6 + 1 - cut) - math.log(2) / 3) <= \
        2 * math.log(2) * (cut + 1) / g.n


def test_hexagonal_energy_limit_to_ten_digits_by_richardson_on_tori():
    """Torus energies of the honeycomb converge like L^-3 (conic Dirac points); Richardson
    extrapolation of L = 256, 512, 1024 (Fourier path, no quadrature) gives >= 10 digits."""
    cell = base_cell("hexagonal")
    vals = [np.mean(np.abs(spectra.torus_eigenvalues(cell, L, L))) for L in (256, 512, 1024)]
    extrapolated = (8 * vals[2] - vals[1]) / 7
    assert spectra.base_energy_limit("hexagonal") == pytest.approx(extrapolated, abs=1e-10)


@pytest.mark.parametrize("base", BASES)
def test_base_energy_limit_against_gauss_legendre(base):
    """The adaptive outer quadrature against 600-point Gauss-Legendre split at the same kinks."""
    from pipeline.kernels.lattice_spectra import _mean_abs_cos, _mean_sqrt_cos

    funcs = {"square": (lambda x: _mean_abs_cos(2 * math.cos(x), 2.0), []),
             "triangular": (lambda x: _mean_abs_cos(2 * math.cos(x), 4 * abs(math.cos(x / 2))),
                            [2 * math.acos((math.sqrt(3) - 1) / 2)]),
             "hexagonal": (lambda x: _mean_sqrt_cos(3 + 2 * math.cos(x),
                                                    4 * abs(math.cos(x / 2))), [2 * math.pi / 3])}
    f, kinks = funcs[base]
    t, w = np.polynomial.legendre.leggauss(600)
    edges = [0.0, *kinks, math.pi]
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        xs = (hi - lo) / 2 * t + (hi + lo) / 2
        total += (hi - lo) / 2 * float(np.dot(w, [f(x) for x in xs]))
    assert spectra.base_energy_limit(base) == pytest.approx(total / math.pi, abs=1e-11)


def test_sparse_algebraic_connectivity_is_the_same_to_the_bit_at_every_call():
    """ARPACK's default start vector is random and drawn afresh at each call: mu_2 of one
    graph came out in up to 6 values a few ulps apart in 8 calls, so a resumed sweep's rows
    differed from a clean run's. A fixed start vector makes a point's result reproducible;
    still mu_2 of the dense spectrum."""
    g = build_lattice("hexagonal", 1, 12, 12, "free")
    values = {spectra.sparse_algebraic_connectivity(g) for _ in range(8)}
    assert len(values) == 1
    mu = np.linalg.eigvalsh(g.laplacian().toarray())
    assert values.pop() == pytest.approx(mu[1], rel=1e-9)
