"""Every benchmark imports: ``make bench`` is not part of ``make test``, and a helper moved
between benchmarks left bench_summary.py failing at its import (found by running make bench).
Each module is loaded as a script is (its folder's parent on the path), without running it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 20, BENCHMARKS


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_a_benchmark_imports_as_a_script(path):
    # in a fresh interpreter from another folder, as `python benchmarks/bench_x.py` loads it
    code = ("import importlib.util, sys; "
            f"spec = importlib.util.spec_from_file_location('bench_under_test', {str(path)!r}); "
            "module = sys.modules['bench_under_test'] = importlib.util.module_from_spec(spec); "
            f"sys.path.insert(0, {str(path.parent)!r}); "
            "spec.loader.exec_module(module); "
            "assert callable(getattr(module, 'main', None)), 'no main()'")
    proc = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
