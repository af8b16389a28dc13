"""The one figure style of every report: print-ready fonts, sizes, palette, ticks and files.

* ``report_style=paper`` (default): figures one column (3.4 in) or two columns (7 in) wide, the
  widths of IEEE/ACM two-column pages, with 8 pt text, so they drop into a paper at 100 %.
  ``slides``: the same layouts at 1.6x the size with larger text.
* PDF embeds TrueType fonts as Type 42 (IEEE PDF eXpress and ACM's checks reject Type 3);
  SVG is written beside PDF and PNG. The PDF and SVG carry no creation date, so a report rebuilt
  from the same data gives the same bytes.
* Curves are told apart by colour (Okabe & Ito's colour-blind-safe palette), marker and line
  style together, so they survive greyscale printing. At most :data:`MAX_CURVES` per panel:
  more become small multiples (:func:`small_multiples`).
* Legends go outside the data (:func:`legend_outside`); symbols use mathtext (ν, ε, C¹);
  log axes get plain decade ticks (``10^{-3}``), never ``4×10^0``.
* An axis of a discrete quantity (a size L, a number of nodes n) is marked with
  :func:`integer_axis`: with few distinct values (at most :data:`MAX_VALUE_TICKS`, and room for
  their labels) it gets a tick at each value plotted, otherwise integer ticks only (never 3.5
  nodes, never a size left unlabelled between octave ticks).
* :func:`save_figure` refuses a figure with an unlabelled axis, and one with a panel of more
  than :data:`MAX_CURVES` curves (reference lines such as ``axhline`` or lines drawn with
  ``gid="reference"`` do not count; see :func:`panel_curves`).
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path

# Subsetting DejaVu for Type 42 makes fontTools warn about the font's own 'head' timestamps on
# every save; the fonts embed correctly, so the warning is only noise in a sweep's output.
logging.getLogger("fontTools.ttLib.tables._h_e_a_d").setLevel(logging.ERROR)

STYLES = ("paper", "slides")
SINGLE_COLUMN_IN = 3.4
DOUBLE_COLUMN_IN = 7.0
# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision
# deficiencies; yellow last (weak on white).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2)),
              (0, (3, 1, 1, 1))]
MAX_CURVES = 6  # beyond this one panel becomes a grid of small multiples (save_figure checks)
MAX_VALUE_TICKS = 8  # an integer axis with at most this many values gets a tick at each
REFERENCE = "reference"  # gid of a line that is a reference (a limit, a diagonal), not a curve
FORMATS = ("png", "pdf", "svg")

_SCALE = {"paper": 1.0, "slides": 1.6}
_FONT_PT = {"paper": 8.0, "slides": 12.0}
_PNG_DPI = {"paper": 300, "slides": 200}


class FigureStyleError(ValueError):
    """A figure that would not be fit for print (an unlabelled axis, an unknown style)."""


def check_style(style: str) -> str:
    if style not in STYLES:
        raise FigureStyleError(f"report_style must be one of {', '.join(STYLES)}, got {style!r}")
    return style


def curve_style(i: int) -> dict:
    """Colour, marker and line style of the i-th curve of a panel (all three differ)."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def rc_params(style: str = "paper") -> dict:
    """Matplotlib settings of one style (applied around every figure with ``rc_context``)."""
    from cycler import cycler

    check_style(style)
    pt = _FONT_PT[style]
    return {
        "pdf.fonttype": 42, "ps.fonttype": 42,   # TrueType (Type 42), not Type 3
        "svg.fonttype": "path",                  # SVG renders the same everywhere
        "svg.hashsalt": "pipeline-report",       # fixed clip-path ids: a rebuild, same bytes
        "font.family": "DejaVu Sans", "mathtext.fontset": "dejavusans",
        "font.size": pt, "axes.titlesize": pt, "axes.labelsize": pt, "legend.fontsize": pt - 1,
        "xtick.labelsize": pt - 1, "ytick.labelsize": pt - 1, "figure.titlesize": pt + 1,
        "figure.labelsize": pt,
        "axes.formatter.use_mathtext": True,
        "axes.prop_cycle": cycler(color=PALETTE) + cycler(marker=MARKERS)
        + cycler(linestyle=LINESTYLES),
        "lines.linewidth": 1.2 * _SCALE[style] ** 0.5, "lines.markersize": 3.5 * _SCALE[style],
        "axes.linewidth": 0.6, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
        "legend.frameon": False, "legend.handlelength": 2.6,
        "figure.dpi": 100, "savefig.dpi": _PNG_DPI[style], "figure.constrained_layout.use": True,
    }


def new_figure(style: str = "paper", nrows: int = 1, ncols: int = 1, span: str | None = None,
               aspect: float | None = None, sharex: bool = False, sharey: bool = False):
    """A figure and its axes at print size.

    ``span`` is ``"single"`` (3.4 in) or ``"double"`` (7 in); by default one column for one
    panel and two for several side by side. ``aspect`` is panel height / panel width
    (default 0.72, capped so a grid stays within a page)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_style(style)
    span = span or ("single" if ncols == 1 else "double")
    if span not in ("single", "double"):
        raise FigureStyleError(f"span must be 'single' or 'double', got {span!r}")
    width = (SINGLE_COLUMN_IN if span == "single" else DOUBLE_COLUMN_IN) * _SCALE[style]
    panel_w = width / ncols
    # panels no flatter than 1.5 in (tick labels, titles), plus room for a legend below
    panel_h = max(panel_w * (aspect or 0.72), 1.5 * _SCALE[style])
    height = min(panel_h * nrows + 0.7 * _SCALE[style], 9.0 * _SCALE[style])
    with matplotlib.rc_context(rc_params(style)):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), sharex=sharex,
                                 sharey=sharey, squeeze=True)
    fig._pipeline_style = style  # save_figure renders with the same settings
    return fig, axes


def small_multiples(style: str, n_panels: int, max_cols: int = 3, aspect: float = 0.8,
                    sharex: bool = False, sharey: bool = False):
    """A grid of ``n_panels`` panels (two columns wide, at most ``max_cols`` across); returns
    the figure and a flat list of the panels in use (surplus cells are hidden). The last
    ``min(n_panels, max_cols)`` panels are the lowest of their columns: with ``sharex`` they
    carry the x tick labels, so per-panel x labels belong on them."""
    import numpy as np

    ncols = min(max_cols, max(1, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig, axes = new_figure(style, nrows=nrows, ncols=ncols,
                           span="single" if ncols == 1 else "double", aspect=aspect,
                           sharex=sharex, sharey=sharey)
    flat = list(np.ravel(axes))
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    if sharex:
        # shared x axes number the last row only: a panel above a hidden cell (4 panels on 3
        # columns) had none. The last ncols panels are the lowest of their columns.
        for ax in flat[max(0, n_panels - ncols):n_panels]:
            ax.xaxis.set_tick_params(which="both", labelbottom=True)
            ax.xaxis.offsetText.set_visible(True)
    # sharey needs nothing: hidden cells end the last row, so every row keeps its first panel
    return fig, flat[:n_panels]


def chunks(items, size: int = MAX_CURVES) -> list:
    """``items`` cut into groups of at most ``size`` (the curves of one small multiple)."""
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


def legend_outside(fig, axes=None, handles=None, labels=None, where: str = "below",
                   ncols: int | None = None, title: str | None = None):
    """One legend for the whole figure, outside every axes (below, or right of, the panels).

    Handles are gathered from ``axes`` (default: all) and deduplicated by label."""
    if handles is None:
        seen: dict = {}
        for ax in (axes if axes is not None else fig.axes):
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab and not lab.startswith("_"):
                    seen.setdefault(lab, h)
        labels, handles = list(seen), list(seen.values())
    elif labels is None:
        labels = [h.get_label() for h in handles]
    if not handles:
        return None
    if where == "below":
        width_in = fig.get_figwidth()
        longest = max(len(str(lab)) for lab in labels)
        per_row = max(1, int(width_in * 72 / (plt_font_pt(fig) * (0.55 * longest + 4))))
        ncols = min(ncols or len(handles), per_row, len(handles))  # never wider than the figure
        loc = "outside lower center"
    else:
        ncols = ncols or 1
        loc = "outside right upper"
    return fig.legend(handles, labels, loc=loc, ncols=ncols, title=title)


def panel_legend(ax, where: str = "right", **kwargs):
    """A legend of one panel, outside it: on the right, or ``where="below"`` under the panel
    (for small multiples whose panels show different curves; below suits long labels)."""
    if where == "below":
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), borderaxespad=0.0,
                         **kwargs)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def plt_font_pt(fig) -> float:
    return _FONT_PT[getattr(fig, "_pipeline_style", "paper")] - 1


def decade_ticks(ax) -> None:
    """Plain ticks on log axes: labels only at powers of ten when the axis spans at least two
    decades (``10^{-3}``, unlabelled minor ticks); otherwise plain numbers (``2``, ``5``,
    ``0.3``), at linear steps (``1``, ``1.2``, ``1.4``) when the span is narrower still.
    Base-2 axes are labelled with plain numbers (4, 8, 16)."""
    from matplotlib import ticker

    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() != "log":
            continue
        lo, hi = sorted((lo, hi))
        base = getattr(axis.get_transform(), "base", 10)
        plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
        powers = (math.floor(math.log(hi, base) + 1e-9) - math.ceil(math.log(lo, base) - 1e-9) + 1
                  if lo > 0 else 99)
        if powers >= 2:  # decades (octaves) only; unlabelled minor ticks between them
            axis.set_major_locator(ticker.LogLocator(base=base, numticks=12))
            axis.set_major_formatter(ticker.LogFormatterMathtext(base=10) if base == 10 else plain)
            axis.set_minor_locator(ticker.LogLocator(base=base, subs="auto", numticks=12))
        else:  # under two powers in view: plain numbers at 1-2-5 (or every digit) steps
            for subs in ((1.0, 2.0, 5.0), tuple(float(d) for d in range(1, 10))):
                locator = ticker.LogLocator(base=base, subs=subs, numticks=30)
                if sum(lo <= t <= hi for t in locator.tick_values(lo, hi)) >= 3:
                    break
            else:  # narrower than two digits (0.96 to 1.8 showed only "1"): linear nice steps,
                # the axis being near linear over so short a span
                ticks = [t for t in ticker.MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
                         .tick_values(lo, hi) if t > 0 and lo <= t <= hi]
                if len(ticks) >= 2:
                    locator = ticker.FixedLocator(ticks)
            axis.set_major_locator(locator)
            axis.set_major_formatter(plain)
            axis.set_minor_locator(ticker.LogLocator(base=base, subs="all", numticks=30))
        axis.set_minor_formatter(ticker.NullFormatter())


def integer_axis(ax, which: str = "x", integer: bool = True) -> None:
    """Mark the ``which`` axis ("x" or "y") of ``ax`` as discrete: when the figure is saved,
    it gets a tick at each distinct value its curves take when there are at most
    :data:`MAX_VALUE_TICKS` and their labels fit, else (``integer``: the values are integers)
    integer ticks only. Shared axes pool the values of every panel they join."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis._pipeline_discrete = "integer" if integer else "values"


def _plotted_values(ax, which: str) -> list[float]:
    """The finite data values of ``ax``'s curves on one axis (reference lines excluded)."""
    import numpy as np

    values = []
    for line in ax.get_lines():
        if line.get_transform() is not ax.transData or line.get_gid() == REFERENCE:
            continue
        data = np.asarray(line.get_xdata() if which == "x" else line.get_ydata(), dtype=float)
        values.extend(data[np.isfinite(data)].tolist())
    return values


def discrete_ticks(fig) -> None:
    """Ticks of the axes marked by :func:`integer_axis` (run after :func:`decade_ticks`)."""
    from matplotlib import ticker

    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for which in ("x", "y"):
            axis = ax.xaxis if which == "x" else ax.yaxis
            mode = getattr(axis, "_pipeline_discrete", None)
            if mode is None:
                continue
            group = (ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes())
            values = sorted({round(v, 9) for a in group.get_siblings(ax) if a.get_visible()
                             for v in _plotted_values(a, which)})
            lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
            values = [v for v in values if lo <= v <= hi]
            if not values:
                continue
            labels = [f"{v:g}" for v in values]
            if len(values) <= MAX_VALUE_TICKS and _labels_fit(ax, which, values, labels):
                axis.set_major_locator(ticker.FixedLocator(values))
                axis.set_major_formatter(ticker.FixedFormatter(labels))
                axis.set_minor_locator(ticker.NullLocator())
            elif mode == "integer" and axis.get_scale() != "log":
                axis.set_major_locator(ticker.MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
                axis.set_minor_locator(ticker.NullLocator())
            elif mode == "integer":  # log: plain powers (4, 8, 16; 10, 100): integers from 1 up
                base = getattr(axis.get_transform(), "base", 10)
                if lo < 1:
                    axis.set_major_locator(ticker.FixedLocator(
                        [t for t in ticker.LogLocator(base=base).tick_values(max(lo, 1), hi)
                         if t >= 1]))
                axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))


def _labels_fit(ax, which: str, values, labels) -> bool:
    """Whether tick labels at ``values`` are no closer than their width (x) or height (y),
    from the panel's size before layout (a little generous: layout only shrinks panels)."""
    import numpy as np

    fig = ax.figure
    pos = ax.get_position()
    size_in = (pos.width * fig.get_figwidth() if which == "x"
               else pos.height * fig.get_figheight())
    lo, hi = ax.get_xlim() if which == "x" else ax.get_ylim()
    transform = (ax.xaxis if which == "x" else ax.yaxis).get_transform()
    t = transform.transform(np.asarray([lo, hi, *values], dtype=float))
    span = abs(t[1] - t[0]) or 1.0
    where = np.sort((t[2:] - min(t[0], t[1])) / span * size_in * 0.85)
    char_in = plt_font_pt(fig) * 0.6 / 72
    need = [(len(a) + len(b)) / 2 * char_in + 0.06 if which == "x" else plt_font_pt(fig) * 1.2 / 72
            for a, b in zip(labels, labels[1:])]
    return all(gap >= n for gap, n in zip(np.diff(where), need))


SUPERSCRIPT_DIGITS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def caption_number(x: float, digits: int = 3) -> str:
    """A number for a caption: plain between 0.01 and 1000 (``0.1``, ``20``), otherwise a power
    of ten with a superscript exponent, ``10⁻⁶`` or ``2.5×10⁻⁷``, as Markdown, HTML and the
    figures show it and the LaTeX writer sets it (``10$^{-6}$``); ``1e-06`` is a programmer's
    notation, not a paper's (and ``10^{−6}`` showed its braces outside LaTeX).

    Rounded to ``digits`` significant digits first, then placed: 999.9 at 3 digits is
    ``1.00×10³`` (chosen before rounding, it fell to ``%g``, which printed ``1e+03``). A value
    that was rounded keeps its trailing zeros, as in the tables (``1.00×10³``, ``0.0100`` for
    0.009999); one exact in fewer digits is short (``10³``, ``0.5``). A negative value is the
    positive one with a leading ``-``, as every other negative number here (``-10⁻⁶``, as
    ``10⁻⁶``; it was ``-1×10⁻⁶``)."""
    from pipeline.report.core import _shortest_digits

    x = float(x)
    if x == 0 or not math.isfinite(x):
        return f"{x:.{digits}g}"
    sign, x = ("-" if x < 0 else ""), abs(x)
    mant, exp = f"{x:.{digits - 1}e}".split("e")  # rounded: its exponent is the rounded one's
    exp = int(exp)
    exact = _shortest_digits(x) <= digits
    if -2 <= exp < 3:  # the rounded value is in [0.01, 1000)
        text = f"{float(f'{mant}e{exp}'):.{max(0, digits - 1 - exp)}f}"
        if exact and "." in text:
            text = text.rstrip("0").rstrip(".")
        return sign + text
    if exact:
        mant = mant.rstrip("0").rstrip(".")
    power = "10" + str(exp).translate(SUPERSCRIPT_DIGITS)
    return sign + (power if mant == "1" else f"{mant}×{power}")


def unlabelled_axes(fig) -> list[str]:
    """Descriptions of the visible axes of ``fig`` missing an x or y label. A figure-level
    ``supxlabel``/``supylabel`` labels every panel, and a label on one of a group of shared
    axes (small multiples: the bottom row, the left column) labels the group."""
    sup_x = bool(fig._supxlabel and fig._supxlabel.get_text()) if hasattr(fig, "_supxlabel") else False
    sup_y = bool(fig._supylabel and fig._supylabel.get_text()) if hasattr(fig, "_supylabel") else False
    def labelled_in_group(ax, which: str) -> bool:  # small multiples label one shared axis
        group = (ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes())
        return any((a.get_xlabel() if which == "x" else a.get_ylabel()).strip()
                   for a in group.get_siblings(ax))

    missing = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison or _is_colorbar(ax):
            continue
        for which, sup in (("x", sup_x), ("y", sup_y)):
            if not (sup or labelled_in_group(ax, which)):
                title = ax.get_title() or f"panel {i}"
                missing.append(f"{which} axis of '{title}'")
    return missing


def panel_curves(ax) -> int:
    """The curves a reader must tell apart in one panel: its visible lines drawn in data
    coordinates with at least two points, labelled in the panel or explained by a figure
    legend (an error-bar series counts once; its caps and bars do not count). Reference lines
    do not count: ``axhline``/``axvline`` (drawn in axes coordinates) and lines given
    ``gid="reference"``."""
    from matplotlib.container import ErrorbarContainer

    caps = set()
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            caps.update(container.lines[1] or ())
    count = 0
    for line in ax.get_lines():
        if (line in caps or not line.get_visible() or line.get_gid() == REFERENCE
                or line.get_transform() is not ax.transData or len(line.get_xdata()) < 2):
            continue
        count += 1
    return count


def crowded_panels(fig, limit: int = MAX_CURVES) -> list[str]:
    """Descriptions of the visible panels of ``fig`` holding more than ``limit`` curves."""
    out = []
    for i, ax in enumerate(fig.axes):
        if ax.get_visible() and not _is_colorbar(ax):
            n = panel_curves(ax)
            if n > limit:
                out.append(f"'{ax.get_title() or f'panel {i}'}' ({n} curves)")
    return out


def _is_colorbar(ax) -> bool:
    return hasattr(ax, "_colorbar") or ax.get_label() == "<colorbar>"


def save_figure(fig, outdir, name: str, style: str | None = None) -> list[str]:
    """Write ``name``.png/.pdf/.svg into ``outdir`` and close the figure; returns the file
    names. Raises :class:`FigureStyleError` (writing nothing) if an axis has no label, a panel
    holds more than :data:`MAX_CURVES` curves (:func:`panel_curves`), a legend lies over an
    axes, or the layout collapsed (too many decorations for its size)."""
    import matplotlib
    import matplotlib.pyplot as plt

    style = style or getattr(fig, "_pipeline_style", "paper")
    missing = unlabelled_axes(fig)
    if missing:
        plt.close(fig)
        raise FigureStyleError(f"figure {name}: unlabelled {', '.join(missing)}")
    crowded = crowded_panels(fig)
    if crowded:
        plt.close(fig)
        raise FigureStyleError(f"figure {name}: more than {MAX_CURVES} curves in panel "
                               f"{', '.join(crowded)}; split them into small multiples "
                               "(chunks, small_multiples), or mark reference lines "
                               "gid='reference'")
    files = []
    try:
        with matplotlib.rc_context(rc_params(style)), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for ax in fig.axes:
                decade_ticks(ax)
            discrete_ticks(fig)
            fig.canvas.draw()  # lays the figure out once, so a collapsed layout shows here
            collapsed = [w for w in caught if "constrained_layout not applied" in str(w.message)]
            if collapsed:
                raise FigureStyleError(f"figure {name}: {collapsed[0].message}")
            fig.set_layout_engine("none")  # laid out once; the three formats reuse it
            renderer = fig.canvas.get_renderer()
            for ax in fig.axes:
                legend = ax.get_legend()
                if legend is not None and ax.get_visible() and legend.get_window_extent(
                        renderer).overlaps(ax.get_window_extent(renderer)):
                    raise FigureStyleError(f"figure {name}: a legend lies over the data of "
                                           f"'{ax.get_title() or ax.get_ylabel()}' (use "
                                           "legend_outside or panel_legend)")
            for fmt in FORMATS:
                metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None},
                            "svg": {"Date": None}}[fmt]
                fig.savefig(Path(outdir) / f"{name}.{fmt}", format=fmt, metadata=metadata)
                files.append(f"{name}.{fmt}")
    finally:
        plt.close(fig)
    return files
