"""The short summary table printed at the end of a sweep.

Given the sweep's ``grid``, it describes that grid: its points' latest attempts (the rows
``pipeline.load`` keeps), of the experiment's current version. Whatever else the folder holds
(rows of other parameter settings, of other versions, superseded attempts) is counted on one
line of its own, not mixed into the counts or the figures. Without a grid (older callers) it
covers every row of the current version, each attempt included.

It streams the part files batch by batch (exact min/max/null counts, median of an evenly
strided sample of at most ``SAMPLE`` values): the driver never gathers the results' columns.
With a grid, the rows to summarise are found once, before the scan, in time linear in the
store: one read of the key columns (task id, status, version, finish time, row index) and the
parameters, matched against the grid as planning matches them (``GridMatch``, not hashing its
points), gives a flag per stored row, which the scan slices by row offset. Memory: about 30
bytes a stored row while the flags are built, then one byte a row; when every row of this
version is a kept attempt of the grid (a folder of this grid alone) no flags are kept and the
scan filters nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.store.parquet import (checked_schemas, part_files, read_again_if_swapped,
                                    unified_schema)

MAX_COLUMNS = 6
SAMPLE = 100_000


def summary_table(path, experiment, tasks_ok: int | None = None,
                  tasks_failed: int | None = None, grid=None) -> str:
    """The closing summary of a sweep of ``grid`` (a :class:`pipeline.engine.grid.Grid`)
    stored in ``path``. With ``grid``, the counts come from the store (``tasks_ok`` and
    ``tasks_failed`` are not needed); without it, every row of ``experiment``'s version is
    summarised and ``tasks_ok``/``tasks_failed`` are printed as given."""
    # Printed after the sweep let go of the lock: a compaction may swap the files meanwhile
    # (read the current set again).
    return read_again_if_swapped(
        lambda: _summary_table(path, experiment, tasks_ok, tasks_failed, grid))


class _Selection:
    """What the summary of a grid keeps: ``ok``/``failed``, its tasks stored under
    ``grid.version`` by their kept attempt; ``grid_rows``, the stored rows of this version that
    are points of the grid (every attempt); ``keep``, one flag per stored row in storage order
    (the order the summary's scan reads them), None when every row of the summarised version is
    kept (a folder of this grid alone: nothing to filter)."""

    def __init__(self, ok: int, failed: int, grid_rows: int, keep: np.ndarray | None):
        self.ok, self.failed, self.grid_rows, self.keep = ok, failed, grid_rows, keep


def _select(grid, path, files, schema, version) -> _Selection | None:
    """The rows of ``grid``'s points that ``pipeline.load`` keeps (each task's latest attempt),
    found once for the whole store, in one scan a batch at a time of the key columns (task
    id, status, version, finish time, row index) and the parameters: planning's match of the
    stored parameters against the grid (not hashing its points), and 30 bytes of each stored
    row kept for load's own rule (:func:`pipeline.store.parquet.kept_positions`, by sorts: the
    Arrow deduplication of the id strings it replaces held about 0.35 KB a stored row, 35 GB
    for 10^8). The summary's scan then slices ``keep`` by row offset. None when no point is
    stored."""
    from pipeline.engine.resume import GridMatch
    from pipeline.store.integrity import scan_parts
    from pipeline.store.parquet import (key_arrays, kept_positions_of_tasks, task_numbers,
                                        well_formed_ids)

    names = [p.name for p in grid.experiment.params]
    if any(n not in schema.names for n in names):  # parts of a version without a parameter:
        return None  # none of their rows is a point of this grid (ids hash every parameter)
    wanted = [c for c in ("task_id", "status", "experiment_version", "finished_at", "row_index")
              if c in schema.names]
    match = GridMatch(grid)
    of_version = 0
    # load's rule is applied to every stored row (its steps depend on whether any key of the
    # folder repeats), then the grid's rows are picked out
    masks = []  # storage order: rows whose id the arrays hold
    parts = {k: [] for k in ("head", "tail", "row_index", "failed", "stamp", "mine")}
    columns = wanted + [n for n in names if n not in wanted]
    for batch in scan_parts(files, columns, schema=schema):  # storage order, as the scan's
        held = np.asarray(well_formed_ids(batch.column("task_id")), dtype=bool)
        mine = match.row_mask(pa.Table.from_batches([batch]), held)  # the grid's version
        if "experiment_version" in wanted:
            versions = np.asarray(pc.fill_null(batch.column("experiment_version"), -1))
            of_version += int(np.count_nonzero(versions == version))
        else:
            of_version += batch.num_rows  # every row is of the summarised version
        masks.append(held)
        keys = batch.select(wanted).filter(pa.array(held))
        for name, values in zip(("head", "tail", "row_index", "failed", "stamp"),
                                key_arrays(keys)):
            parts[name].append(values)
        parts["mine"].append(mine[held])
    if not parts["head"]:  # parts without rows
        return None
    head, tail, row_index, failed, stamp, mine = (
        np.concatenate(parts.pop(k)) for k in ("head", "tail", "row_index", "failed", "stamp",
                                               "mine"))
    rows = int(np.count_nonzero(mine))
    if not rows:
        return None
    task, tasks = task_numbers(head, tail)
    del head, tail
    kept = np.zeros(task.size, dtype=bool)
    kept[kept_positions_of_tasks(task, tasks, row_index, failed, stamp)] = True
    kept &= mine
    del row_index, stamp, mine
    # a task's kept rows are all ok or all failed (a task stored ok drops its failed rows)
    ok = _distinct_tasks(task[kept & ~failed], tasks)
    failed_tasks = _distinct_tasks(task[kept & failed], tasks)
    del task, failed
    keep = np.concatenate(masks)
    del masks
    keep[keep] = kept
    if grid.version == version:
        if int(np.count_nonzero(keep)) == of_version:  # every row of the version is kept
            keep = None
    return _Selection(ok, failed_tasks, rows, keep)


def _distinct_tasks(task: np.ndarray, tasks: int) -> int:
    """How many distinct numbers ``task`` holds, each in ``range(tasks)`` (no sort: the
    numbers are dense)."""
    seen = np.zeros(tasks, dtype=bool)
    seen[task] = True
    return int(np.count_nonzero(seen))


def _summary_table(path, experiment, tasks_ok: int | None, tasks_failed: int | None,
                   grid=None) -> str:
    files = part_files(path)
    if not files:
        return "(no rows stored)"
    checked_schemas(path, files)  # a damaged or foreign part: the store's errors, not Arrow's
    declared = [name for name, typ in experiment.columns.items()
                if pa.types.is_floating(typ) or pa.types.is_integer(typ)]
    numeric, not_shown = declared[:MAX_COLUMNS], declared[MAX_COLUMNS:]
    total = sum(pq.read_metadata(f).num_rows for f in files)
    stride = max(1, total // SAMPLE)
    current = 0  # rows of this version
    summarised = 0  # rows in the figures: this version's (with a grid: its latest attempts)
    lo = {c: np.inf for c in numeric}
    hi = {c: -np.inf for c in numeric}
    nulls = {c: 0 for c in numeric}
    samples: dict[str, list] = {c: [] for c in numeric}
    ok_rows = 0
    schema = unified_schema([pq.read_schema(f) for f in files])  # types may change by version
    numeric = [c for c in numeric if c in schema.names]  # parts of an older version may lack it
    dataset = ds.dataset([str(f) for f in files], schema=schema, format="parquet")
    versioned = "experiment_version" in schema.names
    selection = (_select(grid, path, files, schema, experiment.version) if grid is not None
                 else None)
    keep = selection.keep if selection is not None else None
    columns = ["status", *numeric, *(["experiment_version"] if versioned else [])]
    offset = 0  # rows of the store read so far: the position of the batch's rows in ``keep``
    for batch in dataset.to_batches(columns=list(dict.fromkeys(columns)), batch_size=65_536):
        mine = keep[offset:offset + batch.num_rows] if keep is not None else None
        offset += batch.num_rows
        if versioned:
            of_version = pc.equal(batch.column("experiment_version"), experiment.version)
            batch = batch.filter(of_version)
            if mine is not None:
                mine = mine[np.asarray(pc.fill_null(of_version, False))]
        current += batch.num_rows
        if grid is not None:
            if selection is None or not batch.num_rows:
                continue  # no point of the grid is stored: nothing to summarise
            if mine is not None:
                batch = batch.filter(pa.array(mine))
        summarised += batch.num_rows
        ok = batch.filter(pc.equal(batch.column("status"), "ok"))
        ok_rows += ok.num_rows
        for c in numeric:
            col = ok.column(c)
            nulls[c] += col.null_count
            values = col.to_numpy(zero_copy_only=False).astype(np.float64)
            values = values[~np.isnan(values)]  # nulls are counted apart; +-inf are values
            if values.size:
                lo[c], hi[c] = min(lo[c], values.min()), max(hi[c], values.max())
                samples[c].append(values[::stride])
    if keep is not None and offset != keep.size:  # the scan read other rows than the keys
        raise RuntimeError(f"summary: {offset:,} rows scanned, {keep.size:,} keys read")
    if grid is None:
        head = f"stored: {current:,} rows of version {experiment.version} (all attempts; " \
            "pipeline.load keeps each task's latest)"
        if tasks_ok is not None:
            head += f", {tasks_ok:,} tasks ok, {tasks_failed or 0:,} failed"
        lines = [head]
        if total > current:
            lines.append(f"and {total - current:,} rows of other versions, not summarised "
                         "(pipeline.load(..., version=...) reads them)")
    else:
        lines = [_grid_head(grid, selection, summarised),
                 *_others_line(path, experiment, total, current,
                               selection.grid_rows if selection is not None else 0,
                               summarised)]
    if numeric and ok_rows:
        width = max(len(c) for c in numeric)
        # failed rows carry no outputs: the figures are the ok rows' (the head counts both)
        of_ok = f"  (the {ok_rows:,} ok rows)" if ok_rows < summarised else ""
        lines.append(f"{'column':<{width}}  {'min':>12}  {'median':>12}  {'max':>12}  "
                     f"{'null':>6}{of_ok}")
        for c in numeric:
            med = float(np.median(np.concatenate(samples[c]))) if samples[c] else np.nan
            low, high = (lo[c], hi[c]) if samples[c] else (np.nan, np.nan)
            lines.append(f"{c:<{width}}  {low:>12.6g}  {med:>12.6g}  {high:>12.6g}  {nulls[c]:>6}")
        if not_shown:  # a terminal's width: the first MAX_COLUMNS, and the others named
            lines.append(f"(and {len(not_shown)} more numeric column(s), not summarised here: "
                         f"{', '.join(not_shown)})")
    return "\n".join(lines)


def _grid_head(grid, selection: _Selection | None, rows: int) -> str:
    ok = selection.ok if selection is not None else 0
    failed = selection.failed if selection is not None else 0
    missing = grid.total - ok - failed
    return (f"this sweep's grid ({grid.total:,} points): {ok:,} tasks ok, {failed:,} failed"
            + (f", {missing:,} not stored" if missing else "")
            + f"; {rows:,} rows, each task's latest attempt (version {grid.version})")


def _others_line(path, experiment, total: int, current: int, grid_rows: int,
                 summarised: int) -> list[str]:
    """The line on the folder's rows the summary leaves out, and how to read them."""
    parts = []
    settings, versions, superseded = current - grid_rows, total - current, grid_rows - summarised
    if settings:
        parts.append(f"{settings:,} of other parameter settings")
    if versions:
        parts.append(f"{versions:,} of other versions")
    if superseded:
        parts.append(f"{superseded:,} superseded attempts")
    if not parts:
        return []
    return [f"not summarised: {total - summarised:,} other rows in the folder "
            f"({', '.join(parts)}); pipeline.load({str(Path(path).parent)!r}, {experiment.name!r}) "
            "loads every setting and version"]


def ran_line(stats) -> str:
    """The line after the table: tasks run, their time and rate, part files. The rate is
    the sweep proper's (``stats.elapsed_s`` leaves out the workers' warm-up); the progress
    line's last rate counts the warm-up too, so when the warm-up changes the rate shown,
    both are given, each named ('4/4 done ... 6.1 tasks/s' above read as a contradiction of
    'ran 4 tasks in 0.1 s (61 tasks/s)')."""
    from pipeline.engine.progress import rate_text

    rate = rate_text(stats.ran / max(stats.elapsed_s, 1e-9))
    with_warmup = rate_text(stats.ran / max(stats.elapsed_s + stats.warmup_s, 1e-9))
    if with_warmup == rate:
        return f"ran {stats.ran:,} tasks in {stats.elapsed_s:.1f} s ({rate} tasks/s), " \
            f"{stats.parts} part file(s)"
    return (f"ran {stats.ran:,} tasks in {stats.elapsed_s:.1f} s after a {stats.warmup_s:.1f} s "
            f"warm-up of the workers: {rate} tasks/s ({with_warmup} tasks/s with the warm-up, "
            f"as the progress line counts), {stats.parts} part file(s)")
