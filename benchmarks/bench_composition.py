"""Benchmark: exact eps_optimal (pipeline.kernels.composition) against dp-accounting's PLD accountant.

Same (eps, delta = 0, k, delta_target) for both, timed in the same run. Prints, per k, our time,
PLD's time, their ratio and |eps_ours - eps_pld|. PLD is pessimistic: it rounds the privacy loss up
onto a grid (value_discretization_interval), so its answer is >= the exact one.

    .venv/bin/python benchmarks/bench_composition.py            # k = 1e2 .. 1e6 (several minutes)
    .venv/bin/python benchmarks/bench_composition.py --quick    # k = 1e2 .. 1e3, seconds

PLD at k >= 1e5 uses a coarser grid (--pld-coarse-interval, default 1e-3) to keep its run time in
minutes; the interval used is printed. Ours also gets a second baseline: the plain full-sum solve
(all k/2 terms, no window), to show what the windowed, chunked solve buys.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import best_time  # noqa: E402

from pipeline.kernels import composition as kc  # noqa: E402


def pld_eps(eps: float, k: int, dt: float, interval: float) -> float:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                      value_discretization_interval=interval)
    return one.self_compose(k).get_epsilon_for_delta(dt)


def mpmath_error(eps: float, k: int, dt: float, et: float, dps: int = 40) -> float:
    """Relative error of eps~ from a 40-digit recomputation of d(eps~) and its slope (Newton step).

    d(eps~) = A - e^{eps~} B over the losses (k-2l) eps > eps~, weights from mpmath loggamma;
    error = (d(eps~) - delta_target) / (e^{eps~} B), divided by eps~.
    """
    import mpmath as mp

    with mp.workdps(dps):
        e, t = mp.mpf(eps), mp.mpf(et)
        lp = -mp.log1p(mp.e ** (-e))
        lq = -e + lp
        a = b = mp.mpf(0)
        for ell in range(int(math.ceil((k - et / eps) / 2)) - 1, -1, -1):  # weights fall as l falls
            lw = mp.loggamma(k + 1) - mp.loggamma(ell + 1) - mp.loggamma(k - ell + 1) + ell * lq + (k - ell) * lp
            if lw < -900:
                break
            w = mp.e ** lw
            a += w
            b += w * mp.e ** (-(k - 2 * ell) * e)
        return float(((a - mp.e ** t * b) - dt) / (mp.e ** t * b) / t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="k in {1e2, 1e3} only (seconds)")
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--delta-target", type=float, default=1e-6)
    ap.add_argument("--pld-interval", type=float, default=1e-4)
    ap.add_argument("--pld-coarse-interval", type=float, default=1e-3, help="PLD grid for k >= 1e5")
    ap.add_argument("--max-pld-k", type=int, default=10**6, help="skip PLD above this k")
    ap.add_argument("--verify-mpmath", action="store_true",
                    help="also print the relative error of eps_ours against a 40-digit mpmath recomputation")
    args = ap.parse_args(argv)

    try:
        import dp_accounting  # noqa: F401
        have_pld = True
    except ImportError:
        have_pld = False
        print("dp_accounting not installed: PLD baseline skipped")

    ks = [10**2, 10**3] if args.quick else [10**2, 10**3, 10**4, 10**5, 10**6]
    eps, dt = args.eps, args.delta_target
    print(f"eps={eps}, delta=0, delta_target={dt}")
    header = (f"{'k':>8} {'ours_s':>10} {'fullsum_s':>10} {'pld_s':>9} {'pld_grid':>8} "
              f"{'pld/ours':>9} {'eps_ours':>20} {'eps_pld':>20} {'|diff|':>9}")
    print(header)
    rows = []
    for k in ks:
        repeat = 20 if k <= 10**4 else 5
        t_ours, ours = best_time(lambda: kc.eps_optimal(eps, 0.0, k, dt), repeat)
        t_full, full = best_time(
            lambda: kc.eps_for_log_delta(kc.homogeneous_loss(eps, k), math.log(dt)), max(1, repeat // 4))
        assert abs(full - ours) <= 1e-12 * ours, (full, ours)
        t_pld = ref = interval = None
        if have_pld and k <= args.max_pld_k:
            interval = args.pld_interval if k < 10**5 else args.pld_coarse_interval
            t_pld, ref = best_time(lambda: pld_eps(eps, k, dt, interval), 1)
        rows.append((k, t_ours, t_full, t_pld, interval, ours, ref))
        ratio = f"{t_pld / t_ours:9.0f}" if t_pld else f"{'-':>9}"
        print(f"{k:>8} {t_ours:10.2e} {t_full:10.2e} {(t_pld or float('nan')):9.3f} "
              f"{(interval or float('nan')):8.0e} {ratio} {ours:20.12f} "
              f"{(ref if ref is not None else float('nan')):20.12f} "
              f"{(abs(ref - ours) if ref is not None else float('nan')):9.2e}", flush=True)
        if args.verify_mpmath:
            print(f"{'':>8} mpmath (40 digits): relative error of eps_ours = "
                  f"{mpmath_error(eps, k, dt, ours):.1e}", flush=True)
    fastest = statistics.median(r[1] for r in rows)
    print(f"median time per eps_optimal call: {fastest:.2e} s")
    if rows[-1][0] == 10**6:
        print(f"k=1e6 in under 1 s: {'yes' if rows[-1][1] < 1.0 else 'no'} ({rows[-1][1]:.2e} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
