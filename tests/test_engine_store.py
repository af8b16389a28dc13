"""Parquet store: atomic parts, resume scan, deduplication, manifest, lock; and batches."""

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.engine.batch import failed_batch_table, result_schema, run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.resume import plan_sweep
from pipeline.experiments.base import get_experiment
from pipeline.store.parquet import (PartWriter, StoreLocked, SweepLock, clean_temp_files,
                                    deduplicate, load, read_manifest, stored_ids,
                                    update_manifest)


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

    assert "stored: 5 rows" in summary_table(folder, exp)  # the sweep's closing summary
    export_package(tmp_path, "independent_sets", tmp_path / "pkg", "parquet")
    assert compact(folder).rewritten
    pd.testing.assert_frame_equal(pipeline.load(tmp_path, "independent_sets"), everything)
