"""Differential privacy of Bayesian inference (thesis 004, chapters 3 and 4; issue 9).

* ``bayes_bounds`` - assumption constants and privacy bounds of the section 3.6 examples.
* ``bayes_network`` - private Bayesian inference on binary Bayesian networks (Figure 4.1).
* ``bayes_regression`` - truncated-Gaussian Bayesian linear regression (Figure 4.2).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import (Choice, Experiment, Interval, Param, PointCheck,
                                       register)
from pipeline.kernels import bayes as K
from pipeline.kernels import bayes_networks as BN

POS = Interval(0, math.inf, lo_closed=False, hi_closed=False)  # finite: Interval(0, None) admits inf
PROB = Interval(0, 1, lo_closed=False, hi_closed=False)


# =========================================================================== bayes_bounds
def run_bayes_bounds(p: dict, seed: int) -> dict:
    fam = p["family"]
    r = K.family_constants(fam, alpha=p["alpha"], n=p["n"], lam=p["lam"], c1=p["c1"],
                           c2=p["c2"], B=p["B"], mu=p["mu"])
    N, rho, conf = p["N"], p["rho"], p["confidence_delta"]
    if fam == "normal_precision":
        C_corr = K.normal_precision_corrected_C(p["c1"], p["c2"], p["B"], p["mu"])
    elif fam == "laplace":
        C_corr = K.laplace_corrected_C(p["c1"], p["c2"], p["B"], p["mu"])
    else:
        C_corr = r["C"]
    # bounds use the closed-form (L0, c) (checked by tail_ok) and the recomputed C
    L0, c, Cn = r["L0"], r["c"], r["C_numeric"]
    delta = K.delta_assumption2(Cn, L0, c, N, rho)
    delta_closed = K.delta_assumption2(r["C"], L0, c, N, rho)
    L = r["L"]
    return {
        "L0": L0, "c": c, "C": r["C"], "C_corrected": C_corr,
        "L0_numeric": r["L0_numeric"], "c_numeric": r["c_numeric"], "C_numeric": Cn,
        "C_valid": bool(r["C"] >= Cn * (1 - 1e-6)), "tail_ok": r["tail_ok"],
        "c_above_1": bool(c > 1),
        "L": L,
        "kl_bound": K.kl_bound(Cn, L0, c, rho),
        "kl_bound_closed": K.kl_bound(r["C"], L0, c, rho),
        "eps": K.eps_assumption1(L, N),
        "delta": delta, "delta_closed": delta_closed,
        "distinguish_rho": K.distinguish_threshold(Cn, L0, c, N, conf),
        "distinguish_rho_printed": K.distinguish_threshold_printed(r["C"], L0, c, N, conf),
        "distinguish_rho_lipschitz": (K.distinguish_threshold_lipschitz(L, N, conf)
                                      if math.isfinite(L) else 0.0),
        "vacuous": bool(delta >= 1), "vacuous_closed": bool(delta_closed >= 1),
    }


def _check_bounds(q: dict) -> str | None:
    if q["family"] != "beta_binomial" and not q["c1"] < q["c2"]:
        return f"c1 must be < c2 (got c1={q['c1']}, c2={q['c2']})"
    return None


def _check_n(q: dict) -> str | None:
    if q["family"] == "beta_binomial" and q["n"] > 2000:
        return f"n must be <= 2000 for family beta_binomial (quadrature per data value); got {q['n']}"
    return None


BAYES_BOUNDS = register(Experiment(
    name="bayes_bounds", version=1,
    doc="Assumption constants L0, c, C of the thesis's section 3.6 examples (closed form and "
        "numerical), the KL bound, eps = 2NL, delta of Assumption 2 and the distinguishability "
        "threshold (thesis 004, ch. 3).",
    params=[
        Param("family", str, "beta_binomial",
              Choice("beta_binomial", "exponential", "laplace", "normal_precision"),
              "likelihood/prior pair: Lemma 3.6.3, 3.6.1, 3.6.2 or 3.6.4"),
        Param("alpha", float, 5.0, POS, "Beta(alpha, alpha) prior (beta_binomial; lemma needs > 1)"),
        Param("n", int, 10, Interval(1, None), "binomial trials / data length (beta_binomial)"),
        Param("lam", float, 1.0, POS, "rate of the truncated exponential prior"),
        Param("c1", float, 0.5, POS, "lower truncation of the exponential prior"),
        Param("c2", float, 2.0, POS, "upper truncation of the exponential prior"),
        Param("B", float, 1.0, POS, "data bound |x| <= B (x in [0, B] for exponential)"),
        Param("mu", float, 0.0, Interval(-math.inf, math.inf, lo_closed=False, hi_closed=False),
              "known location (laplace, normal_precision)"),
        Param("N", int, 1, Interval(1, 10 ** 9), "number of posterior samples released"),
        Param("rho", float, 1.0, POS, "dataset distance rho(x, y) the bounds are evaluated at"),
        Param("confidence_delta", float, 0.05, PROB,
              "failure probability in the distinguishability threshold (Theorem 3.5.6)"),
    ],
    columns={
        "L0": pa.float64(), "c": pa.float64(), "C": pa.float64(), "C_corrected": pa.float64(),
        "L0_numeric": pa.float64(), "c_numeric": pa.float64(), "C_numeric": pa.float64(),
        "C_valid": pa.bool_(), "tail_ok": pa.bool_(), "c_above_1": pa.bool_(),
        "L": pa.float64(), "kl_bound": pa.float64(), "kl_bound_closed": pa.float64(),
        "eps": pa.float64(), "delta": pa.float64(), "delta_closed": pa.float64(),
        "distinguish_rho": pa.float64(), "distinguish_rho_printed": pa.float64(),
        "distinguish_rho_lipschitz": pa.float64(),
        "vacuous": pa.bool_(), "vacuous_closed": pa.bool_(),
    },
    run=run_bayes_bounds,
    checks=[PointCheck(("family", "c1", "c2"), _check_bounds),
            PointCheck(("family", "n"), _check_n)],
))


# =========================================================================== bayes_network
def build_network(structure: str, d: int, max_indeg: int, rng: np.random.Generator
                  ) -> tuple[BN.BinaryNetwork, int]:
    """(network, target node): naive Bayes predicts the class (node 0), the others their last
    node."""
    if structure == "naive_bayes":
        return BN.naive_bayes(d), 0
    if structure == "chain":
        return BN.chain(d), d - 1
    return BN.random_dag(d, max_indeg, rng), d - 1


def run_bayes_network(p: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    data_rng = np.random.default_rng([p["data_seed"], 9])  # same synthetic data for all tasks
    net, target = build_network(p["structure"], p["d"], p["max_indeg"], data_rng)
    theta_true = BN.sample_cpts(net, data_rng)
    data = BN.sample_data(net, theta_true, p["n_total"], data_rng)
    k, m, n = net.n_nodes, net.m, p["n_train"]
    a0, b0 = np.full(m, p["prior_alpha"]), np.full(m, p["prior_beta"])
    mech, eps = p["mechanism"], p["eps"]

    out = {"n_nodes": k, "m": m, "n_test": p["n_total"] - n, "sensitivity": float(2 * k),
           "closure_size": len(BN.downward_closure(net)), "noise_scale": math.nan,
           "trim": math.nan, "temperature": math.nan, "fourier_t": math.nan}
    increment = 0.0
    if mech == "laplace":
        out["noise_scale"] = 2 * k / eps
    elif mech == "fourier":
        out["noise_scale"] = BN.fourier_noise_scale(net, eps)
        increment = BN.fourier_increment(net, eps, p["stealth_prob"], rng)
        out["fourier_t"] = increment * eps / (4 * out["closure_size"] ** 2)
    elif mech == "sampling":
        out["trim"] = BN.sampler_trim(eps, k, p["n_samples"])
    elif mech == "map_exp":
        out["trim"] = p["map_trim"]
        out["temperature"] = eps / (2 * BN.network_lipschitz(k, p["map_trim"]))

    acc, acc_np, kls, sups, tsups, negs = [], [], [], [], [], []
    for _ in range(p["repeats"]):
        perm = rng.permutation(p["n_total"])
        train, test = data[perm[:n]], data[perm[n:]]
        da, db = BN.update_counts(net, train)
        post_a, post_b = a0 + da, b0 + db
        mean_np = post_a / (post_a + post_b)
        kl, sup, neg = math.nan, math.nan, math.nan
        if mech in ("laplace", "fourier"):
            if mech == "laplace":
                z1, z2 = BN.laplace_updates(net, train, eps, rng)
            else:
                z1, z2, neg = BN.fourier_updates(net, train, eps, rng, increment)
            pa_, pb_ = a0 + z1, b0 + z2
            theta = pa_ / (pa_ + pb_)
            kl = float(BN.beta_kl(pa_, pb_, post_a, post_b).sum())
            sup = float(max(np.abs(z1 - da).max(), np.abs(z2 - db).max()))
            theta_est = theta
        elif mech == "sampling":
            w = out["trim"]
            theta = BN.sampling_mechanism(post_a, post_b, w, p["n_samples"], rng)
            kl = float(-BN.truncated_beta_log_mass(post_a, post_b, w, 1 - w).sum())
            theta_est = theta.mean(axis=0)
        elif mech == "map_exp":
            theta, _ = BN.map_exp_mechanism(a0, b0, da, db, k, eps, p["map_trim"], rng)
            theta_est = theta
        else:
            theta, kl, sup = mean_np, 0.0, 0.0
            theta_est = theta
        prob = BN.predict_proba(net, theta, test, target)
        acc.append(np.mean((prob > p["threshold"]) == (test[:, target] == 1)))
        prob_np = BN.predict_proba(net, mean_np, test, target)
        acc_np.append(np.mean((prob_np > p["threshold"]) == (test[:, target] == 1)))
        kls.append(kl)
        sups.append(sup)
        tsups.append(float(np.abs(theta_est - mean_np).max()))
        negs.append(neg)

    def se(v):
        return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan

    negs_a = np.array(negs, dtype=float)
    out.update({
        "accuracy": float(np.mean(acc)), "accuracy_se": se(acc),
        "accuracy_nonprivate": float(np.mean(acc_np)),
        "kl": float(np.mean(kls)), "kl_se": se(kls) if mech != "map_exp" else math.nan,
        "sup_error": float(np.mean(sups)), "theta_sup_error": float(np.mean(tsups)),
        "negative_cells": float(np.mean(negs_a)),
        "stealth_rate": float(np.mean(negs_a == 0)) if mech == "fourier" else math.nan,
    })
    return out


def _check_network(q: dict) -> str | None:
    if q["structure"] == "naive_bayes" and not 1 <= q["d"] <= 40:
        return f"d (features) must be in 1..40 for structure naive_bayes; got {q['d']}"
    if q["structure"] != "naive_bayes" and not 2 <= q["d"] <= 40:
        return f"d (nodes) must be in 2..40 for structure {q['structure']}; got {q['d']}"
    if q["structure"] == "random_dag" and q["max_indeg"] > 10:
        return f"max_indeg must be <= 10 (tables of 2^(max_indeg+1) cells); got {q['max_indeg']}"
    return None


def _check_split(q: dict) -> str | None:
    if not 1 <= q["n_train"] < q["n_total"]:
        return f"need 1 <= n_train < n_total (got n_train={q['n_train']}, n_total={q['n_total']})"
    if q["n_total"] * q["repeats"] > 5 * 10 ** 7:
        return "n_total * repeats must be <= 5e7"
    return None


MAX_DATA_CELLS = 5 * 10 ** 7  # n_total x nodes: about 50 bytes a cell at its peak (2.3 GB
# measured at n_total = 1.2e6, d = 40), so one point stays within a cluster core's memory


def _check_data_size(q: dict) -> str | None:
    nodes = q["d"] + 1  # (naive_bayes: d features and the class; chain, random_dag: d nodes)
    if q["n_total"] * nodes > MAX_DATA_CELLS:
        return (f"n_total * (d + 1) must be <= 5e7 (the data and its test-set evaluation take "
                f"about 50 bytes a cell: 2.5 GB at the limit); got n_total={q['n_total']}, "
                f"d={q['d']}: n_total <= {MAX_DATA_CELLS // nodes} at this d")
    return None


BAYES_NETWORK = register(Experiment(
    name="bayes_network", version=1, stochastic=True,
    doc="Private Bayesian inference on binary Bayesian networks with Beta priors: Laplace on "
        "posterior updates, Laplace in the Fourier domain, posterior sampling (BAPS), MAP by the "
        "exponential mechanism (thesis 004, ch. 4; Figure 4.1).",
    params=[
        Param("structure", str, "naive_bayes", Choice("naive_bayes", "chain", "random_dag"),
              "network: naive Bayes (class + d features), chain of d nodes, random DAG of d nodes"),
        Param("d", int, 16, Interval(1, 40), "features (naive_bayes) or nodes (chain, random_dag)"),
        Param("max_indeg", int, 2, Interval(0, 10), "maximum in-degree (random_dag)"),
        Param("mechanism", str, "laplace",
              Choice("laplace", "fourier", "sampling", "map_exp", "non_private"),
              "Algorithm 4.2.1, 4.2.2, BAPS (3.5.1 on a trimmed posterior), 4.3.1, or none"),
        Param("eps", float, 1.0, POS, "privacy level epsilon (pure DP, replace-one-row)"),
        Param("n_train", int, 50, Interval(1, None), "training examples"),
        Param("n_total", int, 1000, Interval(2, 10 ** 7), "synthetic examples (rest is test)"),
        Param("repeats", int, 100, Interval(1, 100000), "train/test splits x mechanism draws"),
        Param("prior_alpha", float, 1.0, POS, "Beta prior alpha of every CPT entry"),
        Param("prior_beta", float, 1.0, POS, "Beta prior beta of every CPT entry"),
        Param("threshold", float, 0.5, PROB, "classification threshold on P(target = 1 | rest)"),
        Param("n_samples", int, 1, Interval(1, 10 ** 4), "posterior samples N (sampling)"),
        Param("map_trim", float, 0.1, Interval(0, 0.5, lo_closed=False, hi_closed=False),
              "parameter space [w, 1-w] of the exponential mechanism (map_exp)"),
        Param("stealth_prob", float, 0.9, PROB,
              "probability that the Fourier release is non-negative (calibrates t)"),
        Param("data_seed", int, 0, Interval(0, 2 ** 31 - 1),
              "seed of the synthetic network and data (shared by all tasks)"),
    ],
    columns={
        "n_nodes": pa.int64(), "m": pa.int64(), "n_test": pa.int64(),
        "accuracy": pa.float64(), "accuracy_se": pa.float64(),
        "accuracy_nonprivate": pa.float64(),
        "kl": pa.float64(), "kl_se": pa.float64(),
        "sup_error": pa.float64(), "theta_sup_error": pa.float64(),
        "negative_cells": pa.float64(), "stealth_rate": pa.float64(),
        "sensitivity": pa.float64(), "noise_scale": pa.float64(), "closure_size": pa.int64(),
        "fourier_t": pa.float64(), "trim": pa.float64(), "temperature": pa.float64(),
    },
    run=run_bayes_network,
    checks=[PointCheck(("structure", "d", "max_indeg"), _check_network),
            PointCheck(("n_train", "n_total", "repeats"), _check_split),
            PointCheck(("n_total", "d"), _check_data_size)],
))


# =========================================================================== bayes_regression
def run_bayes_regression(p: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    data_rng = np.random.default_rng([p["data_seed"], 11])
    d, b, sigma = p["d"], p["b"], p["sigma"]
    X, y, _ = BN.synthetic_regression_data(p["n_total"], d, p["noise_sd"], data_rng)
    n = max(1, int(round(p["train_frac"] * p["n_total"])))
    radius = p["norm_scale"] / math.sqrt(b)
    L = BN.regression_lipschitz(radius, sigma)
    mse_priv, mse_bayes, mse_ols, accs = [], [], [], []
    for _ in range(p["repeats"]):
        perm = rng.permutation(p["n_total"])
        tr, te = perm[:n], perm[n:]
        mu, cov = BN.regression_posterior(X[tr], y[tr], b, sigma)
        W, acc = BN.truncated_gaussian_ball_sample(mu, cov, radius, p["n_samples"], rng)
        w_priv = W.mean(axis=0)
        w_ols = np.linalg.lstsq(X[tr], y[tr], rcond=None)[0]
        mse_priv.append(np.mean((X[te] @ w_priv - y[te]) ** 2))
        mse_bayes.append(np.mean((X[te] @ mu - y[te]) ** 2))
        mse_ols.append(np.mean((X[te] @ w_ols - y[te]) ** 2))
        accs.append(acc)

    def se(v):
        return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan

    return {
        "n_train": n, "n_test": p["n_total"] - n, "radius": radius,
        "mse_private": float(np.mean(mse_priv)), "mse_private_se": se(mse_priv),
        "mse_bayes": float(np.mean(mse_bayes)), "mse_bayes_se": se(mse_bayes),
        "mse_ols": float(np.mean(mse_ols)), "mse_ols_se": se(mse_ols),
        "L": L, "L_thesis": BN.regression_lipschitz_thesis(radius, sigma, d),
        "eps": 2 * p["n_samples"] * L,
        "eps_row": 2 * p["n_samples"] * L * 2 * math.sqrt(2),
        "acceptance": float(np.mean(accs)),
    }


def _check_regression(q: dict) -> str | None:
    n = int(round(q["train_frac"] * q["n_total"]))
    if not 1 <= n < q["n_total"]:
        return (f"train_frac * n_total must leave >= 1 training and >= 1 test row "
                f"(train_frac={q['train_frac']}, n_total={q['n_total']})")
    return None


BAYES_REGRESSION = register(Experiment(
    name="bayes_regression", version=1, stochastic=True,
    doc="Bayesian linear regression with a truncated Gaussian prior/posterior, released by "
        "posterior sampling; MSE against the prior precision b (thesis 004, section 4.4.3, "
        "Figure 4.2) on synthetic data with the census data's 14 features.",
    params=[
        Param("b", float, 1.0, POS, "prior precision: w ~ N(0, I/b) truncated to |w| <= norm_scale/sqrt(b)"),
        Param("norm_scale", float, 10.0, POS, "weight-norm bound times sqrt(b) (thesis: 10)"),
        Param("d", int, 14, Interval(1, 200), "features (census data: 14)"),
        Param("n_total", int, 5000, Interval(2, 10 ** 6), "synthetic records"),
        Param("train_frac", float, 0.1, PROB, "training fraction (thesis: 10%)"),
        Param("sigma", float, 0.1, POS, "known noise s.d. assumed by the model"),
        Param("noise_sd", float, 0.1, Interval(0, math.inf, hi_closed=False), "noise s.d. of the synthetic labels"),
        Param("n_samples", int, 1, Interval(1, 10 ** 4), "posterior samples N released"),
        Param("repeats", int, 20, Interval(1, 10000), "train/test splits x sampler draws"),
        Param("data_seed", int, 0, Interval(0, 2 ** 31 - 1),
              "seed of the synthetic data (shared by all tasks)"),
    ],
    columns={
        "n_train": pa.int64(), "n_test": pa.int64(), "radius": pa.float64(),
        "mse_private": pa.float64(), "mse_private_se": pa.float64(),
        "mse_bayes": pa.float64(), "mse_bayes_se": pa.float64(),
        "mse_ols": pa.float64(), "mse_ols_se": pa.float64(),
        "L": pa.float64(), "L_thesis": pa.float64(), "eps": pa.float64(),
        "eps_row": pa.float64(), "acceptance": pa.float64(),
    },
    run=run_bayes_regression,
    checks=[PointCheck(("train_frac", "n_total"), _check_regression),
            PointCheck(("d", "n_total", "repeats"),
                       lambda q: None if q["n_total"] * q["repeats"] <= 5 * 10 ** 7 else
                       "n_total * repeats must be <= 5e7")],
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/bayes.md; privacy losses and KL divergences in nats.
from pipeline.experiments.base import document  # noqa: E402

# Parameters: "" keeps the Param.doc as the description; the entry gives the unit.
document(BAYES_BOUNDS, {
    "family": ("", None), "alpha": ("", "1"), "n": ("", "1"), "lam": ("", "1"),
    "c1": ("", "1"), "c2": ("", "1"), "B": ("", "1"), "mu": ("", "1"), "N": ("", "1"),
    "rho": ("", "1"), "confidence_delta": ("", "1"),
    "L0": ("L0 closed form as printed in the thesis (Lemmas 3.6.1-3.6.4)", "1"),
    "c": ("c closed form as printed (Lemmas 3.6.1-3.6.4)", "1"),
    "C": ("C closed form as printed (Lemmas 3.6.1-3.6.4)", "1"),
    "C_corrected": ("C corrected where the printed closed form is mistyped (normal_precision, "
                    "laplace; else = C)", "1"),
    "L0_numeric": ("inf over theta of the Lipschitz constant ell(theta) (3.2), by brute force over "
                   "data pairs", "1"),
    "c_numeric": ("largest c with 1 - xi(Theta_L) <= exp(-c (L - L0_numeric)) on a grid of L "
                  "(an estimate from above of the best constant)", "1"),
    "C_numeric": ("C (3.11) = sup_x sup_theta p_theta(x) / phi(x), computed numerically", "1"),
    "C_valid": ("C >= C_numeric: the printed constant is a valid upper bound", None),
    "tail_ok": ("Assumption 2 (3.5) holds with the closed-form (L0, c) on the grid", None),
    "c_above_1": ("c > 1, required by Theorem 3.4.1(2)", None),
    "L": ("Assumption 1 constant sup_theta ell(theta) (inf for the untruncated Beta prior)", "1"),
    "kl_bound": ("Theorem 3.4.1(2): C (1 + 2 L0 + 1/c) rho with C = C_numeric", "nat"),
    "kl_bound_closed": ("Theorem 3.4.1(2) with the printed C", "nat"),
    "eps": ("2 N L rho (Corollary 3.5.3(1)); inf when Assumption 1 fails", "nat"),
    "delta": ("N sqrt(C/2 (1 + 2 L0 + 1/c) rho) (Theorem 3.5.1(2), N-fold composition), "
              "C = C_numeric; a guarantee only when c_above_1", "1"),
    "delta_closed": ("delta with the printed C", "1"),
    "distinguish_rho": ("Theorem 3.5.6 (Assumption 2) re-derived: smallest rho at which N "
                        "samples tell x from y at confidence 1 - confidence_delta", "1"),
    "distinguish_rho_printed": ("as printed: 3 ln(1/conf) / (2 N (C + 2 L0 + 1/c))", "1"),
    "distinguish_rho_lipschitz": ("Theorem 3.5.6 (Assumption 1): 3 ln(1/conf) / (4 L N) (0 when "
                                  "L = inf)", "1"),
    "vacuous": ("delta >= 1 (flagged, never hidden)", None),
    "vacuous_closed": ("delta_closed >= 1", None),
})
document(BAYES_NETWORK, {
    "structure": ("", None), "d": ("", "1"), "max_indeg": ("", "1"), "mechanism": ("", None),
    "eps": ("", "nat"), "n_train": ("", "1"), "n_total": ("", "1"), "repeats": ("", "1"),
    "prior_alpha": ("", "1"), "prior_beta": ("", "1"), "threshold": ("", "1"),
    "n_samples": ("", "1"), "map_trim": ("", "1"), "stealth_prob": ("", "1"),
    "data_seed": ("", None),
    "n_nodes": ("|I|, number of nodes of the network", "1"),
    "m": ("sum_i 2^|pi_i|: number of Beta parameters", "1"),
    "n_test": ("test rows", "1"),
    "accuracy": ("predictive accuracy (fraction), mean over repeats", "1"),
    "accuracy_se": ("standard error of accuracy over repeats", "1"),
    "accuracy_nonprivate": ("accuracy of the exact Bayesian predictive on the same splits", "1"),
    "kl": ("KL(private posterior || non-private posterior), summed over CPT entries (NaN for "
           "map_exp, which releases a point)", "nat"),
    "kl_se": ("standard error of kl over repeats", "nat"),
    "sup_error": ("||Z - Delta omega||_inf, the released counts' sup-norm error (Proposition "
                  "4.2.3)", "1"),
    "theta_sup_error": ("max_ij |theta_hat - posterior mean| of the released parameters", "1"),
    "negative_cells": ("mean number of released family-table cells below zero before clipping "
                       "(fourier)", "1"),
    "stealth_rate": ("fraction of repeats with no negative cell (fourier)", "1"),
    "sensitivity": ("L1 sensitivity 2|I| of the update vector (Lemma 4.2.1)", "1"),
    "noise_scale": ("Laplace scale of the released counts or Fourier coefficients", "1"),
    "closure_size": ("|N_I|", "1"),
    "fourier_t": ("the t of Corollary 4.2.11 implied by the calibrated increment", "1"),
    "trim": ("w of the sampler (from eps) or map_trim", "1"),
    "temperature": ("kappa = eps / (2 Delta u) of the exponential mechanism", "1"),
})
document(BAYES_REGRESSION, {
    "b": ("", "1"), "norm_scale": ("", "1"), "d": ("", "1"), "n_total": ("", "1"),
    "train_frac": ("", "1"), "sigma": ("", "1"), "noise_sd": ("", "1"), "n_samples": ("", "1"),
    "repeats": ("", "1"), "data_seed": ("", None),
    "n_train": ("training rows", "1"),
    "n_test": ("test rows", "1"),
    "radius": ("weight-norm bound norm_scale / sqrt(b)", "1"),
    "mse_private": ("test mean squared error of the private posterior sampler", "1"),
    "mse_private_se": ("standard error of mse_private", "1"),
    "mse_bayes": ("test MSE of the non-private posterior mean (untruncated)", "1"),
    "mse_bayes_se": ("standard error of mse_bayes", "1"),
    "mse_ols": ("test MSE of least squares (the thesis's linear regression)", "1"),
    "mse_ols_se": ("standard error of mse_ols", "1"),
    "L": ("exact per-row Lipschitz constant (1 + R) sqrt(1 + R^2) / sigma^2 of the "
          "log-likelihood in (x, y)", "1"),
    "L_thesis": ("the thesis's bound (1 + 2|w|_1 + d|w|_2) / (2 sigma^2) at |w|_2 = R", "1"),
    "eps": ("2 N L: eps-DP per unit of rho(D, D')", "nat"),
    "eps_row": ("2 N L 2 sqrt(2): pure DP for one replaced row", "nat"),
    "acceptance": ("acceptance rate of exact rejection sampling (0: the elliptical slice "
                   "sampler ran)", "1"),
})
