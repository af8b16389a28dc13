"""The sweep's closing summary with its grid (``summary_table(..., grid=grid)``) against the
plain summary of the same store (no grid), measured in the same run.

Builds a real store: ``calibration`` points computed by ``run_batch`` (the engine's tables,
task ids hashed as a sweep hashes them), written by ``PartWriter`` as a sweep writes them
(default 10^6 rows in 20 part files; --quick 2 x 10^5 rows). Two shapes are timed:

* one setting: every stored row is a latest attempt of the grid (a single-config folder,
  the common case);
* mixed: the grid's rows plus as many of another fixed setting, and a re-run of a tenth of
  the grid's points (superseded attempts), so the summary filters.

Prints each time and its ratio to the plain summary. Linear in the store: the ratio should
not grow with the store size.

    python benchmarks/bench_summary.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.engine.batch import run_batch  # noqa: E402
from pipeline.engine.grid import Grid  # noqa: E402
from pipeline.experiments.base import get_experiment  # noqa: E402
from pipeline.report.summary import summary_table  # noqa: E402
from pipeline.store.part_writer import PartWriter  # noqa: E402

from benchmarks.timing import best_time  # noqa: E402  (min time of repeats, and the last result)


def write_grid(folder: Path, grid: Grid, points, parts: int, run_id: str) -> None:
    writer = PartWriter(folder, run_id)
    points = list(points)
    per = -(-len(points) // parts)
    for start in range(0, len(points), per):
        writer.write(run_batch(grid, points[start:start + per])[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    args = ap.parse_args()
    n = args.rows or (200_000 if args.quick else 1_000_000)
    parts = 20
    repeat = 1 if args.quick else 2
    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, n]}}, {"work_us": 0.0})
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "calibration"
        t0 = time.perf_counter()
        write_grid(folder, grid, range(grid.total), parts, "20260101T000000Z-aaaaaa")
        print(f"store: {n:,} rows in {parts} part files (written in "
              f"{time.perf_counter() - t0:.1f} s)")
        t_plain, _ = best_time(lambda: summary_table(folder, exp, n, 0), repeat)
        t_grid, out = best_time(lambda: summary_table(folder, exp, grid=grid), repeat)
        assert out.startswith(f"this sweep's grid ({n:,} points): {n:,} tasks ok"), out
        print(f"one setting: plain {t_plain:.2f} s, with grid= {t_grid:.2f} s "
              f"(ratio {t_grid / t_plain:.2f})")
        # another fixed setting (as many rows) and a later attempt of a tenth of the points
        other = Grid(exp, {"x": {"range": [0, n]}}, {"work_us": 0.0, "scale": 2.0})
        write_grid(folder, other, range(other.total), parts, "20260102T000000Z-bbbbbb")
        write_grid(folder, grid, range(0, grid.total, 10), 2, "20990101T000000Z-cccccc")
        t_plain, _ = best_time(lambda: summary_table(folder, exp, n, 0), repeat)
        t_grid, out = best_time(lambda: summary_table(folder, exp, grid=grid), repeat)
        assert f"{n // 10:,} superseded attempts" in out, out
        total = 2 * n + n // 10
        print(f"mixed ({total:,} rows, half another setting, {n // 10:,} superseded): "
              f"plain {t_plain:.2f} s, with grid= {t_grid:.2f} s (ratio {t_grid / t_plain:.2f})")


if __name__ == "__main__":
    main()
