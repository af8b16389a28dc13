"""Worker jobs left in a SLURM queue by a driver that was killed (``kill -9``, the OOM killer,
a login node's reboot): nothing ran to cancel them. Pending ones held their place in the queue
(and against the user's job limits) until they started, only to die with no scheduler to join.

Each worker job of a SLURM sweep carries its driver in its comment
(``--comment=pipeline-driver:HOST:PID``). When the next SLURM sweep starts, the user's jobs
whose driver ran on this host and is gone are cancelled. Another host's drivers are left alone:
whether they live cannot be told from here. A recycled pid reads as alive, which only leaves
jobs queued, as before.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from typing import Callable

from pipeline.store.manifest import pid_alive

log = logging.getLogger("pipeline")

COMMENT_PREFIX = "pipeline-driver:"
QUEUE_CALL_TIMEOUT_S = 15.0  # bound on squeue and scancel


def driver_comment() -> str:
    """This driver, as its worker jobs' comment."""
    return f"{COMMENT_PREFIX}{socket.gethostname()}:{os.getpid()}"


def comment_directives(kind: str, directives) -> list:
    """``job_extra_directives`` with the driver's comment added (SLURM only; not over a
    ``--comment`` the user gave)."""
    directives = list(directives)
    if kind != "slurm" or any(str(d).lstrip().startswith("--comment") for d in directives):
        return directives
    return [*directives, f"--comment={driver_comment()}"]


def orphan_jobs(squeue_lines: str, host: str, alive: Callable[[int], bool]) -> list[str]:
    """The job ids, from ``squeue -h -o '%i|%k'`` lines, whose comment names a driver on
    ``host`` whose pid is not ``alive``."""
    orphans = []
    for line in squeue_lines.splitlines():
        job, _, comment = line.strip().partition("|")
        if not comment.startswith(COMMENT_PREFIX):
            continue
        driver_host, _, pid = comment[len(COMMENT_PREFIX):].rpartition(":")
        if driver_host == host and pid.isdigit() and int(pid) != os.getpid() \
                and not alive(int(pid)):
            orphans.append(job)
    return orphans


def jobs_of_driver(host: str, pid: int) -> list[tuple[str, str]] | None:
    """(job id, state) of this user's SLURM worker jobs whose comment names the driver
    ``host``:``pid`` (for `status` after that driver was killed); None when squeue is not
    there or does not answer within its bound."""
    try:
        queue = subprocess.run(["squeue", "--me", "-h", "-o", "%i|%k|%T"], capture_output=True,
                               text=True, timeout=QUEUE_CALL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if queue.returncode != 0:
        return None
    mine, jobs = f"{COMMENT_PREFIX}{host}:{pid}", []
    for line in queue.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        comment, _, state = rest.rpartition("|")  # (a comment may hold '|')
        if comment == mine:
            jobs.append((job, state))
    return jobs


def cancel_orphan_jobs() -> int:
    """Cancel this user's SLURM jobs left by drivers of this host that are gone (see the module
    doc); how many. Bounded; any failure is logged and the sweep goes on."""
    try:
        queue = subprocess.run(["squeue", "--me", "-h", "-o", "%i|%k"], capture_output=True,
                               text=True, timeout=QUEUE_CALL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("squeue for jobs of killed drivers: %s", exc)
        return 0
    if queue.returncode != 0:
        log.debug("squeue for jobs of killed drivers: %s", queue.stderr.strip())
        return 0
    orphans = orphan_jobs(queue.stdout, socket.gethostname(), pid_alive)
    if not orphans:
        return 0
    try:
        done = subprocess.run(["scancel", *orphans], capture_output=True, text=True,
                              timeout=QUEUE_CALL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not cancel the worker job(s) %s of a killed driver: %s",
                    " ".join(orphans), exc)
        return 0
    if done.returncode != 0:
        log.warning("could not cancel the worker job(s) %s of a killed driver: %s",
                    " ".join(orphans), done.stderr.strip())
        return 0
    log.info("cancelled %d worker job(s) left queued by a killed driver on this host: %s",
             len(orphans), " ".join(orphans))
    return len(orphans)
