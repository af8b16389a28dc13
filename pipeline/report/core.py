"""Report core: a writer for tables and figures, and the registry of per-experiment reports.

A family module registers::

    from pipeline.report.core import report_for

    from pipeline.report.style import curve_style, legend_outside

    @report_for("composition")
    def eps_against_k(df, out):
        out.table("eps_vs_k", table_df, caption="...")
        fig, ax = out.new_figure()            # one column (3.4 in); ncols=2: two columns (7 in)
        ax.plot(x, y, label="optimal", **curve_style(0))
        ax.set_xlabel("$k$"); ax.set_ylabel(r"$\tilde\varepsilon$")
        legend_outside(fig)
        out.figure("eps_vs_k", fig, caption="...")   # PNG, PDF (Type 42), SVG

Figures follow :mod:`pipeline.report.style` (more than six curves: ``out.small_multiples``).

``df`` is the deduplicated result table of that experiment (all rows, including failed ones;
filter on ``status == "ok"``), of one experiment version: a report whose rows span several
calls the function once per version and writes each table once with an ``experiment_version``
column, each figure once per version (``NAME_vN``; report/versions.py ``per_version``).
``out`` is a :class:`ReportWriter`.
"""

from __future__ import annotations

import re

from collections import defaultdict
from typing import Callable

_REPORTS: dict[str, list[Callable]] = defaultdict(list)


def report_for(*experiment_names: str) -> Callable:
    def decorate(fn: Callable) -> Callable:
        for name in experiment_names:
            _REPORTS[name].append(fn)
        return fn

    return decorate


def ok_rows(df):
    """The rows of successful tasks (a copy), the usual starting point of a report.

    Integer columns come back as integers: a failed row's nulls made pandas hold them as
    float64, and a table then printed 1048576 vertices as 1.04858e+06."""
    if "status" not in df.columns:
        return df.copy()
    ok = df[df["status"] == "ok"].copy()
    nullable = [c for c in ok.columns if str(ok[c].dtype).rstrip("0123456789") in ("Int", "UInt")]
    # (Int64: pipeline.load's exact integers beside a failed row's nulls)
    for name in [*_integer_columns(df.attrs.get("experiment")), *nullable]:
        if name not in ok.columns or not ok[name].notna().all():
            continue
        kind = ok[name].dtype.kind  # float64 from pandas.read_parquet, Int64/UInt64 from load
        if kind == "f" or (kind in "iu" and str(ok[name].dtype)[0] in "IU"):
            ok[name] = ok[name].astype("uint64" if kind == "u" else "int64")
    return ok


def _integer_columns(experiment_name) -> list[str]:
    """The columns ``experiment_name`` declares as integers (outputs and parameters)."""
    if not experiment_name:
        return []
    import pyarrow as pa

    from pipeline.experiments.base import get_experiment

    try:
        exp = get_experiment(experiment_name)
    except KeyError:
        return []
    return ([name for name, typ in exp.columns.items() if pa.types.is_integer(typ)]
            + [p.name for p in exp.params if p.type is int])


def reports(experiment_name: str) -> list[Callable]:
    from pipeline.report import discover

    discover()
    return list(_REPORTS.get(experiment_name, []))


class ReportWriter:
    """Writes tables (CSV, Markdown, LaTeX) and figures (PNG, PDF, SVG) into one folder, and
    remembers them for ``index.md`` and ``index.html``.

    ``style`` is ``report_style`` (:mod:`pipeline.report.style`); ``sig_digits`` the significant
    digits of floats in the LaTeX and HTML tables (Markdown: ``float_format``; CSV: every digit);
    ``experiment`` names the experiment whose column declarations give the table headers."""

    def __init__(self, outdir, results_dir=None, style: str = "paper", sig_digits: int = 6,
                 experiment: str | None = None):
        from pathlib import Path

        from pipeline.report.style import check_style

        self.outdir = Path(outdir)
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.results_dir = results_dir
        self.style = check_style(style)
        self.sig_digits = check_sig_digits(sig_digits)
        self.experiment = experiment
        self.entries: list[dict] = []

    def load(self, experiment_name: str, status: str | None = "ok"):
        """Another experiment's results from the same results_dir (e.g. limits to converge
        to), or None when it has not been run."""
        if self.results_dir is None:
            return None
        from pipeline.store.parquet import load

        try:
            return load(self.results_dir, experiment_name, status=status)
        except FileNotFoundError:
            return None

    def style_context(self):
        """The figure style's matplotlib settings, for the span of a report function (so
        lines, legends and texts made after :meth:`new_figure` follow it too)."""
        import matplotlib

        from pipeline.report.style import rc_params

        return matplotlib.rc_context(rc_params(self.style))

    def table(self, name: str, df, caption: str = "", float_format: str = "%.12g",
              sig_digits: int | None = None) -> None:
        """CSV with every float exact (shortest round-trip form: it is read back by programs,
        and ``%.12g`` had turned 1234567890123457.0 into 1.23456789012e+15), Markdown with
        ``float_format`` (12 significant digits by default), and a LaTeX table (booktabs,
        siunitx ``S`` columns) with ``sig_digits`` (default: the report's setting) significant
        digits."""
        digits = check_sig_digits(sig_digits or self.sig_digits)
        df.to_csv(self.outdir / f"{name}.csv", index=False)
        (self.outdir / f"{name}.md").write_text(_markdown(df, float_format) + "\n")
        latex = latex_table(df, caption, name, digits, self.experiment)
        (self.outdir / f"{name}.tex").write_text(latex)
        self.entries.append({"kind": "table", "name": name, "caption": caption,
                             "files": [f"{name}.csv", f"{name}.md", f"{name}.tex"], "rows": len(df),
                             "frame": df, "sig_digits": digits})

    def new_figure(self, nrows: int = 1, ncols: int = 1, span: str | None = None,
                   aspect: float | None = None, sharex: bool = False, sharey: bool = False):
        """A figure at print size in the report's style (:func:`pipeline.report.style.new_figure`:
        ``span`` single = 3.4 in, double = 7 in)."""
        from pipeline.report.style import new_figure

        return new_figure(self.style, nrows=nrows, ncols=ncols, span=span, aspect=aspect,
                          sharex=sharex, sharey=sharey)

    def small_multiples(self, n_panels: int, max_cols: int = 3, aspect: float = 0.8,
                        sharex: bool = False, sharey: bool = False):
        from pipeline.report.style import small_multiples

        return small_multiples(self.style, n_panels, max_cols=max_cols, aspect=aspect,
                               sharex=sharex, sharey=sharey)

    def figure(self, name: str, fig, caption: str = "") -> None:
        """PNG, PDF (Type 42 fonts) and SVG through :func:`pipeline.report.style.save_figure`,
        which refuses unlabelled axes."""
        from pipeline.report.style import save_figure

        width_in = float(fig.get_figwidth())
        files = save_figure(fig, self.outdir, name, self.style)
        self.entries.append({"kind": "figure", "name": name, "caption": caption, "files": files,
                             "width_in": width_in})


def check_sig_digits(value) -> int:
    from pipeline.report.options import check_report_options

    check_report_options("paper", value)
    return value


NULL_MARK = "\u2014"  # an em dash: a cell with no value (null), in every table format
NULL_LEGEND = "\u2014: no value (not computed, or not applicable to that row)"


def is_null(value) -> bool:
    """None, NaN or pandas' NA/NaT: a missing value (shown as :data:`NULL_MARK`)."""
    import math

    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def format_bool(value) -> str:
    """A flag as every table format shows it: ``yes``/``no``."""
    return "yes" if value else "no"


def format_float(x: float, sig_digits: int) -> str:
    """``x`` with ``sig_digits`` significant digits, plain or scientific as ``%g`` chooses.

    A value that was rounded keeps its trailing zeros (``1.00000`` for 1.000001367882248,
    ``2.49870``, ``0.100`` for 0.0999981 at 3 digits): ``%g`` dropped them, so a rounded value
    read as exact (``1``) and 0.0999981 looked identical to a bound of exactly 0.1. A value
    that needs no more digits than that (0.5, 3, 0.1 itself) is printed short."""
    import math

    if math.isnan(x):
        return NULL_MARK
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0 or _shortest_digits(x) <= sig_digits:  # exact at this precision: short form
        return f"{x:.{sig_digits}g}"
    text = f"{x:#.{sig_digits}g}"  # '#': keep trailing zeros (and a bare '.', removed here)
    mantissa, e, exponent = text.partition("e")
    return mantissa.rstrip(".") + e + exponent


def _shortest_digits(x: float) -> int:
    """Significant digits of the shortest decimal that reads back as ``x`` (``repr``)."""
    from decimal import Decimal

    return len(Decimal(repr(float(x))).normalize().as_tuple().digits)


def _fmt(value, float_format: str) -> str:
    """One Markdown cell: floats by ``float_format`` (``%.Ng``: N significant digits, trailing
    zeros kept where rounded, as :func:`format_float`), flags yes/no, missing values
    :data:`NULL_MARK`."""
    import re

    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return format_bool(value)
    if is_null(value):
        return NULL_MARK
    if isinstance(value, (float, np.floating)):
        m = re.fullmatch(r"%\.(\d+)g", float_format)
        return format_float(float(value), int(m.group(1))) if m else float_format % value
    return str(value)


def _markdown(df, float_format: str) -> str:
    header = "| " + " | ".join(_md_cell(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_md_cell(_fmt(v, float_format)) for v in row) + " |"
            for row in df.itertuples(index=False)]
    has_null = any(is_null(v) for row in df.itertuples(index=False) for v in row)
    return "\n".join([header, rule, *body] + (["", NULL_LEGEND + "."] if has_null else []))


# Characters a Markdown viewer would read as markup in a cell: an error's "in <lambda>"
# vanished as an HTML tag, *x* became emphasis. An underscore only at a word's edge (inside
# a word, as in task_id, it is not emphasis; escaped it would clutter the raw text).
_MD_MARKUP = re.compile(r"[\\`*\[\]<>|&~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def _md_cell(text: str) -> str:
    """A Markdown table cell: a '|' or a line break in it (an error message) would cut the row,
    and markup characters are escaped so that the text shows as it is."""
    return " ".join(_MD_MARKUP.sub(lambda m: "\\" + m.group(0), text).splitlines())


def md_code_span(text: str) -> str:
    """``text`` as one Markdown code span, shown as it is (CommonMark 6.1): fenced by a run of
    backticks that does not occur in it, padded with a space where it begins or ends with a
    backtick or a space (one is stripped from each side)."""
    if not text:
        return "` `"  # (two backticks alone are no code span)
    runs = {len(run) for run in re.findall(r"`+", text)}
    fence = "`" * next(n for n in range(1, len(runs) + 2) if n not in runs)
    edges = text[:1] + text[-1:]
    pad = " " if text.strip(" ") and ("`" in edges or " " in edges) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_INTEGER = r"-?[0-9]+"


def _is_exact_integer_text(value) -> bool:
    import re

    return isinstance(value, str) and re.fullmatch(_INTEGER, value) is not None


_DECIMAL = r"-?[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?"


def column_kind(values) -> str:
    """``int``, ``float``, ``exact`` (integers as decimal strings), ``decimal`` (numbers kept as
    their printed text, e.g. a thesis's digits) or ``text`` for a column's non-empty values
    (booleans are text: yes/no)."""
    import re

    import numbers

    import numpy as np

    seen = set()
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and v == ""):
            continue
        if isinstance(v, (bool, np.bool_)):
            return "text"
        if isinstance(v, numbers.Integral):
            seen.add("int")
        elif isinstance(v, numbers.Real):
            seen.add("float")
        elif _is_exact_integer_text(v):
            seen.add("exact")
        elif isinstance(v, str) and re.fullmatch(_DECIMAL, v):
            seen.add("decimal")
        else:
            return "text"
    if not seen:
        return "text"
    if "decimal" in seen:
        return "decimal"
    if seen <= {"int", "exact"}:
        return "exact" if "exact" in seen else "int"
    if seen <= {"int", "float"}:
        return "float"
    return "text"


def format_number(value, kind: str, sig_digits: int, exact_format: str = "whole") -> str:
    """One cell as plain text: floats with ``sig_digits`` significant digits
    (:func:`format_float`: plain or ``1.50e-06``, trailing zeros kept where rounded), integers
    whole, exact integers whole or, when their column declares ``scientific``, rounded to
    ``sig_digits`` (``1.23457e+45``); :data:`NULL_MARK` for a missing value (None, NaN; an
    empty string too in a numeric column), 'inf'/'-inf', flags ``yes``/``no``."""
    from decimal import Decimal

    import numpy as np

    if is_null(value) or (kind != "text" and isinstance(value, str) and value == ""):
        return NULL_MARK
    if isinstance(value, (bool, np.bool_)):
        return format_bool(value)
    if kind == "decimal":  # printed digits stay as printed; numbers beside them get sig digits
        return value if isinstance(value, str) else format_number(value, "float", sig_digits)
    if kind == "float":
        return format_float(float(value), sig_digits)
    if kind in ("int", "exact"):
        text = str(int(value)) if not isinstance(value, str) else value
        if exact_format == "scientific" and len(text.lstrip("-")) > sig_digits:
            return f"{Decimal(text):.{sig_digits - 1}e}"
        return text
    if isinstance(value, (float, np.floating)):  # a number in a text column
        return format_float(float(value), sig_digits)
    return str(value)


# The LaTeX writer lives in report/latex.py; these names are its public face here too.
from pipeline.report.latex import latex_table  # noqa: E402,F401
from pipeline.report.latex_text import latex_escape, latex_label  # noqa: E402,F401
