"""The sweep's writer of part files: :class:`PartWriter` buffers finished result tables and
writes them as few, large part files from a background thread, each through
``parquet.write_part_file`` (temp file, fsync, rename). The durability contract is in its
docstring and the README."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import pyarrow as pa

from pipeline.store.parquet import write_part_file

FLUSH_ROWS = 1_000_000  # buffered rows that trigger a part file (see PartWriter)
FLUSH_MIB = 64  # buffered Arrow MiB that trigger a part file (up to 3 buffers: 2 queued, 1 filling)
FLUSH_SECONDS = 60.0  # oldest buffered row's age that triggers a part file: the most a kill -9 loses


class WriterFailed(RuntimeError):
    """The background part writer could not write (disk full, permissions...)."""


class PartWriter:
    """Writes result tables as numbered part files ``part-<run_id>-<seq>.parquet``, each
    through :func:`write_part_file` (temp file, fsync, rename).

    Unbuffered by default: every :meth:`write` is one part file, written before it returns.
    Buffered (any of ``flush_rows``, ``flush_mib``, ``flush_seconds`` given): tables collect in
    memory and become one part file when the buffer holds ``flush_rows`` rows or ``flush_mib``
    MiB, or its oldest table is ``flush_seconds`` old (checked by :meth:`poll`, which the driver
    calls at least once a second). Part files are then written by one background thread fed
    through a queue of at most two buffers, so the caller never waits on disk unless the disk
    is slower than the sweep. :meth:`close` (or :meth:`flush`) writes whatever is buffered and
    waits for it; ``rows``/``seq`` count what is on disk. Durability: a killed process loses
    the buffered rows only (at most ``flush_seconds`` of finished work) and never half a file;
    a row is buffered once, so nothing is written twice.
    """

    def __init__(self, path: str | os.PathLike, run_id: str, stamp: dict | None = None, *,
                 flush_rows: int | None = None, flush_mib: float | None = None,
                 flush_seconds: float | None = None, clock=time.monotonic,
                 guard: Callable[[], None] | None = None):
        """``guard``: called before each part file is written; what it raises fails the
        write (the sweep's: the folder is still where it was locked)."""
        self.path = Path(path)
        self.run_id = run_id
        self.seq = 0  # part files on disk
        self.rows = 0  # rows on disk
        # Constant columns added to every row written (name -> (value, Arrow type)), e.g.
        # provenance known only to the driver.
        self.stamp = dict(stamp or {})
        self.buffered = any(v is not None for v in (flush_rows, flush_mib, flush_seconds))
        self.flush_rows = int(flush_rows if flush_rows is not None else FLUSH_ROWS)
        self.flush_bytes = int((flush_mib if flush_mib is not None else FLUSH_MIB) * 2**20)
        self.flush_seconds = float(flush_seconds if flush_seconds is not None else FLUSH_SECONDS)
        self.clock = clock
        self.guard = guard
        self._tables: list[pa.Table] = []
        self._buffer_rows = self._buffer_bytes = 0
        self._oldest = None
        self._queue = None
        self._thread = None
        self._error: BaseException | None = None
        self._names = 0  # part names handed out (the thread may lag behind)
        self._written: dict[str, int] = {}  # part name -> rows in its file on disk
        self._given_rows = 0  # rows given to write() (the caller's thread only)

    @property
    def buffered_rows(self) -> int:
        return self._buffer_rows

    @property
    def unwritten_rows(self) -> int:
        """Rows given to :meth:`write` that are not on disk: still buffered, or refused by the
        disk (full, gone). Exact once :meth:`close` has returned or raised. A rerun recomputes
        them."""
        return max(0, self._given_rows - self.rows)

    def _stamped(self, table: pa.Table) -> pa.Table:
        # once per part file (on the writer's thread), not once per batch on the driver's
        for name, (value, typ) in self.stamp.items():
            if name not in table.column_names:
                # typ may be a pa.Field, to carry field metadata (description, unit)
                fld = typ if isinstance(typ, pa.Field) else pa.field(name, typ)
                column = pa.repeat(pa.scalar(value, fld.type), table.num_rows)
                table = table.append_column(fld, column)
        return table

    def _next_name(self) -> str:
        name = f"part-{self.run_id}-{self._names:06d}.parquet"
        self._names += 1
        return name

    def _write_now(self, name: str, tables: list[pa.Table]) -> Path:
        if self.guard is not None:
            self.guard()
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
        final = write_part_file(self.path, name, self._stamped(table))
        # by name: a buffer handed off again under its name (see _hand_off) replaced its file
        self.rows += table.num_rows - self._written.get(name, 0)
        self.seq += name not in self._written
        self._written[name] = table.num_rows
        return final

    def write(self, table: pa.Table) -> Path | None:
        """Add a result table; returns the part file when one was written synchronously."""
        if table.num_rows == 0:
            return None
        self._given_rows += table.num_rows
        if not self.buffered:
            return self._write_now(self._next_name(), [table])
        self._raise_if_failed()
        if self._oldest is None:
            self._oldest = self.clock()
        self._tables.append(table)
        self._buffer_rows += table.num_rows
        self._buffer_bytes += table.nbytes
        if self._buffer_rows >= self.flush_rows or self._buffer_bytes >= self.flush_bytes:
            self._hand_off()
        return None

    def poll(self) -> None:
        """Flush a buffer that has reached its age; re-raise a background write error."""
        self._raise_if_failed()
        if self._oldest is not None and self.clock() - self._oldest >= self.flush_seconds:
            self._hand_off()

    def flush_soon(self, min_bytes: int = 0) -> None:
        """Hand what is buffered to the background writer now, without waiting for it (the
        driver does so when the sweep's last points are out: the final flush is then only the
        tail's rows, not a whole buffer written after the last batch). A buffer under
        ``min_bytes`` is kept: written at the end it costs milliseconds, written ahead it
        costs a part file more."""
        self._raise_if_failed()
        if self.buffered and self._buffer_bytes >= min_bytes:
            self._hand_off()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise WriterFailed(f"writing part files to {self.path} failed: "
                               f"{type(self._error).__name__}: {self._error}") from self._error

    def _hand_off(self) -> None:
        if not self._tables:
            return
        job = (self._next_name(), self._tables)
        kept = (self._tables, self._buffer_rows, self._buffer_bytes, self._oldest)
        try:
            self._tables, self._buffer_rows, self._buffer_bytes, self._oldest = [], 0, 0, None
            if self._thread is None:
                import queue

                self._queue = queue.Queue(maxsize=2)
                self._start_drain()
            while True:  # bounded: waits only while two buffers are already queued for the disk
                self._raise_if_failed()
                try:
                    self._queue.put(job, timeout=1.0)
                    return
                except Exception:  # queue.Full
                    if not self._thread.is_alive():
                        self._raise_if_failed()
                        self._start_drain()  # stopped by a close() cut short (see flush)
        except BaseException:
            # Not queued (Ctrl-C/SIGTERM while the queue is full, a failed writer): the rows go
            # back to the buffer, so that close() still writes them, or reports them unflushed.
            # Under the same part name, and as a copy of the list: had the signal come just
            # after the put, the queued job keeps its own list and close() writes a superset
            # over the same file (renamed over it whole), so no row is stored twice.
            self._tables = list(kept[0])
            self._buffer_rows, self._buffer_bytes, self._oldest = kept[1:]
            self._names -= 1
            raise

    def _start_drain(self) -> None:
        import threading

        self._thread = threading.Thread(target=self._drain, name="part-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                if self._error is None:
                    self._write_now(*job)
            except BaseException as exc:  # reported to the driver by poll/write/close
                self._error = exc
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Write everything buffered and wait until it is on disk."""
        if not self.buffered:
            return
        self._hand_off()
        if self._queue is not None:
            done = self._queue.all_tasks_done
            with done:
                while self._queue.unfinished_tasks:
                    done.wait(1.0)
                    alive = self._thread is not None and self._thread.is_alive()
                    if self._queue.unfinished_tasks and not alive:
                        # A close() cut short by a second signal had sent the thread its stop;
                        # buffers queued after it were waited for for ever.
                        self._start_drain()
        self._raise_if_failed()

    def close(self) -> None:
        """Flush, then stop the background thread. Safe to call twice."""
        try:
            self.flush()
        finally:
            if self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()
            self._thread = None
