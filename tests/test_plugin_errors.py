"""A researcher adding an experiment as the README says: the mistakes of a first plug-in are
refused with a message that names the file and the fix (exit 2, nothing written), not run
under another module's name, blamed on the wrong module, or reported as a Hydra traceback.

The command-line tests work on a copy of the code (pipeline/, conf/, run.py) with the README's
template module and YAML added to it, so the repository's own experiments stay as they are."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.engine.grid import Grid
from pipeline.experiments import BROKEN
from pipeline.experiments import base
from pipeline.experiments.base import (REQUIRED, Experiment, Interval, Param, ParamError,
                                       PointCheck, get_experiment, register, registry)

ROOT = Path(__file__).resolve().parents[1]


def readme_block(language: str) -> str:
    """The README's ``language`` code block of the "Adding an experiment" paragraph."""
    text = (ROOT / "README.md").read_text()
    start = text.index("**Adding an experiment**")
    blocks = re.findall(r"```" + language + r"\n(.*?)```", text[start:start + 4000], re.S)
    assert blocks, f"no ```{language} block in the README's 'Adding an experiment'"
    return blocks[0]


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    """A copy of the code with the README's template plug-in (module and YAML) added."""
    copy = tmp_path_factory.mktemp("plugin") / "code"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "pipeline", copy / "pipeline", ignore=ignore)
    shutil.copytree(ROOT / "conf", copy / "conf", ignore=ignore)
    shutil.copy(ROOT / "run.py", copy / "run.py")
    return copy


def add_module(code: Path, module: str, source: str) -> Path:
    path = code / "pipeline" / "experiments" / f"{module}.py"
    path.write_text(source)
    return path


def template(name: str = "my_experiment") -> str:
    return readme_block("python").replace('"my_experiment"', f'"{name}"')


def cli(code: Path, *args: str, tmp_path: Path, module: bool = False):
    """``run.py ARGS`` (or ``python -m pipeline ARGS``) in the copy, from an empty folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    command = [sys.executable, *(["-m", "pipeline"] if module else [str(code / "run.py")])]
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def snapshot(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")}


def refused(proc, *messages: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    for message in messages:
        assert message in out, out
    return out


# --------------------------------------------------------------------------- the README
def test_the_readme_plugin_runs_as_written(code, tmp_path):
    """The README's module and YAML, as printed there, make an experiment run.py sweeps."""
    module, yaml = readme_block("python"), readme_block("yaml")
    try:
        add_module(code, "my_experiment", module)
        (code / "conf" / "experiment" / "my_experiment.yaml").write_text(yaml)
        proc = cli(code, "experiment=my_experiment", f"results_dir={tmp_path / 'res'}",
                   "dry_run=true", tmp_path=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "tasks in grid: 3" in proc.stdout, proc.stdout
    finally:
        (code / "pipeline" / "experiments" / "my_experiment.py").unlink(missing_ok=True)
        (code / "conf" / "experiment" / "my_experiment.yaml").unlink(missing_ok=True)


# --------------------------------------------------------------------------- 1. a copied module
def test_a_name_registered_by_two_modules_is_refused_naming_both(code, tmp_path):
    """The template copied to aa_copy.py, its name left as it was: the copy (imported first)
    ran as 'my_experiment', exit 0, its rows stored as the real experiment's, while the real
    module was warned about as 'failed to import'. Now no use of the name runs: each names both
    files (exit 2, nothing written), and ``list`` shows the name as conflicting."""
    yaml = "# @package _global_\ngrid:\n  eps: [0.5, 1.0]\n"
    real = add_module(code, "my_experiment", template())
    copy = add_module(code, "aa_copy", template().replace('p["eps"] * p["k"]', "-1.0"))
    (code / "conf" / "experiment" / "my_experiment.yaml").write_text(yaml)
    results = tmp_path / "res"
    (results / "my_experiment").mkdir(parents=True)
    (results / "my_experiment" / "keep.txt").write_text("an earlier file")
    (tmp_path / "cwd").mkdir()
    before = snapshot(tmp_path)
    both = ("pipeline/experiments/aa_copy.py", "pipeline/experiments/my_experiment.py")
    try:
        for extra in ([], ["report=true"], ["dry_run=true"]):
            out = refused(cli(code, "experiment=my_experiment", f"results_dir={results}",
                              "cluster.n_workers=1", *extra, tmp_path=tmp_path),
                          "experiment 'my_experiment' is registered twice", *both)
            assert "failed to import" not in out, out
        refused(cli(code, "describe", "my_experiment", tmp_path=tmp_path, module=True), *both)
        listing = cli(code, "list", tmp_path=tmp_path, module=True)
        assert listing.returncode == 0, listing.stderr
        line = next(ln for ln in listing.stdout.splitlines() if ln.startswith("my_experiment "))
        assert "CONFLICTING" in line and all(f in line for f in both), line
        assert "calibration " in listing.stdout  # the others are listed as before
        assert "failed to import" not in listing.stderr, listing.stderr
        assert snapshot(tmp_path) == before  # results folder untouched
        # another experiment still runs; it imports only the modules that may register its
        # name, so the conflict is not its business (list, describe and the name's own runs
        # report it)
        proc = cli(code, "experiment=calibration", f"results_dir={results}", "dry_run=true",
                   "grid.x=[1,2]", tmp_path=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "registered twice" not in proc.stderr and "tasks in grid: 2" in proc.stdout
    finally:
        real.unlink()
        copy.unlink()
        (code / "conf" / "experiment" / "my_experiment.yaml").unlink()


def test_a_command_imports_only_the_modules_that_may_register_its_experiment(code, tmp_path):
    """A dry run of calibration imports calibration's module, not every family (about half a
    second of CPU per command: scipy, networkx...); a name built at run time, which no module
    holds in quotes, is still found, by importing every module."""
    probe = ("import json, sys\nfrom pipeline.validation import experiment_problem\n"
             "print(experiment_problem(sys.argv[1]))\n"
             "print(json.dumps([m.rsplit('.', 1)[1] for m in sys.modules\n"
             "                  if m.startswith('pipeline.experiments.') and '._' not in m]))\n")
    dynamic = add_module(code, "zz_dynamic", template().replace(
        'name="my_experiment"', 'name="_".join(["built", "late"])'))
    (code / "conf" / "experiment" / "built_late.yaml").write_text(
        "# @package _global_\ngrid:\n  eps: [0.5]\n")
    try:
        def imported(name):
            proc = subprocess.run([sys.executable, "-c", probe, name], cwd=code, text=True,
                                  capture_output=True, timeout=60,
                                  env={**os.environ, "PYTHONPATH": str(code)})
            assert proc.returncode == 0, proc.stderr
            problem, modules = proc.stdout.splitlines()
            return problem, set(json.loads(modules))

        problem, modules = imported("calibration")
        assert problem == "None" and modules == {"base", "calibration"}, modules
        problem, modules = imported("built_late")
        assert problem == "None" and {"bayes", "lattice", "zz_dynamic"} <= modules, modules
        proc = cli(code, "experiment=built_late", f"results_dir={tmp_path / 'res'}",
                   "dry_run=true", tmp_path=tmp_path)
        assert proc.returncode == 0 and "tasks in grid: 1" in proc.stdout, proc.stderr
    finally:
        dynamic.unlink()
        (code / "conf" / "experiment" / "built_late.yaml").unlink()


def toy(name: str, **kwargs) -> Experiment:
    return Experiment(name=name, version=1, params=[Param("x", float, 1.0, Interval(0, 10))],
                      columns={"y": pa.float64()}, run=lambda p, seed: {"y": p["x"]}, **kwargs)


def _forget(name: str) -> None:
    base._REGISTRY.pop(name, None)
    getattr(base, "_ORIGINS", {}).pop(name, None)
    getattr(base, "CONFLICTS", {}).pop(name, None)


def test_register_twice_from_two_places_makes_the_name_unusable():
    from pipeline.experiments.base import ExperimentConflict

    registry()  # the shipped experiments first
    first, second = toy("t_plugin_twice"), toy("t_plugin_twice")
    try:
        for exp in (first, second):  # the same call, a new object (a module reloaded)
            register(exp)
        assert get_experiment("t_plugin_twice") is second
        register(second)  # the same object again, from elsewhere: no conflict
        assert get_experiment("t_plugin_twice") is second
        register(toy("t_plugin_twice"))  # another place: a conflict
        assert "t_plugin_twice" not in registry()
        with pytest.raises(ExperimentConflict) as info:
            get_experiment("t_plugin_twice")
        assert isinstance(info.value, KeyError)  # callers that treat a KeyError as unknown
        message = str(info.value)
        assert message.count("tests/test_plugin_errors.py (line ") == 2, message
        assert "registered twice" in message and "give the copy its own name" in message.lower()
    finally:
        _forget("t_plugin_twice")


# --------------------------------------------------------------------------- 2. no YAML
def test_a_module_without_its_yaml_is_named_with_the_yaml_to_add(code, tmp_path):
    """It said "unknown experiment 'noyaml'" while ``list`` and ``describe`` showed it. Now it
    says what is missing and prints the minimal YAML, which then works as printed."""
    module = add_module(code, "noyaml", template("noyaml"))
    yaml = code / "conf" / "experiment" / "noyaml.yaml"
    try:
        out = refused(cli(code, "experiment=noyaml", "grid.x=[1,2]",
                          f"results_dir={tmp_path / 'res'}", tmp_path=tmp_path),
                      "experiment 'noyaml' is registered (by pipeline/experiments/noyaml.py",
                      "but has no config file conf/experiment/noyaml.yaml",
                      "    # @package _global_\n")
        assert "unknown experiment" not in out, out
        printed = out.split("at least:\n", 1)[1].split("\n(", 1)[0]
        yaml.write_text("\n".join(ln[4:] for ln in printed.splitlines()) + "\n")
        proc = cli(code, "experiment=noyaml", f"results_dir={tmp_path / 'res'}",
                   "dry_run=true", tmp_path=tmp_path)
        assert proc.returncode == 0, yaml.read_text() + proc.stdout + proc.stderr
        assert not (tmp_path / "res").exists()
    finally:
        module.unlink()
        yaml.unlink(missing_ok=True)


def test_an_experiment_whose_module_fails_to_import_says_so_first(code, tmp_path):
    """A module with a failing import gave "unknown experiment 'zz_broken_import'; available
    experiments: ...", with the import error only on a trailing line and no line number."""
    source = template("zz_broken_import").replace(
        "import pyarrow as pa\n", "import pyarrow as pa\nimport nosuchpkg_zz\n", 1)
    assert "import nosuchpkg_zz" in source
    module = add_module(code, "zz_broken_import", source)
    line = source.splitlines().index("import nosuchpkg_zz") + 1
    yaml = code / "conf" / "experiment" / "zz_broken_import.yaml"
    yaml.write_text("# @package _global_\ngrid:\n  x: [1]\n")
    try:
        out = refused(cli(code, "experiment=zz_broken_import", "dry_run=true",
                          f"results_dir={tmp_path / 'res'}", tmp_path=tmp_path))
        assert ("error: experiment 'zz_broken_import' cannot be loaded: its module "
                "pipeline/experiments/zz_broken_import.py failed to import: "
                "ModuleNotFoundError: No module named 'nosuchpkg_zz' "
                f"[zz_broken_import.py:{line}]") in out, out
        assert "unknown experiment" not in out, out
    finally:
        module.unlink()
        yaml.unlink()


def test_a_broken_module_is_not_shown_on_another_experiments_commands(code, tmp_path):
    """A broken module of one family was warned about, as Python's two-line UserWarning, on
    every status and verify of another's folder; ``list`` said it twice. Now the commands of a
    folder import only its experiment's modules, and ``list``/``describe`` name it once."""
    module = add_module(code, "zz_broken_other", "import nosuchpkg_other\n")
    try:
        res = tmp_path / "res"
        proc = cli(code, "experiment=calibration", "grid.x=[1,2]", "params.work_us=0",
                   "progress=false", "cluster.dashboard_address=:0", f"results_dir={res}",
                   tmp_path=tmp_path)
        assert proc.returncode == 0, proc.stderr
        for command in (["status", str(res / "calibration")], ["status", str(res)],
                        ["verify", str(res / "calibration")], ["describe", "calibration"]):
            proc = cli(code, *command, tmp_path=tmp_path, module=True)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "zz_broken_other" not in proc.stdout + proc.stderr, (command, proc.stderr)
        listing = cli(code, "list", tmp_path=tmp_path, module=True)
        assert listing.returncode == 0 and "calibration" in listing.stdout
        assert listing.stderr.count("failed to import") == 1, listing.stderr
        assert "UserWarning" not in listing.stderr, listing.stderr
        proc = cli(code, "describe", "calibrashun", tmp_path=tmp_path, module=True)
        out = refused(proc, "unknown experiment 'calibrashun'; did you mean 'calibration'?",
                      "module 'zz_broken_other' failed to import: ModuleNotFoundError")
        assert "UserWarning" not in out, out
        out = refused(cli(code, "experiment=calibrashun", f"results_dir={res}",
                          tmp_path=tmp_path),
                      "error: unknown experiment 'calibrashun'; did you mean 'calibration'?",
                      "module 'zz_broken_other' failed to import: ModuleNotFoundError")
        assert out.count("failed to import") == 1 and "UserWarning" not in out, out
    finally:
        module.unlink()


def test_a_yaml_whose_module_registers_another_name_names_that_module(code, tmp_path):
    """The YAML my_exp.yaml beside a module that registers 'my_exp_v2' (and has no YAML):
    "no module registers 'my_exp'" left the user to find which module meant it."""
    module = add_module(code, "zz_renamed", template("zz_renamed_v2"))
    yaml = code / "conf" / "experiment" / "zz_renamed.yaml"
    yaml.write_text("# @package _global_\ngrid:\n  x: [1]\n")
    line = next(i for i, text in enumerate(template().splitlines(), 1) if "register(" in text)
    try:
        refused(cli(code, "experiment=zz_renamed", f"results_dir={tmp_path / 'res'}",
                    tmp_path=tmp_path),
                "conf/experiment/zz_renamed.yaml exists, but no module in pipeline/experiments/ "
                "registers an experiment named 'zz_renamed'",
                f"; pipeline/experiments/zz_renamed.py, line {line} registers 'zz_renamed_v2', "
                "which has no YAML: rename one to match the other")
        assert not (tmp_path / "res").exists()
    finally:
        module.unlink()
        yaml.unlink()


def test_a_yaml_without_the_package_header_is_named(code, tmp_path):
    """Without '# @package _global_' Hydra nests the file under 'experiment:', and the error
    was only "unknown top-level key(s) ['experiment']"."""
    module = add_module(code, "nohdr", template("nohdr"))
    yaml = code / "conf" / "experiment" / "nohdr.yaml"
    yaml.write_text("# What it computes.\n# @package _global_\ngrid:\n  eps: [0.5]\n")
    try:
        refused(cli(code, "experiment=nohdr", f"results_dir={tmp_path / 'res'}", "dry_run=true",
                    tmp_path=tmp_path),
                "unknown top-level key(s) ['experiment']",
                "conf/experiment/nohdr.yaml does not start with the line '# @package _global_'",
                "make '# @package _global_' its first line")
        assert not (tmp_path / "res").exists()
    finally:
        module.unlink()
        yaml.unlink()


# --------------------------------------------------------------------------- 3. bad defaults
@pytest.mark.parametrize("param,shown", [
    (Param("eps", float, 0.0, Interval(0, None, lo_closed=False), "per-step epsilon"),
     ["parameter 'eps'", "default 0.0", "a value in (0, inf)"]),
    (Param("k", int, 2.5, Interval(1, 10)), ["parameter 'k'", "default 2.5", "as int"]),
    (Param("w", "float_list", [0.5, -1.0], Interval(0, 1)), ["parameter 'w'", "-1.0", "[0, 1]"]),
])
def test_a_default_outside_its_own_domain_is_refused_when_declared(param, shown):
    """It was refused only when a sweep ran ("parameter 'eps': value 0.0 not allowed"), though
    the user never passed eps."""
    with pytest.raises(ValueError) as info:
        Experiment(name="t_bad_default", version=1, params=[param],
                   columns={"y": pa.float64()}, run=lambda p, seed: {"y": 1.0})
    message = str(info.value)
    assert "experiment 't_bad_default'" in message and "fix the default or the domain" in message
    for text in shown:
        assert text in message, message


@pytest.mark.parametrize("params,columns,shown", [
    ([Param("n", int, 3)], {"v": float},
     "column 'v': type <class 'float'> is not a pyarrow DataType; use e.g. pa.float64()"),
    ([Param("n", int, 3)], {"v": pa.float64},
     "column 'v': type <cyfunction float64 at"),  # the slip of the missing ()
    ([Param("n", "integer", 3)], {},
     "parameter 'n': type 'integer' is not one the engine stores; use int, float, str, bool, "
     "'int_list' or 'float_list'"),
    ([Param("m", "flaot", None)], {}, "parameter 'm': type 'flaot' is not one the engine"),
    ([Param("n", int, 3, (0, 100))], {},
     "parameter 'n': domain (0, 100) is not a Domain; use Interval(lo, hi), Choice(a, b, ...)"),
    ([Param("n", int, REQUIRED, Interval(100, 0))], {},
     "parameter 'n': a value in [100, 0] is empty (its low end is above its high end)"),
])
def test_a_declaration_the_engine_cannot_read_is_refused_when_declared(params, columns, shown):
    """A column typed ``float`` or ``pa.float64`` (not called) passed registration and crashed
    the sweep with its cluster up (exit 3, "DataType expected", no column named); a parameter
    typed "integer" was reported as its default being outside its domain; a tuple domain raised
    AttributeError at the first point; Interval(100, 0) refused every value without a word."""
    with pytest.raises(ValueError) as info:
        Experiment(name="t_bad_decl", version=1, params=params, columns=columns,
                   run=lambda p, seed: {})
    assert str(info.value).startswith("experiment 't_bad_decl', ")
    assert shown in str(info.value), str(info.value)
    if columns.get("v") is pa.float64:
        assert "(call it: pa.float64())" in str(info.value)


def test_legitimate_defaults_are_accepted_and_every_shipped_experiment_imports():
    Experiment(name="t_ok_default", version=1,
               params=[Param("t", float, None, Interval(0, 1)),  # optional, left unset
                       Param("n", int, REQUIRED, Interval(1, 5)),
                       Param("z", float, math.inf, Interval(0, math.inf))],
               columns={"y": pa.float64()}, run=lambda p, seed: {"y": 1.0})
    experiments = registry()
    conflicts = getattr(base, "CONFLICTS", {})
    assert "calibration" in experiments and not BROKEN and not conflicts, (BROKEN, conflicts)


# --------------------------------------------------------------------------- 4. a check that raises
def test_a_check_that_raises_is_named_with_the_point_and_the_exception():
    def limit(values):  # a bug: divides by zero at x = 2
        return None if 1 / (values["x"] - 2.0) else None

    exp = toy("t_raising_check", checks=[PointCheck(("x",), limit)])
    with pytest.raises(ParamError) as info:
        Grid(exp, {"x": [1.0, 2.0]}, {})
    message = str(info.value)
    for text in ("experiment 't_raising_check'", "parameter 'x'", "x=2.0",
                 "ZeroDivisionError: float division by zero", "PointCheck function",
                 "tests/test_plugin_errors.py, line "):
        assert text in message, message
    with pytest.raises(ParamError, match="ZeroDivisionError"):
        exp.resolve(x=2.0)
    assert exp.resolve(x=1.0) == {"x": 1.0}


def test_a_check_that_raises_exits_2_through_run_py(code, tmp_path):
    """It was a Hydra traceback (exit 2 from Hydra's own handler)."""
    source = template("badcheck").replace(
        '"eps * k must be <= 1e4" if v["eps"] * v["k"] > 1e4 else None',
        '1 / (v["eps"] - 0.5)')
    assert "1 / (v" in source
    module = add_module(code, "badcheck", source)
    yaml = code / "conf" / "experiment" / "badcheck.yaml"
    yaml.write_text("# @package _global_\ngrid:\n  eps: [0.5, 1.0]\n")
    results = tmp_path / "res"
    try:
        refused(cli(code, "experiment=badcheck", f"results_dir={results}", "cluster.n_workers=1",
                    tmp_path=tmp_path),
                "experiment 'badcheck', parameters (eps, k): the limit check itself failed at "
                "eps=0.5, k=10: ZeroDivisionError: float division by zero",
                "pipeline/experiments/badcheck.py, line ")
        assert not results.exists()
    finally:
        module.unlink()
        yaml.unlink()
