"""Real `dask scheduler` / `dask worker` processes and bounded waits, for the tests that
inject faults into them (kill, SIGSTOP) around a sweep run through the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
DASK = Path(PY).with_name("dask")


def wait_for(predicate, timeout, what, proc=None):
    """Poll ``predicate`` until true; fail after ``timeout`` s, or at once if ``proc`` ended."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended ({proc.returncode}) before {what}: "
                                 + "".join(proc.communicate()))
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def killed_at_exit(proc):
    """``proc``, killed and reaped if it still runs when the block ends: a test that fails or
    times out midway leaves no driver behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_scheduler_and_workers(tmp_path, procs: list, workers=1, extra=()):
    """A scheduler on 127.0.0.1 and ``workers`` one-thread workers (``extra``: their options),
    each in its own session (so that a test can freeze or kill its whole group). Appends the
    processes to ``procs`` (for :func:`stop_all`); returns (address, scheduler, [workers])."""
    sched_file = tmp_path / f"scheduler-{len(procs)}.json"
    sched = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    procs.append(sched)
    wait_for(sched_file.exists, 60, "the scheduler file")
    time.sleep(0.3)
    address = json.loads(sched_file.read_text())["address"]
    started = [subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1",
                                 "--no-dashboard", *extra], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
               for _ in range(workers)]
    procs.extend(started)
    return address, sched, started


def stop_all(procs: list) -> None:
    """Kill each process group (thawed first: a stopped group would not die before SIGCONT)."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)


def address_args(tmp_path, address, n=300):
    """A sweep of ``n`` 20 ms points (sleeps: the tests time faults, not CPU) on the cluster
    at ``address``, flushed every 10 rows so that part files appear as it runs."""
    return ["experiment=calibration", f"grid.x={{range:[0,{n}]}}", "params.work_us=20000",
            "params.work_mode=sleep",
            "batch_size=5", "flush_rows=10", "cluster=address", f"cluster.address={address}",
            f"results_dir={tmp_path}", "progress=false"]
