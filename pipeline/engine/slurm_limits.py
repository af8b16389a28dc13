"""What SLURM can start, asked of ``sinfo`` and ``squeue`` on the driver's host.

SLURM accepts a job it can never start unless the site enforces partition limits
(``EnforcePartLimits``): a walltime over the partition's ``MaxTime``, more CPUs or memory than
any of its nodes has. The job then waits in the queue with a reason (``PartitionTimeLimit``,
``PartitionConfig``...) and the sweep waited ``cluster.worker_start_timeout`` (10 minutes by
default, hours where queues are long) before it gave up, advising to wait longer.

- :func:`check_partition_limits`: before anything is written, the worker job of ``cfg`` is
  compared with the partition's limits from ``sinfo`` (exit 2 naming the limit); a partition
  that does not exist is named too. Skipped when ``sinfo`` is missing or does not answer,
  and for what the job's own directives may change (``--partition``, ``--time``, ``--qos``...
  in ``job_extra_directives``, ``job_directives_skip``, ``SBATCH_*`` variables; a QOS that lifts
  the partition's time limit is not known here): the check must never refuse a job SLURM
  would run.
- :func:`never_starting`: the submitted jobs that ``squeue`` shows pending for a reason that
  does not pass by waiting, with what to change.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping

from pipeline.engine.cluster_config import (DEFAULTS, ClusterConfigError, _bytes, parse_walltime,
                                            setting)

SLURM_CALL_TIMEOUT_S = 10.0  # bound on sinfo/squeue (a controller that does not answer)

# Pending reasons that waiting does not clear (SLURM's "job reason codes"), and what to change.
NEVER_STARTS = {
    "PartitionTimeLimit": "the walltime is over the partition's time limit: lower "
                          "cluster.walltime or choose another cluster.queue",
    "PartitionConfig": "the job asks for more than the partition's nodes have (cluster.cores, "
                       "cluster.memory) or for something it does not offer",
    "BadConstraints": "no node can meet the job's constraints (cluster.cores, cluster.memory, "
                      "--constraint in cluster.job_extra_directives)",
    "InvalidQOS": "the job's QOS is not valid for this account or partition",
    "InvalidAccount": "the job's account (cluster.account) is not valid",
    "AccountNotAllowed": "the account may not use this partition",
    "QOSMaxWallDurationPerJobLimit": "the walltime is over the QOS's limit",
    "AssocMaxWallDurationPerJobLimit": "the walltime is over the account's limit",
    "QOSMaxCpuPerJobLimit": "the job asks for more CPUs than the QOS allows",
    "AssocMaxCpuPerJobLimit": "the job asks for more CPUs than the account allows",
    "QOSMaxMemoryPerJob": "the job asks for more memory than the QOS allows",
    "AssocMaxMemoryPerJob": "the job asks for more memory than the account allows",
    "QOSMaxNodePerJobLimit": "the job asks for more nodes than the QOS allows",
    "DependencyNeverSatisfied": "the job depends on a job that can no longer satisfy it",
    "MaxMemPerLimit": "the job asks for more memory than the partition allows a node or a CPU "
                      "(MaxMemPerNode, MaxMemPerCPU): lower cluster.memory or choose another "
                      "cluster.queue",
}
# job_extra_directives that move a job to other limits than the ones checked here
_OVERRIDES = ("--partition", "--time", "--qos", "--mem", "--mem-per-cpu", "--cpus-per-task",
              "--reservation", "--clusters")
_SHORT_OVERRIDES = ("-p", "-t", "-q", "-c", "-M")  # also glued: -pdebug, -t5
# sbatch's input environment variables override the job script's #SBATCH lines
_ENV_OVERRIDES = ("SBATCH_PARTITION", "SBATCH_TIMELIMIT", "SBATCH_QOS", "SBATCH_RESERVATION",
                  "SBATCH_MEM_PER_NODE", "SBATCH_MEM_PER_CPU", "SBATCH_CLUSTERS")


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    max_time_s: int | None  # None: no limit
    max_cpus: int  # of its largest node
    max_memory_mb: int | None  # of its largest node; None: unknown
    state: str = "up"  # sinfo's %a: up, down, drain, inactive (inact in older versions)


# Pending reasons that pass only when an administrator acts (the sweep waits, and says why)
WAITS_FOR_ADMIN = {
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",  # (made so after the jobs were queued)
    "ReqNodeNotAvail": "the nodes it needs are down, drained or reserved",
}


def _run(args: list[str]) -> str | None:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=SLURM_CALL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _time_limit(text: str) -> int | None:
    """sinfo's %l: ``infinite``, ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS`` or ``MM``."""
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 1:
        parts = [0, parts[0], 0]
    elif len(parts) == 2:
        parts = [0, *parts]
    hours, minutes, seconds = parts
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def _number(text: str) -> int | None:
    digits = text.strip().rstrip("+")
    return int(digits) if digits.isdigit() else None


def partitions() -> dict[str, Partition] | None:
    """Every partition with its limits, or None if ``sinfo`` is missing or does not answer."""
    out = _run(["sinfo", "--noheader", "--all", "--Node", "--format=%P|%c|%m|%l|%a"])
    if out is None:
        return None
    found: dict[str, dict] = {}
    for line in out.splitlines():
        fields = line.split("|")
        if len(fields) != 5:
            continue
        raw, cpus, memory, limit, state = fields
        name = raw.strip().rstrip("*")
        try:
            seen = found.setdefault(name, {"default": raw.strip().endswith("*"),
                                           "max_time_s": _time_limit(limit), "cpus": 0,
                                           "memory": 0, "state": state.strip().lower() or "up"})
        except ValueError:  # a time limit in a form not known here: do not judge
            return None
        seen["cpus"] = max(seen["cpus"], _number(cpus) or 0)
        seen["memory"] = max(seen["memory"], _number(memory) or 0)
    caps = _memory_caps()  # a partition may allow a job less memory than its nodes have
    return {name: Partition(name, p["default"], p["max_time_s"], p["cpus"],
                            min(filter(None, (p["memory"], caps.get(name))), default=None),
                            p["state"])
            for name, p in found.items()}


def _memory_caps() -> dict[str, int]:
    """Partition -> its MaxMemPerNode in MB, where one is set (``scontrol``; {} if it does not
    answer). A job over it pends for MaxMemPerLimit, never to start."""
    out = _run(["scontrol", "show", "partition", "--oneliner"])
    caps = {}
    for line in (out or "").splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        cap = _number(fields.get("MaxMemPerNode", ""))
        if fields.get("PartitionName") and cap:
            caps[fields["PartitionName"]] = cap
    return caps


def check_partition_limits(cfg: Mapping[str, Any], found: dict[str, Partition] | None = None
                           ) -> list[str]:
    """Refuse (``ClusterConfigError``) a ``cluster=slurm`` worker job that no partition it
    may go to could ever start; ``found``: the partitions (default: asked of ``sinfo``).
    A partition that is drained or inactive takes no new jobs (sbatch refuses them): refused
    too. Returns notes for the user: a partition that is down takes the jobs and starts them
    once an administrator brings it up, so the sweep is not refused, but waits (at most
    ``cluster.worker_start_timeout``) and says so."""
    extra = " ".join(str(d) for d in setting(cfg, "job_extra_directives", []) or [])
    if any(word.split("=")[0] in _OVERRIDES or word.startswith(_SHORT_OVERRIDES)
           for word in extra.split()):
        return []
    if setting(cfg, "job_directives_skip") or any(os.environ.get(v) for v in _ENV_OVERRIDES):
        return []  # the job script's own -p/-t/--mem lines may be left out or overridden
    found = partitions() if found is None else found
    if not found:
        return []
    queue = setting(cfg, "queue")
    if queue:
        names = [q.strip() for q in str(queue).split(",") if q.strip()]
        unknown = [q for q in names if q not in found]
        if unknown:
            raise ClusterConfigError(
                f"cluster.queue={queue}: SLURM has no partition {', '.join(unknown)} "
                f"(sinfo lists {', '.join(sorted(found))})")
        chosen = [found[q] for q in names]
    else:
        chosen = [p for p in found.values() if p.default]
        if not chosen:
            return []  # no default partition: sbatch says so itself
    where = f"partition {'/'.join(p.name for p in chosen)}"
    walltime = setting(cfg, "walltime")
    limits = [p.max_time_s for p in chosen]
    if walltime is not None and None not in limits:
        seconds = parse_walltime(walltime)
        if seconds > max(limits):
            raise ClusterConfigError(
                f"cluster.walltime={walltime} is over the time limit of {where} "
                f"({_clock(max(limits))}): SLURM would queue the worker jobs and never start "
                "them; lower cluster.walltime or choose another cluster.queue")
    cores = setting(cfg, "cores", DEFAULTS["cores"])
    most_cpus = max(p.max_cpus for p in chosen)
    if most_cpus and cores > most_cpus:
        raise ClusterConfigError(
            f"cluster.cores={cores} is more than any node of {where} has ({most_cpus} CPUs): "
            "SLURM would queue the worker jobs and never start them")
    memories = [p.max_memory_mb for p in chosen]
    if None not in memories:
        memory = setting(cfg, "memory", DEFAULTS["memory"])
        if _bytes("memory", memory) > max(memories) * 2**20:
            raise ClusterConfigError(
                f"cluster.memory={memory} is more than any node of {where} has, or the "
                f"partition allows a job ({max(memories)} MB: sinfo's memory, scontrol's "
                "MaxMemPerNode): SLURM would queue the worker jobs and never start them")
    if any(p.state == "up" for p in chosen):
        return []
    if not any(p.state == "down" for p in chosen):
        # drained or inactive: sbatch refuses every job ("Required partition not available
        # (inactive or drain)"), and the sweep stopped after max_submit_failures refusals
        states = "/".join(sorted({"drained" if p.state.startswith("drain") else "inactive"
                                  if p.state.startswith("inact") else p.state for p in chosen}))
        raise ClusterConfigError(
            f"{where} is {states} (sinfo): SLURM takes no new jobs there (sbatch refuses "
            "them); choose another cluster.queue, or wait until an administrator brings it up")
    timeout = setting(cfg, "worker_start_timeout", DEFAULTS["worker_start_timeout"])
    return [f"{where} is down (sinfo): SLURM queues the worker jobs and starts them only once "
            "an administrator brings it up; the sweep waits at most "
            f"cluster.worker_start_timeout={timeout} for a first worker (another partition: "
            "cluster.queue)"]


def _clock(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def queued_jobs(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """job id -> (state, reason) for those of ``job_ids`` still in the queue (pending or
    running); None if ``squeue`` does not answer."""
    if not job_ids:
        return {}
    out = _run(["squeue", "--noheader", "--format=%i|%T|%r", f"--jobs={','.join(job_ids)}"])
    if out is None:
        return None
    jobs = {}
    for line in out.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) == 3 and fields[0]:
            jobs[fields[0]] = (fields[1], fields[2])
    return jobs


def never_starting(jobs: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """The jobs of ``jobs`` (from :func:`queued_jobs`) pending for a reason that waiting does
    not clear -> the reason and what to change."""
    return {job: f"{reason}: {NEVER_STARTS[reason]}" for job, (state, reason) in jobs.items()
            if state == "PENDING" and reason in NEVER_STARTS}
