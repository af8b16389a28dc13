"""What is left to run: :class:`PendingPlan` hands out the grid points still to run in
ascending order, chunk by chunk: a fresh store costs nothing per point, and on a non-empty
store only the chunk about to be submitted is hashed and looked up. Memory is bounded by one
chunk, not by the grid. Its first points are probes spread over the grid
(:func:`probe_block`), for the cost model to see the whole range before any large batch is
cut. How the points are cut into batches is ``planning.py``."""

from __future__ import annotations

import math

import numpy as np

from pipeline.engine.point_ids import point_prefixes

PLAN_CHUNK = 65_536  # grid indices hashed at a time when the store is not empty
PROBE_POINTS = 8  # points in one probe where fast axes vary within a cost bucket


class PendingPlan:
    """The grid indices still to run, handed out lazily in ascending order.

    ``ok_ids``/``failed_ids`` are sorted stored id prefixes (see
    :func:`pipeline.store.parquet.stored_ids`); a point whose id is among them is skipped
    (failed ones only unless ``retry_failed``). ``to_run`` is the number of points to run: exact
    on a fresh store or for an explicit index array, otherwise the caller's count (the dry-run
    count, which matches stored parameters and agrees with hashing).
    """

    def __init__(self, grid, total: int, *, explicit: np.ndarray | None = None,
                 ok_ids: np.ndarray | None = None, failed_ids: np.ndarray | None = None,
                 retry_failed: bool = False, to_run: int | None = None,
                 done_ok: int = 0, done_failed: int = 0, sizes=None):
        self.grid = grid
        self.total = int(total)
        # the grid's axis lengths, the last varying fastest (probes sample the fast ones)
        self.sizes = [int(n) for n in (sizes if sizes is not None else
                                       getattr(grid, "sizes", None) or [self.total])]
        self.done_ok, self.done_failed = int(done_ok), int(done_failed)
        self._explicit = None if explicit is None else np.asarray(explicit, dtype=np.int64)
        self._ok = ok_ids if ok_ids is not None and ok_ids.size else None
        self._failed = failed_ids if failed_ids is not None and failed_ids.size else None
        self._retry_failed = retry_failed
        if self._explicit is not None:
            self.to_run = int(self._explicit.size)
        elif not self.filtered:
            self.to_run = self.total
        else:
            self.to_run = int(to_run if to_run is not None else self.total)
        self.taken = 0
        self._scan = 0  # next grid index (or explicit position) not yet buffered
        self._buf = np.zeros(0, dtype=np.int64)
        self._pos = 0
        self._out_of_order: set[int] = set()  # handed out early (probes): skipped when reached

    def include(self, prefixes: np.ndarray) -> None:
        """Run the points with these id prefixes (sorted, each a point of the grid) although
        they are stored ok (``rerun_changed``): they leave the stored-ok set, and the scan
        finds them as it hashes each chunk. Call before anything is taken."""
        prefixes = np.asarray(prefixes, dtype=np.uint64)
        if self._explicit is not None:  # a caller's index list: the points named, hashed
            from pipeline.store.parquet import contains

            every = np.arange(self.total, dtype=np.int64)
            wanted = every[contains(prefixes, self._hash(every))]
            self._explicit = np.union1d(self._explicit, wanted)
            self.to_run = int(self._explicit.size)
            return
        if self._ok is not None:
            self._ok = np.setdiff1d(self._ok, prefixes)  # sorted, as contains() needs
            self._ok = self._ok if self._ok.size else None
        self.to_run = min(self.total, self.to_run + int(prefixes.size))

    @property
    def filtered(self) -> bool:
        return self._explicit is None and (self._ok is not None or self._failed is not None)

    # Older callers and tests treat the plan like the index array it replaces.
    @property
    def size(self) -> int:
        return self.to_run

    def __len__(self) -> int:
        return self.to_run

    def __iter__(self):
        clone = PendingPlan(self.grid, self.total, explicit=self._explicit, ok_ids=self._ok,
                            failed_ids=self._failed, retry_failed=self._retry_failed,
                            to_run=self.to_run)
        while True:
            chunk = clone.take(PLAN_CHUNK)
            if chunk.size == 0:
                return
            yield from (int(i) for i in chunk)

    @property
    def remaining(self) -> int:
        return max(0, self.to_run - self.taken)

    @property
    def exhausted(self) -> bool:
        self._fill(1)
        return self._pos >= self._buf.size

    def next_index(self) -> int:
        """The grid index the next batch starts at (``total`` when exhausted)."""
        self._fill(1)
        return int(self._buf[self._pos]) if self._pos < self._buf.size else self.total

    def _is_pending(self, ids: np.ndarray) -> np.ndarray:
        from pipeline.store.parquet import contains

        skip = np.zeros(ids.shape, dtype=bool)
        if self._ok is not None:
            skip |= contains(self._ok, ids)
        if self._failed is not None and not self._retry_failed:
            skip |= contains(self._failed, ids)
        return ~skip

    def _hash(self, indices: np.ndarray) -> np.ndarray:
        return point_prefixes(self.grid, indices)

    def _fill(self, n: int) -> None:
        """Buffer at least ``n`` pending indices past the read position (or all that are left)."""
        while self._buf.size - self._pos < n:
            limit = self._explicit.size if self._explicit is not None else self.total
            if self._scan >= limit:
                return
            stop = min(limit, self._scan + max(PLAN_CHUNK, n))
            if self._explicit is not None:
                new = self._explicit[self._scan:stop]
            else:
                new = np.arange(self._scan, stop, dtype=np.int64)
                if self.filtered:
                    new = new[self._is_pending(self._hash(new))]
            self._scan = stop
            if self._out_of_order:
                keep = [i for i in self._out_of_order if new.size and new[0] <= i <= new[-1]]
                if keep:
                    new = new[~np.isin(new, keep)]
                    self._out_of_order.difference_update(keep)
            self._buf = np.concatenate([self._buf[self._pos:], new])
            self._pos = 0

    def peek(self, n: int) -> np.ndarray:
        self._fill(n)
        return self._buf[self._pos:self._pos + n]

    def take(self, n: int) -> np.ndarray:
        out = self.peek(n).copy()
        self._pos += out.size
        self.taken += out.size
        return out

    def probes(self, count: int, width: float = 1.0) -> list[np.ndarray]:
        """Up to ``count`` probes spread evenly over the part of the grid not yet handed out,
        the first at its start, taken out of order: small batches that measure the cost
        along the whole grid before any large batch is committed. Each probe estimates the
        mean cost of a point near it: where axes cycle within ``width`` indices (a cost
        bucket), it samples them (:func:`probe_block`), else it is one point."""
        start = self.next_index()
        span = self.total - start
        period, offsets = probe_block(self.sizes, width)
        if span <= 2 * count * period:
            period, offsets = 1, np.zeros(1, dtype=np.int64)
        if self._explicit is not None or count <= 0 or span <= 2 * count:
            return []
        # the first at the start: the grid's start is always measured
        bases = start + (np.arange(count, dtype=np.int64) * span) // count
        bases = bases // period * period  # a block starts where the fast axes start over
        candidates = (bases[:, None] + offsets[None, :]).ravel()
        block = np.repeat(np.arange(count), offsets.size)
        keep = (candidates >= start) & (candidates < self.total)
        candidates, block = candidates[keep], block[keep]
        buffered = self._buf[self._pos:]
        in_buffer = candidates < self._scan
        pending = np.ones(candidates.size, dtype=bool)
        pending[in_buffer] = np.isin(candidates[in_buffer], buffered)
        early = candidates[in_buffer & pending]  # pending, already buffered: take them out
        if early.size:
            self._buf, self._pos = buffered[~np.isin(buffered, early)], 0
        late = ~in_buffer
        if self.filtered and late.any():
            pending[late] = self._is_pending(self._hash(candidates[late]))
        self._out_of_order.update(int(i) for i in candidates[late & pending])
        candidates, block = candidates[pending], block[pending]
        self.taken += candidates.size
        cuts = np.flatnonzero(np.diff(block)) + 1
        return [piece for piece in np.split(candidates, cuts) if piece.size]

    def density(self) -> float:
        """Pending points per grid index over what is left (1 on a fresh store)."""
        if not self.filtered:
            return 1.0
        span = max(1, self.total - self.next_index())
        return min(1.0, self.remaining / span)


def probe_block(sizes, width: float, points: int = PROBE_POINTS) -> tuple[int, np.ndarray]:
    """(period, offsets): what one probe runs. The innermost axes whose combined length fits
    in ``width`` indices (a cost bucket) cycle within the bucket, and a batch averages over
    them; a one-point probe sits on one of their values, and where cost varies along them
    it mismeasures the bucket (its cheapest value was 1/37 of the mean for 8 values from
    1 ms to 1 s: the first wave, cut from it, ran many times over its bound). So a probe
    samples them: ``points`` offsets within one cycle of ``period`` indices, a Latin
    hypercube over the fast axes (on each, its values covered evenly; the strata are
    permuted by a different multiplier prime to ``points`` on each axis, so that no axis
    is sampled on one value alone, as a plain stride can be). Without such axes: (1, [0])."""
    fast, period = [], 1
    for size in reversed([int(n) for n in sizes]):
        if size <= 1:
            continue
        if period * size > width:
            break
        fast.append(size)
        period *= size
    if period <= points:
        return period, np.arange(period, dtype=np.int64)
    multipliers = [m for m in range(1, 4 * points) if math.gcd(m, points) == 1]
    offsets, stride = np.zeros(points, dtype=np.int64), 1
    for axis, size in enumerate(fast):  # fast[0] is the innermost axis
        strata = (np.arange(points) * multipliers[axis % len(multipliers)]) % points
        offsets += ((strata + 0.5) * size / points).astype(np.int64) * stride
        stride *= size
    return period, np.unique(offsets)
