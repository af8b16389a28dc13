"""A grid axis given as a long explicit list on the command line (``grid.x=[v1,...,vn]``):
the time to parse it, against Hydra's parser on the whole list (the baseline, in the same run).

Hydra's visitor finds a list's i-th element by scanning the list's children, so a list of n
values took n^2 steps (39 s for 20,000 before). `pipeline.overrides` now parses long flat lists
a chunk of LIST_CHUNK elements at a time with the same grammar; the values are checked equal.

    python benchmarks/bench_long_list.py           # 20,000 values
    python benchmarks/bench_long_list.py --quick   # 5,000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import best_time  # noqa: E402
from pipeline.overrides import split_node_overrides  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra = OverridesParser.create()
    for n in ([1_000, 5_000] if args.quick else [1_000, 5_000, 20_000]):
        values = [i * 0.5 for i in range(n)]  # floats: 0.0, 0.5, ...
        arg = "grid.x=[" + ",".join(map(str, values)) + "]"
        whole_s, whole = best_time(lambda: hydra.parse_overrides([arg])[0].value(), repeat=1)
        now_s, (_, actions) = best_time(lambda: split_node_overrides([arg]))
        if actions[0][2] != whole or whole != values:
            print(f"FAIL: {n:,} values parsed differently", file=sys.stderr)
            return 1
        print(f"{n:>7,} values: Hydra whole {whole_s:7.3f} s, chunked {now_s:6.3f} s, "
              f"ratio {now_s / whole_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
