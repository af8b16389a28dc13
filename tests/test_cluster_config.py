"""Batch-system clusters without a batch system: the job scripts dask-jobqueue would submit
(directives, walltime, lifetime, log paths) for every kind, every cluster key validated up
front, and the fail-fast paths (missing commands: exit 2; refused or never-starting jobs:
exit 3 with the batch system's own words). The real-SLURM tests are in test_slurm.py."""

import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipeline.engine import batch_cluster as bc
from pipeline.engine import cluster_config as cc

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf" / "cluster"
LOGS = "/scratch/me/pipeline-logs"


def run_cli(*args, timeout=120, env=None, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def conf(kind, **overrides):
    """conf/cluster/KIND.yaml as Hydra composes it, with overrides."""
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{kind}.yaml"), resolve=True)
    cfg.update(overrides)
    return cfg


def snapshot(folder):
    return {p: p.stat().st_mtime_ns for p in Path(folder).rglob("*")}


# ---------------------------------------------------------------------------- job scripts
COMMON = dict(walltime="02:00:00", cores=4, processes=2, memory="8GB", log_directory=LOGS,
              job_name="sweep", interface="lo", worker_extra_args=["--resources", "MEM=1"],
              job_script_prologue=["module load python/3.11"])

# kind -> (its overrides, lines its job script must contain)
SCRIPTS = {
    "slurm": (dict(queue="compute", account="proj42", job_extra_directives=["--qos=long"]),
              ["#SBATCH -J sweep", "#SBATCH -p compute", "#SBATCH -A proj42", "#SBATCH -t 02:00:00",
               "#SBATCH --qos=long", f"#SBATCH -o {LOGS}/sweep-%J.out",
               f"#SBATCH -e {LOGS}/sweep-%J.err", "#SBATCH --cpus-per-task=4"]),
    "pbs": (dict(queue="workq", account="proj42", job_extra_directives=["-m n"]),
            ["#PBS -N sweep", "#PBS -q workq", "#PBS -A proj42", "#PBS -l walltime=02:00:00",
             "#PBS -l select=1:ncpus=4:mem=7630MB", "#PBS -m n", f"#PBS -o {LOGS}/",
             f"#PBS -e {LOGS}/"]),
    "moab": (dict(queue="batch", account="proj42"),
             ["#PBS -N sweep", "#PBS -q batch", "#PBS -A proj42", "#PBS -l walltime=02:00:00",
              f"#PBS -o {LOGS}/"]),
    "sge": (dict(queue="all.q", project="proj42", resource_spec="h_vmem=4G",
                 job_extra_directives=["-pe smp 4"]),
            ["#$ -N sweep", "#$ -q all.q", "#$ -P proj42", "#$ -l h_rt=02:00:00",
             "#$ -l h_vmem=4G", "#$ -pe smp 4", f"#$ -o {LOGS}/", f"#$ -e {LOGS}/"]),
    "lsf": (dict(queue="normal", project="proj42", job_extra_directives=["-G grp"]),
            ["#BSUB -J sweep", "#BSUB -q normal", '#BSUB -P "proj42"', "#BSUB -W 02:00",
             "#BSUB -n 4", "#BSUB -G grp", f"#BSUB -o {LOGS}/pipeline-worker-%J.out",
             f"#BSUB -e {LOGS}/pipeline-worker-%J.err"]),
    "oar": (dict(queue="default", project="proj42"),
            ["#OAR -n sweep", "#OAR -q default", "#OAR --project proj42",
             "#OAR -l /nodes=1/core=4,walltime=02:00:00"]),
    "htcondor": (dict(disk="2GB", job_extra_directives={"+ProjectName": '"proj42"'}),
                 ["MY.DaskWorkerCores = 4", "MY.DaskWorkerMemory = 8000000000",
                  "MY.DaskWorkerDisk = 2000000000", '+ProjectName = "proj42"',
                  f"LogDirectory = {LOGS}", "Output = $(LogDirectory)/worker-$F(MY.JobId).out",
                  "Error = $(LogDirectory)/worker-$F(MY.JobId).err"]),
}


@pytest.mark.parametrize("kind", sorted(SCRIPTS))
@pytest.mark.filterwarnings("ignore:OAR Job memory")  # dask-jobqueue's note on OAR's memory
def test_job_script_of_every_batch_system(kind, tmp_path):
    overrides, lines = SCRIPTS[kind]
    cfg = conf(kind, **COMMON, **overrides)
    cc.validate(cfg)
    script = bc.job_script(cfg)
    for line in lines:
        assert line in script.splitlines() or line in script, (line, script)
    # 2 h walltime - 5 min margin, ± 1 min; what `dask worker` runs in the job
    assert "--lifetime 115m --lifetime-stagger 1m" in script
    assert "--nworkers 2" in script and "--nthreads 2" in script
    assert "--interface lo" in script and "--resources MEM=1" in script
    assert "--death-timeout 60" in script
    assert "module load python/3.11" in script
    # workers run without Dask's profiler, set before the user's prologue can override it
    assert script.index(cc.NO_PROFILER) < script.index("module load python/3.11")
    assert cc.NO_PROFILER not in bc.job_script(conf(kind, **COMMON, **overrides,
                                                    worker_profile=True))
    assert not Path(LOGS).exists()  # building the script created no directory


def test_walltime_forms_and_lifetime_arithmetic():
    assert cc.parse_walltime("04:00:00") == 4 * 3600
    assert cc.parse_walltime("1-12:30:00") == 36 * 3600 + 1800
    assert cc.parse_walltime("90m") == 5400 and cc.parse_walltime("2h") == 7200
    for bad in ("forever", "10", "01:61:00", "00:00:00", "-1", "2-25:00:00"):  # (25 h in a day)
        with pytest.raises(cc.ClusterConfigError, match="cluster.walltime"):
            cc.parse_walltime(bad)
    assert cc.format_walltime(36 * 3600 + 1800, "hms") == "36:30:00"
    assert cc.format_walltime(36 * 3600 + 1800, "hm") == "36:30"  # LSF's -W
    base = conf("slurm")
    assert cc.lifetime(base) == (4 * 3600 - 300, 60)
    assert cc.lifetime({**base, "walltime": "00:02:00", "lifetime_margin": "50s",
                        "lifetime_stagger": "10s"}) == (70, 10)
    assert cc.lifetime({**base, "walltime": None}) is None
    with pytest.raises(cc.ClusterConfigError, match="lifetime_margin .* shorter than cluster.walltime"):
        cc.validate({**base, "walltime": "00:04:00"})
    with pytest.raises(cc.ClusterConfigError, match="lifetime_stagger .* shorter than"):
        cc.validate({**base, "lifetime_stagger": "5m"})
    # a lifetime (walltime - margin) no longer than the stagger: workers could retire at once
    # (00:05:01 gave --lifetime 1s +- 1m); just longer is accepted
    for walltime in ("00:05:01", "00:06:00"):
        with pytest.raises(cc.ClusterConfigError, match=r"leaves the workers a lifetime of "
                           r"\S+ \(walltime - lifetime_margin 5m\), not more than "
                           r"cluster.lifetime_stagger \(1m\)"):
            cc.validate({**base, "walltime": walltime})
    assert cc.lifetime({**base, "walltime": "00:06:01"}) == (61, 60)
    # a --lifetime the user gives wins; ours is not added beside it
    own = bc.job_kwargs({**base, "worker_extra_args": ["--lifetime", "1h"]})
    assert own["worker_extra_args"] == ["--lifetime", "1h"]
    # LSF takes HH:MM; HTCondor has no walltime directive, but still gets the lifetime
    assert bc.job_kwargs(conf("lsf"))["walltime"] == "04:00"
    condor = bc.job_kwargs(conf("htcondor", walltime="12:00:00"))
    assert "walltime" not in condor and "--lifetime" in condor["worker_extra_args"]


def test_dry_run_prints_job_script_and_submits_nothing(tmp_path):
    # no qsub here: a dry run needs none, submits nothing and writes nothing
    before = snapshot(tmp_path)
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path / 'res'}", "dry_run=true",
                   "cluster=pbs", "cluster.walltime=01:00:00", "cluster.lifetime_margin=10m",
                   f"cluster.log_directory={tmp_path / 'logs'}",
                   env={"PATH": str(tmp_path / "empty-path")})
    assert proc.returncode == 0, proc.stderr
    assert "--lifetime 50m --lifetime-stagger 1m" in proc.stdout
    assert "workers retire after --lifetime 50m ± --lifetime-stagger 1m" in proc.stdout
    assert "#PBS -l walltime=01:00:00" in proc.stdout
    assert f"#PBS -o {tmp_path / 'logs'}/" in proc.stdout
    # TLS by default: the workers' credentials come from the shared folder (~)
    assert "dask_worker tls://SCHEDULER-ADDRESS:8786" in proc.stdout
    assert (f"--tls-key ~/.pipeline-tls-{os.getuid()}/HOST.PID.XXXXXXXX/"
            ".dask-jobqueue.worker.key.XXXX") in proc.stdout
    assert snapshot(tmp_path) == before


def test_batch_clusters_use_tls_unless_told_not_to(tmp_path):
    """On plain tcp:// anyone who can reach the login node's scheduler port could connect a
    Client and run code as the researcher; the local kind was already on TLS."""
    assert bc.tls_kwargs(conf("slurm"), "h.1.ab") == {
        "security": True, "shared_temp_directory": f"~/.pipeline-tls-{os.getuid()}/h.1.ab"}
    shared = {**conf("slurm"), "shared_temp_directory": f"{tmp_path}/"}
    assert bc.tls_kwargs(shared, "h.1.ab")["shared_temp_directory"] == \
        f"{tmp_path}/.pipeline-tls-{os.getuid()}/h.1.ab"
    assert bc.tls_kwargs({**conf("slurm"), "tls": False}) == {}
    # the folder matters only with TLS
    cc.validate({**conf("slurm"), "tls": False, "shared_temp_directory": "/nonexistent/x"})
    plain = bc.job_script({**conf("slurm"), "tls": False})
    assert "dask_worker tcp://SCHEDULER-ADDRESS:8786" in plain and "--tls" not in plain
    script = bc.job_script(shared)
    assert "--protocol tls://" in script  # as the real cluster's script (dask-jobqueue) has it
    for key in ("ca-file", "cert", "key"):
        assert (f"--tls-{key} {tmp_path}/.pipeline-tls-{os.getuid()}/HOST.PID.XXXXXXXX/"
                ".dask-jobqueue.worker.") in script


# ---------------------------------------------------------------------------- bad keys
BAD_KEYS = [
    ({"kind": "local", "memory_limit": "lots"}, "cluster.memory_limit"),
    ({"kind": "local", "dashboard_address": "notaport"}, "cluster.dashboard_address"),
    ({"kind": "local", "dashboard_address": "host:99999"}, "port 0-65535"),
    ({"kind": "local", "n_workers": 0}, "cluster.n_workers"),
    ({"kind": "local", "worker_profile": "maybe"}, "cluster.worker_profile must be true or false"),
    ({"kind": "address", "address": "tcp://h:8786", "timeout": "forever"}, "cluster.timeout"),
    ({"kind": "address", "address": "h:8786"}, "cluster.address must be a scheduler address"),
    ({"kind": "nosuch"}, "slurm, pbs, sge, lsf, htcondor"),
    ({"kind": "slurm", "memory": "lots"}, "cluster.memory must be a byte size"),
    ({"kind": "slurm", "walltime": "forever"}, "cluster.walltime"),
    ({"kind": "slurm", "worker_start_timeout": "soon"}, "cluster.worker_start_timeout"),
    ({"kind": "slurm", "death_timeout": -1}, "cluster.death_timeout"),
    ({"kind": "slurm", "cores": 2, "processes": 4}, "cluster.processes (4) must be <= cluster.cores"),
    ({"kind": "slurm", "minimum_jobs": 5, "maximum_jobs": 2}, "cluster.minimum_jobs"),
    ({"kind": "slurm", "maximum_jobs": 1.5}, "cluster.maximum_jobs must be an integer"),
    ({"kind": "slurm", "max_submit_failures": 0}, "cluster.max_submit_failures"),
    ({"kind": "slurm", "job_extra_directives": "--qos=long"}, "cluster.job_extra_directives must be a list"),
    ({"kind": "slurm", "interface": "nosuch0"}, "no network interface 'nosuch0'"),
    ({"kind": "slurm", "project": "p"}, "unknown key(s) for cluster=slurm: cluster.project"),
    ({"kind": "sge", "account": "p"}, "cluster.account"),
    ({"kind": "htcondor", "queue": "q", "disk": "1GB"}, "cluster.queue"),
    ({"kind": "htcondor"}, "cluster=htcondor needs cluster.disk"),
    ({"kind": "htcondor", "disk": "1GB", "job_extra_directives": ["a"]}, "must be a mapping"),
    ({"kind": "lsf", "use_stdin": "yes"}, "cluster.use_stdin must be true or false"),
    ({"kind": "slurm", "tls": "yes"}, "cluster.tls must be true or false"),
    ({"kind": "pbs", "shared_temp_directory": "/nonexistent/shared"},
     "cluster.shared_temp_directory must be an existing folder you can write"),
    ({"kind": "pbs", "shared_temp_directory": ""}, "cluster.shared_temp_directory must be a "),
    ({"kind": "local", "tls": False}, "unknown key(s) for cluster=local: cluster.tls"),
]


@pytest.mark.parametrize("cfg,message", BAD_KEYS)
def test_every_cluster_key_is_validated(cfg, message):
    with pytest.raises(cc.ClusterConfigError) as info:
        cc.validate(cfg)
    assert message in str(info.value)


def test_shipped_cluster_configs_validate():
    for path in CONF.glob("*.yaml"):
        cfg = conf(path.stem)
        if cfg["kind"] == "address":
            cfg["address"] = "tcp://127.0.0.1:8786"
        cc.validate(cfg)
    assert {p.stem for p in CONF.glob("*.yaml")} == set(cc.KINDS)


@pytest.mark.parametrize("args,message", [
    (["cluster.memory_limit=lots"], "cluster.memory_limit"),
    (["cluster.dashboard_address=notaport"], "cluster.dashboard_address"),
    (["cluster=address", "cluster.address=tcp://127.0.0.1:9", "cluster.timeout=forever"],
     "cluster.timeout"),
    (["cluster=slurm", "cluster.walltime=00:03:00"], "cluster.lifetime_margin"),
    # no sbatch/qsub on PATH: exit 2 naming the command and the kind, before anything
    (["cluster=slurm"], "cluster=slurm needs the SLURM command(s) sbatch, scancel on PATH"),
    (["cluster=lsf"], "cluster=lsf needs the LSF command(s) bsub, bkill"),
    (["cluster=htcondor"], "cluster=htcondor needs the HTCondor command(s) condor_submit, condor_rm"),
    (["cluster=pbs"], "cluster=pbs needs the PBS command(s) qsub, qdel on PATH"),
    (["cluster=sge"], "cluster=sge needs the SGE command(s) qsub, qdel on PATH"),
    (["cluster=oar"], "cluster=oar needs the OAR command(s) oarsub, oardel on PATH"),
    (["cluster=moab"], "cluster=moab needs the Moab command(s) msub, canceljob on PATH"),
    (["cluster=slurm", "cluster.shared_temp_directory=/nonexistent/shared"],
     "cluster.shared_temp_directory must be an existing folder you can write"),
])
def test_bad_cluster_input_exits_2_and_writes_nothing(tmp_path, args, message):
    proc = refused_through_the_cli(tmp_path, args)
    assert message in proc.stderr


def refused_through_the_cli(tmp_path, args):
    """run.py with ``args`` (no batch commands on PATH): exit 2, no traceback, nothing
    written; returns the process."""
    results = tmp_path / "results"
    before = snapshot(tmp_path)
    proc = run_cli("experiment=calibration", f"results_dir={results}", *args,
                   env={"PATH": str(tmp_path / "empty-path")}, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results.exists() and snapshot(tmp_path) == before
    return proc


# ---------------------------------------------------------------------------- fail fast
def fake_batch_commands(bindir: Path, sbatch_body: str) -> None:
    """Stand-in sbatch/scancel executables: the real-SLURM runs are in test_slurm.py; these
    run everywhere, so the fail-fast paths are tested in every CI run. sinfo and squeue answer
    as a controller that is down would (each call is bounded and its answer optional): the
    real ones, where SLURM was installed but not running, took these tests from 8 to 52 s."""
    bindir.mkdir()
    down = 'echo "Unable to contact slurm controller (connect failure)" >&2\nexit 1'
    for name, body in (("sbatch", sbatch_body), ("scancel", "exit 0"), ("sinfo", down),
                       ("squeue", down)):
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)


def _manifest_status(results):
    runs = json.loads((results / "calibration" / "_manifest.json").read_text())["runs"]
    return runs[-1]["status"], runs[-1].get("error", "")


@pytest.mark.timeout(120)
def test_refused_submissions_stop_the_sweep_with_the_batch_systems_words(tmp_path):
    error = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"
    fake_batch_commands(tmp_path / "bin", f'echo "{error}" >&2\nexit 1')
    results = tmp_path / "results"
    proc = run_cli("experiment=calibration", f"results_dir={results}", "grid.x=[1,2,3]",
                   "cluster=slurm", "cluster.cores=1", "cluster.processes=1",
                   "cluster.dashboard_address=:0", "progress=false",
                   env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}, timeout=100)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "SLURM refused 3 job submissions in a row" in proc.stderr
    assert "Invalid account or account/partition combination specified" in proc.stderr
    assert "Traceback" not in proc.stderr
    status, recorded = _manifest_status(results)
    assert status == "crashed" and "Invalid account" in recorded


@pytest.mark.timeout(120)
def test_no_worker_within_worker_start_timeout_stops_the_sweep(tmp_path):
    # the batch system accepts the job, but it never starts (a full queue, a held job)
    fake_batch_commands(tmp_path / "bin", 'echo "Submitted batch job 4242"')
    results = tmp_path / "results"
    proc = run_cli("experiment=calibration", f"results_dir={results}", "grid.x=[1,2,3]",
                   "cluster=slurm", "cluster.cores=1", "cluster.processes=1",
                   "cluster.worker_start_timeout=4s", "cluster.dashboard_address=:0",
                   "progress=false",
                   env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}, timeout=100)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no Dask worker joined within cluster.worker_start_timeout=4s" in proc.stderr
    assert "4242" in proc.stderr  # which jobs to look at
    assert _manifest_status(results)[0] == "crashed"


@pytest.mark.timeout(120)
def test_ctrl_c_while_waiting_for_batch_workers_records_interrupted(tmp_path):
    # importing dask_jobqueue replaces the SIGINT handler with sys.exit() (exit 0, the run
    # left "running"); the driver must keep its own Ctrl-C handling
    fake_batch_commands(tmp_path / "bin", 'echo "Submitted batch job 4243"')
    results = tmp_path / "results"
    driver = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration", f"results_dir={results}",
         "grid.x=[1,2,3]", "cluster=slurm", "cluster.cores=1", "cluster.processes=1",
         "cluster.dashboard_address=:0", "progress=false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    try:
        deadline = time.monotonic() + 60
        manifest = results / "calibration" / "_manifest.json"
        while not manifest.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the cluster is up and the job "submitted"
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, out + err
    assert "interrupted" in err
    assert _manifest_status(results)[0] == "interrupted"
    # no batch can be running: it did not wait 10 s for them to return their points
    assert "no worker is connected, so none of the 3 batches is running" in err, err
    assert "waiting at most" not in err, err


@pytest.mark.timeout(60)
def test_batch_cluster_dashboard_link_is_where_it_listens(tmp_path):
    import urllib.request

    cluster = bc.make_batch_cluster(conf("slurm", dashboard_address="127.0.0.1:0", cores=1,
                                         processes=1, memory="1GB",
                                         shared_temp_directory=str(tmp_path)))
    try:
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")
        assert urllib.request.urlopen(cluster.dashboard_link, timeout=10).status == 200
        assert cluster.pipeline_max_threads == 10  # maximum_jobs x processes x threads
    finally:
        cluster.close(timeout=20)
        bc.remove_tls_folder(cluster)
    assert [p.name for p in tmp_path.iterdir()] == [f".pipeline-tls-{os.getuid()}"]
    assert list((tmp_path / f".pipeline-tls-{os.getuid()}").iterdir()) == []


@pytest.mark.timeout(60)
def test_the_workers_credentials_live_in_the_drivers_own_folder(tmp_path):
    """dask-jobqueue writes the workers' key and certificates into shared_temp_directory; a
    killed driver left them there for good. Each driver has its own folder
    (.pipeline-tls-UID/HOST.PID.RANDOM, mode 0700) holding a lock for its life, removed when
    its cluster closes. The next start removes this host's folders whose driver is gone (lock
    free and pid dead, or no lock file and pid dead), and keeps those of a live driver (lock
    held, even under a pid that is dead here: another PID namespace; or no lock yet and a live
    pid: a driver just starting) and of another host (its lock may be local to its node)."""
    import fcntl

    base = tmp_path / f".pipeline-tls-{os.getuid()}"
    base.mkdir()
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    dead_pid, host = int(gone.stdout), socket.gethostname()

    def folder(name, lock=False):
        path = base / name
        path.mkdir()
        if lock:
            (path / bc.DRIVER_LOCK).touch()
        return path

    killed = folder(f"{host}.{dead_pid}.0a0a0a0a", lock=True)
    (killed / ".dask-jobqueue.worker.key.x1y2").write_text("PRIVATE KEY")
    killed_before_its_lock = folder(f"{host}.{dead_pid}.0d0d0d0d")
    other_namespace = folder(f"{host}.{dead_pid}.0e0e0e0e", lock=True)
    holder = open(other_namespace / bc.DRIVER_LOCK)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live driver holds it
    starting = folder(f"{host}.{os.getpid()}.0b0b0b0b")
    other_host = folder(f"elsewhere.example.org.{dead_pid}.0c0c0c0c", lock=True)
    unrelated = folder("notes")
    try:
        cluster = bc.make_batch_cluster(conf("slurm", dashboard_address="127.0.0.1:0",
                                             cores=1, processes=1, memory="1GB",
                                             shared_temp_directory=str(tmp_path)))
    finally:
        holder.close()
    try:
        mine = cluster.pipeline_tls_folder
        assert mine.parent == base and mine.name.startswith(f"{host}.{os.getpid()}.")
        assert stat.S_IMODE(mine.stat().st_mode) == 0o700
        keys = sorted(f.name.rsplit(".", 1)[0] for f in mine.glob(".dask-jobqueue.*"))
        assert keys == [".dask-jobqueue.worker.ca_file", ".dask-jobqueue.worker.cert",
                        ".dask-jobqueue.worker.key"]
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in mine.glob(".dask-*"))
        assert f"--tls-key {mine}/.dask-jobqueue.worker.key." in cluster.job_script()
        with open(mine / bc.DRIVER_LOCK) as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while the driver lives
        assert not killed.exists() and not killed_before_its_lock.exists()
    finally:
        cluster.close(timeout=20)
        bc.remove_tls_folder(cluster)
    assert sorted(base.iterdir()) == sorted([other_namespace, starting, other_host, unrelated])


@pytest.mark.timeout(120)
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_default_local_workers_follow_the_cores_this_process_may_use(tmp_path):
    """cluster.n_workers=null is one worker per core *this process may use*: a driver job of
    SLURM (--cpus-per-task=4 on a 128-core node) or `taskset -c 0` must not start a worker
    per core of the whole machine (os.cpu_count() did: 2 workers pinned to one core here)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration", "params.work_us=0",
         "grid.x={range:[0,20]}", f"results_dir={tmp_path}", "cluster.dashboard_address=:0",
         "progress=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=100,
        preexec_fn=lambda: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}))
    assert proc.returncode == 0, proc.stderr
    runs = json.loads((tmp_path / "calibration" / "_manifest.json").read_text())["runs"]
    assert runs[-1]["cluster"]["threads"] == 1


def test_default_local_workers_on_a_login_node_are_few():
    """A default sweep on a batch system's login node took every core of a machine shared by
    everyone. There (a submit command on PATH, not inside a job) it starts at most
    LOGIN_NODE_WORKERS; inside a job, on a workstation, or with few cores, one per core."""
    from pipeline.engine.cluster import LOGIN_NODE_WORKERS, default_local_workers

    assert LOGIN_NODE_WORKERS == 4
    has = {"sbatch": "/usr/bin/sbatch", "bsub": "/opt/lsf/bin/bsub", "qsub": "/usr/bin/qsub"}
    for submit, kinds in (("sbatch", ["slurm"]), ("bsub", ["lsf"]), ("qsub", ["pbs", "sge"])):
        on_path = {submit: has[submit]}.get
        assert default_local_workers(64, {}, on_path) == (4, kinds)
        assert default_local_workers(5, {"HOME": "/home/me"}, on_path) == (4, kinds)
        assert default_local_workers(4, {}, on_path) == (4, [])  # nothing to cap
        assert default_local_workers(2, {}, on_path) == (2, [])
    assert default_local_workers(64, {}, lambda cmd: None) == (64, [])  # a workstation
    for job_var in ("SLURM_JOB_ID", "PBS_JOBID", "JOB_ID", "LSB_JOBID", "_CONDOR_JOB_AD",
                    "OAR_JOB_ID", "MOAB_JOBID"):  # inside a job: its allocation is ours
        assert default_local_workers(64, {job_var: "123"}, has.get) == (64, [])
    assert default_local_workers(64, {"SLURM_JOB_ID": ""}, has.get) == (
        4, ["slurm", "pbs", "sge", "lsf"])


@pytest.mark.timeout(120)
def test_a_sweep_on_a_login_node_starts_few_workers_and_says_why(tmp_path, monkeypatch, caplog):
    """Through connect(): 16 usable cores (as Dask counts them) and sbatch on PATH, no job."""
    import dask.system

    from pipeline.engine.cluster import BATCH_JOB_VARIABLES, connect

    (tmp_path / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    for var in BATCH_JOB_VARIABLES:  # as if not run inside a job
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dask.system, "CPU_COUNT", 16)
    log = logging.getLogger("test-login-node")
    with caplog.at_level(logging.INFO, logger="test-login-node"):
        with connect({"kind": "local", "dashboard_address": ":0"}, log) as client:
            assert len(client.scheduler_info()["workers"]) == 4
    assert ("this looks like a login node of SLURM (sbatch on PATH, not inside a job): "
            "cluster=local starts 4 of the 16 workers its cores allow (cluster.n_workers=N to "
            "choose; cluster=slurm runs the sweep on the cluster)") in caplog.text


# ---------------------------------------------------------------------------- byte sizes
# Dask reads a bare number as bytes: cluster.memory_limit=4 (meant: 4 GB) had the nanny kill
# every worker, and every point was stored failed (KilledWorker, exit 1) after a minute of
# restarts; cluster=slurm cluster.memory=4 (under 1 KiB) ended in dask-jobqueue's TypeError
# (a traceback on dry_run, exit 3 with the results folder created on a real run). A size is
# now refused below what a worker needs (cc.MIN_WORKER_MEMORY, 256 MiB), naming the key, the
# value and the allowed forms; the forms that worked (sizes with a unit, fractions, auto, 0,
# the shipped configs and the README's examples) still pass.
LIMIT_FORMS = ("a size with a unit such as 4GB or 512MiB (at least 256 MiB), a fraction of "
               "the machine's memory in (0, 1] such as 0.5, auto, or 0 for no limit")
JOB_FORMS = ("a byte size with a unit such as 16GB or 512MiB (at least 256 MiB; a bare number "
             "is bytes)")
DISK_FORMS = "a byte size with a unit such as 10GB or 100MB (at least 1 MiB; a bare number is bytes)"

BAD_SIZES = [
    ({"kind": "local", "memory_limit": 4}, f"cluster.memory_limit=4 is 4 bytes; write {LIMIT_FORMS}"),
    ({"kind": "local", "memory_limit": 2}, f"cluster.memory_limit=2 is 2 bytes; write {LIMIT_FORMS}"),
    ({"kind": "local", "memory_limit": "4"}, f"cluster.memory_limit=4 is 4 bytes; write {LIMIT_FORMS}"),
    # a float above 1 is bytes too (Dask truncates it)
    ({"kind": "local", "memory_limit": 1.5}, f"cluster.memory_limit=1.5 is 1 byte; write {LIMIT_FORMS}"),
    ({"kind": "local", "memory_limit": 64 * 2**20},
     f"cluster.memory_limit=67108864 is 67,108,864 bytes; write {LIMIT_FORMS}"),
    # an int 1 is all of the machine's memory to Dask (it reads every number <= 1 as a
    # fraction), 1 GB to whoever typed it: ambiguous
    ({"kind": "local", "memory_limit": 1},
     "cluster.memory_limit=1 is ambiguous: Dask reads it as all of the machine's memory, not "
     f"1 byte or 1 GB; write 1.0 for all of it, or {LIMIT_FORMS}"),
    ({"kind": "local", "memory_limit": "200MB"},
     f"cluster.memory_limit=200MB is less than the 256 MiB a Dask worker needs; write {LIMIT_FORMS}"),
    ({"kind": "local", "memory_limit": -1}, f"cluster.memory_limit must be {LIMIT_FORMS}; got -1"),
    ({"kind": "local", "memory_limit": "lots"},
     f"cluster.memory_limit must be {LIMIT_FORMS}; got 'lots'"),
    ({"kind": "local", "memory_limit": True}, f"cluster.memory_limit must be {LIMIT_FORMS}; got True"),
    ({"kind": "local", "memory_limit": float("inf")},  # was an OverflowError traceback
     f"cluster.memory_limit must be {LIMIT_FORMS}; got inf"),
    ({"kind": "local", "memory_limit": "0GB"}, f"cluster.memory_limit must be {LIMIT_FORMS}; got '0GB'"),
    ({"kind": "slurm", "memory": 4}, f"cluster.memory=4 is 4 bytes; write {JOB_FORMS}"),
    ({"kind": "slurm", "memory": "512B"},
     f"cluster.memory=512B is less than the 256 MiB a Dask worker needs; write {JOB_FORMS}"),
    ({"kind": "pbs", "memory": "100MB"},
     f"cluster.memory=100MB is less than the 256 MiB a Dask worker needs; write {JOB_FORMS}"),
    ({"kind": "lsf", "memory": 1000}, f"cluster.memory=1000 is 1,000 bytes; write {JOB_FORMS}"),
    ({"kind": "slurm", "memory": 0}, f"cluster.memory must be {JOB_FORMS}; got 0"),
    ({"kind": "slurm", "memory": "lots"}, f"cluster.memory must be {JOB_FORMS}; got 'lots'"),
    # a job's memory is shared by its cluster.processes workers (--memory-limit = memory / processes)
    ({"kind": "slurm", "memory": "1GB", "cores": 8, "processes": 8},
     "cluster.memory=1GB gives each of the cluster.processes=8 workers of a job 119.21 MiB, less "
     "than a Dask worker needs (at least 256 MiB); raise cluster.memory or lower cluster.processes"),
    # a job's scratch disk has no worker's memory floor (disk=100MB is a request), only 1 MiB
    ({"kind": "htcondor", "disk": 4}, f"cluster.disk=4 is 4 bytes; write {DISK_FORMS}"),
    ({"kind": "htcondor", "disk": "1KB"}, f"cluster.disk=1KB is less than 1 MiB; write {DISK_FORMS}"),
]


@pytest.mark.parametrize("cfg,message", BAD_SIZES,
                         ids=[" ".join(f"{k}={v}" for k, v in cfg.items()) for cfg, _ in BAD_SIZES])
def test_byte_sizes_too_small_for_a_worker_are_refused(cfg, message):
    with pytest.raises(cc.ClusterConfigError) as info:
        cc.validate(conf(**cfg))  # the shipped conf/cluster/KIND.yaml with cfg's keys
    assert str(info.value) == message


def test_a_fraction_of_memory_too_small_for_a_worker_is_refused(monkeypatch):
    import distributed.system

    monkeypatch.setattr(distributed.system, "MEMORY_LIMIT", 16 * 2**30)  # a 16 GiB machine
    with pytest.raises(cc.ClusterConfigError) as info:
        cc.validate(conf("local", memory_limit=0.01))
    assert str(info.value) == ("cluster.memory_limit=0.01 is 163.84 MiB of this machine's "
                               f"16.00 GiB, less than a Dask worker needs; write {LIMIT_FORMS}")
    cc.validate(conf("local", memory_limit=0.02))  # 327.68 MiB


GOOD_LIMITS = ["auto", 0, 0.0, False, None, 0.5, "0.5", 1.0, "4GB", "4GiB", "500MB", "512MiB",
               "4 GB", "16g", 256 * 2**20, 4_000_000_000, "4e9", 4e9]


@pytest.mark.parametrize("value", GOOD_LIMITS, ids=repr)
def test_memory_limit_forms_that_work_pass_and_dask_reads_them_as_meant(value):
    import logging

    from distributed.worker_memory import parse_memory_limit

    cfg = conf("local", memory_limit=value)
    cc.validate(cfg)
    # what cluster.py hands LocalCluster, read as Dask reads it per worker: no limit, or a
    # limit a worker can run in (capped at this machine's memory)
    limit = parse_memory_limit(cc.setting(cfg, "memory_limit", "auto"), 1,
                               logger=logging.getLogger("test"))
    from distributed.system import MEMORY_LIMIT

    assert limit is None or limit >= min(256 * 2**20, MEMORY_LIMIT // 2)
    if value in (0, False):
        assert limit is None


@pytest.mark.parametrize("kind,overrides", [
    ("slurm", {}),  # the shipped 16GB over 8 processes
    ("slurm", {"memory": "4GB"}),
    ("slurm", {"memory": "512MiB", "cores": 1, "processes": 1}),
    ("slurm", {"memory": 2**30, "cores": 2, "processes": 2}),  # a bare number of bytes
    ("slurm", {"memory": "1GB", "cores": 1, "processes": 1}),  # as test_slurm.py runs it
    ("pbs", {"memory": "8GB", "cores": 4, "processes": 2}),
    ("lsf", {"memory": "16GB"}),
    ("htcondor", {"disk": "1GB"}),  # the README's example
    ("htcondor", {"disk": "100MB"}),  # scratch below a worker's memory floor: a fair request
    ("htcondor", {"disk": 2_000_000_000, "memory": "8GB"}),
])
@pytest.mark.filterwarnings("ignore:OAR Job memory")
def test_batch_sizes_that_work_pass_and_make_a_job_script(kind, overrides):
    cfg = conf(kind, **overrides)
    cc.validate(cfg)
    script = bc.job_script(cfg)  # dask-jobqueue formats the memory (it raised under 1 KiB)
    assert "--memory-limit" in script


def test_readme_cluster_examples_still_validate():
    for kind, overrides in [
        ("local", {"n_workers": 4, "threads_per_worker": 256}),
        ("local", {"dashboard_address": "0.0.0.0:8787"}),
        ("local", {"dashboard_address": ":8787"}),
        ("slurm", {"queue": "compute", "maximum_jobs": 50}),
        ("slurm", {"job_extra_directives": ["--qos=long"], "walltime": "4h",
                   "job_script_prologue": ["module load python/3.11",
                                           "source .venv/bin/activate"]}),
        ("slurm", {"cores": 1, "processes": 1, "memory": "1GB"}),
        ("htcondor", {"disk": "1GB", "walltime": "12:00:00"}),
    ]:
        cc.validate(conf(kind, **overrides))


@pytest.mark.parametrize("args,message", [
    # the user trial's commands, as typed (a real run, and its dry run)
    (["grid.x=[0,1,2]", "params.work_us=1", "cluster.memory_limit=4"],
     f"cluster.memory_limit=4 is 4 bytes; write {LIMIT_FORMS}"),
    (["grid.x=[0,1,2]", "params.work_us=1", "cluster.memory_limit=4", "dry_run=true"],
     f"cluster.memory_limit=4 is 4 bytes; write {LIMIT_FORMS}"),
    (["grid.x=[0]", "cluster=slurm", "cluster.memory=4", "dry_run=true"],
     f"cluster.memory=4 is 4 bytes; write {JOB_FORMS}"),
    (["grid.x=[0]", "cluster=slurm", "cluster.memory=4"],
     f"cluster.memory=4 is 4 bytes; write {JOB_FORMS}"),
    (["cluster.memory_limit=1", "dry_run=true"],
     "cluster.memory_limit=1 is ambiguous: Dask reads it as all of the machine's memory, not "
     f"1 byte or 1 GB; write 1.0 for all of it, or {LIMIT_FORMS}"),
    (["cluster.memory_limit=inf", "dry_run=true"],
     f"cluster.memory_limit must be {LIMIT_FORMS}; got inf"),
    (["cluster=htcondor", "cluster.disk=4", "dry_run=true"],
     f"cluster.disk=4 is 4 bytes; write {DISK_FORMS}"),
    (["cluster=pbs", "cluster.memory=1GB", "dry_run=true"],  # over the shipped 8 processes
     "cluster.memory=1GB gives each of the cluster.processes=8 workers of a job 119.21 MiB, less "
     "than a Dask worker needs (at least 256 MiB); raise cluster.memory or lower cluster.processes"),
])
def test_a_size_too_small_for_a_worker_exits_2_through_the_cli(tmp_path, args, message):
    lines = refused_through_the_cli(tmp_path, args).stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(message), lines  # one line


def test_a_size_with_a_unit_still_makes_a_job_script_through_the_cli(tmp_path):
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path / 'results'}", "grid.x=[0]",
                   "cluster=slurm", "cluster.memory=4GB", "dry_run=true",
                   env={"PATH": str(tmp_path / "empty-path")}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --mem=4G" in proc.stdout
    assert "--memory-limit 476.84MiB --nworkers 8" in proc.stdout  # 4 GB over 8 workers
    assert not (tmp_path / "results").exists()
