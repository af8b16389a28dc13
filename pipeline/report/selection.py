"""Scoped selections of stored rows, and what a selection covers.

A :class:`Selection` picks rows of one experiment's folder by any of:

- ``grid``: exactly the points of a :class:`~pipeline.engine.grid.Grid` (matched by task id,
  so by experiment version and every parameter value), as a sweep of the same config runs them;
  the ids it has under this code's experiment version, or with ``versions`` under each of
  those (ids hash the version: after a version bump the old rows have other ids);
- ``run_ids``: rows written by these runs; ``code_ids``: rows computed by this code;
- ``versions``: experiment versions (ints, or ``"latest"``).

Filters combine with AND; then the usual deduplication of ``load`` applies. :func:`select`
returns the table with ``df.attrs["coverage"]``: the runs, commits, code_ids and points it
covers, and warnings when it mixes code_ids or versions or misses points of the grid.
``load``, ``run.py report=true`` and ``python -m pipeline export`` all go through here.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.store.errors import SelectionError  # (callers import it from here too)

MISSING_SHOWN = 5  # missing grid points listed by value in a coverage summary


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
    """The grid as its plain spec (axes as given, fixed params), for humans and JSON. A
    fixed value an axis overrides is left out (the report's index showed the YAML's n = 13
    beside grid.n=[10,12])."""
    _, axes, fixed = grid._spec
    return {"grid": axes, "params": {k: v for k, v in fixed.items() if k in grid.fixed}}


def grid_at_version(grid, version: int):
    """``grid`` with the task ids its points have under experiment ``version`` (ids hash the
    version with the parameters: the current declarations, so a parameter added or dropped
    since that version gives other ids). ``grid`` itself when it is that version. For the
    driver's hashing only: pickled, a grid is rebuilt from its spec at the code's version."""
    version = int(version)
    if version == grid.version:
        return grid
    other = object.__new__(type(grid))  # not copy.copy: a Grid pickles to its cached self
    other.__dict__.update(grid.__dict__)
    other.version = version
    other._build_hash_plan()
    return other


def grid_prefixes(grid, version: int | None = None) -> np.ndarray:
    """64-bit id prefixes of every point of ``grid`` (under experiment ``version``; by
    default the grid's, the code's), in index order (hashed in chunks, see
    :func:`point_prefixes`; 10^7 points take 80 MB)."""
    from pipeline.engine import point_ids

    return point_ids.point_prefixes(grid if version is None else grid_at_version(grid, version))


def point_prefixes(grid, indices, version: int | None = None) -> np.ndarray:
    """64-bit id prefixes of the points ``indices`` of ``grid`` (under experiment
    ``version``; by default the grid's), in the order given: hashed in chunks
    (:func:`pipeline.engine.point_ids.point_prefixes`). One by one, ``task_id(i)`` decoded
    each index and joined every parameter: a coverage after a version bump hashed every
    missing point so, once per other version stored."""
    from pipeline.engine import point_ids

    return point_ids.point_prefixes(grid if version is None else grid_at_version(grid, version),
                                    indices)


def _by_run_and_code(table: pa.Table, selection: Selection) -> pa.Table:
    for column, values in (("run_id", selection.run_ids), ("code_id", selection.code_ids)):
        if values:
            if column not in table.column_names:
                return table.slice(0, 0)  # written before provenance was recorded
            table = table.filter(pc.fill_null(
                pc.is_in(table[column], value_set=pa.array(list(values), pa.string())), False))
    return table


def _filter(table: pa.Table, selection: Selection, versions: tuple = ()) -> pa.Table:
    """The run, code and version filters; ``versions``: the versions resolved already (a
    grid's), else ``selection.versions`` with 'latest' the newest among the rows left."""
    table = _by_run_and_code(table, selection)
    if versions or selection.versions:
        if not versions:
            latest = pc.max(table["experiment_version"]).as_py()
            versions = [latest if v == "latest" else v for v in selection.versions]
        table = table.filter(pc.is_in(table["experiment_version"],
                                      value_set=pa.array(list(versions), pa.int64())))
    return table


def grid_versions(table: pa.Table, selection: Selection) -> tuple:
    """The experiment versions a grid selection matches its points under: ``version=`` (with
    'latest' the newest stored among the rows of the run_id/code_id filters), else the
    experiment's version in this code. Task ids hash the version, so the grid's points have
    other ids under each version (a grid hashed with this code's version never matched rows
    of an older one, whatever ``version=`` said)."""
    if not selection.versions:
        return (selection.grid.version,)
    latest = None
    if "latest" in selection.versions and table.num_rows:
        kept = _by_run_and_code(table, selection)
        latest = pc.max((kept if kept.num_rows else table)["experiment_version"]).as_py()
    out = []
    for v in selection.versions:
        v = latest if v == "latest" else v
        if v is not None and int(v) not in out:
            out.append(int(v))
    return tuple(sorted(out))


@dataclass
class Picked:
    """What one read of an experiment's folder gives a selection (:func:`pick`)."""
    table: pa.Table  # the selected rows: each task's latest attempt, then the filters
    stored: pa.Table  # every stored row, as read
    versions: tuple = ()  # with a grid: the versions its points are matched under
    prefixes: dict | None = None  # with a grid: version -> its points' id prefixes (index order)
    # with a grid and filters: sorted id prefixes of its points stored under ``versions``
    # whatever the run_id/code_id filters (a point among them missing was left out by one)
    in_store: np.ndarray | None = None


def pick(path: str | os.PathLike, selection: Selection, on_error: str = "raise") -> Picked | None:
    """The stored rows of the folder ``path`` that ``selection`` picks, reading the folder
    once (``on_error`` as in :func:`pipeline.store.parquet.read_table`); None when nothing is
    stored. The grid's points first (by their task ids under each of :func:`grid_versions`),
    then each task's latest attempt, as :func:`~pipeline.store.parquet.load` keeps it, then
    the run, code and version filters. Filtered first, a run's superseded attempts (failed,
    then retried ok by a later run) came back, and a compaction, which drops them, changed
    the answer."""
    from pipeline.store.parquet import (contains, deduplicate_table, id_prefixes, read_table,
                                        unique_ids)

    stored = read_table(path, on_error=on_error)
    if stored is None:
        return None
    for key, wanted in (("run_id", selection.run_ids), ("code_id", selection.code_ids)):
        if wanted:  # a typo selected nothing, silently
            refuse_unknown_ids(path, key, wanted, stored)
    refuse_absent_versions(stored, selection.versions, Path(path).name)
    table, versions, prefixes, in_store = stored, (), None, None
    if selection.grid is not None:
        versions = grid_versions(stored, selection)
        prefixes = {v: grid_prefixes(selection.grid, v) for v in versions}
        wanted = (np.sort(np.concatenate(list(prefixes.values()))) if prefixes else
                  np.zeros(0, dtype=np.uint64))
        in_grid = contains(wanted, id_prefixes(stored["task_id"]))
        # a grid of every stored row (a sweep's report): no copy of the table
        table = stored if in_grid.all() else stored.filter(pa.array(in_grid))
        del in_grid
        if selection.run_ids or selection.code_ids:
            in_store = unique_ids(id_prefixes(table["task_id"]))
    if table.num_rows:
        table = deduplicate_table(table)
    if table.num_rows and (selection.run_ids or selection.code_ids or selection.versions):
        table = _filter(table, selection, versions)
    return Picked(table, stored, versions, prefixes, in_store)


def select_table(path: str | os.PathLike, selection: Selection,
                 on_error: str = "raise") -> pa.Table | None:
    """The rows of :func:`pick` (None when nothing is stored)."""
    picked = pick(path, selection, on_error)
    return None if picked is None else picked.table


def select(results_dir, name: str, selection: Selection | None = None,
           status: str | None = None, on_error: str = "raise") -> pd.DataFrame:
    """The deduplicated rows of experiment ``name`` that ``selection`` picks, with
    ``df.attrs["coverage"]`` (see :func:`coverage`). Raises FileNotFoundError if nothing is
    stored for ``name`` at all."""
    return select_picked(results_dir, name, selection, status, on_error)[0]


def select_picked(results_dir, name: str, selection: Selection | None = None,
                  status: str | None = None, on_error: str = "raise") -> tuple[pd.DataFrame,
                                                                               Picked]:
    """:func:`select`, and what :func:`pick` read to give it: the stored rows, from which a
    caller counts what the selection leaves out (:func:`points_outside_grid`) without reading
    the store again."""
    from pipeline.store.errors import DamagedManifest
    from pipeline.store.manifest import read_manifest
    from pipeline.store.parquet import (experiment_dir, id_prefixes, table_to_pandas,
                                        unique_ids, where_results_are)

    selection = selection or Selection()
    path = experiment_dir(results_dir, name)
    picked = pick(path, selection, on_error=on_error)
    if picked is None:
        raise FileNotFoundError(f"no results for experiment '{name}' under {path}"
                                + where_results_are(results_dir, name))
    table = picked.table
    stored = None
    if status is not None:
        # a grid point stored with another status is not missing (a rerun would not fill it)
        stored = unique_ids(id_prefixes(table["task_id"])) if selection.grid is not None else None
        table = table.filter(pc.equal(table["status"], status))
    df = table_to_pandas(table)  # exact integers beside failed rows' nulls
    df.attrs["experiment"] = name
    try:
        manifest, damaged = read_manifest(path), None
    except DamagedManifest as exc:  # the rows do not depend on it: only their runs' records
        manifest, damaged = {"runs": []}, exc
    df.attrs["coverage"] = coverage(df, selection, manifest, picked, stored)
    if damaged is not None:
        import warnings

        text = (f"the run manifest {damaged.path} {damaged.problem} ({damaged.reason}): the rows "
                f"are read, but their runs' states and commits are unknown; {damaged.remedy}")
        df.attrs["coverage"]["warnings"].append(text)
        warnings.warn(text, stacklevel=4)
    return df, picked


# what load's rule (deduplicate_table) and the run, code and version filters read
_KEY_COLUMNS = ("task_id", "row_index", "status", "finished_at", "experiment_version", "run_id",
                "code_id")


def points_outside_grid(picked: Picked, selection: Selection) -> tuple[int, int] | None:
    """(ok points the selection holds, stored ok points it leaves out) when a grid selection
    leaves out stored ok points the same selection without its grid would take; else None.
    Counted on the key columns of what :func:`pick` read (each task's latest attempt, the
    run and code filters, the versions the grid is matched under): the report loaded the
    whole store a second time, to pandas, and matched the id strings there (35 of the 59 s
    of a report of 4M rows). Used by the report's and the export's scope notes."""
    from pipeline.store.parquet import aligned_prefixes, contains, deduplicate_table, unique_ids

    if selection.grid is None or picked is None or not picked.stored.num_rows:
        return None
    stored = picked.stored
    statuses = pc.unique(stored["status"])
    # The shortcut below holds for what the engine writes: every status ok or failed (load's
    # rule drops only 'failed' rows, so a later row of another or no status supersedes an ok
    # one) and one version a task id (a hand-edited id stored under two versions keeps its
    # later version's rows). Otherwise, and with run or code filters (they read the kept
    # rows' runs), the rule itself.
    engine_written = (not statuses.null_count and set(statuses.to_pylist()) <= {"ok", "failed"}
                      and len(pc.unique(stored["experiment_version"])) == 1)
    if selection.run_ids or selection.code_ids or not engine_written:
        # only what the rule and the filters read: the whole table's filter copied every column
        keys = stored.select([c for c in stored.column_names if c in _KEY_COLUMNS])
        wider = _filter(deduplicate_table(keys), selection, picked.versions)
        stored_ok = pc.filter(wider["task_id"], pc.equal(wider["status"], "ok"))
    else:  # a task is ok in load's table if any row of it is (the rule drops its failed
        # ones): the ok ids of the grid's version, no rule
        stored_ok = pc.filter(stored["task_id"], pc.and_(
            pc.equal(stored["status"], "ok"),
            pc.is_in(stored["experiment_version"],
                     value_set=pa.array(list(picked.versions), pa.int64()))))
    selected = picked.table
    shown_ok = pc.filter(selected["task_id"], pc.equal(selected["status"], "ok"))
    # as 64-bit id prefixes (as coverage counts points): hashing the id strings took 4 s
    # of 4M; an id edited by hand (not 24 hex digits) is matched as its string
    (stored_ids, stored_held), (shown_ids, shown_held) = (aligned_prefixes(ids) for ids in
                                                          (stored_ok, shown_ok))
    if stored_held.all() and shown_held.all():
        stored_ids, shown_ids = unique_ids(stored_ids), unique_ids(shown_ids)
        shown, outside = shown_ids.size, int(np.count_nonzero(~contains(shown_ids, stored_ids)))
    else:
        stored_ids, shown_ids = pc.unique(stored_ok), pc.unique(shown_ok)
        shown = len(shown_ids)
        held = pc.sum(pc.is_in(stored_ids, value_set=shown_ids)).as_py() or 0  # None: empty
        outside = len(stored_ids) - held
    return (shown, outside) if outside else None


def refuse_absent_versions(stored: pa.Table, wanted, name: str) -> None:
    """``version=N`` of which no row is stored selected nothing, silently, beside a run_id (on
    its own it raised, as a plain load does); ``version=[1,2]`` with only 1 stored exported
    version 1 as asked for both (:func:`pick` checks it, for load, report and export)."""
    absent = sorted({int(v) for v in wanted if v != "latest"}
                    - set(pc.unique(stored["experiment_version"]).to_pylist()))
    if absent:
        have = sorted(pc.unique(stored["experiment_version"]).to_pylist())
        raise SelectionError(f"version={', '.join(map(str, absent))}: no rows of version "
                             f"{', '.join(map(str, absent))} are stored for '{name}'; stored: "
                             f"{', '.join(map(str, have))} (or 'latest')")


def coverage(df: pd.DataFrame, selection: Selection, manifest: dict,
             picked: Picked | None = None, stored: np.ndarray | None = None) -> dict:
    """What the rows cover: runs (with their commits), code_ids, versions, tasks, and for a
    grid selection the points missing; ``warnings`` lists what a reader must know.
    ``picked``: what :func:`pick` read (the grid's versions and ids, and what the store
    holds of it under the filters and under other versions); ``stored``: sorted id prefixes
    of the selected tasks stored, when ``df`` holds only some of them (a status filter); by
    default the tasks of ``df``. A missing point stored but left out by a run_id/code_id
    filter is said to be, and one stored only under another experiment version too (with
    the ``version=`` that selects it), rather than "run the sweep"."""
    from pipeline.store.parquet import contains, id_prefixes, unique_ids

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
        matched = picked.versions if picked is not None else (grid.version,)
        prefixes = (picked.prefixes if picked is not None and picked.prefixes is not None
                    else {v: grid_prefixes(grid, v) for v in matched})
        if stored is None:
            stored = unique_ids(id_prefixes(pa.array(tasks["task_id"], pa.string())))
        have = np.zeros(grid.total, dtype=bool)  # a row under one of the matched versions
        per_version = {}
        for v in matched:
            here = contains(stored, prefixes[v])
            per_version[v] = int(here.sum())
            have |= here
        missing = int(grid.total - have.sum())
        out["grid"] = {**grid_spec(grid), "points": grid.total, "stored": int(have.sum()),
                       "missing": missing, "versions": per_version}
        if missing:
            lacking = ~have
            first = np.nonzero(lacking)[0][:MISSING_SHOWN]
            out["grid"]["missing_examples"] = [grid.point(int(i)) for i in first]
            left = np.zeros(grid.total, dtype=bool)
            in_store = picked.in_store if picked is not None else None
            if in_store is not None:
                for v in matched:
                    left |= contains(in_store, prefixes[v])
                left &= lacking
            left_out = int(left.sum())
            out["grid"]["left_out_by_filter"] = left_out
            # the missing points stored under another experiment version (other task ids):
            # after a version bump a grid matched nothing and the warning said "run the sweep"
            # (only the missing points are hashed under each other version stored)
            elsewhere, others = np.zeros(grid.total, dtype=bool), {}
            asked = np.nonzero(lacking & ~left)[0]
            if picked is not None and picked.stored.num_rows and asked.size:
                all_versions = picked.stored["experiment_version"]
                for o in sorted(int(v) for v in pc.unique(all_versions).to_pylist()
                                if v is not None):
                    if o in matched:
                        continue
                    rows = picked.stored.filter(pc.equal(all_versions, o))["task_id"]
                    there = asked[contains(unique_ids(id_prefixes(rows)),
                                           point_prefixes(grid, asked, version=o))]
                    if there.size:
                        others[o] = int(there.size)
                        elsewhere[there] = True
            out["grid"]["stored_under_other_versions"] = others
            unstored = missing - left_out - int(elsewhere.sum())
            filters = "; ".join(f"{label} in {{{', '.join(map(str, values))}}}"
                                for label, values in (("run_id", selection.run_ids),
                                                      ("code_id", selection.code_ids),
                                                      ("version", selection.versions))
                                if values)
            reasons = []
            if left_out:
                keys = " and ".join(k for k, v in (("run_id", selection.run_ids),
                                                  ("code_id", selection.code_ids)) if v)
                reasons.append(f"{left_out:,} of them are stored but left out by the "
                               f"selection's filter ({filters}; their stored rows are of "
                               f"another {keys}: leave {keys} out to report them)")
            if others:
                where = ", ".join(f"version {o}: {n:,}" for o, n in others.items())
                use = (f"version={next(iter(others))}" if len(others) == 1 else
                       "version=" + " or version=".join(map(str, others)))
                reasons.append(
                    f"{int(elsewhere.sum()):,} of them are stored under other experiment "
                    f"versions only ({where}): task ids include the version, so {use} "
                    "selects them" + ("" if selection.versions else
                                      f" (a sweep computes them anew under version "
                                      f"{grid.version})"))
            if unstored:
                todo = ("yet (the sweep above is still writing)" if writing else
                        "(run the sweep to fill them in)" if grid.version in matched else
                        f"(a sweep of this code computes them under version {grid.version})")
                reasons.append(f"{unstored:,} have no stored row {todo}" if reasons else todo)
            what = "row in this selection" if left_out else "stored row"
            under = ""
            if selection.versions or others:
                under = (f" under version {matched[0]}" if len(matched) == 1 else
                         f" under any of versions {', '.join(map(str, matched))}")
                if not selection.versions:
                    under += " (the experiment's version in this code)"
            text = f"{missing:,} of {grid.total:,} point(s) of the grid have no {what}{under}"
            if len(reasons) == 1 and not (left_out or others):
                warnings.append(f"{text} {reasons[0]}")
            else:
                warnings.append(f"{text}: " + ", ".join(reasons[:-1])
                                + (", and " if len(reasons) > 1 else "") + reasons[-1])
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
    present = set(df["run_id"].dropna().unique())  # (a set of the column: 2.5 s for 4M rows)
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


def refuse_unknown_ids(path, key: str, wanted, stored: pa.Table) -> None:
    """A ``run_id`` or ``code_id`` that no run of the folder ``path`` has and no row of
    ``stored`` carries (a typo) selected nothing, silently, where an unknown version raised:
    SelectionError naming the folder's ids and the closest one (:func:`pick` checks it, for
    every front door: load, report, export)."""
    from pipeline.store.errors import DamagedManifest
    from pipeline.store.manifest import read_manifest

    name = Path(path).name
    try:
        runs = read_manifest(path).get("runs", [])
    except DamagedManifest:  # the rows say which ids they carry; select() warns of it
        runs = []
    known = list(dict.fromkeys(r.get(key) for r in runs if r.get(key)))
    unknown = [v for v in wanted if v not in known]
    if unknown and key not in stored.column_names:  # (parts without it): nothing to say
        return
    if unknown:  # rows may carry ids the manifest does not list (parts copied in)
        in_rows = set(pc.unique(stored[key]).to_pylist())
        unknown = [v for v in unknown if v not in in_rows]
        known += sorted(str(v) for v in in_rows if v and v not in known)
    if unknown:
        close = [m for v in unknown for m in difflib.get_close_matches(str(v), known, n=1)]
        what = "runs" if key == "run_id" else "code_ids"
        raise SelectionError(
            f"{key} {', '.join(map(repr, unknown))}: "
            + (f"no run of '{name}' has {'this id' if len(unknown) == 1 else 'these ids'}"
               if key == "run_id" else f"no row of '{name}' was computed by "
               + ("this code" if len(unknown) == 1 else "these codes"))
            + (f" (did you mean {', '.join(map(repr, close))}?)" if close else "")
            + f"; its {what}: {', '.join(known[-5:]) or 'none'}"
            + (" (the last 5)" if len(known) > 5 else "")
            + "; python -m pipeline status lists the runs")
