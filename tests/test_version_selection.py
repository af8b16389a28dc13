"""Selections across experiment versions: a grid selection with ``version=`` matches the task
ids its points have under each requested version (ids hash the version, and a grid hashed
with the code's version never matched an older version's rows); without ``version=`` a grid
whose points are stored only under other versions says so and names the ``version=`` that
selects them; export's scope note counts the stored points of the versions the grid is
matched under, from one read of the store; load's warning on mixed versions says what
``version='latest'`` keeps. Real sweeps (one local worker) beside rows stored by
``run_batch`` under another version of the same experiment."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import pipeline
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import provenance_stamp
from pipeline.experiments.base import get_experiment
from pipeline.store.parquet import experiment_dir
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cluster.dashboard_address=:0", "progress=false", "cluster.n_workers=1"]
PARAMS = {"work_us": 0.0}
WORDS = ["experiment=calibration", "params.work_us=0"]


def run_cli(*args, module=False, timeout=180):
    head = ["-m", "pipeline"] if module else [str(ROOT / "run.py")]
    return subprocess.run([sys.executable, *head, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def store_version(results_dir, version: int, xs, run_id: str) -> None:
    """calibration's points ``xs`` stored as experiment ``version`` computes them (its task
    ids hash that version), as a sweep of that version writes them."""
    exp = dataclasses.replace(get_experiment("calibration"), version=version)
    grid = Grid(exp, {"x": list(xs)}, PARAMS)
    table, _ = run_batch(grid, range(grid.total))
    assert set(table["experiment_version"].to_pylist()) == {version}
    PartWriter(experiment_dir(results_dir, "calibration"), run_id,
               stamp=provenance_stamp(exp, run_id)).write(table)


@pytest.fixture(scope="module")
def bumped(tmp_path_factory):
    """x = 0..7 stored under the previous version, then a sweep of this code (the version
    bumped) over x = 4..7: the old rows of x = 0..3 have no row under this version."""
    results = tmp_path_factory.mktemp("bumped")
    old = get_experiment("calibration").version - 1
    store_version(results, old, range(8), "20260101T000000Z-aaaaaa")
    proc = run_cli(*WORDS, "grid.x={range:[4,8]}", f"results_dir={results}", *FAST)
    assert proc.returncode == 0, proc.stderr
    return results, old, old + 1


def test_a_grid_with_version_matches_that_versions_rows(bumped):
    """version=1 with the grid of x = 0..3 returned 0 rows and warned '4 of 4 point(s) of
    the grid have no stored row (run the sweep to fill them in)' beside 4 stored rows of
    version 1: the grid was hashed with the code's version 2."""
    results, old, new = bumped
    load = lambda words, **kw: pipeline.load(results, "calibration",  # noqa: E731
                                             select=WORDS + words, **kw)
    df = load(["grid.x={range:[0,4]}"], version=old)
    assert sorted(df.x) == [0, 1, 2, 3] and set(df.experiment_version) == {old}
    cov = df.attrs["coverage"]
    assert cov["grid"]["stored"] == 4 and cov["grid"]["missing"] == 0, cov["grid"]
    assert cov["warnings"] == [], cov["warnings"]
    # a list of versions: each version's ids; a point counts as stored under either
    df = load(["grid.x={range:[0,8]}"], version=[old, new])
    assert len(df) == 12 and sorted(df[df.experiment_version == new].x) == [4, 5, 6, 7]
    grid = df.attrs["coverage"]["grid"]
    assert (grid["points"], grid["stored"], grid["missing"]) == (8, 8, 0)
    assert grid["versions"] == {old: 8, new: 4}
    # 'latest' is the newest stored version (this code's here): x = 0..3 are missing from it
    cov = load(["grid.x={range:[0,8]}"], version="latest").attrs["coverage"]
    assert cov["grid"]["versions"] == {new: 4} and cov["grid"]["missing"] == 4
    # a version with none of the points: missing, and a sweep of this code does not fill it
    cov = load(["grid.x={range:[8,10]}"], version=old).attrs["coverage"]
    assert cov["warnings"] == [f"2 of 2 point(s) of the grid have no stored row under version "
                               f"{old} (a sweep of this code computes them under version "
                               f"{new})"], cov["warnings"]

    # run.py report=true and export with version= find them too (both exited 2)
    words = [*WORDS, "grid.x={range:[0,4]}", f"version={old}"]
    report = run_cli(*words, f"results_dir={results}", "report=true", *FAST)
    assert report.returncode == 0, report.stderr
    assert "no stored rows" not in report.stderr, report.stderr
    exported = run_cli("export", str(results / "calibration"), "--to",
                       str(results.parent / "pkg-old"), "--author", "A", *words, module=True)
    assert exported.returncode == 0, exported.stderr
    assert "exported 4 rows (4 tasks" in exported.stdout, exported.stdout


def test_a_grid_stored_only_under_another_version_says_which(bumped):
    """Without version= the grid of x = 0..3 (stored under version 1 only) said '4 of 4
    point(s) of the grid have no stored row (run the sweep to fill them in)'. It names the
    version that holds them and the version= that selects them."""
    results, old, new = bumped
    df = pipeline.load(results, "calibration", select=WORDS + ["grid.x={range:[0,4]}"])
    assert df.empty  # the default is unchanged: this code's version
    warned = df.attrs["coverage"]["warnings"]
    assert warned == [
        f"4 of 4 point(s) of the grid have no stored row under version {new} (the "
        f"experiment's version in this code): 4 of them are stored under other experiment "
        f"versions only (version {old}: 4): task ids include the version, so version={old} "
        f"selects them (a sweep computes them anew under version {new})"], warned
    assert df.attrs["coverage"]["grid"]["stored_under_other_versions"] == {old: 4}
    # some stored elsewhere, some nowhere: both said
    df = pipeline.load(results, "calibration", select=WORDS + ["grid.x=[2,3,4,20]"])
    assert sorted(df.x) == [4]
    (warned,) = df.attrs["coverage"]["warnings"]
    assert warned.startswith(f"3 of 4 point(s) of the grid have no stored row under version "
                             f"{new} (the experiment's version in this code): 2 of them are "
                             f"stored under other experiment versions only (version {old}: 2)")
    assert warned.endswith(", and 1 have no stored row (run the sweep to fill them in)")
    # export, which exits 2 on an empty selection, says it too
    exported = run_cli("export", str(results / "calibration"), "--to",
                       str(results.parent / "pkg-none"), *WORDS, "grid.x={range:[0,4]}",
                       module=True)
    assert exported.returncode == 2
    assert f"stored under other experiment versions only (version {old}: 4)" in \
        exported.stderr, exported.stderr
    # and so does the report, before its 'no stored rows' error (it said only that)
    report = run_cli(*WORDS, "grid.x={range:[0,4]}", f"results_dir={results}", "report=true",
                     *FAST)
    assert report.returncode == 2 and "no stored rows" in report.stderr, report.stderr
    assert f"so version={old} selects them" in report.stderr, report.stderr


def test_exports_scope_note_counts_the_versions_the_grid_matches(bumped, monkeypatch):
    """export's note counted stored ok points of every version ('2 of 12', with 8 of them of
    version 1, which the grid can never match) while the report said '2 of 4'; and it read
    the store twice. It counts as the report does, from one read."""
    results, old, new = bumped
    words = [*WORDS, "grid.x=[4,5]"]
    report = run_cli(*words, f"results_dir={results}", "report=true", *FAST)
    assert report.returncode == 0, report.stderr
    assert "report: 2 of 4 stored ok point(s) are in this config's grid" in report.stdout \
        + report.stderr
    exported = run_cli("export", str(results / "calibration"), "--to",
                       str(results.parent / "pkg-note"), "--author", "A", *words, module=True)
    assert exported.returncode == 0, exported.stderr
    assert "export: 2 of 4 stored ok point(s) are in the selected grid" in exported.stdout, \
        exported.stdout
    # the grid holds every stored point of its version: no note (it said '4 of 12')
    exported = run_cli("export", str(results / "calibration"), "--to",
                       str(results.parent / "pkg-note"), "--author", "A", *WORDS,
                       "grid.x={range:[4,8]}", module=True)
    assert exported.returncode == 0, exported.stderr
    assert "stored ok point(s)" not in exported.stdout, exported.stdout
    # with version=: that version's stored points
    exported = run_cli("export", str(results / "calibration"), "--to",
                       str(results.parent / "pkg-note"), "--author", "A", *words,
                       f"version={old}", module=True)
    assert "export: 2 of 8 stored ok point(s) are in the selected grid" in exported.stdout, \
        exported.stdout

    import pipeline.store.parquet as parquet
    from pipeline.report.export import export_package
    from pipeline.selection_args import parse_selection_args

    reads = []
    real = parquet.read_table
    monkeypatch.setattr(parquet, "read_table", lambda *a, **kw: reads.append(a) or real(*a, **kw))
    cov = export_package(results, "calibration", results.parent / "pkg-once", authors=("A",),
                         selection=parse_selection_args("calibration", words))
    assert cov["scope_note"].startswith("2 of 4 stored ok point(s)"), cov
    assert len(reads) == 1, reads


def test_loads_warning_says_what_latest_keeps(tmp_path):
    """Rows of this code's version and of a newer one (a checkout of an older branch): the
    warning said "version='latest' keeps the current one's rows", which are not the newest.
    It says the newest stored version, and that this code's differs."""
    here = get_experiment("calibration").version
    store_version(tmp_path, here, range(3), "20260101T000000Z-aaaaaa")
    store_version(tmp_path, here + 1, range(2), "20260102T000000Z-bbbbbb")
    with pytest.warns(UserWarning) as caught:
        df = pipeline.load(tmp_path, "calibration")
    assert len(df) == 5
    (text,) = [str(w.message) for w in caught if "experiment versions" in str(w.message)]
    assert "the current one's" not in text, text
    assert (f"version='latest' keeps the newest stored version's rows ({here + 1}); this "
            f"code's version of 'calibration' is {here} (version={here} keeps its rows)") in text
    assert sorted(pipeline.load(tmp_path, "calibration", version="latest").x) == [0, 1]
    # the code at the newest stored version: no word of a difference
    other = tmp_path / "same"
    store_version(other, here - 1, range(2), "20260101T000000Z-aaaaaa")
    store_version(other, here, range(2), "20260102T000000Z-bbbbbb")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipeline.load(other, "calibration")
    (text,) = [str(w.message) for w in caught if "experiment versions" in str(w.message)]
    assert text.endswith(f"version='latest' keeps the newest stored version's rows ({here})")


def test_point_prefixes_are_the_task_ids_of_any_version():
    """coverage hashes the missing points under each other stored version in chunks
    (point_prefixes, through Grid.batch_canonical, as a batch hashes the ids it stores), not
    one task_id(i) at a time: the same ids, for axes, zip groups, lists and a lazy axis."""
    import numpy as np

    from pipeline.report.selection import grid_at_version, grid_prefixes, point_prefixes

    cal = get_experiment("calibration")
    hetero = get_experiment("composition_hetero")
    grids = [Grid(cal, {"x": {"range": [0, 7]}, "zip": [{"rows": [1, 2], "scale": [1.0, 0.5]}]},
                  {"work_us": 0.0}),
             Grid(cal, {"scale": {"linspace": [0, 1, 100_001]}}, PARAMS),  # a lazy axis
             Grid(hetero, {"eps_list": [[0.1, 0.2], [0.3]], "delta_target": [1e-6, 1e-3]},
                  {"eps_source": "list", "pld": False})]
    for grid in grids:
        asked = np.array([grid.total - 1, 0, grid.total // 2, 1])
        for version in (grid.version, grid.version - 1):
            there = grid_at_version(grid, version)
            expected = [int(there.task_id(int(i))[:16], 16) for i in asked]
            assert point_prefixes(grid, asked, version=version).tolist() == expected
            whole = grid_prefixes(grid, version)
            assert whole.size == grid.total and whole[asked].tolist() == expected


def test_a_load_that_finds_nothing_says_what_to_give(tmp_path):
    """pipeline.load named only the path it looked in, where run.py's checks say what to
    give: the experiment's own folder as results_dir, a misspelt name, nothing stored."""
    from pipeline.report.selection import SelectionError

    store_version(tmp_path, 1, range(3), "r1")
    folder = tmp_path / "calibration"
    with pytest.raises(FileNotFoundError) as err:
        pipeline.load(folder, "calibration")
    assert str(err.value).endswith(f"({folder} is itself an experiment's folder: "
                                   f"pipeline.load({str(tmp_path)!r}, 'calibration'))"), err.value
    with pytest.raises(FileNotFoundError) as err:
        pipeline.load(tmp_path, "calibraton")
    assert str(err.value).endswith(f"(did you mean 'calibration'? stored under {tmp_path}: "
                                   "calibration)"), err.value
    with pytest.raises(FileNotFoundError, match=r"\(stored under .*: calibration\)$"):
        pipeline.load(tmp_path, "composition")
    with pytest.raises(FileNotFoundError, match=r"nowhere does not exist\)$"):
        pipeline.load(tmp_path / "nowhere", "calibration")
    # with a selection, the unknown name was KeyError's bare repr: 'calibraton'
    with pytest.raises(SelectionError, match="unknown experiment 'calibraton'; did you mean "
                                             "'calibration'?"):
        pipeline.load(tmp_path, "calibraton", grid={"x": [1]})
    assert len(pipeline.load(tmp_path, "calibration")) == 3
    for part in folder.glob("part-*.parquet"):  # the right name, with nothing in it
        part.unlink()
    (folder / "_parts.jsonl").unlink()
    with pytest.raises(FileNotFoundError) as err:
        pipeline.load(tmp_path, "calibration")
    assert str(err.value).endswith("(the folder holds no part file: nothing stored yet, or every "
                                   f"part set aside; python -m pipeline status {folder} says "
                                   "which)"), err.value


def test_a_grid_that_matches_no_stored_point_warns_and_says_why(tmp_path):
    """load(grid=..., params=...) of points none of which is stored returned an empty frame,
    its reason in df.attrs only: a grid=/params= selection takes each parameter's declared
    default, not the YAML's (work_us=1000), so a sweep run with the YAML matched nothing.
    It now warns; a grid that matches, or a run_id filter that leaves the points out (its own
    coverage warning), does not."""
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 4]}}, {"work_us": 1000.0})
    PartWriter(tmp_path / "calibration", "20260101T000000Z-aaaaa0").write(
        run_batch(grid, range(4))[0])
    with pytest.warns(UserWarning, match=r"none of the 4 point\(s\) of the grid given is stored "
                                         r"in 'calibration'; grid=/params= give each "
                                         r"parameter they leave out its declared default"):
        df = pipeline.load(tmp_path, "calibration", grid={"x": {"range": [0, 4]}})
    assert df.empty and df.attrs["coverage"]["grid"]["missing"] == 4
    with pytest.warns(UserWarning, match=r"none of the 2 point\(s\) .* stored in "
                                         r"'calibration' \(2 of 2 point\(s\) of the grid have "
                                         r"no stored row") as caught:
        pipeline.load(tmp_path, "calibration", select=["experiment=calibration",
                                                        "grid.x=[7,8]"])
    assert "declared default" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(pipeline.load(tmp_path, "calibration", grid={"x": {"range": [0, 4]}},
                                 params={"work_us": 1000.0})) == 4
        assert len(pipeline.load(tmp_path, "calibration",
                                 select=["experiment=calibration", "grid.x=[1,2]"])) == 2
