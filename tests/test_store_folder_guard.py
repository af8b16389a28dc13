"""verify, compact and status act only on what the store wrote (a user trial).

``python -m pipeline verify /tmp/plain --repair`` on an ordinary folder (``a.txt``, ``b.csv``,
``sub/``) exited 0, moved all three to ``_quarantine/`` and said "3 part file(s) quarantined";
``compact`` said "nothing to compact" and left a ``.lock`` in it; ``status`` reported "sub: 0 ok,
0 failed stored". Now a folder that is not a results folder is refused (exit 2, one line naming
it, nothing locked, written or moved). In a real results folder, what a raw
``pandas.read_parquet`` would trip on (a user's notes, a subfolder) is still set aside by
``--repair``, recoverably, as before.

Folders are real: plain folders of files, a real sweep through ``run.py``, and the store's own
writer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.status import main as status_main
from pipeline.store.integrity import PART_INDEX
from pipeline.store.manifest import SweepLock, update_manifest
from pipeline.store.part_writer import PartWriter
from pipeline.verify import main as verify_main

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["experiment=calibration", "grid.x={range:[0,50]}", "cluster.n_workers=1",
         "params.work_us=0", "batch_size=10", "flush_rows=10", "progress=false",
         "cluster.dashboard_address=:0"]  # one part file per batch: 5 parts


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def listing(root: Path) -> dict:
    """Every entry under ``root``, hidden ones included: kind, bytes (files) and mtime (a
    folder's changes when an entry is created or removed in it, even if removed again)."""
    out = {".": ("dir", root.stat().st_mtime_ns)}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (("dir", st.st_mtime_ns) if p.is_dir() else
                                         ("file", p.read_bytes(), st.st_mtime_ns))
    return out


def plain_folder(root: Path) -> Path:
    """The user trial's folder: two files and a subfolder, nothing the store wrote."""
    folder = root / "plain"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("my notes\n")
    (folder / "b.csv").write_text("x,y\n1,2\n")
    return folder


def spark_folder(root: Path) -> Path:
    """Another tool's Parquet output: part-*.parquet files that are not result parts."""
    folder = root / "spark_out"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}),
                   folder / "part-00000-7c1f7e0a-c000.snappy.parquet")
    pq.write_table(pa.table({"a": [3]}), folder / "part-00001-7c1f7e0a-c000.snappy.parquet")
    (folder / "_SUCCESS").write_text("")
    return folder


def calibration_table(xs) -> pa.Table:
    grid = Grid(get_experiment("calibration"), {"x": list(xs)}, {"work_us": 0})
    return run_batch(grid, range(grid.total))[0]


# ------------------------------------------------------------------ not a results folder
@pytest.mark.parametrize("make", [plain_folder, spark_folder], ids=["plain", "spark"])
@pytest.mark.parametrize("command", ["verify", "verify --repair", "compact", "status",
                                     "status RESULTS_DIR NAME"])
def test_a_folder_that_is_not_a_results_folder_is_refused_and_left_as_it_was(tmp_path, make,
                                                                               command):
    folder = make(tmp_path)
    before, parent_before = listing(folder), listing(tmp_path)
    args = {"verify": ["verify", folder], "verify --repair": ["verify", folder, "--repair"],
            "compact": ["compact", folder], "status": ["status", folder],
            "status RESULTS_DIR NAME": ["status", tmp_path, folder.name]}[command]
    proc = run("-m", "pipeline", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert str(folder) in proc.stderr and "Traceback" not in proc.stderr
    expected = {"status": f"error: {folder} is not a results directory: no experiment folder in "
                          "it",
                "status RESULTS_DIR NAME": f"error: no experiment folder {folder}: not a "
                                           "results folder"}.get(
        command, f"error: {folder} is not a results folder: it holds no _manifest.json, "
                 "_parts.jsonl or result part file (part-*.parquet) written by a sweep; "
                 "expected RESULTS_DIR/NAME")
    assert proc.stderr.startswith(expected), proc.stderr
    assert listing(folder) == before  # byte for byte: no .lock, no _quarantine, no moves
    assert listing(tmp_path) == parent_before
    assert not (folder / ".lock").exists() and not (folder / "_quarantine").exists()


def test_which_folders_are_results_folders(tmp_path):
    """Anything the store did not write is not a results folder, and ``verify --repair``
    refuses it, moving nothing; what the store writes, at each stage, is one (verify works
    on it as before)."""
    locked_by_compact = tmp_path / "old_compact"  # the .lock the old `compact` left: no run
    locked_by_compact.mkdir()
    with SweepLock(locked_by_compact):
        pass
    old_repair = tmp_path / "old_repair"  # a plain folder the old --repair emptied
    (old_repair / "_quarantine").mkdir(parents=True)
    (old_repair / "_quarantine" / "a.txt").write_text("my notes\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    strangers = [plain_folder(tmp_path), spark_folder(tmp_path), locked_by_compact, old_repair,
                 empty]
    for folder in strangers:
        before = listing(folder)
        assert verify_main([str(folder), "--repair"]) == 2, folder
        assert listing(folder) == before, folder
    from pipeline.store.integrity import is_results_folder

    assert not any(is_results_folder(folder) for folder in strangers)

    def store(name):  # as PartWriter leaves it: parts and their index
        folder = tmp_path / name / "calibration"
        PartWriter(folder, "run1").write(calibration_table(range(5)))
        return folder

    indexed = store("indexed")
    parts_only = store("parts_only")  # a store from before part checksums
    (parts_only / PART_INDEX).unlink()
    named_only = tmp_path / "named_only" / "calibration"  # a sweep's part name, footer torn
    named_only.mkdir(parents=True)
    (named_only / "part-20261127T151945Z-4373b1-000002.parquet").write_bytes(b"PAR1 torn")
    manifest_only = tmp_path / "manifest_only" / "calibration"  # a sweep that ran nothing
    update_manifest(manifest_only, {"run_id": "r1", "status": "finished"})
    damaged = tmp_path / "damaged" / "calibration"
    damaged.mkdir(parents=True)
    (damaged / "_manifest.json").write_text("{not json")
    starting = tmp_path / "starting" / "calibration"  # a sweep that has only taken its lock
    with SweepLock(starting, "20261127T151945Z-4373b1"):
        pass
    for folder in (indexed, parts_only, named_only, manifest_only, damaged, starting):
        assert is_results_folder(folder), folder
        assert verify_main([str(folder)]) == (4 if folder in (named_only, damaged) else 0), folder
    assert verify_main([str(damaged), "--repair"]) == 0  # the manifest moved aside: only
    assert sorted(p.name for p in damaged.iterdir()) == [".lock", "_quarantine"]  # repair left
    assert is_results_folder(damaged) and verify_main([str(damaged)]) == 0


def test_status_lists_only_experiment_folders(tmp_path, capsys):
    """A RESULTS_DIR with a user's plots/ beside an experiment folder: status listed plots as
    an experiment with 0 ok, 0 failed; given a results folder holding a subfolder, it
    described the subfolder instead of the experiment."""
    folder = tmp_path / "calibration"
    PartWriter(folder, "run1").write(calibration_table(range(5)))
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "fig.png").write_bytes(b"\x89PNG fake")
    (folder / "sub").mkdir()
    (folder / "notes.txt").write_text("my notes\n")
    for args in ([str(tmp_path)], [str(tmp_path), "calibration"], [str(folder)]):
        assert status_main(args) == 0, args
        out = capsys.readouterr().out
        assert out.startswith("calibration: 5 ok, 0 failed stored (version 2)\n"), (args, out)
        assert "plots" not in out and "sub:" not in out, (args, out)
    assert status_main([str(tmp_path), "plots"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: no experiment folder {tmp_path / 'plots'}: not a results folder (no "
                   "_manifest.json, _parts.jsonl or result part file written by a sweep); "
                   "experiment folders in " f"{tmp_path}: calibration\n")
    # an empty RESULTS_DIR, or one with only Hydra's .multirun/ (written before the first
    # sweep of a multirun): nothing to list yet, no error
    for name in ("empty", "multirun"):
        results = tmp_path / name
        results.mkdir()
        if name == "multirun":
            (results / ".multirun").mkdir()
        assert status_main([str(results)]) == 0
        assert capsys.readouterr().out == f"no experiment folders under {results}\n"


# ------------------------------------------------------------------ a real results folder
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_repair_of_a_real_results_folder_sets_aside_what_a_raw_read_would_trip_on(tmp_path):
    """A real sweep's folder, with a user's notes.txt, plot, Parquet file and subfolder put
    in it, and a truncated part: verify names them all (a raw pandas.read_parquet of the
    folder, which the store promises, fails on each); --repair moves them to _quarantine/,
    byte for byte, and the folder reads raw again; the resume recomputes the part's tasks."""
    folder = tmp_path / "calibration"
    first = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert first.returncode == 0, first.stderr
    parts = sorted(folder.glob("part-*.parquet"))
    assert len(parts) == 5
    (folder / "notes.txt").write_text("x=17 looked odd\n")
    (folder / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n fake")
    pq.write_table(pa.table({"x": [1.0]}), folder / "analysis.parquet")
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "deeper" / "draft.tex").write_text("\\section{x}\n")
    users = ["analysis.parquet", "notes.txt", "plot.png", "sub"]
    victim = parts[2]
    with open(victim, "r+b") as fh:
        fh.truncate(victim.stat().st_size // 2)

    def user_files():
        return {name: listing(folder / name) if (folder / name).is_dir() else
                (folder / name).read_bytes() for name in users}

    theirs = user_files()
    mtimes = {name: (folder / name).stat().st_mtime_ns for name in users}

    check = run("-m", "pipeline", "verify", folder)
    assert check.returncode == 4, check.stdout + check.stderr
    assert "corrupt: 1" in check.stdout and victim.name in check.stdout
    assert "foreign: 4" in check.stdout
    assert "notes.txt: not a part file (part-*.parquet)" in check.stdout
    assert "sub: a directory: Parquet readers would descend into it" in check.stdout
    assert "5 bad file(s)" in check.stderr

    repair = run("-m", "pipeline", "verify", folder, "--repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert sorted(p.name for p in (folder / "_quarantine").iterdir()) == \
        sorted([victim.name, *users])
    assert not victim.exists()
    kept = {name: listing(folder / "_quarantine" / name)
            if (folder / "_quarantine" / name).is_dir()
            else (folder / "_quarantine" / name).read_bytes() for name in users}
    assert kept == theirs  # moved, never deleted or changed
    assert {name: (folder / "_quarantine" / name).stat().st_mtime_ns for name in users} == mtimes
    assert len(pd.read_parquet(folder)) == 40  # the folder reads raw as one table again

    again = run("-m", "pipeline", "verify", folder)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "good:    4" in again.stdout

    status = run("-m", "pipeline", "status", tmp_path)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("calibration: 40 ok, 0 failed stored (version 2)\n")
    assert "sub:" not in status.stdout
    assert run("-m", "pipeline", "status", folder).stdout == status.stdout

    resume = run("run.py", *SWEEP, f"results_dir={tmp_path}")
    assert resume.returncode == 0, resume.stderr
    assert "40 already done, 10 to run" in resume.stderr
    assert len(pipeline.load(tmp_path, "calibration")) == 50
    compact = run("-m", "pipeline", "compact", folder)
    assert compact.returncode == 0, compact.stderr
    assert "files: 5 -> 1" in compact.stdout
    assert len(pipeline.load(tmp_path, "calibration")) == 50
