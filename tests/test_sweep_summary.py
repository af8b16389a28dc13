"""The summary printed at the end of a sweep describes that sweep's grid.

A user trial ran the same grid twice with another fixed parameter (params.n=8, then n=10)
into one folder: the second summary said 'stored: 32 rows of version 1 (all attempts; ...),
16 tasks ok' and its min/median/max mixed n=8's rows into n=10's, with no word of it. Now
the counts and figures are the grid's points' latest attempts, and one line counts the
folder's other rows (other settings, versions, superseded attempts) and names pipeline.load.
"""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import pipeline
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.report.summary import summary_table
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cluster.n_workers=1", "cluster.dashboard_address=:0", "progress=false"]
G = ["experiment=inferential", "~grid.zip", "grid.graph=[path,cycle]",
     "grid.J=[0.0,0.25,0.5,0.75]", "grid.eps=[0.1,1.0]"]


def run_py(*args, code=0):
    proc = subprocess.run([sys.executable, "run.py", *args, *FAST], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc


def inferential_grid(n: int) -> Grid:
    """The grid run.py builds from G and params.n=N (the YAML's params, n on top)."""
    params = yaml.safe_load((ROOT / "conf/experiment/inferential.yaml").read_text())["params"]
    return Grid(get_experiment("inferential"),
                {"graph": ["path", "cycle"], "J": [0.0, 0.25, 0.5, 0.75], "eps": [0.1, 1.0]},
                {**params, "n": n})


def row(lines, column):
    return next(line.split() for line in lines if line.startswith(column + " "))[1:]


@pytest.fixture(scope="module")
def two_settings(tmp_path_factory):
    results = tmp_path_factory.mktemp("summary")
    run_py(*G, "params.n=8", f"results_dir={results}")
    second = run_py(*G, "params.n=10", f"results_dir={results}")
    return results, second


def test_the_summary_covers_the_grid_not_the_folders_other_settings(two_settings):
    results, _ = two_settings
    grid = inferential_grid(10)
    lines = summary_table(results / "inferential", grid.experiment, 16, 0, grid=grid).splitlines()
    assert lines[0] == ("this sweep's grid (16 points): 16 tasks ok, 0 failed; 16 rows, each "
                        "task's latest attempt (version 1)"), lines
    assert lines[1] == (f"not summarised: 16 other rows in the folder (16 of other parameter "
                        f"settings); pipeline.load({str(results)!r}, 'inferential') loads every "
                        "setting and version"), lines
    assert row(lines, "n_nodes")[:3] == ["10", "10", "10"]  # was 8, 9, 10: n=8's rows mixed in
    df = pipeline.load(results, "inferential")
    assert len(df) == 32  # everything is still there, and loadable
    mine = df[df.n == 10]
    for column in ("nu", "nu_over_eps"):
        low, median, high = map(float, row(lines, column)[:3])
        assert (low, high) == pytest.approx((mine[column].min(), mine[column].max()))
        assert median == pytest.approx(mine[column].median(), rel=1e-5)
    # the first sweep's grid, read from the same folder: its own rows
    first = summary_table(results / "inferential", grid.experiment, grid=inferential_grid(8))
    assert row(first.splitlines(), "n_nodes")[:3] == ["8", "8", "8"]


def test_the_printed_summary_after_a_sweep_covers_its_grid(two_settings):
    results, second = two_settings
    assert "this sweep's grid (16 points): 16 tasks ok, 0 failed; 16 rows" in second.stdout
    assert "not summarised: 16 other rows in the folder (16 of other parameter settings)" \
        in second.stdout
    assert "stored: 32 rows" not in second.stdout


def test_superseded_attempts_other_versions_and_failures_are_told_apart(tmp_path):
    """A real sweep with failures; then a later attempt of two of its points and rows of an
    older version in the same folder. The grid's figures are the latest attempts of this
    version; the rest is counted by kind."""
    exp = get_experiment("calibration")
    words = ["experiment=calibration", "grid.x={range:[0,6]}", "params.work_us=0",
             "params.fail_every=3", f"results_dir={tmp_path}"]
    first = run_py(*words, code=1)
    assert "4 tasks ok, 2 failed" in first.stdout  # x = 0 and 3 fail
    grid = Grid(exp, {"x": {"range": [0, 6]}}, {"work_us": 0.0, "fail_every": 3})
    folder = tmp_path / "calibration"
    # a later attempt of x = 1 and x = 2, say a rerun_changed=true after a code change:
    # this one is kept (and pipeline.load keeps it), the sweep's rows of them are superseded
    PartWriter(folder, "20990101T000000Z-later").write(run_batch(grid, [1, 2])[0])
    old = dataclasses.replace(exp, version=exp.version - 1)  # and 3 rows of an older version
    PartWriter(folder, "20200101T000000Z-older").write(
        run_batch(Grid(old, {"x": [7, 8, 9]}, {"work_us": 0.0, "scale": 100.0}), range(3))[0])
    lines = summary_table(folder, exp, grid=grid).splitlines()
    assert lines[0] == ("this sweep's grid (6 points): 4 tasks ok, 2 failed; 6 rows, each "
                        f"task's latest attempt (version {exp.version})"), lines
    assert lines[1].startswith("not summarised: 5 other rows in the folder (3 of other "
                               "versions, 2 superseded attempts); pipeline.load("), lines
    assert row(lines, "value")[:4] == ["1", "3", "5", "0"]  # x = 1, 2, 4, 5; min, median, max
    df = pipeline.load(tmp_path, "calibration", version=exp.version)
    assert len(df) == 6 and sorted(df.loc[df.status == "ok", "value"]) == [1, 2, 4, 5]
    # a grid none of whose points is stored
    empty = Grid(exp, {"x": [100, 101]}, {"work_us": 0.0})
    lines = summary_table(folder, exp, grid=empty).splitlines()
    assert lines[0].startswith("this sweep's grid (2 points): 0 tasks ok, 0 failed, 2 not stored")
    assert lines[1].startswith("not summarised: 11 other rows in the folder (8 of other "
                               "parameter settings, 3 of other versions)")
    assert len(lines) == 2  # no figures of rows that are not the grid's


def test_the_ran_line_names_the_warm_up_that_the_progress_rate_counts(two_settings):
    """The progress line ended '16/16 done ... 26 tasks/s', the summary 'ran 16 tasks in
    0.1 s (248 tasks/s)': the first counts the workers' warm-up, the second not. The line
    now gives both rates, each named; the one with the warm-up is the progress line's."""
    import json
    import re

    from pipeline.engine.runner import SweepStats
    from pipeline.report.summary import ran_line

    results, _ = two_settings
    run = json.loads((results / "inferential" / "_manifest.json").read_text())["runs"][-1]
    counts, progress = run["counts"], run["progress"]  # what the sweep recorded of itself
    stats = SweepStats(ran=counts["ran"], elapsed_s=counts["elapsed_s"],
                       warmup_s=counts["warmup_s"], parts=counts["parts"])
    assert stats.warmup_s > stats.elapsed_s  # 16 quick points: the warm-up is most of it
    line = ran_line(stats)
    found = re.fullmatch(r"ran 16 tasks in [\d.]+ s after a [\d.]+ s warm-up of the workers: "
                         r"([\d,.]+) tasks/s \(([\d,.]+) tasks/s with the warm-up, as the "
                         r"progress line counts\), 1 part file\(s\)", line)
    assert found, line
    proper, with_warmup = (float(g.replace(",", "")) for g in found.groups())
    assert with_warmup == pytest.approx(progress["rate_per_s"], rel=0.1)
    assert proper == pytest.approx(16 / stats.elapsed_s, rel=0.1)
    slow = SweepStats(ran=24_600, elapsed_s=300.0, warmup_s=0.6, parts=3)  # no difference
    assert ran_line(slow) == "ran 24,600 tasks in 300.0 s (82 tasks/s), 3 part file(s)"


def test_the_printed_ran_line_names_the_warm_up(two_settings):
    _, second = two_settings
    assert "s warm-up of the workers: " in second.stdout


def test_the_summarised_attempts_are_those_load_keeps_across_batches(tmp_path, monkeypatch):
    """The summary finds each task's kept attempt by sorting arrays of the key columns, a
    batch of the store at a time (it deduplicated the id strings in Arrow, about 0.35 KB a
    stored row). Tasks with every mix of attempts (ok then failed, failed then ok, two of
    each, an attempt with no finish time, one written twice), spread over parts and read 4
    rows at a time: the rows summarised are those load keeps (an attempt written twice was
    counted twice).""" 
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    import pipeline.store.integrity as integrity

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 40]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    first = run_batch(grid, range(40))[0].to_pandas()
    first.loc[first["x"] % 4 == 0, ["status", "error", "value"]] = ["failed", "ValueError: x", None]
    rng = np.random.default_rng(7)
    attempts = [first]
    for day in range(1, 4):  # three more attempts of random subsets, some failed
        again = first.iloc[np.flatnonzero(rng.random(40) < 0.5)].copy()
        failed = rng.random(len(again)) < 0.5
        again.loc[failed, "status"], again.loc[failed, "error"] = "failed", "ValueError: no"
        again.loc[failed, "value"] = None
        again["finished_at"] = again["finished_at"] + pd.Timedelta(days=day)
        if day == 3:
            again.loc[again.index[:3], "finished_at"] = pd.NaT  # finish time unknown
        attempts.append(again)
    attempts.append(attempts[-1])  # the last attempt written twice: load keeps one copy
    for i, frame in enumerate(attempts):
        PartWriter(folder, f"2026010{i + 1}T000000Z-aaaaa{i}").write(
            pa.Table.from_pandas(frame, schema=run_batch(grid, [0])[0].schema,
                                 preserve_index=False))
    monkeypatch.setattr(integrity, "SCAN_BATCH_ROWS", 4)

    loaded = pipeline.load(tmp_path, "calibration")  # load's rule, in Arrow on the id strings
    ok = loaded.loc[loaded["status"] == "ok", "task_id"].nunique()
    failed = loaded.loc[loaded["status"] == "failed", "task_id"].nunique()
    stored = sum(pq.read_metadata(f).num_rows for f in folder.glob("part-*"))
    assert failed > 0 and stored > len(loaded) > 0  # the store has every kind of task
    line = summary_table(folder, exp, grid=grid).splitlines()[0]
    assert line == (f"this sweep's grid (40 points): {ok} tasks ok, {failed} failed; "
                    f"{len(loaded)} rows, each task's latest attempt (version {exp.version})")


@pytest.mark.parametrize("elsewhere", [False, True])
def test_the_summary_applies_loads_rule_to_the_whole_folder(tmp_path, elsewhere):
    """load's rule has a step that runs only when some (task, row index) of the folder
    repeats: then each task keeps the rows of its latest finish time. Applied to the grid's
    rows alone, the summary kept rows that load drops when another setting's point was
    written twice (found by review; rows of one attempt finishing apart, edited by hand)."""
    import pandas as pd
    import pyarrow as pa

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 2]}}, {"work_us": 0.0, "rows": 2})
    other = Grid(exp, {"x": {"range": [0, 2]}}, {"work_us": 0.0, "rows": 2, "scale": 2.0})
    folder = tmp_path / "calibration"
    table = run_batch(grid, [0, 1])[0].to_pandas()
    table.loc[table.row_index == 1, "finished_at"] += pd.Timedelta(seconds=5)
    PartWriter(folder, "20260101T000000Z-a").write(
        pa.Table.from_pandas(table, schema=run_batch(grid, [0])[0].schema, preserve_index=False))
    if elsewhere:
        twice = run_batch(other, [0])[0]
        PartWriter(folder, "20260101T000000Z-b").write(twice)
        PartWriter(folder, "20260101T000000Z-c").write(twice)
    loaded = pipeline.load(tmp_path, "calibration")
    kept = int((loaded["scale"] == 1.0).sum())
    assert kept == (2 if elsewhere else 4)
    line = summary_table(folder, exp, grid=grid).splitlines()[0]
    assert f"2 tasks ok, 0 failed; {kept} rows, each task's latest attempt" in line, line


@pytest.mark.parametrize("seed", range(8))
def test_the_summary_counts_the_grids_latest_attempts_on_random_stores(tmp_path, monkeypatch,
                                                                      seed):
    """The closing summary finds the grid's rows in one scan of the key columns and the
    parameters, matched against the grid (it matched them in a scan of their own, then read
    the key columns again). Random stores: the grid's setting beside another (scale=2) and an
    older version, tasks of one and of three rows, retries, failures, scanned 7 rows at a
    time. The counts are those of pipeline.load's table filtered in pandas to the grid's
    points of this version."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    import pipeline.store.integrity as integrity
    from pipeline.engine.provenance import provenance_stamp

    rng = np.random.default_rng(seed)
    exp = get_experiment("calibration")
    old = dataclasses.replace(exp, version=exp.version - 1)
    folder = tmp_path / "calibration"
    rows = int(rng.integers(1, 4))
    for k in range(6):
        experiment = old if k == 5 else exp
        params = {"work_us": 0.0, "rows": rows, "scale": 2.0 if k % 2 else 1.0}
        xs = sorted(rng.choice(25, size=int(rng.integers(1, 20)), replace=False).tolist())
        grid = Grid(experiment, {"x": xs}, params)
        table = run_batch(grid, range(grid.total))[0].to_pandas()
        failed = np.repeat(rng.random(len(xs)) < 0.3, rows)
        table.loc[failed, ["status", "error", "value"]] = ["failed", "ValueError: r", None]
        table["finished_at"] = table["finished_at"] + pd.Timedelta(days=k)
        run_id = f"2026010{k + 1}T000000Z-aaaaa{k}"
        PartWriter(folder, run_id, stamp=provenance_stamp(experiment, run_id)).write(
            pa.Table.from_pandas(table, schema=run_batch(grid, [0])[0].schema,
                                 preserve_index=False))
    monkeypatch.setattr(integrity, "SCAN_BATCH_ROWS", 7)
    grid = Grid(exp, {"x": {"range": [0, 20]}}, {"work_us": 0.0, "rows": rows})

    loaded = pipeline.load(tmp_path, "calibration")
    mine = loaded[(loaded["x"] < 20) & (loaded["scale"] == 1.0) & (loaded["rows"] == rows)
                  & (loaded["experiment_version"] == exp.version)]
    line = summary_table(folder, exp, grid=grid).splitlines()[0]
    ok = mine.loc[mine["status"] == "ok", "task_id"].nunique()
    failed = mine.loc[mine["status"] == "failed", "task_id"].nunique()
    missing = 20 - ok - failed
    assert line == (f"this sweep's grid (20 points): {ok} tasks ok, {failed} failed"
                    + (f", {missing} not stored" if missing else "")
                    + f"; {len(mine)} rows, each task's latest attempt (version {exp.version})")
