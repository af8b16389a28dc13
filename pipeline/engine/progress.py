"""The sweep's status line: done, failed, remaining, rate and ETA.

Kept apart from the driver loop (``runner.py``) so that what is shown or recorded about a
running sweep can change without touching how work is scheduled.
"""

from __future__ import annotations

import sys
import time


class Progress:
    """One status line: done, failed, remaining, rate and ETA (redrawn in place on a TTY)."""

    def __init__(self, name: str, todo: int, enabled: bool = True, stream=None):
        self.name, self.todo, self.enabled = name, todo, enabled
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.first = None  # (time, done) at the first result: the rate excludes start-up
        self.last = 0.0
        self.interval = 0.5 if self.tty else 10.0

    def update(self, stats: SweepStats, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        done = stats.ok + stats.failed
        if self.first is None and done:
            self.first = (now, done)
        t1, d1 = self.first or (now, 0)
        rate = (done - d1) / (now - t1) if now - t1 > 0.5 else 0.0
        if force and done:
            rate = done / (now - self.t0)
        remaining = self.todo - done
        eta = 0.0 if remaining == 0 else (remaining / rate if rate > 0 else float("nan"))
        frac = done / self.todo if self.todo else 1.0
        bar = "#" * int(frac * 24)
        line = (f"[{self.name}] |{bar:<24}| {done}/{self.todo} done, {stats.failed} failed, "
                f"{remaining} remaining, {rate:,.0f} tasks/s, ETA {_hms(eta)}")
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
            if force:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _hms(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
