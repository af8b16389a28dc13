"""``python -m pipeline compact RESULTS_DIR/NAME``: rewrite a result folder into few large part
files (the store logic is :mod:`pipeline.store.compaction`). Exit 0 done (or nothing to do),
2 bad arguments, not a results folder (nothing locked or written), a sweep holds the folder
or its filesystem has no file locks, 3 the files could not be written (a full disk;
said whether anything changed), 4 a damaged or foreign part file (named, with the
``verify --repair`` command; nothing is changed)."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.store.compaction import TARGET_MIB, TARGET_ROWS, compact


def main(argv: list[str]) -> int:
    """``python -m pipeline compact RESULTS_DIR/NAME [--target-rows N] [--target-mib M]``."""
    import argparse

    from pipeline.exit_codes import EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_CRASHED
    from pipeline.store.integrity import BadPartFile
    from pipeline.store.manifest import StoreLocked

    parser = argparse.ArgumentParser(prog="python -m pipeline compact",
                                     description="rewrite an experiment's result folder into "
                                                 "few large part files (atomic, idempotent)")
    parser.add_argument("folder", help="RESULTS_DIR/NAME, the experiment's result folder")
    parser.add_argument("--target-rows", type=int, default=TARGET_ROWS,
                        help=f"rows per new file (default {TARGET_ROWS:,})")
    parser.add_argument("--target-mib", type=float, default=TARGET_MIB,
                        help=f"in-memory MiB per new file (default {TARGET_MIB})")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    folder = Path(args.folder)
    if args.target_rows < 1 or not args.target_mib > 0:
        print("error: --target-rows must be >= 1 and --target-mib > 0", file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"error: {folder} is not a folder (give RESULTS_DIR/NAME, e.g. results/composition)",
              file=sys.stderr)
        return 2
    from pipeline.store.integrity import experiment_folders

    nested = experiment_folders(folder)
    if nested:  # RESULTS_DIR instead of RESULTS_DIR/NAME: "nothing to compact" misled
        print(f"error: {folder} holds experiment folders ({', '.join(nested)}): compact each "
              f"of them, e.g. python -m pipeline compact {folder / nested[0]}", file=sys.stderr)
        return 2
    from pipeline.store.integrity import is_results_folder, not_a_results_folder

    if not is_results_folder(folder):  # said "nothing to compact" and left a .lock in it
        print(not_a_results_folder(folder), file=sys.stderr)
        return 2
    try:
        result = compact(folder, args.target_rows, args.target_mib)
    except StoreLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BadPartFile as exc:  # found while reading, before anything was staged or swapped
        print(f"error: {exc}\nnothing was compacted", file=sys.stderr)
        return EXIT_BAD_STORE
    except OSError as exc:  # a full disk, a read-only folder, a filesystem without locks
        from pipeline.store.compaction import DamagedIntent, read_intent
        from pipeline.store.manifest import NO_LOCKS_ERRNOS, not_writable_here, why_not_locked

        try:
            untouched = read_intent(folder) is None
        except DamagedIntent:  # torn as the disk failed: verify --repair sets it aside
            untouched = False
        if untouched:
            state = "nothing was changed: the folder holds its old files, as before"
        else:
            state = ("the new files were committed; the next sweep, compaction or "
                     f"`python -m pipeline verify {folder} --repair` finishes the swap")
        if exc.errno in NO_LOCKS_ERRNOS:  # compaction must exclude sweeps: it takes their lock
            state = f"{why_not_locked(exc)[0]}; {state}"
        print(f"error: could not compact {folder}: {exc}\n{state}", file=sys.stderr)
        # a folder this user cannot change (read-only, no locks), untouched: bad input, as
        # for verify --repair; a full disk, or a swap under way: exit 3
        no_locks = exc.errno in NO_LOCKS_ERRNOS
        return (EXIT_BAD_CONFIG if (no_locks or not_writable_here(exc)) and untouched
                else EXIT_CRASHED)
    if result.recovered:
        print(f"an interrupted compaction was {result.recovered}")
    if result.files_before == 0:
        print(f"{folder}: no part files, nothing to compact")
        return 0
    verb = "compacted" if result.rewritten else "already compact, left as is"
    print(f"{folder}: {verb}\n  files: {result.files_before:,} -> {result.files_after:,}\n"
          f"  rows:  {result.rows_before:,} -> {result.rows_after:,}"
          + (f" ({result.rows_before - result.rows_after:,} duplicate or superseded rows dropped)"
             if result.rows_after != result.rows_before else ""))
    return 0
