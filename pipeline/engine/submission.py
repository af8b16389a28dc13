"""How batches reach Dask: submitted in order and queued on the scheduler for the first free
thread (:func:`map_batches`), strictly where batches are long (:func:`queue_for_long_batches`),
and fetched straight from the workers where the scheduler runs in the driver
(:func:`scheduler_in_process`). Kept apart from the driver loop (``runner.py``) because it
leans on Dask's internals, which a Dask upgrade may change (test_engine_scale checks them)."""

from __future__ import annotations

import logging

from pipeline.engine.batch import run_points
from pipeline.engine.grid import Grid

log = logging.getLogger("pipeline")


def map_batches(client, grid: Grid, chunks: list, priority: int, kwargs: dict) -> list:
    """``client.map(run_points, ...)`` over ``chunks``, each task marked a data producer
    (keys ``run_batch-...``).

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

            expr = _ProducerMap(run_points, [[grid] * len(chunks), chunks], key="run_batch",
                                pure=False, annotations={}, kwargs=kwargs)
            keys = list(expr.keys)
            futures = client._graph_to_futures(
                expr, keys, internal_priority=dict(zip(keys, range(len(keys)))),
                user_priority=priority, span_metadata=SpanMetadata(
                    collections=[{"type": "Future"}]))
            return [futures[key] for key in keys]
        except (AttributeError, TypeError, ImportError) as exc:  # other Dask internals
            log.debug("batches submitted with client.map: %s", exc)
    return client.map(run_points, [grid] * len(chunks), chunks, key="run_batch", pure=False,
                      priority=priority, **kwargs)


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


def queue_for_long_batches(client, floor_seconds: float) -> None:
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


def scheduler_in_process(client) -> bool:
    """Whether the scheduler runs in this process (LocalCluster, a batch-system cluster). Then
    the workers are reachable from here, as they are from the scheduler, and results are
    fetched from them directly: relayed through the scheduler, every result crossed the
    driver's event loop twice (issue 14). Dask falls back to the scheduler for what fails."""
    return getattr(getattr(client, "cluster", None), "scheduler", None) is not None
