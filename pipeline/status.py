"""``python -m pipeline status [RESULTS_DIR [NAME]]``: the state of every experiment folder.

Per experiment: tasks stored ok and failed of the version a sweep resumes (other versions'
on a line of their own), and the last run's state; for a running sweep also
done/total, rate, ETA, failures and the first error, the dashboard link, host and pid, read from
the manifest that the driver rewrites atomically every few seconds (so this works from another
process, or another machine on the shared filesystem). A run left ``running`` by a driver that
died is marked ``killed`` (same host, pid gone) or ``stale`` (heartbeat too old) here. Every
state but a clean finish ends with what to do next (the command that resumes, how to stop a
running sweep, how to rerun failed tasks).

Cheap on a big store: only the ``task_id``, ``status`` and ``experiment_version`` columns of
the part files are read.
Exit 0; 2 bad arguments (a folder that is neither a RESULTS_DIR nor a results folder
included); 4 a folder has a damaged or foreign part file, or a damaged run
manifest (its line names the file and ``verify --repair``; the other folders are still listed).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

USAGE = "usage: python -m pipeline status [RESULTS_DIR [NAME]]"


def stored_counts(path) -> tuple[int | None, tuple[int, int], dict[int, tuple[int, int]]]:
    """(version, its (tasks stored ok, tasks stored only as failed), the other versions'
    counts), from the task_id/status/experiment_version columns. The version is the
    registered experiment's, the one a sweep resumes (task ids hash it, so rows of other
    versions are never its done tasks); for a folder of no registered experiment, the newest
    stored (None if nothing is stored)."""
    from pipeline.store.integrity import folder_experiment
    from pipeline.store.parquet import stored_counts_by_version

    counts = stored_counts_by_version(path)
    experiment = folder_experiment(path)
    version = experiment.version if experiment is not None else max(counts, default=None)
    others = {v: c for v, c in sorted(counts.items()) if v != version}
    return version, counts.get(version, (0, 0)), others


def _hms(seconds) -> str:
    from pipeline.engine.progress import _hms as hms

    return hms(float("nan") if seconds is None else float(seconds))


def _age(stamp: str | None) -> str:
    from pipeline.store.manifest import _parse_utc

    try:
        return f"{time.time() - _parse_utc(stamp):.0f} s ago"
    except (TypeError, ValueError):
        return "?"


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def dashboard_lines(link: str, driver_host: str | None, here: str | None = None) -> list[str]:
    """The dashboard link as it can be used from this machine. A dashboard on the driver's
    loopback (the default) is reachable only on the driver's host: from anywhere else the
    link is shown with the host it listens on and the SSH tunnel that reaches it."""
    from urllib.parse import urlsplit

    here = socket.gethostname() if here is None else here
    try:
        url = urlsplit(link)
        host, port = url.hostname or "", url.port or 80
    except ValueError:
        return [f"  dashboard: {link}"]
    if not _loopback(host):
        return [f"  dashboard: {link}"]
    page = f"http://localhost:{port}{url.path or '/status'}"
    tunnel = f"ssh -N -L {port}:127.0.0.1:{port}"
    if not driver_host or driver_host == here:
        return [f"  dashboard: {link} (this machine only; from a laptop: {tunnel} -J "
                f"LOGIN-NODE {driver_host or 'THIS-HOST'}, then open {page})"]
    return [f"  dashboard: {link} on {driver_host} (it listens on {driver_host}'s loopback "
            "only, so the link works there, not here)",
            f"    tunnel: {tunnel} {driver_host} (from a laptop: {tunnel} -J LOGIN-NODE "
            f"{driver_host}), then open {page}"]


def _count_lines(path: Path) -> tuple[list[str], bool, int]:
    """The stored-counts lines of one folder, whether a part file is damaged, and the tasks
    stored only as failed."""
    from pipeline.store.integrity import BadPartFile

    try:
        version, (ok, failed), others = stored_counts(path)
    except BadPartFile as exc:  # the run state is still worth showing; main() exits 4
        return [f"{path.name}: stored counts unknown: part file {exc.path.name} {exc.problem} "
                f"({exc.reason}); {exc.remedy}"], True, 0
    lines = [f"{path.name}: {ok:,} ok, {failed:,} failed stored"
             + (f" (version {version})" if version is not None else "")]
    if failed:  # what report and export send the user here for
        try:
            lines += _failure_lines(path, version)
        except _ErrorsUnknown as wrapped:
            exc = wrapped.exc
            lines.append(f"  their errors unknown: part file {exc.path.name} {exc.problem} "
                         f"({exc.reason}); {exc.remedy}")
            return lines, True, failed
    from pipeline.store.integrity import missing_parts, missing_parts_text

    missing = missing_parts(path)
    if missing:  # those counts are short: main() exits 4
        lines.append("  " + missing_parts_text(path, missing))
    if others:
        lines.append("  other versions (not counted above, nor by a sweep): " + "; ".join(
            f"version {v}: {o:,} ok, {f:,} failed" for v, (o, f) in others.items()))
    return lines, bool(missing), failed


def _failure_lines(path: Path, version: int) -> list[str]:
    from pipeline.store.integrity import BadPartFile
    from pipeline.store.parquet import stored_failure_errors

    try:
        top, distinct = stored_failure_errors(path, version)
    except BadPartFile as exc:  # the error column is read here first: bit rot shows here
        raise _ErrorsUnknown(exc) from None
    if not top:
        return []
    everything = f"pipeline.load({str(path.parent)!r}, {path.name!r}, status='failed')"
    head = (f"  their errors, most common first ({len(top)} of {distinct:,} kinds, texts that "
            f"differ only in numbers as one; all: {everything}):" if distinct > len(top)
            else "  their error(s), most common first:")
    return [head] + [f"    {n:,} task(s): {_one_line(error)}"
                     + (f" (and {texts - 1:,} more like it but for its numbers)" if texts > 1
                        else "") for n, error, texts in top]


class _ErrorsUnknown(Exception):
    def __init__(self, exc):
        self.exc = exc


def _one_line(text: str, width: int = 300) -> str:
    text = " ".join(text.split()) or "(an empty error text)"
    return text if len(text) <= width else text[:width - 1] + "…"


def describe(path: Path) -> tuple[list[str], bool]:
    """The status lines of one experiment folder, and whether a file of it is damaged (a part
    file, or the run manifest: main() exits 4)."""
    from pipeline.store.integrity import DamagedManifest
    from pipeline.store.manifest import (StoreLocked, SweepLock, dead_run_state, mark_dead_runs,
                                         read_manifest)

    try:
        runs = read_manifest(path).get("runs", [])
    except DamagedManifest as exc:  # the counts do not need it; the run state is unknown
        lines, _, _ = _count_lines(path)
        return lines + [f"  run state unknown: the run manifest {exc.path.name} {exc.problem} "
                        f"({exc.reason}); {exc.remedy}"], True
    # Recorded only while no sweep holds the folder: the manifest is rewritten whole, and
    # beside a live driver's own writes (its heartbeat, its final record) this one could
    # put back the record it had just replaced. The lock is taken only when there is a dead
    # run to record, or a run of this host said to be running (a sweep starting in those
    # milliseconds would find the folder locked): got, no driver of this host is alive,
    # whatever its pid says (see dead_run_state). The verdict below is shown either way.
    here = socket.gethostname()
    if any(dead_run_state(run) or (run.get("status") == "running" and run.get("host") == here)
           for run in runs):
        try:
            with SweepLock(path, holder="status"):
                mark_dead_runs(path, lock_free_here=True)
        except (StoreLocked, OSError):  # a sweep writes, or a folder we may only read
            pass
    lines, damaged, failed_stored = _count_lines(path)
    from pipeline.store.manifest import command_holding

    read = {}

    def recorded() -> set:  # read after the lock is found held (see command_holding)
        read["manifest"] = read_manifest(path)
        return {r.get("run_id") for r in read["manifest"].get("runs", [])}

    holding = command_holding(path, recorded)
    manifest = read.get("manifest") or read_manifest(path)
    runs = manifest.get("runs", [])
    if holding:  # (no run record says so: status said nothing of it, or "interrupted, rerun")
        lines.append(f"  now: {holding} holds the folder; a sweep started meanwhile is "
                     "refused (exit 2): run it again when this has finished")
    for run in runs:
        run["status"] = dead_run_state(run) or run.get("status")
    if not runs:
        lines.append("  no run recorded")
        return lines, damaged
    run = runs[-1]
    state = run.get("status", "?")
    # a killed driver recorded no end: its start is shown as such ("killed (at START)" read
    # as the time of the kill; the error line gives the last heartbeat)
    when = (f"at {run['finished_at']}" if run.get("finished_at") else
            f"{'since' if state == 'running' else 'started'} {run.get('started_at')}")
    shown = f"{state} ({run['signal']})" if run.get("signal") else state
    lines.append(f"  last run {run.get('run_id')}: {shown} ({when}) on {run.get('host')}, "
                 f"pid {run.get('pid')}")
    if state == "running":
        prog = run.get("progress")
        if prog:
            from pipeline.engine.progress import no_workers_text, rate_text  # as the driver's

            # finished rows still in the driver's memory: a kill -9 loses them (the rerun
            # recomputes them); a Ctrl-C or SIGTERM writes them first
            pending = prog.get("unwritten_rows") or 0
            unwritten = f", {pending:,} finished row(s) not yet written" if pending else ""
            # a snapshot up to a heartbeat old (5 s), beside counts read from the parts now
            lines.append(f"  progress at the last heartbeat ({_age(run.get('heartbeat_at'))}): "
                         f"{prog['done']:,}/{prog['total']:,} done, {prog['failed']:,} "
                         f"failed, {rate_text(prog['rate_per_s'])} tasks/s, "
                         + (no_workers_text(prog["no_workers_since"])
                            if prog.get("no_workers_since") else f"ETA {_hms(prog['eta_s'])}")
                         + unwritten
                         + (f", {prog['threads']:,} worker thread(s)" if prog.get("threads")
                            else ""))
            if prog.get("first_error"):
                lines.append(f"  first error: {prog['first_error']}")
        else:
            counts = run.get("counts") or {}
            lines.append(f"  starting: {counts.get('to_run', '?')} task(s) to run "
                         f"(heartbeat {_age(run.get('heartbeat_at'))})")
        dashboard = (run.get("cluster") or {}).get("dashboard")
        if dashboard:
            lines += dashboard_lines(dashboard, run.get("host"))
    elif run.get("error"):
        lines.append(f"  error: {run['error']}")
    if state == "killed":  # (asked of squeue whatever the cluster: the record may predate it)
        lines += _worker_jobs_left(run)
    counts = run.get("counts") or {}
    if state != "running" and "ran" in counts:
        # a run stopped by a full disk ran tasks it could not store (status showed "ran 3,000
        # task(s): 3,000 ok" beside "0 ok stored")
        unwritten = (run.get("progress") or {}).get("unwritten_rows") or 0
        lines.append(f"  ran {counts['ran']:,} task(s): {counts.get('ok', 0):,} ok, "
                     f"{counts.get('failed', 0):,} failed in {counts.get('elapsed_s', 0):.1f} s"
                     + (f"; {unwritten:,} of their rows could not be written (a rerun runs "
                        "those tasks again)" if unwritten else ""))
    origin = _written_from(path, run)
    if run.get("log"):
        log = _absolute(run["log"], run)
        if origin is not None and (path / "_logs" / log.name).is_file():
            log = path / "_logs" / log.name  # the copy's own log, not the original folder's
        lines.append(f"  log: {log}")
    repaired = _repaired_since(manifest.get("repairs", []), run)
    lines += repaired
    steps = next_step(run, failed_stored, path, repaired=bool(repaired))
    if origin is not None:  # (a finished run has no command below: none was promised)
        # a sweep writes to results_dir/NAME: a copy under another name is found only once
        # renamed back (results_dir=its parent swept a new folder NAME beside it)
        renamed = (f"rename it to {origin.name} (the experiment's name) and give "
                   if path.name != origin.name else "give ")
        lines.append(f"  note: this run wrote to {origin}; this folder is a copy of it or was "
                     "moved: " + (f"the command below writes to {origin}; to resume "
                                  if steps and state != "running" else "to sweep ")
                     + f"this folder, {renamed}results_dir={path.parent} instead")
    lines += earlier_runs(runs[:-1])
    lines += steps
    if state != "running":  # compaction takes the folder's lock: not during a sweep
        lines += compaction_hint(path)
    return lines, damaged


COMPACT_HINT_PARTS = 64  # from this many part files, if compaction would leave a quarter


def compaction_hint(path: Path) -> list[str]:
    """A line suggesting ``compact`` where many small part files have piled up (every run
    with work adds at least one, and ``load``, resume and ``report`` open them all)."""
    from pipeline.store.compaction import files_after_compaction
    from pipeline.store.parquet import part_files

    if len(part_files(path)) < COMPACT_HINT_PARTS:  # (footers read only past this)
        return []
    counted = files_after_compaction(path)
    if counted is None:
        return []
    parts, size, after = counted
    if parts < COMPACT_HINT_PARTS or after > parts // 4:
        return []
    return [f"  tip: {parts:,} part files ({size / 2**20:,.1f} MiB); python -m pipeline "
            f"compact {path} rewrites them as about {after:,} (load, resume and reports read "
            "every file)"]


def _absolute(recorded: str, run: dict) -> Path:
    """A path the run recorded, absolute: a relative one (runs before the driver's working
    directory was recorded) is taken from that directory, when known."""
    path = Path(recorded)
    return path if path.is_absolute() or not run.get("cwd") else Path(run["cwd"]) / path


def _written_from(path: Path, run: dict) -> Path | None:
    """The folder ``run`` wrote to, if it is not ``path`` (a folder copied with ``cp -r`` or
    moved since): the recorded log and command name the original folder. Not judged from a
    relative log path with no recorded working directory (it depends on the driver's)."""
    log = run.get("log")
    if not log or not _absolute(log, run).is_absolute():
        return None
    origin = _absolute(log, run).parent.parent
    try:
        same = origin.resolve() == path.resolve()
    except OSError:
        return None
    return None if same else origin


EARLIER_RUNS_SHOWN = 5


def earlier_runs(runs: list[dict]) -> list[str]:
    """The runs before the last, newest first (the last few; the manifest has them all): the
    run ids that ``run_id=`` selects (a report's "check run_id (status lists the runs)" met
    only the last one here)."""
    if not runs:
        return []
    lines = [f"  earlier runs ({len(runs)}, newest first; run_id=RUN selects one's rows):"]
    for run in reversed(runs[-EARLIER_RUNS_SHOWN:]):
        state = run.get("status", "?")
        state = f"{state} ({run['signal']})" if run.get("signal") else state
        ran = (run.get("counts") or {}).get("ran")
        lines.append(f"    {run.get('run_id')}: {state}, started {run.get('started_at')}"
                     + (f", ran {ran:,} task(s)" if ran is not None else ""))
    if len(runs) > EARLIER_RUNS_SHOWN:
        lines.append(f"    ... and {len(runs) - EARLIER_RUNS_SHOWN} earlier (all in "
                     "_manifest.json)")
    return lines


def _repaired_since(repairs: list[dict], run: dict) -> list[str]:
    """A line for the ``verify --repair`` runs since ``run`` ended that took tasks out of the
    store: the last run's record alone read as complete ("finished ... ran 600 task(s): 600
    ok", no next step) beside 175 tasks set aside."""
    ended = run.get("finished_at") or run.get("started_at") or ""
    since = [r for r in repairs if isinstance(r, dict) and str(r.get("at", "")) >= ended]
    if run.get("status") in ("running", "stale") or not since:
        return []
    parts = sum(len(r.get("quarantined") or []) for r in since)
    gone = sum(len(r.get("forgotten") or []) for r in since)
    what = [f"{parts} part file(s) with tasks set aside in _quarantine/"] if parts else []
    what += [f"{gone} missing part(s) forgotten"] if gone else []
    return [f"  repaired since (verify --repair, at {since[-1].get('at')}): {' and '.join(what)}; "
            "their tasks are no longer stored"]


def _worker_jobs_left(run: dict) -> list[str]:
    """The SLURM worker jobs a killed driver left queued or running (their comment names it):
    nothing cancelled them, and pending ones hold the user's place and job limits until they
    start, to die with no scheduler to join."""
    import socket

    from pipeline.engine.orphan_jobs import jobs_of_driver
    from pipeline.store.manifest import pid_alive

    pid, host = run.get("pid"), str(run.get("host"))
    kind = (run.get("cluster") or {}).get("kind")
    if not isinstance(pid, int) or isinstance(pid, bool) or kind not in (None, "slurm"):
        return []  # (a hand-edited record; a run on another cluster: squeue is not asked)
    jobs = jobs_of_driver(host, pid)
    if not jobs:
        return []
    ids = " ".join(job for job, _ in jobs)
    states = ", ".join(f"{job} {state.lower()}" for job, state in jobs[:10])
    # the next sweep cancels the jobs of drivers of its own host whose pid is gone: not where
    # the pid now runs another process, nor from the next node of a driver run as a job
    itself = (host == socket.gethostname() and not pid_alive(pid)
              and not run.get("driver_job"))
    return [f"  its worker jobs are still in the SLURM queue: {states}"
            + (f" and {len(jobs) - 10} more" if len(jobs) > 10 else "")
            + f"; cancel them with: scancel {ids}"
            + (f" (the next cluster=slurm sweep from {host} cancels them itself)"
               if itself else "")]


def next_step(run: dict, failed_stored: int = 0, path: Path | None = None,
              repaired: bool = False) -> list[str]:
    """What to do about the last run, in the morning: the line read after "killed" or
    "crashed" (the state alone left the reader to guess that a rerun resumes). ``repaired``:
    a repair took tasks out of the store since: the rerun recomputes them."""
    import shlex

    argv = [str(a) for a in run.get("argv") or []]
    cwd, script = run.get("cwd"), run.get("script")
    # a relative results_dir (the default) is the driver directory's: the command starts there
    cd = f"cd {shlex.quote(cwd)} && " if argv and cwd and Path(cwd) != Path.cwd() else ""
    driver_dir = cwd or os.getcwd()
    run_py = ("run.py" if not script or Path(script) == Path(driver_dir) / "run.py"
              else shlex.quote(script))  # (`python /path/to/run.py` from elsewhere)
    python = f"{cd}python {run_py}"
    command = f"{python} {shlex.join(argv)}" if argv else "the same command"
    job = run.get("driver_job")  # the driver ran as scripts/driver.sbatch's job
    if job and argv:
        # (its sbatch options and environment are not recorded: the user gives them again)
        command = (f"{cd}sbatch [your sbatch options] scripts/driver.sbatch {shlex.join(argv)}"
                   f", unless SLURM has requeued job {job} itself (squeue -j {job})")
    host, pid = run.get("host"), run.get("pid")
    rerun = f"rerun to resume (tasks stored are not run again): {command}"
    state = run.get("status")
    if state == "running" and job:
        return [f"  to stop it: scancel {job} (the driver's SLURM job; what finished is kept, "
                "and the job is not requeued; resubmitting it resumes)"]
    if state == "stale" and job:
        from pipeline.store.manifest import STALE_HEARTBEAT_S

        return [f"  next: no heartbeat for over {STALE_HEARTBEAT_S / 60:g} min; check the "
                f"driver's job (squeue -j {job}); if it is gone, {rerun}"]
    if state == "running":
        return [f"  to stop it: kill -TERM {pid} on {host} (what finished is kept; the same "
                "command resumes)"]
    if state == "stale":
        from pipeline.store.manifest import STALE_HEARTBEAT_S

        return [f"  next: no heartbeat for over {STALE_HEARTBEAT_S / 60:g} min; check whether "
                f"pid {pid} still runs on {host} (ssh {host} ps -p {pid}); if not, {rerun}"]
    if state in ("killed", "interrupted"):
        return [f"  next: {rerun}"]
    kept = [a for a in argv if a.lstrip("+").partition("=")[0] != "retry_failed"]
    retry = (f"{python} {shlex.join(kept + ['retry_failed=true'])}" if argv
             else "the same command with retry_failed=true")
    if repaired and state == "finished":  # (a crash's own advice comes first: its rerun recomputes them)
        steps = [f"  next: rerun to recompute the tasks the repair took out (tasks stored are "
                 f"not run again): {command}"]
        retrying = any(a.lstrip("+").partition("=")[0] == "retry_failed"
                       and a.partition("=")[2].lower() == "true" for a in argv)
        if failed_stored and not retrying:  # the same command skips them: their rows count
            # (which grid they belong to is not known here: the last run's, or another's)
            where = (f"{str(path.parent)!r}, {path.name!r}" if path is not None
                     else "RESULTS_DIR, NAME")
            steps.append(f"  also: {failed_stored:,} task(s) now stored only as failed (a part "
                         "the repair took out may have held their retries): a rerun skips "
                         f"them unless given retry_failed=true; pipeline.load({where}, "
                         "status='failed') lists them; their own sweep's command with "
                         f"retry_failed=true runs them again, for the last run's grid: {retry}")
        return steps
    if state == "crashed" and any(full in (run.get("error") or "") for full in (
            "No space left on device", "Disk quota exceeded")):
        return [f"  next: free space where the results go (its disk or your quota is full: "
                f"df -h {shlex.quote(str(path or '.'))}), then {rerun}"]
    if state == "crashed":
        return [f"  next: fix the cause (the error above, the log), then {rerun}"]
    if state == "finished" and failed_stored:
        # The folder's failures may be another setting's: the last run's command retries
        # only those of its own grid (its failures plus the stored ones it skipped).
        counts = run.get("counts") or {}
        in_grid = min(failed_stored, int(counts.get("failed") or 0)
                      + int(counts.get("already_failed_skipped") or 0))
        steps = []
        if in_grid:
            steps.append(f"  next: {in_grid:,} task(s) of the last run's grid stored as failed "
                         f"(their rows carry the error); to run them again: {retry}")
        others = failed_stored - in_grid
        if others:
            where = (f"{str(path.parent)!r}, {path.name!r}" if path is not None
                     else "RESULTS_DIR, NAME")
            steps.append(f"  {'also' if in_grid else 'next'}: {others:,}{' other' * bool(in_grid)} "
                         "task(s) stored as failed, of parameter settings outside the last run's "
                         f"grid: pipeline.load({where}, status='failed') lists them with their "
                         "errors; their own sweep's command with retry_failed=true runs them again")
        return steps
    return []


def main(argv: list[str]) -> int:
    from pipeline.store.integrity import experiment_folders, is_results_folder
    from pipeline.store.redact import redact

    if len(argv) > 2 or any(a.startswith("-") for a in argv):
        print(USAGE, file=sys.stderr)
        return 2
    results = Path(argv[0] if argv else "results")
    if not results.is_dir():
        what = "is a file, not a results directory" if results.exists() else "no such directory"
        print(f"error: {redact(str(results))}: {what} (usage: python -m pipeline status "
              "[RESULTS_DIR [NAME]])", file=sys.stderr)
        return 2
    if len(argv) == 2:
        folders = [results / argv[1]]
        if not is_results_folder(folders[0]):  # a plain subfolder read as "0 ok, 0 failed"
            what = ("not a results folder (no _manifest.json, _parts.jsonl or result part file "
                    "written by a sweep)" if folders[0].is_dir() else "no such folder")
            known = experiment_folders(results)
            print(f"error: no experiment folder {redact(str(folders[0]))}: {what}; experiment "
                  f"folders in {redact(str(results))}: {', '.join(known) or 'none'}",
                  file=sys.stderr)
            return 2
    else:
        # RESULTS_DIR: its experiment folders only (a user's plots/ is none); or RESULTS_DIR/NAME,
        # as verify, compact and export take it: said "no experiment folders under results/NAME",
        # during a sweep too, and listed a subfolder of it as an experiment
        folders = [results / name for name in experiment_folders(results)]
        if not folders and is_results_folder(results):
            folders = [results]
        if not folders and any(not p.name.startswith(("_", ".")) for p in results.iterdir()):
            # files or folders, none of them results: not a RESULTS_DIR (an empty one, or one
            # holding only Hydra's .multirun/ before its first sweep, is listed as empty below)
            print(f"error: {redact(str(results))} is not a results directory: no experiment "
                  "folder in it (one with _manifest.json, _parts.jsonl or result part files "
                  "written by a sweep), nor is it one; expected RESULTS_DIR (default results) "
                  "or RESULTS_DIR/NAME", file=sys.stderr)
            return 2
    damaged = []
    for folder in folders:
        lines, bad = describe(folder)
        if bad:
            damaged.append(folder)
        print(redact("\n".join(lines)))
    if not folders:
        print(f"no experiment folders under {redact(str(results))}")
    if damaged:
        print("error: damaged or foreign file(s); move them aside with:\n"
              + "".join(f"  python -m pipeline verify {redact(str(f))} --repair\n" for f in damaged)
              + "then rerun the sweep to recompute their tasks", file=sys.stderr)
        return 4
    return 0
