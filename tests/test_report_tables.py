"""The report's tables as a reader of the paper sees them: every row of a long table printed
(really compiled by pdflatex), every part of a split table saying which row it is, small tables
kept whole, rounded numbers that look rounded, and missing values and flags shown alike in the
LaTeX, HTML and Markdown tables."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_print import _compile, _header_cells, _overfull, require  # noqa: E402

from pipeline.report.columns import column_meta  # noqa: E402
from pipeline.report.core import ReportWriter, format_number  # noqa: E402
from pipeline.report.html import html_table  # noqa: E402
from pipeline.report.latex import FLOAT_HEIGHT_PT, PAGE_HEIGHT_PT, latex_table  # noqa: E402
from pipeline.report.latex_text import wrap_words  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def _tabulars(tex: str) -> int:
    return tex.count(r"\begin{tabular}{")


def _floats(tex: str) -> list[str]:
    return re.findall(r"\\begin\{table\}.*?\\end\{table\}", tex, flags=re.S)


def _body_rows(float_tex: str) -> list[str]:
    """The body rows of every tabular of one float."""
    rows = []
    for body in re.findall(r"\\midrule\n(.*?)\\bottomrule", float_tex, flags=re.S):
        rows += [line for line in body.splitlines() if line.strip()]
    return rows


def _errata_like(n_rows: int = 177) -> pd.DataFrame:
    """The shape of independent_sets' errata_tables_7: two labels, a printed and an exact
    count of up to 32 digits (compared digit by digit), a flag, a kind, a relative error."""
    rng = np.random.default_rng(7)
    exact = [str(int(rng.integers(10 ** 8, 10 ** 9))) * (1 + i % 4) for i in range(n_rows)]
    printed = [e if i % 5 else e[:-1] + "0" for i, e in enumerate(exact)]
    return pd.DataFrame({
        "table": [f"Table 7.{1 + i % 3}" for i in range(n_rows)],
        "entry": [f"row{i:03d}" for i in range(n_rows)],
        "printed": printed, "exact": exact, "agree": [p == e for p, e in zip(printed, exact)],
        "kind": ["exact" if p == e else "rounding" for p, e in zip(printed, exact)],
        "relative_error": [0.0 if p == e else 1e-9 * (1 + i) for i, (p, e)
                           in enumerate(zip(printed, exact))]})


def _nu_like(n_rows: int = 132) -> pd.DataFrame:
    """The shape of inferential_nu: constant prior and mechanism, then the graph, n_nodes,
    node, eps and J_effective that tell its rows apart (only all five together), then values."""
    rng = np.random.default_rng(3)
    graphs = ["bethe", "path", "cycle", "grid", "tree", "star"]
    df = pd.DataFrame({"prior": "ising", "mechanism": "worst_case",
                       "graph": [graphs[i % 6] for i in range(n_rows)],
                       "n_nodes": [5 + (i // 6) % 4 for i in range(n_rows)],
                       "node": [i % 3 for i in range(n_rows)],
                       "eps": [0.1 if (i // 24) % 2 else 1.0 for i in range(n_rows)],
                       "J_effective": [round(0.1 * (i // 48), 1) + 0.01 * (i % 2)
                                       for i in range(n_rows)]})
    for name in ("h", "nu", "nu_over_eps", "nu_affiliated", "nu_influence_bound",
                 "gamma_spectral_norm", "gamma_spectral_radius", "gamma_max_row_sum",
                 "row_sum_bound"):
        df[name] = rng.random(n_rows) * 10
    assert not df.duplicated(["graph", "n_nodes", "node", "eps", "J_effective"]).any()
    assert df.duplicated(["graph", "n_nodes", "node", "eps"]).any()
    return df


# --------------------------------------------------------------------------- long tables
def test_a_long_table_is_cut_into_floats_that_each_fit_a_page():
    """177 rows were one float (about 2,000 pt of a 550 pt page). Now every float's rows fit
    the page by the writer's estimate, each row is in exactly one run per column part, and the
    later floats say which rows they hold."""
    df = _errata_like()
    tex = latex_table(df, "Errata for Tables 7.1-7.3", "errata_tables_7",
                      experiment="independent_sets")
    floats = _floats(tex)
    assert len(floats) >= 4, len(floats)
    assert r"\caption{" in floats[0] and all(r"\caption{" not in f for f in floats[1:])
    assert all(re.search(r"continued \(\d+ of \d+; rows \d+--\d+ of 177\)", f)
               for f in floats[1:])
    n_parts = len({tuple(_header_cells(f)) for f in floats})
    assert n_parts == 2  # printed and exact beside the keys; agree, kind, error beside them
    seen = {}
    for f in floats:
        for row in _body_rows(f):
            label = re.search(r"row\d{3}", row).group(0)
            seen[label] = seen.get(label, 0) + 1
    assert seen == {f"row{i:03d}": n_parts for i in range(177)}
    # rows per float: at \small (11 pt a line) a page holds at most about 45 lines
    assert max(len(_body_rows(f)) for f in floats) <= PAGE_HEIGHT_PT / 11
    assert FLOAT_HEIGHT_PT < PAGE_HEIGHT_PT


@pytest.mark.latex
@pytest.mark.parametrize("preamble", [
    "\\documentclass{article}\n\\usepackage{graphicx}\n\\usepackage{amsmath}",
    "\\documentclass[twocolumn]{article}\n\\usepackage{graphicx}"])
def test_long_tables_print_every_row(tmp_path, preamble):
    """Compiled by pdflatex as the user trial did: no 'Float too large' (the old writer's
    errata table was too large by 1452 pt and about 118 of its 177 rows never appeared) and
    every row of every part in the PDF's text."""
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(shutil.which("pdftotext") is not None, "pdftotext (poppler-utils)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    errata = _errata_like()
    nu = _nu_like()
    nu["graph"] = [f"g{i:03d}" for i in range(len(nu))]  # a text to find each row by
    files = []
    for name, df, exp in (("errata", errata, "independent_sets"), ("nu", nu, "inferential")):
        path = tmp_path / f"{name}.tex"
        path.write_text(latex_table(df, f"The {name} table", name, experiment=exp))
        files.append(path)
    proc = _compile(files, tmp_path, preamble)
    log = (tmp_path / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    assert "Float too large" not in log, re.findall(r"Float too large.*", log)
    assert not _overfull(log), _overfull(log)
    text = subprocess.run(["pdftotext", "-layout", str(tmp_path / "tables.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    for prefix, tex in (("row", files[0].read_text()), ("g", files[1].read_text())):
        parts = len({tuple(_header_cells(f)) for f in _floats(tex)})
        found = re.findall(rf"\b{prefix}(\d{{3}})\b", text)
        counts = pd.Series(found).value_counts()
        assert len(counts) == 177 if prefix == "row" else len(counts) == 132, (prefix, len(counts))
        assert (counts == parts).all(), (prefix, counts[counts != parts])


# --------------------------------------------------------------------------- split columns
def test_every_part_repeats_every_identifying_column():
    """inferential_nu's parts 3-7 repeated only 'prior & mechanism & graph' (no n, node, eps,
    J), so their rows could not be told apart. Now every part repeats the columns that
    identify a row (the constant prior and mechanism only in the first)."""
    df = _nu_like()
    tex = latex_table(df, "nu", "inferential_nu", experiment="inferential")
    heads = [column_meta("inferential", c).header for c in
             ("graph", "n_nodes", "node", "eps", "J_effective")]
    parts = _tabulars(tex)
    assert parts >= 2

    def bare(text):
        return re.sub(r"\s+", "", text)

    first = 0
    for part in range(parts):  # every tabular of every float
        cells = [bare(c) for c in _header_cells(tex, part)]
        leading = cells[0] == bare(column_meta("inferential", "prior").header)
        first += leading  # the constant prior and mechanism lead the first part only
        lead = cells[2:7] if leading else cells[:5]
        assert lead == [bare(h) for h in heads], (part, cells)
    assert 0 < first < parts


def test_edge_dp_parts_repeat_the_numeric_parameter_n():
    """edge_dp_loss's parts repeated 'prior & mechanism & class' but not n."""
    n_rows = 24
    df = pd.DataFrame({"prior": ["er", "hive", "ergm", "sbm"] * 6,
                       "mechanism": (["laplace_edge_count"] * 4 + ["randomized_response"] * 4) * 3,
                       "edge_class": "any", "eps": 1.0,
                       "n": [3 + i // 8 for i in range(n_rows)],
                       "method": "closed_form"})
    for name in ("p_edge", "alpha", "loss", "loss_se", "eps_plus_alpha", "ergm_R", "ergm_2zeta"):
        df[name] = np.linspace(0.1, 2.0, n_rows)
    df["lemma_holds"] = True
    tex = latex_table(df, "loss", "edge_dp_loss", experiment="edge_dp")
    n_head = column_meta("edge_dp", "n").header
    parts = _tabulars(tex)
    assert parts >= 2
    for part in range(parts):
        cells = [re.sub(r"\s+", " ", c) for c in _header_cells(tex, part)]
        assert n_head in cells and "prior" in cells and "mechanism" in cells, (part, cells)


def test_small_tables_stay_whole_and_compared_columns_stay_together():
    """bound_ratios (3 x 4) was cut in 2 parts because the one-word header
    median_ratio_to_optimal could not wrap; lattice_limits (6 x 5) likewise; the errata put
    the printed and the exact value in different parts."""
    import pipeline.report.composition  # noqa: F401  (describes bound_ratios' columns)

    bound_ratios = pd.DataFrame({"bound": ["eps_kov_bound", "eps_drv", "eps_basic"],
                                 "median_ratio_to_optimal": [1.036926051152403, 2.04237, 1.63676],
                                 "max_ratio_to_optimal": [25.85599220606786, 22033.777085488062,
                                                          318.6064880189593],
                                 "min_ratio_to_optimal": [1.0, 1.1224320552181881, 1.0]})
    tex = latex_table(bound_ratios, "ratios", "bound_ratios", experiment="composition")
    assert _tabulars(tex) == 1 and "parts" not in tex.splitlines()[1], tex.splitlines()[1]
    # headed by its description now (report/composition.py), which wraps at its spaces
    assert [c.replace(" ", "") for c in _header_cells(tex)][1].startswith("medianofbound/optimal")
    limits = pd.DataFrame({"base": ["square", "square", "triangular", "triangular", "hexagonal",
                                    "hexagonal"], "insertions": [0, 1] * 3,
                           "lattice": [f"C^{k}({b})" for b in ("sq", "tri", "hex") for k in (0, 1)],
                           "energy_per_vertex_limit": np.linspace(0.5, 1.5, 6) + 1e-9,
                           "spanning_tree_entropy_limit": np.linspace(1.1, 2.2, 6) + 1e-9})
    tex = latex_table(limits, "limits", "lattice_limits", experiment="lattice")
    assert _tabulars(tex) == 1, tex.splitlines()[1]
    tex = latex_table(_errata_like(12), "errata", "errata_tables_7",
                      experiment="independent_sets")
    parts = [_header_cells(tex, p) for p in range(_tabulars(tex))]
    assert any("printed" in p and "exact" in p for p in parts), parts


def test_headers_break_long_identifiers_after_underscores():
    assert wrap_words("median_ratio_to_optimal", 48.0) == ["median_", "ratio_to_", "optimal"]
    assert wrap_words("J_effective", 48.0) == ["J_effective"]  # short: stays whole
    assert wrap_words("number of individuals n", 48.0) == ["number of", "individuals", "n"]


# --------------------------------------------------------------------------- digits
@pytest.mark.parametrize("value, digits, shown", [
    (1.000001367882248, 6, "1.00000"), (2.498695362093268, 6, "2.49870"),
    (0.0999981, 3, "0.100"), (0.1, 3, "0.1"), (0.5, 6, "0.5"), (3.0, 6, "3"),
    (22033.777085488062, 6, "22033.8"), (999999.7, 6, "1.00000e+06"), (2.5e-7, 3, "2.5e-07"),
    (-1.0000004, 6, "-1.00000"), (123456.7, 6, "123457")])
def test_a_rounded_float_keeps_its_significant_digits(value, digits, shown):
    assert format_number(value, "float", digits) == shown


def test_rounded_and_exact_values_differ_in_every_format(tmp_path):
    """At 3 digits 0.0999981 printed '0.1', the same as a bound of exactly 0.1; at 6 digits
    1.000001367882248 printed '1'. LaTeX, HTML and Markdown (12 digits) alike."""
    df = pd.DataFrame({"bound": [0.1, 0.1], "value": [0.0999981, 0.1],
                       "ratio": [1.000001367882248, 0.5]})
    out = ReportWriter(tmp_path)
    out.table("t", df, sig_digits=3)
    tex = (tmp_path / "t.tex").read_text()
    assert "0.1 & 0.100 & 1.00 \\\\" in tex and "0.1 & 0.1 & 0.5 \\\\" in tex
    page = html_table(df, 3, None)
    assert '<td class="num">0.100</td>' in page and '<td class="num">1.00</td>' in page
    md = (tmp_path / "t.md").read_text()
    assert "| 0.1 | 0.0999981 | 1.00000136788 |" in md and "| 0.1 | 0.1 | 0.5 |" in md
    ReportWriter(tmp_path).table("u", pd.DataFrame({"x": [1 / 3 + 1e-13]}), float_format="%.4g")
    assert "| 0.3333 |" in (tmp_path / "u.md").read_text()
    ReportWriter(tmp_path).table("v", pd.DataFrame({"x": [1 + 1e-9]}), float_format="%.4g")
    assert "| 1.000 |" in (tmp_path / "v.md").read_text()


# --------------------------------------------------------------------------- nulls, flags
def test_missing_values_and_flags_read_the_same_in_every_format(tmp_path):
    """A null printed as a blank cell ('864 &  \\\\' for a spanning-tree count not computed),
    and a flag was 'True' in Markdown but 'yes' in LaTeX and HTML."""
    df = pd.DataFrame({"L1": [12, 4], "spanning_trees": ["864", None],
                       "p_edge": [0.3, np.nan], "lemma_holds": [True, None],
                       "note": ["a", None]})
    out = ReportWriter(tmp_path, experiment="lattice")
    out.table("t", df)
    tex = (tmp_path / "t.tex").read_text()
    assert "12 & 864 & 0.3 & yes & a \\\\" in tex
    assert "4 & {---} & {---} & --- & --- \\\\" in tex  # S columns: braced
    assert "no value (not computed, or not applicable to that row)" in tex
    page = html_table(df, 6, "lattice")
    assert page.count('<td class="num">\u2014</td>') == 2 and page.count("<td>\u2014</td>") == 2
    assert "<td>yes</td>" in page and "no value" in page
    md = (tmp_path / "t.md").read_text()
    assert "| 12 | 864 | 0.3 | yes | a |" in md
    assert "| 4 | \u2014 | \u2014 | \u2014 | \u2014 |" in md and "no value" in md
    assert "True" not in md
    clean = pd.DataFrame({"x": [1.5], "flag": [False]})
    ReportWriter(tmp_path).table("c", clean)
    assert "no value" not in (tmp_path / "c.tex").read_text()
    assert (tmp_path / "c.md").read_text().splitlines()[-1] == "| 1.5 | no |"


# --------------------------------------------------------------------------- maths in text
def test_maths_characters_become_one_group_and_script_runs_one_script():
    """Each maths character was its own $...$: "α²" gave $\\alpha$$^2$, whose $$ opens display
    maths, and a power of ten with superscript digits (10⁻⁶) would be a double superscript."""
    from pipeline.report.latex_text import latex_escape

    assert latex_escape("10⁻⁶") == "10$^{-6}$"
    assert latex_escape("2.5×10⁻⁷") == "2.5$\\times$10$^{-7}$"
    assert latex_escape("α²") == "$\\alpha ^{2}$"
    assert latex_escape("x₁₂ ≤ ∞") == "x$_{12}$ $\\le$ $\\infty$"
    assert "$$" not in latex_escape("αβ≤²³₁")


@pytest.mark.latex
def test_maths_and_powers_of_ten_in_a_caption_compile(tmp_path):
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(shutil.which("pdftotext") is not None, "pdftotext (poppler-utils)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    df = pd.DataFrame({"x": [1, 2]})
    path = tmp_path / "maths.tex"
    path.write_text(latex_table(df, "total δ = 10⁻⁶, 2.5×10⁻⁷; α² and x₁₂ ≤ ∞; αβ", "maths"))
    proc = _compile([path], tmp_path, "\\documentclass{article}")
    log = (tmp_path / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0 and "! " not in log, log[-3000:]
    text = subprocess.run(["pdftotext", str(tmp_path / "tables.pdf"), "-"], capture_output=True,
                          text=True, check=True).stdout
    assert "10−6" in text.replace("\n", "") or "10-6" in text.replace("\n", ""), text


@pytest.mark.latex
def test_a_thousand_row_table_still_compiles(tmp_path):
    """failed_tasks holds up to 1,000 rows of wrapped error text: cut into 91 page-sized floats,
    pdflatex stopped with 'Too many unprocessed floats' and wrote no PDF. The LaTeX table now
    holds the first MAX_LATEX_ROWS rows and says so; the CSV has every row."""
    from pipeline.report.latex import MAX_LATEX_ROWS

    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    failed = pd.DataFrame({"x": range(1000), "error": [
        f"ValueError: calibration failure requested at x={i} (pipeline/experiments/"
        "calibration.py:48 in run)" for i in range(1000)]})
    path = tmp_path / "failed.tex"
    path.write_text(latex_table(failed, "Failed tasks", "failed_tasks", experiment="calibration"))
    assert f"the first {MAX_LATEX_ROWS:,} of 1,000 rows" in path.read_text()
    proc = _compile([path], tmp_path, "\\documentclass{article}\n\\usepackage{graphicx}")
    log = (tmp_path / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0 and "Too many unprocessed floats" not in log, log[-3000:]


# --------------------------------------------------------------------------- caption numbers
@pytest.mark.parametrize("value, shown", [
    (999.4, "999"), (999.9, "1.00×10³"), (1e3, "10³"), (0.00999, "9.99×10⁻³"),
    (0.009999, "0.0100"), (0.01, "0.01"), (1e-6, "10⁻⁶"), (-1e-6, "-10⁻⁶"),
    (2.5e-7, "2.5×10⁻⁷"), (-2.5e-7, "-2.5×10⁻⁷"), (-999.9, "-1.00×10³"), (0.5, "0.5"),
    (20.0, "20"), (12345.0, "1.23×10⁴"), (0.0999981, "0.100"), (0.0, "0")])
def test_caption_numbers_are_rounded_before_their_form_is_chosen(value, shown):
    """999.9 at 3 digits was chosen plain (under 1000) and then rounded by %g into '1e+03';
    -1e-6 was '-1×10⁻⁶' beside 1e-6's '10⁻⁶'. Rounded values keep their trailing zeros, as in
    the tables; a negative number is its positive one with the module's ASCII '-'."""
    from pipeline.report.style import caption_number

    assert caption_number(value) == shown
    if value > 0:
        assert caption_number(-value) == "-" + shown


# --------------------------------------------------------------------------- scripts in LaTeX
def _script_characters(text: str) -> set[str]:
    import unicodedata

    return {ch for ch in text if ord(ch) > 0x7F and any(
        word in unicodedata.name(ch, "") for word in ("SUPERSCRIPT", "SUBSCRIPT",
                                                        "MODIFIER LETTER SMALL",
                                                        "MODIFIER LETTER CAPITAL"))}


def test_every_script_character_the_reports_write_becomes_a_latex_script():
    """ⁿ and ⁱ (tr(T_mⁿ), x⁽ⁱ⁾) were written '?' in the LaTeX tables: the map of super- and
    subscripts knew digits, signs and ᵏ only. Every such character in the report modules and
    the experiments' descriptions (which become headers and notes) must be in it."""
    from pipeline.report.latex_text import SUBSCRIPTS, SUPERSCRIPTS, latex_escape
    from pipeline.report.style import SUPERSCRIPT_DIGITS

    root = Path(__file__).resolve().parents[1] / "pipeline"
    used = set()
    for folder in ("report", "experiments"):
        for file in sorted((root / folder).glob("*.py")):
            if file.name != "latex_text.py":  # where the maps are
                used |= _script_characters(file.read_text())
    used |= _script_characters("0123456789-".translate(SUPERSCRIPT_DIGITS))
    used |= {"ⁿ", "ⁱ"}
    assert used - set(SUPERSCRIPTS) - set(SUBSCRIPTS) == set()
    for ch in used:
        latex = latex_escape(f"x{ch}")
        assert "?" not in latex and re.fullmatch(r"x\$[_^]\{.+\}\$", latex), (ch, latex)
    assert latex_escape("tr(T_mⁿ), x⁽ⁱ⁾ and y₍ₖ₊₁₎") == \
        r"tr(T\_m$^{n}$), x$^{(i)}$ and y$_{(k+1)}$"


@pytest.mark.latex
def test_every_super_and_subscript_compiles(tmp_path):
    """Each character of the map, in a caption and in a table cell, compiled by pdflatex."""
    from pipeline.report.latex_text import SUBSCRIPTS, SUPERSCRIPTS

    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    chars = [*SUPERSCRIPTS, *SUBSCRIPTS]
    df = pd.DataFrame({"label": [f"x{ch} ({ord(ch):04X})" for ch in chars],
                       "value": range(len(chars))})
    tex = latex_table(df, "Scripts: tr(T_mⁿ), x⁽ⁱ⁾, 2(Φε)ᵢ, 10⁻⁶, y₍ₖ₊₁₎", "scripts")
    assert "?" not in tex
    (tmp_path / "scripts.tex").write_text(tex)
    proc = _compile([tmp_path / "scripts.tex"], tmp_path, "\\documentclass{article}")
    log = (tmp_path / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0 and "! " not in log, log[-3000:]


def test_markdown_cells_show_error_text_as_it_is():
    """An error's text in failed_tasks.md ('in <lambda>', *x*, _u_) was read as markup by a
    Markdown viewer: a tag vanished, words turned italic. Rendered by a CommonMark parser
    (markdown-it-py, with tables and strikethrough, as GitHub renders them), each cell now
    shows exactly the text stored."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    from pipeline.report.core import _markdown

    texts = ["ValueError: bad <b>x</b> *y* _u_ in <lambda> [core.py:3]", "a|b", "back\\slash",
             "x & y", "&amp; &lt;", "`tick` ``two``", "snake_case_name", "_lead", "trail_",
             "**bold** __strong__", "[link](http://x) ![img](y)", "1.5e-07", "# no heading",
             "<!-- comment -->", "a\\*b", "~~struck~~"]

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.cells, self.inside = [], False

        def handle_starttag(self, tag, attrs):
            if tag == "td":
                self.inside = True
                self.cells.append("")

        def handle_endtag(self, tag):
            if tag == "td":
                self.inside = False

        def handle_data(self, data):
            if self.inside:
                self.cells[-1] += data

    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(
        _markdown(pd.DataFrame({"error": texts}), "%.6g"))
    parser = Cells()
    parser.feed(html)
    assert parser.cells == texts, html
