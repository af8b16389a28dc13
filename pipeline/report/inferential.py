"""Reports for the inferential family (seed 000): nu/eps against J for several graph families,
with the critical couplings marked and the two bounds (formula (6), Theorem 4.2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipeline.report.core import ok_rows, report_for

J_C_SQUARE = 0.5 * math.log(1 + math.sqrt(2))  # 2-D Ising (ERRATA: not ln(1 + sqrt 2))



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
    g = row["graph"]
    size = {"grid": f"{row.get('rows')}x{row.get('cols')}",
            "tree": f"b={row.get('branching')}, depth={row.get('depth')}",
            "bethe": f"Delta={row.get('degree')}, r={row.get('radius')}"}.get(g, f"n={row.get('n')}")
    return f"{g} ({size}), node {int(row['node'])}"


@report_for("inferential")
def nu_against_coupling(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    keys = [c for c in ("prior", "mechanism", "graph", "n_nodes", "node", "eps", "J_effective")
            if c in df]
    cols = keys + [c for c in ("h", "nu", "nu_over_eps", "nu_affiliated", "nu_influence_bound",
                               "gamma_spectral_norm", "gamma_spectral_radius", "gamma_max_row_sum",
                               "affiliated", "method") if c in df]
    table = df[cols].sort_values(keys).reset_index(drop=True)
    # Theorem 4.2's second form: row sums <= 1 - delta give nu <= 2 eps / delta
    rows_sum = table["gamma_max_row_sum"].astype(float)
    table["row_sum_bound"] = np.where(rows_sum < 1, 2 * table["eps"] / (1 - rows_sum.clip(upper=0.999999)),
                                      np.inf)
    out.table("inferential_nu", table,
              caption="Exact inferential privacy nu (seed 000) with formula (6) (nu_affiliated), "
                      "Theorem 4.2's bound 2(Phi eps)_i (inf when the spectral radius of Gamma >= 1) and "
                      "its row-sum form 2 eps / delta with delta = 1 - max row sum (inf when >= 1).")

    check = (df.assign(bound_finite=np.isfinite(df["nu_influence_bound"].astype(float)),
                       below_bound=df["nu"] <= df["nu_influence_bound"] + 1e-9,
                       equals_formula6=np.isclose(df["nu"], df["nu_affiliated"], rtol=1e-7))
             .groupby(["prior", "mechanism", "graph", "affiliated"])
             .agg(rows=("nu", "size"), bound_finite=("bound_finite", "sum"),
                  nu_below_bound=("below_bound", "sum"), nu_equals_formula6=("equals_formula6", "sum"),
                  max_nu_over_eps=("nu_over_eps", "max"))
             .reset_index())
    out.table("inferential_bound_check", check,
              caption="Per family: rows with a finite Theorem 4.2 bound, rows with nu below it, and rows "
                        "where nu equals formula (6) (all of them when affiliated, Theorem 3.4).")

    df["family"] = [_family_label(r) for r in df.to_dict("records")]
    eps_values = sorted(df["eps"].unique())[:4]
    group_cols = ["family", "mechanism", "prior"]
    fig, axes = out.new_figure(width=5.5, height=4.2, ncols=len(eps_values))
    axes = np.atleast_1d(axes).ravel()
    families = list(dict.fromkeys(df["family"]))
    for ax, eps in zip(axes, eps_values):
        sub = df[df["eps"] == eps]
        for (fam, mech, prior), g in sub.groupby(group_cols, sort=False):
            g = g.sort_values("J_effective")
            if g["J_effective"].nunique() < 2:
                continue
            color = f"C{families.index(fam) % 10}"
            ax.plot(g["J_effective"], g["nu_over_eps"], "-o", ms=3, color=color,
                    label=fam + ("" if mech == "worst_case" else f", {mech}"))
            if not np.allclose(g["nu"], g["nu_affiliated"], rtol=1e-7):
                ax.plot(g["J_effective"], g["nu_affiliated"] / eps, ":", color=color, lw=1)
            bound = g["nu_influence_bound"].astype(float) / eps
            ax.plot(g["J_effective"], bound.where(np.isfinite(bound)), "--", color=color, lw=1)
            jc = critical_coupling(g.iloc[0].to_dict())
            if jc is not None:
                ax.axvline(jc, color=color, ls="-.", lw=0.9)
        ax.set_yscale("log")
        ax.set_xlabel("Ising coupling J")
        ax.set_ylabel("nu / eps")
        ax.set_title(f"eps = {eps:g}: solid nu, dashed Thm 4.2 bound,\n"
                     "dash-dot critical J (tanh J = 1/d; 2-D: ½ln(1+√2))", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper left")
    out.figure("inferential_nu_vs_J", fig,
               caption="nu/eps against J for each graph family (worst case = formula (6) on these "
                       "affiliated priors), Theorem 4.2's bound 2(Phi eps)_i/eps where the spectral "
                       "radius of Gamma is < 1, and the critical couplings of the infinite lattices.")


@report_for("inferential_bethe_limit")
def bethe_limit_against_coupling(df: pd.DataFrame, out) -> None:
    df = ok_rows(df)
    if df.empty:
        return
    keys = ["degree", "eps", "J"]
    cols = keys + [c for c in ("nu", "nu_over_eps", "log_x", "J_critical", "supercritical",
                               "nu_eps_to_zero", "slope_at_zero") if c in df]
    out.table("inferential_bethe_limit", df[cols].sort_values(keys).reset_index(drop=True),
              caption="Corollary A.6 (formula 24): worst-case nu over Ising trees of maximum degree "
                      "Delta; nu_eps_to_zero > 0 above the transition tanh J = 1/(Delta-1).")
    fig, ax = out.new_figure(width=6.5, height=4.5)
    degrees = sorted(df["degree"].unique())
    styles = ["-", "--", ":", "-."]
    for i, deg in enumerate(degrees):
        color = f"C{i % 10}"
        for j, (eps, g) in enumerate(df[df["degree"] == deg].groupby("eps")):
            g = g.sort_values("J")
            ax.plot(g["J"], g["nu_over_eps"], styles[j % 4], color=color,
                    label=f"Delta = {deg}, eps = {eps:g}")
        ax.axvline(math.atanh(1.0 / (deg - 1)) if deg > 2 else np.nan, color=color, lw=0.8,
                   ls="-.")
    ax.set_yscale("log")
    ax.set_xlabel("Ising coupling J")
    ax.set_ylabel("nu / eps (Bethe lattice root)")
    ax.set_title("formula (24); dash-dot: critical tanh J = 1/(Delta-1)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    out.figure("inferential_bethe_limit_vs_J", fig,
               caption="nu/eps on the Bethe lattice against J: bounded below the transition, "
                       "diverging like 1/eps above it (nu tends to a positive constant).")
