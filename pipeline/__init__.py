"""Distributed batch-experiment pipeline for privacy on networked data and lattice enumeration.

``pipeline.load(results_dir, name)`` returns an experiment's whole result table.
"""

__version__ = "0.1.0"


STATUSES = (None, "ok", "failed")  # the values of the stored ``status`` column


def load(results_dir, name, status=None, version=None, *, select=None, grid=None, params=None,
         run_id=None, code_id=None, on_error="raise"):
    """The result table of experiment ``name`` under ``results_dir``, deduplicated by task id.

    ``status="ok"`` keeps successful rows only; ``version="latest"`` (or an int, or a list)
    keeps those experiment versions. A selection keeps fewer rows:

    - ``select=["experiment=NAME", "grid.eps=[0.1,0.5]", "params.k=10"]``: exactly the points
      that ``run.py`` with those words would sweep (the YAML's grid, overrides on top);
    - ``grid={...}, params={...}``: exactly the points of that grid (written as in a YAML;
      parameters not given take their declared defaults, not the YAML's);
    - ``run_id=``/``code_id=``: rows written by these runs / computed by this code (a string
      or a list), among each task's latest attempt.

    With a selection ``df.attrs["coverage"]`` says what the rows cover (runs, commits,
    code_ids, missing grid points) and lists warnings.

    A damaged part file raises ``pipeline.store.integrity.BadPartFile`` naming it and the
    repair command (``python -m pipeline verify DIR --repair``); ``on_error="skip"`` leaves
    damaged parts out with a warning.
    """
    from pipeline.report.selection import SelectionError, refuse_empty_filters, versions_of

    if status not in STATUSES:  # a typo ('okk') selected nothing, silently
        raise SelectionError(f"status={status!r}: allowed None (every row), 'ok' or 'failed'")
    refuse_empty_filters(run_id=run_id, code_id=code_id, version=version)  # no filter, or none?
    versions_of(version)  # 'lastest', True, '2,3': a raw int() error, or read as version 1
    if select is None and grid is None and params is None and run_id is None and code_id is None:
        from pipeline.store.parquet import load as _load

        df = _load(results_dir, name, status=status, version=version, on_error=on_error)
        if version is None and "experiment_version" in df.columns:
            _warn_of_mixed_versions(df, name)
        return df
    from pipeline.selection_args import load_selected

    return load_selected(results_dir, name, status=status, version=version, words=select,
                         grid=grid, params=params, run_id=run_id, code_id=code_id,
                         on_error=on_error)


def _warn_of_mixed_versions(df, name) -> None:
    stored = sorted(int(v) for v in df["experiment_version"].dropna().unique())
    if len(stored) > 1:  # a mean over the table would count each point once per version
        import warnings

        # 'latest' is the newest version stored, which is not the code's after a checkout of
        # an older branch (the warning called it "the current one's")
        try:
            from pipeline.experiments.base import get_experiment

            code = int(get_experiment(name).version)
        except Exception:  # an unknown experiment (a folder of another checkout): no note
            code = None
        note = ("" if code is None or code == stored[-1] else
                f"; this code's version of '{name}' is {code}" + (
                    f" (version={code} keeps its rows)" if code in stored else
                    ", of which no row is stored"))
        warnings.warn(
            f"'{name}' holds rows of {len(stored)} experiment versions "
            f"({', '.join(map(str, stored))}): a point computed by several appears once per "
            f"version; version='latest' keeps the newest stored version's rows ({stored[-1]})"
            + note, stacklevel=3)
