"""Engine at cluster scale (issue 14): batch sizing under a task-rate cap (on a simulated
clock), the cost model along the grid, lazy planning of a 10^9-point grid, buffered part
files, and the driver killed or interrupted mid-sweep."""

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.cost_model import CostModel, InFlightWork
from pipeline.engine.pending_plan import PendingPlan, probe_block
from pipeline.engine.planning import MAX_PROBES, BatchSizer, TokenBucket
from pipeline.engine.resume import plan_sweep
from pipeline.experiments.base import get_experiment
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- simulated cluster
def simulate(threads, n, cost, cap=50.0, max_s=60.0, join_at=None, measured=None, sizes=None,
             split_tail=True, stragglers=None, etas=None):
    """A discrete-event cluster: ``threads`` slots take queued batches in submission order
    (Dask's FIFO priority) and take exactly ``cost(indices).sum()`` seconds. The driver reacts
    to every completion, and otherwise wakes when the token bucket allows the next batch, when
    the tail check is due, or after a second. ``join_at=(t, threads)`` grows the cluster
    mid-sweep (adaptive scaling). ``measured(indices)``, if given, is what the workers report
    instead of the true cost. ``sizes``: the grid's axis lengths (the last fastest), for the
    probes; one axis if None. ``split_tail``: the driver asks long batches to stop in the tail
    (``BatchSizer.tail_to_stop``), as run_sweep does; a batch asked stops after the point it
    is running, and its other points go back to the sizer. ``stragglers(k)``: the slowdown of
    the k-th batch dispatched (a slow node), on top of ``cost``. ``etas``: a list that gets
    (time, points done, the sizer's ETA) at every wake (as run_sweep's progress line asks).
    Returns (wall / ideal, submission times, batches with their start and duration)."""
    clock = [0.0]
    plan = PendingPlan(None, n, sizes=sizes)
    sizer = BatchSizer(plan, max_tasks_per_second=cap, max_batch_seconds=max_s,
                       clock=lambda: clock[0])
    queue, submits, batches = [], [], []
    running = {}  # batch id -> [end, batch, start, index in batches, per-point costs]
    stop_first = set()  # queued batches asked to stop: they run one point
    free, in_flight, ids = threads, 0, 0
    done_points = [0]

    def dispatch():
        nonlocal free
        while free and queue:
            bid, b = queue.pop(0)
            free -= 1
            c = cost(b) * (stragglers(len(batches)) if stragglers else 1.0)
            if bid in stop_first:
                b, c = b[:1], c[:1]
            running[bid] = [clock[0] + c.sum(), b, clock[0], len(batches), c]
            batches.append((clock[0], c.sum(), b))

    def stop(bid):
        if bid not in running:
            stop_first.add(bid)
            return
        end, b, start, k, c = running[bid]
        done = min(len(b), int(np.searchsorted(np.cumsum(c), clock[0] - start, "right")) + 1)
        if done < len(b):
            running[bid] = [start + c[:done].sum(), b, start, k, c[:done]]
            batches[k] = (start, c[:done].sum(), b[:done])

    in_flight_work = InFlightWork(sizer.model)

    def drive():
        nonlocal in_flight, ids
        for b in sizer.next_batches(threads, in_flight):
            queue.append((ids, np.asarray(b)))
            in_flight_work.add(b)
            ids += 1
            in_flight += 1
            submits.append(clock[0])
        if etas is not None:
            etas.append((clock[0], done_points[0], sizer.eta_seconds(
                threads, in_flight_work.seconds(), in_flight)))
        if split_tail:
            flying = {bid: b for bid, b in queue} | {bid: r[1] for bid, r in running.items()}
            for bid in sizer.tail_to_stop(threads, in_flight, lambda: {
                    bid: float(sizer.model.predict(b).sum()) for bid, b in flying.items()}):
                stop(bid)
        dispatch()

    drive()
    steps = 0
    while running or queue or not plan.exhausted or sizer.has_returned:
        steps += 1
        assert steps < 10**6, "the simulated sweep does not progress"
        t_done = min((r[0] for r in running.values()), default=float("inf"))
        wait = min(sizer.wait_time(), sizer.tail_wait_time(threads))
        t_wake = clock[0] + (1.0 if wait == float("inf") else max(wait, 1e-6))
        if join_at and clock[0] <= join_at[0] < min(t_done, t_wake):
            clock[0] = join_at[0]
            free += join_at[1] - threads
            threads, join_at = join_at[1], None
        elif t_done <= t_wake:
            clock[0] = t_done
            for bid in [bid for bid, r in running.items() if r[0] <= clock[0]]:
                _, b, _, _, c = running.pop(bid)
                in_flight_work.remove(b)
                free += 1
                in_flight -= 1
                ran = b[:len(c)]
                done_points[0] += len(ran)
                seen = c if measured is None else measured(ran)
                sizer.observe(ran, seen, float(seen.sum()))
                sizer.give_back(b[len(c):])
        else:
            clock[0] = t_wake
        drive()
    ideal = cost(np.arange(n)).sum() / threads
    return clock[0] / ideal, np.array(submits), batches


def max_in_window(times, window):
    """Most submissions in any window [t, t + window)."""
    times = np.sort(times)
    return int(max(np.searchsorted(times, times + window) - np.arange(times.size)))


@pytest.mark.parametrize("cap", [25.0, 50.0, 100.0])
def test_task_rate_stays_under_the_cap_on_1024_threads(cap):
    threads = 1024
    ratio, submits, batches = simulate(threads, 409_600, lambda b: np.full(len(b), 0.1), cap=cap)
    burst = 2 * threads + 2  # one wave in flight: the token bucket's depth
    for window in (1.0, 5.0, 20.0, float(submits.max())):
        assert max_in_window(submits, window) <= burst + cap * window
    # after the opening wave (probes, then one batch per thread) the rate is at most the cap
    later = submits[submits > 1.0]
    assert later.size / (submits.max() - 1.0) <= cap * 1.05
    assert 409_600 / len(submits) >= 50  # tens of points per task, not one (tail wave included)
    assert ratio < 1.05  # and the short tail survives: every thread ends together


def test_uneven_costs_are_sized_from_the_grid_and_bounded():
    costs = np.logspace(-3, 0, 286_720)  # the benchmark's grid: 1 ms at the start, 1 s at the end
    ratio, submits, batches = simulate(1024, costs.size, lambda b: costs[b], cap=50.0, max_s=60.0)
    assert ratio < 1.1  # >= 90 % efficiency where one global average would give batches of hours
    durations = np.array([d for _, d, _ in batches if len(_) > 1])
    assert durations.max() <= 60.0 * 1.25  # every batch's predicted duration bounded (model error)
    # one global average (the mean cost) would put ~9,000 s into the last batches instead
    late = [d for start, d, b in batches if b[0] > 0.9 * costs.size]
    assert late and max(late) < 61.0


def test_the_eta_follows_the_cost_along_the_grid_not_the_task_count():
    """Costs rising 1,000x along the grid (the uneven benchmark's shape): on 64 threads, 65% of
    the points are done after 11% of the wall. Counting tasks, the ETA then said 6 s for 81 s
    left. The cost model's ETA is within 20% (and 2 s, for the tail) of the time actually
    left from the moment the probes are back (5% of the wall), on 64 and 1,024 threads, and
    an even grid's ETA is as good."""
    uneven = np.logspace(-3, 0, 40_000)
    wide = np.logspace(-3, 0, 286_720)
    for n, cost, threads in ((uneven.size, lambda b: uneven[b], 64),
                             (wide.size, lambda b: wide[b], 1024),
                             (128_000, lambda b: np.full(len(b), 0.01), 64)):
        etas = []
        simulate(threads, n, cost, cap=50.0, max_s=60.0, etas=etas)
        end = etas[-1][0]
        known = [(t, eta) for t, _, eta in etas if eta is not None]  # once the probes are back
        assert len(known) > 20 and known[0][0] < 0.05 * end
        wrong = [(t, eta) for t, eta in known if abs(eta - (end - t)) > 0.2 * (end - t) + 2.0]
        assert not wrong, (threads, end, wrong[:5])
        if threads == 64 and n == uneven.size:
            t, done, eta = next(e for e in etas if e[0] >= 0.25 * end)
            by_count = t * (n - done) / done  # remaining / rate since the start
            assert by_count < 0.2 * (end - t)  # the count's ETA: many times too short
            assert abs(eta - (end - t)) <= 0.1 * (end - t)


def test_idle_threads_do_not_count_as_work_done_on_the_batches_in_flight():
    """The ETA takes the thread-seconds the cluster has had, beyond what finished batches
    took, off the batches in flight. Threads with no batch (an adaptive cluster's planned
    ones, a sweep waiting for tokens) count for nothing: counted, the whole in-flight work
    soon read as done, for good."""
    clock = [0.0]
    plan = PendingPlan(None, 1000)
    sizer = BatchSizer(plan, clock=lambda: clock[0])
    sizer.plan.take(1000)  # every point handed out: the ETA is the in-flight work alone
    sizer.model.observe(np.arange(1000), np.full(1000, 1.0), 1000.0)  # 1 s a point
    assert sizer.eta_seconds(10, 1000.0, busy=1) == 100.0
    clock[0] += 50.0  # one thread busy: 50 thread-seconds of the in-flight work are done
    assert sizer.eta_seconds(10, 1000.0, busy=0) == 95.0
    clock[0] += 500.0  # nobody busy: nothing more done
    assert sizer.eta_seconds(10, 1000.0, busy=10) == 95.0
    clock[0] += 10.0  # ten threads busy
    assert sizer.eta_seconds(10, 1000.0, busy=10) == 85.0


def test_thread_time_never_matched_by_a_finished_batch_does_not_pile_up():
    """Thread time spent on batches that never finish as such (lost with their workers, then
    split and rerun) was credited for good: once it passed the in-flight work, that work read
    as done for the rest of the sweep. The credit is at most the work in flight now."""
    clock = [0.0]
    plan = PendingPlan(None, 1000)
    sizer = BatchSizer(plan, clock=lambda: clock[0])
    sizer.plan.take(1000)
    sizer.model.observe(np.arange(1000), np.full(1000, 1.0), 1000.0)  # 1 s a point
    assert sizer.eta_seconds(10, 100.0, busy=10) == 10.0
    clock[0] += 500.0  # 5,000 thread-seconds on batches lost with their workers
    assert sizer.eta_seconds(10, 100.0, busy=10) == 0.0  # all 100 s in flight may be done
    # rerun: 1,000 s in flight, none of it started. The credit left is the 100 s it was
    # clamped to (an error bounded by the in-flight work); unclamped it was 5,000 s, and the
    # whole 1,000 s read as done (ETA 0)
    assert sizer.eta_seconds(10, 1000.0, busy=0) == 90.0


def test_the_progress_line_takes_its_eta_from_the_cost_model():
    from pipeline.engine.progress import Progress
    from pipeline.engine.runner import SweepStats

    clock = [100.0]
    bar = Progress("g", 100, enabled=False)
    stats = SweepStats(ok=1)
    with patch("pipeline.engine.progress.time.perf_counter", lambda: clock[0]):
        bar.snapshot(stats)  # the first result
        clock[0] += 10.0
        stats.ok = 51
        assert bar.snapshot(stats)["eta_s"] == 9.8  # by count: 50 in 10 s, 49 left
        bar.eta_source = lambda: 123.4
        assert bar.snapshot(stats)["eta_s"] == 123.4
        bar.eta_source = lambda: None  # the probes are still out
        assert bar.snapshot(stats)["eta_s"] == 9.8
        bar.eta_source = lambda: 1 / 0  # never ends the sweep
        assert bar.snapshot(stats)["eta_s"] == 9.8
        bar.eta_source = lambda: 123.4
        stats.ok = 100
        assert bar.snapshot(stats)["eta_s"] == 0.0


def test_sizing_follows_threads_when_workers_join():
    ratio, submits, batches = simulate(64, 200_000, lambda b: np.full(len(b), 0.05), cap=50.0,
                                       join_at=(20.0, 512))
    before = [len(b) for t, _, b in batches if 5 < t < 19 and len(b) > 1]
    after = [len(b) for t, _, b in batches if 20 < t < 30 and len(b) > 1]  # the round after
    assert np.median(before) * 0.05 == pytest.approx(64 / 50, rel=0.6)  # threads / cap seconds
    assert np.median(after) > 3 * np.median(before)  # batches grew with the cluster
    assert max_in_window(submits[submits > 25], 10.0) <= 2 * 512 + 2 + 50 * 10


def test_token_bucket_counts_exactly():
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    assert sum(bucket.try_take() for _ in range(100)) == 5  # the burst
    now[0] = 2.0
    assert sum(bucket.try_take() for _ in range(100)) == 5  # 20 arrived, depth 5
    now[0] = 2.35
    assert sum(bucket.try_take() for _ in range(100)) == 3
    assert bucket.wait_time() == pytest.approx(0.05)


def test_cost_model_interpolates_geometrically_between_measured_buckets():
    model = CostModel(total=1000, buckets=10)
    model.observe(np.array([5]), np.array([0.001]))
    model.observe(np.array([905]), np.array([1.0]))
    per_bucket = model.bucket_costs()
    assert per_bucket[0] == pytest.approx(0.001) and per_bucket[9] == pytest.approx(1.0)
    assert per_bucket[3] == pytest.approx(0.01) and per_bucket[6] == pytest.approx(0.1)
    assert model.remaining(0) == pytest.approx(100 * per_bucket.sum())
    assert model.remaining(950) == pytest.approx(50 * 1.0)


def test_chunks_round_trip_and_a_range_feeds_the_cost_model_like_its_array():
    """Batches travel as ranges when consecutive (chunks.compact_chunk); the cost model and
    the sizer read them back with chunks.as_indices, without iterating the range."""
    from pipeline.engine.chunks import as_indices, compact_chunk, holds

    run = compact_chunk(np.arange(100, 160, dtype=np.int64))
    assert run == range(100, 160)
    gaps = np.array([3, 4, 9], dtype=np.int64)
    assert compact_chunk(gaps) is gaps
    assert np.array_equal(as_indices(run), np.arange(100, 160))
    assert as_indices(range(5, 5)).dtype == np.int64 and as_indices(range(5, 5)).size == 0
    assert holds(run, 159) and not holds(run, 160) and holds(gaps, 4) and not holds(gaps, 5)
    costs = np.linspace(0.001, 0.002, 60)
    by_range, by_array = CostModel(total=1000, buckets=10), CostModel(total=1000, buckets=10)
    by_range.observe(range(100, 160), costs, batch_seconds=0.2)
    by_array.observe(np.arange(100, 160), costs, batch_seconds=0.2)
    assert np.array_equal(by_range.bucket_costs(), by_array.bucket_costs())
    assert by_range.overhead == pytest.approx(by_array.overhead)


def test_waves_are_staggered_and_the_last_one_meets_the_first():
    """The first wave's batches spread over +-25 % of the wave, so its ends do not all land
    at once; the last wave's come largest first, so every thread still ends together."""
    threads = 1024
    ratio, submits, batches = simulate(threads, 409_600, lambda b: np.full(len(b), 0.1))
    assert ratio < 1.01
    big = sorted((start, start + d) for start, d, b in batches if len(b) > 1)
    first = big[:threads]
    ends = np.array([e for _, e in first])
    assert ends.max() - ends.min() > 0.4 * np.median([e - s for s, e in first])
    assert len({round(s, 6) for s, _ in first}) <= 2  # the first wave starts at once
    final = np.sort([e for _, e in big])[-int(0.99 * threads):]  # the last batches
    assert final.max() - final.min() < 0.02 * final.max()  # ...and the threads end together


def noisy_batches(base, sigma, seed, n):
    """Costs that vary from batch to batch by a lognormal factor (contention on a loaded
    node: the same 1,000-point batch of 1 ms sleeps took 1.1-1.4 ms a point), consistent for
    a given batch; the whole grid (the ideal) at its base cost."""
    rng, memo = np.random.default_rng(seed), {}

    def cost(b):
        if len(b) == n:
            return base(b)
        key = (int(b[0]), len(b))
        if key not in memo:
            memo[key] = float(np.exp(rng.normal(0.0, sigma)))
        return base(b) * memo[key]
    return cost


def test_a_final_round_of_small_batches_evens_out_noisy_waves():
    """Batch costs that drift from the model spread the threads' ends by a fraction of a
    wave. After the last wave comes a round of small batches taken first come, first served,
    so threads the last wave frees early take more of them: the tail stays within one small
    batch, and the task rate stays under the cap."""
    threads, n, cap = 64, 640_000, 50.0
    ratios = []
    for seed in range(3):
        cost = noisy_batches(lambda b: np.full(len(b), 1.1e-3), 0.1, seed, n)
        ratio, submits, batches = simulate(threads, n, cost, cap=cap)
        ideal = cost(np.arange(n)).sum() / threads
        actual = sum(d for _, d, _ in batches) / threads
        ratios.append(ratio * ideal / actual)  # against the noisy work actually done
        finest = max(0.2, threads / cap / 8)  # floor / TAIL_FINEST, not below min_batch_seconds
        small = [b for t, d, b in batches if len(b) > 1 and t > 0.5 * submits.max()
                 and cost(b).sum() < 1.5 * finest]
        assert len(small) >= threads  # the final round: at least one small batch per thread
        ends = {}
        for start, d, b in batches:  # a thread's last batch ends where the next one starts
            ends[round(start + d, 9)] = start + d
        last = np.sort(list(ends.values()))[-threads:]
        # nine threads in ten end within two small batches (a last-wave batch 30 % dear can
        # still outlast the round)
        assert np.percentile(last, 90) - last.min() < 2 * 1.5 * finest
        for window in (1.0, 5.0):
            assert max_in_window(submits, window) <= 2 * threads + 2 + cap * window
    assert np.mean(ratios) < 1.05  # 1.067 with the last wave alone


def test_the_tail_stops_long_batches_and_re_splits_their_points():
    """One batch in 37 runs on a node twice as slow. The last wave's slow batches would hold
    the tail for up to a whole batch (1.13x ideal); asked to stop once nothing is left to hand
    out and threads idle, they return the points they ran, and the rest goes out again in
    small batches over the idle threads. Every point still runs exactly once, and the task
    rate stays under the cap."""
    threads, n, cap = 64, 640_000, 50.0
    slow = lambda k: 2.0 if k % 37 == 5 else 1.0
    flat = lambda b: np.full(len(b), 1e-3)
    kept, _, _ = simulate(threads, n, flat, cap=cap, stragglers=slow, split_tail=False)
    ratio, submits, batches = simulate(threads, n, flat, cap=cap, stragglers=slow)
    assert kept > 1.10 and ratio < 1.06  # 1.133 and 1.046; the slow batches' own extra is in both
    ran = np.sort(np.concatenate([b for _, _, b in batches]))
    assert np.array_equal(ran, np.arange(n))  # nothing lost, nothing run twice
    for window in (1.0, 5.0):
        assert max_in_window(submits, window) <= 2 * threads + 2 + cap * window


def test_batches_run_again_take_the_cap_and_the_in_flight_bound():
    """The pieces of a batch lost with its worker (8 of it, or up to 64 single points), a
    batch resubmitted without a hung point and a point retried alone were submitted at once,
    past max_tasks_per_second and the in-flight bound. Counted on a fake clock: they go out
    first, as they are, each for a token, and within the bound."""
    now = [0.0]
    cap, threads = 10.0, 4
    burst = 2 * threads + 2
    plan = PendingPlan(None, 100_000)
    sizer = BatchSizer(plan, max_tasks_per_second=cap, clock=lambda: now[0])
    for probe in sizer.next_batches(threads, 0):  # the probes: 1 ms a point
        sizer.observe(probe, np.full(len(probe), 0.001), 0.001 * len(probe))
    now[0] = 10.0
    sizer.next_batches(threads, 0)  # a first wave: the bucket is empty after it
    pieces = [np.array([i], dtype=np.int64) for i in range(50_000, 50_064)]
    sizer.resubmit(pieces)
    assert sizer.has_returned and not sizer.take_token()  # a retried point waits too
    submitted, in_flight = [], 0
    for step in range(1, 200):  # 0.05 s steps; the driver wakes when a token is due
        now[0] = 10.0 + step * 0.05
        out = sizer.next_batches(threads, in_flight)
        assert in_flight + len(out) <= burst
        submitted += [(now[0], b) for b in out]
        in_flight = len(out)  # the ones before have finished
    again = [b for _, b in submitted[:64]]
    assert all(np.array_equal(a, b) for a, b in zip(again, pieces))  # first, as they were
    times = np.array([t for t, _ in submitted])
    for window in (0.5, 1.0, 5.0):
        assert max_in_window(times, window) <= 1 + cap * window  # the bucket was empty
    assert not any(len(b) == 1 and 50_000 <= b[0] < 50_064 for _, b in submitted[64:])


@pytest.mark.timeout(180)
def test_a_batch_lost_with_its_worker_comes_back_under_the_cap(tmp_path, monkeypatch):
    """A point that kills its worker, batches of 8, a cap of 2 tasks/s on one thread (a
    bucket of 4): the lost batch went out again as 8 single points in one map call, 10 tasks
    within a second. Now each piece takes a token: every second holds at most 4 + 2."""
    import dask
    from distributed import Client, LocalCluster

    from pipeline.engine import runner
    from pipeline.store.part_writer import PartWriter

    submitted = []
    real = runner.map_batches

    def counted(client, grid, chunks, *args):
        submitted.extend([time.monotonic()] * len(chunks))
        return real(client, grid, chunks, *args)

    monkeypatch.setattr(runner, "map_batches", counted)
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 16]}},
                {"work_us": 0.0, "crash_at": 5})
    writer = PartWriter(tmp_path, "r")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0",
                         silence_logs=50) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        stats = runner.run_sweep(grid, client, writer, range(16), batch_size=8,
                                 progress=False, max_tasks_per_second=2.0)
    assert stats.ran == 16 and stats.failed == 1
    df = pd.read_parquet(tmp_path)
    assert sorted(df.x) == list(range(16)) and df[df.status == "failed"].x.tolist() == [5]
    assert len(submitted) >= 2 + 8  # the two batches, then the lost one's pieces
    assert max_in_window(np.array(submitted), 1.0) <= 4 + 2


def test_tail_to_stop_asks_long_batches_once_after_threads_idle():
    """The rule on a fake clock: nothing while points are left to hand out or every thread is
    busy; then, once threads have idled for a tail batch's time (fine_seconds), every batch
    predicted to take twice that, each once; the given-back points go out first, in batches
    of about fine_seconds, before the check starts again."""
    now = [0.0]
    plan = PendingPlan(None, 1000)
    sizer = BatchSizer(plan, max_tasks_per_second=50.0, clock=lambda: now[0])
    for probe in sizer.next_batches(8, 0):  # the probes: then the model knows 10 ms a point
        sizer.observe(probe, np.full(len(probe), 0.01), 0.01 * len(probe))
    fine = sizer.fine_seconds(8)
    assert fine == pytest.approx(0.2)  # 8 threads / 50 tasks/s = 0.16 s, under min_batch_seconds
    flying = {"long": 1.0, "short": 0.3, "longer": 5.0}
    assert sizer.tail_to_stop(8, 3, lambda: flying) == []  # points left to hand out
    plan.take(plan.to_run)
    assert plan.exhausted
    assert sizer.tail_to_stop(8, 8, lambda: flying) == []  # every thread busy
    assert sizer.tail_to_stop(8, 3, lambda: flying) == []  # idle since now
    assert sizer.tail_wait_time(8) == pytest.approx(fine)
    now[0] = fine / 2
    assert sizer.tail_to_stop(8, 3, lambda: flying) == []
    now[0] = fine
    assert sorted(sizer.tail_to_stop(8, 3, lambda: flying)) == ["long", "longer"]
    assert sizer.tail_wait_time(8) == float("inf")  # looked: the next look is re-armed
    now[0] = 10.0
    assert sizer.tail_to_stop(8, 3, lambda: flying) == []
    assert sizer.tail_to_stop(8, 3, lambda: flying) == []  # each batch is asked once
    sizer.give_back(np.arange(500, 560))  # 60 points of 10 ms: 0.6 s
    assert sizer.has_returned and sizer.tail_to_stop(8, 3, lambda: {"new": 9.0}) == []
    out = [np.asarray(b) for b in sizer.next_batches(8, 3)]
    assert np.array_equal(np.concatenate(out), np.arange(500, 560))  # first, in order
    predicted = [float(sizer.model.predict(b).sum()) for b in out]
    assert len(out) == 3 and all(fine <= p <= fine + 0.011 for p in predicted[:-1])
    assert not sizer.has_returned
    fixed = BatchSizer(PendingPlan(None, 10), fixed=5, clock=lambda: now[0])
    fixed.plan.take(10)
    now[0] = 100.0
    assert fixed.tail_to_stop(8, 0, lambda: flying) == []  # batch_size=N: batches as asked
    # at most one batch per idle thread, the longest predicted first
    many = {f"b{k}": 1.0 + k for k in range(7)}
    now[0] = 200.0
    assert sizer.tail_to_stop(8, 7, lambda: many) == []  # one thread idle since now
    now[0] = 201.0
    assert sizer.tail_to_stop(8, 7, lambda: many) == ["b6"]
    now[0] = 300.0
    sizer.tail_to_stop(8, 5, lambda: many)
    now[0] = 301.0
    assert sizer.tail_to_stop(8, 5, lambda: many) == ["b5", "b4", "b3"]  # b6 asked before


def test_the_tail_stops_no_more_batches_than_threads_idle_under_a_tight_cap():
    """25 tasks/s on 64 threads: the final round is short (few tokens), so only a few threads
    idle while the last wave runs on. Asking every long batch then gave back 60 batches'
    remainders, which the cap issues a small batch at a time: 1.2x ideal here, and on the
    real cluster 16-24 s for 12 s of work (5 threads busy for 5 s). Asked one per idle
    thread, the tail beats not stopping at all."""
    threads, n, cap = 64, 640_000, 25.0
    for seed in range(3):
        cost = noisy_batches(lambda b: np.full(len(b), 1.1e-3), 0.1, seed, n)
        kept, _, _ = simulate(threads, n, cost, cap=cap, split_tail=False)
        ratio, submits, batches = simulate(threads, n, cost, cap=cap)
        assert ratio < 1.06 and ratio < kept  # 1.178/1.205/1.067 asking all; 1.13/1.11/1.09 kept
        ran = np.sort(np.concatenate([b for _, _, b in batches]))
        assert np.array_equal(ran, np.arange(n))
        assert max_in_window(submits, 5.0) <= 2 * threads + 2 + cap * 5.0


def test_a_batch_asked_to_stop_returns_its_first_points():
    """``request_stop`` names a running batch: it ends after its current point, and its rows
    are those of its first points, with the ids, seeds and values the whole batch gives. A
    batch asked before it starts runs one point (all of that point's rows)."""
    import threading

    from pipeline.engine.batch import _STOP_REQUESTED, request_stop

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 5000]}},
                {"work_us": 1000.0, "work_mode": "sleep"})
    whole = run_batch(grid, range(100, 160))[0]
    threading.Timer(0.1, request_stop, args=(["batch-a"],)).start()
    part, seconds = run_batch(grid, range(100, 1100), stop_name="batch-a")
    assert 1 <= part.num_rows < 1000 and seconds < 0.9  # asked after 100 ms of 1 ms points
    assert part["x"].to_pylist() == list(range(100, 100 + part.num_rows))
    columns = ["task_id", "seed", "value", "draw", "label"]
    k = min(part.num_rows, whole.num_rows)
    assert part.slice(0, k).select(columns).equals(whole.slice(0, k).select(columns))
    assert "batch-a" not in _STOP_REQUESTED  # consumed
    three = Grid(get_experiment("calibration"), {"x": {"range": [0, 50]}},
                 {"work_us": 0.0, "rows": 3})
    request_stop(["batch-b"])
    early = run_batch(three, range(10, 50), stop_name="batch-b")[0]
    assert early["x"].to_pylist() == [10, 10, 10] and early["row_index"].to_pylist() == [0, 1, 2]
    assert run_batch(three, range(10, 50), stop_name="batch-c")[0].num_rows == 120  # not asked


@pytest.mark.timeout(120)
def test_the_drivers_stop_request_reaches_a_running_batch(capfd):
    """``_ask_to_stop`` as the tail calls it, on worker processes: the running batch ends early
    with its first points, and no worker reports an error. (It once passed ``wait=False`` with
    a plain function, which Dask supports for coroutines only: every worker failed the
    request with 'Combination not supported', printed a traceback, and no batch ever stopped.)"""
    from distributed import Client, LocalCluster, wait

    from pipeline.engine import worker_calls

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 10_000]}},
                {"work_us": 2000.0, "work_mode": "sleep"})
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=30) as cluster, Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        future = client.submit(run_batch, grid, range(0, 5000), pure=False)  # 10 s of points
        deadline = time.monotonic() + 60
        while not any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # some points done
        t0 = time.monotonic()
        worker_calls.ask_to_stop(client, [future.key])
        wait(future, timeout=30)
        stopped_after = time.monotonic() - t0
        table, _ = future.result()
    assert 1 <= table.num_rows < 5000 and stopped_after < 5
    assert table["x"].to_pylist() == list(range(table.num_rows))
    err = capfd.readouterr().err
    assert "Combination not supported" not in err and "Exception while handling op" not in err


@pytest.mark.timeout(60)
def test_a_stop_request_never_holds_the_driver(monkeypatch):
    """Client.run waits for the broadcast's round trip: a scheduler that never answers must cost the driver loop at most STOP_REQUEST_TIMEOUT_S, not hang it."""
    import asyncio

    from distributed import Client, LocalCluster

    from pipeline.engine import worker_calls

    async def never_answers(*args, **kwargs):
        await asyncio.sleep(3600)

    monkeypatch.setattr(worker_calls, "STOP_REQUEST_TIMEOUT_S", 0.5)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        monkeypatch.setattr(client, "_run", never_answers)
        t0 = time.monotonic()
        worker_calls.ask_to_stop(client, ["some-batch"])
        assert time.monotonic() - t0 < 5


@pytest.mark.timeout(180)
@pytest.mark.parametrize("task_timeout", [None, 60.0])
def test_batches_stopped_mid_sweep_lose_and_duplicate_nothing(tmp_path, monkeypatch,
                                                               task_timeout):
    """The whole path on a real cluster: batches asked to stop at any moment (here three
    times, whatever is running) return partial tables, their other points go back to the
    sizer, and the stored table still has every grid point exactly once, with its own id and
    seed. With ``task_timeout``, points run under the per-point clock (the other loop)."""
    from distributed import Client, LocalCluster

    from pipeline.engine import runner
    from pipeline.engine.batch import request_stop
    from pipeline.engine.task_ids import seed_of

    given_back = []
    original = BatchSizer.give_back
    monkeypatch.setattr(BatchSizer, "give_back",
                        lambda self, idx: (given_back.append(len(idx)), original(self, idx)))
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 4000]}},
                {"work_us": 2000.0, "work_mode": "sleep"})
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                      dashboard_address=":0", silence_logs=50) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        asked = []

        def interrupt():
            if len(asked) < 3 and time.monotonic() - (asked[-1] if asked else 0.0) > 0.3:
                keys = [str(k) for ks in client.processing().values() for k in ks]
                if keys:
                    client.run(request_stop, keys)
                    asked.append(time.monotonic())

        writer = PartWriter(tmp_path, "r", flush_rows=10_000)
        stats = runner.run_sweep(grid, client, writer, PendingPlan(grid, grid.total),
                                 progress=False, checks=[interrupt], task_timeout=task_timeout)
    assert len(asked) == 3 and sum(given_back) > 0  # batches did stop early
    assert stats.ran == stats.ok == stats.rows == 4000
    df = pd.read_parquet(tmp_path)
    assert len(df) == 4000 and df.task_id.is_unique and sorted(df.x) == list(range(4000))
    assert set(df.task_id) == {grid.task_id(i) for i in range(4000)}
    assert (df.seed == df.task_id.map(seed_of)).all()
    assert np.allclose(df.draw, [(int(seed) >> 10) * 2.0**-53 for seed in df.seed])


@pytest.mark.timeout(120)
def test_a_batch_whose_table_cannot_be_built_fails_its_points_not_the_sweep(tmp_path,
                                                                          monkeypatch):
    """The driver builds each batch's table from what the worker sent (batch.PointsRun). If
    that fails, the batch's points are stored as failed with the reason, as a task that
    raises would be, and the sweep goes on; built on the worker, such a failure was a task
    error the runner contained, and moving it must not turn it into a crashed sweep."""
    from distributed import Client, LocalCluster

    from pipeline.engine import runner

    real = runner.points_table

    def flaky(grid, chunk, run):
        if 7 in set(int(i) for i in chunk):
            raise pa.ArrowNotImplementedError("a value Arrow cannot take")
        return real(grid, chunk, run)

    monkeypatch.setattr(runner, "points_table", flaky)
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 400]}}, {"work_us": 0.0})
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=":0", silence_logs=50) as cluster, \
            Client(cluster) as client:
        writer = PartWriter(tmp_path, "r", flush_rows=10_000)
        stats = runner.run_sweep(grid, client, writer, PendingPlan(grid, grid.total),
                                 progress=False)
    df = pd.read_parquet(tmp_path)
    assert len(df) == 400 and df.task_id.is_unique and sorted(df.x) == list(range(400))
    bad = df[df.status == "failed"]
    assert 7 in set(bad.x) and bad.error.str.contains("ArrowNotImplementedError").all()
    assert stats.ran == 400 and stats.failed == len(bad) and stats.ok == 400 - len(bad)
    assert (df[df.status == "ok"].value == df[df.status == "ok"].x).all()


def test_waves_leave_headroom_under_the_cap_for_probes_measured_dear():
    """64 threads of 10 ms points at 50 tasks/s: batches must average over 1.28 s or threads
    wait for tokens. Probes measured 30 % dear (start-up contention; 13 ms for 10 ms sleeps was
    measured) make every batch cut ahead of the batches' own measurements 30 % short; the
    waves' headroom over the floor absorbs it."""
    truth = lambda b: np.full(len(b), 0.010)
    dear_probes = lambda b: np.full(len(b), 0.013 if len(b) == 1 else 0.010)
    ratio, _, _ = simulate(64, 128_000, truth, measured=dear_probes)
    assert ratio < 1.06  # 1.25 with waves sized at the floor


def test_probes_measured_dear_all_alike_are_scaled_down_by_the_batches():
    """Every probe runs while the cluster starts, so start-up contention can slow them all
    alike: 64 threads of 1 ms sleeps probed at 1.7-2.0 ms. The lower envelope of neighbouring
    probes cannot shed a delay that every probe shares; the batches that measured probed
    buckets scale the buckets ahead down as well as up. Scaled up only, the sweep stayed
    predicted 1.8x dear to its end: every batch ran about half its predicted time, under the
    floor, so the cluster asked for more tasks than the cap allows and threads waited for
    tokens (1.217x ideal here, against 1.037x)."""
    threads, n, cap = 64, 640_000, 50.0
    rng = np.random.default_rng(3)
    dear = {}

    def measured(b):
        if len(b) == 1:  # a probe
            return np.full(1, dear.setdefault(int(b[0]), 1e-3 * rng.uniform(1.7, 2.0)))
        return np.full(len(b), 1e-3)

    ratio, submits, batches = simulate(threads, n, lambda b: np.full(len(b), 1e-3),
                                       cap=cap, measured=measured)
    assert ratio < 1.05
    waves = [d for t, d, b in batches if len(b) > 1 and t > 2.0]  # cut once batches reported
    # batches as long as planned: over the floor (threads / cap), so the cap holds the rate
    assert np.median(waves) >= threads / cap
    for window in (1.0, 5.0):
        assert max_in_window(submits, window) <= 2 * threads + 2 + cap * window
    model = CostModel(n)  # and the model itself: probes 1.8x dear, then the first batches
    for i in np.linspace(0, n - 1, 64).astype(int):
        model.observe(np.array([i]), np.array([1.8e-3]), probe=True)
    model.observe(np.arange(0, 60_000), np.full(60_000, 1e-3))
    assert model.predict(np.arange(100_000, n, 1000)) == pytest.approx(1e-3, rel=0.05)


def test_index_leaving_inverts_the_remaining_cost():
    """The last wave ends where the final round's predicted seconds begin: the index from
    which ``remaining`` is a given number of seconds, on an uneven model and with part of
    the grid already done (density)."""
    costs = np.logspace(-3, 0, 286_720)
    model = CostModel(costs.size)
    model.observe(np.arange(costs.size), costs)
    for seconds in (0.5, 100.0, 5_000.0, 0.5 * costs.sum()):
        i = model.index_leaving(seconds)
        assert model.remaining(i) == pytest.approx(seconds, rel=1e-3, abs=1.0)
        assert costs[i:].sum() == pytest.approx(seconds, rel=0.01, abs=1.0)  # the truth too
    assert model.index_leaving(0.0) == costs.size
    assert model.index_leaving(2 * costs.sum()) == 0
    flat = CostModel(1_000)
    flat.observe(np.arange(1_000), np.full(1_000, 1e-3))
    assert flat.index_leaving(0.2) == 800
    assert flat.index_leaving(0.2, density=0.5) == 600  # half the points left to run


def test_probe_noise_is_taken_off_by_the_first_batches():
    """Probes are single points run while the cluster starts: their times carry contention
    (1 ms sleeps measured 1-28 ms). Once batches have measured a few probed buckets, the
    buckets ahead, which only probes have seen, are scaled to match; a real trend along
    the grid is kept."""
    rng = np.random.default_rng(7)
    total = 640_000
    flat = CostModel(total)
    spots = np.linspace(0, total - 1, 64).astype(int)
    noisy = 0.001 * (1 + rng.exponential(1.5, spots.size))  # contention only adds time
    noisy[[10, 11, 40]] = [0.028, 0.009, 0.017]
    for i, c in zip(spots, noisy):
        flat.observe(np.array([i]), np.array([c]), probe=True)
    ahead = np.arange(100_000, total, 997)
    flat.observe(np.arange(0, 60_000), np.full(60_000, 0.001))  # the first batches
    predicted = flat.predict(ahead)
    assert np.median(predicted) == pytest.approx(1e-3, rel=0.25)
    assert predicted.min() >= 0.5e-3  # never far below what batches measure
    trend = CostModel(286_720)  # the uneven benchmark: 1 ms -> 1 s along the grid
    costs = np.logspace(-3, 0, 286_720)
    spots = np.linspace(0, 286_719, 128).astype(int)
    for i in spots:
        trend.observe(np.array([i]), np.array([costs[i] + 0.002 * rng.random()]), probe=True)
    ratio = trend.predict(np.arange(0, 286_720, 1001)) / costs[::1001]
    assert np.all(ratio > 0.85) and np.all(ratio < 3.5)  # near the truth where it matters
    assert np.all(ratio[costs[::1001] > 0.05] < 1.1)
    batch = CostModel(total)  # a batch measured in a bucket outweighs the probes there
    batch.observe(np.array([5]), np.array([0.02]), probe=True)
    batch.observe(np.arange(0, 300), np.full(300, 0.001))
    assert batch.predict(np.array([5]))[0] == pytest.approx(0.001)


FAST_AXIS = np.logspace(-3, 0, 8)  # a fast axis of 8 values costing 1 ms .. 1 s


def test_batches_scale_up_probes_that_run_low_on_a_fast_axis():
    """A probe is one point: neighbouring probes sit on different values of a fast axis, and
    their lower envelope is its cheapest value (1/37 of the bucket's mean here). Batches that
    measured probed buckets scale the envelope ahead up (1.285x ideal without)."""
    n = 8 * 20_000
    costs = np.tile(FAST_AXIS, n // 8)
    ratio, _, _ = simulate(64, n, lambda b: costs[b])
    assert ratio < 1.05
    model = CostModel(n)
    for i in np.linspace(0, n - 1, 128).astype(int):
        model.observe(np.array([i]), costs[[i]], probe=True)
    model.observe(np.arange(0, 4_000), costs[:4_000])  # the first batches
    ahead = model.remaining(4_000) / costs[4_000:].sum()
    assert 0.5 < ahead < 2.0  # 0.03 from the envelope alone


def test_points_no_batch_measured_cost_at_least_half_the_latest_batches():
    """Single probes near the end of a grid can all land on cheap values of a fast axis
    (10 us .. 25 ms here): the last batches, cut from them, grew to 18,000 points. Buckets no
    batch has measured are predicted at least half the latest batches' per-point cost."""
    costs = np.tile(np.logspace(-5, np.log10(0.025), 8), 640_000 // 8)
    model = CostModel(640_000)
    for i in np.linspace(0, 639_999, 64).astype(int):
        model.observe(np.array([i]), np.array([1e-5]), probe=True)  # all on the cheapest value
    for start in range(0, 60_000, 500):  # the first batches, 500 points each
        model.observe(np.arange(start, start + 500), costs[start:start + 500])
    ahead = model.predict(np.arange(100_000, 640_000, 1000))
    assert ahead.min() >= 0.5 * costs.mean() * 0.95

def test_a_probe_samples_every_fast_axis_evenly():
    """The axes that cycle within a cost bucket are sampled as a Latin hypercube: each axis's
    values evenly, none on one value alone (a plain stride of 32 / 8 = 4 would put every
    point on the same value of the innermost axis of 2)."""
    assert probe_block([640_000], 312.5) == (1, [0])  # no axis fits in a bucket: one point
    period, offsets = probe_block([20_000, 8], 78.1)  # the fast axis fits: the whole cycle
    assert period == 8 and offsets.tolist() == list(range(8))
    period, offsets = probe_block([1_000, 16, 2], 48.8)  # axes of 2 and 16 fit, 1,000 not
    assert period == 32 and offsets.size == 8
    inner, middle = offsets % 2, offsets // 2
    assert np.bincount(inner).tolist() == [4, 4]
    assert np.unique(middle).size == 8 and middle.max() - middle.min() >= 12
    assert np.unique(np.arange(2, 32, 4) % 2).size == 1  # what a plain stride would sample
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 20_000]},
                                                "work_us": FAST_AXIS.tolist()}, {})
    plan = PendingPlan(grid, grid.total)  # the axis lengths come from the grid
    probes = plan.probes(16, CostModel(grid.total).width)
    assert probes[0].tolist() == list(range(8))  # the grid's start is measured too
    for probe in probes:
        assert sorted(grid.point(int(i))["work_us"] for i in probe) == sorted(FAST_AXIS)


def test_probes_that_cover_a_fast_axis_keep_the_first_wave_within_its_bound():
    """One-point probes on a fast axis see its values at random; the first wave, cut before
    any batch reports, then carried up to 5x the 60 s bound (1 ms .. 1 s), or ran the sweep
    at 8x ideal (10 us .. 25 ms). Probes that sample the fast axis measure the bucket's mean."""
    n = 8 * 20_000
    dear = np.tile(FAST_AXIS, n // 8)
    _, _, single = simulate(64, n, lambda b: dear[b])
    ratio, _, sampled = simulate(64, n, lambda b: dear[b], sizes=[n // 8, 8])
    assert max(d for _, d, b in single) > 2 * 60.0  # the old probes: over the bound
    assert max(d for _, d, b in sampled) <= 60.0 and ratio < 1.05
    cheap = np.tile(np.logspace(-5, np.log10(0.025), 8), n // 8)
    assert simulate(64, n, lambda b: cheap[b])[0] > 2.0
    assert simulate(64, n, lambda b: cheap[b], sizes=[n // 8, 8])[0] < 1.1


def test_a_probe_lost_for_good_is_not_waited_for():
    """A probe split to isolate a point that kills workers, or stored failed, no longer holds
    the sizing back: a sweep whose every point kills its worker would otherwise wait forever."""
    plan = PendingPlan(None, 100_000)
    now = [0.0]
    sizer = BatchSizer(plan, clock=lambda: now[0])
    probes = sizer.next_batches(8, 0)
    assert len(probes) == 8 and sizer.next_batches(8, len(probes)) == []  # waiting for them
    for probe in probes:
        sizer.abandon(probe)
    batches = sizer.next_batches(8, 0)  # sizing goes on, a point at a time until one runs
    assert batches and all(len(b) == 1 for b in batches)
    sizer.observe(batches[0], np.array([0.001]), 0.001)
    now[0] += 10.0  # tokens for more
    assert len(sizer.next_batches(8, 0)[0]) > 1


# --------------------------------------------------------------------------- lazy planning
def test_planning_a_billion_points_keeps_driver_memory_bounded(tmp_path):
    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 10**9]}}, {"work_us": 0.0})
    writer = PartWriter(tmp_path, "r")
    writer.write(run_batch(grid, [0, 1, 2, 5])[0])  # a non-empty store: resume planning
    tracemalloc.start()
    try:
        plan = plan_sweep(grid, tmp_path)
        sizer = BatchSizer(plan.pending, max_tasks_per_second=50.0)
        probes = sizer.next_batches(threads=1024, in_flight=0)
        for b in probes:
            sizer.observe(b, np.full(len(b), 1.0), 1.0)  # 1 s points: batches of ~60
        first = sizer.next_batches(threads=256, in_flight=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"planning took {peak / 2**20:.0f} MiB"
    assert plan.total == 10**9 and plan.done_ok == 4 and plan.pending.size == 10**9 - 4
    assert len(probes) == MAX_PROBES and first
    handed = np.concatenate([np.asarray(b) for b in [*probes, *first]])
    assert not np.isin([0, 1, 2, 5], handed).any()  # stored points are skipped...
    assert 3 in handed and 4 in handed  # ...the others are not
    assert np.unique(handed).size == handed.size  # and no point is handed out twice


def test_lazy_plan_hands_out_every_pending_point_once(tmp_path):
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 5000]}},
                {"work_us": 0.0, "fail_every": 3})
    writer = PartWriter(tmp_path, "r")
    writer.write(run_batch(grid, range(0, 5000, 2))[0])
    plan = plan_sweep(grid, tmp_path).pending
    expected = [i for i in range(5000) if i % 2 == 1]
    spread = np.concatenate(plan.probes(40))
    rest = []
    while not plan.exhausted:
        rest.extend(plan.take(337).tolist())
    assert sorted([*spread.tolist(), *rest]) == expected
    retry = plan_sweep(grid, tmp_path, retry_failed=True).pending
    assert list(retry) == sorted(expected + [i for i in range(0, 5000, 2) if i % 3 == 0])


# --------------------------------------------------------------------------- buffered writer
def test_buffered_writer_flushes_by_rows_age_and_on_close(tmp_path):
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 1000]}}, {"work_us": 0.0})
    now = [0.0]
    writer = PartWriter(tmp_path, "r", flush_rows=300, flush_seconds=10, clock=lambda: now[0])
    for start in range(0, 250, 50):
        writer.write(run_batch(grid, range(start, start + 50))[0])
    writer.poll()
    assert writer.seq == 0 and writer.buffered_rows == 250  # below every threshold: in memory
    writer.write(run_batch(grid, range(250, 350))[0])  # 350 rows >= 300: one part file
    writer.flush()
    assert writer.seq == 1 and writer.rows == 350
    writer.write(run_batch(grid, range(350, 360))[0])
    now[0] = 11.0
    writer.poll()  # the oldest buffered row is 11 s old
    writer.flush()
    assert writer.seq == 2 and writer.rows == 360
    writer.write(run_batch(grid, range(360, 1000))[0])
    writer.close()
    files = sorted(tmp_path.glob("part-*.parquet"))
    assert [pq.read_metadata(f).num_rows for f in files] == [350, 10, 640]
    df = pd.read_parquet(tmp_path)
    assert sorted(df.x) == list(range(1000)) and df.task_id.is_unique


def test_flush_soon_hands_the_buffer_to_the_background_writer(tmp_path):
    """The driver calls flush_soon when the sweep's last points are out, so the write after
    the last batch holds only the tail's rows."""
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 1000]}}, {"work_us": 0.0})
    writer = PartWriter(tmp_path, "r", flush_rows=10_000)
    writer.write(run_batch(grid, range(0, 300))[0])
    writer.flush_soon()
    assert writer.buffered_rows == 0
    writer.write(run_batch(grid, range(300, 310))[0])
    writer.close()
    files = sorted(tmp_path.glob("part-*.parquet"))
    assert [pq.read_metadata(f).num_rows for f in files] == [300, 10]
    direct = PartWriter(tmp_path / "direct", "r")  # unbuffered: every write is already a file
    direct.flush_soon()
    assert direct.seq == 0


def test_a_small_buffer_is_not_written_ahead_of_the_tail(tmp_path):
    """Under ``min_bytes`` the buffer stays for the final write: a resume of a few points wrote
    two part files, one of them for the rows done before its tail."""
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 1000]}}, {"work_us": 0.0})
    writer = PartWriter(tmp_path, "r", flush_rows=10_000)
    table = run_batch(grid, range(0, 300))[0]
    writer.write(table)
    writer.flush_soon(min_bytes=table.nbytes + 1)
    assert writer.buffered_rows == 300 and writer.seq == 0
    writer.flush_soon(min_bytes=table.nbytes)  # from that size on, handed to the writer
    assert writer.buffered_rows == 0
    writer.close()
    assert [pq.read_metadata(f).num_rows for f in sorted(tmp_path.glob("part-*.parquet"))] == [300]


def test_buffered_writer_reports_a_failing_disk(tmp_path):
    from pipeline.store.part_writer import WriterFailed

    grid = Grid(get_experiment("calibration"), {"x": [1]}, {"work_us": 0.0})
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the folder should be")
    writer = PartWriter(blocker, "r", flush_rows=1)
    writer.write(run_batch(grid, [0])[0])
    with pytest.raises(WriterFailed, match="writing part files"):
        writer.close()


# --------------------------------------------------------------------------- work_mode
def test_batches_wait_in_one_queue_in_the_order_they_are_cut():
    """Every batch is queued on the scheduler (root-ish) for the first thread that frees, in
    the order the sizer cut it, call after call: the waves' shapes rely on it. A plain
    client.map with fewer than 2 x threads batches in flight sent them straight to workers."""
    from distributed import Client, LocalCluster

    from pipeline.engine.batch_table import points_table
    from pipeline.engine.submission import map_batches, queue_for_long_batches

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 1000]}},
                {"work_us": 300_000.0, "work_mode": "sleep"})
    with LocalCluster(n_workers=1, threads_per_worker=4, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        scheduler = cluster.scheduler
        queue_for_long_batches(client, 1.3)  # short batches: Dask's prefetch stays
        assert scheduler.WORKER_SATURATION == pytest.approx(1.1)
        queue_for_long_batches(client, 20.0)  # long ones: a batch per free thread
        assert scheduler.WORKER_SATURATION == 1.0
        first = map_batches(client, grid, [range(i, i + 1) for i in range(3)], -1, {})
        second = map_batches(client, grid, [np.array([10, 12]), range(20, 22), range(30, 31)],
                             -2, {"task_timeout": 60.0})
        futures = first + second
        deadline = time.monotonic() + 30
        while len(scheduler.queued) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        states = [scheduler.tasks[f.key] for f in futures]
        assert all(scheduler.is_rootish(ts) for ts in states)
        assert [ts.priority for ts in states] == sorted(ts.priority for ts in states)
        # 6 batches on 4 threads (not over 2 x threads: a plain client.map queues none)
        assert len(scheduler.queued) == 2
        chunks = [range(i, i + 1) for i in range(3)] + [[10, 12], range(20, 22), range(30, 31)]
        tables = [points_table(grid, c, run) for c, run in zip(chunks, client.gather(futures))]
        assert [t["x"].to_pylist() for t in tables] == [[0], [1], [2], [10, 12], [20, 21], [30]]
    queue_for_long_batches(type("NoCluster", (), {"cluster": None})(), 20.0)  # a shared one


def test_work_mode_sleep_really_sleeps_in_parallel_threads():
    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 32]}}, {"work_us": 100_000.0, "work_mode": "sleep"})
    points = [(grid.point(i), 0) for i in range(32)]

    def wall(threads):
        t0, cpu0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda a: exp.run(*a), points))
        return time.perf_counter() - t0, time.process_time() - cpu0

    serial, _ = wall(1)
    parallel, cpu = wall(32)
    assert serial >= 32 * 0.1  # one thread: the sleeps add up
    assert parallel < 0.1 * 4  # 32 threads: they overlap (one process, GIL released)
    assert cpu < 0.5  # and cost no CPU
    # the default still burns CPU: judged against the same wait asleep, and over a wait long
    # enough that a loaded machine (50 ms spun on 19 ms of CPU in a CI run beside the SLURM
    # tests) still gives it a fair share of a core
    spin_grid = Grid(exp, {"x": [0]}, {"work_us": 300_000.0})
    assert spin_grid.point(0)["work_mode"] == "spin"
    sleep_grid = Grid(exp, {"x": [0]}, {"work_us": 300_000.0, "work_mode": "sleep"})
    used = {}
    for mode, g in (("spin", spin_grid), ("sleep", sleep_grid)):
        cpu0 = time.process_time()
        exp.run(g.point(0), 0)
        used[mode] = time.process_time() - cpu0
    assert used["spin"] > 0.03 and used["spin"] > 10 * used["sleep"], used


# --------------------------------------------------------------------------- driver killed
def _parts(path):
    return sorted(Path(path).glob("part-*.parquet"))


def _expected_ids(n, params):
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, n]}}, params)
    return {grid.task_id(i) for i in range(n)}


SWEEP = ["experiment=calibration", "cluster.n_workers=2", "cluster.dashboard_address=:0",
         "params.work_us=20000", "params.work_mode=sleep", "progress=false"]  # faults, not CPU


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_during_a_buffered_sweep_then_resume(tmp_path):
    args = [sys.executable, str(ROOT / "run.py"), *SWEEP, f"results_dir={tmp_path}",
            "grid.x={range:[0,800]}", "batch_size=10", "flush_seconds=0.5", "flush_rows=1000000"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 150
        while len(_parts(tmp_path / "calibration")) < 2 and time.time() < deadline \
                and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only, with results still in its buffer
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    kept = pd.read_parquet(tmp_path / "calibration")
    assert 0 < len(kept) < 800 and kept.task_id.is_unique  # whole flushes, no partial file
    resume = subprocess.run(args[:-2], cwd=ROOT, capture_output=True, text=True, timeout=200)
    assert resume.returncode == 0, resume.stderr
    df = pd.read_parquet(tmp_path / "calibration")
    assert len(df) == 800 and df.task_id.is_unique  # nothing lost, nothing duplicated
    assert set(df.task_id) == _expected_ids(800, {"work_us": 20000.0, "work_mode": "sleep"})
    _kill_group(proc.pid)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _interrupt_flushes(tmp_path, sig):
    args = [sys.executable, str(ROOT / "run.py"), *SWEEP, f"results_dir={tmp_path}",
            "grid.x={range:[0,5000]}", "flush_seconds=600", "flush_rows=1000000"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        for line in proc.stderr:  # the driver logs once the cluster is up
            if "cluster up" in line or time.time() > deadline:
                break
        time.sleep(4.0)  # some batches finish; with these thresholds they stay in the buffer
        assert not _parts(tmp_path / "calibration"), "nothing is flushed before the signal"
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        _kill_group(proc.pid)
    manifest = json.loads((tmp_path / "calibration" / "_manifest.json").read_text())
    run = manifest["runs"][-1]
    run["stderr"] = err  # for the assertions' messages
    return proc.returncode, run, pd.read_parquet(tmp_path / "calibration")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_flushes_the_buffer_and_the_manifest_says_so(tmp_path):
    code, run, df = _interrupt_flushes(tmp_path, signal.SIGINT)
    assert code == 130 and run["status"] == "interrupted", run["stderr"]
    assert run["written"]["flushed"] is True and run["written"]["rows"] == len(df) > 0
    assert df.task_id.is_unique


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_flushes_the_buffer_and_the_manifest_says_so(tmp_path):
    code, run, df = _interrupt_flushes(tmp_path, signal.SIGTERM)
    assert code == 143 and run["status"] == "interrupted" and run["signal"] == "SIGTERM", \
        run["stderr"]
    assert run["written"]["flushed"] is True and run["written"]["rows"] == len(df) > 0


def test_local_workers_run_without_dasks_profiler_unless_asked():
    """Dask's statistical profiler walks every worker thread's stack every 10 ms: with
    hundreds of threads per process it costs a core here, so local clusters start without
    it; cluster.worker_profile=true turns it back on."""
    import logging

    import dask

    from pipeline.engine.cluster import connect

    def enabled():
        return dask.config.get("distributed.worker.profile.enabled")

    for asked in (False, True):
        cfg = {"kind": "local", "n_workers": 1, "threads_per_worker": 2,
               "dashboard_address": ":0", "worker_profile": asked}
        with connect(cfg, logging.getLogger("test")) as client:
            assert list(client.run(enabled).values()) == [asked]


def test_a_finished_batch_fetched_on_its_own_is_a_result_not_a_loss():
    """When the bulk gather fails, the runner fetches finished batches one by one
    (worker_calls.fetch_result). A PointsRun must come back as the result: it was taken for a
    lost batch (and recomputed) since batches stopped returning (table, seconds) pairs."""
    from distributed import Client, LocalCluster

    from pipeline.engine.batch import PointsRun, run_points
    from pipeline.engine.grid import Grid
    from pipeline.engine.worker_calls import fetch_result as _fetch
    from pipeline.experiments.base import get_experiment

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 4]}}, {"work_us": 0.0})
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=50) as cluster, Client(cluster) as client:
        fut = client.submit(run_points, grid, [0, 1, 2, 3], pure=False)
        fut.result(timeout=60)
        result, lost = _fetch(fut)
    assert lost is None and isinstance(result, PointsRun)
    assert result.done == 4 and result.outputs["value"] == [0.0, 1.0, 2.0, 3.0]
