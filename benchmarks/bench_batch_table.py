"""What a finished batch costs to send and to store (issue 14): a worker sends a ``PointsRun``
(what varies per point) and the driver builds the typed table (``batch_table.points_table``).

Printed, in the same run, for a batch of 1,100 calibration points (one row each):
  - bytes on the wire a row: the ``PointsRun`` against the Arrow table the worker used to send
    (both as Dask serializes a task's result);
  - the driver's table build, microseconds a row: parameter columns from ``Grid.batch_values``
    (numpy for long range and float axes) against ``Grid.batch_canonical``'s lists, the
    columns the table was built from before.

    python benchmarks/bench_batch_table.py           # best of 7 x 200 builds
    python benchmarks/bench_batch_table.py --quick   # best of 3 x 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distributed.protocol import serialize  # noqa: E402

import pipeline.engine.batch as batch  # noqa: E402
import pipeline.engine.batch_table as batch_table  # noqa: E402
from pipeline.engine.grid import Grid  # noqa: E402
from pipeline.experiments.base import get_experiment  # noqa: E402

POINTS = 1_100  # a 64 x 1 ms sweep's typical batch


def wire_bytes(obj) -> int:
    header, frames = serialize(obj, serializers=("dask", "pickle"))
    return sum(memoryview(f).nbytes for f in frames)


def best_us(fn, repeat: int, number: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeat, number = (3, 50) if args.quick else (7, 200)
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 640_000]}},
                {"work_us": 0.0, "work_mode": "sleep"})
    indices = range(100_000, 100_000 + POINTS)
    run = batch.run_points(grid, indices)
    table = batch_table.points_table(grid, indices, run)
    assert table.num_rows == POINTS

    sent, old_sent = wire_bytes(run), wire_bytes(table)
    print(f"batch of {POINTS:,} points, one row each")
    print(f"  on the wire: PointsRun {sent / POINTS:6.1f} B/row   Arrow table (before) "
          f"{old_sent / POINTS:6.1f} B/row   ratio {sent / old_sent:.2f}")

    now = best_us(lambda: batch_table.points_table(grid, indices, run), repeat, number)
    values = grid.batch_values
    try:  # the columns the table was built from before: batch_canonical's lists
        grid.batch_values = lambda idx: grid.batch_canonical(idx)[0]
        before = best_us(lambda: batch_table.points_table(grid, indices, run), repeat, number)
        old = batch_table.points_table(grid, indices, run)
    finally:
        grid.batch_values = values
    assert old.equals(table)  # the same table either way
    print(f"  driver's table build: batch_values {now / POINTS:.3f} us/row   "
          f"batch_canonical (before) {before / POINTS:.3f} us/row   ratio {now / before:.2f}")


if __name__ == "__main__":
    main()
