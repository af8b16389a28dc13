"""Distributed batch-experiment pipeline for privacy on networked data and lattice enumeration.

``pipeline.load(results_dir, name)`` returns an experiment's whole result table.
"""

__version__ = "0.1.0"


def load(results_dir, name, status=None):
    """The result table of experiment ``name`` under ``results_dir`` (deduplicated by task id)."""
    from pipeline.store.parquet import load as _load

    return _load(results_dir, name, status=status)
