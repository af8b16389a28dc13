"""What an experiment's ``run`` returned, as rows: a dict of output columns (one row) or a
list of such dicts. Anything else is a clear error naming what was returned, stored with the
point (a forgotten ``return`` was stored as an ok row of nulls)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def as_rows(out: Any, columns: Sequence[str] = (), who: str = "run()"
             ) -> Sequence[Mapping[str, Any]]:
    """The rows of one point from what the experiment's run returned: a dict of output columns
    (one row), or a list (any iterable) of such dicts. Anything else raises
    :class:`RunReturnError` naming what was returned (``columns``: the declared output
    columns, for the example in the message; ``who``: the function, for its name)."""
    if type(out) is dict:
        return [out]  # the common cases first, without typing's slow isinstance(Mapping)
    if type(out) is list and out and all(type(row) is dict for row in out):
        return out
    if isinstance(out, Mapping):
        return [out]
    must = "it must return a dict of output columns or a list of such dicts, one per row"
    if out is None:
        raise RunReturnError(f"{who} returned None: {must} (a missing return?)")
    kind = type(out).__name__
    if kind in ("DataFrame", "Series") and hasattr(out, "to_dict"):  # pandas, without importing it
        fix = "df.to_dict('records')" if kind == "DataFrame" else "series.to_dict()"
        raise RunReturnError(f"{who} returned {_a(kind)}: {must}; return {fix}")
    if isinstance(out, (str, bytes, bytearray)) or not _iterable(out):
        raise RunReturnError(f"{who} returned {_a(kind)} ({_short(out)}): {must}, e.g. "
                             f"{_example(columns, [out])}")
    rows = list(out)
    if not rows:
        raise RunReturnError(
            f"{who} returned an empty {kind}: every point must give at least one row (a dict "
            "of output columns, None where it has no value); a point without rows is stored "
            "nowhere, neither ok nor failed, so every resume would run it again")
    if isinstance(out, tuple) and not any(isinstance(row, Mapping) for row in rows):
        raise RunReturnError(f"{who} returned a tuple ({_short(out)}): {must}; name each "
                             f"value, e.g. {_example(columns, rows)}")
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise RunReturnError(
                f"{who} returned {_a(kind)} whose item {i} is "
                f"{'None' if row is None else f'{_a(type(row).__name__)} ({_short(row)})'}, "
                f"not a dict: {must}")
    return rows


class RunReturnError(TypeError):
    """An experiment's run returned something that is not rows; its text stands without the
    engine's location (the mistake is in the experiment, not in this module)."""


def _a(noun: str) -> str:
    if noun == "ndarray":
        return "a numpy array"
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _short(value: Any) -> str:
    import reprlib

    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # np.float64(2.5): 2.5
        value = value.item()
    return reprlib.repr(value)


def _iterable(value: Any) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


def _example(columns: Sequence[str], values: list) -> str:
    """``{'value': 1.0}``: the declared columns (as many as there are values) with them."""
    names = list(columns)[:len(values)] or ["value"]
    return "{" + ", ".join(f"{name!r}: {_short(v)}" for name, v in zip(names, values)) + "}"
