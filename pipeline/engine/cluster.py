"""Dask clusters from the ``cluster:`` config node: :func:`connect` yields a client of an
embedded ``LocalCluster`` (``kind: local``), of a running scheduler (``kind: address``) or of a
batch-system cluster (:mod:`pipeline.engine.batch_cluster`), and tears down what it started
within bounded time. The keys are checked by :mod:`pipeline.engine.cluster_config`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
from typing import Any, Callable, Iterator, Mapping

import dask

from pipeline.engine.address import (SchedulerCheckFailed, check_security, make_security,
                                     probe_scheduler)
from pipeline.engine.batch_cluster import (batch_commands, cancel_command, make_batch_cluster,
                                           remove_tls_folder)
from pipeline.engine.cluster_config import (BATCH_SYSTEMS, LOCAL_DASHBOARD, ClusterConfigError,
                                            setting, validate)
from pipeline.engine.log_filters import add_filter_once
from pipeline.store.redact import redact

log = logging.getLogger("pipeline")
# Worker deaths a task may be present at before the scheduler gives up on it (Dask's default
# is 3), on the schedulers we start. The driver splits a lost batch and retries a lost single
# point itself (runner.py), so each extra allowance only multiplies the worker restarts a
# point that kills its worker costs.
ALLOWED_FAILURES = 1
SCHEDULER_CONFIG = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}

CLOSE_TIMEOUT_S = 30
# A local cluster whose start fails (a worker process dying as it starts: "Nanny failed to
# start", seen once on a heavily loaded machine) is closed and started once more before the
# sweep gives up: an unattended sweep should not end on one transient failure.
LOCAL_START_ATTEMPTS = 2
# SpecCluster closes for good a worker the scheduler lost if none of its name is back 15 s
# later (distributed.deploy.lost-worker-timeout: meant for batch jobs cut off from the
# scheduler). A LocalCluster's nanny restarts its dead worker itself, and a point that kills
# its worker again and again left a moment with none back at that instant: the nanny was
# closed, no worker remained, and the sweep stalled 10-40 s until the watchdog restarted the
# cluster (a poison point on 1 worker: 17 s -> 65 s). So not on a LocalCluster; a worker that
# never comes back is the watchdog's (no_workers_timeout), and the cluster's close ends any.
LOCAL_CLUSTER_CONFIG = {"distributed.deploy.lost-worker-timeout": "365 days"}


def _bounded(what: str, fn: Callable[[], Any], seconds: float) -> bool:
    """Run a teardown step in a daemon thread and stop waiting for it after ``seconds``."""
    done = threading.Event()

    def run():
        try:
            fn()
        except Exception as exc:  # teardown errors are not the sweep's result
            log.debug("%s: %s", what, exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"close-{what}", daemon=True).start()
    if not done.wait(seconds):
        log.warning("%s did not finish within %.0f s; moving on", what, seconds)
        return False
    return True


@contextlib.contextmanager
def _closed_if_half_built(outcome: dict | None = None):
    """Close a cluster whose construction was cut short (Ctrl-C, SIGTERM while its workers
    start). Dask's exit handler closed it otherwise, and failed with ``AssertionError:
    Status.init`` on a worker that had not started: a traceback after the sweep's own clean
    "interrupted" message. Closed here within a bound, then marked closed for that handler."""
    from distributed.core import Status
    from distributed.deploy.spec import SpecCluster

    from pipeline.engine.watchdog import shutdown_started

    before = set(SpecCluster._instances)
    try:
        yield
    except BaseException as exc:
        # A second Ctrl-C (or each nanny's share of a process-group signal) now waits for
        # the close: raised, it cut the close short, and Dask's exit handler then closed
        # the cluster again, silently, for 40 s after "interrupted" was printed.
        shutdown_started()
        if isinstance(exc, KeyboardInterrupt):  # (a real start-up error keeps its logs)
            # nannies whose start the close cuts short log "failed to start" tracebacks
            logging.getLogger("distributed.nanny").setLevel(logging.CRITICAL)
        closed = True
        for cluster in set(SpecCluster._instances) - before:
            try:
                closed &= _bounded("cluster.close",
                                   lambda: cluster.close(timeout=CLOSE_TIMEOUT_S),
                                   CLOSE_TIMEOUT_S + 5)
            finally:
                cluster.status = Status.closed
        if outcome is not None:
            outcome["closed"] = closed
        # the nanny starts this close cut short end in "Task exception was never retrieved"
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise


def check_scheduler(cfg: Mapping[str, Any]) -> None:
    """``cluster=address``: check, within ``cluster.timeout``, that the peer at
    ``cluster.address`` answers as a Dask scheduler (the TLS handshake included). Raises
    :class:`ClusterConfigError` (bad input: exit 2, called before anything is written) when
    something answers but not as a Dask scheduler, or the TLS handshake fails. A scheduler
    that cannot be reached at all (refused, no route, timeout) is not bad input: it may be
    starting or briefly down, so that is left to the client (exit 3, as any lost scheduler)."""
    if setting(cfg or {}, "kind", "local") != "address":
        return
    from dask.utils import parse_timedelta

    security = make_security(check_security(cfg))
    try:
        probe_scheduler(str(cfg["address"]),
                        security, parse_timedelta(str(setting(cfg, "timeout", "30s"))))
    except SchedulerCheckFailed as exc:
        raise ClusterConfigError(redact(str(exc))) from None
    except OSError:
        pass  # unreachable: the client reports it in its own words when the sweep connects


class _HandledSchedulerErrorsAreWarnings(logging.Filter):
    """The scheduler we host logs an ERROR for faults the engine handles itself: each worker a
    broadcast could not reach (a worker frozen or lost while the driver asked batches to
    stop, a failure our callers ignore); each batch lost with the workers that ran it (the
    engine splits it down to the point that kills workers, and records that point as failed
    with the cause); each result it could not fetch from a worker that died (the batch is run
    again). Warnings: in the run log, and on ``cluster=local`` (whose Dask terminal output is
    errors only) not on the terminal, where the sweep says what it did about them."""

    HANDLED = ("broadcast to ", "Task %s marked as failed because %d workers died",
               "Couldn't gather keys")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith(self.HANDLED):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _quiet_resource_tracker() -> None:
    """Leaving at once on a third Ctrl-C (``os._exit``) ends the driver with its workers'
    semaphores registered; multiprocessing's resource tracker removes them and warns about
    "leaked semaphore objects", which read as a fault after "leaving now". It takes its
    warning filters from ours when it starts, with the first cluster."""
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)
    # A closed terminal's SIGHUP reaches the whole process group: the tracker (which ignores
    # SIGINT and SIGTERM itself) died of it, and the one started in its place printed a
    # KeyError traceback for each semaphore it had never seen. Started with SIGHUP blocked
    # (a child inherits the mask), it outlives the hangup, as the workers do.
    from multiprocessing import resource_tracker

    if threading.current_thread() is threading.main_thread():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
        try:
            resource_tracker.ensure_running()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _handled_scheduler_errors_as_warnings() -> None:
    add_filter_once("distributed.scheduler", _HandledSchedulerErrorsAreWarnings)


class _SignalBeforeASyncCallStarted(logging.Filter):
    """A Ctrl-C or SIGTERM that lands while a blocking Client call waits for the event loop to
    start it: distributed's ``sync()`` (2026.8) then schedules a ``cancel`` that reads its
    future before it is assigned, and tornado logs the NameError with a traceback. Seen once on
    the terminal of a sweep that stopped as it should (a loaded CI machine). The call had not
    started; it runs, and its answer is dropped: nothing for the user to see."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NameError) and isinstance(record.args, tuple)
                    and record.args and "sync.<locals>.cancel" in repr(record.args[0]))


def quiet_signals_before_sync_calls() -> None:
    """Install :class:`_SignalBeforeASyncCallStarted` (idempotent)."""
    add_filter_once("tornado.application", _SignalBeforeASyncCallStarted)


LOGIN_NODE_WORKERS = 4  # cluster=local's default on a batch system's login node
BATCH_JOB_VARIABLES = tuple(v for system in BATCH_SYSTEMS.values() for v in system.job_variables)


def default_local_workers(cores: int, environ: Mapping[str, str] | None = None,
                          which: Callable[[str], str | None] = shutil.which
                          ) -> tuple[int, list[str]]:
    """``cluster.n_workers=null``: one worker per core this process may use, except on what
    looks like a batch system's login node (its submit command on PATH, this process not in
    one of its jobs), shared by everyone, where a default sweep took every core: at most
    :data:`LOGIN_NODE_WORKERS`. Returns (workers, the batch-system kinds whose submit command
    was found when capped, else [])."""
    environ = os.environ if environ is None else environ
    if cores <= LOGIN_NODE_WORKERS or any(environ.get(v) for v in BATCH_JOB_VARIABLES):
        return cores, []
    found = [kind for kind in BATCH_SYSTEMS if which(batch_commands(kind)[0])]
    return (LOGIN_NODE_WORKERS, found) if found else (cores, [])


def _loop_deaf_to_sigint():
    """A started Dask event loop thread for a LocalCluster, with SIGINT blocked in it, so in
    the threads it starts and in the worker processes they spawn (a signal mask is inherited
    by a new thread and across exec). Ctrl-C in a terminal reaches the whole process group: a
    worker ignores SIGINT once its preload runs (worker_preload.py), but one still importing
    Dask died of it with a KeyboardInterrupt traceback on the terminal (2 of 6 Ctrl-Cs 1.8 s
    into a sweep). The driver's main thread still takes every Ctrl-C: it only held one
    pending for the instant the thread took to start."""
    from distributed.utils import LoopRunner

    runner = LoopRunner()
    try:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            runner.start()
        finally:  # (a Ctrl-C held meanwhile is raised here, with the thread up)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    except BaseException:
        _stop_runner(runner)
        raise
    return runner


def _stop_runner(runner) -> None:
    if runner is not None:
        _bounded("loop.stop", runner.stop, 15)


def stop_loop(cluster) -> None:
    """Stop the event loop thread of a cluster started by :func:`_start_local_cluster`, after
    the cluster and its clients are closed (bounded)."""
    _stop_runner(getattr(cluster, "pipeline_loop_runner", None))


def _start_local_cluster(cfg: Mapping[str, Any], n_workers: int, profile: bool,
                         log: logging.Logger):
    """A started ``LocalCluster``, tried :data:`LOCAL_START_ATTEMPTS` times; its event loop
    (:func:`_loop_deaf_to_sigint`) is stopped by :func:`stop_loop`."""
    from distributed import LocalCluster

    from pipeline.engine.watchdog import shutdown_called_off, signals_held

    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        outcome: dict = {}
        runner = None
        try:
            # A first Ctrl-C waits the few seconds until the workers are up (then the cluster
            # closes as usual): cut short, a worker's spawn could be left half-written at exit
            # (an EOFError traceback from the child). A second one is raised at once.
            with dask.config.set({**SCHEDULER_CONFIG,
                                  "distributed.worker.profile.enabled": profile}), \
                    _closed_if_half_built(outcome), signals_held(), warnings.catch_warnings():
                # another sweep (or user) on the default port: Dask's raw warning, with its
                # source line, said what "local cluster up; dashboard: URL" says next
                warnings.filterwarnings("ignore", message=r"Port \d+ is already in use",
                                        category=UserWarning)
                runner = _loop_deaf_to_sigint()
                cluster = LocalCluster(
                    loop=runner.loop,
                    n_workers=n_workers,
                    threads_per_worker=int(setting(cfg, "threads_per_worker", 1)),
                    processes=True,
                    memory_limit=setting(cfg, "memory_limit", "auto"),
                    # loopback by default: the dashboard is unauthenticated (README, SSH tunnel)
                    dashboard_address=str(setting(cfg, "dashboard_address", LOCAL_DASHBOARD)),
                    silence_logs=logging.ERROR,
                    # TLS with throwaway credentials held by this process and its workers: a
                    # scheduler on plain tcp:// 127.0.0.1 let any user of a shared login node
                    # connect a Client and run code as us (client.run); its port is in `ss -ltn`
                    security=True,
                    # Ctrl-C reaches the workers too (one process group): they leave the
                    # shutdown to the driver instead of dying with tracebacks on the terminal
                    preload=["pipeline.engine.worker_preload"],
                )
                cluster.pipeline_loop_runner = runner
                return cluster
        except BaseException as exc:  # (closed by _closed_if_half_built)
            if outcome.get("closed", True):
                _stop_runner(runner)
            if not isinstance(exc, Exception):
                raise
            # not over a cluster whose close did not finish: its workers may still run
            if attempt == LOCAL_START_ATTEMPTS or not outcome.get("closed", True):
                raise
            try:
                shutdown_called_off()  # a Ctrl-C during the start or its close: leave
            except KeyboardInterrupt as interrupt:
                raise interrupt from exc
            log.warning("the local cluster failed to start (%s: %s); starting it again "
                        "(attempt %d of %d)", type(exc).__name__, exc, attempt + 1,
                        LOCAL_START_ATTEMPTS)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def connect(cfg: Mapping[str, Any], log: logging.Logger, probe: bool = True) -> Iterator[Any]:
    """Yield a connected ``distributed.Client``; tear down what was started on exit, within
    bounded time (a stuck scheduler or batch command cannot hold the exit). ``probe=False``:
    the caller already ran :func:`check_scheduler` (the CLI does, before writing anything)."""
    from distributed import Client

    validate(cfg)
    quiet_signals_before_sync_calls()
    kind = setting(cfg, "kind", "local")
    if kind == "address":
        address, timeout = str(cfg["address"]), str(setting(cfg, "timeout", "30s"))
        security = make_security(check_security(cfg))
        if probe:  # a bounded identity check first: a wrong service must not hang or misparse
            from dask.utils import parse_timedelta

            try:
                probe_scheduler(address, security, parse_timedelta(timeout))
            except SchedulerCheckFailed as exc:
                raise type(exc)(redact(str(exc))) from None
            except OSError:
                pass  # nothing listening: the client below reports it in its own words
        client = Client(address, timeout=timeout, security=security)
        log.info("connected to scheduler %s (dashboard %s)", redact(address), client.dashboard_link)
        try:
            yield client
        finally:
            _bounded("client.close", lambda: client.close(timeout=10), 15)
        return
    with contextlib.ExitStack() as held:  # settings that last as long as the cluster
        _handled_scheduler_errors_as_warnings()  # the scheduler runs in this process from here on
        _quiet_resource_tracker()
        if kind in BATCH_SYSTEMS:
            with dask.config.set(SCHEDULER_CONFIG):
                cluster = make_batch_cluster(cfg)
        else:
            # The cores this process may use (affinity, cgroup quota: a SLURM job's
            # allocation, `taskset`), not the machine's: os.cpu_count() started a worker per
            # core of the node.
            from dask.system import CPU_COUNT

            n_workers = cfg.get("n_workers")
            if n_workers and CPU_COUNT and int(n_workers) > 2 * CPU_COUNT:
                log.warning("cluster.n_workers=%d worker processes on %d core(s): each is a Python "
                            "process of its own (about a second of CPU to start, 100+ MB); more "
                            "than the cores only help points that wait (sleep, I/O). Threads "
                            "per worker: cluster.threads_per_worker", int(n_workers), CPU_COUNT)
            if not n_workers:
                n_workers, found = default_local_workers(CPU_COUNT or 1)
                if found:
                    log.info("this looks like a login node of %s (%s on PATH, not inside a job): "
                             "cluster=local starts %d of the %d workers its cores allow "
                             "(cluster.n_workers=N to choose; %s runs the sweep on the cluster)",
                             " or ".join(BATCH_SYSTEMS[k].label for k in found),
                             ", ".join(dict.fromkeys(batch_commands(k)[0] for k in found)),
                             n_workers, CPU_COUNT, " or ".join(f"cluster={k}" for k in found))
            profile = bool(setting(cfg, "worker_profile", False))
            held.enter_context(dask.config.set(LOCAL_CLUSTER_CONFIG))  # (read at each loss)
            cluster = _start_local_cluster(cfg, int(n_workers), profile, log)
        try:
            client = Client(cluster)
        except BaseException:
            from pipeline.engine.watchdog import shutdown_started

            shutdown_started()  # a repeated signal waits for the close (see _closed_if_half_built)
            _bounded("cluster.close", lambda: cluster.close(timeout=CLOSE_TIMEOUT_S),
                     CLOSE_TIMEOUT_S + 5)
            stop_loop(cluster)
            remove_tls_folder(cluster)
            raise
        log.info("%s cluster up; dashboard: %s", kind, client.dashboard_link)
        try:
            yield client
        finally:
            _bounded("client.close", lambda: client.close(timeout=10), 15)
            closed = _bounded("cluster.close", lambda: cluster.close(timeout=CLOSE_TIMEOUT_S),
                              CLOSE_TIMEOUT_S + 5)
            if closed:  # (a loop whose cluster did not close is left to the process's exit)
                stop_loop(cluster)
            remove_tls_folder(cluster)  # workers read them only as they start
            watch = getattr(cluster, "pipeline_watch", None)
            if watch is not None and watch.job_ids and not closed:
                log.warning("some %s jobs may still be queued or running; cancel them with: "
                            "%s %s", BATCH_SYSTEMS[kind].label, cancel_command(kind),
                            " ".join(watch.job_ids))
