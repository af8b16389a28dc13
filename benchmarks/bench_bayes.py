"""Benchmarks for the Bayesian-inference privacy family (issue 9).

Run: .venv/bin/python benchmarks/bench_bayes.py [--quick]

Each benchmark times our method and a baseline measured in the same run, and prints the ratio:

1. Fourier coefficients on the downward closure N_I straight from the rows (our kernel) against
   a fast Walsh-Hadamard transform of the full 2^|I| contingency table (the textbook route).
2. Truncated Beta sampling by CDF inversion (our kernel) against rejection sampling from the
   untruncated Beta, on trimmed balanced posteriors (for skewed posteriors, e.g. Beta(51, 1) on
   [0.49, 0.51], rejection needs ~1e15 draws and does not finish at all).
3. Truncated Gaussian sampling: elliptical slice sampling against rejection when the posterior
   sits mostly outside the weight ball (b = 130, acceptance ~1e-4).
4. One default ``bayes_network`` task per mechanism, against the non-private task.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.experiments.base import get_experiment
from pipeline.kernels import bayes_networks as BN


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def fwht_coefficients(X: np.ndarray, gammas: list[int]) -> np.ndarray:
    """Baseline: full contingency table, in-place fast Walsh-Hadamard transform, then pick."""
    k = X.shape[1]
    h = np.bincount(BN.row_codes(X), minlength=2 ** k).astype(float)
    step = 1
    while step < len(h):
        h = h.reshape(-1, 2, step)
        a, b = h[:, 0, :].copy(), h[:, 1, :].copy()
        h[:, 0, :], h[:, 1, :] = a + b, a - b
        h = h.reshape(-1)
        step *= 2
    return h[np.asarray(gammas)]


def rejection_truncated_beta(a, b, lo, hi, rng, size):
    out = np.empty((size, len(a)))
    for j in range(len(a)):
        got, need = [], size
        while need > 0:
            x = rng.beta(a[j], b[j], size=max(4 * need, 64))
            x = x[(x >= lo) & (x <= hi)]
            got.append(x[:need])
            need -= len(x[:need])
        out[:, j] = np.concatenate(got)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    args = ap.parse_args()
    rep = 3 if args.quick else 5
    rng = np.random.default_rng(0)

    # 1. Fourier coefficients
    d = 12 if args.quick else 16
    net = BN.naive_bayes(d)
    X = BN.sample_data(net, BN.sample_cpts(net, rng), 50, rng)
    gam = BN.downward_closure(net)
    assert np.array_equal(BN.fourier_coefficients(X, gam), fwht_coefficients(X, gam))
    t_ours = best_of(lambda: BN.fourier_coefficients(X, gam), rep)
    t_base = best_of(lambda: fwht_coefficients(X, gam), rep)
    print(f"[fourier] naive Bayes d={d} (|I|={d + 1}, |N_I|={len(gam)}), n=50 rows: "
          f"rows->N_I {t_ours * 1e3:.3f} ms, full-table FWHT {t_base * 1e3:.3f} ms, "
          f"speed-up x{t_base / t_ours:.1f}")

    # 2. truncated Beta sampling on the sampler's trimmed posterior
    size = 200 if args.quick else 2000
    for eps in (1.0, 10.0):
        w = BN.sampler_trim(eps, 17, 1)
        # balanced posteriors (25 rows, p = 1/2): rejection stays feasible at small eps
        a = 1 + rng.binomial(25, 0.5, 33).astype(float)
        b = 1 + 25 - (a - 1)
        t_ours = best_of(lambda: BN.truncated_beta_sample(a, b, w, 1 - w, rng, size=size), rep)
        t_base = best_of(lambda: rejection_truncated_beta(a, b, w, 1 - w, rng, size), 1)
        print(f"[trunc-beta] eps={eps:g} (w={w:.4f}), 33 parameters x {size} draws: "
              f"inversion {t_ours * 1e3:.2f} ms, rejection {t_base * 1e3:.2f} ms, "
              f"speed-up x{t_base / t_ours:.1f}")

    # 3. truncated Gaussian: slice sampler vs rejection where acceptance is low
    Xr, yr, _ = BN.synthetic_regression_data(5000, 14, 0.1, rng)
    mu, cov = BN.regression_posterior(Xr[:500], yr[:500], 130.0, 0.1)
    R = 10 / np.sqrt(130.0)
    n_s = 20 if args.quick else 100
    _, acc = BN.truncated_gaussian_ball_sample(mu, cov, R, 1, rng, rejection_budget=400_000)
    t_ess = best_of(lambda: BN.truncated_gaussian_ball_sample(mu, cov, R, n_s, rng,
                                                              rejection_budget=1), rep)

    def rejection_only():
        got, chol = 0, np.linalg.cholesky(cov)
        while got < n_s:
            W = mu + rng.normal(size=(100000, 14)) @ chol.T
            got += int(np.sum(np.linalg.norm(W, axis=1) <= R))

    t_rej = best_of(rejection_only, 1)
    print(f"[trunc-gauss] b=130 (acceptance {acc:.1e}), {n_s} samples: slice {t_ess * 1e3:.1f} ms,"
          f" rejection {t_rej * 1e3:.1f} ms, speed-up x{t_rej / t_ess:.1f}")

    # 4. experiment task time per mechanism
    exp = get_experiment("bayes_network")
    reps = 20 if args.quick else 100
    base = best_of(lambda: exp.run(exp.resolve(mechanism="non_private", repeats=reps), 1), 1)
    for mech in ("laplace", "fourier", "sampling", "map_exp"):
        t = best_of(lambda: exp.run(exp.resolve(mechanism=mech, repeats=reps), 1), 1)
        print(f"[task] bayes_network {mech} (repeats={reps}): {t:.3f} s, "
              f"x{t / base:.2f} of non_private ({base:.3f} s)")


if __name__ == "__main__":
    main()
