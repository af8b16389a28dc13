"""Driver memory of what a resume, a dry run and ``status`` read from a large store (issue 14:
planning with bounded driver memory). The store is read a batch at a time and only 8 bytes a
stored row (its id prefix) are kept; before, each of them read its key columns whole (task
id, status, version and, to match the grid, every parameter column) into one table and a
DataFrame: about 0.4 KB a stored row, 40 GB for 10^8.

Printed in the same run, each in its own process on one store (peak RSS above the process's
own after imports, so each figure is its own):

- ``whole``: the baseline, that whole-table read of the same columns, to pandas, with the ids
  turned into prefixes (what the previous ``grid_rows`` and ``stored_ids`` held at their peak);
- ``resume``: ``plan_sweep`` and the code check a resume makes (``stale_points``);
- ``status``: ``stored_counts_by_version``, status's counts;
- ``summary``: the table printed at the end of every sweep (``summary_table`` of the grid:
  each task's kept attempt, found by load's rule on arrays of the key columns instead of
  deduplicating the id strings);

and each one's ratio against ``whole``.

    python benchmarks/bench_resume_memory.py           # a store of 4,000,000 rows
    python benchmarks/bench_resume_memory.py --quick   # a store of 400,000 rows
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_store(results: Path, rows: int) -> None:
    """A store written by a real sweep (the CLI, a local cluster of 2 workers): its part
    files, row groups and code ids are what a resume meets."""
    subprocess.run([sys.executable, "run.py", "experiment=calibration",
                    f"grid.x={{range:[0,{rows}]}}", "params.work_us=0", f"results_dir={results}",
                    "cluster.n_workers=2"], cwd=ROOT, check=True, timeout=1800,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

SIDE = r"""
import resource, sys, time
import numpy as np
import pyarrow as pa
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import code_id, stale_points
from pipeline.engine.resume import plan_sweep
from pipeline.experiments.base import get_experiment
from pipeline.store.integrity import read_parts
from pipeline.report.summary import summary_table
from pipeline.store.parquet import id_prefixes, part_files, stored_counts_by_version, unique_ids

kind, folder, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
grid = Grid(get_experiment("calibration"), {"x": {"range": [0, rows]}}, {"work_us": 0.0})


def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


before = rss_mb()
t0 = time.perf_counter()
if kind == "whole":
    names = [p.name for p in grid.experiment.params]
    table = read_parts(part_files(folder), columns=["task_id", "status", "experiment_version",
                                                    *names])
    frame = table.to_pandas()
    ok = unique_ids(id_prefixes(table.filter(pa.array(frame["status"].to_numpy() == "ok"))
                                ["task_id"]))
    answer = ok.size
elif kind == "resume":
    plan = plan_sweep(grid, folder)
    stale_points(grid, folder, code_id(grid.experiment))
    answer = plan.done_ok
elif kind == "summary":
    line = summary_table(folder, grid.experiment, grid=grid).splitlines()[0]
    answer = int(line.split(": ")[1].split(" tasks ok")[0].replace(",", ""))
else:
    answer = stored_counts_by_version(folder)[grid.version][0]
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(peak - before, answer, seconds)
"""


def side(kind: str, folder: Path, rows: int) -> tuple[float, int, float]:
    out = subprocess.run([sys.executable, "-c", SIDE, kind, str(folder), str(rows)], cwd=ROOT,
                         capture_output=True, text=True, timeout=1800, check=True)
    peak, answer, seconds = out.stdout.split()
    return float(peak), int(answer), float(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = 400_000 if args.quick else 4_000_000
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "calibration"
        make_store(Path(tmp), rows)
        parts = len(list(folder.glob("part-*.parquet")))
        results = {kind: side(kind, folder, rows) for kind in ("whole", "resume", "status", "summary")}
    base = results["whole"][0]
    print(f"{rows:,} stored rows in {parts} part files, written by a sweep")
    print(f"{'read':<8} {'peak MiB':>9} {'B/row':>7} {'s':>6} {'vs whole':>9}")
    for kind, (peak, answer, seconds) in results.items():
        print(f"{kind:<8} {peak:9.0f} {peak * 2**20 / rows:7.0f} {seconds:6.2f} "
              f"{peak / base:9.3f}")
        if answer != rows:  # every task is stored ok once: a count that differs is a bug
            print(f"FAIL: {kind} counted {answer:,} tasks stored ok, not {rows:,}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
