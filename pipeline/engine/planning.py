"""How the points still to run are cut into batches: the cost model and batch sizing.

Kept apart from the driver loop (``runner.py``) so that sizing can be unit tested on a fake
clock, without a cluster. What is left to run comes from ``pending_plan.PendingPlan``.

- :class:`CostModel` (``cost_model.py``) learns the cost of a point as a function of its grid
  index (piecewise constant over buckets of the index, interpolated in log space between
  measured buckets), because real costs follow the slow axes of the grid (lattice size, k, n).
- :class:`BatchSizer` turns predicted costs into batches: guided self-scheduling (each batch
  carries remaining work / (2 x threads)), floored at ``threads / max_tasks_per_second`` so
  the scheduler's task rate stays bounded as the cluster grows, and capped at
  ``max_batch_seconds`` so no batch holds the tail. A token bucket enforces the task-rate cap.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Callable, Mapping

import numpy as np

from pipeline.engine.chunks import as_indices, compact_chunk
from pipeline.engine.cost_model import CostModel
from pipeline.engine.pending_plan import PendingPlan

MAX_BATCH = 50_000  # tasks per batch: bounds the rows a worker returns in one table
STAGGER = 0.5  # spread of the first wave's batch sizes (+-25 %), met by the last wave's
# Waves are sized at least this much over the floor: a batch predicted too dear runs short,
# and at the cap its thread then waits for a token (10 ms sleeps predicted 15 % dear cost 15 %)
HEADROOM = 1.25
TAIL_FINEST = 8  # the final round's batches: floor / TAIL_FINEST seconds (not below min)
TAIL_PER_THREAD = 3  # ... and up to this many per thread, as the token budget allows
MAX_PROBES = 128  # enough to follow the cost along the grid; more only add start-up latency


class TokenBucket:
    """At most ``rate`` events per second on average, in bursts of at most ``burst``
    (the classic (sigma, rho) regulator): in any window of t seconds, at most
    ``burst + rate * t`` events pass."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self.tokens = float(burst)
        self.stamp = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def set_burst(self, burst: float) -> None:
        self._refill()
        self.burst = float(burst)
        self.tokens = min(self.tokens, self.burst)

    def available(self) -> float:
        self._refill()
        return max(0.0, self.tokens)

    def try_take(self) -> bool:
        self._refill()
        if self.tokens >= 1.0 - 1e-9:  # tolerance: refills are sums of float products
            self.tokens -= 1.0
            return True
        return False

    def wait_time(self) -> float:
        """Seconds until the next token."""
        self._refill()
        return 0.0 if self.tokens >= 1.0 - 1e-9 else (1.0 - self.tokens) / self.rate


class BatchSizer:
    """Cuts the plan into batches for ``threads`` worker threads.

    Each batch's predicted duration (cost model) is

        d = clamp(R / (2 * threads), floor, max_batch_seconds),
        floor = max(min_batch_seconds, threads / max_tasks_per_second),

    where R is the predicted work not yet handed out (guided self-scheduling: large batches
    early, the tail split finer and finer over every thread). The floor keeps the cluster's
    task rate near ``max_tasks_per_second`` whatever the thread count; in the tail, where
    R / (2 * threads) falls below the floor, batches shrink down to ``min_batch_seconds``
    and the token bucket alone holds the rate to the cap. Before any cost is known, the
    first wave is one-point probes spread over the grid (one per thread, at most a few
    thousand), so the cost model sees the whole grid before committing large batches.
    ``fixed`` (``batch_size=N``) bypasses all of it.
    """

    def __init__(self, plan: PendingPlan, *, max_tasks_per_second: float = 50.0,
                 max_batch_seconds: float = 60.0, min_batch_seconds: float = 0.2,
                 fixed: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.plan = plan
        self.model = CostModel(plan.total)
        self.cap = float(max_tasks_per_second)
        self.max_s = float(max_batch_seconds)
        self.min_s = float(min(min_batch_seconds, max_batch_seconds))
        self.fixed = fixed
        self.clock = clock
        self.limiter: TokenBucket | None = None
        # [batches left in this wave, seconds per batch, threads, waves left, size shape]
        self._round = None
        self._waves_started = 0
        self._final: tuple[int, float] | None = None  # the final round: (batches, seconds each)
        self._round_count = 0  # batches in the current round
        self._round_end: int | None = None  # grid index the current round's last batch reaches
        self.probed = False
        self.probes_out = 0  # probes not yet reported
        self.probe_t0 = self.probe_half = None
        self._probes: dict[int, tuple[int, int]] = {}  # probe tasks out: first -> (points, at)
        self.rate_limited = False  # the last call stopped for want of a token
        self.submitted = 0
        # the tail: points given back by batches stopped early, handed out before the rest
        self._returned: deque[np.ndarray] = deque()
        # batches to run again as they are (lost with a worker and split, or resubmitted
        # without a hung point): handed out first, each for a token like any other batch
        self._again: deque = deque()
        self._idle_since: float | None = None  # nothing left to hand out, threads idle
        self._asked_to_stop: set = set()
        # for eta_seconds: thread-seconds the cluster has had, and those finished batches took
        self._capacity, self._finished_work = 0.0, 0.0
        self._capacity_at: tuple[float, int] | None = None  # (when, threads with a batch)

    def burst(self, threads: int) -> int:
        return 2 * threads + 2

    def floor_seconds(self, threads: int) -> float:
        return min(self.max_s, max(self.min_s, threads / self.cap))

    def fine_seconds(self, threads: int) -> float:
        """Predicted seconds of the tail's batches (the final round, given-back points)."""
        return max(self.min_s, self.floor_seconds(threads) / TAIL_FINEST)

    @property
    def has_returned(self) -> bool:
        """Points are waiting to be handed out again (given back, or batches to resubmit)."""
        return bool(self._returned or self._again)

    def resubmit(self, chunks) -> None:
        """Batches to run again as they are, before anything else, under the cap: submitted
        at once, the pieces of a batch lost with its worker (up to 64) overran
        ``max_tasks_per_second`` and the in-flight bound."""
        self._again.extend(c for c in chunks if len(c))

    def eta_seconds(self, threads: int, in_flight_s: float = 0.0,
                    busy: int | None = None) -> float | None:
        """Predicted wall seconds to the end of the sweep, for the progress line and
        ``status``: the work still to do spread over ``threads``. The work is the predicted
        cost of the points not handed out yet, plus ``in_flight_s`` (the batches in flight,
        as predicted when cut) less what they have run so far: the thread-seconds the cluster
        has had (counted at each call; ``busy``: at most this many of the threads had a batch,
        so idle ones count for nothing) beyond those the finished batches took. None while the
        probes are out (before they have measured the grid), or with no thread. It assumes
        the threads stay busy: the tail of a sweep, or batches cut for a smaller cluster before
        workers joined, run longer than it says. An ETA from the task count assumes every
        point costs the same: on a grid whose dear points come last (costs rising 1,000x along
        an axis) it was off many times over."""
        now = self.clock()
        if self._capacity_at is not None:
            self._capacity += self._capacity_at[1] * max(0.0, now - self._capacity_at[0])
        working = max(0, threads) if busy is None else max(0, min(threads, busy))
        self._capacity_at = (now, working)
        if threads <= 0 or not self.model.measured or not self._probes_settled():
            return None  # (the first probes back are the grid's cheap start, say)
        work = 0.0 if self.plan.exhausted else \
            self.model.remaining(self.plan.next_index(), self.plan.density())
        for chunk in (*self._returned, *self._again):
            work += float(self.model.predict(as_indices(chunk)).sum())
        in_flight_s = max(0.0, in_flight_s)
        # Thread time not yet matched by finished batches is work done on those in flight, at
        # most all of it: clamped here so that what is never matched (batches lost with their
        # workers, the wait between a batch's end and its handling) cannot pile up over a
        # sweep until in-flight work reads as done.
        self._capacity = min(self._capacity, self._finished_work + in_flight_s)
        running = max(0.0, self._capacity - self._finished_work)
        return (work + in_flight_s - running) / threads

    def take_token(self) -> bool:
        """One task's worth of the cap, for a task submitted outside :meth:`next_batches` (a
        point retried alone); False (and :meth:`wait_time` says how long) when none is left."""
        if self.limiter is None or self.limiter.try_take():
            return True
        self.rate_limited = True
        return False

    def give_back(self, indices: np.ndarray) -> None:
        """Points a batch stopped early did not reach: handed out before the plan's own, in
        batches of :meth:`fine_seconds`."""
        indices = as_indices(indices)
        if indices.size:
            self._returned.append(indices)

    def _take_returned(self, threads: int) -> np.ndarray:
        rest = self._returned.popleft()
        if self.fixed is not None:
            count = self.fixed
        else:
            cumulative = np.cumsum(self.model.predict(rest))
            count = int(np.searchsorted(cumulative, self.fine_seconds(threads))) + 1
        if count < rest.size:
            self._returned.appendleft(rest[count:])
        return rest[:count]

    def tail_to_stop(self, threads: int, in_flight: int,
                     predicted: Callable[[], Mapping[object, float]]) -> list:
        """The batches to ask to stop early (``batch.request_stop``), so that the points they
        have not reached are re-split over idle threads.

        Only in the tail: nothing is left to hand out, fewer batches are in flight than there
        are threads, and that has lasted :meth:`fine_seconds`. Then the batches predicted to
        take at least twice that, not asked before, are asked, the longest first, one per
        idle thread. However the sizing erred (costs
        drifting on a loaded node, batches started out of order, a slow node), no thread
        then runs on for more than about one tail batch after the others: on 64 threads of
        1 ms points, the last wave's batches had run up to 1.4 s past the rest.
        ``predicted()``: key -> predicted seconds of each batch in flight."""
        threads = max(1, int(threads))
        if (self.fixed is not None or self.has_returned or not self.plan.exhausted
                or in_flight >= threads):
            self._idle_since = None
            return []
        now = self.clock()
        if self._idle_since is None:
            self._idle_since = now
        grace = self.fine_seconds(threads)
        if now - self._idle_since < grace:
            return []
        self._idle_since = None  # looked: look again one grace later, not at every wake
        # At most one batch per idle thread, the longest predicted first: a stopped batch's
        # thread goes idle too, and its points go out again in small batches that each take
        # a token. Every long batch asked at once, when a tight cap (25 tasks/s on 64
        # threads) had left the final round short and only a few threads idle, gave back
        # 60 batches' remainders: 5 threads busy for 5 s, the cap issuing their pieces.
        long = sorted(((seconds, key) for key, seconds in predicted().items()
                       if seconds >= 2 * grace and key not in self._asked_to_stop),
                      key=lambda pair: -pair[0])
        ask = [key for _, key in long[:threads - in_flight]]
        self._asked_to_stop.update(ask)
        return ask

    def tail_wait_time(self, threads: int) -> float:
        """Seconds until :meth:`tail_to_stop` should look again (inf when it is not waiting)."""
        if self._idle_since is None:
            return math.inf
        return max(0.0, self._idle_since + self.fine_seconds(threads) - self.clock())

    def target_seconds(self, threads: int) -> float:
        """Predicted seconds of work for the next batch (see the class docstring)."""
        threads = max(1, threads)
        remaining = self.model.remaining(self.plan.next_index(), self.plan.density())
        if threads / self.cap <= self.min_s:  # the cap is not binding: guided self-scheduling
            self._round = None
            gss = remaining / (2 * threads)
            if gss >= self.floor_seconds(threads):
                return min(self.max_s, gss)
            return max(self.min_s, gss)
        # Whole rounds (waves) of one batch per thread, each about the floor: the cluster
        # then finishes about threads / floor <= max_tasks_per_second batches per second.
        # A wave's batch size is fixed when the wave starts (sized per batch, R / threads
        # would shrink geometrically within it). Waves are staggered: the first one's
        # batches range over +-STAGGER/2 of the size, so the wave ends spread over time
        # instead of every thread finishing at once (1,024 batches ending together stalled
        # Dask for seconds), and the last one's batches come in decreasing size: Dask hands
        # queued batches out first in, first out, so the thread that frees first (a short
        # first batch, an early start, fast points) takes the largest last batch, and every
        # thread ends together. What the model gets wrong (costs drift on a loaded node) is
        # taken up by a final round of small batches, first come, first served.
        if (self._final and self._round is not None and self._round[0] <= 0
                and self._round[2] == threads):
            count, size = self._final
            self._final = (1, size)  # after the final round (the model erred): more of the same
            self._round = [count, size, threads, 0, None]
            self._round_count = count
            self._round_end = None  # cut by duration: what the model still gets wrong, it splits
        elif self._round is None or self._round[0] <= 0 or self._round[2] != threads:
            if self._round is None or self._round[2] != threads:
                self._final = None
                # a new plan: as many waves as the floor allows, at least two to stagger
                per_thread = remaining / threads
                waves = max(1, math.floor(per_thread / (HEADROOM * self.floor_seconds(threads))))
                if waves == 1 and per_thread >= 2 * self.min_s:
                    waves = 2
                self._round = [0, 0.0, threads, waves]  # [left, size, threads, waves left]
                self._waves_started = 0
            # re-planned at every wave: a plan made from probes measured dear would otherwise
            # keep cutting waves under the floor once batches have corrected the model
            waves_left = self._round[3]
            if self._waves_started:
                waves_left = max(1, min(waves_left, math.floor(
                    remaining / threads / (HEADROOM * self.floor_seconds(threads)))))
            self._round_end = None
            if self._waves_started and waves_left == 1:
                self._final = self._final_round(threads, remaining)
                if self._final:
                    remaining -= self._final[0] * self._final[1]
            if waves_left == 1:  # the last wave ends where the final round (or the grid) starts
                self._round_end = self.plan.total if not self._final else \
                    self.model.index_leaving(self._final[0] * self._final[1], self.plan.density())
            size = remaining / (threads * waves_left)
            self._round = [threads, max(self.min_s, min(self.max_s, size)), threads,
                           waves_left - 1, self._wave_shape(threads, waves_left)]
            self._round_count = threads
        left = self._round[0]
        self._round[0] -= 1
        shape = self._round[4]
        weight = (lambda j: 1.0) if shape is None else shape
        j = self._round_count - left  # this batch's place in its round
        if self._round_end is not None:
            # The last wave and the final round are cut as shares of what lies between here
            # and their end, re-predicted at every batch: cut from a duration fixed when the
            # wave was planned, a model that learns meanwhile (costs measured lower than the
            # probes said) lets the wave run into the final round's points, and the threads
            # it was meant to even out end apart again.
            between = remaining - self.model.remaining(self._round_end, self.plan.density())
            # the weights are linear in j: their sum over the batches left is exact this way
            share = weight(j) / (left * (weight(j) + weight(self._round_count - 1)) / 2)
            return max(self.min_s, min(self.max_s, between * share))
        return max(self.min_s, min(self.max_s, self._round[1] * weight(j)))

    def _final_round(self, threads: int, remaining: float) -> tuple[int, float] | None:
        """After the last wave, a round of small batches taken first come, first served: the
        threads the last wave frees early take several, so noise in the waves' costs does not
        spread the threads' end times by more than one small batch."""
        tokens = self.limiter.available() if self.limiter is not None else self.burst(threads)
        tokens += self.cap * remaining / threads - threads  # the last wave's own
        count = int(max(0, min(TAIL_PER_THREAD * threads, tokens)))
        size = max(self.min_s, self.floor_seconds(threads) / TAIL_FINEST)
        count = min(count, int(remaining / 2 / size))  # at most half the work left
        return (count, size) if count >= threads else None

    def _wave_shape(self, threads: int, waves_left: int):
        """Size factor of the j-th batch of the wave starting now (j = 0..threads-1), or None
        for a uniform wave."""
        first = self._waves_started == 0
        self._waves_started += 1
        if threads < 2 or (first and waves_left < 2):
            return None
        span = STAGGER / (threads - 1)
        if first:  # increasing: ends spread over +-STAGGER/2 of the wave
            return lambda j: 1.0 + STAGGER * (j / (threads - 1) - 0.5)
        if waves_left == 1:  # the last: decreasing, to meet the first wave's spread
            return lambda j: 1.0 + STAGGER / 2 - span * j
        return None

    def next_batches(self, threads: int, in_flight: int) -> list[np.ndarray]:
        """The batches to submit now: as many as the in-flight bound (2 x threads + 2) and
        the task-rate cap allow."""
        threads = max(1, int(threads))
        bound = self.burst(threads)
        if self.limiter is None:
            self.limiter = TokenBucket(self.cap, burst=bound, clock=self.clock)
        elif self.limiter.burst != bound:  # workers joined or left
            self.limiter.set_burst(bound)
        out: list[np.ndarray] = []
        if self.fixed is None and not self.probed:
            self.probed = True
            count = min(threads, MAX_PROBES, bound - in_flight)
            spread = self.plan.probes(count, self.model.width)
            # Where points cannot be spread (an explicit index list, a grid smaller than
            # twice the probes), the probes are simply the first points.
            first = self.plan.take(count - len(spread))
            probes = [np.array([index], dtype=np.int64) for index in first] + spread
            # A probe of several points (fast axes) runs as several tasks where threads are
            # free for them: all probe tasks fit in one wave, <= 2 x threads <= the burst.
            points = sum(probe.size for probe in probes)
            per_task = max(1, math.ceil(points / max(threads, len(probes))))
            for probe in probes:
                at = int(probe[probe.size // 2])
                for piece in np.array_split(probe, math.ceil(probe.size / per_task)):
                    out.append(piece)
                    self._probes[int(piece[0])] = (piece.size, at)
            self.limiter.tokens -= len(out)  # the bucket starts full
            self.submitted += len(out)
            self.probes_out, self.probe_t0 = len(out), self.clock()
            return out
        self.rate_limited = False
        while self._again and in_flight + len(out) < bound:
            if not self.limiter.try_take():
                self.rate_limited = True
                self.submitted += len(out)
                return out
            out.append(self._again.popleft())
        if self.fixed is None and not self._probes_settled():
            self.submitted += len(out)
            return out
        while in_flight + len(out) < bound and (self._returned or not self.plan.exhausted):
            if not self.limiter.try_take():
                self.rate_limited = True
                break
            out.append(compact_chunk(self._take_returned(threads) if self._returned
                                     else self.plan.take(self._size(threads))))
        self.submitted += len(out)
        return out

    def observe(self, indices: np.ndarray, costs: np.ndarray, batch_seconds: float | None) -> None:
        """A finished batch: its points' measured costs (seconds each) feed the cost model."""
        first = int(indices[0]) if len(indices) else -1
        self._finished_work += float(batch_seconds if batch_seconds is not None
                                     else np.sum(costs))
        entry = self._probes.get(first)
        probe = entry is not None and entry[0] == len(indices)
        self.model.observe(indices, costs, batch_seconds, probe=probe,
                           at=entry[1] if probe else None)
        if probe:
            self._probe_done(first)

    def abandon(self, indices) -> None:
        """A batch lost on the cluster for good, or split to isolate a point that kills
        workers: if it was a probe, sizing stops waiting for it (a sweep whose every point
        kills its worker would otherwise wait for its probes forever)."""
        first = int(indices[0]) if len(indices) else -1
        entry = self._probes.get(first)
        if entry is not None and entry[0] == len(indices):
            self._probe_done(first)

    def _probe_done(self, first: int) -> None:
        del self._probes[first]
        self.probes_out -= 1
        if self.probe_half is None and self.probes_out <= self.submitted / 2:
            self.probe_half = self.clock()

    def _probes_settled(self) -> bool:
        """Large batches wait until the probes have measured the grid: all of them, or, if
        the slowest take long, until 3 x the time half of them took, plus a second."""
        if self.probes_out == 0:
            return True
        if self.probe_half is None:
            return False
        return self.clock() >= self.probe_t0 + 3 * (self.probe_half - self.probe_t0) + 1.0

    def _size(self, threads: int) -> int:
        if self.fixed is not None:
            return self.fixed
        if not self.model.measured:  # every probe was lost: one point at a time until one runs
            return 1
        seconds = self.target_seconds(threads)
        here = float(self.model.predict(np.array([self.plan.next_index()]))[0])
        window = int(min(MAX_BATCH, max(64, 4 * seconds / here)))  # enough to reach `seconds`
        candidates = self.plan.peek(window)
        if candidates.size == 0:
            return 1
        cumulative = np.cumsum(self.model.predict(candidates))
        return int(max(1, min(candidates.size, np.searchsorted(cumulative, seconds) + 1)))

    def wait_time(self) -> float:
        """Seconds until a batch held back by the rate cap may go (inf when none is)."""
        if self.limiter is None or not self.rate_limited:
            return math.inf
        return self.limiter.wait_time()
