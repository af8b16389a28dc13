"""Workers that run other code than the sweep stamps on its rows (``code_id``).

A researcher edits a kernel while workers live on: a `dask worker` pool at an address keeps
the modules it imported, and a worker that joins later (adaptive SLURM) or is restarted by
its nanny imports the files as they are then. Rows computed by such a worker must not carry
the sweep's code_id. These tests run a real `dask scheduler` and `dask worker` processes and
the real CLI on a copy of the code (so that it can be edited), and edit it for real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import pipeline

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
DASK = Path(PY).with_name("dask")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def code_copy(tmp_path):
    """A copy of the code (pipeline/, conf/, run.py) that a test may edit."""
    copy = tmp_path / "code"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "pipeline", copy / "pipeline", ignore=ignore)
    shutil.copytree(ROOT / "conf", copy / "conf", ignore=ignore)
    shutil.copy(ROOT / "run.py", copy / "run.py")
    return copy


@pytest.fixture
def dask_processes(tmp_path, code_copy):
    """Start a `dask scheduler` and `dask worker`s that import the copy; all killed after."""
    procs = []
    env = {**os.environ, "PYTHONPATH": str(code_copy), "PYTHONDONTWRITEBYTECODE": "1"}

    def scheduler() -> str:
        sched_file = tmp_path / "scheduler.json"
        procs.append(subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
            cwd=code_copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        _wait(lambda: sched_file.exists() and sched_file.stat().st_size, "the scheduler file")
        time.sleep(0.3)
        return json.loads(sched_file.read_text())["address"]

    def worker(address: str, name: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [str(DASK), "worker", address, "--nthreads", "2", "--name", name, "--no-dashboard"],
            cwd=code_copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        procs.append(proc)
        return proc

    yield scheduler, worker, env
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _wait(predicate, what, timeout=60):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _workers(address: str) -> dict:
    from distributed import Client

    with Client(address, timeout=30) as client:
        return {w["name"]: addr for addr, w in client.scheduler_info()["workers"].items()}


def _sweep(code_copy, env, address, results, *args, wait=True):
    cmd = [PY, str(code_copy / "run.py"), "cluster=address", f"cluster.address={address}",
           f"results_dir={results}", "progress=false", *args]
    proc = subprocess.Popen(cmd, cwd=code_copy, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=240)
    return proc.returncode, out, err


def _edit(path: Path) -> None:
    """A change that computes the same numbers: only the code identity differs."""
    with open(path, "a") as fh:
        fh.write("\n# edited while workers were running\n")


@pytest.mark.slow
def test_a_long_lived_worker_with_modules_older_than_the_files_is_refused(
        tmp_path, code_copy, dask_processes):
    """The worker imported calibration (an earlier sweep of it), then calibration.py was
    edited: its loaded code is the old one, so a calibration sweep must not start on it. (A
    worker imports only the experiments it runs: one that had run only composition would
    import the edited file, and run the code on disk.)"""
    scheduler, worker, env = dask_processes
    address = scheduler()
    worker(address, "old")
    _wait(lambda: len(_workers(address)) == 1, "the worker")
    code, _, err = _sweep(code_copy, env, address, tmp_path / "r1", "experiment=calibration",
                          "grid.x=[0,1]")
    assert code == 0, err

    _edit(code_copy / "pipeline" / "experiments" / "calibration.py")
    results = tmp_path / "r2"
    code, _, err = _sweep(code_copy, env, address, results, "experiment=calibration",
                          "grid.x={range:[0,20]}")
    assert code == 3, err
    assert "with other code than this sweep" in err
    # the code it runs is the one that computed the first sweep's rows, before the edit
    (old_code,) = set(pd.read_parquet(tmp_path / "r1" / "calibration")["code_id"])
    assert f"it runs code_id {old_code}" in err
    assert not list((results / "calibration").glob("part-*.parquet"))  # nothing computed

    # a worker started now loads the edited files; with the old one gone, the sweep runs
    old = _workers(address)["old"]
    from distributed import Client

    with Client(address, timeout=30) as client:
        worker(address, "new")
        _wait(lambda: "new" in _workers(address), "the new worker")
        client.retire_workers([old], close_workers=True)
    _wait(lambda: set(_workers(address)) == {"new"}, "the old worker to leave")
    code, _, err = _sweep(code_copy, env, address, results, "experiment=calibration",
                          "grid.x={range:[0,20]}")
    assert code == 0, err
    table = pd.read_parquet(results / "calibration")
    assert len(table) == 20 and set(table["status"]) == {"ok"}


@pytest.mark.slow
def test_a_worker_that_joins_after_an_edit_has_its_points_failed_not_stamped(
        tmp_path, code_copy, dask_processes):
    """Mid-sweep, calibration.py is edited and a second worker joins: it runs the edited
    code, so its points are stored failed with the reason; the first worker's rows are kept
    and carry the sweep's code_id. retry_failed=true, on the new code, completes the sweep."""
    scheduler, worker, env = dask_processes
    address = scheduler()
    worker(address, "first")
    _wait(lambda: len(_workers(address)) == 1, "the first worker")
    results = tmp_path / "r"
    n = 600
    driver = _sweep(code_copy, env, address, results, "experiment=calibration",
                    f"grid.x={{range:[0,{n}]}}", "params.work_us=40000",
                    "params.work_mode=sleep", "batch_size=4", "flush_rows=20", wait=False)
    folder = results / "calibration"
    _wait(lambda: list(folder.glob("part-*.parquet")), "the first part file")
    _edit(code_copy / "pipeline" / "experiments" / "calibration.py")
    worker(address, "late")
    _wait(lambda: "late" in _workers(address), "the late worker")
    assert driver.poll() is None, "the sweep ended before the late worker joined"
    out, err = driver.communicate(timeout=240)
    assert driver.returncode == 1, err  # some points failed

    table = pd.read_parquet(folder)
    assert len(table) == n and table["x"].nunique() == n  # every point once
    late = _workers(address)["late"]
    failed = table[table["status"] == "failed"]
    assert len(failed) > 0 and set(failed["worker"]) == {late}
    assert failed["error"].str.contains(f"worker {late} computes experiment").all()
    assert failed["error"].str.contains("with other code than this sweep").all()
    assert failed["error"].str.contains("it runs code_id").all()
    ok = table[table["status"] == "ok"]
    assert len(ok) > 0 and late not in set(ok["worker"])
    assert ok["code_id"].nunique() == 1
    assert "with other code than this sweep" in err  # said once, on the driver's log

    # the first worker still runs the old code: retire it, rerun the failed points
    from distributed import Client

    with Client(address, timeout=30) as client:
        client.retire_workers([_workers(address)["first"]], close_workers=True)
    _wait(lambda: set(_workers(address)) == {"late"}, "the first worker to leave")
    code, _, err = _sweep(code_copy, env, address, results, "experiment=calibration",
                          f"grid.x={{range:[0,{n}]}}", "params.work_us=40000",
                          "params.work_mode=sleep", "retry_failed=true")
    assert code == 0, err
    final = pipeline.load(results, "calibration")
    assert len(final) == n and set(final["status"]) == {"ok"}
    assert final["code_id"].nunique() == 2  # the old code's rows and the new code's


def _local_sweep(code_copy, results, n_workers: int, n: int):
    """The real CLI on an embedded LocalCluster (the sweep's own), run from the copy."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)  # run.py's folder (the copy) comes first on the path
    cmd = [PY, str(code_copy / "run.py"), "experiment=calibration", f"grid.x={{range:[0,{n}]}}",
           "params.work_mode=sleep", "params.work_us=20000", "batch_size=4", "flush_seconds=1",
           f"cluster.n_workers={n_workers}", "cluster.threads_per_worker=2",
           "cluster.dashboard_address=:0", f"results_dir={results}", "progress=false"]
    return subprocess.Popen(cmd, cwd=code_copy, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _sweep_with_a_worker_killed_after_an_edit(code_copy, results, n_workers: int, n: int):
    """:func:`_local_sweep`, one of whose workers is killed after an edit; (driver, stderr)."""
    driver = _local_sweep(code_copy, results, n_workers=n_workers, n=n)
    try:
        _kill_a_worker_after_an_edit(code_copy, driver, results / "calibration")
        _, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return driver, err


def _kill_a_worker_after_an_edit(code_copy, driver, folder) -> None:
    """Once rows are on disk: edit calibration.py, then kill -9 one worker process of the
    driver's LocalCluster; its nanny starts a new one, which imports the edited file."""
    import psutil

    _wait(lambda: list(folder.glob("part-*.parquet")) or driver.poll() is not None,
          "the first part file", timeout=120)
    assert driver.poll() is None, driver.communicate()[1]
    _edit(code_copy / "pipeline" / "experiments" / "calibration.py")
    workers = [c for c in psutil.Process(driver.pid).children()  # not the resource tracker
               if "from multiprocessing.spawn import spawn_main" in " ".join(c.cmdline())]
    assert workers, "no worker process found"
    workers[0].kill()


@pytest.mark.slow
def test_a_worker_restarted_on_edited_code_is_retired_and_its_points_run_elsewhere(
        tmp_path, code_copy):
    """On the sweep's own cluster, a worker that the nanny restarts after an edit runs the new
    code: its batches go back to the other workers (nothing stored failed, nothing stamped
    wrongly) and the sweep retires it. Before, each of its batches was stored failed, so
    every worker restarted overnight turned its share of the sweep into failed rows."""
    before = _in_copy(code_copy, IMPORT_CALIBRATION + "print(code_id(exp))")
    results, n = tmp_path / "r", 2000
    driver, err = _sweep_with_a_worker_killed_after_an_edit(code_copy, results, 2, n)
    folder = results / "calibration"
    assert driver.returncode == 0, err
    assert "with other code than this sweep" in err and "It is retired" in err, err
    table = pd.read_parquet(folder)
    assert len(table) == n and table["x"].nunique() == n and table["task_id"].is_unique
    assert set(table["status"]) == {"ok"}
    assert set(table["code_id"]) == {before}  # every row computed by the code it names


@pytest.mark.slow
def test_a_sweep_whose_every_worker_runs_edited_code_ends_and_a_rerun_completes_it(
        tmp_path, code_copy):
    """The only worker is restarted after an edit: no worker runs the sweep's code any more,
    so the sweep ends (exit 3, saying why) with its rows kept and no point stored failed,
    instead of storing every remaining point failed. Run again, on the code now on disk, it
    computes the rest."""
    before = _in_copy(code_copy, IMPORT_CALIBRATION + "print(code_id(exp))")
    results, n = tmp_path / "r", 2000
    driver, err = _sweep_with_a_worker_killed_after_an_edit(code_copy, results, 1, n)
    folder = results / "calibration"
    assert driver.returncode == 3, err
    assert "no worker runs the code this sweep started with" in err, err
    assert "run the sweep again" in err
    kept = pd.read_parquet(folder)
    assert 0 < len(kept) < n and set(kept["status"]) == {"ok"}
    assert set(kept["code_id"]) == {before}

    after = _in_copy(code_copy, IMPORT_CALIBRATION + "print(code_id(exp))")
    rerun = _local_sweep(code_copy, results, n_workers=1, n=n)
    out, err = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, err
    final = pipeline.load(results, "calibration")
    assert len(final) == n and final["task_id"].is_unique and set(final["status"]) == {"ok"}
    assert set(final["code_id"]) == {before, after}
    assert (final["code_id"] == before).sum() == len(kept)


def _in_copy(code_copy, script: str) -> str:
    """Run ``script`` in a fresh interpreter that imports the copy; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(code_copy), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([PY, "-c", script], cwd=code_copy, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


IMPORT_CALIBRATION = """
import os, pathlib
from pipeline.experiments.base import get_experiment
from pipeline.engine.provenance import code_id, loaded_code_id
exp = get_experiment("calibration")
path = pathlib.Path(exp.run.__code__.co_filename)
"""


def test_the_loaded_code_id_follows_contents_not_file_times(code_copy):
    """Rewriting the same bytes (a copy, a checkout) is no change; an edit after the import
    is one; a file gone since is one too, and none of them raises."""
    same = _in_copy(code_copy, IMPORT_CALIBRATION + """
data = path.read_bytes(); path.write_bytes(data); os.utime(path, ns=(1, 1))
print(loaded_code_id(exp) == code_id(exp))""")
    assert same == "True"
    edited = _in_copy(code_copy, IMPORT_CALIBRATION + """
before = code_id(exp)
with open(path, "a") as fh: fh.write("# edited")
print(loaded_code_id(exp) == before + "+changed")""")
    assert edited == "True"
    gone = _in_copy(code_copy, IMPORT_CALIBRATION + """
path.unlink()
print(loaded_code_id(exp))""")
    assert gone == "unknown+changed"


def test_the_loaded_code_id_is_computed_once_however_many_threads_ask(code_copy):
    """A worker that joins starts hundreds of first batches at once: one computation, not
    one per thread (each parses and hashes the sources under the GIL)."""
    out = _in_copy(code_copy, IMPORT_CALIBRATION + """
import threading
from pipeline.engine import provenance
calls = []
real = provenance._loaded_code_id
def counted(module):
    calls.append(module)
    return real(module)
provenance._loaded_code_id = counted
start = threading.Barrier(64)
got = []
def ask():
    start.wait()
    got.append(loaded_code_id(exp))
threads = [threading.Thread(target=ask) for _ in range(64)]
for t in threads: t.start()
for t in threads: t.join()
print(len(calls), len(set(got)), got[0] == code_id(exp))""")
    assert out == "1 1 True"

