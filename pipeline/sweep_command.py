"""``run.py experiment=NAME ...``: one sweep from a validated grid to stored parts, the run
record and the summary (``pipeline.cli`` parses and validates, then calls :func:`sweep`)."""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import platform
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from pipeline.exit_codes import (EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_CRASHED,
                                 EXIT_FAILED_TASKS, EXIT_INTERRUPTED, EXIT_OK)

REPO_ROOT = Path(__file__).resolve().parents[1]
# A folder locked by a command that holds it briefly (status recording a dead run) is waited
# for this long; one locked by another sweep, a compaction or a repair is refused after it.
LOCK_WAIT_S = 3.0
PLAN_NOTICE_ROWS = 1_000_000  # about 2 s of planning a million stored rows (bench_stored_ids)
PACKAGES = ("pipeline", "numpy", "scipy", "pandas", "pyarrow", "dask", "distributed",
            "hydra-core", "omegaconf", "networkx", "dask-jobqueue")
log = logging.getLogger("pipeline")


def sweep(grid, conf: dict, options: dict, argv: list[str]) -> int:
    """Run a validated sweep: lock, plan, run log and manifest, cluster, the driver loop;
    every way out (finished, interrupted, crashed) recorded in the manifest."""
    from pipeline.engine.batch_cluster import cluster_checks
    from pipeline.engine.cluster import connect
    from pipeline.engine.cluster_config import with_job_logs
    from pipeline.engine.progress import Progress, line_ended, run_log, runlog
    from pipeline.engine.provenance import check_code_changes, code_id, provenance_stamp
    from pipeline.engine.resume import plan_sweep
    from pipeline.engine.runner import run_sweep
    from pipeline.engine.watchdog import (Watchdog, shutdown_started, termination_signals,
                                          watchdog_options)
    from pipeline.engine.worker_calls import connected_threads
    from pipeline.store.manifest import (MANIFEST_RESERVE, FolderMoved, StoreLocked, SweepLock,
                                         mark_dead_runs, read_manifest, release_manifest_space,
                                         reserve_manifest_space, update_manifest,
                                         update_manifest_even_if_full, why_not_locked)
    from pipeline.store.parquet import clean_temp_files, experiment_dir, new_run_id
    from pipeline.store.part_writer import PartWriter

    path = experiment_dir(options["results_dir"], grid.name)
    run_id = new_run_id()
    record = {
        "run_id": run_id, "experiment": grid.name, "version": grid.version,
        "status": "running", "started_at": _now(), "finished_at": None,
        "host": socket.gethostname(), "user": _user(), "pid": os.getpid(),
        "python": platform.python_version(), "platform": platform.platform(),
        "packages": _versions(), "git": _git_info(), "argv": argv, "config": conf,
        # what a relative results_dir (the default, `results`) and the run.py of `argv` are
        # relative to: status prints paths and commands that work from anywhere
        "cwd": os.getcwd(), "script": _script(),
    }
    if os.environ.get("PIPELINE_DRIVER_JOB") == "1" and os.environ.get("SLURM_JOB_ID"):
        # run by scripts/driver.sbatch: status tells to stop it with scancel and resubmit it
        record["driver_job"] = os.environ["SLURM_JOB_ID"]
    try:
        lock = SweepLock(path, run_id, wait_s=LOCK_WAIT_S, on_wait=lambda: print(
            f"{path} is locked; waiting up to {LOCK_WAIT_S:g} s for it", file=sys.stderr,
            flush=True)).__enter__()
    except StoreLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except OSError as exc:  # a read-only mount, another user's folder, a full disk: was a traceback
        advice, bad_input = why_not_locked(exc)
        advice = advice if bad_input else f"nothing was run; {advice}"
        print(f"error: results_dir={options['results_dir']}: cannot create or lock {path}: "
              f"{exc.strerror or exc} ({advice})", file=sys.stderr)
        return EXIT_BAD_CONFIG if bad_input else EXIT_CRASHED
    scope = contextlib.ExitStack()  # 15b: SIGTERM/SIGHUP take Ctrl-C's path; _logs/RUN_ID.log
    try:  # first, as it reads every part: a damaged one stops the sweep before anything is written
        from pipeline.store.compaction import recover
        from pipeline.store.integrity import check_part_checksums
        from pipeline.store.parquet import part_files

        scope.enter_context(termination_signals())
        _pause_at("planning")
        recovered = recover(path)  # a compaction killed mid-way: finish or undo it first
        # every byte, not only the id columns the plan reads: a part rotten elsewhere would
        # let the sweep say "all done" over rows that load then refuses
        parts = part_files(path)
        size = sum(p.stat().st_size for p in parts if p.exists())
        if size > 2**30:  # every byte is read once: say why it waits
            print(f"checking {len(parts)} part file(s) ({size / 2**30:.1f} GiB) against their "
                  "checksums", file=sys.stderr, flush=True)
        check_part_checksums(path, parts)
        from pipeline.store.part_index import read_index

        index = read_index(path)
        stored = sum(int(index.get(p.name, {}).get("rows") or 0) for p in parts)
        if stored >= PLAN_NOTICE_ROWS:  # planning reads them all: say why nothing shows yet
            print(f"planning: reading the ids of {stored:,} stored row(s) in {len(parts)} part "
                  "file(s)", file=sys.stderr, flush=True)
        plan = plan_sweep(grid, path, options["retry_failed"])
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM/SIGHUP: nothing is written yet
        shutdown_started()  # a repeated signal waits for the lock's release below
        lock.__exit__(None, None, None)
        print(f"\ninterrupted ({getattr(exc, 'signame', 'SIGINT')}) while planning: nothing "
              "was written", file=sys.stderr)
        scope.close()
        return getattr(exc, "exit_code", EXIT_INTERRUPTED)
    except BaseException:
        scope.close()
        lock.__exit__(None, None, None)
        raise
    writer = stats = bar = None
    try:
        try:  # from the moment the handlers are in, every signal takes the except below
            record["log"] = os.path.abspath(scope.enter_context(run_log(path, run_id)))
            _start_run_log(record, mark_dead_runs(path, lock_held=True))
            unreserved = reserve_manifest_space(path)
            if unreserved == "full":
                log.warning("%s: could not set aside %s (1 MiB) for the run's last record: "
                            "the disk is nearly full; if it fills, status may read this run "
                            "as killed", path, MANIFEST_RESERVE)
            elif unreserved:  # (ZFS and the like: every sweep there; the run log says so)
                runlog.info("%s: this filesystem does not hold space for %s: on a full disk "
                            "the run's last record may not be written", path, MANIFEST_RESERVE)
            if recovered:
                log.info("an interrupted compaction of %s was %s", path, recovered)
            removed = clean_temp_files(path)
            if removed:
                log.info("removed %d unfinished temp file(s) left by a killed run", removed)
            _pause_at("code_check")
            stale = check_code_changes(grid, path, plan, options["rerun_changed"], log)
            record["counts"] = {"grid_total": plan.total, "already_ok": plan.done_ok,
                                "already_failed_skipped": plan.done_failed,
                                "to_run": int(plan.pending.size), "other_code": stale}
            record["code_id"] = code_id(grid.experiment)
            record["heartbeat_at"] = _now()
            update_manifest(path, record)
            _pause_at("first_manifest")
            log.info("%s: %d tasks in grid, %s, %d to run%s -> %s", grid.name, plan.total,
                     _done_text(plan), plan.pending.size,
                     f" ({plan.failed_retried} stored failed: retry_failed=true reruns them)"
                     if plan.failed_retried else "", path)
            from pipeline.engine.resume import other_versions_text, settings_changed_text

            other = other_versions_text(grid, plan.other_versions)
            if other:
                log.info("note: %s", other)
            elif not plan.done_ok + plan.done_failed:
                changed = settings_changed_text(conf, [r for r in read_manifest(path).get(
                    "runs", []) if r.get("run_id") != run_id], len(parts))
                if changed:
                    log.info("note: %s", changed)
            # Each write first checks that the folder is still where it was locked: moved
            # mid-sweep, writing on at `path` recreated it and split the results in two.
            writer = PartWriter(path, run_id, stamp=provenance_stamp(grid.experiment, run_id),
                                flush_rows=options.get("flush_rows", 1_000_000),
                                flush_mib=options.get("flush_mib", 64.0),
                                flush_seconds=options.get("flush_seconds", 60.0),
                                guard=lock.check_in_place)

            def heartbeat(snapshot: dict) -> None:  # 15b: read by `python -m pipeline status`
                lock.check_in_place()
                # rows of finished points still in memory: a kill -9 now loses them (the README's
                # durability contract), and `status` says so beside 'done'
                snapshot["unwritten_rows"] = writer.unwritten_rows
                record.update(progress=snapshot, heartbeat_at=_now())
                update_manifest(path, record)
            if plan.pending.size:
                cluster_cfg = with_job_logs(conf.get("cluster") or {}, path)
                with connect(cluster_cfg, log, probe=False) as client:  # probed in validate()
                    record["cluster"] = {"kind": cluster_cfg.get("kind", "local"),
                                         "dashboard": client.dashboard_link,
                                         "threads": connected_threads(client)}
                    runlog.info("cluster: %s", json.dumps(record["cluster"]))
                    bar = Progress(grid.name, int(plan.pending.size), options["progress"],
                                   heartbeat=heartbeat)
                    try:
                        stats = run_sweep(grid, client, writer, plan.pending,
                                          batch_size=options["batch_size"],
                                          progress=options["progress"], bar=bar,
                                          task_timeout=options["task_timeout"],
                                          max_tasks_per_second=options.get(
                                              "max_tasks_per_second", 50.0),
                                          max_batch_seconds=options.get(
                                              "max_batch_seconds", 60.0),
                                          checks=[*cluster_checks(client),
                                                  Watchdog(client, **watchdog_options(conf))])
                        # Done: a signal while the cluster closes says the shutdown is under
                        # way. Raised, it cut the close short (Dask's exit handler printed an
                        # UnboundLocalError) and recorded the finished sweep as interrupted.
                        shutdown_started()
                        _pause_at("cluster_close")
                    except KeyboardInterrupt as exc:
                        # Recorded before the cluster closes (the rows are flushed): closing it
                        # may take a minute, and a batch system's SIGKILL (SLURM's KillWait,
                        # 30 s) then left the record 'running', later marked 'killed'.
                        _record_interrupted(path, record, writer, exc, lock, bar)
                        _pause_at("cluster_close")
                        raise
                    except Exception:  # a crash: a signal now must not cut the close short
                        shutdown_started()
                        _pause_at("cluster_close")
                        raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (watchdog.Terminated)
            shutdown_started()  # (run_sweep did, if it was running)
            signame = _record_interrupted(path, record, writer, exc, lock, bar)
            runlog.info("interrupted (%s): %s", signame, _kept(writer, bar))
            line_ended()  # (its newline ends a progress line)
            print(f"\ninterrupted ({signame}): {_kept(writer, bar)}; rerun the same command to "
                  "resume",
                  file=sys.stderr)
            return getattr(exc, "exit_code", EXIT_INTERRUPTED)
        except Exception as exc:  # the sweep machinery failed, not a task: say so, keep parts
            shutdown_started()  # a signal now says so, not cut the record short (idempotent)
            from pipeline.store.integrity import BadPartFile
            from pipeline.store.redact import redact

            error = redact(f"{type(exc).__name__}: {exc}")  # no password from an address
            record.update(status="crashed", finished_at=_now(), error=error,
                          written=_flushed(writer))
            _record_stopped_progress(record, writer, bar)
            _record_end(path, record, lock)
            runlog.info("crashed: %s", error)
            moved = isinstance(exc, FolderMoved) or isinstance(exc.__cause__, FolderMoved)
            line_ended()
            print(f"\nerror: the sweep crashed: {error}\n{_kept(writer, bar)}"
                  + ("" if moved else "; fix the cause and rerun the same command to resume"),
                  file=sys.stderr)
            return EXIT_BAD_STORE if isinstance(exc, BadPartFile) else EXIT_CRASHED
        if stats is not None:
            record["counts"].update(ran=stats.ran, ok=stats.ok, failed=stats.failed,
                                    rows=stats.rows, parts=stats.parts, batches=stats.batches,
                                    elapsed_s=round(stats.elapsed_s, 3),
                                    warmup_s=round(stats.warmup_s, 3))
        record.update(status="finished", finished_at=_now())
        try:
            lock.check_in_place()
        except FolderMoved as exc:  # after the last part: every row is stored, over there
            print(f"\nerror: {exc}\nthe sweep finished and every row it ran is stored there; "
                  "the run is not recorded (the next sweep there records it as killed)",
                  file=sys.stderr)
            return EXIT_CRASHED
        update_manifest_even_if_full(path, record)
        runlog.info("summary: finished; %s; first error: %s", json.dumps(record["counts"]),
                    stats.first_errors[0] if stats and stats.first_errors else None)
    finally:
        release_manifest_space(path)
        lock.__exit__(None, None, None)
        scope.close()
        line_ended()  # its stream is main()'s, restored after: a later run must not write to it
    return _summarise(grid, path, plan, stats)


PAUSE_ENV = "PIPELINE_SWEEP_PAUSE_AT"  # tests: sleep at a step of the sweep's start-up
PAUSE_SECONDS_ENV = "PIPELINE_SWEEP_PAUSE_SECONDS"  # how long (default 120 s)


def _pause_at(step: str) -> None:
    """Test hook: with PIPELINE_SWEEP_PAUSE_AT=step, announce the step and sleep (so that a
    signal lands there; PIPELINE_SWEEP_PAUSE_SECONDS, default 120). Steps: ``planning`` (the
    lock taken, the store being read), ``code_check`` (before the code-change check, nothing
    in the manifest yet), ``first_manifest`` (just after the first ``running`` record),
    ``cluster_close`` (a sweep finished, interrupted and recorded, or crashed, its cluster not
    yet closed)."""
    if os.environ.get(PAUSE_ENV) == step:
        print(f"sweep paused at {step}", file=sys.stderr, flush=True)
        time.sleep(float(os.environ.get(PAUSE_SECONDS_ENV, 120)))


def _record_end(path, record: dict, lock=None, quiet: bool = False) -> bool:
    """Record how the sweep stopped; whether it is recorded. The disk that stopped it (full,
    gone read-only) may refuse the manifest too: say so (unless ``quiet``: recorded once
    already) and keep the exit code (the error escaped as a traceback and exit 2, "invalid
    input"; a rerun marks the record left 'running' as killed)."""
    from pipeline.store.manifest import FolderMoved, update_manifest_even_if_full

    try:
        if lock is not None:
            lock.check_in_place()  # moved: recording it at `path` would recreate the folder
        update_manifest_even_if_full(path, record)
        return True
    except FolderMoved:
        if not quiet:
            print(f"warning: the run is not recorded as {record['status']}: its folder moved "
                  "(the next sweep there records it as killed)", file=sys.stderr)
    except OSError as exc:
        if not quiet:
            print(f"warning: could not record the run as {record['status']} in "
                  f"{path / '_manifest.json'}: {exc}", file=sys.stderr)
    return False


def _record_interrupted(path, record: dict, writer, exc: BaseException, lock, bar=None) -> str:
    """Record the run as interrupted, with what is on disk; returns the signal's name."""
    signame = getattr(exc, "signame", "SIGINT")
    record.update(status="interrupted", finished_at=_now(), signal=signame,
                  written=_flushed(writer))
    _record_stopped_progress(record, writer, bar)
    # Recorded before the cluster closed (see the sweep): again now, with the final counts,
    # and no warning if this one is refused (a disk filled again meanwhile)
    recorded = getattr(exc, "recorded_interrupted", False)
    if _record_end(path, record, lock, quiet=recorded) and not recorded:
        with contextlib.suppress(Exception):  # (an exception type without a __dict__)
            exc.recorded_interrupted = True
    return signame


def _record_stopped_progress(record: dict, writer, bar) -> None:
    """A sweep that stopped early: its record's progress and counts say what this run stored
    (the last heartbeat's snapshot, up to 5 s old and without the points of the batches
    stopped at the end, said 'done: 1' beside 'written: 78 rows'). Call after
    :func:`_flushed` (the writer closed)."""
    snap = bar.stopped_snapshot() if bar is not None else None
    if snap is None:  # stopped before the first result: the record keeps no stale progress
        return
    stats = bar.stats
    snap["unwritten_rows"] = writer.unwritten_rows if writer is not None else 0
    record["progress"] = snap
    record.setdefault("counts", {}).update(
        ran=stats.ran, ok=stats.ok, failed=stats.failed, rows=stats.rows,
        parts=writer.seq if writer is not None else 0, batches=stats.batches,
        elapsed_s=round(stats.elapsed_s, 3), warmup_s=round(stats.warmup_s, 3))


def _done_text(plan) -> str:
    """The header's 'N already done', split when it holds skipped failures."""
    done = plan.done_ok + plan.done_failed
    if not plan.done_failed:
        return f"{done} already done"
    return (f"{done} already done ({plan.done_ok} ok, {plan.done_failed} failed: skipped; "
            "retry_failed=true reruns them)")


def _kept(writer, bar=None) -> str:
    """What a sweep that stopped early left on disk, and what it could not write."""
    if writer is None:
        return "0 task(s) kept in 0 part file(s)"
    lost = writer.unwritten_rows
    stats = bar.stats if bar is not None else None
    ran = stats.ran if stats is not None else 0
    if not lost:  # every point returned this run is on disk
        return f"{ran:,} task(s) kept in {writer.seq} part file(s)"
    # some of the tasks run are not on disk (how many, the rows do not tell exactly)
    return (f"{ran:,} task(s) run, {writer.seq} part file(s) kept ({lost:,} finished rows held "
            "in memory could not be written: the rerun recomputes them)")


def _start_run_log(record: dict, dead_runs: list[dict]) -> None:
    """15b: the run log's opening lines; runs left 'running' by dead drivers (just marked)."""
    from pipeline.engine.progress import runlog

    for dead in dead_runs:
        log.warning("run %s (host %s, pid %s) was left 'running' by a driver that died; marked "
                    "'%s'", dead["run_id"], dead.get("host"), dead.get("pid"), dead["status"])
    from pipeline.store.redact import redact_secrets

    # redacted here as in the manifest (the log's formatter redacts every line again)
    argv, config = redact_secrets([str(a) for a in record["argv"]]), redact_secrets(record["config"])
    runlog.info("run %s of %s on host %s, pid %d; argv: %s", record["run_id"], record["experiment"],
                record["host"], record["pid"], " ".join(argv))
    runlog.info("config: %s", json.dumps(config, default=str, sort_keys=True))


def _flushed(writer) -> dict:
    """What is on disk after a sweep stopped early; ``flushed`` says the buffer was emptied."""
    if writer is None:  # stopped before the writer existed: nothing was buffered
        return {"rows": 0, "parts": 0, "flushed": True, "unwritten_rows": 0}
    try:
        writer.close()  # run_sweep already did; a second close is a no-op
        flushed = writer.buffered_rows == 0
    except Exception:  # the disk refused: say so, keep what is there
        flushed = False
    return {"rows": writer.rows, "parts": writer.seq, "flushed": flushed,
            "unwritten_rows": writer.unwritten_rows}


def _note_strays(path) -> None:
    """A file of the user's (notes.txt) in the results folder: the README's one-liner
    pandas.read_parquet(folder) failed on it, and only verify said why."""
    from pipeline.store.integrity import stray_entries

    try:
        strays = stray_entries(path)
    except OSError:
        return
    if strays:
        shown = ", ".join(strays[:3]) + (f" and {len(strays) - 3} more" if len(strays) > 3 else "")
        one = len(strays) == 1
        it, what = ("it", "is not a result part file") if one else (
            "them", "are not result part files")
        print(f"note: {shown} in {path} {what}: pandas.read_parquet({str(path)!r}) reads {it} "
              f"too and fails or mixes {it} in (pipeline.load reads only the part files); move "
              f"{it} out, or give {'it a name' if one else 'them names'} starting with _",
              file=sys.stderr)


def _script() -> str | None:
    """The run.py this driver runs (absolute), for status's commands; None if it is not one
    (``python -c``, a test runner, a notebook's kernel)."""
    script = sys.argv[0] if sys.argv else ""  # (pytest's or a notebook's otherwise)
    ok = os.path.basename(script) == "run.py" and os.path.isfile(script)
    return os.path.abspath(script) if ok else None


def _summarise(grid, path, plan, stats) -> int:
    from pipeline.report.summary import ran_line, summary_table

    failed_now = stats.failed if stats else 0
    ran = stats.ran if stats else 0
    print(f"\nresults: {path}  (load with pipeline.load({str(path.parent)!r}, {grid.name!r}))")
    _note_strays(path)
    tasks_ok = plan.done_ok + (stats.ok if stats else 0)
    tasks_failed = plan.done_failed + failed_now
    from pipeline.store.integrity import BadPartFile

    try:
        print(summary_table(path, grid.experiment, tasks_ok, tasks_failed, grid=grid))
    except BadPartFile as exc:  # damaged (or copied in) since the sweep began: not its rows
        if stats and stats.ran:
            print(ran_line(stats))
        print(f"error: the sweep's rows are written, but the folder cannot be summarised: {exc}",
              file=sys.stderr)
        return EXIT_BAD_STORE
    if stats and stats.ran:
        print(ran_line(stats))
    if failed_now or plan.done_failed:
        first = (stats.first_errors[0] if stats and stats.first_errors else
                 _first_stored_error(path, grid) or "see the error column of the failed rows")
        # a rerun that ran nothing said "FAILED: 0 of 0 task(s) failed this run, 4 earlier..."
        this_run = [f"{failed_now} of {ran} task(s) failed this run"] if ran else []
        earlier = ([f"{plan.done_failed} earlier failure(s) of this grid skipped "
                    "(retry_failed=true re-runs them)"] if plan.done_failed else [])
        print(f"FAILED: {', '.join(this_run + earlier)}; first error: {first}", file=sys.stderr)
        return EXIT_FAILED_TASKS
    return EXIT_OK


def _first_stored_error(path, grid) -> str | None:
    """The earliest error among this grid's tasks stored only as failed (those a rerun
    skips; it ran none itself), or None if it cannot be read. The stored rows are matched
    to the grid by their parameters, as the resume counts them: linear in the store, no
    hashing of the grid (a select() hashed every point: minutes for 10^8)."""
    import numpy as np
    import pandas as pd

    from pipeline.engine.resume import grid_row_batches
    from pipeline.store.parquet import contains, unique_ids

    try:  # a batch at a time: the ok rows' id prefixes and the failed rows are kept
        done, failed = [], []
        for rows in grid_row_batches(grid, path, extra=("error", "started_at")):
            if "error" not in rows:
                return None
            done.append(rows.loc[(rows["status"] == "ok").to_numpy(), "task_key"].to_numpy())
            failed.append(rows.loc[(rows["status"] == "failed").to_numpy()])
        if not failed:
            return None
        failed = pd.concat(failed, ignore_index=True)
        failed = failed[~contains(unique_ids(np.concatenate(done)),
                                  failed["task_key"].to_numpy())]
        if "started_at" in failed:
            failed = failed.sort_values("started_at", kind="stable")
        errors = failed["error"].dropna()
    except Exception:  # the summary never ends a sweep
        return None
    return str(errors.iloc[0]) if len(errors) else None


# --------------------------------------------------------------------------- provenance
def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def _versions() -> dict:
    out = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git_info() -> dict:
    def git(*cmd):
        return subprocess.run(["git", "-C", str(REPO_ROOT), *cmd], capture_output=True,
                              text=True, timeout=10).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return {"commit": commit or None, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}

