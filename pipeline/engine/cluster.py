"""Dask clusters from the ``cluster:`` config node.

- ``kind: local``: an embedded ``LocalCluster`` (processes; ``n_workers`` x ``threads_per_worker``).
- ``kind: address``: connect to a running ``dask scheduler`` at ``address`` (``tls://`` with
  ``security: {ca_file, cert, key}``; see :mod:`pipeline.engine.address`).
- ``kind: slurm | pbs | sge | lsf | htcondor | oar | moab``: one code path over dask-jobqueue.
  The scheduler runs inside the driver; each batch job runs ``processes`` single-threaded
  workers and the cluster scales adaptively between ``minimum_jobs`` and ``maximum_jobs`` jobs.

Every key is checked by :func:`validate` before anything is written (exit 2, naming the key
and the allowed form). With a ``walltime``, workers get ``--lifetime = walltime -
lifetime_margin`` and ``--lifetime-stagger``: they retire (their work moves to other workers)
before the batch system kills the job, and adaptive scaling submits replacements.
:func:`cluster_checks` gives the driver loop a check that stops the sweep (exit 3) after
``max_submit_failures`` consecutive failed submissions, quoting the batch system's stderr, or
when no worker has joined within ``worker_start_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import dask

from pipeline.engine.address import (AddressConfigError, SchedulerCheckFailed, check_security,
                                     make_security, probe_scheduler)
from pipeline.store.redact import redact

log = logging.getLogger("pipeline")
LOCAL_DASHBOARD = "127.0.0.1:8787"  # loopback: the dashboard is unauthenticated (README)
# Worker deaths a task may be present at before the scheduler gives up on it (Dask's default
# is 3), on the schedulers we start. The driver splits a lost batch and retries a lost single
# point itself (runner.py), so each extra allowance only multiplies the worker restarts a
# point that kills its worker costs.
ALLOWED_FAILURES = 1
SCHEDULER_CONFIG = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}


class ClusterConfigError(ValueError):
    """A bad ``cluster.*`` setting or a missing batch command: exit 2 before anything runs."""


class ClusterStartError(RuntimeError):
    """The batch system refused our worker jobs, or none started in time: the sweep stops
    (exit 3, manifest ``crashed``; finished batches are kept and a rerun resumes)."""


@dataclass(frozen=True)
class BatchSystem:
    cluster_class: str  # in dask_jobqueue
    label: str  # as users name it
    account_key: str | None  # our key for the job's account/project (-A / -P), if any
    extra_keys: tuple[str, ...] = ()  # keys only this system has
    walltime_format: str = "hms"  # how its job directive spells a walltime: hms | hm | none


BATCH_SYSTEMS: dict[str, BatchSystem] = {
    "slurm": BatchSystem("SLURMCluster", "SLURM", "account"),
    "pbs": BatchSystem("PBSCluster", "PBS", "account", ("resource_spec",)),
    "sge": BatchSystem("SGECluster", "SGE", "project", ("resource_spec",)),
    "lsf": BatchSystem("LSFCluster", "LSF", "project", ("use_stdin",), walltime_format="hm"),
    "htcondor": BatchSystem("HTCondorCluster", "HTCondor", None, ("disk",),
                            walltime_format="none"),
    "oar": BatchSystem("OARCluster", "OAR", "project", ("resource_spec",)),
    "moab": BatchSystem("MoabCluster", "Moab", "account", ("resource_spec",)),
}
KINDS = ("local", "address", *BATCH_SYSTEMS)
# Dask's statistical profiler walks every worker thread's stack every 10 ms (BENCHMARKS.md:
# ~8 core-s per 40 s sweep at 1,024 threads); off unless cluster.worker_profile=true
NO_PROFILER = "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False"

DEFAULTS = {
    "cores": 1, "processes": 1, "memory": "4GB", "walltime": None, "minimum_jobs": 0,
    "maximum_jobs": 10, "job_extra_directives": [], "job_directives_skip": [],
    "job_script_prologue": [], "worker_extra_args": [], "death_timeout": "60s",
    "dashboard_address": "127.0.0.1:8787", "lifetime_margin": "5m", "lifetime_stagger": "1m",
    "worker_start_timeout": "10m", "max_submit_failures": 3,
    "tls": True, "shared_temp_directory": "~",
}


def _get(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key, default) if cfg is not None else default
    return default if value is None else value


# --------------------------------------------------------------------------- key validators
def _int(minimum: int) -> Callable[[str, Any], Any]:
    def check(key, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ClusterConfigError(f"cluster.{key} must be an integer >= {minimum}, got {value!r}")
        return value
    return check


def _bytes(key: str, value: Any) -> int:
    from dask.utils import parse_bytes

    if isinstance(value, bool):
        raise ClusterConfigError(f"cluster.{key} must be a byte size, got {value!r}")
    try:
        n = parse_bytes(value)
    except (ValueError, TypeError, KeyError):
        raise ClusterConfigError(f"cluster.{key} must be a byte size such as 4GB, 512MiB or "
                                 f"an integer number of bytes, got {value!r}") from None
    if n <= 0:
        raise ClusterConfigError(f"cluster.{key} must be a positive byte size, got {value!r}")
    return n


def _memory_limit(key: str, value: Any) -> Any:
    if value in ("auto", 0):
        return value
    if isinstance(value, float) and 0 < value <= 1:
        return value  # a fraction of the machine's memory, as LocalCluster reads it
    try:
        return _bytes(key, value)
    except ClusterConfigError:
        raise ClusterConfigError(f"cluster.{key} must be 'auto', a byte size such as 4GB, a "
                                 f"fraction of memory in (0, 1], or 0 or null for no limit; "
                                 f"got {value!r}") from None


def _duration(key: str, value: Any) -> float:
    """Seconds from dask's duration forms: 30, "30s", "10m", "1.5h", "2 days"."""
    from dask.utils import parse_timedelta

    seconds = None
    if not isinstance(value, bool):
        with contextlib.suppress(ValueError, TypeError, KeyError):
            seconds = parse_timedelta(value, default="s")
    if seconds is None or seconds <= 0:
        raise ClusterConfigError(f"cluster.{key} must be a positive duration such as 30s, 10m, "
                                 f"2h (or a number of seconds), got {value!r}")
    return float(seconds)


_WALLTIME = re.compile(r"^(?:(\d+)-)?(\d+):(\d{1,2}):(\d{1,2})$")


def parse_walltime(value: Any, key: str = "walltime") -> int:
    """Seconds in a walltime: ``[D-]HH:MM:SS`` (what SLURM, PBS, SGE and OAR take) or a
    duration with a unit such as ``4h`` or ``90m``."""
    text = str(value).strip()
    m = _WALLTIME.match(text)
    if m:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
        if minutes < 60 and seconds < 60:
            total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
            if total > 0:
                return total
    elif not re.fullmatch(r"[\d.]+", text):  # a bare number is ambiguous (SLURM reads minutes)
        with contextlib.suppress(ClusterConfigError):
            return int(_duration(key, text))
    raise ClusterConfigError(f"cluster.{key} must be a walltime HH:MM:SS or D-HH:MM:SS (or a "
                             f"duration with a unit such as 4h or 90m), got {value!r}")


def format_walltime(seconds: int, style: str) -> str:
    """How a batch system's job directive spells a walltime: ``HH:MM:SS`` or LSF's ``HH:MM``."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if style == "hm":
        return f"{hours:02d}:{minutes:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _format_duration(seconds: float) -> str:
    """A duration as dask's command line reads it, in the largest exact unit."""
    seconds = int(round(seconds))
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]*):(?P<port>\d{1,5})$")


def _host_port(key: str, value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535:
        return value
    m = _HOST_PORT.match(str(value)) if isinstance(value, str) else None
    if not m or int(m["port"]) > 65535:
        raise ClusterConfigError(f"cluster.{key} must be HOST:PORT or :PORT (port 0-65535; "
                                 f"e.g. 127.0.0.1:8787, or :0 for any free port), got {value!r}")
    return value


def _scheduler_address(key: str, value: Any) -> str:
    from distributed.comm.addressing import parse_address, parse_host_port

    text = str(value) if isinstance(value, str) else ""
    try:
        scheme, location = parse_address(text, strict=True)
        if scheme not in ("tcp", "tls", "ws", "wss", "ucx", "inproc"):
            raise ValueError(scheme)
        if scheme != "inproc":
            host, port = parse_host_port(location)
            if not host or not 0 < int(port) <= 65535:
                raise ValueError(location)
    except (ValueError, TypeError):
        raise ClusterConfigError(f"cluster.{key} must be a scheduler address such as "
                                 f"tcp://HOST:8786 (or tls://HOST:PORT), got {value!r}") from None
    return text


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ClusterConfigError(f"cluster.{key} must be a non-empty string or null, got {value!r}")
    return value


def _shared_directory(key: str, value: Any) -> str:
    """A folder the jobs must also see (``~`` and ``$VAR`` expanded here as in a job script):
    it must exist and be writable here, or the cluster fails to start after the lock is taken."""
    value = _text(key, value)
    path = os.path.expanduser(os.path.expandvars(value))
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise ClusterConfigError(f"cluster.{key} must be an existing folder you can write, "
                                 f"shared with the compute nodes (default ~); got {value!r}"
                                 f"{'' if path == value else f' ({path})'}")
    return value


def _text_list(key: str, value: Any) -> list:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ClusterConfigError(f"cluster.{key} must be a list of strings, e.g. "
                                 f"cluster.{key}='[\"--a=1\",\"--b\"]', got {value!r}")
    return list(value)


def _directives(kind: str) -> Callable[[str, Any], Any]:
    def check(key, value):
        if kind == "htcondor":  # submit-file lines: a mapping of attribute to value
            if not isinstance(value, dict):
                raise ClusterConfigError(f"cluster.{key} for htcondor must be a mapping of "
                                         f"submit-file attributes to values, e.g. "
                                         f"{{'+ProjectName': '\"myproj\"'}}, got {value!r}")
            return dict(value)
        return _text_list(key, value)
    return check


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ClusterConfigError(f"cluster.{key} must be true or false, got {value!r}")
    return value


def _interface(key: str, value: Any) -> str:
    import psutil

    known = sorted(psutil.net_if_addrs())
    if value not in known:
        raise ClusterConfigError(f"cluster.{key}: no network interface {value!r} on this host "
                                 f"(the scheduler binds to it too); interfaces here: "
                                 + ", ".join(known))
    return value


def _anything(key: str, value: Any) -> Any:
    return value


def _schema(kind: str) -> dict[str, Callable[[str, Any], Any]]:
    """Every key a kind accepts, with its validator (None values skip the validator)."""
    if kind == "local":
        return {"kind": _anything, "n_workers": _int(1), "threads_per_worker": _int(1),
                "memory_limit": _memory_limit, "dashboard_address": _host_port,
                "worker_profile": _flag}
    if kind == "address":  # `security` (TLS) belongs to the address kind's own settings
        return {"kind": _anything, "address": _scheduler_address, "timeout": _duration,
                "security": _anything}
    system = BATCH_SYSTEMS[kind]
    keys = {
        "kind": _anything, "cores": _int(1), "processes": _int(1), "memory": _bytes,
        "walltime": lambda key, value: parse_walltime(value, key), "minimum_jobs": _int(0), "maximum_jobs": _int(1),
        "queue": _text, "job_name": _text, "interface": _interface,
        "worker_extra_args": _text_list, "job_extra_directives": _directives(kind),
        "job_directives_skip": _text_list, "job_script_prologue": _text_list,
        "local_directory": _text, "log_directory": _text, "python": _text,
        "death_timeout": _duration, "dashboard_address": _host_port,
        "lifetime_margin": _duration, "lifetime_stagger": _duration,
        "worker_start_timeout": _duration, "max_submit_failures": _int(1),
        "disk": _bytes, "resource_spec": _text, "use_stdin": _flag, "worker_profile": _flag,
        "tls": _flag, "shared_temp_directory": _text,
    }
    if kind == "htcondor":
        del keys["queue"]
    for key in ("disk", "resource_spec", "use_stdin"):
        if key not in system.extra_keys:
            del keys[key]
    if system.account_key:
        keys[system.account_key] = _text
    return keys


def cluster_keys(kind: str) -> list[str]:
    """The keys ``cluster=KIND`` accepts."""
    return sorted(_schema(kind))


def validate(cfg: Mapping[str, Any]) -> None:
    """Reject a bad cluster config before anything starts: every key of the kind is checked
    (byte sizes, durations, walltimes, addresses, counts, lists), unknown keys are named."""
    cfg = cfg or {}
    kind = _get(cfg, "kind", "local")
    if kind not in KINDS:
        raise ClusterConfigError(f"cluster.kind must be one of {{{', '.join(KINDS)}}}, got {kind!r}")
    schema = _schema(kind)
    unknown = sorted(set(cfg) - set(schema))
    if unknown:
        raise ClusterConfigError(f"unknown key(s) for cluster={kind}: "
                                 + ", ".join(f"cluster.{k}" for k in unknown)
                                 + "; allowed: " + ", ".join(sorted(schema)))
    if kind == "address" and cfg.get("address") in (None, "", "???"):
        raise ClusterConfigError("cluster=address needs cluster.address=tcp://HOST:PORT "
                                 f"(got {cfg.get('address')!r})")
    if kind == "address" and "@" in str(cfg["address"]).split("://", 1)[-1].split("/", 1)[0]:
        raise ClusterConfigError(
            f"cluster.address={redact(str(cfg['address']))}: a Dask address takes no "
            "user:password@ (schedulers authenticate clients by TLS certificates: "
            "tls://HOST:PORT with cluster.security)")
    for key, check in schema.items():
        if cfg.get(key) is not None:
            check(key, cfg[key])
    if kind in BATCH_SYSTEMS:
        _validate_batch(kind, cfg)
    if kind == "address":
        try:
            check_security(cfg)  # TLS files: required for tls://, must exist
        except AddressConfigError as exc:
            raise ClusterConfigError(str(exc)) from None


def _validate_batch(kind: str, cfg: Mapping[str, Any]) -> None:
    cores, processes = _get(cfg, "cores", 1), _get(cfg, "processes", 1)
    if processes > cores:
        raise ClusterConfigError(f"cluster.processes ({processes}) must be <= cluster.cores "
                                 f"({cores}): each worker process needs a core")
    minimum, maximum = _get(cfg, "minimum_jobs", 0), _get(cfg, "maximum_jobs", 10)
    if minimum > maximum:
        raise ClusterConfigError(f"cluster.minimum_jobs ({minimum}) must be <= "
                                 f"cluster.maximum_jobs ({maximum})")
    if kind == "htcondor" and cfg.get("disk") is None:
        raise ClusterConfigError("cluster=htcondor needs cluster.disk (scratch disk per job, "
                                 "e.g. 1GB)")
    lifetime(cfg)  # walltime vs margin and stagger
    if _get(cfg, "tls", DEFAULTS["tls"]):  # where the workers' TLS files go (not without TLS)
        _shared_directory("shared_temp_directory",
                          _get(cfg, "shared_temp_directory", DEFAULTS["shared_temp_directory"]))


def lifetime(cfg: Mapping[str, Any]) -> tuple[int, int] | None:
    """(``--lifetime``, ``--lifetime-stagger``) in seconds for a batch job's workers, or None
    without a walltime. A worker retires at lifetime ± stagger, so the latest one still
    leaves ``lifetime_margin - lifetime_stagger`` before the walltime to hand its work over."""
    if cfg.get("walltime") is None:
        return None
    walltime = parse_walltime(cfg["walltime"])
    margin = _duration("lifetime_margin", _get(cfg, "lifetime_margin", DEFAULTS["lifetime_margin"]))
    stagger = _duration("lifetime_stagger",
                        _get(cfg, "lifetime_stagger", DEFAULTS["lifetime_stagger"]))
    if margin >= walltime:
        raise ClusterConfigError(
            f"cluster.lifetime_margin ({_format_duration(margin)}) must be shorter than "
            f"cluster.walltime ({cfg['walltime']}): workers retire that long before the walltime")
    if stagger >= margin:
        raise ClusterConfigError(
            f"cluster.lifetime_stagger ({_format_duration(stagger)}) must be shorter than "
            f"cluster.lifetime_margin ({_format_duration(margin)}): a worker retires at "
            "walltime - margin ± stagger, and must do so before the walltime")
    return int(walltime - margin), int(stagger)


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
    kind = _get(cfg or {}, "kind", "local")
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


def job_kwargs(cfg: Mapping[str, Any]) -> dict:
    """dask-jobqueue's job keywords from a validated batch-cluster config, ``--lifetime`` and
    ``--lifetime-stagger`` included when a walltime is set."""
    kind = cfg["kind"]
    system = BATCH_SYSTEMS[kind]
    extra_args = list(_get(cfg, "worker_extra_args", []))
    retire = lifetime(cfg)
    if retire and not any(a.split("=")[0] == "--lifetime" for a in extra_args):
        extra_args += ["--lifetime", _format_duration(retire[0]),
                       "--lifetime-stagger", _format_duration(retire[1])]
    kwargs = dict(
        cores=_get(cfg, "cores", DEFAULTS["cores"]),
        processes=_get(cfg, "processes", DEFAULTS["processes"]),
        memory=str(_get(cfg, "memory", DEFAULTS["memory"])),
        job_name=cfg.get("job_name"),
        interface=cfg.get("interface"),
        worker_extra_args=extra_args,
        job_extra_directives=(_get(cfg, "job_extra_directives", {} if kind == "htcondor" else [])),
        job_directives_skip=list(_get(cfg, "job_directives_skip", [])),
        job_script_prologue=[*([] if _get(cfg, "worker_profile", False) else [NO_PROFILER]),
                             *_get(cfg, "job_script_prologue", [])],
        local_directory=cfg.get("local_directory"),
        log_directory=(str(Path(cfg["log_directory"]).expanduser().absolute())
                       if cfg.get("log_directory") else None),
        python=cfg.get("python"),
        death_timeout=int(_duration("death_timeout",
                                    _get(cfg, "death_timeout", DEFAULTS["death_timeout"]))),
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
    kind = _get(cfg, "kind", "local")
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
    head = f"job script (cluster={kind}; one per job, up to {_get(cfg, 'maximum_jobs', 10)} jobs; nothing submitted):"
    if retire:
        head = (f"workers retire after --lifetime {_format_duration(retire[0])} "
                f"± --lifetime-stagger {_format_duration(retire[1])} (walltime {cfg['walltime']} "
                f"- lifetime_margin {_get(cfg, 'lifetime_margin', DEFAULTS['lifetime_margin'])})\n"
                + head)
    return f"{head}\n{script}"


SUBMIT_BACKOFF_S = 2.0  # first pause before resubmitting a refused job; doubles each time


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

    def submitted(self, job_id: str) -> None:
        with self._lock:
            self.consecutive_failures = 0
            self.job_ids.append(str(job_id))
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
            return  # later gaps (jobs retiring at walltime) are the watchdog's, not a start-up failure
        if self.workers():
            self._first_worker_at = time.monotonic()
            return
        waited = time.monotonic() - self._started
        if waited > self.start_timeout:
            why = (f"; the last submission error: {self.last_error}" if self.last_error else
                   f"; jobs submitted: {', '.join(self.job_ids[-5:]) or 'none'} (still queued? "
                   f"raise cluster.worker_start_timeout to wait longer)")
            raise ClusterStartError(
                f"no Dask worker joined within cluster.worker_start_timeout="
                f"{_format_duration(self.start_timeout)}{why}")


def batch_error_text(exc: BaseException) -> str:
    """The batch system's own words from a failed dask-jobqueue submission (its stderr)."""
    text = str(exc)
    m = re.search(r"stderr:\n(.*)", text, re.S)
    if m and m.group(1).strip():
        text = m.group(1)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines)[:1000] or type(exc).__name__


def _queue_adaptive():
    from distributed.deploy.adaptive import Adaptive

    class QueueAdaptive(Adaptive):
        """Asks for one worker per task queued or running (within minimum..maximum).

        Dask's default target, occupancy / 5 s, suits long task graphs; the sweep driver
        keeps only about two ~0.2 s batches per thread in flight, which that rule reads as
        work for one worker, so the cluster would never grow past its first job."""

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


def tls_kwargs(cfg: Mapping[str, Any]) -> dict:
    """TLS between the scheduler, its workers and the driver, with throwaway credentials
    (``cluster.tls``, default true). On plain tcp:// any user who can reach the login node's
    scheduler port can connect a Client and run code as the researcher (``client.run``).
    dask-jobqueue writes the workers' key and certificate (mode 0600) into
    ``shared_temp_directory``, which the jobs must see at the same path (default ``~``: a
    home directory is shared on every cluster we know; ``$VAR`` and ``~`` are expanded in the
    job script); they are removed when the cluster closes."""
    if not _get(cfg, "tls", DEFAULTS["tls"]):
        return {}
    return {"security": True,
            "shared_temp_directory": str(_get(cfg, "shared_temp_directory",
                                              DEFAULTS["shared_temp_directory"]))}


def make_batch_cluster(cfg: Mapping[str, Any]):
    """Start a dask-jobqueue cluster (its scheduler runs in this process) that scales
    adaptively between ``minimum_jobs`` and ``maximum_jobs``; its job submissions report to a
    :class:`SubmissionWatch` at ``cluster.pipeline_watch``."""
    kind = cfg["kind"]
    base = _cluster_class(kind)
    watch = SubmissionWatch(
        kind, _get(cfg, "max_submit_failures", DEFAULTS["max_submit_failures"]),
        _duration("worker_start_timeout",
                  _get(cfg, "worker_start_timeout", DEFAULTS["worker_start_timeout"])))

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

    dashboard = str(_get(cfg, "dashboard_address", LOCAL_DASHBOARD))
    dashboard_host = dashboard.rpartition(":")[0]

    class WatchedCluster(base):
        job_cls = WatchedJob

        @property
        def dashboard_link(self):
            link = super().dashboard_link
            if dashboard_host not in ("", "0.0.0.0", "[::]"):  # else Dask names the scheduler host
                port = link.rsplit(":", 1)[1].split("/", 1)[0]
                link = f"http://{dashboard_host}:{port}/status"
            return link

    cluster = WatchedCluster(scheduler_options={"dashboard_address": dashboard},
                             **job_kwargs(cfg), **tls_kwargs(cfg))
    cluster.pipeline_watch = watch
    watch.cluster = cluster
    minimum, maximum = _get(cfg, "minimum_jobs", 0), _get(cfg, "maximum_jobs", 10)
    processes = _get(cfg, "processes", 1)
    threads = max(1, _get(cfg, "cores", 1) // processes)
    cluster.pipeline_max_threads = maximum * processes * threads  # the driver keeps this busy
    cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum, Adaptive=_queue_adaptive())
    retire = lifetime(cfg)
    log.info("%s cluster: up to %d job(s) of %d worker(s)%s", BATCH_SYSTEMS[kind].label, maximum,
             processes, f"; workers retire after {_format_duration(retire[0])} ± "
                        f"{_format_duration(retire[1])} (walltime {cfg['walltime']})" if retire else "")
    return cluster


def make_slurm_cluster(cfg: Mapping[str, Any]):
    """Kept for callers of the SLURM-only version: a batch cluster with ``kind: slurm``."""
    return make_batch_cluster({**cfg, "kind": "slurm"})


def cluster_checks(client) -> list[Callable[[], None]]:
    """Checks for run_sweep's ``checks``: for a batch-system cluster, the submission watch."""
    watch = getattr(getattr(client, "cluster", None), "pipeline_watch", None)
    return [watch.check] if watch is not None else []


# --------------------------------------------------------------------------- connect
CLOSE_TIMEOUT_S = 30


def _bounded(what: str, fn: Callable[[], Any], seconds: float) -> bool:
    """Run a teardown step in a daemon thread and stop waiting for it after ``seconds``."""
    done = threading.Event()

    def run():
        try:
            fn()
        except Exception as exc:  # teardown errors are not the sweep's result
            log.debug("%s: %s", what, exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"close-{what}", daemon=True).start()
    if not done.wait(seconds):
        log.warning("%s did not finish within %.0f s; moving on", what, seconds)
        return False
    return True


@contextlib.contextmanager
def _closed_if_half_built():
    """Close a cluster whose construction was cut short (Ctrl-C, SIGTERM while its workers
    start). Dask's exit handler closed it otherwise, and failed with ``AssertionError:
    Status.init`` on a worker that had not started: a traceback after the sweep's own clean
    "interrupted" message. Closed here within a bound, then marked closed for that handler."""
    from distributed.core import Status
    from distributed.deploy.spec import SpecCluster

    before = set(SpecCluster._instances)
    try:
        yield
    except BaseException:
        for cluster in set(SpecCluster._instances) - before:
            _bounded("cluster.close", lambda: cluster.close(timeout=CLOSE_TIMEOUT_S),
                     CLOSE_TIMEOUT_S + 5)
            cluster.status = Status.closed
        # the nanny starts this close cut short end in "Task exception was never retrieved"
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise


def check_scheduler(cfg: Mapping[str, Any]) -> None:
    """``cluster=address``: check, within ``cluster.timeout``, that the peer at
    ``cluster.address`` answers as a Dask scheduler (the TLS handshake included). Raises
    :class:`ClusterConfigError` (bad input: exit 2, called before anything is written) when
    something answers but not as a Dask scheduler, or the TLS handshake fails. A scheduler
    that cannot be reached at all (refused, no route, timeout) is not bad input: it may be
    starting or briefly down, so that is left to the client (exit 3, as any lost scheduler)."""
    if _get(cfg or {}, "kind", "local") != "address":
        return
    from dask.utils import parse_timedelta

    security = make_security(check_security(cfg))
    try:
        probe_scheduler(str(cfg["address"]),
                        security, parse_timedelta(str(_get(cfg, "timeout", "30s"))))
    except SchedulerCheckFailed as exc:
        raise ClusterConfigError(redact(str(exc))) from None
    except OSError:
        pass  # unreachable: the client reports it in its own words when the sweep connects


@contextlib.contextmanager
def connect(cfg: Mapping[str, Any], log: logging.Logger, probe: bool = True) -> Iterator[Any]:
    """Yield a connected ``distributed.Client``; tear down what was started on exit, within
    bounded time (a stuck scheduler or batch command cannot hold the exit). ``probe=False``:
    the caller already ran :func:`check_scheduler` (the CLI does, before writing anything)."""
    from distributed import Client, LocalCluster

    validate(cfg)
    kind = _get(cfg, "kind", "local")
    if kind == "address":
        address, timeout = str(cfg["address"]), str(_get(cfg, "timeout", "30s"))
        security = make_security(check_security(cfg))
        if probe:  # a bounded identity check first: a wrong service must not hang or misparse
            from dask.utils import parse_timedelta

            try:
                probe_scheduler(address, security, parse_timedelta(timeout))
            except SchedulerCheckFailed as exc:
                raise type(exc)(redact(str(exc))) from None
            except OSError:
                pass  # nothing listening: the client below reports it in its own words
        client = Client(address, timeout=timeout, security=security)
        log.info("connected to scheduler %s (dashboard %s)", redact(address), client.dashboard_link)
        try:
            yield client
        finally:
            _bounded("client.close", lambda: client.close(timeout=10), 15)
        return
    if kind in BATCH_SYSTEMS:
        with dask.config.set(SCHEDULER_CONFIG):
            cluster = make_batch_cluster(cfg)
    else:
        # The cores this process may use (affinity, cgroup quota: a SLURM job's allocation,
        # `taskset`), not the machine's: os.cpu_count() started a worker per core of the node.
        from dask.system import CPU_COUNT

        n_workers = cfg.get("n_workers") or CPU_COUNT or 1
        profile = bool(_get(cfg, "worker_profile", False))
        with dask.config.set({**SCHEDULER_CONFIG, "distributed.worker.profile.enabled": profile}), \
                _closed_if_half_built():
            cluster = LocalCluster(
                n_workers=int(n_workers),
                threads_per_worker=int(_get(cfg, "threads_per_worker", 1)),
                processes=True,
                memory_limit=_get(cfg, "memory_limit", "auto"),
                # loopback by default: the dashboard is unauthenticated (see README, SSH tunnel)
                dashboard_address=str(_get(cfg, "dashboard_address", LOCAL_DASHBOARD)),
                silence_logs=logging.ERROR,
                # TLS with throwaway credentials held by this process and its workers: a
                # scheduler on plain tcp:// 127.0.0.1 let any user of a shared login node
                # connect a Client and run code as us (client.run); its port is in `ss -ltn`
                security=True,
                # Ctrl-C reaches the workers too (one process group): they leave the
                # shutdown to the driver instead of dying with tracebacks on the terminal
                preload=["pipeline.engine.worker_preload"],
            )
    try:
        client = Client(cluster)
    except BaseException:
        _bounded("cluster.close", lambda: cluster.close(timeout=CLOSE_TIMEOUT_S), CLOSE_TIMEOUT_S + 5)
        raise
    log.info("%s cluster up; dashboard: %s", kind, client.dashboard_link)
    try:
        yield client
    finally:
        _bounded("client.close", lambda: client.close(timeout=10), 15)
        closed = _bounded("cluster.close", lambda: cluster.close(timeout=CLOSE_TIMEOUT_S),
                          CLOSE_TIMEOUT_S + 5)
        watch = getattr(cluster, "pipeline_watch", None)
        if watch is not None and watch.job_ids and not closed:
            cancel = _cluster_class(kind).job_cls.cancel_command.split()[0]
            log.warning("some %s jobs may still be queued or running; cancel them with: %s %s",
                        BATCH_SYSTEMS[kind].label, cancel, " ".join(watch.job_ids))
