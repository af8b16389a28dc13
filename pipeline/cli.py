"""The command line: Hydra composes the config, this module validates it and runs the sweep.

Exit codes: 0 every task ok; 1 some task failed (rows are stored with their errors);
2 invalid configuration, rejected before any task ran and before anything was written
(also: another sweep holds the results folder; the peer of ``cluster.address`` does not answer
as a Dask scheduler, or its TLS handshake fails); 3 the sweep itself crashed (scheduler
unreachable, a worker running other code, ...): what finished is stored, the manifest says
"crashed" with the error; 4 a part file in the results folder is damaged or foreign (the message names
it; ``python -m pipeline verify RESULTS_DIR/NAME --repair`` moves it aside, and a rerun
recomputes its tasks); 130 interrupted, 143 SIGTERM, 129 SIGHUP (what finished is stored, the
manifest says "interrupted"; rerun to resume).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import platform
import re
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = Path(os.environ.get("PIPELINE_CONF_DIR", REPO_ROOT / "conf"))
EXIT_OK, EXIT_FAILED_TASKS, EXIT_BAD_CONFIG, EXIT_CRASHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_MAX_TASKS = 10**9  # a real run above this is refused (max_tasks=N raises it)
EXIT_BAD_STORE = 4  # a damaged part file in the results folder: python -m pipeline verify --repair
PACKAGES = ("pipeline", "numpy", "scipy", "pandas", "pyarrow", "dask", "distributed",
            "hydra-core", "omegaconf", "networkx", "dask-jobqueue")

log = logging.getLogger("pipeline")
_ORIGINAL_ARGV: list[str] = []


class ConfigError(ValueError):
    """Bad input: reported with exit code 2, before anything runs or is written."""


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record, not the one at set-up:
    ``main`` may run many times in one process (tests, notebooks), each with its own stderr."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _setup_logging() -> None:
    if not any(isinstance(h, _CurrentStderr) for h in log.handlers):
        from pipeline.store.redact import RedactingFormatter

        handler = _CurrentStderr()
        handler.setFormatter(RedactingFormatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


# --------------------------------------------------------------------------- argv handling
_NODE_OVERRIDE = re.compile(r"^(~|\+\+|\+)?(grid|params)\.([A-Za-z_]\w*)(=(.*))?$", re.S)


def split_node_overrides(args: list[str]) -> tuple[list[str], list[tuple[str, str, Any]]]:
    """Take ``grid.X=...`` / ``params.X=...`` (and ``~grid.X``) out of Hydra's hands.

    They are parsed with Hydra's own value grammar but applied after composition with
    *replace* semantics: Hydra would merge a mapping into a mapping and refuse a list over a
    mapping, and would refuse keys the YAML does not list. Returns (other args, actions).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    rest, actions = [], []
    for arg in args:
        m = _NODE_OVERRIDE.match(arg)
        if not m:
            rest.append(arg)
            continue
        prefix, node, key, _, raw = m.groups()
        if prefix == "~":
            actions.append(("delete", f"{node}.{key}", None))
            continue
        if raw is None:
            raise ConfigError(f"'{arg}' needs a value: {node}.{key}=VALUE")
        try:
            override = parser.parse_overrides([f"{node}.{key}={raw}"])[0]
        except Exception as exc:
            raise ConfigError(f"cannot parse '{arg}': {exc}") from None
        if override.is_sweep_override():
            raise ConfigError(f"'{arg}': write grid axes as a list, {node}.{key}=[a,b,c], or a "
                              "range helper such as '{range:[0,10]}' (a,b,c is Hydra multirun)")
        actions.append(("set", f"{node}.{key}", override.value()))
    return rest, actions


def apply_node_overrides(conf: dict, actions: list[tuple[str, str, Any]]) -> None:
    for action, dotted, value in actions:
        node, key = dotted.split(".", 1)
        target = conf.get(node)
        if not isinstance(target, dict):
            target = conf[node] = {}
        if action == "delete":
            target.pop(key, None)
        else:
            target[key] = _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def available_experiments() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def available_clusters() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "cluster").glob("*.yaml"))


def check_cluster_choice(args: list[str]) -> None:
    """``cluster=KIND`` must name a conf/cluster/KIND.yaml (Hydra would print a traceback)."""
    known = available_clusters()
    for arg in args:
        if arg.startswith("cluster="):
            for kind in arg.split("=", 1)[1].split(","):
                if kind.strip() not in known:
                    raise ConfigError(f"unknown cluster '{kind.strip()}'; available kinds: "
                                      + ", ".join(known) + f" (the files of {CONF_DIR / 'cluster'})")


def quote_non_ascii_paths(args: list[str]) -> list[str]:
    """Hydra's override grammar rejects non-ASCII characters outside quotes
    (``results_dir=/data/résultats``): quote such a ``results_dir`` value for it."""
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if (sep and key.lstrip("+") == "results_dir" and not value.isascii()
                and not value.startswith(("'", '"'))):
            if "'" in value:
                raise ConfigError(f"results_dir={value}: a path with non-ASCII characters and "
                                  "a ' cannot be passed through Hydra; rename or symlink it")
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


def check_experiment_choice(args: list[str]) -> None:
    from pipeline.experiments.base import registry

    known = available_experiments()
    registered = registry()
    for arg in args:
        if arg.startswith("experiment="):
            for name in arg.split("=", 1)[1].split(","):
                name = name.strip()
                if name not in known or name not in registered:
                    from pipeline.experiments import BROKEN

                    broken = "".join(f"\n  module {m!r} failed to import: {e}"
                                     for m, e in BROKEN.items())
                    raise ConfigError(f"unknown experiment '{name}'; available experiments: "
                                      + ", ".join(n for n in known if n in registered) + broken)


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Run ``run.py``'s command line; returns the exit code. While it runs, everything written
    to stdout and stderr passes through :func:`pipeline.store.redact.redact`: a password in an
    address or a path (``scheme://user:password@``) is never echoed, whoever prints it."""
    from pipeline.store.redact import RedactingStream

    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(saved[0]), RedactingStream(saved[1])
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved


def _main(argv: list[str] | None = None) -> int:
    import hydra

    _setup_logging()
    args = list(sys.argv[1:] if argv is None else argv)
    global _ORIGINAL_ARGV
    _ORIGINAL_ARGV = list(args)  # for the manifest: the command as typed, overrides included
    try:
        check_experiment_choice(args)
        check_cluster_choice(args)
        args = quote_non_ascii_paths(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        args, node_actions = split_node_overrides(args)
        if any(a in ("-m", "--multirun") for a in args):
            validate_multirun(args, node_actions)  # every job, before the first one runs
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    codes: list[int] = []

    def job(cfg) -> None:
        codes.append(execute(cfg, node_actions))

    task = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)
    saved = sys.argv
    sys.argv = [saved[0] if saved else "run.py", *args]
    try:
        task()
    except SystemExit as exc:  # Hydra reports composition errors itself and exits 1
        if not codes:
            return EXIT_BAD_CONFIG if exc.code not in (0, None) else EXIT_OK
        raise
    finally:
        sys.argv = saved
    return max(codes) if codes else EXIT_OK


def validate_multirun(args: list[str], node_actions) -> None:
    """Compose and validate each job of a Hydra multirun (the cartesian product of its sweep
    overrides, as Hydra's basic sweeper forms it) so that a bad job is reported before any
    job runs or writes."""
    from itertools import product as cartesian

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    overrides = [a for a in args if not a.startswith("-")]
    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    sweeps = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
              for o in parsed if o.is_sweep_override()]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for combo in cartesian(*sweeps):
                job = [*fixed, *combo]
                try:
                    cfg = compose("config", overrides=job, return_hydra_config=True)
                except Exception as exc:
                    raise ConfigError(f"multirun job {' '.join(combo)}: {exc}") from None
                name = cfg.hydra.runtime.choices.get("experiment")
                conf = OmegaConf.to_container(cfg, resolve=False)
                conf.pop("hydra", None)
                conf = OmegaConf.to_container(OmegaConf.create(conf), resolve=True)
                apply_node_overrides(conf, node_actions)
                try:
                    validate(name, conf)
                except ConfigError as exc:
                    raise ConfigError(f"multirun job {' '.join(combo)}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()


def execute(cfg, node_actions=()) -> int:
    """Run one composed config (one Hydra job). Returns the exit code."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    log.disabled = False  # Hydra's logging set-up disables loggers created before it ran
    name = HydraConfig.get().runtime.choices.get("experiment")
    conf = OmegaConf.to_container(cfg, resolve=True)
    apply_node_overrides(conf, node_actions)
    try:
        grid, options = validate(name, conf)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except KeyboardInterrupt:  # e.g. while probing cluster.address: nothing was written
        print("\ninterrupted before anything was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    from pipeline.store.integrity import BadPartFile

    try:
        if options["report"]:
            from pipeline.report.build import build_report
            from pipeline.report.selection import selection_from_options

            return build_report(options["results_dir"], name,
                                style=options["report_style"] or "paper",
                                sig_digits=options["report_sig_digits"] or 6,
                                selection=selection_from_options(grid, options))
        if options["dry_run"]:
            return dry_run(grid, options)
        return sweep(grid, conf, options)
    except BadPartFile as exc:  # found before any task ran: nothing was written
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_STORE


def validate(name: str, conf: dict) -> tuple[Any, dict]:
    """Every check that can fail before work starts; raises ConfigError with a clear message."""
    from pipeline.engine.cluster import ClusterConfigError, check_batch_commands, check_scheduler
    from pipeline.engine.cluster import validate as validate_cluster
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import ParamError, get_experiment

    try:
        experiment = get_experiment(name)
    except KeyError:
        raise ConfigError(f"unknown experiment '{name}'") from None
    allowed_top = {"results_dir", "dry_run", "retry_failed", "batch_size", "progress", "report",
                   "report_style", "report_sig_digits", "grid", "params", "cluster",
                   "rerun_changed", "report_scope", "run_id", "code_id", "version", "max_tasks",
                   "task_timeout", "watchdog", *ENGINE_KEYS}
    unknown = set(conf) - allowed_top
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; allowed: "
                          + ", ".join(sorted(allowed_top)))
    for key in ("dry_run", "retry_failed", "progress", "report", "rerun_changed"):
        if not isinstance(conf.get(key, False), bool):
            raise ConfigError(f"{key} must be true or false, got {conf.get(key)!r}")
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
    max_tasks = conf.get("max_tasks", DEFAULT_MAX_TASKS)
    if not isinstance(max_tasks, int) or isinstance(max_tasks, bool) or max_tasks < 1:
        raise ConfigError(f"max_tasks must be an integer >= 1, got {max_tasks!r}")
    from pipeline.engine.watchdog import validate_options as validate_watchdog

    try:
        validate_watchdog(conf)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_engine_keys(conf)
    try:
        validate_cluster(conf.get("cluster") or {})
        if not conf.get("dry_run") and not conf.get("report"):
            check_batch_commands(conf.get("cluster") or {})  # sbatch & co. on PATH
    except ClusterConfigError as exc:
        raise ConfigError(str(exc)) from None
    for node in ("grid", "params"):
        if conf.get(node) is not None and not isinstance(conf[node], dict):
            raise ConfigError(f"{node} must be a mapping of parameter names to values")
    try:
        grid = Grid(experiment, conf.get("grid") or {}, conf.get("params") or {})
    except ParamError as exc:
        raise ConfigError(str(exc)) from None
    if grid.total > max_tasks and not conf.get("dry_run") and not conf.get("report"):
        raise ConfigError(f"the grid has {grid.total:,} tasks, more than max_tasks = "
                          f"{max_tasks:,}; shrink the grid, or raise the limit with "
                          f"max_tasks={grid.total} (dry_run=true shows the grid at any size)")
    if not conf.get("dry_run") and not conf.get("report"):
        try:  # last, as it may wait cluster.timeout: the peer of cluster.address answers as a
            check_scheduler(conf.get("cluster") or {})  # Dask scheduler (TLS included)
        except ClusterConfigError as exc:
            raise ConfigError(str(exc)) from None
    options = {k: conf.get(k) for k in allowed_top - {"grid", "params"}}
    options.update({k: conf.get(k, default) for k, (_, default, _) in ENGINE_KEYS.items()})
    options["results_dir"] = str(options["results_dir"])
    return grid, options


def check_results_dir(results_dir: Path, name: str) -> None:
    """``results_dir`` (and ``results_dir/NAME``) must be a directory or creatable as one."""
    for path in (results_dir / name, results_dir, *results_dir.parents):
        if path.exists():
            if not path.is_dir():
                raise ConfigError(f"results_dir={results_dir}: {path} is a file, not a directory "
                                  f"(results go to results_dir/{name}/, created if missing)")
            return


# Engine tuning keys (top level): name -> (type, default, what it means). Defaults are
# measured (BENCHMARKS.md, engine at cluster scale).
ENGINE_KEYS = {
    "max_tasks_per_second": (float, 50.0, "cap on Dask tasks per second for the whole cluster"),
    "max_batch_seconds": (float, 60.0, "bound on each batch's predicted duration, seconds"),
    "flush_rows": (int, 1_000_000, "buffered result rows that trigger a part file"),
    "flush_mib": (float, 64.0, "buffered MiB (in memory) that trigger a part file"),
    "flush_seconds": (float, 60.0, "age of the oldest buffered result that triggers a part file"),
}


def check_engine_keys(conf: dict) -> None:
    """Each engine key is a positive number (an integer for flush_rows)."""
    for key, (typ, default, meaning) in ENGINE_KEYS.items():
        value = conf.get(key, default)
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and value > 0 and value != float("inf") and (typ is float or isinstance(value, int)))
        if not ok:
            kind = "an integer >= 1" if typ is int else "a number > 0"
            raise ConfigError(f"{key} ({meaning}) must be {kind}, got {value!r}")


def dry_run(grid, options: dict) -> int:
    from pipeline.engine.cluster import dry_run_text
    from pipeline.engine.grid import describe_axes, fixed_summary
    from pipeline.engine.runner import count_done
    from pipeline.store.parquet import checked_schemas, experiment_dir

    path = experiment_dir(options["results_dir"], grid.name)
    checked_schemas(path)  # a damaged footer or a foreign part file: exit 4, naming it
    done_ok, done_failed = count_done(grid, path)
    to_run = grid.total - done_ok - (0 if options["retry_failed"] else done_failed)
    print(f"experiment {grid.name} (version {grid.version}) -> {path}")
    print(f"tasks in grid: {grid.total:,}")
    print(f"already done:  {done_ok:,} ok, {done_failed:,} failed ("
          f"{'re-run: retry_failed=true' if options['retry_failed'] else 'skipped'})")
    print(f"to run:        {to_run:,}")
    from pipeline.engine.provenance import code_id, stale_points

    stale = stale_points(grid, path, code_id(grid.experiment))[0].size
    if stale:
        fate = ("re-run: rerun_changed=true" if options["rerun_changed"]
                else "kept; rerun_changed=true re-runs them")
        print(f"other code:    {stale:,} stored ok point(s) computed by another code_id ({fate})")
    for axis, dropped in grid.duplicates_dropped.items():
        print(f"note: {dropped} duplicate value(s) of {axis} dropped from the grid")
    print("axes:")
    print("\n".join(describe_axes(grid)) or "  (none: a single point)")
    print("fixed:")
    print("\n".join(fixed_summary(grid)) or "  (none)")
    print("sample points:")
    for i in grid.sample_indices(5):
        print(f"  #{i} task_id={grid.task_id(i)} {grid.point(i)}")
    batch_jobs = dry_run_text(options.get("cluster") or {})  # batch systems: the job script
    if batch_jobs:
        print(batch_jobs)
    return EXIT_OK


def sweep(grid, conf: dict, options: dict) -> int:
    from pipeline.engine.cluster import cluster_checks, connect
    from pipeline.engine.progress import Progress, run_log, runlog
    from pipeline.engine.provenance import check_code_changes, code_id, provenance_stamp
    from pipeline.engine.runner import plan_sweep, run_sweep
    from pipeline.engine.watchdog import (Watchdog, shutdown_started, termination_signals,
                                          watchdog_options)
    from pipeline.store.parquet import (PartWriter, StoreLocked, SweepLock, clean_temp_files,
                                        experiment_dir, mark_dead_runs, new_run_id,
                                        update_manifest)

    path = experiment_dir(options["results_dir"], grid.name)
    run_id = new_run_id()
    record = {
        "run_id": run_id, "experiment": grid.name, "version": grid.version,
        "status": "running", "started_at": _now(), "finished_at": None,
        "host": socket.gethostname(), "user": _user(), "pid": os.getpid(),
        "python": platform.python_version(), "platform": platform.platform(),
        "packages": _versions(), "git": _git_info(), "argv": _ORIGINAL_ARGV or sys.argv[1:], "config": conf,
    }
    try:
        lock = SweepLock(path, run_id).__enter__()
    except StoreLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    scope = contextlib.ExitStack()  # 15b: SIGTERM/SIGHUP take Ctrl-C's path; _logs/RUN_ID.log
    try:  # first, as it reads every part: a damaged one stops the sweep before anything is written
        from pipeline.store.compaction import recover

        scope.enter_context(termination_signals())
        _pause_at("planning")
        recovered = recover(path)  # a compaction killed mid-way: finish or undo it first
        plan = plan_sweep(grid, path, options["retry_failed"])
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM/SIGHUP: nothing is written yet
        shutdown_started()  # a repeated signal waits for the lock's release below
        lock.__exit__(None, None, None)
        print(f"\ninterrupted ({getattr(exc, 'signame', 'SIGINT')}) while planning: nothing "
              "was written", file=sys.stderr)
        scope.close()
        return getattr(exc, "exit_code", EXIT_INTERRUPTED)
    except BaseException:
        scope.close()
        lock.__exit__(None, None, None)
        raise
    writer = stats = None
    try:
        try:  # from the moment the handlers are in, every signal takes the except below
            record["log"] = str(scope.enter_context(run_log(path, run_id)))
            _start_run_log(record, mark_dead_runs(path, lock_held=True))
            if recovered:
                log.info("an interrupted compaction of %s was %s", path, recovered)
            removed = clean_temp_files(path)
            if removed:
                log.info("removed %d unfinished temp file(s) left by a killed run", removed)
            _pause_at("code_check")
            stale = check_code_changes(grid, path, plan, options["rerun_changed"], log)
            record["counts"] = {"grid_total": plan.total, "already_ok": plan.done_ok,
                                "already_failed_skipped": plan.done_failed,
                                "to_run": int(plan.pending.size), "other_code": stale}
            record["code_id"] = code_id(grid.experiment)
            record["heartbeat_at"] = _now()
            update_manifest(path, record)
            _pause_at("first_manifest")
            log.info("%s: %d tasks in grid, %d already done, %d to run -> %s", grid.name,
                     plan.total, plan.done_ok + plan.done_failed, plan.pending.size, path)
            writer = PartWriter(path, run_id, stamp=provenance_stamp(grid.experiment, run_id),
                                flush_rows=options.get("flush_rows", 1_000_000),
                                flush_mib=options.get("flush_mib", 64.0),
                                flush_seconds=options.get("flush_seconds", 60.0))

            def heartbeat(snapshot: dict) -> None:  # 15b: read by `python -m pipeline status`
                record.update(progress=snapshot, heartbeat_at=_now())
                update_manifest(path, record)
            if plan.pending.size:
                cluster_cfg = conf.get("cluster") or {}
                with connect(cluster_cfg, log, probe=False) as client:  # probed in validate()
                    record["cluster"] = {"kind": cluster_cfg.get("kind", "local"),
                                         "dashboard": client.dashboard_link,
                                         "threads": sum(client.nthreads().values())}
                    runlog.info("cluster: %s", json.dumps(record["cluster"]))
                    bar = Progress(grid.name, int(plan.pending.size), options["progress"],
                                   heartbeat=heartbeat)
                    stats = run_sweep(grid, client, writer, plan.pending,
                                      batch_size=options["batch_size"],
                                      progress=options["progress"], bar=bar,
                                      task_timeout=options["task_timeout"],
                                      max_tasks_per_second=options.get("max_tasks_per_second", 50.0),
                                      max_batch_seconds=options.get("max_batch_seconds", 60.0),
                                      checks=[*cluster_checks(client),
                                              Watchdog(client, **watchdog_options(conf))])
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (watchdog.Terminated)
            shutdown_started()  # (run_sweep did, if it was running)
            signame = getattr(exc, "signame", "SIGINT")
            record.update(status="interrupted", finished_at=_now(), signal=signame,
                          written=_flushed(writer))
            update_manifest(path, record)
            runlog.info("interrupted (%s): %d part file(s) kept", signame, _parts(writer))
            print(f"\ninterrupted ({signame}): {_parts(writer)} part file(s) kept; rerun the same "
                  "command to resume", file=sys.stderr)
            return getattr(exc, "exit_code", EXIT_INTERRUPTED)
        except Exception as exc:  # the sweep machinery failed, not a task: say so, keep parts
            from pipeline.store.integrity import BadPartFile
            from pipeline.store.redact import redact

            error = redact(f"{type(exc).__name__}: {exc}")  # no password from an address
            record.update(status="crashed", finished_at=_now(), error=error,
                          written=_flushed(writer))
            update_manifest(path, record)
            runlog.info("crashed: %s", error)
            print(f"\nerror: the sweep crashed: {error}\n{_parts(writer)} part file(s) kept; fix "
                  "the cause and rerun the same command to resume", file=sys.stderr)
            return EXIT_BAD_STORE if isinstance(exc, BadPartFile) else EXIT_CRASHED
        if stats is not None:
            record["counts"].update(ran=stats.ran, ok=stats.ok, failed=stats.failed,
                                    rows=stats.rows, parts=stats.parts, batches=stats.batches,
                                    elapsed_s=round(stats.elapsed_s, 3),
                                    warmup_s=round(stats.warmup_s, 3))
        record.update(status="finished", finished_at=_now())
        update_manifest(path, record)
        runlog.info("summary: finished; %s; first error: %s", json.dumps(record["counts"]),
                    stats.first_errors[0] if stats and stats.first_errors else None)
    finally:
        lock.__exit__(None, None, None)
        scope.close()
    return _summarise(grid, path, plan, stats)


PAUSE_ENV = "PIPELINE_SWEEP_PAUSE_AT"  # tests: sleep at a step of the sweep's start-up


def _pause_at(step: str) -> None:
    """Test hook: with PIPELINE_SWEEP_PAUSE_AT=step, announce the step and sleep (so that a
    signal lands there). Steps: ``planning`` (the lock taken, the store being read),
    ``code_check`` (before the code-change check, nothing in the manifest yet), ``first_manifest`` (just after the first ``running`` record)."""
    if os.environ.get(PAUSE_ENV) == step:
        print(f"sweep paused at {step}", file=sys.stderr, flush=True)
        time.sleep(120)


def _parts(writer) -> int:
    return writer.seq if writer is not None else 0


def _start_run_log(record: dict, dead_runs: list[dict]) -> None:
    """15b: the run log's opening lines; runs left 'running' by dead drivers (just marked)."""
    from pipeline.engine.progress import runlog

    for dead in dead_runs:
        log.warning("run %s (host %s, pid %s) was left 'running' by a driver that died; marked "
                    "'%s'", dead["run_id"], dead.get("host"), dead.get("pid"), dead["status"])
    from pipeline.store.redact import redact_secrets

    # redacted here as in the manifest (the log's formatter redacts every line again)
    argv, config = redact_secrets([str(a) for a in record["argv"]]), redact_secrets(record["config"])
    runlog.info("run %s of %s on host %s, pid %d; argv: %s", record["run_id"], record["experiment"],
                record["host"], record["pid"], " ".join(argv))
    runlog.info("config: %s", json.dumps(config, default=str, sort_keys=True))


def _flushed(writer) -> dict:
    """What is on disk after a sweep stopped early; ``flushed`` says the buffer was emptied."""
    if writer is None:  # stopped before the writer existed: nothing was buffered
        return {"rows": 0, "parts": 0, "flushed": True}
    try:
        writer.close()  # run_sweep already did; a second close is a no-op
        flushed = writer.buffered_rows == 0
    except Exception:  # the disk refused: say so, keep what is there
        flushed = False
    return {"rows": writer.rows, "parts": writer.seq, "flushed": flushed}


def _summarise(grid, path, plan, stats) -> int:
    from pipeline.report.summary import summary_table

    failed_now = stats.failed if stats else 0
    ran = stats.ran if stats else 0
    print(f"\nresults: {path}  (load with pipeline.load({str(path.parent)!r}, {grid.name!r}))")
    tasks_ok = plan.done_ok + (stats.ok if stats else 0)
    tasks_failed = plan.done_failed + failed_now
    print(summary_table(path, grid.experiment, tasks_ok, tasks_failed))
    if stats and stats.ran:
        print(f"ran {stats.ran:,} tasks in {stats.elapsed_s:.1f} s "
              f"({stats.ran / max(stats.elapsed_s, 1e-9):,.0f} tasks/s), {stats.parts} part file(s)")
    if failed_now or plan.done_failed:
        first = (stats.first_errors[0] if stats and stats.first_errors else
                 "see the error column of the failed rows")
        print(f"FAILED: {failed_now} of {ran} task(s) failed this run"
              f"{f', {plan.done_failed} earlier failure(s) skipped (retry_failed=true re-runs them)' if plan.done_failed else ''}"
              f"; first error: {first}", file=sys.stderr)
        return EXIT_FAILED_TASKS
    return EXIT_OK


# --------------------------------------------------------------------------- provenance
def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def _versions() -> dict:
    out = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git_info() -> dict:
    def git(*cmd):
        return subprocess.run(["git", "-C", str(REPO_ROOT), *cmd], capture_output=True,
                              text=True, timeout=10).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return {"commit": commit or None, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
