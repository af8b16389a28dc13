"""Keep an unattended sweep from hanging: watch the cluster from the driver loop.

- :class:`Watchdog` is a *check* for ``run_sweep(checks=...)``: the driver loop calls it at least
  once a second. It never blocks for long (every call to the scheduler has a bound) and
    * logs workers joining and leaving (to the run log);
    * with no worker for ``no_workers_timeout`` s, or no task finishing for
      ``no_progress_timeout`` s while tasks are queued, restarts the workers of a
      ``LocalCluster`` (whose nannies can give up under load, leaving no worker process at all)
      and otherwise raises :class:`NoWorkers` / :class:`NoProgress`. Up to ``LOCAL_RESTARTS``
      restarts in a row: only a batch returning its points counts as progress and starts the
      count again (the workers a restart brings back join every time, whether it helped or
      not; a batch lost with its workers, or cancelled by the driver, returned nothing);
    * raises :class:`SchedulerLost` once the client has lost its scheduler for
      ``scheduler_timeout`` s (or has given up reconnecting).
  An exception raised by a check ends the sweep with exit 3, its finished batches kept.
  The driver loop (``runner.run_sweep``) waits on finished futures for at most
  ``WAKE_SECONDS`` (1 s) at a time, so the checks run, and Ctrl-C is seen, whatever the
  cluster does.
- :class:`TimeoutEvents` collects the points the workers report as over ``task_timeout``
  (see ``batch.py``), so the driver can store them as failed without retrying them.
- :func:`termination_signals`: SIGTERM and SIGHUP raise :class:`Terminated`, a
  ``KeyboardInterrupt``, so they take Ctrl-C's path (flush, ``interrupted``) and exit 128 + signum;
  :func:`signals_held` makes a first signal wait for the end of a step that must not be cut.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from typing import Callable, Iterator

from pipeline.engine.progress import line_ended, runlog
from pipeline.engine.scheduler_workers import embedded_scheduler, workers_in_place
from pipeline.engine.worker_calls import ask_scheduler, scheduler_silent_for

log = logging.getLogger("pipeline")

NO_WORKERS_TIMEOUT = 600.0
# Batch systems: jobs may wait in the queue for long; the start-up wait is bounded by the
# cluster's own worker_start_timeout, and this one counts only once a worker has been seen.
BATCH_NO_WORKERS_TIMEOUT = 3600.0
LOCAL_NO_WORKERS_TIMEOUT = 10.0  # LocalCluster workers start in seconds: restart them soon
NO_PROGRESS_TIMEOUT = 3600.0
SCHEDULER_TIMEOUT = 60.0
WATCHDOG_KEYS = ("no_workers_timeout", "no_progress_timeout", "scheduler_timeout")
LOCAL_RESTARTS = 3  # LocalCluster restarts in a row with no batch returning, then give up
LOCAL_START_GRACE = 30.0  # after a restart, time for the new worker processes to join
SCHEDULER_CALL_TIMEOUT = 5.0
NO_WORKERS_REPEAT_S = 600.0  # "no Dask workers left" again within this: in the run log only,
NO_WORKERS_BACK_S = 60.0  # unless the workers had been back for this long


class SweepAborted(RuntimeError):
    """The cluster can no longer run the sweep; finished batches are kept (exit 3)."""


class NoWorkers(SweepAborted):
    pass


class NoProgress(SweepAborted):
    pass


class SchedulerLost(SweepAborted):
    pass


class WorkersRunOtherCode(SweepAborted):
    """No worker left runs the code the sweep stamps on its rows (the files changed, and the
    workers restarted since loaded them): the rest waits for a rerun on the new code."""


def _positive_or_none(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and value > 0)


def validate_options(conf: dict) -> None:
    """Check ``task_timeout`` and the ``watchdog`` node of a sweep config (ValueError)."""
    if not _positive_or_none(conf.get("task_timeout")):
        raise ValueError(f"task_timeout must be a number of seconds > 0 or null (no limit), got "
                         f"{conf.get('task_timeout')!r}")
    node = conf.get("watchdog") or {}
    if not isinstance(node, dict):
        raise ValueError(f"watchdog must be a mapping with keys {', '.join(WATCHDOG_KEYS)}")
    unknown = sorted(set(node) - set(WATCHDOG_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) watchdog.{', watchdog.'.join(unknown)}; allowed: "
                         + ", ".join(f"watchdog.{k}" for k in WATCHDOG_KEYS))
    for key in WATCHDOG_KEYS:
        if not _positive_or_none(node.get(key)):
            raise ValueError(f"watchdog.{key} must be a number of seconds > 0 or null, got "
                             f"{node.get(key)!r}")


def watchdog_options(conf: dict) -> dict:
    """Keyword arguments of :class:`Watchdog` from a validated sweep config. An unset
    ``no_workers_timeout`` is 10 s on a LocalCluster (whose workers are then restarted), 600 s
    on an external scheduler and 3600 s on a batch system (jobs may wait in a queue)."""
    node = dict(conf.get("watchdog") or {})
    kind = (conf.get("cluster") or {}).get("kind", "local")
    default = {"local": LOCAL_NO_WORKERS_TIMEOUT, "address": NO_WORKERS_TIMEOUT}.get(
        kind, BATCH_NO_WORKERS_TIMEOUT)
    out = {"no_workers_timeout": node.get("no_workers_timeout") or default,
           "no_progress_timeout": node.get("no_progress_timeout", NO_PROGRESS_TIMEOUT),
           "scheduler_timeout": node.get("scheduler_timeout") or SCHEDULER_TIMEOUT}
    return {k: (float(v) if v is not None else None) for k, v in out.items()}


class Watchdog:
    """A check for ``run_sweep(checks=[watchdog])``; see the module docstring.

    Timeouts are in seconds; ``None`` disables one. ``clock`` is injectable for tests.
    """

    def __init__(self, client, *, no_workers_timeout: float | None = NO_WORKERS_TIMEOUT,
                 no_progress_timeout: float | None = NO_PROGRESS_TIMEOUT,
                 scheduler_timeout: float = SCHEDULER_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.no_workers_timeout = no_workers_timeout
        self.no_progress_timeout = no_progress_timeout
        self.scheduler_timeout = scheduler_timeout
        self.clock = clock
        now = clock()
        self.workers: set[str] = set()
        self.workers_seen_at = now  # last time the cluster had a worker (or we started)
        self.none_left_said_at: float | None = None  # "no Dask workers left" on the terminal
        self.back_at: float | None = None  # when workers last joined an empty cluster
        self.progress_at = now  # last time a task finished (or nothing was queued)
        self.pending: set = set()
        self.scheduler_ok_at = now
        self.unanswered_since: float | None = None  # a remote scheduler's first unanswered call
        self.restarts = 0  # LocalCluster restarts since a batch last returned its points
        # Batches that returned their points, counted on the client's event loop as their
        # futures finish (by the next check the driver has taken and released them: a batch
        # gone from the client's futures may as well have been lost or cancelled).
        self.returned = 0
        self.returned_seen = 0  # self.returned at the last check
        self.watched: set = set()  # keys of the pending futures counted when they finish
        self.n_local = self._local_size()
        self.grace_until = float("-inf")
        # Set by the sweep's driver loop: given the no-progress limit, it stores as failed the
        # points running longer than it (a hung point, with no task_timeout to bound it, was
        # rerun at each restart, its batch split over hours, until Dask gave up on it).
        # It returns a hung_points.Stuck: the workers of the points it stored, and how long
        # the longest other running point has run.
        self.on_stuck: Callable[[float], object] | None = None
        self.ever_had_workers = False
        # A batch-system cluster starts with no worker while its jobs queue: that wait is the
        # cluster's worker_start_timeout, so the no-worker clock starts at the first worker.
        self.batch_system = self.n_local is None and getattr(client, "cluster", None) is not None

    def __call__(self) -> None:
        self.check()

    # ------------------------------------------------------------------ the check
    def check(self) -> None:
        now = self.clock()
        # the probe first: a silence another call of the driver met (a gather, say) is
        # confirmed or cleared by it before it can count as a lost scheduler
        workers = self._current_workers()
        self._check_scheduler(now)
        if workers is not None:
            self._log_membership(workers)
            if workers:
                self.workers_seen_at = now
                self.ever_had_workers = True
        self._check_progress(now)
        waiting_for_first = self.batch_system and not self.ever_had_workers
        if (self.no_workers_timeout is not None and not waiting_for_first
                and now - self.workers_seen_at > self.no_workers_timeout):
            self._recover_or_raise(NoWorkers(
                f"no Dask worker for {now - self.workers_seen_at:.0f} s "
                f"(watchdog.no_workers_timeout={self.no_workers_timeout:g}); "
                f"{len(self.pending)} batch(es) waiting"))
        if (self.no_progress_timeout is not None and self.pending
                and now - self.progress_at > self.no_progress_timeout
                and now >= self.grace_until):
            # points that never return: stored failed first. That is progress (each has its
            # result): hung points one after another must not use up the restarts and end
            # the sweep, as a restart that achieved nothing would.
            stuck = self.on_stuck(self.no_progress_timeout) if self.on_stuck else None
            if stuck is not None and stuck.workers:
                self.restarts = 0
                if self.n_local is None:  # no LocalCluster to restart (a batch system, an
                    # address): the sweep stopped here with exit 3, its batch's other points
                    # unrun, where cluster=local went on
                    self._restart_workers_of_hung_points(stuck.workers)
                    return
            elif stuck is not None and stuck.longest_s is not None \
                    and stuck.longest_s < self.no_progress_timeout:
                # Every running point started less than the limit ago, each after a point
                # finished: points progress inside batches not returned yet. The limit now
                # counts from the start of the longest, which is stored as hung if it
                # reaches it (restarted, a healthy batch longer than the limit was lost).
                runlog.info("no batch returned for %.0f s, but the longest running point "
                            "started %.0f s ago: no restart", now - self.progress_at,
                            stuck.longest_s)
                self.progress_at = now - stuck.longest_s
                return
            self._recover_or_raise(NoProgress(
                f"no task finished for {now - self.progress_at:.0f} s "
                f"(watchdog.no_progress_timeout={self.no_progress_timeout:g}) with "
                f"{len(self.pending)} batch(es) queued on {len(self.workers)} worker(s)"))

    def _check_scheduler(self, now: float) -> None:
        status = str(getattr(self.client, "status", "running"))
        silent = [now - self.unanswered_since] if self.unanswered_since is not None else []
        if self.unanswered_since is not None:  # the probe just met it too
            silent.append(scheduler_silent_for(self.client) or 0.0)
        if status == "running" and silent and max(silent) > self.scheduler_timeout:
            # A frozen scheduler (its connection open, no answer) leaves the client "running":
            # counted on status alone, it was never lost, and the sweep waited for
            # no_progress_timeout (an hour) instead of scheduler_timeout.
            raise SchedulerLost(
                f"lost the Dask scheduler {self._scheduler_address()} (no answer for "
                f"{max(silent):.0f} s); the sweep cannot go on")
        if status == "running":
            self.scheduler_ok_at = now
            return
        if status in ("closed", "closing", "failed") or now - self.scheduler_ok_at > self.scheduler_timeout:
            raise SchedulerLost(
                f"lost the Dask scheduler {self._scheduler_address()} (client {status} for "
                f"{now - self.scheduler_ok_at:.0f} s); the sweep cannot go on")

    def _check_progress(self, now: float) -> None:
        # Client-side future states only (no scheduler round trip): a batch that left the
        # pending state since the last check finished, failed or was consumed by the driver.
        try:
            states = [(k, st) for k, st in list(self.client.futures.items())
                      if st.status == "pending"]
        except (AttributeError, RuntimeError):
            return
        pending = {k for k, _ in states}
        if not pending or (self.pending - pending):
            self.progress_at = now
        self.pending = pending
        self._watch_returns(states)
        if self.returned != self.returned_seen:  # real progress: restarts start from 0 again
            self.returned_seen = self.returned
            self.restarts = 0

    def _watch_returns(self, states: list) -> None:
        """Count each of these pending futures in ``self.returned`` if it finishes (not when it
        is lost with its worker, cancelled or released first)."""
        loop = getattr(self.client, "loop", None)
        if loop is None:
            return
        for key, state in states:
            # by state too: a lost batch's old watch may end after its recomputation's began
            watch = (key, id(state))
            if watch not in self.watched:
                self.watched.add(watch)
                loop.add_callback(self._count_return, watch, state)

    async def _count_return(self, watch, state) -> None:
        try:
            await state.wait()  # set when it finishes, errs or is cancelled (or released)
            if state.status == "finished":
                self.returned += 1  # (on the event loop only; the driver loop only reads it)
        finally:
            self.watched.discard(watch)  # pending again later (lost, recomputed): watched again

    # ------------------------------------------------------------------ workers
    def _current_workers(self) -> set[str] | None:
        """Worker addresses, or None if unknown right now. The scheduler object of an
        embedded cluster (LocalCluster, dask-jobqueue) is read in place; a remote one is asked
        with a bound."""
        scheduler = embedded_scheduler(self.client)
        if scheduler is not None:
            return workers_in_place(scheduler)
        asked = self.clock()
        try:
            workers = set(ask_scheduler(self.client, self.client.scheduler.ncores,
                                        timeout=SCHEDULER_CALL_TIMEOUT))
        except Exception:
            if self.unanswered_since is None:
                self.unanswered_since = asked
            return None
        self.unanswered_since = None
        return workers

    def _log_membership(self, workers: set[str]) -> None:
        for w in sorted(workers - self.workers):
            runlog.info("worker joined: %s (%d now)", w, len(workers))
            # (not a reason to reset self.restarts: a restart's workers always join)
        for w in sorted(self.workers - workers):
            runlog.info("worker left: %s (%d now)", w, len(workers))
        now = self.clock()
        if workers and not self.workers:
            self.back_at = now
        if self.workers and not workers:
            # a point that kills its worker empties a small cluster at each attempt (each a
            # restart in a second): once on the terminal, the repeats in the run log; after a
            # minute with workers, an outage is news again
            repeat = (self.none_left_said_at is not None
                      and now - self.none_left_said_at < NO_WORKERS_REPEAT_S
                      and (self.back_at is None or now - self.back_at < NO_WORKERS_BACK_S))
            (runlog.warning if repeat else log.warning)(
                "no Dask workers left; waiting for workers to (re)join")
            if not repeat:
                self.none_left_said_at = now
        self.workers = workers

    def _local_size(self) -> int | None:
        from distributed import LocalCluster

        cluster = getattr(self.client, "cluster", None)
        return len(cluster.worker_spec) if isinstance(cluster, LocalCluster) else None

    def _recover_or_raise(self, problem: SweepAborted) -> None:
        cluster = getattr(self.client, "cluster", None)
        if self.clock() < self.grace_until:
            return
        if self.n_local is None or self.restarts >= LOCAL_RESTARTS:
            if self.restarts:
                raise type(problem)(f"{problem}; {self.restarts} worker restart(s) did not help")
            raise problem
        self.restarts += 1
        log.warning("%s: restarting the LocalCluster's %d worker(s) (attempt %d of %d)",
                    problem, self.n_local, self.restarts, LOCAL_RESTARTS)
        # Every old worker (dead nannies included: a nanny that gave up stays in the spec, so
        # scale(n) alone would do nothing) is closed and removed first, then fresh ones start.
        # Queued batches move to them.
        cluster.scale(0)
        with contextlib.suppress(Exception):
            cluster.sync(cluster._correct_state, callback_timeout=SCHEDULER_CALL_TIMEOUT * 6)
        cluster.scale(self.n_local)
        now = self.clock()
        self.workers_seen_at = self.progress_at = now
        self.grace_until = now + LOCAL_START_GRACE

    def _restart_workers_of_hung_points(self, workers: set[str]) -> None:
        """The workers running points just stored as hung end their processes, as after a
        task_timeout (a hung thread cannot be stopped in place): their nannies start fresh
        ones, a worker without one leaves (:func:`batch.end_for_hung_point`)."""
        from pipeline.engine.batch import end_for_hung_point

        log.warning("restarting %d worker(s) whose point never returned: %s", len(workers),
                    ", ".join(sorted(workers)))
        try:
            answers = ask_scheduler(self.client, self.client._run, end_for_hung_point,
                                    workers=sorted(workers), on_error="return", wait=True,
                                    timeout=SCHEDULER_CALL_TIMEOUT * 2)
            runlog.info("workers ended to restart: %s", answers)
        except Exception as exc:  # a silent scheduler: the sweep goes on, its limits count
            log.warning("could not restart %s (%s); each keeps a thread on its hung point",
                        ", ".join(sorted(workers)), exc)
        self.progress_at = self.clock()  # the stored points are progress; the limit counts again

    def _scheduler_address(self) -> str:
        try:
            return str(self.client.scheduler.address)
        except Exception:
            return "?"


class TimeoutEvents:
    """Points reported by the workers as running over ``task_timeout`` (a distributed event
    topic; the worker then exits and its nanny starts a fresh one). Thread-safe: the handler runs
    on the client's event loop, :meth:`drain` on the driver loop."""

    def __init__(self, client, topic: str):
        self.client, self.topic = client, topic
        self.lock = threading.Lock()
        self.events: list[dict] = []
        client.subscribe_topic(topic, self._handle)

    def _handle(self, event) -> None:
        _, msg = event
        with self.lock:
            self.events.append(dict(msg))

    def drain(self) -> list[dict]:
        with self.lock:
            out, self.events = self.events, []
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)


class Terminated(KeyboardInterrupt):
    """SIGTERM/SIGHUP, handled like Ctrl-C; ``exit_code`` is 128 + the signal number."""

    def __init__(self, signum: int):
        self.signame = signal.Signals(signum).name
        super().__init__(self.signame)
        self.signum = signum
        self.exit_code = 128 + signum


LEAVE_NOW_MESSAGE = ("\nleaving now, without waiting for the shutdown: part files already "
                     "written are safe; a rerun resumes (and recomputes what was not flushed)")
STILL_SAVING_MESSAGE = ("\nstill saving results and shutting down (each step is bounded); send "
                        "it again to leave at once")
# A SIGTERM (or SIGHUP) that comes again this soon is the same request: `scancel` signals every
# process of the job, and scripts/driver.sbatch passes its own on to the driver, ~10 ms apart.
# Taken for "again", it skipped keeping the points of the batches in flight. A second Ctrl-C
# is always a person's "again".
ECHO_SECONDS = 1.0
_SHUTTING_DOWN = threading.Event()
_HURRIED = threading.Event()  # a signal came again during the shutdown


def shutdown_started() -> None:
    """The sweep is handling an interrupt (flushing, closing its cluster): from now on, within
    :func:`termination_signals`, a repeated signal is patient."""
    _SHUTTING_DOWN.set()


def shutdown_called_off() -> None:
    """Back to running after a step that failed and was cleaned up (a cluster start, closed,
    to be tried again). A signal that came meanwhile is raised instead: one held by
    :func:`signals_held` in the step (an error ended it before the signal was raised there),
    or one during the clean-up."""
    if _UNRAISED:
        raise _interrupt(_UNRAISED.pop())
    if _HURRIED.is_set():
        raise KeyboardInterrupt
    _SHUTTING_DOWN.clear()


def shutdown_hurried() -> bool:
    """A signal came again while the shutdown ran: optional waits (the batches in flight
    returning what they ran) are cut short; the flush and the record still happen."""
    return _HURRIED.is_set()


def _interrupt(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


_HELD: list[int] | None = None  # signals held by signals_held(); None outside it
# A signal held by a block that then ended in an error: never raised there (the error went
# on instead), so shutdown_called_off() raises it before a caller tries the step again.
_UNRAISED: list[int] = []


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Within :func:`termination_signals`, a first SIGINT/SIGTERM/SIGHUP waits for the end of
    the block, and is raised there; a second one is raised at once (a block stuck on a hung
    disk never holds Ctrl-C for good). For steps that must not be cut in two: the driver
    storing results it has taken from the cluster (raised between taking and storing, it lost
    them: a rerun recomputed them). Only in the main thread, where handlers run."""
    global _HELD
    if _HELD is not None or threading.current_thread() is not threading.main_thread():
        yield  # nested, or no handler can run here
        return
    _HELD = []
    try:
        yield
    except BaseException:
        if _HELD:
            _UNRAISED[:] = _HELD[:1]
        raise
    finally:
        held, _HELD = _HELD, None
    if held:
        raise _interrupt(held[0])


@contextlib.contextmanager
def termination_signals() -> Iterator[None]:
    """Turn SIGTERM (``scancel``, ``timeout``, ``kill``) and SIGHUP (the terminal closed; not
    when ignored, as under ``nohup``) into :class:`Terminated` in the main thread for the
    duration of the block, and make a repeated signal patient once the shutdown has started
    (:func:`shutdown_started`, called where the interrupt is handled: a first interrupt
    swallowed on its way, say in a ``__del__``, must not leave Ctrl-C unable to stop the sweep). Until then every SIGINT/SIGTERM/SIGHUP raises.
    During the shutdown (the flush, ``interrupted`` recorded, the cluster closed, each step
    bounded) the next signal only says that it is under way (raised there, it cut the flush or
    the cluster's close short and left Dask's exit handler a traceback); the one after leaves
    at once (``os._exit``, 128 + signal number: the part files written are safe, the local
    workers follow their parent)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import os
    import sys

    repeats = 0
    last = [None, float("-inf")]  # the last signal and when it came

    def handle(signum, _frame):
        nonlocal repeats
        now = time.monotonic()
        echo = signum != signal.SIGINT and signum == last[0] and now - last[1] < ECHO_SECONDS
        if echo:  # one scancel, delivered twice: to the driver, and by driver.sbatch's trap
            return
        last[:] = [signum, now]  # the window opens at a signal acted on, and does not slide
        if not _SHUTTING_DOWN.is_set():
            if _HELD is not None and not _HELD:  # inside signals_held(): the first waits
                _HELD.append(signum)
                return
            if _HELD:  # the second, raised at once: it is also the shutdown's "again",
                _HURRIED.set()  # so the next one leaves at once
                repeats = 1
                line_ended()  # (the message's newline ends a progress line)
                print(STILL_SAVING_MESSAGE, file=sys.stderr, flush=True)
            raise _interrupt(signum)
        repeats += 1
        _HURRIED.set()
        line_ended()  # (the messages' newline ends a progress line)
        if repeats == 1:
            print(STILL_SAVING_MESSAGE, file=sys.stderr, flush=True)
            return
        print(LEAVE_NOW_MESSAGE, file=sys.stderr, flush=True)
        os._exit(128 + signum)

    wanted = [signal.SIGTERM]
    # Not a SIGHUP the caller ignores: `nohup run.py &` asks for the sweep to outlive the
    # terminal (handled, it ended the sweep with 129 at logout). Nor an ignored SIGINT (`&`).
    hup = getattr(signal, "SIGHUP", None)
    if hup is not None and signal.getsignal(hup) is not signal.SIG_IGN:
        wanted.append(hup)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        wanted.append(signal.SIGINT)
    _SHUTTING_DOWN.clear()
    _HURRIED.clear()
    _UNRAISED.clear()
    saved = {s: signal.signal(s, handle) for s in wanted}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        _SHUTTING_DOWN.clear()
        _HURRIED.clear()
        _UNRAISED.clear()
