"""Kernel tests for optimal composition (issue 3, seed 001): brute force, mpmath, dp-accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.kernels import composition as kc

try:  # mpmath comes with dp-accounting; the high-precision references need it
    import mpmath as mp
except ImportError:  # pragma: no cover
    mp = None
needs_mpmath = pytest.mark.skipif(mp is None, reason="mpmath not installed")


# --------------------------------------------------------------------------- brute force helpers
def four_point_pair(eps: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Seed 001 eqs. (12)-(13)."""
    a = (1 - delta) * math.exp(eps) / (1 + math.exp(eps))
    b = (1 - delta) / (1 + math.exp(eps))
    return np.array([delta, a, b, 0.0]), np.array([0.0, b, a, delta])


def product_pair(pairs) -> tuple[np.ndarray, np.ndarray]:
    """The k-fold product distributions over 4^k outcomes (explicit enumeration)."""
    p0 = np.ones(1)
    p1 = np.ones(1)
    for a, b in pairs:
        p0 = np.outer(p0, a).ravel()
        p1 = np.outer(p1, b).ravel()
    return p0, p1


def brute_d(p0, p1, eps_tilde: float) -> float:
    """d_eps~(P0, P1) = max_S P0(S) - e^eps~ P1(S) (seed Section 5.1), by its maximiser."""
    return float(np.sum(np.maximum(p0 - math.exp(eps_tilde) * p1, 0.0)))


def brute_eps(p0, p1, delta_target: float, hi: float) -> float:
    """Smallest eps~ >= 0 with d(eps~) <= delta_target, by bisection on the brute-force d."""
    if brute_d(p0, p1, 0.0) <= delta_target:
        return 0.0
    if brute_d(p0, p1, hi) > delta_target:
        return math.inf
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if brute_d(p0, p1, mid) > delta_target:
            lo = mid
        else:
            hi = mid
    return hi


CASES = [(eps, delta, k) for k in range(1, 7) for eps in (0.1, 0.4, 1.3) for delta in (0.0, 0.02, 0.1)]


@pytest.mark.parametrize("eps,delta,k", CASES)
def test_region_lines_match_brute_force(eps, delta, k):
    p0, p1 = product_pair([four_point_pair(eps, delta)] * k)
    eps_i, delta_i = kc.privacy_region_lines(eps, delta, k)
    assert np.allclose(eps_i, [(k - 2 * i) * eps for i in range(k // 2 + 1)])
    brute = [brute_d(p0, p1, e) for e in eps_i]
    np.testing.assert_allclose(delta_i, brute, rtol=1e-12, atol=1e-15)
    # also the seed's closed form (display after Remark 5.1), written literally
    for i in range(k // 2 + 1):
        s = sum(math.comb(k, l) * (math.exp(eps * (k - l)) - math.exp(eps * (k - 2 * i + l)))
                for l in range(i))
        seed = 1 - (1 - delta) ** k + (1 - delta) ** k * s / (1 + math.exp(eps)) ** k
        assert delta_i[i] == pytest.approx(seed, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("eps,delta,k", CASES)
def test_eps_optimal_matches_brute_force(eps, delta, k):
    p0, p1 = product_pair([four_point_pair(eps, delta)] * k)
    for dt in (1e-9, 1e-4, 0.05, 0.3):
        got = kc.eps_optimal(eps, delta, k, dt)
        want = brute_eps(p0, p1, dt, k * eps)
        if math.isinf(want):
            assert math.isinf(got)
            assert dt < 1 - (1 - delta) ** k
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
            if got > 0:  # the answer sits on the boundary d(eps~) = delta_target
                assert kc.delta_optimal(eps, delta, k, got) == pytest.approx(dt, rel=1e-9)
            else:
                assert kc.delta_optimal(eps, delta, k, 0.0) <= dt
        for et in (0.0, 0.5 * eps, eps, 2.5 * eps):
            assert kc.delta_optimal(eps, delta, k, et) == pytest.approx(brute_d(p0, p1, et),
                                                                        rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("eps,delta,k", [(0.4, 0.0, 3), (0.4, 0.1, 4), (1.0, 0.05, 5), (0.2, 0.0, 6)])
def test_region_vertices_match_brute_force(eps, delta, k):
    p0, p1 = product_pair([four_point_pair(eps, delta)] * k)
    # likelihood-ratio classes, most P0-favoured first
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p1 > 0, np.log(p0) - np.log(p1), np.inf)
    ratio = np.where((p0 == 0) & (p1 > 0), -np.inf, ratio)
    keep = (p0 > 0) | (p1 > 0)
    ratio, q0, q1 = ratio[keep], p0[keep], p1[keep]
    classes = sorted(set(np.round(ratio, 9)), reverse=True)
    md, fa = [0.0], [1.0]
    for c in classes:
        sel = np.round(ratio, 9) == c
        md.append(md[-1] + q1[sel].sum())
        fa.append(fa[-1] - q0[sel].sum())
    got_md, got_fa = kc.privacy_region_vertices(eps, delta, k)
    np.testing.assert_allclose(got_md, md, atol=1e-13)
    np.testing.assert_allclose(got_fa, fa, atol=1e-13)
    # symmetric region: the vertex set is closed under swapping P_MD and P_FA
    pts = {(round(a, 10), round(b, 10)) for a, b in zip(got_md, got_fa)}
    assert pts == {(b, a) for a, b in pts}


# --------------------------------------------------------------------------- independent high precision
def mp_eps_optimal(eps, delta, k, dt, dps=60):
    """Independent reference: mpmath, exact binomials, bisection on d (no shared code)."""
    with mp.workdps(dps):
        e = mp.mpf(eps)
        p = mp.e ** e / (1 + mp.e ** e)
        q = 1 - p
        keep = (1 - mp.mpf(delta)) ** k
        target = (mp.mpf(dt) - (1 - keep)) / keep
        terms = [(mp.binomial(k, l) * p ** (k - l) * q ** l, (k - 2 * l) * e) for l in range(k + 1)
                 if k - 2 * l > 0]

        def g(t):
            return mp.fsum(w * (1 - mp.e ** (t - L)) for w, L in terms if L > t)

        lo, hi = mp.mpf(0), k * e
        if g(lo) <= target:
            return 0.0
        for _ in range(120):
            mid = (lo + hi) / 2
            if g(mid) > target:
                lo = mid
            else:
                hi = mid
        return float(hi)


@needs_mpmath
@pytest.mark.parametrize("eps,delta,k,dt", [
    (0.1, 0.0, 50, 1e-6), (1.0, 0.0, 200, 1e-9), (0.01, 0.0, 400, 1e-5),
    (2.0, 1e-3, 7, 0.05), (0.3, 0.0, 1, 1e-3), (0.05, 1e-7, 300, 1e-4), (3.0, 0.0, 120, 1e-12),
])
def test_eps_optimal_matches_mpmath(eps, delta, k, dt):
    assert kc.eps_optimal(eps, delta, k, dt) == pytest.approx(mp_eps_optimal(eps, delta, k, dt), rel=1e-12)


@needs_mpmath
def test_log_binom_pmf_matches_mpmath_at_large_k():
    k = 10**6
    q = 1 / (1 + math.exp(0.01))
    xs = np.array([0, 1, 17, 400_000, 497_000, 497_512, 499_999, 999_999, 10**6], dtype=float)
    got = kc.log_binom_pmf(xs, k, q)
    with mp.workdps(40):
        for x, g in zip(xs, got):
            x = int(x)
            want = (mp.log(mp.binomial(k, x)) + x * mp.log(mp.mpf(q)) + (k - x) * mp.log(1 - mp.mpf(q)))
            assert g == pytest.approx(float(want), rel=1e-13, abs=1e-10)


# --------------------------------------------------------------------------- numerics at large k
@pytest.mark.parametrize("eps,k,dt", [(0.1, 10**5, 1e-6), (1.0, 10**6, 1e-10), (0.001, 10**6, 1e-3),
                                      (5.0, 200_001, 1e-300)])
def test_large_k_round_trip_and_no_overflow(eps, k, dt):
    got = kc.eps_optimal(eps, 0.0, k, dt)
    assert math.isfinite(got) and 0 < got <= k * eps
    # forward direction at the answer gives back delta_target (relative, in log space)
    assert kc.log_delta_optimal(eps, 0.0, k, got) == pytest.approx(math.log(dt), rel=1e-9, abs=1e-9)
    # the windowed, chunked solve equals the plain full sum
    full = kc.eps_for_log_delta(kc.homogeneous_loss(eps, k), math.log(dt))
    assert got == pytest.approx(full, rel=1e-13)
    assert kc._eps_optimal_chunked(eps, k, math.log(dt)) == pytest.approx(full, rel=1e-13)


@pytest.mark.parametrize("eps,k,dt", [(0.3, 5, 1e-3), (0.05, 3000, 1e-8), (2.0, 999, 0.2), (0.01, 20_001, 1e-6)])
def test_chunked_solver_equals_full_sum(eps, k, dt):
    full = kc.eps_for_log_delta(kc.homogeneous_loss(eps, k), math.log(dt))
    assert kc._eps_optimal_chunked(eps, k, math.log(dt), chunk=64) == pytest.approx(full, rel=1e-13, abs=1e-15)


def test_huge_eps_no_overflow():
    # k eps = 2400 > 709: e^{k eps} is never formed. Only the top loss 3 eps matters here:
    # p^3 - e^{x} q^3 = delta'  =>  x = 3 eps + log(1 - delta'/p^3) with p = 1 - e^{-800} ~ 1.
    got = kc.eps_optimal(800.0, 0.0, 3, 1e-6)
    assert got == pytest.approx(2400.0 + math.log1p(-1e-6), rel=1e-15)
    assert kc.eps_kov_bound(800.0, 0.0, 3, 1e-6) == 2400.0
    assert math.isinf(kc.eps_drv(800.0, 0.0, 3, 1e-6))
    assert kc.delta_optimal(800.0, 0.0, 3, 1000.0) == pytest.approx(1.0, rel=1e-12)


def test_delta_floor_boundary():
    eps, delta, k = 0.5, 1e-3, 20
    floor = kc.pure_delta_floor(delta, k)
    assert floor == pytest.approx(1 - (1 - delta) ** k, rel=1e-14)
    assert math.isinf(kc.eps_optimal(eps, delta, k, floor * (1 - 1e-9)))
    assert kc.eps_optimal(eps, delta, k, floor * (1 + 1e-9)) == pytest.approx(k * eps, rel=1e-6)
    assert math.isinf(kc.eps_kov_bound(eps, delta, k, floor * 0.5))


# --------------------------------------------------------------------------- dp-accounting oracle
def pld_eps(eps, delta, k, dt, interval=1e-4):
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    common = pytest.importorskip("dp_accounting.pld.common")
    one = pld_mod.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta),
                                          value_discretization_interval=interval)
    return one.self_compose(k).get_epsilon_for_delta(dt)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("k", [1, 10, 100])
@pytest.mark.parametrize("delta,dt", [(0.0, 1e-6), (0.0, 1e-3), (1e-5, 1e-2)])
def test_eps_optimal_matches_pld(eps, k, delta, dt):
    ours = kc.eps_optimal(eps, delta, k, dt)
    ref = pld_eps(eps, delta, k, dt)
    # eps on the discretisation grid: PLD is exact up to its own search/rounding tolerance
    assert ref == pytest.approx(ours, abs=1e-6 + 1e-8 * k)


# --------------------------------------------------------------------------- property tests
eps_st = st.floats(1e-3, 3.0)
k_st = st.integers(1, 3000)
delta_st = st.sampled_from([0.0, 1e-8, 1e-5])
dt_st = st.floats(1e-12, 0.5)


@settings(max_examples=60, deadline=None)
@given(eps=eps_st, k=k_st, delta=delta_st, dt=dt_st)
def test_optimal_below_kov_below_basic(eps, k, delta, dt):
    opt = kc.eps_optimal(eps, delta, k, dt)
    kov = kc.eps_kov_bound(eps, delta, k, dt)
    if dt >= kc.pure_delta_floor(delta, k):
        assert opt <= kov * (1 + 1e-12) + 1e-12
        assert kov <= k * eps * (1 + 1e-12)
        drv = kc.eps_drv(eps, delta, k, dt)
        assert opt <= drv * (1 + 1e-12) + 1e-12
    else:
        assert math.isinf(opt) and math.isinf(kov)


@settings(max_examples=40, deadline=None)
@given(eps=eps_st, k=st.integers(1, 2000), delta=delta_st, dt=dt_st,
       f=st.floats(1.0, 3.0), dk=st.integers(1, 50), g=st.floats(1.0, 100.0))
def test_eps_optimal_monotone(eps, k, delta, dt, f, dk, g):
    base = kc.eps_optimal(eps, delta, k, dt)
    tol = 1e-12 * (1 + abs(base)) if math.isfinite(base) else 0.0
    assert kc.eps_optimal(eps, delta, k + dk, dt) >= base - tol          # more steps
    assert kc.eps_optimal(eps * f, delta, k, dt) >= base - tol           # larger eps
    assert kc.eps_optimal(eps, delta, k, min(dt * g, 0.99)) <= base + tol  # looser delta_target


# --------------------------------------------------------------------------- heterogeneous
@pytest.mark.parametrize("eps_list,delta", [
    ([0.3], 0.0), ([0.1, 0.7], 0.01), ([0.2, 0.2, 0.9], 0.0), ([0.05, 0.4, 0.4, 1.1, 0.3], 0.0),
    ([0.5, 0.1, 0.25, 0.8, 0.6, 0.15, 0.3], 1e-3), ([0.3, 0.3, 0.3, 0.6, 0.6, 0.9, 1.2, 0.05], 0.0),
])
def test_hetero_exact_matches_brute_force(eps_list, delta):
    p0, p1 = product_pair([four_point_pair(e, delta) for e in eps_list])
    for dt in (1e-8, 1e-3, 0.1):
        got = kc.hetero_eps_exact(eps_list, delta, dt)
        want = brute_eps(p0, p1, dt, sum(eps_list))
        if math.isinf(want):
            assert math.isinf(got)
            continue
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
        up, lo = kc.hetero_eps_approx(eps_list, delta, dt, eta=0.07)
        assert lo <= got <= up
        kov = kc.hetero_kov_bound(eps_list, delta, dt)
        assert got <= kov * (1 + 1e-12)


def test_hetero_equal_values_reduce_to_homogeneous():
    for eps, k, dt in [(0.1, 200, 1e-6), (0.7, 33, 1e-3)]:
        assert kc.hetero_eps_exact([eps] * k, 0.0, dt) == pytest.approx(kc.eps_optimal(eps, 0.0, k, dt), rel=1e-12)
        assert kc.hetero_kov_bound([eps] * k, 0.0, dt) == pytest.approx(kc.eps_kov_bound(eps, 0.0, k, dt), rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(eps_list=st.lists(st.floats(0.01, 1.5), min_size=1, max_size=12),
       eta=st.sampled_from([0.003, 0.02, 0.1]), dt=st.floats(1e-9, 0.2),
       delta=st.sampled_from([0.0, 1e-6]))
def test_hetero_approx_brackets_exact(eps_list, eta, dt, delta):
    exact = kc.hetero_eps_exact(eps_list, delta, dt)
    up, lo = kc.hetero_eps_approx(eps_list, delta, dt, eta)
    if math.isinf(exact):
        assert math.isinf(up) and math.isinf(lo)
        return
    assert lo <= exact <= up            # guaranteed bounds
    assert up - exact <= up - lo        # within the stated (certified) accuracy
    # a-priori accuracy (docs/composition.md): with shift s = sum(eps_i' - eps_i) <= k eta,
    # up <= exact(delta_target e^{-s}) + s
    if delta == 0.0:
        s = float(np.sum(kc._grid_units(eps_list, eta, True) * eta - np.asarray(eps_list)))
        assert s <= len(eps_list) * eta + 1e-12
        assert up <= kc.hetero_eps_exact(eps_list, 0.0, dt * math.exp(-s)) + s + 1e-9


def test_hetero_matches_pld():
    pytest.importorskip("dp_accounting")
    from pipeline.experiments.composition import eps_pld

    eps_list = [0.1] * 20 + [0.5] * 7 + [0.25] * 13
    values, counts = kc.group_eps(eps_list)
    for dt in (1e-6, 1e-2):
        exact = kc.hetero_eps_exact(eps_list, 0.0, dt)
        assert eps_pld(values, counts, 0.0, dt, 1e-4) == pytest.approx(exact, abs=1e-6)


@pytest.mark.parametrize("eps,delta", [(0.1, 0.0), (0.8, 0.05), (2.0, 0.3)])
def test_single_step_matches_remark_a1(eps, delta):
    # (b): total variation = d(0) = delta + (1 - delta) tanh(eps/2) = 1 - 2(1-delta)/(1+e^eps)
    tv = kc.delta_optimal(eps, delta, 1, 0.0)
    assert tv == pytest.approx(1 - 2 * (1 - delta) / (1 + math.exp(eps)), rel=1e-13)
    # (a) is tight at k = 1: the optimal eps~ satisfies (1-delta)/(1+e^eps) = (1-dt)/(1+e^eps~)
    for dt in (delta + 1e-3, delta + 0.5 * (tv - delta)):
        et = kc.eps_optimal(eps, delta, 1, dt)
        assert (1 - delta) / (1 + math.exp(eps)) == pytest.approx((1 - dt) / (1 + math.exp(et)), rel=1e-12)


def test_residual_delta_no_overflow_when_floor_is_near_one():
    # (1 - delta)^k underflows (1/(1-delta)^k would overflow): still a clean inf, no OverflowError
    assert math.isinf(kc.eps_optimal(0.5, 0.0035, 278_892, 2e-33))
    assert math.isinf(kc.eps_kov_bound(0.5, 0.0035, 278_892, 2e-33))
    assert math.isinf(kc.hetero_kov_bound([0.5] * 300_000, 0.0035, 2e-33))


@pytest.mark.parametrize("k,eta,dt,delta", [(60, 0.01, 1e-6, 0.0), (400, 0.02, 1e-10, 1e-13), (250, 0.05, 1e-3, 0.0)])
def test_grouped_lattice_equals_itemwise_dp(k, eta, dt, delta):
    rng = np.random.default_rng(k)
    eps_list = rng.uniform(0.05, 0.6, size=k)
    units = kc._grid_units(eps_list, eta, True)
    dp = kc.residual_delta(dt, delta, k)
    itemwise = kc.hetero_eps_from_dist(kc.hetero_lattice_loss(units, eta), delta, k, dt)
    dist, log_drop = kc.hetero_grouped_lattice(units, eta, math.log(dp))
    assert log_drop < math.log(dp) - 30  # truncation is invisible at this delta'
    assert kc.eps_for_log_delta(dist, math.log(dp)) == pytest.approx(itemwise, rel=1e-12)


def test_grouped_approx_path_brackets_exact(monkeypatch):
    # few distinct values: the exact answer is cheap even at k = 3000, and the bounds bracket it
    eps_list = [0.05] * 1000 + [0.13] * 1500 + [0.4] * 500
    exact = kc.hetero_eps_exact(eps_list, 0.0, 1e-8)
    monkeypatch.setattr(kc, "LATTICE_DP_MAX_WORK", 0)  # force the grouped convolution
    up, lo = kc.hetero_eps_approx(eps_list, 0.0, 1e-8, eta=0.02)
    assert lo <= exact <= up
    up_fine, lo_fine = kc.hetero_eps_approx(eps_list, 0.0, 1e-8, eta=0.01)  # values on the grid
    assert up_fine == pytest.approx(exact, rel=1e-10) and lo_fine == pytest.approx(exact, rel=1e-10)


def test_truncated_exact_sum_equals_full_sum():
    values, counts = np.array([0.1, 0.45]), np.array([900, 300])
    for dt in (1e-12, 1e-4):
        full = kc.eps_for_log_delta(kc.hetero_loss(values, counts), math.log(dt))
        trunc = kc.eps_for_log_delta(kc.hetero_loss(values, counts, math.log(dt)), math.log(dt))
        assert trunc == pytest.approx(full, rel=1e-13)
    assert kc.hetero_exact_size(values, counts, math.log(1e-4)) < 901 * 301


@pytest.mark.parametrize("rel", [5e-11, 5e-10, -5e-11, -5e-10, 3e-15, -3e-15])
def test_hetero_approx_brackets_exact_just_off_the_grid(rel):
    # eps_i a hair off a grid point: snapping them onto the grid point would move them by more than
    # the 1e-12 outward widening covers (review: a 1e-9 snap tolerance broke both guarantees by ~2e-10)
    eps_list = [0.1 * (1 + rel)] * 50 + [0.3] * 20
    for dt in (1e-6, 1e-2):
        exact = kc.hetero_eps_exact(eps_list, 0.0, dt)
        up, lo = kc.hetero_eps_approx(eps_list, 0.0, dt, eta=0.01)
        assert lo <= exact <= up


@needs_mpmath
@pytest.mark.parametrize("eps,k,dt", [(1e-12, 1000, 1e-300), (1e-8, 200, 1e-70), (1e-6, 100, 1e-10),
                                      (1e-5, 400, 1e-6), (1e-10, 500, 1e-50)])
def test_eps_optimal_tiny_eps_matches_mpmath(eps, k, dt):
    """x = log(A - delta') - log B has absolute error ~1e-16: for tiny losses that was a large
    relative error (1.7e-5 at eps = 1e-12, 3.9e-9 at eps = 1e-8); the solve now uses
    C = A - B = sum w (1 - e^{-L}) for x < 1."""
    with mp.workdps(60):
        e = mp.mpf(eps)
        q = 1 / (1 + mp.e ** e)
        terms = [(mp.binomial(k, l) * q ** l * (1 - q) ** (k - l), (k - 2 * l) * e)
                 for l in range(k + 1) if k - 2 * l > 0]

        def d(t):
            return mp.fsum(w * -mp.expm1(t - L) for w, L in terms if L > t)

        lo, hi = mp.mpf(0), k * e
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if d(mid) > dt else (lo, mid)
        want = float(hi)
    assert kc.eps_optimal(eps, 0.0, k, dt) == pytest.approx(want, rel=1e-12)
