"""Scoped selections of stored rows, and what a selection covers.

A :class:`Selection` picks rows of one experiment's folder by any of:

- ``grid``: exactly the points of a :class:`~pipeline.engine.grid.Grid` (matched by task id,
  so by experiment version and every parameter value), as a sweep of the same config runs them;
- ``run_ids``: rows written by these runs; ``code_ids``: rows computed by this code;
- ``versions``: experiment versions (ints, or ``"latest"``).

Filters combine with AND; then the usual deduplication of ``load`` applies. :func:`select`
returns the table with ``df.attrs["coverage"]``: the runs, commits, code_ids and points it
covers, and warnings when it mixes code_ids or versions or misses points of the grid.
``load``, ``run.py report=true`` and ``python -m pipeline export`` all go through here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

MISSING_SHOWN = 5  # missing grid points listed by value in a coverage summary


class SelectionError(ValueError):
    """A bad selection key or value (exit code 2)."""


@dataclass
class Selection:
    grid: Any = None  # pipeline.engine.grid.Grid
    run_ids: tuple = ()
    code_ids: tuple = ()
    versions: tuple = ()

    def describe(self) -> str:
        parts = []
        if self.grid is not None:
            parts.append(f"the {self.grid.total:,} point(s) of the grid {grid_spec(self.grid)}")
        for label, values in (("run_id", self.run_ids), ("code_id", self.code_ids),
                              ("version", self.versions)):
            if values:
                parts.append(f"{label} in {{{', '.join(map(str, values))}}}")
        return "; ".join(parts) or "everything stored"


def as_tuple(value) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def versions_of(value) -> tuple:
    out = []
    for v in as_tuple(value):
        if v == "latest":
            out.append(v)
            continue
        try:
            if isinstance(v, bool) or float(v) != int(v):
                raise ValueError
            out.append(int(v))
        except (TypeError, ValueError):
            raise SelectionError(f"version must be an integer, a list of integers or 'latest', "
                                 f"got {v!r}") from None
    return tuple(out)


def refuse_empty_filters(**filters) -> None:
    """``run_id=[]`` (or code_id, version) selects nothing: refused, as it was read as no
    filter at all and everything stored was taken."""
    for key, value in filters.items():
        if isinstance(value, (list, tuple)) and not value:
            raise SelectionError(f"{key}=[] selects nothing; give one or more values, or leave "
                                 f"{key} out to keep every {key}")


def check_selection_keys(conf: dict) -> None:
    """Validate the top-level selection keys of a run.py config (report_scope, run_id,
    code_id, version) before anything runs."""
    scope = conf.get("report_scope", "grid")
    if scope not in ("grid", "all"):
        raise SelectionError(f"report_scope must be one of {{grid, all}}, got {scope!r}")
    refuse_empty_filters(**{k: conf.get(k) for k in ("run_id", "code_id", "version")})
    for key in ("run_id", "code_id"):
        for v in as_tuple(conf.get(key)):
            if not isinstance(v, str) or not v:
                raise SelectionError(f"{key} must be a string or a list of strings, got {v!r}")
    versions_of(conf.get("version"))
    used = [k for k in ("run_id", "code_id", "version") if conf.get(k) is not None]
    if used and not conf.get("report"):
        raise SelectionError(f"{', '.join(used)} select(s) rows for report=true; a sweep takes "
                             "its points from grid/params")


def selection_from_options(grid, options: dict) -> Selection:
    """The selection of ``run.py report=true``: by default exactly the points the same command
    without report=true would sweep; ``report_scope=all``: everything stored."""
    scoped = options.get("report_scope", "grid") != "all"
    return Selection(grid=grid if scoped else None, run_ids=as_tuple(options.get("run_id")),
                     code_ids=as_tuple(options.get("code_id")),
                     versions=versions_of(options.get("version")))


def grid_spec(grid) -> dict:
    """The grid as its plain spec (axes as given, fixed params), for humans and JSON."""
    _, axes, fixed = grid._spec
    return {"grid": axes, "params": fixed}


def grid_prefixes(grid) -> np.ndarray:
    """64-bit id prefixes of every point of ``grid``, in index order (hashed in chunks;
    10^7 points take 80 MB)."""
    from pipeline.engine.planning import PLAN_CHUNK

    chunks = []
    for start in range(0, grid.total, PLAN_CHUNK):
        stop = min(grid.total, start + PLAN_CHUNK)
        chunks.append(np.fromiter((int(grid.task_id(i)[:16], 16) for i in range(start, stop)),
                                  dtype=np.uint64, count=stop - start))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)


def _filter(table: pa.Table, selection: Selection) -> pa.Table:
    for column, values in (("run_id", selection.run_ids), ("code_id", selection.code_ids)):
        if values:
            if column not in table.column_names:
                return table.slice(0, 0)  # written before provenance was recorded
            table = table.filter(pc.fill_null(
                pc.is_in(table[column], value_set=pa.array(list(values), pa.string())), False))
    if selection.versions:
        latest = pc.max(table["experiment_version"]).as_py()
        wanted = [latest if v == "latest" else v for v in selection.versions]
        table = table.filter(pc.is_in(table["experiment_version"],
                                      value_set=pa.array(wanted, pa.int64())))
    return table


def select_table(path: str | os.PathLike, selection: Selection,
                 prefixes: np.ndarray | None = None, on_error: str = "raise") -> pa.Table | None:
    """The stored rows of the folder ``path`` that ``selection`` picks (``on_error`` as in
    :func:`pipeline.store.parquet.read_table`): each task's latest attempt, as
    :func:`~pipeline.store.parquet.load` keeps it, then the run, code and version filters.
    Filtered first, a run's superseded attempts (failed, then retried ok by a later run) came
    back, and a compaction, which drops them, changed the answer."""
    from pipeline.store.parquet import contains, deduplicate_table, id_prefixes, read_table

    table = read_table(path, on_error=on_error)
    if table is None:
        return None
    if selection.grid is not None:
        prefixes = grid_prefixes(selection.grid) if prefixes is None else prefixes
        table = table.filter(pa.array(contains(np.sort(prefixes), id_prefixes(table["task_id"]))))
    if table.num_rows and (selection.run_ids or selection.code_ids or selection.versions):
        table = deduplicate_table(table)
    return _filter(table, selection)


def select(results_dir, name: str, selection: Selection | None = None,
           status: str | None = None, on_error: str = "raise") -> pd.DataFrame:
    """The deduplicated rows of experiment ``name`` that ``selection`` picks, with
    ``df.attrs["coverage"]`` (see :func:`coverage`). Raises FileNotFoundError if nothing is
    stored for ``name`` at all."""
    from pipeline.store.manifest import read_manifest
    from pipeline.store.parquet import (deduplicate_table, experiment_dir, id_prefixes,
                                        table_to_pandas)

    selection = selection or Selection()
    path = experiment_dir(results_dir, name)
    prefixes = grid_prefixes(selection.grid) if selection.grid is not None else None
    filtered = bool(selection.run_ids or selection.code_ids or selection.versions)
    # the grid's points first (select_table with the grid alone), then the filters: a point
    # stored but left out by run_id/code_id/version is not "missing, run the sweep"
    table = select_table(path, Selection(grid=selection.grid), prefixes, on_error=on_error)
    if table is None:
        raise FileNotFoundError(f"no results for experiment '{name}' under {path}")
    in_store = (np.unique(id_prefixes(table["task_id"]))
                if selection.grid is not None and filtered else None)
    if table.num_rows and filtered:
        table = _filter(deduplicate_table(table), selection)
    if table.num_rows:
        table = deduplicate_table(table)
    stored = None
    if status is not None:
        # a grid point stored with another status is not missing (a rerun would not fill it)
        stored = np.unique(id_prefixes(table["task_id"])) if selection.grid is not None else None
        table = table.filter(pc.equal(table["status"], status))
    df = table_to_pandas(table)  # exact integers beside failed rows' nulls
    df.attrs["experiment"] = name
    df.attrs["coverage"] = coverage(df, selection, read_manifest(path), prefixes, stored,
                                    in_store)
    return df


def coverage(df: pd.DataFrame, selection: Selection, manifest: dict,
             prefixes: np.ndarray | None = None, stored: np.ndarray | None = None,
             in_store: np.ndarray | None = None) -> dict:
    """What the rows cover: runs (with their commits), code_ids, versions, tasks, and for a
    grid selection the points missing; ``warnings`` lists what a reader must know.
    ``stored``: sorted id prefixes of the selected tasks stored, when ``df`` holds only some
    of them (a status filter); by default the tasks of ``df``. ``in_store``: sorted id
    prefixes of the grid's points stored in the folder whatever the run_id/code_id/version
    filters: a missing point among them was left out by a filter, not never computed."""
    from pipeline.store.parquet import contains, id_prefixes

    runs_by_id = {r.get("run_id"): r for r in manifest.get("runs", [])}
    tasks = df.drop_duplicates("task_id") if "task_id" in df else df
    run_counts = df["run_id"].value_counts(dropna=True).to_dict() if "run_id" in df else {}
    runs = []
    for run_id, rows in sorted(run_counts.items()):
        record = runs_by_id.get(run_id, {})
        git = record.get("git") or {}
        runs.append({"run_id": run_id, "rows": int(rows), "status": record.get("status"),
                     "started_at": record.get("started_at"),
                     "finished_at": record.get("finished_at"),
                     "commit": git.get("commit"), "dirty": git.get("dirty")})
    unattributed = int(df["run_id"].isna().sum()) if "run_id" in df else len(df)
    code_counts = ({str(k): int(v) for k, v in df["code_id"].value_counts().items()}
                   if "code_id" in df else {})
    no_code = int(df["code_id"].isna().sum()) if "code_id" in df else len(df)
    versions = sorted(int(v) for v in df["experiment_version"].unique()) if len(df) else []
    out = {
        "experiment": df.attrs.get("experiment"),
        "selection": selection.describe(),
        "rows": len(df), "tasks": len(tasks),
        "tasks_ok": int((tasks["status"] == "ok").sum()) if len(tasks) else 0,
        "tasks_failed": int((tasks["status"] == "failed").sum()) if len(tasks) else 0,
        "versions": versions,
        "runs": runs, "rows_without_run_id": unattributed,
        "commits": sorted({r["commit"] for r in runs if r["commit"]}),
        "code_ids": code_counts, "rows_without_code_id": no_code,
        "warnings": [],
    }
    warnings = out["warnings"]
    from pipeline.store.manifest import live_runs

    # a sweep still writing the folder: what is read is a snapshot, and the points it has not
    # reached yet are "missing" only for now (the warning below said "run the sweep")
    writing = live_runs(manifest)
    for r in writing:
        # no host or pid: an exported package carries these warnings, and no host details
        warnings.append(f"a sweep is still writing to this folder (run {r.get('run_id')}, "
                        f"since {r.get('started_at')}; python -m pipeline status shows it): "
                        "this is a snapshot of the rows stored so far; run it again when the "
                        "sweep has finished")
    # code_ids that differ within one version; across versions other code is expected (the
    # version was bumped for it), and calling it "the same version" misled the reader
    same_version = ({} if len(code_counts) < 2 else
                    {str(k): int(v) for k, v in df[df.groupby("experiment_version")["code_id"]
                                                   .transform("nunique") > 1]["code_id"]
                     .value_counts().items()})
    if same_version:
        warnings.append(f"the selection mixes {len(same_version)} code_ids ("
                        + ", ".join(f"{c}: {n:,} rows" for c, n in same_version.items())
                        + "): some rows were computed by other code under the same version")
    if code_counts and no_code:
        warnings.append(f"{no_code:,} row(s) carry no code_id (written before code identities "
                        "were recorded)")
    if len(versions) > 1:
        warnings.append(f"the selection mixes experiment versions {versions}")
    if selection.grid is not None:
        grid = selection.grid
        if stored is None:
            stored = np.unique(id_prefixes(pa.array(tasks["task_id"].tolist(), pa.string())))
        missing = int(grid.total - stored.size)
        out["grid"] = {**grid_spec(grid), "points": grid.total, "stored": int(stored.size),
                       "missing": missing}
        if missing:
            prefixes = grid_prefixes(grid) if prefixes is None else prefixes
            first = np.nonzero(~contains(stored, prefixes))[0][:MISSING_SHOWN]
            out["grid"]["missing_examples"] = [grid.point(int(i)) for i in first]
            left_out = (int(in_store.size - contains(stored, in_store).sum())
                        if in_store is not None else 0)
            out["grid"]["left_out_by_filter"] = left_out
            unstored = missing - left_out
            filters = "; ".join(f"{label} in {{{', '.join(map(str, values))}}}"
                                for label, values in (("run_id", selection.run_ids),
                                                      ("code_id", selection.code_ids),
                                                      ("version", selection.versions))
                                if values)
            if left_out:
                keys = " and ".join(k for k, v in (("run_id", selection.run_ids),
                                                  ("code_id", selection.code_ids),
                                                  ("version", selection.versions)) if v)
                warnings.append(
                    f"{missing:,} of {grid.total:,} point(s) of the grid have no row in this "
                    f"selection: {left_out:,} of them are stored but left out by the selection's "
                    f"filter ({filters}; their stored rows are of another {keys}: leave "
                    f"{keys} out to report them)"
                    + (f", and {unstored:,} have no stored row " + (
                        "yet (the sweep above is still writing)" if writing else
                        "(run the sweep to fill them in)") if unstored else ""))
            else:
                warnings.append(f"{missing:,} of {grid.total:,} point(s) of the grid have no "
                                "stored row " + ("yet (the sweep above is still writing)"
                                                 if writing else
                                                 "(run the sweep to fill them in)"))
    return out


def scoped_runs(df: pd.DataFrame, manifest: dict) -> tuple[list[dict], int]:
    """The manifest's run records of the runs whose rows are in ``df`` (by the rows'
    ``run_id``), in the manifest's order, and the number of rows that carry no run_id (written
    before run ids were recorded, so their run is unknown). A report's provenance lists these
    runs only: a sweep that landed in the folder but has no row in the selection is not part
    of the report."""
    runs = manifest.get("runs", [])
    if "run_id" not in df.columns:
        return [], len(df)
    present = set(df["run_id"].dropna())
    return [r for r in runs if r.get("run_id") in present], int(df["run_id"].isna().sum())


def coverage_lines(cov: dict) -> list[str]:
    """A Markdown summary of a coverage dict (for index.md and a package README)."""
    lines = [f"- selection: {cov['selection']}",
             f"- rows: {cov['rows']:,}; tasks: {cov['tasks']:,} ({cov['tasks_ok']:,} ok, "
             f"{cov['tasks_failed']:,} failed); experiment version(s): "
             f"{', '.join(map(str, cov['versions'])) or '-'}"]
    grid = cov.get("grid")
    if grid:
        lines.append(f"- grid points: {grid['points']:,}; stored: {grid['stored']:,}; missing: "
                     f"{grid['missing']:,}")
    runs = ", ".join(f"`{r['run_id']}` ({r['rows']:,} rows, commit `{(r['commit'] or '?')[:12]}`"
                     f"{' dirty' if r['dirty'] else ''})" for r in cov["runs"])
    lines.append(f"- runs: {runs or 'none recorded'}"
                 + (f"; {cov['rows_without_run_id']:,} row(s) without a run_id"
                    if cov["rows_without_run_id"] and cov["runs"] else ""))
    lines.append(f"- commits: {', '.join(f'`{c}`' for c in cov['commits']) or 'unknown'}")
    lines.append("- code_ids: " + (", ".join(f"`{c}` ({n:,} rows)" for c, n in
                                              cov["code_ids"].items()) or "none recorded"))
    lines += [f"- **warning**: {w}" for w in cov["warnings"]]
    return lines
