"""Preloaded into every worker process of ``cluster=local`` (``LocalCluster(preload=...)``).

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the driver, and
the LocalCluster's worker processes, which it spawned. Each worker then died on its own
(asyncio's SIGINT handler cancelled it) and printed a screenful of Dask tracebacks over the
driver's "interrupted" message. The driver owns the shutdown: it closes its workers itself,
so a worker ignores SIGINT (SIGTERM and the nanny's kill still end it).

These workers write to the sweep's terminal, and their scheduler lives in the driver's
process. When the driver closes the cluster at the end of a sweep, a worker whose heartbeat
was under way when the scheduler went logged Dask's "Failed to communicate with scheduler
during heartbeat" with a traceback (seen on a loaded machine, after a sweep that had
finished well). Here it can only mean that the driver is closing or gone: not shown.
"""

from __future__ import annotations

import logging
import signal
import threading

HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat"


class _NoHeartbeatFailure(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(HEARTBEAT_FAILURE)


def dask_setup(worker) -> None:  # noqa: ARG001  (Dask's preload hook)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _NoHeartbeatFailure) for f in quiet.filters):
        quiet.addFilter(_NoHeartbeatFailure())
