"""The values one ``grid:`` entry stands for (the grammar is in ``grid.py``): a list, a scalar
or a range helper (``linspace``, ``logspace``, ``range``), and how many values a float axis may
hold in the memory of the machine planning it."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

import numpy as np

from pipeline.experiments.base import ParamError

RANGE_HELPERS = ("linspace", "logspace", "range")
# A linspace/logspace axis holds its values (a range is lazy); planning and its checks take
# about 26 bytes a value (a 10^9-value dry run: 26 GB, and the OOM killer of a shared login
# node). An axis may take half the memory available, and 10^7 values (260 MB) always.
FLOAT_AXIS_BYTES = 26
MIN_FLOAT_AXIS = 10_000_000
_HELPER_RE = re.compile(r"^\s*(linspace|logspace|range)\s*\((.*)\)\s*$")


def _helper_args(name: str, args: Any, param: str, experiment: str) -> list:
    if isinstance(args, Mapping):
        keys = {"linspace": ("start", "stop", "num"), "logspace": ("start", "stop", "num"),
                "range": ("start", "stop", "step")}[name]
        # named, each argument keeps its meaning: a typo ('stpe') was dropped, and the ones
        # given shifted into other places ({start: 5} ran range(5), i.e. 0..4)
        unknown = sorted(set(map(str, args)) - set(keys))
        required = ("stop",) if name == "range" else keys
        missing = [k for k in required if k not in args]
        if unknown or missing:
            raise ParamError(experiment, param, f"{name} takes {', '.join(keys)}"
                             + (" (start 0 and step 1 by default)" if name == "range" else "")
                             + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                             + (f"; missing: {', '.join(missing)}" if missing else ""))
        if name == "range":
            args = {"start": 0, "step": 1, **args}
        args = [args[k] for k in keys]
    if not isinstance(args, (list, tuple)):
        raise ParamError(experiment, param, f"{name} takes a list of arguments, got {args!r}")
    if any(isinstance(a, bool) for a in args):  # as in a list: {range: [true, 3]} ran 1, 2
        raise ParamError(experiment, param, f"bad {name} helper {args!r}: its arguments are "
                         "numbers, not true or false")
    try:
        if name == "range":
            if not 1 <= len(args) <= 3:
                raise ValueError("range takes 1 to 3 integers (start, stop, step)")
            ints = [int(a) for a in args]
            # int() truncates 2.5; an int (or an integer string) is exact as it is, while its
            # float rounds above 2^53 and made range(0, 2**53 + 1) "not integers"
            if any(not isinstance(a, (int, str)) and float(a) != i for a, i in zip(args, ints)):
                raise ValueError("range arguments must be integers")
            values = range(*ints)  # lazy: a 10^7-point axis costs nothing until used
            try:
                len(values)  # range(0, 10**20) exists, but its len() raised OverflowError
            except OverflowError:
                raise ValueError("more than 2^63 - 1 values, more than an axis can hold") from None
            return values
        if len(args) != 3:
            raise ValueError(f"{name} takes exactly 3 arguments (start, stop, num)")
        start, stop, num = float(args[0]), float(args[1]), args[2]
        if not (math.isfinite(start) and math.isfinite(stop)):  # numpy fills in NaN between
            raise ValueError("start and stop must be finite numbers")
        if isinstance(num, bool) or float(num) != int(float(num)):  # 2.5 used to become 2
            raise ValueError(f"num must be a whole number of points, got {num!r}")
        num = int(float(num))
        if num < 1:
            raise ValueError("num must be >= 1")
        if num > float_axis_limit():
            raise ValueError(f"num={num:,} {too_many_floats(num)}")
        values = np.linspace(start, stop, num)
        if name == "logspace":
            with np.errstate(over="ignore", under="ignore"):
                values = 10.0 ** values
            lost = int(np.count_nonzero(~np.isfinite(values) | (values == 0)))
            if lost:  # [-400, 400, 3] gave [0.0, 1.0, inf], exit 0 (a domain may allow both)
                raise ValueError(f"{lost:,} of its values are 10^x beyond a float's range "
                                 "(x from about -307 to 308), stored as 0 or inf")
        return values
    except (TypeError, ValueError, OverflowError) as exc:  # int(1e400): OverflowError
        raise ParamError(experiment, param, f"bad {name} helper {args!r}: {exc}") from None


def memory_available() -> int | None:
    """Bytes this process may still take: the memory available now, and no more than the
    limit Dask gives its workers (distributed.system: the machine, or a cgroup's limit such as
    a batch job's allocation); None where it cannot be read."""
    try:
        import psutil
        from distributed.system import MEMORY_LIMIT
    except ImportError:
        return None
    return min(psutil.virtual_memory().available, MEMORY_LIMIT)


def float_axis_limit(available: int | None = None) -> int:
    """Values a float axis may hold: half of ``available`` bytes (default: what this machine
    has now, :func:`memory_available`) at FLOAT_AXIS_BYTES a value, and MIN_FLOAT_AXIS always."""
    available = memory_available() if available is None else available
    if available is None:
        return MIN_FLOAT_AXIS
    return max(MIN_FLOAT_AXIS, available // 2 // FLOAT_AXIS_BYTES)


def too_many_floats(num: int) -> str:
    available = memory_available()
    here = f", more than half the {available / 1e9:,.1f} GB available here" if available else ""
    return (f"values would take about {FLOAT_AXIS_BYTES * num / 1e9:,.1f} GB to hold (a float "
            f"axis keeps every value in memory){here}; use a coarser axis (at most "
            f"{float_axis_limit(available):,} values here)")


def expand_value(value: Any, param: str, experiment: str, list_typed: bool = False):
    """The raw values one ``grid:`` entry stands for: a list, a ``range`` or a float array."""
    if isinstance(value, Mapping):
        if len(value) == 1 and next(iter(value)) in RANGE_HELPERS:
            name, args = next(iter(value.items()))
            return _helper_args(name, args, param, experiment)
        raise ParamError(experiment, param, f"a grid value must be a list, a scalar or one of "
                         f"{{{', '.join(RANGE_HELPERS)}}}; got mapping {dict(value)!r}")
    if isinstance(value, str):
        match = _HELPER_RE.match(value)
        if match:
            name, body = match.groups()
            try:
                args = [json.loads(a) for a in body.split(",") if a.strip()]
            except json.JSONDecodeError:
                raise ParamError(experiment, param, f"cannot parse {value!r}") from None
            return _helper_args(name, args, param, experiment)
        return [value]
    if isinstance(value, (list, tuple)):
        if list_typed and not any(isinstance(v, (list, tuple)) for v in value):
            return [list(value)]  # a flat list is one value of a list-typed parameter
        return list(value)
    return [value]
