"""What the benchmarks share: the best of several timed calls."""

from __future__ import annotations

import time


def best_time(fn, repeat: int = 3) -> tuple[float, object]:
    """(the shortest of ``repeat`` timings of ``fn()`` in seconds, its last result): the
    least disturbed run, on a machine where other work may land on a run."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out
