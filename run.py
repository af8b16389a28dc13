"""Command-line entry point: ``python run.py experiment=NAME [grid.PARAM=[...]] [results_dir=DIR]``.

See README.md for every option. Exit codes: 0 all tasks ok, 1 some tasks failed,
2 invalid configuration (nothing was run or written), 3 the sweep machinery crashed,
4 a damaged part file in the results folder (``python -m pipeline verify DIR/NAME --repair``),
130 interrupted.
"""

import atexit
import os
import sys

_EXIT_CODE: list[int] = []


def _exit_now() -> None:
    """Registered before anything else, so it runs after every other exit handler: once the
    command returned its code, the interpreter's own teardown is skipped. It puts the
    default signal handlers back first, and a second Ctrl-C landing in it killed the process
    by the signal (no exit code 130, whatever the sweep had recorded)."""
    if _EXIT_CODE:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(_EXIT_CODE[0])


atexit.register(_exit_now)

if __name__ == "__main__":
    try:  # Ctrl-C during the imports (a second or so) too: a message, not a traceback
        from pipeline.cli import leave_on_signals_with, main

        code = main(sys.argv[1:])
        _EXIT_CODE.append(code)
        leave_on_signals_with(code)  # a signal during the other exit handlers: this code
        sys.exit(code)
    except KeyboardInterrupt as exc:  # SIGTERM/SIGHUP arrive as watchdog.Terminated
        print("\ninterrupted", file=sys.stderr)
        _EXIT_CODE.append(getattr(exc, "exit_code", 130))
        sys.exit(_EXIT_CODE[-1])
