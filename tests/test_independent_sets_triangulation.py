"""Random triangulations (seed 004, chapter 8): expected transfer matrix against exhaustive enumeration."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from pipeline.experiments import _thesis_tables as thesis
from pipeline.kernels import triangulation as tri
from pipeline.kernels.transfer import brute_force_count


def test_column_states_are_fibonacci_F_m_plus_3():
    fib = [0, 1, 1]
    while len(fib) < 25:
        fib.append(fib[-1] + fib[-2])
    for m in range(1, 15):
        assert len(tri.column_states(m)) == fib[m + 3]  # the thesis's F_{m+2} is off by one (ERRATA)


def test_printed_expected_matrix_T2_at_0_3():
    printed = [[1, 1, 1, 1, 1], [1, 0, 0.3, 1, 0], [1, 0.7, 0, 0.3, 0.21], [1, 1, 0.7, 0, 0],
               [1, 0, 0.21, 0, 0]]
    states = list(tri.column_states(2))
    order = [0b000, 0b100, 0b010, 0b001, 0b101]  # empty, top, middle, bottom, top + bottom
    idx = [states.index(s) for s in order]
    mat = tri.expected_transfer_matrix(2, 0.3)
    assert np.allclose(mat[np.ix_(idx, idx)], printed, atol=1e-15)


def _exhaustive_expected(m, n, p: Fraction) -> Fraction:
    """Average of #IS over all 2^{mn} triangulations, each graph built explicitly."""
    total = Fraction(0)
    for bits in itertools.product((0, 1), repeat=m * n):
        diag = np.array([sum(bits[j * m + y] << y for y in range(m)) for j in range(n)], dtype=np.int64)
        k = sum(bits)
        weight = p ** k * (1 - p) ** (m * n - k)
        total += weight * brute_force_count(tri.triangulated_graph(m, n, diag))
    return total


@pytest.mark.parametrize("m,n", [(1, 1), (1, 3), (2, 1), (2, 2), (3, 2), (2, 4)])
def test_expected_count_equals_exhaustive_enumeration(m, n):
    p = Fraction(3, 10)
    assert tri.expected_count_exact(m, n, p) == _exhaustive_expected(m, n, p)


def test_expected_count_symmetric_in_p():
    for m, n in [(1, 5), (3, 4), (4, 3), (5, 6)]:
        for p in (Fraction(1, 10), Fraction(3, 10), Fraction(1, 7)):
            assert tri.expected_count_exact(m, n, p) == tri.expected_count_exact(m, n, 1 - p)
    assert tri.eigen_entropy(6, 0.2) == pytest.approx(tri.eigen_entropy(6, 0.8), abs=1e-14)


def test_deterministic_triangulations_match_brute_force():
    rng = np.random.default_rng(5)
    for m, n in [(1, 4), (2, 3), (3, 3), (4, 4), (5, 3), (6, 2)]:
        for _ in range(3):
            d = tri.sample_diagonals(m, n, 0.4, rng)
            exact = tri.count_sample_exact(m, d)
            assert exact == brute_force_count(tri.triangulated_graph(m, n, d))
            assert exact == tri.count_sample_dense(m, d)
            assert tri.log_count_sample(m, d) == pytest.approx(math.log(exact), rel=1e-13)


def test_float_log_count_matches_exact():
    for m, n, p in [(3, 50, 0.3), (6, 40, 0.9), (8, 20, 0.5)]:
        exact = tri.expected_count_exact(m, n, Fraction(str(p)))
        log_exact = math.log(exact.numerator) - math.log(exact.denominator)
        assert tri.log_expected_count(m, n, p) == pytest.approx(log_exact, rel=1e-13)


def test_annealed_entropy_tends_to_eigen_entropy():
    m, p = 4, 0.3
    eig = tri.eigen_entropy(m, p)
    gaps = [abs(tri.log_expected_count(m, n, p) / (m * n) - eig) for n in (50, 100, 200, 400)]
    assert all(b < a for a, b in zip(gaps, gaps[1:]))
    assert gaps[-1] * 400 == pytest.approx(gaps[-2] * 200, rel=0.05)  # O(1/n) boundary term


def test_perron_root_against_numpy_eigvals():
    for m, p in [(3, 0.3), (7, 0.5), (9, 0.9)]:
        mat = tri.expected_transfer_matrix(m, p)
        assert tri.perron_root(m, p) == pytest.approx(max(np.linalg.eigvals(mat).real), rel=1e-13)


@pytest.mark.parametrize("table,which", [(thesis.TABLE_8_1_EIGEN, "eigen"),
                                         (thesis.TABLE_8_2_ANNEALED, "annealed")])
def test_tables_8_1_and_8_2_to_1e_13(table, which):
    for (m, p), printed in table.items():
        value = (tri.eigen_entropy(m, p) if which == "eigen"
                 else tri.log_expected_count(m, 100, p) / (100 * m))
        assert abs(value - float(printed)) <= 1e-13, (m, p, value, printed)


def test_shannon_entropy():
    assert tri.shannon_entropy(0.5) == pytest.approx(math.log(2))
    assert tri.shannon_entropy(0.0) == 0.0 and tri.shannon_entropy(1.0) == 0.0
    assert tri.shannon_entropy(0.3) == pytest.approx(tri.shannon_entropy(0.7))


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 5), n=st.integers(1, 6), num=st.integers(0, 20))
def test_property_symmetry_and_deterministic_endpoints(m, n, num):
    p = Fraction(num, 20)
    assert tri.expected_count_exact(m, n, p) == tri.expected_count_exact(m, n, 1 - p)
    # p = 1: every cell has the alpha diagonal; p = 0: every cell beta -- counts of one fixed graph
    all_alpha = np.full(n, (1 << m) - 1, dtype=np.int64)
    all_beta = np.zeros(n, dtype=np.int64)
    a = brute_force_count(tri.triangulated_graph(m, n, all_alpha))
    assert tri.expected_count_exact(m, n, Fraction(1)) == a
    assert tri.expected_count_exact(m, n, Fraction(0)) == brute_force_count(tri.triangulated_graph(m, n, all_beta)) == a
