"""The experiment contract: parameters, domains, output columns and one function.

An experiment is declared once, as an :class:`Experiment`, and registered with
:func:`register`. The engine knows nothing of the science: it validates a grid
against ``params`` and ``checks``, hashes each parameter point into a task id,
calls ``run(params, seed)`` on a worker, and types the rows with ``columns``.

Example::

    register(Experiment(
        name="composition", version=1,
        doc="Optimal k-fold composition of (eps, delta)-DP (Kairouz et al. 2015).",
        params=[
            Param("eps", float, 1.0, Interval(0, None, lo_closed=False), "per-step epsilon"),
            Param("k", int, 10, Interval(1, 10**7), "number of compositions"),
        ],
        columns={"eps_optimal": pa.float64()},
        run=run_composition,
    ))
"""

from __future__ import annotations

import difflib
import math
import numbers
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa

from pipeline.experiments._columns import RESERVED_COLUMNS  # names the engine adds to rows

REQUIRED = object()  # sentinel: the parameter has no default and must be given


class ParamError(ValueError):
    """A parameter value outside its declared domain or limits (exit code 2)."""

    def __init__(self, experiment: str, param: str, message: str):
        self.experiment = experiment
        self.param = param
        self.message = message
        if "," in param:  # a limit on a combination of parameters
            names = ", ".join(param.split(","))
            super().__init__(f"experiment '{experiment}', parameters ({names}): {message}")
        else:
            super().__init__(f"experiment '{experiment}', parameter '{param}': {message}")


# --------------------------------------------------------------------------- domains
class Domain:
    """A set of allowed values; ``describe()`` is shown to the user on error."""

    def contains(self, value: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Interval(Domain):
    """Real or integer interval; ``None`` means unbounded on that side, over finite values
    (write ``hi=math.inf`` to admit infinity itself)."""

    lo: float | None = None
    hi: float | None = None
    lo_closed: bool = True
    hi_closed: bool = True

    def contains(self, value: Any) -> bool:
        if isinstance(value, numbers.Integral):
            # compared as an int (Python compares ints with floats exactly): as a float, an
            # int above 2^53 rounded onto a bound, so Interval(0, 2**62) admitted 2**62 + 1
            v = int(value)
        else:
            try:
                v = float(value)
            except (TypeError, ValueError, OverflowError):
                return False
            if math.isnan(v):
                return False
            if math.isinf(v) and (self.lo if v < 0 else self.hi) is None:
                return False
        if self.lo is not None and (v < self.lo or (v == self.lo and not self.lo_closed)):
            return False
        if self.hi is not None and (v > self.hi or (v == self.hi and not self.hi_closed)):
            return False
        return True

    def describe(self) -> str:
        lo = "-inf" if self.lo is None else repr(self.lo)
        hi = "inf" if self.hi is None else repr(self.hi)
        left = "[" if (self.lo is not None and self.lo_closed) else "("
        right = "]" if (self.hi is not None and self.hi_closed) else ")"
        return f"a value in {left}{lo}, {hi}{right}"


@dataclass(frozen=True)
class Choice(Domain):
    values: tuple

    def __init__(self, *values: Any):
        object.__setattr__(self, "values", tuple(values))

    def contains(self, value: Any) -> bool:
        return value in self.values

    def describe(self) -> str:
        return "one of {" + ", ".join(str(v) for v in self.values) + "}"


@dataclass(frozen=True)
class Check(Domain):
    """Any predicate, with the text that tells the user what is allowed."""

    predicate: Callable[[Any], bool]
    description: str

    def contains(self, value: Any) -> bool:
        try:
            return bool(self.predicate(value))
        except Exception:
            return False

    def describe(self) -> str:
        return self.description


# --------------------------------------------------------------------------- params
_ARROW_TYPES = {
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
    bool: pa.bool_(),
    "int_list": pa.list_(pa.int64()),
    "float_list": pa.list_(pa.float64()),
}


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    ``type`` is ``int``, ``float``, ``str``, ``bool``, ``"int_list"`` or ``"float_list"``.
    A list parameter's domain applies to each element. ``default=REQUIRED`` makes it mandatory.
    """

    name: str
    type: Any
    default: Any = REQUIRED
    domain: Domain | None = None
    doc: str = ""

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW_TYPES[self.type]

    def coerce(self, value: Any, experiment: str = "?") -> Any:
        """Return ``value`` as this parameter's Python type, or raise :class:`ParamError`."""
        if value is None and self.default is None:
            return None  # an optional parameter left unset (YAML/CLI ``null``)
        try:
            if self.type in ("int_list", "float_list"):
                if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                    raise TypeError("expected a list")
                elem = int if self.type == "int_list" else float
                out = [_coerce_scalar(elem, v) for v in value]
                if self.domain is not None:
                    bad = [v for v in out if not self.domain.contains(v)]
                    if bad:
                        raise ParamError(experiment, self.name,
                                         f"element {bad[0]!r} not allowed; each element must be "
                                         f"{self.domain.describe()}")
                return out
            out = _coerce_scalar(self.type, value)
        except ParamError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            shown = repr(value) if len(repr(value)) < 60 else repr(value)[:57] + "..."
            raise ParamError(experiment, self.name,
                             f"cannot read {shown} as {_type_name(self.type)} ({exc})") from None
        if self.domain is not None and not self.domain.contains(out):
            raise ParamError(experiment, self.name,
                             f"value {value!r} not allowed; allowed: {self.domain.describe()}")
        return out


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else t.__name__


def _coerce_scalar(t: type, value: Any) -> Any:
    if t is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if value in (0, 1):
            return bool(value)
        raise ValueError("expected true or false")
    if t is int:
        if isinstance(value, bool):
            raise ValueError("expected an integer, got a boolean")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("expected an integer")
        out = int(value)
        if not -(2**63) <= out < 2**63:  # stored as int64
            raise ValueError("outside the int64 range")
        return out
    if t is float:
        if isinstance(value, bool):
            raise ValueError("expected a number, got a boolean")
        out = float(value)
        return 0.0 if out == 0.0 else out  # fold -0.0: one point, one id, one value
    if t is str:
        if isinstance(value, (list, dict)):
            raise ValueError("expected a string")
        return str(value)
    raise TypeError(f"unsupported parameter type {t!r}")


@dataclass(frozen=True)
class PointCheck:
    """A limit that involves several parameters (e.g. ``rows * cols <= 24``).

    ``fn`` receives a dict with exactly the parameters named in ``params`` and returns
    ``None`` when the combination is allowed, or a message naming the parameters and the
    allowed values. The engine evaluates it once per *distinct* combination of those
    parameters in the grid, before any task runs. An exception raised by ``fn`` itself is
    reported as a bug of the check (exit 2), with the values it failed at.
    """

    params: tuple[str, ...]
    fn: Callable[[dict], str | None]


class _GuardedCheck:
    """A :class:`PointCheck`'s function as its experiment calls it: an exception raised by the
    function itself (a bug in the check, not in the input) becomes a :class:`ParamError` naming
    the experiment, the check's parameters, the point's values and the exception; it was a
    traceback out of the grid's validation."""

    def __init__(self, experiment: str, check: PointCheck):
        self.experiment = experiment
        self.params = tuple(check.params)
        self.fn = check.fn

    def __call__(self, values: dict) -> str | None:
        try:
            return self.fn(values)
        except ParamError:
            raise
        except Exception as exc:
            shown = ", ".join(f"{k}={values.get(k)!r}" for k in self.params)
            code = getattr(self.fn, "__code__", None)
            where = (f" ({shown_path(code.co_filename)}, line {code.co_firstlineno})"
                     if code is not None else "")
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            raise ParamError(self.experiment, ",".join(self.params),
                             f"the limit check itself failed at {shown}: {error}. This is a bug "
                             f"in the experiment's PointCheck function{where}, not in the "
                             "input: it must return None (allowed) or a message (refused) for "
                             "every combination of values its parameters' domains allow") from None


# --------------------------------------------------------------------------- experiment
Rows = Mapping[str, Any] | Sequence[Mapping[str, Any]]


@dataclass
class Experiment:
    """A sweepable experiment.

    ``run(params, seed)`` maps one fully-resolved parameter point (every declared
    parameter present, typed) to one row (a dict) or several rows (a list of dicts).
    Row keys must be declared in ``columns``; missing columns become null. ``seed`` is a
    63-bit integer derived from the task id; deterministic experiments may ignore it,
    stochastic ones (``stochastic=True``) must draw all randomness from it, and then the
    ``seed`` column is stored. Each parameter's default must lie in its own domain (``None``,
    an optional parameter left unset, excepted): checked here, when the module is imported.
    """

    name: str
    version: int
    params: Sequence[Param]
    columns: Mapping[str, pa.DataType]
    run: Callable[[dict, int], Rows]
    doc: str = ""
    stochastic: bool = False
    checks: Sequence[PointCheck] = field(default_factory=tuple)
    # name -> (description, unit[, "exact"]) for params and columns; see :func:`document`.
    column_docs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate parameter names")
        clash = set(names) & set(self.columns)
        if clash:
            raise ValueError(f"{self.name}: columns shadow parameters: {sorted(clash)}")
        reserved = (set(names) | set(self.columns)) & set(RESERVED_COLUMNS)
        if reserved:
            raise ValueError(f"{self.name}: names reserved by the engine: {sorted(reserved)}")
        for check in self.checks:
            unknown = set(check.params) - set(names)
            if unknown:
                raise ValueError(f"{self.name}: check uses undeclared params {sorted(unknown)}")
        self.checks = tuple(check if isinstance(check.fn, _GuardedCheck)
                            else PointCheck(check.params, _GuardedCheck(self.name, check))
                            for check in self.checks)
        self._check_declarations()
        for p in self.params:  # a default outside its own domain was refused only by a sweep
            if p.default is REQUIRED or p.default is None:  # None: an optional parameter
                continue
            try:
                p.coerce(p.default, self.name)
            except ParamError as exc:
                raise ValueError(
                    f"experiment '{self.name}', parameter '{p.name}': its default "
                    f"{p.default!r} is not a value of its own domain ({exc.message}); fix the "
                    f"default or the domain in its Param(...): as declared, every sweep that "
                    f"leaves {p.name} unset would be refused") from None

    def _check_declarations(self) -> None:
        """Types and domains as the engine reads them, refused at import with the parameter
        or column named: a column typed ``float`` or ``pa.float64`` (no call) crashed the sweep
        once its cluster was up ("DataType expected, got <class 'type'>", exit 3), and a
        parameter typed "integer" was reported as its default being out of its domain."""
        where = f"experiment '{self.name}'"
        for p in self.params:
            try:
                known = p.type in _ARROW_TYPES
            except TypeError:  # unhashable
                known = False
            if not known:
                raise ValueError(
                    f"{where}, parameter '{p.name}': type {p.type!r} is not one the engine "
                    "stores; use int, float, str, bool, 'int_list' or 'float_list'")
            if p.domain is not None and not isinstance(p.domain, Domain):
                raise ValueError(
                    f"{where}, parameter '{p.name}': domain {p.domain!r} is not a Domain; use "
                    "Interval(lo, hi), Choice(a, b, ...) or Check(predicate, 'description')")
            if isinstance(p.domain, Interval) and None not in (p.domain.lo, p.domain.hi) \
                    and p.domain.lo > p.domain.hi:
                raise ValueError(f"{where}, parameter '{p.name}': {p.domain.describe()} is "
                                 "empty (its low end is above its high end)")
        for name, typ in self.columns.items():
            if not isinstance(typ, pa.DataType):
                hint = (f" (call it: pa.{typ.__name__}())" if callable(typ)
                        and getattr(pa, getattr(typ, "__name__", ""), None) is typ else "")
                raise ValueError(
                    f"{where}, column '{name}': type {typ!r} is not a pyarrow DataType{hint}; "
                    "use e.g. pa.float64(), pa.int64(), pa.string(), pa.bool_()")

    @property
    def param_map(self) -> dict[str, Param]:
        return {p.name: p for p in self.params}

    def resolve(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> dict:
        """One fully-resolved, typed parameter point: defaults filled in, domains and checks applied.

        ``exp.run(exp.resolve(eps=0.5, k=10), seed)`` runs one point without the engine.
        """
        given = {**(values or {}), **kwargs}
        unknown = set(given) - set(self.param_map)
        if unknown:
            name = sorted(unknown)[0]
            close = difflib.get_close_matches(name, list(self.param_map), n=1)
            raise ParamError(self.name, name, "unknown parameter; "
                             + (f"did you mean '{close[0]}'? " if close else "") + "declared: "
                             + ", ".join(p.name for p in self.params))
        point = {}
        for p in self.params:
            if p.name in given:
                point[p.name] = p.coerce(given[p.name], self.name)
            elif p.default is REQUIRED:
                raise ParamError(self.name, p.name, "required parameter has no value")
            else:
                point[p.name] = p.default if p.default is None else p.coerce(p.default, self.name)
        for check in self.checks:
            message = check.fn({k: point[k] for k in check.params})
            if message:
                raise ParamError(self.name, ",".join(check.params), message)
        return point


# the registry lives in _registry.py; plug-ins import register from here
from pipeline.experiments._registry import (  # noqa: E402,F401
    _REGISTRY, CONFLICTS, LOADED_SOURCES, ExperimentConflict, conflict_message, find,
    get_experiment, get_experiment_from, note_loaded_sources, register, registered_at, registry,
    shown_path)


def exact_int(value: int) -> str:
    """An exact integer as a decimal string (the storage form for counts beyond int64)."""
    return str(int(value))


def log_of_int(value: int) -> float:
    """Natural log of a positive Python integer of any size, accurate to double precision."""
    value = int(value)
    if value <= 0:
        return -math.inf if value == 0 else math.nan
    bits = value.bit_length()
    if bits < 1000:
        return math.log(value)
    shift = bits - 64  # keep 64 significant bits; relative error ~ 2^-64
    return math.log(value >> shift) + shift * math.log(2.0)


# Third element of a column_docs entry: an exact integer stored as a decimal string. Both
# store the same digits; they differ only in how a paper table (report LaTeX/HTML) prints them.
EXACT = "exact"  # printed whole, every digit (counts a reader compares digit by digit)
EXACT_SCIENTIFIC = "exact_scientific"  # printed rounded, 1.23457e+45 (huge counts)
EXACT_FORMATS = {EXACT: "whole", EXACT_SCIENTIFIC: "scientific"}


def document(experiment: Experiment, docs: Mapping[str, tuple]) -> Experiment:
    """Attach descriptions and units to an experiment's parameters and output columns.

    ``docs`` maps a parameter or column name to ``(description, unit)`` or
    ``(description, unit, EXACT)`` / ``(description, unit, EXACT_SCIENTIFIC)`` for an exact
    integer stored as a decimal string (printed whole, or in scientific form, in the report's
    tables). ``unit`` is a UCUM-style string: ``"1"`` for a
    dimensionless number, ``"nat"``/``"bit"`` for logarithms and information, ``"s"`` for
    seconds, ``None`` for labels, flags and other non-quantities. A parameter without an entry
    is described by its ``Param.doc``, and so is one whose description is ``""`` (an entry
    that only gives the parameter's unit). Declared apart from ``columns=`` so the Arrow types stay
    where they are; the store writes both into each part file's schema as field metadata, and
    the report reads them for table headers (:func:`declared_doc`). Documentation is not part
    of a task id: editing it changes no id and needs no version bump.
    """
    known = {p.name for p in experiment.params} | set(experiment.columns)
    unknown = set(docs) - known
    if unknown:
        raise ValueError(f"{experiment.name}: docs for undeclared names {sorted(unknown)}")
    for name, entry in docs.items():
        if not (isinstance(entry, tuple) and len(entry) in (2, 3)
                and (entry[0] or name in experiment.param_map)
                and (len(entry) == 2 or entry[2] in EXACT_FORMATS)):
            raise ValueError(f"{experiment.name}: docs of {name!r} must be (description, unit"
                             f"[, EXACT or EXACT_SCIENTIFIC]), got {entry!r}")
        if len(entry) == 3 and name in experiment.columns and \
                experiment.columns[name] != pa.string():
            raise ValueError(f"{experiment.name}: {name!r} is declared exact, so it must be "
                             "stored as a decimal string (pa.string())")
    experiment.column_docs.update(docs)
    return experiment


@dataclass(frozen=True)
class ColumnDoc:
    """What an experiment declares about one of its parameters or output columns.

    ``description`` is the declared one, or for a parameter its ``Param.doc`` when the entry
    gives none; ``exact_format`` is ``"whole"`` or ``"scientific"`` for an exact integer
    column (``None`` otherwise)."""

    description: str = ""
    unit: str | None = None
    exact_format: str | None = None
    parameter: bool = False

    @property
    def exact(self) -> bool:
        return self.exact_format is not None


def declared_doc(experiment: Experiment, name: str) -> ColumnDoc:
    """The one reader of ``document()``'s declarations (and ``Param.doc``): the store's Parquet
    field metadata, the export's Table Schema and the report's table headers all come from
    here. An undeclared name gives an empty :class:`ColumnDoc`."""
    entry = experiment.column_docs.get(name) or ("", None)
    param = experiment.param_map.get(name)
    description = entry[0] or (param.doc if param is not None else "")
    exact = EXACT_FORMATS[entry[2]] if len(entry) == 3 else None
    return ColumnDoc(description, entry[1], exact, param is not None)
