"""What a sweep says about its plan and what a stopped sweep records: the dry run's counts
with ``rerun_changed=true`` (equal to the real run's), the header's split of skipped failures
and its note on points stored under other experiment versions, and an interrupted sweep's
message, run record and ``status`` line. Real small sweeps on one local worker."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import provenance_stamp
from pipeline.experiments.base import get_experiment
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cluster.dashboard_address=:0", "progress=false", "cluster.n_workers=1"]


def run_cli(*args, timeout=180):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def status(results_dir):
    return subprocess.run([sys.executable, "-m", "pipeline", "status", str(results_dir),
                           "calibration"], cwd=ROOT, capture_output=True, text=True, timeout=60)


def last_run(folder: Path) -> dict:
    try:
        return json.loads((folder / "_manifest.json").read_text())["runs"][-1]
    except (OSError, ValueError, KeyError, IndexError):
        return {}


@pytest.mark.timeout(200)
def test_dry_run_with_rerun_changed_counts_what_the_sweep_then_runs(tmp_path):
    """16 ok and 4 failed points stored by other code: with rerun_changed=true the dry run said
    'already done: 16 ok ... to run: 0' while the sweep then recomputed the 16. Its counts are
    now the sweep's: 0 ok, 4 failed (skipped), 16 to run."""
    exp = get_experiment("calibration")
    params = {"work_us": 0.0, "fail_every": 5}
    grid = Grid(exp, {"x": {"range": [0, 20]}}, params)
    marks = provenance_stamp(exp, "20260101T000000Z-aaaaaa")
    marks["code_id"] = ("0123456789abcdef", marks["code_id"][1])  # computed by other code
    PartWriter(tmp_path / "calibration", "20260101T000000Z-aaaaaa", stamp=marks).write(
        run_batch(grid, range(grid.total))[0])  # x = 0, 5, 10, 15 failed
    args = ["experiment=calibration", "grid.x={range:[0,20]}", "params.work_us=0",
            "params.fail_every=5", f"results_dir={tmp_path}", *FAST]

    kept = run_cli(*args, "dry_run=true")
    assert kept.returncode == 0, kept.stderr
    assert "already done:  16 ok, 4 failed (skipped)" in kept.stdout, kept.stdout
    assert "to run:        0" in kept.stdout, kept.stdout
    assert "other code:    16 stored ok point(s) computed by another code_id (kept" in kept.stdout

    dry = run_cli(*args, "rerun_changed=true", "dry_run=true")
    assert dry.returncode == 0, dry.stderr
    assert "already done:  0 ok, 4 failed (skipped)" in dry.stdout, dry.stdout
    assert "to run:        16" in dry.stdout, dry.stdout
    assert "other code:    16 stored ok point(s) computed by another code_id (re-run: " \
           "rerun_changed=true; counted in 'to run')" in dry.stdout, dry.stdout

    real = run_cli(*args, "rerun_changed=true")
    assert real.returncode == 1, real.stderr  # the 4 skipped failures
    assert "recomputing 16 stored point(s)" in real.stderr, real.stderr
    assert ("20 tasks in grid, 4 already done (0 ok, 4 failed: skipped; retry_failed=true "
            "reruns them), 16 to run") in real.stderr, real.stderr
    assert "ran 16 tasks" in real.stdout, real.stdout


@pytest.mark.timeout(200)
def test_sweep_header_splits_skipped_failures_and_notes_other_versions(tmp_path):
    """After a version bump the header said '12 tasks in grid, 0 already done' with no word of
    the 10 points stored under version 1; with stored failures, 'N already done' hid the
    skipped failures (the dry run split them). It says both now, and the dry run too."""
    exp = get_experiment("calibration")
    old = dataclasses.replace(exp, version=exp.version - 1)
    params = {"work_us": 0.0, "fail_every": 4}
    PartWriter(tmp_path / "calibration", "20260101T000000Z-aaaaaa").write(  # 7 ok, 3 failed
        run_batch(Grid(old, {"x": {"range": [0, 10]}}, params), range(10))[0])
    args = ["experiment=calibration", "grid.x={range:[0,12]}", "params.work_us=0",
            "params.fail_every=4", f"results_dir={tmp_path}", *FAST]
    note = (f"10 point(s) of this grid are stored only under version {old.version} of "
            f"calibration: version {exp.version} computes them anew")

    dry = run_cli(*args, "dry_run=true")
    assert dry.returncode == 0, dry.stderr
    assert f"other version: {note}" in dry.stdout, dry.stdout
    first = run_cli(*args)
    assert first.returncode == 1, first.stderr  # x = 0, 4, 8 fail
    assert "12 tasks in grid, 0 already done, 12 to run" in first.stderr, first.stderr
    assert f"note: {note}" in first.stderr, first.stderr

    again = run_cli(*args)  # every point stored under this version: no note
    assert ("12 tasks in grid, 12 already done (9 ok, 3 failed: skipped; retry_failed=true "
            "reruns them), 0 to run") in again.stderr, again.stderr
    assert "stored only under version" not in again.stderr, again.stderr
    dry = run_cli(*args, "dry_run=true")
    assert "other version:" not in dry.stdout, dry.stdout

    retry = run_cli(*args, "retry_failed=true")
    assert ("12 tasks in grid, 9 already done, 3 to run (3 stored failed: retry_failed=true "
            "reruns them)") in retry.stderr, retry.stderr


@pytest.mark.timeout(200)
def test_a_sweep_of_other_settings_beside_stored_rows_says_what_changed(tmp_path):
    """A mistyped fixed value (params.work_us=2000 for 1000) said '0 already done, 20 to run'
    and ran everything again beside the old rows; only the closing summary told. The header
    now names what differs from the last run. A resume of the same settings, or an extended
    grid that finds points stored, has no such note."""
    words = ["experiment=calibration", "grid.x={range:[0,20]}", f"results_dir={tmp_path}", *FAST]
    first = run_cli(*words, "params.work_us=1000")
    assert first.returncode == 0, first.stderr
    assert "note: none of this grid" not in first.stderr  # nothing stored before it
    typo = run_cli(*words, "params.work_us=2000", "params.rows=2")
    assert typo.returncode == 0, typo.stderr
    assert ("calibration: 20 tasks in grid, 0 already done, 20 to run" in typo.stderr
            and "note: none of this grid's points are stored here, and the last run had other "
            "settings (params.rows: unset -> 2; params.work_us: 1000 -> 2000): this sweep adds "
            "rows of the new settings beside the stored ones; if a value is mistyped, stop it "
            "(Ctrl-C) and fix the command\n" in typo.stderr), typo.stderr
    again = run_cli(*words, "params.work_us=2000", "params.rows=2", "grid.x={range:[0,25]}")
    assert "20 already done, 5 to run" in again.stderr and "note: none" not in again.stderr


def test_an_interrupted_sweep_records_and_says_how_many_tasks_it_kept(tmp_path):
    """Ctrl-C: the record kept the last heartbeat's progress ('done': 1, 'remaining': 199)
    beside 'written': 78 rows, and the message said only '1 part file(s) kept'. The record's
    progress and counts now give the tasks stored this run, as the message does; during the
    sweep, status says which finished rows are not yet written (a kill -9 loses them)."""
    folder = tmp_path / "calibration"
    driver = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
         "grid.x={range:[0,200]}", "params.work_us=100000", "params.work_mode=sleep",
         f"results_dir={tmp_path}", *FAST],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(driver.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while (last_run(folder).get("progress") or {}).get("done", 0) < 1:
            assert driver.poll() is None and time.monotonic() < deadline, "".join(err)
            time.sleep(0.2)
        # the probe's point is buffered (flush_seconds=60): done, not yet written
        line = [x for x in status(tmp_path).stdout.splitlines() if "progress at" in x]
        assert line and re.search(r"progress at the last heartbeat \(\d+ s ago\): [\d,]+/200 "
                                  r"done, .*ETA [\d:-]+, [\d,]+ finished row\(s\) not yet "
                                  r"written, [1-9][\d,]* worker thread\(s\)$", line[0]), line
        time.sleep(3)  # the first big batch runs on (its points are kept at the interrupt)
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=90)  # stderr is the reader's (communicate would race it)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    reader.join(10)
    err_text = "".join(err)
    assert driver.returncode == 130, err_text
    said = re.search(r"interrupted \(SIGINT\): (\d+) task\(s\) kept in (\d+) part file\(s\); "
                     r"rerun the same command to resume", err_text)
    assert said, err_text
    stored = len(pd.read_parquet(folder))  # one row a point
    assert int(said.group(1)) == stored > 1, err_text
    run = last_run(folder)
    assert run["status"] == "interrupted"
    assert run["written"]["rows"] == stored and run["written"]["parts"] == int(said.group(2))
    progress = run["progress"]
    assert (progress["done"], progress["remaining"]) == (stored, 200 - stored), progress
    assert progress["eta_s"] is None and progress["unwritten_rows"] == 0, progress
    assert (run["counts"]["ran"], run["counts"]["ok"]) == (stored, stored), run["counts"]
    shown = status(tmp_path).stdout
    assert f"ran {stored} task(s): {stored} ok, 0 failed" in shown, shown


def test_status_lists_the_earlier_runs_that_run_id_selects(tmp_path):
    """A report's empty selection advised 'check run_id (python -m pipeline status lists the
    runs)', and status showed only the last run. It lists the earlier ones too (the last
    few, newest first), and each id selects that run's rows."""
    import pipeline
    from pipeline.status import EARLIER_RUNS_SHOWN, earlier_runs

    for lo, hi in ((0, 4), (4, 8)):
        proc = run_cli("experiment=calibration", f"grid.x={{range:[{lo},{hi}]}}",
                       "params.work_us=0", f"results_dir={tmp_path}", *FAST)
        assert proc.returncode == 0, proc.stderr
    runs = json.loads((tmp_path / "calibration" / "_manifest.json").read_text())["runs"]
    first, last = runs[0]["run_id"], runs[1]["run_id"]
    shown = status(tmp_path).stdout
    assert f"last run {last}: finished" in shown, shown
    assert "earlier runs (1, newest first; run_id=RUN selects one's rows):" in shown, shown
    assert f"    {first}: finished, started {runs[0]['started_at']}, ran 4 task(s)" in shown
    assert sorted(pipeline.load(tmp_path, "calibration", run_id=first).x) == [0, 1, 2, 3]
    many = [dict(runs[0], run_id=f"run{i}") for i in range(EARLIER_RUNS_SHOWN + 2)]
    lines = earlier_runs(many)
    assert [line.split(":")[0].strip() for line in lines[1:-1]] == [
        f"run{i}" for i in range(EARLIER_RUNS_SHOWN + 1, 1, -1)]
    assert lines[-1] == "    ... and 2 earlier (all in _manifest.json)"


def test_points_stored_under_other_versions_are_told_apart_by_their_exact_lists(tmp_path):
    """count_stored compared a list parameter's stored values as numpy's str() of the array,
    which keeps 8 significant digits and abbreviates over 1,000 elements with '...': two
    points of an old version differing beyond that collided with the one stored under this
    version, and 'N point(s) of this grid are stored only under version ...' counted too few
    (here 0 instead of 2). The values are compared as the task id hashes them."""
    import pyarrow as pa

    from pipeline.engine.resume import count_stored, other_versions_text
    from pipeline.experiments.base import Experiment, Param

    def lists(version):
        return Experiment(name="lists", version=version, params=[Param("w", "float_list", [0.5])],
                          columns={"out": pa.float64()},
                          run=lambda p, s: {"out": float(len(p["w"]))})

    long = [float(i) for i in range(1001)]
    points = [[0.1, 0.123456789012], [0.1, 0.123456789013],  # differ in the 12th digit
              long, long[:500] + [0.25] + long[501:]]  # differ only inside numpy's '...'
    old, new = lists(1), lists(2)
    PartWriter(tmp_path, "20260101T000000Z-aaaaaa").write(
        run_batch(Grid(old, {"w": points}, {}), range(4))[0])
    grid = Grid(new, {"w": points}, {})
    PartWriter(tmp_path, "20260102T000000Z-bbbbbb").write(run_batch(grid, [0, 2])[0])
    counts = count_stored(grid, tmp_path)
    assert (counts.ok, counts.failed, counts.other_versions) == (2, 0, {1: 2}), counts
    assert other_versions_text(grid, counts.other_versions).startswith(
        "2 point(s) of this grid are stored only under version 1 of lists: version 2 computes")
