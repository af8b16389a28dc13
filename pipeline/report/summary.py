"""The short summary table printed at the end of a sweep.

It covers the experiment's current version (the one the sweep ran): rows that earlier
versions left in the folder are counted on a line of their own, not mixed into the figures.
It streams the part files batch by batch (exact min/max/null counts, median of an evenly
strided sample of at most ``SAMPLE`` values), so a sweep of millions of rows is summarised in
bounded memory: the driver never gathers the results.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.store.parquet import part_files, read_again_if_swapped, unified_schema

MAX_COLUMNS = 6
SAMPLE = 100_000


def summary_table(path, experiment, tasks_ok: int | None = None,
                  tasks_failed: int | None = None) -> str:
    # Printed after the sweep let go of the lock: a compaction may swap the files meanwhile
    # (read the current set again).
    return read_again_if_swapped(
        lambda: _summary_table(path, experiment, tasks_ok, tasks_failed))


def _summary_table(path, experiment, tasks_ok: int | None, tasks_failed: int | None) -> str:
    files = part_files(path)
    if not files:
        return "(no rows stored)"
    numeric = [name for name, typ in experiment.columns.items()
               if pa.types.is_floating(typ) or pa.types.is_integer(typ)][:MAX_COLUMNS]
    total = sum(pq.read_metadata(f).num_rows for f in files)
    stride = max(1, total // SAMPLE)
    current = 0  # rows of this version
    lo = {c: np.inf for c in numeric}
    hi = {c: -np.inf for c in numeric}
    nulls = {c: 0 for c in numeric}
    samples: dict[str, list] = {c: [] for c in numeric}
    ok_rows = 0
    schema = unified_schema([pq.read_schema(f) for f in files])  # types may change by version
    numeric = [c for c in numeric if c in schema.names]  # parts of an older version may lack it
    dataset = ds.dataset([str(f) for f in files], schema=schema, format="parquet")
    versioned = "experiment_version" in schema.names
    for batch in dataset.to_batches(
            columns=["status", *numeric, *(["experiment_version"] if versioned else [])],
            batch_size=65_536):
        if versioned:
            batch = batch.filter(pc.equal(batch.column("experiment_version"),
                                          experiment.version))
        current += batch.num_rows
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
    head = f"stored: {current:,} rows of version {experiment.version} (all attempts; " \
        "pipeline.load keeps each task's latest)"
    if tasks_ok is not None:
        head += f", {tasks_ok:,} tasks ok, {tasks_failed or 0:,} failed"
    lines = [head]
    if total > current:
        lines.append(f"and {total - current:,} rows of other versions, not summarised "
                     "(pipeline.load(..., version=...) reads them)")
    if numeric and ok_rows:
        width = max(len(c) for c in numeric)
        lines.append(f"{'column':<{width}}  {'min':>12}  {'median':>12}  {'max':>12}  {'null':>6}")
        for c in numeric:
            med = float(np.median(np.concatenate(samples[c]))) if samples[c] else np.nan
            low, high = (lo[c], hi[c]) if samples[c] else (np.nan, np.nan)
            lines.append(f"{c:<{width}}  {low:>12.6g}  {med:>12.6g}  {high:>12.6g}  {nulls[c]:>6}")
    return "\n".join(lines)
