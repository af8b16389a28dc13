"""Experiment ``low_influence``: influence, DP, VDP and independence of finite mechanisms on
graphs of datasets (seed 003, D'Oliveira et al.).

Two modes:

- ``mode=mechanism``: build one mechanism on the dataset graph and measure it: the influence
  max_{d~d'} Pr[M(d) != M(d')], eps at delta = 0, the hockey-stick delta and the VDP delta at
  ``eps_eval``, nontriviality (Definition 7) and independence (Proposition 1, checked on the
  joint distribution). Marginal families (randomized response, truncated geometric, random
  Dirichlet rows) are coupled independently, through one shared uniform, or by the
  LP-optimal (minimum-influence) coupling; ``theorem3`` is the joint construction of
  Theorem 3.
- ``mode=optimise``: the optima of Examples 5 and 6 on K2 at (eps, delta): utility by LP,
  influence of the independent optimum by the closed form (checked by a dense search and
  an LP), influence of the joint optimum by a two-stage LP (checked by the closed form).
"""

from __future__ import annotations


import numpy as np
import pyarrow as pa

from pipeline.experiments.base import Choice, Experiment, Interval, Param, PointCheck, register
from pipeline.experiments._graphs import GRAPH_PARAMS, graph_check
from pipeline.kernels import finite_mechanisms as fm

MECHANISMS = ("rr_binary", "rr_kary", "truncated_geometric", "dirichlet", "theorem3")
COUPLINGS = ("independent", "shared_uniform", "lp_optimal")

MAX_DATASETS = 4096          # measures of marginal mechanisms: O(|D|^2) BFS, O(|E| |V|) work
MAX_PRODUCT_SUPPORT = 1 << 16  # independence check by Proposition 1 materialises V^D
MAX_LP_FUNCTIONS = 1 << 14   # LP-optimal coupling: one variable per function D -> V


def _size_check(p: dict) -> str | None:
    nd = fm.dataset_count(p["graph"], p["n"], p["u"], p["v"])
    if nd > MAX_DATASETS:
        return f"|D| = {nd} datasets; allowed |D| <= {MAX_DATASETS} (n, or v**u for hamming, 2**u for hypercube)"
    return None


def _values(p: dict) -> int:
    return 2 if p["mechanism"] in ("rr_binary", "theorem3") else p["k"]


def _coupling_check(p: dict) -> str | None:
    if p["mode"] != "mechanism":
        return None
    nd = fm.dataset_count(p["graph"], p["n"], p["u"], p["v"])
    k = _values(p)
    if p["coupling"] == "lp_optimal" and p["mechanism"] != "theorem3":
        if k ** nd > MAX_LP_FUNCTIONS:
            return (f"coupling=lp_optimal has one LP variable per function D -> V: |V|^|D| = "
                    f"{k}^{nd} > {MAX_LP_FUNCTIONS}; allowed: |V|^|D| <= {MAX_LP_FUNCTIONS} "
                    f"(e.g. k=2 with |D| <= 14, k=3 with |D| <= 8)")
    return None


MAX_OPTIMISE_EPS = 15.0  # the optimise LPs have DP rows m_d - e^eps m_d'; see _optimise_check


def _optimise_check(p: dict) -> str | None:
    if p["mode"] == "optimise" and p["graph"] != "K2":
        return "mode=optimise reproduces Examples 5 and 6 of seed 003: allowed graph=K2 only"
    if p["mode"] == "optimise" and p["eps"] > MAX_OPTIMISE_EPS:
        # HiGHS's 1e-7 feasibility tolerance swallows the e^-eps-sized probabilities: from
        # eps = 16.5 the LPs return utility ~ 0 or 'unbounded', from 34.6 a model error
        return (f"mode=optimise solves LPs with coefficients e^eps, exact only up to eps = "
                f"{MAX_OPTIMISE_EPS:g}: allowed eps in [0, {MAX_OPTIMISE_EPS:g}] for mode=optimise "
                f"(got eps = {p['eps']}; mode=mechanism allows eps <= 50)")
    return None


PARAMS = [
    Param("mode", str, "mechanism", Choice("mechanism", "optimise"),
          "mechanism: measure one mechanism; optimise: Examples 5/6 optima on K2"),
    *GRAPH_PARAMS,
    Param("mechanism", str, "rr_binary", Choice(*MECHANISMS), "mechanism family (mode=mechanism)"),
    Param("coupling", str, "independent", Choice(*COUPLINGS),
          "joint law of a marginal family across datasets (ignored by theorem3)"),
    Param("k", int, 2, Interval(2, 64), "|V| for rr_kary, truncated_geometric, dirichlet"),
    Param("eps", float, 1.0, Interval(0.0, 50.0),
          "privacy parameter of rr_*/truncated_geometric; DP level in mode=optimise"),
    Param("delta", float, 0.0, Interval(0.0, 1.0), "DP delta (mode=optimise)"),
    Param("alpha", float, 0.1, Interval(0.0, 1.0, lo_closed=False, hi_closed=False),
          "alpha of the Theorem 3 construction"),
    Param("eps_eval", float, 0.0, Interval(0.0, 50.0),
          "eps at which delta_at_eps and vdp_delta are evaluated"),
    Param("concentration", float, 1.0, Interval(0.0, None, lo_closed=False),
          "Dirichlet concentration of the random rows"),
]

COLUMNS = {
    "n_datasets": pa.int64(),
    "n_values": pa.int64(),
    "n_edges": pa.int64(),
    "support_size": pa.int64(),
    "utility": pa.float64(),
    "influence": pa.float64(),
    "eps_pure": pa.float64(),
    "delta_at_eps": pa.float64(),
    "vdp_delta": pa.float64(),
    "tv_max": pa.float64(),
    "theorem2_delta": pa.float64(),
    "nontrivial": pa.bool_(),
    "independent": pa.bool_(),
    "influence_independent": pa.float64(),
    "influence_joint": pa.float64(),
    "utility_closed_form": pa.float64(),
    "influence_independent_dense": pa.float64(),
    "influence_independent_lp": pa.float64(),
    "influence_joint_closed_form": pa.float64(),
    "utility_independent_lp": pa.float64(),
}


def _marginal_matrix(p: dict, f2: np.ndarray, fk: np.ndarray, nd: int, rng) -> np.ndarray:
    mech = p["mechanism"]
    if mech == "rr_binary":
        return fm.randomized_response(f2, 2, p["eps"])
    if mech == "rr_kary":
        return fm.randomized_response(fk, p["k"], p["eps"])
    if mech == "truncated_geometric":
        return fm.truncated_geometric(fk, p["k"], p["eps"])
    if mech == "dirichlet":
        return fm.dirichlet_rows(nd, p["k"], rng, p["concentration"])
    raise ValueError(mech)


def _run_mechanism(p: dict, rng: np.random.Generator) -> dict:
    graph = fm.dataset_graph(p["graph"], p["n"], p["u"], p["v"], p["degree"], rng)
    nd, edges = graph.n, graph.edges
    dist0 = fm.distance_matrix_row(graph, 0)
    f2 = fm.reference_query(dist0, 2)
    fk = fm.reference_query(dist0, p["k"])
    joint = None
    if p["mechanism"] == "theorem3":
        joint = fm.theorem3_mechanism(nd, (int(edges[0, 0]), int(edges[0, 1])), 2, p["alpha"])
        m = joint.marginals()
        f = f2
    else:
        m = _marginal_matrix(p, f2, fk, nd, rng)
        f = f2 if p["mechanism"] == "rr_binary" else fk
        if p["coupling"] == "shared_uniform":
            joint = fm.shared_uniform_coupling(m)
        elif p["coupling"] == "lp_optimal":
            _, joint = fm.min_influence_coupling(m, edges, MAX_LP_FUNCTIONS)
    k = m.shape[1]
    infl_ind = fm.influence_independent(m, edges)
    if joint is None:  # the independent coupling
        influence = infl_ind
        support = None
        independent = None
        if np.prod((m > 0).sum(axis=1).astype(float)) <= MAX_PRODUCT_SUPPORT:
            prod = fm.product_mechanism(m, MAX_PRODUCT_SUPPORT)
            independent = fm.is_independent(prod)
            influence_check = fm.influence_joint(prod, edges)
            if abs(influence_check - infl_ind) > 1e-9:
                raise RuntimeError("Proposition 5 and Proposition 9 disagree")
            support = int(prod.probs.size)
    else:
        influence = fm.influence_joint(joint, edges)
        support = int((joint.probs > 0).sum())
        independent = fm.is_independent(joint)
    return {
        "n_datasets": nd,
        "n_values": k,
        "n_edges": graph.m,
        "support_size": support,
        "utility": fm.balanced_utility(m, f),
        "influence": influence,
        "eps_pure": fm.eps_pure(m, edges),
        "delta_at_eps": fm.hockey_stick_delta(m, edges, p["eps_eval"]),
        "vdp_delta": fm.vdp_delta(m, edges, p["eps_eval"]),
        "tv_max": fm.hockey_stick_delta(m, edges, 0.0),
        "theorem2_delta": influence * (k - 1),
        "nontrivial": fm.is_nontrivial(m, edges),
        "independent": independent,
        "influence_independent": infl_ind,
        "influence_joint": None if joint is None else influence,
    }


def _run_optimise(p: dict) -> dict:
    eps, delta = p["eps"], p["delta"]
    edges = np.array([[0, 1]])
    f = np.array([0, 1])
    u_joint, iota_joint, joint = fm.optimise_balanced_joint(2, edges, f, 2, eps, delta)
    iota_joint = max(0.0, iota_joint)  # LP round-off can give -0.0 or -1e-17
    u_ind_lp, m_ind = fm.optimise_balanced_independent_utility(2, edges, f, 2, eps, delta)
    u5, infl5 = fm.example5_closed_form(eps, delta)
    u6, infl6 = fm.example6_closed_form(eps, delta)
    _, infl_dense = fm.example5_dense_search(eps, delta)
    m_joint = joint.marginals()
    return {
        "n_datasets": 2,
        "n_values": 2,
        "n_edges": 1,
        "support_size": int((joint.probs > 0).sum()),
        "utility": u_joint,
        "influence": iota_joint,
        "eps_pure": fm.eps_pure(m_joint, edges, zero_tol=fm.ZERO_TOL),
        "delta_at_eps": fm.hockey_stick_delta(m_joint, edges, p["eps_eval"]),
        "vdp_delta": fm.vdp_delta(m_joint, edges, p["eps_eval"]),
        "tv_max": fm.hockey_stick_delta(m_joint, edges, 0.0),
        "theorem2_delta": iota_joint,
        "nontrivial": fm.is_nontrivial(m_joint, edges, tol=1e-9),
        "independent": fm.is_independent(joint),
        "influence_independent": infl5,
        "influence_joint": iota_joint,
        "utility_closed_form": u5,
        "influence_independent_dense": infl_dense,
        "influence_independent_lp": fm.influence_independent(m_ind, edges),
        "influence_joint_closed_form": infl6,
        "utility_independent_lp": u_ind_lp,
    }


def run(params: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    if params["mode"] == "optimise":
        return _run_optimise(params)
    return _run_mechanism(params, rng)


EXPERIMENT = register(Experiment(
    name="low_influence",
    version=1,
    doc=__doc__,
    params=PARAMS,
    columns=COLUMNS,
    run=run,
    stochastic=True,
    checks=(
        PointCheck(("graph", "n", "degree"), graph_check),
        PointCheck(("graph", "n", "u", "v"), _size_check),
        PointCheck(("mode", "graph", "n", "u", "v", "mechanism", "coupling", "k"), _coupling_check),
        PointCheck(("mode", "graph", "eps"), _optimise_check),
    ),
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/low_influence.md.
from pipeline.experiments.base import document  # noqa: E402

document(EXPERIMENT, {
    "mode": ("", None), "graph": ("", None), "n": ("", "1"), "u": ("", "1"), "v": ("", "1"),
    "degree": ("", "1"), "mechanism": ("", None), "coupling": ("", None), "k": ("", "1"),
    "eps": ("", "nat"), "delta": ("", "1"), "alpha": ("", "1"), "eps_eval": ("", "nat"),
    "concentration": ("", "1"),
    "n_datasets": ("|D|, number of datasets", "1"),
    "n_values": ("|V|, number of output values", "1"),
    "n_edges": ("|E|, edges of the dataset graph", "1"),
    "support_size": ("functions with positive probability (null for an independent law with "
                     "|support| > 65536)", "1"),
    "utility": ("min_d Pr[M(d) = f(d)]", "1"),
    "influence": ("max over edges of Pr[M(d) != M(d')] (Definition 2)", "1"),
    "eps_pure": ("exact eps at delta = 0: max over ordered edges and values of ln(p_v / q_v)",
                 "nat"),
    "delta_at_eps": ("hockey-stick delta(eps_eval) = max over ordered edges of "
                     "sum_v (p_v - e^eps q_v)_+ (Definition 1)", "1"),
    "vdp_delta": ("max over ordered edges and v of p_v - e^eps q_v at eps_eval (Definition 5)",
                  "1"),
    "tv_max": ("delta at eps = 0: max total variation over edges", "1"),
    "theorem2_delta": ("iota (|V| - 1), the delta of Theorem 2", "1"),
    "nontrivial": ("Definition 7 (ties as sets)", None),
    "independent": ("Proposition 1 checked on the joint law (null when |V|^|D| > 65536 for an "
                    "independent law)", None),
    "influence_independent": ("influence of the product coupling of the same marginals; "
                              "optimise: Example 5 closed form", "1"),
    "influence_joint": ("influence of the joint law; optimise: two-stage LP", "1"),
    "utility_closed_form": ("optimise: (lambda + delta) / (lambda + 1)", "1"),
    "influence_independent_dense": ("optimise: Example 5 by a dense grid search over x", "1"),
    "influence_independent_lp": ("optimise: influence of the independent-class LP optimum", "1"),
    "influence_joint_closed_form": ("optimise: Example 6, (lambda + 2 delta - 1) / (lambda + 1)",
                                    "1"),
    "utility_independent_lp": ("optimise: utility LP over independent mechanisms", "1"),
})
