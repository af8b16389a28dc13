"""``run.py ... dry_run=true``: what a sweep would run, and a batch system's job script;
nothing is written."""

from __future__ import annotations

from pipeline.exit_codes import EXIT_OK


def dry_run(grid, options: dict) -> int:
    from pipeline.engine.batch_cluster import dry_run_text
    from pipeline.engine.cluster_config import with_job_logs
    from pipeline.engine.grid import describe_axes, fixed_summary
    from pipeline.engine.resume import count_stored, other_versions_text
    from pipeline.engine.provenance import code_id, stale_points
    from pipeline.store.parquet import checked_schemas, experiment_dir, read_again_if_swapped
    from pipeline.store.manifest import sweeps_writing

    path = experiment_dir(options["results_dir"], grid.name)

    def read_store():
        checked_schemas(path)  # a damaged footer or a foreign part file: exit 4, naming it
        return count_stored(grid, path), stale_points(grid, path, code_id(grid.experiment))[0].size

    # no lock: a compaction may swap the files meanwhile (read the current set again)
    counts, stale = read_again_if_swapped(read_store)
    done_ok, done_failed = counts.ok, counts.failed
    if stale and options["rerun_changed"]:
        # as the sweep plans them (provenance.check_code_changes): the stale points are stored
        # ok, so they leave 'already done' and join 'to run' (they were counted: the dry run
        # said 'to run: 0' while the sweep then ran them)
        done_ok -= stale
    to_run = grid.total - done_ok - (0 if options["retry_failed"] else done_failed)
    print(f"experiment {grid.name} (version {grid.version}) -> {path}")
    print(f"tasks in grid: {grid.total:,}")
    print(f"already done:  {done_ok:,} ok, {done_failed:,} failed ("
          f"{'re-run: retry_failed=true' if options['retry_failed'] else 'skipped'})")
    print(f"to run:        {to_run:,}")
    for run in sweeps_writing(path):  # (a damaged manifest: left to the commands that need it)
        print(f"note: a sweep is writing this folder now (run {run.get('run_id')}, pid "
              f"{run.get('pid')} on {run.get('host')}, since {run.get('started_at')}): these "
              "counts are a snapshot, and a real run is refused (exit 2) until it ends")
    if stale:
        fate = ("re-run: rerun_changed=true; counted in 'to run'" if options["rerun_changed"]
                else "kept; rerun_changed=true re-runs them")
        print(f"other code:    {stale:,} stored ok point(s) computed by another code_id ({fate})")
    other = other_versions_text(grid, counts.other_versions)
    if other:
        print(f"other version: {other}")
    for axis, dropped in grid.duplicates_dropped.items():
        print(f"note: {dropped} duplicate value(s) of {axis} dropped from the grid")
    print("axes:")
    print("\n".join(describe_axes(grid)) or "  (none: a single point)")
    print("fixed:")
    print("\n".join(fixed_summary(grid)) or "  (none)")
    print("sample points:")
    for i in grid.sample_indices(5):
        print(f"  #{i} task_id={grid.task_id(i)} {grid.point(i)}")
    # batch systems: the job script, logging where the sweep's jobs would
    batch_jobs = dry_run_text(with_job_logs(options.get("cluster") or {}, path))
    if batch_jobs:
        print(batch_jobs)
    return EXIT_OK


