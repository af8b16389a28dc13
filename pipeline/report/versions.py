"""A report's rows, reported per experiment version: a report function is called once per
version on that version's rows (:func:`per_version`), its tables written once each with an
``experiment_version`` column, its figures once per version (``NAME_vN``). Captions note the
failed points a table or figure leaves out. Used by :mod:`pipeline.report.build`."""

from __future__ import annotations

import traceback
from typing import NamedTuple

import pandas as pd


class Problem(NamedTuple):
    """A report function that failed, or a plug-in module that failed to import."""
    kind: str  # "function" or "module"
    name: str  # the function's name, or the module's file
    error: str

    @property
    def verb(self) -> str:
        return "failed to import" if self.kind == "module" else "failed"

    def text(self) -> str:
        return f"report {self.kind} {self.name} {self.verb}: {self.error}" + (
            " (its tables and figures are missing from this report)"
            if self.kind == "module" else "")



def failed_points(df: pd.DataFrame) -> int:
    """How many points (tasks) of the report's rows failed."""
    if "status" not in df.columns or df.empty:
        return 0
    # a task's rows share their status (load's rule drops a task's failed rows when one is
    # ok): the failed rows' distinct ids, not every row's (1 s for 4M rows)
    return int(df.loc[df["status"] == "failed", "task_id"].nunique())


def failed_note(n_failed: int) -> str:
    """The caption note of a table or figure built from the ok rows when points failed."""
    return f"{n_failed:,} failed point(s) not shown (see failed_tasks)."


class _NotingWriter:
    """The :class:`ReportWriter` a family's report function writes through when points failed:
    the function reads the ok rows (``ok_rows``), so every table and figure it writes lacks
    the failed points, and its caption says how many (a table short of the 6 rows of a failed
    L = 8 read as complete)."""

    def __init__(self, out, n_failed: int):
        self._out = out
        self._note = failed_note(n_failed)

    def __getattr__(self, attr):
        return getattr(self._out, attr)

    def _noted(self, caption: str) -> str:
        return _with_sentence(caption, self._note)

    def table(self, name, df, caption: str = "", *args, **kwargs):
        return self._out.table(name, df, self._noted(caption), *args, **kwargs)

    def figure(self, name, fig, caption: str = ""):
        return self._out.figure(name, fig, self._noted(caption))


def report_versions(df: pd.DataFrame) -> list[int]:
    """The experiment versions of the report's rows, ascending."""
    if "experiment_version" not in df.columns or df.empty:
        return []
    return sorted(int(v) for v in pd.unique(df["experiment_version"].dropna()))


def versions_apart_note(versions) -> str:
    """What index.md and the command line say of a report whose rows span several versions."""
    return (f"experiment versions {', '.join(map(str, versions))} are reported apart: every "
            "table has an experiment_version column and is computed per version (no row, count "
            "or statistic pools versions); every figure is drawn once per version (NAME_vN)")


def per_version(fn, df: pd.DataFrame, out, problems: list | None = None,
                 note_failed: bool = True) -> None:
    """Call the report function ``fn(df, writer)``: once on ``df`` when its rows are of one
    experiment version, else once per version on that version's rows (a report over versions
    1 and 2 duplicated every point stored under both, and its counts added them up). The
    tables of the calls are then written as one table each, with an ``experiment_version``
    column (:class:`_VersionSplit`), the figures one per version.

    ``problems``: a list that takes the failure of a call (the report goes on), else the
    error propagates. ``note_failed``: captions say how many points failed (of that version).
    """
    versions = report_versions(df)
    split = _VersionSplit(out, versions) if len(versions) > 1 else None

    def calls():  # one version's rows at a time (a copy each: not all held at once)
        if split is None:
            yield None, df, out
            return
        for version in versions:
            part = df[df["experiment_version"] == version]
            part.attrs = dict(df.attrs)
            yield version, part, split.writer(version)

    for version, part, writer in calls():
        n_failed = failed_points(part) if note_failed else 0
        noting = _NotingWriter(writer, n_failed) if n_failed else writer
        if problems is None:
            fn(part, noting)
            continue
        try:
            with out.style_context():
                fn(part, noting)
        except Exception as exc:
            label = fn.__name__ + ("" if version is None else f" (experiment version {version})")
            problems.append(_failed(label, exc))
            if split is not None:
                split.failed.append(version)
    if split is not None:
        try:
            split.flush()
        except Exception as exc:
            if problems is None:
                raise
            problems.append(_failed(fn.__name__, exc))


def _failed(label: str, exc: Exception) -> Problem:
    return Problem("function", label,
                   "".join(traceback.format_exception_only(type(exc), exc)).strip())


class _VersionSplit:
    """The tables and figures of one report function called once per experiment version.

    A table (by name) is kept until every version has been reported, then written once: the
    versions' tables one below the other (ascending version), each row with its
    ``experiment_version`` in a first column, its caption saying the versions are kept apart.
    A figure is written at once, one per version, as ``NAME_vN`` with a caption that names its
    version. The index lists them in the order the function wrote them, versions ascending."""

    def __init__(self, out, versions):
        self.out = out
        self.versions = list(versions)
        self.failed: list[int] = []  # versions on whose rows the function raised
        self.start = len(out.entries)
        self.order: dict[tuple, int] = {}  # (kind, name) -> rank of its first write
        self.tables: dict[str, list] = {}  # name -> [(version, frame, caption, kwargs)]
        self.figures: dict[str, tuple] = {}  # written name -> (kind, name, version)

    def writer(self, version: int) -> "_VersionWriter":
        return _VersionWriter(self, version)

    def _seen(self, kind: str, name: str) -> None:
        self.order.setdefault((kind, name), len(self.order))

    def add_table(self, version, name, frame, caption, kwargs) -> None:
        self._seen("table", name)
        self.tables.setdefault(name, []).append((version, frame.copy(), caption, kwargs))

    def add_figure(self, version, name, fig, caption) -> None:
        self._seen("figure", name)
        shown = f"{name}_v{version}"
        self.figures[shown] = ("figure", name, version)
        others = [v for v in self.versions if v != version]
        self.out.figure(shown, fig, caption=_with_sentence(
            caption, f"Experiment version {version} only (the report's rows are also of "
            f"version{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}: one "
            "figure per version)."))

    def flush(self) -> None:
        for name, parts in self.tables.items():
            frames = []
            for version, frame, _, _ in parts:
                if "experiment_version" not in frame.columns:
                    frame.insert(0, "experiment_version", version)
                frames.append(frame)
            table = pd.concat([f for f in frames if len(f)] or frames, ignore_index=True)
            self.out.table(name, table, self._caption(parts), **parts[0][3])
        keys = {}
        for (kind, name), rank in self.order.items():
            if kind == "table":
                keys[("table", name)] = (rank, 0)
        for shown, (kind, name, version) in self.figures.items():
            keys[("figure", shown)] = (self.order[(kind, name)], version)
        end = len(self.order)
        entries = self.out.entries[self.start:]
        entries.sort(key=lambda e: keys.get((e["kind"], e["name"]), (end, 0)))
        self.out.entries[self.start:] = entries

    def _caption(self, parts) -> str:
        versions = [p[0] for p in parts]
        captions = [(p[2] or "").strip() for p in parts]
        if len(set(captions)) == 1:
            text = captions[0]
        else:
            # each version's caption a sentence of its own ('... its column Experiment
            # version 3: ...' ran them together)
            text = " ".join(_sentence(f"Experiment version {v}: {c or '(no caption)'}")
                            for v, c in zip(versions, captions))
        if len(versions) == 1:
            others = [v for v in self.versions if v != versions[0]]
            failed = [v for v in others if v in self.failed]
            why = ("gave no such table" if not failed else
                   "gave no such table; the report function failed on version"
                   f"{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))}")
            note = (f"Rows of experiment version {versions[0]} only (the rows of version"
                    f"{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} {why}).")
        else:
            note = (f"Experiment versions {', '.join(map(str, versions))} are kept apart "
                    "(column experiment_version): no row, count or statistic pools versions.")
        return _with_sentence(text, note)


class _VersionWriter:
    """The writer a report function gets for one experiment version's rows (see
    :class:`_VersionSplit`); everything but ``table`` and ``figure`` is the report's writer."""

    def __init__(self, split: _VersionSplit, version: int):
        self._split = split
        self._version = version

    def __getattr__(self, attr):
        return getattr(self._split.out, attr)

    def table(self, name, df, caption: str = "", float_format: str = "%.12g",
              sig_digits: int | None = None):
        self._split.add_table(self._version, name, df, caption,
                              {"float_format": float_format, "sig_digits": sig_digits})

    def figure(self, name, fig, caption: str = ""):
        self._split.add_figure(self._version, name, fig, caption)


def _sentence(text: str) -> str:
    """``text`` ending with a full stop (a caption ending in ``(nat)`` ends no sentence)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", ".)")) else text + "."


def _with_sentence(caption: str, sentence: str) -> str:
    """``caption`` followed by ``sentence`` (``sentence`` alone when there is no caption)."""
    caption = (caption or "").rstrip()
    if not caption:
        return sentence
    return _sentence(caption) + " " + sentence
