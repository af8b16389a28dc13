"""Driver side: fan a sweep's batches out on Dask and stream their rows to disk (what is still
to run comes from ``resume.py``, how batches reach Dask from ``submission.py``).

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
import pyarrow.compute as pc

from pipeline.engine.batch import TIMEOUT_TOPIC, PointsRun
from pipeline.engine.batch_table import failed_batch_table, points_table
from pipeline.engine.grid import Grid
from pipeline.engine.other_code import OtherCodeWorkers
from pipeline.engine.provenance import code_id
from pipeline.engine.chunks import as_indices
from pipeline.engine.hung_points import HungPoints
from pipeline.engine.cost_model import InFlightWork
from pipeline.engine.pending_plan import PendingPlan
from pipeline.engine.planning import BatchSizer
from pipeline.engine.submission import map_batches, queue_for_long_batches, scheduler_in_process
from pipeline.engine.progress import Progress, runlog
from pipeline.engine.watchdog import (SweepAborted, shutdown_hurried, shutdown_started,
                                      signals_held)
from pipeline.engine.worker_calls import (NOT_YET, ask_scheduler, ask_to_stop, check_workers,
                                          connected_threads, fetch_result, gather_finished,
                                          scheduler_silent_for,
                                          thread_counts, total_threads)
from pipeline.store.part_writer import PartWriter

log = logging.getLogger("pipeline")
TARGET_BATCH_SECONDS = 0.2  # the per-task floor: a batch carries at least this much work
MAX_TASKS_PER_SECOND = 50.0  # Dask tasks per second for the whole cluster (BENCHMARKS.md)
MAX_BATCH_SECONDS = 60.0  # bound on a batch's predicted duration
LOST_SPLIT = 8  # a batch lost with its worker is resubmitted as this many pieces,
LOST_SINGLES = 64  # or as single points when it holds at most this many
LOST_ATTEMPTS = 2  # a single point lost with its workers is tried this often before it fails
WAKE_SECONDS = 1.0  # the driver loop wakes at least this often, whatever the cluster does
GATHER_TIMEOUT_S = 30.0  # bound on fetching one wake's finished results in one go
SILENT_GATHER_TIMEOUT_S = 5.0  # the same while the scheduler has left a call unanswered
# On Ctrl-C/SIGTERM, the batches in flight are asked to stop after their current point and
# what they ran is kept; waited for this long at most (SLURM's SIGKILL comes 30 s after its
# SIGTERM, and the flush, the record and the cluster's close come after this wait).
INTERRUPT_KEEP_SECONDS = 10.0
# The buffer is written ahead of the tail only from this size: a smaller one is written at the
# end in well under 0.1 s (BENCHMARKS.md: ~12 ms a file plus 1.2-3 us a row), and every run
# that resumes a few points wrote two part files (compaction then had more to do).
TAIL_FLUSH_MIN_BYTES = 4 << 20


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


def _split(chunk, pieces: int) -> list:
    """``chunk`` (a range or an index array) cut into at most ``pieces`` contiguous, non-empty
    parts of near-equal length."""
    n = len(chunk)
    bounds = [n * k // pieces for k in range(pieces + 1)]
    return [chunk[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


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
        if connected_threads(client) == 0:
            log.info("no workers yet: batches wait in the scheduler until workers join")
        queue_for_long_batches(client, total_threads(client) / max_tasks_per_second)
        sizer = BatchSizer(plan, max_tasks_per_second=max_tasks_per_second,
                           max_batch_seconds=max_batch_seconds,
                           min_batch_seconds=target_batch_seconds, fixed=fixed)
        try:
            _drive(grid, client, writer, plan, sizer, stats, bar, checks, task_timeout)
        except SweepAborted:
            raise  # a check named the cause already; asking again costs its probes
        except Exception:
            # a failure in the loop (the client closed under us, say) is reported by the
            # check that names its cause (SchedulerLost) when one fires
            for check in checks:
                check()
            raise
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP, or a crash: from here on, the shutdown
        shutdown_started()  # (a signal during a crash's flush or cluster close took it for
        raise  # an interrupt: cut short, reported as 'interrupted', a Dask traceback at exit)
    finally:
        try:
            writer.close()  # whatever happened, every finished result is on disk before we leave
        finally:  # (a full disk raises here too: the run's record still needs its counts)
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
    in_flight_work = InFlightWork(sizer.model)  # their points per cost bucket (the ETA)
    predicted_s: dict = {}  # key -> predicted seconds of the batch (tail splitting)
    lost_attempts: dict[int, int] = {}  # grid index -> times lost alone with a dead worker
    # Single points lost with a worker are retried one at a time: retried together, a point
    # that kills its worker would take the innocent ones queued beside it down every time.
    suspects: deque = deque()
    suspect_key = None
    # (count to size for, when, count joined): asked of the scheduler at most once a second
    known_threads = [0, -1e9, 0, None]  # total, when, joined (>= 1), connected (None: unknown)
    # keys whose rows are stored (a late timeout event of theirs is not acted on)
    handled_keys: deque = deque(maxlen=100_000)
    handled_key_set: set = set()
    recomputing: dict = {}  # key -> future whose result was lost with its worker
    waves = itertools.count()  # submission waves: each runs after the ones before it
    direct = scheduler_in_process(client)
    code = code_id(grid.experiment)  # stamped on every row by the writer
    other_code = OtherCodeWorkers(client, grid, code)

    def threads() -> int:
        # Workers join and leave (adaptive SLURM): sizing follows the scheduler's count.
        now = time.monotonic()
        if now - known_threads[1] >= 1.0:
            total, joined, connected = thread_counts(client, known_threads[2])
            known_threads[:] = [total, now, joined, connected]
        return known_threads[0]

    def joined_threads() -> int:
        threads()  # refreshed at most once a second
        return known_threads[2]

    def connected_now() -> int | None:
        """Threads connected now, 0 included (joined_threads counts at least 1, for sizing);
        None if the scheduler does not answer."""
        threads()
        return known_threads[3]

    def submit_all(chunks) -> list[str]:
        # One client.map per wake: one scheduler message for the whole wave. 1,024 single
        # submits took the scheduler 1-4 s to start (a spread every batch of a round then
        # carries into the tail); mapped, 0.3 s. Each wave gets a lower priority than the
        # last, so batches still run first in, first out (the sizer's rounds rely on it;
        # without it Dask interleaves the tasks of successive maps).
        # The grid pickles to its small spec; workers rebuild it once and cache it.
        # No Dask retries: run_batch turns every task exception into a row, so a Dask-level
        # failure is a dead worker, which the scheduler already retries (allowed-failures).
        chunks = [c for c in (hung.without_hung(c) for c in chunks) if len(c)]
        if not chunks:
            return []
        futures = map_batches(client, grid, chunks, -next(waves),
                              {"task_timeout": float(task_timeout)} if task_timeout else {})
        for fut, chunk in zip(futures, chunks):
            in_flight[fut.key] = (fut, chunk)
            in_flight_work.add(chunk)
            predicted_s[fut.key] = float(sizer.model.predict(as_indices(chunk)).sum()) \
                if sizer.model.measured else 0.0
            fut.add_done_callback(finished.put)
        return [f.key for f in futures]

    def submit(chunk) -> str | None:
        keys = submit_all([chunk])
        return keys[0] if keys else None

    def submit_more() -> None:
        nonlocal suspect_key
        if suspect_key is None and suspects and sizer.take_token():
            suspect_key = submit(suspects.popleft())
        submit_all(sizer.next_batches(threads(), len(in_flight)))

    def store(table, n_tasks: int) -> None:
        # counted first: a table the writer refuses (the disk full) still ran, and is among
        # the rows it reports unwritten (the run's record: "ran N ... N could not be written")
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
        writer.write(table)

    def requeue(key) -> None:
        # a batch holding a hung point: cancelled, its chunk queued again (less that point)
        nonlocal suspect_key
        fut, chunk = in_flight.pop(key)
        in_flight_work.remove(chunk)
        predicted_s.pop(key, None)
        recomputing.pop(key, None)
        if key == suspect_key:
            suspect_key = None
        client.cancel(fut)
        sizer.abandon(chunk)  # a probe that hung is not waited for
        sizer.resubmit([chunk])

    # with task_timeout set, it bounds each point: the watchdog's check stores none as hung
    hung = HungPoints(client, grid, in_flight, store, requeue, events,
                      store_hung=not task_timeout)
    for check in checks:
        if hasattr(check, "on_stuck"):
            check.on_stuck = hung.fail_stuck

    lost_batches = [0]  # batches lost with their workers, so far

    def handle(fut, result, lost=None) -> bool | None:
        # False: its points went back to the queue (run with other code), nothing stored
        nonlocal suspect_key
        fut, chunk = in_flight.pop(fut.key)
        in_flight_work.remove(chunk)
        recomputing.pop(fut.key, None)
        if result is not None:
            if len(handled_keys) == handled_keys.maxlen:
                handled_key_set.discard(handled_keys[0])
            handled_keys.append(fut.key)
            handled_key_set.add(fut.key)
        predicted_s.pop(fut.key, None)
        if fut.key == suspect_key:
            suspect_key = None
        if result is not None:
            if result.done < len(chunk):  # stopped early in the tail: the rest is re-split
                sizer.give_back(as_indices(chunk[result.done:]))
                chunk = chunk[:result.done]
            if result.code_id != code:  # a worker on other code (other_code.py)
                error = other_code.returned(result.worker, result.code_id, chunk)
                if error is None:
                    sizer.resubmit([chunk])
                    fut.release()
                    handled_key_set.discard(fut.key)  # nothing stored: a late timeout
                    return False  # report is not of a stored point (hung_points)
                table = failed_batch_table(grid, chunk, error, worker=result.worker)
                sizer.abandon(chunk)
            else:
                sizer.observe(chunk, result.elapsed_s, result.seconds)
                try:  # built here, not on the worker (see batch.PointsRun)
                    table = points_table(grid, chunk, result)
                except Exception as exc:  # the batch's points fail, not the sweep
                    log.error("could not build the table of %d points (grid indices %d..): %s",
                              len(chunk), int(chunk[0]), exc)
                    table = failed_batch_table(grid, chunk, "could not store the batch's rows: "
                                               f"{type(exc).__name__}: {exc}")
        elif hung.recycled_loss(lost, chunk):
            # lost with a worker the sweep recycled for another batch's hung point: run again
            # as it was, not split nor counted against its points
            fut.release()
            sizer.abandon(chunk)
            sizer.resubmit([chunk])
            runlog.info("a batch of %d points (grid indices %d..) was lost with a worker "
                        "recycled for a hung point; it runs again", len(chunk), int(chunk[0]))
            return
        elif len(chunk) > 1:
            # Lost with its workers (a crash, the OOM killer): split it, so that only the point
            # that kills workers ends up failed, not the 10^4 innocent ones batched with it.
            # Eight ways, not two, and small ones into single points: each level costs the
            # worker deaths of one lost batch (each a process start).
            fut.release()
            sizer.abandon(chunk)
            pieces = _split(chunk, len(chunk) if len(chunk) <= LOST_SINGLES else LOST_SPLIT)
            # on the terminal once (Dask's own line for it goes to the run log only), then
            # each one in the run log
            (runlog.info if lost_batches[0] else log.warning)(
                "a batch of %d points (grid indices %d..) was lost with the workers that ran "
                "it (%s); its points run again in %d smaller batches, down to any point that "
                "kills workers%s", len(chunk), int(chunk[0]), type(lost).__name__, len(pieces),
                "" if lost_batches[0] else " (further losses: in the run log)")
            lost_batches[0] += 1
            sizer.resubmit(pieces)
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

    def stop_long_batches_in_tail() -> None:
        # idle threads are counted among those joined: an adaptive cluster's planned ones
        # would look idle while its jobs wait in the batch queue
        keys = sizer.tail_to_stop(joined_threads(), len(in_flight),
                                  lambda: {key: predicted_s.get(key, 0.0) for key in in_flight})
        if keys:
            log.info("tail: %d batches asked to stop early; their remaining points are re-split "
                     "over the idle threads", len(keys))
            ask_to_stop(client, keys)

    def keep_what_batches_in_flight_ran() -> None:
        # A batch carries up to max_batch_seconds of work (a minute on each of 1,024 threads):
        # dropped on Ctrl-C or SIGTERM, a rerun recomputed all of it. Asked to stop after its
        # current point, a batch returns the points it ran, stored like any result. Bounded;
        # a repeated signal cuts the wait short. Batches not back by then are recomputed.
        # Best effort: whatever fails here is logged, and the interrupt goes on as it came.
        if not in_flight or shutdown_hurried():
            return
        connected = connected_threads(client)  # bounded; at once if the scheduler is silent
        if connected is None and scheduler_silent_for(client) is not None:
            log.info("interrupted: the scheduler does not answer, so the %d batches in flight "
                     "cannot be asked for the points they ran; a rerun runs their points",
                     len(in_flight))
            return
        if connected == 0:  # batch jobs still queued (or all gone): it waited for nothing
            log.info("interrupted: no worker is connected, so none of the %d batches is "
                     "running; a rerun runs their points", len(in_flight))
            return
        n_batches, kept, kept_points = len(in_flight), 0, 0
        log.info("interrupted: %d batches in flight asked to stop after their current point; "
                 "keeping the points they ran (waiting at most %g s; interrupt again to skip)",
                 n_batches, INTERRUPT_KEEP_SECONDS)
        deadline = time.monotonic() + INTERRUPT_KEEP_SECONDS
        try:
            ask_to_stop(client, list(in_flight))
            while in_flight and not shutdown_hurried():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:  # a wake-up; the futures themselves say which are done (the interrupt
                    finished.get(timeout=min(0.25, left))  # may come after their callbacks)
                except queue.Empty:
                    pass
                done = [fut for fut, _ in in_flight.values() if fut.status != "pending"]
                for fut in done:
                    if fut.status != "finished":  # lost with its worker, cancelled: not waited
                        in_flight.pop(fut.key)
                ok = [f for f in done if f.status == "finished"]
                if not ok:
                    continue
                results = ask_scheduler(client, client._gather, ok, direct=direct,
                                        timeout=max(0.5, deadline - time.monotonic()))
                for fut, result in zip(ok, results):
                    if isinstance(result, PointsRun):
                        before = stats.ran
                        stored = handle(fut, result) is not False  # (False: not stored)
                        # counted once stored: a batch the writer refused (a full disk) raises
                        kept, kept_points = kept + stored, kept_points + stats.ran - before
                    else:  # left to the rerun, and not fetched again until the deadline
                        in_flight.pop(fut.key, None)
        except Exception as exc:  # the store failing, a fetch cut short: the rerun runs them
            log.warning("stopped keeping the points of the batches in flight: %s: %s",
                        type(exc).__name__, exc)
        log.info("kept %d points that %d stopped batches ran%s", kept_points, kept,
                 f"; {n_batches - kept} batches not kept: a rerun runs their points"
                 if kept < n_batches else "")

    def eta_s() -> float | None:
        # the threads that have joined, not an adaptive cluster's planned ones (queued jobs)
        return sizer.eta_seconds(joined_threads(), in_flight_work.seconds(), len(in_flight))

    bar.eta_source = eta_s
    bar.threads_source = connected_now
    tail_flushed = False
    try:
        submit_more()
        while in_flight or suspects or not plan.exhausted or sizer.has_returned:
            for check in checks:
                check()
            hung.handle_events(handled_key_set)
            writer.poll()
            wait = min(WAKE_SECONDS,
                       max(0.005, min(sizer.wait_time(), sizer.tail_wait_time(threads()))))
            done = []
            try:
                done.append(finished.get(timeout=wait))
                while True:
                    done.append(finished.get_nowait())
            except queue.Empty:
                pass
            # Results lost with their worker come back when Dask has recomputed them; their
            # futures are looked at again at each wake (a done-callback on a lost future fires
            # at once: re-adding it spun the loop at full speed until the recomputation ended).
            done += [f for f in recomputing.values() if f.status != "lost"]
            done = [f for f in {f.key: f for f in done}.values() if f.key in in_flight]
            ok = [f for f in done if f.status == "finished"]
            # One gather for everything that finished: a round trip per worker, not per batch
            # (1,024 probes fetched one by one took 10 s on a loaded driver).
            # Bounded: a result lost with its worker since is recomputed, and no worker may be
            # left to do it (the unbounded fetch hung the driver: issue 15).
            try:
                # while the scheduler is not answering, a short bound: the loop (and its checks)
                # came back only every 30 s, retrying results it could not fetch
                bound = GATHER_TIMEOUT_S if scheduler_silent_for(client) is None else \
                    SILENT_GATHER_TIMEOUT_S
                results = ask_scheduler(client, gather_finished, client, ok, direct=direct,
                                        timeout=bound) if ok else {}
            except Exception as exc:  # fetch one by one, each bounded
                runlog.info("fetching %d finished batch(es) one by one: fetching them together "
                            "failed (%s)", len(ok), type(exc).__name__)
                results = {}
            # Results taken from the cluster are stored before a Ctrl-C or SIGTERM is raised:
            # raised between, they were lost (a rerun recomputed them), however many this wake took.
            with signals_held():
                for fut in done:
                    if fut.key in results:
                        handle(fut, results[fut.key])
                # A worker's timeout report comes on the one ordered stream before its batch's
                # result or its loss with the worker, so it is here by now: drained before the
                # losses, a hung batch is stored as timed out, not lost; after the results, a late
                # point that finished gets its warning. The wake alone missed them when they came
                # in one wait (the last batch had no wake after it).
                hung.handle_events(handled_key_set)
            for fut in done:
                if fut.key in results or fut.key not in in_flight:  # handled, or cancelled just now
                    continue
                result, lost = fetch_result(fut)
                if result is NOT_YET:  # being recomputed: wait for it to finish again
                    if fut.status == "pending":
                        recomputing.pop(fut.key, None)
                        fut.add_done_callback(finished.put)
                    else:  # "lost": its callback would fire at once; looked at each wake
                        recomputing[fut.key] = fut
                    continue
                with signals_held():
                    handle(fut, result, lost)
            other_code.act()
            submit_more()
            stop_long_batches_in_tail()
            if not tail_flushed and plan.exhausted and not sizer.has_returned:
                # the last points are out: write the buffer while the tail runs, not after it
                writer.flush_soon(min_bytes=TAIL_FLUSH_MIN_BYTES)
                tail_flushed = True
            stats.parts = writer.seq
            bar.update(stats)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP
        shutdown_started()  # a repeated signal now waits, or cuts the wait below short
        keep_what_batches_in_flight_ran()
        raise
