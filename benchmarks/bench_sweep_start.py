"""What a small sweep costs before and after its points: the real CLI on ``cluster=local``
with 2 workers, 4 points of ``calibration``, so nearly all of it is start-up (imports, the
cluster, the warm-up) and shutdown. Wall time and the CPU seconds of the driver and its
worker processes (their rusage, reaped children included).

Baseline, measured in the same run: the grid pickled as it was before (its spec only), so that
each worker rebuilt it through ``get_experiment`` and imported every experiment family.
Now it travels with its experiment's module and the worker imports that one alone. The two
alternate, best of ``--runs`` each.

    python benchmarks/bench_sweep_start.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_PICKLE = """
import pipeline.engine.grid as g
g.Grid.__reduce__ = lambda self: (g.Grid.from_spec, self._spec)  # spec only: every family
"""
DRIVER = """
import sys
{patch}
from pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


def one_sweep(patch: str, results: str) -> tuple[float, float]:
    """(wall s, CPU s of the driver and every process it reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER.format(patch=patch), "experiment=calibration",
         f"results_dir={results}", "grid.x={range:[0,4]}", "params.work_us=0",
         "cluster.n_workers=2", "cluster.dashboard_address=:0", "progress=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    best = {"every family (baseline)": [float("inf")] * 2, "its own module": [float("inf")] * 2}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            for (name, patch) in (("every family (baseline)", OLD_PICKLE), ("its own module", "")):
                wall, cpu = one_sweep(patch, f"{tmp}/{i}-{len(patch)}")
                best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    print(f"4-point sweep on 2 local workers, best of {runs} alternated runs each:")
    for name, (wall, cpu) in best.items():
        print(f"  workers import {name:24s} wall {wall:5.2f} s   CPU {cpu:5.2f} s")
    (w0, c0), (w1, c1) = best.values()
    print(f"  ratio baseline / now: wall {w0 / w1:.2f}x, CPU {c0 / c1:.2f}x")


if __name__ == "__main__":
    main()
