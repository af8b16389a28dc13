"""``python -m pipeline verify RESULTS_DIR/NAME [--repair]``: check every part file of a
result folder, and move damaged or foreign ones aside.

Checks each file that ``pandas.read_parquet(RESULTS_DIR/NAME)`` would read: the Parquet
footer, the schema against the experiment's declared one, and the row count and sha256
recorded when the part was written (``_parts.jsonl``). ``--repair`` moves every bad file to
``RESULTS_DIR/NAME/_quarantine/`` (it never deletes); rerunning the sweep then recomputes
exactly their tasks.

A run manifest (``_manifest.json``) that does not parse is reported too, and ``--repair``
moves it aside as well: the results do not depend on it, and the next sweep starts a new one.

A part (or the manifest) this user may not open, for its file permissions, is reported as
unreadable, not damaged: ``--repair`` leaves it where it is (and in the index), and says to
fix its permissions.

A folder that is not a results folder at all (no manifest, part index or result part: see
``integrity.is_results_folder``) is refused with exit 2, and nothing is locked or moved.

Exit codes: 0 every file good (or, with ``--repair``, every bad file moved aside);
2 bad usage, not a results folder, another sweep holds the folder, or ``--repair`` cannot
lock it (a read-only folder, a filesystem without file locks) or cannot write in it (a
read-only folder, another user's); 3 the lock file cannot be written, or the repair fails
midway (a full disk, an I/O error): said in one line, the folder left as a plain verify
describes it (a failed move or index rewrite is undone), and a rerun of ``--repair`` goes on;
4 bad files found (not repaired), part files the index lost (not repaired), or files this
user may not read (with or without ``--repair``, which leaves them).

The index (``_parts.jsonl``) is itself checked: every part a sweep or compaction names is
recorded in it before the file appears, so a good part written since the index began but
absent from it means the index lost lines; a part file that is a byte-for-byte copy of an
indexed one (its rows read twice by ``pandas.read_parquet``) is foreign.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from pipeline.exit_codes import EXIT_BAD_CONFIG, EXIT_BAD_STORE, EXIT_CRASHED, EXIT_OK

USAGE = "usage: python -m pipeline verify RESULTS_DIR/NAME [--repair]"
UNRECORDED_TEXT = ("Part files written since the part index (_parts.jsonl) began are not in it: "
                   "the index lost their lines (cut or edited), or they were put back from "
                   "_quarantine/ or copied in from another folder. If lines were lost, a part "
                   "file deleted since would go unnoticed, and the table would look whole.")


class _CannotLock(Exception):
    """The folder's lock could not be had, or a repair step failed; the reason is printed,
    ``code`` is the exit code."""

    def __init__(self, code: int):
        self.code = code


def _lock(folder: Path, when_busy: str):
    """The folder's :class:`SweepLock`, taken (a repair changes files a sweep writes), or
    :class:`_CannotLock` once the reason is printed; ``when_busy`` is the advice when a sweep
    holds it."""
    from pipeline.store.manifest import NO_LOCKS_ERRNOS, StoreLocked, SweepLock, why_not_locked

    try:
        return SweepLock(folder, holder="repair").__enter__()
    except StoreLocked as exc:
        print(f"error: {exc}; {when_busy}", file=sys.stderr)
        raise _CannotLock(EXIT_BAD_CONFIG) from None
    except OSError as exc:  # ENOLCK, a read-only mount, a full disk: was a traceback
        advice, folders_fault = why_not_locked(exc)
        why = f" ({advice})" if exc.errno in NO_LOCKS_ERRNOS else ""  # the others say it all
        print(f"error: cannot lock {folder} to repair it: {exc.strerror or exc}{why}; "
              "nothing was changed", file=sys.stderr)
        raise _CannotLock(EXIT_BAD_CONFIG if folders_fault else EXIT_CRASHED) from None


def main(argv: list[str]) -> int:
    try:
        return _verify(argv)
    except _CannotLock as exc:
        return exc.code


def _verify(argv: list[str]) -> int:
    from pipeline.store.integrity import (MANIFEST, QUARANTINE, folder_experiment, quarantine,
                                          verify_store)

    args = [a for a in argv if a != "--repair"]
    repair = len(args) != len(argv)
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return EXIT_BAD_CONFIG
    folder = Path(args[0])
    if not folder.is_dir():
        print(f"error: {folder} is not a results folder (expected RESULTS_DIR/NAME, e.g. "
              f"results/composition)\n{USAGE}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from pipeline.store.integrity import experiment_folders

    nested = experiment_folders(folder)
    if nested:  # RESULTS_DIR instead of RESULTS_DIR/NAME: --repair moved whole experiments
        print(f"error: {folder} holds experiment folders ({', '.join(nested)}), not result "
              f"parts: verify each of them, e.g. python -m pipeline verify {folder / nested[0]}"
              f"\n{USAGE}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from pipeline.store.integrity import is_results_folder, not_a_results_folder

    if not is_results_folder(folder):  # --repair moved a plain folder's every file aside
        print(not_a_results_folder(folder), file=sys.stderr)
        return EXIT_BAD_CONFIG
    experiment = folder_experiment(folder)
    pending = _pending_compaction(folder, repair)
    if pending is not None:
        return pending
    report = verify_store(folder, experiment)
    print(render(report, experiment is not None))
    if report.ok:
        return EXIT_OK
    if not repair:
        bad = len(report.bad) + (report.manifest is not None)
        if report.missing:
            from pipeline.store.integrity import missing_parts_text

            print("\n" + missing_parts_text(folder, report.missing), file=sys.stderr)
        if bad:
            print(f"\n{bad} bad file(s). Move them to {folder / QUARANTINE}/ with:\n"
                  f"  python -m pipeline verify {folder} --repair\n"
                  + _rerun_advice(report.held_tasks, bad), file=sys.stderr)
        if report.unreadable:
            print("\n" + _unreadable_text(report.unreadable, repair=False), file=sys.stderr)
        if report.unrecorded:
            print(f"\n{UNRECORDED_TEXT} Record them with:\n  python -m pipeline verify {folder} "
                  "--repair\nthen check the stored counts against your sweeps (python -m "
                  "pipeline status), or rerun the sweep: it recomputes whatever is not there.",
                  file=sys.stderr)
        return EXIT_BAD_STORE
    again = {}

    def repair_now(f):  # checked again under the lock
        from pipeline.store.integrity import record_unrecorded

        again["report"] = verify_store(f, experiment)
        moved = again["moved"] = quarantine(again["report"])
        again["recorded"] = record_unrecorded(again["report"])
        _record_repair(f, again["report"], moved)
        return moved

    def left_after():  # what a failed repair_now leaves, for its error line
        report = again.get("report")
        if report is None:
            return "nothing was changed"
        if "moved" in again:  # quarantine done; recording the unrecorded parts failed
            done = (f"the bad files were moved to {QUARANTINE}/ and forgotten in the index, "
                    "the missing parts too; " if again["moved"] or report.missing else "")
            return done + "the parts not in the index are not all recorded: verify lists them"
        # quarantine puts back what it moved; a move it could not undo is a missing part
        stuck = [name for name, _ in report.bad if not (folder / name).exists()]
        if report.manifest is not None and not (folder / MANIFEST).exists():
            stuck.append(MANIFEST)
        if not stuck:
            return "nothing was changed"
        return (f"{len(stuck)} file(s) moved to {QUARANTINE}/ could not be put back "
                f"({', '.join(stuck[:3])}): verify lists them as missing, the rerun forgets them")

    moved = _locked(folder, repair_now, left_after)
    if again["recorded"]:
        print(f"{len(again['recorded'])} part(s) recorded in the index as they are now: "
              f"{', '.join(again['recorded'][:3])}"
              + (f" and {len(again['recorded']) - 3} more" if len(again["recorded"]) > 3 else "")
              + "; a part deleted before this repair is not known to it: rerun the sweep to "
              "recompute whatever is not there")
    if again["report"].missing:
        missing = again["report"].missing
        print(f"{len(missing)} missing part(s) forgotten in the index; rerun the sweep (the same "
              f"command) to recompute their {sum(missing.values()):,} row(s)")
    for name, target in moved:
        print(f"moved {name} -> {target}")
    # only parts that held tasks need a rerun (a stray file or folder held none)
    held = set(again["report"].held_tasks)
    parts = [name for name, _ in moved if name in held]
    copies = [name for name, _ in moved if name in again["report"].copies]
    others = [name for name, _ in moved
              if name != MANIFEST and name not in held and name not in copies]
    if parts:
        print(f"{len(parts)} part file(s) quarantined; rerun the sweep (the same command) to "
              "recompute their tasks")
    if others:
        print(f"{len(others)} file(s) quarantined that held no tasks of this experiment: "
              "nothing to recompute")
    if copies:
        print(f"{len(copies)} copy(ies) of indexed part files quarantined: their rows are in "
              "the parts they copy, nothing to recompute")
    if parts or again["report"].missing:
        note = _failed_only_note(folder)
        if note:
            print(note)
    if len(parts) + len(others) + len(copies) < len(moved):
        print("the damaged run manifest was quarantined; the next sweep starts a new one")
    if again["report"].unreadable:  # its permissions, not damage: left as it is
        print(_unreadable_text(again["report"].unreadable, repair=True), file=sys.stderr)
        return EXIT_BAD_STORE
    return EXIT_OK


def _failed_only_note(folder: Path) -> str:
    """After a repair that asks for a rerun: the tasks now stored only as failed. A removed
    part may have held their successful retries (``retry_failed=true``); their older failed
    rows then count as the latest attempt, and the same command skips them ("0 to run")."""
    from pipeline.store.parquet import stored_counts_by_version

    try:
        failed = sum(f for _, f in stored_counts_by_version(folder).values())
    except Exception:  # what is left unreadable is verify's to report, not this note's
        return ""
    if not failed:
        return ""
    return (f"{failed:,} task(s) in the folder are now stored only as failed (a removed part "
            "may have held their retries): the rerun skips them unless given "
            "retry_failed=true")


def _record_repair(folder: Path, report, moved) -> None:
    """Tell the manifest which parts with tasks this repair took out of the store, for
    `status` (best effort: the repair is done, and its own lines say what to rerun)."""
    import time

    from pipeline.store.manifest import record_repair

    held = set(report.held_tasks)
    set_aside = [name for name, _ in moved if name in held]
    if not set_aside and not report.missing:
        return
    try:
        record_repair(folder, {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "quarantined": set_aside, "forgotten": sorted(report.missing),
                               "forgotten_rows": int(sum(report.missing.values()))})
    except Exception:  # a damaged manifest (set aside just now, too) or a full disk
        pass


def _rerun_advice(held_tasks: list[str], bad: int) -> str:
    """What to do after ``--repair`` of ``bad`` files, of which the parts ``held_tasks`` held
    tasks: a rerun recomputes those; a stray file, a folder or the manifest held none."""
    if not held_tasks:
        return "None of them held tasks of this experiment: nothing to recompute."
    if len(held_tasks) == bad:
        return "then rerun the sweep to recompute their tasks."
    names = ", ".join(held_tasks[:3]) + (f" and {len(held_tasks) - 3} more"
                                         if len(held_tasks) > 3 else "")
    return f"then rerun the sweep to recompute the tasks of {names}."


def _unreadable_text(unreadable: list[tuple[str, str]], repair: bool) -> str:
    """What to do about files this user may not open (see ``render``)."""
    from pipeline.store.integrity import NOT_DAMAGED

    names = ", ".join(name for name, _ in unreadable[:3]) + (
        f" and {len(unreadable) - 3} more" if len(unreadable) > 3 else "")
    return (f"{len(unreadable)} file(s) cannot be read (permission denied): {names}. "
            + ("They were left where they are: " if repair else "") + NOT_DAMAGED)


def _pending_compaction(folder: Path, repair: bool) -> int | None:
    """A compaction killed after its commit leaves both file sets in the folder until the
    next sweep or compaction finishes the swap: ``pipeline.load`` reads the new set (from
    the intent), but a plain Parquet reader reads both. Reported as a problem; ``--repair``
    finishes the swap, then verification goes on. None when nothing is pending."""
    from pipeline.store.compaction import (INTENT, DamagedIntent, read_intent, recover,
                                           set_aside_damaged_intent)

    try:
        if read_intent(folder) is None:
            return None
    except DamagedIntent as exc:
        if not repair:
            print(f"verify {folder}: {exc}", file=sys.stderr)
            return EXIT_BAD_STORE
        moved, forgotten = _locked(folder, set_aside_damaged_intent, _compaction_left)
        print(f"the damaged compaction commit was set aside: {', '.join(map(str, moved))}; "
              "every part file was kept (pipeline.load keeps one row per task). To leave one "
              f"file set for a raw read: python -m pipeline compact {folder}")
        if forgotten:
            print(f"{len(forgotten)} old part file(s) its swap had already removed were forgotten "
                  f"in the index: their {sum(forgotten.values()):,} row(s) are in its compacted "
                  "files, all there and intact")
        return None
    if not repair:
        print(f"verify {folder}: a compaction was interrupted while it swapped files "
              f"({INTENT} is there). pipeline.load reads the new set, but "
              "pandas.read_parquet reads old and new together until the swap is finished.\n"
              f"Finish it with: python -m pipeline verify {folder} --repair (a sweep or "
              "`python -m pipeline compact` on the folder finishes it too)", file=sys.stderr)
        return EXIT_BAD_STORE
    print(f"the interrupted compaction was finished "
          f"({_locked(folder, recover, _compaction_left)})")
    return None


def _compaction_left() -> str:
    # recover and set_aside_damaged_intent are made to be rerun after a kill mid-way
    return "the interrupted compaction is not settled yet; the rerun goes on from where it stopped"


def _locked(folder: Path, step, left, when_busy: str = "repair when it has finished"):
    """``step(folder)`` under the folder's lock (see :func:`_lock`). An OSError of the step
    (a full disk: was a traceback) is one line, with ``left()``, what the failure left,
    and :class:`_CannotLock`: exit 2 for a folder this user cannot write, else 3."""
    from pipeline.store.manifest import not_writable_here

    lock = _lock(folder, when_busy)
    try:
        return step(folder)
    except OSError as exc:
        rerun = f"python -m pipeline verify {folder} --repair"
        if not_writable_here(exc):
            advice = f"make the folder writable (or run as its owner), then rerun {rerun}"
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
            advice = f"free space, then rerun {rerun}"
        else:  # EIO, ESTALE: a fault of the moment
            advice = f"rerun {rerun} once the filesystem answers again"
        print(f"error: cannot repair {folder}: {exc.strerror or exc} ({advice}); {left()}",
              file=sys.stderr)
        raise _CannotLock(EXIT_BAD_CONFIG if not_writable_here(exc) else EXIT_CRASHED) from None
    finally:
        lock.__exit__(None, None, None)


def render(report, schema_checked: bool = True) -> str:
    from pipeline.store.integrity import MANIFEST

    # every part-*.parquet file is counted (a foreign one was left out of the count), and
    # unless all are good, how many are good, corrupt, foreign, unreadable
    good = len(report.good) + len(report.unindexed)
    head = f"verify {report.folder}: {report.part_files} part file(s)"
    if good == report.part_files:
        head += f", {report.rows:,} readable rows"
    else:
        unreadable = len([name for name, _ in report.unreadable if name != MANIFEST])
        head += ": " + ", ".join(
            [f"{good} good ({report.rows:,} readable rows)"]
            + [f"{n} {label}" for label, n in (("corrupt", len(report.corrupt)),
                                               ("foreign", len(report.foreign_parts)),
                                               ("unreadable", unreadable)) if n])
    strays = len(report.foreign) - len(report.foreign_parts)
    if strays:
        head += f"; {strays} other file(s) or folder(s), not part files"
    lines = [head + ("" if schema_checked else " (unknown experiment: schema not checked)"),
             f"  good:    {len(report.good) + len(report.unindexed)}"
             + (f" ({len(report.unindexed)} without a recorded checksum, decoded in full)"
                if report.unindexed else "")]
    for label, items in (("corrupt", report.corrupt), ("foreign", report.foreign)):
        lines.append(f"  {label}: {len(items)}" + (" " * (7 - len(label))))
        lines += [f"    {name}: {why}" for name, why in items]
    if report.unreadable:
        lines.append(f"  unreadable: {len(report.unreadable)} (permission denied: not damaged; "
                     "fix the permissions, --repair leaves them)")
        lines += [f"    {name}: {why}" for name, why in report.unreadable]
    if report.manifest is not None:
        lines.append(f"  the run manifest {MANIFEST} is damaged: {report.manifest} (the part "
                     "files do not depend on it; --repair moves it aside)")
    if report.unrecorded:
        lines.append(f"  not in the index: {len(report.unrecorded)} (good, named as written since "
                     "the index began, without an entry: lost lines, or put back, or copied in)")
        lines += [f"    {name}" for name in report.unrecorded[:10]]
    if report.missing:
        lines.append(f"  missing: {len(report.missing)} (recorded in the index, not on disk: "
                     f"{sum(report.missing.values()):,} rows the table lacks)")
        lines += [f"    {name}: {rows:,} rows" for name, rows in sorted(report.missing.items())[:10]]
    return "\n".join(line.rstrip() for line in lines)
