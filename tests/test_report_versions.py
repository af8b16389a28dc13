"""Reports over rows of several experiment versions keep the versions apart.

A user trial reported inferential's points n = 8, 10 stored under version 1 and n = 10 again
under version 2 (a version bump) with ``report_scope=all 'version=[1,2]'``: inferential_nu had
48 rows and no experiment_version column (each n = 10 point twice, identical lines), and
inferential_bound_check counted 24 points per graph where 16 are distinct; only a warning said
the selection mixed versions. Now every report function runs once per version (report/versions.py
``per_version``): each table gets an ``experiment_version`` column and no count pools
versions, each figure is drawn once per version (``NAME_vN``, its caption naming it); a report
of one version is as before. Real rows stored as the sweeps of each version write them."""

from __future__ import annotations

import csv
import dataclasses
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import provenance_stamp
from pipeline.experiments.base import get_experiment
from pipeline.store.parquet import experiment_dir
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
INFERENTIAL = {"graph": ["path", "cycle"], "J": [0.0, 0.25, 0.5, 0.75], "eps": [0.1, 1.0]}
INFERENTIAL_PARAMS = {"prior": "ising", "mechanism": "worst_case", "h": 0.0}


def store(results_dir, name: str, version: int, axes: dict, params: dict, run_id: str) -> int:
    """The points of ``axes`` stored as version ``version`` of ``name`` computes them (task
    ids hash the version), as a sweep of that version writes them; returns the row count."""
    exp = dataclasses.replace(get_experiment(name), version=version)
    grid = Grid(exp, axes, params)
    table, _ = run_batch(grid, range(grid.total))
    assert set(table["experiment_version"].to_pylist()) == {version}
    PartWriter(experiment_dir(results_dir, name), run_id,
               stamp=provenance_stamp(exp, run_id)).write(table)
    return table.num_rows


def report(results_dir, name: str, *words):
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), f"experiment={name}",
                           f"results_dir={results_dir}", "report=true", "progress=false",
                           *words], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return proc, experiment_dir(results_dir, name) / "_report"


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as fh:
        lines = fh.read().splitlines()
    return lines, list(csv.DictReader(lines))


@pytest.fixture(scope="module")
def inferential(tmp_path_factory):
    """The user trial's store: n = 8 and n = 10 under version v, n = 10 under v + 1 (16
    points each: 2 graphs x 4 J x 2 eps)."""
    results = tmp_path_factory.mktemp("versions")
    old = get_experiment("inferential").version
    for n, version, run in ((8, old, "a"), (10, old, "b"), (10, old + 1, "c")):
        store(results, "inferential", version, INFERENTIAL, {**INFERENTIAL_PARAMS, "n": n},
              f"20260101T00000{ord(run) - 97}Z-{run * 6}")
    return results, old, old + 1


def test_a_report_over_two_versions_keeps_them_apart(inferential):
    results, old, new = inferential
    proc, out = report(results, "inferential", "report_scope=all", f"version=[{old},{new}]")
    assert proc.returncode == 0, proc.stderr

    tables = sorted(out.glob("*.csv"))
    assert {t.stem for t in tables} == {"status", "inferential_nu", "inferential_bound_check"}
    # no line of a table is there twice, and every table says each row's version
    for table in tables:
        lines, _ = read_csv(table)
        assert not [line for line, k in Counter(lines).items() if k > 1], table.name
    for table in tables:
        lines, _ = read_csv(table)
        assert lines[0].split(",")[0] == "experiment_version", (table.name, lines[0])

    # the trial's point: once per version, not twice in one version-less table
    _, nu = read_csv(out / "inferential_nu.csv")
    point = [r for r in nu if (r["graph"], r["n_nodes"], r["eps"], r["J_effective"])
             == ("path", "10", "1.0", "0.5")]
    assert sorted(r["experiment_version"] for r in point) == [str(old), str(new)], point
    assert Counter(r["experiment_version"] for r in nu) == {str(old): 32, str(new): 16}
    for version in (old, new):  # within a version, every point once
        keys = [(r["graph"], r["n_nodes"], r["eps"], r["J_effective"]) for r in nu
                if r["experiment_version"] == str(version)]
        assert len(keys) == len(set(keys))

    # counts per version: 16 points per graph under the old version (n = 8, 10), 8 under
    # the new one (n = 10); pooled, they were 24 per graph
    _, check = read_csv(out / "inferential_bound_check.csv")
    assert {(r["experiment_version"], r["graph"]): int(r["n_points"]) for r in check} == {
        (str(old), "cycle"): 16, (str(old), "path"): 16,
        (str(new), "cycle"): 8, (str(new), "path"): 8}
    _, status = read_csv(out / "status.csv")
    assert {(r["experiment_version"], r["status"]): int(r["tasks"]) for r in status} == {
        (str(old), "ok"): 32, (str(new), "ok"): 16}

    # a figure per version, each caption naming its version; the LaTeX table repeats the
    # version in each of its parts
    for version in (old, new):
        for ext in ("png", "pdf", "svg"):
            assert (out / f"inferential_nu_vs_J_v{version}.{ext}").exists()
    assert not (out / "inferential_nu_vs_J.png").exists()
    index = (out / "index.md").read_text()
    assert f"Experiment version {old} only" in index and f"Experiment version {new} only" in index
    assert "(column experiment_version): no row, count or statistic pools versions" in index
    tex = (out / "inferential_nu.tex").read_text()
    parts = tex.split(r"\sbox{\pipelinetablebox}{%")[1:]
    assert len(parts) > 1 and all(r"experiment\_" in p.split(r"\midrule")[0] for p in parts)
    assert f"experiment versions {old}, {new} are reported apart" in proc.stdout, proc.stdout
    compiles(sorted(out.glob("*.tex")), out.parent / "latex")


def compiles(tex_files: list[Path], workdir: Path) -> None:
    """The tables compile with pdflatex in the article class. (Not checked: that each fits the
    text width. The first part of a LaTeX table cut into parts holds every key column and the
    first other column, unchecked, and the experiment_version key makes inferential_nu's
    first part 52 pt too wide here; with graphicx it is scaled to the line.)"""
    import shutil

    if shutil.which("pdflatex") is None or subprocess.run(
            ["kpsewhich", "siunitx.sty"], capture_output=True).returncode != 0:
        return  # the print checks (test_report_print) say what is missing
    workdir.mkdir()
    body = "\n".join(rf"\input{{{f.resolve().as_posix()}}}" + "\n\\clearpage" for f in tex_files)
    (workdir / "tables.tex").write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
        "\\usepackage{siunitx}\n\\begin{document}\n" + body + "\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "tables.tex"], cwd=workdir, capture_output=True, text=True,
                          timeout=300)
    log = (workdir / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    assert not [line for line in log.splitlines() if line.startswith("!")], log[-3000:]


def test_a_report_of_one_version_is_unchanged(inferential):
    """One version: no experiment_version column, figures as named by the report module."""
    results, old, new = inferential
    for version, rows in ((old, 32), (new, 16)):
        proc, out = report(results, "inferential", "report_scope=all", f"version={version}")
        assert proc.returncode == 0, proc.stderr
        assert "reported apart" not in proc.stdout
        lines, nu = read_csv(out / "inferential_nu.csv")
        assert lines[0].startswith("prior,mechanism,graph,") and len(nu) == rows
        assert (out / "inferential_nu_vs_J.png").exists()
        assert not list(out.glob("*_v[0-9]*"))
        assert "experiment_version" not in (out / "index.md").read_text()


def test_generic_summary_failures_and_plugins_per_version(tmp_path):
    """The generic summary (an experiment without a report module) and the failed-point
    notes are per version; a report function failing on one version's rows is said with that
    version, and the other version's tables are still written."""
    from pipeline.report import core
    from pipeline.report.build import build_report
    from pipeline.report.selection import Selection

    new = get_experiment("calibration").version
    old = new - 1
    params = {"work_us": 0.0, "rows": 2}
    store(tmp_path, "calibration", old, {"x": list(range(6))}, {**params, "fail_every": 4},
          "20260101T000000Z-aaaaaa")  # x = 0, 4 fail
    store(tmp_path, "calibration", new, {"x": list(range(3))}, params, "20260101T000001Z-bbbbbb")

    def build(versions):
        code = build_report(tmp_path, "calibration", stream=sys.stderr,
                            selection=Selection(versions=versions))
        return code, experiment_dir(tmp_path, "calibration") / "_report"

    code, out = build((old, new))
    assert code == 0
    lines, summary = read_csv(out / "summary.csv")
    assert lines[0].startswith("experiment_version,column,")
    values = {(r["experiment_version"], r["column"]): float(r["values"]) for r in summary}
    assert values[(str(old), "value")] == 8 and values[(str(new), "value")] == 6  # ok rows
    _, status = read_csv(out / "status.csv")
    assert {(r["experiment_version"], r["status"]): int(r["tasks"]) for r in status} == {
        (str(old), "ok"): 4, (str(old), "failed"): 2, (str(new), "ok"): 3}
    _, failed = read_csv(out / "failed_tasks.csv")
    assert {r["experiment_version"] for r in failed} == {str(old)} and len(failed) == 2
    index = (out / "index.md").read_text()
    summary_line = next(line for line in index.splitlines() if line.startswith("- **summary**"))
    assert "2 failed point(s) not shown" in summary_line, summary_line
    assert f"Experiment version {old}:" in summary_line  # the note is of that version only

    @core.report_for("calibration")
    def broken_on_new(df, out):
        if int(df["experiment_version"].iloc[0]) == new:
            raise RuntimeError("no such column")
        out.table("points", df[["x"]].drop_duplicates(), caption="Points")

    try:
        code, out = build((old, new))
    finally:
        core._REPORTS["calibration"].remove(broken_on_new)
    assert code == 1
    lines, points = read_csv(out / "points.csv")
    assert lines[0] == "experiment_version,x" and {r["experiment_version"] for r in points} \
        == {str(old)}
    index = (out / "index.md").read_text()
    assert f"`broken_on_new (experiment version {new})`: RuntimeError: no such column" in index
    assert f"Rows of experiment version {old} only" in index
    # the caption says why the other version has no such table (it said 'gave no such table')
    assert (f"the rows of version {new} gave no such table; the report function failed on "
            f"version {new}") in index, index


@pytest.mark.parametrize("name", ["composition", "independent_sets", "edge_dp"])
def test_each_versions_part_is_that_versions_own_report(tmp_path, name):
    """For families with their own report modules: the small grid stored under two versions;
    in the report of both, each table's rows of version v (less the experiment_version
    column) are exactly the table of the report of version v alone, and each figure is there
    once per version."""
    import io

    import pandas as pd

    from pipeline.report.build import build_report
    from pipeline.report.selection import Selection
    from report_families import SMALL_GRIDS

    axes, params = SMALL_GRIDS[name]
    new = get_experiment(name).version + 1
    versions = (new - 1, new)
    for version in versions:
        store(tmp_path, name, version, axes, params, f"20260101T00000{version % 10}Z-aaaaaa")
    out = experiment_dir(tmp_path, name) / "_report"

    def read(path):
        return pd.read_csv(path, dtype=str, keep_default_na=False)

    alone, figures = {}, None
    for version in versions:
        assert build_report(tmp_path, name, stream=io.StringIO(),
                            selection=Selection(versions=(version,))) == 0
        alone[version] = {p.name: read(p) for p in out.glob("*.csv")}
        figures = sorted(p.stem for p in out.glob("*.png"))
    assert build_report(tmp_path, name, stream=io.StringIO(),
                        selection=Selection(versions=versions)) == 0
    both = {p.name: read(p) for p in out.glob("*.csv")}
    assert set(both) == set(alone[versions[0]]) and len(both) > 1
    for table, frame in both.items():
        assert frame.columns[0] == "experiment_version", table
        for version in versions:
            part = frame[frame["experiment_version"] == str(version)]
            pd.testing.assert_frame_equal(
                part.drop(columns="experiment_version").reset_index(drop=True),
                alone[version][table], obj=f"{table} of version {version}")
    assert sorted(p.stem for p in out.glob("*.png")) == sorted(
        f"{f}_v{v}" for f in figures for v in versions)


def test_captions_of_two_versions_read_as_separate_sentences(tmp_path):
    """A table whose caption differs by version (a failed-point note on one of them) was
    captioned 'Experiment version 2: Summary ... unit of its column Experiment version 3:
    Summary ...': each version's caption now ends with a full stop before the next."""
    import pandas as pd

    from pipeline.report.core import ReportWriter
    from pipeline.report.versions import per_version

    # version 2 all ok, version 3 with one failed point: only 3's caption gets the note
    df = pd.DataFrame({"experiment_version": [2, 2, 3, 3], "task_id": ["a", "b", "c", "d"],
                       "status": ["ok", "ok", "ok", "failed"], "x": [1.0, 2.0, 3.0, None]})
    caption = "Summary statistics of the numeric columns (ok rows), each in the unit of its column"

    def summary(part, out):
        out.table("summary", part[part["status"] == "ok"][["x"]], caption=caption)
        out.table("units", part[["x"]], caption=f"Values of x (nat, {len(part)} rows)")

    out = ReportWriter(tmp_path)
    per_version(summary, df, out)
    captions = {e["name"]: e["caption"] for e in out.entries}
    apart = ("Experiment versions 2, 3 are kept apart (column experiment_version): no row, "
             "count or statistic pools versions.")
    assert captions["summary"] == (
        f"Experiment version 2: {caption}. Experiment version 3: {caption}. 1 failed point(s) "
        f"not shown (see failed_tasks). {apart}")
    # a caption ending in a parenthesis is no sentence's end either
    assert captions["units"] == (
        "Experiment version 2: Values of x (nat, 2 rows). Experiment version 3: Values of x "
        f"(nat, 2 rows). 1 failed point(s) not shown (see failed_tasks). {apart}")
    tex = (tmp_path / "summary.tex").read_text()
    assert "unit of its column. Experiment version 3:" in tex, tex
