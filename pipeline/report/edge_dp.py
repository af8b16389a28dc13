"""Reports for the edge_dp family (seed 002): loss against n for each prior with eps + alpha,
and the power of the queen-edge test against n."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from matplotlib.lines import Line2D

from pipeline.report.columns import describe_computed
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import (MAX_CURVES, caption_number, chunks, curve_style,
                                   integer_axis, legend_outside)

_MECH_SHORT = {"laplace_edge_count": "Laplace count", "randomized_response": "rand. response"}
# the experiment's own check of Lemma 4.1 (experiments/edge_dp.py): loss <= bound + this * (1 +
# bound), so float rounding (1.4e-14 over a bound of 2) is not a violation
LEMMA_RTOL = 1e-9

describe_computed("edge_dp", {
    "loss": ("edge Pufferfish loss (exact, else MCMC)", "nat"),
    "loss_se": ("standard error of an MCMC loss", "nat"),
    "alpha": ("dependence constant α (exact, else MCMC)", "nat"),
    "eps_plus_alpha": ("Lemma 4.1 bound ε + α", "nat"),
    "exact_rows": ("rows computed exactly", "1"),
    "rows_lemma_holds": ("rows with loss ≤ ε + α (± tolerance)", "1"),
    "max_loss_minus_bound": ("largest loss − (ε + α)", "nat"),
})



def _line_or_marks(ax, x, y, mark: str, **kw) -> tuple[bool, bool]:
    """Plot y against x with no marker, except at finite points with no finite neighbour (a
    single n, say), which a line alone leaves invisible: those get ``mark``. Returns (drawn,
    marked)."""
    y = np.asarray(y, float)
    finite = np.isfinite(y)
    if not finite.any():
        return False, False
    padded = np.concatenate(([False], finite, [False]))
    lone = [int(k) for k in np.flatnonzero(finite & ~padded[:-2] & ~padded[2:])]
    ax.plot(np.asarray(x, float), np.where(finite, y, np.nan), marker=mark if lone else "",
            markevery=lone or None, markersize=8, markeredgewidth=1.5, **kw)
    return True, bool(lone)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df else pd.Series(np.nan, index=df.index)


@report_for("edge_dp")
def edge_dp_loss_against_n(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    # one value column: exact where available, MCMC estimate (with SE) otherwise
    exact = _col(df, "pufferfish_loss")
    df["loss"] = exact.where(exact.notna(), _col(df, "pufferfish_loss_mcmc"))
    df["loss_se"] = _col(df, "pufferfish_loss_se")
    df["alpha"] = _col(df, "alpha_dep").where(_col(df, "alpha_dep").notna(), _col(df, "alpha_dep_mcmc"))
    df["eps_plus_alpha"] = _col(df, "bound").where(_col(df, "bound").notna(), _col(df, "bound_mcmc"))
    # the prior's and solver's parameters a sweep may vary besides n and eps: each value is a
    # setting of its own (a curve through the rows of several would zig-zag)
    swept = [c for c in ("edge", "solver", "p", "p_spread", "queen_prior", "a", "b",
                         "beta_edges", "beta_triangles", "beta_kstar", "kstar", "blocks", "p_in",
                         "p_out", "mcmc_sweeps", "mcmc_burn_in", "mcmc_chains")
             if c in df and df[c].nunique(dropna=False) > 1]
    keys = ["prior", "mechanism", *swept, "edge_class", "eps", "n"]
    cols = keys + ["method", "p_edge", "alpha", "loss", "loss_se", "eps_plus_alpha", "ergm_R",
                   "ergm_2zeta", "lemma_holds"]
    table = df[[c for c in cols if c in df]].sort_values(keys).reset_index(drop=True)
    out.table("edge_dp_loss", table,
              caption="Edge-level Pufferfish loss of ε-edge-DP mechanisms against the Lemma 4.1 "
                      "bound ε + α (seed 002). Rows computed by MCMC are estimates, with their "
                      "jackknife standard error.")

    exact_rows = df[df["method"] != "mcmc"]
    if len(exact_rows):
        excess = exact_rows["loss"] - exact_rows["eps_plus_alpha"]
        summary = (exact_rows.assign(excess=excess)
                   .groupby(["prior", "mechanism"])
                   .agg(exact_rows=("loss", "size"),
                        rows_lemma_holds=("lemma_holds", "sum"),
                        max_loss_minus_bound=("excess", "max"))
                   .reset_index())
        holds = int(summary["rows_lemma_holds"].sum())
        largest = float(excess.max())
        verdict = ("in every row" if holds == len(exact_rows) else
                   f"in {holds:,} of {len(exact_rows):,} rows")
        tol = caption_number(LEMMA_RTOL)
        rounding = (f"; the largest loss minus bound, {caption_number(largest)}, is float rounding, within "
                    "that tolerance" if largest > 0 and holds == len(exact_rows) else "")
        out.table("edge_dp_lemma_check", summary,
                  caption="Lemma 4.1 check on the exact rows: the loss is at most ε + α "
                          f"{verdict}, up to a tolerance of {tol}·(1 + ε + α) as the experiment "
                          f"checks it (loss ≤ ε + α + {tol}·(1 + ε + α))"
                          f"{rounding}.")

    # one small multiple per prior and mechanism (and, beyond MAX_CURVES // 2 edge classes,
    # per group of them): a class draws its loss and its bound, so a panel holds at most
    # MAX_CURVES curves. Colour and marker = edge class (and eps), one mapping for the whole
    # figure; line = mechanism (Laplace solid and filled, randomized response dotted and open)
    priors = [p for p in ("er", "hive", "ergm", "sbm") if p in set(df["prior"])]
    many_eps = df["eps"].nunique() > 1
    classes = sorted(set(zip(df["edge_class"], df["eps"])))
    mech_line = {"laplace_edge_count": ("-", "full"), "randomized_response": (":", "none")}
    panels = []
    for prior in priors:
        for mech in sorted(set(df.loc[df["prior"] == prior, "mechanism"])):
            rows = df[(df["prior"] == prior) & (df["mechanism"] == mech)]
            for values, sub in (rows.groupby(swept, dropna=False) if swept else [((), rows)]):
                values = values if isinstance(values, tuple) else (values,)
                setting = "".join(f", {c} = {v}" for c, v in zip(swept, values))
                mine = [c for c in classes if c in set(zip(sub["edge_class"], sub["eps"]))]
                for part in chunks(mine, MAX_CURVES // 2):
                    panels.append((prior, mech, part, sub, setting))
    fig, axes = out.small_multiples(len(panels), max_cols=2, aspect=0.75)
    drawn: set = set()  # the bound's kinds some panel shows: the legend and caption say these only
    for ax, (prior, mech, part, sub, setting) in zip(axes, panels):
        ls, fill = mech_line.get(mech, ("-.", "full"))
        for cls, eps in part:
            g = sub[(sub["edge_class"] == cls) & (sub["eps"] == eps)].sort_values("n")
            style = curve_style(classes.index((cls, eps)))
            ax.errorbar(g["n"], g["loss"], yerr=g["loss_se"].fillna(0).values,
                        marker=style["marker"], ls=ls, color=style["color"], fillstyle=fill,
                        capsize=2, label="_")
            # a bound at a single n (or between infinite ones) is a short dash, not nothing
            shown, marked = _line_or_marks(ax, g["n"], g["eps_plus_alpha"], "_", ls="--",
                                           color=style["color"], lw=0.8)
            drawn |= {"bound"} if shown else set()
            drawn |= {"bound_dash"} if marked else set()
        for eps in sorted(sub["eps"].unique()):
            ax.axhline(eps, color="grey", lw=0.8, ls=(0, (1, 3)), marker="")
        ax.set_title(f"prior: {prior}, {_MECH_SHORT.get(mech, mech)}{setting}")
        ax.set_xlabel("number of nodes $n$")
        integer_axis(ax, "x")
        ax.set_ylabel("edge Pufferfish loss (nats)")
        top = sub[["loss", "eps_plus_alpha"]].replace([np.inf], np.nan).max().max()
        if np.isfinite(top) and top > 20:
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, 1.15 * top if np.isfinite(top) and top > 0 else 1)
            ax.ticklabel_format(axis="y", useOffset=False)
    handles = [Line2D([], [], ls="", color=curve_style(i)["color"], marker=curve_style(i)["marker"],
                      label=cls + (rf", $\varepsilon={eps:g}$" if many_eps else ""))
               for i, (cls, eps) in enumerate(classes)]
    handles += [Line2D([], [], color="k", ls=ls, marker="o", fillstyle=fill,
                       label=_MECH_SHORT.get(mech, mech))
                for mech, (ls, fill) in mech_line.items() if mech in set(df["mechanism"])]
    if "bound" in drawn:
        handles.append(Line2D([], [], color="k", ls="--", lw=0.8, markersize=8,
                              marker="_" if "bound_dash" in drawn else "",
                              label=r"Lemma 4.1 bound $\varepsilon+\alpha$"))
    handles.append(Line2D([], [], color="grey", ls=(0, (1, 3)), label=r"$\varepsilon$"))
    legend_outside(fig, handles=handles, ncols=3)
    bound = ("" if "bound" not in drawn else
             ", with the Lemma 4.1 bound ε + α (dashed" + ("; a short dash where a curve has a "
                                                          "single n" if "bound_dash" in drawn
                                                          else "") + ")")
    out.figure("edge_dp_loss_vs_n", fig,
               caption="Exact edge-level Pufferfish loss (MCMC estimates with ±1 SE bars) against "
                       f"n for each prior and mechanism{bound}; ε dotted.")


@report_for("edge_test")
def edge_test_power_against_n(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    # a setting is every parameter but n: the test's level or threshold may be swept too
    varying = [c for c in ("level", "threshold_density")
               if c in df and df[c].nunique(dropna=False) > 1]
    keys = ["eps", "a", "b", *varying]
    cols = keys + ["n", "m", "threshold_used", "size_threshold", "power_threshold",
                   "log_ratio_threshold", "size_np", "power_np", "log_ratio_np", "pufferfish_loss",
                   "bound"]
    table = df[[c for c in cols if c in df]].sort_values(keys + ["n"]).reset_index(drop=True)
    out.table("edge_test_size_power", table,
              caption="Example 1 (seed 002): exact size and power of the threshold test (noisy "
                      "density > (a + b)/2) and of the Neyman-Pearson test of the queens' edge; "
                      "ln(power/size) ≤ Pufferfish loss ≤ ε + α.")

    # colour and marker = (eps, a, b); line = quantity (explained once in the legend). Left:
    # power and size (2 curves per setting), right: power/size, e^loss, e^(eps + alpha) (3 per
    # setting); beyond MAX_CURVES // 3 settings, further rows of panels.
    settings = list(df.groupby(keys, dropna=False))
    rows = chunks(list(enumerate(settings)), MAX_CURVES // 3)
    fig, axes = out.new_figure(nrows=len(rows), ncols=2, aspect=0.85)
    axes = np.reshape(axes, (len(rows), 2))
    log10 = 1 / math.log(10)
    kind_ls = {"loss": "-.", "bound": "--"}
    drawn: set = set()  # what some right panel shows: the legend lists these only
    tagged = []
    for (ax1, ax2), row in zip(axes, rows):
        for i, ((eps, a, b, *swept), g) in row:
            g = g.sort_values("n")
            color, marker = curve_style(i)["color"], curve_style(i)["marker"]
            tag = rf"$\varepsilon={eps:g}$, $a={a:g}$, $b={b:g}$" + "".join(
                f", {name.replace('_', ' ')} " + ("(a+b)/2" if pd.isna(value) else f"{value:g}")
                for name, value in zip(varying, swept))
            tagged.append(ax1.plot(g["n"], g["power_threshold"], marker=marker, color=color,
                                   ls="-", label=tag)[0])
            ax1.plot(g["n"], g["size_threshold"], marker=marker, fillstyle="none", ls="--",
                     color=color)
            ax2.plot(g["n"], g["log_ratio_threshold"] * log10, marker=marker, color=color, ls="-")
            # without a marker a single n draws nothing: e^loss a cross, the bound a dash there
            for col, kind, mark, kw in (("pufferfish_loss", "loss", "x", {}),
                                        ("bound", "bound", "_", {"lw": 0.8})):
                shown, marked = _line_or_marks(ax2, g["n"], g[col] * log10, mark, ls=kind_ls[kind],
                                               color=color, **kw)
                drawn |= {kind} if shown else set()
                drawn |= {kind + "_mark"} if marked else set()
        ax1.set_xscale("log")
        ax1.set_xlabel("number of insects $n$")
        integer_axis(ax1, "x")
        ax1.set_ylabel(r"probability of rejecting $H_0$ (no queen edge)")
        ax1.set_title("threshold test on the noisy density")
        ax2.set_xscale("log")
        # the values are already log10: a linear axis (a log one read 10^2 as a ratio of 10^100
        # and, over a narrow range, labelled no tick near the data)
        ax2.set_xlabel("number of insects $n$")
        integer_axis(ax2, "x")
        ax2.set_ylabel(r"$\log_{10}$ of the ratio")
        ax2.set_title(r"power/size against $e^{\mathrm{loss}}$ and $e^{\varepsilon+\alpha}$")
    handles = list(tagged)
    handles += [Line2D([], [], color="k", ls="-", label="power (left); power/size (right)"),
                Line2D([], [], color="k", ls="--", label="size (left)")]
    handles += [Line2D([], [], color="k", ls=kind_ls[kind], markersize=8, markeredgewidth=1.5,
                       marker=mark if kind + "_mark" in drawn else "",
                       label=label + " (right)")
                for kind, mark, label in (("bound", "_", r"$e^{\varepsilon+\alpha}$"),
                                          ("loss", "x", r"$e^{\mathrm{loss}}$"))
                if kind in drawn]
    legend_outside(fig, handles=handles, ncols=3)
    out.figure("edge_test_power_vs_n", fig,
               caption="Example 1: size → 0 and power → 1 as n grows (left); power/size never "
                       "exceeds e^loss ≤ e^(ε + α), both of which grow without bound (right, "
                       "log10 of each ratio"
                       + ("; at a single n, e^loss is a cross and e^(ε + α) a short dash"
                          if {"loss_mark", "bound_mark"} & drawn else "") + ").")
