"""Batch-system clusters over dask-jobqueue: ``cluster.kind`` slurm, pbs, sge, lsf, htcondor,
oar or moab, one code path.

The scheduler runs inside the driver; each batch job runs ``processes`` single-threaded
workers and the cluster scales adaptively between ``minimum_jobs`` and ``maximum_jobs`` jobs.
With a ``walltime``, workers get ``--lifetime`` and ``--lifetime-stagger``
(:func:`pipeline.engine.cluster_config.lifetime`): they retire (their work moves to other
workers) before the batch system kills the job, and adaptive scaling submits replacements.
:func:`cluster_checks` gives the driver loop a check that stops the sweep (exit 3) after
``max_submit_failures`` consecutive failed submissions, quoting the batch system's stderr, or
when no worker has joined within ``worker_start_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from pipeline.engine.cluster_config import (BATCH_SYSTEMS, DEFAULTS, KINDS, LOCAL_DASHBOARD,
                                            NO_PROFILER, ClusterConfigError, format_duration,
                                            format_walltime, lifetime, parse_duration,
                                            parse_walltime, setting)
from pipeline.engine.orphan_jobs import cancel_orphan_jobs, comment_directives

log = logging.getLogger("pipeline")


class ClusterStartError(RuntimeError):
    """The batch system refused our worker jobs, or none started in time: the sweep stops
    (exit 3, manifest ``crashed``; finished batches are kept and a rerun resumes)."""


# --------------------------------------------------------------------------- batch commands
def batch_commands(kind: str) -> tuple[str, ...]:
    """The batch-system commands a cluster kind runs (submit, cancel), from dask-jobqueue."""
    if kind not in BATCH_SYSTEMS:
        return ()
    job_cls = _cluster_class(kind).job_cls
    return tuple(cmd.split()[0] for cmd in (job_cls.submit_command, job_cls.cancel_command))


def check_batch_commands(cfg: Mapping[str, Any]) -> None:
    """Missing ``sbatch``/``qsub``/``bsub``/``condor_submit``...: a clear error (exit 2)
    before anything is written, rather than a traceback every few seconds all night."""
    kind = setting(cfg or {}, "kind", "local")
    missing = [cmd for cmd in batch_commands(kind) if shutil.which(cmd) is None]
    if missing:
        label = BATCH_SYSTEMS[kind].label
        raise ClusterConfigError(
            f"cluster={kind} needs the {label} command(s) {', '.join(missing)} on PATH, and "
            f"{'it is' if len(missing) == 1 else 'they are'} not found here: run the sweep on a "
            f"{label} login node (or load its module), or choose another cluster kind "
            f"({', '.join(KINDS)})")


# --------------------------------------------------------------------------- batch clusters
def _import_jobqueue():
    """``import dask_jobqueue``, keeping our Ctrl-C: its ``runner`` module replaces the SIGINT
    handler with ``sys.exit()`` at import, which would end a sweep with exit 0, silently,
    and leave its run record ``running``."""
    import signal

    previous = signal.getsignal(signal.SIGINT)
    import dask_jobqueue

    if (previous is not None and signal.getsignal(signal.SIGINT) is not previous
            and threading.current_thread() is threading.main_thread()):
        signal.signal(signal.SIGINT, previous)
    return dask_jobqueue


def _cluster_class(kind: str):
    return getattr(_import_jobqueue(), BATCH_SYSTEMS[kind].cluster_class)


def cancel_command(kind: str) -> str:
    """The batch system's command that cancels a job: ``scancel``, ``qdel``, ``bkill``..."""
    return _cluster_class(kind).job_cls.cancel_command.split()[0]


def job_kwargs(cfg: Mapping[str, Any]) -> dict:
    """dask-jobqueue's job keywords from a validated batch-cluster config, ``--lifetime`` and
    ``--lifetime-stagger`` included when a walltime is set."""
    kind = cfg["kind"]
    system = BATCH_SYSTEMS[kind]
    extra_args = list(setting(cfg, "worker_extra_args", []))
    retire = lifetime(cfg)
    if retire and not any(a.split("=")[0] == "--lifetime" for a in extra_args):
        extra_args += ["--lifetime", format_duration(retire[0]),
                       "--lifetime-stagger", format_duration(retire[1])]
    kwargs = dict(
        cores=setting(cfg, "cores", DEFAULTS["cores"]),
        processes=setting(cfg, "processes", DEFAULTS["processes"]),
        memory=str(setting(cfg, "memory", DEFAULTS["memory"])),
        job_name=cfg.get("job_name"),
        interface=cfg.get("interface"),
        worker_extra_args=extra_args,
        job_extra_directives=(setting(cfg, "job_extra_directives", {}) if kind == "htcondor" else
                              comment_directives(kind, setting(cfg, "job_extra_directives", []))),
        job_directives_skip=list(setting(cfg, "job_directives_skip", [])),
        job_script_prologue=[*([] if setting(cfg, "worker_profile", False) else [NO_PROFILER]),
                             *setting(cfg, "job_script_prologue", [])],
        local_directory=cfg.get("local_directory"),
        log_directory=(str(Path(cfg["log_directory"]).expanduser().absolute())
                       if cfg.get("log_directory") else None),
        python=cfg.get("python"),
        death_timeout=int(parse_duration("death_timeout",
                                    setting(cfg, "death_timeout", DEFAULTS["death_timeout"]))),
    )
    if kind == "htcondor":
        kwargs["job_extra_directives"] = dict(kwargs["job_extra_directives"])
    else:
        kwargs["queue"] = cfg.get("queue")
        if cfg.get("walltime") is not None:
            kwargs["walltime"] = format_walltime(parse_walltime(cfg["walltime"]),
                                                 system.walltime_format)
    if system.account_key:
        kwargs[system.account_key] = cfg.get(system.account_key)
    for key in system.extra_keys:
        kwargs[key] = cfg.get(key)
    return {k: v for k, v in kwargs.items() if v is not None}


def job_script(cfg: Mapping[str, Any]) -> str | None:
    """The job script a batch-system cluster would submit (dask-jobqueue's ``job_script()``),
    or None for local/address. Submits nothing and leaves no directory behind."""
    cfg = dict(cfg or {})
    kind = setting(cfg, "kind", "local")
    if kind not in BATCH_SYSTEMS:
        return None
    kwargs = job_kwargs(cfg)
    created = []  # dask-jobqueue creates log_directory when it builds a job; a dry run must not
    if kwargs.get("log_directory"):
        path = Path(kwargs["log_directory"])
        while not path.exists():
            created.append(path)
            path = path.parent
    scheme = "tcp"
    tls = tls_kwargs(cfg)
    if tls:  # the files dask-jobqueue writes when the cluster starts (XXXX: a random suffix)
        from distributed.security import Security

        scheme = "tls"
        kwargs["protocol"] = "tls://"  # as the cluster passes it: --protocol tls://
        shared = tls["shared_temp_directory"]
        kwargs["security"] = Security(**{
            f"tls_{'' if key == 'ca_file' else 'worker_'}{key}":
                f"{shared.rstrip('/')}/.dask-jobqueue.worker.{key}.XXXX"
            for key in ("ca_file", "cert", "key")})
    try:
        job = _cluster_class(kind).job_cls(f"{scheme}://SCHEDULER-ADDRESS:8786",
                                           name="pipeline-worker", **kwargs)
        return job.job_script()
    finally:
        for path in created:
            with contextlib.suppress(OSError):
                path.rmdir()


def dry_run_text(cfg: Mapping[str, Any]) -> str | None:
    """What a dry run prints for a batch-system cluster: the derived worker lifetime and the
    job script; None for local/address."""
    script = job_script(cfg)
    if script is None:
        return None
    kind = cfg["kind"]
    retire = lifetime(cfg)
    head = f"job script (cluster={kind}; one per job, up to {setting(cfg, 'maximum_jobs', 10)} jobs; nothing submitted):"
    if retire:
        head = (f"workers retire after --lifetime {format_duration(retire[0])} "
                f"± --lifetime-stagger {format_duration(retire[1])} (walltime {cfg['walltime']} "
                f"- lifetime_margin {setting(cfg, 'lifetime_margin', DEFAULTS['lifetime_margin'])})\n"
                + head)
    return f"{head}\n{script}"


SUBMIT_BACKOFF_S = 2.0  # first pause before resubmitting a refused job; doubles each time
PENDING_CHECK_S = 15.0  # until a worker joins, squeue is asked this often why jobs still wait
PENDING_FIRST_CHECK_S = 5.0  # the first time: SLURM gives a job its reason within seconds
SQUEUE_QUIET_S = 300.0  # after squeue did not answer mid-sweep, asked again this much later


class SubmissionWatch:
    """Counts job submissions; :meth:`check` raises ClusterStartError when the batch system
    refuses ``max_failures`` submissions in a row, or when no worker has joined within
    ``start_timeout`` of the cluster's start."""

    def __init__(self, kind: str, max_failures: int, start_timeout: float):
        self.kind, self.max_failures, self.start_timeout = kind, max_failures, start_timeout
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self.job_ids: list[str] = []
        self.cluster = None
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._first_worker_at: float | None = None
        self._pending_checked_at = time.monotonic() - PENDING_CHECK_S + PENDING_FIRST_CHECK_S
        self._forgotten: set[str] = set()  # ended jobs already forgotten (said once)
        self._last_queue: dict = {}  # job id -> (state, reason), squeue's last answer
        self._told_reasons: set = set()  # pending reasons already warned of
        self._told_waiting: frozenset = frozenset()  # mid-sweep: the reasons last warned of

    def submitted(self, job_id: str) -> None:
        with self._lock:
            self.consecutive_failures = 0
            self.job_ids.append(str(job_id))
            # squeue soon after, not up to PENDING_CHECK_S later: a replacement that pends
            # mid-sweep is said while it pends (not in a squeue backoff after no answer)
            now = time.monotonic()
            if self._pending_checked_at <= now:
                self._pending_checked_at = min(self._pending_checked_at,
                                               now - PENDING_CHECK_S + PENDING_FIRST_CHECK_S)
        log.info("%s job %s submitted", BATCH_SYSTEMS[self.kind].label, job_id)

    def failed(self, exc: BaseException) -> None:
        error = batch_error_text(exc)
        with self._lock:
            self.consecutive_failures += 1
            self.last_error = error
        log.warning("%s job submission failed (%d in a row): %s", BATCH_SYSTEMS[self.kind].label,
                    self.consecutive_failures, error)

    def workers(self) -> int:
        with contextlib.suppress(Exception):
            return len(self.cluster.scheduler_info.get("workers", {}))
        return 0

    def check(self) -> None:
        label = BATCH_SYSTEMS[self.kind].label
        if self.consecutive_failures >= self.max_failures:
            raise ClusterStartError(
                f"{label} refused {self.consecutive_failures} job submissions in a row; the "
                f"last said: {self.last_error}")
        if self._first_worker_at is not None:
            # later gaps (jobs retiring at walltime) are the watchdog's, not a start-up
            # failure; a job that ends before its workers join is replaced
            self._replace_ended_jobs(time.monotonic())
            return
        if self.workers():
            self._first_worker_at = time.monotonic()
            return
        now = time.monotonic()
        waited = now - self._started
        never = self._never_starting(now, force=waited > self.start_timeout)
        if never:  # waiting longer would not help: said now, not at worker_start_timeout
            raise ClusterStartError(
                f"{BATCH_SYSTEMS[self.kind].label} will not start the worker jobs: "
                + "; ".join(f"job {job} {why}" for job, why in never.items())
                + (f" (squeue -j {','.join(never)} -o %r)"
                   if any(why.startswith("is pending") for why in never.values()) else ""))
        if waited > self.start_timeout:
            queue = self._last_queue  # what squeue said just now (SLURM), to say why they wait
            said = ", ".join(f"{job} {state} ({reason})" for job, (state, reason)
                             in list(queue.items())[-5:]) if queue else ""
            why = (f"; the last submission error: {self.last_error}" if self.last_error else
                   f"; jobs submitted: {', '.join(self.job_ids[-5:]) or 'none'} ("
                   + (f"squeue: {said}; " if said else "still queued? ")
                   + "raise cluster.worker_start_timeout to wait longer)")
            raise ClusterStartError(
                f"no Dask worker joined within cluster.worker_start_timeout="
                f"{format_duration(self.start_timeout)}{why}")

    def _never_starting(self, now: float, force: bool = False) -> dict[str, str]:
        """SLURM jobs of this cluster pending for a reason waiting does not clear, when every
        one still queued is (asked of squeue at most every PENDING_CHECK_S, bounded)."""
        if self.kind != "slurm" or not self.job_ids:
            return {}
        if not force and now - self._pending_checked_at < PENDING_CHECK_S:
            return {}
        self._pending_checked_at = now
        from pipeline.engine.slurm_limits import never_starting, queued_jobs

        ids = self.job_ids[-50:]
        jobs = queued_jobs(ids)
        self._last_queue = jobs or {}
        if jobs is None:
            return {}
        ended = [job for job in ids if job not in jobs]
        if ended and not jobs:  # every job submitted has ended, and no worker ever joined
            return {job: f"ended before any worker joined{self._log_tail(job)}"
                    for job in ended[-3:]}
        self._forget(ended)  # ended, while others wait: replaced
        self._tell_admin_waits(jobs)
        never = {job: f"is pending for {why}" for job, why in never_starting(jobs).items()}
        return never if len(never) == len(jobs) else {}  # none running, none merely waiting

    def _tell_admin_waits(self, jobs: dict) -> None:
        """Warn once when every queued job waits for an administrator (a partition down, its
        nodes drained): the sweep waits, at most worker_start_timeout, and the log said only
        that no worker had joined yet."""
        from pipeline.engine.slurm_limits import WAITS_FOR_ADMIN

        # (ReqNodeNotAvail carries the node list: "ReqNodeNotAvail, UnavailableNodes:n1")
        reasons = {reason.split(",")[0] for state, reason in jobs.values() if state == "PENDING"}
        waiting = [job for job, (state, reason) in jobs.items()
                   if state == "PENDING" and reason.split(",")[0] in WAITS_FOR_ADMIN]
        if not waiting or len(waiting) != len(jobs) or reasons <= self._told_reasons:
            return
        self._told_reasons |= reasons
        why = "; ".join(f"{r} ({WAITS_FOR_ADMIN[r]})" for r in sorted(reasons))
        log.warning("SLURM job(s) %s pending for %s: they start only once an administrator "
                    "acts (sinfo; scontrol show partition); the sweep waits at most "
                    "cluster.worker_start_timeout=%s for a first worker", ", ".join(waiting[-5:]),
                    why, format_duration(self.start_timeout))

    def _replace_ended_jobs(self, now: float) -> None:
        """The cluster's jobs that left the queue before their workers joined (a bad
        cluster.python, a node that failed at launch, an scancel while pending): adaptive
        scaling counted them as coming for good, and the sweep ran on fewer workers all
        night. Forgotten, so that it submits others (SLURM; squeue at most every
        PENDING_CHECK_S, bounded)."""
        if self.kind != "slurm" or now - self._pending_checked_at < PENDING_CHECK_S:
            return
        self._pending_checked_at = now
        from pipeline.engine.slurm_limits import queued_jobs

        try:  # (the cluster's loop changes the dict: a changed size asks again next time)
            ids = [str(h.job_id) for h in list(getattr(self.cluster, "workers", {}).values())
                   if getattr(h, "job_id", None)]
        except RuntimeError:
            return
        jobs = queued_jobs(ids)
        if jobs is None:  # squeue did not answer within its bound: not again for a while,
            self._pending_checked_at = now + SQUEUE_QUIET_S  # the driver's loop waits on it
            return
        self._forget([job for job in ids if job not in jobs])
        self._tell_why_no_worker(jobs)

    def _tell_why_no_worker(self, jobs: dict) -> None:
        """Mid-sweep, with no worker left (jobs ended at walltime or cancelled, their
        replacements queued): SLURM's reasons, once for each set of them. The driver said
        nothing until watchdog.no_workers_timeout (an hour by default) ended the sweep with
        'no Dask worker', where at the start it quotes squeue."""
        if self.workers():
            self._told_waiting = frozenset()  # a later outage is news again
            return
        # ("None": the job is not yet weighed by SLURM's scheduler; its reason comes next time)
        waiting = {job: reason for job, (state, reason) in jobs.items()
                   if state == "PENDING" and reason.split(",")[0] != "None"}
        reasons = frozenset(reason.split(",")[0] for reason in waiting.values())
        if not waiting or reasons <= self._told_waiting:
            return
        self._told_waiting = reasons
        log.warning("no Dask worker now: SLURM job(s) %s pending (%s); the sweep waits for "
                    "them, at most watchdog.no_workers_timeout (squeue -j %s -o %%r)",
                    ", ".join(list(waiting)[-5:]), "; ".join(sorted(reasons)),
                    ",".join(list(waiting)[-5:]))

    def _forget(self, ended: list[str]) -> None:
        """Forget the ended jobs ``ended`` that no worker of joined (on the cluster's loop:
        ``WatchedCluster._forget_job_if_gone`` checks that again there)."""
        cluster = self.cluster
        forget = getattr(cluster, "_forget_job_if_gone", None)
        if forget is None or not ended:
            return
        # a job whose workers joined once is _update_worker_status's, after its grace
        try:
            joined = set(getattr(cluster, "__dict__", {}).get("pipeline_jobs_joined", ()))
            handles = list(cluster.workers.items())
            planned = set(getattr(cluster, "worker_spec", {}))
        except RuntimeError:  # changed by the cluster's loop meanwhile: next time
            return
        for name, handle in handles:
            job_id = str(getattr(handle, "job_id", None))
            if name not in planned:  # scaled down by the cluster itself, which closes it
                continue
            if job_id in ended and job_id not in joined and job_id not in self._forgotten:
                self._forgotten.add(job_id)
                log.warning("%s job %s ended before its workers joined%s; another is submitted "
                            "while work remains", BATCH_SYSTEMS[self.kind].label, job_id,
                            self._log_tail(job_id))
                cluster.loop.add_callback(forget, name, handle.job_id)

    def _log_tail(self, job_id: str) -> str:
        """`` (its log PATH: LAST LINE)`` of the job's stderr file, where dask-jobqueue's
        log_directory holds one, else ''."""
        folder = (getattr(self.cluster, "_job_kwargs", None) or {}).get("log_directory")
        if not folder:
            return ""
        for path in Path(folder).glob(f"*-{job_id}.err"):
            try:
                with open(path, "rb") as fh:
                    fh.seek(max(0, path.stat().st_size - 4096))
                    lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
            except OSError:
                continue
            last = next((ln for ln in reversed(lines) if ln), "")
            return f" (its log {path}" + (f": {last[:300]}" if last else ": empty") + ")"
        return ""


def batch_error_text(exc: BaseException) -> str:
    """The batch system's own words from a failed dask-jobqueue submission (its stderr)."""
    text = str(exc)
    m = re.search(r"stderr:\n(.*)", text, re.S)
    if m and m.group(1).strip():
        text = m.group(1)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines)[:1000] or type(exc).__name__


def job_of(cluster, worker_name) -> Any:
    """The job (``worker_spec`` key) a worker belongs to: dask-jobqueue names the workers of a
    job of several processes NAME-0, NAME-1... (the spec's ``group``); a worker of one
    process is named as its job."""
    if worker_name in cluster.worker_spec:
        return worker_name
    for name, spec in cluster.worker_spec.items():
        if any(f"{name}{suffix}" == str(worker_name) for suffix in spec.get("group", ())):
            return name
    return worker_name


def _queue_adaptive():
    from distributed.deploy.adaptive import Adaptive

    class QueueAdaptive(Adaptive):
        """Asks for one worker per task queued or running (within minimum..maximum), and
        scales down only jobs whose every worker is idle.

        Dask's default target, occupancy / 5 s, suits long task graphs; the sweep driver
        keeps only about two ~0.2 s batches per thread in flight, which that rule reads as
        work for one worker, so the cluster would never grow past its first job."""

        async def workers_to_close(self, target: int) -> list[str]:
            """Whole jobs, all of whose workers run nothing. Dask's choice closed busy
            workers when the target fell (in a sweep's tail, the long batches still running),
            and, for a job of several processes, the busy siblings of the idle worker it chose:
            their batches were lost, and a long point lost twice was stored as failed
            (KilledWorker) although it was sound."""
            scheduler = getattr(self.cluster, "scheduler", None)
            workers = getattr(scheduler, "workers", None)
            if workers is None:  # not an in-process scheduler: Dask's own rule
                return await super().workers_to_close(target)
            jobs: dict = {}
            for ws in workers.values():
                jobs.setdefault(job_of(self.cluster, ws.name), []).append(ws)
            surplus = len(workers) - target
            names = []
            for members in jobs.values():
                if len(members) <= surplus and not any(ws.processing for ws in members):
                    names += [ws.name for ws in members]
                    surplus -= len(members)
            return names

        async def scale_down(self, workers) -> None:
            """Never a job with a worker running a batch: also the jobs Dask picks itself
            (requested workers not arrived yet, whose job's first worker may be busy)."""
            scheduler = getattr(self.cluster, "scheduler", None)
            busy = {job_of(self.cluster, ws.name)
                    for ws in getattr(scheduler, "workers", {}).values() if ws.processing}
            await super().scale_down([w for w in workers if job_of(self.cluster, w) not in busy])

        async def target(self):
            scheduler = getattr(self.cluster, "scheduler", None)
            try:
                ready = (len(scheduler.queued) + len(scheduler.unrunnable)
                         + sum(len(ws.processing) for ws in scheduler.workers.values()))
                threads = max(1, int(self.cluster._dummy_job.worker_process_threads))
            except AttributeError:  # not an in-process scheduler: Dask's own rule
                return await super().target()
            return -(-ready // threads)

    return QueueAdaptive


TLS_FOLDER = ".pipeline-tls"  # + "-UID" under shared_temp_directory: one folder per driver
DRY_RUN_TLS_FOLDER = "HOST.PID.XXXXXXXX"  # as a dry run shows it
DRIVER_LOCK = ".driver.lock"  # held by the driver while it lives: the kernel drops it at death


def tls_kwargs(cfg: Mapping[str, Any], driver_folder: str = DRY_RUN_TLS_FOLDER) -> dict:
    """TLS between the scheduler, its workers and the driver, with throwaway credentials
    (``cluster.tls``, default true). On plain tcp:// any user who can reach the login node's
    scheduler port can connect a Client and run code as the researcher (``client.run``).
    dask-jobqueue writes the workers' key and certificate (mode 0600) into
    ``shared_temp_directory/.pipeline-tls-UID/HOST.PID.RANDOM``, which the jobs must see at
    the same path (default ``~``: a home directory is shared on every cluster we know; ``$VAR``
    and ``~`` are expanded in the job script). The folder is the driver's own, so that one
    left by a killed driver can be told apart and removed (:func:`make_tls_folder`); the
    parent is the user's own, so that a folder shared by a group works for all of them."""
    if not setting(cfg, "tls", DEFAULTS["tls"]):
        return {}
    shared = str(setting(cfg, "shared_temp_directory", DEFAULTS["shared_temp_directory"]))
    return {"security": True, "shared_temp_directory":
            f"{shared.rstrip('/')}/{TLS_FOLDER}-{os.getuid()}/{driver_folder}"}


def make_tls_folder(shared_temp_directory: str) -> tuple[Path, Any]:
    """Create this driver's folder for the workers' credentials (mode 0700) and lock its
    :data:`DRIVER_LOCK` for the driver's life; then remove the folders that drivers of this
    host left when they were killed (kill -9, a crash): a private key each, kept in the
    shared home for good otherwise. Returns (the folder, the lock's open file)."""
    folder = Path(os.path.expanduser(os.path.expandvars(shared_temp_directory)))
    folder.parent.mkdir(mode=0o700, exist_ok=True)
    folder.mkdir(mode=0o700)
    _quiet_credential_files_already_removed(folder.parent)
    lock = open(folder / DRIVER_LOCK, "w")
    with contextlib.suppress(OSError):  # no locks on this filesystem: only the pid tells
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    removed = remove_stale_tls_folders(folder.parent)
    if removed:
        log.info("removed %d credential folder(s) of killed drivers from %s", removed,
                 folder.parent)
    return folder, lock


def _quiet_credential_files_already_removed(base: Path) -> None:
    """dask-jobqueue writes the credentials to temporary files that delete themselves when
    collected; a Ctrl-C while the cluster starts keeps them referenced from the traceback
    until after this driver has removed its folder, and each then printed "Exception ignored
    in: <_TemporaryFileCloser> ... FileNotFoundError" at exit (three, after the clean
    "interrupted"). Only that case is dropped; every other unraisable exception is shown."""
    import sys

    previous = sys.unraisablehook
    if getattr(previous, "pipeline_tls", False):
        return
    prefix = str(base)

    def hook(unraisable):
        exc = unraisable.exc_value
        if (isinstance(exc, FileNotFoundError) and str(exc.filename or "").startswith(prefix)
                and "_TemporaryFileCloser" in getattr(unraisable.object, "__qualname__", "")):
            return
        previous(unraisable)

    hook.pipeline_tls = True
    sys.unraisablehook = hook


def _driver_gone(folder: Path) -> bool:
    """The driver of a ``HOST.PID.RANDOM`` folder of this host is gone: no process has its pid,
    and its lock is free (held, the driver lives, whatever PID namespace it runs in; free, it
    died, the kernel dropping the lock with it, or is just starting and has a live pid)."""
    from pipeline.store.manifest import pid_alive

    pid = folder.name.rpartition(".")[0].rpartition(".")[2]
    if not pid.isdigit():
        return False
    try:
        with open(folder / DRIVER_LOCK, "r+") as fh:  # r+: NFS locks exclusively only so
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # no lock file (killed before it made one) or no locks here: the pid says
        pass
    return not pid_alive(int(pid))


def remove_stale_tls_folders(base: Path) -> int:
    """Remove the ``HOST.PID.RANDOM`` folders under ``base`` whose driver ran on this host and
    is gone. Another host's are left: its lock may be local to its node (NFS without a lock
    daemon), so whether its driver lives cannot be told from here."""
    host, removed = socket.gethostname(), 0
    with contextlib.suppress(FileNotFoundError):
        for folder in list(base.iterdir()):
            name_host = folder.name.rpartition(".")[0].rpartition(".")[0]
            if name_host != host or not _driver_gone(folder):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed += not folder.exists()
    return removed


def remove_tls_folder(cluster) -> None:
    """After the cluster's close: delete the workers' credential files and the driver's folder
    (``.pipeline-tls-UID`` stays, for the next sweep)."""
    folder = getattr(cluster, "pipeline_tls_folder", None)
    if folder is None:
        return
    for key in ("ca_file", "cert", "key"):  # dask-jobqueue's handles: closing unlinks
        with contextlib.suppress(OSError, AttributeError):
            getattr(cluster, f"_job_{key}").close()
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError, AttributeError):
        cluster.pipeline_tls_lock.close()  # after the removal: never a folder unlocked in place


def make_batch_cluster(cfg: Mapping[str, Any]):
    """Start a dask-jobqueue cluster (its scheduler runs in this process) that scales
    adaptively between ``minimum_jobs`` and ``maximum_jobs``; its job submissions report to a
    :class:`SubmissionWatch` at ``cluster.pipeline_watch``."""
    kind = cfg["kind"]
    base = _cluster_class(kind)
    if kind == "slurm":
        cancel_orphan_jobs()  # before this driver's own jobs queue behind them
    watch = SubmissionWatch(
        kind, setting(cfg, "max_submit_failures", DEFAULTS["max_submit_failures"]),
        parse_duration("worker_start_timeout",
                  setting(cfg, "worker_start_timeout", DEFAULTS["worker_start_timeout"])))

    class WatchedJob(base.job_cls):
        async def start(self):
            # Retried here, with back-off: a busy controller refuses the odd submission, and
            # SpecCluster does not resubmit a job whose start failed.
            for attempt in range(watch.max_failures):
                try:
                    await super().start()
                except Exception as exc:
                    watch.failed(exc)
                    if watch.consecutive_failures >= watch.max_failures:
                        # The watch now stops the sweep with the batch system's words; raising
                        # here would only add a tornado traceback to the terminal. (SpecCluster
                        # asserts a started worker is running; it holds no job to cancel.)
                        from distributed.core import Status

                        self.status = Status.running
                        return
                    await asyncio.sleep(min(SUBMIT_BACKOFF_S * 2 ** attempt, 60))
                else:
                    watch.submitted(self.job_id)
                    return

    WatchedJob.__name__ = base.job_cls.__name__  # dask-jobqueue derives messages from it

    dashboard = str(setting(cfg, "dashboard_address", LOCAL_DASHBOARD))
    dashboard_host = dashboard.rpartition(":")[0]

    class WatchedCluster(base):
        job_cls = WatchedJob

        def _update_worker_status(self, op, msg):
            """A job whose workers have all left (its walltime or lifetime reached, scancel, a
            node lost) is closed and dropped from the plan after
            ``distributed.deploy.lost-worker-timeout``, so that adaptive scaling submits a
            fresh one. Dask's own clean-up matched the worker's name to a job's, which never
            matches for a job of several processes (NAME-0, NAME-1: dask/distributed#9102),
            and kept the job in the plan: the cluster stopped replacing jobs, and an
            overnight sweep sat without workers until no_workers_timeout."""
            import dask
            from dask.utils import parse_timedelta
            from distributed.deploy.cluster import Cluster

            job_ids = self.__dict__.setdefault("pipeline_job_ids", {})  # address -> job id
            if op == "add":  # each worker's job, by batch job id: a job name is reused
                for address, info in (msg.get("workers") or {}).items():
                    handle = self.workers.get(job_of(self, info.get("name")))
                    if getattr(handle, "job_id", None):
                        job_ids[address] = handle.job_id
                        self.__dict__.setdefault("pipeline_jobs_joined", set()).add(
                            str(handle.job_id))
            elif op == "remove":
                info = self.scheduler_info.get("workers", {}).get(msg)
                job_id = job_ids.pop(msg, None)
                if info is not None and job_id is not None:
                    grace = parse_timedelta(
                        dask.config.get("distributed.deploy.lost-worker-timeout"))
                    # the name and id only: a handle held here kept a closed job in
                    # SpecCluster._created, whose close then failed on its status
                    asyncio.get_running_loop().call_later(
                        grace, self._forget_job_if_gone, job_of(self, info.get("name")), job_id)
            Cluster._update_worker_status(self, op, msg)  # (SpecCluster's own skipped)

        def _forget_job_if_gone(self, job, job_id):
            handle = self.workers.get(job)
            if handle is None or getattr(handle, "job_id", None) != job_id:
                return  # closed already, or a fresh job under the same name
            if job_id in self.__dict__.get("pipeline_job_ids", {}).values():
                return  # a worker of it is back (its nanny restarted it) or still there
            from distributed.core import Status

            async def cancel():  # (scancel of a job that has ended already is harmless)
                try:
                    await handle.close()
                finally:
                    handle.status = Status.closed

            # dask-jobqueue's close never sets it: SpecCluster's own close asserts it
            handle.status = Status.closing
            self._futures.add(asyncio.ensure_future(cancel()))
            del self.workers[job]
            self.worker_spec.pop(job, None)
            log.info("%s job %s: its workers have left; adaptive scaling submits a fresh job "
                     "while work remains", BATCH_SYSTEMS[kind].label, job_id)

        @property
        def dashboard_link(self):
            link = super().dashboard_link
            if dashboard_host not in ("", "0.0.0.0", "[::]"):  # else Dask names the scheduler host
                port = link.rsplit(":", 1)[1].split("/", 1)[0]
                link = f"http://{dashboard_host}:{port}/status"
            return link

    tls = tls_kwargs(cfg, f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        tls_folder, tls_lock = make_tls_folder(tls["shared_temp_directory"]) if tls else (None,
                                                                                         None)
    except OSError as exc:
        raise ClusterStartError(f"cannot create the workers' credential folder under "
                                f"cluster.shared_temp_directory: {exc}") from None
    try:
        cluster = WatchedCluster(scheduler_options={"dashboard_address": dashboard},
                                 **job_kwargs(cfg), **tls)
    except BaseException:
        if tls_folder is not None:
            import gc

            gc.collect()  # dask-jobqueue's open key files: unlinked as they are collected
            shutil.rmtree(tls_folder, ignore_errors=True)
            tls_lock.close()
        raise
    cluster.pipeline_tls_folder, cluster.pipeline_tls_lock = tls_folder, tls_lock
    cluster.pipeline_watch = watch
    watch.cluster = cluster
    minimum, maximum = setting(cfg, "minimum_jobs", 0), setting(cfg, "maximum_jobs", 10)
    processes = setting(cfg, "processes", 1)
    threads = max(1, setting(cfg, "cores", 1) // processes)
    cluster.pipeline_max_threads = maximum * processes * threads  # the driver keeps this busy
    try:
        cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum, Adaptive=_queue_adaptive())
    except BaseException:
        remove_tls_folder(cluster)
        raise
    retire = lifetime(cfg)
    log.info("%s cluster: up to %d job(s) of %d worker(s)%s", BATCH_SYSTEMS[kind].label, maximum,
             processes, f"; workers retire after {format_duration(retire[0])} ± "
                        f"{format_duration(retire[1])} (walltime {cfg['walltime']})" if retire else "")
    return cluster


def make_slurm_cluster(cfg: Mapping[str, Any]):
    """Kept for callers of the SLURM-only version: a batch cluster with ``kind: slurm``."""
    return make_batch_cluster({**cfg, "kind": "slurm"})


def cluster_checks(client) -> list[Callable[[], None]]:
    """Checks for run_sweep's ``checks``: for a batch-system cluster, the submission watch."""
    watch = getattr(getattr(client, "cluster", None), "pipeline_watch", None)
    return [watch.check] if watch is not None else []
