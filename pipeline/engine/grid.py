"""Grid expansion: YAML ``grid:``/``params:`` into a lazy, indexable set of typed points.

Grammar of a ``grid:`` value (per parameter):

- a list ``[a, b, c]``: an axis of the cartesian product;
- a scalar: a single value (same as putting it in ``params:``);
- a range helper, as a mapping or a string:
  ``{linspace: [start, stop, num]}`` / ``"linspace(start, stop, num)"`` (numpy.linspace),
  ``{logspace: [a, b, num]}`` / ``"logspace(a, b, num)"`` (10**linspace(a, b, num)),
  ``{range: [start, stop, step]}`` / ``"range(start, stop[, step])"`` (Python range, stop excluded);
- for list-typed parameters (``float_list``/``int_list``) a list of lists is an axis, a flat list
  one value.

The special key ``zip`` holds a list of groups; each group maps parameters to equal-length lists
that vary together, forming one axis. ``params:`` gives fixed values; a grid value wins over the
same key in ``params:``. Points are numbered 0..N-1 with the last axis varying fastest, so a
point is decoded from its index without materialising the grid (a 10^7-point grid costs nothing
until it is iterated).
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
from itertools import product
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pipeline.engine.axis_values import expand_value, float_axis_limit, too_many_floats
from pipeline.engine.task_ids import task_id_of
from pipeline.experiments.base import REQUIRED, Experiment, ParamError

def _fragment(value: Any) -> str:
    """Canonical JSON of one typed value (the unit the task id hashes)."""
    if isinstance(value, float):
        if value == 0.0:
            value = 0.0  # fold -0.0
        if math.isnan(value) or math.isinf(value):
            return json.dumps(repr(value))
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_fragment(v) for v in value) + "]"
    return json.dumps(value)


def _fragments_of(values: list) -> list[str]:
    """``[_fragment(v) for v in values]``, with the common scalar types dispatched inline."""
    out = []
    for v in values:
        kind = type(v)
        if kind is float and v != 0.0 and v - v == 0.0:  # finite, non-zero: its repr
            out.append(repr(v))
        elif kind is int:
            out.append(str(v))
        else:
            out.append(_fragment(v))
    return out


LAZY_AXIS = 100_000  # longer axes keep their values lazy and hash fragments on demand


class Axis:
    """One dimension of the product: one parameter, or a zip group varying together."""

    def __init__(self, names: tuple[str, ...], values: Sequence, single: bool):
        self.names = names
        self.values = values  # single: typed values (list, range or float array); zip: tuples
        self.single = single
        self._fragments = self._typed = None
        if len(values) <= LAZY_AXIS:
            self._typed = [self.at(d) for d in range(len(values))]
            self._fragments = [tuple(_fragment(v) for v in t) for t in self._typed]

    def __len__(self) -> int:
        return len(self.values)

    def at(self, d: int) -> tuple:
        """The typed values at position ``d``, one per name."""
        if self.single:
            return (_python_scalar(self.values[d]),)
        return self.values[d]

    def fragment(self, d: int, pos: int) -> str:
        if self._fragments is not None:
            return self._fragments[d][pos]
        return _fragment(self.at(d)[pos])

    def value_columns(self, digits: np.ndarray) -> list[Sequence]:
        """The typed values of :meth:`columns` alone; a range or float axis as a numpy array."""
        if self.single and self._typed is None:
            values = self.values
            if isinstance(values, range):
                return [values.start + digits * values.step]
            if isinstance(values, np.ndarray) and values.dtype.kind == "f":
                return [values[digits]]
        return self.columns(digits)[0]

    def columns(self, digits: np.ndarray) -> tuple[list[list], list[list[str]]]:
        """For positions ``digits`` of this axis: per name, the typed values and their hash
        fragments (what ``at`` and ``fragment`` give one by one, a column at a time)."""
        width = len(self.names)
        if self._typed is not None:
            rows = [self._typed[d] for d in digits.tolist()]
            frags = [self._fragments[d] for d in digits.tolist()]
            if width == 1:
                return [[r[0] for r in rows]], [[f[0] for f in frags]]
            return [list(c) for c in zip(*rows)], [list(c) for c in zip(*frags)]
        if self.single:
            values = self.values
            if isinstance(values, range):
                column = [values[d] for d in digits.tolist()]
                return [column], [[str(v) for v in column]]  # json.dumps(int) is str(int)
            if isinstance(values, np.ndarray) and values.dtype.kind == "f":
                column = values[digits].tolist()  # +0.0 was folded in when the axis was built
                return [column], [_fragments_of(column)]
            column = [_python_scalar(values[d]) for d in digits.tolist()]
            return [column], [_fragments_of(column)]
        rows = [self.values[d] for d in digits.tolist()]
        cols = [list(c) for c in zip(*rows)] if rows else [[] for _ in range(width)]
        return cols, [_fragments_of(c) for c in cols]


def _python_scalar(value: Any) -> Any:
    if isinstance(value, np.floating):
        return float(value) + 0.0  # + 0.0 folds -0.0
    if isinstance(value, np.integer):
        return int(value)
    return value


def _coerce_axis(p, raw, experiment: str) -> tuple[Sequence, int]:
    """Typed values of one axis and how many duplicates were dropped. Ranges and float arrays
    under an interval domain are checked at their ends and stay lazy / compact."""
    from pipeline.experiments.base import Interval

    convex = p.domain is None or isinstance(p.domain, Interval)
    if isinstance(raw, range) and p.type is int and convex and len(raw):
        p.coerce(raw[0], experiment), p.coerce(raw[-1], experiment)
        return raw, 0
    if isinstance(raw, range) and p.type is float and convex and len(raw):
        # as a float array, like a linspace: coerced one by one, a 10^8-point range of a
        # float parameter took minutes and GiBs (a Python float and id fragment per value)
        if len(raw) > float_axis_limit():
            raise ParamError(experiment, p.name, f"a range of {len(raw):,} "
                             + too_many_floats(len(raw)))
        raw = np.arange(raw.start, raw.stop, raw.step, dtype=np.float64)
    if isinstance(raw, np.ndarray) and p.type is float and convex and raw.size:
        for v in (raw.min(), raw.max()):
            p.coerce(float(v), experiment)
        if not np.all(np.isfinite(raw)) and p.domain is not None:
            p.coerce(float(raw[~np.isfinite(raw)][0]), experiment)
        raw = raw + 0.0
        # linspace(1, 1, 5), or a logspace whose values round together, repeats values: each
        # repeat would be the same task id run and stored again. Strictly monotone: none.
        steps = np.diff(raw)
        if not (np.all(steps > 0) or np.all(steps < 0)):
            _, first = np.unique(raw, return_index=True)  # NaNs count as one value, as ids do
            first.sort()
            return raw[first], raw.size - first.size
        return raw, 0
    values = [p.coerce(_python_scalar(v), experiment) for v in raw]
    return _unique(values, lambda v: _fragment(v))


def _unique(values: list, key) -> tuple[list, int]:
    seen, out = set(), []
    for v in values:
        k = key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out, len(values) - len(out)



def zip_rewrite(groups, key: str, value_slot: bool) -> str:
    """How to write ``grid.zip`` again so that ``key`` is set there: every group (Hydra
    replaces the list whole, so a group left out would silently stop being swept), with
    ``VALUE,...`` in ``key``'s list when ``value_slot``, ``...`` elsewhere."""
    shape = ",".join("{" + ",".join(
        f"{k}:[{'VALUE,...' if k == key and value_slot else '...'}]" for k in group) + "}"
        for group in groups)
    return f"'grid.zip=[{shape}]'" + (" (every group: it replaces grid.zip whole)"
                                       if len(groups) > 1 else "")


class Grid:
    """A validated experiment grid: typed axes, fixed values and task identities."""

    def __init__(self, experiment: Experiment, grid: Mapping[str, Any] | None,
                 params: Mapping[str, Any] | None):
        self._spec = (experiment.name, _plain(grid or {}), _plain(params or {}))
        self.experiment = experiment
        self.name = experiment.name
        self.version = int(experiment.version)
        declared = experiment.param_map
        grid = dict(self._spec[1])
        params = dict(self._spec[2])
        zip_groups = grid.pop("zip", None) or []
        if isinstance(zip_groups, Mapping):
            zip_groups = [zip_groups]
        if not isinstance(zip_groups, list):  # grid.zip=5 escaped as a TypeError traceback
            raise ParamError(self.name, "zip", "a list of groups, each mapping parameters to "
                             f"equal-length lists, e.g. [{{L1: [4, 8], L2: [4, 8]}}]; got {zip_groups!r}")

        def check_known(key: str) -> None:
            if key not in declared:
                close = difflib.get_close_matches(key, list(declared), n=1)
                raise ParamError(self.name, key, "unknown parameter; "
                                 + (f"did you mean '{close[0]}'? " if close else "")
                                 + "declared parameters are: " + ", ".join(declared))

        axes: list[Axis] = []
        seen: set[str] = set()

        def claim(key: str, raw: Any, twice: str):
            """A grid key: declared, used once; returns its Param and raw values."""
            check_known(key)
            if key in seen:
                raise ParamError(self.name, key, twice)
            seen.add(key)
            p = declared[key]
            return p, expand_value(raw, key, self.name, p.type in ("int_list", "float_list"))
        self.duplicates_dropped: dict[str, int] = {}
        zipped_with: dict[str, tuple[str, ...]] = {}  # key -> its zip group
        for group in zip_groups:
            if not isinstance(group, Mapping) or not group:
                raise ParamError(self.name, "zip", "each zip group maps parameters to lists")
            zipped_with.update({key: tuple(group) for key in group})
            columns = []
            for key, raw in group.items():
                p, vals = claim(key, raw, "appears twice in the grid")
                columns.append([p.coerce(_python_scalar(v), self.name) for v in vals])
            lengths = {len(c) for c in columns}
            if len(lengths) != 1:
                counts = ", ".join(f"{key} has {len(c)}" for key, c in zip(group, columns))
                raise ParamError(self.name, ",".join(group), f"zip group lists differ in length "
                                 f"({counts} value(s)); they must be equal")
            if lengths == {0}:  # as for an axis: a grid of no points is a mistake, not a sweep
                raise ParamError(self.name, ",".join(group), "empty lists of values in a zip group")
            rows, dropped = _unique(list(zip(*columns)),
                                    lambda t: tuple(_fragment(v) for v in t))
            if dropped:
                self.duplicates_dropped[" & ".join(group)] = dropped
            axes.append(Axis(tuple(group), rows, single=False))
        for key, raw in grid.items():
            group = zipped_with.get(key, (key,))
            # (the axis may come from the experiment's YAML, which the user did not type: the
            # advice "write it again without grid.X" then named what was typed)
            p, vals = claim(key, raw, (
                f"appears both in a zip group ({', '.join(group)}) and in the grid. To sweep "
                f"the zip as it is, drop the axis: leave grid.{key}=... out of the command, or "
                f"add '~grid.{key}' where the experiment's config sets it; to give {key} other "
                f"values in the zip, write grid.zip again with them, "
                + zip_rewrite(zip_groups, key, value_slot=True)
                + f"; or drop the zip with '~grid.zip' (then grid.{key} is an axis of its own"
                + (", and the other groups' parameters too" if len(zip_groups) > 1 else "")
                + ")"))
            if len(vals) == 0:
                raise ParamError(self.name, key, "empty list of values")
            typed, dropped = _coerce_axis(p, vals, self.name)
            if dropped:
                self.duplicates_dropped[key] = dropped
            axes.append(Axis((key,), typed, single=True))

        fixed: dict[str, Any] = {}
        for key, raw in params.items():
            check_known(key)
            if key not in seen:
                fixed[key] = declared[key].coerce(raw, self.name)
        for p in experiment.params:
            if p.name in seen or p.name in fixed:
                continue
            if p.default is REQUIRED:
                raise ParamError(self.name, p.name, "required parameter: give it in grid: or params:")
            fixed[p.name] = p.default if p.default is None else p.coerce(p.default, self.name)

        self.axes = axes
        self.fixed = fixed
        self.sizes = [len(a) for a in axes]
        self.total = math.prod(self.sizes) if axes else 1
        self.param_names = [p.name for p in experiment.params]
        self._build_hash_plan()
        self._check_combinations()

    @classmethod
    def from_spec(cls, name: str, grid: Mapping[str, Any], params: Mapping[str, Any],
                  module: str | None = None) -> "Grid":
        """Rebuild (once per process) from the plain spec; used when a Grid is unpickled.
        ``module``: the experiment's module, imported alone (not every family's)."""
        key = json.dumps([name, grid, params], sort_keys=True, default=repr)
        cached = _GRID_CACHE.get(key)
        if cached is None:
            from pipeline.experiments.base import get_experiment, get_experiment_from

            experiment = get_experiment_from(module, name) if module else get_experiment(name)
            cached = _GRID_CACHE[key] = cls(experiment, grid, params)
        return cached

    def __reduce__(self):
        # Ship only the plain spec: workers rebuild the grid from the registry, so experiment
        # functions and checks never need to be pickled.
        return (Grid.from_spec, (*self._spec, getattr(self.experiment.run, "__module__", None)))

    # ------------------------------------------------------------------ identity
    def _build_hash_plan(self) -> None:
        prefix = json.dumps({"experiment": self.name, "version": self.version})[:-1]
        # For each param (sorted) either a fixed fragment or (axis, position) whose fragments
        # the axis precomputes: hashing a point is then a join and one sha256.
        where: dict[str, tuple[int, int]] = {}
        for ai, axis in enumerate(self.axes):
            for pos, name in enumerate(axis.names):
                where[name] = (ai, pos)
        plan = []
        for name in sorted(self.param_names):
            key = json.dumps(name) + ":"
            if name in where:
                plan.append((key, where[name]))
            else:
                plan.append((key + _fragment(self.fixed[name]), None))
        self.list_params = [p.name for p in self.experiment.params
                             if p.type in ("int_list", "float_list")]
        self._hash_prefix = prefix + ',"params":{'
        self._hash_plan = plan

    def _digits(self, index: int) -> list[int]:
        if not 0 <= index < self.total:
            raise IndexError(index)
        digits = [0] * len(self.sizes)
        for ai in range(len(self.sizes) - 1, -1, -1):
            index, digits[ai] = divmod(index, self.sizes[ai])
        return digits

    def canonical(self, index: int) -> str:
        digits = self._digits(index)
        parts = []
        for key, loc in self._hash_plan:
            if loc is None:
                parts.append(key)
            else:
                ai, pos = loc
                parts.append(key + self.axes[ai].fragment(digits[ai], pos))
        return self._hash_prefix + ",".join(parts) + "}}"

    def task_id(self, index: int) -> str:
        return task_id_of(self.canonical(index))

    def point(self, index: int) -> dict:
        """The fully-resolved, typed parameter point with this index."""
        digits = self._digits(index)
        point = dict(self.fixed)
        for axis, d in zip(self.axes, digits):
            for name, value in zip(axis.names, axis.at(d)):
                point[name] = value
        return {name: _copy(point[name]) for name in self.param_names}

    def batch_columns(self, indices: Sequence[int]) -> tuple[dict[str, list], list[str]]:
        """The parameter values of a batch of points as columns (name -> one value per index)
        and their task ids, built a column at a time: each axis decodes its digits and hash
        fragments for the whole batch, so the per-point work is one join and one sha256.
        ``columns[name][k]`` is ``point(indices[k])[name]``; list values are shared, not copied."""
        columns, strings = self.batch_canonical(indices)
        return columns, [task_id_of(c) for c in strings(0, len(indices))]

    def _axis_digits(self, indices: Sequence[int]):
        """``(n, [(axis, digits), ...])``: each axis's positions for the grid indices (the
        last axis varies fastest); IndexError names the first index out of the grid."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = int(idx.size)
        if n and (idx.min() < 0 or idx.max() >= self.total):
            raise IndexError(int(idx[(idx < 0) | (idx >= self.total)][0]))
        out, rest = [], idx
        for axis, size in zip(reversed(self.axes), reversed(self.sizes)):
            rest, digits = np.divmod(rest, size)
            out.append((axis, digits))
        return n, out

    def batch_values(self, indices: Sequence[int]) -> dict[str, Sequence]:
        """The parameter columns of a batch (what :meth:`batch_canonical` gives first), with
        the axes of numbers as numpy arrays and without the hash fragments: what the driver
        needs to build a batch's table, at a fraction of the cost a row."""
        n, axis_digits = self._axis_digits(indices)
        values: dict[str, Sequence] = {}
        for axis, digits in axis_digits:
            values.update(zip(axis.names, axis.value_columns(digits)))
        return {name: values[name] if name in values else [self.fixed[name]] * n
                for name in self.param_names}

    def batch_canonical(self, indices: Sequence[int]
                        ) -> tuple[dict[str, list], Callable[[int, int], list[str]]]:
        """Like :meth:`batch_columns`, with the canonical strings the task ids hash instead of
        the ids: ``strings(a, b)`` builds those of the batch's points ``a..b-1``. A worker
        hashes its points a strip at a time between their runs, instead of in one block that
        holds the GIL its batch's sibling threads wait on (issue 14)."""
        n, axis_digits = self._axis_digits(indices)
        values: dict[str, list] = {}
        fragments: dict[str, list[str]] = {}
        for axis, digits in axis_digits:
            cols, frags = axis.columns(digits)
            for name, col, frag in zip(axis.names, cols, frags):
                values[name], fragments[name] = col, frag
        columns = {name: values[name] if name in values else [self.fixed[name]] * n
                   for name in self.param_names}
        # The string is constant text with the varying fragments between: runs of fixed
        # parameters are joined once here, so a point costs a concatenation, not a join of
        # every parameter.
        texts, varying = [], []
        text = self._hash_prefix
        for k, (key, loc) in enumerate(self._hash_plan):
            text += ("," if k else "") + key
            if loc is not None:
                texts.append(text)
                varying.append(fragments[self.axes[loc[0]].names[loc[1]]])
                text = ""
        tail = text + "}}"
        if not varying:
            return columns, lambda a, b: [tail] * (min(b, n) - a)
        if len(varying) == 1:
            head, frags = texts[0], varying[0]
            return columns, lambda a, b: [head + f + tail for f in frags[a:b]]
        repeat = itertools.repeat

        def strings(a: int, b: int) -> list[str]:
            rows = zip(*(x for t, f in zip(texts, varying) for x in (repeat(t), f[a:b])))
            return ["".join(row) + tail for row in rows]

        return columns, strings

    def identities(self, indices: Sequence[int]) -> tuple[list[dict], list[str]]:
        """``([point(i) ...], [task_id(i) ...])`` for a batch (see :meth:`batch_columns`)."""
        columns, ids = self.batch_columns(indices)
        names = self.param_names
        points = [dict(zip(names, row)) for row in zip(*(columns[n] for n in names))] \
            if names else [{} for _ in ids]
        for name in self.list_params:  # list values are copies, never shared between points
            for point in points:
                point[name] = list(point[name])
        return points, ids

    def iter_indices(self) -> Iterator[int]:
        return iter(range(self.total))

    def sample_indices(self, count: int) -> list[int]:
        if self.total <= count:
            return list(range(self.total))
        # exact integers: a float linspace over a grid beyond int64 (a dry run has no size
        # limit) failed to cast, and beyond 2^53 it could round past the last index
        last, steps = self.total - 1, max(1, count - 1)
        return sorted({k * last // steps for k in range(count)})

    # ------------------------------------------------------------------ validation
    def _check_combinations(self) -> None:
        """Run each multi-parameter limit once per distinct combination it depends on."""
        for check in self.experiment.checks:
            wanted = set(check.params)
            projections = []
            for axis in self.axes:
                names = [n for n in axis.names if n in wanted]
                if names:
                    idx = [axis.names.index(n) for n in names]
                    # distinct by id fragments: a list value (float_list) is unhashable, and a
                    # set of the raw tuples failed with a TypeError traceback
                    distinct = {}
                    for d in range(len(axis)):
                        combo = tuple(axis.at(d)[i] for i in idx)
                        distinct.setdefault(tuple(_fragment(v) for v in combo), combo)
                    combos = sorted(distinct.values(), key=repr)
                    projections.append((names, combos))
            for choice in product(*[combos for _, combos in projections]):
                values = {n: self.fixed[n] for n in wanted if n in self.fixed}
                for (names, _), combo in zip(projections, choice):
                    values.update(zip(names, combo))
                message = check.fn(values)
                if message:
                    shown = ", ".join(f"{k}={values[k]!r}" for k in check.params)
                    raise ParamError(self.name, ",".join(check.params), f"{message} (at {shown})")


_GRID_CACHE: dict[str, "Grid"] = {}


def _plain(value: Any) -> Any:
    """Plain dicts/lists/scalars (OmegaConf containers and tuples converted)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def describe_axes(grid: Grid) -> list[str]:
    lines = []
    for axis in grid.axes:
        head = " & ".join(axis.names) if len(axis.names) > 1 else axis.names[0]
        n = len(axis)
        picks = range(n) if n <= 6 else [0, 1, 2, None, n - 2, n - 1]
        shown = ["..." if d is None else (axis.at(d)[0] if axis.single else axis.at(d))
                 for d in picks]
        lines.append(f"  {head}: {n} value(s) {shown}")
    return lines


def fixed_summary(grid: Grid) -> Sequence[str]:
    return [f"  {k} = {v!r}" for k, v in grid.fixed.items()]
