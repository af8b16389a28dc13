"""End to end through ``run.py``: real Dask clusters, kill and resume, bad input, determinism."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline
import pipeline.store
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cluster.dashboard_address=:0", "progress=false"]


def run_cli(*args, timeout=180, check_code=None, cwd=ROOT, env=None):
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})
    if check_code is not None:
        assert proc.returncode == check_code, proc.stdout + proc.stderr
    return proc


def expected_ids(grid_cfg, params):
    g = Grid(get_experiment("calibration"), grid_cfg, params)
    return {g.task_id(i) for i in range(g.total)}


def test_sweep_on_two_local_workers_all_rows_typed(tmp_path):
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=2",
                   "grid.x={range:[0,300]}", "grid.rows=[1,2]", "params.work_us=200", *FAST,
                   check_code=0)
    assert "results:" in proc.stdout and "600 tasks ok" in proc.stdout
    assert "dashboard: http://" in proc.stderr and "600 to run" in proc.stderr
    df = pd.read_parquet(tmp_path / "calibration")
    assert len(df) == 300 * 3 and df.task_id.nunique() == 600
    types = pq.read_schema(next((tmp_path / "calibration").glob("part-*.parquet")))
    assert types.field("x").type == pa.int64() and types.field("work_us").type == pa.float64()
    assert types.field("value").type == pa.float64() and types.field("label").type == pa.string()
    assert types.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert types.field("seed").type == pa.int64()
    assert set(df.status) == {"ok"} and df.worker.nunique() == 2
    ids = expected_ids({"x": {"range": [0, 300]}, "rows": [1, 2]}, {"work_us": 200})
    assert set(df.task_id) == ids
    manifest = pipeline.store.read_manifest(tmp_path / "calibration")
    run = manifest["runs"][-1]
    assert run["status"] == "finished" and run["counts"]["ok"] == 600
    assert run["config"]["grid"]["rows"] == [1, 2] and run["packages"]["dask"]
    assert run["git"]["commit"] is None or len(run["git"]["commit"]) == 40


def test_a_worker_dying_as_the_local_cluster_starts_gets_one_more_start(tmp_path):
    """A worker process that dies while it starts ("Nanny failed to start", seen once under
    load) fails the LocalCluster's start; the sweep closes it and starts it once more, instead
    of ending an unattended sweep with exit 3. The fault is real: the worker's preload exits."""
    from pipeline.engine.worker_preload import FAIL_START_ENV

    marker = tmp_path / "a-worker-died"
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=2",
                   "grid.x={range:[0,40]}", *FAST, env={FAIL_START_ENV: str(marker)},
                   check_code=0)
    assert marker.exists()  # a worker did die as it started
    assert "the local cluster failed to start" in proc.stderr
    assert "(attempt 2 of 2)" in proc.stderr
    df = pd.read_parquet(tmp_path / "calibration")
    assert sorted(df.x) == list(range(40)) and set(df.status) == {"ok"}
    assert df.worker.nunique() == 2  # the second start has both workers


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_failing_cluster_start_leaves_instead_of_starting_again(
        tmp_path, signum, code):
    """The signal comes while the workers start (held until the start ends), and the start
    then fails (a worker dies as it starts): the sweep leaves as interrupted. The held signal
    was lost with the start's error, and the cluster was started again."""
    from dask_processes import killed_at_exit

    from pipeline.engine.worker_preload import FAIL_START_ENV

    marker = tmp_path / "a-worker-died"
    driver = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
         f"results_dir={tmp_path}", "cluster.n_workers=2", "grid.x={range:[0,40]}", *FAST],
        cwd=ROOT, env={**os.environ, FAIL_START_ENV: str(marker)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    with killed_at_exit(driver):
        deadline = time.time() + 60
        while not marker.exists():  # the worker that will die has started: 1 s to go
            assert time.time() < deadline and driver.poll() is None, "no worker started"
            time.sleep(0.05)
        driver.send_signal(signum)
        _, err = driver.communicate(timeout=90)
    assert driver.returncode == code, err
    assert "starting it again" not in err
    assert not list((tmp_path / "calibration").glob("part-*.parquet"))


def test_rerun_computes_only_missing_and_retry_failed(tmp_path):
    common = ["experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=1",
              "params.work_us=0", "params.fail_every=10", *FAST]
    proc = run_cli(*common, "grid.x={range:[0,40]}", check_code=1)
    assert "FAILED: 4 of 40 task(s) failed" in proc.stderr
    assert "calibration failure requested at x=0" in proc.stderr
    proc = run_cli(*common, "grid.x={range:[0,50]}", "dry_run=true", check_code=0)
    assert "already done:  36 ok, 4 failed" in proc.stdout and "to run:        10" in proc.stdout
    proc = run_cli(*common, "grid.x={range:[0,50]}", check_code=1)  # one new failure (x=40)
    assert ("FAILED: 1 of 10 task(s) failed this run, 4 earlier failure(s) of this grid skipped "
            "(retry_failed=true re-runs them); first error: ValueError: calibration failure "
            "requested at x=40") in proc.stderr, proc.stderr
    # nothing left to run: the first error is the earliest stored one (it said "see the
    # error column of the failed rows"), and no "0 of 0 task(s) failed this run"
    proc = run_cli(*common, "grid.x={range:[0,50]}", check_code=1)
    assert ("FAILED: 5 earlier failure(s) of this grid skipped "
            "(retry_failed=true re-runs them); first error: ValueError: calibration failure "
            "requested at x=0 [") in proc.stderr, proc.stderr
    df = pipeline.load(tmp_path, "calibration")
    assert len(df) == 50 and df.task_id.is_unique
    assert sorted(df[df.status == "failed"].x) == [0, 10, 20, 30, 40]
    raw = pd.read_parquet(tmp_path / "calibration")
    assert len(raw) == 50  # the 36 done tasks were not run again
    # retry_failed re-runs the failed ones (a deterministic failure fails again: 5 more rows)
    run_cli("experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=1",
            "params.work_us=0", "params.fail_every=10", "grid.x={range:[0,50]}",
            "retry_failed=true", *FAST, check_code=1)
    assert len(pd.read_parquet(tmp_path / "calibration")) == 55


BAD_INPUTS = [
    (["experiment=no_such_experiment"], "unknown experiment 'no_such_experiment'; available"),
    (["experiment=calibration", "grid.bogus=[1]"], "parameter 'bogus': unknown parameter"),
    (["experiment=calibration", "params.wrok_mode=sleep"],
     "parameter 'wrok_mode': unknown parameter; did you mean 'work_mode'? declared parameters "
     "are: x, work_us, work_mode, scale, rows, fail_every, crash_at, hang_at\n"),
    (["experiment=calibration", "grid.work_us=[-5]"], "allowed: a value in [0, 60000000.0]"),
    (["experiment=calibration", "params.rows=5000"], "parameter 'rows'"),
    (["experiment=calibration", "cluster=address"], "cluster.address=tcp://HOST:PORT"),
    (["experiment=calibration", "batch_size=-3"], "batch_size must be 'auto'"),
    # Hydra's raw "Cannot merge DictConfig with ListConfig", no "error:", no advice
    (["experiment=calibration", "grid=[1]"], "error: grid must be a mapping of parameter "
     "names to values, got '[1]' (set an axis with grid.NAME=[a,b,c])"),
    # the report was written, with no word that the dry run was ignored
    (["experiment=calibration", "dry_run=true", "report=true"],
     "dry_run=true and report=true: a dry run runs and writes nothing"),
    (["experiment=calibration", "max_tasks_per_second=0"],
     "max_tasks_per_second (cap on Dask tasks per second for the whole cluster) must be a number > 0"),
    (["experiment=calibration", "flush_rows=2.5"], "flush_rows (buffered result rows that trigger"),
    (["experiment=calibration", "params.work_mode=nap"], "allowed: one of {spin, sleep}"),
    (["experiment=calibration", "cluster=nosuchcluster"], "nosuchcluster"),
    # SLURM's word for it
    (["experiment=calibration", "cluster=slurm", "cluster.partition=debug"],
     "unknown key 'cluster.partition' for cluster=slurm (did you mean 'cluster.queue'?)"),
    # a family's declared exact-computation limit, checked on the whole grid before any task
    (["experiment=inferential", "grid.zip=[{graph:[complete,complete],n:[10,30]}]"],
     "exact enumeration is limited to n <= 24 nodes (got n = 30)"),
]


def snapshot(folder):
    return {p: p.stat().st_mtime_ns for p in Path(folder).rglob("*")}


@pytest.mark.parametrize("args,message", BAD_INPUTS)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, message):
    results = tmp_path / "results"
    (results / "calibration").mkdir(parents=True)
    (results / "calibration" / "keep.txt").write_text("an earlier file")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = snapshot(tmp_path)
    proc = run_cli(*args, f"results_dir={results}", timeout=60, cwd=cwd)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stdout + proc.stderr
    assert snapshot(tmp_path) == before  # results dir and working dir untouched


@pytest.mark.parametrize("line,args,named", [
    ("  wrok_mode: sleep", [], True),  # a misspelt parameter in the YAML
    ("  work_us: -5", [], True),  # a value outside its domain in the YAML
    ("  wrok_mode: sleep", ["params.wrok_mode=spin"], False),  # typed: the command line's
    ("  work_us: -5", ["grid.work_us=[-5]"], False),
])
def test_a_bad_parameter_in_the_experiments_yaml_names_the_file(tmp_path, line, args, named):
    """The error named a parameter the user never typed and no file: with a YAML of their own
    (or an edited one), they looked for it on the command line."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    yaml = conf / "experiment" / "calibration.yaml"
    yaml.write_text(yaml.read_text().replace("  work_us: 1000.0", line))
    results = tmp_path / "results"
    proc = run_cli("experiment=calibration", f"results_dir={results}", *args, timeout=60,
                   env={"PIPELINE_CONF_DIR": str(conf)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    origin = f"(set in {yaml}, not on the command line)"
    assert (origin in proc.stderr) == named, proc.stderr
    assert not results.exists()


@pytest.mark.parametrize("inside", ["", "sub"])
def test_a_results_dir_inside_an_experiment_folder_is_refused(tmp_path, inside):
    """results_dir=RESULTS/NAME (the experiment folder itself) wrote RESULTS/NAME/NAME/, and
    pandas.read_parquet(RESULTS/NAME) then read those rows beside its own: 82 duplicate keys in
    a walk-through. A results_dir inside an experiment folder did the same."""
    results = tmp_path / "results"
    run_cli("experiment=calibration", f"results_dir={results}", "grid.x=[1,2]",
            "params.work_us=0", "cluster.n_workers=1", *FAST, check_code=0)
    folder = results / "calibration"
    before = snapshot(tmp_path)
    for experiment in ("calibration", "composition_region"):
        target = folder / inside if inside else folder
        proc = run_cli(f"experiment={experiment}", f"results_dir={target}", "dry_run=false",
                       *FAST, timeout=60)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        where = "is inside" if inside else "is"
        assert (f"error: results_dir={target} {where} the results folder {folder} (of "
                f"experiment 'calibration', written by a sweep): results go to "
                f"results_dir/{experiment}/, and "
                f"pandas.read_parquet({str(folder)!r}) would read those rows as its own; give "
                f"results_dir={results}") in proc.stderr, proc.stderr
        assert snapshot(tmp_path) == before
    assert len(pd.read_parquet(folder)) == 2
    # a folder of the user's with a file of the same name is no results folder: a sweep into a
    # folder beneath it runs (any project may have a _manifest.json)
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "_manifest.json").write_text('{"name": "my project", "runs": []}')
    run_cli("experiment=calibration", f"results_dir={project / 'sub'}", "grid.x=[1]",
            "params.work_us=0", "cluster.n_workers=1", *FAST, check_code=0)


def test_a_sweep_notes_files_of_the_users_that_break_read_parquet(tmp_path):
    """A notes.txt in the results folder: the sweep said nothing (exit 0), and the README's
    pd.read_parquet(folder) then failed on it; only verify found it."""
    args = ["experiment=calibration", f"results_dir={tmp_path}", "grid.x=[1,2]",
            "params.work_us=0", "cluster.n_workers=1", *FAST]
    folder = tmp_path / "calibration"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    (folder / "_mine.txt").write_text("invisible to Parquet readers")
    proc = run_cli(*args, check_code=0)
    assert (f"note: notes.txt in {folder} is not a result part file: pandas.read_parquet("
            f"{str(folder)!r}) reads it too and fails or mixes it in (pipeline.load reads "
            "only the part files); move it out, or give it a name starting with _\n"
            ) in proc.stderr, proc.stderr
    assert "_mine.txt" not in proc.stderr
    with pytest.raises(pa.ArrowInvalid):
        pd.read_parquet(folder)  # what the note warns of
    assert len(pipeline.load(tmp_path, "calibration")) == 2
    (folder / "notes.txt").unlink()
    proc = run_cli(*args, check_code=0)
    assert "note:" not in proc.stderr and len(pd.read_parquet(folder)) == 2


def test_dry_run_of_ten_million_points(tmp_path):
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path}", "dry_run=true",
                   "grid.x={range:[0,10000]}", "grid.work_us={linspace:[0,1,100]}",
                   "grid.scale={linspace:[0,1,10]}", check_code=0, timeout=120)
    assert "tasks in grid: 10,000,000" in proc.stdout
    assert "to run:        10,000,000" in proc.stdout and "sample points:" in proc.stdout
    assert not (tmp_path / "calibration").exists()


@pytest.mark.parametrize("nan_arg,grid_cfg,params", [
    ("params.scale=nan", {"x": {"range": [0, 20]}}, {"work_us": 0.0, "scale": float("nan")}),
    ("grid.scale=[1.0,nan]", {"x": {"range": [0, 10]}, "scale": [1.0, float("nan")]},
     {"work_us": 0.0})])
def test_a_nan_parameter_is_counted_done_on_rerun(tmp_path, nan_arg, grid_cfg, params):
    """A fixed NaN (params.scale=nan) matched no stored row (NaN != NaN), so a rerun of the
    complete sweep said '0 already done, 20 to run' (and 'ran 0 tasks', '0 tasks ok'), as did
    the dry run. The NaN point's task id is the same on every run."""
    common = ["experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=1",
              "grid.x={range:[0,%d]}" % grid_cfg["x"]["range"][1], "params.work_us=0", nan_arg,
              *FAST]
    first = run_cli(*common, check_code=0)
    assert "20 tasks in grid, 0 already done, 20 to run" in first.stderr
    dry = run_cli(*common, "dry_run=true", check_code=0)
    assert "already done:  20 ok, 0 failed" in dry.stdout and "to run:        0" in dry.stdout
    second = run_cli(*common, check_code=0)
    assert "20 tasks in grid, 20 already done, 0 to run" in second.stderr
    assert "20 tasks ok" in second.stdout
    raw = pd.read_parquet(tmp_path / "calibration")
    assert len(raw) == 20 and set(raw.task_id) == expected_ids(grid_cfg, params)
    assert raw.scale.isna().sum() == (20 if nan_arg.startswith("params") else 10)


def _parts(path):
    return sorted(Path(path).glob("part-*.parquet"))


def test_sigkill_driver_then_resume(tmp_path):
    args = [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
            f"results_dir={tmp_path}", "cluster.n_workers=2", "grid.x={range:[0,600]}",
            "params.work_us=20000", "params.work_mode=sleep",  # sleeps: faults, not CPU
            "batch_size=10", "flush_rows=10", *FAST]  # a part per batch
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while (len(_parts(tmp_path / "calibration")) < 3 and time.time() < deadline
           and proc.poll() is None):
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)  # the driver only; its orphaned workers die on their own
    proc.wait()
    done_before = len(_parts(tmp_path / "calibration"))
    assert 3 <= done_before < 60
    for part in _parts(tmp_path / "calibration"):
        assert pq.read_table(part).num_rows == 10  # no part is corrupt or partial
    run_cli(*args[2:], check_code=0, timeout=240)
    df = pd.read_parquet(tmp_path / "calibration")
    assert len(df) == 600 and df.task_id.is_unique
    assert set(df.task_id) == expected_ids({"x": {"range": [0, 600]}},
                                         {"work_us": 20000, "work_mode": "sleep"})
    os.killpg(proc.pid, signal.SIGKILL) if _alive(proc.pid) else None


def _alive(pid):
    try:
        os.killpg(pid, 0)
        return True
    except OSError:
        return False


@pytest.fixture
def external_cluster(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1."""
    sched_file = tmp_path / "scheduler.json"
    dask = Path(sys.executable).with_name("dask")
    procs = [subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    deadline = time.time() + 60
    while not sched_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    import json

    time.sleep(0.2)
    address = json.loads(sched_file.read_text())["address"]
    workers = [subprocess.Popen([str(dask), "worker", address, "--nthreads", "1",
                                 "--nworkers", "1", "--no-nanny", "--no-dashboard"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True) for _ in range(2)]
    from distributed import Client

    with Client(address, timeout="30s") as client:
        client.wait_for_workers(2, timeout=60)
    yield address, workers
    for p in procs + workers:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_external_scheduler_and_a_worker_killed_mid_run(tmp_path, external_cluster):
    address, workers = external_cluster
    args = [sys.executable, str(ROOT / "run.py"), "experiment=calibration",
            f"results_dir={tmp_path}", "cluster=address", f"cluster.address={address}",
            "grid.x={range:[0,400]}", "params.work_us=40000", "params.work_mode=sleep",
            "batch_size=10", "flush_rows=10", "progress=false"]  # 8 s of sleeps on 2 threads
    driver = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    deadline = time.time() + 120
    while (len(_parts(tmp_path / "calibration")) < 4 and time.time() < deadline
           and driver.poll() is None):
        time.sleep(0.05)
    assert driver.poll() is None, "the sweep ended before the worker could be killed"
    parts_at_kill = len(_parts(tmp_path / "calibration"))
    os.killpg(workers[0].pid, signal.SIGKILL)  # one worker dies; its batches move to the other
    out, err = driver.communicate(timeout=240)
    assert parts_at_kill < 40  # the kill really happened mid-run (400 tasks / batches of 10)
    assert driver.returncode == 0, out + err
    df = pd.read_parquet(tmp_path / "calibration")
    assert len(df) == 400 and df.task_id.is_unique and set(df.status) == {"ok"}
    assert df.worker.str.startswith("tcp://127.0.0.1").all()


def test_same_table_on_one_and_two_workers(tmp_path):
    tables = []
    for n in (1, 2):
        out = tmp_path / f"w{n}"
        run_cli("experiment=calibration", f"results_dir={out}", f"cluster.n_workers={n}",
                "grid.x={range:[0,120]}", "grid.rows=[1,3]", "params.work_us=100", *FAST,
                check_code=0)
        df = pipeline.load(out, "calibration")
        keep = ["task_id", "row_index", "x", "rows", "value", "draw", "label", "seed", "status"]
        tables.append(df[keep].sort_values(["task_id", "row_index"]).reset_index(drop=True))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[0].draw.nunique() == 240  # the draws really are seeded per task


def test_slurm_cluster_is_constructible(tmp_path):
    # dask-jobqueue is a dependency; importing it directly here would replace this process's
    # SIGINT handler with sys.exit() (the pipeline imports it through batch_cluster._import_jobqueue)
    import signal

    from pipeline.engine.batch_cluster import make_slurm_cluster, remove_tls_folder

    handler = signal.getsignal(signal.SIGINT)
    cluster = make_slurm_cluster({"queue": "compute", "account": "proj42", "cores": 4,
                                  "processes": 2, "memory": "8GB", "walltime": "02:00:00",
                                  "minimum_jobs": 0, "maximum_jobs": 7,
                                  "job_extra_directives": ["--qos=long"],
                                  "shared_temp_directory": str(tmp_path)})
    try:
        script = cluster.job_script()
        for line in ("#SBATCH -p compute", "#SBATCH -A proj42", "#SBATCH --qos=long",
                     "#SBATCH -t 02:00:00", "--nworkers 2"):
            assert line in script, script
        assert cluster._adaptive is not None and cluster._adaptive.maximum == 7 * 2
    finally:
        cluster.close()
        remove_tls_folder(cluster)
    assert signal.getsignal(signal.SIGINT) is handler  # Ctrl-C still ours


def test_a_point_that_kills_its_worker_fails_alone(tmp_path):
    # os._exit in the kernel (a segfault, the OOM killer): the batch is bisected down to it.
    started = time.monotonic()
    # one batch of 128, lost; cut in 8, the piece of 16 holding x=5 is lost too: two messages
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path}", "cluster.n_workers=1",
                   "grid.x={range:[0,128]}", "params.crash_at=5", "params.work_us=0",
                   "batch_size=128", *FAST, check_code=1,
                   env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"})
    print(f"took {time.monotonic() - started:.0f} s")  # ~16 s here: ~1.5 s a worker restart
    # The stall it had, checked by its cause rather than by the clock (a 25 s bound failed
    # under CI load at 27 s): the driver's joint fetch of finished batches waited its whole
    # 30 s bound for a result lost with the dead worker (35 s in 3 runs of 5), then fetched
    # them one by one, which the run log says.
    log = sorted((tmp_path / "calibration" / "_logs").glob("*.log"))[-1].read_text()
    assert "fetching them together failed" not in log, log[-3000:]
    # Dask's ERROR for each lost batch, which the engine handles: a warning in the run log,
    # not on the terminal, where the engine says once what it does about it
    terminal = proc.stdout + proc.stderr
    assert "marked as failed because" not in terminal, terminal[-3000:]
    assert "WARNING Task run_batch-" in log and "marked as failed because" in log
    assert terminal.count("was lost with the workers that ran it (KilledWorker); its points "
                          "run again in") == 1, terminal[-3000:]
    assert log.count("was lost with the workers that ran it") >= 2
    # the one worker dies at each attempt: said once (the repeats: the run log)
    assert terminal.count("no Dask workers left") <= 1, terminal[-3000:]
    df = pipeline.load(tmp_path, "calibration")
    assert len(df) == 128
    assert df[df.status == "failed"].x.tolist() == [5]
    assert df[df.status == "failed"].error.str.contains("KilledWorker").all()


def test_multirun_over_experiments(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    results = tmp_path / "results"
    run_cli("-m", "experiment=calibration,composition_region", f"results_dir={results}",
            "cluster.n_workers=1", *FAST, check_code=0, cwd=cwd)
    assert len(pipeline.load(results, "calibration")) == 1000
    region = pipeline.load(results, "composition_region")
    assert set(region.k) == {1, 2, 3, 4, 5} and set(region.delta) == {0.0, 0.1}
    assert list(cwd.iterdir()) == []  # Hydra's multirun.yaml stays out of the working dir
    # one bad job is reported before any job runs
    bad = tmp_path / "bad"
    proc = run_cli("-m", "experiment=calibration,composition", f"results_dir={bad}",
                   "grid.x=[1,2]", *FAST, cwd=cwd)
    assert proc.returncode == 2 and "multirun job experiment=composition" in proc.stderr
    assert not bad.exists() and list(cwd.iterdir()) == []


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_whole_multirun(tmp_path, sig, code):
    """Ctrl-C or SIGTERM (scancel, the walltime's signal) in the first job of a multirun ended
    that job, and the next one started and ran whole; under a batch job the scheduler then
    killed it outright. The command stops, and says which jobs it did not start."""
    first, second = tmp_path / "first", tmp_path / "second"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "-m", "experiment=calibration",
         f"results_dir={first},{second}", "params.work_mode=sleep", "params.work_us=20000",
         "grid.x={range:[0,2000]}", "cluster.n_workers=1", "cluster.threads_per_worker=4",
         "flush_seconds=0.5", *FAST], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)  # (Hydra's multirun record goes to cwd/results)
    try:
        deadline = time.monotonic() + 120
        while not list((first / "calibration").glob("part-*.parquet")) and \
                proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the first job is under way
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert ("multirun stopped in its job 1 of 2: the last one was not started (the same "
            "command runs them; tasks stored are not run again)") in err, err
    assert not second.exists()
    assert 0 < len(pipeline.load(first, "calibration")) < 2000


def test_unreachable_scheduler_is_a_crash_not_bad_input(tmp_path):
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path}", "cluster=address",
                   "cluster.address=tcp://127.0.0.1:9", "cluster.timeout=2s", "progress=false",
                   timeout=120)
    assert proc.returncode == 3 and "the sweep crashed" in proc.stderr
    manifest = pipeline.store.read_manifest(tmp_path / "calibration")
    assert manifest["runs"][-1]["status"] == "crashed"


def test_main_in_process_leaves_the_logging_of_the_process_alone(tmp_path, capsys):
    """run.py's main() runs in-process (tests, notebooks): it must not reconfigure Python's
    logging. Hydra's logging presets call dictConfig, which closed every handler of the process
    and disabled every existing logger; a handler that closes its stream on close (absl's does,
    for any stream that is not sys.stderr at that moment) then closed a stream still in use."""
    import io
    import logging

    from pipeline.cli import main

    class ClosesItsStream(logging.StreamHandler):
        def close(self):
            self.stream.close()
            super().close()

    stream = io.StringIO()
    handler = ClosesItsStream(stream)
    other = logging.getLogger("some.library")
    other.addHandler(handler)
    try:
        for _ in range(2):
            assert main(["experiment=calibration", "grid.x=[1,2]", "dry_run=true",
                         f"results_dir={tmp_path}"]) == 0
        assert not stream.closed and not other.disabled and handler in other.handlers
        other.warning("still here")
        assert "still here" in stream.getvalue()
        assert "tasks in grid: 2" in capsys.readouterr().out
    finally:
        other.removeHandler(handler)


def test_a_sweep_and_a_small_resume_write_one_part_file_each(tmp_path):
    """The buffer was written ahead of the tail however small it was: every run with work left
    two part files, and a folder resumed night after night needed compacting. Under 4 MiB it
    now waits for the final write."""
    from pipeline.store.manifest import read_manifest

    common = ["experiment=calibration", "params.work_mode=sleep", "params.work_us=2000",
              "cluster.n_workers=2", f"results_dir={tmp_path}", *FAST]
    for stop, ran in ((3000, 3000), (3300, 300)):
        proc = run_cli(*common, f"grid.x={{range:[0,{stop}]}}")
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout + proc.stderr
        assert f"ran {ran:,} tasks" in out and "1 part file(s)" in out, out
        assert read_manifest(tmp_path / "calibration")["runs"][-1]["counts"]["parts"] == 1
    assert len(list((tmp_path / "calibration").glob("part-*.parquet"))) == 2
    assert len(pd.read_parquet(tmp_path / "calibration")) == 3300


def test_a_dashboard_port_in_use_is_one_line_with_the_port_taken_instead(tmp_path):
    """Another sweep (or user) on the dashboard's port: Dask's raw UserWarning, with its
    source line, went to the terminal before the engine's own line gave the port used."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
                       "cluster.n_workers=1", f"cluster.dashboard_address=127.0.0.1:{port}",
                       "progress=false", f"results_dir={tmp_path}", check_code=0)
    assert "already in use" not in proc.stderr and "UserWarning" not in proc.stderr, proc.stderr
    used = re.search(r"local cluster up; dashboard: http://127\.0\.0\.1:(\d+)/status", proc.stderr)
    assert used and int(used.group(1)) != port, proc.stderr


def test_more_local_workers_than_twice_the_cores_is_warned_about(tmp_path):
    """cluster.n_workers=64 on a 2-core login node ran without a word: a minute of worker
    start-up for points that did not wait on anything. Pinned to one core here (taskset)."""
    import shutil

    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux) is not installed")
    proc = subprocess.run(["taskset", "-c", "0", sys.executable, str(ROOT / "run.py"),
                           "experiment=calibration", f"results_dir={tmp_path}", "grid.x=[1,2]",
                           "params.work_us=0", "cluster.n_workers=3", *FAST],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "cluster.n_workers=3 worker processes on 1 core(s)" in proc.stderr, proc.stderr


@pytest.mark.timeout(240)
def test_a_multirun_over_results_dirs_keeps_hydras_file_in_the_first(tmp_path):
    """-m results_dir=a,b: Hydra resolves its sweep folder before the sweep's values, so its
    multirun.yaml went to the default results/.multirun of the working directory, a folder
    nobody named, and empty a/.multirun, b/.multirun were left. Now it goes to a/.multirun."""
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("-m", "experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
            f"results_dir={a},{b}", *FAST, "cluster.n_workers=1", cwd=tmp_path, check_code=0)
    assert (a / ".multirun" / "multirun.yaml").is_file()
    assert not (b / ".multirun").exists() and not (tmp_path / "results").exists()
    for folder in (a, b):
        assert len(pd.read_parquet(folder / "calibration")) == 2
