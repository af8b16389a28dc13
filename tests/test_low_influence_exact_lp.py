"""The two-stage LP of ``low_influence mode=optimise`` (maximise the balanced utility U, then
minimise the influence iota among the U-optimal joint mechanisms) against an independent
oracle: the same LP solved exactly in rational arithmetic by a dense simplex with Bland's rule.

The float LP's coefficients (e^eps, delta) are floats, i.e. exact rationals: the oracle solves
that very LP exactly, so the float answers must agree to a few ulps, on every small case."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pipeline.kernels import finite_mechanisms as fm

K2 = np.array([[0, 1]])
PATH3 = np.array([[0, 1], [1, 2]])


def simplex_min(c, a_eq, b_eq):
    """min c.x subject to a_eq x = b_eq, x >= 0, all Fractions (dense lists). Two-phase
    tableau simplex with Bland's rule (terminates, no cycling). Returns (value, x)."""
    m, n = len(a_eq), len(c)
    rows = []
    for a, b in zip(a_eq, b_eq):
        sign = -1 if b < 0 else 1
        rows.append([sign * v for v in a] + [sign * b])
    # phase 1: one artificial per row, basis = artificials
    tab = [row[:n] + [Fraction(int(i == r)) for i in range(m)] + [row[n]] for r, row in enumerate(rows)]
    basis = [n + r for r in range(m)]
    width = n + m

    def run(cost):
        while True:
            # reduced costs of the current basis
            red = [cost[j] - sum(cost[basis[r]] * tab[r][j] for r in range(m)) for j in range(width)]
            enter = next((j for j in range(width) if red[j] < 0 and j not in basis
                          and allowed[j]), None)
            if enter is None:
                return
            best = None
            for r in range(m):
                if tab[r][enter] > 0:
                    ratio = tab[r][-1] / tab[r][enter]
                    if best is None or ratio < best[0] or (ratio == best[0] and basis[r] < basis[best[1]]):
                        best = (ratio, r)
            if best is None:
                raise AssertionError("unbounded LP")
            r = best[1]
            piv = tab[r][enter]
            tab[r] = [v / piv for v in tab[r]]
            for i in range(m):
                if i != r and tab[i][enter] != 0:
                    f = tab[i][enter]
                    tab[i] = [a - f * b for a, b in zip(tab[i], tab[r])]
            basis[r] = enter

    allowed = [True] * width
    run([Fraction(0)] * n + [Fraction(1)] * m)
    assert sum(tab[r][-1] for r in range(m) if basis[r] >= n) == 0, "infeasible LP"
    # drive zero-level artificials out of the basis where a real column can replace them
    for r in range(m):
        if basis[r] >= n:
            j = next((j for j in range(n) if tab[r][j] != 0), None)
            if j is not None:
                piv = tab[r][j]
                tab[r] = [v / piv for v in tab[r]]
                for i in range(m):
                    if i != r and tab[i][j] != 0:
                        f = tab[i][j]
                        tab[i] = [a - f * b for a, b in zip(tab[i], tab[r])]
                basis[r] = j
    allowed = [j < n for j in range(width)]
    run(list(c) + [Fraction(0)] * m)
    x = [Fraction(0)] * n
    for r in range(m):
        if basis[r] < n:
            x[basis[r]] = tab[r][-1]
    return sum(ci * xi for ci, xi in zip(c, x)), x


def exact_two_stage(n_datasets, edges, f, k, lam: Fraction, delta: Fraction):
    """The LP of fm.optimise_balanced_joint, written out independently over every function
    D -> V: variables P(h), the hockey-stick auxiliaries t_{e,v} (per ordered edge), U, iota,
    and a slack per inequality. Returns the exact (U*, iota*)."""
    from itertools import product

    funcs = list(product(range(k), repeat=n_datasets))
    ordered = [(a, b) for a, b in edges] + [(b, a) for a, b in edges]
    s, nt = len(funcs), len(ordered) * k
    iu, ii = s + nt, s + nt + 1
    nvar = ii + 1
    eq, ub = [], []  # rows as (dict col -> coeff, rhs)
    eq.append(({j: Fraction(1) for j in range(s)}, Fraction(1)))
    for d in range(n_datasets):  # balanced: Pr[M(d) = f(d)] = U
        row = {j: Fraction(1) for j, h in enumerate(funcs) if h[d] == f[d]}
        row[iu] = Fraction(-1)
        eq.append((row, Fraction(0)))
    for e, (a, b) in enumerate(ordered):  # t_{e,v} >= Pr[M(a)=v] - lam Pr[M(b)=v]
        for v in range(k):
            row = {}
            for j, h in enumerate(funcs):
                row[j] = row.get(j, 0) + (h[a] == v) - lam * (h[b] == v)
            row[s + e * k + v] = Fraction(-1)
            ub.append((row, Fraction(0)))
        ub.append(({s + e * k + v: Fraction(1) for v in range(k)}, delta))
    for a, b in edges:  # sum over h with h(a) != h(b) of P(h) <= iota
        row = {j: Fraction(1) for j, h in enumerate(funcs) if h[a] != h[b]}
        row[ii] = Fraction(-1)
        ub.append((row, Fraction(0)))

    def dense(extra_eq=()):
        rows = eq + list(extra_eq)
        width = nvar + len(ub)
        a = [[Fraction(r.get(j, 0)) for j in range(width)] for r, _ in rows]
        b = [rhs for _, rhs in rows]
        for i, (r, rhs) in enumerate(ub):
            line = [Fraction(r.get(j, 0)) for j in range(nvar)] + [Fraction(0)] * len(ub)
            line[nvar + i] = Fraction(1)
            a.append(line)
            b.append(rhs)
        return a, b, width

    a, b, width = dense()
    c = [Fraction(0)] * width
    c[iu] = Fraction(-1)
    neg_u, _ = simplex_min(c, a, b)
    u_star = -neg_u
    a, b, width = dense([({iu: Fraction(1)}, u_star)])
    c = [Fraction(0)] * width
    c[ii] = Fraction(1)
    iota, _ = simplex_min(c, a, b)
    return u_star, iota


def test_the_oracle_knows_example_6():
    # K2, binary, lam = 2, delta = 0: U* = 2/3 and iota* = 1/3 (seed 003 Example 6)
    u, iota = exact_two_stage(2, [(0, 1)], (0, 1), 2, Fraction(2), Fraction(0))
    assert (u, iota) == (Fraction(2, 3), Fraction(1, 3))
    u, iota = exact_two_stage(2, [(0, 1)], (0, 1), 2, Fraction(3), Fraction(1, 4))
    assert (u, iota) == (Fraction(13, 16), Fraction(5, 8))  # (lam+d)/(lam+1), (lam+2d-1)/(lam+1)


def test_issue_example_is_one_third_to_float_precision():
    """The issue's run: K2, rr_binary, eps = ln 2, delta = 0 gave 0.333333331333."""
    eps = 0.6931471805599453
    u, iota, _ = fm.optimise_balanced_joint(2, K2, np.array([0, 1]), 2, eps, 0.0)
    u_exact, iota_exact = exact_two_stage(2, [(0, 1)], (0, 1), 2, Fraction(math.exp(eps)), Fraction(0))
    assert abs(iota - float(iota_exact)) <= 4e-16 and abs(iota - 1 / 3) <= 4e-16
    assert abs(u - float(u_exact)) <= 4e-16


SMALL_CASES = [(2, K2, (0, 1), 2), (2, K2, (0, 1), 3), (2, K2, (0, 2), 3), (3, PATH3, (0, 1, 1), 2),
               (3, PATH3, (0, 1, 0), 2)]


@pytest.mark.parametrize("nd,edges,f,k", SMALL_CASES, ids=lambda v: str(v).replace(" ", "") if not isinstance(v, np.ndarray) else f"{len(v)}edges")
@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.6931471805599453, 0.0), (0.5, 0.1),
                                       (1.0, 0.0), (1.0986122886681098, 0.25), (2.0, 0.5),
                                       (3.0, 1.0), (0.25, 0.75)])
def test_two_stage_lp_matches_exact_rationals(nd, edges, f, k, eps, delta):
    u, iota, joint = fm.optimise_balanced_joint(nd, edges, np.array(f), k, eps, delta)
    u_exact, iota_exact = exact_two_stage(nd, [tuple(e) for e in edges.tolist()], f, k,
                                          Fraction(math.exp(eps)), Fraction(delta))
    assert abs(u - float(u_exact)) <= 1e-14, (u, u_exact)
    assert abs(iota - float(iota_exact)) <= 1e-14, (iota, iota_exact)
    # and the returned mechanism attains them
    m = joint.marginals()
    assert fm.balanced_utility(m, np.array(f)) == pytest.approx(float(u_exact), abs=1e-12)
    assert fm.influence_joint(joint, edges) == pytest.approx(float(iota_exact), abs=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.3, 0.6931471805599453, 2.5, 15.0])
@pytest.mark.parametrize("delta", [0.0, 0.05, 1.0])
def test_experiment_influence_joint_is_the_exact_optimum(eps, delta):
    """Through the experiment (mode=optimise is K2, binary): influence_joint equals the exact
    rational optimum, and Example 6's closed form, to float precision."""
    from pipeline.engine.batch import run_batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment

    grid = Grid(get_experiment("low_influence"), {}, dict(mode="optimise", graph="K2", eps=eps, delta=delta))
    row = run_batch(grid, [0])[0].to_pylist()[0]
    assert row["status"] == "ok", row["error"]
    u_exact, iota_exact = exact_two_stage(2, [(0, 1)], (0, 1), 2, Fraction(math.exp(eps)), Fraction(delta))
    assert abs(row["influence_joint"] - float(iota_exact)) <= 1e-14
    assert abs(row["utility"] - float(u_exact)) <= 1e-14
    assert abs(row["influence_joint_closed_form"] - float(iota_exact)) <= 1e-14
