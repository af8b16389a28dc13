"""LaTeX tables fit for print: booktabs rules, siunitx ``S`` columns, headers from the column
declarations, and a width that fits the page.

A table must fit :data:`TEXT_WIDTH_PT` (the text width of LaTeX's ``article`` class at 10 pt,
4.8 in). The writer estimates the width of every column from Computer Modern's (T1) glyph
widths: an ``S`` column from its ``table-format``, a text column from its widest cell (a text
column wider than :data:`TEXT_CELL_MAX_PT` wraps, ragged right), a header from its lines
(headers wrap onto up to ``latex_text.HEADER_MAX_LINES`` lines no wider than their column). Then it
takes the first that fits of

1. the normal size;
2. ``\\small`` with ``\\tabcolsep`` 4 pt; ``\\footnotesize`` with ``\\tabcolsep`` 3 pt;
3. the columns cut into parts at ``\\small`` (or ``\\footnotesize`` when that takes fewer),
   each repeating the key columns (:func:`_key_columns`: the parameters and labels that
   identify a row, numeric ones too, and the columns after them needed to tell rows apart;
   later parts leave out keys that are the same on every row); adjacent integer columns of one
   format (a printed and an exact count) stay in one part, wrapping their digits if they must,
   and an integer column wider than a part beside the keys wraps between its digit groups.
   Headers wrap at spaces, and a long identifier (``median_ratio_to_optimal``) after its
   underscores.

Then the height: every float (the caption and the first rows, or a "Table N, continued (k of
M; rows a-b of N)" line and later rows, the notes under the last) must fit
:data:`FLOAT_HEIGHT_PT` of the article's text height (each row's height estimated, a wrapped
cell taking several lines). A table too tall is cut into runs of rows, each run's column parts
stacked in one float while they fit together, else one float each, so every row is printed
(one float per table had been dropped by pdflatex below the page: "Float too large"). Floats
are placed ``[htbp]``, so a tall one gets a page of floats. A ``longtable`` would break across
pages by itself, but not in a two-column class (IEEE, ACM) nor inside the box that scales a
table to ``\\linewidth``.

Missing values print as an em dash, with a note saying what it means.

In LaTeX each part is measured once more: with ``\\usepackage{graphicx}`` loaded, a part still
wider than ``\\linewidth`` (a two-column class, a narrower estimate) is scaled down to it;
without graphicx it is set at its natural width.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.report.latex_text import (GROUP_PT, latex_cell, latex_escape, latex_label,
                                        latex_wrappable, number_width_pt, siunitx_format,
                                        text_width_pt, wrap_words)

TEXT_WIDTH_PT = 345.0  # \textwidth of the article class at 10 pt
FIT = 0.96  # fraction of the text width an estimate may fill (slack for the estimate)
TEXT_CELL_MAX_PT = 150.0  # a wider text column wraps (ragged right) at this width
HEADER_MIN_PT = 48.0  # a header wraps to its column's width, but never narrower than this
KEY_SHARE = 0.8  # key columns repeated in every part take at most this share of the width
MAX_EXTRA_KEYS = 3  # columns after the parameters that may join the keys to tell rows apart
# (size switch, width relative to 10 pt, \tabcolsep in pt, baseline skip in pt), tried in order
SIZES = (("", 1.0, 6.0, 12.0), (r"\small", 0.92, 4.0, 11.0), (r"\footnotesize", 0.84, 3.0, 9.5))
SPLIT_SIZE = SIZES[1]
PAGE_HEIGHT_PT = 550.0  # \textheight of the article class at 10 pt (letter; A4: 598 pt)
FLOAT_HEIGHT_PT = 0.9 * PAGE_HEIGHT_PT  # a float's estimate may fill this (slack for it)
RULES_PT = 16.0  # booktabs' three rules and their separations, and a strut's depth
STACK_GAP_PT = 14.0  # \medskip and the line end between parts stacked in one float
CONTINUED_PT = 20.0  # the "Table N, continued" line over a later float

@dataclass
class _Column:
    spec: str
    cells: list[str]
    content_pt: float  # natural width of the cells at 10 pt
    header: str  # the header text (unescaped)
    numeric: bool
    key: bool = False
    integer: bool = False  # whole integers (may wrap their digits: _wrap_digits)
    wrapped: bool = False  # header broken onto several lines (set by the layout)
    lines: list[int] | None = None  # lines each cell takes (a wrapped text or count: more)
    name: str = ""
    raw: list[str] | None = None  # the cells as plain text (before LaTeX)
    has_null: bool = False

    def _lines(self) -> list[str]:
        if not self.wrapped:
            return [self.header]
        return wrap_words(self.header, max(self.content_pt, HEADER_MIN_PT))

    @property
    def width_pt(self) -> float:
        """Natural width at 10 pt, without \\tabcolsep."""
        return max(self.content_pt, max(text_width_pt(line) for line in self._lines()))

    @property
    def varies(self) -> bool:
        return len(set(self.raw or self.cells)) > 1

    @property
    def head(self) -> str:
        """LaTeX of the header cell: one line, or a stack of lines."""
        lines = self._lines()
        if len(lines) == 1:
            head = latex_escape(lines[0])
        else:
            align = "c" if self.numeric else "l"
            head = (rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}"
                    + r"\\".join(latex_escape(line) for line in lines) + r"\end{tabular}")
        return "{" + head + "}" if self.numeric else head  # braces: text in an S column


def _text_lines(text: str, width_pt: float) -> int:
    """Lines a ragged-right cell of ``text`` takes in a ``width_pt`` box (an upper bound: the
    box breaks inside long words too, see :func:`latex_wrappable`)."""
    lines, line = 1, 0.0
    for word in re.split(r"(?<=[\s/_.,:=])", text):
        w = text_width_pt(word)
        while w > width_pt:  # a run longer than a line is cut
            lines += 1 if line else 0
            w -= width_pt
            line = 0.0
        if line and line + w > width_pt:
            lines += 1
            line = 0.0
        line += w
    return lines


def _column(values, meta, sig_digits: int, key_candidate: bool, name: str = "") -> _Column:
    from pipeline.report.core import NULL_MARK, column_kind, format_number

    kind = column_kind(values)
    cells = [format_number(v, kind, sig_digits, meta.exact_format) for v in values]
    numeric = kind != "text"
    lines = [1] * len(cells)
    if numeric:
        fmt = siunitx_format(cells)
        spec = f"S[table-format={fmt}]"
        content = max(number_width_pt(fmt),
                      max((10.0 for c in cells if c in ("inf", "-inf", NULL_MARK)), default=0.0))
        latex_cells = [latex_cell(c, True) for c in cells]
    else:
        spec = "l"
        content = max((text_width_pt(c) for c in cells), default=0.0)
        if content > TEXT_CELL_MAX_PT:  # a long text wraps, ragged right, in a fixed width
            content = TEXT_CELL_MAX_PT
            latex_cells = [rf"\parbox[t]{{{TEXT_CELL_MAX_PT:g}pt}}{{\raggedright "
                           + latex_wrappable(c) + r"\strut}" if c and c != NULL_MARK
                           else latex_cell(c, False) for c in cells]
            lines = [_text_lines(c, TEXT_CELL_MAX_PT * 0.9) for c in cells]
        else:
            latex_cells = [latex_cell(c, False) for c in cells]
    integer = kind in ("int", "exact") and all(re.fullmatch(r"-?[0-9]*", c) or c == NULL_MARK
                                               for c in cells)
    return _Column(spec, latex_cells, content, meta.header, numeric, key=key_candidate,
                   integer=integer, lines=lines, name=name, raw=cells,
                   has_null=NULL_MARK in cells)


def table_width_pt(columns: list[_Column], size=SIZES[0]) -> float:
    """Estimated natural width (pt) of a tabular of ``columns`` at ``size``."""
    _, scale, sep, _ = size
    return sum(c.width_pt * scale + 2 * sep for c in columns)


def _unique(columns: list[_Column], n_rows: int) -> bool:
    return len({tuple(c.raw[i] for c in columns) for i in range(n_rows)}) == n_rows


def _key_columns(columns: list[_Column], params: set, n_rows: int) -> list[_Column]:
    """The columns that identify a row, repeated in every part of a split table: the leading
    run of parameters and labels (every swept parameter, numeric ones too), less trailing
    labels that are not parameters and not needed to tell the rows apart (a method named by
    the keys before it), and extended by the columns that follow while rows are not yet told
    apart (inferential's n_nodes, node, J_effective: values of the parameters n, target, J)."""
    keys = []
    for col in columns:
        if not col.key:
            break
        keys.append(col)
    while keys and keys[-1].name not in params and _unique(keys[:-1], n_rows) and \
            len(keys) > 1:
        keys.pop()
    if keys and not _unique(keys, n_rows):
        extended, extra = list(keys), 0
        for col in columns[len(keys):]:
            if col.integer and col.content_pt > 60:  # a count, not a label
                break
            extra += col.name not in params
            if extra > MAX_EXTRA_KEYS:
                break
            extended.append(col)
            if _unique(extended, n_rows):
                keys = extended
                break
    return keys


def _wrap_digits(col: _Column, width_pt: float, scale: float) -> None:
    """An integer column too wide for its part (a 79-digit count, or two counts compared side
    by side) set as right-aligned lines of digit groups no wider than ``width_pt`` (at 10 pt;
    the box is set at ``scale``): every digit kept, breaks only between groups (the thin
    space after a break is dropped, so lines end flush)."""
    def grouped(cell: str) -> str:
        sign, digits = ("-", cell[1:]) if cell.startswith("-") else ("", cell)
        head = len(digits) % 3 or 3
        groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
        return sign + r"\allowbreak\,".join(groups)

    box_pt = int(width_pt * scale)  # a \parbox width is absolute, not scaled by \small
    col.spec = "r"
    per_line = max(1, int((width_pt + GROUP_PT) // (15.0 + GROUP_PT)))  # digit groups a line
    col.lines = [-(-((len(c.lstrip("-")) + 2) // 3) // per_line)
                 if re.fullmatch(r"-?[0-9]+", c) else 1 for c in col.raw]
    col.cells = [rf"\parbox[t]{{{box_pt}pt}}{{\raggedleft " + grouped(c) + r"\strut}"
                 if re.fullmatch(r"-?[0-9]+", c) else latex_cell(c, False) for c in col.raw]
    col.content_pt = box_pt / scale


def _units(columns: list[_Column]) -> list[list[_Column]]:
    """Columns that go into one part together: adjacent integer columns of the same format
    (counts compared digit by digit, as the errata's printed and exact values), else one."""
    units = []
    for col in columns:
        if units and col.integer and units[-1][-1].integer and units[-1][-1].spec == col.spec:
            units[-1].append(col)
        else:
            units.append([col])
    return units


def _parts(columns: list[_Column], keys: list[_Column], size, limit: float
           ) -> tuple[list[list[_Column]], int]:
    """The columns cut into parts no wider than ``limit``: the first led by every key column,
    the later ones by the keys that vary (a constant label says nothing about a row); columns
    meant to be compared (:func:`_units`) stay in one part, their digits wrapped if they must;
    an integer column wider than a part beside the keys wraps its digits
    (:func:`_wrap_digits`)."""
    repeated = [k for k in keys if k.varies] or keys
    varying = len(repeated)
    while len(repeated) > 1 and table_width_pt(repeated, size) > KEY_SHARE * limit:
        repeated = repeated[:-1]  # keys wider than this would leave no room for values
    kept = {id(k) for k in repeated}
    keys = [k for k in keys if id(k) in kept or not k.varies]
    _, scale, sep, _ = size
    keys_pt = table_width_pt(keys, size)
    key_ids = {id(k) for k in keys}
    rest = [c for c in columns if id(c) not in key_ids]
    units = []
    for unit in _units(rest):
        room = (limit - keys_pt) / scale / len(unit) - 2 * sep / scale  # per column
        if len(unit) > 1 and table_width_pt(keys + unit, size) > limit and room < 45.0:
            units += [[c] for c in unit]  # too narrow side by side: one after the other
        else:
            units.append(unit)
    parts, part = [], []
    for unit in units:
        room = (limit - keys_pt) / scale / len(unit) - 2 * sep / scale
        for col in unit:
            if col.integer and col.width_pt > room:
                _wrap_digits(col, room, scale)
        lead = keys if not parts else repeated
        if part and table_width_pt(lead + part + unit, size) > limit:
            parts.append(lead + part)
            part = []
        part += unit
    if part or not parts:
        parts.append((keys if not parts else repeated) + part)
    return parts, varying - len(repeated)


def _tabular(columns: list[_Column], rows: range) -> list[str]:
    lines = [rf"\begin{{tabular}}{{{' '.join(c.spec for c in columns) or 'l'}}}", r"\toprule",
             " & ".join(c.head for c in columns) + r" \\", r"\midrule"]
    for i in rows:
        lines.append(" & ".join(c.cells[i] for c in columns) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}}%"]  # no space token inside the box
    return lines


_BOX = r"\pipelinetablebox"
_FIT_BOX = (rf"\ifdim\wd{_BOX}>\linewidth\ifdefined\resizebox\resizebox{{\linewidth}}{{!}}"
            rf"{{\usebox{_BOX}}}\else\usebox{_BOX}\fi\else\usebox{_BOX}\fi")


# Rows written to a LaTeX table: each page-sized float of a long table waits for a page of its
# own, and a 1,000-row failed_tasks table (91 floats) stopped pdflatex with "Too many
# unprocessed floats"; 400 rows of wrapped error text (37 floats) compile.
MAX_LATEX_ROWS = 400


def latex_table(df, caption: str, name: str, sig_digits: int = 6,
                experiment: str | None = None) -> str:
    """A LaTeX table: booktabs rules, numeric columns as siunitx ``S`` columns (right of the
    decimal marker aligned), text columns left, headers from the columns' descriptions and
    units (:func:`pipeline.report.columns.column_meta`; descriptions too long for a header go
    in a note under the table), an unescaped ``\\label``, a width that fits the page and
    floats that each fit a page (see the module doc).

    Needs ``\\usepackage{booktabs}`` and ``\\usepackage{siunitx}`` (v3) in the preamble;
    ``\\usepackage{graphicx}`` (optional) scales a table still wider than the line."""
    from pipeline.report.columns import column_meta
    from pipeline.report.core import NULL_LEGEND

    columns, notes = [], []
    if len(df) > MAX_LATEX_ROWS:  # past ~18 page-sized floats pdflatex stops: no PDF at all
        notes.append(f"the first {MAX_LATEX_ROWS:,} of {len(df):,} rows (the CSV table has "
                     "every row)")
        df = df.head(MAX_LATEX_ROWS)
    leading = True
    # experiment_version leads the tables of a report over several versions (report/versions.py):
    # it tells rows apart as a parameter does, so a split table repeats it in every part
    exp_params = _parameters(experiment) | {"experiment_version"}
    for col in df.columns:
        meta = column_meta(experiment, str(col))
        if meta.note:
            notes.append(meta.note)
        values = df[col].tolist()
        leading = leading and (str(col) in exp_params or _is_label(df[col], values))
        columns.append(_column(values, meta, sig_digits, key_candidate=leading, name=str(col)))
    if any(c.has_null for c in columns):
        notes.append(NULL_LEGEND)
    n_rows = len(df)
    keys = _key_columns(columns, exp_params, n_rows)
    parts, size = _layout(columns, keys)
    label = latex_label(name, experiment)
    switch, scale, sep, _ = size
    caption_pt = _caption_height_pt(caption) if caption else 0.0
    notes_text = latex_escape("; ".join(notes) + ".") if notes else ""
    notes_pt = _notes_height_pt("; ".join(notes) + ".") if notes else 0.0
    floats = _floats(parts, n_rows, size, caption_pt, notes_pt)
    row_split = len({rows for rows, _ in floats}) > 1

    lines = [f"% {name}: generated by pipeline's report; needs \\usepackage{{booktabs}} and "
             "\\usepackage{siunitx} (v3);",
             f"% estimated width {table_width_pt(columns, size):.0f} pt"
             + (f" in {len(parts)} parts" if len(parts) > 1 else "")
             + (f", {len(floats)} floats of at most {FLOAT_HEIGHT_PT:.0f} pt"
                if len(floats) > 1 else "")
             + "; with \\usepackage{graphicx}, a table wider than the line is scaled to it",
             rf"\ifdefined{_BOX}\else\newsavebox{{{_BOX}}}\fi"]
    for f, (rows, group) in enumerate(floats):
        lines += [r"\begin{table}[htbp]", r"\centering"]
        if f == 0:
            if caption:  # above the table, as IEEE and ACM ask
                lines.append(rf"\caption{{{latex_escape(caption)}}}")
            lines.append(rf"\label{{{label}}}")
        else:
            shown = (f"; rows {rows.start + 1}--{rows.stop} of {n_rows}" if row_split else "")
            lines.append(rf"{{\small Table~\ref{{{label}}}, continued ({f + 1} of "
                         rf"{len(floats)}{shown}).}}\par\smallskip")
        lines.append("{" + (switch + rf"\setlength{{\tabcolsep}}{{{sep:g}pt}}" if switch else "")
                     + "%")
        for i, part in enumerate(group):
            if i:
                lines.append(r"\par\medskip")
            lines.append(rf"\sbox{{{_BOX}}}{{%")
            lines += _tabular(part, rows)
            lines.append(_FIT_BOX)
        lines.append(r"\par}")
        if notes and f == len(floats) - 1:  # descriptions too long for a header, the null mark
            lines.append(r"\par\smallskip{\footnotesize\raggedright " + notes_text + r"\par}")
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def _caption_height_pt(caption: str) -> float:
    """A caption above the table: 'Table N: ' and the text on lines of the text width, and
    the skip below it."""
    lines = _text_lines("Table 99: " + caption, TEXT_WIDTH_PT * 0.9)
    return lines * 12.0 + 12.0


def _notes_height_pt(notes: str) -> float:
    """The ``\\footnotesize`` note under the table and the skip above it."""
    return _text_lines(notes, TEXT_WIDTH_PT * 0.9 / 0.84) * 9.5 + 8.0


def part_height_pt(columns: list[_Column], rows: range | int, size=None) -> float:
    """Estimated height (pt) of one tabular of ``rows`` at ``size``: its header lines and each
    row's lines (a wrapped cell takes several) at the size's baseline skip, and the rules."""
    size = size or SPLIT_SIZE
    rows = range(rows) if isinstance(rows, int) else rows
    baseline = size[3]
    header_lines = max(len(c._lines()) for c in columns) if columns else 1
    body = sum(max((c.lines[i] if c.lines else 1) for c in columns) for i in rows) \
        if columns else len(rows)
    return (header_lines + body) * baseline + RULES_PT


def _floats(parts: list[list[_Column]], n_rows: int, size, caption_pt: float,
            notes_pt: float) -> list[tuple[range, list[list[_Column]]]]:
    """The floats of a table, each (rows, column parts) no taller than
    :data:`FLOAT_HEIGHT_PT` with its caption (the first), its "continued" line (the others)
    and the notes (the last): the rows cut into runs whose every part fits (a table of 177
    rows was one float of 2,000 pt, and pdflatex dropped the rows below the page), then each
    run's parts stacked while they fit together, else one float each."""
    def fits(rows: range, room: float) -> bool:
        return all(part_height_pt(p, rows, size) <= room for p in parts)

    def fit(start: int, room: float) -> int:  # the end of the longest run from start (>= 1 row)
        stop = start + 1
        while stop < n_rows and fits(range(start, stop + 1), room):
            stop += 1
        return stop

    runs, start = [], 0
    while True:
        room = FLOAT_HEIGHT_PT - (caption_pt if not runs else CONTINUED_PT)
        if fits(range(start, n_rows), room - notes_pt):  # the rest, with the notes under it
            runs.append((range(start, n_rows), room - notes_pt))
            break
        stop = fit(start, room)
        if stop >= n_rows:  # the rest fits, but not with the notes: leave rows for a last run
            stop = max(start + 1, fit(start, room - notes_pt))
        runs.append((range(start, stop), room))
        start = stop
    floats = []
    for rows, room in runs:
        group, height = [], 0.0
        for part in parts:
            h = part_height_pt(part, rows, size)
            if group and height + STACK_GAP_PT + h > room:
                floats.append((rows, group))
                group, height = [], 0.0
                room = FLOAT_HEIGHT_PT - CONTINUED_PT - (notes_pt if rows.stop == n_rows else 0)
            height += h + (STACK_GAP_PT if group else 0.0)
            group.append(part)
        floats.append((rows, group))
    return floats


def _layout(columns: list[_Column], keys: list[_Column]):
    """(parts, size): the first that fits of one-line headers at the normal size, wrapped
    headers at each size of :data:`SIZES`, and wrapped headers cut into parts at
    :data:`SPLIT_SIZE` (see the module doc)."""
    limit = TEXT_WIDTH_PT * FIT
    if table_width_pt(columns, SIZES[0]) <= limit:
        return [columns], SIZES[0]
    for col in columns:
        col.wrapped = True
    for size in SIZES:
        if table_width_pt(columns, size) <= limit:
            return [columns], size
    # cut into parts at \small, or at \footnotesize when that takes fewer parts (wide keys)
    import copy

    best = None
    for size in SIZES[1:]:
        cols, ks = copy.deepcopy((columns, keys))  # _parts wraps digits in place
        parts, dropped = _parts(cols, ks, size, limit)
        # first every varying key repeated (a row of a later part must say which it is)
        rank = (dropped, len(parts))
        if best is None or rank < best[0]:
            best = (rank, parts, size)
    return best[1], best[2]


def _is_label(column, values) -> bool:
    """A label column: text that is not a number. Exact integers are held as text too (decimal
    strings), but they are values, not row labels: repeated in every part of a split table,
    table 7.1's f(1, n) took the width the wide counts needed."""
    from pipeline.report.core import column_kind

    return _is_text(column) and column_kind(values) == "text"


def _is_text(column) -> bool:
    """A label column: pandas 2 holds text as ``object``, pandas 3 as its ``str`` dtype."""
    import pandas as pd

    return column.dtype == object or isinstance(column.dtype, pd.StringDtype)


def _parameters(experiment: str | None) -> set:
    if not experiment:
        return set()
    from pipeline.experiments.base import get_experiment

    try:
        return set(get_experiment(experiment).param_map)
    except KeyError:
        return set()
