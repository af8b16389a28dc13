"""The cost model: seconds per point as a function of grid index, learnt from probes and
batches while a sweep runs (:class:`CostModel`), and the points of the batches in flight
counted against it (:class:`InFlightWork`, for the ETA).

Real costs follow the slow axes of a grid (lattice size, k, n), so the model is piecewise
constant over buckets of the grid index, interpolated in log space between measured buckets.
Used by :class:`pipeline.engine.planning.BatchSizer`; no Dask, no I/O.
"""

from __future__ import annotations

import numpy as np

from pipeline.engine.chunks import as_indices

COST_BUCKETS = 2_048


class CostModel:
    """Seconds per point as a function of grid index.

    The index range is cut into ``buckets`` equal pieces; each keeps the mean measured cost
    of its points. A bucket without measurements takes the log-linear interpolation of its
    measured neighbours (costs along an axis grow by orders of magnitude, so geometric
    interpolation is the unbiased guess), the nearest measured value beyond the ends.
    Because the grid's last axis varies fastest, the cost along fast axes averages within a
    bucket, and the slow axes (the ones that make batches uneven) are followed bucket by bucket.

    Probes (one point each, run together while the cluster starts) are kept apart from
    batches: a probe's time carries the start-up contention (1 ms sleeps measured 1-28 ms),
    and ahead of the batches the probes are all the model knows. A probe-only bucket takes
    the lower envelope of its 5 neighbouring probes, scaled up where batches show that it
    runs low (a fast axis: see ``_probe_estimate``). A bucket measured on only a few batch
    points takes the median of its neighbours. Every bucket no batch has measured is
    predicted at least ``RECENT_FLOOR`` times the latest batches' per-point cost: single
    probes can all land on cheap values, and a batch cut from them carries many times its
    predicted time (a last batch of 18,000 points ran 84 s after every other thread had
    finished). A point predicted too dear cuts its batch short, which under the task-rate cap
    costs throughput for a wave; one predicted too cheap makes its batch run long.
    """

    def __init__(self, total: int, buckets: int = COST_BUCKETS):
        self.total = max(1, int(total))
        self.buckets = max(1, min(int(buckets), self.total))
        self.width = self.total / self.buckets
        self._sum = np.zeros(self.buckets)
        self._count = np.zeros(self.buckets)
        self._probe_sum = np.zeros(self.buckets)
        self._probe_count = np.zeros(self.buckets)
        self._mean = None  # interpolated per-bucket cost, rebuilt lazily
        self.overhead = 0.0  # seconds per point outside the experiment (engine, Arrow)
        self.recent = 0.0  # per-point cost of the latest batches (moving average)

    @property
    def measured(self) -> bool:
        return bool(self._count.any() or self._probe_count.any())

    def bucket_of(self, indices: np.ndarray) -> np.ndarray:
        return np.minimum((np.asarray(indices) / self.width).astype(np.int64), self.buckets - 1)

    def observe(self, indices, costs: np.ndarray, batch_seconds: float | None = None,
                probe: bool = False, at: int | None = None) -> None:
        """Measured seconds per point. A probe's points all count for the bucket of grid
        index ``at`` (the probe's place): together they sample the fast axes there."""
        indices = as_indices(indices)
        costs = np.maximum(np.asarray(costs, dtype=float), 1e-7)
        if probe and at is not None:
            indices = np.full(indices.shape, int(at))
        buckets = self.bucket_of(indices)
        np.add.at(self._probe_sum if probe else self._sum, buckets, costs)
        np.add.at(self._probe_count if probe else self._count, buckets, 1.0)
        if batch_seconds is not None and len(costs) >= 16:
            # per-point engine overhead; small batches (probes) are dominated by the fixed
            # per-batch cost, which says nothing about the cost per point
            sample = max(0.0, batch_seconds - float(costs.sum())) / len(costs)
            self.overhead = sample if self.overhead == 0.0 else 0.8 * self.overhead + 0.2 * sample
        if not probe and len(costs) >= WEAK_BUCKET_POINTS:
            mean = float(costs.mean())
            self.recent = mean if self.recent == 0.0 else 0.8 * self.recent + 0.2 * mean
        self._mean = None

    def bucket_costs(self) -> np.ndarray:
        if self._mean is None:
            batch = self._count > 0
            probe_only = (self._probe_count > 0) & ~batch
            if not (batch.any() or probe_only.any()):
                raise ValueError("no cost measured yet")
            costs = np.zeros(self.buckets)
            costs[batch] = self._sum[batch] / self._count[batch]
            if probe_only.any():
                costs[probe_only] = self._probe_estimate(batch)[probe_only]
            seen = batch | probe_only
            centres = np.arange(self.buckets)
            weak = (self._count[seen] < WEAK_BUCKET_POINTS) & ~probe_only[seen]
            logs = np.log(costs[seen])
            logs[weak] = _running(np.median, logs)[weak]
            mean = np.exp(np.interp(centres, centres[seen], logs))
            if self.recent > 0.0:  # the safety net ahead of the batches (class docstring)
                ahead = self._count < WEAK_BUCKET_POINTS
                mean[ahead] = np.maximum(mean[ahead], RECENT_FLOOR * self.recent)
            self._mean = mean + self.overhead
        return self._mean

    def _probe_estimate(self, batch: np.ndarray) -> np.ndarray:
        """Per-bucket cost from the probes: the lower envelope of neighbouring probes (5), as
        contention only adds time (at 1,024 threads, start-up delays reached 100x a 1 ms
        point: means and medians of neighbouring probes cut first waves 100x short). A probe
        is one point, though: where the cost varies along a fast axis, neighbouring probes
        sit on different values of it and their minimum is its cheapest value (1/37 of the
        bucket's mean for 8 fast values from 1 ms to 1 s). So once batches have measured
        probed buckets, the 5 nearest the frontier scale the envelope by the median ratio of
        batch to envelope: up on a fast axis, and down where every probe was slowed alike
        (all probes run while the cluster starts; 1 ms sleeps probed at 1.8 ms on 64 threads,
        which no envelope sheds, kept the whole sweep predicted 1.8x dear)."""
        probed = self._probe_count > 0
        envelope = np.zeros(self.buckets)
        envelope[probed] = _running(np.min, self._probe_sum[probed] / self._probe_count[probed])
        both = np.flatnonzero(probed & batch & (self._count >= WEAK_BUCKET_POINTS))
        if both.size:
            near = both[-PROBE_CALIBRATION_BUCKETS:]
            factor = float(np.median(self._sum[near] / self._count[near] / envelope[near]))
            envelope[probed] *= min(max(factor, 1.0 / 64.0), 64.0)
        return envelope

    def predict(self, indices: np.ndarray) -> np.ndarray:
        return self.bucket_costs()[self.bucket_of(indices)]

    def remaining(self, start: int, density: float = 1.0) -> float:
        """Predicted seconds of the points from grid index ``start`` to the end."""
        if start >= self.total:
            return 0.0
        mean = self.bucket_costs()
        b = int(self.bucket_of(np.array([start]))[0])
        head = ((b + 1) * self.width - start) * mean[b]
        return density * (head + float(mean[b + 1:].sum()) * self.width)


    def index_leaving(self, seconds: float, density: float = 1.0) -> int:
        """The grid index from which the predicted seconds to the end are ``seconds``: the
        inverse of :meth:`remaining`."""
        per_bucket = self.bucket_costs() * self.width * density
        after = np.concatenate([np.cumsum(per_bucket[::-1])[::-1][1:], [0.0]])  # from b + 1 on
        b = int(np.searchsorted(-after, -seconds, side="left"))  # first bucket with after <= s
        if b >= self.buckets:
            return 0
        into = (seconds - after[b]) / per_bucket[b] * self.width  # indices taken from bucket b
        return int(min(self.total, max(0, round((b + 1) * self.width - into))))


class InFlightWork:
    """The points of the batches in flight, counted per cost bucket, so that their predicted
    cost follows the model as it learns (in the simulated uneven grid of the tests, the
    predictions made from probes when the first wave was cut ran 10% low)."""

    def __init__(self, model: CostModel):
        self.model = model
        self.counts = np.zeros(model.buckets)

    def add(self, chunk, sign: int = 1) -> None:
        indices = as_indices(chunk)
        if indices.size:
            self.counts += sign * np.bincount(self.model.bucket_of(indices),
                                              minlength=self.model.buckets)

    def remove(self, chunk) -> None:
        self.add(chunk, -1)

    def seconds(self) -> float:
        if not self.model.measured:
            return 0.0
        return float(np.maximum(self.counts, 0) @ self.model.bucket_costs())


RECENT_FLOOR = 0.5  # a point not yet measured by batches costs at least this x the latest ones
PROBE_CALIBRATION_BUCKETS = 5  # batch-measured probe buckets nearest the frontier
WEAK_BUCKET_POINTS = 8  # a bucket measured on fewer batch points is checked against its neighbours
SMOOTHING_WINDOW = 5


def _running(statistic, values: np.ndarray) -> np.ndarray:
    """``statistic`` (np.min, np.median) over a window of :data:`SMOOTHING_WINDOW` neighbours
    of each value (fewer at the ends), in grid order."""
    if values.size < 3:
        return values.copy()
    half = SMOOTHING_WINDOW // 2
    padded = np.pad(values, half, mode="edge")
    return statistic(np.lib.stride_tricks.sliding_window_view(padded, SMOOTHING_WINDOW), axis=1)
