"""Worker side: run a batch of grid points and return one typed Arrow table.

A batch is (grid, indices). Every point becomes one or more rows; an exception inside the
experiment becomes a single ``status=failed`` row carrying the error text, so one bad point
never loses the batch.

With ``task_timeout`` set, a watcher thread per worker process times every point; a point over
its limit cannot be interrupted safely (it may be inside C code), so the watcher reports it on
the event topic ``TIMEOUT_TOPIC`` and ends the worker process (``os._exit``): the nanny starts a
fresh one and the driver stores the point as failed (see ``runner.py``).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from typing import Any, Mapping, Sequence

import pyarrow as pa

from pipeline.engine.grid import Grid, seed_of
from pipeline.engine.schema import BOOKKEEPING, SEED_COLUMN, field_metadata


def result_schema(grid: Grid) -> pa.Schema:
    """The Arrow schema of a batch's rows; each field carries its description and unit as
    field metadata (experiments.base.document, engine.schema.BOOKKEEPING_DOCS). Built once
    per grid (a worker caches its grids), not once per batch."""
    cached = getattr(grid, "_result_schema", None)
    if cached is None:
        cached = grid._result_schema = _build_result_schema(grid)
    return cached


def _build_result_schema(grid: Grid) -> pa.Schema:
    exp = grid.experiment
    fields = [pa.field(p.name, p.arrow_type) for p in exp.params]
    fields += [pa.field(name, typ) for name, typ in exp.columns.items()]
    if exp.stochastic:
        fields.append(pa.field(*SEED_COLUMN))
    fields += [pa.field(name, typ) for name, typ in BOOKKEEPING.items()]
    fields = [f.with_metadata(field_metadata(exp, f.name)) if field_metadata(exp, f.name) else f
              for f in fields]
    return pa.schema(fields, metadata={"experiment": exp.name, "version": str(exp.version)})


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def _as_rows(out: Any) -> Sequence[Mapping[str, Any]]:
    if type(out) is dict:
        return [out]  # the common cases first, without typing's slow isinstance(Mapping)
    if type(out) is list and out and all(type(row) is dict for row in out):
        return out
    if out is None:
        return [{}]
    if isinstance(out, Mapping):
        return [out]
    rows = list(out)
    if not rows:
        raise ValueError("experiment returned no rows")
    for row in rows:
        if not isinstance(row, Mapping):
            raise TypeError(f"experiment must return a dict or a list of dicts, got {type(row)}")
    return rows


def _error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" [{os.path.basename(tb[-1].filename)}:{tb[-1].lineno} in {tb[-1].name}]" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


TIMEOUT_TOPIC = "pipeline-task-timeout"
TIMEOUT_EXIT_CODE = 71
EVENT_FLUSH_SECONDS = 1.0  # the event reaches the scheduler before the process ends


class _PointClock:
    """Deadlines of the points running in this process (one per thread), checked by one daemon
    thread; arming and disarming are two dict operations, cheap even for microsecond points."""

    def __init__(self):
        # thread id -> (deadline, report, the Dask worker)
        self.running: dict[int, tuple[float, dict, object]] = {}
        self.thread = threading.Thread(target=self._watch, name="pipeline-task-timeout",
                                       daemon=True)
        self.thread.start()

    def arm(self, seconds: float, report: dict, worker) -> None:
        self.running[threading.get_ident()] = (time.monotonic() + seconds, report, worker)

    def disarm(self) -> None:
        self.running.pop(threading.get_ident(), None)

    def _watch(self) -> None:
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            for deadline, report, worker in list(self.running.values()):
                if now > deadline:
                    worker.log_event(TIMEOUT_TOPIC, report)
                    time.sleep(EVENT_FLUSH_SECONDS)
                    os._exit(TIMEOUT_EXIT_CODE)


_CLOCK: _PointClock | None = None
_CLOCK_LOCK = threading.Lock()


def _point_clock() -> _PointClock:
    global _CLOCK
    with _CLOCK_LOCK:
        if _CLOCK is None:
            _CLOCK = _PointClock()
        return _CLOCK


def _current_worker():
    """The Dask worker running this task, or None (a direct call). Looked up here, in the
    task's thread: ``get_worker`` is a context variable the watcher thread cannot see."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def run_batch(grid: Grid, indices: Sequence[int],
              task_timeout: float | None = None) -> tuple[pa.Table, float]:
    """Run the points ``indices`` of ``grid``; return (rows as a table, wall seconds).

    ``task_timeout`` (seconds): a point still running after that long is reported on
    ``TIMEOUT_TOPIC`` with its grid index and this batch's Dask key, and the worker process
    exits (see the module docstring)."""
    t_batch = time.perf_counter()
    worker = _current_worker() if task_timeout else None
    # Only on a Dask worker: ending the process is the nanny's cue, never a caller's.
    clock = _point_clock() if worker is not None else None
    key = str(worker.get_current_task()) if worker is not None else None
    where = str(worker.address) if worker is not None else None
    exp = grid.experiment
    schema = result_schema(grid)
    out_columns = list(exp.columns)
    allowed = set(out_columns)
    run = exp.run
    params, task_ids = grid.batch_columns(indices)
    names, list_params = grid.param_names, grid.list_params
    seeds = [seed_of(tid) for tid in task_ids]
    n = len(task_ids)
    statuses, errors = ["ok"] * n, [None] * n
    elapsed, started, counts = [0.0] * n, [0.0] * n, [1] * n
    # outputs go straight into columns: no row dict outlives its point (fewer objects for
    # the garbage collector to walk while hundreds of threads share this process)
    outputs: dict[str, list] = {name: [] for name in out_columns}
    out_items = list(outputs.items())
    clock_t = time.perf_counter
    wall0_us, perf0 = time.time_ns() // 1000, clock_t()

    for i, values in enumerate(zip(*(params[name] for name in names))):
        point = dict(zip(names, values))
        for name in list_params:  # a kernel may mutate its input: each point gets its own
            point[name] = list(point[name])
        t0 = clock_t()
        if clock is not None:
            clock.arm(task_timeout, {"key": key, "index": int(indices[i]), "task_id": task_ids[i],
                                     "timeout_s": task_timeout, "worker": where}, worker)
        try:
            out = run(point, seeds[i])
            if type(out) is dict and allowed.issuperset(out):  # the common case, inline
                elapsed[i] = clock_t() - t0
                for name, column in out_items:
                    column.append(out.get(name))
                continue
            rows = _as_rows(out)
            for row in rows:
                if not allowed.issuperset(row):
                    raise KeyError(f"undeclared output column(s) {sorted(set(row) - allowed)}")
        except Exception as exc:  # a failing point is data, not a crash
            rows = [{}]
            statuses[i], errors[i] = "failed", _error_text(exc)
        finally:
            started[i] = t0
            if clock is not None:
                clock.disarm()
        elapsed[i] = clock_t() - t0
        if len(rows) != 1:
            counts[i] = len(rows)
        for row in rows:
            for name, column in out_items:
                column.append(row.get(name))

    # wall-clock stamps from one reading plus monotonic offsets: two clock calls per point fewer
    started_us = [wall0_us + int((t - perf0) * 1e6) for t in started]
    finished_us = [s + int(e * 1e6) for s, e in zip(started_us, elapsed)]
    columns = _assemble(params, counts, outputs, {
        "task_id": task_ids, "experiment_version": [grid.version] * n,
        "status": statuses, "error": errors, "elapsed_s": elapsed,
        "worker": [_worker_name()] * n, "started_at": started_us,
        "finished_at": finished_us, "seed": seeds})
    try:
        table = _to_table(columns, schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        firsts = [sum(counts[:i]) for i in range(len(counts))]
        table = _to_table(_isolate_bad_rows(columns, schema, list(zip(firsts, counts)),
                                            out_columns), schema)
    return table, time.perf_counter() - t_batch


def _assemble(params: dict[str, list], counts: list[int], outputs: dict[str, list],
              per_task: dict[str, list]) -> dict[str, list]:
    """Column lists: per-task values (parameters, bookkeeping) repeated once per row the task
    emitted, beside the output columns."""
    single = all(c == 1 for c in counts)

    def repeat(values: list) -> list:
        if single:
            return values
        return [v for v, c in zip(values, counts) for _ in range(c)]

    columns = {name: repeat(values) for name, values in params.items()}
    columns.update(outputs)
    for name, values in per_task.items():
        columns[name] = repeat(values)
    rows = sum(counts)
    columns["row_index"] = [0] * rows if single else [r for c in counts for r in range(c)]
    return columns


def _to_table(columns: dict[str, list], schema: pa.Schema) -> pa.Table:
    arrays = []
    for f in schema:
        values = columns[f.name]
        if f.name == "seed" and not isinstance(values, list):
            values = list(values)
        if pa.types.is_timestamp(f.type):
            arrays.append(pa.array(values, pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, f.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=schema)


def _isolate_bad_rows(columns, schema, tasks, out_columns):
    """A value that does not fit its declared Arrow type fails its task, not the batch."""
    types = {f.name: f.type for f in schema}
    for first, count in tasks:
        problem = None
        for r in range(first, first + count):
            for name in out_columns:
                try:
                    pa.array([columns[name][r]], types[name], from_pandas=True)
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                        OverflowError) as exc:
                    problem = (f"TypeError: column '{name}' value {columns[name][r]!r} does not fit "
                               f"declared type {types[name]}: {exc}")
                    break
            if problem:
                break
        if problem:
            for r in range(first, first + count):
                for name in out_columns:
                    columns[name][r] = None
                columns["status"][r] = "failed"
                columns["error"][r] = problem
    return columns


def failed_batch_table(grid: Grid, indices: Sequence[int], error: str) -> pa.Table:
    """Rows for a whole batch lost at the cluster level (e.g. its workers kept dying)."""
    exp = grid.experiment
    schema = result_schema(grid)
    columns: dict[str, list] = {f.name: [] for f in schema}
    now = time.time_ns() // 1000
    for index in indices:
        point = grid.point(int(index))
        tid = grid.task_id(int(index))
        for name in columns:
            columns[name].append(None)
        for p in exp.params:
            columns[p.name][-1] = point[p.name]
        if exp.stochastic:
            columns["seed"][-1] = seed_of(tid)
        columns["task_id"][-1] = tid
        columns["experiment_version"][-1] = grid.version
        columns["status"][-1] = "failed"
        columns["error"][-1] = error
        columns["started_at"][-1] = now
        columns["finished_at"][-1] = now
        columns["row_index"][-1] = 0
    return _to_table(columns, schema)
