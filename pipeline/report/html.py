"""``_report/index.html``: the whole report as one static page.

Every figure (PNG inline, links to PDF and SVG), every table (numbers with the report's
significant digits, links to CSV/Markdown/LaTeX), the selection the report covers, the
provenance from the manifest (runs, commits, configuration, package versions) and, where the
experiment has one, its section of ``docs/errata.md``. No script, no server, no network:
every ``src`` and ``href`` is a file in ``_report/`` or an anchor of the page.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from pipeline.report.columns import column_meta
from pipeline.report.core import NULL_LEGEND, NULL_MARK, column_kind, format_number

MAX_HTML_ROWS = 500  # a longer table is cut on the page; its CSV has every row
ERRATA_FILE = Path(__file__).resolve().parents[2] / "docs" / "errata.md"
# experiment -> the heading (prefix) of its section in docs/errata.md
ERRATA_SECTIONS = {
    **dict.fromkeys(["composition", "composition_delta", "composition_region",
                     "composition_hetero"], "Optimal composition"),
    **dict.fromkeys(["inferential", "inferential_bethe_limit"], "Inferential privacy"),
    **dict.fromkeys(["edge_dp", "edge_test"], "Edge DP"),
    **dict.fromkeys(["low_influence", "leakage"], "Low influence"),
    **dict.fromkeys(["bayes_bounds", "bayes_network", "bayes_regression"], "Bayesian"),
    **dict.fromkeys(["lattice", "lattice_limit", "clique_graph"], "Clique-inserted lattices"),
    **dict.fromkeys(["independent_sets", "independent_sets_bounds", "random_triangulation"],
                    "Independent sets"),
}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1,h2,h3{line-height:1.2} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
nav a{margin-right:1em} figure{margin:1.5em 0} figure img{max-width:100%;height:auto;
border:1px solid #eee} figcaption{font-size:.92em;color:#444}
.tablewrap{overflow-x:auto;margin:.5em 0 1.5em} table{border-collapse:collapse;font-size:.85em}
th,td{padding:.2em .6em;border-bottom:1px solid #e4e4e4;vertical-align:top}
thead th{border-bottom:2px solid #444;text-align:left} td.num,th.num{text-align:right;
font-variant-numeric:tabular-nums} .files{font-size:.85em} .warn{color:#a00}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.8em} dt{font-weight:600}
dd{margin:0 0 .4em 1.2em}
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _anchor(kind: str, name: str) -> str:
    return f"{kind}-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _file_links(files) -> str:
    return " · ".join(f'<a href="{_e(f)}">{_e(f.rsplit(".", 1)[1].upper())}</a>' for f in files)


def html_table(df, sig_digits: int, experiment: str | None,
               max_rows: int = MAX_HTML_ROWS) -> str:
    """One result table as HTML: headers from the column declarations (the raw name in a
    tooltip), numbers right-aligned with ``sig_digits`` significant digits (trailing zeros
    kept where rounded), flags yes/no, and a missing value an em dash, explained under the
    table (as in the LaTeX and Markdown tables)."""
    kinds, metas = [], []
    for col in df.columns:
        kinds.append(column_kind(df[col].tolist()))
        metas.append(column_meta(experiment, str(col)))
    head = "".join(f'<th class="{"num" if k != "text" else "txt"}" '
                   f'title="{_e(m.name + (": " + m.description if m.description else ""))}">'
                   f"{_e(m.header)}</th>" for k, m in zip(kinds, metas))
    body = []
    has_null = False
    for row in df.head(max_rows).itertuples(index=False):
        cells = []
        for value, kind, meta in zip(row, kinds, metas):
            text = format_number(value, kind, sig_digits, meta.exact_format)
            has_null = has_null or text == NULL_MARK
            cells.append(f'<td class="num">{_e(text)}</td>' if kind != "text"
                         else f"<td>{_e(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    legend = f'<p class="files">{_e(NULL_LEGEND)}.</p>' if has_null else ""
    cut = (f'<p class="files">showing the first {max_rows:,} of {len(df):,} rows; the CSV has '
           "all of them</p>" if len(df) > max_rows else "")
    return (f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + f"</tbody></table></div>{legend}{cut}")


def render_mapping(value) -> str:
    """Any JSON-like value as nested definition lists (dicts), lists, or text."""
    if isinstance(value, dict):
        if not value:
            return "<p>(empty)</p>"
        return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{render_mapping(v)}</dd>"
                                for k, v in value.items()) + "</dl>"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return _e(", ".join(str(v) for v in value)) if value else "(none)"
        return "<ol>" + "".join(f"<li>{render_mapping(v)}</li>" for v in value) + "</ol>"
    return _e(value)


def errata_html(name: str, errata_file: Path = ERRATA_FILE) -> str | None:
    """The experiment's section of docs/errata.md as HTML (relative links to other docs become
    plain text, since they do not exist beside the report); None when it has none."""
    heading = ERRATA_SECTIONS.get(name)
    if heading is None or not errata_file.exists():
        return None
    import markdown

    text = errata_file.read_text()
    sections = re.split(r"(?m)^## ", text)
    body = next((s for s in sections[1:] if s.startswith(heading)), None)
    if body is None:
        return None
    title, _, rest = body.partition("\n")
    rendered = markdown.markdown(rest, extensions=["tables"], output_format="html")
    rendered = re.sub(r'<a href="(?!https?://|#)[^"]*">(.*?)</a>', r"\1", rendered)
    return f"<h3>{_e(title.strip())}</h3>\n{rendered}"


def versions_text(df) -> str:
    """'experiment version 2', or 'experiment versions 0, 1' for rows of several."""
    versions = sorted({int(v) for v in df["experiment_version"].dropna().unique()})
    return (f"experiment version{'s' if len(versions) > 1 else ''} "
            f"{', '.join(map(str, versions)) or None}")


def write_html(path: Path, name: str, df, out, problems, older_versions=(),
               selection: dict | None = None, newer_versions=()) -> Path:
    """Write ``out.outdir/index.html`` for the report ``out`` has written; returns its path."""
    from pipeline.store.manifest import read_manifest

    tasks = df.drop_duplicates("task_id")
    n_ok = int((tasks["status"] == "ok").sum())
    n_failed = int((tasks["status"] == "failed").sum())
    figures = [e for e in out.entries if e["kind"] == "figure"]
    tables = [e for e in out.entries if e["kind"] == "table"]
    errata = errata_html(name)
    from pipeline.report.selection import scoped_runs

    manifest = read_manifest(path)
    runs = manifest.get("runs", [])
    scoped, unattributed = scoped_runs(df, manifest)  # the runs that wrote these rows

    parts = [f"<h1>Report: <code>{_e(name)}</code></h1>", "<nav>"]
    for anchor, label, present in (("figures", "Figures", figures), ("tables", "Tables", tables),
                                   ("selection", "Selection", True),
                                   ("provenance", "Provenance", True),
                                   ("errata", "Errata", errata)):
        if present:
            parts.append(f'<a href="#{anchor}">{label}</a>')
    parts.append("</nav><ul>")
    parts.append(f"<li>{_e(versions_text(df))}; rows: {len(df):,}; tasks: "
                 f"{len(tasks):,} ({n_ok:,} ok, {n_failed:,} failed)</li>")
    for which, versions in (("older", older_versions), ("newer", newer_versions)):
        if versions:
            parts.append(f"<li>rows of {which} version(s) {_e(', '.join(map(str, versions)))} "
                         "are stored too and left out of this report</li>")
    if n_failed:
        first = tasks.loc[tasks["status"] == "failed", "error"].iloc[0]
        parts.append(f'<li class="warn">{n_failed:,} task(s) failed; first error: '
                     f"<code>{_e(first)}</code></li>")
    for problem in problems:
        parts.append(f'<li class="warn">report {problem.kind} <code>{_e(problem.name)}</code> '
                     f"{problem.verb}: {_e(problem.error)}</li>")
    parts.append("</ul>")

    if figures:
        parts.append('<h2 id="figures">Figures</h2>')
        for e in figures:
            png = next(f for f in e["files"] if f.endswith(".png"))
            others = [f for f in e["files"] if f != png]
            # shown at 1.25x print size: text reads as in the paper, single beside double
            width = round(e.get("width_in", 7.0) * 120)
            parts.append(f'<figure id="{_anchor("fig", e["name"])}"><img src="{_e(png)}" '
                         f'style="width:{width}px" '
                         f'alt="{_e(e["caption"] or e["name"])}"><figcaption><b>{_e(e["name"])}'
                         f"</b>: {_e(e['caption'])} <span class=\"files\">"
                         f"{_file_links(others)}</span></figcaption></figure>")
    parts.append('<h2 id="tables">Tables</h2>')
    for e in tables:
        parts.append(f'<section id="{_anchor("tab", e["name"])}"><h3>{_e(e["name"])}</h3>'
                     f"<p>{_e(e['caption'])} ({e['rows']:,} rows) "
                     f'<span class="files">{_file_links(e["files"])}</span></p>'
                     + html_table(e["frame"], e["sig_digits"], out.experiment) + "</section>")

    parts.append('<h2 id="selection">Selection</h2>')
    if selection:
        parts.append(render_mapping(selection))
    else:
        parts.append(f"<p>Every stored row of the latest experiment version ({len(tasks):,} "
                     "tasks).</p>")

    parts.append('<h2 id="provenance">Provenance</h2>')
    if not runs:
        parts.append("<p>No manifest: these results were not written by <code>run.py</code>.</p>")
    else:
        parts.append("<p>The runs that wrote the rows of this report (other runs stored in the "
                     "folder are left out).</p>" if scoped else
                     "<p>No run wrote a row of this report.</p>")
        if unattributed:
            parts.append(f"<p>{unattributed:,} row(s) carry no run_id (written before run ids "
                         "were recorded): their run is unknown.</p>")
    if scoped:
        parts.append("<div class=\"tablewrap\"><table><thead><tr><th>run</th><th>status</th>"
                     "<th>started</th><th>finished</th><th>host</th><th>commit</th>"
                     "<th>counts</th></tr></thead><tbody>")
        for run in scoped:
            git = run.get("git") or {}
            commit = f"{git.get('commit')}{' (dirty)' if git.get('dirty') else ''}"
            parts.append("<tr>" + "".join(
                f"<td>{_e(v)}</td>" for v in (run.get("run_id"), run.get("status"),
                                              run.get("started_at"), run.get("finished_at"),
                                              run.get("host"), commit,
                                              json.dumps(run.get("counts", {}))))
                + "</tr>")
        parts.append("</tbody></table></div>")
        latest = scoped[-1]
        which = _e(latest.get("run_id"))
        parts.append(f"<details><summary>Latest of these runs ({which}): configuration</summary>"
                     "<pre>" + _e(json.dumps(latest.get("config", {}), indent=2, default=str))
                     + f"</pre></details><details><summary>Latest of these runs ({which}): "
                     "package versions</summary><pre>"
                     + _e(json.dumps(latest.get("packages", {}), indent=2)) + "</pre></details>")
    if errata:
        parts.append('<h2 id="errata">Errata: the seeds against exact recomputation</h2>')
        parts.append(errata)

    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Report: {_e(name)}</title><link rel=\"icon\" href=\"data:,\">"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")
    target = out.outdir / "index.html"
    target.write_text(page, encoding="utf-8")
    return target
