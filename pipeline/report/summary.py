"""The short summary table printed at the end of a sweep."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from pipeline.store.parquet import part_files

MAX_COLUMNS = 6


def summary_table(path, experiment) -> str:
    files = part_files(path)
    if not files:
        return "(no rows stored)"
    numeric = [name for name, typ in experiment.columns.items()
               if pa.types.is_floating(typ) or pa.types.is_integer(typ)][:MAX_COLUMNS]
    table = ds.dataset([str(f) for f in files], format="parquet").to_table(
        columns=["task_id", "status", *numeric])
    ok = table.filter(pc.equal(table["status"], "ok"))
    n_ok = len(pc.unique(ok["task_id"]))
    n_failed = len(pc.unique(table.filter(pc.equal(table["status"], "failed"))["task_id"]))
    lines = [f"stored: {table.num_rows:,} rows, {n_ok:,} tasks ok, {n_failed:,} failed"]
    if numeric and ok.num_rows:
        width = max(len(c) for c in numeric)
        lines.append(f"{'column':<{width}}  {'min':>12}  {'median':>12}  {'max':>12}  {'null':>6}")
        for name in numeric:
            col = pc.cast(ok[name], pa.float64())
            finite = col.filter(pc.is_finite(col)) if col.null_count < len(col) else col
            if len(finite) == 0 or finite.null_count == len(finite):
                lo = med = hi = float("nan")
            else:
                mm = pc.min_max(finite)
                lo, hi = mm["min"].as_py(), mm["max"].as_py()
                med = pc.approximate_median(finite).as_py()
            lines.append(f"{name:<{width}}  {lo:>12.6g}  {med:>12.6g}  {hi:>12.6g}  "
                         f"{col.null_count:>6}")
    return "\n".join(lines)
