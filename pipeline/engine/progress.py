"""What a running sweep shows and records: the status line, the run log, the manifest heartbeat.

Kept apart from the driver loop (``runner.py``) so that what is shown or recorded about a
running sweep can change without touching how work is scheduled.

- The status line (done, failed, remaining, rate, ETA) is redrawn in place on a terminal and
  printed with a UTC timestamp every 10 s otherwise (a batch log, ``nohup``).
- ``heartbeat``: called with a :meth:`Progress.snapshot` every ``heartbeat_every`` seconds, even
  with the status line off; the CLI writes it into the manifest so ``python -m pipeline status``
  can follow the sweep from another process or machine.
- The run log (``RESULTS_DIR/NAME/_logs/RUN_ID.log``, see :func:`run_log`) gets a progress line
  every 30 s and a line for every batch that brought new failures.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from pipeline.store.redact import RedactingFormatter

LOGS_DIR = "_logs"  # starts with "_": Parquet dataset discovery skips it
# File-only messages (the config, workers joining/leaving, periodic progress): too chatty for
# the terminal, exactly what one wants in the log the next morning.
runlog = logging.getLogger("pipeline.runlog")
runlog.propagate = False  # never to the terminal; only to a run log's file handler
runlog.setLevel(logging.INFO)


def utc_stamp(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


# The terminal stream whose progress line is being redrawn in place (no newline yet): a
# message printed meanwhile landed on it ("...ETA 0:00:10^Cinterrupted: 6 batches...").
_OPEN_LINE: list = [None]


def end_open_line() -> None:
    """End the progress line being redrawn, if any, so that a message starts a line."""
    stream, _OPEN_LINE[0] = _OPEN_LINE[0], None
    if stream is not None:
        try:
            stream.write("\n")
            stream.flush()
        except (OSError, ValueError):  # a closed or gone terminal: nothing to tidy
            pass


def line_ended() -> None:
    """The progress line was ended by the caller (a message that starts with a newline), or
    its stream is gone (the sweep is over): nothing left to end."""
    _OPEN_LINE[0] = None


class Progress:
    """One status line: done, failed, remaining, rate and ETA (redrawn in place on a TTY)."""

    def __init__(self, name: str, todo: int, enabled: bool = True, stream=None, *,
                 heartbeat: Callable[[dict], None] | None = None, heartbeat_every: float = 5.0,
                 log_every: float = 30.0):
        self.name, self.todo, self.enabled = name, todo, enabled
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.first = None  # (time, done) at the first result: the rate excludes start-up
        self.last = float("-inf")
        self.interval = 0.5 if self.tty else 10.0
        self.heartbeat, self.heartbeat_every = heartbeat, heartbeat_every
        self.last_beat = float("-inf")
        self.log_every, self.last_log = log_every, time.perf_counter()
        self.failed_logged = 0
        # the driver's live counts (the SweepStats of the last update): read again when a
        # sweep stops early, after the points of stopped batches were stored
        self.stats = None
        # predicted seconds to the end from the cost model (None: not known yet); the ETA
        # falls back on the task count without it
        self.eta_source: Callable[[], float | None] | None = None
        # worker threads joined (None: not known): with none, the line says since when, and
        # gives no ETA (it counted down while an adaptive cluster had no job running)
        self.threads_source: Callable[[], int | None] | None = None
        self.no_workers_since: str | None = None

    def snapshot(self, stats, final: bool = False) -> dict:
        """done/total, failed, rate (tasks/s since the first result), ETA (s) and first error."""
        now = time.perf_counter()
        done = stats.ok + stats.failed
        if self.first is None and done:
            self.first = (now, done)
        t1, d1 = self.first or (now, 0)
        rate = (done - d1) / (now - t1) if now - t1 > 0.5 else 0.0
        if final and done:
            rate = done / max(now - self.t0, 1e-9)
        remaining = self.todo - done
        eta = 0.0 if remaining == 0 else (remaining / rate if rate > 0 else None)
        if remaining and not final and self.eta_source is not None:
            try:
                predicted = self.eta_source()
            except Exception:  # the progress line never ends a sweep
                predicted = None
            if predicted is not None:
                eta = predicted
        threads = None
        if self.threads_source is not None and not final:
            try:
                threads = self.threads_source()
            except Exception:  # the progress line never ends a sweep
                threads = None
        if threads == 0 and remaining:
            self.no_workers_since = self.no_workers_since or utc_stamp()
            eta = None
        elif threads:
            self.no_workers_since = None
        # significant digits below 1 task/s: rounded to 3 decimals, points of an hour read 0.0
        rate_out = round(rate, 3) if rate >= 1 else float(f"{rate:.3g}")
        snap = {"done": done, "total": self.todo, "failed": stats.failed, "remaining": remaining,
                "rate_per_s": rate_out, "eta_s": None if eta is None else round(eta, 1),
                "first_error": stats.first_errors[0] if stats.first_errors else None,
                "updated_at": utc_stamp()}
        if threads is not None:
            snap["threads"] = threads
        if threads == 0 and remaining:
            snap["no_workers_since"] = self.no_workers_since
        return snap

    def stopped_snapshot(self) -> dict | None:
        """The progress of a sweep that stopped early (interrupted, crashed), for its run
        record: ``done`` counts every point stored this run, those of the batches stopped at
        the end included (the last heartbeat, up to 5 s old, did not), and no ETA is given.
        None before the first update."""
        if self.stats is None:
            return None
        snap = self.snapshot(self.stats, final=True)
        snap["eta_s"] = None
        return snap

    def update(self, stats, force: bool = False) -> None:
        """Called on every result and, by the driver loop, about once a second otherwise."""
        self.stats = stats
        now = time.perf_counter()
        if self.heartbeat is not None and (force or now - self.last_beat >= self.heartbeat_every):
            self.last_beat = now
            self.heartbeat(self.snapshot(stats, final=force))
        if stats.failed > self.failed_logged:
            runlog.info("failures: %d so far (+%d); first error: %s", stats.failed,
                        stats.failed - self.failed_logged,
                        stats.first_errors[0] if stats.first_errors else "?")
            self.failed_logged = stats.failed
        if force or now - self.last_log >= self.log_every:
            self.last_log = now
            runlog.info("progress: %s", self._line(self.snapshot(stats, final=force)))
        if not self.enabled or (not force and now - self.last < self.interval):
            return
        self.last = now
        line = self._line(self.snapshot(stats, final=force))
        if self.tty:
            _OPEN_LINE[0] = self.stream  # (before the write: a signal may come in between)
            self.stream.write("\r" + line + "\x1b[K")
            if force:
                self.stream.write("\n")
                _OPEN_LINE[0] = None
        else:
            self.stream.write(f"{utc_stamp()} {line}\n")
        self.stream.flush()

    def _line(self, snap: dict) -> str:
        frac = snap["done"] / self.todo if self.todo else 1.0
        bar = "#" * int(frac * 24)
        eta = snap["eta_s"]
        return (f"[{self.name}] |{bar:<24}| {snap['done']}/{self.todo} done, {snap['failed']} failed, "
                f"{snap['remaining']} remaining, {rate_text(snap['rate_per_s'])} tasks/s, "
                + (no_workers_text(snap['no_workers_since']) if snap.get("no_workers_since")
                   else f"ETA {_hms(float('nan') if eta is None else eta)}"))


def no_workers_text(since: str) -> str:
    """In place of the ETA while no worker has joined (a queued or ended batch job)."""
    return f"no workers since {since.replace('T', ' ')} (waiting for them to join)"


def rate_text(rate: float) -> str:
    """Tasks per second for people: whole numbers from 10 on, else two significant digits
    (shown whole, a sweep of 5 s points on two workers, 0.4 tasks/s, read "0 tasks/s")."""
    return f"{rate:,.0f}" if rate >= 9.5 else f"{rate:.2g}"


def _hms(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _UTCFormatter(RedactingFormatter):
    """UTC timestamps; every line redacted (no password from an address reaches the log)."""

    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + \
            f".{int(record.msecs):03d}Z"


class _Forward(logging.Handler):
    """Passes ``distributed``'s records at ``level`` on to the run log's file handler. Not a
    ``StreamHandler``: ``LocalCluster(silence_logs=...)`` sets every StreamHandler of the
    ``distributed`` logger to ERROR while the cluster lives (to quiet the terminal), and a
    FileHandler is one, so Dask's warnings (a worker that stopped heartbeating, memory
    pressure) never reached the log on ``cluster=local``."""

    def __init__(self, target: logging.Handler, level: int):
        super().__init__(level)
        self.target = target

    def emit(self, record) -> None:
        self.target.handle(record)


class _RunLogFile(logging.FileHandler):
    """The run log's file. A disk that refuses a line (full, gone read-only) gets one warning
    on the terminal per kind of error, not logging's traceback per line ('--- Logging error
    ---'): the sweep's own messages say what the disk stops, and the lines still reach the
    terminal. A different error later (the disk full, then failing) is warned of too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.refused: set = set()  # errnos already warned of

    def handleError(self, record) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handleError(record)
        else:
            self._refused(exc)

    def close(self) -> None:
        try:  # the last lines are flushed here: raised, it replaced the sweep's own outcome
            super().close()
        except OSError as exc:
            self._refused(exc)

    def _refused(self, exc: OSError) -> None:
        kind = exc.errno if exc.errno is not None else type(exc).__name__
        if kind not in self.refused:
            self.refused.add(kind)
            print(f"warning: the run log {self.baseFilename} cannot be written "
                  f"({exc.strerror or exc}); lines it refuses are not kept", file=sys.stderr)


def log_path(folder: str | Path, run_id: str) -> Path:
    return Path(folder) / LOGS_DIR / f"{run_id}.log"


@contextlib.contextmanager
def run_log(folder: str | Path, run_id: str) -> Iterator[Path]:
    """Append every ``pipeline`` log line (and distributed's warnings) to
    ``folder/_logs/RUN_ID.log`` with a UTC timestamp, for the duration of the block; the
    file-only ``pipeline.runlog`` lines go there too."""
    path = log_path(folder, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = _RunLogFile(path, mode="a", encoding="utf-8")
    handler.setFormatter(_UTCFormatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(logging.INFO)
    pipeline_log, dask_log = logging.getLogger("pipeline"), logging.getLogger("distributed")
    runlog.addHandler(handler)
    pipeline_log.addHandler(handler)
    dask_handler = _Forward(handler, logging.WARNING)
    dask_log.addHandler(dask_handler)
    try:
        yield path
    finally:
        for logger, h in ((runlog, handler), (pipeline_log, handler), (dask_log, dask_handler)):
            logger.removeHandler(h)
        handler.close()
        dask_handler.close()
