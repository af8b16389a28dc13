"""Experiments for the optimal composition of (eps, delta)-DP (issue 3, seed 001).

* ``composition``        eps_optimal (exact, Theorem 3.3) beside the KOV (Thm 3.4), DRV and basic bounds.
* ``composition_delta``  the forward direction: delta_optimal for a given eps_total.
* ``composition_region`` the (eps_i, delta_i) lines and the vertices of the k-fold privacy region.
* ``composition_hetero`` heterogeneous eps_1..eps_k: exact (Murtagh-Vadhan, grouped), lattice
                         upper/lower bounds with accuracy eta, Theorem 3.5 bound, dp-accounting PLD.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import (Choice, Experiment, Interval, Param, PointCheck, document,
                                       log_of_int, register)
from pipeline.kernels import composition as kc

K_MAX = 10**7
REGION_K_MAX = 10_000
EXACT_MAX_COMBOS = 2**22  # grouped Murtagh-Vadhan sum: prod (kept binomial atoms) terms
LATTICE_MAX_WORK = 6 * 10**9  # grouped-convolution flops for the lattice bounds (~2-4 s)
PLD_MAX_DISTINCT = 100  # dp-accounting: one PLD convolution per distinct eps (~1 s at 100)
HETERO_K_MAX = 100_000
# per-step eps: finite (Interval(0, None) admits inf) and >= 1e-12. Below ~1e-15 the piecewise
# inverse picks the wrong piece (losses (k - 2l) eps are below the float resolution of log A - log B)
# and returned 0 instead of ~k eps; from 1e-12 up it agrees with mpmath to ~1e-13 (tested).
EPS_MIN = 1e-12
_EPS_DOMAIN = Interval(EPS_MIN, math.inf, hi_closed=False)

_EPS = Param("eps", float, 0.1, _EPS_DOMAIN,
             "per-step epsilon of each (eps, delta)-DP mechanism")
_DELTA = Param("delta", float, 0.0, Interval(0, 1, hi_closed=False), "per-step delta")
_K = Param("k", int, 10, Interval(1, K_MAX), "number of adaptively composed mechanisms")
_DELTA_TARGET = Param("delta_target", float, 1e-6, Interval(0, 1, lo_closed=False, hi_closed=False),
                      "total delta of the composed mechanism")


# --------------------------------------------------------------------------- composition
def run_composition(params: dict, seed: int) -> dict:
    eps, delta, k, dt = params["eps"], params["delta"], params["k"], params["delta_target"]
    return {
        "eps_optimal": kc.eps_optimal(eps, delta, k, dt),
        "eps_kov_bound": kc.eps_kov_bound(eps, delta, k, dt),
        "eps_drv": kc.eps_drv(eps, delta, k, dt),
        "eps_basic": k * eps,
        "delta_floor": kc.pure_delta_floor(delta, k),
    }


COMPOSITION = register(Experiment(
    name="composition", version=1,
    doc="Optimal k-fold composition of (eps, delta)-DP (Kairouz-Oh-Viswanath Thm 3.3) vs KOV, DRV, basic.",
    params=[_EPS, _DELTA, _K, _DELTA_TARGET],
    columns={
        "eps_optimal": pa.float64(),    # exact smallest eps~; inf if delta_target < delta_floor
        "eps_kov_bound": pa.float64(),  # Theorem 3.4 closed form (min of k eps and two expressions)
        "eps_drv": pa.float64(),        # DRV advanced composition with delta' = delta_target - k delta
        "eps_basic": pa.float64(),      # k * eps
        "delta_floor": pa.float64(),    # 1 - (1 - delta)^k: smallest reachable delta_target
    },
    run=run_composition,
))


# --------------------------------------------------------------------------- composition_delta
def run_composition_delta(params: dict, seed: int) -> dict:
    eps, delta, k, et = params["eps"], params["delta"], params["k"], params["eps_total"]
    return {
        "delta_optimal": kc.delta_optimal(eps, delta, k, et),
        "log_delta_optimal": kc.log_delta_optimal(eps, delta, k, et),
        "delta_floor": kc.pure_delta_floor(delta, k),
    }


COMPOSITION_DELTA = register(Experiment(
    name="composition_delta", version=1,
    doc="Forward direction of optimal composition: smallest delta~ for a given eps_total (Thm 3.3).",
    params=[_EPS, _DELTA, _K,
            Param("eps_total", float, 1.0, Interval(0, math.inf, hi_closed=False),
                  "total epsilon of the composed mechanism")],
    columns={
        "delta_optimal": pa.float64(),      # smallest delta~ with (eps_total, delta~)-DP
        "log_delta_optimal": pa.float64(),  # natural log of delta_optimal (finite below 1e-308)
        "delta_floor": pa.float64(),        # 1 - (1 - delta)^k
    },
    run=run_composition_delta,
))


# --------------------------------------------------------------------------- composition_region
def run_composition_region(params: dict, seed: int) -> list[dict]:
    eps, delta, k = params["eps"], params["delta"], params["k"]
    eps_i, delta_i = kc.privacy_region_lines(eps, delta, k)
    rows = [{"kind": "line", "i": int(i), "eps_i": float(e), "delta_i": float(d),
             "p_md": None, "p_fa": None}
            for i, (e, d) in enumerate(zip(eps_i, delta_i))]
    md, fa = kc.privacy_region_vertices(eps, delta, k)
    rows += [{"kind": "vertex", "i": int(v), "eps_i": None, "delta_i": None,
              "p_md": float(x), "p_fa": float(y)}
             for v, (x, y) in enumerate(zip(md, fa))]
    return rows


COMPOSITION_REGION = register(Experiment(
    name="composition_region", version=1,
    doc="Privacy region of the k-fold composition: (eps_i, delta_i) lines and boundary vertices.",
    params=[Param("eps", float, 0.4, _EPS_DOMAIN,
                  "per-step epsilon"),
            Param("delta", float, 0.0, Interval(0, 1, hi_closed=False), "per-step delta"),
            Param("k", int, 3, Interval(1, REGION_K_MAX), "number of composed mechanisms")],
    columns={
        "kind": pa.string(),      # "line" (i, eps_i, delta_i) or "vertex" (i, p_md, p_fa)
        "i": pa.int64(),          # line index i = 0..floor(k/2), or vertex index along the boundary
        "eps_i": pa.float64(),    # (k - 2i) eps
        "delta_i": pa.float64(),  # optimal delta at eps_i (seed eq. (6))
        "p_md": pa.float64(),     # vertex: probability of missed detection
        "p_fa": pa.float64(),     # vertex: probability of false alarm
    },
    run=run_composition_region,
))


# --------------------------------------------------------------------------- composition_hetero
EPS_SOURCES = ("list", "uniform", "two_level", "geometric")


def hetero_eps_values(params: dict, seed: int) -> np.ndarray:
    """The eps_1..eps_k of one task: the given list, or generated from the task seed."""
    src = params["eps_source"]
    if src == "list":
        return np.asarray(params["eps_list"], dtype=float)
    k, lo, hi = params["k"], params["eps_min"], params["eps_max"]
    if src == "geometric":  # deterministic: eps_max * r^i down to eps_min
        return hi * (lo / hi) ** (np.arange(k) / max(k - 1, 1))
    rng = np.random.default_rng(seed)
    if src == "uniform":
        return rng.uniform(lo, hi, size=k)
    return np.where(rng.random(k) < params["p_high"], hi, lo)  # two_level


def _max_distinct(p: dict) -> int:
    if p["eps_source"] == "list":
        return len(set(p["eps_list"]))
    return min(2, p["k"]) if p["eps_source"] == "two_level" else p["k"]


def _check_source(p: dict) -> str | None:
    if p["eps_source"] == "list":
        n = len(p["eps_list"])
        if n == 0:
            return "eps_source=list needs a non-empty eps_list (each element > 0)"
        if n > HETERO_K_MAX:
            return f"eps_list may hold at most {HETERO_K_MAX} values, got {n}"
        return None  # k is ignored: the list's length is the number of steps
    if p["eps_list"]:
        return f"eps_list is only used with eps_source=list (got eps_source={p['eps_source']})"
    if p["eps_min"] > p["eps_max"]:
        return f"eps_min ({p['eps_min']}) must be <= eps_max ({p['eps_max']})"
    return None


def _representative_eps(p: dict) -> np.ndarray:
    """eps values with the same grid structure as the task's (for the size check, before the seed)."""
    if p["eps_source"] == "list":
        return np.asarray(p["eps_list"], dtype=float)
    k, lo, hi = p["k"], p["eps_min"], p["eps_max"]
    if p["eps_source"] == "two_level":
        return np.where(np.arange(k) % 2 == 0, hi, lo)
    if p["eps_source"] == "geometric":
        return hi * (lo / hi) ** (np.arange(k) / max(k - 1, 1))
    return np.linspace(lo, hi, k)


def _lattice_work(p: dict) -> float:
    """Operations of the lattice bounds of point ``p`` (0 where the plain DP is used)."""
    eps_values = _representative_eps(p)
    if eps_values.size == 0:
        return 0.0
    units = kc._grid_units(eps_values, p["eta"], True)
    if eps_values.size * int(units.sum()) <= kc.LATTICE_DP_MAX_WORK:
        return 0.0
    return kc.hetero_grouped_work(units, math.log(p["delta_target"]))


@functools.lru_cache(maxsize=4096)
def _first_k_over_work_limit(source: str, eps_min: float, eps_max: float, eta: float,
                             delta_target: float) -> int:
    """The least k whose lattice bounds cost more than LATTICE_MAX_WORK (HETERO_K_MAX + 1 if
    none), by bisection: the work grows with k. Each check costs O(k), so a sweep over
    k = 1..10^5 took minutes of validation checked point by point."""
    p = {"eps_source": source, "eps_min": eps_min, "eps_max": eps_max, "eta": eta,
         "delta_target": delta_target}
    lo, hi = 1, HETERO_K_MAX + 1  # the answer lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if _lattice_work({**p, "k": mid}) > LATTICE_MAX_WORK:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_lattice(p: dict) -> str | None:
    if p["eps_source"] != "list" and p["k"] < _first_k_over_work_limit(
            p["eps_source"], p["eps_min"], p["eps_max"], p["eta"], p["delta_target"]):
        return None  # below the first k over the limit (the rejection itself is exact)
    work = _lattice_work(p)
    if work > LATTICE_MAX_WORK:
        return (f"the lattice bounds would cost ~{work:.2g} operations > {LATTICE_MAX_WORK:.0e} "
                f"(grows like k^1.5 / eta^2): use fewer steps k, a smaller eps_max or a larger eta")
    return None


def _check_pld(p: dict) -> str | None:
    if p["pld"] and _max_distinct(p) > PLD_MAX_DISTINCT:
        return (f"pld=true allows at most {PLD_MAX_DISTINCT} distinct eps values "
                f"(eps_source={p['eps_source']}, k={p['k']}): set pld=false or reduce k")
    return None


def eps_pld(values, counts, delta: float, delta_target: float, interval: float) -> float | None:
    """dp-accounting's PLD accountant (pessimistic discretisation) as a reference; None if absent."""
    try:
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError:
        return None
    composed = None
    for e, n in zip(values, counts):
        one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(e), float(delta)),
                                          value_discretization_interval=interval)
        part = one.self_compose(int(n)) if n > 1 else one
        composed = part if composed is None else composed.compose(part)
    return float(composed.get_epsilon_for_delta(delta_target))


def run_composition_hetero(params: dict, seed: int) -> dict:
    eps_values = hetero_eps_values(params, seed)
    delta, dt, eta = params["delta"], params["delta_target"], params["eta"]
    values, counts = kc.group_eps(eps_values)
    dp = kc.residual_delta(dt, delta, eps_values.size)
    size = kc.hetero_exact_size(values, counts, math.log(dp)) if dp > 0.0 else 1
    exact = kc.hetero_eps_exact(eps_values, delta, dt) if size <= EXACT_MAX_COMBOS else None
    upper, lower = kc.hetero_eps_approx(eps_values, delta, dt, eta)
    return {
        "k_steps": int(eps_values.size),
        "n_distinct": int(values.size),
        "log_exact_combos": float(np.sum(np.log(counts + 1.0))),
        "log_exact_terms": log_of_int(size),
        "eps_values": eps_values.tolist(),
        "eps_exact": exact,
        "eps_approx": upper,
        "eps_approx_lower": lower,
        "eps_kov_bound": kc.hetero_kov_bound(eps_values, delta, dt),
        "eps_basic": float(eps_values.sum()),
        "eps_pld": (eps_pld(values, counts, delta, dt, params["pld_interval"])
                    if params["pld"] else None),
    }


COMPOSITION_HETERO = register(Experiment(
    name="composition_hetero", version=1,
    doc="Optimal composition of heterogeneous (eps_i, delta)-DP mechanisms (Murtagh-Vadhan), "
        "lattice bounds, Theorem 3.5 bound and dp-accounting PLD.",
    stochastic=True,
    params=[
        Param("eps_source", str, "uniform", Choice(*EPS_SOURCES),
              "where eps_1..eps_k come from: the given list, or generated from the task seed"),
        Param("eps_list", "float_list", [], _EPS_DOMAIN,
              "explicit eps_1..eps_k (eps_source=list only)"),
        Param("k", int, 10, Interval(1, HETERO_K_MAX),
              "number of steps for generated sources (ignored with eps_source=list)"),
        Param("eps_min", float, 0.05, _EPS_DOMAIN,
              "smallest eps (uniform: lower end; two_level: low level; geometric: last value)"),
        Param("eps_max", float, 0.5, _EPS_DOMAIN,
              "largest eps (uniform: upper end; two_level: high level; geometric: first value)"),
        Param("p_high", float, 0.5, Interval(0, 1), "two_level: probability of eps_max per step"),
        Param("delta", float, 0.0, Interval(0, 1, hi_closed=False), "per-step delta (same for all steps)"),
        _DELTA_TARGET,
        Param("eta", float, 0.01, Interval(0, 1, lo_closed=False),
              "grid step of the lattice bounds: eps_i rounded up (and down) to multiples of eta"),
        Param("pld", bool, True, None, "also compute eps_pld with dp-accounting (null if not installed)"),
        Param("pld_interval", float, 1e-4, Interval(0, 0.1, lo_closed=False),
              "dp-accounting value_discretization_interval"),
    ],
    checks=[
        PointCheck(("eps_source", "eps_list", "k", "eps_min", "eps_max"), _check_source),
        PointCheck(("eps_source", "eps_list", "k", "eps_min", "eps_max", "eta", "delta_target"),
                   _check_lattice),
        PointCheck(("eps_source", "eps_list", "k", "pld"), _check_pld),
    ],
    columns={
        "k_steps": pa.int64(),              # number of composed steps
        "n_distinct": pa.int64(),           # distinct eps values
        "log_exact_combos": pa.float64(),   # log prod (n_j + 1): size of the untruncated grouped sum
        "log_exact_terms": pa.float64(),    # log of the terms of the grouped exact sum after truncation
        "eps_values": pa.list_(pa.float64()),  # the eps_1..eps_k used
        "eps_exact": pa.float64(),          # exact optimum; null when there are more than 2^22 terms
        "eps_approx": pa.float64(),         # guaranteed upper bound (eps rounded up to the eta grid)
        "eps_approx_lower": pa.float64(),   # guaranteed lower bound (rounded down)
        "eps_kov_bound": pa.float64(),      # Theorem 3.5
        "eps_basic": pa.float64(),          # sum eps_i
        "eps_pld": pa.float64(),            # dp-accounting PLD; null if pld=false or not installed
    },
    run=run_composition_hetero,
))


# --------------------------------------------------------------------------- column docs
# (description, unit): eps values are privacy losses (natural-log likelihood ratios, "nat");
# deltas and probabilities are dimensionless ("1"). Parameters with "" keep their Param.doc.
_PARAM_UNITS = {"eps": ("", "nat"), "delta": ("", "1"), "k": ("", "1")}
document(COMPOSITION, {
    **_PARAM_UNITS, "delta_target": ("", "1"),
    "eps_optimal": ("exact smallest total eps of the k-fold composition at delta_target "
                    "(Kairouz-Oh-Viswanath Theorem 3.3); inf if delta_target < delta_floor", "nat"),
    "eps_kov_bound": ("closed-form bound of Theorem 3.4 (minimum of k eps and two expressions)",
                      "nat"),
    "eps_drv": ("Dwork-Rothblum-Vadhan advanced composition with delta' = delta_target - k delta",
                "nat"),
    "eps_basic": ("basic composition: k eps", "nat"),
    "delta_floor": ("1 - (1 - delta)^k: the smallest reachable delta_target", "1"),
})
document(COMPOSITION_DELTA, {
    **_PARAM_UNITS, "eps_total": ("", "nat"),
    "delta_optimal": ("smallest total delta such that the composition is (eps_total, delta)-DP "
                      "(Theorem 3.3)", "1"),
    "log_delta_optimal": ("natural log of delta_optimal (finite below 1e-308)", "nat"),
    "delta_floor": ("1 - (1 - delta)^k", "1"),
})
document(COMPOSITION_REGION, {
    **_PARAM_UNITS,
    "kind": ("'line': a supporting line (i, eps_i, delta_i) of the optimal privacy region; "
             "'vertex': a corner (i, p_md, p_fa) of its boundary", None),
    "i": ("line index i = 0..floor(k/2), or vertex index along the boundary", "1"),
    "eps_i": ("(k - 2i) eps", "nat"),
    "delta_i": ("optimal delta at eps_i (seed eq. (6))", "1"),
    "p_md": ("vertex: probability of missed detection", "1"),
    "p_fa": ("vertex: probability of false alarm", "1"),
})
document(COMPOSITION_HETERO, {
    "eps_source": ("", None), "k": ("", "1"), "eps_min": ("", "nat"), "eps_max": ("", "nat"),
    "eps_list": ("", "nat"), "p_high": ("", "1"), "delta": ("", "1"), "delta_target": ("", "1"),
    "eta": ("", "nat"), "pld": ("", None), "pld_interval": ("", "nat"),
    "k_steps": ("number of composed steps", "1"),
    "n_distinct": ("number of distinct eps values", "1"),
    "log_exact_combos": ("log prod (n_j + 1): size of the untruncated grouped exact sum", "nat"),
    "log_exact_terms": ("log of the number of terms of the grouped exact sum after truncation",
                        "nat"),
    "eps_values": ("the eps_1..eps_k used", "nat"),
    "eps_exact": ("exact optimal total eps (Murtagh-Vadhan); null when there are more than 2^22 "
                  "terms", "nat"),
    "eps_approx": ("guaranteed upper bound: each eps rounded up to the eta grid", "nat"),
    "eps_approx_lower": ("guaranteed lower bound: each eps rounded down to the eta grid", "nat"),
    "eps_kov_bound": ("Kairouz-Oh-Viswanath Theorem 3.5 bound", "nat"),
    "eps_basic": ("basic composition: sum of eps_i", "nat"),
    "eps_pld": ("dp-accounting privacy-loss-distribution accountant; null if pld=false or it "
                "is not installed", "nat"),
})
