"""Experiments `lattice` and `lattice_limit` through resolve + run (issue 4)."""

import math

import networkx as nx
import pytest

from pipeline.experiments.base import ParamError, log_of_int
from pipeline.experiments.lattice import LATTICE, LATTICE_LIMIT
from pipeline.kernels import lattice_counts as counts
from pipeline.kernels.lattice_spectra import torus_summary
from pipeline.kernels.lattices import build_lattice, lattice_cell


def _run(**kw):
    return LATTICE.run(LATTICE.resolve(**kw), 0)


def test_default_point_runs_and_rows_use_declared_columns():
    row = _run()
    assert set(row) <= set(LATTICE.columns)
    assert row["n_vertices"] == 128 and row["n_edges"] == 192
    assert row["energy_per_vertex"] == pytest.approx(row["energy"] / 128)
    assert row["spanning_tree_entropy"] == pytest.approx(row["log_spanning_trees"] / 128)
    assert row["log_spanning_trees"] == pytest.approx(log_of_int(int(row["spanning_trees"])))


@pytest.mark.parametrize("boundary", ["torus", "cylinder", "free"])
def test_small_lattice_against_networkx_and_brute_force(boundary):
    row = _run(base="square", insertions=0, L1=3, L2=4, boundary=boundary)
    g = build_lattice("square", 0, 3, 4, boundary)
    assert int(row["spanning_trees"]) == round(nx.number_of_spanning_trees(g.to_networkx()))
    assert int(row["dimers"]) == counts.brute_force_perfect_matchings(g)
    assert row["n_edges"] == g.m
    nxg = g.to_networkx()
    assert row["algebraic_connectivity"] == pytest.approx(nx.algebraic_connectivity(
        nxg, method="tracemin_lu", tol=1e-12), rel=1e-6)
    # Kirchhoff index = sum over pairs of effective resistances
    kf = nx.effective_graph_resistance(nxg)
    assert row["kirchhoff_index"] == pytest.approx(kf, rel=1e-9)


def test_clique_inserted_torus_uses_lemmas_and_they_agree_with_direct_counts():
    row = _run(base="hexagonal", insertions=1, L1=3, L2=4, boundary="torus")
    assert "dimers=lemma-6.3.4" in row["method"]
    g = build_lattice("hexagonal", 1, 3, 4, "torus")
    assert int(row["dimers"]) == counts.count_perfect_matchings(g, max_states=1 << 18)
    assert int(row["spanning_trees"]) == counts.spanning_tree_count(g)
    # a torus too large for the direct determinant: Lemma 6.3.1 from the exact base count
    big = _run(base="hexagonal", insertions=2, L1=8, L2=8, boundary="torus")
    assert "trees=lemma-6.3.1" in big["method"]
    direct = torus_summary(lattice_cell("hexagonal", 2), 8, 8)  # Bloch blocks of 3-6-24 itself
    assert log_of_int(int(big["spanning_trees"])) == pytest.approx(direct["log_spanning_trees"],
                                                                   rel=1e-12)


@pytest.mark.parametrize("boundary", ["cylinder", "free"])
def test_planar_lattices_beyond_the_dp_get_exact_dimers_by_pfaffian(boundary):
    """3-12-12 on 8 x 8 cells was 'dimers=infeasible' under the DP alone; Lemma 6.3.4
    (M(C(G)) = 2^(m - n + 1), G the cut hexagonal lattice) is the independent answer."""
    row = _run(base="hexagonal", insertions=1, L1=8, L2=8, boundary=boundary)
    assert "dimers=kasteleyn-pfaffian-exact" in row["method"]
    base = build_lattice("hexagonal", 0, 8, 8, boundary)
    assert int(row["dimers"]) == 2 ** (base.m - base.n + 1)
    big = _run(base="hexagonal", insertions=1, L1=16, L2=16, boundary=boundary)
    assert "dimers=kasteleyn-pfaffian-lu" in big["method"] and big["dimers"] is None
    base = build_lattice("hexagonal", 0, 16, 16, boundary)
    assert big["log_dimers"] == pytest.approx((base.m - base.n + 1) * math.log(2), rel=1e-10)


def test_odd_lattice_has_null_dimers():
    row = _run(base="square", insertions=0, L1=3, L2=3, boundary="free")
    assert row["dimers"] is None and row["log_dimers"] is None
    assert "odd" in row["method"]


def test_large_cylinder_and_free_use_sparse_path():
    row = _run(base="hexagonal", insertions=0, L1=50, L2=50, boundary="free")  # 5,000 > 4,000
    assert row["energy"] is None and "sparse-lu" in row["method"]
    assert row["spanning_tree_entropy"] == pytest.approx(0.8076649, abs=0.05)


def test_free_lattices_up_to_4000_vertices_get_dense_energy():
    row = _run(base="hexagonal", insertions=0, L1=40, L2=40, boundary="free")  # 3,200 vertices
    assert "dense-eigvalsh" in row["method"]
    limit = LATTICE_LIMIT.run(LATTICE_LIMIT.resolve(base="hexagonal", insertions=0), 0)
    limit = limit[0] if isinstance(limit, list) else limit
    # the free boundary lowers the energy per vertex by O(1/L) towards the limit
    assert 0 < limit["energy_per_vertex_limit"] - row["energy_per_vertex"] < 0.03


@pytest.mark.parametrize("bad", [dict(base="kagome"), dict(boundary="mobius"),
                                 dict(insertions=-1), dict(insertions=7),
                                 dict(base="square", L1=2), dict(base="triangular", L2=2),
                                 dict(L1=1), dict(L1="x"),
                                 dict(L1=5000, L2=5000),
                                 dict(boundary="free", L1=1000, L2=1000)])
def test_bad_values_raise_param_error(bad):
    with pytest.raises(ParamError):
        LATTICE.resolve(**bad)


def test_limit_experiment_reproduces_thesis_values():
    r1 = LATTICE_LIMIT.run(LATTICE_LIMIT.resolve(base="hexagonal", insertions=1), 0)
    r2 = LATTICE_LIMIT.run(LATTICE_LIMIT.resolve(base="hexagonal", insertions=2), 0)
    assert set(r1) <= set(LATTICE_LIMIT.columns)
    assert r1["lattice_name"] == "3-12-12" and r2["lattice_name"] == "3-6-24"
    assert f"{r1['energy_per_vertex_limit']:.4f}" == "1.4825"
    assert str(r2["energy_per_vertex_limit"]).startswith("1.4908")
    assert f"{r1['spanning_tree_entropy_limit']:.7f}" == "0.7205633"
    assert f"{r2['spanning_tree_entropy_limit']:.7f}" == "0.6915295"
    assert r1["dimer_free_energy_limit"] == pytest.approx(math.log(2) / 3)
    with pytest.raises(ParamError):
        LATTICE_LIMIT.resolve(base="hexagonal", insertions=5)


@pytest.mark.parametrize("base,k,sizes", [("hexagonal", 1, (4, 8)), ("square", 0, (8, 16))])
def test_boundaries_converge_to_the_same_limit(base, k, sizes):
    """Lemma 6.2.1 / Theorem 6.3.3: torus, cylinder and free lattices share the bulk limits;
    the boundary error of cylinder and free decays like 1/L (halves when L doubles)."""
    lim = LATTICE_LIMIT.run(LATTICE_LIMIT.resolve(base=base, insertions=k), 0)
    for key, limit_key in (("energy_per_vertex", "energy_per_vertex_limit"),
                           ("spanning_tree_entropy", "spanning_tree_entropy_limit")):
        limit = lim[limit_key]
        for boundary in ("cylinder", "free"):
            err = [abs(_run(base=base, insertions=k, L1=L, L2=L, boundary=boundary)[key] - limit)
                   for L in sizes]
            assert err[1] < 0.6 * err[0], (boundary, key, err)
        big = _run(base=base, insertions=k, L1=48, L2=48, boundary="torus")[key]
        assert big == pytest.approx(limit, abs=2e-3)


# --------------------------------------------------------------------------- clique_graph
@pytest.mark.parametrize("kw", [dict(graph="petersen", insertions=1),
                                dict(graph="complete", size=5, insertions=2),
                                dict(graph="hypercube", size=3, insertions=2),
                                dict(graph="random_regular", size=14, degree=4, insertions=1)])
def test_clique_graph_direct_values_match_maps_and_lemmas(kw):
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    row = CLIQUE_GRAPH.run(CLIQUE_GRAPH.resolve(**kw), 2024)
    assert set(row) <= set(CLIQUE_GRAPH.columns)
    assert row["energy"] == pytest.approx(row["energy_map"], rel=1e-12)
    assert row["spanning_trees"] == row["spanning_trees_lemma"]
    assert row["algebraic_connectivity"] == pytest.approx(row["algebraic_connectivity_map"],
                                                          rel=1e-9)
    bound = int(row["dimers_lemma_bound"])
    if row["regular_degree"] == 3:
        assert int(row["dimers"]) == bound      # Lemma 6.3.4, equality for max degree 3
    else:
        assert int(row["dimers"]) > bound       # r = 4: only a lower bound


def test_clique_graph_random_regular_is_reproducible_from_seed():
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    point = CLIQUE_GRAPH.resolve(graph="random_regular", size=16, degree=3, insertions=1)
    assert CLIQUE_GRAPH.run(point, 7) == CLIQUE_GRAPH.run(point, 7)


@pytest.mark.parametrize("bad", [dict(graph="complete", size=3), dict(graph="hypercube", size=13),
                                 dict(graph="random_regular", size=9, degree=3),
                                 dict(graph="petersen", insertions=6), dict(graph="cube")])
def test_clique_graph_bad_values_raise(bad):
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    with pytest.raises(ParamError):
        CLIQUE_GRAPH.resolve(**bad)
