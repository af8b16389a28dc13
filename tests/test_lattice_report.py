"""Reports of the lattice family write the expected files with the numbers of the data."""

import pandas as pd
import pytest

from pipeline.experiments.lattice import LATTICE, LATTICE_LIMIT
from pipeline.report.core import ReportWriter, reports


def _rows(exp, points):
    rows = []
    for kw in points:
        p = exp.resolve(**kw)
        rows.append({**p, **exp.run(p, 0), "status": "ok"})
    return pd.DataFrame(rows)


def test_lattice_report_files_and_values(tmp_path):
    df = _rows(LATTICE, [dict(base="hexagonal", insertions=1, L1=L, L2=L, boundary=b)
                         for b in ("torus", "cylinder", "free") for L in (3, 4)])
    df = pd.concat([df, pd.DataFrame([{"status": "failed"}])], ignore_index=True)
    out = ReportWriter(tmp_path)
    for fn in reports("lattice"):
        fn(df, out)
    for name in ("lattice_values.csv", "lattice_limits.md", "convergence_hexagonal_k1.png",
                 "convergence_hexagonal_k1.pdf", "convergence_errors.png"):
        assert (tmp_path / name).stat().st_size > 0
    table = pd.read_csv(tmp_path / "lattice_values.csv")
    assert len(table) == 6
    ok = df[df.status == "ok"]
    merged = table.merge(ok, on=["boundary", "L1", "L2"], suffixes=("", "_data"))
    assert merged["energy_per_vertex"].tolist() == pytest.approx(
        merged["energy_per_vertex_data"].tolist(), rel=1e-11)
    limits = pd.read_csv(tmp_path / "lattice_limits.csv")
    assert limits["spanning_tree_entropy_limit"].iloc[0] == pytest.approx(0.7205633, abs=1e-7)


def test_lattice_limit_report_marks_thesis_agreement(tmp_path):
    df = _rows(LATTICE_LIMIT, [dict(base="hexagonal", insertions=k) for k in (0, 1, 2)])
    out = ReportWriter(tmp_path)
    for fn in reports("lattice_limit"):
        fn(df, out)
    table = pd.read_csv(tmp_path / "limits.csv", dtype=str)
    assert (tmp_path / "limits_vs_insertions.png").stat().st_size > 0
    row = table[table["lattice"] == "3-12-12"].iloc[0]
    assert row["energy_agrees"] == "yes" and row["entropy_agrees"] == "yes"
    assert float(row["energy_per_vertex_limit"]) == pytest.approx(
        df[df.insertions == 1]["energy_per_vertex_limit"].iloc[0], rel=1e-11)


def test_clique_graph_report(tmp_path):
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    df = _rows(CLIQUE_GRAPH, [dict(graph="petersen", insertions=1),
                              dict(graph="complete", size=5, insertions=1)])
    out = ReportWriter(tmp_path)
    for fn in reports("clique_graph"):
        fn(df, out)
    table = pd.read_csv(tmp_path / "clique_graph_checks.csv")
    assert set(table["trees_lemma_6_3_1"]) == {"equal"}
    assert table.set_index("graph").loc["petersen", "dimers_vs_lemma_6_3_4"] == "equal"
    assert table.set_index("graph").loc["complete", "dimers_vs_lemma_6_3_4"] == "above bound"


def test_clique_graph_checks_compare_exact_counts_exactly(tmp_path):
    """The Lemma 6.3.1 / 6.3.4 checks compare the exact counts as integers: counts not stored
    (more than 4,000 digits, as tau(K_1500)) are not 'DIFFERENT' but unknown (''), and two
    counts beyond float precision that differ by one are not 'equal' (they were compared as
    floats, which the project promises never to do silently)."""
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    df = _rows(CLIQUE_GRAPH, [dict(graph="petersen", insertions=1),
                              dict(graph="complete", size=5, insertions=1),
                              dict(graph="complete", size=6, insertions=1)])
    df.loc[0, ["spanning_trees", "spanning_trees_lemma"]] = None  # too long to store
    df.loc[1, ["dimers", "dimers_lemma_bound"]] = [str(2**70 + 1), str(2**70)]
    df.loc[2, ["dimers", "dimers_lemma_bound"]] = [str(2**70), str(2**70 + 1)]
    out = ReportWriter(tmp_path)
    for fn in reports("clique_graph"):
        fn(df, out)
    table = pd.read_csv(tmp_path / "clique_graph_checks.csv", keep_default_na=False)
    checks = table.set_index(["graph", "size"])
    assert checks.loc[("petersen", 10), "trees_lemma_6_3_1"] == ""
    assert checks.loc[("complete", 5), "trees_lemma_6_3_1"] == "equal"
    assert checks.loc[("complete", 5), "dimers_vs_lemma_6_3_4"] == "above bound"
    assert checks.loc[("complete", 6), "dimers_vs_lemma_6_3_4"] == "BELOW BOUND"


class _LabelsWriter(ReportWriter):
    """A ReportWriter that keeps each figure's axis labels (the saved files do not show them)."""

    def __init__(self, outdir):
        super().__init__(outdir)
        self.labels = {}

    def figure(self, name, fig, caption=""):
        self.labels[name] = {"y": [ax.get_ylabel() for ax in fig.axes],
                             "sup_y": fig.get_supylabel(),
                             "legend": [t.get_text() for leg in fig.legends
                                        for t in leg.get_texts()]}
        super().figure(name, fig, caption)


def test_lattice_captions_name_the_boundaries_of_the_rows_and_axes_their_unit(tmp_path):
    """Rows of torus and free boundaries only: the caption said 'for torus, cylinder and free
    boundaries' whatever the rows held; and the ln tau/N axes had no unit (the tables: nat)."""
    df = _rows(LATTICE, [dict(base="hexagonal", insertions=1, L1=L, L2=L, boundary=b)
                         for b in ("free", "torus") for L in (3, 4)])
    out = _LabelsWriter(tmp_path)
    for fn in reports("lattice"):
        fn(df, out)
    captions = {e["name"]: e["caption"] for e in out.entries}
    assert captions["convergence_hexagonal_k1"] == (
        "3-12-12: energy per vertex and spanning-tree entropy against L for torus and free "
        "boundaries; the dash-dotted line is the infinite-lattice limit.")
    assert out.labels["convergence_hexagonal_k1"]["y"] == [
        r"energy per vertex $\mathcal{E}/N$", r"spanning-tree entropy $\ln\tau/N$ (nats)"]
    assert r"spanning-tree entropy $\ln\tau/N$ (nats)" in out.labels["convergence_errors"][
        "legend"]
    assert [t for t in out.labels["convergence_errors"]["legend"] if t in
            ("torus", "cylinder", "free")] == ["torus", "free"]  # no cylinder drawn, none named
    assert captions["convergence_errors"] == (
        "Distance to the infinite-lattice limit against L (log-log); in theory the free "
        "boundary approaches it like 1/L (the boundary's share of the vertices), the torus "
        "faster.")

    # one boundary, and all three (in the order torus, cylinder, free)
    for boundaries, text in ((("cylinder",), "cylinder boundaries"),
                             (("free", "cylinder", "torus"), "torus, cylinder and free boundaries")):
        sub = tmp_path / "_".join(boundaries)
        out = ReportWriter(sub)
        rows = _rows(LATTICE, [dict(base="hexagonal", insertions=1, L1=L, L2=L, boundary=b)
                               for b in boundaries for L in (3, 4)])
        for fn in reports("lattice"):
            fn(rows, out)
        captions = {e["name"]: e["caption"] for e in out.entries}
        caption = captions["convergence_hexagonal_k1"]
        assert f"against L for {text};" in caption, caption
        assert captions["convergence_errors"].endswith(
            "the cylinder boundary approaches it like 1/L (the boundary's share of the "
            "vertices)." if len(boundaries) == 1 else
            "the cylinder and free boundaries approach it like 1/L (the boundary's share of "
            "the vertices), the torus faster.")


def test_lattice_limit_axis_gives_the_unit_of_the_entropy(tmp_path):
    df = _rows(LATTICE_LIMIT, [dict(base="hexagonal", insertions=k) for k in (0, 1)])
    out = _LabelsWriter(tmp_path)
    for fn in reports("lattice_limit"):
        fn(df, out)
    assert out.labels["limits_vs_insertions"]["y"] == [
        r"energy per vertex $\mathcal{E}/N$ (limit)",
        r"spanning-tree entropy $\ln\tau/N$ (limit, nats)"]


def test_clique_graph_checks_show_degree_only_for_random_regular(tmp_path):
    """degree is random_regular's parameter; K5 showed degree 3 beside regular_degree 4."""
    from pipeline.experiments.lattice import CLIQUE_GRAPH

    df = _rows(CLIQUE_GRAPH, [dict(graph="complete", size=5, insertions=1),
                              dict(graph="random_regular", size=8, degree=3, insertions=1)])
    out = ReportWriter(tmp_path)
    for fn in reports("clique_graph"):
        fn(df, out)
    table = pd.read_csv(tmp_path / "clique_graph_checks.csv", keep_default_na=False,
                        dtype=str).set_index("graph")
    assert table.loc["complete", "degree"] == "" and table.loc["complete", "regular_degree"] == "4"
    assert table.loc["random_regular", "degree"] == "3"
    assert table.loc["random_regular", "regular_degree"] == "3"
    md = (tmp_path / "clique_graph_checks.md").read_text()
    assert "<NA>" not in md and "nan" not in md.lower()
