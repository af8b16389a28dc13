"""Inferential privacy under correlated priors on networks (Ghosh & Kleinberg, seed 000; issue 6).

Experiments:

- ``inferential``: the exact nu of a mechanism for one target node (or all), formula (6),
  Theorem 4.2's bound and the influence-matrix summaries, for Ising / parity / clones priors on
  the shared graph families;
- ``inferential_bethe_limit``: Corollary A.6 (formula 24), the worst-case nu over trees of
  maximum degree Delta, i.e. the root of the Bethe lattice.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import (Check, Choice, Experiment, Interval, Param, PointCheck,
                                       register)
from pipeline.kernels import graphs as G
from pipeline.kernels import inferential as K

GRAPHS = ("path", "cycle", "star", "complete", "grid", "tree", "bethe", "erdos_renyi",
          "random_regular", "random_tree")
TREE_GRAPHS = ("path", "star", "tree", "bethe", "random_tree")
PRIORS = ("ising", "parity", "clones")
MECHANISMS = ("noisy_sum", "randomized_response", "worst_case", "M1", "M2")

MAX_TREE_NODES = 2_000_000  # belief propagation, O(n)
KNAPSACK_BUDGET = 20_000_000  # n^2 * (number of targets) for the exact O(n^2) tree sum recursion
MAX_TRANSFER_NODES = 1024
TRANSFER_BUDGET = 1_000_000_000  # n^2 2^w per target (~30 s on one shared core)
MAX_RR_ENUMERATION_COST = 20 * 20 * (1 << 20)  # n^2 2^n-ish for target = all


# --------------------------------------------------------------------------- sizes and plan
GRAPH_SIZE_CAP = 2**64  # above every size limit; graph_size says "at least this many"


def graph_size(p: dict) -> int:
    """Number of nodes the graph parameters describe (without building a random graph), or
    ``GRAPH_SIZE_CAP`` for more: the exact power for depth=10^12 never finished (validation
    hung), and for depth=10^6 its digits overflowed the error message."""
    g = p["graph"]
    if g == "grid":
        return p["rows"] * p["cols"]
    if g == "tree":
        b, d = p["branching"], p["depth"]
        if b > 1 and (d + 1) * math.log2(b) > 64:
            return GRAPH_SIZE_CAP
        return d + 1 if b == 1 else (b ** (d + 1) - 1) // (b - 1)
    if g == "bethe":
        deg, rad = p["degree"], p["radius"]
        if rad == 0:
            return 1
        if deg == 2:
            return 1 + 2 * rad
        if deg > 2 and rad * math.log2(deg - 1) > 64:
            return GRAPH_SIZE_CAP
        return 1 + deg * ((deg - 1) ** rad - 1) // (deg - 2)
    return p["n"]


def prior_size(p: dict) -> int:
    return 1 + p["r"] * p["s"] if p["prior"] == "parity" else graph_size(p)


def coupling(p: dict) -> float:
    """J, or atanh(2 copy_p - 1) when the family-tree copy probability is given."""
    if p.get("copy_p") is not None:
        return K.copy_probability_to_coupling(p["copy_p"])
    return float(p["J"])


def _target_count(p: dict, n: int) -> int:
    return n if p["target"] == "all" else 1


def plan(p: dict) -> tuple[str, str]:
    """(method for the joint law of (x_a, S), method reported for nu). Raises SizeLimitError
    with a message naming the parameters and the allowed values."""
    n = prior_size(p)
    mech, prior, graph = p["mechanism"], p["prior"], p["graph"]
    if mech in ("M1", "M2") and prior != "parity":
        raise K.SizeLimitError("mechanism M1 / M2 is defined for prior = parity only (App. A.1)")
    if prior != "ising":
        if n > K.MAX_ENUMERATION_NODES:
            raise K.SizeLimitError(K.enumeration_limit_message(n) + f" (prior = {prior})")
        if mech == "worst_case" and prior == "parity" and p["s"] > 1 and n > K.MAX_LP_NODES:
            raise K.SizeLimitError(f"worst_case for the (non-affiliated) parity prior needs the LP, "
                                   f"limited to n = 1 + r*s <= {K.MAX_LP_NODES}")
        if mech == "randomized_response":
            _check_rr_cost(n, _target_count(p, n))
        if mech == "worst_case" and prior == "parity" and p["s"] > 1:
            _check_lp_eps(p)
            return "enumeration", "LP"
        return "enumeration", "enumeration"
    J = coupling(p)
    affiliated = J >= 0
    nt = _target_count(p, n)
    if graph in TREE_GRAPHS:
        base = "tree"
        if n > MAX_TREE_NODES:
            got = "at least 2^64" if n >= GRAPH_SIZE_CAP else n  # graph_size caps the count
            raise K.SizeLimitError(f"tree recursion limited to n <= {MAX_TREE_NODES} nodes "
                                   f"(got {got})")
    elif graph == "cycle" and (affiliated or p["n"] % 2 == 0 or mech == "noisy_sum"
                               or n > K.MAX_ENUMERATION_NODES):
        base = "transfer"  # along the cycle; odd antiferromagnetic cycles are not bipartite
        if n * n * (1 if nt == 1 else 2) > TRANSFER_BUDGET // 100:
            raise K.SizeLimitError(f"cycle transfer limited to n^2 <= {TRANSFER_BUDGET // 100:.0e} "
                                   f"(got n = {n})")
        if not affiliated and p["n"] % 2 == 1 and mech in ("worst_case", "randomized_response"):
            raise K.SizeLimitError(f"{mech} on an odd cycle with J < 0 (not bipartite, not affiliated) "
                                   f"needs enumeration / the LP: n <= {K.MAX_ENUMERATION_NODES} / "
                                   f"{K.MAX_LP_NODES}")
    elif graph == "grid" and min(p["rows"], p["cols"]) <= K.MAX_TRANSFER_WIDTH:
        base = "transfer"
        if nt == 1:
            passes = 1
        elif n > MAX_TRANSFER_NODES:  # refused below: counting the orbits of 3 x 10^9 never ended
            passes = n
        elif affiliated or p.get("h", 0.0) == 0.0 or mech == "noisy_sum":  # symmetric: one pass per orbit
            passes = len({K.grid_orbit_representative(p["rows"], p["cols"], a) for a in range(n)})
        else:  # gauged antiferromagnet in a field: the checkerboard field breaks the symmetry
            passes = n
        cost = n * n * (1 << min(p["rows"], p["cols"])) * passes
        if n > MAX_TRANSFER_NODES or cost > TRANSFER_BUDGET:
            raise K.SizeLimitError(
                f"transfer matrices limited to rows*cols <= {MAX_TRANSFER_NODES}, min(rows, cols) <= "
                f"{K.MAX_TRANSFER_WIDTH} and (rows*cols)^2 * 2^min(rows, cols) * (targets) <= "
                f"{TRANSFER_BUDGET:.0e} (got rows = {p['rows']}, cols = {p['cols']}, "
                f"target = {p['target']}): use a single target or a smaller grid")
    else:
        if n > K.MAX_ENUMERATION_NODES:
            raise K.SizeLimitError(K.enumeration_limit_message(n) + f" (graph = {graph})")
        base = "enumeration"
    if mech == "worst_case" and not affiliated:
        if base in ("tree", "transfer"):  # bipartite: the gauge transform makes it affiliated
            return base, base
        if n > K.MAX_LP_NODES:
            raise K.SizeLimitError(f"worst_case for J < 0 (not affiliated) needs the LP, limited to "
                                   f"n <= {K.MAX_LP_NODES} nodes (got {n}); J >= 0 uses formula (6)")
        _check_lp_eps(p)
        return base, "LP"
    if mech == "randomized_response":
        if n <= K.MAX_ENUMERATION_NODES:
            _check_rr_cost(n, nt)
            return base, "enumeration"
        if not affiliated and base == "enumeration":
            raise K.SizeLimitError(f"randomized_response with J < 0 needs enumeration, limited to "
                                   f"n <= {K.MAX_ENUMERATION_NODES} (got {n})")
        return base, base
    if mech == "noisy_sum" and base == "tree" and n * n * nt > KNAPSACK_BUDGET and not affiliated:
        raise K.SizeLimitError(f"noisy_sum with J < 0 on a tree needs the exact sum recursion, limited "
                               f"to n^2 * (number of targets) <= {KNAPSACK_BUDGET} (got {n * n * nt}): "
                               "give a single target or a smaller tree")
    return base, base


def _check_lp_eps(p: dict) -> None:
    if p["eps"] > K.MAX_LP_EPS:
        raise K.SizeLimitError(f"worst_case by the LP (prior not affiliated) needs eps <= {K.MAX_LP_EPS} "
                               f"(got eps = {p['eps']}): beyond that HiGHS's tolerances fail on the "
                               "e^eps-scaled DP rows; allowed: eps in (0, 2.5], or J >= 0 / a bipartite "
                               "graph (formula (6), any eps)")


def _check_rr_cost(n: int, nt: int) -> None:
    if nt * n * (1 << n) > MAX_RR_ENUMERATION_COST:
        raise K.SizeLimitError(f"randomized_response by enumeration costs targets * n * 2^n; limited "
                               f"to {MAX_RR_ENUMERATION_COST} (n = {n}, targets = {nt}): give a single "
                               "target or a smaller n")


def _size_check(p: dict) -> str | None:
    try:
        g = p["graph"]
        if p["prior"] != "parity":
            if g == "cycle" and p["n"] < 3:
                return "graph = cycle needs n >= 3"
            if g == "random_regular" and ((p["n"] * p["degree"]) % 2 or p["degree"] >= p["n"]):
                return "graph = random_regular needs n * degree even and degree < n"
        n = prior_size(p)
        if p["target"] != "all" and int(p["target"]) >= n:
            return f"target must be 'all' or a node index in 0..{n - 1} (got {p['target']})"
        plan(p)
    except K.SizeLimitError as exc:
        return str(exc)
    return None


# --------------------------------------------------------------------------- run
def build_graph(p: dict, rng: np.random.Generator):
    g = p["graph"]
    if g == "path":
        return G.path_graph(p["n"])
    if g == "cycle":
        return G.cycle_graph(p["n"])
    if g == "star":
        return G.star_graph(p["n"])
    if g == "complete":
        return G.complete_graph(p["n"])
    if g == "grid":
        return G.grid_graph(p["rows"], p["cols"])
    if g == "tree":
        return G.complete_tree(p["branching"], p["depth"])
    if g == "bethe":
        return G.bethe_ball(p["degree"], p["radius"])
    if g == "erdos_renyi":
        return G.erdos_renyi(p["n"], p["p"], rng)
    if g == "random_regular":
        return G.random_regular(p["n"], p["degree"], rng)
    if g == "random_tree":
        return G.random_tree(p["n"], rng)
    raise ValueError(g)


def run_inferential(p: dict, seed: int):
    rng = np.random.default_rng(seed if p.get("graph_seed") is None else p["graph_seed"])
    base, method = plan(p)
    eps, mech = p["eps"], p["mechanism"]
    J = coupling(p)
    if p["prior"] == "parity":
        prior = K.ParityPrior(p["r"], p["s"])
        graph = None
    else:
        graph = build_graph(p, rng)
        prior = K.ising_prior(graph, J, p["h"]) if p["prior"] == "ising" else K.ClonesPrior(graph.n)
    n = prior.n
    targets = list(range(n)) if p["target"] == "all" else [int(p["target"])]

    # affiliation (Definition 3.1), influence matrix (Definition 4.1)
    table = None
    if p["prior"] == "ising":
        affiliated = K.ising_is_affiliated(prior)
        gamma = K.influence_matrix_ising(prior)
    else:
        affiliated = K.is_affiliated_enumeration(prior)
        if n <= K.MAX_GAMMA_DEFINITION_NODES:
            table = K.log_table(prior)
            gamma = K.influence_matrix_definition(prior, table)
        else:  # clones / parity never have full support: Gamma = inf by convention
            gamma = np.full((n, n), np.inf)
    summary = K.influence_summary(gamma, eps)

    # formula (6) and the joint law of (x_a, S)
    nu6, L = {}, {}
    if base == "tree":
        logz = K.tree_logz_all(prior, eps, root=0)
        for a in targets:
            nu6[a] = K.formula6({k: v[a] for k, v in logz.items()})
        need_sum = mech == "noisy_sum" and (n * n * len(targets) <= KNAPSACK_BUDGET)
        if need_sum:
            for a in targets:
                L[a] = K.tree_joint_target_sum(prior, a)
    elif base == "transfer" and p["graph"] == "cycle":
        La = K.cycle_joint_target_sum(J, prior.fields, 0)  # uniform field: rotation invariant
        for a in targets:
            L[a] = La
            nu6[a] = K.formula6(K.restricted_log_partitions(La, eps))
    elif base == "transfer":
        cache = {}
        for a in targets:
            rep = K.grid_orbit_representative(p["rows"], p["cols"], a)
            if rep not in cache:
                cache[rep] = K.grid_joint_target_sum(p["rows"], p["cols"], J, p["h"], rep)
            L[a] = cache[rep]
            nu6[a] = K.formula6(K.restricted_log_partitions(L[a], eps))
    else:
        Ls = K.joint_target_sum_enumeration(prior, targets)
        for i, a in enumerate(targets):
            L[a] = Ls[i]
            nu6[a] = K.formula6(K.restricted_log_partitions(L[a], eps))

    # the mechanism's nu
    nu = {}
    if mech == "noisy_sum":
        for a in targets:
            # without the sum law (large affiliated tree): Theorem 3.4 + Lemma 3.5 give nu = (6)
            nu[a] = K.noisy_statistic_nu(L[a], eps) if a in L else nu6[a]
    elif mech == "randomized_response":
        if method == "enumeration":
            vals = K.randomized_response_nu(prior, targets, eps)
            nu = dict(zip(targets, map(float, vals)))
        elif affiliated:  # beyond enumeration: RR is maximally biased, so nu = (6)
            nu = dict(nu6)
        else:  # bipartite antiferromagnet: (6) of the gauge-transformed (affiliated) prior
            nu = _gauged_formula6(p, prior, base, targets, eps)
    elif mech == "worst_case":
        if method == "LP":
            for a in targets:
                nu[a] = K.worst_case_lp(prior, a, eps, table)
        elif affiliated:
            nu = dict(nu6)
        else:
            nu = _gauged_formula6(p, prior, base, targets, eps)
    elif mech == "M1":
        T = K.joint_target_sum_enumeration(prior, targets, statistic=prior.odd_count,
                                           n_values=prior.r + 2)
        nu = {a: K.noisy_statistic_nu(T[i], eps) for i, a in enumerate(targets)}
    elif mech == "M2":
        nu = {a: abs(K.formula6_terms(K.restricted_log_partitions(L[a], eps))[0]) for a in targets}

    rows = []
    for a in targets:
        rows.append({
            "node": int(a), "n_nodes": int(n), "J_effective": float(J),
            "nu": float(nu[a]), "nu_over_eps": float(nu[a]) / eps,
            "nu_affiliated": float(nu6[a]),
            "nu_influence_bound": float(summary.bound[a]),
            "gamma_spectral_norm": summary.spectral_norm,
            "gamma_spectral_radius": summary.spectral_radius,
            "gamma_max_row_sum": summary.max_row_sum,
            "affiliated": bool(affiliated), "method": method,
        })
    return rows


def _gauged_formula6(p, prior, base, targets, eps) -> dict:
    """Worst case (= randomized response) for J < 0 on a bipartite graph: formula (6) of the
    gauge-transformed prior, which is affiliated (Theorem 3.4)."""
    gauged, tau = K.bipartite_gauge(prior)
    if base == "tree":
        logz = K.tree_logz_all(gauged, eps, root=0)
        return {a: K.formula6({k: v[a] for k, v in logz.items()}) for a in targets}
    out = {}
    for a in targets:
        if p["graph"] == "cycle":
            L = K.cycle_joint_target_sum(abs(coupling(p)), gauged.fields, a)
        else:
            L = K.grid_joint_target_sum(p["rows"], p["cols"], abs(coupling(p)), gauged.fields, a)
        out[a] = K.formula6(K.restricted_log_partitions(L, eps))
    return out


def _is_target(v) -> bool:
    """'all' or a node index written one way only: '01' and '1' were two task ids of one
    node (and '²' passed isdigit, then failed int())."""
    return v == "all" or (isinstance(v, str) and v.isascii() and v.isdigit()
                          and (v == "0" or not v.startswith("0")))


INFERENTIAL = register(Experiment(
    name="inferential", version=1, stochastic=True,
    doc="Exact inferential privacy nu of a DP mechanism under an Ising / parity / clones prior "
        "on a graph, with formula (6), Theorem 4.2's bound and the influence matrix (seed 000).",
    params=[
        Param("graph", str, "path", Choice(*GRAPHS), "graph family (ignored for prior = parity)"),
        Param("n", int, 8, Interval(1, None), "number of nodes (path, cycle, star, complete, "
              "erdos_renyi, random_regular, random_tree)"),
        Param("rows", int, 3, Interval(1, None), "grid rows (row-major numbering)"),
        Param("cols", int, 4, Interval(1, None), "grid columns"),
        Param("branching", int, 2, Interval(1, None), "tree: children per internal node"),
        Param("depth", int, 3, Interval(0, None), "tree: depth (root at 0)"),
        Param("degree", int, 3, Interval(1, None), "bethe / random_regular: degree Delta"),
        Param("radius", int, 3, Interval(0, None), "bethe: radius of the ball (root at 0)"),
        Param("p", float, 0.3, Interval(0.0, 1.0), "erdos_renyi: edge probability"),
        Param("graph_seed", int, None, Interval(0, None),
              "random graphs: when set, the graph comes from this seed instead of the task seed "
              "(one fixed graph across a sweep)"),
        Param("prior", str, "ising", Choice(*PRIORS), "prior over the bits"),
        Param("J", float, 0.5, Interval(None, None), "Ising coupling (J >= 0: affiliated)"),
        Param("h", float, 0.0, Interval(None, None), "Ising field on every spin s = 1 - 2x"),
        Param("copy_p", float, None, Interval(0.0, 1.0, lo_closed=False, hi_closed=False),
              "family-tree copy probability; when set, J = atanh(2 copy_p - 1) replaces J"),
        Param("r", int, 2, Interval(1, None), "parity prior: number of groups"),
        Param("s", int, 2, Interval(1, None), "parity prior: group size"),
        Param("eps", float, 1.0, Interval(0.0, None, lo_closed=False), "differential privacy eps"),
        Param("mechanism", str, "noisy_sum", Choice(*MECHANISMS),
              "noisy_sum, randomized_response, worst_case (max over all eps-DP mechanisms), "
              "M1 / M2 (parity prior only)"),
        Param("target", str, "0", Check(_is_target, "'all' or a node index (0, 1, ...)"),
              "target node a, or 'all' for one row per node"),
    ],
    columns={
        "node": pa.int64(), "n_nodes": pa.int64(), "J_effective": pa.float64(),
        "nu": pa.float64(), "nu_over_eps": pa.float64(), "nu_affiliated": pa.float64(),
        "nu_influence_bound": pa.float64(), "gamma_spectral_norm": pa.float64(),
        "gamma_spectral_radius": pa.float64(), "gamma_max_row_sum": pa.float64(),
        "affiliated": pa.bool_(), "method": pa.string(),
    },
    checks=[PointCheck(("graph", "n", "rows", "cols", "branching", "depth", "degree", "radius",
                        "prior", "J", "h", "copy_p", "r", "s", "mechanism", "target", "eps"), _size_check)],
    run=run_inferential,
))


# --------------------------------------------------------------------------- Bethe limit
def run_bethe_limit(p: dict, seed: int):
    degree, J, eps = p["degree"], p["J"], p["eps"]
    d = degree - 1
    nu = K.bethe_limit_nu(degree, J, eps)
    critical = math.atanh(1.0 / d) if d > 1 else math.inf
    t = math.tanh(J) * d
    slope = degree / d / (1 - t) - 1 / d if t < 1 else None  # d nu / d eps at eps = 0+
    return {
        "nu": nu, "nu_over_eps": nu / eps,
        "log_x": K.bethe_fixed_point_log(J, eps / 2, d),
        "J_critical": critical, "supercritical": bool(t > 1),
        "nu_eps_to_zero": degree / d * K.bethe_fixed_point_plus(J, d),
        "slope_at_zero": slope,
    }


BETHE_LIMIT = register(Experiment(
    name="inferential_bethe_limit", version=1,
    doc="Corollary A.6 (formula 24): worst-case nu over Ising trees of maximum degree Delta "
        "(the Bethe-lattice root), zero field.",
    params=[
        Param("degree", int, 3, Interval(2, None), "maximum degree Delta (coordination number)"),
        Param("J", float, 0.3, Interval(0.0, None), "Ising coupling J >= 0"),
        Param("eps", float, 0.1, Interval(0.0, None, lo_closed=False), "differential privacy eps"),
    ],
    columns={"nu": pa.float64(), "nu_over_eps": pa.float64(), "log_x": pa.float64(),
             "J_critical": pa.float64(), "supercritical": pa.bool_(),
             "nu_eps_to_zero": pa.float64(), "slope_at_zero": pa.float64()},
    run=run_bethe_limit,
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/inferential.md; privacy losses in nats.
from pipeline.experiments.base import document  # noqa: E402

# Parameters: "" keeps the Param.doc as the description; the entry gives the unit.
document(INFERENTIAL, {
    "graph": ("", None), "n": ("", "1"), "rows": ("", "1"), "cols": ("", "1"),
    "branching": ("", "1"), "depth": ("", "1"), "degree": ("", "1"), "radius": ("", "1"),
    "p": ("", "1"), "graph_seed": ("", None), "prior": ("", None), "J": ("", "1"),
    "h": ("", "1"), "copy_p": ("", "1"), "r": ("", "1"), "s": ("", "1"), "eps": ("", "nat"),
    "mechanism": ("", None), "target": ("", None),
    "node": ("the target node a", "1"),
    "n_nodes": ("number of individuals n", "1"),
    "J_effective": ("the coupling used: J, or atanh(2 copy_p - 1)", "1"),
    "nu": ("exact inferential privacy loss nu_a of the mechanism", "nat"),
    "nu_over_eps": ("nu_a / eps", "1"),
    "nu_affiliated": ("formula (6), the Theorem 3.4 value: the worst case for an affiliated "
                      "prior, and the nu of a maximally biased mechanism", "nat"),
    "nu_influence_bound": ("Theorem 4.2: 2 (Phi eps)_a with Phi = (I - Gamma)^-1; inf when the "
                           "spectral radius of Gamma is >= 1", "nat"),
    "gamma_spectral_norm": ("spectral norm of the influence matrix Gamma (Definition 4.1)", "1"),
    "gamma_spectral_radius": ("spectral radius of Gamma", "1"),
    "gamma_max_row_sum": ("largest row sum of Gamma", "1"),
    "affiliated": ("positive affiliation of the prior (Definition 3.1), checked", None),
    "method": ("enumeration, transfer, tree or LP", None),
})
document(BETHE_LIMIT, {
    "degree": ("", "1"), "J": ("", "1"), "eps": ("", "nat"),
    "nu": ("inferential privacy loss on the Bethe lattice, formula (24)", "nat"),
    "nu_over_eps": ("nu / eps", "1"),
    "log_x": ("ln x(J, eps/2)", "nat"),
    "J_critical": ("atanh(1/(Delta - 1)), where tanh J = 1/d (inf for Delta = 2)", "1"),
    "supercritical": ("d tanh J > 1", None),
    "nu_eps_to_zero": ("lim_{eps -> 0+} nu = Delta/(Delta - 1) ln x_+; > 0 exactly above the "
                       "transition (Theorem A.2(a))", "nat"),
    "slope_at_zero": ("d nu / d eps at 0 (null above the transition)", "1"),
})
