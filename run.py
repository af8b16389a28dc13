"""Command-line entry point: ``python run.py experiment=NAME [grid.PARAM=[...]] [results_dir=DIR]``.

See README.md for every option. Exit codes: 0 all tasks ok, 1 some tasks failed,
2 invalid configuration (nothing was run or written), 3 the sweep machinery crashed,
4 a damaged part file in the results folder (``python -m pipeline verify DIR/NAME --repair``),
130 interrupted.
"""

import sys

if __name__ == "__main__":
    try:  # Ctrl-C during the imports (a second or so) too: a message, not a traceback
        from pipeline.cli import main

        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt as exc:  # SIGTERM/SIGHUP arrive as watchdog.Terminated
        print("\ninterrupted", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 130))
