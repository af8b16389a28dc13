"""Issue 17 §2, the remaining bad inputs, through ``run.py``: exit 2, a message naming the
key and the fix, nothing written (results folder and working directory untouched), no
traceback. And the one input that was bad only for Hydra's lexer (a non-ASCII results_dir)
now works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.engine.grid import Grid
from pipeline.experiments.base import ParamError, get_experiment

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd, timeout=60):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def snapshot(folder):
    return {p: p.lstat().st_mtime_ns for p in Path(folder).rglob("*")}


CASES = [
    # a real run over 10^12 points: refused before numpy allocates anything, .lock not left
    (["experiment=calibration", "grid.x={range:[0,1000000000000]}"],
     ["the grid has 1,000,000,000,000 tasks, more than max_tasks = 1,000,000,000",
      "max_tasks=1000000000000"]),
    (["experiment=calibration", "grid.x={range:[0,50]}", "max_tasks=49"],
     ["the grid has 50 tasks, more than max_tasks = 49"]),
    (["experiment=calibration", "max_tasks=lots"], ["max_tasks must be an integer >= 1, got 'lots'"]),
    # a dangling or looping symbolic link, a folder that cannot exist: were exit 3 (a fault of the
    # moment) with the advice to free space
    (["experiment=calibration", "results_dir=RESULTS/dangling"],
     ["RESULTS/dangling is a symbolic link to RESULTS/../nowhere, which does not exist or loops"]),
    (["experiment=calibration", "results_dir=RESULTS/loop1/deeper"],
     ["RESULTS/loop1 is a symbolic link to loop2, which does not exist or loops"]),
    (["experiment=calibration", "results_dir=/proc/nosuch"],
     ["cannot create or lock /proc/nosuch/calibration: No such file or directory (results go "
      "to results_dir/NAME/; choose a folder you can write)"]),
    # params=abc was replaced by the mapping params.rows makes: the YAML's work_us was dropped
    (["experiment=calibration", "params=abc", "params.rows=2"],
     ["params must be a mapping of parameter names to values, got 'abc' (set one value with "
      "params.NAME=VALUE)"]),
    # the advice was params.work_us=[a,b,c], itself refused
    (["experiment=calibration", "params.work_us=10,20"],
     ["'params.work_us=10,20': write grid axes as a list, grid.work_us=[a,b,c]",
      "params.X fixes one value"]),
    # a zip given as one mapping, not a list of groups (the check missed it: params.L1 ignored)
    (["experiment=lattice", "grid.zip={L1:[4,8],L2:[4,8]}", "params.L1=16"],
     ["params.L1 is set, but L1 is also a grid axis"]),
    # the conflict was reported as the grid's first value breaking a cross-parameter rule
    (["experiment=composition_hetero", "params.eps_source=uniform", "params.eps_list=[0.1]"],
     ["params.eps_source is set, but eps_source is also a grid axis"]),
    # '01' and '1' were two task ids of one node
    (["experiment=inferential", "~grid.zip", "params.graph=path", "grid.target=['1','01']"],
     ["parameter 'target'", "'all' or a node index (0, 1, ...)"]),
    # Hydra's advice was to add it with +watchdog..., then refused by our own check
    (["experiment=calibration", "watchdog.no_worker_timeout=5"],
     ["unknown key 'watchdog.no_worker_timeout' (did you mean 'watchdog.no_workers_timeout'?); "
      "allowed: no_workers_timeout, no_progress_timeout, scheduler_timeout"]),
    # 1e308 MiB overflowed when turned into bytes: a crash (exit 3) after the manifest
    (["experiment=calibration", "flush_mib=1e308"],
     ["flush_mib (buffered MiB (in memory) that trigger a part file) must be a number > 0 and "
      "at most 1,048,576, got 1e+308"]),
    # a misspelt axis removal was ignored: the whole axis it meant to drop ran
    (["experiment=composition", "~grid.delta_targt"],
     ["'~grid.delta_targt': grid has no 'delta_targt' to remove (did you mean "
      "'~grid.delta_target'?); its keys: eps, k, delta_target, delta"]),
    (["experiment=calibration", "~params.nosuch", "dry_run=true"],
     ["'~params.nosuch': params has no 'nosuch' to remove; its keys: work_us"]),
    (["experiment=calibration", "results_dir=RESULTS/afile"],
     ["afile is a file, not a directory"]),
    (["experiment=calibration", "results_dir=RESULTS/afile/deeper"],
     ["afile is a file, not a directory"]),
    (["experiment=calibration", "cluster=nosuch"],
     ["unknown cluster 'nosuch'; available kinds: address, htcondor, local, lsf, moab, oar, pbs, sge, slurm"]),
    (["experiment=calibration", "grid.x={linspace:[0,1,2.5]}"],
     ["parameter 'x'", "num must be a whole number of points, got 2.5"]),
    (["experiment=lattice", "grid.L1=[4]"],
     ["parameter 'L1': appears both in a zip group (L1, L2) and in the grid",
      "'~grid.zip'", "'grid.zip=[{L1:[VALUE,...],L2:[...]}]'"]),
    # the axis from the experiment's YAML, the zip typed: "write it again without grid.x"
    # named what was typed; '~grid.x' is the fix
    (["experiment=calibration", "grid.zip=[{x:[1,2,3],scale:[0.1,0.2,0.3]}]"],
     ["parameter 'x': appears both in a zip group (x, scale) and in the grid. To sweep the zip "
      "as it is, drop the axis: leave grid.x=... out of the command, or add '~grid.x' where "
      "the experiment's config sets it"]),
    # two groups: the advice gives both (grid.zip=[one group] would drop the other silently)
    (["experiment=lattice", "grid.zip=[{L1:[4,8],L2:[4,8]},{base:[square,hexagonal],"
      "boundary:[torus,free]}]", "grid.L1=[4]"],
     ["'grid.zip=[{L1:[...],L2:[...]},{base:[VALUE,...],boundary:[...]}]' (every group: it "
      "replaces grid.zip whole)", "and the other groups' parameters too"]),
    (["experiment=lattice", "grid.zip=[{L1:[4,8],L2:[4,8]},{base:[square,hexagonal],"
      "boundary:[torus,free]}]", "params.L2=4"],
     ["'grid.zip=[{L1:[...],L2:[VALUE,...]},{base:[...],boundary:[...]}]' (every group: it "
      "replaces grid.zip whole)", "drop it with '~grid.zip' and set L1, base, boundary"]),
    # a zip group of empty lists is no grid, as an empty axis (it ran a sweep of 0 tasks, exit 0)
    (["experiment=lattice", "grid.zip=[{L1:[],L2:[]}]"],
     ["parameters (L1, L2): empty lists of values in a zip group"]),
    # a float axis too large to hold: 10^16 values were numpy's MemoryError traceback, and
    # 10^9 (a dry run allowed it) the OOM killer at 26 GB, on a shared login node
    (["experiment=calibration", "grid.work_us={linspace:[0,1,1e16]}"],
     ["parameter 'work_us'", "num=10,000,000,000,000,000 values would take about "
      "260,000,000.0 GB to hold"]),
    (["experiment=calibration", "dry_run=true", "grid.work_us={logspace:[0,1,1e11]}"],
     ["parameter 'work_us'", "num=100,000,000,000 values would take about 2,600.0 GB to hold "
      "(a float axis keeps every value in memory), more than half the", "use a coarser axis"]),
    # an infinite range bound or num (an OverflowError traceback)
    (["experiment=calibration", "grid.x={range:[0,1e400]}"],
     ["parameter 'x': bad range helper [0, inf]: cannot convert float infinity to integer"]),
    (["experiment=calibration", "grid.work_us={linspace:[0,1,1e400]}"],
     ["parameter 'work_us': bad linspace helper [0, 1, inf]"]),
    # an axis longer than 2^63 - 1 values (len(range) raised OverflowError: a traceback)
    (["experiment=calibration", "dry_run=true", "grid.x={range:[0,100000000000000000000]}"],
     ["parameter 'x': bad range helper [0, 100000000000000000000]: more than 2^63 - 1 values"]),
    # a grid beyond int64 indices, max_tasks raised: it wrote a manifest, then crashed (exit 3)
    (["experiment=calibration", "max_tasks=100000000000000000000",
      "grid.x={range:[0,10000000000]}", "grid.crash_at={range:[0,10000000000]}"],
     ["the grid has 100,000,000,000,000,000,000 tasks", "at most 9,223,372,036,854,775,807"]),
    # the same for a range over a float parameter (held as a float array)
    (["experiment=calibration", "grid.scale={range:[0,10000000000000000]}"],
     ["parameter 'scale': a range of 10,000,000,000,000,000 values would take about"]),
    (["experiment=calibration", "dry_run=true", "grid.scale={range:[0,100000000000]}"],
     ["parameter 'scale': a range of 100,000,000,000 values would take about 2,600.0 GB"]),
    # a boolean in a range helper, as in a list (range(True, 3) ran x = 1, 2)
    (["experiment=calibration", "grid.x={range:[true,3]}"],
     ["parameter 'x': bad range helper [True, 3]: its arguments are numbers, not true or false"]),
    (["experiment=calibration", "grid.work_us={linspace:[false,true,2]}"],
     ["parameter 'work_us': bad linspace helper [False, True, 2]: its arguments are numbers"]),
    # a misspelt top-level key: Hydra refused it, advising '+retry_faild=true'
    (["experiment=calibration", "retry_faild=true"],
     ["unknown top-level key 'retry_faild' (did you mean 'retry_failed'?); allowed: experiment, "
      "batch_size,"]),
    (["experiment=calibration", "flush_row=10"],
     ["unknown top-level key 'flush_row' (did you mean 'flush_rows'?)"]),
    # a misspelt cluster key: Hydra refused it, advising '+cluster.n_worker=2'
    (["experiment=calibration", "cluster.n_worker=2"],
     ["unknown key 'cluster.n_worker' for cluster=local (did you mean 'cluster.n_workers'?); "
      "allowed: dashboard_address, kind, memory_limit, n_workers, threads_per_worker"]),
    (["experiment=calibration", "cluster=slurm", "cluster.wallltime=1:00:00"],
     ["unknown key 'cluster.wallltime' for cluster=slurm (did you mean 'cluster.walltime'?)"]),
    # a parameter fixed on the command line that is also a grid axis: the axis won, and
    # params.x=5 was silently ignored (the YAML's axis, one typed, a zip group's)
    (["experiment=calibration", "params.x=5"],
     ["params.x is set, but x is also a grid axis (grid.x,", "write grid.x=[VALUE]", "'~grid.x'"]),
    (["experiment=calibration", "grid.work_us=[1,2]", "params.work_us=3"],
     ["params.work_us is set, but work_us is also a grid axis"]),
    # zipped: no axis of its own, so grid.L2=[4] and '~grid.L2' were refused too; the advice
    # names the zip (both fixes it gives are run below)
    (["experiment=lattice", "params.L2=4"],
     ["params.L2 is set, but L2 is also a grid axis, zipped with L1 in grid.zip",
      "'grid.zip=[{L1:[...],L2:[VALUE,...]}]'", "drop it with '~grid.zip' and set L1"]),
    # not a list of groups (a TypeError traceback)
    (["experiment=lattice", "grid.zip=5"],
     ["parameter 'zip': a list of groups, each mapping parameters to equal-length lists"]),
]


@pytest.mark.parametrize("fix", [
    ["grid.zip=[{L1:[4,8],L2:[4,4]}]"],
    ["~grid.zip", "params.L2=4", "grid.L1=[4,8]"],
])
def test_the_advice_for_a_zipped_parameter_works(tmp_path, capsys, fix):
    """What the refusal of ``params.L2=4`` (lattice's L2 is zipped with L1) tells the user to
    write instead: each is accepted, and sweeps L2 = 4 only."""
    from pipeline.cli import main

    code = main(["experiment=lattice", *fix, f"results_dir={tmp_path}", "dry_run=true",
                 "progress=false"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "tasks in grid: 36" in out, out  # 3 bases x 2 insertions x 3 boundaries x 2 sizes
    sizes = re.findall(r"'L1': (\d+), 'L2': (\d+)", out)
    assert sizes and {l2 for _, l2 in sizes} == {"4"} and {l1 for l1, _ in sizes} == {"4", "8"}, out


@pytest.mark.parametrize("args,messages", CASES, ids=[c[0][-1][:40] for c in CASES])
def test_bad_input_exits_2_writes_nothing_no_traceback(tmp_path, monkeypatch, capsys, args, messages):
    """In-process through ``pipeline.cli.main`` (what run.py calls), to keep the suite fast;
    the first case also runs as a real ``run.py`` process below."""
    from pipeline.cli import main

    results = tmp_path / "results"
    results.mkdir()
    (results / "afile").write_text("not a directory")
    (results / "dangling").symlink_to(tmp_path / "nowhere")
    (results / "loop1").symlink_to("loop2")
    (results / "loop2").symlink_to("loop1")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    args = [a.replace("RESULTS", str(results)) for a in args]
    if not any(a.startswith("results_dir=") for a in args):
        args.append(f"results_dir={results}")
    before = snapshot(tmp_path)
    code = main([*args, "progress=false"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    for message in messages:
        assert message.replace("RESULTS/..", str(tmp_path)).replace("RESULTS", str(results)) in err, err
    assert "Traceback" not in out + err
    assert snapshot(tmp_path) == before


def test_a_huge_grid_is_refused_by_run_py_before_anything_is_written(tmp_path):
    proc = run_cli("experiment=calibration", "grid.x={range:[0,1000000000000]}",
                   f"results_dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2 and "more than max_tasks = 1,000,000,000" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


def test_max_tasks_does_not_limit_a_dry_run(tmp_path):
    proc = run_cli("experiment=calibration", "grid.x={range:[0,1000000000000]}", "dry_run=true",
                   f"results_dir={tmp_path}", cwd=tmp_path)
    assert proc.returncode == 0 and "tasks in grid: 1,000,000,000,000" in proc.stdout


def test_the_suggested_fixes_work():
    lattice = get_experiment("lattice")
    # '~grid.zip' then grid.L1: the zip group is gone and L1 is an axis of its own
    assert Grid(lattice, {"L1": [4]}, {}).total >= 1
    with pytest.raises(ParamError):
        Grid(lattice, {"zip": [{"L1": [4, 8], "L2": [4, 8]}], "L1": [4]}, {})
    # giving the whole group instead
    assert len(Grid(lattice, {"zip": [{"L1": [4], "L2": [4]}]}, {}).axes[0]) == 1
    calibration = get_experiment("calibration")
    assert Grid(calibration, {"x": {"linspace": [0, 10, 3.0]}}, {}).total == 3  # 3.0 is whole


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["résultats-Ωμέγα",
                                  "run (copy) #2 & it's [x] {y} $z a=b,c \\ é"])
def test_a_results_dir_may_hold_any_characters(tmp_path, name):
    """Hydra's grammar refused most punctuation outside quotes (a traceback or its grammar
    error, exit 2)."""
    results = tmp_path / name
    proc = run_cli("experiment=calibration", "grid.x=[1,2,3]", "params.work_us=0",
                   f"results_dir={results}", "cluster.n_workers=1", "progress=false",
                   "cluster.dashboard_address=127.0.0.1:0", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(results / "calibration")
    assert sorted(df.x) == [1, 2, 3]
    assert os.listdir(tmp_path) == [name]


def test_interpolations_in_results_dir_resolve_or_are_refused_by_name(tmp_path, monkeypatch,
                                                                         capsys):
    """Cluster scripts write results_dir=${oc.env:SCRATCH}/...: it resolves, with quoting
    around it; an interpolation that does not resolve is exit 2 naming it, not a traceback."""
    from pipeline.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCRATCH_FOR_TEST", str(tmp_path / "scratch"))
    assert main(["experiment=calibration", "grid.x=[0]", "dry_run=true",
                 "results_dir=${oc.env:SCRATCH_FOR_TEST}/run (2)"]) == 0
    assert f"-> {tmp_path / 'scratch' / 'run (2)' / 'calibration'}\n" in capsys.readouterr().out
    assert main(["experiment=calibration", "grid.x=[0]", "results_dir=/data/${SCRATCHX}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Interpolation key 'SCRATCHX' not found in results_dir: "
                          "${...} in a value is an interpolation"), err
    assert "Traceback" not in err and os.listdir(tmp_path) == []


def test_a_removal_in_a_multirun_needs_its_key_in_one_job_only(tmp_path, monkeypatch, capsys):
    """'~grid.zip' over lattice (which zips L1 with L2) and composition (no zip) was refused
    for the whole multirun once misspelt removals were; a key in no job still is."""
    from pipeline.cli import main

    monkeypatch.chdir(tmp_path)
    common = ["-m", "experiment=lattice,composition", "dry_run=true", f"results_dir={tmp_path}"]
    assert main([*common, "~grid.zip"]) == 0
    assert capsys.readouterr().out.count("tasks in grid:") == 2
    assert main([*common, "~grid.zp"]) == 2
    assert "'~grid.zp': no job of this multirun has grid.zp to remove" in capsys.readouterr().err


def test_a_float_axis_may_take_half_the_memory_available():
    from pipeline.engine.axis_values import float_axis_limit, memory_available

    assert float_axis_limit(52 * 10**9) == 10**9  # 26 GB of values in 52 GB available
    assert float_axis_limit(10**6) == 10**7  # always 260 MB
    import psutil

    assert 0 < memory_available() <= psutil.virtual_memory().total


def test_an_empty_results_dir_is_refused(tmp_path, monkeypatch, capsys):
    from pipeline.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["experiment=calibration", "grid.x=[0]", "results_dir="]) == 2
    assert "error: results_dir must be a directory path" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("a/\\'\"${}[](),=#&~ é:*?"), max_size=12))
def test_a_results_dir_is_passed_through_hydra_exactly(path):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from pipeline.overrides import quote_results_dir

    assume(path)  # an empty one is refused (test_an_empty_results_dir_is_refused)
    assume(not (len(path) > 1 and path[0] == path[-1] and path[0] in "'\""))  # quoted for Hydra
    assume(path != "???")  # OmegaConf's "missing" marker here; Hydra's composition keeps it
    assume("${" not in path)  # an interpolation, resolved (test_interpolations_in_results_dir)
    override = quote_results_dir([f"results_dir={path}"])[0]
    value = OverridesParser.create().parse_overrides([override])[0].value()
    conf = OmegaConf.create({"results_dir": "results", "sweep": "${results_dir}/.multirun"})
    conf.results_dir = value  # as Hydra composes it, interpolations resolved on reading
    expected = os.path.expanduser(path)
    assert (conf.results_dir, conf.sweep) == (expected, f"{expected}/.multirun")


def test_a_results_dir_that_cannot_be_written_exits_2_without_a_traceback(tmp_path, tmpfs,
                                                                         monkeypatch, capsys):
    """A results_dir on a read-only mount (or in another user's folder) escaped as a
    PermissionError/OSError traceback from the sweep lock's mkdir."""
    from pipeline.cli import main

    mount = tmpfs("ro,size=1m", "ro")
    monkeypatch.chdir(tmp_path)
    code = main(["experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
                 f"results_dir={mount / 'results'}", "progress=false"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert (f"error: results_dir={mount / 'results'}: cannot create or lock "
            f"{mount / 'results' / 'calibration'}: Read-only file system") in err
    assert "Traceback" not in out + err
    assert list(mount.iterdir()) == []


def test_report_compact_export_on_a_mount_made_read_only_exit_2(tmp_path, tmpfs, monkeypatch,
                                                               capsys):
    """A swept folder on a mount made read-only since: report=true, compact and export (its
    package on that mount) exited 3 (a
    crash of the machinery), while a sweep and verify --repair there exit 2 (the folder is
    the user's to change, nothing was written)."""
    import subprocess

    from pipeline.cli import main
    from pipeline.compact import main as compact_main

    mount = tmpfs("size=8m")
    monkeypatch.chdir(tmp_path)
    results = mount / "results"
    assert main(["experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
                 f"results_dir={results}", "progress=false", "cluster.n_workers=1",
                 "cluster.dashboard_address=:0"]) == 0
    proc = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {proc.stderr.strip()}")
    capsys.readouterr()
    assert main(["experiment=calibration", "grid.x=[1,2]", "params.work_us=0", "report=true",
                 f"results_dir={results}", "progress=false"]) == 2
    err = capsys.readouterr().err
    assert "could not build the report of calibration: Read-only file system" in err, err
    assert compact_main([str(results / "calibration")]) == 2
    err = capsys.readouterr().err
    assert "Read-only file system" in err and "nothing was changed" in err, err
    from pipeline.export_command import main as export_main

    assert export_main([str(results / "calibration"), "--to", str(mount / "pkg")]) == 2
    err = capsys.readouterr().err
    assert "could not export" in err and "Read-only file system" in err, err


def test_a_results_dir_without_file_locks_exits_2_and_leaves_nothing(tmp_path, monkeypatch,
                                                                     capsys):
    """On NFS without a lock daemon, flock fails with ENOLCK: the error advised freeing disk
    space (exit 3) and left an empty folder and lock file. Now the filesystem is probed before
    anything is made. (flock is made to fail here as it does there: no filesystem on this
    machine refuses locks.)"""
    import errno
    import fcntl
    import os

    from pipeline.cli import main
    from pipeline.store import manifest

    def no_locks(fh, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(manifest.fcntl, "flock", no_locks)
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    code = main(["experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
                 f"results_dir={results}", "progress=false"])
    monkeypatch.setattr(manifest.fcntl, "flock", fcntl.flock)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert (f"error: results_dir={results}: cannot create or lock {results / 'calibration'}: "
            "No locks available (its filesystem has no file locks") in err
    assert "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == []  # refused before anything was made


@pytest.mark.timeout(180)
def test_the_suggested_fixes_for_a_fixed_axis_work(tmp_path):
    """params.x=5 beside the YAML's axis grid.x is refused; each fix the message offers, taken
    from the message itself, then runs x = 5 alone (one for real, stored)."""
    import re

    refused = run_cli("experiment=calibration", "params.x=5", "params.work_us=0",
                      f"results_dir={tmp_path}", cwd=tmp_path)
    assert refused.returncode == 2 and not (tmp_path / "calibration").exists()
    offered = re.search(r"write (grid\.x=\[VALUE\]), or drop the axis with '(~grid\.x)'",
                        refused.stderr)
    assert offered, refused.stderr
    as_axis = [offered.group(1).replace("VALUE", "5")]
    dropped = [offered.group(2), "params.x=5"]
    dry = run_cli("experiment=calibration", *dropped, "dry_run=true", f"results_dir={tmp_path}",
                  cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "tasks in grid: 1" in dry.stdout and "{'x': 5," in dry.stdout
    ran = run_cli("experiment=calibration", *as_axis, "params.work_us=0",
                  f"results_dir={tmp_path}", "cluster.n_workers=1", "progress=false",
                  "cluster.dashboard_address=127.0.0.1:0", cwd=tmp_path, timeout=150)
    assert ran.returncode == 0, ran.stderr
    assert pd.read_parquet(tmp_path / "calibration").x.tolist() == [5]
