"""One helper for the engine's log filters (driver and workers alike): Dask and tornado log
some expected events of a shutdown or a fault as tracebacks, and each filter that quiets one is
installed once per process, however often the code that needs it runs."""

from __future__ import annotations

import logging


def add_filter_once(logger_name: str, kind: type[logging.Filter]) -> None:
    """Add an instance of ``kind`` to the logger ``logger_name`` unless it already has one."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, kind) for f in logger.filters):
        logger.addFilter(kind())
