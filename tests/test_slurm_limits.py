"""SLURM limits known before a job is submitted (sinfo) and pending reasons that waiting does
not clear (squeue): pipeline/engine/slurm_limits.py. These run everywhere, on partitions given
to the check and on stand-in sinfo/squeue executables; test_slurm.py runs the real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine import slurm_limits as sl
from pipeline.engine.cluster_config import ClusterConfigError

ROOT = Path(__file__).resolve().parents[1]
DEBUG = sl.Partition("debug", True, None, 16, 16000)
SHORT = sl.Partition("short", False, 600, 4, 8000)
FOUND = {"debug": DEBUG, "short": SHORT}


def test_time_limits_in_every_form_sinfo_prints():
    assert sl._time_limit("infinite") is None and sl._time_limit("UNLIMITED") is None
    assert sl._time_limit("10:00") == 600  # MM:SS
    assert sl._time_limit("30") == 1800  # minutes
    assert sl._time_limit("2:00:00") == 7200
    assert sl._time_limit("1-12:00:00") == 36 * 3600


def test_a_job_no_partition_could_start_is_refused_naming_the_limit():
    check = lambda **cfg: sl.check_partition_limits({"kind": "slurm", **cfg}, FOUND)  # noqa: E731
    with pytest.raises(ClusterConfigError, match="SLURM has no partition nosuch "
                                                 r"\(sinfo lists debug, short\)"):
        check(queue="nosuch")
    with pytest.raises(ClusterConfigError, match=r"cluster.walltime=01:00:00 is over the time "
                                                 r"limit of partition short \(00:10:00\)"):
        check(queue="short", walltime="01:00:00")
    with pytest.raises(ClusterConfigError, match=r"cluster.cores=8 is more than any node of "
                                                 r"partition short has \(4 CPUs\)"):
        check(queue="short", cores=8)
    with pytest.raises(ClusterConfigError, match=r"cluster.memory=9GB is more than any node of "
                                                 r"partition short has, or the partition allows "
                                                 r"a job \(8000 MB"):
        check(queue="short", memory="9GB")
    with pytest.raises(ClusterConfigError, match="more than any node of partition debug"):
        check(cores=17)  # no queue: the default partition's limits


def test_jobs_a_partition_can_start_pass_and_what_may_change_the_limits_is_not_judged(
        monkeypatch):
    check = lambda **cfg: sl.check_partition_limits({"kind": "slurm", **cfg}, FOUND)  # noqa: E731
    check(queue="short", walltime="00:10:00", cores=4, memory="7GB")  # at the limits
    check(walltime="30-00:00:00", cores=16)  # the default partition has no time limit
    check(queue="short,debug", walltime="01:00:00", cores=16)  # debug can take it
    for directive in ("--qos=long", "-p other", "--partition=debug", "--time=5", "-t 5",
                      "--mem=1G", "--reservation=r1", "-pdebug", "-t5", "--mem-per-cpu=1G",
                      "--cpus-per-task=2"):  # SLURM decides those
        check(queue="short", walltime="01:00:00", job_extra_directives=[directive])
    check(queue="short", walltime="01:00:00", job_directives_skip=["-t"])  # no -t line
    monkeypatch.setenv("SBATCH_TIMELIMIT", "30")  # overrides the script's -t
    check(queue="short", walltime="01:00:00")
    sl.check_partition_limits({"kind": "slurm", "queue": "nosuch"}, {})  # sinfo said nothing


def _fake(bindir: Path, name: str, body: str) -> None:
    bindir.mkdir(exist_ok=True)
    (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
    (bindir / name).chmod(0o755)


def test_partitions_are_read_from_sinfo_and_a_silent_sinfo_is_no_answer(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    _fake(bindir, "sinfo", 'printf "debug*|16|16000|infinite|up\\nshort|4|8000|10:00|down\\n'
                           'short|8+|32000|10:00|down\\n"')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    found = sl.partitions()
    assert found == {"debug": DEBUG,
                     "short": sl.Partition("short", False, 600, 8, 32000, "down")}
    # a partition's MaxMemPerNode below its nodes' memory: the job pended for MaxMemPerLimit
    _fake(bindir, "scontrol", 'printf "PartitionName=debug MaxMemPerNode=UNLIMITED State=UP\\n'
                              'PartitionName=short MaxMemPerNode=1000 State=UP\\n"')
    assert sl.partitions()["short"] == sl.Partition("short", False, 600, 8, 1000, "down")
    assert sl.partitions()["debug"] == DEBUG
    _fake(bindir, "sinfo", "echo 'slurm_load_partitions: Unable to contact slurm controller' >&2"
                           "; exit 1")
    assert sl.partitions() is None
    sl.check_partition_limits({"kind": "slurm", "queue": "nosuch"})  # not judged without sinfo


def test_a_partition_that_is_down_is_a_note_and_one_drained_is_refused():
    """A down partition starts queued jobs once an administrator brings it up: told, not
    refused. A drained or inactive one takes no new jobs (sbatch refuses them, and the sweep
    stopped after max_submit_failures): refused before anything runs (found by review; the
    note said they would start). One partition of the queue list up: nothing is said."""
    down = sl.Partition("short", False, 600, 4, 8000, "down")
    notes = sl.check_partition_limits({"kind": "slurm", "queue": "short",
                                       "worker_start_timeout": "2h"}, {"short": down})
    assert notes == ["partition short is down (sinfo): SLURM queues the worker jobs and starts "
                     "them only once an administrator brings it up; the sweep waits at most "
                     "cluster.worker_start_timeout=2h for a first worker (another partition: "
                     "cluster.queue)"]
    assert sl.check_partition_limits({"kind": "slurm", "queue": "short,debug"},
                                     {"short": down, "debug": DEBUG}) == []
    assert sl.check_partition_limits({"kind": "slurm"}, {"short": down, "debug": DEBUG}) == []
    for state, word in (("drain", "drained"), ("drained", "drained"), ("inactive", "inactive"),
                        ("inact", "inactive")):
        closed = sl.Partition("debug", True, None, 16, 16000, state)
        with pytest.raises(sl.ClusterConfigError) as refused:
            sl.check_partition_limits({"kind": "slurm"}, {"debug": closed})
        assert str(refused.value) == (
            f"partition debug is {word} (sinfo): SLURM takes no new jobs there (sbatch refuses "
            "them); choose another cluster.queue, or wait until an administrator brings it up")
    drained = sl.Partition("short", False, 600, 4, 8000, "drain")  # with one down: queued there
    assert "is down" in sl.check_partition_limits(
        {"kind": "slurm", "queue": "short,other"},
        {"short": drained, "other": sl.Partition("other", False, 600, 4, 8000, "down")})[0]


def test_only_jobs_all_pending_for_good_are_never_starting():
    assert sl.never_starting({"1": ("PENDING", "PartitionTimeLimit")}) == {
        "1": "PartitionTimeLimit: the walltime is over the partition's time limit: lower "
             "cluster.walltime or choose another cluster.queue"}
    # a partition's MaxMemPerNode below cluster.memory: the job waited worker_start_timeout
    assert sl.never_starting({"1": ("PENDING", "MaxMemPerLimit")})["1"].startswith(
        "MaxMemPerLimit: the job asks for more memory than the partition allows")
    assert sl.never_starting({"1": ("PENDING", "Resources"), "2": ("PENDING", "Priority")}) == {}
    assert sl.never_starting({"1": ("RUNNING", "None")}) == {}
    # "required nodes are DOWN or DRAINED" is also PartitionNodeLimit: it clears by itself
    assert sl.never_starting({"1": ("PENDING", "PartitionNodeLimit")}) == {}


@pytest.mark.timeout(120)
def test_a_sweep_whose_jobs_can_never_start_stops_without_waiting_worker_start_timeout(tmp_path):
    """sbatch accepts the job; squeue says it waits for PartitionConfig: the sweep stops with
    SLURM's reason and what to change, in seconds, not after worker_start_timeout (10 min
    here), advising to wait longer."""
    bindir = tmp_path / "bin"
    _fake(bindir, "sbatch", 'echo "Submitted batch job 4242"')
    _fake(bindir, "scancel", "exit 0")
    _fake(bindir, "sinfo", "exit 1")  # no limits known beforehand
    _fake(bindir, "squeue", 'echo "4242|PENDING|PartitionConfig"')
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration", f"results_dir={results}",
         "grid.x=[1,2,3]", "cluster=slurm", "cluster.cores=1", "cluster.processes=1",
         "cluster.maximum_jobs=1", "cluster.worker_start_timeout=10m",
         "cluster.dashboard_address=:0", "progress=false"],
        cwd=ROOT, env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
        capture_output=True, text=True, timeout=100)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "SLURM will not start the worker jobs: job 4242 is pending for PartitionConfig: the " \
           "job asks for more than the partition's nodes have" in proc.stderr, proc.stderr
    assert "raise cluster.worker_start_timeout" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_the_start_timeout_says_why_squeue_says_the_jobs_wait(tmp_path):
    """A partition DOWN: waiting may clear it, so the sweep waits worker_start_timeout, but
    then said only "still queued?". It quotes squeue's state and reason now."""
    bindir = tmp_path / "bin"
    _fake(bindir, "sbatch", 'echo "Submitted batch job 4242"')
    _fake(bindir, "scancel", "exit 0")
    _fake(bindir, "sinfo", "exit 1")
    _fake(bindir, "squeue", 'echo "4242|PENDING|PartitionDown"')
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
         f"results_dir={tmp_path / 'results'}", "grid.x=[1,2,3]", "cluster=slurm",
         "cluster.cores=1", "cluster.processes=1", "cluster.maximum_jobs=1",
         "cluster.worker_start_timeout=20s", "cluster.dashboard_address=:0", "progress=false"],
        cwd=ROOT, env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
        capture_output=True, text=True, timeout=100)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert ("no Dask worker joined within cluster.worker_start_timeout=20s; jobs submitted: 4242 "
            "(squeue: 4242 PENDING (PartitionDown); raise cluster.worker_start_timeout to wait "
            "longer)") in proc.stderr, proc.stderr


# ------------------------------------------------------------ worker jobs of killed drivers
def test_orphan_jobs_are_those_of_dead_drivers_of_this_host_only():
    from pipeline.engine.orphan_jobs import orphan_jobs

    lines = "\n".join(["101|pipeline-driver:login1:4242",  # dead, this host
                       "102|pipeline-driver:login1:5151",  # alive
                       "103|pipeline-driver:login2:4242",  # another host: cannot tell
                       "104|(null)", "105|", "106|pipeline-driver:login1:notapid",
                       "107|someone else's comment:login1:4242",
                       "108|pipeline-driver:login1:4242"])
    alive = {5151}.__contains__
    assert orphan_jobs(lines, "login1", alive) == ["101", "108"]
    assert orphan_jobs(lines, "login3", alive) == []


def test_slurm_worker_jobs_carry_their_driver_unless_a_comment_is_given():
    import os
    import socket

    from pipeline.engine.orphan_jobs import comment_directives

    mine = f"--comment=pipeline-driver:{socket.gethostname()}:{os.getpid()}"
    assert comment_directives("slurm", ["--qos=long"]) == ["--qos=long", mine]
    assert comment_directives("slurm", ["--comment=mine"]) == ["--comment=mine"]
    assert comment_directives("pbs", ["-m n"]) == ["-m n"]


def test_a_job_gone_from_the_queue_before_its_workers_joined_is_forgotten_mid_sweep(
        monkeypatch, caplog):
    """Mid-sweep (a worker joined long ago), every PENDING_CHECK_S: a job of the cluster that
    squeue no longer lists and no worker of joined is handed to the cluster's loop to be
    forgotten (then replaced), once; a job whose workers joined is left to its own grace, one
    the cluster scaled down (out of its plan) to its own close; an
    squeue that does not answer is not asked again for SQUEUE_QUIET_S (the driver's loop waits
    on it)."""
    import logging
    from types import SimpleNamespace

    import pipeline.engine.batch_cluster as bc

    answers = []
    monkeypatch.setattr(sl, "queued_jobs", lambda ids: answers.pop(0))
    calls = []
    cluster = SimpleNamespace(
        workers={"job-a": SimpleNamespace(job_id="11"), "job-b": SimpleNamespace(job_id="12"),
                 "job-c": SimpleNamespace(job_id="13")},
        loop=SimpleNamespace(add_callback=lambda fn, *args: calls.append(args)),
        _forget_job_if_gone=object(), _job_kwargs={},
        worker_spec={"job-a": {}, "job-b": {}, "job-c": {}, "job-d": {}})
    # job-e was scaled down (out of the plan): its scancel is the cluster's own, not news
    cluster.workers["job-e"] = SimpleNamespace(job_id="14")
    cluster.__dict__["pipeline_jobs_joined"] = {"13"}  # its workers joined, then left
    watch = bc.SubmissionWatch("slurm", max_failures=3, start_timeout=600)
    watch.cluster = cluster
    watch._first_worker_at = 0.0
    caplog.set_level(logging.WARNING, logger="pipeline")
    now = watch._pending_checked_at + bc.PENDING_CHECK_S + 1
    answers.append(None)  # squeue does not answer
    watch._replace_ended_jobs(now)
    assert calls == [] and watch._pending_checked_at == now + bc.SQUEUE_QUIET_S
    watch._replace_ended_jobs(now + bc.PENDING_CHECK_S + 1)  # too soon: squeue not asked
    answers.append({"11": ("RUNNING", "None")})  # 12 left the queue, 13 too
    later = now + bc.SQUEUE_QUIET_S + bc.PENDING_CHECK_S + 1
    watch._replace_ended_jobs(later)
    assert calls == [("job-b", "12")]
    assert "SLURM job 12 ended before its workers joined; another is submitted" in caplog.text
    answers.append({"11": ("RUNNING", "None")})
    watch._replace_ended_jobs(later + bc.PENDING_CHECK_S + 1)
    assert calls == [("job-b", "12")]  # once


def test_a_submission_mid_sweep_is_asked_of_squeue_soon_and_a_none_reason_is_not_said(caplog):
    """A replacement job submitted with no worker left: squeue is asked PENDING_FIRST_CHECK_S
    after it (not up to PENDING_CHECK_S later: CI's busy machine missed the whole wait), except
    within the backoff after squeue gave no answer; SLURM's 'None' (not yet weighed) is not
    warned of, the next reason is."""
    import logging
    import time

    import pipeline.engine.batch_cluster as bc

    caplog.set_level(logging.WARNING, logger="pipeline")
    watch = bc.SubmissionWatch("slurm", max_failures=3, start_timeout=600)
    now = time.monotonic()
    watch._pending_checked_at = now  # just asked
    watch.submitted("21")
    due = watch._pending_checked_at + bc.PENDING_CHECK_S  # when the next check fires
    assert now + bc.PENDING_FIRST_CHECK_S - 1 <= due <= time.monotonic() + bc.PENDING_FIRST_CHECK_S
    asked_long_ago = time.monotonic() - 3 * bc.PENDING_CHECK_S
    watch._pending_checked_at = asked_long_ago  # already due: stays due
    watch.submitted("22")
    assert watch._pending_checked_at == asked_long_ago
    quiet = time.monotonic() + bc.SQUEUE_QUIET_S  # squeue gave no answer: the backoff holds
    watch._pending_checked_at = quiet
    watch.submitted("23")
    assert watch._pending_checked_at == quiet

    assert watch.workers() == 0  # (no cluster: no worker)
    watch._tell_why_no_worker({"22": ("PENDING", "None")})
    assert "no Dask worker now" not in caplog.text
    watch._tell_why_no_worker({"22": ("PENDING", "Resources")})
    assert "no Dask worker now: SLURM job(s) 22 pending (Resources)" in caplog.text
