"""The CSV text of an export's time and float columns (``export._csv_column``) against the
way it was first made, in the same run: times by ``pc.strftime``, floats respelled (inf,
-inf, nan) in four passes over every value. Now times are cast to text and floats are
respelled only where one is not finite. A store's two time columns took 9 s of an export of
4M rows (24 s in all).

    python benchmarks/bench_export_csv.py           # columns of 4,000,000 rows
    python benchmarks/bench_export_csv.py --quick   # 400,000 rows
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import best_time  # noqa: E402
from pipeline.report.export import _csv_column  # noqa: E402


def reference(col: pa.ChunkedArray) -> pa.Array:
    """The text as export first made it (the baseline)."""
    if pa.types.is_timestamp(col.type):
        return pc.strftime(pc.cast(col, pa.timestamp("us", tz="UTC")),
                           format="%Y-%m-%dT%H:%M:%SZ")
    text = pc.cast(col, pa.string())
    for raw, spec in (("-inf", "-INF"), ("inf", "INF"), ("nan", "NaN"), ("-nan", "NaN")):
        text = pc.if_else(pc.equal(text, raw), spec, text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 400_000 if args.quick else 4_000_000
    rng = np.random.default_rng(0)
    now_us = 1_796_000_000 * 10**6  # a sweep's finish times: one day of microseconds
    floats = rng.random(n)
    with_inf = floats.copy()
    with_inf[::1000] = np.inf
    columns = {
        "finished_at (timestamp us, UTC)": pa.chunked_array([pa.array(
            now_us + rng.integers(0, 86_400 * 10**6, n), pa.int64()).cast(
                pa.timestamp("us", tz="UTC"))]),
        "value (float64, finite)": pa.chunked_array([pa.array(floats)]),
        "eps (float64, 0.1% inf)": pa.chunked_array([pa.array(with_inf)]),
    }
    print(f"{n:,} rows a column; best of 3")
    print(f"{'column':<32} {'before s':>9} {'now s':>7} {'now/before':>11}")
    failed = 0
    for name, col in columns.items():
        before, expected = best_time(lambda: reference(col))
        now, got = best_time(lambda: _csv_column(col))
        print(f"{name:<32} {before:9.3f} {now:7.3f} {now / before:11.3f}")
        if not got.equals(expected):
            print(f"FAIL: {name}: the text differs from the reference")
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
