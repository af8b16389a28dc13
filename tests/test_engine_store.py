"""Parquet store: atomic parts, resume scan, deduplication, manifest, lock; and batches."""

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import fill_disk
from pipeline.engine.batch import run_batch
from pipeline.engine.batch_table import failed_batch_table, result_schema
from pipeline.engine.grid import Grid
from pipeline.engine.resume import plan_sweep
from pipeline.experiments.base import get_experiment
from pipeline.store.manifest import StoreLocked, SweepLock, read_manifest, update_manifest
from pipeline.store.parquet import clean_temp_files, deduplicate, load, stored_ids
from pipeline.store.part_writer import PartWriter


@pytest.fixture
def grid():
    return Grid(get_experiment("calibration"),
                {"x": {"range": [0, 10]}}, {"work_us": 0.0, "fail_every": 4})


def test_run_batch_types_rows_and_records_failures(grid):
    table, seconds = run_batch(grid, range(10))
    assert table.schema.equals(result_schema(grid), check_metadata=False)
    df = table.to_pandas()
    assert list(df["x"]) == list(range(10))
    failed = df[df.status == "failed"]
    assert list(failed["x"]) == [0, 4, 8]
    assert failed["error"].str.contains("ValueError: calibration failure requested").all()
    assert failed["value"].isna().all()
    ok = df[df.status == "ok"]
    assert (ok["value"] == ok["x"]).all() and ok["error"].isna().all()
    assert seconds > 0 and (df["finished_at"] >= df["started_at"]).all()


def test_a_value_of_the_wrong_type_fails_its_task_only():
    from pipeline.experiments.base import Experiment, Param

    def run(p, seed):
        return {"out": "not a float" if p["i"] == 1 else 1.5}

    exp = Experiment("badtype", 1, [Param("i", int, 0)], {"out": pa.float64()}, run)
    table, _ = run_batch(Grid(exp, {"i": [0, 1, 2]}, {}), range(3))
    df = table.to_pandas()
    assert list(df.status) == ["ok", "failed", "ok"]
    assert "does not fit declared type double" in df.error[1]


def test_a_fractional_float_in_an_integer_column_fails_its_task_not_truncated():
    """pyarrow converts 1.5 into an int64 column as 1: a kernel returning a float where it
    declared an integer had 1.5 stored as 1, -0.9 as 0, with status ok. Such a value now
    fails its task; a whole float (2.0) is its integer and NaN a null, as in other columns,
    and an integer beyond int64 fails naming the exact-integer helpers."""
    import numpy as np

    from pipeline.experiments.base import Experiment, Param

    returns = {0: 3, 1: 1.5, 2: np.float64(-0.9), 3: 2.0, 4: float("nan"), 5: 2**70,
               6: np.int32(7)}

    def run(p, seed):
        return {"out": returns[p["i"]]}

    exp = Experiment("intcol", 1, [Param("i", int, 0)], {"out": pa.int64()}, run)
    df = run_batch(Grid(exp, {"i": list(returns)}, {}), range(len(returns)))[0].to_pandas()
    assert list(df.status) == ["ok", "failed", "failed", "ok", "ok", "failed", "ok"]
    assert df.out.tolist()[0] == 3 and df.out.tolist()[3] == 2 and df.out.tolist()[6] == 7
    assert df.out.isna().tolist() == [False, True, True, False, True, True, False]
    assert ("TypeError: column 'out' value 1.5 does not fit declared type int64: 1.5 is not a "
            "whole number (an integer column would truncate it)") == df.error[1]
    assert "np.float64(-0.9) is not a whole number" in df.error[2]
    assert df.error[5].endswith("an integer that may exceed it is stored exactly as "
                                "exact_int(n) in a pa.string() column, with log_of_int(n) in a "
                                "float log_* column (experiments/base.py)")


def test_parts_resume_scan_and_retry_plan(tmp_path, grid):
    writer = PartWriter(tmp_path, "run1")
    writer.write(run_batch(grid, range(0, 6))[0])
    assert not list(tmp_path.glob(".*.tmp"))
    ok, failed = stored_ids(tmp_path)
    assert len(ok) == 4 and len(failed) == 2
    expected_ok = sorted(int(grid.task_id(i)[:16], 16) for i in (1, 2, 3, 5))
    assert ok.tolist() == expected_ok  # the vectorised hex decoding matches int(id, 16)
    plan = plan_sweep(grid, tmp_path)
    assert list(plan.pending) == [6, 7, 8, 9] and plan.done_ok == 4 and plan.done_failed == 2
    plan = plan_sweep(grid, tmp_path, retry_failed=True)
    assert list(plan.pending) == [0, 4, 6, 7, 8, 9]


def test_dedup_prefers_ok_and_keeps_multi_row_tasks(tmp_path):
    grid = Grid(get_experiment("calibration"), {"x": [1, 2]}, {"work_us": 0.0, "rows": 3})
    failed = failed_batch_table(grid, [0, 1], "lost")
    ok_table, _ = run_batch(grid, [0])
    writer = PartWriter(tmp_path, "r")
    writer.write(failed)
    writer.write(ok_table)
    df = load(tmp_path.parent, tmp_path.name)
    assert sorted(df[df.x == 1].row_index) == [0, 1, 2]
    assert set(df[df.x == 1].status) == {"ok"}
    assert list(df[df.x == 2].status) == ["failed"]
    assert len(load(tmp_path.parent, tmp_path.name, status="ok")) == 3
    raw = pd.read_parquet(tmp_path)  # the user contract: one table from the folder
    assert len(raw) == 2 + 3


def test_temp_files_of_killed_writers_are_ignored_and_cleaned(tmp_path, grid):
    PartWriter(tmp_path, "r").write(run_batch(grid, [1])[0])
    (tmp_path / ".part-r-000009.parquet.tmp").write_bytes(b"PAR1 half written")
    assert len(pd.read_parquet(tmp_path)) == 1
    assert clean_temp_files(tmp_path) == 1


def test_manifest_temp_files_of_killed_writers_are_cleaned(tmp_path, grid):
    """A kill -9 during a manifest write (the heartbeat, every 5 s) left
    ._manifest.json.PID.tmp, one per kill under its own pid, as large as the manifest; the
    next sweep (clean_temp_files) removed only part temp files, so they piled up for ever."""
    import os
    import time

    update_manifest(tmp_path, {"run_id": "a", "status": "finished"})
    dead = tmp_path / "._manifest.json.4242.tmp"
    dead.write_text('{"runs": [')
    old = time.time() - 3600
    os.utime(dead, (old, old))
    live = tmp_path / "._manifest.json.4243.tmp"  # a writer at work right now: not touched
    live.write_text("{")
    assert clean_temp_files(tmp_path) == 1
    assert not dead.exists() and live.exists()
    assert read_manifest(tmp_path)["runs"][0]["run_id"] == "a"


def test_manifest_records_runs_by_id(tmp_path):
    update_manifest(tmp_path, {"run_id": "a", "status": "running"})
    update_manifest(tmp_path, {"run_id": "a", "status": "finished"})
    update_manifest(tmp_path, {"run_id": "b", "status": "running"})
    m = read_manifest(tmp_path)
    assert [r["status"] for r in m["runs"]] == ["finished", "running"] and m["latest"] == "b"


def test_lock_is_exclusive(tmp_path):
    with SweepLock(tmp_path):
        with pytest.raises(StoreLocked, match="another sweep"):
            SweepLock(tmp_path).__enter__()
    with SweepLock(tmp_path):
        pass


def test_deduplicate_keeps_latest_of_repeated_rows():
    t0, t1 = pd.Timestamp("2026-01-01", tz="UTC"), pd.Timestamp("2026-01-02", tz="UTC")
    df = pd.DataFrame({"task_id": ["a", "a", "b"], "row_index": [0, 0, 0],
                       "status": ["ok", "ok", "failed"], "v": [1, 2, 3],
                       "finished_at": [t0, t1, t0]})
    out = deduplicate(df)
    assert out.set_index("task_id").v.to_dict() == {"a": 2, "b": 3}


def test_deduplicate_keeps_storage_order_of_rows_written_twice():
    """deduplicate_table documents its row order as storage order; where rows were written
    twice it returned the kept rows in finished_at order instead (task b, finished first,
    came before task a, stored first)."""
    t0, t1 = pd.Timestamp("2026-01-02", tz="UTC"), pd.Timestamp("2026-01-01", tz="UTC")
    df = pd.DataFrame({"task_id": ["a", "b", "a", "b"], "row_index": [0, 0, 0, 0],
                       "status": ["ok"] * 4, "v": [1, 2, 3, 4],
                       "finished_at": [t0, t1, t0, t1]})
    out = deduplicate(df)
    assert out.task_id.tolist() == ["a", "b"] and out.v.tolist() == [3, 4]


def test_part_files_are_valid_parquet_with_zstd(tmp_path, grid):
    path = PartWriter(tmp_path, "r").write(run_batch(grid, range(3))[0])
    meta = pq.read_metadata(path)
    assert meta.num_rows == 3
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_dry_run_count_agrees_with_the_hashing_plan(tmp_path):
    from pipeline.engine.resume import count_done

    exp = get_experiment("calibration")
    stored = Grid(exp, {"x": {"range": [0, 30]}, "zip": [{"rows": [1, 2], "scale": [1.0, 0.5]}]},
                  {"work_us": 0.0, "fail_every": 7})
    PartWriter(tmp_path, "r").write(run_batch(stored, range(0, stored.total, 2))[0])
    other = Grid(exp, {"x": [3]}, {"work_us": 5.0})  # same x, different fixed value: no match
    PartWriter(tmp_path, "s").write(run_batch(other, [0])[0])
    for grid in (stored,
                 Grid(exp, {"x": {"range": [10, 50, 3]}, "zip": [{"rows": [2, 1], "scale": [0.5, 1.0]}]},
                      {"work_us": 0.0, "fail_every": 7}),
                 Grid(exp, {"x": [0, 4, 14, 28]}, {"work_us": 0.0, "fail_every": 7, "rows": 1,
                                                    "scale": 1.0})):
        plan = plan_sweep(grid, tmp_path)
        assert count_done(grid, tmp_path) == (plan.done_ok, plan.done_failed)
        assert plan.done_ok > 0 and plan.done_failed > 0


def test_duplicate_and_negative_zero_grid_values_are_one_point():
    grid = Grid(get_experiment("calibration"), {"x": [1, 1, 2], "scale": [0.0, -0.0]}, {})
    assert grid.total == 2 and grid.duplicates_dropped == {"x": 1, "scale": 1}
    assert str(grid.point(0)["scale"]) == "0.0"


def test_resume_counts_of_list_parameters_agree_with_hashing(tmp_path):
    """Stored list values come back as numpy arrays of numpy scalars, whose fragments read
    'np.float64(0.1)': no stored point of a list-typed parameter matched, and a rerun of a
    complete composition_hetero sweep over eps_list said '0 already done, 4 to run' (and
    started a cluster to run nothing); the dry run said the same."""
    from pipeline.engine.resume import count_done

    exp = get_experiment("composition_hetero")
    params = {"eps_source": "list", "pld": False}
    axis = Grid(exp, {"eps_list": [[0.1, 0.2], [0.3]], "delta_target": [1e-6, 1e-3]}, params)
    table = run_batch(axis, range(3))[0]
    assert set(table["status"].to_pylist()) == {"ok"}
    PartWriter(tmp_path, "r").write(table)
    fixed = Grid(exp, {"delta_target": [1e-6, 1e-3]}, {**params, "eps_list": [0.1, 0.2]})
    zipped = Grid(exp, {"zip": [{"eps_list": [[0.1, 0.2], [0.3]],
                                 "delta_target": [1e-6, 1e-3]}]}, params)
    for grid, done in ((axis, 3), (fixed, 2), (zipped, 1)):
        ok_ids, _ = stored_ids(tmp_path)
        hashed = sum(int(grid.task_id(i)[:16], 16) in set(ok_ids.tolist())
                     for i in range(grid.total))
        assert hashed == done
        assert count_done(grid, tmp_path) == (done, 0)
        plan = plan_sweep(grid, tmp_path)
        assert plan.pending.size == grid.total - done == len(list(plan.pending))


@pytest.mark.parametrize("step", [1, -1, 3])
def test_resume_count_of_a_range_of_ints_beyond_2_53_is_exact(tmp_path, step):
    """A range axis was matched as floats: above 2^53 neighbouring ints round together, so
    the stored points x = 2^60 .. 2^60+3 counted as points of the next range 2^60+4 .. +7,
    and its sweep said '4 tasks in grid, 4 already done, 0 to run' and ran nothing (exit 0)."""
    from pipeline.engine.resume import count_done

    exp = get_experiment("calibration")
    base = 2**60
    first = Grid(exp, {"x": {"range": [base, base + 4]}}, {"work_us": 0.0})
    PartWriter(tmp_path, "r").write(run_batch(first, range(4))[0])
    ends = [base + 4, base + 16] if step > 0 else [base + 15, base + 3]
    nxt = Grid(exp, {"x": {"range": [*ends, step]}}, {"work_us": 0.0})
    assert count_done(nxt, tmp_path) == (0, 0)
    plan = plan_sweep(nxt, tmp_path)
    assert (plan.done_ok, plan.pending.size) == (0, nxt.total)
    assert sorted(plan.pending) == list(range(nxt.total))
    # the stored points themselves still count, also from a range that strides over them
    over = Grid(exp, {"x": {"range": [base - 6, base + 4, 2]}}, {"work_us": 0.0})
    assert count_done(over, tmp_path) == (2, 0)  # 2^60 and 2^60 + 2
    assert count_done(first, tmp_path) == (4, 0) == (plan_sweep(first, tmp_path).done_ok, 0)


@pytest.mark.parametrize("spec", [{"linspace": [0, 1, 10**6]}, {"linspace": [1, 0, 10**6]},
                                  [1.0, 1e200, float("inf")]])  # (logspace refuses inf now)
def test_resume_count_of_a_long_float_axis_is_compact(tmp_path, spec):
    """Resume counts matched a float axis with isin over a list of its Python floats: about
    6x the axis in memory (a 2 x 10^7-value linspace took 1 GiB more on every resume)."""
    import tracemalloc

    from pipeline.engine.resume import count_done

    grid = Grid(get_experiment("calibration"), {"scale": spec}, {"work_us": 0.0})
    stored = sorted({0, 1, grid.total - 1})
    PartWriter(tmp_path, "r").write(run_batch(grid, stored)[0])
    tracemalloc.start()
    try:
        counts = count_done(grid, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    ok_ids, _ = stored_ids(tmp_path)
    assert counts == (len(stored), 0) == (ok_ids.size, 0)
    assert peak < 2 * 8 * grid.total + 2**20, peak  # at most a sorted copy of the axis


def test_resume_of_a_folder_written_by_a_version_without_a_parameter(tmp_path):
    """Parts of an older experiment version are kept by design (verify accepts them), and a
    version that added a parameter has no column for it in those parts: the resume count
    went on matching without the column and raised KeyError, so every sweep and dry run of
    the folder ended in a traceback. None of their rows is a point of the current grid."""
    from pipeline.engine.resume import count_done
    from pipeline.store.parquet import checked_schemas, experiment_dir

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 10]}}, {"work_us": 0.0})
    folder = experiment_dir(tmp_path, "calibration")
    # as version 1 wrote it: no hang_at column, other ids (here: those of another work_us)
    before = Grid(exp, {"x": {"range": [0, 10]}}, {"work_us": 1.0})
    old = run_batch(before, [1, 2])[0].drop_columns(["hang_at"])
    old = old.set_column(old.schema.get_field_index("experiment_version"), "experiment_version",
                         pa.array([exp.version - 1] * old.num_rows, pa.int64()))
    PartWriter(folder, "old").write(old.replace_schema_metadata(
        {**old.schema.metadata, b"version": str(exp.version - 1).encode()}))
    checked_schemas(folder)  # kept by design: not foreign
    assert count_done(grid, folder) == (0, 0)
    plan = plan_sweep(grid, folder)
    assert (plan.done_ok, plan.pending.size) == (0, 10)
    assert sorted(plan.pending) == list(range(10))
    PartWriter(folder, "new").write(run_batch(grid, [3, 4, 5])[0])  # the old rows: nulls
    assert count_done(grid, folder) == (3, 0)
    assert sorted(plan_sweep(grid, folder).pending) == [0, 1, 2, 6, 7, 8, 9]


@pytest.mark.parametrize("axis", [{"copy_p": [None, 0.6]}, {"graph_seed": [None, 3]},
                                  {"zip": [{"copy_p": [None, 0.6], "graph_seed": [None, 3]}]}])
def test_resume_counts_of_an_axis_with_an_unset_optional_value(tmp_path, axis):
    """An axis of an optional parameter with null among its values (inferential's copy_p or
    graph_seed): stored nulls read back as NaN, which isin([None, ...]) missed, so the
    points with the parameter unset were never counted done (a rerun of the complete sweep
    said 'to run: 2', the dry run too)."""
    import warnings

    from pipeline.engine.resume import count_done

    params = {"graph": "path", "n": 5, "prior": "ising", "mechanism": "worst_case",
              "target": "0"}
    grid = Grid(get_experiment("inferential"), {**axis, "eps": [0.1, 1.0]}, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = run_batch(grid, range(grid.total))[0]
    assert set(table["status"].to_pylist()) == {"ok"}
    PartWriter(tmp_path, "r").write(table)
    assert count_done(grid, tmp_path) == (grid.total, 0) == (stored_ids(tmp_path)[0].size, 0)
    plan = plan_sweep(grid, tmp_path)
    assert plan.pending.size == 0 == len(list(plan.pending))


@pytest.mark.parametrize("spelling", ["zip", "fixed", "range"])
def test_resume_count_of_an_optional_int_beyond_2_53_is_exact(tmp_path, spelling):
    """An int parameter with nulls stored (inferential's graph_seed, unset at some points) is
    read back as floats, and a zip group's key frame turned its None into a float too: above
    2^53 the stored graph_seed 2^60 then matched 2^60 + 1, so a sweep of the new seed said
    'already done' and ran nothing."""
    import warnings

    from pipeline.engine.resume import count_done

    exp = get_experiment("inferential")
    params = {"graph": "path", "n": 5, "prior": "ising", "mechanism": "worst_case",
              "target": "0", "eps": 0.1}
    stored = Grid(exp, {"zip": [{"copy_p": [None, 0.6], "graph_seed": [None, 2**60]}]}, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = run_batch(stored, range(stored.total))[0]
    assert set(table["status"].to_pylist()) == {"ok"}
    PartWriter(tmp_path, "r").write(table)
    seed = 2**60 + 1
    grid = {"zip": Grid(exp, {"zip": [{"copy_p": [None, 0.6], "graph_seed": [None, seed]}]},
                        params),
            "fixed": Grid(exp, {}, {**params, "copy_p": 0.6, "graph_seed": seed}),
            "range": Grid(exp, {"graph_seed": {"range": [seed, seed + 2]}},
                          {**params, "copy_p": 0.6})}[spelling]
    done = 1 if spelling == "zip" else 0  # the zip's (None, None) point is stored
    assert count_done(grid, tmp_path) == (done, 0)
    plan = plan_sweep(grid, tmp_path)
    assert plan.pending.size == grid.total - done == len(list(plan.pending))
    assert count_done(stored, tmp_path) == (2, 0)  # the stored points still count


def test_a_column_whose_type_changed_with_the_version_still_loads(tmp_path):
    """Bumping the version may change a column's type (an int64 count that became an exact
    decimal string): verify accepts the older version's parts, and load, the report, export
    and compaction must read the folder too, the newest version's type winning (older values
    cast to it, exactly). They raised ArrowTypeError ('Unable to merge: Field count has
    incompatible types') for the whole folder, version="latest" included."""
    import dataclasses

    import pipeline
    from pipeline.report.build import build_report
    from pipeline.report.export import export_package
    from pipeline.store.compaction import compact
    from pipeline.store.integrity import verify_store

    exp = get_experiment("independent_sets")
    params = {"lattice": "488", "n": 2}
    columns = {**exp.columns, "count": pa.int64()}  # version 0 stored counts as int64
    old = dataclasses.replace(exp, version=0, columns=columns,
                              run=lambda p, s: {**exp.run(p, s), "count": int(exp.run(p, s)["count"])})
    folder = tmp_path / "independent_sets"
    PartWriter(folder, "20260101T000000Z-aaaaaa").write(
        run_batch(Grid(old, {"m": [1, 2]}, params), range(2))[0])
    PartWriter(folder, "20260102T000000Z-bbbbbb").write(
        run_batch(Grid(exp, {"m": [1, 2, 3]}, params), range(3))[0])
    assert verify_store(folder).ok

    latest = pipeline.load(tmp_path, "independent_sets", version="latest")
    assert sorted(latest["count"]) == ["7144259", "74753", "779"]
    everything = pipeline.load(tmp_path, "independent_sets")
    assert len(everything) == 5
    assert sorted(everything.loc[everything.experiment_version == 0, "count"]) == ["74753", "779"]
    assert build_report(tmp_path, "independent_sets") == 0
    from pipeline.report.summary import summary_table

    # the sweep's closing summary: this version's rows, the older ones on a line apart
    summary = summary_table(folder, exp).splitlines()
    assert summary[0].startswith(f"stored: 3 rows of version {exp.version} ")
    assert summary[1].startswith("and 2 rows of other versions")
    export_package(tmp_path, "independent_sets", tmp_path / "pkg", "parquet")
    assert compact(folder).rewritten
    pd.testing.assert_frame_equal(pipeline.load(tmp_path, "independent_sets"), everything)


def test_planning_reads_a_folder_whose_column_type_changed_with_the_version(tmp_path):
    """The sweep's own reads of the store (resume counts, the stale-code check) merged the
    part schemas strictly: on a folder that load reads (test above), a sweep or dry run ended
    in an ArrowTypeError traceback before planning."""
    import dataclasses

    from pipeline.engine.provenance import stale_points
    from pipeline.engine.resume import count_done

    exp = get_experiment("independent_sets")
    params = {"lattice": "488", "n": 2}
    old = dataclasses.replace(exp, version=0, columns={**exp.columns, "count": pa.int64()},
                              run=lambda p, s: {**exp.run(p, s), "count": int(exp.run(p, s)["count"])})
    folder = tmp_path / "independent_sets"
    PartWriter(folder, "20260101T000000Z-aaaaaa").write(
        run_batch(Grid(old, {"m": [1, 2]}, params), range(2))[0])
    PartWriter(folder, "20260102T000000Z-bbbbbb").write(
        run_batch(Grid(exp, {"m": [1, 2]}, params), range(2))[0])
    grid = Grid(exp, {"m": [1, 2, 3]}, params)
    assert count_done(grid, folder) == (2, 0)  # the version-0 rows are other task ids
    assert list(plan_sweep(grid, folder).pending) == [2]
    stale, others = stale_points(grid, folder, "another-code")
    assert stale.tolist() == sorted(int(grid.task_id(i)[:16], 16) for i in (0, 1)) and others


def test_stale_points_are_matched_by_value_without_hashing_the_grid(tmp_path, monkeypatch):
    """After an edit, a resume looks for the grid's points stored by other code. It hashed
    every point of the grid to find them (about 3 s per 10^6 points, 50 minutes for 10^9,
    before the sweep could start); now the stored parameters are matched against the grid,
    and rerun_changed puts them back in the lazy plan by id."""
    from pipeline.engine.provenance import provenance_stamp, stale_points
    from pipeline.engine.resume import plan_sweep

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 10**7]}}, {"work_us": 0.0})
    other_grid = Grid(exp, {"x": [0, 1]}, {"work_us": 0.0, "scale": 2.0})  # not this grid's
    folder = tmp_path / "calibration"

    def write(g, indices, run_id, code):
        marks = provenance_stamp(exp, run_id)
        marks["code_id"] = (code, marks["code_id"][1])
        PartWriter(folder, run_id, stamp=marks).write(run_batch(g, indices)[0])

    write(grid, [0, 1, 2, 5], "20260101T000000Z-aaaaaa", "old-code")
    write(grid, [2], "20260102T000000Z-bbbbbb", "new-code")  # point 2 was rerun since
    write(other_grid, [0, 1], "20260101T000000Z-cccccc", "older-code")
    want = sorted(int(grid.task_id(i)[:16], 16) for i in (0, 1, 5))
    plan = plan_sweep(grid, folder)
    hashed = []
    real = Grid.task_id
    monkeypatch.setattr(Grid, "task_id", lambda self, i: hashed.append(i) or real(self, i))
    ids, codes = stale_points(grid, folder, "new-code")
    assert ids.tolist() == want and codes == ["old-code"] and hashed == []
    plan.pending.include(ids)  # rerun_changed=true
    assert plan.pending.take(6).tolist() == [0, 1, 3, 4, 5, 6]  # only point 2 is skipped
    assert len(hashed) < 10**5  # one chunk of the lazy scan, not the grid


def test_stale_points_and_counts_of_a_fixed_nan_parameter(tmp_path):
    """A fixed NaN matched no stored row (NaN != NaN; the store writes it as null): its
    points were never counted done, nor found stale after a code change."""
    from pipeline.engine.provenance import provenance_stamp, stale_points
    from pipeline.engine.resume import count_done

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 6]}}, {"work_us": 0.0, "scale": float("nan")})
    other = Grid(exp, {"x": {"range": [0, 6]}}, {"work_us": 0.0})  # scale 1.0: not this grid's
    folder = tmp_path / "calibration"
    for g, run_id in ((grid, "20260101T000000Z-aaaaaa"), (other, "20260101T000000Z-bbbbbb")):
        marks = provenance_stamp(exp, run_id)
        marks["code_id"] = ("old-code", marks["code_id"][1])
        PartWriter(folder, run_id, stamp=marks).write(run_batch(g, [0, 1, 4])[0])
    assert count_done(grid, folder) == (3, 0)
    assert sorted(plan_sweep(grid, folder).pending) == [2, 3, 5]
    ids, codes = stale_points(grid, folder, "new-code")
    assert ids.tolist() == sorted(int(grid.task_id(i)[:16], 16) for i in (0, 1, 4))
    assert codes == ["old-code"]


def test_a_manifest_write_on_a_full_disk_leaves_no_temp_file(small_disk):
    """The manifest is written to a temp file and renamed over: on a full disk the write
    failed half way and left an empty '._manifest.json.PID.tmp' behind, which nothing
    removed. The manifest itself stays as it was. (A real full tmpfs.)"""
    import errno

    from pipeline.store.manifest import read_manifest, update_manifest

    update_manifest(small_disk, {"run_id": "a", "status": "finished"})
    before = read_manifest(small_disk)
    fill_disk(small_disk)  # to the last byte
    with pytest.raises(OSError) as err:
        update_manifest(small_disk, {"run_id": "b", "status": "running", "note": "x" * 8192})
    assert err.value.errno == errno.ENOSPC
    assert read_manifest(small_disk) == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["_filler", "_manifest.json"]


def test_the_manifest_reserve_gives_the_last_record_room_on_a_full_disk(small_disk):
    """The disk that stops a sweep refused its last record too, and `status` then read the
    crash as "killed". The sweep sets space aside at its start; on a full disk the record is
    written once more after giving it back. (A real full tmpfs.)"""
    import errno

    from pipeline.store.manifest import (MANIFEST_RESERVE, read_manifest, release_manifest_space,
                                         reserve_manifest_space, update_manifest,
                                         update_manifest_even_if_full)

    update_manifest(small_disk, {"run_id": "a", "status": "running"})
    assert reserve_manifest_space(small_disk) is None
    assert (small_disk / MANIFEST_RESERVE).stat().st_blocks * 512 >= 1 << 20  # allocated
    fill_disk(small_disk)  # to the last byte
    crashed = {"run_id": "a", "status": "crashed", "error": "OSError: " + "x" * 8192}
    with pytest.raises(OSError) as err:  # the plain write is refused
        update_manifest(small_disk, crashed)
    assert err.value.errno == errno.ENOSPC
    update_manifest_even_if_full(small_disk, crashed)
    assert read_manifest(small_disk)["runs"] == [crashed]
    assert not (small_disk / MANIFEST_RESERVE).exists()
    # given back once: a second refusal is the disk's error, not a loop
    with pytest.raises(OSError) as err:
        update_manifest_even_if_full(small_disk, {**crashed, "error": "y" * 2_000_000})
    assert err.value.errno == errno.ENOSPC and not release_manifest_space(small_disk)
    # a disk without the room for a reserve: no reserve, nothing left behind
    assert reserve_manifest_space(small_disk) == "full"
    assert not (small_disk / MANIFEST_RESERVE).exists()


def test_the_manifest_reserve_without_fallocate_and_its_release_never_raises(tmp_path,
                                                                               monkeypatch):
    """A filesystem without fallocate gets real bytes (random: compression must not fold
    them away). Releasing runs as every sweep ends: an error there (a disk gone read-only)
    replaced the sweep's outcome with a traceback and exit 2."""
    import errno
    import os
    from pathlib import Path

    from pipeline.store.manifest import (MANIFEST_RESERVE, release_manifest_space,
                                         reserve_manifest_space)

    def no_fallocate(*args):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", no_fallocate)
    assert reserve_manifest_space(tmp_path) is None
    data = (tmp_path / MANIFEST_RESERVE).read_bytes()
    assert len(data) == 1 << 20 and len(set(data[:4096])) > 200  # not a run of one byte
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: type("S", (), {
        "st_blocks": 8, "st_size": real_fstat(fd).st_size})())  # a file stored as a hole
    assert reserve_manifest_space(tmp_path) == "not allocated"
    assert not (tmp_path / MANIFEST_RESERVE).exists()
    monkeypatch.undo()
    assert reserve_manifest_space(tmp_path) is None

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "unlink", read_only)
    assert release_manifest_space(tmp_path) is False


def test_a_buffered_writer_on_a_full_disk_counts_the_rows_it_could_not_write(small_disk):
    """The sweep reports what a full disk cost (``PartWriter.unwritten_rows``): rows of the
    buffer the background writer failed on, and those given to it after (refused)."""
    from pipeline.store.part_writer import WriterFailed

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 300]}}, {"work_us": 0.0})
    writer = PartWriter(small_disk / "calibration", "run1", flush_rows=100)
    writer.write(run_batch(grid, range(0, 100))[0])  # a part, handed off
    writer.flush()
    assert (writer.seq, writer.rows, writer.unwritten_rows) == (1, 100, 0)
    fill_disk(small_disk)  # to the last byte
    writer.write(run_batch(grid, range(100, 200))[0])  # handed off: fails in the background
    with pytest.raises(WriterFailed, match="No space left on device"):
        writer.flush()
    with pytest.raises(WriterFailed):
        writer.write(run_batch(grid, range(200, 250))[0])
    with pytest.raises(WriterFailed):
        writer.close()
    assert (writer.seq, writer.rows, writer.unwritten_rows) == (1, 100, 150)
    assert len(pd.read_parquet(small_disk / "calibration")) == 100  # the part on disk is whole


def test_a_run_log_on_a_full_disk_warns_once_instead_of_a_traceback_per_line(small_disk,
                                                                               capsys):
    """logging prints '--- Logging error ---' and a traceback for every line a FileHandler
    cannot write: on a full disk, the terminal of a sweep stopping on it filled with them,
    and closing the log raised the flush's OSError over the sweep's own outcome."""
    import logging

    from pipeline.engine.progress import log_path, run_log

    log_path(small_disk, "RUN").parent.mkdir(parents=True)
    log_path(small_disk, "RUN").touch()
    fill_disk(small_disk)  # to the last byte
    with run_log(small_disk, "RUN"):
        for i in range(300):  # 30 KB: more than the page the file may still have
            logging.getLogger("pipeline").warning("line %d %s", i, "x" * 90)
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err, err[:2000]
    assert err.count("warning: the run log") == 1, err[:2000]
    assert f"{log_path(small_disk, 'RUN')} cannot be written (No space left on device)" in err


def test_a_run_log_warns_again_when_a_different_error_follows(small_disk, capsys):
    """After the first refused line (a full disk), a later different error (the file size
    limit, EFBIG) was silent: both are warned of, each once."""
    import logging
    import resource
    import signal

    from pipeline.engine.progress import log_path, run_log

    log = logging.getLogger("pipeline")
    log_path(small_disk, "RUN").parent.mkdir(parents=True)
    log_path(small_disk, "RUN").touch()
    fill_disk(small_disk)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    xfsz = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the limit ends the process
    try:
        with run_log(small_disk, "RUN") as path:
            for i in range(100):
                log.warning("line %d %s", i, "x" * 90)
            (small_disk / "_filler").unlink()  # space again, but now a file size limit
            resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size, limits[1]))
            for i in range(100):
                log.warning("line %d %s", i, "x" * 90)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, xfsz)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[:2000]
    assert err.count("warning: the run log") == 2, err[:2000]
    assert "(No space left on device)" in err and "(File too large)" in err, err[:2000]


def test_a_held_lock_knows_when_its_folder_is_moved_renamed_or_removed(tmp_path):
    import shutil

    from pipeline.store.manifest import FolderMoved

    with SweepLock(tmp_path / "a" / "calibration") as lock:
        lock.check_in_place()  # in place: nothing raised
        (tmp_path / "b").mkdir()
        (tmp_path / "a" / "calibration").rename(tmp_path / "b" / "calibration")
        with pytest.raises(FolderMoved, match=f"moved to {tmp_path / 'b' / 'calibration'} .*"
                                              f"results_dir={tmp_path / 'b'}"):
            lock.check_in_place()
        (tmp_path / "b" / "calibration").rename(tmp_path / "b" / "other")
        with pytest.raises(FolderMoved, match="rename it back to calibration .*"
                                              f"results_dir={tmp_path / 'b'}"):
            lock.check_in_place()
        (tmp_path / "a" / "calibration").mkdir()  # an empty folder of the same name: not it
        with pytest.raises(FolderMoved):
            lock.check_in_place()
        shutil.rmtree(tmp_path / "a" / "calibration")
        shutil.rmtree(tmp_path / "b" / "other")
        with pytest.raises(FolderMoved, match="was removed while the sweep ran"):
            lock.check_in_place()
    with SweepLock(tmp_path / "c") as lock:  # the folder stays, its lock file is deleted
        (tmp_path / "c" / ".lock").unlink()
        with pytest.raises(FolderMoved, match="lock file .* was deleted while the sweep ran"):
            lock.check_in_place()
    lock.check_in_place()  # let go: nothing to check


def test_stale_points_judge_each_task_by_its_latest_attempt_as_load_does(tmp_path):
    """Code A computed the points, an edit (code B) recomputed two of them with
    rerun_changed=true, then the edit was reverted (code A again). load returns B's rows for
    those two (each task's latest attempt), but the stale check counted a task current as
    soon as any of its ok rows had the current code_id: it found nothing to warn about or
    rerun. A compaction keeps only the latest attempts, and then the same check found both:
    resume differed before and after the compaction."""
    from pipeline.engine.provenance import provenance_stamp, stale_points
    from pipeline.store.compaction import compact

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 6]}}, {"work_us": 0.0})
    folder = tmp_path / "calibration"

    def write(indices, run_id, code):
        marks = provenance_stamp(exp, run_id)
        marks["code_id"] = (code, marks["code_id"][1])
        PartWriter(folder, run_id, stamp=marks).write(run_batch(grid, indices)[0])

    write(range(6), "20260101T000000Z-aaaaaa", "code-a")
    write([1, 4], "20260102T000000Z-bbbbbb", "code-b")  # recomputed later, by code B
    latest = load(tmp_path, "calibration")
    assert sorted(latest.loc[latest.code_id == "code-b", "x"]) == [1, 4]
    want = sorted(int(grid.task_id(i)[:16], 16) for i in (1, 4))
    ids, codes = stale_points(grid, folder, "code-a")  # code A is current again
    assert ids.tolist() == want and codes == ["code-b"]
    assert compact(folder).rewritten
    ids, codes = stale_points(grid, folder, "code-a")
    assert ids.tolist() == want and codes == ["code-b"]


def test_load_keeps_integers_exact_beside_the_nulls_of_failed_rows(tmp_path, grid):
    """A failed point's outputs are null: pandas held an integer column with nulls as float64,
    so 3**39 came back as 4052555153018976256 (11 less). ``load`` gives nullable Int64."""
    table, _ = run_batch(grid, range(10))  # points 0, 4, 8 fail (fail_every=4)
    ok = pa.array([s == "ok" for s in table["status"].to_pylist()])
    exact = [3**39 + i if good else None for i, good in enumerate(ok.to_pylist())]
    PartWriter(tmp_path / "calibration", "r").write(
        table.append_column("count", pa.array(exact, pa.int64())))
    df = load(tmp_path, "calibration").sort_values("x")
    assert str(df["count"].dtype) == "Int64"
    assert [None if pd.isna(v) else int(v) for v in df["count"]] == exact
    assert df["x"].dtype == "int64"  # no nulls: plain int64, as before
    oks = load(tmp_path, "calibration", status="ok")
    assert oks["count"].dtype == "int64" and sorted(oks["count"]) == sorted(
        v for v in exact if v is not None)
    from pipeline.report.core import ok_rows

    assert ok_rows(df)["count"].dtype == "int64"
    assert int(ok_rows(df)["count"].max()) == 3**39 + 9


def test_load_of_every_version_warns_that_points_repeat(tmp_path):
    """Rows of two versions of one point are two rows: load() without version= says so (a
    researcher's mean over the table counted each point twice), and version='latest' does not."""
    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 3]}}, {"work_us": 0.0})
    table, _ = run_batch(grid, range(3))
    old = table.set_column(table.schema.get_field_index("experiment_version"),
                           "experiment_version", pa.array([exp.version - 1] * 3, pa.int64()))
    old = old.set_column(old.schema.get_field_index("task_id"), "task_id",
                         pa.array([t + "-old" for t in table["task_id"].to_pylist()]))
    PartWriter(tmp_path / "calibration", "r").write(old)
    PartWriter(tmp_path / "calibration", "s").write(table)
    import warnings

    import pipeline

    with pytest.warns(UserWarning, match=r"2 experiment versions .*version='latest'"):
        assert len(pipeline.load(tmp_path, "calibration")) == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(pipeline.load(tmp_path, "calibration", version="latest")) == 3
        assert len(load(tmp_path, "calibration")) == 6  # the store's own reader: no warning


def test_unique_ids_agrees_with_np_unique():
    """The sort-and-mask unique of the stored-id scans (numpy 2.4's np.unique is ~15x slower
    on uint64) gives np.unique's answer, sorted, repeats and edge sizes included."""
    import numpy as np

    from pipeline.store.parquet import unique_ids

    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 7, 1000):
        ids = rng.integers(0, 50, n).astype(np.uint64)  # many repeats
        assert np.array_equal(unique_ids(ids), np.unique(ids))
        assert unique_ids(ids).dtype == np.uint64
    big = np.array([2**64 - 1, 0, 2**63, 2**64 - 1, 0], dtype=np.uint64)
    assert unique_ids(big).tolist() == [0, 2**63, 2**64 - 1]


def test_resume_status_and_dry_run_read_the_store_a_batch_at_a_time(tmp_path, monkeypatch):
    """Resume, the dry run's counts, status and the code check (after an edit too) read the
    store a batch at a time and keep id prefixes (8 bytes a row); they read their columns
    whole (about 0.4 KB a stored row: 40 GB for 10^8). With batches of 3 rows and the
    whole-table reads disabled, the answers equal those found by hashing every point of the
    grid and by load()."""
    import dataclasses

    import pipeline.store.integrity as integrity
    from pipeline.engine.provenance import code_id, provenance_stamp, stale_points
    from pipeline.engine.resume import count_stored
    from pipeline.store.parquet import stored_counts_by_version, stored_failure_errors

    exp = get_experiment("calibration")
    grid = Grid(exp, {"x": {"range": [0, 20]}}, {"work_us": 0.0, "fail_every": 3})
    other = Grid(exp, {"x": [0, 1, 2]}, {"work_us": 0.0, "scale": 2.0})  # not this grid's
    old = Grid(dataclasses.replace(exp, version=exp.version - 1), {"x": [4, 5, 15]},
               {"work_us": 0.0, "fail_every": 3})
    folder = tmp_path / "calibration"
    stamp = provenance_stamp(exp, "20260101T000000Z-aaaaaa")
    PartWriter(folder, "a", stamp=stamp).write(run_batch(grid, range(0, 12))[0])
    PartWriter(folder, "b", stamp=stamp).write(run_batch(other, range(3))[0])
    table = run_batch(old, range(3))[0]
    PartWriter(folder, "c", stamp=stamp).write(table.set_column(
        table.schema.get_field_index("experiment_version"), "experiment_version",
        pa.array([exp.version - 1] * table.num_rows, pa.int64())))
    # point 9 failed, then stored ok by hand (a retry whose kernel then succeeded)
    again = run_batch(grid, [9, 10, 11])[0].to_pandas()
    again.loc[again["x"] == 9, ["status", "error", "value"]] = ["ok", None, 9.0]
    PartWriter(folder, "d", stamp=stamp).write(
        pa.Table.from_pandas(again, schema=result_schema(grid), preserve_index=False))

    def whole_read(*args, **kwargs):
        raise AssertionError("read the whole table")

    import pyarrow.dataset

    monkeypatch.setattr(integrity, "read_parts", whole_read)
    monkeypatch.setattr(pyarrow.dataset, "dataset", whole_read)  # the code check read so
    monkeypatch.setattr(integrity, "SCAN_BATCH_ROWS", 3)

    rows = pd.concat([pq.ParquetFile(f).read().to_pandas()
                      for f in sorted(folder.glob("part-*"))])
    rows["key"] = [int(t[:16], 16) for t in rows["task_id"]]
    ok_keys = set(rows.loc[rows.status == "ok", "key"])
    failed_keys = set(rows.loc[rows.status == "failed", "key"]) - ok_keys
    ok, failed = stored_ids(folder)
    assert (sorted(ok), sorted(failed)) == (sorted(ok_keys), sorted(failed_keys))

    grid_keys = {int(grid.task_id(i)[:16], 16) for i in range(grid.total)}  # hashed
    counts = count_stored(grid, folder)
    assert (counts.ok, counts.failed) == (len(grid_keys & ok_keys), len(grid_keys & failed_keys))
    assert (counts.ok, counts.failed) == (9, 3)  # 0..11: 0, 3, 6 failed; 9 failed, then ok
    assert counts.other_versions == {exp.version - 1: 1}  # x=15 (4 and 5 are stored here)
    plan = plan_sweep(grid, folder)
    assert (plan.done_ok, plan.done_failed) == (9, 3)
    assert list(plan.pending) == list(range(12, 20))

    mine = rows[rows.experiment_version == exp.version]
    by_version = stored_counts_by_version(folder)
    assert by_version[exp.version] == (len(set(mine.key[mine.status == "ok"])),
                                       len(set(mine.key[mine.status == "failed"])
                                           - set(mine.key[mine.status == "ok"])))
    assert by_version[exp.version - 1] == (2, 1)
    top, kinds = stored_failure_errors(folder, exp.version)
    assert kinds == 1 and top[0][0] == 3 and "calibration failure requested" in top[0][1]
    assert stale_points(grid, folder, code_id(exp))[0].size == 0
    stale, codes = stale_points(grid, folder, "other-code")  # after an edit
    assert stale.size == 9 and codes == [code_id(exp)]  # every ok point of the grid


def test_scan_parts_types_batches_by_the_folder_schema_and_names_a_damaged_file(tmp_path):
    """The batch scan gives what the whole-table read gives (a column a file lacks is null,
    a type that changed is cast to the folder's), in storage order; a truncated file is named."""
    from pipeline.store.integrity import BadPartFile, read_parts, scan_parts
    from pipeline.store.parquet import part_files, unified_schema

    one = pa.table({"task_id": ["a", "b", "c"], "n": pa.array([1, 2, 3], pa.int64())})
    two = pa.table({"task_id": ["d", "e"], "n": ["4", "5"], "extra": [1.5, 2.5]})
    pq.write_table(one, tmp_path / "part-1.parquet")
    pq.write_table(two, tmp_path / "part-2.parquet")
    files = part_files(tmp_path)
    schema = unified_schema([pq.read_schema(f) for f in files])
    batches = list(scan_parts(files, ["task_id", "n", "extra"], schema=schema, batch_rows=2))
    assert [b.num_rows for b in batches] == [2, 1, 2]
    scanned = pa.Table.from_batches(batches)
    whole = read_parts(files, columns=["task_id", "n", "extra"], schema=schema)
    assert scanned.equals(whole)
    assert scanned.schema == schema.remove(schema.get_field_index("extra")).append(
        schema.field("extra"))  # the folder's types
    assert scanned["n"].to_pylist() == [1, 2, 3, 4, 5]  # "4" and "5" cast as read whole
    assert scanned["extra"].to_pylist() == [None, None, None, 1.5, 2.5]
    data = (tmp_path / "part-2.parquet").read_bytes()
    (tmp_path / "part-2.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadPartFile) as caught:
        list(scan_parts(files, ["task_id"]))
    assert caught.value.path.name == "part-2.parquet"


def test_points_of_an_optional_bool_stored_under_both_versions_are_not_told_apart(tmp_path):
    """After a version bump, the points stored under the old version and not under this one
    are counted from a hash of their parameter values. Hashed a batch at a time, an optional
    bool column read as bools in one batch (no unset value) and as objects in another, and
    pandas hashed the two differently: points stored under both versions were reported as
    'stored only under version 0' (found by review)."""
    import dataclasses

    from pipeline.engine.resume import count_stored
    from pipeline.experiments.base import Experiment, Param

    exp = Experiment("flagx", 1, [Param("i", int, 0), Param("flag", bool, None)],
                     {"out": pa.float64()}, lambda p, s: {"out": 1.0})
    old = dataclasses.replace(exp, version=0)
    axes = {"flag": [True, False, None]}
    folder = tmp_path / "flagx"
    table = run_batch(Grid(old, axes, {}), range(2))[0]  # version 0: True and False
    PartWriter(folder, "20260101T000000Z-aaaaa0").write(table.set_column(
        table.schema.get_field_index("experiment_version"), "experiment_version",
        pa.array([0] * table.num_rows, pa.int64())))
    grid = Grid(exp, axes, {})
    PartWriter(folder, "20260102T000000Z-aaaaa1").write(run_batch(grid, [0, 1, 2])[0])
    counts = count_stored(grid, folder)
    assert (counts.ok, counts.failed, counts.other_versions) == (3, 0, {})
    PartWriter(folder, "20260103T000000Z-aaaaa2").write(  # one more old point, not stored here
        run_batch(Grid(old, {"i": [5], "flag": [True]}, {}), [0])[0].set_column(
            table.schema.get_field_index("experiment_version"), "experiment_version",
            pa.array([0], pa.int64())))
    wider = Grid(exp, {"i": [0, 5], "flag": [True, False, None]}, {})
    assert count_stored(wider, folder).other_versions == {0: 1}


def test_membership_of_id_prefixes_matches_isin_in_both_search_orders():
    """contains() sorts large query arrays before its binary search (searches in order stay in
    the cache; bench_stored_ids times it); the answer is np.isin's, in the
    queries' own order, for small and large arrays, with repeats and ids absent."""
    import numpy as np

    from pipeline.report.summary import _distinct_tasks
    from pipeline.store.parquet import contains, task_numbers, unique_ids

    rng = np.random.default_rng(5)
    for stored_n, query_n in ((10, 20), (5000, 6000), (20000, 3000), (9000, 50000)):
        stored = unique_ids(rng.integers(0, 2**40, stored_n).astype(np.uint64))
        queries = np.concatenate([rng.choice(stored, query_n // 2),
                                  rng.integers(0, 2**40, query_n - query_n // 2)
                                  .astype(np.uint64)])
        rng.shuffle(queries)
        assert np.array_equal(contains(stored, queries), np.isin(queries, stored))
    head = np.array([7, 7, 7, 3, 3, 9], dtype=np.uint64)  # 7 and 3: prefixes that collide
    tail = np.array([1, 2, 1, 5, 5, 0], dtype=np.uint32)
    task, tasks = task_numbers(head, tail)
    assert tasks == 4 and _distinct_tasks(task, tasks) == 4
    assert _distinct_tasks(task[[0, 2]], tasks) == 1 and _distinct_tasks(task[:0], tasks) == 0
    assert _distinct_tasks(task[[0, 1, 3]], tasks) == 3  # 7/1 and 7/2 share a prefix only


def test_well_formed_ids_agree_with_the_regex_they_replace():
    """well_formed_ids reads the string buffers in numpy; Arrow's regex ^[0-9a-f]{24}$ (with
    nulls False) is the oracle: every byte at every position, other lengths, multi-byte
    characters of 24 bytes, nulls, sliced and chunked arrays, and large_string parts."""
    import random

    import numpy as np
    import pyarrow.compute as pc

    from pipeline.store.parquet import well_formed_ids

    def regex(ids):
        out = pc.fill_null(pc.match_substring_regex(ids, "^[0-9a-f]{24}$"), False)
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

    base = "0123456789abcdef01234567"
    for pos in range(24):  # each byte value at each position of an otherwise good id
        ids = pa.array([base[:pos] + chr(b) + base[pos + 1:] for b in range(1, 256)])
        got = well_formed_ids(ids)
        assert got.equals(regex(ids)) and np.asarray(got).sum() == 16
    rng = random.Random(7)
    odd = "0123456789abcdefABCDEFgxyz \n/:`@é"
    for _ in range(2000):
        values = []
        for _ in range(rng.randrange(0, 30)):
            r = rng.random()
            if r < 0.1:
                values.append(None)
            elif r < 0.6:
                values.append("".join(rng.choice("0123456789abcdef") for _ in range(24)))
            else:
                length = rng.choice([0, 1, 12, 23, 24, 25, 48])
                values.append("".join(rng.choice(odd) for _ in range(length)))
        ids = pa.array(values, pa.string())
        if len(ids) > 2 and rng.random() < 0.5:
            start = rng.randrange(len(ids))
            ids = ids.slice(start, rng.randrange(len(ids) - start + 1))
        if len(ids) > 1 and rng.random() < 0.3:
            cut = rng.randrange(len(ids))
            ids = pa.chunked_array([ids.slice(0, cut), ids.slice(cut)])
        assert well_formed_ids(ids).equals(regex(ids)), values
    large = pa.array([base, base.upper(), None], pa.large_string())
    assert well_formed_ids(large).to_pylist() == [True, False, False]


def test_a_hand_edited_task_id_leaves_the_grids_rows_loadable(tmp_path):
    """id_prefixes read every id as hex: a hand-edited one raised ValueError, and pipeline.load
    of a grid gave a traceback; a null or short one was dropped, misaligning the masks built
    from it. Now each row has one prefix (0 for such an id), and the edited row is simply not
    one of the grid's points."""
    import numpy as np

    import pipeline
    from pipeline.store.parquet import id_prefixes

    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, 6]}}, {"work_us": 0.0})
    table = run_batch(grid, range(6))[0]
    ids = table["task_id"].to_pylist()
    ids[2] = "hand-edited"
    table = table.set_column(table.schema.get_field_index("task_id"), "task_id", pa.array(ids))
    PartWriter(tmp_path / "calibration", "a").write(table)
    df = pipeline.load(tmp_path, "calibration", grid={"x": {"range": [0, 6]}},
                       params={"work_us": 0.0})
    assert sorted(df["x"]) == [0, 1, 3, 4, 5]
    got = id_prefixes(pa.array([ids[0], None, "hand-edited", ids[1]]))
    assert got.tolist() == [int(ids[0][:16], 16), 0, 0, int(ids[1][:16], 16)]
    assert got.dtype == np.uint64
