"""Independent sets by transfer operators (seed 004, chapters 7 and 8).

Experiments:

- ``independent_sets``: exact Merrifield-Simmons index of the 4-8-8, square (hard squares) and
  king lattices with free, cylindrical (periodic along n) and toroidal boundaries.
- ``independent_sets_bounds``: Theorem 7.2.2 bounds on the entropy constant from strip eigenvalues.
- ``random_triangulation``: expected and sampled counts on randomly triangulated grids (chapter 8).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa

from pipeline.experiments.base import (Choice, Experiment, Interval, Param, PointCheck, exact_int,
                                       log_of_int, register)
from pipeline.experiments.base import EXACT, document
from pipeline.kernels import transfer, triangulation

LATTICE_DOC = ("'488': the 4-8-8 lattice, m rows and n columns of octagons (G_{m,n}, H_{m,n}, "
               "S_{m,n} of thesis section 7.2); 'square': m x n grid graph (hard squares); "
               "'king': m x n grid with both diagonals of every face")

# Exact sweeps cost about (#start vectors) x (#states) x (#bits) x (#transforms) big-integer additions
# per step; the limit keeps one task within ~10 s on the shared 2-core machine (benchmarks/).
MAX_WIDTH_VECTOR = {"488": 16, "square": 20, "king": 20}   # memory: free and cylinder sweeps
MAX_WIDTH_TRACE = {"488": 12, "square": 14, "king": 14}    # memory: torus, one start per orbit
MAX_SWEEP_ADDITIONS = 1e8


def sweep_plan(lattice: str, m: int, n: int, boundary: str) -> tuple[int, int, bool]:
    """(strip width, number of steps, transposed?) of the exact sweep for one point.

    free: width min(m, n) (f(m, n) = f(n, m)); cylinder: periodic width n, m steps; torus: periodic
    width min(m, n) (s(m, n) = s(n, m))."""
    if boundary == "free":
        return (n, m, True) if m > n else (m, n, False)
    if boundary == "cylinder":
        return n, m, False
    return (m, n, True) if n > m else (n, m, False)


def sweep_additions(lattice: str, width: int, steps: int, boundary: str) -> float:
    if lattice == "488":
        bits = width + 1 if boundary == "free" else width
        states, transforms = 2 ** bits, 3
    else:
        bits, states, transforms = width, 2 ** width, 1
    starts = 1
    if boundary == "torus":  # one start per dihedral orbit of (valid) periodic rows
        if lattice == "488":
            starts = transfer.dihedral_orbits(bits)[0].size
        elif width >= 3:
            starts = transfer.dihedral_orbits(width, transfer.StripGrid(width, True).valid_states)[0].size
        else:
            starts = states
    return float(starts) * states * bits * transforms * steps


def _periodic_size_check(point: dict) -> str | None:
    lattice, boundary, m, n = point["lattice"], point["boundary"], point["m"], point["n"]
    if lattice == "488":
        return None
    if boundary in ("cylinder", "torus") and n < 3:
        return (f"lattice={lattice} with boundary={boundary} needs n >= 3 (a periodic direction of "
                f"size 1 or 2 would need a loop or a double edge); got n={n}")
    if boundary == "torus" and m < 3:
        return f"lattice={lattice} with boundary=torus needs m >= 3; got m={m}"
    return None


def _cost_check(point: dict) -> str | None:
    lattice, boundary, m, n = point["lattice"], point["boundary"], point["m"], point["n"]
    width, steps, _ = sweep_plan(lattice, m, n, boundary)
    which = "min(m, n)" if boundary != "cylinder" else "n (the periodic width)"
    limit = (MAX_WIDTH_TRACE if boundary == "torus" else MAX_WIDTH_VECTOR)[lattice]
    if width > limit:
        return (f"lattice={lattice}, boundary={boundary}: {which} = {width} exceeds {limit} "
                f"(allowed: {which} <= {limit})")
    cost = sweep_additions(lattice, width, steps, boundary)
    if cost > MAX_SWEEP_ADDITIONS:
        per_step = cost / steps
        return (f"lattice={lattice}, boundary={boundary}, m={m}, n={n}: the exact sweep needs about "
                f"{cost:.2g} big-integer additions, above the limit {MAX_SWEEP_ADDITIONS:.0e}; at this "
                f"width ({width}) allowed: length <= {int(MAX_SWEEP_ADDITIONS // per_step)}")
    return None


def _oriented_count(lattice: str, m: int, n: int, boundary: str) -> tuple[int, str]:
    """Sweep across the narrower side where the lattice's 90-degree symmetry allows it: f(m, n) =
    f(n, m) and s(m, n) = s(n, m) (checked independently in the tests); g is not symmetric."""
    _, _, transposed = sweep_plan(lattice, m, n, boundary)
    if transposed:
        value, method = transfer.count(lattice, n, m, boundary)
        return value, method + " (transposed)"
    return transfer.count(lattice, m, n, boundary)


def run_independent_sets(params: dict, seed: int) -> dict:
    lattice, m, n, boundary = params["lattice"], params["m"], params["n"], params["boundary"]
    value, method = _oriented_count(lattice, m, n, boundary)
    graph = transfer.lattice_graph(lattice, m, n, boundary)
    log_count = log_of_int(value)
    return {"n_vertices": graph.n, "n_edges": graph.m, "count": exact_int(value),
            "log_count": log_count, "entropy_per_vertex": log_count / graph.n, "method": method}


INDEPENDENT_SETS = register(Experiment(
    name="independent_sets", version=1,
    doc="Exact number of independent sets (Merrifield-Simmons index, empty set included) by "
        "zeta-transform transfer operators (thesis chapter 7, Tables 7.1-7.3).",
    params=[
        Param("lattice", str, "488", Choice(*transfer.LATTICES), LATTICE_DOC),
        Param("m", int, 3, Interval(1, 64), "rows (of octagons for 488, of sites otherwise)"),
        Param("n", int, 3, Interval(1, 64), "columns (of octagons for 488, of sites otherwise)"),
        Param("boundary", str, "free", Choice("free", "cylinder", "torus"),
              "free; cylinder = periodic along n; torus = periodic along m and n"),
    ],
    columns={
        "n_vertices": pa.int64(), "n_edges": pa.int64(),
        "count": pa.string(), "log_count": pa.float64(),
        "entropy_per_vertex": pa.float64(), "method": pa.string(),
    },
    run=run_independent_sets,
    checks=[PointCheck(("lattice", "boundary", "m", "n"), _periodic_size_check),
            PointCheck(("lattice", "boundary", "m", "n"), _cost_check)],
))


# --------------------------------------------------------------------------- bounds
MAX_BOUND_WIDTH = {"488": 12, "square": 20, "king": 20}


def _bounds_check(point: dict) -> str | None:
    lattice, p, q, k = point["lattice"], point["p"], point["q"], point["k"]
    shift = 0 if lattice == "488" else 1
    limit = MAX_BOUND_WIDTH[lattice]
    if p + 2 * q + shift > limit:
        return (f"lattice={lattice}: the free strip of width p + 2q{' + 1' if shift else ''} = "
                f"{p + 2 * q + shift} exceeds {limit} (allowed: p + 2q{' + 1' if shift else ''} <= {limit})")
    if 2 * k > limit:
        return f"lattice={lattice}: the periodic strip of width 2k = {2 * k} exceeds {limit} (allowed: k <= {limit // 2})"
    if lattice != "488" and 2 * k < 3:
        return f"lattice={lattice}: the periodic strip needs 2k >= 3 (allowed: k >= 2); got k={k}"
    return None


def run_bounds(params: dict, seed: int) -> dict:
    out = transfer.entropy_bounds(params["lattice"], params["p"], params["q"], params["k"])
    out["vertices_per_cell"] = transfer.VERTICES_PER_CELL[params["lattice"]]
    return out


BOUNDS = register(Experiment(
    name="independent_sets_bounds", version=1,
    doc="Bounds (lambda_{p+2q}/lambda_{2q})^(1/p) <= eta <= xi_{2k}^(1/(2k)) on the entropy constant "
        "(thesis Theorem 7.2.2, after Calkin & Wilf 1998) from largest strip eigenvalues.",
    params=[
        Param("lattice", str, "488", Choice(*transfer.LATTICES), LATTICE_DOC),
        Param("p", int, 2, Interval(1, 20), "lower bound: power p (width p + 2q strip)"),
        Param("q", int, 3, Interval(1, 10), "lower bound: width 2q strip"),
        Param("k", int, 4, Interval(1, 10), "upper bound: periodic strip of width 2k"),
    ],
    columns={
        "lambda_p_plus_2q": pa.float64(), "lambda_2q": pa.float64(), "xi_2k": pa.float64(),
        "width_p_plus_2q": pa.int64(), "width_2q": pa.int64(), "width_2k": pa.int64(),
        "lower": pa.float64(), "upper": pa.float64(),
        "eta_lower": pa.float64(), "eta_upper": pa.float64(), "vertices_per_cell": pa.int64(),
    },
    run=run_bounds,
    checks=[PointCheck(("lattice", "p", "q", "k"), _bounds_check)],
))


# --------------------------------------------------------------------------- random triangulation
MAX_TRIANGULATION_M = 15
EXACT_BUDGET = 1_000_000        # states^2 * n big-integer products for the exact expected count
SAMPLE_BUDGET = 5e9             # samples * n * (m + 1) * 2^(m + 2): site-by-site sweep operations


def _n_states(m: int) -> int:
    a, b = 1, 2  # F_{m+3}: number of (m+1)-bit columns without two consecutive ones
    for _ in range(m):
        a, b = b, a + b
    return b


def _sample_check(point: dict) -> str | None:
    m, n, samples = point["m"], point["n"], point["samples"]
    cost = samples * n * (m + 1) * 2 ** (m + 2)
    if cost > SAMPLE_BUDGET:
        allowed = int(SAMPLE_BUDGET // (n * (m + 1) * 2 ** (m + 2)))
        fits = (f"allowed at this m and n: samples <= {allowed}" if allowed else
                "not one sample fits at this m and n: samples=0 (the exact expectation only), "
                f"or n <= {int(SAMPLE_BUDGET // ((m + 1) * 2 ** (m + 2)))} at this m")
        return (f"samples * n * (m + 1) * 2^(m + 2) = {cost:.3g} exceeds {SAMPLE_BUDGET:.0e} (m={m}, "
                f"n={n}, samples={samples}); {fits}")
    return None


def fraction_to_decimal(value: Fraction) -> str | None:
    """Exact decimal expansion of a rational whose denominator is 2^a 5^b, else None."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return None
    digits = max(twos, fives)
    scaled = value.numerator * 10 ** digits // value.denominator
    sign = "-" if scaled < 0 else ""
    text = str(abs(scaled)).rjust(digits + 1, "0")
    whole, frac = (text[:-digits], text[-digits:]) if digits else (text, "")
    frac = frac.rstrip("0")
    return sign + whole + ("." + frac if frac else "")


def run_random_triangulation(params: dict, seed: int) -> dict:
    m, n, p, samples = params["m"], params["n"], params["p"], params["samples"]
    states = _n_states(m)
    row: dict = {"n_states": states, "shannon_entropy": triangulation.shannon_entropy(p)}
    p_exact = Fraction(repr(p))
    if states * states * n <= EXACT_BUDGET and p_exact.denominator <= 10 ** 6:
        exact = triangulation.expected_count_exact(m, n, p_exact)
        row["expected_count"] = fraction_to_decimal(exact)
        row["log_expected_count"] = log_of_int(exact.numerator) - log_of_int(exact.denominator)
    else:
        row["expected_count"] = None
        row["log_expected_count"] = triangulation.log_expected_count(m, n, p)
    row["annealed_entropy"] = row["log_expected_count"] / (m * n)
    row["eigen_entropy"] = triangulation.eigen_entropy(m, p)
    if samples > 0:
        rng = np.random.default_rng(seed)
        logs = np.array([triangulation.log_count_sample(m, triangulation.sample_diagonals(m, n, p, rng))
                         for _ in range(samples)]) / (m * n)
        row["quenched_entropy"] = float(logs.mean())
        row["quenched_entropy_stderr"] = (float(logs.std(ddof=1) / math.sqrt(samples))
                                          if samples > 1 else None)
    return row


RANDOM_TRIANGULATION = register(Experiment(
    name="random_triangulation", version=1,
    doc="Independent sets on the randomly triangulated grid G_{m,n}(p) (thesis chapter 8): expected "
        "count by the expected transfer matrix (Theorem 8.3.1), its eigenvalue limit (Theorem 8.3.2) "
        "and a Monte Carlo quenched entropy.",
    stochastic=True,
    params=[
        Param("m", int, 3, Interval(1, MAX_TRIANGULATION_M), "rows of square cells (m + 1 vertices per column)"),
        Param("n", int, 100, Interval(1, 100_000), "columns of square cells"),
        Param("p", float, 0.5, Interval(0.0, 1.0), "probability of the north-east (alpha) diagonal"),
        Param("samples", int, 0, Interval(0, 100_000),
              "sampled triangulations for the quenched entropy (0: skip)"),
    ],
    columns={
        "n_states": pa.int64(),
        "expected_count": pa.string(), "log_expected_count": pa.float64(),
        "annealed_entropy": pa.float64(), "eigen_entropy": pa.float64(),
        "shannon_entropy": pa.float64(),
        "quenched_entropy": pa.float64(), "quenched_entropy_stderr": pa.float64(),
    },
    run=run_random_triangulation,
    checks=[PointCheck(("m", "n", "samples"), _sample_check)],
))


# --------------------------------------------------------------------------- column docs
# (description, unit) as in docs/independent_sets.md; logarithms are natural ("nat").
# Parameters: "" keeps the Param.doc as the description; the entry gives the unit.
document(INDEPENDENT_SETS, {
    "lattice": ("", None), "m": ("", "1"), "n": ("", "1"), "boundary": ("", None),
    "n_vertices": ("number of vertices of the explicit graph", "1"),
    "n_edges": ("number of edges of the explicit graph", "1"),
    "count": ("exact number of independent sets (Merrifield-Simmons index)", "1", EXACT),
    "log_count": ("ln(count)", "nat"),
    "entropy_per_vertex": ("ln(count) / n_vertices", "nat"),
    "method": ("which transfer-matrix sweep was used (width, vector or trace, transposed or "
               "not)", None),
})
document(BOUNDS, {
    "lattice": ("", None), "p": ("", "1"), "q": ("", "1"), "k": ("", "1"),
    "lambda_p_plus_2q": ("largest transfer-matrix eigenvalue of the free strip of width p + 2q",
                         "1"),
    "lambda_2q": ("largest transfer-matrix eigenvalue of the free strip of width 2q", "1"),
    "xi_2k": ("largest transfer-matrix eigenvalue of the periodic strip of width 2k", "1"),
    "width_p_plus_2q": ("strip width actually used for lambda_p_plus_2q", "1"),
    "width_2q": ("strip width actually used for lambda_2q", "1"),
    "width_2k": ("strip width actually used for xi_2k", "1"),
    "lower": ("lower bound (lambda_{p+2q} / lambda_{2q})^(1/p) on the entropy constant per unit "
              "cell (Theorem 7.2.2)", "1"),
    "upper": ("upper bound xi_{2k}^(1/(2k)) on the entropy constant per unit cell", "1"),
    "eta_lower": ("lower, per vertex (lower^(1/4) for 488)", "1"),
    "eta_upper": ("upper, per vertex (upper^(1/4) for 488)", "1"),
    "vertices_per_cell": ("4 for 488, 1 otherwise", "1"),
})
document(RANDOM_TRIANGULATION, {
    "m": ("", "1"), "n": ("", "1"), "p": ("", "1"), "samples": ("", "1"),
    "n_states": ("column states of the transfer matrix, F_{m+3} (F_1 = F_2 = 1)", "1"),
    "expected_count": ("f(m, n; p), the expected number of independent sets, exact decimal (p "
                       "read as its decimal repr); null when F_{m+3}^2 n > 10^6", "1"),
    "log_expected_count": ("ln f(m, n; p)", "nat"),
    "annealed_entropy": ("ln f(m, n; p) / (m n) (Table 8.2 at n = 100)", "nat"),
    "eigen_entropy": ("eta_m(p) = ln lambda_{m,1}(p) / m (Table 8.1, Theorem 8.3.2)", "nat"),
    "shannon_entropy": ("H(p) (Figure 8.4)", "nat"),
    "quenched_entropy": ("mean over samples of ln #IS / (m n); null when samples = 0", "nat"),
    "quenched_entropy_stderr": ("standard error of quenched_entropy (sample std / sqrt(samples))",
                                "nat"),
})
