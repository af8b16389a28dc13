"""The driver's calls to the workers and the scheduler, each bounded: the warm-up and its
check that every worker runs the code the driver stamps, the thread count batches are sized
for, fetching one finished batch, and asking batches to stop early. A frozen scheduler or a
dead worker costs the driver loop seconds, never a hang (issue 15)."""

from __future__ import annotations

import logging
import time
import weakref

from pipeline.engine.batch import PointsRun, hung_points, request_stop, settle_worker_process
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import code_id, loaded_code_id, other_code_message

log = logging.getLogger("pipeline")

# client -> time.monotonic() when a bounded call began that the scheduler never answered
_silent_since: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def ask_scheduler(client, method, *args, timeout: float, **kwargs):
    """``client.sync(method, *args, **kwargs)`` bounded by ``timeout`` s. A call the scheduler
    leaves unanswered is remembered (:func:`scheduler_silent_for`) and one it answers clears
    that, so the watchdog counts the silence from the first call that met it, whichever part
    of the driver made it: counted from its own probes only, a frozen scheduler behind a 30 s
    gather took 95 s to report with ``scheduler_timeout=10``."""
    started = time.monotonic()
    try:
        result = client.sync(method, *args, callback_timeout=timeout, **kwargs)
    except TimeoutError:
        # a scheduler in this process cannot freeze apart from us: there, a slow call (a big
        # gather from the workers) is only slow, and no probe would clear it again
        if getattr(getattr(client, "cluster", None), "scheduler", None) is None:
            _silent_since.setdefault(client, started)
        raise
    _silent_since.pop(client, None)
    return result


def scheduler_silent_for(client) -> float | None:
    """Seconds since the first bounded call the scheduler has not answered, or None if the
    last one was answered."""
    since = _silent_since.get(client)
    return None if since is None else time.monotonic() - since


def _warm_up(grid: Grid) -> tuple[int, str, str]:
    """Runs on each worker before the sweep: imports the experiment and builds the grid (so
    the first timed batch does not pay for it), settles the process
    (:func:`batch.settle_worker_process`) and reports what the worker would compute: version,
    the first point's canonical parameters, and the code it has loaded."""
    return grid.version, grid.canonical(0), settle_worker_process(grid, every_sweep=True)


WARM_UP_TIMEOUT_S = 600.0  # bound on the workers' warm-up (check_workers)


class WorkerMismatch(RuntimeError):
    pass


def check_workers(client, grid: Grid) -> None:
    """Every connected worker must run the same experiment code as the driver: the same
    version and the same canonical parameters, hence the same task ids, and the same code
    loaded (``code_id``), which the driver stamps on every row. A long-lived worker (a
    cluster at an address) keeps the modules it imported before an edit."""
    expected = (grid.version, grid.canonical(0))
    code = code_id(grid.experiment)
    try:
        # bounded: the watchdog does not run yet, and a scheduler that froze here (connection
        # open, no answer) held the driver for good; longer than Dask's worker-ttl (5 min),
        # after which the scheduler drops a frozen worker and the broadcast returns
        answers = client.run(_warm_up, grid, on_error="return",
                             callback_timeout=WARM_UP_TIMEOUT_S)
    except TimeoutError:
        raise RuntimeError(f"the warm-up got no answer within {WARM_UP_TIMEOUT_S:g} s: the "
                           "scheduler (or a worker it still counts) does not respond; rerun "
                           "when the cluster answers") from None
    failed = {w: got for w, got in answers.items() if isinstance(got, BaseException)}
    if failed:
        # A worker lost during the warm-up (killed, retired, frozen until the scheduler's
        # worker-ttl dropped it) failed the whole broadcast, and the sweep crashed at its start
        # with other workers there to run it. Gone, it runs nothing; one that rejoins has its
        # code checked with each batch. A worker still connected that failed is an error.
        connected = set(client.nthreads(callback_timeout=THREADS_CALL_TIMEOUT_S))
        for worker, exc in failed.items():
            if worker in connected:
                raise exc
            log.warning("worker %s was lost during the warm-up (%s: %s); going on without it",
                        worker, type(exc).__name__, exc)
    for worker, got in answers.items():
        if worker in failed:
            continue
        if len(got) < 3:  # an older engine on the worker
            raise WorkerMismatch(f"worker {worker} runs an older version of this pipeline: "
                                 "restart the workers so that they load the code on disk")
        if tuple(got[:2]) != expected:
            raise WorkerMismatch(
                f"worker {worker} computes experiment '{grid.name}' differently (version "
                f"{got[0]} vs {expected[0]} here, or other defaults): update the code there")
        if got[2] != code:
            raise WorkerMismatch(other_code_message(worker, got[2], code, grid.name))


THREADS_CALL_TIMEOUT_S = 5.0  # bound on asking the scheduler for its thread count


def connected_threads(client) -> int | None:
    """Threads of the workers connected now, or None if the scheduler does not answer.

    Bounded: a frozen scheduler (its connection open, no answer) held the driver loop here
    for good, and no watchdog check ran again. Not asked while the scheduler is silent: each
    call would hold the loop for the whole bound (the watchdog's probe asks)."""
    if scheduler_silent_for(client) is not None:
        return None
    try:
        return sum(ask_scheduler(client, client.scheduler.ncores,
                                 timeout=THREADS_CALL_TIMEOUT_S).values())
    except Exception:
        return None


def thread_counts(client, known: int = 1) -> tuple[int, int, int | None]:
    """(threads to size batches for, threads of the workers connected now (at least 1, for
    sizing; ``known``, the last count, if the scheduler does not answer), the connected
    threads as counted (0 with no worker; None if the scheduler does not answer))."""
    connected = connected_threads(client)
    joined = max(1, known if connected is None else connected)
    # 15a: an adaptive batch cluster grows to the work in flight: plan for all its threads
    planned = getattr(getattr(client, "cluster", None), "pipeline_max_threads", 0)
    return max(joined, planned), joined, connected


def total_threads(client) -> int:
    return thread_counts(client)[0]


NOT_YET = object()
RESULT_WAIT_S = 2.0
LOSS_POLL_S = 0.1


async def gather_finished(client, futures: list, direct=None) -> dict:
    """{key: result} for ``futures`` (finished when called), fetched together; those that stop
    being finished meanwhile (their worker died holding the result: Dask recomputes it) are
    left out, for :func:`fetch_result` to see. Gathering them too waited for the
    recomputation, for the whole bound (30 s) when the restarted worker was slow to take it:
    a point that kills its worker stalled the sweep that long, each time."""
    import asyncio

    remaining = list(futures)
    while remaining:
        gather = asyncio.ensure_future(client._gather(remaining, direct=direct))
        try:
            while True:  # returns as soon as the gather does; the timeout paces the check
                done, _ = await asyncio.wait([gather], timeout=LOSS_POLL_S)
                if done:
                    return dict(zip([f.key for f in remaining], gather.result()))
                if any(f.status != "finished" for f in remaining):
                    remaining = [f for f in remaining if f.status == "finished"]
                    break
        finally:  # also when the caller's bound cancels us: no orphan fetch left running
            if not gather.done():
                gather.cancel()
    return {}


def fetch_result(fut):
    """(result, None) for a finished batch, (None, exception) for one lost on the cluster, or
    (NOT_YET, None) if its result is not back within RESULT_WAIT_S: a result whose worker
    died after finishing is recomputed, which must not block the loop (15b: the unbounded
    fut.result() here hung the driver when no worker was left to recompute it)."""
    from distributed import TimeoutError as DaskTimeout

    if fut.status == "finished":
        try:
            result = fut.result(timeout=RESULT_WAIT_S)
            if isinstance(result, PointsRun):
                return result, None
            # seen when its worker died during the fetch: run it again, as a lost batch
            return None, RuntimeError(f"no result came back for {fut.key} (got {result!r})")
        except (TimeoutError, DaskTimeout):
            return NOT_YET, None
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
    return NOT_YET, None  # "pending" or "lost": its result went with a worker; recomputed


STOP_REQUEST_TIMEOUT_S = 5.0  # bound on broadcasting a stop request to the workers


def ask_to_stop(client, keys: list) -> None:
    """Ask the batches ``keys`` to stop after their current point, on every worker. Bounded:
    ``Client.run`` waits for the broadcast's round trip, and an unreachable scheduler must not
    hold the loop. A request lost costs time, never results. (``request_stop`` only marks a
    set, so it runs in the worker's event loop: ``wait=False`` is for coroutines only, and a
    plain function with it fails on every worker.)"""
    try:
        ask_scheduler(client, client._run, request_stop, [str(key) for key in keys], wait=True,
                      on_error="ignore", timeout=STOP_REQUEST_TIMEOUT_S)
    except Exception as exc:
        log.debug("could not ask batches to stop early: %s", exc)


WORKER_CODE_TIMEOUT_S = 10.0  # bound on asking every worker which code it has loaded
HUNG_POINTS_TIMEOUT_S = 10.0  # bound on asking the workers for their long-running points


def points_running_longer_than(client, limit_s: float) -> list[tuple[str, str, int, float]]:
    """(worker address, batch key, grid index, seconds) of every point running on a worker
    for over ``limit_s`` (:func:`batch.hung_points`), asked with a bound; [] if no answer."""
    try:
        answers = ask_scheduler(client, client._run, hung_points, limit_s, on_error="return",
                                wait=True, timeout=HUNG_POINTS_TIMEOUT_S)
    except Exception as exc:
        log.warning("could not ask the workers which points they are running: %s", exc)
        return []
    return [(worker, *point) for worker, got in answers.items() if isinstance(got, list)
            for point in got]
RETIRE_TIMEOUT_S = 30.0  # bound on retiring workers that run other code


def _loaded_code(grid: Grid) -> str:
    return loaded_code_id(grid.experiment)


def worker_codes(client, grid: Grid) -> dict[str, str] | None:
    """The code each connected worker has loaded for ``grid``'s experiment
    (:func:`provenance.loaded_code_id`), asked with a bound; None if the scheduler does not
    answer in time. A worker that fails the call (it is closing, say) is left out."""
    try:
        answers = ask_scheduler(client, client._run, _loaded_code, grid, on_error="return",
                                wait=True, timeout=WORKER_CODE_TIMEOUT_S)
    except Exception as exc:
        log.debug("could not ask the workers which code they run: %s", exc)
        return None
    return {worker: got for worker, got in answers.items() if isinstance(got, str)}


def _quiet_close() -> None:
    # A LocalCluster's workers write to the sweep's terminal: closing, each logged Dask's
    # INFO "Connection to ... has been closed." there (the sweep's own line says why).
    logging.getLogger("distributed.core").setLevel(logging.WARNING)


def retire_workers(client, workers: list[str]) -> set[str]:
    """Close ``workers`` (and their nannies, which would restart them) through the scheduler,
    bounded; the batches queued on them go to the others. The workers it retired: the
    scheduler answers without an error for one it did not (unknown, or no recipient for its
    data); a failure is logged."""
    try:
        ask_scheduler(client, client._run, _quiet_close, workers=list(workers), wait=True,
                      on_error="ignore", timeout=STOP_REQUEST_TIMEOUT_S)
    except Exception:  # only quieter
        pass
    try:
        retired = ask_scheduler(client, client.scheduler.retire_workers, workers=list(workers),
                                close_workers=True, timeout=RETIRE_TIMEOUT_S)
        return set(retired or ()) & set(workers)
    except Exception as exc:
        log.warning("could not retire worker(s) %s: %s: %s", ", ".join(workers),
                    type(exc).__name__, exc)
        return set()
