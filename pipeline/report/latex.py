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

import functools
import logging
import re
from dataclasses import dataclass

TEXT_WIDTH_PT = 345.0  # \textwidth of the article class at 10 pt
FIT = 0.96  # fraction of the text width an estimate may fill (slack for the estimate)
TEXT_CELL_MAX_PT = 150.0  # a wider text column wraps (ragged right) at this width
HEADER_MIN_PT = 48.0  # a header wraps to its column's width, but never narrower than this
HEADER_MAX_LINES = 4
IDENT_MIN_PT = 64.0  # an identifier in a header wider than this (and its column) breaks at '_'
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
_CHAR_PT["\u2014"] = 10.0  # an em dash (the null mark)
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


# Unicode super- and subscripts, each as what it raises or lowers (in one ^{...} or _{...} per
# run); a character missing here was written '?' (ⁿ and ⁱ were)
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᵀ",
                         "0123456789-+=()abcdefghijklmnoprstuvwxyzT"))
_SUBSCRIPTS = {**{chr(0x2080 + d): str(d) for d in range(10)},
               **dict(zip("₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", "+-=()aehijklmnoprstuvx"))}
_SCRIPT_RUN = re.compile(f"[{''.join(_SUPERSCRIPTS)}]+|[{''.join(_SUBSCRIPTS)}]+")


def _latex_escape_plain(text: str) -> str:
    """Characters to LaTeX; maths symbols in one ``$...$`` per run ("α²" is ``$\\alpha^{2}$``:
    one group a character gave ``$\\alpha$$^2$``, and ``$$`` opens display maths), a run of
    super- or subscript characters as one script ("10⁻⁶" is ``10$^{-6}$``: ``^-^6`` is a
    double superscript)."""
    text = text.replace("<=", "≤").replace(">=", "≥").replace("!=", "≠")  # as a reader writes
    out: list[tuple[bool, str]] = []  # (is maths, LaTeX)
    at = 0
    while at < len(text):
        run = _SCRIPT_RUN.match(text, at)
        if run:
            chars = run.group()
            script = "^" if chars[0] in _SUPERSCRIPTS else "_"
            table = _SUPERSCRIPTS if script == "^" else _SUBSCRIPTS
            out.append((True, script + "{" + "".join(table[c] for c in chars) + "}"))
            at = run.end()
            continue
        ch = text[at]
        at += 1
        if ch in _LATEX_SPECIAL:
            out.append((False, _LATEX_SPECIAL[ch]))
        elif ch in _LATEX_UNICODE:
            latex = _LATEX_UNICODE[ch]
            out.append((True, latex + (" " if latex[-1].isalpha() else "")))
        elif ch in _LATEX_TEXT_UNICODE:
            out.append((False, _LATEX_TEXT_UNICODE[ch]))
        elif ord(ch) > 0x24F:  # beyond Latin-1/Latin Extended: no pdflatex glyph
            _warn_no_glyph(ch)
            out.append((False, "?"))
        else:
            out.append((False, ch))
    pieces, maths = [], []
    for is_maths, latex in out + [(False, "")]:
        if is_maths:
            maths.append(latex)
            continue
        if maths:
            pieces.append("$" + "".join(maths).rstrip() + "$")
            maths = []
        pieces.append(latex)
    return "".join(pieces)


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
    from pipeline.report.core import NULL_MARK

    if text == NULL_MARK:  # no value: an em dash (braced: text in an S column)
        return "{---}" if numeric else "---"
    if not numeric:
        return _latex_escape(text)
    if text in ("inf", "-inf"):  # braces: text in an S column
        return "{$" + ("-" if text[0] == "-" else "") + r"\infty$}"
    return text


def wrap_words(text: str, width_pt: float, max_lines: int = HEADER_MAX_LINES) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width_pt`` where possible, widening
    the measure until it takes at most ``max_lines``. A word wider than the measure that is an
    identifier (``median_ratio_to_optimal``) breaks after its underscores; another stays
    whole."""
    words = text.split()
    if not words:
        return [""]
    while True:
        tokens = []  # (piece, glue before it)
        for word in words:
            pieces = [word]
            if text_width_pt(word) > max(width_pt, IDENT_MIN_PT) and "_" in word.strip("_"):
                pieces = [p for p in re.split(r"(?<=_)(?=[^_])", word) if p]
            tokens += [(p, "" if i else " ") for i, p in enumerate(pieces)]
        lines, line = [], ""
        for piece, glue in tokens:
            candidate = f"{line}{glue}{piece}" if line else piece
            if line and text_width_pt(candidate) > width_pt:
                lines.append(line)
                line = piece
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
            head = _latex_escape(lines[0])
        else:
            align = "c" if self.numeric else "l"
            head = (rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}"
                    + r"\\".join(_latex_escape(line) for line in lines) + r"\end{tabular}")
        return "{" + head + "}" if self.numeric else head  # braces: text in an S column


def _text_lines(text: str, width_pt: float) -> int:
    """Lines a ragged-right cell of ``text`` takes in a ``width_pt`` box (an upper bound: the
    box breaks inside long words too, see :func:`_latex_wrappable`)."""
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
        fmt = _siunitx_format(cells)
        spec = f"S[table-format={fmt}]"
        content = max(number_width_pt(fmt),
                      max((10.0 for c in cells if c in ("inf", "-inf", NULL_MARK)), default=0.0))
        latex_cells = [_latex_cell(c, True) for c in cells]
    else:
        spec = "l"
        content = max((text_width_pt(c) for c in cells), default=0.0)
        if content > TEXT_CELL_MAX_PT:  # a long text wraps, ragged right, in a fixed width
            content = TEXT_CELL_MAX_PT
            latex_cells = [rf"\parbox[t]{{{TEXT_CELL_MAX_PT:g}pt}}{{\raggedright "
                           + _latex_wrappable(c) + r"\strut}" if c and c != NULL_MARK
                           else _latex_cell(c, False) for c in cells]
            lines = [_text_lines(c, TEXT_CELL_MAX_PT * 0.9) for c in cells]
        else:
            latex_cells = [_latex_cell(c, False) for c in cells]
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
    per_line = max(1, int((width_pt + _GROUP_PT) // (15.0 + _GROUP_PT)))  # digit groups a line
    col.lines = [-(-((len(c.lstrip("-")) + 2) // 3) // per_line)
                 if re.fullmatch(r"-?[0-9]+", c) else 1 for c in col.raw]
    col.cells = [rf"\parbox[t]{{{box_pt}pt}}{{\raggedleft " + grouped(c) + r"\strut}"
                 if re.fullmatch(r"-?[0-9]+", c) else _latex_cell(c, False) for c in col.raw]
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
    label = latex_label(name)
    switch, scale, sep, _ = size
    caption_pt = _caption_height_pt(caption) if caption else 0.0
    notes_text = _latex_escape("; ".join(notes) + ".") if notes else ""
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
                lines.append(rf"\caption{{{_latex_escape(caption)}}}")
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
