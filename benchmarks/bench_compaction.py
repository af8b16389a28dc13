"""Compaction's memory (issue 14's compaction, found at 4.3 GB for 9.1M rows): the peak Arrow
memory of ``compact`` (the key columns of every row, then one part file at a time) against,
in the same run, what the previous compaction held: the whole table read and deduplicated
(``read_table`` + ``deduplicate_table``). Each side runs in its own process on its own copy
of one store, so each peak is its own: Arrow's (``pyarrow.default_memory_pool().max_memory()``)
and the process's RSS above its own after imports (the plan's numpy arrays are not Arrow's).

    python benchmarks/bench_compaction.py           # 2,000,000 rows in 40 parts
    python benchmarks/bench_compaction.py --quick   # 200,000 rows in 20 parts
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIDE = r"""
import resource, sys, time
import pyarrow as pa
from pipeline.store.compaction import compact
from pipeline.store.parquet import deduplicate_table, read_table
folder = sys.argv[2]
before = int(open("/proc/self/statm").read().split()[1]) * 4096
t0 = time.perf_counter()
if sys.argv[1] == "whole":
    rows = deduplicate_table(read_table(folder)).num_rows
else:
    rows = compact(folder).rows_after  # the default targets: 1M rows or 128 MiB a file
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(pa.default_memory_pool().max_memory(), rss, rows, time.perf_counter() - t0)
"""


def make_store(folder: Path, rows: int, parts: int) -> None:
    from pipeline.engine.batch import run_batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment
    from pipeline.store.part_writer import PartWriter

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, rows]}}, {"work_us": 0.0})
    writer = PartWriter(folder, "bench", flush_rows=rows // parts)
    step = rows // parts
    for start in range(0, rows, step):
        writer.write(run_batch(grid, range(start, min(rows, start + step)))[0])
    writer.write(run_batch(grid, range(0, step))[0])  # a batch stored twice: a real rewrite
    writer.close()


def side(kind: str, folder: Path) -> tuple[int, int, float]:
    out = subprocess.run([sys.executable, "-c", SIDE, kind, str(folder)], cwd=ROOT,
                         capture_output=True, text=True, timeout=1800, check=True)
    peak, rss, rows, seconds = out.stdout.split()
    return int(peak), int(rows), float(seconds), int(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows, parts = (200_000, 20) if args.quick else (2_000_000, 40)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "store"
        t0 = time.perf_counter()
        make_store(base, rows, parts)
        print(f"store: {rows:,} rows (+{rows // parts:,} stored twice) in {parts + 1} parts, "
              f"built in {time.perf_counter() - t0:.1f} s")
        shutil.copytree(base, Path(tmp) / "copy")
        whole = side("whole", base)
        ours = side("compact", Path(tmp) / "copy")
    assert whole[1] == ours[1] == rows, (whole, ours)
    print(f"whole table (before): {whole[0] / 2**20:.0f} MiB Arrow peak, "
          f"{whole[3] / 2**20:.0f} MiB RSS peak, {whole[2]:.1f} s; "
          f"compact: {ours[0] / 2**20:.0f} MiB, {ours[3] / 2**20:.0f} MiB, {ours[2]:.1f} s "
          f"(writes too); memory ratio {ours[0] / whole[0]:.3f} (Arrow), "
          f"{ours[3] / whole[3]:.3f} (RSS: numpy arrays too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
