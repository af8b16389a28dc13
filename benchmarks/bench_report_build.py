"""Time and memory of ``report=true`` on a large store (the report's own work, after the
sweep): the rows of the grid, the scope note (stored ok points the grid leaves out), the
tables and the index.

Before, the report read the store twice: ``select`` for the grid's rows, and
``pipeline.load`` of the whole store to pandas (kept to the end), whose id strings it then
matched in pandas for the scope note (35 of the 59 s of a report of 4M rows). It also built
sets of whole columns in Python (the runs, the versions) and deduplicated the whole table
to count failed points. Now the note is counted on the key columns of the one read
(``selection.points_outside_grid``) and those sets come from ``unique()``.

Printed in the same run, each side in its own process on one store (peak RSS above the
process's own after imports), for a grid of the whole store and one of a quarter of it
(then the note is printed):

- ``before``: ``build_report`` with the previous reads put back (the functions as they were,
  copied below);
- ``now``: ``build_report`` as it is;

and the ratio now / before of each. Both must print the same scope note.

    python benchmarks/bench_report_build.py           # a store of 4,000,000 rows
    python benchmarks/bench_report_build.py --quick   # a store of 400,000 rows
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_resume_memory import make_store  # noqa: E402

SIDE = r"""
import io, resource, sys, time, types

import pandas as pd

import pipeline.report.build as build
import pipeline.report.html as html
import pipeline.report.selection as selection
import pipeline.report.versions as versions
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.store.parquet import load

kind, results, points = sys.argv[1], sys.argv[2], int(sys.argv[3])

if kind == "before":  # the previous code, as it was
    def old_select_picked(results_dir, name, sel):
        build._everything = load(results_dir, name)  # held to the end, as the report held it
        df, picked = select_picked(results_dir, name, sel)
        build._selection = sel
        return df, picked

    def old_scope_note(picked, sel):  # (its run and code filters left out: none are given)
        df, everything = build._df, build._everything
        stored = everything[everything["status"] == "ok"]
        if len(stored):
            latest = stored["experiment_version"].max()
            wanted = ([latest if v == "latest" else v for v in sel.versions]
                      if sel.versions else [sel.grid.version])
            stored = stored[stored["experiment_version"].isin(wanted)]
        ok = df[df["status"] == "ok"]
        shown = pd.unique(ok["task_id"])
        outside = int((~pd.Series(pd.unique(stored["task_id"])).isin(shown)).sum())
        if not outside:
            return None
        return (f"{len(shown):,} of {len(shown) + outside:,} stored ok point(s) are in this "
                "config's grid (report_scope=grid); report_scope=all reports every stored point")

    def old_scoped_runs(df, manifest):
        runs = manifest.get("runs", [])
        present = set(df["run_id"].dropna())
        return [r for r in runs if r.get("run_id") in present], int(df["run_id"].isna().sum())

    def old_versions_text(df):
        vs = sorted({int(v) for v in df["experiment_version"]})
        return (f"experiment version{'s' if len(vs) > 1 else ''} {', '.join(map(str, vs))}")

    def old_failed_points(df):
        if "status" not in df.columns or df.empty:
            return 0
        return int((df.drop_duplicates("task_id")["status"] == "failed").sum())

    select_picked = selection.select_picked

    def keep_df(results_dir, name, sel):
        df, picked = old_select_picked(results_dir, name, sel)
        build._df = df
        # select() let go of what it read before the note: only the versions go on (the old
        # code took them from the whole load)
        return df, types.SimpleNamespace(stored=picked.stored.select(["experiment_version"]))

    selection.select_picked = keep_df
    build._scope_note = old_scope_note
    selection.scoped_runs = old_scoped_runs
    html.versions_text = old_versions_text
    build.failed_points = versions.failed_points = old_failed_points


def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


grid = Grid(get_experiment("calibration"), {"x": {"range": [0, points]}}, {"work_us": 0.0})
before = rss_mb()
out = io.StringIO()
t0 = time.perf_counter()
code = build.build_report(results, "calibration", stream=out,
                          selection=selection.Selection(grid=grid))
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
note = [ln for ln in out.getvalue().splitlines() if "stored ok point" in ln]
print(code, peak - before, seconds, note[0] if note else "-", sep="\t")
"""


def side(kind: str, results: Path, points: int) -> tuple[int, float, float, str]:
    out = subprocess.run([sys.executable, "-c", SIDE, kind, str(results), str(points)],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise RuntimeError(f"{kind}: exit {out.returncode}\n{out.stderr[-3000:]}")
    code, peak, seconds, note = out.stdout.strip().splitlines()[-1].split("\t")
    return int(code), float(peak), float(seconds), note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = 400_000 if args.quick else 4_000_000
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        make_store(Path(tmp), rows)
        print(f"{rows:,} stored rows, written by a sweep; report=true of a grid of them")
        print(f"{'grid':>10} {'side':<7} {'peak MiB':>9} {'s':>7} {'now/before':>11}  note")
        for points in (rows, rows // 4):
            before = side("before", Path(tmp), points)
            now = side("now", Path(tmp), points)
            for kind, (code, peak, seconds, note) in (("before", before), ("now", now)):
                ratio = (f"{now[1] / before[1]:.3f} mem" if kind == "now" else "")
                print(f"{points:>10,} {kind:<7} {peak:9.0f} {seconds:7.2f} {ratio:>11}  {note}")
            print(f"{'':>10} {'':<7} {'':>9} {'':>7} {now[2] / before[2]:7.3f} time")
            expected = ("-" if points == rows else
                        f"report: {points:,} of {rows:,} stored ok point(s) are in this config's "
                        "grid (report_scope=grid); report_scope=all reports every stored point")
            if before[0] or now[0] or before[3] != expected or now[3] != expected:
                print(f"FAIL: exit codes {before[0]}, {now[0]}; notes {before[3]!r}, "
                      f"{now[3]!r}; expected {expected!r}")
                failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
