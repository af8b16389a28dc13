"""What a sweep still has to run, given what the store already holds: the lazy pending plan
for a sweep (:func:`plan_sweep`) and the dry run's counts (:func:`count_done`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from pipeline.engine.grid import Grid, _fragment
from pipeline.engine.pending_plan import PendingPlan
from pipeline.store.parquet import stored_ids


@dataclass
class Plan:
    total: int
    pending: PendingPlan  # grid indices still to run, handed out lazily in ascending order
    done_ok: int
    done_failed: int  # stored as failed and not retried this time
    failed_retried: int = 0  # stored as failed and run again (retry_failed=true)
    # points of the grid stored only under other experiment versions (version -> count):
    # their task ids differ (ids hash the version), so this version computes them anew
    other_versions: dict = field(default_factory=dict)


@dataclass
class StoredCounts:
    """What the store holds of a grid's points (:func:`count_stored`)."""
    ok: int  # tasks stored ok
    failed: int  # tasks stored only failed
    # version -> points of the grid stored under that other version and not under this one
    other_versions: dict


def plan_sweep(grid: Grid, path, retry_failed: bool = False) -> Plan:
    """Which grid points still need running, given what the store already holds.

    Nothing is materialised per point: a fresh store plans a range; on a non-empty store the
    counts come from matching stored parameters (:func:`count_done`, linear in what is
    stored), and the pending points are found lazily, chunk by chunk, by hashing only the
    chunk about to be submitted. Driver memory is bounded by the store's id set and one chunk.
    """
    ok_ids, failed_ids = stored_ids(path)
    if ok_ids.size == 0 and failed_ids.size == 0:
        return Plan(grid.total, PendingPlan(grid, grid.total), 0, 0)
    counts = count_stored(grid, path)
    done_ok, done_failed = counts.ok, counts.failed
    skipped = 0 if retry_failed else done_failed
    pending = PendingPlan(grid, grid.total, ok_ids=ok_ids, failed_ids=failed_ids,
                          retry_failed=retry_failed, to_run=grid.total - done_ok - skipped,
                          done_ok=done_ok, done_failed=skipped)
    return Plan(grid.total, pending, done_ok, skipped,
                failed_retried=done_failed if retry_failed else 0,
                other_versions=counts.other_versions)


def count_done(grid: Grid, path) -> tuple[int, int]:
    """(tasks stored ok, tasks stored only failed) among the grid's points, found by matching
    the stored parameter values against the grid's axes: linear in what is stored, not in
    the grid, so a dry run of 10^7 points answers in seconds even on a full store.
    Agrees with :func:`plan_sweep`, which hashes every point (tested)."""
    counts = count_stored(grid, path)
    return counts.ok, counts.failed


def count_stored(grid: Grid, path) -> StoredCounts:
    """:func:`count_done`'s counts and how many of the grid's points are stored under each
    other experiment version and not under this one: the stored parameters match the grid's,
    the version does not (after a version bump this version computes them anew). Only when
    every parameter of this version has a stored column. Reads the store a batch at a time and
    keeps 8 bytes a row of this version (its id prefix), and 16 of another version's matching
    rows (a hash of their parameter values, and the version); this version's rows are hashed
    in a second pass, only when another version's match (after a version bump)."""
    from pipeline.store.parquet import contains, unique_ids

    names = [p.name for p in grid.experiment.params]
    ok_parts, failed_parts, other_keys, other_versions_of = [], [], [], []
    for hits in grid_row_batches(grid, path, any_version=True):
        this = (hits["experiment_version"] == grid.version).to_numpy()
        status = hits["status"].to_numpy(dtype=object)
        keys = hits["task_key"].to_numpy()
        ok_parts.append(keys[this & (status == "ok")])
        failed_parts.append(keys[this & (status == "failed")])
        if not this.all():
            others = hits.loc[~this]
            other_keys.append(_point_hashes(others, names))
            other_versions_of.append(others["experiment_version"].to_numpy(dtype=np.int64))
    if not ok_parts:
        return StoredCounts(0, 0, {})
    ok_ids = unique_ids(np.concatenate(ok_parts))
    failed_ids = np.setdiff1d(unique_ids(np.concatenate(failed_parts)), ok_ids,
                              assume_unique=True)
    del ok_parts, failed_parts
    other_versions = {}
    if other_keys:  # after a version bump only: those points not stored under this version
        mine = unique_ids(np.concatenate(
            [_point_hashes(hits.loc[(hits["experiment_version"] == grid.version).to_numpy()],
                           names) for hits in grid_row_batches(grid, path, any_version=True)]))
        keys, versions = np.concatenate(other_keys), np.concatenate(other_versions_of)
        absent = ~contains(mine, keys)
        other_versions = {int(v): int(unique_ids(keys[absent & (versions == v)]).size)
                          for v in np.unique(versions[absent]).tolist()}
    return StoredCounts(len(ok_ids), len(failed_ids), other_versions)


def _point_hashes(rows: pd.DataFrame, names: list[str]) -> np.ndarray:
    """A uint64 hash of each row's parameter values (a point's task id differs between
    versions), vectorised: a row-wise join took ~15 s per 10^6 rows. Object and bool columns
    are hashed as their canonical fragments, as the task id has them: astype(str) kept 8
    significant digits of a list's floats and abbreviated a list of over 1,000 with '...', so
    distinct points collided; and a bool column reads as bool in one batch and as objects in
    another (with an unset value), which pandas hashes differently."""
    frame = rows[names]
    frame = frame.assign(**{n: frame[n].map(_canonical) for n in names
                            if frame[n].dtype == object or frame[n].dtype == bool})
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def other_versions_text(grid, other_versions: dict) -> str:
    """'N point(s) of this grid are stored only under version V ...' (the dry run's line and
    the sweep's header note), or '' when none is."""
    if not other_versions:
        return ""
    n = max(other_versions.values())  # a point stored under two old versions counts once
    where = (f"version {next(iter(other_versions))}" if len(other_versions) == 1 else
             "versions " + ", ".join(f"{v} ({c:,})" for v, c in sorted(other_versions.items())))
    return (f"{'at least ' if len(other_versions) > 1 else ''}{n:,} point(s) of this grid are "
            f"stored only under {where} of {grid.name}: version {grid.version} computes them "
            "anew (task ids include the version; the old rows stay stored)")


def settings_changed_text(conf: dict, runs: list[dict], parts: int) -> str:
    """For a sweep that finds none of its points stored in a folder that holds rows: how its
    grid and fixed parameters differ from the last run's ('' if they do not, or nothing is
    stored). A mistyped value (params.work_us=2000 for 1000) said '0 already done' and ran
    everything again beside the old rows, told only by the closing summary."""
    before = next((r.get("config") for r in reversed(runs) if isinstance(r.get("config"), dict)
                   and r.get("status") != "running"), None)
    if not parts or before is None:
        return ""
    changed = []
    for section in ("params", "grid"):
        now, then = conf.get(section) or {}, before.get(section) or {}
        for key in sorted(set(now) | set(then)):
            if now.get(key) != then.get(key):
                changed.append(f"{section}.{key}: {_shown(then.get(key))} -> "
                               f"{_shown(now.get(key))}")
    if not changed:
        return ""
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    return ("none of this grid's points are stored here, and the last run had other settings ("
            + "; ".join(changed[:4]) + more + "): this sweep adds rows of the new settings beside "
            "the stored ones; if a value is mistyped, stop it (Ctrl-C) and fix the command")


def _shown(value) -> str:
    text = "unset" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def grid_row_batches(grid: Grid, path, extra: tuple[str, ...] = (), any_version: bool = False):
    """The stored rows that are points of ``grid``, a batch at a time (DataFrames of
    ``task_key``, the task id's uint64 prefix (:func:`pipeline.store.parquet.id_prefixes`),
    ``status``, ``experiment_version`` and those of the ``extra`` columns stored; nothing when
    nothing is stored): the stored parameter values matched against the grid's axes, without
    hashing the grid (see :func:`count_done`). ``any_version``: rows of every experiment
    version whose parameters match (their task ids are another version's), with the parameter
    columns. Callers reduce the rows (counts, id sets) and hold one batch and what they keep,
    not the store's columns (a whole-table read took about 0.4 KB a stored row). Rows whose
    task id is malformed are skipped (no point has it)."""
    from pipeline.store.parquet import part_files

    files = part_files(path)
    if not files:
        return
    names = [p.name for p in grid.experiment.params]
    # only the columns matched here: a resume of a large store must not load its results
    import pyarrow.parquet as pq

    from pipeline.store.integrity import BadPartFile, scan_parts
    from pipeline.store.parquet import unified_schema

    schemas = []
    for f in files:
        try:
            schemas.append(pq.read_schema(f))
        except Exception as exc:  # a damaged part: name it and the repair command (exit 4)
            raise BadPartFile(f, f"{type(exc).__name__}: {exc}") from None
    schema = unified_schema(schemas)  # a column whose type changed with the version too
    wanted = [c for c in ("task_id", "status", "experiment_version", *names) if c in schema.names]
    if any(n not in schema.names for n in names):
        # no part has a column for some parameter: all were written by an older version that
        # did not declare it. None of their rows is a point of this grid (ids hash the version
        # and every parameter); matching went on without the column and raised KeyError
        return
    extra = [c for c in extra if c in schema.names and c not in wanted]
    match = GridMatch(grid, any_version)
    out = ["task_key", "status", "experiment_version", *extra, *(names if any_version else [])]
    for batch in scan_parts(files, wanted + extra, schema=schema):
        hits = match.rows(pa.Table.from_batches([batch]), extra)
        if hits is not None:
            yield hits[out]


class GridMatch:
    """Which stored rows are points of a grid, a table of stored rows at a time: what each
    axis needs to match (its value set, sorted floats, fragments) is made once."""

    def __init__(self, grid: Grid, any_version: bool = False):
        self.grid, self.any_version = grid, any_version
        self.list_typed = {p.name for p in grid.experiment.params
                           if p.type in ("int_list", "float_list")}
        self.axis_keys: dict[int, pd.DataFrame] = {}
        for i, axis in enumerate(grid.axes):
            if not axis.single:
                # object columns: a frame of the typed values read an int column with None
                # as floats (2^60 + 1 then matched a stored 2^60). A stored null is a None or
                # a NaN (the store writes both as null): both sides say "unset" for either.
                keys = pd.DataFrame([axis.at(d) for d in range(len(axis))],
                                    columns=list(axis.names), dtype=object)
                self.axis_keys[i] = keys.map(_unset_or_fragment).drop_duplicates().assign(
                    _hit=True)
        self.sorted_floats: dict[int, np.ndarray] = {}
        for i, axis in enumerate(grid.axes):
            values = axis.values
            if axis.single and isinstance(values, np.ndarray) and values.dtype.kind == "f":
                self.sorted_floats[i] = (values if np.all(values[1:] >= values[:-1])
                                         else np.sort(values))

    def rows(self, table: pa.Table, extra) -> pd.DataFrame | None:
        """The rows of ``table`` that are points of the grid, with ``task_key``; None if none."""
        from pipeline.store.parquet import id_prefixes

        table, _, df, mask = self._match(table, extra)
        if df is None or not mask.any():
            return None
        hits = df.loc[mask]
        return hits.assign(task_key=id_prefixes(table["task_id"].filter(pa.array(mask))))

    def row_mask(self, table: pa.Table, well_formed: np.ndarray | None = None) -> np.ndarray:
        """Which rows of ``table`` are points of the grid, one bool a row (a malformed task id:
        False). For a reader that scans the store once for its own columns too, and may have
        found the well-formed ids already (:func:`pipeline.store.parquet.well_formed_ids`)."""
        _, well_formed, df, mask = self._match(table, (), well_formed)
        out = np.zeros(table.num_rows, dtype=bool)
        if df is not None:
            out[well_formed] = mask
        return out

    def _match(self, table: pa.Table, extra, well_formed: np.ndarray | None = None):
        """(the rows of ``table`` with a well-formed task id, which rows those are, their
        columns as a frame, which of them are points of the grid); the frame None if none."""
        from pipeline.store.parquet import well_formed_ids

        grid, names = self.grid, [p.name for p in self.grid.experiment.params]
        if well_formed is None:
            well_formed = np.asarray(well_formed_ids(table["task_id"]), dtype=bool)
        if not well_formed.all():
            table = table.filter(pa.array(well_formed))
        if not table.num_rows:
            return table, well_formed, None, None
        df = table.select(["status", "experiment_version", *extra,
                           *[n for n in names if n in table.column_names]]).to_pandas()
        for p in grid.experiment.params:
            if p.type is int and p.name in df and table[p.name].null_count:
                # nullable ints, exact: with nulls (an optional parameter unset) pandas reads
                # the column as floats, and above 2^53 a stored 2^60 then matched 2^60 + 1
                df[p.name] = table[p.name].to_pandas(
                    types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        mask = (np.ones(len(df), dtype=bool) if self.any_version else
                (df["experiment_version"] == grid.version).to_numpy().copy())
        list_typed = self.list_typed

        def canon(col):
            return df[col].map(lambda v: _fragment(_stored_list(v)) if v is not None else None)

        for name, value in grid.fixed.items():
            if name in list_typed:
                mask &= (canon(name) == _fragment(value)).to_numpy()
            elif value is None:
                mask &= df[name].isna().to_numpy()
            elif isinstance(value, float) and value != value:
                # NaN != NaN: a fixed NaN matched no stored row, so its points were never
                # counted done (a rerun said 'N to run'). The store writes a NaN as null,
                # read back as NaN
                mask &= df[name].isna().to_numpy()
            else:
                mask &= (df[name] == value).fillna(False).to_numpy(dtype=bool)
        for i, axis in enumerate(grid.axes):
            if not mask.any():
                break
            if axis.single:
                name, values = axis.names[0], axis.values
                if name in list_typed:
                    mask &= canon(name).isin({_fragment(v) for v in values}).to_numpy()
                elif isinstance(values, range):
                    lo, hi = min(values[0], values[-1]), max(values[0], values[-1])
                    column = df[name]
                    if pd.api.types.is_integer_dtype(column.dtype):
                        # in integers: as floats, values above 2^53 round together, and
                        # stored points next to the range counted as its points (a new range
                        # said 'N already done, 0 to run' and ran nothing)
                        v = column.to_numpy(dtype=np.int64, na_value=0)
                        inside = (v >= lo) & (v <= hi) & column.notna().to_numpy()
                        # the distance from lo in uint64 is exact for any two int64 values
                        dist = v.astype(np.uint64) - np.uint64(lo % 2**64)
                        mask &= inside & (dist % np.uint64(abs(values.step)) == 0)
                    else:  # not stored as ints (a parameter whose type changed)
                        v = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
                        on_step = np.mod(v - values[0], abs(values.step)) == 0
                        mask &= (v >= lo) & (v <= hi) & on_step
                elif i in self.sorted_floats:
                    # by binary search: isin over a list of the axis's Python floats took 6x
                    # the axis in memory (a 2 x 10^7-value linspace: 1 GiB more on every
                    # resume)
                    v = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
                    ordered = self.sorted_floats[i]
                    hit = ordered[np.minimum(np.searchsorted(ordered, v), ordered.size - 1)] == v
                    if np.isnan(ordered[-1]):  # sorted last (none from linspace or logspace)
                        hit |= np.isnan(v)
                    mask &= hit
                else:
                    listed = list(np.asarray(values).tolist())
                    hit = df[name].isin(listed).to_numpy(dtype=bool)
                    if any(v is None for v in listed):  # an optional parameter left unset:
                        hit = hit | df[name].isna().to_numpy()  # stored null, read as NaN
                    mask &= hit
            else:
                stored = df[list(axis.names)].map(_canonical)
                merged = stored.merge(self.axis_keys[i], how="left", on=list(axis.names))
                mask &= merged["_hit"].fillna(False).to_numpy(dtype=bool)
        return table, well_formed, df, mask


def _stored_list(v) -> list:
    """A stored list value as a list of Python values (tolist(): numpy scalars' reprs,
    'np.float64(0.1)', match no fragment)."""
    return v.tolist() if isinstance(v, np.ndarray) else list(v)


def _unset_or_fragment(v) -> str:
    """The canonical fragment of a stored scalar; "null" for any unset value (None, pd.NA or
    a NaN: the store writes None and NaN both as null)."""
    return "null" if v is None or v is pd.NA or (isinstance(v, float) and v != v) \
        else _fragment(v)


def _canonical(v) -> str:
    """The canonical fragment of a stored value of an object column (a list read as a numpy
    array, a string, an unset value): what the task id hashes, so two values differ here
    exactly when their points do."""
    return _fragment(_stored_list(v)) if isinstance(v, np.ndarray) else _unset_or_fragment(v)
