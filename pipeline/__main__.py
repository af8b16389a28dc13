"""``python -m pipeline COMMAND``: the command-line tools beside ``run.py`` (list, describe, ...)."""

from __future__ import annotations

import sys

# Nothing heavy is imported at module level: everything runs inside the guard at the bottom,
# so a Ctrl-C during the imports (the experiments pull in scipy and networkx) is a message,
# not a traceback.


def _first_line(text: str) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = (text or "").strip().split("\n\n")[0]
    return " ".join(ln.strip() for ln in paragraph.splitlines())


def describe(name: str) -> str:
    from pipeline.experiments.base import REQUIRED, registry

    exp = registry()[name]
    lines = [f"{exp.name} (version {exp.version}{', stochastic: seeded per task' if exp.stochastic else ''})",
             _first_line(exp.doc), "", "parameters:"]
    for p in exp.params:
        typ = p.type if isinstance(p.type, str) else p.type.__name__
        default = "required" if p.default is REQUIRED else repr(p.default)
        domain = p.domain.describe() if p.domain else "any"
        lines.append(f"  {p.name:<22} {typ:<10} default {default:<12} {domain}"
                     + (f"  - {p.doc}" if p.doc else ""))
    if exp.checks:
        lines.append("limits checked before any task runs: "
                     + "; ".join(",".join(c.params) for c in exp.checks))
    lines += ["", "columns:"]
    from pipeline.engine.schema import column_doc

    for n, t in exp.columns.items():
        description, unit, _ = column_doc(exp, n)
        lines.append(f"  {n:<28} {str(t):<10} {f'[{unit}]' if unit else '':<6} {description}")
    return "\n".join(lines)


def _list(argv: list[str]) -> int:
    from pipeline.experiments import BROKEN
    from pipeline.experiments.base import CONFLICTS, registry, shown_path

    if argv:
        print("usage: python -m pipeline list", file=sys.stderr)
        return 2
    experiments = registry()
    lines = {name: _first_line(exp.doc) for name, exp in experiments.items()}
    for name, places in CONFLICTS.items():  # two modules register it: unusable until renamed
        lines[name] = ("CONFLICTING: registered by " + " and by ".join(
            f"{shown_path(f)} (line {line})" for f, line in places)
            + "; not usable until one is renamed")
    width = max(map(len, lines))
    for name, line in sorted(lines.items()):
        print(f"{name:<{width}}  {line}")
    for module, error in BROKEN.items():
        print(f"(module {module} failed to import: {error})", file=sys.stderr)
    return 0


def _describe(argv: list[str]) -> int:
    from pipeline.experiments.base import CONFLICTS, conflict_message, registry

    if len(argv) != 1:
        print("usage: python -m pipeline describe NAME", file=sys.stderr)
        return 2
    experiments = registry()
    if argv[0] in CONFLICTS:
        print(f"error: {conflict_message(argv[0])}", file=sys.stderr)
        return 2
    if argv[0] not in experiments:
        print(f"unknown experiment '{argv[0]}'; available: {', '.join(sorted(experiments))}",
              file=sys.stderr)
        return 2
    print(describe(argv[0]))
    return 0


# command name -> (one-line help, "module:function" taking argv and returning the exit code).
# A new command is a module of its own, registered here with one line.
COMMANDS = {
    "list": ("list the experiments", "pipeline.__main__:_list"),
    "describe": ("parameters and columns of one experiment", "pipeline.__main__:_describe"),
    "export": ("a results folder as a Frictionless Data Package", "pipeline.export_command:main"),
    "verify": ("check a results folder's part files; --repair quarantines bad ones", "pipeline.verify:main"),
    "status": ("stored counts and the state of each sweep, running or not", "pipeline.status:main"),
    "compact": ("rewrite RESULTS_DIR/NAME into few large part files", "pipeline.compact:main"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m pipeline COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (help_, _) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import importlib

    if not argv or argv[0] not in COMMANDS:
        print(_usage(), file=sys.stderr)
        return 2
    module, func = COMMANDS[argv[0]][1].split(":")
    from pipeline.engine.watchdog import termination_signals

    with termination_signals():  # SIGTERM/SIGHUP as Ctrl-C: staging folders are cleaned up
        return getattr(importlib.import_module(module), func)(argv[1:])


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
        sys.stdout.flush()  # here, not at exit: a reader gone is handled below
        sys.exit(code)
    except KeyboardInterrupt as exc:  # the commands write atomically (temp file, rename)
        print("\ninterrupted", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 130))
    except BrokenPipeError:
        # `status | head`, a watch loop cut short: the reader went away. A traceback said the
        # command failed; it exits as a command ended by SIGPIPE does, quietly. The rest of the
        # output goes to /dev/null, so the flush at exit does not fail again.
        from pipeline.store.redact import to_devnull

        to_devnull(sys.stdout)
        sys.exit(141)
