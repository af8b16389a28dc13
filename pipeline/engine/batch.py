"""Run a batch of grid points: on a worker, :func:`run_points` (what varies per point, a
:class:`PointsRun`); on the driver, ``batch_table.points_table`` (the typed Arrow table of its
rows). :func:`run_batch` does both, where one process does the whole.

A batch is (grid, indices). Every point becomes one or more rows; an exception inside the
experiment becomes a single ``status=failed`` row carrying the error text, so one bad point
never loses the batch.

At the end of a sweep the driver may ask a batch to stop early (:func:`request_stop`): it
returns the rows of the points it has run, the first ones of its indices, and the driver
re-splits the rest over the threads that have gone idle (``runner.py``).

With ``task_timeout`` set, a watcher thread per worker process times every point; a point over
its limit cannot be interrupted safely (it may be inside C code), so the watcher reports it on
the event topic ``TIMEOUT_TOPIC`` and ends the worker process (``os._exit``): the nanny starts a
fresh one and the driver stores the point as failed (see ``runner.py``).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
import traceback
from typing import NamedTuple, Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine.batch_table import points_table
from pipeline.engine.grid import Grid
from pipeline.engine.log_filters import add_filter_once
from pipeline.engine.provenance import loaded_code_id
from pipeline.engine.run_returns import RunReturnError, as_rows
from pipeline.engine.task_ids import TASK_ID_BYTES, digests_of, seeds_of_digests, task_id_of_digest


STRIP = 32  # points whose bookkeeping is done in one block (see run_batch)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, RunReturnError):
        return f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" [{os.path.basename(tb[-1].filename)}:{tb[-1].lineno} in {tb[-1].name}]" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class _PointFailed:
    """A point's exception, caught in the loop and turned into a failed row after it."""

    __slots__ = ("error",)

    def __init__(self, error: str):
        self.error = error


TIMEOUT_TOPIC = "pipeline-task-timeout"
TIMEOUT_EXIT_CODE = 71
EVENT_FLUSH_SECONDS = 1.0  # the event reaches the scheduler before the process ends
EXIT_AFTER_REPLY_S = 0.2  # end_for_hung_point: its reply to the driver gets out first


class _PointClock:
    """Deadlines of the points running in this process (one per thread), checked by one daemon
    thread; arming and disarming are two dict operations, cheap even for microsecond points."""

    def __init__(self):
        # thread id -> (deadline, report, the Dask worker)
        self.running: dict[int, tuple[float, dict, object]] = {}
        self.reported: set[tuple[int, float]] = set()  # (thread, deadline): points reported
        self.thread = threading.Thread(target=self._watch, name="pipeline-task-timeout",
                                       daemon=True)
        self.thread.start()

    def arm(self, deadline: float, report: dict, worker) -> None:
        """``deadline``: on the points' own clock (perf_counter), the start plus the limit, so
        that a point reported here is one whose measured time is over the limit."""
        self.running[threading.get_ident()] = (deadline, report, worker)

    def disarm(self) -> None:
        self.running.pop(threading.get_ident(), None)

    def _watch(self) -> None:
        while not self._report_overdue():
            time.sleep(0.1)
        try:  # Sibling threads' points that fall due while the first reports travel are
            # reported too: each one not reported would be rerun, hang again and cost one
            # more restart.
            time.sleep(EVENT_FLUSH_SECONDS)
            if self._report_overdue():
                time.sleep(EVENT_FLUSH_SECONDS)
        finally:  # whatever a report raised (a closing event loop): the hung points must end
            os._exit(TIMEOUT_EXIT_CODE)

    def _report_overdue(self) -> bool:
        """Report every point past its deadline that is not reported yet; whether any was."""
        now = time.perf_counter()
        overdue = [((ident, deadline), report, worker)
                   for ident, (deadline, report, worker) in list(self.running.items())
                   if now > deadline and (ident, deadline) not in self.reported]
        for point, report, worker in overdue:
            self.reported.add(point)
            try:
                worker.log_event(TIMEOUT_TOPIC, report)
            except Exception:  # a closing worker: its end is what matters now
                pass
        return bool(overdue)


async def end_for_hung_point(dask_worker) -> str:
    """Run on a worker by the driver (``Client.run``) whose point was stored as hung, with no
    task_timeout set: the process ends just after replying, as after a task_timeout, and its
    nanny starts a fresh one (a worker without a nanny leaves). A restart through the nanny
    asks the process to close, which waits for its threads, the hung one too: in a SLURM job
    the worker had not come back after a minute, and the sweep stopped. Its other batches,
    lost with it, run again as they were (``HungPoints.recycled_loss``)."""
    import asyncio

    asyncio.get_running_loop().call_later(EXIT_AFTER_REPLY_S, os._exit, TIMEOUT_EXIT_CODE)
    return str(dask_worker.address)


_CLOCK: _PointClock | None = None
_CLOCK_LOCK = threading.Lock()


def _point_clock() -> _PointClock:
    global _CLOCK
    with _CLOCK_LOCK:
        if _CLOCK is None:
            _CLOCK = _PointClock()
        return _CLOCK


# Batches asked to stop after their current point, by name (their Dask key). The generation
# changes with every request, so the loop around a point compares one integer, not a set.
# The batches running in this process: (stop name, id) -> (indices, started, finished), the
# point clocks the loop fills in place (perf_counter; 0.0 until set). hung_points() reads them.
RUNNING: dict = {}


def hung_points(threshold_s: float) -> list[tuple[str | None, int, float]]:
    """(batch key, grid index, seconds) of each point of this process that has run for over
    ``threshold_s`` (run on the workers by the driver's watchdog: no task finishing may be
    one point that never returns, with no ``task_timeout`` set to bound it)."""
    now, out = time.perf_counter(), []
    for (name, _), (indices, started, finished) in list(RUNNING.items()):
        for i in range(len(started)):
            if started[i] and not finished[i]:  # the one running now
                if now - started[i] > threshold_s:
                    out.append((name, int(indices[i]), now - started[i]))
                break
    return out


_STOP_REQUESTED: set[str] = set()
_STOP_GENERATION = [0]
_STOP_REMEMBERED = 100_000  # names kept at most (a request may come after its batch ended)


def request_stop(names) -> None:
    """Ask the batches ``names`` to stop after the point each is running (run on every worker
    by the driver, ``Client.run``). A batch not started yet runs one point, then stops."""
    if len(_STOP_REQUESTED) > _STOP_REMEMBERED:
        _STOP_REQUESTED.clear()
    _STOP_REQUESTED.update(str(name) for name in names)
    _STOP_GENERATION[0] += 1


def _current_worker():
    """The Dask worker running this task, or None (a direct call). Looked up here, in the
    task's thread: ``get_worker`` is a context variable the watcher thread cannot see."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


class _RequesterGoneFilter(logging.Filter):
    """Drops a Dask worker's traceback for a result transfer whose requester closed the
    connection mid-way (the driver interrupted by Ctrl-C while fetching results): the worker
    handles it, the driver has stopped asking, and on the user's terminal it read as a crash
    of the shutdown. Other transfer failures are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        from distributed.comm.core import CommClosedError

        exc = record.exc_info[1] if record.exc_info else None
        return not (str(record.msg).startswith("failed during get data")
                    and isinstance(exc, CommClosedError))


def _quiet_requester_gone() -> None:
    add_filter_once("distributed.worker", _RequesterGoneFilter)


_SETTLED = [False]


def settle_worker_process(grid: Grid, every_sweep: bool = False) -> str:
    """Prepare a process that runs batches, after the experiment is imported: at the
    driver's warm-up (``every_sweep``: a long-lived worker meets one sweep after another),
    and at the first batch of a worker that joins or restarts later. Returns
    :func:`provenance.loaded_code_id`.

    It freezes what the process holds (modules, the grid) out of the garbage collector's
    reach: a full collection walks every tracked object under the GIL, and on a worker with
    hundreds of threads each pass stalled all of them (BENCHMARKS.md, issue 14); and it
    quiets the worker's log about results whose requester has gone."""
    import gc

    code = loaded_code_id(grid.experiment)
    if every_sweep or not _SETTLED[0]:
        _SETTLED[0] = True
        _quiet_requester_gone()
        gc.collect()
        gc.freeze()
    return code


class PointsRun(NamedTuple):
    """What a batch sends back to the driver: only what differs from point to point. The
    driver builds the typed table (:func:`points_table`): the parameters, constant columns and
    ids follow from the grid and the indices it submitted. A table built on the worker cost
    its Arrow calls there, each waiting to win the GIL back from the sibling threads, and
    crossed the network at about 190 bytes a row, most of it constant (issue 14)."""

    done: int  # points run: the first ``done`` of the batch's indices (fewer if asked to stop)
    ids: bytes  # each point's digest prefix, TASK_ID_BYTES each: its task id and its seed
    outputs: dict  # output column -> values, one per row
    counts: list | None  # rows per point (None: one each)
    statuses: list | None  # per point (None: all "ok")
    errors: list | None  # per point (None: no error)
    started_us: np.ndarray  # int64, UTC microseconds, per point
    elapsed_s: np.ndarray  # float64, per point
    worker: str
    seconds: float  # the batch's wall time
    code_id: str = ""  # provenance.loaded_code_id where it ran: the code that ran the points


def run_batch(grid: Grid, indices: Sequence[int], task_timeout: float | None = None,
              stop_name: str | None = None) -> tuple[pa.Table, float]:
    """Run the points ``indices`` of ``grid``; return (rows as a table, wall seconds).
    :func:`run_points`, then :func:`points_table` (the driver splits the two)."""
    run = run_points(grid, indices, task_timeout, stop_name)
    return points_table(grid, indices, run), run.seconds


def run_points(grid: Grid, indices: Sequence[int], task_timeout: float | None = None,
               stop_name: str | None = None) -> PointsRun:
    """Run the points ``indices`` of ``grid`` (the worker's half of :func:`run_batch`).

    ``task_timeout`` (seconds): a point still running after that long is reported on
    ``TIMEOUT_TOPIC`` with its grid index and this batch's Dask key, and the worker process
    exits (see the module docstring).

    ``stop_name``: the name :func:`request_stop` knows this batch by (on a Dask worker, by
    default, its task key). Once asked, the batch stops after its current point and returns
    the rows of the points run so far: the first ``k >= 1`` of ``indices``."""
    t_batch = time.perf_counter()
    dask_worker = _current_worker()
    if stop_name is None and dask_worker is not None:
        stop_name = str(dask_worker.get_current_task())
    worker = dask_worker if task_timeout else None  # the worker whose points are timed
    # Only on a Dask worker: ending the process is the nanny's cue, never a caller's.
    clock = _point_clock() if worker is not None else None
    key = str(worker.get_current_task()) if worker is not None else None
    where = str(worker.address) if worker is not None else None
    stop_generation = _STOP_GENERATION
    # asked before it started: the first point's check finds the request
    seen_generation = -1 if stop_name in _STOP_REQUESTED else stop_generation[0]
    exp = grid.experiment
    run = exp.run
    if dask_worker is not None and not _SETTLED[0]:  # joined after the warm-up
        settle_worker_process(grid)
    code = loaded_code_id(exp)
    params, canonical = grid.batch_canonical(indices)
    names, list_params = grid.param_names, grid.list_params
    n = len(indices)
    # Every instruction a point costs is paid several times over when hundreds of threads sleep
    # on a few cores: the caches are cold at each wake-up (bench_point_overhead). So the loop
    # around a point does nothing but time it; digests, seeds and point dicts are made a strip
    # of points at a time (over a whole batch at once, that would hold the GIL the sibling
    # threads wait on for milliseconds), and the outputs are gathered in bulk at the end.
    # Each point is the grid's fixed values with its own axis values written over them.
    template = {name: grid.fixed.get(name) for name in names}
    varying = [(name, params[name]) for name in names if name not in grid.fixed]
    digests: list[bytes] = []
    seeds: list[int] = []
    results: list = [None] * n
    started, finished = [0.0] * n, [0.0] * n
    clock_t = time.perf_counter
    wall0_us, perf0 = time.time_ns() // 1000, clock_t()

    done = n  # points run: fewer if the driver asks the batch to stop
    running = (stop_name, id(started))
    RUNNING[running] = (indices, started, finished)  # once a batch: for hung_points()
    try:
        for first in range(0, n, STRIP):
            if done < n:
                break
            last = min(n, first + STRIP)
            strip = digests_of(canonical(first, last))
            digests += strip
            seeds += seeds_of_digests(strip)
            points = []
            for i in range(first, last):
                point = template.copy()
                for name, column in varying:
                    point[name] = column[i]
                for name in list_params:  # a kernel may mutate its input: each point gets its own
                    point[name] = list(point[name])
                points.append(point)
            if clock is None:
                for i, point in enumerate(points, first):
                    started[i] = clock_t()
                    try:
                        results[i] = run(point, seeds[i])
                    except Exception as exc:  # a failing point is data, not a crash
                        results[i] = _PointFailed(_error_text(exc))
                    finished[i] = clock_t()
                    if stop_generation[0] != seen_generation:
                        seen_generation = stop_generation[0]
                        if stop_name in _STOP_REQUESTED:
                            done = i + 1
                            break
                continue
            for i, point in enumerate(points, first):
                started[i] = clock_t()
                clock.arm(started[i] + task_timeout,
                          {"key": key, "index": int(indices[i]),
                           "task_id": task_id_of_digest(digests[i]),
                           "timeout_s": task_timeout, "worker": where}, worker)
                try:
                    results[i] = run(point, seeds[i])
                except Exception as exc:
                    results[i] = _PointFailed(_error_text(exc))
                finally:  # also on SystemExit: an armed clock would end the process later
                    # disarmed first: a point the watcher reports is then one whose finish,
                    # stamped after, is past its deadline, and so failed below, never kept
                    clock.disarm()
                    finished[i] = clock_t()
                if stop_generation[0] != seen_generation:
                    seen_generation = stop_generation[0]
                    if stop_name in _STOP_REQUESTED:
                        done = i + 1
                        break
    finally:
        RUNNING.pop(running, None)

    if done < n:  # stopped early: the rows are those of the first `done` points
        _STOP_REQUESTED.discard(stop_name)
        n = done
        del results[n:], started[n:], finished[n:], digests[n:]

    if task_timeout:
        _fail_points_over(task_timeout, results, started, finished)
    name = getattr(run, "__name__", "")
    outputs, counts, statuses, errors = _outputs(
        results, list(exp.columns), f"{name if name.isidentifier() else 'run'}()")
    # wall-clock stamps from one reading plus monotonic offsets, in numpy
    started_s = np.array(started)
    elapsed = np.array(finished) - started_s
    started_us = wall0_us + ((started_s - perf0) * 1e6).astype(np.int64)
    return PointsRun(n, b"".join([d[:TASK_ID_BYTES] for d in digests]), outputs, counts,
                     statuses, errors, started_us, elapsed, _worker_name(),
                     time.perf_counter() - t_batch, code)


def _fail_points_over(limit_s: float, results: list, started: list, finished: list) -> None:
    """A point that ran longer than ``task_timeout`` is failed, whether the watcher stopped
    it or it returned first: one that returned a little late was otherwise kept or failed by
    where the watcher's poll fell (17 of 20 kept in a sweep of 0.2 s points at a 0.1 s
    limit, 4 of them with a warning). Its own error, if it raised, is kept."""
    for i, (t0, t1) in enumerate(zip(started, finished)):
        if t1 - t0 > limit_s and type(results[i]) is not _PointFailed:
            results[i] = _PointFailed(
                f"TaskTimeout: point ran longer than task_timeout={limit_s:g} s "
                f"(it returned after {t1 - t0:.3g} s; its result is not kept)")


def _outputs(results: list, out_columns: list[str], who: str = "run()"):
    """The kernels' returns as output columns, and per point its row count, status and error
    (None for each of the three when every point gave one good row: the common case, checked
    and gathered in bulk). ``who``: the kernel's name, for the errors (``run_returns.as_rows``)."""
    n = len(results)
    allowed = set(out_columns)
    if (not n or set(map(type, results)) == {dict}) and allowed.issuperset(set().union(*results)):
        return ({name: list(map(dict.get, results, itertools.repeat(name, n)))
                 for name in out_columns}, None, None, None)
    outputs: dict[str, list] = {name: [] for name in out_columns}
    out_items = list(outputs.items())
    statuses, errors, counts = ["ok"] * n, [None] * n, [1] * n
    for i, out in enumerate(results):
        if type(out) is _PointFailed:
            rows = [{}]
            statuses[i], errors[i] = "failed", out.error
        else:
            try:
                rows = as_rows(out, out_columns, who)
                for row in rows:
                    if not allowed.issuperset(row):
                        raise KeyError(
                            f"undeclared output column(s) {sorted(set(row) - allowed)}; "
                            f"declared: {', '.join(out_columns)}")
            except Exception as exc:
                rows = [{}]
                statuses[i], errors[i] = "failed", _error_text(exc)
        counts[i] = len(rows)
        for row in rows:
            for name, column in out_items:
                column.append(row.get(name))
    return outputs, counts, statuses, errors


