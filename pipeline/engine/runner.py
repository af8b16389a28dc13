"""Driver side: plan a sweep against the store, fan batches out on Dask, stream parts to disk.

The driver never holds more than the batches in flight: each finished batch is written as a
part file and released. Batches are sized adaptively (``batch_size="auto"``) so each Dask task
carries about ``target_batch_seconds`` of work, measured on the workers as the sweep runs.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pyarrow.compute as pc

from pipeline.engine.batch import TIMEOUT_TOPIC, failed_batch_table, run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.progress import Progress
from pipeline.store.parquet import PartWriter, contains, stored_ids

log = logging.getLogger("pipeline")
TARGET_BATCH_SECONDS = 0.2
LOST_ATTEMPTS = 3  # a single point lost with its worker is tried this often before it fails
MAX_BATCH = 50_000


@dataclass
class Plan:
    total: int
    pending: np.ndarray  # grid indices still to run, ascending
    done_ok: int
    done_failed: int  # stored as failed and not retried this time


PLAN_CHUNK = 65_536


def plan_sweep(grid: Grid, path, retry_failed: bool = False) -> Plan:
    """Which grid points still need running, given what the store already holds.

    A fresh store costs nothing; otherwise every point's id is hashed (in chunks) and looked
    up in the stored id prefixes by binary search.
    """
    ok_ids, failed_ids = stored_ids(path)
    if ok_ids.size == 0 and failed_ids.size == 0:
        return Plan(grid.total, np.arange(grid.total, dtype=np.int64), 0, 0)
    pending, done_ok, done_failed = [], 0, 0
    for start in range(0, grid.total, PLAN_CHUNK):
        stop = min(grid.total, start + PLAN_CHUNK)
        ids = np.fromiter((int(grid.task_id(i)[:16], 16) for i in range(start, stop)),
                          dtype=np.uint64, count=stop - start)
        is_ok = contains(ok_ids, ids)
        is_failed = contains(failed_ids, ids) & ~is_ok
        skip = is_ok | (is_failed & (not retry_failed))
        done_ok += int(is_ok.sum())
        done_failed += int((is_failed & (not retry_failed)).sum())
        pending.append(np.nonzero(~skip)[0].astype(np.int64) + start)
    return Plan(grid.total, np.concatenate(pending), done_ok, done_failed)


def count_done(grid: Grid, path) -> tuple[int, int]:
    """(tasks stored ok, tasks stored only failed) among the grid's points, found by matching
    the stored parameter values against the grid's axes: linear in what is stored, not in
    the grid, so a dry run of 10^7 points answers in seconds even on a full store.
    Agrees with :func:`plan_sweep`, which hashes every point (tested)."""
    import pandas as pd

    from pipeline.engine.grid import _fragment
    from pipeline.store.parquet import part_files, read_table

    if not part_files(path):
        return 0, 0
    table = read_table(path)
    names = [p.name for p in grid.experiment.params]
    if any(n not in table.column_names for n in names):
        table = table.filter(pc.equal(table["experiment_version"], -1))  # an older schema
    df = table.select(["task_id", "status", "experiment_version",
                       *[n for n in names if n in table.column_names]]).to_pandas()
    mask = (df["experiment_version"] == grid.version).to_numpy().copy()
    list_typed = {p.name for p in grid.experiment.params if p.type in ("int_list", "float_list")}

    def canon(col):
        return df[col].map(lambda v: _fragment(list(v)) if v is not None else None)

    for name, value in grid.fixed.items():
        if name in list_typed:
            mask &= (canon(name) == _fragment(value)).to_numpy()
        elif value is None:
            mask &= df[name].isna().to_numpy()
        else:
            mask &= (df[name] == value).fillna(False).to_numpy(dtype=bool)
    for axis in grid.axes:
        if axis.single:
            name, values = axis.names[0], axis.values
            if name in list_typed:
                mask &= canon(name).isin({_fragment(v) for v in values}).to_numpy()
            elif isinstance(values, range):
                v = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
                lo, hi = min(values[0], values[-1]), max(values[0], values[-1])
                on_step = np.mod(v - values[0], abs(values.step)) == 0
                mask &= (v >= lo) & (v <= hi) & on_step
            else:
                mask &= df[name].isin(list(np.asarray(values).tolist())).to_numpy()
        else:
            keys = pd.DataFrame([axis.at(d) for d in range(len(axis))], columns=list(axis.names))
            keys = keys.map(lambda v: _fragment(v)).drop_duplicates()
            stored = df[list(axis.names)].map(lambda v: _fragment(list(v)) if isinstance(v, np.ndarray) else _fragment(v))
            merged = stored.merge(keys.assign(_hit=True), how="left", on=list(axis.names))
            mask &= merged["_hit"].fillna(False).to_numpy(dtype=bool)
    hits = df[mask]
    ok_ids = set(hits.loc[hits["status"] == "ok", "task_id"])
    failed_ids = set(hits.loc[hits["status"] == "failed", "task_id"]) - ok_ids
    return len(ok_ids), len(failed_ids)


@dataclass
class SweepStats:
    ran: int = 0
    ok: int = 0
    failed: int = 0
    rows: int = 0
    parts: int = 0
    batches: int = 0
    elapsed_s: float = 0.0
    first_errors: list = field(default_factory=list)


def _warm_up(grid: Grid) -> tuple[int, str]:
    """Runs on each worker before the sweep: imports the experiment and builds the grid (so
    the first timed batch does not pay for it) and reports what the worker would compute."""
    from pipeline.engine.provenance import code_id

    return grid.version, grid.canonical(0), code_id(grid.experiment)


class WorkerMismatch(RuntimeError):
    pass


def check_workers(client, grid: Grid) -> None:
    """Every connected worker must run the same experiment code as the driver: the same
    version and the same canonical parameters, hence the same task ids, and the same source
    of the experiment and its kernels (the code_id stamped on every row)."""
    expected = tuple(_warm_up(grid))
    for worker, got in client.run(_warm_up, grid).items():
        if tuple(got) != expected:
            raise WorkerMismatch(
                f"worker {worker} computes experiment '{grid.name}' differently (version "
                f"{got[0]} vs {expected[0]} here, code_id {got[2] if len(got) > 2 else None} vs "
                f"{expected[2]}, or other defaults): update the code there")


def _total_threads(client) -> int:
    try:
        threads = sum(client.nthreads().values())
    except Exception:
        threads = 1
    # 15a: an adaptive batch cluster grows to the work in flight: plan for all its threads
    planned = getattr(getattr(client, "cluster", None), "pipeline_max_threads", 0)
    return max(1, threads, planned)




_NOT_YET = object()
RESULT_WAIT_S = 2.0


def _fetch(fut):
    """(result, None) for a finished batch, (None, exception) for one lost on the cluster, or
    (_NOT_YET, None) if its result is not back within RESULT_WAIT_S: a result whose worker
    died after finishing is recomputed, which must not block the loop (15b: the unbounded
    fut.result() here hung the driver when no worker was left to recompute it)."""
    from distributed import TimeoutError as DaskTimeout

    if fut.status == "finished":
        try:
            result = fut.result(timeout=RESULT_WAIT_S)
            if isinstance(result, tuple) and len(result) == 2:
                return result, None
            # seen when its worker died during the fetch: run it again, as a lost batch
            return None, RuntimeError(f"no result came back for {fut.key} (got {result!r})")
        except (TimeoutError, DaskTimeout):
            return _NOT_YET, None
        except Exception as exc:  # recomputing it killed its workers too
            return None, exc
    if fut.status == "error":
        try:
            exc = fut.exception(timeout=RESULT_WAIT_S)
        except Exception as err:
            exc = err
        return None, exc or RuntimeError(f"{fut.key} failed on the cluster")
    if fut.status == "cancelled":
        return None, RuntimeError(f"{fut.key} was cancelled on the cluster")
    return _NOT_YET, None  # pending again: its result was lost with a worker and is recomputed


def run_sweep(grid: Grid, client, writer: PartWriter, pending: np.ndarray, *,
              batch_size: int | str = "auto", progress: bool = True,
              target_batch_seconds: float = TARGET_BATCH_SECONDS,
              checks: Sequence[Callable[[], None]] = (), task_timeout: float | None = None,
              bar: Progress | None = None) -> SweepStats:
    """Run ``pending`` grid indices on ``client``; each finished batch becomes a part file.

    ``checks`` are called at least once a second whatever the cluster does; one that raises
    ends the sweep (finished batches are already written). ``task_timeout``: seconds per point
    (see ``batch.run_batch``); a point over it is stored as failed and not retried. ``bar``:
    a ready-made :class:`Progress` (with its heartbeat), else one is made here."""
    from distributed import as_completed

    from pipeline.engine.watchdog import TimeoutEvents, completed

    stats = SweepStats()
    todo = int(pending.size)
    bar = bar or Progress(grid.name, todo, progress)
    if todo == 0:
        bar.update(stats, force=True)
        return stats
    fixed = None if batch_size in (None, "auto") else int(batch_size)
    t_start = time.perf_counter()
    check_workers(client, grid)
    if not client.nthreads():
        log.info("no workers yet: batches wait in the scheduler until workers join")
    per_task = None  # seconds of worker time per task, exponentially weighted (forgets warm-up)
    largest = 1
    cursor = 0
    in_flight: dict = {}
    lost_attempts: dict[int, int] = {}  # grid index -> times lost alone with a dead worker
    # Single points lost with a worker are retried one at a time: retried together, a point
    # that kills its worker would take the innocent ones queued beside it down every time.
    suspects: deque = deque()
    suspect_key = None
    queue = as_completed()
    futures: dict = {}  # key -> future in flight (to cancel a batch whose point timed out)
    timed_out: dict[int, str] = {}  # grid index -> timeout error, not yet stored
    events = TimeoutEvents(client, TIMEOUT_TOPIC) if task_timeout else None

    def next_size(threads: int) -> int:
        nonlocal largest
        if fixed is not None:
            return fixed
        if per_task is None:
            return 1  # first wave: measure before committing work to a batch
        ideal = max(1, int(target_batch_seconds / max(per_task, 1e-7)))
        size = min(ideal, 8 * largest, MAX_BATCH)  # grow fast, but not on one lucky sample
        remaining = todo - cursor
        if remaining < 2 * threads * size:  # the tail: spread it over every worker...
            floor = max(1, ideal // 4)  # ...without batches too small to be worth a task
            size = max(floor, -(-remaining // (2 * threads)))
        largest = max(largest, size)
        return size

    def submit(chunk) -> str | None:
        # The grid pickles to its small spec; workers rebuild it once and cache it.
        # No Dask retries: run_batch turns every task exception into a row, so a Dask-level
        # failure is a dead worker, which the scheduler already retries (allowed-failures).
        if timed_out:  # 15b: a point known to hang is stored as failed, never re-run
            hung = [int(i) for i in chunk if int(i) in timed_out]
            if hung:
                store(failed_batch_table(grid, hung, timed_out[hung[0]]), len(hung))
                for i in hung:
                    timed_out.pop(i)
                chunk = np.array([i for i in chunk if int(i) not in set(hung)], dtype=np.int64)
                if not len(chunk):
                    return None
        fut = client.submit(run_batch, grid, chunk, pure=False,
                            **({"task_timeout": float(task_timeout)} if task_timeout else {}))
        in_flight[fut.key] = chunk
        futures[fut.key] = fut
        queue.add(fut)
        return fut.key

    def store(table, n_tasks: int) -> None:
        writer.write(table)
        failed_mask = pc.equal(table["status"], "failed")
        n_failed = len(pc.unique(table.filter(failed_mask)["task_id"]))
        if n_failed and len(stats.first_errors) < 3:
            stats.first_errors.append(table.filter(failed_mask)["error"][0].as_py())
        stats.ran += n_tasks
        stats.failed += n_failed
        stats.ok += n_tasks - n_failed
        stats.rows += table.num_rows
        stats.batches += 1
        stats.parts = writer.seq

    def handle_timeouts() -> None:
        # 15b: a worker reported a point over task_timeout and is exiting. Its batch is
        # cancelled and resubmitted without that point; the point is stored as failed.
        nonlocal suspect_key
        for event in events.drain() if events is not None else ():
            index = int(event["index"])
            error = (f"TaskTimeout: point ran longer than task_timeout={event['timeout_s']:g} s "
                     f"and was stopped (worker {event.get('worker')} recycled)")
            key = event.get("key")
            log.warning("task %s (grid index %d) timed out after %g s; stored as failed",
                        event.get("task_id"), index, event["timeout_s"])
            if index in timed_out:
                continue
            timed_out[index] = error
            if key in in_flight and index in set(int(i) for i in in_flight[key]):
                chunk = in_flight.pop(key)
                fut = futures.pop(key)
                if key == suspect_key:
                    suspect_key = None
                client.cancel(fut)
                submit(chunk)  # without the hung point: submit() filters it out

    def tick() -> None:
        handle_timeouts()
        bar.update(stats)

    def submit_more() -> None:
        nonlocal cursor, suspect_key
        if suspect_key is None and suspects:
            suspect_key = submit(suspects.popleft())
        threads = _total_threads(client)
        while cursor < todo and len(in_flight) < 2 * threads + 2:
            size = next_size(threads)
            chunk = pending[cursor:cursor + size]
            cursor += len(chunk)
            submit(chunk)

    submit_more()
    # 15b: wake every second (checks, heartbeat, timeouts) instead of blocking in `for fut in queue`
    try:
        for fut in completed(queue, checks, tick):
            if fut.key not in in_flight:  # cancelled after its point timed out; already resubmitted
                continue
            result, lost = _fetch(fut)
            if result is _NOT_YET:  # its worker died before we fetched it: being recomputed
                queue.add(fut)
                continue
            chunk = in_flight.pop(fut.key)
            futures.pop(fut.key, None)
            if fut.key == suspect_key:
                suspect_key = None
            if lost is None:
                table, seconds = result
                sample = seconds / len(chunk)
                # A cheaper sample is believed at once (warm-up is over); a dearer one is averaged.
                per_task = sample if per_task is None or sample < per_task else 0.5 * (per_task + sample)
            elif len(chunk) > 1:
                # Lost with its workers (a crash, the OOM killer): bisect, so that only the point
                # that kills workers ends up failed, not the 10^4 innocent ones batched with it.
                fut.release()
                half = len(chunk) // 2
                submit(chunk[:half])
                submit(chunk[half:])
                submit_more()
                continue
            else:
                index = int(chunk[0])
                lost_attempts[index] = lost_attempts.get(index, 0) + 1
                if lost_attempts[index] < LOST_ATTEMPTS:
                    # Tasks merely queued on a dying worker die with it: give the point another go
                    fut.release()
                    suspects.append(chunk)
                    submit_more()
                    continue
                error = f"lost on the cluster {LOST_ATTEMPTS} times: {type(lost).__name__}: {lost}"
                table = failed_batch_table(grid, chunk, error)
            fut.release()
            store(table, len(chunk))
            del table, result
            submit_more()
            bar.update(stats)
    except Exception:
        # 15b: a failure in the loop (the client closed under us, say) is reported by the
        # check that names its cause (SchedulerLost) when one fires
        for check in checks:
            check()
        raise
    if events is not None:
        events.close()
    stats.elapsed_s = time.perf_counter() - t_start
    bar.update(stats, force=True)
    return stats
