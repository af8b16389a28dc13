"""Reports for the inferential family (seed 000): nu/eps against J for several graph families,
with the critical couplings marked and the two bounds (formula (6), Theorem 4.2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from matplotlib.lines import Line2D

from pipeline.report.columns import describe_computed
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import MAX_CURVES, chunks, curve_style, legend_outside

J_C_SQUARE = 0.5 * math.log(1 + math.sqrt(2))  # 2-D Ising (ERRATA: not ln(1 + sqrt 2))

# the columns these reports compute (a computed column named like a parameter, "rows", was
# headed by the grid parameter's documentation, "grid rows (row-major numbering)")
describe_computed("inferential", {
    "row_sum_bound": ("Thm 4.2 row-sum bound 2ε/δ", "nat"),
    "n_points": ("points (rows of inferential_nu)", "1"),
    "bound_finite": ("points with a finite Thm 4.2 bound", "1"),
    "nu_below_bound": ("points with a finite Thm 4.2 bound and ν ≤ it", "1"),
    "nu_equals_formula6": ("points with ν = formula (6)", "1"),
    "max_nu_over_eps": ("largest ν/ε", "1"),
})



def critical_coupling(row) -> float | None:
    """Critical J of the infinite lattice the graph family approximates: tanh J = 1/d on the
    Bethe lattice / d-ary trees (d = children per node), J_c = ½ ln(1 + sqrt 2) on the square
    grid; None for the others (finite, 1-D or random)."""
    g = row.get("graph")
    if g == "bethe" and row.get("degree", 0) >= 3:
        return math.atanh(1.0 / (row["degree"] - 1))
    if g == "tree" and row.get("branching", 0) >= 2:
        return math.atanh(1.0 / row["branching"])
    if g == "grid":
        return J_C_SQUARE
    return None


def _family_label(row) -> str:
    """Panel title in mathtext: grid ($6\\times6$), node 14; bethe ($\\Delta=3$, $r=6$), node 0."""
    g = row["graph"]
    size = {"grid": rf"${row.get('rows')}\times{row.get('cols')}$",
            "tree": rf"$b={row.get('branching')}$, depth ${row.get('depth')}$",
            "bethe": rf"$\Delta={row.get('degree')}$, $r={row.get('radius')}$"}.get(
        g, f"$n={row.get('n')}$")
    return f"{g} ({size}), node {int(row['node'])}"


@report_for("inferential")
def nu_against_coupling(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    # parameters besides J (the x axis) and eps (the curves) that a sweep may vary: each value
    # is a setting of its own (a curve through the rows of several would zig-zag)
    swept = [c for c in ("h", "p", "graph_seed", "r", "s")
             if c in df and df[c].nunique(dropna=False) > 1]
    keys = [c for c in ("prior", "mechanism", "graph", "n_nodes", "node", *swept, "eps",
                        "J_effective") if c in df]
    cols = keys + [c for c in ("h", "nu", "nu_over_eps", "nu_affiliated", "nu_influence_bound",
                               "gamma_spectral_norm", "gamma_spectral_radius", "gamma_max_row_sum",
                               "affiliated", "method") if c in df and c not in keys]
    table = df[cols].sort_values(keys).reset_index(drop=True)
    # Theorem 4.2's second form: row sums <= 1 - delta give nu <= 2 eps / delta
    rows_sum = table["gamma_max_row_sum"].astype(float)
    table["row_sum_bound"] = np.where(rows_sum < 1, 2 * table["eps"] / (1 - rows_sum.clip(upper=0.999999)),
                                      np.inf)
    out.table("inferential_nu", table,
              caption="Exact inferential privacy loss ν (seed 000) beside formula (6), Theorem "
                      "4.2's bound 2(Φε)ᵢ (∞ when the spectral radius of Γ is ≥ 1) and its row-sum "
                      "form 2ε/δ with δ = 1 − the largest row sum of Γ (∞ when that sum is ≥ 1).")

    # An infinite bound says nothing: counted as satisfied, nu_below_bound read as a check
    # the theorem passed at every point; the check holds when it equals bound_finite.
    finite = np.isfinite(df["nu_influence_bound"].astype(float))
    check = (df.assign(bound_finite=finite,
                       below_bound=finite & (df["nu"] <= df["nu_influence_bound"] + 1e-9),
                       equals_formula6=np.isclose(df["nu"], df["nu_affiliated"], rtol=1e-7))
             .groupby(["prior", "mechanism", "graph", "affiliated"])
             .agg(n_points=("nu", "size"), bound_finite=("bound_finite", "sum"),
                  nu_below_bound=("below_bound", "sum"), nu_equals_formula6=("equals_formula6", "sum"),
                  max_nu_over_eps=("nu_over_eps", "max"))
             .reset_index())
    out.table("inferential_bound_check", check,
              caption="Per family: its points, those with a finite Theorem 4.2 bound, those of "
                      "them with ν below it (the theorem holds where the two counts are equal), "
                      "and those where ν equals formula (6) (all of them when affiliated, "
                      "Theorem 3.4).")

    df["family"] = [_family_label(r) + "".join(f", {c} = {r[c]:g}" for c in swept)
                    for r in df.to_dict("records")]
    families = [(fam, mech, prior) for (fam, mech, prior), g in
                df.groupby(["family", "mechanism", "prior"], sort=False)
                if g["J_effective"].nunique() >= 2]
    if not families:
        return
    # one small multiple per graph family (and group of eps values): colour/marker = eps,
    # line style = quantity; an eps draws up to 3 curves, so a panel takes MAX_CURVES // 3
    eps_all = sorted(df["eps"].unique())
    panels = [(key, part) for key in families for part in chunks(eps_all, MAX_CURVES // 3)]
    fig, axes = out.small_multiples(len(panels), sharex=True)
    drawn: set = set()  # what some panel shows: the legend lists these only
    for ax, ((fam, mech, prior), part) in zip(axes, panels):
        sub = df[(df["family"] == fam) & (df["mechanism"] == mech) & (df["prior"] == prior)]
        for eps in part:
            g = sub[sub["eps"] == eps].sort_values("J_effective")
            if g.empty:
                continue
            i = eps_all.index(eps)
            color, marker = curve_style(i)["color"], curve_style(i)["marker"]
            ax.plot(g["J_effective"], g["nu_over_eps"], color=color, marker=marker, ls="-")
            drawn |= {("eps", eps), "nu"}
            if not np.allclose(g["nu"], g["nu_affiliated"], rtol=1e-7):
                ax.plot(g["J_effective"], g["nu_affiliated"] / eps, color=color, ls=":", marker="")
                drawn.add("formula6")
            bound = g["nu_influence_bound"].astype(float).to_numpy() / eps
            finite = np.isfinite(bound)
            if finite.any():
                # a finite point between infinite ones has no segment: a short dash marks it
                # (the bound is often finite at J = 0 only)
                padded = np.concatenate(([False], finite, [False]))
                lone = [int(k) for k in np.flatnonzero(finite & ~padded[:-2] & ~padded[2:])]
                if lone:
                    drawn.add("lone_bound")
                ax.plot(g["J_effective"], np.where(finite, bound, np.nan), color=color, ls="--",
                        marker="_" if lone else "", markevery=lone or None, markersize=8,
                        markeredgewidth=1.5)
                drawn.add("bound")
        jc = critical_coupling(sub.iloc[0].to_dict())
        if jc is not None:
            ax.axvline(jc, color="0.4", ls="-.", lw=0.9, marker="")
            drawn.add("critical")
        ax.set_yscale("log")
        ax.set_title(fam + ("" if mech == "worst_case" else f"\n{mech}"))
    for ax in axes[-min(3, len(axes)):]:
        ax.set_xlabel("Ising coupling $J$")
    fig.supylabel(r"inferential privacy $\nu/\varepsilon$")
    handles = [Line2D([], [], color=curve_style(i)["color"], marker=curve_style(i)["marker"],
                      ls="", label=rf"$\varepsilon={e:g}$") for i, e in enumerate(eps_all)
               if ("eps", e) in drawn]
    handles += [h for key, h in (
        ("nu", Line2D([], [], color="k", ls="-", label=r"exact $\nu$")),
        ("bound", Line2D([], [], color="k", ls="--", label=r"Thm 4.2 bound $2(\Phi\varepsilon)_i$")),
        ("formula6", Line2D([], [], color="k", ls=":", label="formula (6), where it differs")),
        ("critical", Line2D([], [], color="0.4", ls="-.", label=r"critical $J$: $\tanh J = 1/d$; "
                            r"2-D: $\frac{1}{2}\ln(1+\sqrt{2})$"))) if key in drawn]
    legend_outside(fig, handles=handles, ncols=3)
    out.figure("inferential_nu_vs_J", fig,
               caption="ν/ε against J for each graph family (worst case = formula (6) on these "
                       "affiliated priors)"
                       + (", Theorem 4.2's bound 2(Φε)ᵢ/ε where the spectral radius of Γ is < 1"
                          if "bound" in drawn else "")
                       + (" (a short dash where that holds at a single J)"
                          if "lone_bound" in drawn else "")
                       + (", and the critical couplings of the infinite lattices."
                          if "critical" in drawn else "."))


@report_for("inferential_bethe_limit")
def bethe_limit_against_coupling(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    keys = ["degree", "eps", "J"]
    cols = keys + [c for c in ("nu", "nu_over_eps", "log_x", "J_critical", "supercritical",
                               "nu_eps_to_zero", "slope_at_zero") if c in df]
    out.table("inferential_bethe_limit", df[cols].sort_values(keys).reset_index(drop=True),
              caption="Corollary A.6 (formula 24): worst-case inferential privacy loss ν over "
                      "Ising trees of maximum degree Δ; its limit as ε → 0 is positive exactly "
                      "above the transition tanh J = 1/(Δ − 1).")
    degrees = sorted(df["degree"].unique())
    eps_all = sorted(df["eps"].unique())
    panels = [(deg, part) for deg in degrees for part in chunks(eps_all)]  # <= MAX_CURVES each
    fig, axes = out.small_multiples(len(panels), sharex=True, sharey=True)
    for ax, (deg, part) in zip(axes, panels):
        for eps in part:
            g = df[(df["degree"] == deg) & (df["eps"] == eps)].sort_values("J")
            ax.plot(g["J"], g["nu_over_eps"], label=rf"$\varepsilon={eps:g}$",
                    markevery=max(1, len(g) // 8),
                    **curve_style(eps_all.index(eps)))
        if deg > 2:
            ax.axvline(math.atanh(1.0 / (deg - 1)), color="0.4", lw=0.9, ls="-.", marker="",
                       label=r"critical $\tanh J = 1/(\Delta-1)$")
        ax.set_yscale("log")
        ax.set_title(rf"$\Delta = {deg}$")
        ax.set_xlabel("Ising coupling $J$")
    axes[0].set_ylabel(r"$\nu/\varepsilon$ at the Bethe lattice root")
    legend_outside(fig)
    out.figure("inferential_bethe_limit_vs_J", fig,
               caption="ν/ε on the Bethe lattice against J: bounded below the transition, "
                       "diverging like 1/ε above it (ν tends to a positive constant).")
