"""Compaction (issue 14): identical load/resume/report before and after, idempotent, and
correct when the compacting process is killed at each step of its commit protocol."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline.engine.batch import run_batch
from pipeline.engine.batch_table import failed_batch_table
from pipeline.engine.grid import Grid
from pipeline.engine.resume import plan_sweep
from pipeline.experiments.base import get_experiment
from pipeline.store.compaction import INTENT, compact, files_after_compaction
from pipeline.store.parquet import load, stored_ids
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
N = 3000


def _grid():
    return Grid(get_experiment("calibration"), {"x": {"range": [0, N]}},
                {"work_us": 0.0, "fail_every": 7, "rows": 2})


def _store(results):
    """A store as sweeps leave it: many small parts, failed attempts later retried ok, a
    batch written twice (a resumed run), and points still missing."""
    grid = _grid()
    writer = PartWriter(results / "calibration", "run1")
    for start in range(0, N - 500, 50):
        writer.write(run_batch(grid, range(start, start + 50))[0])
    writer.write(failed_batch_table(grid, range(2600, 2700), "lost on the cluster"))
    retry = PartWriter(results / "calibration", "run2")
    retry.write(run_batch(grid, range(2600, 2650))[0])  # now ok, for some of them
    retry.write(run_batch(grid, range(0, 50))[0])  # a batch stored twice
    return grid


def _sorted(df):
    return df.sort_values(["task_id", "row_index"]).reset_index(drop=True)


def _parts(folder):
    return sorted(Path(folder).glob("part-*.parquet"))


def _view(results, grid):
    """Everything a user sees: the loaded table, the resume plan and the stored id sets."""
    plan = plan_sweep(grid, results / "calibration")
    ok, failed = stored_ids(results / "calibration")
    return (_sorted(load(results, "calibration")), list(plan.pending), plan.done_ok,
            plan.done_failed, ok.tolist(), failed.tolist())


def _assert_same(a, b):
    pd.testing.assert_frame_equal(a[0], b[0])
    assert a[1:] == b[1:]


def test_compaction_keeps_load_resume_and_report_and_is_idempotent(tmp_path):
    from pipeline.report.build import build_report

    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    assert build_report(tmp_path, "calibration") == 0
    report_before = (folder / "_report" / "index.md").read_text()
    files_before = len(_parts(folder))
    # status's estimate, from the footers alone: the rows with their duplicates, so at most
    # what compact writes, and here the same count (the 50 duplicate rows fit the last file)
    assert files_after_compaction(folder, target_rows=2000)[::2] == (53, 3)
    result = compact(folder, target_rows=2000)
    assert result.rewritten and result.files_before == files_before == 53
    assert result.rows_after == len(before[0]) < result.rows_before  # duplicates dropped
    after = _view(tmp_path, grid)
    _assert_same(before, after)
    assert build_report(tmp_path, "calibration") == 0
    assert (folder / "_report" / "index.md").read_text() == report_before
    parts = _parts(folder)
    assert [pq.read_metadata(p).num_rows for p in parts] == [2000, 2000, len(before[0]) - 4000]
    raw = pd.read_parquet(folder)  # the user contract: the folder alone is the clean table
    pd.testing.assert_frame_equal(_sorted(raw), before[0])
    assert not list(folder.glob("_compacting-*")) and not (folder / INTENT).exists()
    again = compact(folder, target_rows=2000)
    assert not again.rewritten and _parts(folder) == parts  # idempotent: nothing rewritten
    _assert_same(before, _view(tmp_path, grid))


def test_resume_after_compaction_runs_nothing_new(tmp_path):
    args = [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
            f"results_dir={tmp_path}", "cluster.n_workers=1", "cluster.dashboard_address=:0",
            "grid.x={range:[0,300]}", "params.work_us=0", "batch_size=20", "flush_rows=20",
            "progress=false"]
    first = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "calibration"
    assert len(_parts(folder)) == 15
    out = subprocess.run([sys.executable, "-m", "pipeline", "compact", str(folder)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "files: 15 -> 1" in out.stdout and "rows:  300 -> 300" in out.stdout
    second = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    assert "0 to run" in second.stderr and "ran " not in second.stdout
    assert len(_parts(folder)) == 1


def _compact_killed_at(folder, step):
    env = dict(os.environ, PIPELINE_COMPACT_PAUSE_AT=step)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "compact", str(folder),
                             "--target-rows", "2000"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # the process announces the step, then sleeps there
        assert line.strip() == f"compaction paused at {step}", proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("step, outcome", [("staged", "rolled back"),
                                           ("committed", "rolled forward"),
                                           ("swapping", "rolled forward")])
def test_compaction_killed_midway_leaves_old_or_new_set(tmp_path, step, outcome):
    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    old_parts = _parts(folder)
    _compact_killed_at(folder, step)
    _assert_same(before, _view(tmp_path, grid))  # load and resume see one whole set
    if step == "staged":  # not committed: the old set, untouched, is the table
        assert _parts(folder) == old_parts
        assert len(pd.read_parquet(folder)) == sum(pq.read_metadata(p).num_rows for p in old_parts)
    else:  # committed: the new set is the table, even before the swap finishes
        assert (folder / INTENT).exists()
    result = compact(folder, target_rows=2000)  # the next open recovers, then compacts
    assert result.recovered == outcome
    _assert_same(before, _view(tmp_path, grid))
    pd.testing.assert_frame_equal(_sorted(pd.read_parquet(folder)), before[0])
    assert len(_parts(folder)) == 3 and not (folder / INTENT).exists()
    assert not list(folder.glob("_compacting-*"))


def test_compact_command_rejects_a_missing_folder(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline", "compact", str(tmp_path / "nope")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "is not a folder" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("step", ["committed", "swapping"])
def test_verify_reports_and_repair_finishes_a_compaction_killed_after_its_commit(tmp_path,
                                                                                  step):
    """Killed after the commit, both sets sit in the folder until the next sweep or
    compaction: pipeline.load reads the new one, pandas.read_parquet read both (25,000 rows
    for 20,000) and verify called the store healthy. Now verify says so (exit 4) and
    --repair finishes the swap."""
    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    _compact_killed_at(folder, step)

    def verify(*extra):
        return subprocess.run([sys.executable, "-m", "pipeline", "verify", str(folder), *extra],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    out = verify()
    assert out.returncode == 4, out.stdout + out.stderr
    assert "a compaction was interrupted while it swapped files" in out.stderr
    assert "--repair" in out.stderr and (folder / INTENT).exists()
    out = verify("--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the interrupted compaction was finished (rolled forward)" in out.stdout
    assert not (folder / INTENT).exists()
    pd.testing.assert_frame_equal(_sorted(pd.read_parquet(folder)), before[0])
    _assert_same(before, _view(tmp_path, grid))
    assert verify().returncode == 0


def _listing_then_compact(real, folder, swapped: list):
    """``real`` (a part-file lister) followed, after its first listing only, by a compaction
    of ``folder`` (its result into ``swapped``): the files are swapped between a reader's
    listing and its reading."""
    def listing(path):
        files = real(path)
        if not swapped:  # once (compact lists the files too)
            swapped.append(None)
            swapped[0] = compact(folder, target_rows=2000)
        return files
    return listing


@pytest.mark.parametrize("reader", ["load", "load_skip", "stored_ids"])
def test_a_reader_whose_files_a_compaction_swapped_away_reads_the_new_set(tmp_path,
                                                                          monkeypatch, reader):
    """A reader holds no lock: it may list the old files just before a compaction commits
    and deletes them. That raised BadPartFile ("unreadable ... run verify --repair", 1 load in
    323 beside repeated compactions; on_error="skip" would have dropped their rows). Replayed
    exactly: the compaction runs between the listing and the reading."""
    import gc

    from pipeline.store import parquet

    grid = _store(tmp_path)
    gc.collect()  # _store's writers let go of the store's lock
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    swapped = []
    monkeypatch.setattr(parquet, "part_files",
                        _listing_then_compact(parquet.part_files, folder, swapped))
    if reader == "stored_ids":
        ok, failed = stored_ids(folder)
        assert (ok.tolist(), failed.tolist()) == (before[4], before[5])
    else:
        on_error = "skip" if reader == "load_skip" else "raise"
        pd.testing.assert_frame_equal(_sorted(load(tmp_path, "calibration", on_error=on_error)),
                                      before[0])
    assert swapped[0].rewritten and swapped[0].files_before == 53


def test_compacted_files_are_labelled_with_the_newest_version_among_their_rows(tmp_path):
    """The unified schema kept the oldest part's metadata: a store with one version-1 part
    was compacted into files labelled version 1 holding version-2 rows, which verify then
    exempts from the declared-type check (older versions may differ by design)."""
    import gc

    import pyarrow as pa

    from pipeline.store.parquet import write_part_file

    grid = _store(tmp_path)
    gc.collect()
    folder = tmp_path / "calibration"
    old = run_batch(_grid(), range(2900, 2950))[0]
    old = old.set_column(old.schema.get_field_index("experiment_version"),
                         old.schema.field("experiment_version"),
                         pa.array([1] * old.num_rows, pa.int64()))
    old = old.replace_schema_metadata({**old.schema.metadata, b"version": b"1"})
    write_part_file(folder, "part-0-older-version.parquet", old)  # sorts first
    assert _parts(folder)[0].name == "part-0-older-version.parquet"
    assert compact(folder, target_rows=10**6).rewritten
    (new,) = _parts(folder)
    assert pq.read_schema(new).metadata[b"version"] == str(grid.version).encode() == b"2"
    versions = set(pd.read_parquet(folder)["experiment_version"])
    assert versions == {1, 2}


@pytest.mark.timeout(120)
def test_compaction_on_a_full_disk_changes_nothing_and_says_so(small_disk):
    """The disk fills while the new files are staged: the command says so and exits 3 (it
    died with an OSError traceback), the staging folder is gone, and the old set is the table,
    as before."""
    import gc

    grid = _store(small_disk)
    gc.collect()
    folder = small_disk / "calibration"
    before = _view(small_disk, grid)
    old_parts = _parts(folder)
    filler = small_disk / "filler"
    with open(filler, "wb") as fh:  # leave about 100 KiB: less than the new files need
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        fh.write(b"\0" * max(0, free - 100 * 1024))
    out = subprocess.run([sys.executable, "-m", "pipeline", "compact", str(folder),
                          "--target-rows", "2000"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "No space left on device" in out.stderr
    assert "nothing was changed" in out.stderr
    assert not list(folder.glob("_compacting-*")) and not (folder / INTENT).exists()
    assert _parts(folder) == old_parts
    _assert_same(before, _view(small_disk, grid))
    filler.unlink()  # with room again, it compacts
    assert compact(folder, target_rows=2000).rewritten
    _assert_same(before, _view(small_disk, grid))


def test_a_selection_by_run_is_the_same_before_and_after_compaction(tmp_path):
    """Filtered before deduplication, a run's superseded attempts (failed, then retried ok by
    a later run; a batch written again) were selected, and compaction, which drops them,
    changed the answer (500 rows before, 428 after, in review). Now: each task's latest
    attempt, then the run filter."""
    import gc

    from pipeline.engine.provenance import provenance_stamp
    from pipeline.report.selection import Selection, select

    grid = _grid()
    folder = tmp_path / "calibration"
    run1 = PartWriter(folder, "run1", provenance_stamp(grid.experiment, "run1"))
    for start in range(0, 2600, 100):
        run1.write(run_batch(grid, range(start, start + 100))[0])
    run1.write(failed_batch_table(grid, range(2600, 2700), "lost on the cluster"))
    run1.close()
    run2 = PartWriter(folder, "run2", provenance_stamp(grid.experiment, "run2"))
    run2.write(run_batch(grid, range(2600, 2650))[0])  # now ok
    run2.write(run_batch(grid, range(0, 50))[0])  # a batch stored again
    run2.close()
    del run1, run2
    gc.collect()
    picks = {run: Selection(run_ids=(run,)) for run in ("run1", "run2")}
    before = {run: _sorted(select(tmp_path, "calibration", s)) for run, s in picks.items()}
    latest = _sorted(load(tmp_path, "calibration"))
    for run, df in before.items():
        pd.testing.assert_frame_equal(df, _sorted(latest[latest["run_id"] == run]),
                                      check_index_type=False)
    # run1's failed rows for 2600..2649 and its first batch (0..49) were superseded by run2
    run1_x = set(before["run1"]["x"])
    assert not run1_x & set(range(0, 50)) and not run1_x & set(range(2600, 2650))
    assert set(range(2650, 2700)) <= run1_x  # still failed: their latest attempt is run1's
    assert compact(folder, target_rows=2000).rewritten
    for run, s in picks.items():
        pd.testing.assert_frame_equal(_sorted(select(tmp_path, "calibration", s)), before[run])


@pytest.mark.parametrize("reader", ["dry_run", "summary"])
def test_the_dry_run_and_the_closing_summary_beside_a_compaction_read_the_new_set(
        tmp_path, monkeypatch, capsys, reader):
    """load, status and report re-read the current set when a compaction swapped the files
    away under them (test above), but the dry run (no lock) and the sweep's closing summary
    (printed after the lock is released) did not: the dry run called a healthy folder's
    removed part 'unreadable', exit 4, and advised verify --repair; the summary died with a
    FileNotFoundError traceback after a sweep that had finished. Replayed exactly: the
    compaction runs between the listing and the reading."""
    import gc

    from pipeline.report import summary
    from pipeline.store import parquet

    grid = _store(tmp_path)
    gc.collect()
    folder = tmp_path / "calibration"
    swapped = []
    for module in (parquet, summary):
        monkeypatch.setattr(module, "part_files",
                            _listing_then_compact(module.part_files, folder, swapped))
    if reader == "summary":
        table = summary.summary_table(folder, grid.experiment)
        assert table.startswith(f"stored: {swapped[0].rows_after:,} rows")
        monkeypatch.undo()
        assert table == summary.summary_table(folder, grid.experiment)  # of the new set
    else:
        from pipeline.cli import main

        capsys.readouterr()
        assert main(["experiment=calibration", f"results_dir={tmp_path}",
                     f"grid.x={{range:[0,{N}]}}", "params.work_us=0", "params.fail_every=7",
                     "params.rows=2", "dry_run=true"]) == 0
        out = capsys.readouterr().out
        plan = plan_sweep(grid, folder)
        assert f"already done:  {plan.done_ok:,} ok, {plan.done_failed:,} failed" in out
    assert swapped[0].rewritten and swapped[0].files_before == 53


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("step", ["committed", "swapping"])
def test_a_committed_set_whose_staging_folder_is_gone_is_rolled_back_not_forward(tmp_path,
                                                                                step):
    """Killed after its commit, then the hidden _compacting-*/ deleted (a user tidying up, a
    filesystem that lost it): verify --repair, following load's advice, finished the swap,
    deleting every old file for new files that were not there (0 rows left; a sweep did the
    same and recomputed everything). The old set is whole, so it stays the table."""
    import shutil

    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    old_parts = _parts(folder)
    _compact_killed_at(folder, step)
    for staging in folder.glob("_compacting-*"):
        shutil.rmtree(staging)
    _assert_same(before, _view(tmp_path, grid))  # readers see the old set, not missing files
    out = _run("-m", "pipeline", "verify", str(folder), "--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    missing = {"committed": 3, "swapping": 2}[step]  # "swapping": the first one moved in
    assert (f"the interrupted compaction was finished (rolled back: {missing} of its 3 new "
            "file(s) were missing, so the old files, all there, were kept)") in out.stdout
    assert _parts(folder) == old_parts and not (folder / INTENT).exists()
    _assert_same(before, _view(tmp_path, grid))
    assert _run("-m", "pipeline", "verify", str(folder)).returncode == 0  # the index agrees


@pytest.mark.timeout(300)
def test_when_neither_set_is_whole_every_file_is_kept_and_a_sweep_recomputes_the_rest(tmp_path):
    """The staging folder gone and an old file deleted too: nothing more is deleted, load
    keeps one row per task of what is left, and the resume recomputes exactly the lost tasks."""
    import shutil

    args = ["run.py", "experiment=calibration", f"results_dir={tmp_path}",
            "cluster.n_workers=1", "cluster.dashboard_address=:0", "grid.x={range:[0,300]}",
            "params.work_us=0", "batch_size=20", "flush_rows=20", "progress=false"]
    assert _run(*args).returncode == 0
    folder = tmp_path / "calibration"
    parts = _parts(folder)
    lost = set(pd.read_parquet(parts[0]).x)
    assert len(parts) == 15 and len(lost) == 20
    _compact_killed_at(folder, "committed")
    for staging in folder.glob("_compacting-*"):
        shutil.rmtree(staging)
    parts[0].unlink()
    assert sorted(load(tmp_path, "calibration").x) == sorted(set(range(300)) - lost)
    out = _run("-m", "pipeline", "verify", str(folder), "--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("left as found: 1 new and 1 old file(s) were missing, so neither set was whole; "
            "every file there was kept") in out.stdout
    assert _parts(folder) == parts[1:] and not (folder / INTENT).exists()
    rerun = _run(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert "280 already done" in rerun.stderr and "20 to run" in rerun.stderr
    assert sorted(pd.read_parquet(folder).x) == list(range(300))  # whole, each point once


@pytest.mark.timeout(300)
def test_a_damaged_compaction_commit_stops_every_command_with_exit_4_and_repair_sets_it_aside(
        tmp_path):
    """A torn _compaction.json was a JSONDecodeError traceback from status, verify, verify
    --repair, load and the sweep, with no way out. Now exit 4 naming it; --repair moves it
    (and the staging folder) to _quarantine/, every part file stays, and compact leaves one
    file set."""
    from pipeline.store.compaction import DamagedIntent

    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    _compact_killed_at(folder, "swapping")  # both sets in the folder, some new ones staged
    for bad, why in [('{"staging": "_compacting-x/../..", "old": [], "new": []}',
                      "not a compaction commit"),  # would have led its rmtree out of the folder
                     ('{"staging": "_compacting-x", "old": [', "not valid JSON")]:
        (folder / INTENT).write_text(bad)
        with pytest.raises(DamagedIntent, match=f"_compaction.json is damaged \\({why}"):
            load(tmp_path, "calibration")
    sweep = ["run.py", "experiment=calibration", f"results_dir={tmp_path}", "progress=false",
             "grid.x={range:[0,3000]}", "params.work_us=0", "params.fail_every=7",
             "params.rows=2", "cluster.n_workers=1", "cluster.dashboard_address=:0"]
    for args in (["-m", "pipeline", "status", str(folder)], ["-m", "pipeline", "verify",
                 str(folder)], ["-m", "pipeline", "compact", str(folder)], sweep):
        out = _run(*args)
        assert out.returncode == 4, (args, out.stdout + out.stderr)
        assert "_compaction.json is damaged" in out.stdout + out.stderr, args
        assert "Traceback" not in out.stdout + out.stderr, args
    out = _run("-m", "pipeline", "verify", str(folder), "--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the damaged compaction commit was set aside" in out.stdout
    staged = [p.name for p in (folder / "_quarantine").iterdir() if p.name != INTENT]
    assert (folder / "_quarantine" / INTENT).is_file() and len(staged) == 1
    assert staged[0].startswith("_compacting-") and not list(folder.glob("_compacting-*"))
    _assert_same(before, _view(tmp_path, grid))  # no row lost; load keeps one of each
    out = _run("-m", "pipeline", "compact", str(folder), "--target-rows", "2000")
    assert out.returncode == 0, out.stdout + out.stderr
    pd.testing.assert_frame_equal(_sorted(pd.read_parquet(folder)), before[0])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("lost_new_file", [False, True])
def test_repair_of_a_commit_damaged_mid_swap_forgets_only_the_old_parts_the_new_files_hold(
        tmp_path, lost_new_file):
    """Killed in the swap after it had removed an old part, then the commit torn: verify
    --repair set the commit aside and, the removed part still in the index, reported it as
    missing, '92 rows the table lacks', and told to rerun the sweep to recompute them, though
    they were in the compacted files (which it left without their checksums in the index).
    Now the index follows the swap: the compacted files are indexed, the removed old parts
    forgotten, nothing is missing. When a compacted file is lost too, the removed part's
    rows may be nowhere else: it is not forgotten that way, and is reported missing."""
    from pipeline.store.integrity import read_index

    grid = _store(tmp_path)
    folder = tmp_path / "calibration"
    before = _view(tmp_path, grid)
    old = read_index(folder)
    _compact_killed_at(folder, "removing")  # every new file in, the first old one removed
    removed = [name for name in old if not (folder / name).exists()]
    new = [p for p in _parts(folder) if "-compacted-" in p.name]
    assert len(removed) == 1 and len(new) == 3
    intent = folder / INTENT
    with open(intent, "r+b") as fh:
        fh.truncate(intent.stat().st_size // 2)
    if lost_new_file:
        new[2].unlink()
    out = _run("-m", "pipeline", "verify", str(folder), "--repair")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "the damaged compaction commit was set aside" in out.stdout
    if lost_new_file:  # genuinely missing: reported, with the rows the table lacks
        # (the lost compacted file too: it was indexed before it appeared, as a sweep's are)
        assert "forgotten in the index: their" not in text
        assert "missing: 2 (recorded in the index, not on disk: " in out.stdout, out.stdout
        assert f"{removed[0]}: {old[removed[0]]['rows']} rows" in out.stdout
        assert f"{new[2].name}: " in out.stdout
        assert "2 missing part(s) forgotten in the index; rerun the sweep" in out.stdout
        return
    assert (f"1 old part file(s) its swap had already removed were forgotten in the index: "
            f"their {old[removed[0]]['rows']} row(s) are in its compacted files") in out.stdout
    assert "missing" not in text and "recompute" not in text
    assert set(read_index(folder)) == {p.name for p in _parts(folder)}  # new ones indexed
    _assert_same(before, _view(tmp_path, grid))  # load: the whole table; resume: nothing new
    again = _run("-m", "pipeline", "verify", str(folder))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "without a recorded checksum" not in again.stdout
    assert _run("-m", "pipeline", "compact", str(folder), "--target-rows", "2000").returncode == 0
    pd.testing.assert_frame_equal(_sorted(pd.read_parquet(folder)), before[0])


@pytest.mark.timeout(120)
def test_compacted_parts_are_indexed_before_they_appear(tmp_path):
    """verify reads a part named since the index began, with no entry, as one the index lost.
    Compaction renamed its new files in, then indexed them: verify during the swap found them
    unrecorded. They are indexed first now, as a sweep's parts are."""
    from pipeline.store.integrity import read_index, verify_store

    grid = _grid()
    folder = tmp_path / "calibration"
    for day in range(1, 6):
        PartWriter(folder, f"2026010{day}T000000Z-{day:06x}").write(
            run_batch(grid, range(day * 10, day * 10 + 10))[0])
    env = dict(os.environ, PIPELINE_COMPACT_PAUSE_AT="swapping")  # after the first rename
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "compact", str(folder)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "compaction paused at swapping"
        moved_in = [p.name for p in folder.glob("part-*-compacted-*.parquet")]
        assert len(moved_in) == 1
        assert moved_in[0] in read_index(folder)
        report = verify_store(folder, grid.experiment)
        assert report.unrecorded == [] and report.good  # every part known to the index
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_compaction_holds_the_key_columns_and_one_part_at_a_time(tmp_path, monkeypatch):
    """Compaction read the whole table into memory (9.1M rows: 4.3 GB, about 48 GB for 10^8)
    to deduplicate it. It now decides from the key columns and reads the full rows one part
    at a time; what loads after is the same (with duplicates, retried failures and rows of
    two per task)."""
    import pipeline.store.integrity as integrity

    grid = _store(tmp_path)
    before = _view(tmp_path, grid)
    calls = []
    real = integrity.read_parts

    def counted(files, columns=None, schema=None):
        calls.append((len(files), columns))
        return real(files, columns, schema)

    monkeypatch.setattr(integrity, "read_parts", counted)
    result = compact(tmp_path / "calibration", target_rows=1000)
    assert result.rewritten and result.rows_after < result.rows_before
    whole = [n for n, columns in calls if columns is None]
    assert whole and set(whole) == {1}, calls  # full rows: one part file per read
    keys = [columns for n, columns in calls if columns is not None]
    assert keys == []  # the keys are scanned a batch at a time into arrays, not read whole
    monkeypatch.undo()
    _assert_same(before, _view(tmp_path, grid))
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in _parts(tmp_path / "calibration")]
    assert len(sizes) > 2 and sizes[:-1] == [1000] * (len(sizes) - 1) and sizes[-1] <= 1000
    assert sum(sizes) == result.rows_after


def test_a_part_whose_rows_differ_from_its_footer_is_named(tmp_path, monkeypatch):
    """The rows counted from the footers and those scanned disagree: the part is named
    (it named the first part, whichever it was, and verify --repair then found it fine)."""
    import pipeline.store.compaction as compaction
    from pipeline.store.integrity import BadPartFile

    _store(tmp_path)
    parts = _parts(tmp_path / "calibration")
    real = compaction._rows
    monkeypatch.setattr(compaction, "_rows",
                        lambda f: real(f) + (1 if Path(f) == parts[3] else 0))
    with pytest.raises(BadPartFile) as err:
        compact(tmp_path / "calibration", target_rows=1000)
    assert err.value.path == parts[3], err.value


def test_the_rows_kept_by_sorting_are_deduplicate_tables_on_random_stores():
    """Compaction decides which rows to keep by sorting arrays of the key columns (33 bytes a
    row; the Arrow deduplication of the id strings held about 200). Against that Arrow rule,
    load's, on 500 random key tables: retried failures, several rows a task, attempts that
    repeat, unknown finish times, ids that share their leading 64 bits."""
    import secrets

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.store.parquet import deduplicate_table, id_words, kept_positions

    rng = np.random.default_rng(11)
    for trial in range(500):
        shared = secrets.token_hex(8)  # every other table: ids whose 64-bit prefixes collide
        ids = [(shared + secrets.token_hex(4)) if trial % 2 else secrets.token_hex(12)
               for _ in range(rng.integers(1, 8))]
        n = int(rng.integers(1, 30))
        table = pa.table({
            "task_id": [ids[i] for i in rng.integers(0, len(ids), n)],
            "row_index": pa.array(rng.integers(0, rng.integers(1, 4), n), pa.int64()),
            "status": np.where(rng.random(n) < 0.4, "failed", "ok"),
            "finished_at": pa.array([None if rng.random() < 0.15 else int(t)
                                     for t in rng.integers(0, 4, n)], pa.timestamp("us", "UTC")),
            "_position": np.arange(n)})
        want = np.sort(deduplicate_table(table)["_position"].to_numpy())
        head, tail = id_words(table["task_id"])
        assert [f"{h:016x}{t:08x}" for h, t in zip(head, tail)] == table["task_id"].to_pylist()
        got = kept_positions(head, tail, table["row_index"].to_numpy(),
                             np.asarray(pc.equal(table["status"], "failed")),
                             np.asarray(pc.fill_null(pc.cast(table["finished_at"], pa.int64()),
                                                     -1)))
        assert got.tolist() == want.tolist(), table.to_pandas()


@pytest.mark.parametrize("edit", ["hand-edited", "24 characters, not hex!!"])
def test_a_hand_edited_id_is_compacted_by_the_arrow_rule(tmp_path, edit):
    """An id the key arrays cannot hold (edited by hand to another length, or to 24 characters
    that are not lowercase hex, which the arrays read as 0xF and merged with another: a task
    was lost, found by review): the plan falls back to deduplicating the key columns in Arrow,
    and load gives the same rows after."""
    import pyarrow as pa

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 6]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    table = run_batch(grid, range(6))[0]
    ids = table["task_id"].to_pylist()
    ids[2] = edit
    ids[5] = ids[5][:16] + "ZZZZZZZZ"  # and two whose tails the arrays would read alike
    ids[4] = ids[5][:16] + "YYYYYYYY"
    table = table.set_column(table.schema.get_field_index("task_id"), "task_id",
                             pa.array(ids, pa.string()))
    PartWriter(folder, "a").write(table)
    PartWriter(folder, "b").write(run_batch(grid, range(3))[0])  # 0..2 again: duplicates
    before = load(tmp_path, "calibration")
    result = compact(folder)
    assert result.rewritten and (result.rows_before, result.rows_after) == (9, 7)
    after = load(tmp_path, "calibration")
    key = ["task_id", "row_index"]
    pd.testing.assert_frame_equal(before.sort_values(key).reset_index(drop=True),
                                  after.sort_values(key).reset_index(drop=True))
    assert {edit, ids[4], ids[5]} <= set(after["task_id"])
