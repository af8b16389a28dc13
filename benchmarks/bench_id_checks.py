"""Two steps every scan of a large store takes, against the way they were first made, in the
same run:

* ``well_formed_ids`` (is each stored task id 24 lowercase hex digits?), run on every stored
  row by the closing summary, the resume plan, the code check and load: now read from the
  string buffers in numpy, before by Arrow's regex ``^[0-9a-f]{24}$``;
* the closing summary's count of distinct tasks among the kept ok (and failed) rows: now
  flags over the task numbers the deduplication already computed, before a second
  ``task_numbers`` sort of each subset's id words.

Each answer is checked against the baseline's.

    python benchmarks/bench_id_checks.py           # 4,000,000 ids
    python benchmarks/bench_id_checks.py --quick   # 400,000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import best_time  # noqa: E402
from pipeline.report.summary import _distinct_tasks  # noqa: E402
from pipeline.store.parquet import id_words, task_numbers, well_formed_ids  # noqa: E402


def regex_well_formed(ids: pa.Array) -> pa.Array:
    """The check as first made (the baseline)."""
    return pc.fill_null(pc.match_substring_regex(ids, "^[0-9a-f]{24}$"), False)


def sorted_distinct(head: np.ndarray, tail: np.ndarray) -> int:
    """The distinct count as first made: task numbers of the subset, by a sort."""
    return task_numbers(head, tail)[1] if head.size else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 400_000 if args.quick else 4_000_000
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
    ids = pa.array([f"{a:016x}{b & 0xFFFFFFFF:08x}" for a, b in words])
    damaged = ids.to_pylist()
    for i in range(0, n, 10_007):  # a few hand-edited ids and nulls
        damaged[i] = None if i % 2 else "hand-edited"
    damaged = pa.array(damaged, pa.string())
    head, tail = id_words(ids)
    task, tasks = task_numbers(head, tail)
    ok = rng.random(n) < 0.9
    print(f"{n:,} task ids; best of 3")
    print(f"{'step':<40} {'before s':>9} {'now s':>7} {'now/before':>11}")
    failed = 0
    for name, before_fn, now_fn in (
            ("well_formed_ids, engine-written ids", lambda: regex_well_formed(ids),
             lambda: well_formed_ids(ids)),
            ("well_formed_ids, 0.01% edited or null", lambda: regex_well_formed(damaged),
             lambda: well_formed_ids(damaged)),
            ("distinct tasks among 90% of rows", lambda: sorted_distinct(head[ok], tail[ok]),
             lambda: _distinct_tasks(task[ok], tasks))):
        before, expected = best_time(before_fn)
        now, got = best_time(now_fn)
        print(f"{name:<40} {before:9.3f} {now:7.3f} {now / before:11.3f}")
        same = got.equals(expected) if isinstance(got, pa.Array) else got == expected
        if not same:
            print(f"FAIL: {name}: the answer differs from the baseline's")
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
