"""The exit codes of ``run.py`` and ``python -m pipeline`` (README, "Exit codes")."""

EXIT_OK = 0
EXIT_FAILED_TASKS = 1  # some tasks failed (stored with their errors)
EXIT_BAD_CONFIG = 2  # bad input: nothing was run or written
EXIT_CRASHED = 3  # the sweep machinery failed (a lost scheduler, no workers); parts kept
EXIT_BAD_STORE = 4  # a damaged part file in the results folder: python -m pipeline verify --repair
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGTERM and SIGHUP: 143 and 129)
