"""The stored-id scan that resume, dry runs and ``status`` make of a large store: the unique
uint64 id prefixes of its rows (``store.parquet.unique_ids``, a sort and a neighbour mask)
against ``np.unique``, which numpy 2.4 computes far more slowly on uint64. Printed in the same
run: seconds for N random ids with 10% repeats, and the ratio. Also the membership test of N
ids among the stored ones (``contains``, its queries sorted first) against the plain binary
search of random queries it replaced.

    python benchmarks/bench_stored_ids.py           # 3.5M ids, best of 3
    python benchmarks/bench_stored_ids.py --quick   # 500k ids, best of 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from pipeline.store.parquet import contains, unique_ids  # noqa: E402


def best_s(fn, ids, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(ids)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 500_000 if args.quick else 3_500_000
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
    ids[: n // 10] = ids[n // 10: n // 5]  # 10% repeats: tasks stored twice (retries)
    rng.shuffle(ids)
    assert np.array_equal(unique_ids(ids), np.unique(ids))
    ours, numpy_unique = best_s(unique_ids, ids), best_s(np.unique, ids)
    print(f"numpy {np.__version__}, {n:,} ids: unique_ids {ours:.3f} s, np.unique "
          f"{numpy_unique:.3f} s, ratio {ours / numpy_unique:.3f}")
    # membership of a batch's ids among the stored ones (the summary, resume): contains()
    # sorts the queries first, against the plain binary search of random queries it replaced
    stored = unique_ids(ids)
    queries = np.concatenate([rng.choice(stored, n // 2), rng.integers(0, 2**63, n - n // 2,
                                                                      dtype=np.int64)
                              .astype(np.uint64)])
    rng.shuffle(queries)

    def plain(q):
        pos = np.minimum(np.searchsorted(stored, q), stored.size - 1)
        return stored[pos] == q

    assert np.array_equal(contains(stored, queries), plain(queries))
    ours, before = best_s(lambda q: contains(stored, q), queries), best_s(plain, queries)
    print(f"membership of {n:,} ids among {stored.size:,}: contains {ours:.3f} s, plain "
          f"search {before:.3f} s, ratio {ours / before:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
