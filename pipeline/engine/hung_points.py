"""Points that run too long, for the driver loop (``runner.py``): over ``task_timeout`` (the
worker reports it on the event topic, then exits: ``batch.py``), or, with no ``task_timeout``,
through a whole ``watchdog.no_progress_timeout`` with no task finishing (the watchdog's
``on_stuck``, before it restarts the workers or ends the sweep). Each such point is stored
failed once and never run again; the batch it was in goes back to the queue without it.
"""

from __future__ import annotations

import logging
from typing import Callable, NamedTuple

import numpy as np

from pipeline.engine.batch_table import failed_batch_table
from pipeline.engine.chunks import as_indices, holds
from pipeline.engine.worker_calls import points_running_longer_than

log = logging.getLogger("pipeline")


MAX_EXCUSED_LOSSES = 3  # a chunk lost with recycled workers runs again whole this often


class Stuck(NamedTuple):
    """What :meth:`HungPoints.fail_stuck` found, for the watchdog."""

    workers: set  # the workers running the points it stored as hung
    longest_s: float | None  # how long the longest other running point of the sweep has run
    # (None: no answer from the workers, or none of the sweep's points is running)


class HungPoints:
    """``in_flight``: the driver's key -> (future, chunk), read in place; ``store(table, n)``
    writes failed rows; ``requeue(key)`` cancels a batch in flight and queues its chunk again
    (:meth:`without_hung` then leaves the hung points out)."""

    def __init__(self, client, grid, in_flight: dict, store: Callable, requeue: Callable,
                 events=None, store_hung: bool = True):
        self.client, self.grid, self.in_flight = client, grid, in_flight
        self.store, self.requeue, self.events = store, requeue, events
        self.store_hung = store_hung  # False with task_timeout set: it bounds each point
        self.pending: dict[int, str] = {}  # grid index -> error, not stored yet
        self.stored: set[int] = set()  # stored failed: never run again
        # A timeout event can come late: after its batch returned (the watcher waits a second
        # before ending the process, and the late point may finish meanwhile), or again from a
        # cancelled batch that Dask had already started elsewhere: not acted on twice.
        self.cancelled_keys: set = set()
        # Workers the sweep itself ends or restarts for a hung point (task_timeout's events,
        # the watchdog's restarts): a batch lost with one is not at fault (recycled_loss).
        self.recycled: set[str] = set()
        self.excused: dict[tuple[int, int], int] = {}  # chunk -> losses excused so far

    def without_hung(self, chunk):
        """``chunk`` less its known hung points; those not stored yet are stored now."""
        if not self.pending and not self.stored:
            return chunk
        indices = as_indices(chunk)
        known = [*self.pending, *self.stored]
        is_hung = np.isin(indices, np.fromiter(known, dtype=np.int64, count=len(known)))
        if not is_hung.any():
            return chunk
        self._store([i for i in indices[is_hung].tolist() if i in self.pending])
        return indices[~is_hung]

    def handle_events(self, handled_keys: set) -> None:
        """The workers' task_timeout reports (``handled_keys``: batches whose rows are stored)."""
        for event in self.events.drain() if self.events is not None else ():
            index = int(event["index"])
            key = event.get("key")
            if key not in self.in_flight and key not in handled_keys \
                    and key not in self.cancelled_keys:
                continue  # another sweep's, on the same scheduler (cluster=address): its index
                # is a point of its own grid, and stored here it failed a point of this one
            if index in self.pending or index in self.stored or key in self.cancelled_keys:
                continue  # already acted on (a cancelled batch Dask had started again)
            if key in handled_keys:
                # its batch came back first: the point returned over the limit, and the
                # batch stored it failed (batch._fail_points_over); the worker ends all the
                # same and its nanny starts another
                log.warning("task %s (grid index %d) ran over task_timeout=%g s and returned "
                            "before its worker was recycled; stored as failed",
                            event.get("task_id"), index, event["timeout_s"])
                continue
            if event.get("worker"):
                self.recycled.add(str(event["worker"]))
            log.warning("task %s (grid index %d) timed out after %g s; stored as failed",
                        event.get("task_id"), index, event["timeout_s"])
            self.fail(key, index, (
                f"TaskTimeout: point ran longer than task_timeout={event['timeout_s']:g} s "
                f"and was stopped (worker {event.get('worker')} recycled)"))

    def fail_stuck(self, limit_s: float) -> Stuck:
        """Watchdog.on_stuck: no task finished for ``limit_s``, and the workers are restarted
        next (or the sweep ends). A point that has itself run longer hangs, or outlasts the
        limit; run again, it would do the same at every restart, its batch split over hours,
        until Dask gave up on it. Stored now (not with task_timeout set): the sweep may end
        next. Returns the workers running the points it stored (the watchdog counts them as
        progress, and restarts those workers where it cannot restart the whole cluster), and
        how long the longest other running point of the sweep has run: where that is under
        the limit, a point finished since it started, so points progress inside batches that
        have not returned yet (a hung point that started after the last batch returned had
        run less than the limit, and was missed at one restart after another)."""
        stuck_on: set[str] = set()
        longest = None
        for worker, key, index, seconds in points_running_longer_than(self.client, 0.0):
            if key not in self.in_flight or index in self.pending or index in self.stored:
                continue  # another sweep's (cluster=address), or known already
            if seconds <= limit_s or not self.store_hung:
                longest = seconds if longest is None else max(longest, seconds)
                continue
            log.warning("task %s (grid index %d) has run for %.0f s while no task finished "
                        "(watchdog.no_progress_timeout=%g); stored as failed",
                        self.grid.task_id(index), index, seconds, limit_s)
            self.fail(key, index, (
                f"Hung: point ran for {seconds:.0f} s with no task finishing "
                f"(watchdog.no_progress_timeout={limit_s:g} s) and was stopped with its "
                "worker; set task_timeout to bound each point, or raise "
                "watchdog.no_progress_timeout if points take longer"))
            if index in self.pending:  # its batch went back to the queue without it
                self._store([index])
            stuck_on.add(worker)
        self.recycled |= stuck_on  # restarted next, with their other batches
        return Stuck(stuck_on, longest)

    def recycled_loss(self, lost: BaseException | None, chunk) -> bool:
        """Whether ``lost`` (a batch's KilledWorker) last died with a worker the sweep
        recycled for a hung point. Such a worker's other batches, sound, were counted a worker
        death each: split as if one of their points killed workers, and a single point lost
        twice was stored failed ('lost on the cluster 2 times'). Excused at most
        MAX_EXCUSED_LOSSES times a chunk: a worker restarted at the same address (fixed ports)
        that a point of ``chunk`` really kills would otherwise run it again forever."""
        worker = getattr(getattr(lost, "last_worker", None), "address", None)
        if worker is None or str(worker) not in self.recycled:
            return False
        which = (int(chunk[0]), len(chunk))
        self.excused[which] = self.excused.get(which, 0) + 1
        return self.excused[which] <= MAX_EXCUSED_LOSSES

    def fail(self, key, index: int, error: str) -> None:
        """Point ``index`` of batch ``key`` hung: its batch is cancelled and queued again
        without it, and it is stored failed with ``error``."""
        self.pending[index] = error
        if key in self.in_flight and holds(self.in_flight[key][1], index):
            self.cancelled_keys.add(key)
            self.requeue(key)
        elif not any(holds(c, index) for _, c in self.in_flight.values()):
            self._store([index])

    def _store(self, indices: list[int]) -> None:
        if indices:
            self.store(failed_batch_table(self.grid, indices, self.pending[indices[0]]),
                       len(indices))
        for i in indices:
            self.pending.pop(i)
            self.stored.add(i)
