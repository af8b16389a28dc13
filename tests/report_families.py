"""Small grids of every family with a report plug-in, stored the way a sweep stores them, and
their reports built once (shared by the print checks: fonts, labels, LaTeX, browser)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pipeline.engine.batch import run_batch
from pipeline.engine.batch_table import failed_batch_table
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.report.build import build_report
from pipeline.store.manifest import update_manifest
from pipeline.store.part_writer import PartWriter

# experiment -> (grid, params): a few points each, enough for every table and figure
SMALL_GRIDS = {
    "composition": ({"k": [1, 2, 5, 10, 20, 50, 100], "eps": [0.01, 0.1, 1.0]},
                    {"delta_target": 1e-6}),
    "composition_delta": ({"eps": [0.05, 0.2], "k": [10, 100],
                           "eps_total": {"logspace": [-1, 1, 6]}}, {"delta": 0.0}),
    "composition_region": ({"k": [1, 2, 3], "delta": [0.0, 0.1]}, {"eps": 0.4}),
    "composition_hetero": ({"eps_source": ["uniform", "two_level"], "k": [4, 8]},
                           {"delta_target": 1e-6, "pld": False}),
    "lattice": ({"boundary": ["torus", "cylinder", "free"], "L1": [3, 4, 6], "L2": [3]},
                {"base": "square", "insertions": 1}),
    "lattice_limit": ({"insertions": [0, 1]}, {"base": "square"}),
    "clique_graph": ({"zip": [{"graph": ["complete", "petersen"], "size": [5, 10]}],
                      "insertions": [0, 1]}, {}),
    "independent_sets": ({"boundary": ["free", "cylinder", "torus"], "m": [1, 2, 3, 4],
                          "n": [1, 2, 3, 4]}, {"lattice": "488"}),
    "independent_sets_bounds": ({"lattice": ["488", "square"]}, {"p": 1, "q": 2, "k": 2}),
    "random_triangulation": ({"m": [1, 2, 3], "p": [0.2, 0.5, 0.8]}, {"n": 100, "samples": 2}),
    "inferential": ({"zip": [{"graph": ["path", "grid"], "target": ["3", "5"]}],
                     "J": [0.0, 0.3, 0.6], "eps": [0.2, 1.0]}, {"rows": 3, "cols": 3, "n": 5}),
    "inferential_bethe_limit": ({"degree": [3, 4], "J": [0.0, 0.4, 0.8], "eps": [0.1, 1.0]}, {}),
    # both mechanisms: hive's two edge classes x two mechanisms crowded one panel (issue 16)
    "edge_dp": ({"prior": ["er", "hive"], "n": [4, 5],
                 "mechanism": ["laplace_edge_count", "randomized_response"]}, {}),
    "edge_test": ({"n": [4, 10, 30], "eps": [0.5, 1.0]}, {}),
    "low_influence": ({"eps": [0.0, 0.5, 1.0], "zip": [{"mode": ["optimise", "mechanism"],
                                                        "coupling": ["independent", "shared_uniform"]}]},
                      {"graph": "K2", "mechanism": "rr_binary"}),
    "leakage": ({"graph": ["star", "hypercube"], "eps": [0.5, 1.5]}, {"n": 6, "u": 3}),
    "bayes_bounds": ({"family": ["exponential", "beta_binomial"], "N": [1, 3]}, {}),
    "bayes_network": ({"mechanism": ["laplace", "non_private"], "eps": [1.0, 10.0]},
                      {"d": 4, "n_total": 120, "n_train": 30, "repeats": 2}),
    "bayes_regression": ({"b": [1.0, 100.0]}, {"n_total": 300, "repeats": 2}),
}


def store_small(results_dir: Path, name: str) -> int:
    """Store the small grid of ``name`` (plus one failed task) with a manifest record, as a
    sweep would; returns the number of tasks."""
    grid_cfg, params = SMALL_GRIDS[name]
    grid = Grid(get_experiment(name), grid_cfg, params)
    table, _ = run_batch(grid, range(grid.total))
    failed = failed_batch_table(grid, [0], "RuntimeError: synthetic failure for the report")
    failed = failed.cast(table.schema) if failed.schema != table.schema else failed
    path = Path(results_dir) / name
    from pipeline.engine.provenance import provenance_stamp

    exp = get_experiment(name)
    PartWriter(path, "test-run", stamp=provenance_stamp(exp, "test-run")).write(table)
    PartWriter(path, "test-run-retry", stamp=provenance_stamp(exp, "test-run-retry")).write(
        pa.concat_tables([failed]))
    update_manifest(path, {"run_id": "test-run", "status": "finished",
                           "started_at": "2026-01-01T00:00:00Z",
                           "finished_at": "2026-01-01T00:01:00Z", "host": "test",
                           "git": {"commit": "0123abc", "dirty": False},
                           "counts": {"ok": grid.total}, "config": {"grid": grid_cfg,
                                                                    "params": params},
                           "packages": {"pipeline": "test"}})
    return grid.total


def build_all(results_dir: Path, names=None, style: str = "paper") -> dict[str, Path]:
    """Store and report every family; returns experiment -> its _report folder. A report
    function that fails makes build_report return 1: that is a test failure."""
    reports = {}
    for name in names or SMALL_GRIDS:
        store_small(results_dir, name)
        code = build_report(results_dir, name, style=style)
        assert code == 0, f"report of {name} exited {code}"
        reports[name] = Path(results_dir) / name / "_report"
    return reports
