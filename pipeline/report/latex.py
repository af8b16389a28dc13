"""LaTeX tables fit for print: booktabs rules, siunitx ``S`` columns, headers from the column
declarations, and a width that fits the page.

A table must fit :data:`TEXT_WIDTH_PT` (the text width of LaTeX's ``article`` class at 10 pt,
4.8 in). The writer estimates the width of every column from Computer Modern's (T1) glyph
widths: an ``S`` column from its ``table-format``, a text column from its widest cell (a text
column wider than :data:`TEXT_CELL_MAX_PT` wraps, ragged right), a header from its lines
(headers wrap onto up to :data:`HEADER_MAX_LINES` lines no wider than their column). Then it
takes the first that fits of

1. the normal size;
2. ``\\small`` with ``\\tabcolsep`` 4 pt; ``\\footnotesize`` with ``\\tabcolsep`` 3 pt;
3. the columns cut into parts at ``\\small``, each repeating the leading key columns (the
   parameters or labels that identify a row): stacked in the one float when they fit on a page
   together (:data:`STACK_HEIGHT_PT`), else one float each, the later ones headed "Table N,
   continued"; an integer column wider than a part beside the keys wraps between its digit
   groups.

In LaTeX each part is measured once more: with ``\\usepackage{graphicx}`` loaded, a part still
wider than ``\\linewidth`` (a two-column class, a narrower estimate) is scaled down to it;
without graphicx it is set at its natural width.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass

TEXT_WIDTH_PT = 345.0  # \textwidth of the article class at 10 pt
FIT = 0.96  # fraction of the text width an estimate may fill (slack for the estimate)
TEXT_CELL_MAX_PT = 150.0  # a wider text column wraps (ragged right) at this width
HEADER_MIN_PT = 48.0  # a header wraps to its column's width, but never narrower than this
HEADER_MAX_LINES = 4
KEY_SHARE = 0.55  # key columns repeated in every part take at most this share of the width
# (size switch, width relative to 10 pt, \tabcolsep in pt), tried in order
SIZES = (("", 1.0, 6.0), (r"\small", 0.92, 4.0), (r"\footnotesize", 0.84, 3.0))
SPLIT_SIZE = SIZES[1]
STACK_HEIGHT_PT = 480.0  # parts taller than this together go in one float each (continued)

# Widths (pt) of the printable ASCII glyphs of ecrm1000 (T1 Computer Modern, 10 pt), '!'..'~'
_ASCII_PT = [2.78, 5.0, 8.33, 5.0, 8.33, 7.78, 2.78, 3.89, 3.89, 5.0, 7.78, 2.78, 3.33, 2.78, 5.0,
             5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 2.78, 2.78, 7.78, 7.78, 7.78, 4.72,
             7.78, 7.5, 7.08, 7.22, 7.64, 6.8, 6.53, 7.85, 7.5, 3.61, 5.14, 7.78, 6.25, 9.16, 7.5,
             7.78, 6.8, 7.78, 7.36, 5.55, 7.22, 7.5, 7.5, 10.28, 7.5, 7.5, 6.11, 2.78, 5.0, 2.78,
             6.11, 7.78, 2.78, 5.0, 5.55, 4.44, 5.55, 4.44, 3.05, 5.0, 5.55, 2.78, 3.05, 5.28,
             2.78, 8.33, 5.55, 5.0, 5.55, 5.28, 3.92, 3.94, 3.89, 5.55, 5.28, 7.22, 5.28, 5.28,
             4.44, 5.0, 2.78, 5.0, 6.11]
_CHAR_PT = {chr(33 + i): w for i, w in enumerate(_ASCII_PT)}
_CHAR_PT[" "] = 3.33
_OTHER_PT = 7.0  # a Greek letter or maths symbol set in math mode, a dash: at most this


def text_width_pt(text: str) -> float:
    """Estimated width (pt, 10 pt Computer Modern) of ``text`` as :func:`_latex_escape` sets it
    (an upper bound: superscripts are counted at full size)."""
    return sum(_CHAR_PT.get(ch, _OTHER_PT) for ch in str(text))


_GROUP_PT = 1.67  # siunitx's thin space between groups of three digits


def _separators(digits: int) -> int:
    """Thin spaces siunitx puts into a run of ``digits`` digits (groups of three from five)."""
    return (digits - 1) // 3 if digits >= 5 else 0


def number_width_pt(spec: str) -> float:
    """Width (pt) siunitx reserves for an ``S[table-format=spec]`` column: sign, digits, decimal
    marker, and ``\\times 10^{n}`` for an exponent."""
    m = re.fullmatch(r"(-)?(\d+)(?:\.(\d+))?(?:e(-)?(\d+))?", spec)
    if not m:
        return 30.0
    sign, whole, decimals, exp_sign, exp_digits = m.groups()
    width = 5.0 * int(whole) + (7.78 if sign else 0.0) + _GROUP_PT * _separators(int(whole))
    if decimals:
        width += 2.78 + 5.0 * int(decimals) + _GROUP_PT * _separators(int(decimals))
    if exp_digits:  # x 10^{-12}: binary-operator spaces, the cross, "10", script digits
        width += 2 * 2.22 + 7.78 + 10.0 + 4.1 * int(exp_digits) + (6.3 if exp_sign else 0.0)
    return width


# --------------------------------------------------------------------------- escaping
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
                  "$": r"\$", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"$<$", ">": r"$>$", "|": r"$|$"}
# symbols that pdflatex cannot take as UTF-8 text: typeset in math mode
_LATEX_UNICODE = {"α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "Γ": r"\Gamma", "δ": r"\delta",
                  "Δ": r"\Delta", "ε": r"\varepsilon", "ζ": r"\zeta", "η": r"\eta",
                  "θ": r"\theta", "Θ": r"\Theta", "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda",
                  "Λ": r"\Lambda", "μ": r"\mu", "ν": r"\nu", "ξ": r"\xi", "Ξ": r"\Xi",
                  "π": r"\pi", "Π": r"\Pi", "ρ": r"\rho", "σ": r"\sigma", "Σ": r"\Sigma",
                  "τ": r"\tau", "υ": r"\upsilon", "φ": r"\varphi", "Φ": r"\Phi", "χ": r"\chi",
                  "ψ": r"\psi", "Ψ": r"\Psi", "ω": r"\omega", "Ω": r"\Omega", "≤": r"\le",
                  "≥": r"\ge", "≈": r"\approx", "≠": r"\ne", "×": r"\times", "·": r"\cdot",
                  "−": "-", "→": r"\to", "⇒": r"\Rightarrow", "⇔": r"\Leftrightarrow",
                  "∞": r"\infty", "√": r"\surd", "±": r"\pm", "½": r"\frac12", "¹": "^1",
                  "²": "^2", "³": "^3", "⁴": "^4", "ᵏ": "^k", "′": "'", "∑": r"\sum",
                  "∏": r"\prod", "∈": r"\in", "⌊": r"\lfloor", "⌋": r"\rfloor",
                  "∂": r"\partial", "∇": r"\nabla", "∘": r"\circ", "∗": "*", "∼": r"\sim",
                  "≡": r"\equiv", "⊂": r"\subset", "∪": r"\cup", "∩": r"\cap",
                  **{chr(0x2080 + d): f"_{d}" for d in range(10)},  # subscript digits
                  "ᵢ": "_i", "ⱼ": "_j", "ₖ": "_k", "ₙ": "_n", "ₘ": "_m"}
_LATEX_TEXT_UNICODE = {"—": "---", "–": "--", "…": r"\dots{}", "‘": "`", "’": "'", "“": "``",
                       "”": "''", "\u00a0": "~"}


@functools.lru_cache(maxsize=None)
def _warn_no_glyph(ch: str) -> None:
    """Once per character: a '?' in a paper's table must not go unnoticed."""
    logging.getLogger("pipeline").warning(
        "LaTeX tables: %r (U+%04X) has no pdflatex glyph and is written as '?' (the Markdown, "
        "HTML and CSV tables keep it)", ch, ord(ch))


def _latex_escape(text: str) -> str:
    """Escape LaTeX specials in one pass (so an inserted brace is never escaped again); Greek
    letters and maths symbols become math (pdflatex has no glyphs for them as text); a caret
    exponent as in ``C^k(H)`` or ``10^{-3}`` becomes a superscript."""
    parts = re.split(r"\^(\{[^{}]*\}|[A-Za-z0-9+-]+)", text)
    if len(parts) > 1:  # odd items are exponents
        return "".join(_latex_escape_plain(p) if i % 2 == 0 else
                       r"\textsuperscript{" + _latex_escape_plain(p.strip("{}")) + "}"
                       for i, p in enumerate(parts))
    return _latex_escape_plain(text)


def _latex_escape_plain(text: str) -> str:
    text = text.replace("<=", "≤").replace(">=", "≥").replace("!=", "≠")  # as a reader writes
    out = []
    for ch in text:
        if ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ch in _LATEX_UNICODE:
            out.append(f"${_LATEX_UNICODE[ch]}$")
        elif ch in _LATEX_TEXT_UNICODE:
            out.append(_LATEX_TEXT_UNICODE[ch])
        elif ord(ch) > 0x24F:  # beyond Latin-1/Latin Extended: no pdflatex glyph
            _warn_no_glyph(ch)
            out.append("?")
        else:
            out.append(ch)
    return "".join(out)


def _latex_wrappable(text: str) -> str:
    """``text`` escaped, with break points after ``/ _ . , : =`` inside long words (paths,
    identifiers, error messages), and every 12 characters of a run without them, for a cell
    that wraps."""
    words = re.split(r"(\s+)", text)
    out = []
    for word in words:
        if len(word) > 16:
            pieces = [chunk for piece in re.split(r"(?<=[/_.,:=])", word) if piece
                      for chunk in _slices(piece, 12)]  # unbroken runs: every 12 characters
            out.append(r"\allowbreak{}".join(_latex_escape(p) for p in pieces))
        else:
            out.append(_latex_escape(word))
    return "".join(out)


def _slices(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [text]


def latex_label(name: str) -> str:
    """A valid, unescaped ``\\label`` key: letters, digits and ``:._-`` kept, others ``-``."""
    return "tab:" + re.sub(r"[^A-Za-z0-9:._-]", "-", name)


# --------------------------------------------------------------------------- columns
def _siunitx_format(cells: list[str]) -> str:
    """``table-format`` of an S column wide enough for every cell (sign, integer digits,
    decimals, exponent), so the column aligns on the decimal marker."""
    sign = exp_sign = False
    whole = decimals = exp_digits = 0
    for cell in cells:
        m = re.fullmatch(r"(-)?([0-9]+)(?:\.([0-9]+))?(?:e([+-])?([0-9]+))?", cell)
        if not m:
            continue
        sign |= bool(m.group(1))
        whole = max(whole, len(m.group(2)))
        decimals = max(decimals, len(m.group(3) or ""))
        if m.group(5):
            exp_sign |= m.group(4) == "-"
            exp_digits = max(exp_digits, len(m.group(5).lstrip("0") or "0"))
    spec = ("-" if sign else "") + str(max(whole, 1))
    if decimals:
        spec += f".{decimals}"
    if exp_digits:
        spec += "e" + ("-" if exp_sign else "") + str(exp_digits)
    return spec


def _latex_cell(text: str, numeric: bool) -> str:
    if not numeric:
        return _latex_escape(text)
    if text in ("inf", "-inf"):  # braces: text in an S column
        return "{$" + ("-" if text[0] == "-" else "") + r"\infty$}"
    return text


def wrap_words(text: str, width_pt: float, max_lines: int = HEADER_MAX_LINES) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width_pt`` where possible (a single
    word wider stays whole), widening the measure until it takes at most ``max_lines``."""
    words = text.split()
    if not words:
        return [""]
    while True:
        lines, line = [], ""
        for word in words:
            candidate = f"{line} {word}" if line else word
            if line and text_width_pt(candidate) > width_pt:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
        if len(lines) <= max_lines:
            return lines
        width_pt *= 1.2


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

    def _lines(self) -> list[str]:
        if not self.wrapped:
            return [self.header]
        return wrap_words(self.header, max(self.content_pt, HEADER_MIN_PT))

    @property
    def width_pt(self) -> float:
        """Natural width at 10 pt, without \\tabcolsep."""
        return max(self.content_pt, max(text_width_pt(line) for line in self._lines()))

    @property
    def head(self) -> str:
        """LaTeX of the header cell: one line, or a stack of lines."""
        lines = self._lines()
        if len(lines) == 1:
            head = _latex_escape(lines[0])
        else:
            align = "c" if self.numeric else "l"
            head = (rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}"
                    + r"\\".join(_latex_escape(line) for line in lines) + r"\end{tabular}")
        return "{" + head + "}" if self.numeric else head  # braces: text in an S column


def _column(values, meta, sig_digits: int, key_candidate: bool) -> _Column:
    from pipeline.report.core import column_kind, format_number

    kind = column_kind(values)
    cells = [format_number(v, kind, sig_digits, meta.exact_format) for v in values]
    numeric = kind != "text"
    if numeric:
        fmt = _siunitx_format(cells)
        spec = f"S[table-format={fmt}]"
        content = max(number_width_pt(fmt),
                      max((10.0 for c in cells if c in ("inf", "-inf")), default=0.0))
        latex_cells = [_latex_cell(c, True) for c in cells]
    else:
        spec = "l"
        content = max((text_width_pt(c) for c in cells), default=0.0)
        if content > TEXT_CELL_MAX_PT:  # a long text wraps, ragged right, in a fixed width
            content = TEXT_CELL_MAX_PT
            latex_cells = [rf"\parbox[t]{{{TEXT_CELL_MAX_PT:g}pt}}{{\raggedright "
                           + _latex_wrappable(c) + r"\strut}" if c else "" for c in cells]
        else:
            latex_cells = [_latex_cell(c, False) for c in cells]
    integer = kind in ("int", "exact") and all(re.fullmatch(r"-?[0-9]*", c) for c in cells)
    return _Column(spec, latex_cells, content, meta.header, numeric, key=key_candidate,
                   integer=integer)


def table_width_pt(columns: list[_Column], size=SIZES[0]) -> float:
    """Estimated natural width (pt) of a tabular of ``columns`` at ``size``."""
    _, scale, sep = size
    return sum(c.width_pt * scale + 2 * sep for c in columns)


def _keys(columns: list[_Column], size, limit: float) -> list[_Column]:
    """The leading labels and parameters that identify a row, repeated in every part."""
    keys = []
    for col in columns:
        if not col.key or table_width_pt(keys + [col], size) > KEY_SHARE * limit:
            break
        keys.append(col)
    return keys


def _wrap_digits(col: _Column, width_pt: float, scale: float) -> None:
    """An integer column too wide for any part (a 79-digit count) set as right-aligned lines
    of digit groups no wider than ``width_pt`` (at 10 pt; the box is set at ``scale``): every
    digit kept, breaks only between groups (the thin space after a break is dropped, so lines
    end flush)."""
    def grouped(cell: str) -> str:
        sign, digits = ("-", cell[1:]) if cell.startswith("-") else ("", cell)
        head = len(digits) % 3 or 3
        groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
        return sign + r"\allowbreak\,".join(groups)

    box_pt = int(width_pt * scale)  # a \parbox width is absolute, not scaled by \small
    col.spec = "r"
    col.cells = [rf"\parbox[t]{{{box_pt}pt}}{{\raggedleft " + grouped(c) + r"\strut}"
                 if re.fullmatch(r"-?[0-9]+", c) else c for c in col.cells]
    col.content_pt = box_pt / scale


def _parts(columns: list[_Column], size, limit: float) -> list[list[_Column]]:
    """The columns cut into parts no wider than ``limit``, each led by the key columns; an
    integer column wider than a part beside the keys wraps its digits (:func:`_wrap_digits`)."""
    keys = _keys(columns, size, limit)
    _, scale, sep = size
    room = (limit - table_width_pt(keys, size)) / scale - 2 * sep / scale
    for col in columns[len(keys):]:
        if col.integer and col.width_pt > room:
            _wrap_digits(col, room, scale)
    parts, part = [], []
    for col in columns[len(keys):]:
        if part and table_width_pt(keys + part + [col], size) > limit:
            parts.append(part)
            part = []
        part.append(col)
    if part:
        parts.append(part)
    return [keys + p for p in parts] or [keys]


def _tabular(columns: list[_Column], n_rows: int) -> list[str]:
    lines = [rf"\begin{{tabular}}{{{' '.join(c.spec for c in columns) or 'l'}}}", r"\toprule",
             " & ".join(c.head for c in columns) + r" \\", r"\midrule"]
    for i in range(n_rows):
        lines.append(" & ".join(c.cells[i] for c in columns) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}}%"]  # no space token inside the box
    return lines


_BOX = r"\pipelinetablebox"
_FIT_BOX = (rf"\ifdim\wd{_BOX}>\linewidth\ifdefined\resizebox\resizebox{{\linewidth}}{{!}}"
            rf"{{\usebox{_BOX}}}\else\usebox{_BOX}\fi\else\usebox{_BOX}\fi")


def latex_table(df, caption: str, name: str, sig_digits: int = 6,
                experiment: str | None = None) -> str:
    """A LaTeX table: booktabs rules, numeric columns as siunitx ``S`` columns (right of the
    decimal marker aligned), text columns left, headers from the columns' descriptions and
    units (:func:`pipeline.report.columns.column_meta`; descriptions too long for a header go
    in a note under the table), an unescaped ``\\label``, and a width that fits the page (see
    the module doc).

    Needs ``\\usepackage{booktabs}`` and ``\\usepackage{siunitx}`` (v3) in the preamble;
    ``\\usepackage{graphicx}`` (optional) scales a table still wider than the line."""
    from pipeline.report.columns import column_meta

    columns, notes = [], []
    leading = True
    exp_params = _parameters(experiment)
    for col in df.columns:
        meta = column_meta(experiment, str(col))
        if meta.note:
            notes.append(meta.note)
        values = df[col].tolist()
        leading = leading and (str(col) in exp_params or _is_label(df[col], values))
        columns.append(_column(values, meta, sig_digits, key_candidate=leading))
    parts, size = _layout(columns)
    label = latex_label(name)
    switch, scale, sep = size
    # parts of a short table stack in one float; a tall one's go one float each
    tall = sum(part_height_pt(p, len(df), scale) for p in parts) > STACK_HEIGHT_PT
    floats = [[p] for p in parts] if tall and len(parts) > 1 else [parts]

    lines = [f"% {name}: generated by pipeline's report; needs \\usepackage{{booktabs}} and "
             "\\usepackage{siunitx} (v3);",
             f"% estimated width {table_width_pt(columns, size):.0f} pt"
             + (f" in {len(parts)} parts" if len(parts) > 1 else "")
             + "; with \\usepackage{graphicx}, a table wider than the line is scaled to it",
             rf"\ifdefined{_BOX}\else\newsavebox{{{_BOX}}}\fi"]
    for f, group in enumerate(floats):
        lines += [r"\begin{table}[ht]", r"\centering"]
        if f == 0:
            if caption:  # above the table, as IEEE and ACM ask
                lines.append(rf"\caption{{{_latex_escape(caption)}}}")
            lines.append(rf"\label{{{label}}}")
        else:
            lines.append(rf"{{\small Table~\ref{{{label}}}, continued ({f + 1} of "
                         rf"{len(floats)}).}}\par\smallskip")
        lines.append("{" + (switch + rf"\setlength{{\tabcolsep}}{{{sep:g}pt}}" if switch else "")
                     + "%")
        for i, part in enumerate(group):
            if i:
                lines.append(r"\par\medskip")
            lines.append(rf"\sbox{{{_BOX}}}{{%")
            lines += _tabular(part, len(df))
            lines.append(_FIT_BOX)
        lines.append(r"\par}")
        if notes and f == len(floats) - 1:  # descriptions too long for a header
            lines.append(r"\par\smallskip{\footnotesize\raggedright "
                         + _latex_escape("; ".join(notes) + ".") + r"\par}")
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def part_height_pt(columns: list[_Column], n_rows: int, scale: float) -> float:
    """Estimated height (pt) of one tabular: header lines and rows at 12 pt, rules, a skip."""
    header_lines = max(len(c._lines()) for c in columns) if columns else 1
    return (header_lines + n_rows) * 12.0 * scale + 14.0


def _layout(columns: list[_Column]):
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
    return _parts(columns, SPLIT_SIZE, limit), SPLIT_SIZE


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
