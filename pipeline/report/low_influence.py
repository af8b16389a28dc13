"""Reports for ``low_influence`` (seed 003) and ``leakage`` (thesis ch. 5).

low_influence: the utility-influence trade-off of Examples 5/6 (independent vs joint), the
trade-off curves of the measured mechanisms, and the checks iota-LI => (0, iota)-DP and
Theorem 1. leakage: the LP optimum against the tight bound and Theorem 5.3.3 for each
graph, where Theorem 5.3.3 holds, and the Lemma 5.3.2 checks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from matplotlib.lines import Line2D

from pipeline.experiments.low_influence import PARAMS as LI_PARAMS
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import (MARKERS, MAX_CURVES, chunks, curve_style, legend_outside,
                                   panel_legend)



def graph_label(row) -> str:
    g = row["graph"]
    if g in ("path", "cycle", "complete", "star"):
        return f"{g}({int(row['n'])})" if g != "star" else f"K_1,{int(row['n']) - 1}"
    if g == "random_regular":
        return f"RR({int(row['n'])},{int(row['degree'])})"
    if g == "hypercube":
        return f"Q_{int(row['u'])}"
    if g == "hamming":
        return f"H({int(row['u'])},{int(row['v'])})"
    return g


def tex_graph_label(label: str) -> str:
    """The table label in mathtext for figures: K_1,5 -> $K_{1,5}$, Q_3 -> $Q_{3}$."""
    import re

    return re.sub(r"^([A-Za-z]+)_([0-9,]+)$", r"$\1_{\2}$", label)


# =========================================================================== low_influence
@report_for("low_influence")
def examples_5_6(df, out):
    d = ok_rows(df)
    if "mode" not in d:
        return
    opt = d[d["mode"] == "optimise"]
    if opt.empty:
        return
    # the other parameters a sweep may vary: optimise reads eps_eval (delta_at_eps, vdp_delta)
    # and ignores the rest, but each value is a task of its own, so each (eps, delta) came
    # once per value: repeated table rows, and a curve through every setting
    swept = [p.name for p in LI_PARAMS if p.name not in ("mode", "eps", "delta")
             and p.name in opt and opt[p.name].nunique(dropna=False) > 1]
    opt = opt.sort_values(["delta", *swept, "eps"])
    table = opt[["eps", "delta", *swept, "utility", "utility_closed_form", "utility_independent_lp",
                 "influence_independent", "influence_independent_dense", "influence_independent_lp",
                 "influence_joint", "influence_joint_closed_form", "nontrivial"]].copy()
    table["joint_lp_minus_closed_form"] = table["influence_joint"] - table["influence_joint_closed_form"]
    out.table("examples_5_6", table,
              caption="Seed 003 Examples 5 and 6 on K₂: utility by LP (= closed form), influence of the "
                      "independent optimum (closed form, dense search, LP) and of the joint optimum "
                      "(two-stage LP vs closed form).")
    # two curves per setting (delta and any swept parameter; independent, joint) in each
    # panel: MAX_CURVES // 2 settings a figure, further settings in further figures
    keys = ["delta", *swept]
    settings = list(dict.fromkeys(zip(*(opt[k] for k in keys))))
    for part, group in enumerate(chunks(settings, MAX_CURVES // 2)):
        fig, axes = out.new_figure(ncols=2, aspect=0.85)
        ax1, ax2 = np.asarray(axes).ravel()
        n = 0
        for setting in group:
            grp = opt[np.logical_and.reduce([opt[k] == v for k, v in zip(keys, setting)])]
            others = "".join(f", {k}={v:g}" if isinstance(v, float) else f", {k}={v}"
                             for k, v in zip(swept, setting[1:]))
            for col, name in (("influence_independent", "independent"),
                              ("influence_joint", "joint (LP)")):
                style = curve_style(n)
                label = rf"{name}, $\delta={setting[0]:g}${others}"
                ax1.plot(grp["utility"], grp[col], label=label, **style)
                ax2.plot(grp["eps"], grp[col], **style)
                n += 1
        for ax in (ax1, ax2):
            ax.axhline(0.5, color="grey", lw=0.8, ls=(0, (1, 3)), marker="",
                       label=r"Theorem 1 bound $\frac{1}{2}$")
            ax.set_ylabel(r"influence $\iota = \max\,\Pr[M(d) \neq M(d')]$")
        ax1.set_xlabel(r"utility $U = \Pr[M(d_1) = 1]$")
        ax2.set_xlabel(r"privacy $\varepsilon$ (nats)")
        ax1.set_title(r"utility–influence trade-off ($K_2$)")
        ax2.set_title(r"influence against $\varepsilon$ ($K_2$)")
        legend_outside(fig, axes=[ax1])
        out.figure("tradeoff_examples_5_6" + (f"_{part + 1}" if part else ""), fig,
                   caption="Examples 5/6 (Fig. 8 of seed 003): both classes reach the same utility "
                           "at each (ε, δ); joint mechanisms reach it with lower influence.")


@report_for("low_influence")
def mechanism_tradeoff(df, out):
    d = ok_rows(df)
    if "mode" not in d:
        return
    mech = d[d["mode"] == "mechanism"].copy()
    if mech.empty:
        return
    mech["graph_label"] = mech.apply(graph_label, axis=1)
    mech["config"] = (mech["graph_label"] + " " + mech["mechanism"] + " k=" + mech["n_values"].astype(str)
                      + " " + mech["coupling"].where(mech["mechanism"] != "theorem3", "joint"))
    # the parameters a sweep may vary besides eps: each value is a configuration of its own (a
    # curve through the rows of several zig-zags, a summary row would pool them)
    for c in ("delta", "alpha", "eps_eval", "concentration"):
        if c in mech and mech[c].nunique(dropna=False) > 1:
            mech["config"] += f" {c}=" + mech[c].astype(str)
    # one small multiple per dataset graph; colour and line = coupling, marker = mechanism
    couplings = sorted(set(mech["coupling"].where(mech["mechanism"] != "theorem3", "joint")))
    mechanisms = sorted(set(mech["mechanism"]))
    graphs = list(dict.fromkeys(mech.sort_values("graph_label")["graph_label"]))
    # one small multiple per dataset graph, and per group of MAX_CURVES configurations
    panels = [(graph, part) for graph in graphs
              for part in chunks(sorted(set(mech.loc[mech["graph_label"] == graph, "config"])))]
    fig, axes = out.small_multiples(len(panels), sharey=True)
    for ax, (graph, part) in zip(axes, panels):
        for cfg, grp in mech[mech["config"].isin(part)].groupby("config"):
            grp = grp.sort_values("eps")
            coupling = "joint" if grp["mechanism"].iloc[0] == "theorem3" else grp["coupling"].iloc[0]
            c = curve_style(couplings.index(coupling))
            ax.plot(grp["utility"], grp["influence"], color=c["color"], ls=c["linestyle"],
                    marker=MARKERS[mechanisms.index(grp["mechanism"].iloc[0]) % len(MARKERS)],
                    fillstyle="none")
        ax.axhline(0.5, color="grey", lw=0.8, ls=(0, (1, 3)), marker="")
        ax.set_title(tex_graph_label(graph))
        ax.set_xlabel(r"utility $\min_d \Pr[M(d) = f(d)]$")
        ax.set_ylabel(r"influence $\iota$")
    handles = [Line2D([], [], color=curve_style(i)["color"], ls=curve_style(i)["linestyle"],
                      label=f"{c} coupling") for i, c in enumerate(couplings)]
    handles += [Line2D([], [], color="k", ls="", fillstyle="none",
                       marker=MARKERS[i % len(MARKERS)], label=m) for i, m in enumerate(mechanisms)]
    handles.append(Line2D([], [], color="grey", ls=(0, (1, 3)), label=r"Theorem 1 bound $\frac{1}{2}$"))
    legend_outside(fig, handles=handles, ncols=3)
    out.figure("mechanism_tradeoff", fig,
               caption="Measured mechanisms on dataset graphs: independent couplings stay above ½ once "
                       "nontrivial (Theorem 1); shared-uniform and LP-optimal couplings with the same "
                       "marginals (same ε, δ) have lower influence.")
    g = mech.groupby("config")
    summary = pd.DataFrame({
        "rows": g.size(),
        "max_tv_minus_influence": g.apply(lambda x: float((x["tv_max"] - x["influence"]).max())),
        "max_tv_over_influence": g.apply(lambda x: float((x["tv_max"] / x["influence"].where(x["influence"] > 0)).max())),
        "min_theorem2_delta_over_tv": g.apply(lambda x: float((x["theorem2_delta"] / x["tv_max"].where(x["tv_max"] > 0)).min())),
        "nontrivial_independent_min_influence": g.apply(
            lambda x: float(x.loc[x["nontrivial"].astype(bool) & (x["independent"] == True), "influence"].min())  # noqa: E712
            if (x["nontrivial"].astype(bool) & (x["independent"] == True)).any() else np.nan),  # noqa: E712
    }).reset_index()
    out.table("li_implies_dp", summary,
              caption="ι-LI ⇒ (0, ι)-DP: max(δ(0) − ι) ≤ 0 in every configuration (coupling inequality; "
                      "Theorem 2's δ = ι(|V|−1) is loose). Last column: Theorem 1 (≥ ½).")


# =========================================================================== leakage
def _leakage_settings(d) -> list:
    """The solver parameters a sweep varies besides the graph and eps: each value is a setting
    of its own (a curve through the rows of several revisits each eps). Labels each row's
    setting in d["setting"] (", solver = full_lp", ...; empty when none varies)."""
    swept = [c for c in ("solver", "symmetrise") if c in d and d[c].nunique(dropna=False) > 1]
    d["setting"] = ["".join(f", {c} = {v}" for c, v in zip(swept, vals))
                    for vals in zip(*(d[c] for c in swept))] if swept else ""
    return swept


@report_for("leakage")
def lp_against_bounds(df, out):
    d = ok_rows(df)
    if d.empty:
        return
    d["graph_label"] = d.apply(graph_label, axis=1)
    swept = _leakage_settings(d)
    d = d.sort_values(["graph_label", *swept, "eps"])
    cols = ["graph_label", *swept, "eps", "n_datasets", "solver_used", "utility_optimal", "utility_tight_bound",
            "utility_thesis_bound", "utility_closed_form", "leakage_bits", "vertex_transitive",
            "tight_bound_attained", "thesis_bound_holds", "thesis_bound_violations"]
    out.table("leakage_lp_vs_bounds", d[cols],
              caption="Optimal ε-DP channel utility trace(M)/|A| (LP) against the tight bound "
                      "1/minₖ Σ e^{−ε d(h,k)} (sum over h) and Theorem 5.3.3 (best vertex), with "
                      "min-entropy leakage.")
    labels = list(dict.fromkeys(zip(d["graph_label"], d["setting"])))
    fig, axes = out.small_multiples(len(labels), max_cols=4, sharex=True)
    for ax, (lab, setting) in zip(axes, labels):
        grp = d[(d["graph_label"] == lab) & (d["setting"] == setting)]
        ax.plot(grp["eps"], grp["utility_optimal"], label="LP optimum", **curve_style(0))
        ax.plot(grp["eps"], grp["utility_tight_bound"], color="k", ls="--", lw=0.9, marker="",
                label="tight bound")
        ax.plot(grp["eps"], grp["utility_thesis_bound"], label="Thm 5.3.3 bound",
                **{**curve_style(1), "marker": ""})
        fails = grp[~grp["thesis_bound_holds"].astype(bool)]
        if not fails.empty:
            ax.plot(fails["eps"], fails["utility_optimal"], color=curve_style(1)["color"], ls="",
                    marker="X", markersize=6, label="Thm 5.3.3 violated")
        vt = "VT" if bool(grp["vertex_transitive"].iloc[0]) else "not VT"
        ax.set_title(f"{tex_graph_label(lab)} ({vt}{setting})")
        ax.set_ylabel("utility")
    for ax in axes[-min(4, len(axes)):]:
        ax.set_xlabel(r"$\varepsilon$ (nats)")
    legend_outside(fig)
    out.figure("lp_vs_bounds_by_graph", fig,
               caption="LP optimum vs the tight bound (equal on vertex-transitive graphs) and the "
                       "Theorem 5.3.3 bound; crosses mark ε where Theorem 5.3.3 fails.")

    groups = chunks(labels)
    fig, axes = out.small_multiples(len(groups), max_cols=2, sharey=True)
    for ax, part in zip(axes, groups):
        for i, (lab, setting) in enumerate(part):
            grp = d[(d["graph_label"] == lab) & (d["setting"] == setting)]
            ax.plot(grp["eps"], grp["leakage_bits"], label=tex_graph_label(lab) + setting,
                    **curve_style(i))
        ax.set_xlabel(r"$\varepsilon$ (nats)")
        ax.set_ylabel("min-entropy leakage (bits)")
        if len(groups) > 1:
            panel_legend(ax)
    if len(groups) == 1:
        legend_outside(fig)
    out.figure("leakage_bits", fig, caption="Min-entropy leakage log₂ Σ_j max_i M_ij of the utility-optimal ε-DP channel.")


@report_for("leakage")
def where_thesis_bound_holds(df, out):
    d = ok_rows(df)
    if d.empty:
        return
    d["graph_label"] = d.apply(graph_label, axis=1)
    d["margin"] = d["utility_thesis_bound"] - d["utility_optimal"]
    g = d.groupby(["graph_label", *_leakage_settings(d)])
    table = pd.DataFrame({
        "n_datasets": g["n_datasets"].first(),
        "vertex_transitive": g["vertex_transitive"].first(),
        "eps_values": g.size(),
        "thesis_bound_holds": g["thesis_bound_holds"].sum().astype(int),
        "tight_bound_attained": g["tight_bound_attained"].sum().astype(int),
        "min_thesis_margin": g["margin"].min(),
        "max_lp_over_tight": g.apply(lambda x: float((x["utility_optimal"] / x["utility_tight_bound"]).max())),
    }).reset_index()
    for col in ("sym_dp", "sym_diagonal_constant", "sym_diagonal_is_column_max", "sym_min_entropy_equal"):
        if col in d:
            table[col] = g[col].apply(lambda s: "n/a" if s.isna().all() else f"{int(s.fillna(False).astype(bool).sum())}/{int(s.notna().sum())}").values
    out.table("thesis_bound_where_holds", table,
              caption="Where Theorem 5.3.3 holds (counts over ε), whether the tight bound is attained, "
                      "and the four Lemma 5.3.2 claims for the Aut-symmetrised optimum (true/checked).")
