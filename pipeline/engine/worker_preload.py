"""Preloaded into every worker process of ``cluster=local`` (``LocalCluster(preload=...)``).

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the driver, and
the LocalCluster's worker processes, which it spawned. Each worker then died on its own
(asyncio's SIGINT handler cancelled it) and printed a screenful of Dask tracebacks over the
driver's "interrupted" message. The driver owns the shutdown: it closes its workers itself,
so a worker ignores SIGINT. A closed terminal (SIGHUP) and ``scancel``/``systemctl stop``
(SIGTERM) also signal the whole group: the workers died at once, and the driver, asking its
batches in flight to return the points they ran, kept none ("6 batches not kept", then
tracebacks). A worker given SIGHUP or SIGTERM now leaves the driver ``DRIVER_GRACE_S`` to
close it (the nanny's stop message, then SIGKILL: neither is a signal it handles), and ends
by itself only after that: a SIGTERM meant for the worker alone still ends it.

These workers write to the sweep's terminal, and their scheduler lives in the driver's
process. When the driver closes the cluster at the end of a sweep, a worker whose heartbeat
was under way when the scheduler went logged Dask's "Failed to communicate with scheduler
during heartbeat" with a traceback (seen on a loaded machine, after a sweep that had
finished well). Here it can only mean that the driver is closing or gone: not shown.

Test hook: with ``PIPELINE_FAIL_WORKER_START_ONCE=PATH``, the first worker to create ``PATH``
dies while it starts, a second later (a real "Nanny failed to start", with time for a test to
send a signal meanwhile); see ``cluster.connect``'s retry.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from pipeline.engine.log_filters import add_filter_once

HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat"
DRIVER_GRACE_S = 30.0  # > the driver's wait for its batches in flight (INTERRUPT_KEEP_SECONDS)


class _NoHeartbeatFailure(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(HEARTBEAT_FAILURE)


FAIL_START_ENV = "PIPELINE_FAIL_WORKER_START_ONCE"


def _fail_start_once() -> None:
    marker = os.environ.get(FAIL_START_ENV)
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    import time

    time.sleep(1.0)
    os._exit(1)


def dask_setup(worker) -> None:  # noqa: ARG001  (Dask's preload hook)
    _fail_start_once()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in (signal.SIGHUP, signal.SIGTERM):
            if signal.getsignal(signum) is not signal.SIG_IGN:  # nohup's SIGHUP stays ignored
                signal.signal(signum, _end_unless_the_driver_closes_us)
    add_filter_once("distributed.worker", _NoHeartbeatFailure)


def _end_unless_the_driver_closes_us(signum, _frame) -> None:
    ender = threading.Timer(DRIVER_GRACE_S, os._exit, args=(128 + signum,))
    ender.daemon = True  # a worker closed by the driver meanwhile exits without waiting for it
    ender.start()
