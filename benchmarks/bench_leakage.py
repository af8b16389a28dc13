"""Benchmarks for the finite-mechanism kernel (leakage and low_influence families).

Each line prints a time and its ratio against a baseline measured in the same run:

1. full channel LP: HiGHS dual simplex (baseline) vs interior point (the default);
2. full channel LP (baseline) vs the orbit-reduced LP (orbitals of Aut from generators) vs
   the distance-class LP, on a vertex-transitive graph where all three are exact;
3. |D| in the thousands: generic orbit LP (baseline: orbitals by connected components on
   |D|^2 pairs) vs the distance-class LP from the Hamming closed forms;
4. low influence: LP-optimal coupling (baseline) vs the shared-uniform coupling.

Usage: .venv/bin/python benchmarks/bench_leakage.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.kernels import finite_mechanisms as fm  # noqa: E402
from pipeline.kernels import graphs as G  # noqa: E402


def timed(fn, repeat=1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def line(label, seconds, baseline, value=None):
    extra = f"  value={value:.12g}" if value is not None else ""
    print(f"  {label:<58s} {seconds * 1e3:10.1f} ms   x{baseline / seconds:8.1f} vs baseline{extra}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    args = ap.parse_args()
    eps = 1.0

    d = 4 if args.quick else 6
    g = G.hypercube_graph(d)
    print(f"[1] full LP on Q_{d} (|A| = {g.n}, {g.n ** 2} variables): simplex vs interior point")
    t_ds, (u_ds, _, _) = timed(lambda: fm.dp_channel_lp_full(g, eps, method="highs-ds"))
    line("HiGHS dual simplex (baseline)", t_ds, t_ds, u_ds)
    t_ipm, (u_ipm, _, _) = timed(lambda: fm.dp_channel_lp_full(g, eps, method="highs-ipm"))
    line("HiGHS interior point + crossover", t_ipm, t_ds, u_ipm)

    print(f"[2] Q_{d}: full LP (baseline) vs orbit-reduced LPs")
    gens = fm.hamming_generators(d, 2)
    t_orb, (u_orb, _, _, info) = timed(lambda: fm.dp_channel_lp_orbits(g, eps, gens), repeat=3)
    line("full LP, interior point (baseline)", t_ipm, t_ipm, u_ipm)
    line(f"orbit LP from Aut generators ({info['variables']} variables)", t_orb, t_ipm, u_orb)
    t_dc, (u_dc, _) = timed(lambda: fm.distance_class_lp(*fm.distance_class_data(g), eps), repeat=3)
    line("distance-class LP (BFS from one vertex)", t_dc, t_ipm, u_dc)
    print(f"  closed form (lambda/(lambda+1))^{d} = {fm.hamming_utility_closed_form(d, 2, eps):.12g}")

    u, v = (3, 6) if args.quick else (4, 6)
    n = v ** u
    print(f"[3] H({u},{v}), |A| = {n}: generic orbit LP (baseline) vs distance classes")
    t_build, h = timed(lambda: G.hamming_graph(u, v))
    hgens = fm.hamming_generators(u, v)
    t_gen, (u_gen, _, _, info) = timed(lambda: fm.dp_channel_lp_orbits(h, eps, hgens))
    line(f"orbit LP, orbitals on |A|^2 = {n * n} pairs", t_gen, t_gen, u_gen)
    t_bfs, (u_bfs, _) = timed(lambda: fm.distance_class_lp(*fm.distance_class_data(h), eps), repeat=3)
    line("distance-class LP from BFS (graph built)", t_bfs, t_gen, u_bfs)
    t_cf, (u_cf, _) = timed(lambda: fm.distance_class_lp(*fm.hamming_distance_class_data(u, v), eps), repeat=5)
    line("distance-class LP from closed-form borders (no graph)", t_cf, t_gen, u_cf)
    t_closed, u_closed = timed(lambda: fm.hamming_utility_closed_form(u, v, eps), repeat=5)
    line("closed form", t_closed, t_gen, u_closed)
    print(f"  (building H({u},{v}) itself took {t_build * 1e3:.1f} ms; the full LP would have "
          f"{n * n} variables and {n * n * u * (v - 1) + n} rows)")

    nd = 8 if args.quick else 12
    pg = G.path_graph(nd)
    f = fm.reference_query(fm.distance_matrix_row(pg, 0), 2)
    m = fm.randomized_response(f, 2, eps)
    print(f"[4] low influence on path({nd}), binary RR: LP-optimal coupling (baseline, 2^{nd} variables) "
          "vs shared uniform")
    t_lp, (iota_lp, _) = timed(lambda: fm.min_influence_coupling(m, pg.edges))
    line("min-influence coupling LP", t_lp, t_lp, iota_lp)
    t_su, su = timed(lambda: fm.shared_uniform_coupling(m), repeat=5)
    line("shared-uniform coupling", t_su, t_lp, fm.influence_joint(su, pg.edges))


if __name__ == "__main__":
    main()
