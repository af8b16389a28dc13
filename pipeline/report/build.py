"""``python run.py report=true experiment=NAME``: stored results into paper-ready files.

Writes ``results_dir/NAME/_report/``: every table a family's report functions produce (CSV,
Markdown, LaTeX with booktabs and siunitx), every figure (PNG, PDF, SVG), a status table,
``index.md`` with the run manifest, and ``index.html`` (static: figures, tables, selection,
provenance, errata). Rows of several experiment versions are reported per version, never
pooled (:func:`pipeline.report.versions.per_version`). The folder starts with ``_`` so that
``pandas.read_parquet(results_dir/NAME)`` keeps reading only the result parts.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pyarrow.compute as pc

from pipeline.report.core import ReportWriter, md_code_span, reports
from pipeline.report.html import versions_text, write_html
from pipeline.report.swap import build_whole
from pipeline.report.versions import (Problem, failed_points, per_version, report_versions,
                                      versions_apart_note)
from pipeline.store.manifest import read_manifest
from pipeline.store.parquet import REPORT_DIR, experiment_dir

EXIT_OK, EXIT_REPORT_FAILED, EXIT_NO_RESULTS = 0, 1, 2


def build_report(results_dir, name: str, stream=None, style: str = "paper", sig_digits: int = 6,
                 selection=None) -> int:
    """Write the report of one experiment; returns an exit code.

    ``style`` is ``report_style`` (paper|slides), ``sig_digits`` ``report_sig_digits``.
    ``selection`` (report/selection.py) picks the rows; by default, and when it restricts
    neither grid nor version, the latest experiment version. What the rows cover (runs,
    commits, code_ids, missing grid points) goes into index.md and index.html, warnings also
    to stderr.
    """
    from pipeline.report.selection import Selection, SelectionError, select_picked

    stream = stream or sys.stdout
    path = experiment_dir(results_dir, name)
    _discover_plugins(name)
    selection = selection or Selection()
    if selection.grid is None and not selection.versions:
        selection.versions = ("latest",)
    try:
        df, picked = select_picked(results_dir, name, selection)
    except FileNotFoundError as exc:
        from pipeline.store.manifest import nothing_stored_yet

        print(f"error: {exc}; " + (nothing_stored_yet(path) or
                                   f"run the sweep first (python run.py experiment={name})"),
              file=sys.stderr)
        return EXIT_NO_RESULTS
    except SelectionError as exc:  # a run_id typo, a version of which nothing is stored
        print(f"error: {exc}; nothing was written", file=sys.stderr)
        return EXIT_NO_RESULTS  # (2: bad input)
    # what the selection leaves out, from the rows pick read; then they are let go
    scope_note = _scope_note(picked, selection)
    stored_versions = set(pc.drop_null(pc.unique(picked.stored["experiment_version"]))
                          .to_pylist())
    del picked
    ahead = _rows_ahead_of_the_code(df, name)
    if ahead:  # said on the terminal and in index.md's provenance
        df.attrs.setdefault("coverage", {}).setdefault("warnings", []).append(ahead)
    # first: for an empty selection they say why (points stored under another version)
    for warning in df.attrs.get("coverage", {}).get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if df.empty:
        print(f"error: no stored rows of '{name}' match the selection ({selection.describe()}); "
              + _empty_selection_advice(selection), file=sys.stderr)
        return EXIT_NO_RESULTS
    failed = failed_points(df)
    if failed:
        # the family tables and figures show ok rows only: a point that failed is not in them
        print(f"warning: {failed:,} of {df['task_id'].nunique():,} point(s) of the report "
              "failed and are left out of its tables and figures (their errors: the "
              f"failed_tasks table, or python -m pipeline status {path}); rerun them with the "
              "sweep's command and retry_failed=true", file=sys.stderr)
    with _report_lock(path) as got:
        if not got:
            print(f"error: another report of {path} has held {path / REPORT_LOCK} for over "
                  f"{REPORT_LOCK_WAIT_S / 60:g} min; let it finish (or stop it), then run "
                  "this one again", file=sys.stderr)
            return EXIT_NO_RESULTS
        return _build(results_dir, name, path, df, stored_versions, stream, style, sig_digits,
                      scope_note)


def _discover_plugins(name: str) -> None:
    """Import the report plug-ins; one that fails to import is said on stderr (one line: its
    file and error) and skipped: it took every report down with a traceback (exit 2). One that
    reports ``name`` fails this report instead (said when the report is written)."""
    import warnings

    import pipeline.report as plugins

    with warnings.catch_warnings():  # said below, once per report, without warnings' noise
        warnings.simplefilter("ignore")
        plugins.discover()
    own = set(plugins.broken_for(name))
    for module in plugins.BROKEN:
        if module not in own:
            print(f"warning: {plugins.broken_message(module)}", file=sys.stderr)


def _scope_note(picked, selection) -> str | None:
    """One line when the report's grid (report_scope=grid) leaves out stored ok points that
    ``report_scope=all`` would report: a report of 1 point of the 7 stored said only
    "report: ... (2 tables, 0 figures)". None when nothing is left out. Counted as the
    export counts them (:func:`pipeline.report.selection.points_outside_grid`)."""
    from pipeline.report.selection import points_outside_grid

    counts = points_outside_grid(picked, selection)
    if counts is None:
        return None
    shown, outside = counts
    return (f"{shown:,} of {shown + outside:,} stored ok point(s) are in this "
            "config's grid (report_scope=grid); report_scope=all reports every stored point")


def _empty_selection_advice(selection) -> str:
    """What to do when the selection matches no row: it names only options not already given
    (``report_scope=all`` was advised to a command that had given it)."""
    filters = [k for k, v in (("run_id", selection.run_ids), ("code_id", selection.code_ids))
               if v]
    if selection.versions and selection.versions != ("latest",):
        filters.append("version")
    advice = []
    if filters:
        advice.append(f"check {', '.join(filters)} (python -m pipeline status lists the runs), "
                      f"or leave {' and '.join(filters)} out")
    if selection.grid is not None:
        advice.append("run that sweep first" if not filters else "run that sweep")
        advice.append("report everything stored with report_scope=all")
    elif not filters:
        advice.append("run the sweep first")
    return ", or ".join(advice) if len(advice) < 3 else \
        f"{advice[0]}, {advice[1]}, or {advice[2]}"


REPORT_LOCK = ".report.lock"  # hidden: Parquet readers and verify skip it
REPORT_LOCK_WAIT_S = 1800.0  # a report with its PDFs takes minutes; a hung one is not waited for


@contextlib.contextmanager
def _report_lock(path, wait_s: float | None = None):
    """One report at a time per folder: two report=true runs at once (two terminals, a report
    in a loop during a sweep) deleted and rewrote ``_report/`` under each other, leaving one
    report's index beside the other's tables and figures. The second waits for the first, at
    most ``wait_s`` (default :data:`REPORT_LOCK_WAIT_S`); yields whether it got the lock."""
    from pipeline.store.manifest import flock_within

    with open(path / REPORT_LOCK, "a") as fh:
        # the kernel drops the lock when the file closes (or the process dies)
        yield flock_within(fh, REPORT_LOCK_WAIT_S if wait_s is None else wait_s, lambda: print(
            f"waiting for another report of {path} to finish ({path / REPORT_LOCK})",
            file=sys.stderr), poll_s=0.2)


class _Built(NamedTuple):
    code: int  # the exit code
    tables: int
    figures: int
    problems: list  # Problem: the report functions that failed, the plug-ins that did not import


def _build(results_dir, name, path, df, stored_versions, stream, style, sig_digits,
           scope_note=None) -> int:
    """Build the report beside ``_report`` and swap it in whole (report/swap.py): written in
    place, a report cut short (a full disk, Ctrl-C) had already deleted the previous one and
    left half a new one."""
    outdir = path / REPORT_DIR
    built = build_whole(outdir, lambda staging: _build_into(
        staging, results_dir, name, path, df, stored_versions, stream, style, sig_digits,
        scope_note))
    print(f"report: {outdir / 'index.html'} ({built.tables} tables, {built.figures} figures)",
          file=stream)
    if scope_note:
        print(f"report: {scope_note}", file=stream)
    if len(report_versions(df)) > 1:
        print(f"report: {versions_apart_note(report_versions(df))}", file=stream)
    for problem in built.problems:
        print(problem.text(), file=sys.stderr)
    return built.code


def _rows_ahead_of_the_code(df: pd.DataFrame, name: str) -> str | None:
    """Rows of an experiment version newer than this code's (a checkout of an older commit,
    or report_scope=all over rows another branch computed): this code's report functions draw
    them, silently, whatever columns the newer version added or changed."""
    from pipeline.experiments.base import get_experiment

    if df.empty or "experiment_version" not in df:
        return None
    try:
        code = int(get_experiment(name).version)
    except KeyError:
        return None
    ahead = sorted(int(v) for v in df["experiment_version"].dropna().unique() if int(v) > code)
    if not ahead:
        return None
    return (f"rows of version(s) {', '.join(map(str, ahead))} of '{name}', newer than this "
            f"code's version {code} (an older checkout?): its report functions draw them, and "
            "may not know what the newer version changed; report from the code that computed "
            "them")


def _build_into(outdir, results_dir, name, path, df, stored_versions, stream, style,
                sig_digits, scope_note=None) -> _Built:
    import pipeline.report as plugins

    out = ReportWriter(outdir, results_dir=results_dir, style=style, sig_digits=sig_digits,
                       experiment=name)
    # a plug-in of this experiment that did not import: the report fails (exit 1), naming it,
    # rather than stand in the generic summary for the family's tables
    problems = [Problem("module", plugins.broken_file(m), plugins.BROKEN[m])
                for m in plugins.broken_for(name)]
    per_version(_status_table, df, out, note_failed=False)
    functions = reports(name)
    for fn in functions:
        # one broken figure must not cost the rest of the report: its problem is said
        per_version(fn, df, out, problems=problems)
    if not functions and not problems:
        per_version(_generic_summary, df, out)
    # versions stored but left out: older or newer than the report's (a report of version=0)
    shown = set(df["experiment_version"].unique())
    others = sorted(set(stored_versions) - shown)
    older = [v for v in others if v < max(shown)]
    newer = [v for v in others if v > max(shown)]
    _write_index(path, name, df, out, problems, older_versions=older, newer_versions=newer,
                 scope_note=scope_note)
    write_html(path, name, df, out, problems, older_versions=older, newer_versions=newer,
               selection=df.attrs.get("coverage"))
    return _Built(EXIT_REPORT_FAILED if problems else EXIT_OK,
                  sum(e["kind"] == "table" for e in out.entries),
                  sum(e["kind"] == "figure" for e in out.entries), problems)


def _status_table(df: pd.DataFrame, out: ReportWriter) -> None:
    tasks = df.drop_duplicates("task_id")
    counts = tasks["status"].value_counts().rename_axis("status").reset_index(name="tasks")
    out.table("status", counts, caption="Tasks by status")
    failed = tasks[tasks["status"] == "failed"]
    if len(failed):
        from pipeline.experiments.base import get_experiment

        params = [p.name for p in get_experiment(df_name(df)).params] if df_name(df) else []
        cols = [c for c in ["task_id", *params, "error"] if c in failed.columns]
        out.table("failed_tasks", failed[cols].head(1000),
                  caption="Failed tasks (first 1000) and their errors")


def df_name(df: pd.DataFrame) -> str | None:
    return df.attrs.get("experiment")


# the columns of the generic summary: statistic -> (name, description); the unit of a row is
# its column's, in the table's unit column
_SUMMARY_STATS = {"count": ("values", "ok rows with a value"), "mean": ("mean", "mean"),
                  "std": ("std", "standard deviation"), "min": ("min", "smallest"),
                  "25%": ("p25", "25th percentile"), "50%": ("median", "median"),
                  "75%": ("p75", "75th percentile"), "max": ("max", "largest")}


def _generic_summary(df: pd.DataFrame, out: ReportWriter) -> None:
    """Summary statistics of the numeric columns of an experiment without a report plug-in,
    one row per column with its unit (columns differ in unit, so the unit is a column of the
    table, not of a header)."""
    from pipeline.report.columns import ColumnClash, column_meta, describe_computed

    ok = df[df["status"] == "ok"]
    numeric = ok.select_dtypes("number").drop(columns=["elapsed_s", "row_index",
                                                       "experiment_version", "seed"],
                                              errors="ignore")
    if not numeric.shape[1]:
        return
    name = df_name(df)
    desc = numeric.describe().T
    metas = [column_meta(name, str(c)) for c in desc.index]
    table = pd.DataFrame({"column": [str(c) for c in desc.index],
                          "unit": [m.unit for m in metas]})
    docs = {"column": ("column", None), "unit": ("unit of its statistics", None)}
    for stat, (col, text) in _SUMMARY_STATS.items():
        if stat in desc.columns:
            # describe() gives the count as a float (64.0); it is a whole number of rows
            values = desc[stat].to_numpy()
            table[col] = values.astype("int64") if stat == "count" else values
            docs[col] = (text, None)
    renamed = {}
    if name:
        for col in list(docs):  # a name the experiment declares would take its header
            try:
                describe_computed(name, {col: docs[col]})
            except ColumnClash:
                renamed[col] = f"summary_{col}"
                describe_computed(name, {renamed[col]: docs[col]})
    out.table("summary", table.rename(columns=renamed),
              caption="Summary statistics of the numeric columns (ok rows), each in the unit "
                      "of its column")


def _write_index(path: Path, name: str, df: pd.DataFrame, out: ReportWriter, problems,
                 older_versions=(), newer_versions=(), scope_note=None) -> None:
    tasks = df.drop_duplicates("task_id")
    n_ok = int((tasks["status"] == "ok").sum())
    n_failed = int((tasks["status"] == "failed").sum())
    from pipeline.report.selection import scoped_runs

    manifest = read_manifest(path)
    runs = manifest.get("runs", [])
    scoped, unattributed = scoped_runs(df, manifest)
    lines = [f"# Report: `{name}`", ""]
    if "coverage" in df.attrs:
        from pipeline.report.selection import coverage_lines

        lines += ["## What this report covers", "", *coverage_lines(df.attrs["coverage"]),
                  *([f"- {scope_note}"] if scope_note else []), ""]
    lines.append(f"- {versions_text(df)}; rows: {len(df):,}; tasks: {len(tasks):,} "
                 f"({n_ok:,} ok, {n_failed:,} failed)")
    if len(report_versions(df)) > 1:
        lines.append(f"- {versions_apart_note(report_versions(df))}")
    for which, versions in (("older", older_versions), ("newer", newer_versions)):
        if versions:
            lines.append(f"- rows of {which} version(s) {', '.join(map(str, versions))} are "
                         "stored too and left out of this report (`pipeline.load(..., "
                         "version=N)` reads them)")
    if n_failed:
        first = tasks.loc[tasks["status"] == "failed", "error"].iloc[0]
        first = " ".join(str(first).splitlines())  # a line break would end the list item
        lines.append(f"- **{n_failed:,} task(s) failed**; first error: {md_code_span(first)} "
                     "(see `failed_tasks`, or `python -m pipeline status`; rerun with "
                     "`retry_failed=true`)")
        lines.append(f"- **{n_failed:,} failed point(s) not shown** in the tables and figures "
                     "below (except `status` and `failed_tasks`); their captions say so")
    functions = [p for p in problems if p.kind == "function"]
    for p in problems:
        if p.kind == "module":
            lines.append(f"- **report module `{p.name}` failed to import**: {p.error} (its "
                         "tables and figures are missing from this report)")
    if functions:
        lines.append(f"- **{len(functions)} report function(s) failed**: "
                     + "; ".join(f"`{p.name}`: {p.error}" for p in functions))
    lines += ["", "## Tables", ""]
    for e in (e for e in out.entries if e["kind"] == "table"):
        links = ", ".join(f"[{f.rsplit('.', 1)[1]}]({f})" for f in e["files"])
        lines.append(f"- **{e['name']}** ({e['rows']} rows): {e['caption']} — {links}")
    figures = [e for e in out.entries if e["kind"] == "figure"]
    if figures:
        lines += ["", "## Figures", ""]
        for e in figures:
            lines += [f"### {e['name']}", "", e["caption"], "", f"![{e['name']}]({e['files'][0]})",
                      "", "Also: " + ", ".join(f"[{f.rsplit('.', 1)[1].upper()}]({f})"
                                              for f in e["files"][1:]), ""]
    lines += ["", "## Runs (from the manifest)", ""]
    if not runs:
        lines.append("No manifest: these results were not written by `run.py`.")
    else:
        lines.append("The runs that wrote the rows of this report (other runs stored in the "
                     "folder are left out)." if scoped else "No run wrote a row of this report.")
        if unattributed:
            lines.append(f"{unattributed:,} row(s) carry no run_id (written before run ids were "
                         "recorded): their run is unknown.")
        lines.append("")
    for run in scoped:
        git = run.get("git") or {}
        lines.append(f"- `{run.get('run_id')}` {run.get('status')}: {run.get('started_at')} → "
                     f"{run.get('finished_at')} on {run.get('host')}; commit "
                     f"`{git.get('commit')}`{' (dirty)' if git.get('dirty') else ''}; counts "
                     f"{json.dumps(run.get('counts', {}))}")
    if scoped:
        latest = scoped[-1]
        lines += ["", f"### Latest of these runs (`{latest.get('run_id')}`): configuration", "",
                  "```json", json.dumps(latest.get("config", {}), indent=2, default=str), "```",
                  "", f"### Latest of these runs (`{latest.get('run_id')}`): package versions",
                  "", "```json", json.dumps(latest.get("packages", {}), indent=2), "```"]
    (out.outdir / "index.md").write_text("\n".join(lines) + "\n")
