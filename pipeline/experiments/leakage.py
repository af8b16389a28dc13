"""Experiment ``leakage``: optimal eps-DP channels on graphs of datasets, their utility and
min-entropy leakage, against the tight bound and the thesis bound (seed 004, chapter 5).

For a dataset graph (A, ~) and eps, the LP maximises trace(M)/|A| over channels M : A -> A
with M[h, k] <= e^eps M[l, k] for h ~ l (uniform prior; by Bayes post-processing this is
also the best Bayes utility sum_z max_y p(y, z)). Small graphs (|A| <= 64) solve the full
LP; larger ones the LP reduced to the orbitals of the automorphism group (exact, Lemma
5.3.2); Hamming graphs and hypercubes use their distance classes, with the closed forms
U = (lambda/(lambda + v - 1))^u and leakage u log2(v lambda/(lambda + v - 1)) beside.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import Choice, Experiment, Interval, Param, PointCheck, register
from pipeline.experiments._graphs import GRAPHS, graph_check
from pipeline.kernels import finite_mechanisms as fm

FULL_LP_MAX = 64            # |A|^2 variables, 2|E||A| DP rows
ORBIT_LP_MAX = 1024         # orbitals are computed on |A|^2 pairs
DISTANCE_LP_MAX = 1 << 20   # Hamming/hypercube distance classes: no graph is built
SYMMETRISE_MAX_GROUP = 5_000
DISTANCE_TRANSITIVE = ("K2", "cycle", "complete", "hypercube", "hamming", "petersen")

PARAMS = [
    Param("graph", str, "hypercube", Choice(*GRAPHS), "dataset graph family"),
    Param("n", int, 6, Interval(2, 1024), "vertices of path/cycle/complete/star/random_regular"),
    Param("u", int, 3, Interval(1, 20), "hypercube dimension / Hamming individuals"),
    Param("v", int, 3, Interval(2, 64), "Hamming values per individual"),
    Param("degree", int, 3, Interval(1, 64), "degree of random_regular"),
    # eps <= 15: the LPs have rows M[h,k] - e^eps M[l,k] <= 0, and HiGHS's 1e-7 feasibility
    # tolerance swallows the e^-eps-sized entries beyond that (the orbit LP returned U ~ 0 on
    # K_{1,5} from eps = 16)
    Param("eps", float, 1.0, Interval(0.0, 15.0), "pure DP level of the channel (LPs exact up to 15)"),
    Param("solver", str, "auto", Choice("auto", "full_lp", "orbit_lp"),
          "auto: full LP when |A| <= 64, else the orbit-reduced LP"),
    Param("symmetrise", bool, True, None,
          "symmetrise the full-LP channel by Aut (Lemma 5.3.2) and check its four claims"),
]


def _size_check(p: dict) -> str | None:
    nd = fm.dataset_count(p["graph"], p["n"], p["u"], p["v"])
    g = p["graph"]
    solver = p["solver"]
    if solver == "full_lp" or (solver == "auto" and g in ("path", "random_regular")):
        if nd > FULL_LP_MAX:
            return (f"graph={g} with |A| = {nd} needs the full LP (|A|^2 variables): allowed |A| <= "
                    f"{FULL_LP_MAX} (n for path/random_regular, or solver=orbit_lp for symmetric graphs)")
    if g in ("hypercube", "hamming"):
        if nd > DISTANCE_LP_MAX:
            return f"graph={g}: |A| = v**u = {nd}; allowed |A| <= {DISTANCE_LP_MAX}"
    elif nd > ORBIT_LP_MAX:
        return f"graph={g}: |A| = {nd}; the orbit-reduced LP allows |A| <= {ORBIT_LP_MAX}"
    if solver == "orbit_lp" and g == "random_regular" and nd > FULL_LP_MAX:
        return f"graph=random_regular has (almost surely) no symmetry: allowed n <= {FULL_LP_MAX}"
    return None


COLUMNS = {
    "n_datasets": pa.int64(),
    "n_edges": pa.int64(),
    "diameter": pa.int64(),
    "solver_used": pa.string(),
    "lp_variables": pa.int64(),
    "lp_constraints": pa.int64(),
    "utility_optimal": pa.float64(),
    "leakage_bits": pa.float64(),
    "utility_tight_bound": pa.float64(),
    "utility_thesis_bound": pa.float64(),
    "utility_thesis_bound_max": pa.float64(),
    "thesis_bound_violations": pa.int64(),
    "utility_closed_form": pa.float64(),
    "leakage_closed_form_bits": pa.float64(),
    "vertex_transitive": pa.bool_(),
    "thesis_bound_holds": pa.bool_(),
    "tight_bound_attained": pa.bool_(),
    "automorphism_group_order": pa.int64(),
    "sym_dp": pa.bool_(),
    "sym_diagonal_constant": pa.bool_(),
    "sym_diagonal_is_column_max": pa.bool_(),
    "sym_min_entropy_equal": pa.bool_(),
}

TOL = 1e-7  # LP optimum vs bounds: HiGHS feasibility tolerance is ~1e-7 relative


def _slack(bound: float) -> float:
    """Comparison slack for a utility bound in (0, 1]: relative to the bound when it is small and
    to its deficit 1 - bound when it is near 1 (on K_{1,5} at eps = 20, beyond today's eps limit,
    the optimum misses the thesis bound by 7e-9 < 1e-7 * bound: a plain relative tolerance
    called that a pass), plus an absolute floor for LP round-off (~1e-15)."""
    return TOL * min(bound, 1.0 - bound) + 1e-12


def _holds(util: float, bound: float) -> bool:
    return bool(util <= bound + _slack(bound))


def _attained(util: float, bound: float) -> bool:
    return bool(abs(util - bound) <= _slack(bound))


def _hamming_row(p: dict, u: int, v: int) -> dict:
    """Hamming graphs (and hypercubes, v = 2) without building the graph: orbitals are the
    distance classes, border sizes C(u, d)(v-1)^d."""
    eps = p["eps"]
    borders, pairs = fm.hamming_distance_class_data(u, v)
    util, x = fm.distance_class_lp(borders, pairs, eps)
    nd = v ** u
    tight = fm.tight_utility_bound_from_borders([borders], eps)
    c = int(borders[1:].min())
    thesis = fm.thesis_bound_single(u, c, eps)
    return {
        "n_datasets": nd,
        "n_edges": nd * u * (v - 1) // 2,
        "diameter": u,
        "solver_used": "distance_class_lp",
        "lp_variables": u + 1,
        "lp_constraints": int(pairs.shape[0] + 1),
        "utility_optimal": util,
        # every column's maximum is x_0 (x decreases with distance): sum_j max_i = |A| x_0
        "leakage_bits": math.log2(nd) + math.log2(float(x.max())),
        "utility_tight_bound": tight,
        "utility_thesis_bound": thesis,
        "utility_thesis_bound_max": thesis,
        "thesis_bound_violations": 0 if _holds(util, thesis) else int(nd),
        "utility_closed_form": fm.hamming_utility_closed_form(u, v, eps),
        "leakage_closed_form_bits": fm.hamming_leakage_closed_form_bits(u, v, eps),
        "vertex_transitive": True,
        "thesis_bound_holds": _holds(util, thesis),
        "tight_bound_attained": _attained(util, tight),
    }


def run(p: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    name, eps = p["graph"], p["eps"]
    nd = fm.dataset_count(name, p["n"], p["u"], p["v"])
    if name in ("hypercube", "hamming") and (nd > FULL_LP_MAX or p["solver"] == "orbit_lp") \
            and p["solver"] != "full_lp":
        return _hamming_row(p, p["u"], 2 if name == "hypercube" else p["v"])

    graph = fm.dataset_graph(name, p["n"], p["u"], p["v"], p["degree"], rng)
    n = graph.n
    dist = fm.distance_matrix(graph)
    if np.any(dist < 0):
        raise ValueError("the dataset graph is disconnected; seed 003 and ch. 5 assume connected")
    borders = [fm.border_profile(r) for r in dist]
    gens = fm.automorphism_generators(name, graph, p["u"], p["v"])
    vt = fm.is_vertex_transitive(graph, gens)

    use_full = p["solver"] == "full_lp" or (p["solver"] == "auto" and n <= FULL_LP_MAX)
    sym_cols: dict = {}
    if use_full:
        util, channel, info = fm.dp_channel_lp_full(graph, eps)
        solver = "full_lp"
    elif name in DISTANCE_TRANSITIVE:
        b, pairs = fm.distance_class_data(graph)
        util, x = fm.distance_class_lp(b, pairs, eps)
        channel = x[dist]
        info = {"variables": int(b.size), "constraints": int(pairs.shape[0] + 1)}
        solver = "distance_class_lp"
    else:
        util, lab, x, info = fm.dp_channel_lp_orbits(graph, eps, gens)
        channel = fm.channel_from_orbitals(lab, x, n)
        solver = "orbit_lp"
    channel = channel / channel.sum(axis=1, keepdims=True)  # remove LP round-off in row sums

    group_order = None
    if use_full and p["symmetrise"]:
        try:
            group = fm.group_closure(gens, SYMMETRISE_MAX_GROUP)
        except ValueError:
            group = None
        if group is not None:
            group_order = len(group)
            start = fm.bayes_remap(channel)  # Lemma 5.3.2 assumes column maxima on the diagonal
            sym = fm.symmetrise(start, group)
            sym_cols = fm.lemma532_properties(start, sym, graph.edges, eps, tol=1e-7)

    tight = fm.tight_utility_bound_from_borders(borders, eps)
    per_vertex = fm.thesis_bounds_from_borders(borders, eps)
    thesis = float(per_vertex.min())
    closed = closed_leak = None
    if name in ("K2", "complete", "hypercube", "hamming"):
        u, v = {"K2": (1, 2), "complete": (1, n), "hypercube": (p["u"], 2),
                "hamming": (p["u"], p["v"])}[name]
        closed = fm.hamming_utility_closed_form(u, v, eps)
        closed_leak = fm.hamming_leakage_closed_form_bits(u, v, eps)
    return {
        "n_datasets": n,
        "n_edges": graph.m,
        "diameter": int(dist.max()),
        "solver_used": solver,
        "lp_variables": info["variables"],
        "lp_constraints": info["constraints"],
        "utility_optimal": util,
        "leakage_bits": fm.min_entropy_leakage_bits(channel),
        "utility_tight_bound": tight,
        "utility_thesis_bound": thesis,
        "utility_thesis_bound_max": float(per_vertex.max()),
        "thesis_bound_violations": int(sum(not _holds(util, b) for b in per_vertex)),
        "utility_closed_form": closed,
        "leakage_closed_form_bits": closed_leak,
        "vertex_transitive": vt,
        "thesis_bound_holds": _holds(util, thesis),
        "tight_bound_attained": _attained(util, tight),
        "automorphism_group_order": group_order,
        **sym_cols,
    }


EXPERIMENT = register(Experiment(
    name="leakage",
    version=1,
    doc=__doc__,
    params=PARAMS,
    columns=COLUMNS,
    run=run,
    stochastic=True,
    checks=(
        PointCheck(("graph", "n", "degree"), graph_check),
        PointCheck(("graph", "n", "u", "v", "solver"), _size_check),
    ),
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/low_influence.md (leakage section).
from pipeline.experiments.base import document  # noqa: E402

document(EXPERIMENT, {
    "graph": ("", None), "n": ("", "1"), "u": ("", "1"), "v": ("", "1"), "degree": ("", "1"),
    "eps": ("", "nat"), "solver": ("", None), "symmetrise": ("", None),
    "n_datasets": ("|A|, number of datasets", "1"),
    "n_edges": ("|E|, edges of the dataset graph", "1"),
    "diameter": ("diameter of the dataset graph", "1"),
    "solver_used": ("full_lp, orbit_lp or distance_class_lp", None),
    "lp_variables": ("variables of the LP actually solved", "1"),
    "lp_constraints": ("constraints of the LP actually solved", "1"),
    "utility_optimal": ("LP max of trace(M)/|A| over eps-DP channels (uniform prior)", "1"),
    "leakage_bits": ("min-entropy leakage log2 sum_j max_i M_ij of that channel", "bit"),
    "utility_tight_bound": ("1 / min_k sum_h e^(-eps d(h, k))", "1"),
    "utility_thesis_bound": ("Theorem 5.3.3 (eq. 5.6): the minimum over vertices", "1"),
    "utility_thesis_bound_max": ("the maximum over vertices of eq. (5.6)", "1"),
    "thesis_bound_violations": ("vertices a where U* exceeds eq. (5.6) at a", "1"),
    "utility_closed_form": ("closed form (lambda / (lambda + v - 1))^u (K2, complete, "
                            "hypercube, Hamming)", "1"),
    "leakage_closed_form_bits": ("closed form u log2(v lambda / (lambda + v - 1))", "bit"),
    "vertex_transitive": ("Aut(graph) has one vertex orbit", None),
    "thesis_bound_holds": ("U* <= utility_thesis_bound + slack", None),
    "tight_bound_attained": ("|U* - utility_tight_bound| <= slack", None),
    "automorphism_group_order": ("|Aut| used for the symmetrisation", "1"),
    "sym_dp": ("Lemma 5.3.2 claim (1) for the symmetrised channel", None),
    "sym_diagonal_constant": ("Lemma 5.3.2 claim (2) for the symmetrised channel", None),
    "sym_diagonal_is_column_max": ("Lemma 5.3.2 claim (3) for the symmetrised channel", None),
    "sym_min_entropy_equal": ("Lemma 5.3.2 claim (4) for the symmetrised channel", None),
})
