"""Distributed batch-experiment pipeline for privacy on networked data and lattice enumeration.

``pipeline.load(results_dir, name)`` returns an experiment's whole result table.
"""

__version__ = "0.1.0"


def load(results_dir, name, status=None, version=None, on_error="raise"):
    """The result table of experiment ``name`` under ``results_dir``, deduplicated by task id.

    ``status="ok"`` keeps successful rows only; ``version="latest"`` (or an int) keeps one
    experiment version. A damaged part file raises ``pipeline.store.integrity.BadPartFile``
    naming it and the repair command (``python -m pipeline verify DIR --repair``);
    ``on_error="skip"`` leaves damaged parts out with a warning.
    """
    from pipeline.store.parquet import load as _load

    return _load(results_dir, name, status=status, version=version, on_error=on_error)
