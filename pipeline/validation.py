"""Checks of a composed config before anything runs: every one raises :class:`ConfigError`
(exit 2) with the parameter and its allowed values, before a task runs or a file is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = Path(os.environ.get("PIPELINE_CONF_DIR", REPO_ROOT / "conf"))
DEFAULT_MAX_TASKS = 10**9  # a real run above this is refused (max_tasks=N raises it)


class ConfigError(ValueError):
    """Bad input: reported with exit code 2, before anything runs or is written."""


def top_level_keys() -> set[str]:
    """The keys a composed config may hold at its top level (``experiment`` is Hydra's)."""
    return {"results_dir", "dry_run", "retry_failed", "batch_size", "progress", "report",
            "report_style", "report_sig_digits", "grid", "params", "cluster",
            "rerun_changed", "report_scope", "run_id", "code_id", "version", "max_tasks",
            "task_timeout", "watchdog", *ENGINE_KEYS}


def refuse_fixed_axes(grid_conf: dict, params_typed: set[str]) -> None:
    """A parameter fixed on the command line (``params.x=5``) that is also an axis of the grid:
    the axis won, and the fixed value was ignored silently."""
    groups = grid_conf.get("zip")  # a list of groups, or one; a malformed one is the Grid's
    groups = [groups] if isinstance(groups, dict) else groups if isinstance(groups, list) else []
    zipped = {k: group for group in groups if isinstance(group, dict) for k in group}
    axes = {k for k in grid_conf if k != "zip"} | set(zipped)
    for key in sorted(params_typed & axes):
        if key in zipped:  # no axis of its own: grid.KEY and ~grid.KEY are refused
            from pipeline.engine.grid import zip_rewrite

            others = [k for k in zipped[key] if k != key]
            rest = [k for k in zipped if k != key]  # every group's: ~grid.zip drops them all
            groups = [g for g in groups if isinstance(g, dict)]
            raise ConfigError(
                f"params.{key} is set, but {key} is also a grid axis, zipped with "
                f"{', '.join(others) or 'nothing else'} in grid.zip (from the command line or "
                f"the experiment's config), which would win: to fix {key}, write grid.zip "
                f"again with your value, {zip_rewrite(groups, key, value_slot=True)}, or drop "
                f"it with '~grid.zip' and set {', '.join(rest) or 'the rest'} with params. "
                "or grid.")
        raise ConfigError(f"params.{key} is set, but {key} is also a grid axis (grid.{key}, from "
                          f"the command line or the experiment's config), which would win: to "
                          f"fix {key}, write grid.{key}=[VALUE], or drop the axis with "
                          f"'~grid.{key}'")


def validate(name: str, conf: dict, params_typed: set[str] = frozenset(),
             command_line: set[str] = frozenset()) -> tuple[Any, dict]:
    """Every check that can fail before work starts; raises ConfigError with a clear message.
    ``params_typed``: the parameters fixed on the command line (none may be a grid axis);
    ``command_line``: every ``grid.X``/``params.X`` given there (a bad one found elsewhere is
    told to be in the experiment's YAML)."""
    from pipeline.engine.batch_cluster import check_batch_commands
    from pipeline.engine.cluster import check_scheduler
    from pipeline.engine.cluster_config import ClusterConfigError
    from pipeline.engine.cluster_config import validate as validate_cluster
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import ParamError, get_experiment

    problem = experiment_problem(name)
    if problem:
        raise ConfigError(problem)
    try:
        experiment = get_experiment(name)
    except KeyError:  # not reached: experiment_problem said why
        raise ConfigError(f"unknown experiment '{name}'") from None
    allowed_top = top_level_keys()
    unknown = set(conf) - allowed_top
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; allowed: "
                          + ", ".join(sorted(allowed_top))
                          + (package_header_hint(name) if "experiment" in unknown else ""))
    for key in ("dry_run", "retry_failed", "progress", "report", "rerun_changed"):
        if not isinstance(conf.get(key, False), bool):
            raise ConfigError(f"{key} must be true or false, got {conf.get(key)!r}")
    if conf.get("dry_run") and conf.get("report"):  # the report was written, silently
        raise ConfigError("dry_run=true and report=true: a dry run runs and writes nothing, "
                          "report=true writes the report; give one of the two")
    batch_size = conf.get("batch_size", "auto")
    if batch_size != "auto" and not (isinstance(batch_size, int) and not isinstance(batch_size, bool)
                                     and batch_size >= 1):
        raise ConfigError(f"batch_size must be 'auto' or an integer >= 1, got {batch_size!r}")
    from pipeline.report.options import ReportOptionError, check_report_options

    try:
        check_report_options(conf.get("report_style", "paper"), conf.get("report_sig_digits", 6))
    except ReportOptionError as exc:
        raise ConfigError(str(exc)) from None
    if not conf.get("results_dir"):
        raise ConfigError("results_dir must be a directory path")
    from pipeline.report.selection import SelectionError, check_selection_keys

    try:
        check_selection_keys(conf)
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None
    check_results_dir(Path(str(conf["results_dir"])), name)
    if conf.get("report"):  # (a multirun's jobs are all checked before the first runs)
        from pipeline.store.parquet import experiment_dir, part_files

        from pipeline.store.part_index import missing_parts

        folder = experiment_dir(str(conf["results_dir"]), name)
        # parts recorded but gone (deleted by hand): the report says so (exit 4, verify)
        if not part_files(folder) and not missing_parts(folder):
            from pipeline.store.manifest import nothing_stored_yet

            raise ConfigError(f"report=true: no results for experiment '{name}' under "
                              f"{folder}; " + (nothing_stored_yet(folder) or
                                               "run the sweep first: the same command without "
                                               "report=true"))
        _refuse_absent_selection(folder, name, conf)
    max_tasks = conf.get("max_tasks", DEFAULT_MAX_TASKS)
    if not isinstance(max_tasks, int) or isinstance(max_tasks, bool) or max_tasks < 1:
        raise ConfigError(f"max_tasks must be an integer >= 1, got {max_tasks!r}")
    from pipeline.engine.watchdog import validate_options as validate_watchdog

    try:
        validate_watchdog(conf)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_engine_keys(conf)
    notes: list[str] = []  # told before the sweep starts, once (not per multirun job check)
    try:
        cluster = conf.get("cluster") or {}
        validate_cluster(cluster)
        if not conf.get("dry_run") and not conf.get("report"):
            check_batch_commands(cluster)  # sbatch & co. on PATH
        if cluster.get("kind") == "slurm" and not conf.get("report"):
            from pipeline.engine.slurm_limits import check_partition_limits

            # a job no partition could start, a partition typo (refused); one that is down
            notes = check_partition_limits(cluster)
    except ClusterConfigError as exc:
        raise ConfigError(str(exc)) from None
    for node in ("grid", "params"):
        if conf.get(node) is not None and not isinstance(conf[node], dict):
            raise ConfigError(f"{node} must be a mapping of parameter names to values")
    grid_conf = conf.get("grid") or {}
    # before the points are checked: a conflict reported as the grid's value being wrong misled
    refuse_fixed_axes(grid_conf, params_typed)
    try:
        grid = Grid(experiment, grid_conf, conf.get("params") or {})
    except ParamError as exc:
        raise ConfigError(str(exc) + _yaml_origin(name, exc.param, command_line)) from None
    if grid.total > max_tasks and not conf.get("dry_run") and not conf.get("report"):
        raise ConfigError(f"the grid has {grid.total:,} tasks, more than max_tasks = "
                          f"{max_tasks:,}; shrink the grid, or raise the limit with "
                          f"max_tasks={grid.total} (dry_run=true shows the grid at any size)")
    if grid.total >= 2**63 and not conf.get("dry_run") and not conf.get("report"):
        # with max_tasks raised, such a sweep took the lock, wrote its manifest and started
        # the cluster, then crashed (exit 3) on its first int64 grid index
        raise ConfigError(f"the grid has {grid.total:,} tasks; a sweep numbers its points with "
                          f"64-bit integers, so it runs at most {2**63 - 1:,} (shrink the grid; "
                          "dry_run=true shows it at any size)")
    if not conf.get("dry_run") and not conf.get("report"):
        try:  # last, as it may wait cluster.timeout: the peer of cluster.address answers as a
            check_scheduler(conf.get("cluster") or {})  # Dask scheduler (TLS included)
        except ClusterConfigError as exc:
            raise ConfigError(str(exc)) from None
    options = {k: conf.get(k) for k in allowed_top - {"grid", "params"}}
    options.update({k: conf.get(k, default) for k, (_, default, _) in ENGINE_KEYS.items()})
    options["results_dir"] = str(options["results_dir"])
    options["notes"] = notes
    return grid, options


def _refuse_absent_selection(folder: Path, name: str, conf: dict) -> None:
    """report=true with a run_id, code_id or version the folder does not have: refused here,
    before a multirun's first report is written (the report itself refuses it too, from the
    rows it reads). Only those three columns of each part are read; a part that cannot be
    read is left to the report to name."""
    from pipeline.report.selection import (SelectionError, as_tuple, refuse_absent_versions,
                                           refuse_unknown_ids, versions_of)
    from pipeline.store.integrity import read_parts, read_schemas
    from pipeline.store.parquet import part_files, unified_schema

    run_ids, code_ids = as_tuple(conf.get("run_id")), as_tuple(conf.get("code_id"))
    try:
        versions = versions_of(conf.get("version"))
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None
    if not (run_ids or code_ids or [v for v in versions if v != "latest"]):
        return
    try:  # as the store reads its parts (one schema for all), these three columns only
        files = part_files(folder)
        schema = unified_schema(read_schemas(files)[0])
        stored = read_parts(files, schema=schema, columns=[
            c for c in ("run_id", "code_id", "experiment_version") if c in schema.names])
    except Exception:  # a damaged part: the report names it
        return
    try:
        for key, wanted in (("run_id", run_ids), ("code_id", code_ids)):
            if wanted:
                refuse_unknown_ids(folder, key, wanted, stored)
        if "experiment_version" in stored.column_names:
            refuse_absent_versions(stored, versions, name)
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None


def _yaml_origin(name: str, param: str, command_line: set[str]) -> str:
    """Where a parameter the grid refused was set, when not on the command line: the
    experiment's YAML (the error named a parameter the user never typed)."""
    import yaml as pyyaml

    if any(key.split(".", 1)[1] in (param, "zip") for key in command_line):
        return ""
    path = CONF_DIR / "experiment" / f"{name}.yaml"
    try:
        text = pyyaml.safe_load(path.read_text()) or {}
    except Exception:  # unreadable: Hydra has said so already
        return ""
    if not isinstance(text, dict):
        return ""
    keys: set[str] = set()
    for node in ("grid", "params"):
        section = text.get(node)
        if isinstance(section, dict):
            keys |= set(section)
            groups = section.get("zip") if node == "grid" else None
            for group in groups if isinstance(groups, list) else [groups]:
                if isinstance(group, dict):
                    keys |= set(group)
    if param not in keys:
        return ""
    return f" (set in {_shown(path)}, not on the command line)"


def _shown(path: Path) -> str:
    """``path`` relative to the repository (``conf/experiment/x.yaml``) when inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def experiment_problem(name: str) -> str | None:
    """Why ``experiment=NAME`` cannot run (``None`` if it can): two modules register the name,
    the module has no ``conf/experiment/NAME.yaml``, or no module registers it."""
    import difflib
    import warnings

    from pipeline.experiments import BROKEN
    from pipeline.experiments._registry import find
    from pipeline.experiments.base import CONFLICTS, conflict_message, registered_at, registry

    with warnings.catch_warnings():  # the modules that failed are named below, plainly
        warnings.simplefilter("ignore")
        found = find(name)  # every module imported only when it is not found
        registered = {name: found} if found is not None else registry()
    if name in CONFLICTS:
        return conflict_message(name)
    yaml = CONF_DIR / "experiment" / f"{name}.yaml"
    if name in registered:
        return None if yaml.is_file() else missing_config_message(registered[name], yaml)
    known = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
    if yaml.is_file() and name in BROKEN:  # its own module failed: that first, not "unknown"
        return (f"experiment '{name}' cannot be loaded: its module pipeline/experiments/"
                f"{name}.py failed to import: {BROKEN[name]}"
                + "".join(f"\n  module {m!r} failed to import too: {e}"
                          for m, e in BROKEN.items() if m != name))
    usable = [n for n in known if n in registered]
    close = difflib.get_close_matches(name, usable, n=1)
    message = (f"unknown experiment '{name}'; "
               + (f"did you mean '{close[0]}'? " if close else "")
               + "available experiments: " + ", ".join(usable))
    if yaml.is_file() and name not in BROKEN:
        unconfigured = [n for n in registered if n not in known]  # registered, no YAML
        near = difflib.get_close_matches(name, unconfigured, n=1)
        message += (f"\n  {_shown(yaml)} exists, but no module in pipeline/experiments/ "
                    f"registers an experiment named '{name}' (register(Experiment(name="
                    f"'{name}', ...)))"
                    + (f"; {registered_at(near[0]) or 'a module'} registers "
                       f"'{near[0]}', which has no YAML: rename one to match the other"
                       if near else ""))
    return message + "".join(f"\n  module {m!r} failed to import: {e}" for m, e in BROKEN.items())


def missing_config_message(experiment, yaml: Path) -> str:
    """A registered experiment without its ``conf/experiment/NAME.yaml``: the minimal file."""
    import yaml as pyyaml

    from pipeline.experiments.base import REQUIRED, registered_at

    where = registered_at(experiment.name)
    lines = ["# @package _global_"]
    doc = " ".join((experiment.doc or "").strip().split("\n\n")[0].split())
    if doc:
        lines.append(f"# {doc}")
    axis = next((p for p in experiment.params
                 if p.default is not REQUIRED and p.default is not None), None)
    if axis is not None:
        values = pyyaml.safe_dump([axis.default], default_flow_style=True).strip()
        lines += ["grid:", f"  {axis.name}: {values}   # the default sweep: PARAM: [values] per axis"]
    else:
        lines.append("grid: {}")
    required = [p for p in experiment.params if p.default is REQUIRED]
    if required:
        lines.append("params:")
        lines += [f"  {p.name}: ???   # required"
                  + (f": {p.domain.describe()}" if p.domain is not None else "")
                  for p in required]
    body = "\n".join(f"    {line}" for line in lines)
    return (f"experiment '{experiment.name}' is registered"
            + (f" (by {where})" if where else "")
            + f" but has no config file {_shown(yaml)}, which run.py composes its sweep from; "
            f"create it, at least:\n{body}\n"
            "(its first line must be '# @package _global_', as in every file of "
            "conf/experiment/)")


def package_header_hint(name: str) -> str:
    """The hint for an ``experiment`` key at the top level: the experiment's YAML lacks the
    ``# @package _global_`` header, so Hydra nested its keys under ``experiment:``."""
    yaml = CONF_DIR / "experiment" / f"{name}.yaml"
    try:
        text = yaml.read_text()
    except OSError:
        return ""
    try:
        from hydra.plugins.config_source import ConfigSource

        package = ConfigSource._get_header_dict(text).get("package")
    except Exception:  # a malformed header (Hydra reports it itself)
        return ""
    if package == "_global_":
        return ""
    found = (f"has the header '# @package {package}'" if package
             else "does not start with the line '# @package _global_'")
    return (f"\n  {_shown(yaml)} {found}, so Hydra put its keys (grid, params, ...) under "
            "'experiment:'; make '# @package _global_' its first line, before any other "
            "comment, as in every file of conf/experiment/")


def check_results_dir(results_dir: Path, name: str) -> None:
    """``results_dir`` (and ``results_dir/NAME``) must be a directory or creatable as one, and
    not an experiment's results folder or inside one."""
    for path in (results_dir / name, results_dir, *results_dir.parents):
        if path.is_symlink() and not path.exists():  # mkdir said "File exists"
            raise ConfigError(f"results_dir={results_dir}: {path} is a symbolic link to "
                              f"{os.readlink(path)}, which does not exist or loops")
        if path.exists():
            if not path.is_dir():
                raise ConfigError(f"results_dir={results_dir}: {path} is a file, not a directory "
                                  f"(results go to results_dir/{name}/, created if missing)")
            break
    _refuse_inside_a_results_folder(results_dir, name)


def _refuse_inside_a_results_folder(results_dir: Path, name: str) -> None:
    """results_dir=RESULTS/NAME (the experiment folder itself, a slip of the tab key) wrote
    RESULTS/NAME/NAME/, whose rows pandas.read_parquet(RESULTS/NAME) then read beside its own
    (duplicate keys); any folder inside an experiment folder did the same."""
    from pipeline.store.integrity import is_results_folder

    real = results_dir.resolve()  # (a symbolic link into an experiment folder too)
    for path in (real, *real.parents):
        # the ancestors by their files only (no listing of a shared filesystem's root), and a
        # _manifest.json only if it is a sweep's: any project may have a file of that name
        if is_results_folder(path) if path == real else _holds_sweep_records(path):
            where = "is" if path == real else "is inside"
            raise ConfigError(
                f"results_dir={results_dir} {where} the results folder {path} (of experiment "
                f"'{path.name}', written by a sweep): results go to results_dir/{name}/, and "
                f"pandas.read_parquet({str(path)!r}) would read those rows as its own; give "
                f"results_dir={path.parent}")


def _holds_sweep_records(folder: Path) -> bool:
    """Whether ``folder`` holds a sweep's part index or compaction record, or a run manifest
    of the store's (a list of runs with run ids)."""
    from pipeline.store.compaction import INTENT
    from pipeline.store.errors import parse_manifest
    from pipeline.store.integrity import MANIFEST, PART_INDEX

    try:
        if (folder / PART_INDEX).is_file() or (folder / INTENT).is_file():
            return True
        if not (folder / MANIFEST).is_file():
            return False
        runs = parse_manifest(folder / MANIFEST).get("runs")
    except Exception:  # unreadable, not JSON, not a manifest: not judged a results folder
        return False
    return bool(runs) and all(isinstance(r, dict) and r.get("run_id") for r in runs)


# Engine tuning keys (top level): name -> (type, default, what it means). Defaults are
# measured (BENCHMARKS.md, engine at cluster scale).
def sweep_choices_ignored(conf: dict) -> list[str]:
    """The sweep options of ``conf`` that choose which rows a sweep makes (retry_failed=true,
    rerun_changed=true), for a note with report=true, which runs nothing: the report was made
    from the old rows with no word. (A sweep's engine options, batch_size, flush_rows...,
    are left alone: report=true is typed after the sweep's own command.)"""
    return [f"{key}=true" for key in ("retry_failed", "rerun_changed") if conf.get(key) is True]


ENGINE_KEYS = {
    "max_tasks_per_second": (float, 50.0, "cap on Dask tasks per second for the whole cluster"),
    "max_batch_seconds": (float, 60.0, "bound on each batch's predicted duration, seconds"),
    "flush_rows": (int, 1_000_000, "buffered result rows that trigger a part file"),
    "flush_mib": (float, 64.0, "buffered MiB (in memory) that trigger a part file"),
    "flush_seconds": (float, 60.0, "age of the oldest buffered result that triggers a part file"),
}


# Upper bounds where a larger value would overflow (flush_mib is turned into bytes: 1e308 MiB
# crashed the sweep after its manifest was written).
ENGINE_MAXIMA = {"flush_mib": 2**20}


def check_engine_keys(conf: dict) -> None:
    """Each engine key is a positive number (an integer for flush_rows), within its maximum."""
    for key, (typ, default, meaning) in ENGINE_KEYS.items():
        value = conf.get(key, default)
        top = ENGINE_MAXIMA.get(key, float("inf"))
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and 0 < value < float("inf") and value <= top
              and (typ is float or isinstance(value, int)))
        if not ok:
            kind = "an integer >= 1" if typ is int else "a number > 0"
            if top < float("inf"):
                kind += f" and at most {top:,}"
            raise ConfigError(f"{key} ({meaning}) must be {kind}, got {value!r}")
