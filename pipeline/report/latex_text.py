"""Text in LaTeX tables: how wide it sets in Computer Modern (T1, 10 pt; the glyph widths of
``ecrm1000``), how a number's siunitx ``table-format`` reads, how a header wraps, and how plain
text (Greek letters, super- and subscripts, maths symbols, LaTeX's special characters) is
escaped. The table layout that measures with these is ``latex.py``."""

from __future__ import annotations

import functools
import logging
import re

HEADER_MAX_LINES = 4
IDENT_MIN_PT = 64.0  # an identifier in a header wider than this (and its column) breaks at '_'

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
    """Estimated width (pt, 10 pt Computer Modern) of ``text`` as :func:`latex_escape` sets it
    (an upper bound: superscripts are counted at full size)."""
    return sum(_CHAR_PT.get(ch, _OTHER_PT) for ch in str(text))


GROUP_PT = 1.67  # siunitx's thin space between groups of three digits


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
    width = 5.0 * int(whole) + (7.78 if sign else 0.0) + GROUP_PT * _separators(int(whole))
    if decimals:
        width += 2.78 + 5.0 * int(decimals) + GROUP_PT * _separators(int(decimals))
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


def latex_escape(text: str) -> str:
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
SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᵀ",
                        "0123456789-+=()abcdefghijklmnoprstuvwxyzT"))
SUBSCRIPTS = {**{chr(0x2080 + d): str(d) for d in range(10)},
              **dict(zip("₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", "+-=()aehijklmnoprstuvx"))}
_SCRIPT_RUN = re.compile(f"[{''.join(SUPERSCRIPTS)}]+|[{''.join(SUBSCRIPTS)}]+")


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
            script = "^" if chars[0] in SUPERSCRIPTS else "_"
            table = SUPERSCRIPTS if script == "^" else SUBSCRIPTS
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


def latex_wrappable(text: str) -> str:
    """``text`` escaped, with break points after ``/ _ . , : =`` inside long words (paths,
    identifiers, error messages), and every 12 characters of a run without them, for a cell
    that wraps."""
    words = re.split(r"(\s+)", text)
    out = []
    for word in words:
        if len(word) > 16:
            pieces = [chunk for piece in re.split(r"(?<=[/_.,:=])", word) if piece
                      for chunk in _slices(piece, 12)]  # unbroken runs: every 12 characters
            out.append(r"\allowbreak{}".join(latex_escape(p) for p in pieces))
        else:
            out.append(latex_escape(word))
    return "".join(out)


def _slices(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [text]


def latex_label(name: str, experiment: str | None = None) -> str:
    """A valid, unescaped ``\\label`` key: letters, digits and ``:._-`` kept, others ``-``;
    ``tab:EXPERIMENT:NAME`` with an experiment: every report has a ``status`` table, and two
    experiments' tables in one paper defined ``tab:status`` twice."""
    key = name if experiment is None else f"{experiment}:{name}"
    return "tab:" + re.sub(r"[^A-Za-z0-9:._-]", "-", key)


# --------------------------------------------------------------------------- columns
def siunitx_format(cells: list[str]) -> str:
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


def latex_cell(text: str, numeric: bool) -> str:
    from pipeline.report.core import NULL_MARK

    if text == NULL_MARK:  # no value: an em dash (braced: text in an S column)
        return "{---}" if numeric else "---"
    if not numeric:
        return latex_escape(text)
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
