"""Query layer for reports: pandas over pyarrow against DuckDB, on the same Parquet parts.

Builds a result folder of N rows (default 2,000,000 in 40 part files, the shape a sweep
writes), then times (1) loading the deduplicated table and (2) a typical report aggregation
(mean/min/max of a value per two grouping parameters). DuckDB is timed only if installed; it
is not a dependency of the pipeline.

    python benchmarks/bench_report.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import best_time  # noqa: E402
from pipeline.store.parquet import load  # noqa: E402


def make_results(root: Path, n: int, parts: int) -> None:
    rng = np.random.default_rng(0)
    folder = root / "synthetic"
    folder.mkdir(parents=True)
    per = n // parts
    now = pd.Timestamp.now(tz="UTC")
    for p in range(parts):
        ids = np.arange(p * per, (p + 1) * per)
        table = pa.table({
            "eps": rng.choice([0.1, 0.2, 0.5, 1.0, 2.0], per),
            "k": rng.integers(1, 1000, per),
            "value": rng.random(per),
            "task_id": [f"{i:024x}" for i in ids],
            "status": ["ok"] * per, "row_index": np.zeros(per, dtype=np.int64),
            "finished_at": pa.array([now] * per, pa.timestamp("us", tz="UTC")),
            # the rest of a result part's bookkeeping: without it the store refuses the part
            # as foreign (this benchmark then failed at its first load)
            "experiment_version": np.zeros(per, dtype=np.int64),
            "error": pa.nulls(per, pa.string()), "elapsed_s": rng.random(per),
            "worker": ["tcp://127.0.0.1:1"] * per,
            "started_at": pa.array([now] * per, pa.timestamp("us", tz="UTC")),
        })
        pq.write_table(table, folder / f"part-x-{p:06d}.parquet", compression="zstd")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 200_000 if args.quick else 2_000_000
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        make_results(root, n, 40)
        t_load, df = best_time(lambda: load(root, "synthetic"))
        t_agg, agg = best_time(lambda: df.groupby(["eps", "k"])["value"].agg(["mean", "min", "max"]))
        print(f"rows: {n:,}")
        print(f"pandas/pyarrow: load+dedup {t_load:.2f} s, aggregate {t_agg * 1e3:.1f} ms")
        try:
            import duckdb
        except ImportError:
            print("duckdb not installed: comparison skipped")
            return
        glob = str(root / "synthetic" / "part-*.parquet")
        query = (f"SELECT eps, k, avg(value), min(value), max(value) FROM ("
                 f"SELECT * FROM read_parquet('{glob}') QUALIFY row_number() OVER "
                 f"(PARTITION BY task_id, row_index ORDER BY finished_at DESC) = 1) "
                 f"GROUP BY eps, k")
        t_duck, res = best_time(lambda: duckdb.sql(query).df())
        assert len(res) == len(agg)
        t_duck_load, _ = best_time(lambda: duckdb.sql(
            f"SELECT * FROM read_parquet('{glob}') QUALIFY row_number() OVER "
            f"(PARTITION BY task_id, row_index ORDER BY finished_at DESC) = 1").df())
        print(f"duckdb:         load+dedup {t_duck_load:.2f} s, dedup+aggregate in SQL "
              f"{t_duck:.2f} s")
        print(f"ratio (duckdb / pandas) load+dedup: {t_duck_load / t_load:.2f}; "
              f"full query vs pandas load+aggregate: {t_duck / (t_load + t_agg):.2f}")


if __name__ == "__main__":
    main()
