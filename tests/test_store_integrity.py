"""Store integrity: the part index (checksums, row counts), ``python -m pipeline verify
[--repair]``, and readers stopping on a damaged part with exit code 4 (issue 17 §1).

Damage is real: truncated files, flipped bytes, stray files; sweeps are real LocalCluster
runs through ``run.py``."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline
from conftest import fill_disk
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.store.integrity import (PART_INDEX, BadPartFile, ForeignPartFile, file_sha256,
                                      forget_parts, quarantine, read_index, verify_store)
from pipeline.cli import main as cli_main
from pipeline.store.manifest import SweepLock, read_manifest
from pipeline.store.parquet import write_part_file
from pipeline.store.part_writer import PartWriter
from pipeline.verify import main as verify_main

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["experiment=calibration", "cluster.n_workers=1", "grid.x={range:[0,60]}",
         "params.work_us=0", "batch_size=10", "flush_rows=10", "progress=false",
         "cluster.dashboard_address=:0"]  # one part file per batch


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def calibration_table(xs) -> pa.Table:
    grid = Grid(get_experiment("calibration"), {"x": list(xs)}, {"work_us": 0})
    return run_batch(grid, range(grid.total))[0]


def expected_ids(n):
    g = Grid(get_experiment("calibration"), {"x": {"range": [0, n]}}, {"work_us": 0})
    return {g.task_id(i) for i in range(g.total)}


def snapshot(folder):
    """Every file with its mtime and size; the lock file (opened by every sweep) excluded."""
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in Path(folder).rglob("*")
            if p.name != ".lock"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_truncated_part_cycle_through_the_cli(tmp_path, capsys):
    """truncate -> load/resume/report stop naming the file (exit 4) -> verify fails ->
    repair -> resume recomputes exactly the lost tasks -> rows complete."""
    folder = tmp_path / "calibration"
    first = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert first.returncode == 0, first.stderr
    parts = sorted(folder.glob("part-*.parquet"))
    assert len(parts) == 6
    index = read_index(folder)  # every part indexed with its true checksum and row count
    assert set(index) == {p.name for p in parts}
    assert all(index[p.name]["sha256"] == file_sha256(p) and index[p.name]["rows"] == 10
               for p in parts)
    assert verify_main([str(folder)]) == 0

    victim = parts[2]
    lost = set(pq.read_table(victim, columns=["task_id"])["task_id"].to_pylist())
    with open(victim, "r+b") as fh:  # a copy cut short
        fh.truncate(victim.stat().st_size // 2)

    with pytest.raises(BadPartFile) as err:
        pipeline.load(tmp_path, "calibration")
    assert victim.name in str(err.value) and "verify" in str(err.value) and "--repair" in str(err.value)
    with pytest.warns(UserWarning, match=victim.name):
        assert len(pipeline.load(tmp_path, "calibration", on_error="skip")) == 50

    before = snapshot(tmp_path)
    proc = run("run.py", *SWEEP, f"results_dir={tmp_path}")  # the resume, as a real process
    assert proc.returncode == 4, proc.stderr
    assert victim.name in proc.stderr and f"verify {folder} --repair" in proc.stderr
    assert "Traceback" not in proc.stderr
    capsys.readouterr()
    for extra in (["report=true"], ["dry_run=true"]):  # in-process, through run.py's main()
        assert cli_main([*SWEEP, f"results_dir={tmp_path}", *extra]) == 4, extra
        err = capsys.readouterr().err
        assert victim.name in err and f"verify {folder} --repair" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before  # resume and report wrote nothing

    check = run("-m", "pipeline", "verify", str(folder))
    assert check.returncode == 4
    assert "corrupt: 1" in check.stdout and victim.name in check.stdout and "good:    5" in check.stdout

    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0, repair.stderr
    assert not victim.exists() and (folder / "_quarantine" / victim.name).exists()
    assert (folder / "_quarantine" / victim.name).stat().st_size == before[victim][1]  # moved, intact
    assert victim.name not in read_index(folder)
    # status said "finished ... ran 60 task(s): 60 ok" and no next step beside 50 stored
    shown = run("-m", "pipeline", "status", str(folder))
    assert shown.returncode == 0, shown.stderr
    assert "calibration: 50 ok" in shown.stdout, shown.stdout
    assert "repaired since (verify --repair, at " in shown.stdout, shown.stdout
    assert "1 part file(s) with tasks set aside in _quarantine/; their tasks are no longer " \
        "stored" in shown.stdout, shown.stdout
    assert "next: rerun to recompute the tasks the repair took out" in shown.stdout
    assert "batch_size=10 flush_rows=10" in shown.stdout  # the last run's command

    resume = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert resume.returncode == 0, resume.stderr
    assert "50 already done, 10 to run" in resume.stderr
    shown = run("-m", "pipeline", "status", str(folder))
    assert "calibration: 60 ok" in shown.stdout and "repaired" not in shown.stdout, shown.stdout
    new = set(sorted(folder.glob("part-*.parquet"))) - set(parts)
    assert len(new) == 1
    assert set(pq.read_table(new.pop(), columns=["task_id"])["task_id"].to_pylist()) == lost
    df = pd.read_parquet(folder)
    assert len(df) == 60 and df.task_id.is_unique and set(df.task_id) == expected_ids(60)
    assert verify_main([str(folder)]) == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bit_rot_outside_the_id_columns_stops_the_resume(tmp_path):
    """A flipped byte in the value column: the resume read only the id columns, said all
    was done (exit 0), and pipeline.load then refused the folder. The sweep now checks every
    part's recorded sha256 first (exit 4, naming it); dry_run and status stay cheap."""
    folder = tmp_path / "calibration"
    assert run("run.py", *SWEEP, f"results_dir={tmp_path}").returncode == 0
    victim = sorted(folder.glob("part-*.parquet"))[3]
    data = bytearray(victim.read_bytes())
    meta = pq.read_metadata(victim).row_group(0)
    value = next(meta.column(i) for i in range(meta.num_columns)
                 if meta.column(i).path_in_schema == "value")
    data[value.data_page_offset + value.total_compressed_size // 2] ^= 0x01  # one bit
    victim.write_bytes(bytes(data))
    assert len(pq.read_table(victim, columns=["task_id", "status"])) == 10  # ids read fine
    before = snapshot(tmp_path)
    proc = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert (f"part file {victim} is unreadable (sha256 differs from the one recorded when "
            "written)") in proc.stderr and f"verify {folder} --repair" in proc.stderr
    assert snapshot(tmp_path) == before
    assert run("-m", "pipeline", "verify", str(folder), "--repair").returncode == 0
    resume = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert resume.returncode == 0 and "50 already done, 10 to run" in resume.stderr
    df = pd.read_parquet(folder)
    assert len(df) == 60 and df.task_id.is_unique and set(df.task_id) == expected_ids(60)


def test_verify_finds_flipped_bytes_stray_files_and_foreign_schemas(tmp_path):
    folder = tmp_path / "calibration"
    writer = PartWriter(folder, "run1")
    for start in (0, 10, 20):
        writer.write(calibration_table(range(start, start + 10)))
    good = verify_store(folder, get_experiment("calibration"))
    assert good.ok and len(good.good) == 3 and good.rows == 30

    parts = sorted(folder.glob("part-*.parquet"))
    data = bytearray(parts[1].read_bytes())
    column = pq.read_metadata(parts[1]).row_group(0).column(0)  # bit rot inside a data page;
    data[column.data_page_offset + column.total_compressed_size // 2] ^= 0xFF  # footer intact
    parts[1].write_bytes(bytes(data))
    with pytest.raises(BadPartFile, match=parts[1].name):  # page CRCs: no silent misread
        pipeline.load(tmp_path, "calibration")
    (folder / "notes.csv").write_text("a,b\n1,2\n")
    (folder / "subdir").mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), folder / "part-stray.parquet")
    other = calibration_table(range(3)).drop_columns(["value"])  # the declared schema, minus a column
    write_part_file(folder, "part-other.parquet", other)

    report = verify_store(folder, get_experiment("calibration"))
    assert [n for n, _ in report.corrupt] == [parts[1].name]
    assert "sha256" in report.corrupt[0][1]
    foreign = dict(report.foreign)
    assert set(foreign) == {"notes.csv", "subdir", "part-stray.parquet", "part-other.parquet"}
    assert "no column(s) task_id" in foreign["part-stray.parquet"]
    assert "'value'" in foreign["part-other.parquet"]
    assert sorted(report.good) == [parts[0].name, parts[2].name]
    # written for another experiment: foreign too
    assert "written by experiment 'calibration'" in dict(
        verify_store(folder, get_experiment("composition")).foreign)[parts[0].name]

    moved = quarantine(report)
    assert len(moved) == 5 and all(target.exists() for _, target in moved)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(("_", "."))) == \
        [parts[0].name, parts[2].name]
    assert verify_store(folder, get_experiment("calibration")).ok
    assert len(pd.read_parquet(folder)) == 20  # the folder reads as one table again


def test_the_index_survives_a_torn_line_and_forgets_vanished_parts(tmp_path):
    folder = tmp_path / "calibration"
    writer = PartWriter(folder, "run1")
    writer.write(calibration_table(range(5)))
    with open(folder / PART_INDEX, "a") as fh:
        fh.write('{"part":"part-run1-0000')  # a kill -9 in the middle of an append
    writer.write(calibration_table(range(5, 10)))
    lines = (folder / PART_INDEX).read_text().splitlines()
    assert len(lines) == 3 and lines[1].startswith('{"part":"part-run1-0000') and lines[2].endswith("}")
    index = read_index(folder)
    assert sorted(index) == ["part-run1-000000.parquet", "part-run1-000001.parquet"]
    assert verify_store(folder, get_experiment("calibration")).ok

    (folder / "part-run1-000000.parquet").unlink()  # e.g. deleted by hand
    report = verify_store(folder, get_experiment("calibration"))
    assert not report.ok and report.missing == {"part-run1-000000.parquet": 5}
    assert forget_parts(folder, report.missing) == 1
    assert list(read_index(folder)) == ["part-run1-000001.parquet"]
    assert forget_parts(folder, ["not-there"]) == 0


def test_parts_written_before_the_index_are_decoded_in_full(tmp_path):
    folder = tmp_path / "calibration"
    PartWriter(folder, "old").write(calibration_table(range(8)))
    (folder / PART_INDEX).unlink()  # a store from before part checksums
    report = verify_store(folder, get_experiment("calibration"))
    assert report.ok and report.unindexed == ["part-old-000000.parquet"] and report.rows == 8
    part = folder / "part-old-000000.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size - 100])
    assert [n for n, _ in verify_store(folder, get_experiment("calibration")).corrupt] == [part.name]


def test_verify_command_usage_errors(tmp_path):
    assert run("-m", "pipeline", "verify").returncode == 2
    proc = run("-m", "pipeline", "verify", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "not a results folder" in proc.stderr


def test_verify_of_a_results_dir_is_refused_and_moves_nothing(tmp_path):
    """`verify RESULTS_DIR --repair` (one level up: `status` takes RESULTS_DIR) listed each
    experiment folder as a foreign directory and moved it whole to RESULTS_DIR/_quarantine/,
    a folder a sweep was writing included (its later parts then landed in a new folder, the
    results split in two). Now verify refuses a folder of experiment folders (exit 2) and
    names the command for each."""
    folder, parts = _store_of_two_parts(tmp_path)
    before = files(tmp_path)
    for args in ([], ["--repair"]):
        proc = run("-m", "pipeline", "verify", str(tmp_path), *args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (f"error: {tmp_path} holds experiment folders (calibration), not result parts: "
                f"verify each of them, e.g. python -m pipeline verify {folder}\n") in proc.stderr
    assert files(tmp_path) == before and not (tmp_path / "_quarantine").exists()
    assert len(pipeline.load(tmp_path, "calibration")) == 20
    proc = run("-m", "pipeline", "verify", str(folder))  # the experiment folder itself
    assert proc.returncode == 0 and "good:    2" in proc.stdout


def test_compact_and_status_one_level_off(tmp_path):
    """compact RESULTS_DIR said 'no part files, nothing to compact' (exit 0) beside the
    experiment folders it was meant for; status RESULTS_DIR/NAME (the level verify, compact
    and export take) said 'no experiment folders under ...'. Now compact refuses (exit 2,
    naming the folder to give) and status describes the experiment folder it was given."""
    folder, parts = _store_of_two_parts(tmp_path)
    before = files(tmp_path)
    proc = run("-m", "pipeline", "compact", str(tmp_path))
    assert proc.returncode == 2
    assert (f"error: {tmp_path} holds experiment folders (calibration): compact each of them, "
            f"e.g. python -m pipeline compact {folder}\n") == proc.stderr
    assert files(tmp_path) == before and not (tmp_path / ".lock").exists()
    proc = run("-m", "pipeline", "status", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("calibration: 20 ok, 0 failed stored (version 2)\n"), proc.stdout
    assert proc.stdout == run("-m", "pipeline", "status", str(tmp_path)).stdout


def files(root):
    """snapshot() of the files only: taking the lock creates .lock, which touches the folder."""
    return {p: v for p, v in snapshot(root).items() if p.is_file()}


def _store_of_two_parts(root):
    folder = root / "calibration"
    writer = PartWriter(folder, "run1")
    for start in (0, 10):
        writer.write(calibration_table(range(start, start + 10)))
    return folder, sorted(folder.glob("part-*.parquet"))


@pytest.mark.parametrize("command", ["compact", "status", "export"])
def test_commands_on_a_truncated_part_exit_4_naming_it(tmp_path, command):
    """compact, status and export stop like load/resume/report: exit 4, the file and the
    repair command named, no traceback, nothing changed or written."""
    folder, parts = _store_of_two_parts(tmp_path)
    victim = parts[1]
    with open(victim, "r+b") as fh:
        fh.truncate(victim.stat().st_size // 2)
    before = files(tmp_path)
    args = {"compact": [str(folder)], "status": [str(tmp_path)],
            "export": [str(folder), "--to", str(tmp_path / "package")]}[command]
    proc = run("-m", "pipeline", command, *args)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert victim.name in out and f"python -m pipeline verify {folder} --repair" in out
    assert "Traceback" not in out
    assert files(tmp_path) == before and not (tmp_path / "package").exists()


def test_a_foreign_parquet_file_is_refused_not_read(tmp_path):
    """A part-*.parquet file of another schema: load and resume refuse it (exit 4, naming it),
    as verify calls it foreign; on_error="skip" leaves it out; --repair moves it aside."""
    folder, _ = _store_of_two_parts(tmp_path)
    stray = folder / "part-stray.parquet"
    pq.write_table(pa.table({"a": [1]}), stray)
    assert len(pd.read_parquet(folder)) == 21  # what a plain reader would mix in

    with pytest.raises(ForeignPartFile) as err:
        pipeline.load(tmp_path, "calibration")
    assert isinstance(err.value, BadPartFile)
    assert stray.name in str(err.value) and f"verify {folder} --repair" in str(err.value)
    with pytest.warns(UserWarning, match="part-stray.parquet"):
        df = pipeline.load(tmp_path, "calibration", on_error="skip")
    assert len(df) == 20 and "a" not in df.columns
    with pytest.raises(ForeignPartFile):  # a selection reads through the same layer
        pipeline.load(tmp_path, "calibration", grid={"x": [1, 2]}, params={"work_us": 0})

    before = files(tmp_path)
    for extra in ([], ["dry_run=true"]):  # resume and dry run, as real processes
        proc = run("run.py", "experiment=calibration", f"results_dir={tmp_path}",
                   "grid.x={range:[0,20]}", "params.work_us=0", "cluster.n_workers=1",
                   "progress=false", *extra)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "part-stray.parquet is not a result part" in proc.stderr
        assert f"verify {folder} --repair" in proc.stderr and "Traceback" not in proc.stderr
    assert files(tmp_path) == before

    assert verify_main([str(folder)]) == 4
    assert verify_main([str(folder), "--repair"]) == 0
    assert (folder / "_quarantine" / stray.name).exists()
    assert len(pipeline.load(tmp_path, "calibration")) == 20


def test_repair_of_a_missing_part_takes_the_lock(tmp_path):
    """--repair of a part deleted by hand only forgets its index line, but the index is
    appended to by a sweep: it waits for no one, and refuses while a sweep holds the lock."""
    folder, parts = _store_of_two_parts(tmp_path)
    parts[0].unlink()  # e.g. removed by hand; its index line remains
    index_before = (folder / PART_INDEX).read_text()
    with SweepLock(folder, "a-running-sweep"):  # held in this process: the CLI is another one
        proc = run("-m", "pipeline", "verify", str(folder), "--repair")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "another sweep is writing" in proc.stderr and "a-running-sweep" in proc.stderr
        assert (folder / PART_INDEX).read_text() == index_before  # untouched
    proc = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert proc.returncode == 0, proc.stderr
    assert "1 missing part(s) forgotten in the index; rerun the sweep" in proc.stdout
    assert list(read_index(folder)) == [parts[1].name]
    healthy = run("-m", "pipeline", "verify", str(folder), "--repair")  # nothing to do: no lock
    assert healthy.returncode == 0


def _refuse_locks(monkeypatch):
    """flock fails as on NFS without a lock daemon (no filesystem here refuses locks)."""
    import errno
    import os

    from pipeline.store import manifest

    def no_locks(fh, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(manifest.fcntl, "flock", no_locks)


def test_repair_and_compact_on_a_filesystem_without_locks_say_why_and_change_nothing(
        tmp_path, monkeypatch, capsys):
    """verify --repair ended in a traceback on ENOLCK, and compact in a bare OSError with
    exit 3 (a full disk's code): both now name the cause, exit 2 and leave every file as it
    was (the damaged part stays in place, unrepaired)."""
    from pipeline.compact import main as compact_main

    folder, parts = _store_of_two_parts(tmp_path)
    with open(parts[1], "r+b") as fh:
        fh.truncate(parts[1].stat().st_size // 2)
    before = files(tmp_path)
    _refuse_locks(monkeypatch)
    capsys.readouterr()
    assert verify_main([str(folder), "--repair"]) == 2
    err = capsys.readouterr().err
    assert (f"error: cannot lock {folder} to repair it: No locks available (its filesystem "
            "has no file locks") in err and err.rstrip().endswith("nothing was changed"), err
    assert files(tmp_path) == before
    parts[1].unlink()  # a store that is whole, so compact gets as far as the lock
    before = files(tmp_path)
    assert compact_main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"error: could not compact {folder}: [Errno {__import__('errno').ENOLCK}]" in err
    assert "has no file locks" in err and "nothing was changed" in err, err
    assert files(tmp_path) == before


def test_verify_beside_a_compaction_that_swaps_the_files_checks_the_new_set(tmp_path,
                                                                            monkeypatch, capsys):
    """verify takes no lock: it lists the folder, then hashes file after file (minutes on a
    big store). A compaction that swapped the files meanwhile deleted the listed parts, and
    verify died with a FileNotFoundError traceback (or, had the footer read failed first,
    called a removed part corrupt: exit 4). Replayed exactly: the compaction runs while verify
    hashes its first file. A vanished file is not a damaged one: verify checks again."""
    from pipeline.store import integrity
    from pipeline.store.compaction import compact

    folder = tmp_path / "calibration"
    writer = PartWriter(folder, "run1")
    for start in range(0, 50, 10):
        writer.write(calibration_table(range(start, start + 10)))
    real_sha = integrity.file_sha256
    swapped = []

    def compaction_meanwhile(path):
        if not swapped:  # once (the compaction indexes its new files with it too)
            swapped.append(None)
            swapped[0] = compact(folder)
        return real_sha(path)

    monkeypatch.setattr(integrity, "file_sha256", compaction_meanwhile)
    assert verify_main([str(folder)]) == 0
    assert swapped[0].rewritten and swapped[0].files_before == 5
    out = capsys.readouterr().out
    assert "1 part file(s), 50 readable rows" in out and "good:    1" in out


def test_the_part_index_is_shared_like_the_parts_in_a_group_folder(tmp_path):
    """A lab's shared results folder (setgid group, umask 002): every file the store creates
    is group-writable (parts, manifest, lock), but the index was created 0644 whatever the
    umask, so the next group member's sweep took the lock, then failed on every part
    (PermissionError appending to _parts.jsonl; WriterFailed, 0 parts kept). Reproduced with
    a real second user when the tests run as root."""
    import os
    import pwd
    import shutil
    import stat
    import tempfile

    old = os.umask(0o002)
    try:
        shared = Path(tempfile.mkdtemp(prefix="shared-results-", dir="/tmp"))
        folder = shared / "calibration"
        PartWriter(folder, "run1").write(calibration_table(range(10)))
    finally:
        os.umask(old)
    try:
        (part,) = folder.glob("part-*.parquet")
        assert stat.S_IMODE(part.stat().st_mode) == 0o664
        assert stat.S_IMODE((folder / PART_INDEX).stat().st_mode) == 0o664
        try:
            other = pwd.getpwnam("nobody")
        except KeyError:
            other = None
        if os.geteuid() != 0 or other is None:
            return
        for p in (shared, folder, *folder.iterdir()):  # the group is the other user's
            os.chown(p, 0, other.pw_gid)
        shared.chmod(0o2775)
        pid = os.fork()  # the other user's writer (forked: the interpreter may be unreadable)
        if pid == 0:
            code = 1
            try:
                os.setgroups([])
                os.setgid(other.pw_gid)
                os.setuid(other.pw_uid)
                os.umask(0o002)
                with SweepLock(folder, "run2"):
                    PartWriter(folder, "run2").write(calibration_table(range(10, 20)))
                code = 0
            except BaseException as exc:
                print(f"the other user could not write: {type(exc).__name__}: {exc}",
                      file=sys.stderr, flush=True)
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0, "the other user could not write a part (stderr)"
        assert len(pipeline.load(shared, "calibration")) == 20
        assert verify_store(folder).ok and len(read_index(folder)) == 2
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.timeout(300)
def test_a_damaged_manifest_stops_each_command_until_repair_moves_it_aside(tmp_path):
    """A run manifest cut short (a node crash mid-write where the temp file's data was lost,
    an edit by hand) gave a JSONDecodeError traceback from every sweep, status, report and
    export, and verify called the folder healthy. Now each stops with exit 4 naming the
    manifest and the repair; verify reports it and --repair moves it aside; the results,
    which never depended on it, load throughout and the rerun resumes."""
    folder = tmp_path / "calibration"
    first = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert first.returncode == 0, first.stderr
    manifest = folder / "_manifest.json"
    text = manifest.read_bytes()
    manifest.write_bytes(text[: len(text) // 2])
    parts = {p: p.read_bytes() for p in folder.glob("part-*.parquet")}
    assert len(pipeline.load(tmp_path, "calibration")) == 60  # the data does not need it

    for args in ([f"results_dir={tmp_path}"], [f"results_dir={tmp_path}", "report=true"],
                 ["-m", "pipeline", "status", str(tmp_path)],
                 ["-m", "pipeline", "export", str(folder), "--to", str(tmp_path / "package")]):
        proc = run(*(args if args[0] == "-m" else ["run.py", *SWEEP, *args]))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, (args, out)
        assert "_manifest.json" in out and f"python -m pipeline verify {folder} --repair" in out
        assert "Traceback" not in out, out
    assert {p: p.read_bytes() for p in folder.glob("part-*.parquet")} == parts
    assert manifest.read_bytes() == text[: len(text) // 2]  # nothing rewrote it
    assert not (tmp_path / "package").exists() and not (folder / "_report").exists()

    check = run("-m", "pipeline", "verify", str(folder))
    assert check.returncode == 4
    assert "the run manifest _manifest.json is damaged: not valid JSON" in check.stdout
    assert "good:    6" in check.stdout
    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0, repair.stderr
    assert (folder / "_quarantine" / "_manifest.json").read_bytes() == text[: len(text) // 2]
    assert verify_main([str(folder)]) == 0

    resume = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert resume.returncode == 0, resume.stderr
    assert "60 already done, 0 to run" in resume.stderr
    assert [r["status"] for r in read_manifest(folder)["runs"]] == ["finished"]
    status = run("-m", "pipeline", "status", str(tmp_path))
    assert status.returncode == 0 and "60 ok, 0 failed stored" in status.stdout
    df = pd.read_parquet(folder)
    assert len(df) == 60 and set(df.task_id) == expected_ids(60)


def test_a_part_deleted_by_hand_is_reported_not_read_as_a_smaller_table(tmp_path, capsys):
    """A part file deleted (or moved) by hand: load, status, export and compact returned or
    reported the rest as if whole, verify said "not an error", and --repair then forgot the
    last trace of the loss. The index records every part written, so each now stops with
    exit 4 naming it and the rows the table lacks; the resume too, until --repair forgets it,
    and then it recomputes exactly the lost tasks."""
    folder = tmp_path / "calibration"
    assert run("run.py", *SWEEP, f"results_dir={tmp_path}").returncode == 0
    parts = sorted(folder.glob("part-*.parquet"))
    victim = parts[2]
    lost = set(pq.read_table(victim, columns=["task_id"])["task_id"].to_pylist())
    victim.unlink()
    with pytest.raises(BadPartFile) as err:
        pipeline.load(tmp_path, "calibration")
    assert victim.name in str(err.value) and f"verify {folder} --repair" in str(err.value)
    assert f"{len(lost)} row(s)" in str(err.value)
    with pytest.warns(UserWarning, match=victim.name):
        assert len(pipeline.load(tmp_path, "calibration", on_error="skip")) == 60 - len(lost)

    before = snapshot(tmp_path)
    for args in (["run.py", *SWEEP, f"results_dir={tmp_path}"],
                 ["-m", "pipeline", "verify", str(folder)],
                 ["-m", "pipeline", "status", str(tmp_path)],
                 ["-m", "pipeline", "compact", str(folder)],
                 ["-m", "pipeline", "export", str(folder), "--to", str(tmp_path / "package")]):
        proc = run(*args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, (args, out)
        assert victim.name in out and "Traceback" not in out, (args, out)
    assert snapshot(tmp_path) == before and not (tmp_path / "package").exists()

    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "1 missing part(s) forgotten in the index" in repair.stdout
    assert run("-m", "pipeline", "verify", str(folder)).returncode == 0
    resume = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert resume.returncode == 0, resume.stderr
    assert f"{60 - len(lost)} already done, {len(lost)} to run" in resume.stderr
    df = pipeline.load(tmp_path, "calibration")
    assert len(df) == 60 and df.task_id.is_unique and lost <= set(df.task_id)


def test_repair_on_a_full_disk_says_so_and_leaves_the_folder_as_verify_describes_it(
        small_disk):
    """verify --repair on a full disk moved the corrupt part to _quarantine/, then failed to
    rewrite the index: a traceback, exit 1, an empty ._parts.jsonl.tmp, and the moved part
    still indexed, so verify called it deleted by hand. Now: one line, exit 3, the move
    undone, and once space is freed the same --repair completes."""
    folder = small_disk / "calibration"
    writer = PartWriter(folder, "run1")
    for start in (0, 10, 20):
        writer.write(calibration_table(range(start, start + 10)))
    with SweepLock(folder, "run1"):  # a sweep leaves its .lock (its record is rewritten in place)
        pass
    corrupt, gone, _ = sorted(folder.glob("part-*.parquet"))
    with open(corrupt, "r+b") as fh:
        fh.truncate(corrupt.stat().st_size // 2)
    gone.unlink()  # a part deleted by hand: the same index rewrite forgets it
    before = files(folder)
    fill_disk(small_disk)  # to the last byte; beside the folder, not in it

    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 3, repair.stdout + repair.stderr
    assert repair.stderr.strip() == (
        f"error: cannot repair {folder}: No space left on device (free space, then rerun "
        f"python -m pipeline verify {folder} --repair); nothing was changed"), repair.stderr
    assert files(folder) == before  # no ._parts.jsonl.tmp, nothing moved
    assert not (folder / "_quarantine").exists()
    check = run("-m", "pipeline", "verify", str(folder))  # what is there, truly
    assert check.returncode == 4
    assert f"corrupt: 1\n    {corrupt.name}" in check.stdout
    assert "missing: 1 (" in check.stdout and f"    {gone.name}: 10 rows" in check.stdout
    assert corrupt.name not in check.stdout.split("missing:")[1], check.stdout

    (small_disk / "_filler").unlink()
    again = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (folder / "_quarantine" / corrupt.name).exists()
    assert set(read_index(folder)) == {p.name for p in folder.glob("part-*.parquet")}
    assert run("-m", "pipeline", "verify", str(folder)).returncode == 0


def test_a_part_never_renamed_after_its_index_line_is_not_missing(tmp_path):
    """A writer killed between its index line and its rename left a temp file and a line for
    a part never published (its rows never stored): not a lost part, and the next sweep's
    clean-up forgets the line with the temp file."""
    from pipeline.store.parquet import clean_temp_files

    folder, parts = _store_of_two_parts(tmp_path)
    parts[1].rename(folder / f".{parts[1].name}.tmp")  # as the kill left it
    assert verify_store(folder, get_experiment("calibration")).ok
    assert len(pipeline.load(tmp_path, "calibration")) == 10
    clean_temp_files(folder)
    assert list(read_index(folder)) == [parts[0].name]
    assert verify_store(folder, get_experiment("calibration")).ok


def _without_root_file_access() -> list[str]:
    """A prefix that runs a command as root without its power to read any file (a part
    chmod'ed 000 is then unreadable, as for any user); [] when not root."""
    import os
    import shutil

    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and setpriv (util-linux) is missing to drop file access")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def test_a_part_or_manifest_this_user_may_not_read_is_reported_and_never_moved(tmp_path):
    """A folder copied from another user kept a good part only its owner may read. verify
    called it corrupt and pointed at --repair, which moved the good file to _quarantine/ and
    forgot it in the index (a resume then recomputed its tasks). Now verify, the sweep, status
    and load exit 4 (or raise) naming it and saying it is its permissions, not damage; --repair
    moves and forgets nothing, says so, and exits 4. Once readable again, nothing was lost.
    The manifest likewise. The file access is really denied (root's dropped, see above)."""
    import os

    folder, parts = _store_of_two_parts(tmp_path)
    as_user = _without_root_file_access()
    index = read_index(folder)
    digest = file_sha256(parts[1])
    parts[1].chmod(0)
    os.chown(parts[1], 65534, 65534)  # nobody's (a no-op for a non-root owner's own file)

    def cli(*args):
        return subprocess.run([*as_user, sys.executable, *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    not_damage = "a file permission problem, not damage"
    verify = cli("-m", "pipeline", "verify", str(folder))
    assert verify.returncode == 4, verify.stdout + verify.stderr
    assert "corrupt: 0" in verify.stdout and "unreadable: 1" in verify.stdout
    assert f"{parts[1].name}: Permission denied" in verify.stdout
    assert not_damage in verify.stderr and "bad file(s)" not in verify.stderr
    for args in (["run.py", "experiment=calibration", "grid.x={range:[0,20]}",
                  "params.work_us=0", f"results_dir={tmp_path}", "cluster.n_workers=1",
                  "progress=false", "cluster.dashboard_address=:0"],
                 ["-m", "pipeline", "status", str(folder)]):
        proc = cli(*args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, out
        assert parts[1].name in out and "Permission denied" in out and not_damage in out, out
        assert "Traceback" not in out and "moves it aside" not in out, out
    load = cli("-c", f"import pipeline; pipeline.load({str(tmp_path)!r}, 'calibration')")
    assert "UnreadablePartFile" in load.stderr and not_damage in load.stderr, load.stderr
    skip = cli("-c", f"import pipeline; print(len(pipeline.load({str(tmp_path)!r}, "
                     "'calibration', on_error='skip')))")
    assert skip.returncode == 0 and skip.stdout.split() == ["10"], skip.stdout + skip.stderr
    assert not_damage in skip.stderr and "repair with" not in skip.stderr, skip.stderr

    repair = cli("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 4, repair.stdout + repair.stderr
    assert "quarantined" not in repair.stdout and not (folder / "_quarantine").exists()
    assert "They were left where they are" in repair.stderr and not_damage in repair.stderr
    assert sorted(folder.glob("part-*.parquet")) == parts and read_index(folder) == index

    parts[1].chmod(0o644)  # the fix: every row is there, as written
    assert file_sha256(parts[1]) == digest
    assert cli("-m", "pipeline", "verify", str(folder)).returncode == 0
    assert len(pipeline.load(tmp_path, "calibration")) == 20

    manifest = folder / "_manifest.json"
    manifest.write_text('{"runs": []}')
    manifest.chmod(0)
    os.chown(manifest, 65534, 65534)
    for args in (["-m", "pipeline", "status", str(folder)],
                 ["-m", "pipeline", "verify", str(folder)],
                 ["-m", "pipeline", "verify", str(folder), "--repair"]):
        proc = cli(*args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4 and "Traceback" not in out, (args, out)
        assert "Permission denied" in out and not_damage in out, (args, out)
    assert manifest.exists() and not (folder / "_quarantine").exists()
    manifest.chmod(0o644)
    assert manifest.read_text() == '{"runs": []}'


def test_verify_counts_every_part_file_and_says_how_many_are_good(tmp_path, capsys):
    """Five part-*.parquet files, one of another schema: verify said '4 part file(s), 24
    readable rows', as if the folder held four. It counts the five, and says which are good."""
    folder = tmp_path / "calibration"
    writer = PartWriter(folder, "run1")
    for start in range(0, 24, 6):
        writer.write(calibration_table(range(start, start + 6)))
    write_part_file(folder, "part-other.parquet",
                    calibration_table(range(30, 33)).drop_columns(["value"]))
    assert verify_main([str(folder)]) == 4
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"verify {folder}: 5 part file(s): 4 good (24 readable rows), " \
        "1 foreign", out
    # files that are no part files are not counted among them, but said apart
    (folder / "notes.csv").write_text("a,b\n")
    (folder / "subdir").mkdir()
    assert verify_main([str(folder)]) == 4
    assert capsys.readouterr().out.splitlines()[0] == (
        f"verify {folder}: 5 part file(s): 4 good (24 readable rows), 1 foreign; 2 other "
        "file(s) or folder(s), not part files")
    # every part good: as before
    assert verify_main([str(folder), "--repair"]) == 0
    capsys.readouterr()
    assert verify_main([str(folder)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        f"verify {folder}: 4 part file(s), 24 readable rows"


@pytest.mark.parametrize("problem", ["stray file", "empty directory", "damaged manifest",
                                     "parquet of no tasks"])
def test_verify_advises_a_rerun_only_when_part_files_held_tasks(tmp_path, capsys, problem):
    """A stray file, an empty directory or a damaged manifest holds no tasks, but verify
    said 'then rerun the sweep to recompute their tasks' (and --repair '1 part file(s)
    quarantined; rerun the sweep ...' of notes.csv). Said now only of part files that held
    tasks."""
    folder, parts = _store_of_two_parts(tmp_path)
    if problem == "stray file":
        (folder / "notes.csv").write_text("a,b\n")
    elif problem == "empty directory":
        (folder / "plots").mkdir()
    elif problem == "damaged manifest":
        (folder / "_manifest.json").write_text('{"runs": [')
    else:
        pq.write_table(pa.table({"a": [1]}), folder / "part-stray.parquet")
    assert verify_main([str(folder)]) == 4
    err = capsys.readouterr().err
    assert "1 bad file(s)" in err and f"verify {folder} --repair" in err, err
    assert "rerun the sweep" not in err, err
    assert "None of them held tasks of this experiment: nothing to recompute." in err, err
    assert verify_main([str(folder), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "rerun the sweep" not in out and "part file(s) quarantined" not in out, out
    if problem != "damaged manifest":
        assert "1 file(s) quarantined that held no tasks of this experiment: nothing to " \
            "recompute" in out, out


def test_verify_advises_a_rerun_of_the_part_files_that_held_tasks(tmp_path, capsys):
    """A damaged part and a foreign part of this experiment's rows held tasks; a stray file
    did not: the advice names the parts only."""
    folder, parts = _store_of_two_parts(tmp_path)
    with open(parts[1], "r+b") as fh:
        fh.truncate(parts[1].stat().st_size // 2)
    (folder / "notes.csv").write_text("a,b\n")
    assert verify_main([str(folder)]) == 4
    err = capsys.readouterr().err
    assert f"then rerun the sweep to recompute the tasks of {parts[1].name}." in err, err
    assert verify_main([str(folder), "--repair"]) == 0
    out = capsys.readouterr().out
    assert ("1 part file(s) quarantined; rerun the sweep (the same command) to recompute their "
            "tasks") in out, out
    assert "1 file(s) quarantined that held no tasks of this experiment" in out, out

    # every bad file a part that held tasks: the advice as it was
    write_part_file(folder, "part-other.parquet",
                    calibration_table(range(30, 33)).drop_columns(["value"]))
    assert verify_main([str(folder)]) == 4
    assert "then rerun the sweep to recompute their tasks." in capsys.readouterr().err


def test_a_declaration_changed_without_a_version_bump_says_to_bump_it(tmp_path):
    """A parameter added to an experiment at the same version made its own earlier parts
    "not a result part of this folder's experiment (column 'q' of the declared schema is
    missing)", with verify --repair as the fix: that moves the user's results aside. The
    reason now says what happened and that a version bump keeps them."""
    import dataclasses

    from pipeline.experiments.base import Experiment, Param
    from pipeline.store.integrity import verify_store

    before = Experiment("t_redeclared", 2, [Param("x", int, 0)], {"y": pa.float64()},
                        lambda p, seed: {"y": 1.0})
    folder = tmp_path / "t_redeclared"
    PartWriter(folder, "run1").write(run_batch(Grid(before, {"x": [1, 2]}, {}), range(2))[0])
    after = dataclasses.replace(before, params=[Param("x", int, 0), Param("q", int, 0)])
    report = verify_store(folder, after)
    [(name, reason)] = report.foreign
    assert reason == ("column 'q' of the declared schema is missing; written by 't_redeclared' "
                      "version 2 as declared before: if its parameters or columns changed, bump "
                      "its version (its module's version=; these rows stay readable as version "
                      "2) instead of moving them aside"), reason
    assert verify_store(folder, dataclasses.replace(after, version=3)).foreign == []
    other = dataclasses.replace(before, name="t_other")  # another experiment's part: no hint
    assert "bump" not in verify_store(folder, other).foreign[0][1]


def _store_of_three_runs(root):
    """Parts as sweeps name them (run ids are UTC stamps), one run a day."""
    folder = root / "calibration"
    for day, start in ((1, 0), (2, 10), (3, 20)):
        PartWriter(folder, f"2026010{day}T000000Z-{day:06x}").write(
            calibration_table(range(start, start + 10)))
    return folder, sorted(folder.glob("part-*.parquet"))


def test_verify_finds_an_index_that_lost_entries_and_repair_records_them(tmp_path, capsys):
    """_parts.jsonl cut short (5 of 10 lines, mid-line), then a part deleted whose entry was
    gone: verify said 'good: 10 (4 without a recorded checksum)', exit 0, while load returned
    16,736 of 20,000 rows. Every part a sweep names since the index began has an entry
    (appended before its rename): one without is a part the index lost, exit 4."""
    folder, parts = _store_of_three_runs(tmp_path)
    index = folder / PART_INDEX
    lines = index.read_text().splitlines(keepends=True)
    index.write_text(lines[0] + lines[1][:20])  # the first entry and a torn second one
    parts[1].unlink()  # its entry was cut: nothing records that it existed
    assert verify_main([str(folder)]) == 4
    captured = capsys.readouterr()
    assert ("  not in the index: 1 (good, named as written since the index began, without an "
            f"entry: lost lines, or put back, or copied in)\n    {parts[2].name}\n"
            ) in captured.out, captured.out
    assert ("Part files written since the part index (_parts.jsonl) began are not in it: the "
            "index lost their lines (cut or edited)") in captured.err
    assert f"python -m pipeline verify {folder} --repair" in captured.err
    assert verify_main([str(folder), "--repair"]) == 0
    out = capsys.readouterr().out
    assert f"1 part(s) recorded in the index as they are now: {parts[2].name}; a part deleted " \
           "before this repair is not known to it" in out, out
    assert verify_main([str(folder)]) == 0  # recorded: its checksum is checked from now on
    assert file_sha256(parts[2]) in index.read_text()
    assert sorted(pipeline.load(tmp_path, "calibration").x) == [*range(10), *range(20, 30)]


def test_verify_keeps_parts_written_before_the_index_began(tmp_path, capsys):
    """A folder first swept by a version without the index, resumed by one with it: its
    older parts have no entries, by design, and are decoded in full instead: good."""
    folder, parts = _store_of_three_runs(tmp_path)
    index = folder / PART_INDEX
    index.write_text("".join(index.read_text().splitlines(keepends=True)[1:]))
    assert verify_main([str(folder)]) == 0
    assert "good:    3 (1 without a recorded checksum, decoded in full)" in capsys.readouterr().out


def test_verify_finds_a_copied_part_file(tmp_path, capsys):
    """'part-X (copy).parquet' beside part-X: verify said good (it decodes), while
    pandas.read_parquet of the folder read its rows twice. A byte-for-byte copy of an
    indexed part is foreign; --repair moves it aside, and nothing needs recomputing."""
    folder, parts = _store_of_three_runs(tmp_path)
    copy = folder / parts[0].name.replace(".parquet", " (copy).parquet")
    copy.write_bytes(parts[0].read_bytes())
    assert len(pd.read_parquet(folder)) == 40  # 10 rows twice
    assert verify_main([str(folder)]) == 4
    out = capsys.readouterr().out
    assert (f"    {copy.name}: a byte-for-byte copy of {parts[0].name}: pandas.read_parquet "
            "would read its rows twice (pipeline.load keeps one)") in out, out
    assert verify_main([str(folder), "--repair"]) == 0
    out = capsys.readouterr().out
    assert ("1 copy(ies) of indexed part files quarantined: their rows are in the parts they "
            "copy, nothing to recompute") in out and "rerun the sweep" not in out, out
    assert len(pd.read_parquet(folder)) == 30 and not copy.exists()
    assert verify_main([str(folder)]) == 0


def test_status_of_a_part_whose_error_column_rotted_exits_4(tmp_path, capsys):
    """status reads the error column where tasks failed (their errors): bit rot there, with
    the id and status columns intact, was a BadPartFile traceback, exit 1. Now the counts,
    the part named with its repair, exit 4."""
    from pipeline.status import main as status_main

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 200]}}, {"work_us": 0.0, "fail_every": 2})
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260101T000000Z-000001").write(run_batch(grid, range(200))[0])
    (part,) = folder.glob("part-*.parquet")
    meta = pq.read_metadata(part).row_group(0)
    error = next(meta.column(i) for i in range(meta.num_columns)
                 if meta.column(i).path_in_schema == "error")
    start = error.dictionary_page_offset or error.data_page_offset
    original = part.read_bytes()
    for fraction in (0.3, 0.5, 0.7, 0.9):  # a byte of the error column's pages, flipped
        rotted = bytearray(original)
        rotted[start + int(error.total_compressed_size * fraction)] ^= 0xFF
        part.write_bytes(bytes(rotted))
        try:
            pq.read_table(part, columns=["error"], page_checksum_verification=True)
        except Exception:
            break
    else:
        pytest.skip("no flipped byte of the error column failed its page checksum")
    pq.read_table(part, columns=["task_id", "status", "experiment_version"],
                  page_checksum_verification=True)  # the counts' columns read
    assert status_main([str(tmp_path), "calibration"]) == 4
    out = capsys.readouterr().out
    assert "calibration: 100 ok, 100 failed stored (version 2)" in out, out
    assert (f"  their errors unknown: part file {part.name} ") in out, out
    assert f"python -m pipeline verify {folder} --repair moves it aside" in out, out


def test_verify_keeps_the_copy_of_a_damaged_part_and_finds_copies_of_unindexed_ones(tmp_path,
                                                                                   capsys):
    """A copy is foreign only beside a good original: a copy of a part that rotted since
    holds the only intact rows (--repair quarantined both, "nothing to recompute", and load
    lost them). And two identical parts without index entries (a folder written before the
    index) are one part and a copy: pandas.read_parquet read its rows twice, verify said good."""
    folder, parts = _store_of_three_runs(tmp_path)
    copy = folder / parts[0].name.replace(".parquet", " (copy).parquet")
    copy.write_bytes(parts[0].read_bytes())
    rotted = bytearray(parts[0].read_bytes())
    rotted[len(rotted) // 2] ^= 0xFF
    parts[0].write_bytes(bytes(rotted))
    assert verify_main([str(folder), "--repair"]) == 0
    out = capsys.readouterr().out
    assert f"moved {parts[0].name}" in out and f"moved {copy.name}" not in out, out
    assert sorted(pipeline.load(tmp_path, "calibration").x) == list(range(30))

    legacy = tmp_path / "legacy"
    folder, parts = _store_of_three_runs(legacy)
    (folder / PART_INDEX).unlink()  # as written before the index existed
    copy = folder / parts[1].name.replace(".parquet", " (copy).parquet")
    copy.write_bytes(parts[1].read_bytes())
    assert verify_main([str(folder)]) == 4
    out = capsys.readouterr().out
    assert f"    {parts[1].name}: a byte-for-byte copy of {copy.name}" in out or \
        f"    {copy.name}: a byte-for-byte copy of {parts[1].name}" in out, out
    assert verify_main([str(folder), "--repair"]) == 0
    assert len(pd.read_parquet(folder)) == 30


def test_status_groups_errors_that_differ_only_in_numbers(tmp_path, capsys):
    """Errors name their points' values ("at x=7"): listed by exact text, the three "most
    common" of a sweep were three singletons of one cause. Texts that differ only in numbers
    are one kind now, counted together, with an example."""
    from pipeline.engine.batch_table import failed_batch_table
    from pipeline.status import main as status_main

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 7]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    writer = PartWriter(folder, "20260101T000000Z-000001")
    for i, error in enumerate(["KernelError: no convergence at x=0 after 1e3 steps",
                               "KernelError: no convergence at x=1 after 2.5e3 steps",
                               "KernelError: no convergence at x=2 after 1e3 steps",
                               "MemoryError", "ValueError: bad n=-4", "ValueError: bad n=7",
                               "OSError: disk"]):
        writer.write(failed_batch_table(grid, [i], error))
    assert status_main([str(tmp_path), "calibration"]) == 0
    out = capsys.readouterr().out
    where = f"{str(tmp_path)!r}, 'calibration'"
    assert ("  their errors, most common first (3 of 4 kinds, texts that differ only in numbers "
            f"as one; all: pipeline.load({where}, status='failed')):\n"
            "    3 task(s): KernelError: no convergence at x=0 after 1e3 steps (and 2 more like "
            "it but for its numbers)\n"
            "    2 task(s): ValueError: bad n=-4 (and 1 more like it but for its numbers)\n"
            "    1 task(s): MemoryError\n") in out, out


def test_repair_that_removes_a_parts_retries_says_the_rerun_needs_retry_failed(tmp_path):
    """A part holding the successful retries of failed points (retry_failed=true) is damaged
    and quarantined: the older failed rows are now each task's latest attempt, and the same
    command runs nothing ("0 to run"). verify --repair said "rerun the sweep (the same
    command) to recompute their tasks"; it now says those tasks need retry_failed=true
    (review, 2026-12-06)."""
    from pipeline.engine.batch_table import failed_batch_table

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 10]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260101T000000Z-aaaaa0").write(
        failed_batch_table(grid, range(10), "ValueError: transient"))
    PartWriter(folder, "20260102T000000Z-aaaaa1").write(run_batch(grid, range(10))[0])
    assert (pipeline.load(tmp_path, "calibration").status == "ok").all()
    retries = max(folder.glob("part-*.parquet"), key=lambda p: p.name)
    assert "aaaaa1" in retries.name
    retries.write_bytes(retries.read_bytes()[:300])  # truncated

    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0, repair.stderr
    assert "1 part file(s) quarantined; rerun the sweep" in repair.stdout, repair.stdout
    assert ("10 task(s) in the folder are now stored only as failed (a removed part may have "
            "held their retries): the rerun skips them unless given retry_failed=true"
            in repair.stdout), repair.stdout
    sweep = ["experiment=calibration", "grid.x={range:[0,10]}", "params.work_us=0",
             "cluster.n_workers=1", "progress=false", "cluster.dashboard_address=:0",
             f"results_dir={tmp_path}"]
    again = run("run.py", *sweep)  # what the note warns of: the same command runs nothing
    assert "0 to run" in again.stderr and "10 failed: skipped" in again.stderr, again.stderr
    retried = run("run.py", *sweep, "retry_failed=true")
    assert retried.returncode == 0, retried.stderr
    assert (pipeline.load(tmp_path, "calibration").status == "ok").all()

    # a repair with nothing failed left says nothing of it
    truncated = max(folder.glob("part-*.parquet"), key=lambda p: p.name)
    truncated.write_bytes(truncated.read_bytes()[:300])
    PartWriter(folder, "20260103T000000Z-aaaaa2").write(run_batch(grid, range(10))[0])
    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0 and "quarantined" in repair.stdout, repair.stdout
    assert "stored only as failed" not in repair.stdout, repair.stdout


def _truncate_and_kill_repair_before_it_forgets(folder, part):
    """Truncate ``part``, then kill -9 a verify --repair at the moment between moving the bad
    parts to _quarantine/ and forgetting them in the index (its forget step is a SIGKILL)."""
    with open(part, "r+b") as fh:
        fh.truncate(part.stat().st_size // 2)
    killed = run("-c", "import os, sys; import pipeline.store.integrity as integrity; "
                 "integrity.forget_parts = lambda *a, **k: os.kill(os.getpid(), 9); "
                 "from pipeline.verify import main; sys.exit(main([sys.argv[1], '--repair']))",
                 str(folder))
    assert killed.returncode == -9, killed.stdout + killed.stderr


def test_a_repair_killed_after_moving_a_part_says_so_and_a_second_repair_finishes(tmp_path):
    """kill -9 of verify --repair between moving a truncated part to _quarantine/ and
    forgetting it in the index: load and status said the part was "deleted or moved by hand",
    though the repair itself had moved it. They now say where it is and how to finish."""
    folder, parts = _store_of_two_parts(tmp_path)
    victim = parts[1]
    _truncate_and_kill_repair_before_it_forgets(folder, victim)
    assert not victim.exists() and (folder / "_quarantine" / victim.name).exists()
    with pytest.raises(BadPartFile) as err:
        pipeline.load(tmp_path, "calibration")
    said = str(err.value)
    assert f"{folder / '_quarantine'}/" in said and victim.name in said, said
    assert "moved by hand" not in said and f"python -m pipeline verify {folder} --repair" in said
    assert said.startswith("1 part file(s)"), said
    status = run("-m", "pipeline", "status", str(tmp_path))
    assert status.returncode == 4 and "was stopped before it forgot them" in status.stdout + \
        status.stderr, status.stdout + status.stderr
    repair = run("-m", "pipeline", "verify", str(folder), "--repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert sorted(pipeline.load(tmp_path, "calibration").x) == list(range(10))


def test_a_killed_repair_beside_a_part_deleted_by_hand_tells_each_apart(tmp_path):
    """The same kill, with another part deleted by hand before the repair: the message said
    both were in _quarantine/ (review, 2026-12-06). Each is now said where it is."""
    folder, parts = _store_of_two_parts(tmp_path)
    PartWriter(folder, "run2").write(calibration_table(range(20, 30)))
    parts = sorted(folder.glob("part-*.parquet"))
    truncated, deleted = parts[1], parts[2]
    _truncate_and_kill_repair_before_it_forgets(folder, truncated)
    deleted.unlink()
    with pytest.raises(BadPartFile) as err:
        pipeline.load(tmp_path, "calibration")
    said = str(err.value)
    moved, _, rest = said.partition("; ")
    assert f"1 part file(s) recorded in {PART_INDEX} with 10 row(s) are in " in moved, said
    assert truncated.name in moved and deleted.name not in moved, said
    assert deleted.name in rest and "deleted or moved by hand?" in rest, said
    assert truncated.name not in rest and f"verify {folder} --repair" in rest, said
    assert run("-m", "pipeline", "verify", str(folder), "--repair").returncode == 0
    assert sorted(pipeline.load(tmp_path, "calibration").x) == list(range(10))


def test_status_after_a_repair_that_removed_retries_says_they_need_retry_failed(tmp_path):
    """status after such a repair said only "next: rerun to recompute the tasks the repair
    took out", and that command runs nothing for tasks whose older failed rows are now their
    latest attempt. It now counts them and gives the command with retry_failed=true."""
    from pipeline.engine.batch_table import failed_batch_table

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 10]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"
    PartWriter(folder, "20260101T000000Z-aaaaa0").write(
        failed_batch_table(grid, range(10), "ValueError: transient"))
    sweep = ["experiment=calibration", "grid.x={range:[0,10]}", "params.work_us=0",
             "cluster.n_workers=1", "progress=false", "cluster.dashboard_address=:0",
             f"results_dir={tmp_path}"]
    assert run("run.py", *sweep, "retry_failed=true").returncode == 0
    assert (pipeline.load(tmp_path, "calibration").status == "ok").all()
    retries = max(folder.glob("part-*.parquet"), key=lambda p: p.name)
    again = run("run.py", *sweep)  # the last run: its command lacks retry_failed=true
    assert again.returncode == 0 and "0 to run" in again.stderr, again.stderr
    retries.write_bytes(retries.read_bytes()[:300])  # truncated
    assert run("-m", "pipeline", "verify", str(folder), "--repair").returncode == 0

    status = run("-m", "pipeline", "status", str(tmp_path), "calibration")
    out = status.stdout + status.stderr
    assert status.returncode == 0, out
    assert "next: rerun to recompute the tasks the repair took out" in out, out
    also = [line for line in out.splitlines() if line.strip().startswith("also:")]
    assert len(also) == 1 and "10 task(s) now stored only as failed" in also[0], out
    assert "retry_failed" not in out.split("next:")[1].split("also:")[0], out
    # which grid they belong to is not known: where to find them is said, not only a command
    assert f"pipeline.load({str(tmp_path)!r}, 'calibration', status='failed') lists them" \
        in also[0], out
    command = also[0].rpartition("for the last run's grid: ")[2]
    assert command.endswith(" retry_failed=true") and "'grid.x={range:[0,10]}'" in command, out
    assert run(*shlex.split(command)[1:]).returncode == 0
    assert (pipeline.load(tmp_path, "calibration").status == "ok").all()
