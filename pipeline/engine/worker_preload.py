"""Preloaded into every worker process of ``cluster=local`` (``LocalCluster(preload=...)``).

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the driver, and
the LocalCluster's worker processes, which it spawned. Each worker then died on its own
(asyncio's SIGINT handler cancelled it) and printed a screenful of Dask tracebacks over the
driver's "interrupted" message. The driver owns the shutdown: it closes its workers itself,
so a worker ignores SIGINT (SIGTERM and the nanny's kill still end it).
"""

from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:  # noqa: ARG001  (Dask's preload hook)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
