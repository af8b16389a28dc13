"""Driver side: plan a sweep against the store, fan batches out on Dask, stream parts to disk.

The driver holds the batches in flight and the writer's buffer, never the grid. The loop wakes
at least once a second whatever the cluster does, runs the caller's ``checks``, flushes aged
buffers, takes every finished batch and submits new ones; part files are written by the
writer's background thread. Batches are sized by :class:`pipeline.engine.planning.BatchSizer`
(cost model along the grid, a cap on the cluster's task rate, a bound on each batch's duration).
"""

from __future__ import annotations

import itertools
import logging
import queue
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine.batch import TIMEOUT_TOPIC, failed_batch_table, run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.planning import MAX_BATCH, BatchSizer, PendingPlan  # noqa: F401
from pipeline.engine.progress import Progress
from pipeline.engine.watchdog import shutdown_started
from pipeline.store.parquet import PartWriter, stored_ids

log = logging.getLogger("pipeline")
TARGET_BATCH_SECONDS = 0.2  # the per-task floor: a batch carries at least this much work
MAX_TASKS_PER_SECOND = 50.0  # Dask tasks per second for the whole cluster (BENCHMARKS.md)
MAX_BATCH_SECONDS = 60.0  # bound on a batch's predicted duration
LOST_SPLIT = 8  # a batch lost with its worker is resubmitted as this many pieces,
LOST_SINGLES = 64  # or as single points when it holds at most this many
LOST_ATTEMPTS = 2  # a single point lost with its workers is tried this often before it fails
WAKE_SECONDS = 1.0  # the driver loop wakes at least this often, whatever the cluster does
GATHER_TIMEOUT_S = 30.0  # bound on fetching one wake's finished results in one go


@dataclass
class Plan:
    total: int
    pending: PendingPlan  # grid indices still to run, handed out lazily in ascending order
    done_ok: int
    done_failed: int  # stored as failed and not retried this time


def plan_sweep(grid: Grid, path, retry_failed: bool = False) -> Plan:
    """Which grid points still need running, given what the store already holds.

    Nothing is materialised per point: a fresh store plans a range; on a non-empty store the
    counts come from matching stored parameters (:func:`count_done`, linear in what is
    stored), and the pending points are found lazily, chunk by chunk, by hashing only the
    chunk about to be submitted. Driver memory is bounded by the store's id set and one chunk.
    """
    ok_ids, failed_ids = stored_ids(path)
    if ok_ids.size == 0 and failed_ids.size == 0:
        return Plan(grid.total, PendingPlan(grid, grid.total), 0, 0)
    done_ok, done_failed = count_done(grid, path)
    skipped = 0 if retry_failed else done_failed
    pending = PendingPlan(grid, grid.total, ok_ids=ok_ids, failed_ids=failed_ids,
                          retry_failed=retry_failed, to_run=grid.total - done_ok - skipped,
                          done_ok=done_ok, done_failed=skipped)
    return Plan(grid.total, pending, done_ok, skipped)


def count_done(grid: Grid, path) -> tuple[int, int]:
    """(tasks stored ok, tasks stored only failed) among the grid's points, found by matching
    the stored parameter values against the grid's axes: linear in what is stored, not in
    the grid, so a dry run of 10^7 points answers in seconds even on a full store.
    Agrees with :func:`plan_sweep`, which hashes every point (tested)."""
    import pandas as pd

    from pipeline.engine.grid import _fragment
    from pipeline.store.parquet import part_files

    files = part_files(path)
    if not files:
        return 0, 0
    names = [p.name for p in grid.experiment.params]
    # only the columns matched here: a resume of a large store must not load its results
    import pyarrow.parquet as pq

    from pipeline.store.integrity import BadPartFile, read_parts

    schemas = []
    for f in files:
        try:
            schemas.append(pq.read_schema(f))
        except Exception as exc:  # a damaged part: name it and the repair command (exit 4)
            raise BadPartFile(f, f"{type(exc).__name__}: {exc}") from None
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    wanted = [c for c in ("task_id", "status", "experiment_version", *names) if c in schema.names]
    table = read_parts(files, columns=wanted, schema=schema)
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
    warmup_s: float = 0.0
    first_errors: list = field(default_factory=list)


def _warm_up(grid: Grid) -> tuple[int, str]:
    """Runs on each worker before the sweep: imports the experiment and builds the grid (so
    the first timed batch does not pay for it) and reports what the worker would compute.

    Then it freezes what the process holds (modules, the grid) out of the garbage collector's
    reach: a full collection walks every tracked object under the GIL, and on a worker with
    hundreds of threads each pass stalled all of them (BENCHMARKS.md, issue 14)."""
    import gc

    answer = grid.version, grid.canonical(0)
    gc.collect()
    gc.freeze()
    return answer


class WorkerMismatch(RuntimeError):
    pass


def check_workers(client, grid: Grid) -> None:
    """Every connected worker must run the same experiment code as the driver: the same
    version and the same canonical parameters, hence the same task ids."""
    expected = (grid.version, grid.canonical(0))
    for worker, got in client.run(_warm_up, grid).items():
        if tuple(got) != expected:
            raise WorkerMismatch(
                f"worker {worker} computes experiment '{grid.name}' differently (version "
                f"{got[0]} vs {expected[0]} here, or other defaults): update the code there")


def _total_threads(client) -> int:
    try:
        threads = sum(client.nthreads().values())
    except Exception:
        threads = 1
    # 15a: an adaptive batch cluster grows to the work in flight: plan for all its threads
    planned = getattr(getattr(client, "cluster", None), "pipeline_max_threads", 0)
    return max(1, threads, planned)


def map_batches(client, grid: Grid, chunks: list, priority: int, kwargs: dict) -> list:
    """``client.map(run_batch, ...)`` over ``chunks``, each task marked a data producer.

    Dask queues a task on the scheduler, to go to the first thread that frees, only if it
    is root-ish: by default only if more than 2 x threads tasks of its kind are in the
    cluster. The driver keeps about 2 x threads in flight, so batches went straight to a
    worker picked by Dask's estimate of its load (one average duration for all batches) and
    waited there for its threads, out of the order the sizer's waves are cut in: on 1,024
    threads the last wave's smallest batches started 25 s late (issue 14). Marked, every
    batch waits in one queue, in the order given (``priority``: after earlier calls).
    This is ``Client.map`` with the mark added, on Dask's internals; where they differ
    (another Dask version), a plain ``client.map`` (test_engine_scale checks the order and
    the queueing on the installed Dask)."""
    if _ProducerMap is not None:
        try:
            from distributed.spans import SpanMetadata

            expr = _ProducerMap(run_batch, [[grid] * len(chunks), chunks], key="run_batch",
                                pure=False, annotations={}, kwargs=kwargs)
            keys = list(expr.keys)
            futures = client._graph_to_futures(
                expr, keys, internal_priority=dict(zip(keys, range(len(keys)))),
                user_priority=priority, span_metadata=SpanMetadata(
                    collections=[{"type": "Future"}]))
            return [futures[key] for key in keys]
        except (AttributeError, TypeError, ImportError) as exc:  # other Dask internals
            log.debug("batches submitted with client.map: %s", exc)
    return client.map(run_batch, [grid] * len(chunks), chunks, pure=False, priority=priority,
                      **kwargs)


try:
    from dask._task_spec import Task as _Task
    from distributed.client import _MapExpr

    class _ProducerMap(_MapExpr):
        def _layer(self):
            return {key: _Task(key, task.func, *task.args, _data_producer=True, **task.kwargs)
                    if isinstance(task, _Task) else task for key, task in super()._layer().items()}
except ImportError:
    _ProducerMap = None


LONG_BATCH_SECONDS = 5.0  # batches this long (the floor: threads / cap) are queued strictly


def _queue_for_long_batches(client, floor_seconds: float) -> None:
    """Where batches are long, a worker is sent one only when one of its threads is free.

    Dask sends each worker 10 % more queued tasks than it has threads, so that a thread that
    frees starts the next at once, without a round trip to the scheduler. With batches of
    tens of seconds (the floor grows with threads / max_tasks_per_second), the round trip
    costs nothing, but 26 batches held by a 256-thread worker whose threads all run long
    wait there: the last wave's, cut to end together, started 15-25 s late (1,024 threads:
    1.37-1.40x ideal against 1.07-1.10). With short batches (64 threads: 1.3 s) the
    prefetch is worth more (22.4 s against 21.1-21.7 s for 64 x 10 ms, the queue strict).
    Only a scheduler in this process is changed, never a shared one."""
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    if floor_seconds >= LONG_BATCH_SECONDS and hasattr(scheduler, "WORKER_SATURATION"):
        scheduler.WORKER_SATURATION = 1.0


def _scheduler_in_process(client) -> bool:
    """Whether the scheduler runs in this process (LocalCluster, a batch-system cluster). Then
    the workers are reachable from here, as they are from the scheduler, and results are
    fetched from them directly: relayed through the scheduler, every result crossed the
    driver's event loop twice (issue 14). Dask falls back to the scheduler for what fails."""
    return getattr(getattr(client, "cluster", None), "scheduler", None) is not None


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


def _split(chunk, pieces: int) -> list:
    """``chunk`` (a range or an index array) cut into at most ``pieces`` contiguous, non-empty
    parts of near-equal length."""
    n = len(chunk)
    bounds = [n * k // pieces for k in range(pieces + 1)]
    return [chunk[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _task_costs(table, n: int, seconds: float) -> np.ndarray:
    """Seconds per task of a finished batch, in batch order (one row per task has row_index 0)."""
    if table.num_rows == n:  # one row per task (the common case): no filter needed
        first = table["elapsed_s"]
    else:
        first = table.filter(pc.equal(table["row_index"], 0))["elapsed_s"]
    if len(first) == n and first.null_count == 0:
        return first.to_numpy()
    return np.full(n, seconds / max(1, n))


def run_sweep(grid: Grid, client, writer: PartWriter, pending, *,
              batch_size: int | str = "auto", progress: bool = True,
              target_batch_seconds: float = TARGET_BATCH_SECONDS,
              max_tasks_per_second: float = MAX_TASKS_PER_SECOND,
              max_batch_seconds: float = MAX_BATCH_SECONDS,
              checks: Sequence[Callable[[], None]] = (), task_timeout: float | None = None,
              bar: Progress | None = None) -> SweepStats:
    """Run the ``pending`` grid points (a :class:`PendingPlan`, or an index array) on ``client``.

    Finished batches go to ``writer`` (buffered part files when it is). The loop wakes at
    least every :data:`WAKE_SECONDS` and calls every one of ``checks``; any exception (from a
    check, Ctrl-C, the cluster) first flushes every finished result to disk, then propagates.
    ``task_timeout``: seconds per point (see ``batch.run_batch``); a point over it is stored as
    failed and not retried. ``bar``: a ready-made :class:`Progress` (with its heartbeat).
    """
    stats = SweepStats()
    plan = pending if isinstance(pending, PendingPlan) else \
        PendingPlan(grid, grid.total, explicit=np.asarray(pending, dtype=np.int64))
    todo = plan.to_run
    bar = bar or Progress(grid.name, todo, progress)
    if todo == 0 or plan.exhausted:
        bar.update(stats, force=True)
        return stats
    fixed = None if batch_size in (None, "auto") else int(batch_size)
    t_start = time.perf_counter()
    try:
        check_workers(client, grid)  # also warms every worker up (imports, grid)
        stats.warmup_s = time.perf_counter() - t_start
        t_start = time.perf_counter()  # elapsed_s: the sweep proper, comparable across runs
        if not client.nthreads():
            log.info("no workers yet: batches wait in the scheduler until workers join")
        _queue_for_long_batches(client, _total_threads(client) / max_tasks_per_second)
        sizer = BatchSizer(plan, max_tasks_per_second=max_tasks_per_second,
                           max_batch_seconds=max_batch_seconds,
                           min_batch_seconds=target_batch_seconds, fixed=fixed)
        try:
            _drive(grid, client, writer, plan, sizer, stats, bar, checks, task_timeout)
        except Exception:
            # a failure in the loop (the client closed under us, say) is reported by the
            # check that names its cause (SchedulerLost) when one fires
            for check in checks:
                check()
            raise
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: from here on, the shutdown
        shutdown_started()
        raise
    finally:
        writer.close()  # whatever happened, every finished result is on disk before we leave
        stats.parts = writer.seq
        stats.elapsed_s = time.perf_counter() - t_start
    bar.update(stats, force=True)
    return stats


def _drive(grid, client, writer, plan: PendingPlan, sizer: BatchSizer, stats: SweepStats,
           bar: Progress, checks, task_timeout: float | None = None) -> None:
    from pipeline.engine.watchdog import TimeoutEvents

    events = TimeoutEvents(client, TIMEOUT_TOPIC) if task_timeout else None
    try:
        _drive_loop(grid, client, writer, plan, sizer, stats, bar, checks, task_timeout, events)
    finally:
        if events is not None:
            events.close()


def _drive_loop(grid, client, writer, plan, sizer, stats, bar, checks, task_timeout,
                events) -> None:
    finished: queue.SimpleQueue = queue.SimpleQueue()  # filled by Dask's callback thread
    in_flight: dict = {}  # key -> (future, chunk)
    lost_attempts: dict[int, int] = {}  # grid index -> times lost alone with a dead worker
    # Single points lost with a worker are retried one at a time: retried together, a point
    # that kills its worker would take the innocent ones queued beside it down every time.
    suspects: deque = deque()
    suspect_key = None
    known_threads = [0, -1e9]  # (count, when): asked of the scheduler at most once a second
    timed_out: dict[int, str] = {}  # grid index -> timeout error, not yet stored
    waves = itertools.count()  # submission waves: each runs after the ones before it
    direct = _scheduler_in_process(client)

    def threads() -> int:
        # Workers join and leave (adaptive SLURM): sizing follows the scheduler's count.
        now = time.monotonic()
        if now - known_threads[1] >= 1.0:
            known_threads[:] = [_total_threads(client), now]
        return known_threads[0]

    def without_hung(chunk):
        # a point known to hang is stored as failed, never run again
        if not timed_out:
            return chunk
        hung = [int(i) for i in chunk if int(i) in timed_out]
        if not hung:
            return chunk
        store(failed_batch_table(grid, hung, timed_out[hung[0]]), len(hung))
        for i in hung:
            timed_out.pop(i)
        return np.array([i for i in chunk if int(i) not in set(hung)], dtype=np.int64)

    def submit_all(chunks) -> list[str]:
        # One client.map per wake: one scheduler message for the whole wave. 1,024 single
        # submits took the scheduler 1-4 s to start (a spread every batch of a round then
        # carries into the tail); mapped, 0.3 s. Each wave gets a lower priority than the
        # last, so batches still run first in, first out (the sizer's rounds rely on it;
        # without it Dask interleaves the tasks of successive maps).
        # The grid pickles to its small spec; workers rebuild it once and cache it.
        # No Dask retries: run_batch turns every task exception into a row, so a Dask-level
        # failure is a dead worker, which the scheduler already retries (allowed-failures).
        chunks = [c for c in (without_hung(c) for c in chunks) if len(c)]
        if not chunks:
            return []
        futures = map_batches(client, grid, chunks, -next(waves),
                              {"task_timeout": float(task_timeout)} if task_timeout else {})
        for fut, chunk in zip(futures, chunks):
            in_flight[fut.key] = (fut, chunk)
            fut.add_done_callback(finished.put)
        return [f.key for f in futures]

    def submit(chunk) -> str | None:
        keys = submit_all([chunk])
        return keys[0] if keys else None

    def submit_more() -> None:
        nonlocal suspect_key
        if suspect_key is None and suspects:
            suspect_key = submit(suspects.popleft())
        submit_all(sizer.next_batches(threads(), len(in_flight)))

    def store(table, n_tasks: int) -> None:
        writer.write(table)
        n_failed = 0
        if table["status"].null_count < table.num_rows and pc.any(
                pc.equal(table["status"], "failed")).as_py():
            failed = table.filter(pc.equal(table["status"], "failed"))
            n_failed = len(pc.unique(failed["task_id"]))
            if len(stats.first_errors) < 3:
                stats.first_errors.append(failed["error"][0].as_py())
        stats.ran += n_tasks
        stats.failed += n_failed
        stats.ok += n_tasks - n_failed
        stats.rows += table.num_rows
        stats.batches += 1

    def handle_timeouts() -> None:
        # A worker reported a point over task_timeout and is exiting: its batch is cancelled
        # and resubmitted without that point, which is stored as failed.
        nonlocal suspect_key
        for event in events.drain() if events is not None else ():
            index = int(event["index"])
            if index in timed_out:
                continue
            log.warning("task %s (grid index %d) timed out after %g s; stored as failed",
                        event.get("task_id"), index, event["timeout_s"])
            timed_out[index] = (f"TaskTimeout: point ran longer than task_timeout="
                                f"{event['timeout_s']:g} s and was stopped (worker "
                                f"{event.get('worker')} recycled)")
            key = event.get("key")
            if key in in_flight and index in set(int(i) for i in in_flight[key][1]):
                fut, chunk = in_flight.pop(key)
                if key == suspect_key:
                    suspect_key = None
                client.cancel(fut)
                submit(chunk)  # without the hung point: submit() filters it out
            elif not any(index in set(int(i) for i in c) for _, c in in_flight.values()):
                store(failed_batch_table(grid, [index], timed_out.pop(index)), 1)

    def handle(fut, result, lost=None) -> None:
        nonlocal suspect_key
        fut, chunk = in_flight.pop(fut.key)
        if fut.key == suspect_key:
            suspect_key = None
        if result is not None:
            table, seconds = result
            sizer.observe(chunk, _task_costs(table, len(chunk), seconds), seconds)
        elif len(chunk) > 1:
            # Lost with its workers (a crash, the OOM killer): split it, so that only the point
            # that kills workers ends up failed, not the 10^4 innocent ones batched with it.
            # Eight ways, not two, and small ones into single points: each level costs the
            # worker deaths of one lost batch (each a process start).
            fut.release()
            sizer.abandon(chunk)
            submit_all(_split(chunk, len(chunk) if len(chunk) <= LOST_SINGLES else LOST_SPLIT))
            return
        else:
            index = int(chunk[0])
            lost_attempts[index] = lost_attempts.get(index, 0) + 1
            if lost_attempts[index] < LOST_ATTEMPTS:
                # Tasks merely queued on a dying worker die with it: give the point another go
                fut.release()
                suspects.append(chunk)
                return
            error = f"lost on the cluster {LOST_ATTEMPTS} times: {type(lost).__name__}: {lost}"
            table = failed_batch_table(grid, chunk, error)
            sizer.abandon(chunk)
        fut.release()
        store(table, len(chunk))

    submit_more()
    while in_flight or suspects or not plan.exhausted:
        for check in checks:
            check()
        handle_timeouts()
        writer.poll()
        wait = min(WAKE_SECONDS, max(0.005, sizer.wait_time()))
        done = []
        try:
            done.append(finished.get(timeout=wait))
            while True:
                done.append(finished.get_nowait())
        except queue.Empty:
            pass
        done = [f for f in {f.key: f for f in done}.values() if f.key in in_flight]
        ok = [f for f in done if f.status == "finished"]
        # One gather for everything that finished: a round trip per worker, not per batch
        # (1,024 probes fetched one by one took 10 s on a loaded driver).
        # Bounded: a result lost with its worker since is recomputed, and no worker may be
        # left to do it (the unbounded fetch hung the driver: issue 15).
        try:
            results = dict(zip([f.key for f in ok], client.sync(
                client._gather, ok, direct=direct, callback_timeout=GATHER_TIMEOUT_S))) \
                if ok else {}
        except Exception:  # fetch one by one, each bounded
            results = {}
        for fut in done:
            if fut.key in results:
                handle(fut, results[fut.key])
                continue
            result, lost = _fetch(fut)
            if result is _NOT_YET:  # being recomputed: wait for it to finish again
                fut.add_done_callback(finished.put)
                continue
            handle(fut, result, lost)
        submit_more()
        stats.parts = writer.seq
        bar.update(stats)
