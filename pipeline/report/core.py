"""Report core: a writer for tables and figures, and the registry of per-experiment reports.

A family module registers::

    from pipeline.report.core import report_for

    @report_for("composition")
    def eps_against_k(df, out):
        out.table("eps_vs_k", table_df, caption="...")
        fig, ax = out.new_figure()
        ...
        out.figure("eps_vs_k", fig, caption="...")

``df`` is the deduplicated result table of that experiment (all rows, including failed ones;
filter on ``status == "ok"``). ``out`` is a :class:`ReportWriter`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

_REPORTS: dict[str, list[Callable]] = defaultdict(list)


def report_for(*experiment_names: str) -> Callable:
    def decorate(fn: Callable) -> Callable:
        for name in experiment_names:
            _REPORTS[name].append(fn)
        return fn

    return decorate


def ok_rows(df):
    """The rows of successful tasks (a copy), the usual starting point of a report."""
    return df[df["status"] == "ok"].copy() if "status" in df.columns else df.copy()


def reports(experiment_name: str) -> list[Callable]:
    from pipeline.report import discover

    discover()
    return list(_REPORTS.get(experiment_name, []))


class ReportWriter:
    """Writes tables (CSV, Markdown, LaTeX booktabs) and figures (PNG, PDF) into one folder,
    and remembers them for ``index.md``."""

    def __init__(self, outdir, results_dir=None):
        from pathlib import Path

        self.outdir = Path(outdir)
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.results_dir = results_dir
        self.entries: list[dict] = []

    def load(self, experiment_name: str, status: str | None = "ok"):
        """Another experiment's results from the same results_dir (e.g. limits to converge
        to), or None when it has not been run."""
        if self.results_dir is None:
            return None
        from pipeline.store.parquet import load

        try:
            return load(self.results_dir, experiment_name, status=status)
        except FileNotFoundError:
            return None

    def table(self, name: str, df, caption: str = "", float_format: str = "%.12g") -> None:
        df.to_csv(self.outdir / f"{name}.csv", index=False, float_format=float_format)
        (self.outdir / f"{name}.md").write_text(_markdown(df, float_format) + "\n")
        latex = _latex(df, caption, name, float_format)
        (self.outdir / f"{name}.tex").write_text(latex)
        self.entries.append({"kind": "table", "name": name, "caption": caption,
                             "files": [f"{name}.csv", f"{name}.md", f"{name}.tex"], "rows": len(df)})

    @staticmethod
    def new_figure(width: float = 6.0, height: float = 4.0, ncols: int = 1, nrows: int = 1):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        with plt.rc_context({"font.size": 11, "axes.grid": True, "grid.alpha": 0.3}):
            return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), dpi=150,
                                squeeze=(nrows == 1 and ncols == 1))

    def figure(self, name: str, fig, caption: str = "") -> None:
        import matplotlib.pyplot as plt

        fig.tight_layout()
        fig.savefig(self.outdir / f"{name}.png", dpi=150)
        fig.savefig(self.outdir / f"{name}.pdf")
        plt.close(fig)
        self.entries.append({"kind": "figure", "name": name, "caption": caption,
                             "files": [f"{name}.png", f"{name}.pdf"]})


def _fmt(value, float_format: str) -> str:
    import math

    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return float_format % value
    return "" if value is None else str(value)


def _markdown(df, float_format: str) -> str:
    header = "| " + " | ".join(str(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_fmt(v, float_format) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body])


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
                  "$": r"\$", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def _latex_escape(text: str) -> str:
    """Escape LaTeX specials in one pass (so an inserted brace is never escaped again)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex(df, caption: str, label: str, float_format: str) -> str:
    cols = "l" * len(df.columns)
    lines = [r"\begin{table}[ht]", r"\centering", rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
             " & ".join(_latex_escape(str(c)) for c in df.columns) + r" \\", r"\midrule"]
    for row in df.itertuples(index=False):
        lines.append(" & ".join(_latex_escape(_fmt(v, float_format)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{_latex_escape(caption)}}}")
    lines += [rf"\label{{tab:{_latex_escape(label)}}}", r"\end{table}", ""]
    return "\n".join(lines)
