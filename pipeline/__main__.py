"""``python -m pipeline COMMAND``: the command-line tools beside ``run.py`` (list, describe, ...).

``--help`` (``-h``, ``help``) lists the commands on stdout, exit 0; ``COMMAND --help`` says more
of one. A bad invocation (an unknown command, ``report``, which is ``run.py``'s, a word a
command does not take) is one line on stderr naming what was wrong and what is accepted,
exit 2, before anything is read or written."""

from __future__ import annotations

import sys

# Nothing heavy is imported at module level: everything runs inside the guard at the bottom,
# so a Ctrl-C during the imports (the experiments pull in scipy and networkx) is a message,
# not a traceback.


def _first_line(text: str) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = (text or "").strip().split("\n\n")[0]
    return " ".join(ln.strip() for ln in paragraph.splitlines())


def _list_line(name: str, doc: str) -> str:
    """``list``'s description of experiment ``name``: its docstring's first paragraph as plain
    text: without the double-backtick literal markup, nor a leading "[Experiment] ``name``: "
    (the listing's first column already names it)."""
    import re

    line = _first_line(doc)
    text = re.sub(rf"^(?:Experiment\s+)?``{re.escape(name)}``:\s*", "", line)
    if text != line:  # what followed the name now starts the sentence
        text = text[:1].upper() + text[1:]
    return text.replace("``", "")


def describe(name: str) -> str:
    from pipeline.experiments.base import REQUIRED, get_experiment

    exp = get_experiment(name)
    lines = [f"{exp.name} (version {exp.version}{', stochastic: seeded per task' if exp.stochastic else ''})",
             _list_line(exp.name, exp.doc), "", "parameters:"]
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

    import warnings

    if argv:
        return _bad("list", f"list takes no arguments (got {' '.join(argv)})")
    with warnings.catch_warnings():  # each failed module is listed below, once, plainly
        warnings.simplefilter("ignore")
        experiments = registry()
    lines = {name: _list_line(name, exp.doc) for name, exp in experiments.items()}
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
    from pipeline.experiments.base import CONFLICTS, conflict_message, find

    if len(argv) != 1:
        return _bad("describe", f"describe takes one experiment NAME (got "
                    f"{' '.join(argv) if argv else 'none'}); python -m pipeline list lists them")
    name = argv[0]
    if name.startswith("experiment="):  # run.py's word: the name is what follows
        return _bad("describe", f"describe takes the name alone: python -m pipeline describe "
                    f"{name.partition('=')[2] or 'NAME'}")
    import warnings

    from pipeline.validation import experiment_problem

    with warnings.catch_warnings():  # failed modules are named below, plainly
        warnings.simplefilter("ignore")
        found = find(name)
    if name in CONFLICTS:
        print(f"error: {conflict_message(name)}", file=sys.stderr)
        return 2
    if found is None:  # run.py's own words: did you mean, the modules that failed
        print(f"error: {experiment_problem(name) or f'unknown experiment {name!r}'}",
              file=sys.stderr)
        return 2
    print(describe(name))
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


# Each command's usage line, and the module whose docstring says more (its --help). export
# and compact parse their own options and answer -h/--help themselves.
USAGES = {
    "list": ("python -m pipeline list", None),
    "describe": ("python -m pipeline describe NAME", None),
    "export": ("python -m pipeline export RESULTS_DIR/NAME --to DIR [OPTIONS] [SELECTION...]",
               None),
    "verify": ("python -m pipeline verify RESULTS_DIR/NAME [--repair]", "pipeline.verify"),
    "status": ("python -m pipeline status [RESULTS_DIR [NAME]]", "pipeline.status"),
    "compact": ("python -m pipeline compact RESULTS_DIR/NAME [--target-rows N] [--target-mib M]",
                None),
}
OWN_HELP = {"export", "compact"}
HELP_WORDS = ("-h", "--help")

# Words tried as commands that are done elsewhere: what to type instead.
ELSEWHERE = {
    "report": "reports are made by run.py: python run.py experiment=NAME report=true "
              "(README.md, 'Reports')",
    "run": "sweeps are run by run.py: python run.py experiment=NAME [grid.PARAM=[...]] "
           "(README.md, 'Running sweeps')",
    "dry_run": "a dry run is run.py's: python run.py experiment=NAME dry_run=true",
    "load": "results are loaded in Python: pipeline.load(RESULTS_DIR, NAME) (README.md, "
            "'Results')",
}
ELSEWHERE.update({"sweep": ELSEWHERE["run"], "dry-run": ELSEWHERE["dry_run"],
                  "plan": ELSEWHERE["dry_run"], "reports": ELSEWHERE["report"]})


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m pipeline COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (help_, _) in COMMANDS.items()]
    lines += ["", "python -m pipeline COMMAND --help says more of one. Sweeps, dry runs and "
              "reports are run.py's:", "  python run.py experiment=NAME [dry_run=true | "
              "report=true] (README.md)"]
    return "\n".join(lines)


def _command_help(command: str) -> str:
    usage, module = USAGES[command]
    text = f"usage: {usage}\n\n{COMMANDS[command][0]}"
    if module:
        import importlib

        # the module's docstring after its first paragraph (the usage and the line above)
        doc = (importlib.import_module(module).__doc__ or "").replace("``", "").strip()
        rest = doc.split("\n\n", 1)[1:]
        if rest:
            text += "\n\n" + rest[0].strip()
    return text


def _bad(command: str, what: str) -> int:
    """One line: what was wrong, what the command accepts. Exit 2, nothing written."""
    print(f"error: {what}; usage: {USAGES[command][0]}", file=sys.stderr)
    return 2


def _selection_word(arg: str) -> bool:
    """run.py's KEY=VALUE words (version=1, status=ok, grid.eps=[...], ~grid.zip), not a path
    that happens to hold '='."""
    import os
    import re

    return bool(re.match(r"^(~[A-Za-z_][\w.]*|[+~]?[A-Za-z_][\w.]*=.*)$", arg)) and \
        not os.path.exists(arg)


def _check_status(args: list[str]) -> int | None:
    words = [a for a in args if _selection_word(a)]
    if words:
        return _bad("status", f"status takes no selection words ({' '.join(words)}): it counts "
                    "everything stored, per version; to read selected rows use pipeline.load("
                    "RESULTS_DIR, NAME, ...) or python -m pipeline export RESULTS_DIR/NAME --to "
                    f"DIR {' '.join(words)}")
    options = [a for a in args if a.startswith("-")]
    if options:
        return _bad("status", f"status takes no options (got {' '.join(options)})")
    if len(args) > 2:
        return _bad("status", f"status takes at most RESULTS_DIR and NAME (got {len(args)} "
                    f"arguments: {' '.join(args)})")
    return None


def _check_verify(args: list[str]) -> int | None:
    words = [a for a in args if _selection_word(a)]
    if words:
        return _bad("verify", f"verify takes no selection words ({' '.join(words)}): it checks "
                    "every part file of the folder")
    options = [a for a in args if a.startswith("-") and a != "--repair"]
    if options:
        return _bad("verify", f"verify's only option is --repair (got {' '.join(options)})")
    folders = [a for a in args if a != "--repair"]
    if len(folders) != 1:
        return _bad("verify", "verify takes one experiment folder RESULTS_DIR/NAME (got "
                    f"{' '.join(folders) if folders else 'none'})")
    return None


CHECKS = {"status": _check_status, "verify": _check_verify}


def _unknown(word: str) -> int:
    import difflib

    known = ", ".join(COMMANDS)
    if word.startswith("-"):
        what = f"unknown option {word!r} (python -m pipeline takes --help, then a COMMAND)"
    elif word in ELSEWHERE:
        what = f"unknown command {word!r}: {ELSEWHERE[word]}"
    elif "=" in word:  # python -m pipeline experiment=NAME ...: run.py's words
        what = (f"{word!r} is a run.py word, not a command: python run.py {word} ... runs a "
                "sweep (README.md, 'Running sweeps')")
    else:
        close = difflib.get_close_matches(word, COMMANDS, n=1)
        what = f"unknown command {word!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
    print(f"error: {what}; commands: {known} (python -m pipeline --help says what each does)",
          file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    import importlib

    if not argv:
        print(f"{_usage()}\n\nerror: no command given", file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    if command == "help" and args and args[0] in COMMANDS:  # help COMMAND: COMMAND --help
        command, args = args[0], ["--help"]
    elif command == "help" and args:  # help of no command: as that word alone, exit 2
        return _unknown(args[0])
    elif command in HELP_WORDS or command == "help":
        print(_usage())
        return 0
    if command not in COMMANDS:
        return _unknown(command)
    if command not in OWN_HELP and any(a in HELP_WORDS for a in args):
        print(_command_help(command))
        return 0
    if command in CHECKS:
        code = CHECKS[command](args)
        if code is not None:
            return code
    module, func = COMMANDS[command][1].split(":")
    from pipeline.engine.watchdog import termination_signals

    with termination_signals():  # SIGTERM/SIGHUP as Ctrl-C: staging folders are cleaned up
        return getattr(importlib.import_module(module), func)(args)


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
