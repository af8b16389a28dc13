"""The typed Arrow table of a batch's rows, built on the driver: :func:`points_table` from
what a worker sent back (``batch.PointsRun``: only what varies per point) with the parameters,
constant columns and ids that follow from the grid and the indices submitted;
:func:`failed_batch_table` for a batch lost or refused as a whole; :func:`result_schema`, the
schema both follow (the worker's half is ``batch.py``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine.grid import Grid
from pipeline.engine.task_ids import TASK_ID_BYTES, seed_of, seeds_of_ids
from pipeline.engine.schema import BOOKKEEPING, SEED_COLUMN, field_metadata

if TYPE_CHECKING:
    from pipeline.engine.batch import PointsRun


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


def points_table(grid: Grid, indices: Sequence[int], run: "PointsRun") -> pa.Table:
    """The typed table of a batch's rows: ``run`` (from ``batch.run_points``) with the
    parameters of its points and the constant columns. Rows of the first ``run.done`` of
    ``indices``."""
    n = run.done
    schema = result_schema(grid)
    names = grid.param_names
    params = grid.batch_values(indices[:n] if n < len(indices) else indices)
    per_point = {name: _Constant(grid.fixed[name]) if name in grid.fixed else params[name]
                 for name in names}
    counts, statuses, errors = run.counts, run.statuses, run.errors
    finished_us = run.started_us + (run.elapsed_s * 1e6).astype(np.int64)
    columns = _assemble(per_point, counts, run.outputs, {
        "task_id": task_id_array(run.ids), "experiment_version": _Constant(grid.version),
        "status": _Constant("ok") if statuses is None else statuses,
        "error": _Constant(None) if errors is None else errors,
        "elapsed_s": run.elapsed_s, "worker": _Constant(run.worker),
        "started_at": run.started_us, "finished_at": finished_us,
        "seed": seeds_of_ids(run.ids)})
    try:
        return _to_table(columns, schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        counts = counts or [1] * n
        firsts = [sum(counts[:i]) for i in range(len(counts))]
        return _to_table(_isolate_bad_rows(columns, schema, list(zip(firsts, counts)),
                                           list(grid.experiment.columns)), schema)


def task_id_array(ids: bytes) -> pa.Array:
    """The task ids (hex) of id bytes (``TASK_ID_BYTES`` per point) as one Arrow string
    array, hex-encoded in one call instead of a string object per point."""
    width = 2 * TASK_ID_BYTES
    n = len(ids) // TASK_ID_BYTES
    text = ids.hex().encode("ascii")
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))


class _Constant:
    """A column with one value in every row (a fixed parameter, the worker's name): built by
    Arrow in one call instead of from a list of n references."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _assemble(params: dict[str, list], counts: list[int] | None, outputs: dict[str, list],
              per_task: dict[str, list]) -> dict[str, list]:
    """Columns: per-task values (parameters, bookkeeping) repeated once per row the task
    emitted, beside the output columns. A column is a list, a numpy array, an Arrow array or a
    _Constant. ``counts`` None: one row per task."""
    single = counts is None or all(c == 1 for c in counts)

    def repeat(values):
        if single or type(values) is _Constant:
            return values
        if isinstance(values, np.ndarray):
            return np.repeat(values, counts)
        if isinstance(values, pa.Array):
            return values.take(np.repeat(np.arange(len(counts)), counts))
        return [v for v, c in zip(values, counts) for _ in range(c)]

    columns = {name: repeat(values) for name, values in params.items()}
    columns.update(outputs)
    for name, values in per_task.items():
        columns[name] = repeat(values)
    if single:
        columns["row_index"] = np.zeros(len(per_task["task_id"]), np.int64)
    else:
        columns["row_index"] = [r for c in counts for r in range(c)]
    return columns


def _to_table(columns: dict[str, list], schema: pa.Schema) -> pa.Table:
    rows = len(columns["row_index"])
    arrays = []
    for f in schema:
        values = columns[f.name]
        if type(values) is _Constant:
            arrays.append(_constant_array(values.value, f.type, rows))
            continue
        if isinstance(values, pa.Array):
            arrays.append(values if values.type == f.type else values.cast(f.type))
            continue
        if pa.types.is_timestamp(f.type):
            arrays.append(pa.array(np.asarray(values, np.int64), f.type))
        else:
            arrays.append(_typed_array(values, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _typed_array(values, type_: pa.DataType) -> pa.Array:
    """``values`` as an array of ``type_``. Into an integer column, a float with a fractional
    part raises: pyarrow's own conversion truncated it (1.5 stored as 1, status ok)."""
    if not pa.types.is_integer(type_):
        return pa.array(values, type_, from_pandas=True)
    try:
        inferred = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # said by the typed one
        return pa.array(values, type_, from_pandas=True)
    if pa.types.is_integer(inferred.type) or pa.types.is_null(inferred.type):
        return inferred.cast(type_)  # (a safe cast: an overflow raises)
    if not pa.types.is_floating(inferred.type):
        return pa.array(values, type_, from_pandas=True)
    whole = []  # floats among the values (rare): each whole one exactly, NaN as null
    for v in values:
        if isinstance(v, (float, np.floating)):
            if v != v:
                v = None
            elif not float(v).is_integer():
                raise ValueError(f"{v!r} is not a whole number (an integer column would "
                                 "truncate it)")
            else:
                v = int(v)
        whole.append(v)
    return pa.array(whole, type_)


def _constant_array(value, type_: pa.DataType, rows: int) -> pa.Array:
    if value is None:
        return pa.nulls(rows, type_)
    if pa.types.is_timestamp(type_):
        return pa.array(np.full(rows, value, np.int64), type_)
    return pa.repeat(pa.scalar(value, type_, from_pandas=True), rows)


def _isolate_bad_rows(columns, schema, tasks, out_columns):
    """A value that does not fit its declared Arrow type fails its task, not the batch."""
    types = {f.name: f.type for f in schema}
    rows = len(columns["row_index"])
    for name in ("status", "error"):
        if type(columns[name]) is _Constant:
            columns[name] = [columns[name].value] * rows
    for first, count in tasks:
        problem = None
        for r in range(first, first + count):
            for name in out_columns:
                try:
                    _typed_array([columns[name][r]], types[name])
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                        OverflowError) as exc:
                    problem = (f"TypeError: column '{name}' value {columns[name][r]!r} does not fit "
                               f"declared type {types[name]}: {exc}")
                    if isinstance(exc, OverflowError) and pa.types.is_integer(types[name]):
                        problem += ("; an integer that may exceed it is stored exactly as "
                                    "exact_int(n) in a pa.string() column, with log_of_int(n) "
                                    "in a float log_* column (experiments/base.py)")
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


def failed_batch_table(grid: Grid, indices: Sequence[int], error: str,
                       worker: str | None = None) -> pa.Table:
    """Rows for a whole batch lost at the cluster level (e.g. its workers kept dying), or
    refused (``worker``: the one whose results they were)."""
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
        columns["worker"][-1] = worker
    return _to_table(columns, schema)
