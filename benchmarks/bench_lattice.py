"""Benchmark of the lattice family (issue 4).

On the hexagonal torus and the 3-12-12 torus, N from 10^3 up to 10^6 vertices through
- ``fourier``: Bloch blocks of the base cell (+ clique-insertion map): energy, ln tau, Kf, mu_2;
- ``fourier-direct``: Bloch blocks of the lattice's own cell (3-12-12: 6 x 6 blocks);
- ``sparse``: SuperLU log-determinant of the reduced Laplacian (ln tau only);
- ``dense``: numpy eigvalsh (energy) + slogdet (ln tau), the baseline;
- ``networkx``: nx.adjacency_spectrum (energy) + nx.number_of_spanning_trees (float tau),
each as far as it goes within the time budget. Prints times, ratios against dense at the same N
and the fitted scaling exponent t ~ N^a of each method. Then the targets: ln tau and energy per
vertex of a 10^6-vertex torus (time, peak RSS in a fresh process) and exact integer spanning-tree
counts of ~500-vertex graphs (time; ratio against fraction-free Bareiss at a smaller size).

    .venv/bin/python benchmarks/bench_lattice.py            # full (minutes)
    .venv/bin/python benchmarks/bench_lattice.py --quick    # seconds
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

import numpy as np

from pipeline.kernels import lattice_counts as counts
from pipeline.kernels import lattice_spectra as spectra
from pipeline.kernels.lattices import base_cell, build_lattice, lattice_cell


def _time(fn, repeat=1):
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def methods(base: str, k: int):
    cell, bcell = lattice_cell(base, k), base_cell(base)

    def fourier(L):
        spectra.torus_summary(cell, L, L, bcell, k)

    def fourier_direct(L):
        spectra.torus_summary(cell, L, L)

    def sparse(L):
        spectra.sparse_log_tree_count(build_lattice(base, k, L, L, "torus"))

    def dense(L):
        g = build_lattice(base, k, L, L, "torus")
        np.sum(np.abs(np.linalg.eigvalsh(g.adjacency().toarray())))
        spectra.dense_log_tree_count(g)

    def networkx(L):
        import networkx as nx

        g = build_lattice(base, k, L, L, "torus").to_networkx()
        np.sum(np.abs(nx.adjacency_spectrum(g)))
        nx.number_of_spanning_trees(g)

    out = {"fourier": fourier, "sparse": sparse, "dense": dense, "networkx": networkx}
    if k:
        out["fourier-direct"] = fourier_direct
    return out


def scaling(base: str, k: int, sizes, budget: float, per_run: float):
    c = lattice_cell(base, k).size
    results = {}
    for name, fn in methods(base, k).items():
        spent, rows = 0.0, []
        for n_target in sizes:
            L = max(2, round(math.sqrt(n_target / c)))
            t = _time(lambda: fn(L), repeat=3 if name.startswith("fourier") and L < 64 else 1)
            rows.append((c * L * L, t))
            spent += t
            if t > per_run or spent > budget:
                break
        results[name] = rows
    return results


def fit_exponent(rows):
    pts = [(n, t) for n, t in rows if t > 1e-4]
    if len(pts) < 2:
        return float("nan")
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def report_scaling(base, k, results):
    print(f"\n== {lattice_cell(base, k).name} torus ==")
    dense = dict(results.get("dense", []))
    print(f"{'method':<15}{'N':>10}{'time_s':>12}{'dense/this':>12}")
    for name, rows in results.items():
        for n, t in rows:
            ratio = f"{dense[n] / t:12.1f}" if n in dense else f"{'-':>12}"
            print(f"{name:<15}{n:>10}{t:12.4f}{ratio}")
    print("fitted exponent a in t ~ N^a:",
          ", ".join(f"{name} {fit_exponent(rows):.2f}" for name, rows in results.items()))


TARGET_CODE = """
import time, sys
from pipeline.kernels import lattice_spectra as s
from pipeline.kernels.lattices import base_cell, lattice_cell
base, k, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
out = s.torus_summary(lattice_cell(base, k), L, L, base_cell(base), k)
dt = time.perf_counter() - t
# VmHWM: peak resident set of this process image (ru_maxrss would inherit the parent's peak)
rss = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM")) / 1024 / 1024
n = out["n_vertices"]
print(f"{n} {dt:.3f} {rss:.3f} {out['energy'] / n:.12f} {out['log_spanning_trees'] / n:.12f}")
"""


def target_million(timeout: float):
    print("\n== target: 10^6-vertex torus, ln tau + energy per vertex (fresh process) ==")
    print(f"{'lattice':<12}{'N':>10}{'time_s':>9}{'peak_RSS_GiB':>14}{'E/N':>16}{'ln tau/N':>16}")
    for base, k, L in (("hexagonal", 0, 707), ("hexagonal", 1, 408)):
        try:
            res = subprocess.run([sys.executable, "-c", TARGET_CODE, base, str(k), str(L)],
                                 capture_output=True, text=True, timeout=timeout, check=True)
            n, dt, rss, e, z = res.stdout.split()
            print(f"{lattice_cell(base, k).name:<12}{n:>10}{float(dt):9.2f}{float(rss):14.3f}"
                  f"{float(e):16.10f}{float(z):16.10f}")
        except subprocess.TimeoutExpired:
            print(f"{lattice_cell(base, k).name:<12} timed out after {timeout} s")


def target_exact(quick: bool):
    print("\n== target: exact integer spanning-tree counts (modular CRT, banded) ==")
    cases = [("hexagonal", 0, 16), ("hexagonal", 1, 9), ("square", 0, 22)]
    if quick:
        cases = [("hexagonal", 0, 8), ("hexagonal", 1, 5)]
    for base, k, L in cases:
        g = build_lattice(base, k, L, L, "torus")
        t = time.perf_counter()
        tau = counts.spanning_tree_count(g)
        dt = time.perf_counter() - t
        print(f"{lattice_cell(base, k).name:<12} N={g.n:<5} digits={len(str(tau)):<5} "
              f"time={dt:.2f} s")
    # baseline: pure-Python fraction-free Bareiss on the same kind of matrix, smaller N
    g = build_lattice("hexagonal", 0, 6 if quick else 9, 6 if quick else 9, "torus")
    lap = (g.laplacian().toarray().astype(int))[1:, 1:]
    t_b = _time(lambda: counts.bareiss_determinant(lap.tolist()))
    t_m = _time(lambda: counts.spanning_tree_count(g))
    print(f"baseline at N={g.n}: Bareiss {t_b:.3f} s, modular {t_m:.3f} s, "
          f"ratio Bareiss/modular = {t_b / t_m:.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, seconds")
    ap.add_argument("--targets", action="store_true", help="only the two target checks")
    args = ap.parse_args()
    if args.targets:
        target_million(timeout=120)
        target_exact(quick=False)
        return
    if args.quick:
        sizes, budget, per_run = [300, 1_000], 3.0, 0.5
    else:
        sizes, budget, per_run = [1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000], 60.0, 20.0
    for base, k in (("hexagonal", 0), ("hexagonal", 1)):
        report_scaling(base, k, scaling(base, k, sizes, budget, per_run))
    if not args.quick:
        target_million(timeout=120)
    target_exact(args.quick)


if __name__ == "__main__":
    main()
