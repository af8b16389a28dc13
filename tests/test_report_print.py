"""Print-readiness of every family's report (issue 16, must-haves 4-6), on real tools:
PDF fonts (parsed, and poppler's ``pdffonts``), figure sizes and labels, LaTeX tables compiled
by the system ``pdflatex`` (booktabs, siunitx), and the HTML report in headless Chromium.

The reports of all families are built once per module from small grids stored as a sweep
stores them (tests/report_families.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from report_families import SMALL_GRIDS, build_all, store_small  # noqa: E402

from pipeline.report.build import build_report  # noqa: E402
from pipeline.report.core import format_number, latex_table  # noqa: E402
from pipeline.report.html import ERRATA_SECTIONS  # noqa: E402
from pipeline.report.style import (DOUBLE_COLUMN_IN, MAX_CURVES, SINGLE_COLUMN_IN,  # noqa: E402
                                   FigureStyleError, curve_style, decade_ticks, new_figure,
                                   save_figure)

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "scripts/install_report_test_deps.sh (make test runs it)"
pytestmark = pytest.mark.timeout(900)


def require(tool_ok: bool, what: str):
    """Skip with the reason where a system part is absent; under CI it must be there (the CI
    script installs it), so there its absence fails instead of hiding the test."""
    if tool_ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing on CI: {INSTALL} should have installed it")
    pytest.skip(f"{what} not installed; {INSTALL}")


@pytest.fixture(scope="module")
def family_reports(tmp_path_factory) -> dict[str, Path]:
    return build_all(tmp_path_factory.mktemp("results"))


def all_files(reports, pattern):
    return [f for d in reports.values() for f in sorted(d.glob(pattern))]


# --------------------------------------------------------------------------- figures
def _pdf_fonts(pdf: bytes) -> tuple[set, int]:
    """Font subtypes named in the PDF's font dictionaries, and the count of embedded
    TrueType font programs (``/FontFile2``). Matplotlib writes them as plain objects."""
    return set(re.findall(rb"/Subtype\s*/(Type3|TrueType|Type1|Type0|CIDFontType2)", pdf)), \
        len(re.findall(rb"/FontFile2", pdf))


def test_every_report_pdf_embeds_truetype_not_type3(family_reports):
    pdfs = all_files(family_reports, "*.pdf")
    table_only = {"composition_hetero", "clique_graph", "independent_sets_bounds"}
    for name, folder in family_reports.items():  # every other family draws figures
        assert (name in table_only) != bool(list(folder.glob("*.pdf"))), name
    for pdf in pdfs:
        subtypes, embedded = _pdf_fonts(pdf.read_bytes())
        assert b"Type3" not in subtypes, pdf
        assert subtypes & {b"TrueType", b"CIDFontType2"} and embedded >= 1, (pdf, subtypes)


def test_pdffonts_reports_no_type3_and_all_embedded(family_reports):
    require(shutil.which("pdffonts") is not None, "pdffonts (poppler-utils)")
    for pdf in all_files(family_reports, "*.pdf"):
        out = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, timeout=30,
                             check=True).stdout.splitlines()
        fonts = out[2:]  # after the header and the rule
        assert fonts, pdf
        for line in fonts:
            assert "Type 3" not in line, (pdf, line)
            # columns: name type encoding emb sub uni object-id; emb must be yes
            assert re.search(r"\s(yes)\s+(yes|no)\s+(yes|no)\s+\d+\s+\d+$", line), (pdf, line)


def test_every_figure_is_png_pdf_svg_at_a_column_width(family_reports):
    import matplotlib.image as mpimg

    widths = {round(SINGLE_COLUMN_IN * 300), round(DOUBLE_COLUMN_IN * 300)}
    for png in all_files(family_reports, "*.png"):
        pdf, svg = png.with_suffix(".pdf"), png.with_suffix(".svg")
        assert pdf.exists() and svg.exists(), png
        pixels = mpimg.imread(png)
        assert pixels.shape[1] in widths, (png.name, pixels.shape)  # 3.4 in or 7 in at 300 dpi
        assert pixels.std() > 0.05  # not a blank canvas
        box = re.search(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)", pdf.read_bytes())
        assert float(box.group(1)) in (pytest.approx(SINGLE_COLUMN_IN * 72),
                                       pytest.approx(DOUBLE_COLUMN_IN * 72)), pdf
        head = svg.read_text()[:2000]
        assert re.search(r'width="(244\.8|504)pt"', head), svg


def test_issue_figures_use_mathtext_and_small_multiples(family_reports):
    """The figures the issue names: no literal C^1 or 'nu / eps' in their text."""
    svg = (family_reports["inferential"] / "inferential_nu_vs_J.svg").read_text()
    assert "nu / eps" not in svg and "nu/eps" not in svg
    lattice = family_reports["lattice"]
    for svg_file in lattice.glob("*.svg"):
        assert "C^1" not in svg_file.read_text(), svg_file


def test_save_figure_refuses_an_unlabelled_axis(tmp_path):
    fig, ax = new_figure("paper")
    ax.plot([1, 2], [3, 4])
    ax.set_xlabel("x only")
    with pytest.raises(FigureStyleError, match="unlabelled y axis"):
        save_figure(fig, tmp_path, "bad")
    assert not list(tmp_path.iterdir())  # nothing written
    fig, axes = new_figure("paper", ncols=2, sharey=True)
    for ax in axes:
        ax.plot([1, 2], [3, 4])
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")  # one label for the shared y axis labels the group
    assert save_figure(fig, tmp_path, "ok") == ["ok.png", "ok.pdf", "ok.svg"]


def test_rebuilding_a_figure_gives_the_same_bytes(tmp_path):
    """The README promises figures without a creation date, so that rebuilding a report gives
    the same bytes. The SVG's clip-path ids were salted at random (matplotlib's default), so
    every rebuild wrote a different SVG."""
    def draw(outdir):
        fig, ax = new_figure("paper")
        ax.plot([1, 2, 3], [3, 1, 2], label="a")
        ax.fill_between([1, 2, 3], [0, 1, 0], [1, 2, 1], alpha=0.2)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        outdir.mkdir()
        return save_figure(fig, outdir, "f")

    files = draw(tmp_path / "a")
    assert files == draw(tmp_path / "b")
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_save_figure_refuses_a_panel_of_more_than_max_curves(tmp_path):
    from pipeline.report.style import REFERENCE, legend_outside, panel_curves

    fig, ax = new_figure("paper")
    for i in range(MAX_CURVES + 1):
        ax.plot([1, 2, 3], [i, i + 1, i + 3], label=f"curve {i}", **curve_style(i))
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    legend_outside(fig)
    with pytest.raises(FigureStyleError, match=rf"more than {MAX_CURVES} curves in panel "
                                               rf"'panel 0' \({MAX_CURVES + 1} curves\)"):
        save_figure(fig, tmp_path, "crowded")
    assert not list(tmp_path.iterdir())  # nothing written
    # curves explained by a figure legend of proxies count as well as labelled ones
    fig, axes = new_figure("paper", ncols=2)
    for i in range(MAX_CURVES + 1):
        axes[1].plot([1, 2], [i, i + 2], color=curve_style(i)["color"])
    for ax in axes:
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    axes[1].set_title("right")
    with pytest.raises(FigureStyleError, match=r"'right' \(7 curves\)"):
        save_figure(fig, tmp_path, "crowded")
    # reference lines are not curves: axhline/axvline and lines drawn with gid="reference";
    # an error-bar series is one curve (its caps and bars are not)
    fig, ax = new_figure("paper")
    for i in range(MAX_CURVES - 1):
        ax.plot([1, 2, 3], [i, i + 1, i + 3], **curve_style(i))
    ax.errorbar([1, 2, 3], [0, 1, 2], yerr=[0.1, 0.2, 0.1], capsize=2, **curve_style(5))
    ax.axhline(0.5, color="k")
    ax.axvline(2.0, color="k")
    ax.plot([1, 3], [0, 9], color="grey", gid=REFERENCE)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    assert panel_curves(ax) == MAX_CURVES
    assert save_figure(fig, tmp_path, "six") == ["six.png", "six.pdf", "six.svg"]


def test_crowded_figures_become_small_multiples(family_reports):
    """The figures that drew more than MAX_CURVES curves in a panel: edge_dp's loss against n
    (hive: two edge classes x two mechanisms x loss and bound) is one panel per prior and
    mechanism now; the store holds both mechanisms (report_families.SMALL_GRIDS)."""
    assert set(SMALL_GRIDS["edge_dp"][0]["mechanism"]) == {"laplace_edge_count",
                                                           "randomized_response"}
    svg = (family_reports["edge_dp"] / "edge_dp_loss_vs_n.svg").read_text()
    titles = set(re.findall(r"<!-- (prior: [^>]*?) -->", svg))
    assert titles == {f"prior: {p}, {m}" for p in ("er", "hive")
                      for m in ("Laplace count", "rand. response")}, titles


def test_bayes_legends_use_mathtext(family_reports):
    svg = (family_reports["bayes_bounds"] / "delta_vs_N.svg").read_text()
    labels = re.findall(r"<!-- ((?:Beta-binomial|exponential) \(.*?\)) -->", svg)
    assert labels and all("$" in lab for lab in labels), labels
    assert r"$\alpha=" in svg and r"$\lambda=" in svg
    assert not re.search(r"(?<![\\$])\b(alpha|lam|c1|c2)=", svg)  # no plain alpha=5, lam=1


def test_save_figure_refuses_a_legend_over_the_data(tmp_path):
    from pipeline.report.style import legend_outside, panel_legend

    def labelled():
        fig, ax = new_figure("paper")
        ax.plot([1, 2], [3, 4], label="a curve")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        return fig, ax

    fig, ax = labelled()
    ax.legend(loc="upper left")
    with pytest.raises(FigureStyleError, match="legend lies over the data"):
        save_figure(fig, tmp_path, "inside")
    fig, ax = labelled()
    legend_outside(fig)
    save_figure(fig, tmp_path, "below")
    fig, ax = labelled()
    panel_legend(ax)
    save_figure(fig, tmp_path, "right")
    assert sorted(p.stem for p in tmp_path.glob("*.pdf")) == ["below", "right"]


def test_figure_sizes_per_style():
    for style, scale in (("paper", 1.0), ("slides", 1.6)):
        for span, width in (("single", SINGLE_COLUMN_IN), ("double", DOUBLE_COLUMN_IN)):
            fig, _ = new_figure(style, span=span)
            assert fig.get_figwidth() == pytest.approx(width * scale)
    fig, axes = new_figure("paper", ncols=3)
    assert fig.get_figwidth() == pytest.approx(DOUBLE_COLUMN_IN) and len(axes) == 3
    with pytest.raises(FigureStyleError, match="paper, slides"):
        new_figure("poster")


def _tick_texts(fig, axis):
    fig.canvas.draw()
    lo, hi = sorted(axis.get_view_interval())
    major = [t.get_text() for t, v in zip(axis.get_majorticklabels(), axis.get_majorticklocs())
             if lo <= v <= hi]
    minor = [t.get_text() for t in axis.get_minorticklabels()]
    return major, minor


def test_log_axes_get_plain_decade_ticks():
    fig, ax = new_figure("paper")
    ax.loglog([1e-3, 1e2], [4.0, 9.0])  # x: five decades; y: under one decade
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    decade_ticks(ax)
    major, minor = _tick_texts(fig, ax.xaxis)
    assert major == [rf"$\mathdefault{{10^{{{e}}}}}$" for e in range(-3, 3)]
    assert not any(minor)
    major, minor = _tick_texts(fig, ax.yaxis)
    assert major and all(re.fullmatch(r"\d+(\.\d+)?", t) for t in major), major  # '4', '5', ...
    assert not any(minor) and not any("times" in t for t in major)


def test_curves_differ_in_marker_and_line_style_not_only_colour():
    styles = [curve_style(i) for i in range(MAX_CURVES)]
    for i in range(MAX_CURVES):
        for j in range(i):
            assert styles[i]["marker"] != styles[j]["marker"]
            assert styles[i]["linestyle"] != styles[j]["linestyle"]
            assert styles[i]["color"] != styles[j]["color"]


# Machado, Oliveira & Fernandes (2009), full-severity dichromacy, applied to linear sRGB
_CVD = {"protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                       [-0.003882, -0.048116, 1.051998]],
        "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                         [-0.011820, 0.042940, 0.968881]],
        "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                       [0.004733, 0.691367, 0.303900]]}


def _min_delta_e(colours, matrix) -> float:
    """Smallest CIE76 colour difference between any two colours as seen through ``matrix``."""
    from matplotlib.colors import to_rgb

    def lab(colour):
        c = np.asarray(to_rgb(colour))
        linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        linear = np.clip(np.asarray(matrix) @ linear, 0, 1)
        xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                        [0.0193, 0.1192, 0.9505]]) @ linear / [0.95047, 1.0, 1.08883]
        f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
        return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])

    labs = [lab(c) for c in colours]
    return min(np.linalg.norm(a - b) for i, a in enumerate(labs) for b in labs[:i])


def test_palette_stays_distinct_under_colour_blindness():
    import matplotlib

    ours = [curve_style(i)["color"] for i in range(MAX_CURVES)]
    default = [matplotlib.colormaps["tab10"](i) for i in range(MAX_CURVES)]
    for kind, matrix in _CVD.items():
        assert _min_delta_e(ours, matrix) > 12, kind
    # the check can fail: matplotlib's default cycle merges colours for protanopes
    assert _min_delta_e(default, _CVD["protanopia"]) < 12


# --------------------------------------------------------------------------- LaTeX tables
def test_latex_table_digits_alignment_label_headers():
    df = pd.DataFrame({"bound": ["eps_kov_bound", "eps_drv"],
                       "median_ratio": [0.0999980951608, 12345.678901],
                       "k": [3, 1000000], "count": ["123456789012345678901234567890", "7"],
                       "flag": [True, False]})
    tex = latex_table(df, "Bound / optimal, 50% of rows", "bound_ratios", sig_digits=6,
                      experiment="composition")
    assert r"\label{tab:composition:bound_ratios}" in tex  # unescaped, the experiment's own
    # column by column (this table is cut in parts to fit the page: see test_wide_tables...;
    # the label "bound" leads each part)
    specs = " ".join(re.findall(r"\\begin\{tabular\}\{([^@]*?)\}\n", tex))
    assert specs == "l S[table-format=5.7] S[table-format=7] l S[table-format=30] l", specs
    assert "0.0999981 & 3" in tex and "12345.7 & 1000000" in tex
    assert "123456789012345678901234567890" in tex  # exact integers stay whole by default
    assert r"eps\_kov\_bound" in tex and r"50\%" in tex and "yes" in tex
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert "{median_ratio}" in tex.replace(r"\_", "_")  # S-column headers are braced text
    assert format_number("123456789012345678901234567890", "exact", 6, "scientific") == "1.23457e+29"
    assert format_number(float("inf"), "float", 6) == "inf"
    from pipeline.report.core import column_kind

    assert column_kind(["1.4825", "", None]) == "decimal"  # printed digits: numeric, verbatim
    assert format_number("0.80766490", "decimal", 3) == "0.80766490"
    assert column_kind(["12", 7]) == "exact" and column_kind(["a", 1.0]) == "text"
    assert format_number(2.5e-7, "float", 3) == "2.5e-07"


def _header_cells(tex: str, part: int = 0) -> list[str]:
    """The header cells of a generated table's ``part``-th tabular as plain text: a header
    stacked on several lines joined by spaces, the braces of S columns and ``\_`` undone."""
    row = tex.split("\\toprule\n")[part + 1].split(" \\\\\n", 1)[0]
    cells = []
    for cell in row.split(" & "):
        cell = re.sub(r"\\begin\{tabular\}\[b\]\{@\{\}[lc]@\{\}\}|\\end\{tabular\}", "", cell)
        cell = cell.replace("\\\\", " ").replace("\\_", "_")
        cells.append(cell[1:-1] if cell.startswith("{") and cell.endswith("}") else cell)
    return cells


def test_table_headers_come_from_the_column_declarations(tmp_path):
    """Headers are read from what composition really declares (``document()`` entries and
    ``Param.doc``): 'description (unit)', the unit left out for dimensionless '1'."""
    from pipeline.experiments.base import get_experiment
    from pipeline.report.core import ReportWriter
    from pipeline.report.html import html_table

    exp = get_experiment("composition")
    assert exp.column_docs["eps_basic"] == ("basic composition: k eps", "nat")  # declared
    assert exp.column_docs["eps"] == ("", "nat")  # unit only: the description is Param.doc
    assert exp.column_docs["delta"] == ("", "1") and exp.param_map["delta"].doc == "per-step delta"
    df = pd.DataFrame({"delta": [0.1], "eps": [0.5], "eps_basic": [1.5], "derived": [1.5]})
    out = ReportWriter(tmp_path, experiment="composition")
    out.table("t", df)
    tex = (tmp_path / "t.tex").read_text()
    # eps's Param.doc is longer than 40 characters: the header keeps the name (with its unit)
    # and a note under the table says it
    assert _header_cells(tex) == ["per-step delta", "eps (nat)", "basic composition: k eps (nat)",
                                  "derived"]
    assert (r"{\footnotesize\raggedright eps: per-step epsilon of each (eps, delta)-DP "
            r"mechanism (nat).\par}") in tex
    page = html_table(df, 6, "composition")
    heads = re.findall(r"<th [^>]*>([^<]*)</th>", page)
    assert heads == ["per-step delta", "eps (nat)", "basic composition: k eps (nat)", "derived"]


def test_parameter_units_reach_the_headers(tmp_path):
    """Parameters declare units too (``("", unit)`` entries beside their Param.doc)."""
    from pipeline.report.core import ReportWriter

    ReportWriter(tmp_path, experiment="inferential").table(
        "p", pd.DataFrame({"eps": [0.5], "J": [0.3], "prior": ["ising"], "n": [6]}))
    # eps in nats, J dimensionless (unit 1: not shown), prior a label (no unit); n's doc is
    # longer than a header: the name stays and a note says it
    tex = (tmp_path / "p.tex").read_text()
    assert _header_cells(tex) == ["differential privacy eps (nat)",
                                  r"Ising coupling (J $\ge$ 0: affiliated)",
                                  "prior over the bits", "n"]
    assert "n: number of nodes (path, cycle" in tex
    ReportWriter(tmp_path, experiment="calibration").table("c", pd.DataFrame({"work_us": [5.0]}))
    assert _header_cells((tmp_path / "c.tex").read_text()) == [
        "busy-wait per point, microseconds (us)"]


def test_exact_integers_print_as_their_column_declares(tmp_path):
    """Exact integers print as their real column declarations say: the lattice families'
    huge counts (EXACT_SCIENTIFIC) rounded to scientific form, independent-set counts (EXACT,
    compared digit by digit with the thesis's tables) whole; the CSV keeps every digit."""
    from pipeline.experiments.base import EXACT, EXACT_SCIENTIFIC, get_experiment
    from pipeline.report.core import ReportWriter
    from pipeline.report.html import html_table

    assert get_experiment("lattice").column_docs["spanning_trees"][2] == EXACT_SCIENTIFIC
    assert get_experiment("lattice").column_docs["dimers"][2] == EXACT_SCIENTIFIC
    assert get_experiment("clique_graph").column_docs["spanning_trees"][2] == EXACT_SCIENTIFIC
    assert get_experiment("independent_sets").column_docs["count"][2] == EXACT
    big = "123456789012345678901234567890"
    trees = pd.DataFrame({"L1": [6, 3], "spanning_trees": [big, "12"],
                          "log_spanning_trees": [67.68, 2.4849066497880004]})
    ReportWriter(tmp_path, experiment="lattice").table("trees", trees)
    tex = (tmp_path / "trees.tex").read_text()
    assert "6 & 1.23457e+29 & 67.68 \\\\" in tex
    assert "3 & 12 & 2.48491 \\\\" in tex  # short enough: whole either way
    assert _header_cells(tex) == ["L1", "spanning_trees", "log_spanning_trees (nat)"]
    assert r"spanning\_trees: tau(G), the number of spanning trees" in tex  # long description
    assert big in (tmp_path / "trees.csv").read_text()
    assert '<td class="num">1.23457e+29</td>' in html_table(trees, 6, "lattice")
    counts = pd.DataFrame({"m": [9, 1], "count": [big, "2"]})
    ReportWriter(tmp_path, experiment="independent_sets").table("counts", counts)
    assert f"9 & {big} \\\\" in (tmp_path / "counts.tex").read_text()
    assert f'<td class="num">{big}</td>' in html_table(counts, 6, "independent_sets")
    # the same digits under a name no experiment declares: whole
    ReportWriter(tmp_path, experiment="lattice").table("other", counts.rename(
        columns={"count": "other"}))
    assert f"9 & {big} \\\\" in (tmp_path / "other.tex").read_text()


def test_lattice_report_prints_its_exact_counts_in_scientific_form(family_reports):
    from decimal import Decimal

    folder = family_reports["lattice"]
    tex = (folder / "lattice_counts.tex").read_text()
    trees = pd.read_csv(folder / "lattice_counts.csv", dtype=str)["spanning_trees"]
    assert trees.str.len().max() > 20  # exact, every digit, in the CSV
    for value in trees:
        shown = f"{Decimal(value):.5e}" if len(value) > 6 else value
        assert re.search(rf"& {re.escape(shown)} (&|\\\\)", tex), (value, shown)
        assert value not in tex or len(value) <= 6


def _compile(tex_files: list[Path], workdir: Path,
             preamble: str = "\\documentclass{article}") -> subprocess.CompletedProcess:
    """pdflatex on a document that inputs ``tex_files``: by default the article class without
    graphicx, so a table is set at its natural width and must fit the text by itself."""
    doc = workdir / "tables.tex"
    body = "\n".join(rf"\input{{{f.resolve().as_posix()}}}" + "\n\\clearpage" for f in tex_files)
    doc.write_text(preamble + "\n\\usepackage[T1]{fontenc}\n"
                   "\\usepackage{booktabs}\n\\usepackage{siunitx}\n"
                   "\\begin{document}\n" + body + "\n\\end{document}\n")
    return subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
                          cwd=workdir, capture_output=True, text=True, timeout=300)


@pytest.mark.latex
def test_every_generated_table_compiles_with_pdflatex(family_reports, tmp_path):
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    for name, folder in family_reports.items():
        tex_files = sorted(folder.glob("*.tex"))
        assert tex_files, name
        work = tmp_path / name
        work.mkdir()
        proc = _compile(tex_files, work)
        log = (work / "tables.log").read_text(errors="replace")
        errors = [line for line in log.splitlines() if line.startswith("!")]
        assert proc.returncode == 0 and not errors, (name, errors, log[-3000:])
        aux = (work / "tables.aux").read_text()
        for tex in tex_files:  # every table's label: its experiment's and its own name
            assert rf"\newlabel{{tab:{name}:{tex.stem}}}" in aux, (name, tex.stem)
        assert (work / "tables.pdf").stat().st_size > 1000
        # every table fits the article's text width by itself (no graphicx to scale it)
        assert not _overfull(log), (name, _overfull(log))
    # two reports' tables in one paper: every report has a `status` table, and each defined
    # tab:status ("Label `tab:status' multiply defined"; \ref to the wrong table)
    first, second = list(family_reports)[:2]
    work = tmp_path / "two_reports"
    work.mkdir()
    proc = _compile([family_reports[first] / "status.tex", family_reports[second] / "status.tex"],
                    work)
    log = (work / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0 and "multiply defined" not in log, log[-3000:]


def _overfull(log: str) -> list[str]:
    return re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)


def _wide_table() -> pd.DataFrame:
    """30 numeric columns, a long text column and a label: far wider than any page."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({f"quantity_{i}": rng.normal(size=4) * 10.0 ** (i % 7) for i in range(30)})
    df.insert(0, "eps", [0.1, 0.5, 1.0, 2.0])
    df["error"] = ["RuntimeError: " + "x" * 40 + " in /home/user/pipeline/kernels/lattice_counts"
                   ".py:123 while computing the_spanning_trees_of_a_big_lattice"] * 4
    return df


@pytest.mark.latex
def test_wide_tables_fit_the_page(tmp_path):
    """The check can fail: the same numbers as one plain tabular overflow the article's text
    width; the writer's table (split into parts, a wrapped text column) does not, in the
    article class as it is, and scaled by graphicx in a two-column class."""
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    df = _wide_table()
    tex = latex_table(df, "A wide table of ε and δ", "wide", experiment="composition")
    assert re.search(r"estimated width \d+ pt in ([3-9]|\d\d) parts", tex)
    assert tex.count(r"\begin{tabular}{") >= 3 and r"\parbox[t]{150pt}" in tex
    assert _header_cells(tex, 0)[0] == _header_cells(tex, 1)[0] == "eps (nat)"  # the key repeats
    (tmp_path / "wide.tex").write_text(tex)
    naive = [r"\begin{table}[ht]\centering\begin{tabular}{" + "r" * df.shape[1] + "}",
             " & ".join(c.replace("_", r"\_") for c in df.columns) + r" \\"]
    naive += [" & ".join(f"{v:.6g}" if isinstance(v, float) else str(v).replace("_", r"\_")
                         for v in row) + r" \\"
              for row in df.itertuples(index=False)]
    (tmp_path / "naive.tex").write_text("\n".join(naive + [r"\end{tabular}\end{table}", ""]))
    for files, preamble, overflows in (
            ([tmp_path / "naive.tex"], r"\documentclass{article}", True),
            ([tmp_path / "wide.tex"], r"\documentclass{article}", False),
            ([tmp_path / "wide.tex"], "\\documentclass[twocolumn]{article}\n\\usepackage{graphicx}",
             False)):
        work = tmp_path / f"w{len(list(tmp_path.glob('w*')))}"
        work.mkdir()
        proc = _compile(files, work, preamble)
        log = (work / "tables.log").read_text(errors="replace")
        assert proc.returncode == 0, log[-3000:]
        assert bool(_overfull(log)) == overflows, (files, preamble, _overfull(log))


def test_a_derived_label_column_repeats_in_every_part_of_a_split_table():
    """A label the report derives (not a parameter: ``graph_label`` of the leakage table) is
    a key column like a parameter, whatever dtype pandas gives text (``object`` in pandas 2,
    ``str`` in pandas 3): every part of a split table starts with it, so each part's rows say
    which graph they are. Under pandas 3 it was not a key, and the parts after the first had
    no row labels at all."""
    df = pd.DataFrame({f"quantity_{i}": [0.123456789, 0.2] for i in range(20)})
    df.insert(0, "eps", [0.1, 0.5])
    df.insert(0, "graph_label", ["path(3)", "RR(6,3)"])  # pandas' default text dtype
    tex = latex_table(df, "caption", "split", experiment="leakage")
    parts = tex.count(r"\begin{tabular}{")
    assert parts >= 2
    for part in range(parts):
        assert _header_cells(tex, part)[:2] == ["graph_label", "eps (nat)"], part


def test_exact_integer_columns_are_not_repeated_as_row_labels():
    """Exact integers are decimal strings (text to pandas), but values, not labels: only the
    parameter ``n`` leads every part of a split table of counts (table 7.1's shape). Taken
    for a label, the first count column f(1, n) was repeated in every part."""
    counts = {f"f({m}, n)": [str(3 ** (10 * m + n)) for n in (1, 5, 9)] for m in (1, 5, 9)}
    df = pd.DataFrame({"n": [1, 5, 9], **counts})
    tex = latex_table(df, "caption", "counts", experiment="independent_sets")
    parts = tex.count(r"\begin{tabular}{")
    assert parts >= 2
    heads = [_header_cells(tex, part) for part in range(parts)]
    assert all(h[0] == "n" for h in heads), heads
    assert sum(h.count("f(1, n)") for h in heads) == 1, heads


@pytest.mark.latex
def test_a_count_wider_than_the_page_wraps_its_digits_and_fits(tmp_path):
    """The shape of table 7.3 on the default grid (m, n <= 9): s(9, 9) has 79 digits, wider
    than the page at any size. Declared EXACT it keeps every digit, so it wraps between groups
    of three digits, right-aligned, instead of running 100 pt into the margin."""
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    require(subprocess.run(["kpsewhich", "siunitx.sty"], capture_output=True).returncode == 0,
            "siunitx (texlive-science)")
    huge = "42416013932706515219409704918750028538696604904581714223603281"
    huge += "1" * (79 - len(huge))
    df = pd.DataFrame({"m": [1, 5, 9], "s(m, 1)": ["5", "4475", "3727595"],
                       "s(m, 9)": ["3727595", "17278564968574424875324008949792385", huge]})
    tex = latex_table(df, "Table 7.3", "table_7_3", experiment="independent_sets")
    flat = tex.replace("\\allowbreak\\,", "")
    assert huge in flat and "17278564968574424875324008949792385" in flat  # every digit
    assert huge not in tex  # wrapped: breaks between the digit groups
    (tmp_path / "t.tex").write_text(tex)
    proc = _compile([tmp_path / "t.tex"], tmp_path)
    log = (tmp_path / "tables.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-3000:]
    assert not _overfull(log), _overfull(log)


@pytest.mark.latex
def test_tables_with_unicode_big_integers_and_infinities_compile(tmp_path):
    require(shutil.which("pdflatex") is not None, "pdflatex (texlive-latex-base)")
    df = pd.DataFrame({"ν/ε (C¹, ½ ≤ x)": ["a_b & c", "—"], "value": [float("inf"), -1.5e-300],
                       "count": ["9" * 60, ""], "n": [np.int64(2), np.int64(-3)]})
    (tmp_path / "t.tex").write_text(latex_table(df, "Caption with ε, 10% and $", "odd name#1"))
    proc = _compile([tmp_path / "t.tex"], tmp_path)
    assert proc.returncode == 0, (tmp_path / "tables.log").read_text(errors="replace")[-3000:]
    assert r"\newlabel{tab:odd-name-1}" in (tmp_path / "tables.aux").read_text()


def test_report_style_and_digits_are_validated_up_front(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for override, message in (("report_style=poster", "report_style must be one of paper, slides"),
                              ("report_sig_digits=0", "report_sig_digits must be an integer from 1 to 17")):
        proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "report=true",
                               "experiment=composition", f"results_dir={tmp_path}", override],
                              capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_report_digits_and_slides_style_reach_the_files(tmp_path):
    store_small(tmp_path, "composition")
    assert build_report(tmp_path, "composition", style="slides", sig_digits=3) == 0
    out = tmp_path / "composition" / "_report"
    tex = (out / "eps_vs_k.tex").read_text()
    row = next(line for line in tex.splitlines() if line.startswith("100 &"))
    assert all(len(re.sub(r"[^0-9]", "", c).lstrip("0")) <= 3 for c in row.split("&")[1:]), row
    import matplotlib.image as mpimg

    assert mpimg.imread(out / "eps_vs_k.png").shape[1] == round(SINGLE_COLUMN_IN * 1.6 * 200)


# --------------------------------------------------------------------------- HTML report
def test_html_report_lists_every_figure_table_and_the_selection(tmp_path):
    store_small(tmp_path, "lattice_limit")
    from pipeline.report.selection import Selection

    selection = Selection(run_ids=("test-run",))  # leaves out the retry run's failed row
    assert build_report(tmp_path, "lattice_limit", selection=selection) == 0
    out = tmp_path / "lattice_limit" / "_report"
    page = (out / "index.html").read_text()
    for png in out.glob("*.png"):
        assert f'src="{png.name}"' in page
    for tex in out.glob("*.tex"):
        assert f'id="tab-{tex.stem}"' in page and f'href="{tex.stem}.csv"' in page
    section = page[page.index('<h2 id="selection">Selection</h2>'):page.index('id="provenance"')]
    assert "run_id in {test-run}" in section and "test-run-retry" not in section
    assert "0123abc" in page  # the manifest's commit
    assert "Clique-inserted lattices" in page  # the family's errata section
    srcs = re.findall(r'(?:src|href)="([^"#][^"]*)"', page)
    assert srcs and all((out / s).exists() for s in srcs if not s.startswith("data:")), srcs


@pytest.mark.browser
def test_html_reports_load_in_headless_chromium(family_reports):
    require(Path("/usr/bin/chromium").exists(), "chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the test extra installs it
        require(False, "playwright (pip, the test extra)")
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=args,
                                     timeout=60_000)
        try:
            for name, folder in family_reports.items():
                page = browser.new_page()
                problems = []
                page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: problems.append(str(e)))
                page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
                page.goto((folder / "index.html").as_uri(), wait_until="load", timeout=60_000)
                assert not problems, (name, problems)
                images = page.evaluate("""() => Array.from(document.images).map(
                    i => [i.getAttribute('src'), i.complete, i.naturalWidth])""")
                assert len(images) == len(list(folder.glob("*.png"))), name
                assert all(done and width > 0 for _, done, width in images), (name, images)
                sections = page.evaluate("""() => Array.from(document.querySelectorAll(
                    'section[id^="tab-"]')).map(s => [s.id, s.querySelectorAll('table tbody tr').length])""")
                expected = {f"tab-{t.stem}" for t in folder.glob("*.tex")}
                assert {s for s, _ in sections} == expected, name
                rows = {s: n for s, n in sections}
                for tex in folder.glob("*.tex"):
                    csv_rows = len(pd.read_csv(folder / f"{tex.stem}.csv"))
                    assert rows[f"tab-{tex.stem}"] == min(csv_rows, 500), (name, tex.stem)
                links = page.evaluate("""() => Array.from(document.querySelectorAll('a[href]'))
                    .map(a => a.getAttribute('href'))""")
                for href in links:
                    if href.startswith("#"):
                        assert page.locator(f"[id='{href[1:]}']").count() == 1, (name, href)
                    else:
                        assert (folder / href).is_file(), (name, href)
                headings = page.evaluate("() => Array.from(document.querySelectorAll('h2'))"
                                         ".map(h => h.id)")
                assert {"selection", "provenance", "tables"} <= set(headings), name
                assert ("errata" in headings) == (name in ERRATA_SECTIONS), name
                page.close()
        finally:
            browser.close()
