"""CPU a point costs a worker when many threads sleep on few cores (issue 14, the 1 ms case).

No Dask: 4 processes x 16 threads, each thread running 2,500 points of 1 ms sleeps, as the
64-thread benchmark's workers do. Three ways, in the same run:
  plain   - ``time.sleep(0.001)`` in a loop (what bare Dask's chunks do)
  kernel  - the calibration experiment's own ``run`` (sleep mode) in a loop
  batch   - ``run_points`` over the same points: a batch's share on a worker (the engine's
            per-point record; the driver builds the table, see ``batch.PointsRun``)
Printed: wall time, user + system CPU seconds per point, voluntary context switches per point,
and each against ``plain``. On this 2-core VM the bookkeeping runs cache-cold between sleeps;
``STRIP`` points of it are done together (``pipeline/engine/batch.py``); ``--strip 1`` gives
the per-point interleaving it replaced.

``--dask``: the same three, dispatched as bench_cluster_scale's bare Dask baseline is (a
LocalCluster of 4 x 16 threads, profiler off, one ``client.map`` chunk per thread, 10,000
points each, nothing returned but a count): what the worker side costs inside Dask, without the driver, the store or
the batch sizing. ``batch`` then runs 1,000-point ``run_points`` calls, as the 64 x 1 ms sweep's waves do.

    python benchmarks/bench_point_overhead.py            # 4 x 16 threads x 2,500 points
    python benchmarks/bench_point_overhead.py --quick    # 500 points a thread
    python benchmarks/bench_point_overhead.py --dask     # inside Dask workers (~2 min)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROCESSES, THREADS = 4, 16


def _work(mode: str, points: int, strip: int, out) -> None:
    sys.path.insert(0, str(ROOT))
    import gc

    import pipeline.engine.batch as batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment
    from pipeline.experiments.calibration import run

    batch.STRIP = strip
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, PROCESSES * THREADS * points]}},
                {"work_us": 1000.0, "work_mode": "sleep"})
    batch.run_batch(grid, range(4))  # warm: imports, the grid, the schema
    gc.collect()
    gc.freeze()  # as the engine's workers do
    point = grid.point(0)

    def body(k: int) -> None:
        if mode == "plain":
            for _ in range(points):
                time.sleep(0.001)
        elif mode == "kernel":
            for _ in range(points):
                run(point, 12345)
        else:
            for b in range(5):  # five batches a thread, as a sweep's waves give
                lo = k * points + b * points // 5
                batch.run_points(grid, range(lo, k * points + (b + 1) * points // 5))

    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    threads = [threading.Thread(target=body, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    out.put((time.perf_counter() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
             r1.ru_nvcsw - r0.ru_nvcsw))


def measure(mode: str, points: int, strip: int) -> tuple[float, float, float]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_work, args=(mode, points, strip, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    n = PROCESSES * THREADS * points
    return (max(r[0] for r in results), sum(r[1] for r in results) / n * 1e6,
            sum(r[2] for r in results) / n)


def _dask_chunk(mode: str, k: int, points: int, batch_points: int, root: str) -> int:
    """One thread's share, run as one Dask task (bare Dask's chunk, with the engine's work)."""
    if root not in sys.path:
        sys.path.insert(0, root)
    if mode == "plain":
        for _ in range(points):
            time.sleep(0.001)
        return points
    import pipeline.engine.batch as batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment
    from pipeline.experiments.calibration import run

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, PROCESSES * THREADS * points]}},
                {"work_us": 1000.0, "work_mode": "sleep"})
    if mode == "kernel":
        point = grid.point(0)
        for _ in range(points):
            run(point, 12345)
        return points
    rows = 0
    for lo in range(k * points, (k + 1) * points, batch_points):
        rows += batch.run_points(grid, range(lo, min((k + 1) * points, lo + batch_points))).done
    return rows


def _warm_dask_worker(root: str) -> None:
    if root not in sys.path:
        sys.path.insert(0, root)
    import gc

    import pipeline.engine.batch as batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment

    batch.run_batch(Grid(get_experiment("calibration"), {"x": {"range": [0, 8]}},
                         {"work_us": 0.0, "work_mode": "sleep"}), range(4))
    gc.collect()
    gc.freeze()  # as the engine's warm-up does


def measure_on_dask(client, mode: str, points: int, batch_points: int) -> float:
    from distributed import wait

    threads = PROCESSES * THREADS
    t0 = time.perf_counter()
    futures = client.map(_dask_chunk, [mode] * threads, range(threads), [points] * threads,
                         [batch_points] * threads, [str(ROOT)] * threads, pure=False)
    wait(futures, timeout=600)
    wall = time.perf_counter() - t0
    assert sum(client.gather(futures)) == threads * points
    return wall


def main_dask(points: int, repeat: int) -> None:
    import logging

    import dask
    from distributed import Client, LocalCluster

    # The profiler off, as on the engine's clusters: on, it walks the threads' deeper stacks
    # in 'batch' every 10 ms (batch 1.216x plain with it, 1.153x without, 2026-11-29).
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            LocalCluster(n_workers=PROCESSES, threads_per_worker=THREADS, dashboard_address=":0",
                         silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.wait_for_workers(PROCESSES, timeout=120)
        client.run(_warm_dask_worker, str(ROOT))
        walls: dict[str, list[float]] = {}
        for _ in range(repeat):  # interleaved, so a change in the machine's load hits all three
            for mode in ("plain", "kernel", "batch"):
                walls.setdefault(mode, []).append(measure_on_dask(client, mode, points, 1_000))
    print(f"inside Dask: {PROCESSES} workers x {THREADS} threads, one chunk of {points:,} points of "
          f"1 ms sleeps a thread (batch: 1,000-point run_points calls); median of {repeat}")
    base = sorted(walls["plain"])[len(walls["plain"]) // 2]
    for mode, values in walls.items():
        wall = sorted(values)[len(values) // 2]
        print(f"  {mode:7s} wall {wall:6.3f} s ({wall / base:.3f}x plain)   "
              f"runs {', '.join(f'{v:.2f}' for v in values)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--strip", type=int, default=None, help="run_batch's STRIP (default: its own)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs of each mode (default 2, the best kept; --dask: 3, the median)")
    ap.add_argument("--dask", action="store_true", help="inside Dask workers (see the docstring)")
    args = ap.parse_args()
    if args.dask:
        main_dask(2_000 if args.quick else 10_000, args.repeat or 3)
        return
    args.repeat = args.repeat or 2
    sys.path.insert(0, str(ROOT))
    from pipeline.engine.batch import STRIP

    points = 500 if args.quick else 2_500
    strip = args.strip or STRIP
    rows = {}
    for _ in range(args.repeat):  # interleaved, so a change in the machine's load hits all three
        for mode in ("plain", "kernel", "batch"):
            got = measure(mode, points, strip)
            rows[mode] = min(rows.get(mode, got), got, key=lambda r: r[1])
    print(f"{PROCESSES} processes x {THREADS} threads x {points:,} points of 1 ms sleeps; "
          f"run_batch STRIP={strip}; best of {args.repeat}")
    base_wall, base_cpu, _ = rows["plain"]
    for mode, (wall, cpu, vcsw) in rows.items():
        print(f"  {mode:7s} wall {wall:6.3f} s ({wall / base_wall:.3f}x plain)   "
              f"CPU {cpu:5.1f} us/point ({cpu / base_cpu:.2f}x plain)   "
              f"voluntary switches {vcsw:.2f}/point")


if __name__ == "__main__":
    main()
