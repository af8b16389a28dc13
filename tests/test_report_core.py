"""The report step: files written, numbers faithful to the Parquet data, figures real, failures shown."""

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conftest import fill_disk
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.report.build import build_report
from pipeline.report.core import ReportWriter, latex_escape
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]


def store(results_dir, name, grid_cfg, params):
    grid = Grid(get_experiment(name), grid_cfg, params)
    table, _ = run_batch(grid, range(grid.total))
    PartWriter(Path(results_dir) / name, "test").write(table)
    return table.to_pandas()


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture(scope="module")
def composition_report(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    df = store(results, "composition",
               {"k": [1, 2, 5, 10, 20, 50, 100], "eps": [0.1, 0.5]}, {"delta_target": 1e-6})
    assert build_report(results, "composition") == 0
    return results / "composition" / "_report", df


def test_report_writes_tables_figures_and_index(composition_report):
    outdir, _ = composition_report
    names = {p.name for p in outdir.iterdir()}
    assert {"index.md", "status.csv", "status.md", "status.tex"} <= names
    pngs = sorted(outdir.glob("*.png"))
    assert pngs and all(p.with_suffix(".pdf").exists() for p in pngs)
    assert all(p.with_suffix(".md").exists() and p.with_suffix(".tex").exists()
               for p in outdir.glob("*.csv"))
    index = (outdir / "index.md").read_text()
    assert "14 ok, 0 failed" in index and "experiment version 1" in index and "![" in index
    tex = (outdir / "status.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex
    # the results folder still reads as one table
    assert len(pd.read_parquet(outdir.parent)) == 14


def test_figures_are_nonempty_images_of_expected_size(composition_report):
    outdir, _ = composition_report
    for png in outdir.glob("*.png"):
        width, height = png_size(png)
        assert width >= 600 and height >= 400, (png.name, width, height)
        import matplotlib.image as mpimg

        pixels = mpimg.imread(png)
        assert pixels.std() > 0.05  # not a blank canvas
        assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"


def test_table_numbers_equal_the_parquet_values(composition_report):
    outdir, df = composition_report
    csvs = [p for p in outdir.glob("*.csv") if p.stem not in ("status",)]
    checked = 0
    for csv in csvs:
        table = pd.read_csv(csv)
        if {"k", "eps_optimal"} <= set(table.columns):
            for _, row in table.iterrows():
                match = df[(df.k == row.k) & np.isclose(df.eps_optimal, row.eps_optimal,
                                                        rtol=1e-11, atol=0)]
                assert len(match) >= 1, (csv.name, row.to_dict())
                checked += 1
    assert checked > 0
    status = pd.read_csv(outdir / "status.csv")
    assert status.set_index("status").loc["ok", "tasks"] == df.task_id.nunique()


def test_failed_rows_are_reported_in_index(tmp_path):
    store(tmp_path, "calibration", {"x": {"range": [0, 20]}}, {"work_us": 0.0, "fail_every": 7})
    assert build_report(tmp_path, "calibration") == 0
    outdir = tmp_path / "calibration" / "_report"
    index = (outdir / "index.md").read_text()
    assert "17 ok, 3 failed" in index and "**3 task(s) failed**" in index
    assert "ValueError: calibration failure requested at x=" in index
    failed = pd.read_csv(outdir / "failed_tasks.csv")
    assert sorted(failed.x) == [0, 7, 14]
    # calibration has no family report: the generic summary's numbers are the data's
    summary = pd.read_csv(outdir / "summary.csv").set_index("column")
    assert summary.loc["value", "mean"] == pytest.approx(np.mean([x for x in range(20) if x % 7]))


def test_an_error_text_with_backticks_shows_whole_in_its_code_span():
    """index.md's "first error" is a code span: a text holding a run of two backticks ended the
    span early (the old fence was two backticks whenever one occurred). Oracle: markdown-it-py
    (CommonMark) renders every span back to the text, over random texts of backticks, spaces
    and letters."""
    import html

    from markdown_it import MarkdownIt

    from pipeline.report.core import md_code_span

    md = MarkdownIt("commonmark")
    rng = np.random.default_rng(7)
    texts = ["ValueError: ``x`` not in `y`", "`", "``", "a``", " `a` ", "x", "`a` `` ```b"]
    texts += ["".join(rng.choice(list("`` ab"), size=rng.integers(1, 12))) for _ in range(3000)]
    for text in texts:
        rendered = md.render(f"first error: {md_code_span(text)} (see)")
        code = re.fullmatch(r"<p>first error: <code>(.*)</code> \(see\)</p>\n", rendered, re.S)
        assert code and html.unescape(code.group(1)) == text, (text, md_code_span(text), rendered)


def test_index_md_shows_a_first_error_with_double_backticks_whole(tmp_path):
    """The report's own index.md line, rendered by markdown-it-py: the error's text comes back
    whole inside one code span (the old two-backtick fence ended at the error's own ``)."""
    from markdown_it import MarkdownIt

    from pipeline.engine.batch_table import failed_batch_table

    error = "ValueError: ``k`` must be ≥ 1, got `0`"
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 3]}}, {"work_us": 0.0})
    PartWriter(tmp_path / "calibration", "20260101T000000Z-aaaaa0").write(
        failed_batch_table(grid, range(3), error))
    assert build_report(tmp_path, "calibration") == 0
    index = (tmp_path / "calibration" / "_report" / "index.md").read_text()
    line = next(line for line in index.splitlines() if "first error:" in line)
    html = MarkdownIt("commonmark").render(line)
    first = re.search(r"first error: <code>(.*?)</code> \(see", html)
    assert first and __import__("html").unescape(first.group(1)) == error, html


def test_a_report_with_retry_failed_says_it_retries_nothing(tmp_path, capsys):
    """report=true retry_failed=true made the report from the old failures with no word;
    the note says it runs nothing. A sweep's engine options (typed in the sweep's own
    command, then report=true added) pass without one."""
    from pipeline.cli import main

    store(tmp_path, "calibration", {"x": {"range": [0, 20]}}, {"work_us": 0.0, "fail_every": 7})
    words = ["experiment=calibration", "grid.x={range:[0,20]}", "params.work_us=0",
             "params.fail_every=7", f"results_dir={tmp_path}", "report=true"]
    capsys.readouterr()
    assert main([*words, "retry_failed=true", "batch_size=10", "flush_rows=5"]) == 0
    err = capsys.readouterr().err
    assert ("note: report=true runs nothing: retry_failed=true applies to a sweep (the same "
            "command without report=true); this report is of the rows stored now") in err, err
    assert "**3 task(s) failed**" in (tmp_path / "calibration" / "_report" / "index.md").read_text()
    assert main([*words, "batch_size=10", "flush_rows=5"]) == 0
    assert "note: report=true runs nothing" not in capsys.readouterr().err


def test_report_scope_all_says_the_grid_words_select_nothing(tmp_path, capsys):
    """report_scope=all with grid.x=[1] reported every stored point (index.md: 20 tasks)
    with no word about the grid given; a note now names the words it leaves aside."""
    from pipeline.cli import main

    store(tmp_path, "calibration", {"x": {"range": [0, 20]}}, {"work_us": 0.0})
    words = ["experiment=calibration", f"results_dir={tmp_path}", "report=true"]
    capsys.readouterr()
    assert main([*words, "report_scope=all", "grid.x=[1]", "params.work_us=0"]) == 0
    err = capsys.readouterr().err
    assert ("note: report_scope=all reports every stored point: grid.x, params.work_us on the "
            "command line select nothing") in err, err
    assert "20 ok, 0 failed" in (tmp_path / "calibration" / "_report" / "index.md").read_text()
    assert main([*words, "report_scope=all"]) == 0
    assert "note: report_scope=all" not in capsys.readouterr().err
    assert main([*words, "grid.x=[1]", "params.work_us=0"]) == 0  # the grid's scope: no note
    assert "note: report_scope=all" not in capsys.readouterr().err


def test_report_without_results_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "report=true",
                           "experiment=composition", f"results_dir={tmp_path}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "no results for experiment 'composition'" in proc.stderr


def test_report_and_export_before_a_running_sweeps_first_flush_say_so(tmp_path, capsys):
    """A sweep writing the folder keeps its finished rows in memory until its first flush
    (flush_seconds, 60 s by default): report=true and export said "no results; run the sweep
    first", a command the lock would refuse, without the user's grid. Now they name the
    sweep and when its rows come. Its run record is real: this process stands for its driver."""
    import os
    import socket

    from pipeline.cli import main
    from pipeline.export_command import main as export_main
    from pipeline.store.manifest import update_manifest

    folder = tmp_path / "calibration"
    update_manifest(folder, {"run_id": "r1", "status": "running", "host": socket.gethostname(),
                             "pid": os.getpid(), "started_at": "2026-12-06T07:00:00Z"})
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    writing = (f"a sweep is writing it now (run r1, pid {os.getpid()} on {socket.gethostname()}, "
               "since 2026-12-06T07:00:00Z) and has stored nothing yet: finished rows are "
               "written every flush_seconds (60 s by default) or flush_rows once its tasks "
               f"finish; try again then (python -m pipeline status {folder} shows its progress)")
    assert main(["experiment=calibration", "report=true", f"results_dir={tmp_path}",
                 "progress=false"]) == 2
    err = capsys.readouterr().err
    assert (f"report=true: no results for experiment 'calibration' under {folder}; "
            f"{writing}") in err, err
    assert export_main([str(folder), "--to", str(tmp_path / "pkg")]) == 2
    err = capsys.readouterr().err
    assert f"no results for experiment 'calibration' under {folder}: {writing}" in err, err
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_multirun_report_with_one_experiment_unswept_writes_nothing(tmp_path):
    """``-m experiment=calibration,composition report=true``, composition never swept:
    calibration's report was rewritten, then composition's job said "no results", exit 2,
    which promises that nothing was written. Now every job is checked first."""
    run = [sys.executable, str(ROOT / "run.py")]
    subprocess.run([*run, "experiment=calibration", f"results_dir={tmp_path}", "grid.x=[1,2]",
                    "params.work_us=0", "progress=false", "cluster.dashboard_address=:0"],
                   capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    proc = subprocess.run([*run, "-m", "experiment=calibration,composition", "report=true",
                           f"results_dir={tmp_path}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("report=true: no results for experiment 'composition' under "
            f"{tmp_path / 'composition'}; run the sweep first: the same command without "
            "report=true") in proc.stderr, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    assert not (tmp_path / "calibration" / "_report").exists()


def test_a_multirun_report_with_a_version_one_experiment_lacks_writes_nothing(tmp_path):
    """-m experiment=calibration,composition report=true version=2: calibration (version 2)
    was reported, then composition (version 1 only) refused: exit 2 after a report was
    written. Now every job's selection is checked against its folder first."""
    run = [sys.executable, str(ROOT / "run.py")]
    fast = ["progress=false", "cluster.dashboard_address=:0", "cluster.n_workers=1"]
    for args in (["experiment=calibration", "grid.x=[1,2]", "params.work_us=0"],
                 ["experiment=composition", "grid.eps=[0.1]", "grid.k=[2]",
                  "grid.delta_target=[1e-6]", "grid.delta=[0.0]"]):
        subprocess.run([*run, *args, f"results_dir={tmp_path}", *fast], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, check=True)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    proc = subprocess.run([*run, "-m", "experiment=calibration,composition", "report=true",
                           "report_scope=all", "version=2", f"results_dir={tmp_path}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("version=2: no rows of version 2 are stored for 'composition'; "
            "stored: 1") in proc.stderr, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_report_of_a_folder_whose_parts_were_deleted_says_so(tmp_path):
    """Parts the index records, deleted by hand: the report's up-front "no results: run the
    sweep first" hid the store's own verdict (exit 4, verify --repair)."""
    run = [sys.executable, str(ROOT / "run.py")]
    subprocess.run([*run, "experiment=calibration", f"results_dir={tmp_path}", "grid.x=[1,2]",
                    "params.work_us=0", "progress=false", "cluster.dashboard_address=:0"],
                   capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    for part in (tmp_path / "calibration").glob("part-*.parquet"):
        part.unlink()
    proc = subprocess.run([*run, "experiment=calibration", "report=true",
                           f"results_dir={tmp_path}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "no longer in" in proc.stderr and "run the sweep first" not in proc.stderr, \
        proc.stderr


def test_writer_formats():
    assert latex_escape(r"a_b\c {x} 50%") == r"a\_b\textbackslash{}c \{x\} 50\%"


def test_the_csv_keeps_every_digit_of_a_float(tmp_path):
    """%.12g turned a float column's 1234567890123457.0 into 1.23456789012e+15."""
    df = pd.DataFrame({"k": [1, 2], "count": [1234567890123457.0, 2.0 ** 60 + 2.0 ** 8]})
    ReportWriter(tmp_path).table("t", df, caption="cap")
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["count"].tolist() == df["count"].tolist()
    assert "| 1 | 1.23456789012e+15 |" in (tmp_path / "t.md").read_text()  # display: 12 digits


def test_a_character_without_a_pdflatex_glyph_is_reported(tmp_path, caplog):
    """'?' in a LaTeX table used to appear silently; the other formats keep the character."""
    import logging

    from pipeline.report.latex_text import _warn_no_glyph

    _warn_no_glyph.cache_clear()  # once per character and process
    out = ReportWriter(tmp_path)
    df = pd.DataFrame({"graph": ["4-8-8 \u2b21 lattice", "cycle ε"], "v": [1.5, 2.5]})
    log = logging.getLogger("pipeline")  # the CLI's set-up stops it propagating to caplog's
    log.addHandler(caplog.handler)
    try:
        out.table("t", df, caption="cap")
    finally:
        log.removeHandler(caplog.handler)
    tex = (tmp_path / "t.tex").read_text()
    assert "4-8-8 ? lattice" in tex and r"$\varepsilon$" in tex  # Greek goes to maths
    records = {id(r): r.getMessage() for r in caplog.records  # (seen twice if it propagates)
               if "no pdflatex glyph" in r.getMessage()}
    warnings = list(records.values())
    assert len(warnings) == 1 and "U+2B21" in warnings[0], warnings
    assert "\u2b21" in (tmp_path / "t.md").read_text()
    assert "\u2b21" in pd.read_csv(tmp_path / "t.csv").graph[0]


def test_writer_table_round_trip(tmp_path):
    out = ReportWriter(tmp_path)
    df = pd.DataFrame({"n": [1, 2], "v": [0.1, 1 / 3], "s": ["a_b", None]})
    out.table("t", df, caption="cap")
    back = pd.read_csv(tmp_path / "t.csv")
    assert back.v.tolist() == [0.1, 1 / 3]  # exact: the CSV is for programs
    assert "| 2 | 0.333333333333 |" in (tmp_path / "t.md").read_text()
    assert r"a\_b" in (tmp_path / "t.tex").read_text()


def test_integer_columns_print_whole_when_some_task_failed(tmp_path):
    """A failed task's null outputs make pandas hold an integer column as float64; the ok rows
    a report prints must still be integers: a lattice of 1,048,576 vertices was printed as
    1.04858e+06 (six significant digits, as floats are) in the LaTeX and HTML tables as soon
    as one task of the sweep had failed."""
    import pyarrow as pa

    from pipeline.engine.batch_table import failed_batch_table

    exp = get_experiment("lattice")
    fixed = {"base": "square", "insertions": 0, "boundary": "torus"}
    grid = Grid(exp, {"L1": [16, 1024]}, {**fixed, "L2": 1024})
    table, _ = run_batch(grid, range(grid.total))
    failed = failed_batch_table(Grid(exp, {}, {**fixed, "L1": 8, "L2": 8}), [0], "TaskTimeout: x")
    PartWriter(Path(tmp_path) / "lattice", "test").write(pa.concat_tables([table, failed]))
    assert build_report(tmp_path, "lattice", selection=None) == 0
    outdir = tmp_path / "lattice" / "_report"
    tex = (outdir / "lattice_values.tex").read_text()
    page = (outdir / "index.html").read_text()
    for whole in ("1048576", "2097152"):  # vertices and edges of the 1024 x 1024 torus
        assert f"& {whole} " in tex or f"& {whole} \\\\" in tex, whole
        assert f'<td class="num">{whole}</td>' in page, whole
    assert "e+06" not in tex


def _report_figures(tmp_path, grid) -> dict:
    """Run every point of ``grid`` and its experiment's report plug-ins; returns the figures
    they drew, name -> (figure, caption)."""
    from pipeline.report.core import reports

    table, _ = run_batch(grid, range(grid.total))
    df = table.to_pandas()
    df.attrs["experiment"] = grid.name
    assert set(df.status) == {"ok"}
    figures = {}

    class Capture(ReportWriter):
        def figure(self, name, fig, caption=""):
            figures[name] = (fig, caption)
            super().figure(name, fig, caption)

    out = Capture(tmp_path)
    with out.style_context():
        for fn in reports(grid.name):
            fn(df, out)
    return figures


def _assert_one_point_per_x(figures) -> None:
    """Every curve steps forward along x: a curve through the rows of two settings revisits
    each x (the zig-zag these tests guard against)."""
    for fig, caption in figures.values():
        for ax in fig.axes:
            for line in ax.get_lines():
                x = line.get_xdata()
                if len(x) > 1:
                    assert np.all(np.diff(x) > 0), (caption, ax.get_title(), x)


def test_composition_delta_draws_one_curve_per_per_step_delta(tmp_path):
    """A composition_delta sweep over the per-step δ too: each curve is one (ε, k, δ), drawn
    in its own figure per δ. The report filtered on ε and k only, so a curve ran through the
    rows of every δ, sorted by total ε: a zig-zag between two different answers."""
    grid = Grid(get_experiment("composition_delta"),
                {"eps": [0.2], "k": [10, 100], "eps_total": [0.5, 1.0, 2.0, 4.0],
                 "delta": [0.0, 1e-6]}, {})
    figures = _report_figures(tmp_path, grid)
    assert len(figures) == 2  # one per per-step δ
    assert all("δ = " in caption for _, caption in figures.values())
    _assert_one_point_per_x(figures)  # one row per total ε


def test_composition_delta_axis_shows_every_delta_and_marks_zero(tmp_path):
    """log10 δ from -34 to -270 lay below a fixed floor of -16.5 (silently clipped), and the rows
    with δ = 0 exactly (total ε >= kε = 50) were dropped, the curve just stopping."""
    grid = Grid(get_experiment("composition_delta"),
                {"eps": [0.05], "k": [1000], "eps_total": [5.0, 20.0, 40.0, 45.0, 49.0, 50.0, 60.0]},
                {})
    table, _ = run_batch(grid, range(grid.total))
    logs = table.to_pandas()["log_delta_optimal"].to_numpy() / np.log(10)
    finite = logs[np.isfinite(logs)]
    assert finite.min() < -270 and np.isneginf(logs).sum() == 2  # the case of the review
    (fig, caption), = _report_figures(tmp_path, grid).values()
    lo, hi = fig.axes[0].get_ylim()
    assert lo <= finite.min() and finite.max() <= hi
    assert "δ = 0 exactly" in caption and "total ε = 50 for k = 1000" in caption
    edge = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "v"]
    assert len(edge) == 1 and list(edge[0].get_xdata()) == [50.0, 60.0]


def test_figure_8_4_regression_counts_each_p_once(tmp_path):
    """The Figure 8.4 fit is over the distinct diagonal probabilities p of a strip width m:
    eigen_entropy depends on (m, p) only, so a sweep over samples (or n) too repeated every
    point, and the fit counted each p as often, with that many degrees of freedom (the
    points, residual standard error, F statistic and p-value were those of copies)."""
    from pipeline.report.independent_sets import regression_rows

    grid = Grid(get_experiment("random_triangulation"),
                {"m": [2], "p": [0.2, 0.3, 0.4, 0.5], "samples": [0, 2]}, {"n": 100})
    table, _ = run_batch(grid, range(grid.total))
    once = Grid(get_experiment("random_triangulation"),
                {"m": [2], "p": [0.2, 0.3, 0.4, 0.5]}, {"n": 100, "samples": 0})
    single, _ = run_batch(once, range(once.total))
    for column in ("eigen_entropy", "annealed_entropy"):
        fit = regression_rows(table.to_pandas(), column)
        want = regression_rows(single.to_pandas(), column)
        assert fit["points"].tolist() == [4]
        pd.testing.assert_frame_equal(fit, want)


def test_edge_test_report_keeps_each_test_level_apart(tmp_path):
    """An edge_test sweep over the Neyman-Pearson level: the table says which level a row
    has, and each curve is one setting. The report keyed rows by (eps, a, b) only, so the
    table had rows differing in nothing shown and a curve ran through both levels' rows."""
    grid = Grid(get_experiment("edge_test"), {"n": [4, 10, 30], "level": [0.01, 0.1]},
                {"eps": 1.0})
    figures = _report_figures(tmp_path, grid)
    shown = pd.read_csv(tmp_path / "edge_test_size_power.csv")
    assert "level" in shown and not shown.drop(columns=[c for c in shown if c not in
                                                       ("eps", "a", "b", "n", "level")]
                                               ).duplicated().any()
    _assert_one_point_per_x(figures)  # one row per n


def test_inferential_report_keeps_each_field_apart(tmp_path):
    """An inferential sweep over the Ising field h too: each curve of ν/ε against J is one
    setting. Panels were cut by graph, mechanism and prior, curves by eps, so a curve ran
    through the rows of every h (each J twice on the x axis)."""
    grid = Grid(get_experiment("inferential"), {"J": [0.0, 0.3, 0.6], "h": [0.0, 0.5]},
                {"graph": "path", "n": 5, "target": "2", "eps": 1.0})
    figures = _report_figures(tmp_path, grid)
    assert figures
    _assert_one_point_per_x(figures)  # one row per J


def test_edge_dp_report_keeps_each_prior_parameter_apart(tmp_path):
    """An edge_dp sweep over the ER edge probability p too: each curve of the loss against n
    is one setting. Panels were cut by prior and mechanism, curves by edge class and eps, so
    a curve ran through the rows of every p (each n twice on the x axis)."""
    grid = Grid(get_experiment("edge_dp"), {"n": [3, 4], "p": [0.2, 0.4]},
                {"prior": "er", "mechanism": "laplace_edge_count"})
    figures = _report_figures(tmp_path, grid)
    assert figures
    _assert_one_point_per_x(figures)  # one row per n
    shown = pd.read_csv(tmp_path / "edge_dp_loss.csv")
    assert "p" in shown and not shown[["p", "edge_class", "eps", "n"]].duplicated().any()


def test_sweep_summary_keeps_infinite_values(tmp_path):
    """The summary printed after a sweep gives each column's exact min and max: infinite
    values are values (eps_optimal is inf where no finite total eps reaches the target
    delta). They were dropped with NaN, so the max of a column that holds inf was its largest
    finite value, and the median that of the finite rows."""
    from pipeline.report.summary import summary_table

    exp = get_experiment("composition")
    store(tmp_path, "composition", {"k": [1, 10], "delta": [0.0, 0.1]},
          {"delta_target": 1e-6, "eps": 0.5})
    lines = summary_table(tmp_path / "composition", exp).splitlines()
    row = next(line.split() for line in lines if line.startswith("eps_optimal "))
    assert row[1:] == ["0.499998", "inf", "inf", "0"]  # min, median, max, null


def test_sweep_summary_names_the_numeric_columns_it_leaves_out(tmp_path):
    """The closing summary shows the first six numeric columns: inferential's other four
    (nu_influence_bound, the gamma_* norms) were left out without a word."""
    from pipeline.report.summary import MAX_COLUMNS, summary_table

    exp = get_experiment("inferential")
    store(tmp_path, "inferential", {"J": [0.1, 0.2]}, {"graph": "path", "n": 4, "target": "1"})
    lines = summary_table(tmp_path / "inferential", exp).splitlines()
    shown = [line.split()[0] for line in lines[lines.index(next(
        line for line in lines if line.startswith("column "))) + 1:] if not line.startswith("(")]
    assert MAX_COLUMNS == 6 and shown == ["node", "n_nodes", "J_effective", "nu", "nu_over_eps",
                                          "nu_affiliated"], lines
    assert lines[-1] == ("(and 4 more numeric column(s), not summarised here: nu_influence_bound, "
                         "gamma_spectral_norm, gamma_spectral_radius, gamma_max_row_sum)"), lines


def test_sweep_summary_covers_the_current_version_only(tmp_path):
    """Rows an earlier version left in the folder were mixed into the closing summary's
    count and figures; they are now counted on a line of their own."""
    import dataclasses

    from pipeline.report.summary import summary_table

    exp = get_experiment("calibration")
    old = dataclasses.replace(exp, version=exp.version - 1)
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260101T000000Z-aaaaaa").write(  # old: value = 100 x
        run_batch(Grid(old, {"x": [10, 20, 30]}, {"work_us": 0.0, "scale": 100.0}), range(3))[0])
    PartWriter(folder, "20260102T000000Z-bbbbbb").write(  # current: value = x
        run_batch(Grid(exp, {"x": [1, 2]}, {"work_us": 0.0}), range(2))[0])
    lines = summary_table(folder, exp, tasks_ok=2, tasks_failed=0).splitlines()
    assert lines[0].startswith(f"stored: 2 rows of version {exp.version} ")
    assert lines[0].endswith(", 2 tasks ok, 0 failed")
    assert lines[1].startswith("and 3 rows of other versions")
    value = next(line.split() for line in lines if line.startswith("value "))
    assert value[1:] == ["1", "1.5", "2", "0"]  # min, median, max, null: not 1,000 .. 3,000


def test_sweep_summary_of_a_part_damaged_during_the_sweep_exits_4(tmp_path, capsys):
    """A part file truncated (or another experiment's part copied in) while a sweep ran: its
    closing summary read the footers raw, and the sweep ended on an ArrowInvalid traceback
    with exit 2 ("bad input, nothing written"). Now the store's own error and exit 4."""
    from types import SimpleNamespace

    from pipeline.exit_codes import EXIT_BAD_STORE
    from pipeline.sweep_command import _summarise

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": [0, 1, 2, 3]}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260102T000000Z-bbbbbb").write(run_batch(grid, range(4))[0])
    plan = SimpleNamespace(done_ok=4, done_failed=0)
    (part,) = folder.glob("part-*.parquet")
    part.write_bytes(part.read_bytes()[:200])
    assert _summarise(grid, folder, plan, None) == EXIT_BAD_STORE
    err = capsys.readouterr().err
    assert "error: the sweep's rows are written, but the folder cannot be summarised: part " \
           f"file {part}" in err and f"python -m pipeline verify {folder} --repair" in err, err
    part.unlink()
    other = Grid(get_experiment("composition"), {"k": [1]}, {})  # valid Parquet, not ours
    PartWriter(tmp_path / "composition", "20260102T000000Z-cccccc").write(
        run_batch(other, range(1))[0])
    (foreign,) = (tmp_path / "composition").glob("part-*.parquet")
    foreign.rename(folder / foreign.name)
    assert _summarise(grid, folder, plan, None) == EXIT_BAD_STORE
    assert "written by experiment 'composition'" in capsys.readouterr().err


def test_sweep_summary_says_its_figures_are_the_ok_rows(tmp_path):
    """The head counts ok and failed tasks, and the min/median/max/null beneath were the ok
    rows' alone without a word ('value null 0' beside a failed row whose value is null)."""
    from pipeline.report.summary import summary_table

    exp = get_experiment("calibration")
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260102T000000Z-bbbbbb").write(  # x = 0 and 3 fail
        run_batch(Grid(exp, {"x": [0, 1, 2, 3, 4]}, {"work_us": 0.0, "fail_every": 3}),
                  range(5))[0])
    lines = summary_table(folder, exp, tasks_ok=3, tasks_failed=2).splitlines()
    header = next(line for line in lines if line.startswith("column "))
    assert header.endswith("null  (the 3 ok rows)"), lines
    value = next(line.split() for line in lines if line.startswith("value "))
    assert value[1:] == ["1", "2", "4", "0"]  # min, median, max, null of x = 1, 2, 4
    PartWriter(tmp_path / "ok" / "calibration", "20260102T000000Z-cccccc").write(
        run_batch(Grid(exp, {"x": [1, 2]}, {"work_us": 0.0}), range(2))[0])
    lines = summary_table(tmp_path / "ok" / "calibration", exp).splitlines()
    assert next(line for line in lines if line.startswith("column ")).endswith("null")


def test_markdown_tables_escape_pipes_and_newlines(tmp_path):
    """A cell's '|' or line break must not cut a Markdown row: a failed task's error such as
    Python's "unsupported operand type(s) for |: 'int' and 'str'" gave failed_tasks.md a row
    with one cell more than its header."""
    out = ReportWriter(tmp_path)
    df = pd.DataFrame({"task_id": ["a1"], "error": ["TypeError: unsupported operand type(s) "
                                                    "for |: 'int' and 'str'\nin line 2"]})
    out.table("failed_tasks", df)
    lines = (tmp_path / "failed_tasks.md").read_text().splitlines()
    assert len(lines) == 3  # header, rule, one row

    def cells(line):
        return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))

    assert cells(lines[2]) == cells(lines[0]) == 2
    assert r"for \|: 'int'" in lines[2]


def test_index_quotes_a_multiline_first_error_on_its_line(tmp_path):
    """index.md quotes the first error as inline code in a list item: an error of two lines
    (or holding a backtick) ended the item and the code span mid-message."""
    from pipeline.engine.batch_table import failed_batch_table

    grid = Grid(get_experiment("calibration"), {"x": [0, 1]}, {"work_us": 0.0})
    table, _ = run_batch(grid, [0])
    failed = failed_batch_table(grid, [1], "ValueError: bad `x`\nsecond line [k.py:1 in run]")
    PartWriter(Path(tmp_path) / "calibration", "test").write(
        pa.concat_tables([table, failed.cast(table.schema)]))
    assert build_report(tmp_path, "calibration") == 0
    index = (tmp_path / "calibration" / "_report" / "index.md").read_text()
    line = next(x for x in index.splitlines() if "task(s) failed**" in x)
    assert "``ValueError: bad `x` second line [k.py:1 in run]``" in line


def test_composition_hetero_table_shows_each_generator_setting(tmp_path):
    """A composition_hetero sweep over the generator's eps_max: the table says which eps_max a
    row has. Its columns left out eps_min, eps_max, p_high and pld_interval, so a two-level
    sweep over eps_max gave two rows differing in nothing shown but their answers."""
    grid = Grid(get_experiment("composition_hetero"), {"eps_max": [0.5, 1.0]},
                {"eps_source": "two_level", "k": 5, "pld": False})
    _report_figures(tmp_path, grid)
    shown = pd.read_csv(tmp_path / "hetero.csv")
    assert "eps_max" in shown and len(shown) == 2
    assert not shown.drop(columns=[c for c in shown if c.startswith("eps_") and c != "eps_max"]
                          ).duplicated().any()


def test_leakage_report_keeps_each_solver_setting_apart(tmp_path):
    """A leakage sweep over solver and symmetrise too: each curve against eps is one setting,
    and the tables say which setting a row has. The report cut by graph only, so a curve ran
    through the rows of every solver (each eps twice on the x axis), the LP table had rows
    differing in nothing shown but solver_used, and the 'where it holds' counts took every
    eps once per setting."""
    grid = Grid(get_experiment("leakage"), {"eps": [0.5, 1.0, 2.0],
                                            "solver": ["full_lp", "orbit_lp"],
                                            "symmetrise": [True, False]},
                {"graph": "cycle", "n": 5})
    figures = _report_figures(tmp_path, grid)
    assert figures
    _assert_one_point_per_x(figures)  # one row per eps
    shown = pd.read_csv(tmp_path / "leakage_lp_vs_bounds.csv")
    keys = ["graph_label", "solver", "symmetrise", "eps"]
    assert set(keys) <= set(shown) and not shown[keys].duplicated().any()
    where = pd.read_csv(tmp_path / "thesis_bound_where_holds.csv")
    assert len(where) == 4 and set(where["eps_values"]) == {3}


def test_low_influence_report_keeps_each_mechanism_parameter_apart(tmp_path):
    """A low_influence sweep over the Theorem 3 alpha and eps_eval: each curve and each row of
    the li_implies_dp table is one setting. The configuration named graph, mechanism, k and
    coupling only, so a curve ran through the rows of every alpha (utility 0.45, 0.35, ...)
    and one table row summed up four settings."""
    grid = Grid(get_experiment("low_influence"), {"alpha": [0.1, 0.3], "eps_eval": [0.0, 1.0]},
                {"graph": "path", "n": 3, "mechanism": "theorem3", "eps": 1.0})
    figures = _report_figures(tmp_path, grid)
    assert figures
    _assert_one_point_per_x(figures)
    shown = pd.read_csv(tmp_path / "li_implies_dp.csv")
    assert len(shown) == 4 and set(shown["rows"]) == {1}
    assert shown["config"].str.contains("alpha=").all() and shown["config"].str.contains("eps_eval=").all()


def test_bayes_reports_keep_each_repeats_apart(tmp_path):
    """A bayes_network (bayes_regression) sweep over repeats: each value is a setting of its
    own. repeats was not among the keys that cut the settings, so the rows of 2 and 8 repeats
    were pooled into one mean (rows = 2), their standard errors averaged as if alike."""
    grid = Grid(get_experiment("bayes_network"), {"eps": [0.5, 2.0], "repeats": [2, 8]},
                {"d": 4, "n_total": 200, "n_train": 20, "mechanism": "laplace"})
    figures = _report_figures(tmp_path / "network", grid)
    assert {"accuracy_vs_eps_repeats2", "accuracy_vs_eps_repeats8"} <= set(figures)
    for repeats in (2, 8):
        shown = pd.read_csv(tmp_path / "network" / f"accuracy_vs_eps_repeats{repeats}.csv")
        assert shown["rows"].tolist() == [1, 1]
    grid = Grid(get_experiment("bayes_regression"), {"b": [1.0, 10.0], "repeats": [2, 4]},
                {"n_total": 200})
    figures = _report_figures(tmp_path / "regression", grid)
    assert {"mse_vs_b_repeats2", "mse_vs_b_repeats4"} <= set(figures)


def test_low_influence_examples_5_6_keeps_each_swept_parameter_apart(tmp_path):
    """An optimise sweep over eps_eval too: each (eps, delta) is one table row and one point
    of a curve per setting. The table and figure cut by delta only, so each eps came twice
    in the table, identical in every column shown, and each curve revisited every utility."""
    grid = Grid(get_experiment("low_influence"), {"eps": [0.5, 1.0, 2.0], "eps_eval": [0.0, 1.0]},
                {"mode": "optimise", "graph": "K2", "delta": 0.0})
    figures = _report_figures(tmp_path, grid)
    assert set(figures) == {"tradeoff_examples_5_6"}
    _assert_one_point_per_x(figures)
    fig, _ = figures["tradeoff_examples_5_6"]
    labels = [line.get_label() for line in fig.axes[0].get_lines()][:-1]  # last: the bound
    assert len(labels) == 4 and sum("eps_eval=1" in s for s in labels) == 2
    shown = pd.read_csv(tmp_path / "examples_5_6.csv")
    assert len(shown) == 6 and not shown[["eps", "delta", "eps_eval"]].duplicated().any()
    assert list(shown["eps_eval"]) == [0.0] * 3 + [1.0] * 3
    assert list(shown["eps"]) == [0.5, 1.0, 2.0] * 2


_SLOW_REPORT = """
import os, sys, time
from pipeline.report.build import build_report
from pipeline.report.core import report_for
from pipeline.report.selection import Selection
tag, release = sys.argv[2], sys.argv[3]

@report_for("calibration")
def slow(df, out):  # a report plug-in that runs until told to go on ("-": at once)
    print("building", flush=True)
    deadline = time.monotonic() + 60
    while release != "-" and not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    out.table("only_" + tag, df[["x"]], caption="rows of report " + tag)

sys.exit(build_report(sys.argv[1], "calibration"))
"""


def test_two_reports_at_once_do_not_mix_their_files(tmp_path):
    """Two report=true runs of one folder at once (two terminals, a report in a loop during a
    sweep): the second deleted _report/ under the first and wrote its own; the first then
    wrote its tables and index into it, so the folder held one report's index beside the
    other's tables. Now the second waits for the first, and the folder is the second's."""
    store(tmp_path, "calibration", {"x": [0, 1, 2]}, {"work_us": 0.0})
    cmd = [sys.executable, "-c", _SLOW_REPORT, str(tmp_path)]
    release = tmp_path / "release"
    first = subprocess.Popen(cmd + ["a", str(release)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert first.stdout.readline() == "building\n"  # the first is inside its build
    # the first goes on only once the second waits for it (a fixed pause lost the race under
    # load: the second's start outlasted it)
    second_err = tmp_path / "second.err"
    with open(second_err, "w") as fh:
        second = subprocess.Popen(cmd + ["b", "-"], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=fh, text=True)
    deadline = time.monotonic() + 90
    while ("waiting for another report of" not in second_err.read_text()
           and second.poll() is None and time.monotonic() < deadline):
        time.sleep(0.1)
    release.touch()
    second.communicate(timeout=120)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, err + second_err.read_text()
    assert "waiting for another report of" in second_err.read_text()
    report = tmp_path / "calibration" / "_report"
    tables = sorted(p.name for p in report.glob("only_*.csv"))
    assert tables == ["only_b.csv"]  # the second report whole, nothing of the first
    index = (report / "index.md").read_text()
    assert "only_b" in index and "only_a" not in index
    assert pd.read_csv(report / "only_b.csv")["x"].tolist() == [0, 1, 2]


def test_a_report_waits_for_another_a_bounded_time(tmp_path):
    """The wait for a report already running has a bound: a hung one (a stuck LaTeX, a
    frozen process) holding the lock does not keep the next report waiting for ever."""
    from pipeline.report.build import REPORT_LOCK, _report_lock

    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; fh = open(sys.argv[1], 'a'); "
         "fcntl.flock(fh, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(tmp_path / REPORT_LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        start = time.monotonic()
        with _report_lock(tmp_path, wait_s=1.0) as got:
            assert got is False
        assert 1.0 <= time.monotonic() - start < 5.0
    finally:
        holder.kill()
        holder.wait(timeout=10)
    with _report_lock(tmp_path, wait_s=1.0) as got:  # free again once its holder is gone
        assert got is True


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_report_on_a_full_disk_keeps_the_previous_one_and_says_why(tmpfs):
    """A report was rebuilt in place: on a full disk it deleted the previous report, left
    half a new one, and ended in a Hydra traceback. It is now built beside it and swapped in
    whole; the failure is one line, exit 3. (A real 16 MiB tmpfs.)"""
    disk = tmpfs("size=16m", "disk")
    store(disk, "calibration", {"x": {"range": [0, 200]}}, {"work_us": 0.0, "fail_every": 7})
    args = [sys.executable, str(ROOT / "run.py"), "report=true", "experiment=calibration",
            "report_scope=all", f"results_dir={disk}"]
    first = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert first.returncode == 0, first.stderr
    folder = disk / "calibration"
    before = _files(folder / "_report")
    assert (folder / "_report" / "index.html").is_file()
    fill_disk(disk)  # to the last byte
    again = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert again.returncode == 3, again.stdout + again.stderr
    assert "error: could not build the report of calibration: No space left on device" in \
        again.stderr and "the previous report, if any, is left as it was" in again.stderr
    assert "Traceback" not in again.stderr, again.stderr
    assert _files(folder / "_report") == before
    assert not list(folder.glob("._report*"))  # the half-built one is removed
    (disk / "_filler").unlink()
    third = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert third.returncode == 0, third.stderr
    assert (folder / "_report" / "index.html").is_file()


def test_a_report_killed_between_its_two_renames_is_put_back_by_the_next(tmpfs):
    """A build killed after moving the previous report aside and before moving its own in
    leaves no `_report`. The next build puts the previous one back before anything else
    (report/swap.py, shared with export): had it failed too (a full disk), nothing was left."""
    import socket

    disk = tmpfs("size=16m", "disk")
    store(disk, "calibration", {"x": {"range": [0, 50]}}, {"work_us": 0.0})
    assert build_report(disk, "calibration") == 0
    folder = disk / "calibration"
    before = _files(folder / "_report")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = f"{dead.pid}-0a1b2c3d-{socket.gethostname()}"
    (folder / "_report").rename(folder / f"._report.replaced-{tag}")  # the kill's state: old
    (folder / f"._report.building-{tag}").mkdir()  # moved aside, the new one not moved in
    (folder / f"._report.building-{tag}" / "index.md").write_text("half")
    fill_disk(disk)
    with pytest.raises(OSError):
        build_report(disk, "calibration")
    assert _files(folder / "_report") == before
    assert sorted(p.name for p in folder.iterdir() if "_report" in p.name) == ["_report"]
    (disk / "_filler").unlink()
    assert build_report(disk, "calibration") == 0
    assert sorted(p.name for p in folder.iterdir() if "_report" in p.name) == ["_report"]


SCOPE_LINE = ("report: 1 of 7 stored ok point(s) are in this config's grid (report_scope=grid); "
              "report_scope=all reports every stored point")


def test_a_report_of_part_of_the_stored_points_says_how_many(tmp_path):
    """7 points stored, the command's grid (report_scope=grid) held 1: the report covered 1
    and the terminal said only 'report: ... (2 tables, 0 figures)'."""
    import io

    from pipeline.report.selection import Selection

    store(tmp_path, "calibration", {"x": {"range": [0, 7]}}, {"work_us": 0.0})
    exp = get_experiment("calibration")
    stream = io.StringIO()
    one = Selection(grid=Grid(exp, {"x": [3]}, {"work_us": 0.0}))
    assert build_report(tmp_path, "calibration", stream=stream, selection=one) == 0
    assert SCOPE_LINE in stream.getvalue().splitlines(), stream.getvalue()
    assert SCOPE_LINE.removeprefix("report: ") in \
        (tmp_path / "calibration" / "_report" / "index.md").read_text()
    # nothing stored left out (the grid holds every stored point, or report_scope=all): no line
    for selection in (Selection(grid=Grid(exp, {"x": {"range": [0, 9]}}, {"work_us": 0.0})),
                      Selection()):
        stream = io.StringIO()
        assert build_report(tmp_path, "calibration", stream=stream, selection=selection) == 0
        assert "stored ok point" not in stream.getvalue(), stream.getvalue()
    # the command line: the YAML's grid (work_us=1000) holds none of the points stored with
    # work_us=0; overridden to one of them, the line is printed
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "report=true",
                           "experiment=calibration", "grid.x=[3]", "params.work_us=0.0",
                           f"results_dir={tmp_path}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SCOPE_LINE in proc.stdout.splitlines(), proc.stdout


def test_an_export_of_part_of_the_stored_points_says_how_many(tmp_path, capsys):
    """export has the rule too when given experiment= or grid.*/params.* words (without them
    it takes everything)."""
    from pipeline.export_command import main

    store(tmp_path / "r", "calibration", {"x": {"range": [0, 7]}}, {"work_us": 0.0})
    folder = tmp_path / "r" / "calibration"
    assert main([str(folder), "--to", str(tmp_path / "one"), "--author", "A",
                 "experiment=calibration", "grid.x=[3]", "params.work_us=0.0"]) == 0
    out = capsys.readouterr().out
    assert "export: 1 of 7 stored ok point(s) are in the selected grid" in out, out
    assert main([str(folder), "--to", str(tmp_path / "all"), "--author", "A"]) == 0
    assert "stored ok point" not in capsys.readouterr().out


def test_the_selection_text_leaves_out_a_fixed_value_an_axis_overrides():
    """A report's index showed the YAML's fixed n = 13 beside grid.n=[10,12] (a user trial):
    the value the points were not computed with."""
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment
    from pipeline.report.selection import Selection, grid_spec

    grid = Grid(get_experiment("calibration"), {"x": [1, 2], "scale": [1.0, 2.0]},
                {"scale": 3.0, "work_us": 0.0})
    assert grid_spec(grid) == {"grid": {"x": [1, 2], "scale": [1.0, 2.0]},
                               "params": {"work_us": 0.0}}
    assert "3.0" not in Selection(grid=grid).describe()


def test_the_generic_summary_writes_its_count_of_values_as_an_integer(tmp_path):
    """summary.csv wrote the count column ``values`` as a float (17.0): it is a count."""
    import csv

    store(tmp_path, "calibration", {"x": {"range": [0, 20]}}, {"work_us": 0.0, "fail_every": 7})
    assert build_report(tmp_path, "calibration") == 0
    outdir = tmp_path / "calibration" / "_report"
    with open(outdir / "summary.csv", newline="") as fh:
        rows = {r["column"]: r for r in csv.DictReader(fh)}
    assert rows["value"]["values"] == "17" and rows["x"]["values"] == "17"  # ok rows: 20 - 3
    summary = pd.read_csv(outdir / "summary.csv")
    assert summary["values"].dtype == np.dtype("int64")
    assert summary["mean"].dtype == np.dtype("float64")  # the statistics stay floats
    assert "| x | | 17 |" in (outdir / "summary.md").read_text().replace("  ", " ")


@pytest.mark.parametrize("seed", range(12))
def test_the_scope_notes_count_is_what_a_full_load_gives(tmp_path, seed):
    """The report's scope note is counted in Arrow on the rows ``pick`` read
    (``points_outside_grid``), where the report loaded the whole store a second time to
    pandas and matched the id strings there (35 of the 59 s of a report of 4M rows). Random
    stores: two experiment versions, points inside and outside the grid, several runs, failed
    attempts retried or not, a run filter and ``version=`` or not; the counts are those of
    the whole table ``pipeline.load`` gives, filtered in pandas."""
    import dataclasses
    import io

    import pipeline
    from pipeline.engine.provenance import provenance_stamp
    from pipeline.report.selection import Selection, points_outside_grid, select_picked

    rng = np.random.default_rng(seed)
    exp = get_experiment("calibration")
    old_exp = dataclasses.replace(exp, version=exp.version - 1)
    folder = tmp_path / "calibration"
    runs = [f"2026010{i + 1}T000000Z-aaaa{i}{v}" for i in range(4) for v in range(2)]
    for k, run_id in enumerate(runs):
        i, version_exp = k // 2, (exp, old_exp)[k % 2]
        xs = sorted(rng.choice(30, size=int(rng.integers(1, 20)), replace=False).tolist())
        grid = Grid(version_exp, {"x": xs}, {"work_us": 0.0})
        table = run_batch(grid, range(grid.total))[0].to_pandas()
        failed = rng.random(len(table)) < 0.3
        table.loc[failed, ["status", "error", "value"]] = ["failed", "ValueError: r", None]
        table["finished_at"] = table["finished_at"] + pd.Timedelta(days=i)
        PartWriter(folder, run_id, stamp=provenance_stamp(version_exp, run_id)).write(
            pa.Table.from_pandas(table, schema=run_batch(grid, [0])[0].schema,
                                 preserve_index=False))
    # every third grid holds every stored point: nothing is left out
    grid = Grid(exp, {"x": {"range": [0, 30 if seed % 3 == 0 else 20]}}, {"work_us": 0.0})
    run_ids = tuple(rng.choice(runs, size=4, replace=False)) if seed % 2 else ()
    versions = [(), (exp.version - 1,), ("latest",), (exp.version - 1, exp.version)][seed % 4]
    selection = Selection(grid=grid, run_ids=run_ids, versions=versions)

    df, picked = select_picked(tmp_path, "calibration", selection)
    everything = pipeline.load(tmp_path, "calibration")
    stored = everything[everything["status"] == "ok"]
    if run_ids:
        stored = stored[stored["run_id"].isin(run_ids)]
    stored = stored[stored["experiment_version"].isin(picked.versions)]
    shown = set(df.loc[df["status"] == "ok", "task_id"])
    outside = len(set(stored["task_id"]) - shown)
    counts = points_outside_grid(picked, selection)
    assert counts == ((len(shown), outside) if outside else None)

    stream = io.StringIO()
    code = build_report(tmp_path, "calibration", stream=stream, selection=selection)
    line = (f"report: {len(shown):,} of {len(shown) + outside:,} stored ok point(s) are in "
            "this config's grid")
    if df.empty:
        assert code == 2
    elif outside:
        assert code == 0 and line in stream.getvalue(), stream.getvalue()
    else:
        assert code == 0 and "stored ok point" not in stream.getvalue(), stream.getvalue()


def _scope_lines(tmp_path, grid_hi, versions=()):
    """(exit code, the report's scope lines) for the grid x in [0, grid_hi)."""
    import contextlib
    import io

    from pipeline.report.selection import Selection

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, grid_hi]}}, {"work_us": 0.0})
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        code = build_report(tmp_path, "calibration", stream=out,
                            selection=Selection(grid=grid, versions=versions))
    return code, [ln for ln in out.getvalue().splitlines() if "stored ok point" in ln]


def _put(tmp_path, frame, schema, run_id, experiment, days=0):
    import pandas as pd

    from pipeline.engine.provenance import provenance_stamp

    frame = frame.copy()
    frame["finished_at"] += pd.Timedelta(days=days)
    PartWriter(tmp_path / "calibration", run_id, stamp=provenance_stamp(experiment, run_id)).write(
        pa.Table.from_pandas(frame, schema=schema, preserve_index=False))


def test_the_scope_note_follows_loads_rule_on_hand_edited_rows(tmp_path):
    """The note's shortcut (a task is ok if any row of it is ok; no deduplication) holds for
    what the engine writes. On rows edited by hand it must not: a later attempt of no status
    supersedes the ok row in load's table (the shortcut said '15 of 20' of a grid of every
    stored point), and an id stored under two versions keeps its later version's rows (it said
    '3 of 23' where load gives '3 of 13'). Found by review; the answers are load's."""
    import dataclasses

    exp = get_experiment("calibration")
    table = run_batch(Grid(exp, {"x": {"range": [0, 20]}}, {"work_us": 0.0}), range(20))[0]
    frame, schema = table.to_pandas(), table.schema
    first = tmp_path / "a"
    _put(first, frame, schema, "20260101T000000Z-aaaaa1", exp)
    later = frame[frame["x"] < 5].copy()
    later["status"] = None  # (not ok, not failed)
    _put(first, later, schema, "20260102T000000Z-aaaaa2", exp, days=1)
    assert _scope_lines(first, 20) == (0, [])

    old = dataclasses.replace(exp, version=exp.version - 1)
    second = tmp_path / "b"
    relabelled = frame.copy()
    relabelled["experiment_version"] = old.version
    _put(second, relabelled, schema, "20260101T000000Z-aaaaa1", old)
    _put(second, frame[frame["x"] >= 10], schema, "20260102T000000Z-aaaaa2", exp, days=1)
    genuine = run_batch(Grid(old, {"x": [0, 1, 2]}, {"work_us": 0.0}), range(3))[0]
    _put(second, genuine.to_pandas(), genuine.schema, "20260103T000000Z-aaaaa3", old)
    code, lines = _scope_lines(second, 10, versions=(old.version,))
    assert code == 0 and len(lines) == 1 and lines[0].startswith(
        "report: 3 of 13 stored ok point(s)"), lines


def test_the_scope_note_of_a_store_whose_ids_were_edited_does_not_crash(tmp_path):
    """Ids that are not 24 hex digits are matched as strings; where none of the stored ok
    ones is the grid's, the count of those held was None and the report (and export) raised
    TypeError. Found by review."""
    import dataclasses

    exp = get_experiment("calibration")
    old = dataclasses.replace(exp, version=exp.version - 1)
    table = run_batch(Grid(exp, {"x": {"range": [0, 20]}}, {"work_us": 0.0}), range(20))[0]
    frame = table.to_pandas()
    frame["experiment_version"] = old.version  # this version's ids, labelled the old one
    frame.loc[frame["x"] == 3, "task_id"] = frame.loc[frame["x"] == 3, "task_id"].str[:16] + "Z" * 8
    _put(tmp_path, frame, table.schema, "20260101T000000Z-aaaaa1", old)
    assert _scope_lines(tmp_path, 10) == (0, [])
