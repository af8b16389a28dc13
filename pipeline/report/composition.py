"""Reports for the composition family (issue 3 / issue 10): eps~ against k, the privacy region."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.report.columns import describe_computed
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import (MAX_CURVES, REFERENCE, caption_number, chunks, curve_style,
                                   legend_outside, panel_legend)

_METHODS = [  # column, label (the curve style follows the order)
    ("eps_optimal", "optimal (Thm 3.3, exact)"),
    ("eps_kov_bound", "KOV bound (Thm 3.4)"),
    ("eps_drv", "DRV advanced composition"),
    ("eps_basic", r"basic ($k\varepsilon$)"),
]


describe_computed("composition", {
    "bound": ("bound on the total ε", None),
    "median_ratio_to_optimal": ("median of bound / optimal total ε", "1"),
    "max_ratio_to_optimal": ("largest bound / optimal total ε", "1"),
    "min_ratio_to_optimal": ("smallest bound / optimal total ε", "1"),
})


def _tex(x: float) -> str:
    """0.001 -> '10^{-3}', 2e-06 -> '2\\times10^{-6}', 0.4 -> '0.4' (for titles)."""
    if x == 0 or 1e-2 <= abs(x) < 1e3:
        return f"{x:.3g}"
    mant, exp = f"{x:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return (rf"10^{{{int(exp)}}}" if mant == "1" else rf"{mant}\times10^{{{int(exp)}}}")


def _nearest(values, target: float) -> float:
    values = np.asarray(sorted(set(values)), dtype=float)
    return float(values[np.argmin(np.abs(np.log(values) - np.log(target)))])


@report_for("composition")
def eps_against_k(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    delta = float(ok["delta"].min())
    ok = ok[ok["delta"] == delta]
    dt = _nearest(ok["delta_target"], 1e-6)
    panels = [e for e in sorted({_nearest(ok["eps"], t) for t in (0.01, 0.1, 1.0)})]
    main = _nearest(ok["eps"], 0.1)

    # main figure: one (eps, delta_target) slice, as the issue asks
    sl = ok[(ok["eps"] == main) & (ok["delta_target"] == dt)].sort_values("k")
    fig, ax = out.new_figure(aspect=0.8)
    _plot_methods(ax, sl)
    ax.set_title(rf"$\varepsilon={_tex(main)}$, $\delta={_tex(delta)}$, $\tilde\delta={_tex(dt)}$")
    legend_outside(fig, ncols=2)
    c = caption_number
    out.figure("eps_vs_k", fig, caption=f"Total ε against the number of compositions k "
               f"(per-step ε = {c(main)}, δ = {c(delta)}, total δ = {c(dt)}); log axes.")
    cols = ["k", "eps_optimal", "eps_kov_bound", "eps_drv", "eps_basic"]
    out.table("eps_vs_k", sl[cols].reset_index(drop=True),
              caption=f"Optimal total ε of the k-fold composition and three bounds on it, at "
                      f"per-step ε = {c(main)}, δ = {c(delta)} and total δ = {c(dt)}.")

    # companion: the same at a few eps values side by side
    if len(panels) > 1:
        fig, axes = out.new_figure(ncols=len(panels), aspect=0.9)
        for ax, e in zip(np.ravel(axes), panels):
            _plot_methods(ax, ok[(ok["eps"] == e) & (ok["delta_target"] == dt)].sort_values("k"))
            ax.set_title(rf"$\varepsilon={_tex(e)}$, $\delta={_tex(delta)}$, "
                         rf"$\tilde\delta={_tex(dt)}$")
        legend_outside(fig)
        out.figure("eps_vs_k_panels", fig,
                   caption=f"Total ε against k for per-step ε = "
                           f"{', '.join(c(e) for e in panels)} at per-step δ = {c(delta)} and "
                           f"total δ = {c(dt)} (log axes).")

    # how much the exact answer saves over each bound, over every finite row of the slice
    # at the smallest per-step delta (with delta > 0, k*eps is no bound where dt < k*delta)
    fin = ok[np.isfinite(ok["eps_optimal"]) & (ok["eps_optimal"] > 0)]
    if not fin.empty:
        summary = pd.DataFrame({
            "bound": ["eps_kov_bound", "eps_drv", "eps_basic"],
            "median_ratio_to_optimal": [float(np.median(fin[c] / fin["eps_optimal"]))
                                        for c in ("eps_kov_bound", "eps_drv", "eps_basic")],
            "max_ratio_to_optimal": [float(np.max(fin[c] / fin["eps_optimal"]))
                                     for c in ("eps_kov_bound", "eps_drv", "eps_basic")],
            "min_ratio_to_optimal": [float(np.min(fin[c] / fin["eps_optimal"]))
                                     for c in ("eps_kov_bound", "eps_drv", "eps_basic")],
        })
        out.table("bound_ratios", summary,
                  caption=f"Each bound divided by the optimal total ε, over all {len(fin)} rows "
                          f"with a finite optimum at per-step δ = {c(delta)}.")


def _plot_methods(ax, sl: pd.DataFrame) -> None:
    for i, (col, label) in enumerate(_METHODS):
        y = sl[col].to_numpy(dtype=float)
        keep = np.isfinite(y) & (y > 0)
        ax.plot(sl["k"].to_numpy()[keep], y[keep], label=label, **curve_style(i))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of compositions $k$")
    ax.set_ylabel(r"total privacy $\tilde\varepsilon$")


@report_for("composition_region")
def privacy_region(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    eps = _nearest(ok["eps"], 0.4)
    ok = ok[ok["eps"] == eps]
    deltas = sorted(ok["delta"].unique())
    # at most MAX_CURVES nested regions a panel; more k become further rows of panels
    rows = chunks(sorted(ok["k"].unique()), MAX_CURVES)
    fig, axes = out.new_figure(nrows=len(rows), ncols=len(deltas), aspect=1.0,
                               span="single" if len(deltas) == 1 else "double")
    axes = np.reshape(axes, (len(rows), len(deltas)))
    for r, ks in enumerate(rows):
        for ax, delta in zip(axes[r], deltas):
            for n, k in enumerate(ks):
                v = ok[(ok["delta"] == delta) & (ok["k"] == k) & (ok["kind"] == "vertex")].sort_values("i")
                md, fa = v["p_md"].to_numpy(float), v["p_fa"].to_numpy(float)
                # lower boundary, then its point reflection (the region is centrally symmetric)
                x = np.concatenate([md, 1 - md])
                y = np.concatenate([fa, 1 - fa])
                style = curve_style(n)
                ax.fill(x, y, facecolor=style["color"], alpha=0.06, edgecolor="none")
                ax.plot(np.append(x, x[0]), np.append(y, y[0]), color=style["color"],
                        linestyle=style["linestyle"], marker=style["marker"], markevery=4,
                        label=f"$k = {k}$")
            ax.plot([0, 1], [1, 0], color="gray", lw=0.6, marker="", gid=REFERENCE)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect("equal")
            ax.set_xlabel(r"$P_{\mathrm{MD}}$ (missed detection)")
            ax.set_ylabel(r"$P_{\mathrm{FA}}$ (false alarm)")
            ax.set_title(rf"$\varepsilon={_tex(eps)}$, $\delta={_tex(delta)}$")
        if len(rows) > 1:
            panel_legend(axes[r][-1])
    if len(rows) == 1:
        legend_outside(fig)
    out.figure("privacy_region", fig, caption=f"Privacy region of the k-fold composition "
               f"(ε = {caption_number(eps)}), seed 001 Figure 2: larger regions are less private.")
    lines = ok[ok["kind"] == "line"].sort_values(["delta", "k", "i"])
    out.table("region_lines", lines[["delta", "k", "i", "eps_i", "delta_i"]].reset_index(drop=True),
              caption="The pairs (εᵢ, δᵢ) = ((k − 2i) ε, δᵢ) whose supporting lines define the "
                      "privacy region.")


@report_for("composition_delta")
def delta_against_eps_total(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    epss = sorted(ok["eps"].unique())
    ks = sorted(ok["k"].unique())
    deltas = sorted(ok["delta"].unique())
    # one figure per per-step delta: a curve through the rows of several deltas zig-zags
    for d, delta in enumerate(deltas):
        rows = ok[ok["delta"] == delta]
        for part, ks_part in enumerate(chunks(ks)):
            _delta_panels(rows, epss, ks_part, out, "delta_vs_eps_total"
                          + (f"_delta{d + 1}" if len(deltas) > 1 else "")
                          + (f"_{part + 1}" if part else ""),
                          delta if len(deltas) > 1 else None)


def _delta_panels(ok, epss, ks, out, name, delta=None) -> None:
    fig, axes = out.new_figure(ncols=len(epss), aspect=0.9)
    zero_at = {}  # (eps, k) -> smallest total eps with delta_optimal = 0 exactly
    for ax, e in zip(np.ravel(axes), epss):
        for i, k in enumerate(ks):
            sl = ok[(ok["eps"] == e) & (ok["k"] == k)].sort_values("eps_total")
            x = sl["eps_total"].to_numpy(float)
            y = sl["log_delta_optimal"].to_numpy(float) / np.log(10)
            keep = np.isfinite(y)
            style = curve_style(i)
            ax.plot(x[keep], y[keep], label=f"$k = {k}$", markevery=3, **style)
            zero = np.isneginf(y)  # delta = 0 exactly: no place on a log scale
            if zero.any():
                zero_at[(e, k)] = float(x[zero].min())
                # on the lower edge (axes coordinates: not a curve, and no effect on the y range)
                ax.plot(x[zero], np.zeros(zero.sum()), transform=ax.get_xaxis_transform(),
                        linestyle="", marker="v", color=style["color"], clip_on=False)
        ax.set_xscale("log")  # the y range follows the data: a floor had hidden deltas < 1e-16.5
        ax.set_xlabel(r"total $\tilde\varepsilon$")
        ax.set_ylabel(r"$\log_{10}\,\delta_{\mathrm{optimal}}$")
        ax.set_title(rf"$\varepsilon={_tex(e)}$" + ("" if delta is None else
                                                    rf", $\delta={_tex(delta)}$"))
    legend_outside(fig)
    caption = "Optimal total δ for a given total ε" + (
        "." if delta is None else f" (per-step δ = {caption_number(delta)}).")
    if zero_at:
        caption += (" Downward triangles on the lower edge mark δ = 0 exactly (its logarithm "
                    "cannot be drawn), as for every total ε ≥ kε at per-step δ = 0; here from "
                    + "; ".join(f"total ε = {caption_number(x0)} for k = {k}, ε = "
                                f"{caption_number(e)}" for (e, k), x0 in sorted(zero_at.items()))
                    + " on.")
    out.figure(name, fig, caption=caption)


@report_for("composition_hetero")
def hetero_table(df: pd.DataFrame, out) -> None:
    ok = ok_rows(df)
    if ok.empty:
        return
    # the generator's and the accountant's parameters a sweep may vary: each value is a setting
    # of its own (rows differing in nothing shown otherwise)
    swept = [c for c in ("eps_min", "eps_max", "p_high", "pld_interval")
             if c in ok and ok[c].nunique(dropna=False) > 1]
    cols = [c for c in ["eps_source", *swept, "k_steps", "n_distinct", "delta", "delta_target", "eta",
                        "eps_exact", "eps_approx_lower", "eps_approx", "eps_kov_bound", "eps_pld",
                        "eps_basic"]
            if c in ok.columns]
    tab = ok.sort_values(["eps_source", *swept, "delta_target", "k_steps"])[cols].reset_index(drop=True)
    pld = "eps_pld" in tab and tab["eps_pld"].notna().any()  # params.pld=false: not computed
    out.table("hetero", tab, caption="Heterogeneous composition: exact optimal total ε, certified "
              "lattice bounds" + (", the Theorem 3.5 bound and dp-accounting's PLD accountant."
                                  if pld else " and the Theorem 3.5 bound (the PLD accountant "
                                  "was not run: pld=false)."))
