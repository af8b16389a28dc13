"""What a report figure really shows, for the legend and caption checks of the family reports:
a writer that keeps each saved figure, and whether a line is visible at all."""

from __future__ import annotations

import numpy as np

from pipeline.report.core import ReportWriter


class KeepFigures(ReportWriter):
    """Keeps each saved figure (closed, but its artists stay readable)."""

    def figure(self, name, fig, caption=""):
        super().figure(name, fig, caption)
        self.figs = {**getattr(self, "figs", {}), name: fig}


def line_shown(line) -> bool:
    """Whether a line shows at all: a segment between two finite points, or a marker."""
    y = np.asarray(line.get_ydata(), float)
    fin = np.isfinite(y)
    if (fin[1:] & fin[:-1]).any():
        return True
    every = line.get_markevery()
    marked = fin if every is None else np.isin(np.arange(len(y)), every) & fin
    return line.get_marker() not in (None, "", " ", "None") and bool(marked.any())
