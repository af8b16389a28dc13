"""Figures, captions, headers and messages of the report: what a reader of the paper-ready
files sees must match the numbers (user trial: failed points vanishing silently, a computed
column headed by a parameter's documentation, a caption contradicting its table, unlabelled
and fractional ticks on integer axes, captions with 1e-06, warnings pointing the wrong way)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from pipeline.engine.batch import run_batch
from pipeline.engine.batch_table import failed_batch_table
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import code_id, provenance_stamp
from pipeline.experiments.base import get_experiment
from pipeline.report.build import build_report
from pipeline.report.core import ReportWriter, reports
from pipeline.report.selection import Selection
from pipeline.store.parquet import experiment_dir
from pipeline.store.part_writer import PartWriter

from report_families import store_small


def _store(results, name, grid_cfg, params, run_id, failed=(), code=None):
    """Store a grid of ``name`` as a sweep would, the points ``failed`` stored failed."""
    exp = get_experiment(name)
    grid = Grid(exp, grid_cfg, params)
    ok = [i for i in range(grid.total) if i not in failed]
    stamp = provenance_stamp(exp, run_id)
    if code is not None:
        stamp["code_id"] = (code, stamp["code_id"][1])
    writer = PartWriter(experiment_dir(results, name), run_id, stamp=stamp)
    if ok:
        writer.write(run_batch(grid, ok)[0])
    if failed:
        table = failed_batch_table(grid, list(failed), "RuntimeError: synthetic failure")
        writer = PartWriter(experiment_dir(results, name), run_id + "-f", stamp=stamp)
        writer.write(table)
    return grid


def _flat(tex: str) -> str:
    """A LaTeX table's text with wrapped headers put back on one line."""
    tex = re.sub(r"\\begin\{tabular\}\[b\]\{@\{\}[lc]@\{\}\}|\\end\{tabular\}", "", tex)
    return tex.replace("\\\\", " ")


def _caption(tex: str) -> str:
    return re.search(r"\\caption\{(.*)\}\n", tex).group(1)


# --------------------------------------------------------------------------- 1. failed points
def test_failed_points_are_named_on_stderr_in_the_index_and_in_captions(tmp_path, capsys):
    """6 lattice points failed (square, L = 8): the report exited 0 saying only 'report: ...
    (N tables, M figures)', lattice_counts.tex lacked the 6 rows with no caption note."""
    grid_cfg = {"boundary": ["torus", "cylinder", "free"], "zip": [{"L1": [4, 8], "L2": [4, 8]}],
                "insertions": [0, 1]}
    grid = Grid(get_experiment("lattice"), grid_cfg, {"base": "square"})
    failed = [i for i in range(grid.total) if grid.point(i)["L1"] == 8
              and grid.point(i)["insertions"] == 0]
    assert len(failed) == 3
    _store(tmp_path, "lattice", grid_cfg, {"base": "square"}, "r1", failed=failed)
    assert build_report(tmp_path, "lattice", selection=Selection(grid=grid)) == 0
    err = capsys.readouterr().err
    assert ("warning: 3 of 12 point(s) of the report failed and are left out of its tables "
            "and figures") in err
    assert "python -m pipeline status" in err and "retry_failed=true" in err
    # ... and status, where it sends the user, gives their error (it printed counts only)
    from pipeline.status import main as status_main

    assert status_main([str(tmp_path / "lattice")]) == 0
    shown = capsys.readouterr().out
    assert ("lattice: 9 ok, 3 failed stored (version 1)\n"
            "  their error(s), most common first:\n"
            "    3 task(s): RuntimeError: synthetic failure\n") in shown, shown
    report = tmp_path / "lattice" / "_report"
    counts = pd.read_csv(report / "lattice_counts.csv")
    assert len(counts) == 9  # the 3 failed points are not in the table ...
    note = "3 failed point(s) not shown (see failed_tasks)."
    assert _caption((report / "lattice_counts.tex").read_text()).endswith(
        note.replace("_", r"\_"))  # ... and its caption says so
    index = (report / "index.md").read_text()
    assert "- **3 failed point(s) not shown** in the tables and figures below" in index
    figures = index.split("## Figures")[1].split("## Runs")[0]
    captions = [line for line in figures.splitlines() if line and not line.startswith(("#", "!",
                                                                                        "Also"))]
    assert len(captions) == 3 and all(c.endswith(note) for c in captions), captions
    assert note not in _caption((report / "status.tex").read_text())  # status shows them


def test_no_failure_note_without_failed_points(tmp_path, capsys):
    grid = _store(tmp_path, "calibration", {"x": [1, 2, 3]}, {}, "r1")
    assert build_report(tmp_path, "calibration", selection=Selection(grid=grid)) == 0
    assert "failed" not in capsys.readouterr().err
    assert "failed point" not in (tmp_path / "calibration" / "_report" / "index.md").read_text()


# --------------------------------------------------------------------------- 2. header clash
def test_a_computed_column_is_not_headed_by_a_parameter_of_the_same_name(tmp_path):
    """inferential_bound_check's count of table rows, 'rows', was headed "grid rows (row-major
    numbering)", the documentation of inferential's grid parameter rows."""
    from pipeline.report.columns import ColumnClash, column_meta, describe_computed

    store_small(tmp_path, "inferential")
    assert build_report(tmp_path, "inferential") == 0
    report = tmp_path / "inferential" / "_report"
    tex = _flat((report / "inferential_bound_check.tex").read_text())
    html = (report / "index.html").read_text()
    assert "grid rows" not in tex and "row-major" not in tex
    assert re.search(r"points \(rows of inferential\\_ ?nu\)", tex), tex  # may wrap after _
    assert "points (rows of inferential_nu)" in html
    check = pd.read_csv(report / "inferential_bound_check.csv")
    nu = pd.read_csv(report / "inferential_nu.csv")
    # the count is a count of inferential_nu's rows of each family
    assert check["n_points"].sum() == len(nu) and "rows" not in check.columns
    with pytest.raises(ColumnClash, match="'rows'.*parameter of inferential"):
        describe_computed("inferential", {"rows": ("rows of the table", "1")})
    assert column_meta("inferential", "rows").description == "grid rows (row-major numbering)"


# --------------------------------------------------------------------------- 3. lemma caption
def test_the_lemma_check_caption_states_the_tolerance_its_numbers_meet(tmp_path):
    """The caption said 'the largest loss minus bound is ≤ 0' beside 1.42e-14 (float rounding)."""
    store_small(tmp_path, "edge_dp")
    assert build_report(tmp_path, "edge_dp") == 0
    report = tmp_path / "edge_dp" / "_report"
    check = pd.read_csv(report / "edge_dp_lemma_check.csv")
    loss = pd.read_csv(report / "edge_dp_loss.csv")
    exact = loss[loss["method"] != "mcmc"]
    assert check["exact_rows"].sum() == len(exact)
    excess = (exact["loss"] - exact["eps_plus_alpha"]).to_numpy()
    assert check["max_loss_minus_bound"].max() == pytest.approx(excess.max(), abs=0)
    # what the caption states holds of the table's numbers
    assert np.all(excess <= 1e-9 * (1 + exact["eps_plus_alpha"].to_numpy()))
    caption = _caption((report / "edge_dp_lemma_check.tex").read_text())
    assert "≤ 0" not in caption and r"$\le$ 0)" not in caption
    assert r"in every row, up to a tolerance of 10$^{-9}\cdot$(1 + " in caption
    assert (check["rows_lemma_holds"] == check["exact_rows"]).all()
    if excess.max() > 0:  # float rounding above the bound is named as such
        assert "is float rounding, within that tolerance" in caption


# --------------------------------------------------------------------------- 4. units
def test_computed_columns_have_descriptions_and_units(tmp_path):
    store_small(tmp_path, "lattice")
    store_small(tmp_path, "edge_dp")
    store_small(tmp_path, "composition")
    for name in ("lattice", "edge_dp", "composition"):
        assert build_report(tmp_path, name) == 0
    tex = lambda exp, table: _flat((tmp_path / exp / "_report" / f"{table}.tex").read_text())  # noqa
    values = tex("lattice", "lattice_values")
    assert r"ln $\tau$ / N (nat)" in values and "ln tau" not in values
    assert r"ln $\tau$ / N $-$ its infinite-lattice limit (nat)" in values
    limits = tex("lattice", "lattice_limits")
    assert r"ln $\tau$ / N of the infinite lattice (nat)" in limits
    assert "E / N of the infinite lattice" in limits
    loss = tex("edge_dp", "edge_dp_loss")
    for header in (r"edge Pufferfish loss (exact, else MCMC) (nat)",
                   r"standard error of an MCMC loss (nat)",
                   r"dependence constant $\alpha$ (exact, else MCMC) (nat)",
                   r"Lemma 4.1 bound $\varepsilon$ + $\alpha$ (nat)"):
        assert header in loss, header
    ratios = tex("composition", "bound_ratios")
    for header in ("median of bound / optimal total", "largest bound / optimal total",
                   "smallest bound / optimal total"):
        assert header in ratios, header


def test_the_generic_summary_gives_each_column_its_unit(tmp_path):
    grid = _store(tmp_path, "calibration", {"x": [1, 2, 3]}, {"work_us": 5.0}, "r1")
    assert build_report(tmp_path, "calibration", selection=Selection(grid=grid)) == 0
    report = tmp_path / "calibration" / "_report"
    summary = pd.read_csv(report / "summary.csv", keep_default_na=False).set_index("column")
    assert summary.loc["work_us", "unit"] == "us" and summary.loc["x", "unit"] == ""
    assert summary.loc["x", "median"] == 2 and summary.loc["x", "values"] == 3
    tex = _flat((report / "summary.tex").read_text())
    for header in ("unit of its statistics", "ok rows with a value", "standard deviation",
                   "25th percentile"):
        assert header in tex, header
    assert "25%" not in tex


# --------------------------------------------------------------------------- 5. ticks
class _Recorder(ReportWriter):
    """A ReportWriter that keeps each figure's tick positions and labels after saving."""

    def __init__(self, outdir):
        super().__init__(outdir)
        self.ticks = {}

    def figure(self, name, fig, caption=""):
        axes = [ax for ax in fig.axes if ax.get_visible()]
        super().figure(name, fig, caption)
        self.ticks[name] = [(list(ax.xaxis.get_majorticklocs()),
                             [t.get_text() for t in ax.xaxis.get_majorticklabels()])
                            for ax in axes]
        self.titles = getattr(self, "titles", {})
        self.titles[name] = [ax.get_title() for ax in axes]


def _visible(ticks, ax):
    locs, labels = ticks
    lo, hi = sorted(ax)
    return [(loc, lab) for loc, lab in zip(locs, labels) if lo <= loc <= hi]


def test_integer_axes_get_a_tick_at_each_of_few_values(tmp_path):
    """L = 4, 8, 12 on a log2 axis had ticks at 4 and 8 only; n = 3..6 had 3.5, 4.5, 5.5."""
    from pipeline.report.style import integer_axis, new_figure, save_figure

    fig, (a, b) = new_figure(ncols=2)
    a.plot([4, 8, 12], [1, 2, 3])
    a.set_xscale("log", base=2)
    b.plot([3, 4, 5, 6], [1, 2, 3, 4])
    for ax in (a, b):
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        integer_axis(ax, "x")
    save_figure(fig, tmp_path, "ticks")
    assert [t for t in a.get_xticks() if 3.5 <= t <= 13] == [4, 8, 12]
    assert [t.get_text() for t in a.get_xticklabels()] == ["4", "8", "12"]
    assert list(b.get_xticks()) == [3, 4, 5, 6]
    # many values: integer ticks, never 3.5
    fig, ax = new_figure()
    ax.plot(np.arange(3, 41), np.arange(38))
    ax.set_xlabel("n")
    ax.set_ylabel("y")
    integer_axis(ax, "x")
    save_figure(fig, tmp_path, "many")
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_lattice_and_edge_dp_figures_label_every_size(tmp_path):
    from pipeline.experiments.lattice import LATTICE

    rows = []
    for L in (4, 8, 12):
        for b in ("torus", "cylinder", "free"):
            p = LATTICE.resolve(base="square", insertions=0, L1=L, L2=L, boundary=b)
            rows.append({**p, **LATTICE.run(p, 0), "status": "ok"})
    df = pd.DataFrame(rows)
    df.attrs["experiment"] = "lattice"
    out = _Recorder(tmp_path / "l")
    for fn in reports("lattice"):
        with out.style_context():
            fn(df, out)
    for panel in out.ticks["convergence_square_k0"]:
        assert [lab for loc, lab in zip(*panel) if 3 < loc < 13] == ["4", "8", "12"]
    errors = out.ticks["convergence_errors"][0]
    assert [lab for loc, lab in zip(*errors) if 3 < loc < 13] == ["4", "8", "12"]
    # L = 4, 8 only: ticks at 4 and 8, not 4, 4.5, ..., 7.5
    out2 = _Recorder(tmp_path / "l2")
    with out2.style_context():
        reports("lattice")[0](df[df["L1"] < 12], out2)
    assert [lab for loc, lab in zip(*out2.ticks["convergence_errors"][0]) if 3 < loc < 9] == \
        ["4", "8"]

    store_small(tmp_path, "edge_dp")
    from pipeline.store.parquet import load

    edge = load(tmp_path, "edge_dp")
    edge.attrs["experiment"] = "edge_dp"
    out3 = _Recorder(tmp_path / "e")
    with out3.style_context():
        reports("edge_dp")[0](edge, out3)
    for locs, labels in out3.ticks["edge_dp_loss_vs_n"]:
        shown = [loc for loc in locs if 3.5 <= loc <= 5.5]
        assert shown == [4, 5], (locs, labels)


def _numbered(ax) -> bool:
    """Whether the panel shows x tick numbers (call after a draw)."""
    return any(t.get_visible() and t.get_text() for t in ax.get_xticklabels())


@pytest.mark.parametrize("n_panels, max_cols", [(4, 3), (5, 3), (7, 3), (5, 4), (3, 3)])
def test_shared_x_small_multiples_number_the_lowest_panel_of_each_column(n_panels, max_cols):
    """sharex numbered the last row only: with 4 panels on 3 columns the panels above the two
    empty cells showed an x label without numbers."""
    from pipeline.report.style import small_multiples

    fig, axes = small_multiples("paper", n_panels, max_cols=max_cols, sharex=True, sharey=True)
    for ax in axes:
        ax.plot([0, 0.5, 1], [1, 2, 3])
    fig.canvas.draw()
    ncols = min(max_cols, n_panels)
    lowest = [i + ncols >= n_panels for i in range(n_panels)]  # nothing below it
    assert [_numbered(ax) for ax in axes] == lowest
    # sharey: the first panel of each row keeps its y numbers
    assert [any(t.get_visible() and t.get_text() for t in ax.get_yticklabels())
            for ax in axes] == [i % ncols == 0 for i in range(n_panels)]


def test_lattice_error_panels_above_an_empty_cell_show_x_numbers(tmp_path):
    """convergence_errors with 4 lattices on 3 columns: the 2nd and 3rd panels (nothing below
    them) had the x label but no tick numbers."""
    from pipeline.experiments.lattice import LATTICE

    rows = []
    for base in ("square", "hexagonal"):
        for k in (0, 1):
            for L in (3, 4):
                p = LATTICE.resolve(base=base, insertions=k, L1=L, L2=L, boundary="torus")
                rows.append({**p, **LATTICE.run(p, 0), "status": "ok"})
    df = pd.DataFrame(rows)
    df.attrs["experiment"] = "lattice"
    shown = {}

    class Out(ReportWriter):
        def figure(self, name, fig, caption=""):
            super().figure(name, fig, caption)  # draws the figure
            shown[name] = [(_numbered(ax), ax.get_xlabel() != "")
                           for ax in fig.axes if ax.get_visible()]

    out = Out(tmp_path)
    with out.style_context():
        reports("lattice")[0](df, out)
    # panels 1 and 2 are the lowest of their columns, as is panel 3; panel 0 has 3 below it
    assert shown["convergence_errors"] == [(False, False), (True, True), (True, True),
                                           (True, True)]


# --------------------------------------------------------------------------- 6. composition
def test_composition_captions_state_the_per_step_delta_in_powers_of_ten(tmp_path):
    store_small(tmp_path, "composition")
    assert build_report(tmp_path, "composition") == 0
    report = tmp_path / "composition" / "_report"
    index = (report / "index.md").read_text()
    panels = index.split("### eps_vs_k_panels")[1].strip().splitlines()[0]
    assert "per-step ε = 0.01, 0.1, 1 at per-step δ = 0 and total δ = 10⁻⁶" in panels
    tex = (report / "eps_vs_k.tex").read_text()
    assert "1e-06" not in tex and r"total $\delta$ = 10$^{-6}$" in tex
    out = _Recorder(tmp_path / "c")
    from pipeline.store.parquet import load

    df = load(tmp_path, "composition")
    df.attrs["experiment"] = "composition"
    with out.style_context():
        reports("composition")[0](df, out)
    assert out.titles["eps_vs_k_panels"] == [
        rf"$\varepsilon={e}$, $\delta=0$, $\tilde\delta=10^{{-6}}$" for e in ("0.01", "0.1", "1")]


# --------------------------------------------------------------------------- 7. messages
def test_points_left_out_by_a_filter_are_not_called_unstored(tmp_path, capsys):
    """Half the grid's points stored under another code_id: the warning said 'have no stored
    row (run the sweep to fill them in)'."""
    here = code_id(get_experiment("calibration"))
    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": list(range(8))}, {"rows": 2})
    _store(tmp_path, "calibration", {"x": [0, 1, 2, 3]}, {"rows": 2}, "a")
    _store(tmp_path, "calibration", {"x": [4, 5, 6]}, {"rows": 2}, "b", code="0" * 16)
    assert build_report(tmp_path, "calibration",
                        selection=Selection(grid=grid, code_ids=(here,))) == 0
    err = capsys.readouterr().err
    assert ("4 of 8 point(s) of the grid have no row in this selection: 3 of them are stored "
            f"but left out by the selection's filter (code_id in {{{here}}}; their stored rows "
            "are of another code_id: leave code_id out to report them), and 1 have no stored "
            "row (run the sweep to fill them in)") in err
    assert "4 of 8 point(s) of the grid have no stored row" not in err
    # without a filter, a missing point is simply missing
    assert build_report(tmp_path, "calibration", selection=Selection(grid=grid)) == 0
    assert "1 of 8 point(s) of the grid have no stored row (run the sweep to fill them in)" in \
        capsys.readouterr().err


def test_an_empty_selection_does_not_advise_what_was_given(tmp_path, capsys):
    grid = _store(tmp_path, "calibration", {"x": [0, 1]}, {}, "a")
    _store(tmp_path, "calibration", {"x": [2]}, {}, "b", code="deadbeefdeadbeef")
    # a code_id of the folder, but none of run a's rows: an empty selection
    assert build_report(tmp_path, "calibration",
                        selection=Selection(run_ids=("a",), code_ids=("deadbeefdeadbeef",),
                                            versions=("latest",))) == 2
    err = capsys.readouterr().err
    assert "report_scope=all" not in err
    assert ("check run_id, code_id (python -m pipeline status lists the runs), or leave run_id "
            "and code_id out") in err, err
    # a code_id the folder does not have at all: named, with the ones it has (a typo)
    assert build_report(tmp_path, "calibration",
                        selection=Selection(code_ids=("deadbeef",), versions=("latest",))) == 2
    assert ("error: code_id 'deadbeef': no row of 'calibration' was computed by this code (did "
            "you mean 'deadbeefdeadbeef'?); its code_ids: ") in capsys.readouterr().err
    assert build_report(tmp_path, "calibration",
                        selection=Selection(grid=Grid(get_experiment("calibration"),
                                                      {"x": [7]}, {}))) == 2
    err = capsys.readouterr().err
    assert "run that sweep first, or report everything stored with report_scope=all" in err
    assert grid.total == 2
