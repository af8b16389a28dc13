"""The command line: Hydra composes the config, this module validates it and hands it to the
sweep (:mod:`pipeline.sweep_command`), the dry run or the report. The checks live in
:mod:`pipeline.overrides` (the argv, before Hydra) and :mod:`pipeline.validation` (the
composed config).

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
import signal
import sys
import threading

from pipeline.exit_codes import (EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_CRASHED, EXIT_INTERRUPTED,
                                 EXIT_OK)
from pipeline.overrides import (apply_node_overrides, check_cluster_choice,
                                check_cluster_overrides, check_experiment_choice,
                                check_top_level_overrides, command_line_keys, params_typed,
                                quote_results_dir, split_node_overrides)
from pipeline.validation import CONF_DIR, ConfigError, validate

log = logging.getLogger("pipeline")
_ORIGINAL_ARGV: list[str] = []


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record, not the one at set-up:
    ``main`` may run many times in one process (tests, notebooks), each with its own stderr."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass

    def emit(self, record) -> None:
        from pipeline.engine.progress import end_open_line

        end_open_line()  # a message starts its own line, not the progress line's end
        super().emit(record)


def _setup_logging() -> None:
    if not any(isinstance(h, _CurrentStderr) for h in log.handlers):
        from pipeline.store.redact import RedactingFormatter

        handler = _CurrentStderr()
        handler.setFormatter(RedactingFormatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


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


def leave_on_signals_with(code: int) -> None:
    """From now on, a SIGINT, SIGTERM or SIGHUP exits at once with ``code``, the command's own
    outcome (everything is written and recorded by then). A second Ctrl-C that landed while
    the interpreter shut down (Dask's exit handlers, thread joins) killed the process by the
    signal itself: no exit code 130, whatever the sweep had recorded."""
    import os

    def leave(_signum, _frame):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)

    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, leave)  # (not one the caller ignores: `nohup`, `&`)


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
        args = quote_results_dir(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        args, node_actions = split_node_overrides(args)
        jobs = 1
        if any(a in ("-m", "--multirun") for a in args):
            jobs = validate_multirun(args, node_actions)  # every job, before the first runs
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    codes: list[int] = []

    def job(cfg) -> None:
        codes.append(execute(cfg, node_actions))
        if codes[-1] in SIGNAL_EXITS:  # (a BaseException: Hydra's launcher catches Exception)
            raise _StopMultirun(codes[-1])

    task = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(job)
    saved = sys.argv
    sys.argv = [saved[0] if saved else "run.py", *args]
    try:
        task()
    except _StopMultirun as stop:
        # Ctrl-C, SIGTERM (scancel, the walltime) or SIGHUP ended one job of a multirun, and
        # the next job started and ran whole: the command is what was asked to stop
        if jobs > len(codes):
            left = jobs - len(codes)
            print(f"multirun stopped in its job {len(codes)} of {jobs}: "
                  + ("the last one was" if left == 1 else f"the other {left} were")
                  + " not started (the same command runs them; tasks stored are not run "
                  "again)", file=sys.stderr)
        return stop.code
    except SystemExit as exc:  # Hydra reports composition errors itself and exits 1
        if not codes:
            return EXIT_BAD_CONFIG if exc.code not in (0, None) else EXIT_OK
        raise
    finally:
        sys.argv = saved
    return max(codes) if codes else EXIT_OK


# A job ended by a signal (Ctrl-C, SIGTERM, SIGHUP): the multirun's later jobs do not start.
SIGNAL_EXITS = (EXIT_INTERRUPTED, 128 + 15, 128 + 1)


class _StopMultirun(BaseException):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def validate_multirun(args: list[str], node_actions) -> int:
    """Compose and validate each job of a Hydra multirun (the cartesian product of its sweep
    overrides, as Hydra's basic sweeper forms it) so that a bad job is reported before any
    job runs or writes. Returns the number of jobs."""
    from itertools import product as cartesian

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    overrides = [a for a in args if not a.startswith("-")]
    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    sweeps = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
              for o in parsed if o.is_sweep_override()]
    removals = {dotted for action, dotted, _ in node_actions if action == "delete"}
    removed: set[str] = set()
    jobs = 0
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for combo in cartesian(*sweeps):
                jobs += 1
                job = [*fixed, *combo]
                try:
                    cfg = compose("config", overrides=job, return_hydra_config=True)
                except Exception as exc:
                    raise ConfigError(f"multirun job {' '.join(combo)}: {exc}") from None
                name = cfg.hydra.runtime.choices.get("experiment")
                conf = OmegaConf.to_container(cfg, resolve=False)
                conf.pop("hydra", None)
                try:
                    conf = OmegaConf.to_container(OmegaConf.create(conf), resolve=True)
                    removed |= apply_node_overrides(conf, node_actions, missing_ok=True)
                    validate(name, conf, params_typed(node_actions),
                             command_line_keys(node_actions))
                except OmegaConfBaseException as exc:  # an interpolation that does not resolve
                    raise ConfigError(f"multirun job {' '.join(combo)}: "
                                      f"{str(exc).splitlines()[0]}") from None
                except ConfigError as exc:
                    raise ConfigError(f"multirun job {' '.join(combo)}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    for dotted in sorted(removals - removed):  # in no job: misspelt
        raise ConfigError(f"'~{dotted}': no job of this multirun has {dotted} to remove")
    return jobs


def execute(cfg, node_actions=()) -> int:
    """Run one composed config (one Hydra job). Returns the exit code."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    log.disabled = False  # Hydra's logging set-up disables loggers created before it ran
    name = HydraConfig.get().runtime.choices.get("experiment")
    from omegaconf.errors import OmegaConfBaseException

    try:  # an interpolation that does not resolve (results_dir=/data/${SCRATCH}, meant as $SCRATCH)
        conf = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        where = f" in {exc.full_key}" if getattr(exc, "full_key", None) else ""
        print(f"error: {str(exc).splitlines()[0]}{where}: ${{...}} in a value is an "
              "interpolation (${oc.env:SCRATCH} reads an environment variable)", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:  # a multirun's removals were checked across its jobs (validate_multirun)
        multirun = HydraConfig.get().mode == RunMode.MULTIRUN
        apply_node_overrides(conf, node_actions, missing_ok=multirun)
        grid, options = validate(name, conf, params_typed(node_actions),
                                 command_line_keys(node_actions))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except KeyboardInterrupt:  # e.g. while probing cluster.address: nothing was written
        print("\ninterrupted before anything was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    for note in options.pop("notes", []):
        print(f"note: {note}", file=sys.stderr)
    from pipeline.store.integrity import BadPartFile

    try:
        if options["report"]:
            from pipeline.report.build import build_report
            from pipeline.validation import sweep_choices_ignored

            ignored = sweep_choices_ignored(conf)
            if ignored:  # (the report was made from the old rows with no word)
                print(f"note: report=true runs nothing: {' and '.join(ignored)} applies to a "
                      "sweep (the same command without report=true); this report is of the "
                      "rows stored now", file=sys.stderr)
            given = sorted(command_line_keys(node_actions))
            if options.get("report_scope") == "all" and given:  # (they were dropped silently)
                print(f"note: report_scope=all reports every stored point: {', '.join(given)} "
                      "on the command line select nothing (without report_scope=all the "
                      "report is of the points this grid would sweep)", file=sys.stderr)
            from pipeline.report.selection import selection_from_options

            from pipeline.engine.watchdog import termination_signals

            try:
                # SIGTERM/SIGHUP as Ctrl-C: killed outright, the report left its half-built
                # staging folder behind and exited 143 without a word
                with termination_signals():
                    return build_report(options["results_dir"], name,
                                        style=options["report_style"] or "paper",
                                        sig_digits=options["report_sig_digits"] or 6,
                                        selection=selection_from_options(grid, options))
            except KeyboardInterrupt as exc:
                print("\ninterrupted: the report was not written; the previous report, if any, "
                      "is left as it was", file=sys.stderr)
                return getattr(exc, "exit_code", EXIT_INTERRUPTED)
            except OSError as exc:  # a full disk, a read-only folder: was a Hydra traceback
                from pipeline.store.manifest import not_writable_here

                print(f"error: could not build the report of {name}: {exc.strerror or exc}"
                      f"{f' ({exc.filename})' if exc.filename else ''}; the previous report, "
                      "if any, is left as it was", file=sys.stderr)
                # a folder this user cannot write (read-only, another's) is bad input, as for
                # a sweep; a full disk or an I/O error is a fault of the moment
                return EXIT_BAD_CONFIG if not_writable_here(exc) else EXIT_CRASHED
        if options["dry_run"]:
            from pipeline.dry_run_command import dry_run

            return dry_run(grid, options)
        from pipeline.sweep_command import sweep

        return sweep(grid, conf, options, argv=_ORIGINAL_ARGV or sys.argv[1:])
    except BadPartFile as exc:  # found before any task ran: nothing was written
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_STORE
