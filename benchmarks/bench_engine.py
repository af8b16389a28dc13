"""Engine throughput, efficiency and driver memory (issue 2).

Runs, in one process and on one 2-worker LocalCluster:
  pipeline  - run_sweep end to end (adaptive batches, Parquet part files written)
  (a)       - one Dask future per task, no batching
  (b)       - Hydra's own multirun with its basic launcher, one job per task (subset)
  (c)       - a plain Python loop over the same kernel
for 100,000 tasks of ~10 us and 10,000 tasks of ~1 ms; then the driver's peak RSS on a
10^6-point sweep and the time of a 10^7-point dry run. Every figure is printed with its
ratio against a baseline measured in the same run.

    python benchmarks/bench_engine.py           # full (a few minutes on 2 cores)
    python benchmarks/bench_engine.py --quick   # smaller counts, seconds
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.batch import run_batch  # noqa: E402
from pipeline.engine.grid import Grid  # noqa: E402
from pipeline.engine.task_ids import seed_of  # noqa: E402
from pipeline.engine.runner import run_sweep  # noqa: E402
from pipeline.experiments.base import get_experiment  # noqa: E402
from pipeline.store.part_writer import PartWriter  # noqa: E402

WORKERS = 2


def calibration_grid(n: int, work_us: float) -> Grid:
    return Grid(get_experiment("calibration"), {"x": {"range": [0, n]}}, {"work_us": work_us})


def plain_loop(grid: Grid, n: int) -> float:
    """(c) The kernel alone, called in a loop: tasks per second."""
    exp = grid.experiment
    points = [grid.point(i) for i in range(n)]
    seeds = [seed_of(grid.task_id(i)) for i in range(n)]
    t0 = time.perf_counter()
    for p, s in zip(points, seeds):
        exp.run(p, s)
    return n / (time.perf_counter() - t0)


def pipeline_sweep(client, grid: Grid, tmp: Path) -> tuple[float, float, int]:
    writer = PartWriter(tmp, "bench", flush_seconds=60.0)  # buffered, as the CLI writes
    import numpy as np

    t0 = time.perf_counter()
    stats = run_sweep(grid, client, writer, np.arange(grid.total), progress=False)
    elapsed = time.perf_counter() - t0
    assert stats.ok == grid.total, stats
    return grid.total / elapsed, elapsed, writer.seq


def unbatched(client, grid: Grid, n: int) -> float:
    """(a) One Dask future per task (same worker function, batches of one)."""
    from distributed import wait

    [g] = client.scatter([grid], broadcast=True, hash=False)
    t0 = time.perf_counter()
    futures = [client.submit(run_batch, g, [i], pure=False) for i in range(n)]
    wait(futures)
    rate = n / (time.perf_counter() - t0)
    client.cancel(futures)
    return rate


HYDRA_APP = textwrap.dedent("""
    import hydra
    from pipeline.engine.grid import Grid
    from pipeline.engine.task_ids import seed_of
    from pipeline.experiments.base import get_experiment

    @hydra.main(config_path=None, config_name=None, version_base="1.3")
    def main(cfg):
        grid = Grid(get_experiment("calibration"), {}, {"x": int(cfg.x), "work_us": float(cfg.work_us)})
        grid.experiment.run(grid.point(0), seed_of(grid.task_id(0)))

    if __name__ == "__main__":
        main()
""")


def hydra_multirun(n: int, work_us: float, tmp: Path) -> float:
    """(b) Hydra's basic launcher, one job per task: tasks per second."""
    app = tmp / "hydra_task_app.py"
    app.write_text(HYDRA_APP)
    cmd = [sys.executable, str(app), "-m", f"+x=range(0,{n})", f"+work_us={work_us}",
           f"hydra.sweep.dir={tmp / 'multirun'}", "hydra/job_logging=disabled",
           "hydra/hydra_logging=disabled"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return n / (time.perf_counter() - t0)


DRIVER = textwrap.dedent("""
    import resource, sys
    from pipeline.cli import main
    rc = main(sys.argv[1:])
    print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    sys.exit(rc)
""")


def driver_rss(n: int, tmp: Path) -> tuple[float, float]:
    """Peak RSS (MiB) of the driver process alone for an n-point sweep, and its wall time."""
    out = tmp / f"rss{n}"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", DRIVER, "experiment=calibration",
                           f"results_dir={out}", "grid.x={range:[0,%d]}" % n, "params.work_us=0",
                           f"cluster.n_workers={WORKERS}", "cluster.dashboard_address=:0",
                           "progress=false"], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MAXRSS_KB")]
    if proc.returncode != 0 or not line:
        raise RuntimeError(proc.stdout + proc.stderr)
    return int(line[0].split()[1]) / 1024, wall


def dry_run_seconds(n_x: int, n_scale: int, tmp: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "experiment=calibration",
                           f"results_dir={tmp / 'dry'}", "dry_run=true",
                           "grid.x={range:[0,%d]}" % n_x,
                           "grid.scale={linspace:[0,1,%d]}" % n_scale],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_cheap, n_ms = (10_000, 1_000) if args.quick else (100_000, 10_000)
    n_unbatched, n_hydra = (1_000, 20) if args.quick else (5_000, 200)
    n_rss = 100_000 if args.quick else 1_000_000

    from distributed import Client, LocalCluster

    rows = []
    with tempfile.TemporaryDirectory() as d, \
            LocalCluster(n_workers=WORKERS, threads_per_worker=1, dashboard_address=":0",
                         silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        tmp = Path(d)
        print(f"LocalCluster: {WORKERS} workers x 1 thread; quick={args.quick}")

        cheap = calibration_grid(n_cheap, 10.0)
        loop_rate = plain_loop(cheap, min(n_cheap, 20_000))
        rate, elapsed, parts = pipeline_sweep(client, cheap, tmp / "cheap")
        rate_a = unbatched(client, calibration_grid(n_unbatched, 10.0), n_unbatched)
        rate_b = hydra_multirun(n_hydra, 10.0, tmp)
        print(f"\n~10 us tasks (n={n_cheap:,}):")
        print(f"  pipeline (batched, Parquet incl.): {rate:12,.0f} tasks/s  ({elapsed:.2f} s, {parts} parts)")
        print(f"  (a) one future per task:          {rate_a:12,.0f} tasks/s  -> pipeline is {rate / rate_a:,.1f}x")
        print(f"  (b) Hydra multirun, basic launcher:{rate_b:12,.1f} tasks/s  -> pipeline is {rate / rate_b:,.0f}x")
        print(f"  (c) plain loop, one core:         {loop_rate:12,.0f} tasks/s  -> pipeline/loop = {rate / loop_rate:.2f}")
        rows += [("10 us", "pipeline tasks/s", rate), ("10 us", "(a) unbatched tasks/s", rate_a),
                 ("10 us", "(b) hydra multirun tasks/s", rate_b), ("10 us", "(c) loop tasks/s", loop_rate)]

        ms = calibration_grid(n_ms, 1000.0)
        loop_rate_ms = plain_loop(ms, min(n_ms, 500))
        rate_ms, elapsed_ms, _ = pipeline_sweep(client, ms, tmp / "ms")
        ideal = n_ms / loop_rate_ms / WORKERS
        rate_a_ms = unbatched(client, calibration_grid(min(n_unbatched, 2000), 1000.0),
                              min(n_unbatched, 2000))
        print(f"\n~1 ms tasks (n={n_ms:,}):")
        print(f"  pipeline: {elapsed_ms:.2f} s; ideal (kernel time / {WORKERS} workers) {ideal:.2f} s "
              f"-> {elapsed_ms / ideal:.3f}x ideal")
        print(f"  (a) one future per task: {rate_a_ms:,.0f} tasks/s -> pipeline is {rate_ms / rate_a_ms:.2f}x")

    mem_small, _ = driver_rss(10_000, tmp_root := Path(tempfile.mkdtemp()))
    mem_big, wall_big = driver_rss(n_rss, tmp_root)
    print(f"\ndriver peak RSS: {n_rss:,}-point sweep {mem_big:.0f} MiB (baseline 10,000 points "
          f"{mem_small:.0f} MiB, ratio {mem_big / mem_small:.2f}; limit 1024 MiB) in {wall_big:.1f} s")
    t_small = dry_run_seconds(10, 1, tmp_root)
    t_big = dry_run_seconds(10_000, 1_000, tmp_root)
    print(f"dry run of 10,000,000 points: {t_big:.2f} s (10-point dry run {t_small:.2f} s, "
          f"ratio {t_big / t_small:.2f})")


if __name__ == "__main__":
    main()
