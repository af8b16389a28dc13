"""Reports for the independent-set experiments (seed 004, chapters 7 and 8).

- ``independent_sets``: Tables 7.1-7.3 (4-8-8 lattice, exact), the errata table (printed value,
  exact value, agree?), and entropy per vertex against size for every lattice and boundary.
- ``independent_sets_bounds``: the Theorem 7.2.2 bounds, with the thesis's printed values.
- ``random_triangulation``: Tables 8.1 and 8.2 with the printed values, and the Figure 8.4
  least-squares regression of eta_m(p) on the Shannon entropy H(p).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipeline.experiments import _thesis_tables as thesis
from pipeline.report.core import ok_rows, report_for
from pipeline.report.style import MAX_CURVES, chunks, curve_style, legend_outside, panel_legend

TABLES_7 = {"free": ("table_7_1_free", "f", thesis.TABLE_7_1_FREE, "Table 7.1"),
            "cylinder": ("table_7_2_cylinder", "g", thesis.TABLE_7_2_CYLINDER, "Table 7.2"),
            "torus": ("table_7_3_torus", "s", thesis.TABLE_7_3_TORUS, "Table 7.3")}
# entropy constants per vertex (ln): 4-8-8 from the bounds of Theorem 7.2.2 (agree to 1e-10),
# hard squares (Baxter, Enting & Tsang 1980), hard kings
LOG_ETA = {"488": math.log(1.5495601013), "square": math.log(1.5030480824753322),
           "king": math.log(1.3426439511)}


def one_digit_edit(a: str, b: str) -> bool:
    """True when deleting one character of the longer string gives the shorter one."""
    if abs(len(a) - len(b)) != 1:
        return False
    long, short = (a, b) if len(a) > len(b) else (b, a)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def classify_printed(printed: str, exact: int, rel_tol: float = 1e-9) -> tuple[str, float]:
    """(kind, relative error) of a printed integer against the exact one.

    kind: ``exact``; ``rounding`` (floating-point error, relative error < rel_tol);
    ``digit typo`` (one digit dropped or inserted); ``digit typo + rounding`` (a digit count off
    by one, leading digits within rel_tol after rescaling by 10); ``wrong`` otherwise."""
    value = int(printed)
    rel = abs(value - exact) / exact
    if value == exact:
        return "exact", 0.0
    if rel < rel_tol:
        return "rounding", rel
    if one_digit_edit(printed, str(exact)):
        return "digit typo", rel
    for scale in (10, 0.1):
        if abs(value / (exact * scale) - 1) < rel_tol:
            return "digit typo + rounding", rel
    return "wrong", rel



# --------------------------------------------------------------------------- chapter 7
def errata_rows(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per printed entry of Tables 7.1-7.3 whose exact value is in ``ok``."""
    rows = []
    sub = ok[ok["lattice"] == "488"]
    exact = {(r.boundary, int(r.m), int(r.n)): str(r.count) for r in sub.itertuples()}
    for boundary, (_, letter, table, title) in TABLES_7.items():
        for (m, n), printed in sorted(table.items()):
            value = exact.get((boundary, m, n))
            if value is None:
                continue
            kind, rel = classify_printed(printed, int(value))
            rows.append({"table": title, "entry": f"{letter}({m}, {n})", "printed": printed,
                         "exact": value, "agree": kind == "exact", "kind": kind,
                         "relative_error": rel})
    return pd.DataFrame(rows, columns=["table", "entry", "printed", "exact", "agree", "kind",
                                       "relative_error"])


@report_for("independent_sets")
def tables_7(df, out):
    ok = ok_rows(df)
    for boundary, (name, letter, _, title) in TABLES_7.items():
        sub = ok[(ok["lattice"] == "488") & (ok["boundary"] == boundary)]
        if sub.empty:
            continue
        if boundary == "free":  # printed layout: rows n, columns f(m, n)
            wide = sub.pivot_table(index="n", columns="m", values="count", aggfunc="first")
            wide.columns = [f"{letter}({c}, n)" for c in wide.columns]
        else:  # rows m, columns g(m, n) / s(m, n)
            wide = sub.pivot_table(index="m", columns="n", values="count", aggfunc="first")
            wide.columns = [f"{letter}(m, {c})" for c in wide.columns]
        wide = wide.reset_index().fillna("")
        out.table(name, wide, caption=f"{title}: exact Merrifield-Simmons index of the 4-8-8 lattice "
                                      f"({boundary} boundary), recomputed with exact integers.")
    errata = errata_rows(ok)
    if not errata.empty:
        out.table("errata_tables_7", errata,
                  caption="Errata for Tables 7.1-7.3: printed value, exact value (zeta-transfer, "
                          "checked by brute force for small sizes), agreement and kind of error.",
                  float_format="%.3g")
        summary = (errata.groupby(["table", "kind"]).size().rename("entries").reset_index())
        out.table("errata_summary", summary, caption="Errata for Tables 7.1-7.3, counted by kind.")
    other = ok[ok["lattice"] != "488"]
    if not other.empty:
        cols = ["lattice", "boundary", "m", "n", "n_vertices", "n_edges", "count",
                "entropy_per_vertex", "method"]
        out.table("square_and_king_counts", other[cols].sort_values(cols[:4]),
                  caption="Exact independent-set counts of the square (hard squares) and king lattices.")
    _entropy_figure(ok, out)


def _entropy_figure(ok: pd.DataFrame, out) -> None:
    # the figure is of m x m sections: a lattice with none would be an empty panel (and with no
    # lattice at all the caption would describe nothing)
    square = ok[ok["m"] == ok["n"]]
    lattices = [lat for lat in ("488", "square", "king") if (square["lattice"] == lat).any()]
    if not lattices:
        return
    fig, axes = out.new_figure(ncols=len(lattices), aspect=0.8)
    axes = np.ravel(axes)
    for ax, lattice in zip(axes, lattices):
        sub = square[square["lattice"] == lattice]
        for i, boundary in enumerate(("free", "cylinder", "torus")):
            part = sub[sub["boundary"] == boundary].sort_values("m")
            if not part.empty:
                ax.plot(part["m"], part["entropy_per_vertex"], label=boundary, **curve_style(i))
        ax.axhline(LOG_ETA[lattice], color="black", linestyle=(0, (6, 2, 1, 2)), linewidth=0.8,
                   marker="", label=r"$\ln\eta$ (infinite lattice)")
        ax.set_xlabel("$m = n$ (rows = columns)")
        ax.set_ylabel(r"entropy per vertex $\ln(\#\mathrm{IS})/|V|$")
        ax.set_title(f"{lattice} lattice")
        ax.xaxis.get_major_locator().set_params(integer=True)
    legend_outside(fig)
    out.figure("entropy_per_vertex", fig,
               caption="Entropy per vertex of m × m sections against m for each boundary; "
                       "the dash-dotted line is the infinite lattice's ln η, the limit of every "
                       "boundary's sequence.")


@report_for("independent_sets_bounds")
def bounds_table(df, out):
    ok = ok_rows(df).copy()
    if ok.empty:
        return
    ok["gap"] = ok["eta_upper"] - ok["eta_lower"]
    # literature constants (not for 488, whose value is what the bounds establish)
    known = {lat: math.exp(v) for lat, v in LOG_ETA.items() if lat != "488"}
    ok["known_constant"] = ok["lattice"].map(known)
    ok["brackets_known"] = [None if pd.isna(c) else bool(lo <= c <= hi) for c, lo, hi in
                            zip(ok["known_constant"], ok["eta_lower"], ok["eta_upper"])]
    cols = ["lattice", "p", "q", "k", "width_p_plus_2q", "width_2q", "width_2k", "lambda_p_plus_2q",
            "lambda_2q", "xi_2k", "lower", "upper", "eta_lower", "eta_upper", "gap",
            "known_constant", "brackets_known"]
    out.table("entropy_bounds", ok[cols].sort_values(["lattice", "p", "q", "k"]),
              caption="Theorem 7.2.2 bounds on the entropy constant, per unit cell and per "
                      "vertex (η), beside the known constants: hard squares 1.5030480824753 "
                      "(Baxter, Enting & Tsang 1980), hard kings 1.3426439511; the last column "
                      "says whether the per-vertex bounds bracket it.",
              float_format="%.15g", sig_digits=15)
    printed = {("488", 2, 3, 4): thesis.BOUNDS_488_VERTEX, ("king", 4, 4, 6): thesis.BOUNDS_KING_VERTEX}
    rows = []
    for r in ok.itertuples():
        key = (r.lattice, int(r.p), int(r.q), int(r.k))
        if key in printed:
            lo, hi = printed[key]
            rows.append({"lattice": r.lattice, "p": key[1], "q": key[2], "k": key[3],
                         "printed_lower": lo, "eta_lower": r.eta_lower,
                         "printed_upper": hi, "eta_upper": r.eta_upper,
                         "agree_to_print": abs(r.eta_lower - float(lo)) <= 10 ** -(len(lo) - 2)
                         and abs(r.eta_upper - float(hi)) <= 10 ** -(len(hi) - 2)})
    if rows:
        out.table("bounds_vs_thesis", pd.DataFrame(rows),
                  caption="Bounds printed in section 7.3 against recomputed ones (one unit in the "
                          "last printed digit).", float_format="%.15g", sig_digits=15)


# --------------------------------------------------------------------------- chapter 8
def _table_8(ok: pd.DataFrame, column: str, printed: dict, name: str, title: str, out) -> None:
    rows = []
    for (m, p), text in sorted(printed.items()):
        hit = ok[(ok["m"] == m) & np.isclose(ok["p"], p, atol=1e-12, rtol=0)]
        if column == "annealed_entropy":
            hit = hit[hit["n"] == 100]
        if hit.empty:
            continue
        value = float(hit[column].iloc[0])
        rows.append({"m": m, "p": p, "printed": text, "computed": value,
                     "abs_diff": abs(value - float(text))})
    if not rows:
        return
    long = pd.DataFrame(rows)
    wide = long.pivot_table(index="m", columns="p", values="computed").reset_index()
    wide.columns = ["m"] + [f"p = {c}" for c in wide.columns[1:]]
    out.table(name, wide, caption=f"{title} recomputed (float64).", float_format="%.14f",
              sig_digits=15)  # the printed tables' 14 decimals
    long["agree_1e-13"] = long["abs_diff"] <= 1e-13
    # the comparison must show every digit: computed as text, abs_diff stays %.3g
    long["computed"] = long["computed"].map(lambda v: f"{v:.14f}")
    out.table(name + "_vs_printed", long, caption=f"{title}: printed against recomputed values.",
              float_format="%.3g")


def _observations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(x, y, number of distinct x) with repeated observations merged: H(p) = H(1-p) and the
    entropies are symmetric in p, so p and 1 - p are one point, equal only to rounding (H(0.3)
    and H(0.7) differ in the last bit): values within 1e-12 (relative) count as equal."""
    def close(a, b):
        return bool(np.isclose(a, b, rtol=1e-12, atol=1e-15))

    groups: list[tuple[float, list[float]]] = []  # (x, distinct y at that x)
    order = np.argsort(x, kind="stable")
    for xi, yi in zip(x[order], y[order]):
        if groups and close(xi, groups[-1][0]):
            if not any(close(yi, yj) for yj in groups[-1][1]):
                groups[-1][1].append(yi)  # another y at the same x: a separate observation
        else:
            groups.append((xi, [yi]))
    xs = np.array([gx for gx, ys in groups for _ in ys])
    ys = np.array([v for _, ys in groups for v in ys])
    return xs, ys, len(groups)


def regression_rows(ok: pd.DataFrame, column: str) -> pd.DataFrame:
    """Least squares of ``column`` on H(p) for every m (Fig. 8.4), with residual standard error
    and the F statistic of the slope. ``points`` counts distinct observations (see
    :func:`_observations`); a fit needs three distinct H(p)."""
    from scipy import stats

    rows = []
    for m, sub in ok.groupby("m"):
        sub = sub.dropna(subset=[column])
        if column == "annealed_entropy":
            sub = sub[sub["n"] == 100]
        # one point per p: the value depends on (m, p) here, and rows of other samples (or n,
        # for eigen_entropy) are copies that would count as observations
        sub = sub.drop_duplicates(subset=["p"])
        x, y, distinct = _observations(sub["shannon_entropy"].to_numpy(float),
                                       sub[column].to_numpy(float))
        if distinct < 3:
            continue
        slope, intercept = np.polyfit(x, y, 1)
        resid = y - (intercept + slope * x)
        dof = len(x) - 2
        sse = float(np.sum(resid ** 2))
        ssr = float(np.sum((intercept + slope * x - y.mean()) ** 2))
        rounding = 64 * np.finfo(float).eps * float(np.max(np.abs(y)))
        if math.sqrt(ssr / len(x)) <= rounding:  # a flat y: polyfit's slope ~1e-16 is no slope
            slope, ssr = 0.0, 0.0
        if math.sqrt(sse / len(x)) <= rounding:
            sse = 0.0  # residuals at rounding level: a perfect fit
        # linregress adds 1e-20 inside r, so a perfect fit got p = 1e-20-ish; from the sums a
        # perfect fit is F = inf, p = 0
        f_stat = ssr / (sse / dof) if sse > 0 else (math.inf if ssr > 0 else math.nan)
        r2 = ssr / (ssr + sse) if ssr + sse > 0 else math.nan  # nan: y constant
        rows.append({"m": int(m), "quantity": column, "points": len(x), "slope": slope,
                     "intercept": intercept, "r_squared": r2,
                     "residual_std_error": math.sqrt(sse / dof), "F_statistic": f_stat,
                     "p_value": float(stats.f.sf(f_stat, 1, dof))})
    return pd.DataFrame(rows)


@report_for("random_triangulation")
def tables_8(df, out):
    ok = ok_rows(df)
    if ok.empty:
        return
    _table_8(ok, "eigen_entropy", thesis.TABLE_8_1_EIGEN, "table_8_1_eigen",
             "Table 8.1: ηₘ(p) = ln λ / m, λ the largest transfer-matrix eigenvalue", out)
    _table_8(ok, "annealed_entropy", thesis.TABLE_8_2_ANNEALED, "table_8_2_annealed",
             "Table 8.2: the annealed entropy ln f(m, 100; p) / (100 m)", out)
    reg = pd.concat([regression_rows(ok, "eigen_entropy"), regression_rows(ok, "annealed_entropy")],
                    ignore_index=True)
    if reg.empty:  # no fit at all: keep the columns the figure looks up
        reg = pd.DataFrame(columns=["m", "quantity", "slope", "intercept"])
    if not reg.empty:
        # each row names its quantity; the caption says what each name is
        meaning = {"eigen_entropy": "eigen_entropy is ηₘ(p) = ln λ / m",
                   "annealed_entropy": "annealed_entropy is ln f(m, 100; p) / (100 m)"}
        present = [meaning[q] for q in meaning if (reg["quantity"] == q).any()]
        out.table("figure_8_4_regression", reg,
                  caption="Figure 8.4: least-squares fit on H(p), for each m, of the quantity of "
                          "each row (" + "; ".join(present) + "); p and 1 − p give the same "
                          "point, counted once.",
                  float_format="%.6g")
    # the figure plots eta_m(p); a width with fewer than 3 distinct H(p) shows points, no line
    if ok["eigen_entropy"].notna().any():
        # per strip width m its points and its least-squares line: MAX_CURVES // 2 widths a
        # panel, more become small multiples
        groups = chunks(sorted(ok["m"].unique()), MAX_CURVES // 2)
        if len(groups) == 1:
            fig, ax = out.new_figure(aspect=0.8)
            axes = [ax]
        else:
            fig, axes = out.small_multiples(len(groups), max_cols=2, sharex=True)
        for ax, ms in zip(axes, groups):
            for i, m in enumerate(ms):
                sub = ok[ok["m"] == m].sort_values("shannon_entropy")
                style = curve_style(i)
                ax.plot(sub["shannon_entropy"], sub["eigen_entropy"], color=style["color"],
                        marker=style["marker"], linestyle="", label=f"$m = {m}$")
                fit = reg[(reg["m"] == m) & (reg["quantity"] == "eigen_entropy")]
                if not fit.empty:
                    xs = np.linspace(sub["shannon_entropy"].min(), sub["shannon_entropy"].max(), 10)
                    ax.plot(xs, fit["intercept"].iloc[0] + fit["slope"].iloc[0] * xs,
                            color=style["color"], linestyle=style["linestyle"], marker="",
                            linewidth=0.9)
            ax.set_ylabel(r"$\eta_m(p) = \ln\lambda_{m,1}(p)/m$ (nats per cell)")
            if len(groups) > 1:
                ax.set_title(f"$m = {ms[0]}$ to ${ms[-1]}$")
                panel_legend(ax)  # per panel: each has its own m
        for ax in axes[-min(2, len(axes)):]:
            ax.set_xlabel("Shannon entropy $H(p)$ (nats)")
        if len(groups) == 1:
            legend_outside(fig)
        fitted = set(reg["m"][reg["quantity"] == "eigen_entropy"])
        unfitted = [int(m) for m in sorted(ok["m"].unique()) if m not in fitted]
        if not unfitted:
            lines = "with least-squares lines"
        elif fitted:
            lines = ("with least-squares lines where H(p) takes at least 3 distinct values (none "
                     "for " + ", ".join(f"m = {m}" for m in unfitted) + ")")
        else:
            lines = "without least-squares lines: fewer than 3 distinct H(p) values (H(p) = H(1 − p))"
        out.figure("figure_8_4", fig, caption="Figure 8.4: ηₘ(p) = ln λ / m (the eigenvalue "
                                              "entropy) against the Shannon entropy H(p) of the "
                                              f"diagonal choice, {lines}.")
    quenched = ok.dropna(subset=["quenched_entropy"]) if "quenched_entropy" in ok else ok.iloc[:0]
    if not quenched.empty:
        cols = ["m", "n", "p", "samples", "annealed_entropy", "quenched_entropy",
                "quenched_entropy_stderr", "eigen_entropy"]
        out.table("quenched_vs_annealed", quenched[cols].sort_values(["m", "n", "p"]),
                  caption="Quenched entropy (Monte Carlo mean of ln #IS per cell) against the "
                          "annealed entropy.",
                  float_format="%.8g")
