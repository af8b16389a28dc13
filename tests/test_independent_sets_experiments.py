"""The three experiments through the contract: resolve + run, parameter errors, reports."""

import math
import re
from fractions import Fraction

import pandas as pd
import pytest

from pipeline.experiments.base import ParamError
from pipeline.experiments.independent_sets import (BOUNDS, INDEPENDENT_SETS, RANDOM_TRIANGULATION,
                                                   fraction_to_decimal)
from pipeline.kernels import triangulation as tri
from pipeline.kernels.transfer import brute_force_count, lattice_graph


def _run(exp, seed=0, **params):
    row = exp.run(exp.resolve(params), seed)
    assert set(row) <= set(exp.columns)
    return row


@pytest.mark.parametrize("lattice,boundary,m,n", [("488", "free", 2, 3), ("488", "cylinder", 3, 2),
                                                  ("488", "torus", 2, 3), ("square", "torus", 3, 4),
                                                  ("king", "cylinder", 2, 5), ("square", "free", 4, 2)])
def test_independent_sets_rows(lattice, boundary, m, n):
    row = _run(INDEPENDENT_SETS, lattice=lattice, boundary=boundary, m=m, n=n)
    graph = lattice_graph(lattice, m, n, boundary)
    assert int(row["count"]) == brute_force_count(graph)
    assert row["n_vertices"] == graph.n and row["n_edges"] == graph.m
    assert row["log_count"] == pytest.approx(math.log(int(row["count"])), rel=1e-15)
    assert row["entropy_per_vertex"] == pytest.approx(row["log_count"] / graph.n)
    if lattice == "488":
        expected_n = {"free": 4 * m * n + 2 * m + 2 * n, "cylinder": 4 * m * n + 2 * n,
                      "torus": 4 * m * n}[boundary]
        assert row["n_vertices"] == expected_n


def test_independent_sets_thesis_entry():
    assert _run(INDEPENDENT_SETS, m=9, n=1)["count"] == "264238674767"  # Table 7.1, f(9, 1)


@pytest.mark.parametrize("params", [dict(lattice="hex"), dict(boundary="klein"), dict(m=0),
                                    dict(n=65), dict(m=2.5),
                                    dict(lattice="square", boundary="torus", m=2, n=5),
                                    dict(lattice="king", boundary="cylinder", n=2),
                                    dict(lattice="488", m=20, n=30),
                                    dict(lattice="488", boundary="torus", m=40, n=12),
                                    dict(lattice="488", boundary="torus", m=13, n=13)])
def test_independent_sets_bad_values(params):
    with pytest.raises(ParamError):
        INDEPENDENT_SETS.resolve(params)


def test_bounds_experiment_default_is_thesis_488():
    row = _run(BOUNDS)
    assert abs(row["eta_lower"] - 1.549560101247) <= 1e-12
    assert abs(row["eta_upper"] - 1.549560101400) <= 1e-12
    assert row["lower"] ** 0.25 == pytest.approx(row["eta_lower"], rel=1e-15)
    assert row["vertices_per_cell"] == 4


def test_bounds_experiment_square_brackets_constant():
    row = _run(BOUNDS, lattice="square")
    assert row["eta_lower"] <= 1.5030480824753322 <= row["eta_upper"]


@pytest.mark.parametrize("params", [dict(lattice="square", k=1), dict(lattice="488", p=8, q=3),
                                    dict(p=0), dict(lattice="488", k=7)])
def test_bounds_bad_values(params):
    with pytest.raises(ParamError):
        BOUNDS.resolve(params)


def test_random_triangulation_exact_and_float():
    row = _run(RANDOM_TRIANGULATION, m=3, n=7, p=0.3)
    exact = tri.expected_count_exact(3, 7, Fraction(3, 10))
    assert Fraction(row["expected_count"]) == exact
    assert row["log_expected_count"] == pytest.approx(math.log(exact), rel=1e-14)
    assert row["annealed_entropy"] == pytest.approx(math.log(exact) / 21, rel=1e-14)
    assert row["eigen_entropy"] == pytest.approx(tri.eigen_entropy(3, 0.3), rel=1e-15)
    assert "quenched_entropy" not in row


def test_random_triangulation_thesis_entry():
    row = _run(RANDOM_TRIANGULATION, m=4, n=100, p=0.9)
    assert abs(row["eigen_entropy"] - 0.44769945558867) <= 1e-13  # Table 8.1
    assert abs(row["annealed_entropy"] - 0.45367054368683) <= 1e-13  # Table 8.2


def test_random_triangulation_quenched_reproducible_and_below_annealed():
    a = _run(RANDOM_TRIANGULATION, seed=11, m=4, n=30, p=0.5, samples=40)
    b = _run(RANDOM_TRIANGULATION, seed=11, m=4, n=30, p=0.5, samples=40)
    c = _run(RANDOM_TRIANGULATION, seed=12, m=4, n=30, p=0.5, samples=40)
    assert a["quenched_entropy"] == b["quenched_entropy"] != c["quenched_entropy"]
    # Jensen: E ln X <= ln E X
    assert a["quenched_entropy"] <= a["annealed_entropy"] + 3 * a["quenched_entropy_stderr"]
    assert a["quenched_entropy_stderr"] > 0


@pytest.mark.parametrize("params", [dict(m=0), dict(m=16), dict(p=1.5), dict(samples=-1),
                                    dict(m=15, n=100_000, samples=10)])
def test_random_triangulation_bad_values(params):
    with pytest.raises(ParamError):
        RANDOM_TRIANGULATION.resolve(params)


def test_random_triangulation_samples_refusal_says_what_fits():
    """Where not one sample fits the budget, the refusal said "samples <= 0"; it now names the
    ways out, and the largest n that a sample fits at that m (checked: it resolves, n + 1 not)."""
    with pytest.raises(ParamError, match=r"not one sample fits at this m and n: samples=0 "
                                         r"\(the exact expectation only\), or n <= (\d+) at "
                                         r"this m") as err:
        RANDOM_TRIANGULATION.resolve(dict(m=15, n=100_000, samples=10))
    largest = int(re.search(r"or n <= (\d+) at this m", str(err.value)).group(1))
    RANDOM_TRIANGULATION.resolve(dict(m=15, n=largest, samples=1))
    with pytest.raises(ParamError, match="not one sample fits"):
        RANDOM_TRIANGULATION.resolve(dict(m=15, n=largest + 1, samples=1))
    with pytest.raises(ParamError, match=r"allowed at this m and n: samples <= 4$"):
        RANDOM_TRIANGULATION.resolve(dict(m=15, n=largest // 4, samples=5))


def test_fraction_to_decimal():
    assert fraction_to_decimal(Fraction(133599522, 10 ** 6)) == "133.599522"
    assert fraction_to_decimal(Fraction(1, 8)) == "0.125"
    assert fraction_to_decimal(Fraction(5)) == "5"
    assert fraction_to_decimal(Fraction(1, 3)) is None


def test_reports_write_tables(tmp_path):
    from pipeline.report.core import ReportWriter
    from pipeline.report.independent_sets import bounds_table, tables_7, tables_8

    rows = []
    for boundary in ("free", "cylinder", "torus"):
        for m in range(1, 4):
            for n in range(1, 4):
                point = INDEPENDENT_SETS.resolve(dict(m=m, n=n, boundary=boundary))
                rows.append({**point, **INDEPENDENT_SETS.run(point, 0), "status": "ok"})
    for lattice in ("square", "king"):
        for m in (3, 4):
            point = INDEPENDENT_SETS.resolve(dict(lattice=lattice, m=m, n=m, boundary="torus"))
            rows.append({**point, **INDEPENDENT_SETS.run(point, 0), "status": "ok"})
    rows.append({**INDEPENDENT_SETS.resolve(dict(m=4, n=4)), "status": "failed"})
    out = ReportWriter(tmp_path)
    tables_7(pd.DataFrame(rows), out)
    assert (tmp_path / "entropy_per_vertex.png").stat().st_size > 1000
    sk = pd.read_csv(tmp_path / "square_and_king_counts.csv")
    assert sk.loc[(sk["lattice"] == "square") & (sk["m"] == 4), "count"].iloc[0] == brute_force_count(
        lattice_graph("square", 4, 4, "torus"))
    errata = pd.read_csv(tmp_path / "errata_tables_7.csv", dtype={"printed": str, "exact": str})
    assert len(errata) == 27 and errata["agree"].all()  # every printed entry with m, n <= 3 is exact
    free = pd.read_csv(tmp_path / "table_7_1_free.csv")
    assert free.loc[free["n"] == 3, "f(3, n)"].iloc[0] == 3935795807

    brows = [{**BOUNDS.resolve(dict(lattice=lat)), **BOUNDS.run(BOUNDS.resolve(dict(lattice=lat)), 0),
              "status": "ok"} for lat in ("488", "square")]
    bounds_table(pd.DataFrame(brows), out)
    cmp = pd.read_csv(tmp_path / "bounds_vs_thesis.csv")
    assert cmp["agree_to_print"].all()
    eb = pd.read_csv(tmp_path / "entropy_bounds.csv").set_index("lattice")
    assert eb.loc["square", "known_constant"] == pytest.approx(1.5030480824753322, abs=1e-13)
    assert bool(eb.loc["square", "brackets_known"])
    assert pd.isna(eb.loc["488", "known_constant"])

    trows = []
    for m in (1, 2):
        for p in (0.1, 0.3, 0.5, 0.7, 0.9):
            point = RANDOM_TRIANGULATION.resolve(dict(m=m, p=p))
            trows.append({**point, **RANDOM_TRIANGULATION.run(point, 0), "status": "ok"})
    tables_8(pd.DataFrame(trows), out)
    t81 = pd.read_csv(tmp_path / "table_8_1_eigen_vs_printed.csv", dtype={"printed": str,
                                                                         "computed": str})
    assert len(t81) == 6 and t81["agree_1e-13"].all()
    # all 14 printed decimals survive in the comparison table (was rounded to %.3g: "0.779")
    assert (t81["computed"].str.len() == t81["printed"].str.len()).all()
    assert (abs(t81["computed"].astype(float) - t81["printed"].astype(float)) <= 1e-13).all()
    reg = pd.read_csv(tmp_path / "figure_8_4_regression.csv")
    assert set(reg["m"]) == {1, 2} and (reg["r_squared"] > 0.9).all()
    assert (tmp_path / "figure_8_4.png").stat().st_size > 1000


def test_free_and_torus_sweep_across_the_narrow_side():
    row = _run(INDEPENDENT_SETS, m=30, n=2)
    assert "width 2" in row["method"] and "transposed" in row["method"]
    assert int(row["count"]) == transfer_count("488", 2, 30, "free")
    row = _run(INDEPENDENT_SETS, lattice="square", boundary="torus", m=20, n=3)
    assert "width 3" in row["method"] and "transposed" not in row["method"]
    row = _run(INDEPENDENT_SETS, lattice="king", boundary="torus", m=3, n=20)
    assert "width 3" in row["method"] and "transposed" in row["method"]


def transfer_count(lattice, m, n, boundary):
    from pipeline.kernels.transfer import count

    return count(lattice, m, n, boundary)[0]


def _triangulation_rows(ms, ps, n=20):
    rows = []
    for m in ms:
        for p in ps:
            point = RANDOM_TRIANGULATION.resolve(dict(m=m, n=n, p=p))
            rows.append({**point, **RANDOM_TRIANGULATION.run(point, 0), "status": "ok"})
    return pd.DataFrame(rows)


def test_regression_counts_mirrored_p_once_and_matches_ols():
    """H(p) = H(1-p) and eta_m(p) = eta_m(1-p): p and 1 - p are one observation (they had
    counted twice, and p = 0.1, 0.3, 0.7, 0.9 gave a 'fit' of 4 points with F = inf on 2 x)."""
    from scipy import stats

    from pipeline.report.independent_sets import regression_rows

    mirrored = _triangulation_rows([2], [0.1, 0.3, 0.7, 0.9])
    assert regression_rows(mirrored, "eigen_entropy").empty  # 2 distinct H(p): no fit
    ps = [0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9]
    df = _triangulation_rows([2, 3], ps)
    reg = regression_rows(df, "eigen_entropy").set_index("m")
    for m in (2, 3):
        once = df[(df["m"] == m) & (df["p"] <= 0.5)]  # independent dedup: one p of each pair
        x, y = once["shannon_entropy"].to_numpy(), once["eigen_entropy"].to_numpy()
        ref = stats.linregress(x, y)
        row = reg.loc[m]
        assert row["points"] == 4
        assert row["slope"] == pytest.approx(ref.slope, rel=1e-9)
        assert row["intercept"] == pytest.approx(ref.intercept, rel=1e-9)
        assert row["r_squared"] == pytest.approx(ref.rvalue ** 2, rel=1e-9)
        t = ref.slope / ref.stderr
        assert row["F_statistic"] == pytest.approx(t ** 2, rel=1e-7)
        assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(t), 2), rel=1e-7)
        assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-7)


def test_regression_perfect_fit_is_infinite_F_and_zero_p():
    from pipeline.report.independent_sets import regression_rows

    df = pd.DataFrame({"m": 2, "p": [0.1, 0.2, 0.3], "shannon_entropy": [0.0, 1.0, 2.0],
                       "eigen_entropy": [1.0, 3.0, 5.0]})
    row = regression_rows(df, "eigen_entropy").iloc[0]
    assert row["points"] == 3 and row["slope"] == pytest.approx(2.0)
    assert row["F_statistic"] == math.inf and row["p_value"] == 0.0


def test_regression_of_a_flat_response_is_no_fit_not_a_perfect_one():
    """A constant y: polyfit's slope came out ~1e-16, so the regression sum was ~1e-30 > 0
    and, the residuals being at rounding level, the row read r² = 1, F = inf, p = 0."""
    from pipeline.report.independent_sets import regression_rows

    for level in (0.4812, 1000.0):
        df = pd.DataFrame({"m": 2, "p": [0.1, 0.2, 0.3, 0.5], "eigen_entropy": level,
                           "shannon_entropy": [0.325, 0.500, 0.611, 0.693]})
        row = regression_rows(df, "eigen_entropy").iloc[0]
        assert row["slope"] == 0.0 and row["intercept"] == pytest.approx(level, rel=1e-12)
        assert math.isnan(row["r_squared"]) and math.isnan(row["F_statistic"]), row
        assert row["residual_std_error"] == 0.0


def test_figure_8_4_captions_name_the_plotted_quantity(tmp_path):
    from pipeline.report.core import ReportWriter
    from pipeline.report.independent_sets import tables_8

    class Captions(ReportWriter):
        def __init__(self, outdir):
            super().__init__(outdir)
            self.captions = {}

        def table(self, name, df, caption="", **kw):
            self.captions[name] = caption
            super().table(name, df, caption=caption, **kw)

        def figure(self, name, fig, caption=""):
            self.captions[name] = caption
            self.ylabels = [ax.get_ylabel() for ax in fig.axes]
            super().figure(name, fig, caption=caption)

    out = Captions(tmp_path)
    tables_8(_triangulation_rows([2], [0.1, 0.2, 0.3, 0.5], n=100), out)
    reg = pd.read_csv(tmp_path / "figure_8_4_regression.csv")
    assert set(reg["quantity"]) == {"eigen_entropy", "annealed_entropy"}
    table_caption = out.captions["figure_8_4_regression"]
    assert "eigen_entropy is ηₘ(p)" in table_caption and "annealed_entropy is ln f" in table_caption
    assert "annealed" not in out.captions["figure_8_4"] and "ηₘ(p)" in out.captions["figure_8_4"]
    assert "eta_m" in out.ylabels[0]
    # the mirrored grid has no fit, but its points are still drawn, and the caption says why
    out = Captions(tmp_path / "mirrored")
    tables_8(_triangulation_rows([2], [0.1, 0.3, 0.7, 0.9]), out)
    assert not (tmp_path / "mirrored" / "figure_8_4_regression.csv").exists()
    assert "without least-squares lines" in out.captions["figure_8_4"]


def test_entropy_figure_only_of_lattices_with_square_sections(tmp_path):
    """The figure plots m x m sections: with none it was an empty panel under a caption
    describing curves; a lattice without one was an empty panel beside the others."""
    from pipeline.report.core import ReportWriter
    from pipeline.report.independent_sets import tables_7

    def rows(lattice, sizes, boundary="free"):
        out = []
        for m, n in sizes:
            point = INDEPENDENT_SETS.resolve(dict(lattice=lattice, m=m, n=n, boundary=boundary))
            out.append({**point, **INDEPENDENT_SETS.run(point, 0), "status": "ok"})
        return out

    tables_7(pd.DataFrame(rows("488", [(1, 4), (2, 4), (3, 4)])), ReportWriter(tmp_path / "none"))
    assert (tmp_path / "none" / "table_7_1_free.csv").exists()
    assert not (tmp_path / "none" / "entropy_per_vertex.png").exists()

    panels = {}

    class Capture(ReportWriter):
        def figure(self, name, fig, caption=""):
            panels[name] = [ax.get_title() for ax in fig.axes]
            super().figure(name, fig, caption)

    df = pd.DataFrame(rows("488", [(2, 2), (3, 3), (2, 4)]) + rows("king", [(2, 4)], "cylinder"))
    tables_7(df, Capture(tmp_path / "mixed"))
    assert panels["entropy_per_vertex"] == ["488 lattice"]
