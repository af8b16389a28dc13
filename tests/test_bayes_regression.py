"""Section 4.4.3 (thesis 004): truncated-Gaussian Bayesian linear regression."""

import math

import numpy as np
import pytest

from pipeline.experiments.base import ParamError, get_experiment
from pipeline.kernels import bayes_networks as BN


def _loglik(w, x, y, sigma):
    return -(y - x @ w) ** 2 / (2 * sigma ** 2)


@pytest.mark.parametrize("R,sigma", [(0.5, 1.0), (2.0, 0.3), (10.0, 0.1)])
def test_regression_lipschitz_is_exact(R, sigma):
    """|f(x, y) - f(x', y')| <= L |(x, y) - (x', y')|_2 on |x| <= 1, |y| <= 1, |w| <= R, and the
    gradient norm reaches L at x = -w/|w|, y = 1."""
    rng = np.random.default_rng(0)
    d = 5
    L = BN.regression_lipschitz(R, sigma)
    for _ in range(200):
        w = rng.normal(size=d)
        w *= R * rng.uniform() ** (1 / d) / np.linalg.norm(w)
        x1, x2 = (v / max(1.0, np.linalg.norm(v)) for v in rng.normal(size=(2, d)))
        y1, y2 = rng.uniform(-1, 1, 2)
        gap = np.linalg.norm(np.concatenate([x1 - x2, [y1 - y2]]))
        assert abs(_loglik(w, x1, y1, sigma) - _loglik(w, x2, y2, sigma)) <= L * gap + 1e-9
    w = np.zeros(d)
    w[0] = R
    x, y, h = -w / R, 1.0, 1e-6
    grad = [(_loglik(w, x + h * e, y, sigma) - _loglik(w, x - h * e, y, sigma)) / (2 * h)
            for e in np.eye(d)]
    grad.append((_loglik(w, x, y + h, sigma) - _loglik(w, x, y - h, sigma)) / (2 * h))
    assert np.linalg.norm(grad) == pytest.approx(L, rel=1e-6)


def test_posterior_matches_bayes_rule():
    """Lemma 4.4.1 before truncation: precision X'X/sigma^2 + b I, mean Sigma X'y/sigma^2."""
    rng = np.random.default_rng(1)
    X, y, _ = BN.synthetic_regression_data(300, 14, 0.1, rng)
    assert np.all(np.linalg.norm(X, axis=1) <= 1 + 1e-12) and np.all(np.abs(y) <= 1)
    b, sigma = 3.0, 0.2
    mu, cov = BN.regression_posterior(X, y, b, sigma)
    prec = X.T @ X / sigma ** 2 + b * np.eye(14)
    assert np.allclose(cov, np.linalg.inv(prec))
    assert np.allclose(mu, np.linalg.solve(prec, X.T @ y / sigma ** 2))


def test_truncated_gaussian_samples_in_ball_and_both_samplers_agree():
    rng = np.random.default_rng(2)
    mu = np.array([0.8, -0.3, 0.1])
    cov = np.diag([0.2, 0.1, 0.3])
    R = 1.0
    rej, acc = BN.truncated_gaussian_ball_sample(mu, cov, R, 4000, rng)
    assert 0 < acc < 1
    ess, acc2 = BN.truncated_gaussian_ball_sample(mu, cov, R, 4000, rng, rejection_budget=1,
                                                  thin=3)
    for s in (rej, ess):
        assert s.shape == (4000, 3)
        assert np.all(np.linalg.norm(s, axis=1) <= R * (1 + 1e-12))
    se = rej.std(axis=0) / math.sqrt(4000)
    assert np.all(np.abs(rej.mean(axis=0) - ess.mean(axis=0)) < 8 * se * 2)
    # posterior far outside the ball: rejection fails, the slice sampler still returns in-ball
    far, acc3 = BN.truncated_gaussian_ball_sample(np.array([5.0, 0, 0]), 0.01 * np.eye(3), 0.5,
                                                  50, rng)
    assert acc3 == 0 and np.all(np.linalg.norm(far, axis=1) <= 0.5 * (1 + 1e-12))


def test_bayes_regression_experiment():
    exp = get_experiment("bayes_regression")
    p = exp.resolve(b=10.0, n_total=600, repeats=3)
    assert p["d"] == 14 and p["train_frac"] == 0.1 and p["norm_scale"] == 10.0
    row = exp.run(p, 3)
    assert set(row) == set(exp.columns)
    assert row["n_train"] == 60 and row["radius"] == pytest.approx(10 / math.sqrt(10))
    assert row["eps"] == pytest.approx(2 * BN.regression_lipschitz(row["radius"], 0.1))
    assert row["mse_private"] > 0 and row["mse_ols"] > 0
    with pytest.raises(ParamError):
        exp.resolve(b=0.0)
    with pytest.raises(ParamError):
        exp.resolve(train_frac=1.0)
    with pytest.raises(ParamError):
        exp.resolve(n_total=10, train_frac=0.01)
