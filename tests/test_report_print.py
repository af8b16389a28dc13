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
    tex = latex_table(df, "Bound / optimal, 50% of rows", "bound_ratios", sig_digits=6)
    assert r"\label{tab:bound_ratios}" in tex  # unescaped
    assert r"\begin{tabular}{l S[table-format=5.7] S[table-format=7] S[table-format=30] l}" in tex
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


def test_table_headers_come_from_the_column_declarations(tmp_path):
    from pipeline.report.core import ReportWriter

    out = ReportWriter(tmp_path, experiment="composition")
    out.table("t", pd.DataFrame({"delta": [0.1], "eps": [10], "derived": [1.5]}))
    tex = (tmp_path / "t.tex").read_text()
    # composition declares delta "per-step delta" (a header), eps "per-step epsilon of each
    # (eps, delta)-DP mechanism" (> 40 characters: the header keeps the name, a note says it)
    assert "{per-step delta} & {eps} & {derived}" in tex
    assert r"{\footnotesize eps: per-step epsilon of each (eps, delta)-DP mechanism.\par}" in tex


@pytest.fixture
def declared_experiment():
    """A registered experiment declaring descriptions, units and an exact-integer format the
    way the experiments' declarations give them to the report; unregistered afterwards."""
    import pyarrow as pa

    from pipeline.experiments import base

    exp = base.Experiment(name="_print_test_exact", version=1, params=[],
                          columns={"count": pa.string(), "log_count": pa.float64()},
                          run=lambda p, seed: {})
    exp.column_descriptions = {"count": "independent sets"}
    exp.column_units = {"log_count": "nats"}
    exp.column_exact_formats = {"count": "scientific"}
    base.register(exp)
    try:
        yield exp.name
    finally:
        base._REGISTRY.pop(exp.name, None)


def test_exact_integers_print_as_their_column_declares(declared_experiment, tmp_path):
    from pipeline.report.core import ReportWriter

    df = pd.DataFrame({"count": ["123456789012345678901234567890", "12"],
                       "log_count": [67.68, 2.4849066497880004], "other": ["9" * 40, "1"]})
    ReportWriter(tmp_path, experiment=declared_experiment).table("exact", df)
    tex = (tmp_path / "exact.tex").read_text()
    assert "{independent sets} & {log\\_count (nats)} & {other}" in tex
    assert "1.23457e+29 & 67.68 & " + "9" * 40 in tex  # declared scientific; undeclared whole
    assert "12 & 2.48491 & 1" in tex  # short enough: whole either way


def _compile(tex_files: list[Path], workdir: Path) -> subprocess.CompletedProcess:
    doc = workdir / "tables.tex"
    body = "\n".join(rf"\input{{{f.resolve().as_posix()}}}" + "\n\\clearpage" for f in tex_files)
    doc.write_text("\\documentclass{article}\n\\usepackage[T1]{fontenc}\n"
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
        for tex in tex_files:  # every table's label is defined under its own name
            assert rf"\newlabel{{tab:{tex.stem}}}" in aux, (name, tex.stem)
        assert (work / "tables.pdf").stat().st_size > 1000


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
