"""What a report knows about a column: its description, unit and how exact integers print.

Every table header and figure label that comes from a column's declaration is read through
:func:`column_meta`, so the declarations of the experiments (``Param.doc``, and the column
descriptions/units an experiment declares) plug in at one place.
"""

from __future__ import annotations

from dataclasses import dataclass

# how an exact integer (stored as a decimal string) prints in a paper table
EXACT_FORMATS = ("whole", "scientific")
MAX_HEADER_CHARS = 40  # a longer description stays in the docs; the header keeps the name


@dataclass(frozen=True)
class ColumnMeta:
    name: str
    description: str = ""
    unit: str = ""
    exact_format: str = "whole"

    @property
    def header_is_description(self) -> bool:
        return 0 < len(self.description) <= MAX_HEADER_CHARS

    @property
    def header(self) -> str:
        """Header text: the description when it is short enough for a table head, else the
        column name; then the unit in parentheses."""
        text = self.description if self.header_is_description else self.name
        return f"{text} ({self.unit})" if self.unit else text


def _declared(experiment, attribute: str, column: str):
    """``experiment.<attribute>[column]`` for a mapping attribute, or a column object's field
    (``experiment.columns[column].<field>``), whichever the declarations provide."""
    value = getattr(experiment, attribute, None)
    if isinstance(value, dict) and column in value:
        return value[column]
    spec = getattr(experiment, "column_specs", None) or {}
    field = attribute.removeprefix("column_").removesuffix("s")
    if column in spec:
        return getattr(spec[column], field, None)
    return None


def column_meta(experiment_name: str | None, column: str) -> ColumnMeta:
    """Description, unit and exact-integer format of ``column`` of an experiment.

    Sources, first found wins: the experiment's column declarations (``column_descriptions``,
    ``column_units``, ``column_exact_formats`` mappings, or ``column_specs[name]`` objects with
    ``description``/``unit``/``exact_format``), then a parameter's ``doc``. A column a report
    derives (not declared) gets its name and no unit."""
    if not experiment_name:
        return ColumnMeta(column)
    from pipeline.experiments.base import get_experiment

    try:
        exp = get_experiment(experiment_name)
    except KeyError:
        return ColumnMeta(column)
    description = _declared(exp, "column_descriptions", column)
    if description is None and column in exp.param_map:
        description = exp.param_map[column].doc
    unit = _declared(exp, "column_units", column) or ""
    if not unit and column in exp.param_map:
        unit = getattr(exp.param_map[column], "unit", "") or ""
    exact = _declared(exp, "column_exact_formats", column) or "whole"
    if exact not in EXACT_FORMATS:
        raise ValueError(f"{experiment_name}.{column}: exact_format must be one of "
                         f"{EXACT_FORMATS}, got {exact!r}")
    return ColumnMeta(column, description or "", unit, exact)
