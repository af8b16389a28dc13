"""The command line: Hydra composes the config, this module validates it and hands it to the
sweep (:mod:`pipeline.sweep_command`), the dry run or the report.

Exit codes: 0 every task ok; 1 some task failed (rows are stored with their errors);
2 invalid configuration, rejected before any task ran and before anything was written
(also: another sweep holds the results folder, or it cannot be written; the peer of
``cluster.address`` does not answer as a Dask scheduler, or its TLS handshake fails); 3 the
sweep itself crashed (scheduler unreachable, a worker running other code, a full disk, ...):
what finished is stored, the manifest says "crashed" with the error; 4 a part file in the
results folder is damaged or foreign (the message names it; ``python -m pipeline verify
RESULTS_DIR/NAME --repair`` moves it aside, and a rerun recomputes its tasks); 130
interrupted, 143 SIGTERM, 129 SIGHUP (what finished is stored, the manifest says
"interrupted"; rerun to resume).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pipeline.exit_codes import EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_INTERRUPTED, EXIT_OK

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = Path(os.environ.get("PIPELINE_CONF_DIR", REPO_ROOT / "conf"))
DEFAULT_MAX_TASKS = 10**9  # a real run above this is refused (max_tasks=N raises it)

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


def params_typed(actions: list[tuple[str, str, Any]]) -> set[str]:
    """The parameters fixed on the command line (``params.X=...``)."""
    return {dotted.split(".", 1)[1] for action, dotted, _ in actions
            if action == "set" and dotted.startswith("params.")}


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


def default_cluster() -> str:
    """The cluster kind conf/config.yaml's defaults choose."""
    from omegaconf import OmegaConf

    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))["defaults"]:
        if isinstance(entry, dict) and "cluster" in entry:
            return str(entry["cluster"])
    return "local"


def check_cluster_overrides(args: list[str]) -> None:
    """A misspelt cluster key (``cluster.n_worker=2``) is refused with the kind's keys and the
    closest one. Hydra refused it too, but its advice was to add it with ``+cluster.n_worker``
    (which the cluster's own check then refused)."""
    import difflib

    from pipeline.engine.cluster import KINDS, cluster_keys

    kinds = [a.split("=", 1)[1] for a in args if a.startswith("cluster=")]
    kind = kinds[-1] if kinds else default_cluster()
    if kind not in KINDS:  # a multirun over kinds (local,slurm): each job is validated
        return
    allowed = cluster_keys(kind)
    for arg in args:
        key, sep, _ = arg.partition("=")
        parts = key.lstrip("+~").split(".")
        if parts[0] != "cluster" or len(parts) < 2 or parts[1] in allowed:
            continue
        close = difflib.get_close_matches(parts[1], allowed, n=1)
        raise ConfigError(f"unknown key 'cluster.{parts[1]}' for cluster={kind}"
                          + (f" (did you mean 'cluster.{close[0]}'?)" if close else "")
                          + "; allowed: " + ", ".join(allowed))


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


@contextlib.contextmanager
def _interrupts_after_imports():
    """Hold a Ctrl-C that arrives during Hydra's import (under a second) until it is over.

    Hydra builds OmegaConf structured configs as it imports; an interrupt raised inside them
    leaves OmegaConf half-built, and what escapes is an AttributeError with a traceback, not
    a KeyboardInterrupt (seen once in CI). The held Ctrl-C is raised right after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


def _main(argv: list[str] | None = None) -> int:
    with _interrupts_after_imports():
        import hydra

    _setup_logging()
    args = list(sys.argv[1:] if argv is None else argv)
    global _ORIGINAL_ARGV
    _ORIGINAL_ARGV = list(args)  # for the manifest: the command as typed, overrides included
    try:
        check_experiment_choice(args)
        check_cluster_choice(args)
        check_cluster_overrides(args)
        check_top_level_overrides(args)
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
                    validate(name, conf, params_typed(node_actions))
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
        grid, options = validate(name, conf, params_typed(node_actions))
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
            from pipeline.dry_run_command import dry_run

            return dry_run(grid, options)
        from pipeline.sweep_command import sweep

        return sweep(grid, conf, options, argv=_ORIGINAL_ARGV or sys.argv[1:])
    except BadPartFile as exc:  # found before any task ran: nothing was written
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_STORE


def top_level_keys() -> set[str]:
    """The keys a composed config may hold at its top level (``experiment`` is Hydra's)."""
    return {"results_dir", "dry_run", "retry_failed", "batch_size", "progress", "report",
            "report_style", "report_sig_digits", "grid", "params", "cluster",
            "rerun_changed", "report_scope", "run_id", "code_id", "version", "max_tasks",
            "task_timeout", "watchdog", *ENGINE_KEYS}


def check_top_level_overrides(args: list[str]) -> None:
    """A misspelt top-level key (``retry_faild=true``) is refused with the allowed keys.
    Hydra refused it too, but its advice was to add it with ``+retry_faild=true``."""
    import difflib

    allowed = top_level_keys()
    for arg in args:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith(("-", "+", "~")):  # ``+key`` adds on purpose: validate()
            continue
        head = re.split(r"[./@]", key, maxsplit=1)[0]  # hydra/launcher=..., cluster.x=...
        if head not in allowed and head not in ("experiment", "hydra"):
            close = difflib.get_close_matches(head, sorted(allowed | {"experiment"}), n=1)
            raise ConfigError(f"unknown top-level key '{head}'"
                              + (f" (did you mean '{close[0]}'?)" if close else "")
                              + "; allowed: experiment, " + ", ".join(sorted(allowed)))


def validate(name: str, conf: dict, params_typed: set[str] = frozenset()) -> tuple[Any, dict]:
    """Every check that can fail before work starts; raises ConfigError with a clear message.
    ``params_typed``: the parameters fixed on the command line (none may be a grid axis)."""
    from pipeline.engine.cluster import ClusterConfigError, check_batch_commands, check_scheduler
    from pipeline.engine.cluster import validate as validate_cluster
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import ParamError, get_experiment

    try:
        experiment = get_experiment(name)
    except KeyError:
        raise ConfigError(f"unknown experiment '{name}'") from None
    allowed_top = top_level_keys()
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
    axes = {n for axis in grid.axes for n in axis.names}
    for key in sorted(params_typed & axes):  # the grid's axis won, and params.x=5 was ignored
        raise ConfigError(f"params.{key} is set, but {key} is also a grid axis (grid.{key}, from "
                          f"the command line or the experiment's config), which would win: to "
                          f"fix {key}, write grid.{key}=[VALUE], or drop the axis with "
                          f"'~grid.{key}'")
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
