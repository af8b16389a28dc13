"""Distributed batch-experiment pipeline for privacy on networked data and lattice enumeration.

``pipeline.load(results_dir, name)`` returns an experiment's whole result table.
"""

__version__ = "0.1.0"


def load(results_dir, name, status=None, version=None):
    """The result table of experiment ``name`` under ``results_dir``, deduplicated by task id.

    ``status="ok"`` keeps successful rows only; ``version="latest"`` (or an int) keeps one
    experiment version.
    """
    from pipeline.store.parquet import load as _load

    return _load(results_dir, name, status=status, version=version)
