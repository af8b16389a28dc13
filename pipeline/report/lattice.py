"""Reports for the clique-inserted lattice family (thesis 004, ch. 6; issue 4).

* ``lattice``: energy per vertex and spanning-tree entropy against L for each boundary, with
  the infinite-lattice limit drawn in; a table of the values and one of the limits.
* ``lattice_limit``: the table of limits for each lattice, beside the thesis's printed values.

The limit lines of the ``lattice`` report are recomputed with the kernel
(:func:`pipeline.kernels.lattice_spectra.lattice_limits`, about a second per lattice), so the
report does not depend on a ``lattice_limit`` run being present.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipeline.kernels.lattices import BOUNDARIES
from pipeline.report.columns import describe_computed
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import curve_style, integer_axis, legend_outside

# curve i of every panel is BOUNDARIES[i]: curve_style(i)
# Values printed in the thesis (§6.2.1, §6.2.2, §6.3.1), as strings of the printed digits.
THESIS_VALUES = {
    ("hexagonal", 0): (None, "0.8076649"),   # z_hc quoted from [Shrock and Wu, 2000]
    ("hexagonal", 1): ("1.4825", "0.7205633"),
    ("hexagonal", 2): ("1.4908", "0.6915295"),
}



# the columns the lattice report computes (the limits are recomputed, not read from a
# lattice_limit run: lattice_limit declares them, lattice does not). ln τ / N is in nats.
describe_computed("lattice", {
    "lattice": ("lattice", None),
    "energy_per_vertex_limit": ("E / N of the infinite lattice", "1"),
    "spanning_tree_entropy_limit": ("ln τ / N of the infinite lattice", "nat"),
    "energy_error": ("E / N − its infinite-lattice limit", "1"),
    "entropy_error": ("ln τ / N − its infinite-lattice limit", "nat"),
})

_NAMED = {("hexagonal", 1): "3-12-12", ("hexagonal", 2): "3-6-24", ("hexagonal", 3): "3-6-12-48"}
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _lattice_label(base: str, k: int) -> str:
    """Table text: 3-12-12, square, C¹(square) (the superscript a character, not ``^1``)."""
    return _NAMED.get((base, k), base if k == 0 else f"C{str(k).translate(_SUPERSCRIPT)}({base})")


def _lattice_tex(base: str, k: int) -> str:
    """Figure text (mathtext): $C^{1}$(square)."""
    return _NAMED.get((base, k), base if k == 0 else rf"$C^{{{k}}}$({base})")


def _agrees(printed: str | None, value: float) -> bool | None:
    """A printed value 'agrees' if the exact value, truncated or rounded to the printed
    number of decimals, gives the printed digits."""
    if printed is None or value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    decimals = len(printed.split(".")[1])
    rounded = f"{value:.{decimals}f}"
    truncated = f"{math.floor(value * 10 ** decimals) / 10 ** decimals:.{decimals}f}"
    return printed in (rounded, truncated)


def _limits_for(pairs) -> pd.DataFrame:
    from pipeline.kernels.lattice_spectra import lattice_limits

    rows = []
    for base, k in pairs:
        lim = lattice_limits(base, int(k))
        rows.append({"base": base, "insertions": int(k), "lattice": _lattice_label(base, int(k)),
                     "energy_per_vertex_limit": lim["energy_per_vertex_limit"],
                     "spanning_tree_entropy_limit": lim["spanning_tree_entropy_limit"]})
    return pd.DataFrame(rows)


@report_for("lattice")
def convergence_against_L(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    ok["L"] = np.sqrt(ok["L1"].astype(float) * ok["L2"].astype(float))
    pairs = sorted(set(zip(ok["base"], ok["insertions"].astype(int))))
    limits = _limits_for(pairs)
    out.table("lattice_limits", limits,
              caption="Infinite-lattice energy per vertex and spanning-tree entropy "
                      "(Brillouin-zone integration) for each lattice in this run.")
    merged = ok.merge(limits[["base", "insertions", "energy_per_vertex_limit",
                              "spanning_tree_entropy_limit"]], on=["base", "insertions"])
    merged["energy_error"] = merged["energy_per_vertex"] - merged["energy_per_vertex_limit"]
    merged["entropy_error"] = (merged["spanning_tree_entropy"]
                               - merged["spanning_tree_entropy_limit"])
    cols = ["base", "insertions", "boundary", "L1", "L2", "n_vertices", "n_edges",
            "energy_per_vertex", "energy_error", "spanning_tree_entropy", "entropy_error",
            "log_dimers", "kirchhoff_index", "algebraic_connectivity", "method"]
    table = merged[[c for c in cols if c in merged.columns]].sort_values(
        ["base", "insertions", "boundary", "L1", "L2"])
    out.table("lattice_values", table,
              caption="Finite lattices: energy per vertex and spanning-tree entropy with their "
                      "distance to the infinite-lattice limit.")
    # the exact counts, as the columns declare them (EXACT_SCIENTIFIC: 1.23457e+45 in print,
    # every digit in the CSV)
    counts = [c for c in ("base", "insertions", "boundary", "L1", "L2", "n_vertices",
                          "spanning_trees", "dimers") if c in merged.columns]
    if {"spanning_trees", "dimers"} & set(counts):
        out.table("lattice_counts", merged[counts].sort_values(
                      ["base", "insertions", "boundary", "L1", "L2"]),
                  caption="Finite lattices: exact numbers of spanning trees τ(G) and of perfect "
                          "matchings M(G), rounded to scientific form (the CSV keeps every digit).")

    for base, k in pairs:
        sub = merged[(merged["base"] == base) & (merged["insertions"] == k)]
        lim = limits[(limits["base"] == base) & (limits["insertions"] == k)].iloc[0]
        fig, axes = out.new_figure(ncols=2, aspect=0.8)
        axes = np.ravel(axes)
        for ax, key, limit_key, label in (
                (axes[0], "energy_per_vertex", "energy_per_vertex_limit",
                 "energy per vertex $\\mathcal{E}/N$"),
                (axes[1], "spanning_tree_entropy", "spanning_tree_entropy_limit",
                 "spanning-tree entropy $\\ln\\tau/N$ (nats)")):  # unit: nat, as the tables
            for i, boundary in enumerate(BOUNDARIES):
                b = sub[(sub["boundary"] == boundary) & sub[key].notna()].sort_values("L")
                if not b.empty:
                    ax.plot(b["L"], b[key], label=boundary, **curve_style(i))
            ax.axhline(lim[limit_key], color="k", lw=0.8, ls=(0, (6, 2, 1, 2)), marker="",
                       label="infinite-lattice limit")
            ax.set_xscale("log", base=2)
            ax.set_xlabel(r"linear size $L=\sqrt{L_1 L_2}$ (unit cells)")
            integer_axis(ax, "x", integer=_whole(sub["L"]))
            ax.set_ylabel(label)
            ax.set_title(f"limit {lim[limit_key]:.6f}")
        fig.suptitle(f"{_lattice_tex(base, k)} lattice: convergence with the boundary")
        legend_outside(fig)
        out.figure(f"convergence_{base}_k{k}", fig,
                   caption=f"{_lattice_label(base, k)}: energy per vertex and spanning-tree "
                           f"entropy against L for {_and(_present(sub['boundary']))} boundaries; "
                           "the dash-dotted line is the infinite-lattice limit.")

    # distance to the limit on log-log axes: 1/L for cylinder/free, faster for the torus.
    # One small multiple per lattice: colour and marker = boundary, line = quantity.
    from matplotlib.lines import Line2D

    groups = list(merged.groupby(["base", "insertions"]))
    fig, axes = out.small_multiples(len(groups), sharex=True, sharey=True)
    quantities = (("energy_error", "-", "full", r"energy per vertex $\mathcal{E}/N$"),
                  ("entropy_error", "--", "none", r"spanning-tree entropy $\ln\tau/N$ (nats)"))
    for ax, ((base, k), sub) in zip(axes, groups):
        for key, line, fill, _ in quantities:
            for i, boundary in enumerate(BOUNDARIES):
                b = sub[(sub["boundary"] == boundary) & sub[key].notna()].sort_values("L")
                b = b[b[key].abs() > 0]
                if not b.empty:
                    style = curve_style(i)
                    ax.plot(b["L"], b[key].abs(), color=style["color"], marker=style["marker"],
                            linestyle=line, fillstyle=fill)
        ax.set_xscale("log")
        ax.set_yscale("log")
        integer_axis(ax, "x", integer=_whole(merged["L"]))
        ax.set_title(_lattice_tex(base, k))
    for ax in axes[-min(3, len(axes)):]:  # the bottom panel of each column
        ax.set_xlabel(r"linear size $L=\sqrt{L_1 L_2}$ (unit cells)")
    fig.supylabel(r"distance to the limit $|x_L - x_\infty|$")
    present = _present(merged["boundary"])  # a boundary with no rows is not in the legend
    handles = [Line2D([], [], color=curve_style(i)["color"], marker=curve_style(i)["marker"],
                      linestyle="", label=boundary) for i, boundary in enumerate(BOUNDARIES)
               if boundary in present]
    handles += [Line2D([], [], color="k", linestyle=line, marker="o", fillstyle=fill, label=text)
                for _, line, fill, text in quantities]
    legend_outside(fig, handles=handles, ncols=min(len(handles), 3))
    slow = [b for b in present if b != "torus"]  # the 1/L claim, of the boundaries drawn
    claim = "" if not slow else (f"; in theory the {_and(slow)} boundar"
                                 + ("ies approach" if len(slow) > 1 else "y approaches")
                                 + " it like 1/L (the boundary's share of the vertices)"
                                 + (", the torus faster" if "torus" in present else ""))
    out.figure("convergence_errors", fig,
               caption=f"Distance to the infinite-lattice limit against L (log-log){claim}.")


@report_for("lattice_limit")
def limits_table(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    rows = []
    for r in ok.sort_values(["base", "insertions"]).itertuples(index=False):
        e_printed, z_printed = THESIS_VALUES.get((r.base, int(r.insertions)), (None, None))
        rows.append({"lattice": r.lattice_name, "base": r.base, "insertions": int(r.insertions),
                     "cell_size": int(r.cell_size), "degree": int(r.degree),
                     "energy_per_vertex_limit": r.energy_per_vertex_limit,
                     "thesis_energy": e_printed or "",
                     "energy_agrees": _agrees(e_printed, r.energy_per_vertex_limit),
                     "spanning_tree_entropy_limit": r.spanning_tree_entropy_limit,
                     "thesis_entropy": z_printed or "",
                     "entropy_agrees": _agrees(z_printed, r.spanning_tree_entropy_limit),
                     "method": r.method})
    table = pd.DataFrame(rows)
    for col in ("energy_agrees", "entropy_agrees"):
        table[col] = table[col].map(lambda v: "" if v is None else ("yes" if v else "NO"))
    out.table("limits", table, float_format="%.12f", sig_digits=13,  # beside printed digits
              caption="Energy per vertex and spanning-tree entropy of the infinite lattices "
                      "(at least 10 correct digits), beside the values printed in the thesis.")

    fig, axes = out.new_figure(ncols=2, aspect=0.8)
    axes = np.ravel(axes)
    for i, (base, sub) in enumerate(ok.groupby("base")):
        sub = sub.sort_values("insertions")
        axes[0].plot(sub["insertions"], sub["energy_per_vertex_limit"], label=base, **curve_style(i))
        axes[1].plot(sub["insertions"], sub["spanning_tree_entropy_limit"], label=base,
                     **curve_style(i))
    axes[0].set_ylabel(r"energy per vertex $\mathcal{E}/N$ (limit)")
    axes[1].set_ylabel(r"spanning-tree entropy $\ln\tau/N$ (limit, nats)")
    for ax in axes:
        ax.set_xlabel("clique insertions $k$")
        integer_axis(ax, "x")
    legend_outside(fig)
    out.figure("limits_vs_insertions", fig,
               caption="Infinite-lattice energy per vertex and spanning-tree entropy of Cᵏ(H) "
                       "against the number of clique insertions k.")


def _present(boundaries) -> list[str]:
    """The boundaries among ``boundaries`` (a column of rows), in the order of BOUNDARIES."""
    present = set(boundaries)
    return [b for b in BOUNDARIES if b in present]


def _and(words) -> str:
    """'torus', 'torus and free', 'torus, cylinder and free'."""
    words = list(words)
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _whole(values) -> bool:
    """Whether every value is a whole number (L = sqrt(L1 L2) is one when L1 = L2)."""
    v = np.asarray(values, dtype=float)
    return bool(np.all(np.isclose(v, np.round(v))))


def _exact(value) -> int | None:
    """A stored exact count (a decimal string) as an int; None where it is null."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) or \
        value == "" else int(value)


@report_for("clique_graph")
def clique_graph_checks(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    table = ok[[c for c in ("graph", "size", "degree", "insertions", "n_vertices",
                            "regular_degree", "energy", "energy_map", "log_spanning_trees",
                            "algebraic_connectivity", "algebraic_connectivity_map",
                            "log_dimers") if c in ok.columns]].copy()
    if "degree" in table:  # a parameter of random_regular only: other graphs ignore it
        table["degree"] = table["degree"].astype("Int64").where(table["graph"] == "random_regular")
    # exact counts compared as Python integers (as floats, counts beyond 2^53 that differ
    # compare equal); a count not stored (too long, none) leaves its check unknown: ''
    trees = [_exact(v) for v in ok["spanning_trees"]]
    table["trees_lemma_6_3_1"] = [
        "" if a is None or b is None else "equal" if a == b else "DIFFERENT"
        for a, b in zip(trees, (_exact(v) for v in ok["spanning_trees_lemma"]))]
    table["dimers_vs_lemma_6_3_4"] = [
        "" if m is None or b is None else "equal" if m == b else
        "above bound" if m > b else "BELOW BOUND"
        for m, b in zip((_exact(v) for v in ok["dimers"]),
                        (_exact(v) for v in ok["dimers_lemma_bound"]))]
    out.table("clique_graph_checks", table.sort_values(["graph", "size", "insertions"]),
              caption="Cᵏ(G) of named regular graphs: direct energy and algebraic connectivity "
                      "μ₂ beside their spectral maps (Cor. 6.2.3 corrected, Prop. 6.4.1), and the "
                      "checks of Lemmas 6.3.1 and 6.3.4.")
    counts = [c for c in ("graph", "size", "insertions", "n_vertices", "spanning_trees",
                          "dimers", "dimers_lemma_bound") if c in ok.columns]
    out.table("clique_graph_counts", ok[counts].sort_values(["graph", "size", "insertions"]),
              caption="Cᵏ(G): exact numbers of spanning trees and of perfect matchings, and the "
                      "Lemma 6.3.4 bound, rounded to scientific form (the CSV keeps every digit).")
