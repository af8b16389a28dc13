"""``python -m pipeline export RESULTS_DIR/NAME --to DIR``: a results folder as a Frictionless
Data Package (pipeline/report/export.py writes it). Exit 0 written, 2 bad arguments or nothing
to export, 3 the package could not be written (a full disk), 4 a damaged or foreign part file
(named, with the ``verify --repair`` command); nothing is written unless the exit is 0."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.exit_codes import EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_CRASHED
from pipeline.report.export import (DEFAULT_LICENSE, LICENSES, ExportError, default_author,
                                    export_package)
from pipeline.report.selection import SelectionError
from pipeline.selection_args import parse_selection_args
from pipeline.store.integrity import BadPartFile, is_results_folder


HELP = """Writes DIR/datapackage.json, DIR/data/NAME.parquet and/or .csv, README.md, CITATION.cff
and SHA256SUMS: the rows pipeline.load gives (one per task_id and row_index), with what
each column means, its unit, the grid and the provenance. Nothing is written unless it
succeeds (exit 0); exit 2 bad arguments, 3 could not write, 4 a damaged part file.

  RESULTS_DIR/NAME   the experiment's results folder, as run.py writes it
  --to DIR           where the package goes (outside the results folder)
  --format F         parquet, csv or both (default: both)
  --license L        the data's license (default: %s)
  --author NAME      an author for CITATION.cff, repeatable (default: git config user.name)
  experiment=NAME grid.PARAM=[...] params.PARAM=V ~grid.PARAM
                     only the points of that grid (the YAML's grid, these overrides on top),
                     as a sweep with those words would run them
  run_id=ID[,ID] code_id=ID[,ID] version=N[,N]|latest   (or [a,b])
                     only rows of these runs / this code / these experiment versions""" % (
    DEFAULT_LICENSE)


def main(argv: list[str]) -> int:
    """``python -m pipeline export RESULTS_DIR/NAME --to DIR [--format F] [SELECTION...]``."""

    usage = ("usage: python -m pipeline export RESULTS_DIR/NAME --to DIR "
             "[--format parquet|csv|both] [--license " + "|".join(LICENSES) + "] "
             "[--author NAME ...] [experiment=NAME] [grid.PARAM=[...]] [params.PARAM=V] "
             "[run_id=ID[,ID]] [code_id=ID[,ID]] [version=N[,N]|latest]")
    options = {"--to": None, "--format": "both", "--license": DEFAULT_LICENSE}
    authors, words, source = [], [], None
    args = list(argv)
    try:
        while args:
            word = args.pop(0)
            key, sep, value = word.partition("=")
            if key in (*options, "--author") and word.startswith("--"):
                if not sep:
                    if not args:
                        raise ExportError(f"{key} needs a value")
                    value = args.pop(0)
                if key == "--author":
                    authors.append(value)
                else:
                    options[key] = value
            elif word in ("-h", "--help"):
                print(f"{usage}\n\n{HELP}")
                return 0
            elif word.startswith("-") and not word.startswith("~"):
                raise ExportError(f"unknown option {word!r}")
            elif source is None and "=" not in word and not word.startswith("~"):
                source = word
            else:
                words.append(word)
        if source is None or options["--to"] is None:
            raise ExportError("give the experiment folder RESULTS_DIR/NAME and --to DIR")
        folder = Path(source.rstrip("/"))
        if not folder.is_dir():
            raise ExportError(f"no such results folder: {folder}")
        if not is_results_folder(folder):  # RESULTS_DIR itself, say: "no results for 'r2'"
            inside = sorted(str(sub) for sub in folder.iterdir() if is_results_folder(sub))
            raise ExportError(f"{folder} is not an experiment's results folder (RESULTS_DIR/NAME)"
                              + (f"; it holds {', '.join(inside)}: give one of them" if inside
                                 else ""))
        if Path(options["--to"]).resolve() == folder.resolve() or \
                folder.resolve() in Path(options["--to"]).resolve().parents:
            raise ExportError("--to must be outside the results folder (pandas would read the "
                              "exported Parquet file as results)")
        selection = parse_selection_args(folder.name, words)
        cov = export_package(folder.parent, folder.name, options["--to"], options["--format"],
                             selection, options["--license"], tuple(authors))
    except (ExportError, SelectionError) as exc:
        print(f"error: {exc}\n{usage}", file=sys.stderr)
        return 2
    except BadPartFile as exc:  # raised while reading, before anything is written
        print(f"error: {exc}\nnothing was exported", file=sys.stderr)
        return EXIT_BAD_STORE
    except OSError as exc:  # a full disk, a read-only --to: was a traceback
        print(f"error: could not export {source} to {options['--to']}: {exc.strerror or exc}"
              f"{f' ({exc.filename})' if exc.filename else ''}\nnothing was exported (an "
              "earlier package there is left as it was)", file=sys.stderr)
        from pipeline.store.manifest import not_writable_here

        # a --to this user cannot write (read-only, another's): bad input; a full disk: 3
        return EXIT_BAD_CONFIG if not_writable_here(exc) else EXIT_CRASHED
    for warning in cov["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if not authors:
        print(f"note: CITATION.cff names {default_author()!r} as the author "
              "(git config user.name); give --author NAME (repeatable) for the real ones",
              file=sys.stderr)
    print(f"exported {cov['rows']:,} rows ({cov['tasks']:,} tasks, {len(cov['runs'])} run(s), "
          f"code_id(s) {', '.join(cov['code_ids']) or 'none recorded'}) of '{folder.name}' to "
          f"{Path(options['--to']) / 'datapackage.json'}")
    if cov.get("scope_note"):  # the grid's points only: said, as report=true says it
        print(f"export: {cov['scope_note']}")
    return 0
