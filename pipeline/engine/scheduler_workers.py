"""The workers connected to a scheduler that runs in this process (a ``LocalCluster``'s, or a
batch system's: dask-jobqueue starts its scheduler in the driver), read in place.

Shared by the watchdog (``watchdog.py``, which asks a remote scheduler when there is none here)
and the check for workers on other code (``other_code.py``).
"""

from __future__ import annotations

import time


def embedded_scheduler(client):
    """The scheduler object of ``client``'s cluster when it runs in this process (one with a
    ``workers`` mapping), else None (a scheduler at an address, or no cluster object)."""
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    return scheduler if hasattr(scheduler, "workers") else None


def workers_in_place(scheduler, *, tries: int = 1, pause_s: float = 0.01) -> set[str] | None:
    """The addresses of the workers connected to ``scheduler`` (see :func:`embedded_scheduler`),
    or None if unknown: no such scheduler, or the set changed while it was read (a worker
    joined or left: the mapping's iteration fails) on each of ``tries`` reads, ``pause_s``
    apart. None is never "no worker": callers decide at a later read."""
    for attempt in range(tries):
        if attempt:
            time.sleep(pause_s)
        try:
            return set(list(scheduler.workers))
        except AttributeError:  # no scheduler here
            return None
        except RuntimeError:  # a worker joined or left while it was read
            continue
    return None
