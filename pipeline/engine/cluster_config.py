"""The ``cluster:`` config node: its kinds, the keys each accepts, and their validation.

- ``kind: local``: an embedded ``LocalCluster`` (processes; ``n_workers`` x ``threads_per_worker``).
- ``kind: address``: connect to a running ``dask scheduler`` at ``address`` (``tls://`` with
  ``security: {ca_file, cert, key}``; see :mod:`pipeline.engine.address`).
- ``kind: slurm | pbs | sge | lsf | htcondor | oar | moab``: one code path over dask-jobqueue
  (:mod:`pipeline.engine.batch_cluster`).

Every key is checked by :func:`validate` before anything is written (exit 2, naming the key
and the allowed form). With a ``walltime``, :func:`lifetime` derives the workers'
``--lifetime = walltime - lifetime_margin`` and ``--lifetime-stagger``.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pipeline.engine.address import AddressConfigError, check_security
from pipeline.store.redact import redact

LOCAL_DASHBOARD = "127.0.0.1:8787"  # loopback: the dashboard is unauthenticated (README)


class ClusterConfigError(ValueError):
    """A bad ``cluster.*`` setting or a missing batch command: exit 2 before anything runs."""


@dataclass(frozen=True)
class BatchSystem:
    cluster_class: str  # in dask_jobqueue
    label: str  # as users name it
    account_key: str | None  # our key for the job's account/project (-A / -P), if any
    extra_keys: tuple[str, ...] = ()  # keys only this system has
    walltime_format: str = "hms"  # how its job directive spells a walltime: hms | hm | none
    job_variables: tuple[str, ...] = ()  # set in the environment of its jobs


BATCH_SYSTEMS: dict[str, BatchSystem] = {
    "slurm": BatchSystem("SLURMCluster", "SLURM", "account",
                         job_variables=("SLURM_JOB_ID", "SLURM_JOBID")),
    "pbs": BatchSystem("PBSCluster", "PBS", "account", ("resource_spec",),
                       job_variables=("PBS_JOBID",)),
    "sge": BatchSystem("SGECluster", "SGE", "project", ("resource_spec",),
                       job_variables=("JOB_ID",)),
    "lsf": BatchSystem("LSFCluster", "LSF", "project", ("use_stdin",), walltime_format="hm",
                       job_variables=("LSB_JOBID",)),
    "htcondor": BatchSystem("HTCondorCluster", "HTCondor", None, ("disk",),
                            walltime_format="none", job_variables=("_CONDOR_JOB_AD",)),
    "oar": BatchSystem("OARCluster", "OAR", "project", ("resource_spec",),
                       job_variables=("OAR_JOB_ID", "OAR_JOBID")),
    "moab": BatchSystem("MoabCluster", "Moab", "account", ("resource_spec",),
                        job_variables=("MOAB_JOBID",)),
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


def setting(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``cfg[key]``, or ``default`` when it is missing or null."""
    value = cfg.get(key, default) if cfg is not None else default
    return default if value is None else value


# --------------------------------------------------------------------------- key validators
def _int(minimum: int) -> Callable[[str, Any], Any]:
    def check(key, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ClusterConfigError(f"cluster.{key} must be an integer >= {minimum}, got {value!r}")
        return value
    return check


# The least memory a byte-sized key may give a Dask worker. A worker of this pipeline holds
# about 90-150 MB before its first point; below its limit's thresholds the nanny kills it over
# and over and every point is stored failed (KilledWorker: measured with calibration, 128 MiB
# fails, 192 MiB runs). Dask reads a bare number as bytes, so `memory_limit=4` (meant: 4 GB)
# was 4 bytes; the floor turns such unit slips into a refusal before anything runs.
MIN_WORKER_MEMORY = 256 * 2**20
MIN_WORKER_MEMORY_TEXT = "256 MiB"
SIZE_FORMS = f"a size with a unit such as 4GB or 512MiB (at least {MIN_WORKER_MEMORY_TEXT})"
MEMORY_LIMIT_FORMS = (f"{SIZE_FORMS}, a fraction of the machine's memory in (0, 1] such as 0.5, "
                      "auto, or 0 for no limit")


def _number(value: Any) -> int | float | None:
    """``value`` as a bare number (an int, a float or a numeric string such as '4' or '0.5',
    all of which Dask reads as numbers), or None for anything else (a size with a unit)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        for kind in (int, float):
            with contextlib.suppress(ValueError):
                return kind(value.strip())
    return None


def _plural_bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n:,} bytes"


def _size(key: str, value: Any, forms: str, floor: int = MIN_WORKER_MEMORY,
          floor_text: str = f"the {MIN_WORKER_MEMORY_TEXT} a Dask worker needs") -> int:
    """Bytes in a size with a unit ('4GB', '512MiB': dask's parse_bytes) or in a bare number
    of bytes; either must reach ``floor``. ``forms``: the allowed forms, for messages."""
    from dask.utils import parse_bytes

    number, n = _number(value), None
    if number is not None:
        n = int(number) if math.isfinite(number) else None
    elif isinstance(value, str):
        with contextlib.suppress(ValueError, TypeError, KeyError, OverflowError):
            n = parse_bytes(value)
    if n is None or n <= 0:
        raise ClusterConfigError(f"cluster.{key} must be {forms}; got {value!r}")
    if n < floor:
        if number is None:  # a unit was given: the size itself is too small
            raise ClusterConfigError(f"cluster.{key}={value} is less than {floor_text}; "
                                     f"write {forms}")
        raise ClusterConfigError(f"cluster.{key}={value} is {_plural_bytes(n)}; write {forms}")
    return n


def _bytes(key: str, value: Any) -> int:
    """A batch job's memory: a size with a unit, or a bare number of bytes, at least
    MIN_WORKER_MEMORY (``memory=4`` is 4 bytes, not 4 GB)."""
    return _size(key, value, f"a byte size with a unit such as 16GB or 512MiB (at least "
                             f"{MIN_WORKER_MEMORY_TEXT}; a bare number is bytes)")


def _disk(key: str, value: Any) -> int:
    """HTCondor's ``disk`` per job: a size with a unit, or a bare number of bytes, at least
    1 MiB (``disk=4`` is 4 bytes); no worker's memory floor (100MB of scratch is a request)."""
    return _size(key, value, "a byte size with a unit such as 10GB or 100MB (at least 1 MiB; "
                             "a bare number is bytes)", 2**20, "1 MiB")


def _memory_limit(key: str, value: Any) -> Any:
    """A LocalCluster worker's memory limit, as Dask reads it: 'auto'; 0 (or false): no
    limit; a number in (0, 1]: that fraction of the machine's memory; any other number: bytes;
    a string with a unit: parse_bytes. A bare whole number must be bytes enough for a worker
    (``memory_limit=4`` is 4 bytes), and 1, which Dask reads as all of the machine's memory,
    is refused as ambiguous (1.0 says that; 1GB the other)."""
    if value == "auto" or value is False:
        return value
    number = _number(value)
    if number == 0:
        return value  # no limit (distributed's parse_memory_limit)
    if isinstance(number, int) and number == 1:
        raise ClusterConfigError(f"cluster.{key}={value} is ambiguous: Dask reads it as all of "
                                 f"the machine's memory, not 1 byte or 1 GB; write 1.0 for all "
                                 f"of it, or {MEMORY_LIMIT_FORMS}")
    if isinstance(number, float) and 0 < number <= 1:
        from dask.utils import format_bytes
        from distributed.system import MEMORY_LIMIT

        if number * MEMORY_LIMIT < MIN_WORKER_MEMORY:  # LocalCluster's workers run here
            raise ClusterConfigError(
                f"cluster.{key}={value} is {format_bytes(int(number * MEMORY_LIMIT))} of this "
                f"machine's {format_bytes(MEMORY_LIMIT)}, less than a Dask worker needs; "
                f"write {MEMORY_LIMIT_FORMS}")
        return value  # a fraction of the machine's memory, as LocalCluster reads it
    return _size(key, value, MEMORY_LIMIT_FORMS)


def parse_duration(key: str, value: Any) -> float:
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
        if minutes < 60 and seconds < 60 and (not days or hours < 24):  # 2-25:00:00: no
            total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
            if total > 0:
                return total
    elif not re.fullmatch(r"[\d.]+", text):  # a bare number is ambiguous (SLURM reads minutes)
        with contextlib.suppress(ClusterConfigError):
            return int(parse_duration(key, text))
    raise ClusterConfigError(f"cluster.{key} must be a walltime HH:MM:SS or D-HH:MM:SS (or a "
                             f"duration with a unit such as 4h or 90m), got {value!r}")


def format_walltime(seconds: int, style: str) -> str:
    """How a batch system's job directive spells a walltime: ``HH:MM:SS`` or LSF's ``HH:MM``."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if style == "hm":
        return f"{hours:02d}:{minutes:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def format_duration(seconds: float) -> str:
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
        return {"kind": _anything, "address": _scheduler_address, "timeout": parse_duration,
                "security": _anything}
    system = BATCH_SYSTEMS[kind]
    keys = {
        "kind": _anything, "cores": _int(1), "processes": _int(1), "memory": _bytes,
        "walltime": lambda key, value: parse_walltime(value, key), "minimum_jobs": _int(0), "maximum_jobs": _int(1),
        "queue": _text, "job_name": _text, "interface": _interface,
        "worker_extra_args": _text_list, "job_extra_directives": _directives(kind),
        "job_directives_skip": _text_list, "job_script_prologue": _text_list,
        "local_directory": _text, "log_directory": _text, "python": _text,
        "death_timeout": parse_duration, "dashboard_address": _host_port,
        "lifetime_margin": parse_duration, "lifetime_stagger": parse_duration,
        "worker_start_timeout": parse_duration, "max_submit_failures": _int(1),
        "disk": _disk, "resource_spec": _text, "use_stdin": _flag, "worker_profile": _flag,
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
    kind = setting(cfg, "kind", "local")
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
    cores, processes = setting(cfg, "cores", 1), setting(cfg, "processes", 1)
    if processes > cores:
        raise ClusterConfigError(f"cluster.processes ({processes}) must be <= cluster.cores "
                                 f"({cores}): each worker process needs a core")
    memory = setting(cfg, "memory", DEFAULTS["memory"])  # per job, shared by its workers
    per_worker = _bytes("memory", memory) // processes
    if per_worker < MIN_WORKER_MEMORY:
        from dask.utils import format_bytes

        raise ClusterConfigError(
            f"cluster.memory={memory} gives each of the cluster.processes={processes} workers of "
            f"a job {format_bytes(per_worker)}, less than a Dask worker needs (at least "
            f"{MIN_WORKER_MEMORY_TEXT}); raise cluster.memory or lower cluster.processes")
    minimum, maximum = setting(cfg, "minimum_jobs", 0), setting(cfg, "maximum_jobs", 10)
    if minimum > maximum:
        raise ClusterConfigError(f"cluster.minimum_jobs ({minimum}) must be <= "
                                 f"cluster.maximum_jobs ({maximum})")
    if kind == "htcondor" and cfg.get("disk") is None:
        raise ClusterConfigError("cluster=htcondor needs cluster.disk (scratch disk per job, "
                                 "e.g. 1GB)")
    lifetime(cfg)  # walltime vs margin and stagger
    if setting(cfg, "tls", DEFAULTS["tls"]):  # where the workers' TLS files go (not without TLS)
        _shared_directory("shared_temp_directory",
                          setting(cfg, "shared_temp_directory", DEFAULTS["shared_temp_directory"]))


def lifetime(cfg: Mapping[str, Any]) -> tuple[int, int] | None:
    """(``--lifetime``, ``--lifetime-stagger``) in seconds for a batch job's workers, or None
    without a walltime. A worker retires at lifetime ± stagger, so the latest one still
    leaves ``lifetime_margin - lifetime_stagger`` before the walltime to hand its work over."""
    if cfg.get("walltime") is None:
        return None
    walltime = parse_walltime(cfg["walltime"])
    margin = parse_duration("lifetime_margin", setting(cfg, "lifetime_margin", DEFAULTS["lifetime_margin"]))
    stagger = parse_duration("lifetime_stagger",
                        setting(cfg, "lifetime_stagger", DEFAULTS["lifetime_stagger"]))
    if margin >= walltime:
        raise ClusterConfigError(
            f"cluster.lifetime_margin ({format_duration(margin)}) must be shorter than "
            f"cluster.walltime ({cfg['walltime']}): workers retire that long before the walltime")
    if stagger >= margin:
        raise ClusterConfigError(
            f"cluster.lifetime_stagger ({format_duration(stagger)}) must be shorter than "
            f"cluster.lifetime_margin ({format_duration(margin)}): a worker retires at "
            "walltime - margin ± stagger, and must do so before the walltime")
    if walltime - margin <= stagger:  # 00:05:01 gave --lifetime 1s ± 1m: retired as they started
        raise ClusterConfigError(
            f"cluster.walltime ({cfg['walltime']}) leaves the workers a lifetime of "
            f"{format_duration(walltime - margin)} (walltime - lifetime_margin "
            f"{format_duration(margin)}), not more than cluster.lifetime_stagger "
            f"({format_duration(stagger)}): a worker could retire as soon as it starts; raise "
            "cluster.walltime, or lower cluster.lifetime_margin and cluster.lifetime_stagger")
    return int(walltime - margin), int(stagger)


JOB_LOGS = "jobs"  # RESULTS_DIR/NAME/_logs/jobs/: the worker jobs' own output


def with_job_logs(cluster_cfg: dict, folder) -> dict:
    """A batch cluster's jobs log beside the run log unless ``cluster.log_directory`` says
    otherwise: with the batch system's default (the submit directory), every worker job of an
    adaptive sweep left a ``slurm-JOBID.out`` in the directory the sweep was started from
    (the repository, say), hundreds a night."""
    from pathlib import Path

    from pipeline.engine.progress import LOGS_DIR

    if cluster_cfg.get("kind") not in BATCH_SYSTEMS or cluster_cfg.get("log_directory"):
        return cluster_cfg
    return {**cluster_cfg, "log_directory": str(Path(folder) / LOGS_DIR / JOB_LOGS)}
