"""What a report knows about a column: its description, unit and how exact integers print.

Every table header that comes from a column's declaration is read through :func:`column_meta`,
which reads the experiment's own declarations: ``document(EXPERIMENT, {"col": (description,
unit[, EXACT or EXACT_SCIENTIFIC])})`` and ``Param.doc``, through
:func:`pipeline.experiments.base.declared_doc`, the same reader that writes the Parquet field
metadata and the export's Table Schema. So a header, a part file's metadata and a data package
always agree.

Headers: ``description (unit)``. The unit is left out where it says nothing to a reader: ``1``
(a dimensionless number) and none (labels, flags). A description longer than
:data:`MAX_HEADER_CHARS` stays out of the header: the header is the column name (with its
unit) and the description goes in a note under the table.

Columns a report computes (a count, a ratio, a difference) are declared by the family's report
module with :func:`describe_computed`, per experiment. Such a name may not be a parameter or an
output of the experiment: a computed ``rows`` (a count of table rows) was headed by the grid
parameter ``rows``'s documentation ("grid rows (row-major numbering)"); it is refused instead.
"""

from __future__ import annotations

from dataclasses import dataclass

# how an exact integer (stored as a decimal string) prints in a paper table
EXACT_FORMATS = ("whole", "scientific")
MAX_HEADER_CHARS = 40  # a longer description goes in a note; the header keeps the name
SILENT_UNITS = (None, "", "1")  # units a header does not show

# experiment -> computed column -> (description, unit): see describe_computed
_COMPUTED: dict[str, dict[str, tuple]] = {}


class ColumnClash(ValueError):
    """A computed report column named like a parameter or an output of its experiment."""


def describe_computed(experiment_name: str, docs: dict) -> None:
    """Declare the description and unit of columns a report of ``experiment_name`` computes:
    ``{"col": (description, unit)}``, ``unit`` as in ``document()`` (``"nat"``, ``"1"``, None).
    Raises :class:`ColumnClash` for a name the experiment declares (a parameter or an output
    column): its header would be the experiment's declaration, so the report must name its
    column otherwise."""
    from pipeline.experiments.base import get_experiment

    try:
        exp = get_experiment(experiment_name)
    except KeyError:
        exp = None
    for name, entry in docs.items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and entry[0]):
            raise ValueError(f"computed column {name!r} of {experiment_name}: give "
                             f"(description, unit), got {entry!r}")
        if exp is not None and (name in exp.param_map or name in exp.columns):
            kind = "parameter" if name in exp.param_map else "output column"
            raise ColumnClash(f"computed column {name!r} of a {experiment_name} report is "
                              f"also a {kind} of {experiment_name}: its header would be the "
                              f"{kind}'s; name the computed column otherwise")
    _COMPUTED.setdefault(experiment_name, {}).update(docs)


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
    def header_text(self) -> str:
        """The header without its unit: the description when short enough, else the name."""
        return self.description if self.header_is_description else self.name

    @property
    def header(self) -> str:
        """Header text, then the unit in parentheses (when it says something)."""
        return f"{self.header_text} ({self.unit})" if self.unit else self.header_text

    @property
    def note(self) -> str | None:
        """``name: description (unit)`` for a description too long for the header."""
        if not self.description or self.header_is_description:
            return None
        return f"{self.name}: {self.description}" + (f" ({self.unit})" if self.unit else "")


def column_meta(experiment_name: str | None, column: str) -> ColumnMeta:
    """Description, shown unit and exact-integer print form of ``column`` of an experiment,
    from its declarations (:func:`pipeline.experiments.base.declared_doc`). A column a report
    derives is described by its :func:`describe_computed` declaration; an undeclared one gets
    its name, no unit, and prints whole."""
    if not experiment_name:
        return ColumnMeta(column)
    from pipeline.experiments.base import declared_doc, get_experiment

    try:
        exp = get_experiment(experiment_name)
    except KeyError:
        exp = None
    if exp is None or (column not in exp.param_map and column not in exp.columns):
        entry = _COMPUTED.get(experiment_name, {}).get(column)
        if entry is None:
            return ColumnMeta(column)
        return ColumnMeta(column, entry[0], "" if entry[1] in SILENT_UNITS else entry[1])
    doc = declared_doc(exp, column)
    unit = "" if doc.unit in SILENT_UNITS else doc.unit
    return ColumnMeta(column, doc.description, unit, doc.exact_format or "whole")
