"""Benchmarks of the edge_dp kernels, each against a baseline measured in the same run.

    .venv/bin/python benchmarks/bench_edge_dp.py [--quick]

1. Laplace loss: O(m) one-sided recursions vs the direct O(m^2) mixture density at the
   integer points (same answer checked).
2. Randomized-response loss: O(b 2^b) log-space butterfly vs the dense 2^b x 2^b channel.
3. ERGM Gibbs: matching-block updates vectorised over chains vs a single-dyad Python loop.
4. Triangle counts of all graphs on n nodes: bitmask vectorised vs networkx per graph.
5. Hive (Example 1): closed form vs exact enumeration (same answer checked).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.kernels import network_priors as npr  # noqa: E402
from pipeline.kernels import pufferfish as pf  # noqa: E402


def timed(fn, repeat=3):
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def report(name, fast, base, note=""):
    print(f"{name:<46s} fast {fast * 1e3:10.2f} ms   baseline {base * 1e3:10.2f} ms   "
          f"speed-up x{base / fast:8.1f}  {note}")


def bench_laplace(m):
    hive = npr.Hive(int((1 + math.isqrt(1 + 8 * m)) // 2), 0.5, 0.6, 0.2)
    k1, k0 = hive.edge_count_log_pmfs((0, 1))
    eps = 1.0

    def naive():
        k = np.arange(k1.size, dtype=np.float64)
        dist = -eps * np.abs(k[:, None] - k[None, :])
        from scipy.special import logsumexp
        r = logsumexp(k1[None, :] + dist, axis=1) - logsumexp(k0[None, :] + dist, axis=1)
        return float(np.max(np.abs(r)))

    fast, loss = timed(lambda: pf.laplace_count_loss(k1, k0, eps))
    base, pts = timed(naive, repeat=1)
    assert pts <= loss[0] + 1e-6
    report(f"laplace loss, m={k1.size - 1}", fast, base, f"(loss {loss[0]:.6g})")


def bench_rr(bits):
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(1 << bits))
    eps = 1.0
    q = 1 / (1 + math.e)

    def dense():
        single = np.array([[1 - q, q], [q, 1 - q]])
        channel = single
        for _ in range(bits - 1):
            channel = np.kron(single, channel)
        return channel @ p

    fast, out = timed(lambda: pf.rr_channel_log(np.log(p), eps))
    base, ref = timed(dense, repeat=1)
    assert np.allclose(np.exp(out), ref, rtol=1e-9)
    report(f"RR channel, {bits} bits", fast, base)


def bench_gibbs(n, sweeps, chains):
    model = npr.ERGM(n, -1.0, 0.2, -0.05, 2)

    def block():
        npr.ergm_gibbs_edge_laws(model, np.random.default_rng(1), sweeps, 0, chains)

    def sequential():  # one dyad at a time, one chain at a time, same number of dyad updates
        rng = np.random.default_rng(1)
        for _ in range(chains):
            A = np.zeros((n, n), dtype=np.int8)
            for _ in range(sweeps):
                for i, j in npr.dyads(n):
                    common = int(A[i] @ A[j])
                    di, dj = int(A[i].sum()) - A[i, j], int(A[j].sum()) - A[i, j]
                    c = model.beta_edges + model.beta_triangles * common + model.beta_kstar * (di + dj)
                    A[i, j] = A[j, i] = rng.random() < 1 / (1 + math.exp(-c))

    fast, _ = timed(block, repeat=1)
    base, _ = timed(sequential, repeat=1)
    report(f"ERGM Gibbs, n={n}, {chains} chains x {sweeps} sweeps", fast, base,
           "(fast also does the Rao-Blackwell pass)")


def bench_triangles(n, sample):
    import networkx as nx

    graphs = npr.all_graphs(n)
    fast, tri = timed(lambda: npr.triangle_counts(graphs, n), repeat=1)
    idx = np.random.default_rng(0).integers(0, graphs.size, sample)

    def per_graph():
        out = []
        for code in idx:
            g = nx.empty_graph(n)
            g.add_edges_from(e for d, e in enumerate(npr.dyads(n)) if int(code) >> d & 1)
            out.append(sum(nx.triangles(g).values()) // 3)
        return out

    base, ref = timed(per_graph, repeat=1)
    assert list(tri[idx]) == ref
    report(f"triangles of all 2^{npr.n_dyads(n)} graphs, n={n}", fast, base * graphs.size / sample,
           f"(networkx extrapolated from {sample} graphs)")


def bench_hive(n):
    hive = npr.Hive(n, 0.5, 0.6, 0.2)

    def closed():
        k1, k0 = hive.edge_count_log_pmfs((0, 1))
        return pf.laplace_count_loss(k1, k0, 1.0)[0], hive.alpha_dep((0, 1))

    def enum():
        r = npr.exact_edge_analysis(npr.enumerate_log_prob(hive), n, (0, 1), 1.0, "laplace_edge_count")
        return r["pufferfish_loss"], r["alpha_dep"]

    fast, a = timed(closed)
    base, b = timed(enum, repeat=1)
    assert np.allclose(a, b, rtol=1e-9)
    report(f"hive queen loss+alpha, n={n}", fast, base)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    args = ap.parse_args(argv)
    if args.quick:
        bench_laplace(1225)
        bench_rr(10)
        bench_gibbs(10, 50, 4)
        bench_triangles(6, 300)
        bench_hive(6)
    else:
        bench_laplace(4950)
        bench_rr(13)
        bench_gibbs(20, 200, 8)
        bench_triangles(7, 2000)
        bench_hive(7)


if __name__ == "__main__":
    main()
