"""Coverage after a version bump: the grid's points hashed under another experiment version.

``report.selection.point_prefixes`` hashes the asked points in chunks, as a batch hashes the ids
it stores; the baseline, measured in the same run, is the one-point-at-a-time hashing it
replaced (``grid_at_version(grid, v).task_id(i)`` per point). Both must give the same ids.
Prints wall times and the ratio baseline / chunked.

    python benchmarks/bench_coverage.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.engine.grid import Grid  # noqa: E402
from pipeline.experiments.base import get_experiment  # noqa: E402
from pipeline.report.selection import grid_at_version, point_prefixes  # noqa: E402
from pipeline.store.parquet import id_prefixes  # noqa: E402


def calibration_grid(n: int) -> Grid:
    """A ``calibration`` grid of ``n`` points (a multiple of 100) over four axes."""
    grid = Grid(get_experiment("calibration"),
                {"x": {"range": [0, n // 100]}, "scale": {"linspace": [0, 1, 10]},
                 "rows": [1, 2], "fail_every": {"range": [0, 5]}}, {"work_us": 0.0})
    assert grid.total == n, grid.total
    return grid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 100_000 if args.quick else 1_000_000
    grid = calibration_grid(n)
    exp = grid.experiment
    other = exp.version - 1
    indices = np.arange(n)

    t0 = time.perf_counter()
    chunked = point_prefixes(grid, indices, version=other)
    t_chunked = time.perf_counter() - t0

    import pyarrow as pa

    there = grid_at_version(grid, other)
    t0 = time.perf_counter()
    one_by_one = id_prefixes(pa.array([there.task_id(int(i)) for i in indices]))
    t_baseline = time.perf_counter() - t0

    assert np.array_equal(chunked, one_by_one), "chunked ids differ from task_id's"
    print(f"{n:,} grid points hashed under version {other} (the code's is {exp.version}):")
    print(f"  one at a time (baseline): {t_baseline:.2f} s")
    print(f"  chunked (point_prefixes): {t_chunked:.2f} s  -> {t_baseline / t_chunked:.2f}x faster")


if __name__ == "__main__":
    main()
