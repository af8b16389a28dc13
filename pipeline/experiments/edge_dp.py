"""What edge DP protects on networks: edge-level Pufferfish losses under network priors
(seed 002, Hehir-Niu-Slavkovic; issue 7).

- ``edge_dp``: for a prior on graphs with n nodes, an eps-edge-DP mechanism and a dyad e,
  the dependence constant alpha_dep (Lemma 4.1), the exact Pufferfish loss for the secret
  pair (e present, e absent), the Lemma 4.1 bound eps + alpha_dep, and for ERGMs the
  change-statistic quantities R and 2 zeta of Corollary 4.2.
- ``edge_test``: Example 1 (the hive): exact size and power of the threshold test on the
  noisy density and of the Neyman-Pearson test, as n grows, against e^{eps + alpha}.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import Choice, Experiment, Interval, Param, PointCheck, register
from pipeline.kernels import network_priors as npr
from pipeline.kernels import pufferfish as pf

MAX_CLOSED_FORM_N = 1000
MAX_MCMC_N = 60
MAX_HETEROGENEOUS_ALL_N = 20
MAX_HETEROGENEOUS_N = 150
MAX_TEST_N = 2000

PRIORS = ("er", "hive", "ergm", "sbm")
MECHANISMS = ("laplace_edge_count", "randomized_response")


def resolve_method(prior: str, n: int, method: str) -> str:
    """Map the ``solver`` parameter to the method used. ``auto``: closed form for er and hive, enumeration for ergm/sbm with n <= 7, MCMC for
    larger ERGMs. Raises ValueError with the allowed combinations otherwise."""
    if method == "auto":
        if prior in ("er", "hive"):
            method = "closed_form"
        elif n <= npr.MAX_ENUMERATION_N:
            method = "enumeration"
        elif prior == "ergm":
            method = "mcmc"
        else:
            raise ValueError(f"prior=sbm needs n <= {npr.MAX_ENUMERATION_N} (exact enumeration)")
    if method == "enumeration" and n > npr.MAX_ENUMERATION_N:
        raise ValueError(f"solver=enumeration needs n <= {npr.MAX_ENUMERATION_N}")
    if method == "closed_form":
        if prior not in ("er", "hive"):
            raise ValueError("solver=closed_form exists for prior in {er, hive} only")
        if n > MAX_CLOSED_FORM_N:
            raise ValueError(f"solver=closed_form needs n <= {MAX_CLOSED_FORM_N}")
    if method == "mcmc":
        if prior != "ergm":
            raise ValueError("solver=mcmc exists for prior=ergm only")
        if n > MAX_MCMC_N:
            raise ValueError(f"solver=mcmc needs n <= {MAX_MCMC_N}")
    return method


def _check_method(v: dict) -> str | None:
    try:
        method = resolve_method(v["prior"], v["n"], v["solver"])
    except ValueError as exc:
        return f"prior/n/solver: {exc}"
    if method == "mcmc" and v["mechanism"] == "randomized_response":
        return ("mechanism=randomized_response needs the exact law of the whole graph: allowed "
                f"for ergm only with n <= {npr.MAX_ENUMERATION_N} (solver=enumeration)")
    return None


def _check_ab(v: dict) -> str | None:
    if not v["b"] < v["a"]:
        return f"hive needs b < a (Example 1); got a={v['a']}, b={v['b']}"
    return None


def _check_heterogeneous(v: dict) -> str | None:
    if v["prior"] == "er" and v["p_spread"] > 0 and v["n"] > MAX_HETEROGENEOUS_N:
        return (f"prior=er with p_spread > 0 sums a Poisson-binomial law in O(m^2): "
                f"needs n <= {MAX_HETEROGENEOUS_N}")
    if v["prior"] == "er" and v["p_spread"] > 0 and v["edge"] == "all" and v["n"] > MAX_HETEROGENEOUS_ALL_N:
        return (f"prior=er with p_spread > 0 and edge=all gives one row per dyad: "
                f"needs n <= {MAX_HETEROGENEOUS_ALL_N}")
    return None


def _check_sbm(v: dict) -> str | None:
    if v["prior"] == "sbm" and v["blocks"] ** v["n"] > 3 ** 7:
        return f"prior=sbm enumerates all blocks^n labellings: needs blocks^n <= {3 ** 7}"
    return None


def make_prior(params: dict):
    n, prior = params["n"], params["prior"]
    if prior == "er":
        if params["p_spread"] > 0:
            return npr.IndependentEdges.beta_model(n, params["p"], params["p_spread"])
        return npr.IndependentEdges.er(n, params["p"])
    if prior == "hive":
        return npr.Hive(n, params["queen_prior"], params["a"], params["b"])
    if prior == "ergm":
        return npr.ERGM(n, params["beta_edges"], params["beta_triangles"], params["beta_kstar"],
                        params["kstar"])
    if prior == "sbm":
        return npr.SBM(n, params["blocks"], params["p_in"], params["p_out"])
    raise ValueError(prior)


def _selected_dyads(prior, n: int, edge: str):
    """(class name, dyad, number of dyads in the class) rows for ``edge``."""
    classes = prior.dyad_classes()
    if edge == "all":
        return classes
    dyad = (0, 1) if edge == "queen" else (n - 2, n - 1)
    for name, rep, count in classes:
        if rep == dyad:
            return [(name, rep, count)]
    if len(classes) == 1:  # one exchangeable class: any dyad represents it
        return [(classes[0][0], dyad, classes[0][2])]
    return [(f"{dyad[0]}-{dyad[1]}", dyad, 1)]


def run_edge_dp(params: dict, seed: int) -> list[dict]:
    n, eps, mechanism = params["n"], params["eps"], params["mechanism"]
    method = resolve_method(params["prior"], n, params["solver"])
    prior = make_prior(params)
    m = npr.n_dyads(n)
    ergm_cols = {}
    if params["prior"] == "ergm":
        bounds = prior.dependence_bounds()
        ergm_cols = {"ergm_R": bounds["R"], "ergm_2zeta": bounds["two_zeta"],
                     "ergm_c_min": bounds["c_min"], "ergm_c_max": bounds["c_max"],
                     "bound_R": eps + bounds["R"]}
    log_prob = npr.enumerate_log_prob(prior) if method == "enumeration" else None
    mcmc = None
    if method == "mcmc":
        rng = np.random.default_rng(seed)
        mcmc = npr.ergm_mcmc_edge_analysis(prior, eps, rng, params["mcmc_sweeps"],
                                           params["mcmc_burn_in"], params["mcmc_chains"])
    rows = []
    for name, dyad, count in _selected_dyads(prior, n, params["edge"]):
        row = {"edge_class": name, "dyad": f"{dyad[0]}-{dyad[1]}", "n_dyads_in_class": count,
               "m": m, "method": method, **ergm_cols}
        if method == "enumeration":
            res = npr.exact_edge_analysis(log_prob, n, dyad, eps, mechanism)
        elif method == "closed_form":
            res = {"p_edge": prior.p_edge(dyad), "alpha_dep": prior.alpha_dep(dyad)}
            if mechanism == "laplace_edge_count":
                k1, k0 = prior.edge_count_log_pmfs(dyad)
                res["pufferfish_loss"], res["sup_at"] = pf.laplace_count_loss(k1, k0, eps)
            elif isinstance(prior, npr.IndependentEdges):
                res["pufferfish_loss"], res["sup_at"] = pf.rr_loss_independent(eps), ""
            else:
                res["pufferfish_loss"], res["sup_at"] = prior.rr_loss(dyad, eps), ""
        else:
            res = dict(mcmc)
            res["bound_mcmc"] = eps + res["alpha_dep_mcmc"]
        if method != "mcmc":
            res["bound"] = eps + res["alpha_dep"]
            res["lemma_holds"] = bool(res["pufferfish_loss"] <= res["bound"] + 1e-9 * (1 + res["bound"]))
        row.update(res)
        rows.append(row)
    return rows


EDGE_DP = register(Experiment(
    name="edge_dp",
    version=1,
    doc="Edge-level Pufferfish loss of eps-edge-DP mechanisms under network priors, the dependence "
        "constant alpha_dep and the Lemma 4.1 bound eps + alpha_dep (seed 002).",
    stochastic=True,
    params=[
        Param("prior", str, "hive", Choice(*PRIORS), "prior on graphs: er, hive (Example 1), ergm, sbm"),
        Param("n", int, 6, Interval(3, MAX_CLOSED_FORM_N), "number of nodes (m = n(n-1)/2 dyads)"),
        Param("eps", float, 1.0, Interval(0, 50, lo_closed=False), "edge-DP epsilon of the mechanism"),
        Param("mechanism", str, "laplace_edge_count", Choice(*MECHANISMS),
              "laplace_edge_count: |E| + Laplace(1/eps); randomized_response: each dyad flipped "
              "with probability 1/(1+e^eps)"),
        Param("edge", str, "all", Choice("queen", "other", "all"),
              "secret dyad: queen = {0,1}, other = {n-2,n-1}, all = one row per dyad class"),
        Param("solver", str, "auto", Choice("auto", "enumeration", "closed_form", "mcmc"),
              "auto: closed_form (er, hive), enumeration (n <= 7), mcmc (ergm, n > 7)"),
        Param("p", float, 0.3, Interval(0, 1, lo_closed=False, hi_closed=False), "er: edge probability"),
        Param("p_spread", float, 0.0, Interval(0, 5),
              "er: heterogeneity; p_ij = expit(theta_i + theta_j), theta_i = logit(p)/2 + "
              "p_spread * linspace(-1, 1, n)_i (0 = Erdos-Renyi)"),
        Param("queen_prior", float, 0.5, Interval(0, 1, lo_closed=False, hi_closed=False),
              "hive: P(queen edge {0,1} present)"),
        Param("a", float, 0.6, Interval(0, 1, lo_closed=False), "hive: other-dyad probability when the queens cooperate"),
        Param("b", float, 0.2, Interval(0, 1, hi_closed=False), "hive: other-dyad probability otherwise (b < a)"),
        Param("beta_edges", float, -1.0, Interval(-20, 20), "ergm: edge parameter"),
        Param("beta_triangles", float, 0.0, Interval(-5, 5), "ergm: triangle parameter"),
        Param("beta_kstar", float, 0.0, Interval(-5, 5), "ergm: k-star parameter"),
        Param("kstar", int, 2, Interval(2, 6), "ergm: order k of the k-star statistic"),
        Param("blocks", int, 2, Interval(1, 4), "sbm: number of blocks (labels i.i.d. uniform)"),
        Param("p_in", float, 0.7, Interval(0, 1, lo_closed=False, hi_closed=False), "sbm: within-block edge probability"),
        Param("p_out", float, 0.1, Interval(0, 1, lo_closed=False, hi_closed=False), "sbm: between-block edge probability"),
        Param("mcmc_sweeps", int, 2000, Interval(100, 10**6), "mcmc: sweeps per chain after burn-in"),
        Param("mcmc_burn_in", int, 200, Interval(0, 10**6), "mcmc: burn-in sweeps per chain"),
        Param("mcmc_chains", int, 8, Interval(2, 64), "mcmc: independent chains (jackknife SE)"),
    ],
    columns={
        "edge_class": pa.string(),
        "dyad": pa.string(),
        "n_dyads_in_class": pa.int64(),
        "m": pa.int64(),
        "method": pa.string(),
        "p_edge": pa.float64(),
        "alpha_dep": pa.float64(),
        "pufferfish_loss": pa.float64(),
        "bound": pa.float64(),
        "lemma_holds": pa.bool_(),
        "sup_at": pa.string(),
        "ergm_R": pa.float64(),
        "ergm_2zeta": pa.float64(),
        "ergm_c_min": pa.float64(),
        "ergm_c_max": pa.float64(),
        "bound_R": pa.float64(),
        "p_edge_mcmc": pa.float64(),
        "p_edge_se": pa.float64(),
        "alpha_dep_mcmc": pa.float64(),
        "alpha_dep_se": pa.float64(),
        "pufferfish_loss_mcmc": pa.float64(),
        "pufferfish_loss_se": pa.float64(),
        "bound_mcmc": pa.float64(),
    },
    run=run_edge_dp,
    checks=[
        PointCheck(("prior", "n", "solver", "mechanism"), _check_method),
        PointCheck(("a", "b"), _check_ab),
        PointCheck(("prior", "n", "p_spread", "edge"), _check_heterogeneous),
        PointCheck(("prior", "n", "blocks"), _check_sbm),
    ],
))


# --------------------------------------------------------------------------- edge_test


def run_edge_test(params: dict, seed: int) -> dict:
    n, eps, a, b, level = params["n"], params["eps"], params["a"], params["b"], params["level"]
    hive = npr.Hive(n, 0.5, a, b)  # size and power condition on the queen bit: its prior drops out
    m = npr.n_dyads(n)
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    density = (a + b) / 2 if params["threshold_density"] is None else params["threshold_density"]
    log_size, log_power = pf.threshold_test(k0, k1, eps, density * m)
    cutoff, log_size_np, log_power_np, monotone = pf.neyman_pearson_test(k0, k1, eps, level)
    loss, _ = pf.laplace_count_loss(k1, k0, eps)
    alpha = hive.alpha_dep((0, 1))
    return {
        "m": m,
        "threshold_used": density,
        "size_threshold": math.exp(log_size),
        "power_threshold": math.exp(log_power),
        "log_size_threshold": log_size,
        "log_power_threshold": log_power,
        "log_type2_threshold": pf.laplace_count_log_cdf(k1, eps, density * m),
        "ratio_threshold": _exp(log_power - log_size),
        "log_ratio_threshold": log_power - log_size,
        "np_cutoff_density": cutoff / m,
        "size_np": math.exp(log_size_np),
        "power_np": math.exp(log_power_np),
        "log_type2_np": pf.laplace_count_log_cdf(k1, eps, cutoff),
        "ratio_np": _exp(log_power_np - log_size_np),
        "log_ratio_np": log_power_np - log_size_np,
        "lr_monotone": monotone,
        "alpha_dep": alpha,
        "pufferfish_loss": loss,
        "bound": eps + alpha,
        "exp_loss": _exp(loss),
        "exp_bound": _exp(eps + alpha),
    }


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


EDGE_TEST = register(Experiment(
    name="edge_test",
    version=1,
    doc="Example 1 of seed 002: exact size and power of tests of the queens' edge from the "
        "Laplace noisy edge count, against e^{eps + alpha}.",
    params=[
        Param("n", int, 20, Interval(3, MAX_TEST_N), "number of insects (nodes)"),
        Param("eps", float, 1.0, Interval(0, 50, lo_closed=False), "edge-DP epsilon of |E| + Laplace(1/eps)"),
        Param("a", float, 0.6, Interval(0, 1, lo_closed=False), "other-dyad probability when the queens cooperate"),
        Param("b", float, 0.2, Interval(0, 1, hi_closed=False), "other-dyad probability otherwise (b < a)"),
        Param("level", float, 0.05, Interval(0, 1, lo_closed=False, hi_closed=False),
              "size of the Neyman-Pearson test"),
        Param("threshold_density", float, None, Interval(0, 1),
              "reject when the noisy density exceeds this; default (a + b)/2 (Example 1)"),
    ],
    columns={
        "m": pa.int64(),
        "threshold_used": pa.float64(),
        "size_threshold": pa.float64(),
        "power_threshold": pa.float64(),
        "log_size_threshold": pa.float64(),
        "log_power_threshold": pa.float64(),
        "log_type2_threshold": pa.float64(),
        "ratio_threshold": pa.float64(),
        "log_ratio_threshold": pa.float64(),
        "np_cutoff_density": pa.float64(),
        "size_np": pa.float64(),
        "power_np": pa.float64(),
        "log_type2_np": pa.float64(),
        "ratio_np": pa.float64(),
        "log_ratio_np": pa.float64(),
        "lr_monotone": pa.bool_(),
        "alpha_dep": pa.float64(),
        "pufferfish_loss": pa.float64(),
        "bound": pa.float64(),
        "exp_loss": pa.float64(),
        "exp_bound": pa.float64(),
    },
    run=run_edge_test,
    checks=[PointCheck(("a", "b"), _check_ab)],
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/edge_dp.md; losses in nats.
from pipeline.experiments.base import document  # noqa: E402

# Parameters: "" keeps the Param.doc; ERGM coefficients are log-odds per statistic (nats).
document(EDGE_DP, {
    "prior": ("", None), "n": ("", "1"), "eps": ("", "nat"), "mechanism": ("", None),
    "edge": ("", None), "solver": ("", None), "p": ("", "1"), "p_spread": ("", "1"),
    "queen_prior": ("", "1"), "a": ("", "1"), "b": ("", "1"), "beta_edges": ("", "nat"),
    "beta_triangles": ("", "nat"), "beta_kstar": ("", "nat"), "kstar": ("", "1"),
    "blocks": ("", "1"), "p_in": ("", "1"), "p_out": ("", "1"), "mcmc_sweeps": ("", "1"),
    "mcmc_burn_in": ("", "1"), "mcmc_chains": ("", "1"),
    "edge_class": ("class of the secret dyad", None),
    "dyad": ("representative dyad i-j", None),
    "n_dyads_in_class": ("dyads in the class", "1"),
    "m": ("number of dyads C(n, 2)", "1"),
    "method": ("enumeration, closed_form or mcmc", None),
    "p_edge": ("P(e = 1) (exact rows)", "1"),
    "alpha_dep": ("dependence constant (exact rows; inf if supports differ)", "nat"),
    "pufferfish_loss": ("exact edge Pufferfish loss (exact rows)", "nat"),
    "bound": ("eps + alpha_dep (Lemma 4.1)", "nat"),
    "lemma_holds": ("pufferfish_loss <= bound (up to 1e-9 relative)", None),
    "sup_at": ("Laplace: where the sup is reached, o=+inf, o=-inf or o=<integer>", None),
    "ergm_R": ("ERGM: R = c_max - c_min, the range of the change statistic beta . Delta(g, e) "
               "over all configurations (exact, any n)", "nat"),
    "ergm_2zeta": ("ERGM: 2 zeta = 2 max |beta . Delta| (Corollary 4.2)", "nat"),
    "ergm_c_min": ("ERGM: smallest change statistic", "nat"),
    "ergm_c_max": ("ERGM: largest change statistic", "nat"),
    "bound_R": ("ERGM: eps + ergm_R, an exact upper bound on bound at any n", "nat"),
    "p_edge_mcmc": ("MCMC estimate of P(e = 1)", "1"),
    "p_edge_se": ("standard error of p_edge_mcmc", "1"),
    "alpha_dep_mcmc": ("MCMC estimate of alpha_dep", "nat"),
    "alpha_dep_se": ("standard error of alpha_dep_mcmc", "nat"),
    "pufferfish_loss_mcmc": ("MCMC estimate of the Laplace loss", "nat"),
    "pufferfish_loss_se": ("standard error of pufferfish_loss_mcmc", "nat"),
    "bound_mcmc": ("eps + alpha_dep_mcmc", "nat"),
})
document(EDGE_TEST, {
    "n": ("", "1"), "eps": ("", "nat"), "a": ("", "1"), "b": ("", "1"), "level": ("", "1"),
    "threshold_density": ("", "1"),
    "m": ("number of dyads C(n, 2)", "1"),
    "threshold_used": ("density threshold of the threshold test", "1"),
    "size_threshold": ("size (type I error) of the threshold test", "1"),
    "power_threshold": ("power of the threshold test", "1"),
    "log_size_threshold": ("ln size_threshold", "nat"),
    "log_power_threshold": ("ln power_threshold", "nat"),
    "log_type2_threshold": ("ln(1 - power) of the threshold test, summed directly", "nat"),
    "ratio_threshold": ("power / size of the threshold test", "1"),
    "log_ratio_threshold": ("ln ratio_threshold", "nat"),
    "np_cutoff_density": ("the Neyman-Pearson test rejects when the noisy density exceeds it",
                          "1"),
    "size_np": ("size of the Neyman-Pearson test (= level)", "1"),
    "power_np": ("power of the Neyman-Pearson test", "1"),
    "log_type2_np": ("ln(1 - power) of the Neyman-Pearson test", "nat"),
    "ratio_np": ("power / size of the Neyman-Pearson test", "1"),
    "log_ratio_np": ("ln ratio_np", "nat"),
    "lr_monotone": ("the likelihood ratio f(o|H1)/f(o|H0) is non-decreasing in o (checked "
                    "exactly): the threshold test at that cutoff is the NP test", None),
    "alpha_dep": ("dependence constant of the queen dyad", "nat"),
    "pufferfish_loss": ("Pufferfish loss of the queen dyad", "nat"),
    "bound": ("eps + alpha_dep for the queen dyad", "nat"),
    "exp_loss": ("e^pufferfish_loss (inf beyond e^709)", "1"),
    "exp_bound": ("e^(eps + alpha_dep) (inf beyond e^709)", "1"),
})
