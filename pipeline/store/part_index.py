"""The part index ``_parts.jsonl``: one JSON line per part file written (name, rows, bytes,
sha256), appended before the part's rename (see :mod:`pipeline.store.integrity`), tidied by
compaction and repair; and the parts it records that are no longer on disk."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Iterable

PART_INDEX = "_parts.jsonl"
_INDEX_LOCK = threading.Lock()  # parts may be written from a background thread


def file_sha256(path: str | os.PathLike) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def record_part(folder: str | os.PathLike, name: str, written: str | os.PathLike, rows: int) -> None:
    """Append the index line of part ``name`` (whose bytes are in ``written``, e.g. the temp
    file about to be renamed to it), durably (fsync)."""
    written = Path(written)
    entry = {"part": name, "rows": int(rows), "bytes": written.stat().st_size,
             "sha256": file_sha256(written),
             "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    append_entries(folder, [entry])


def append_entries(folder: str | os.PathLike, entries: Iterable[dict]) -> None:
    """Append index lines as they are (e.g. copied from a compaction's staging folder, whose
    files were checked against them), durably (fsync)."""
    line = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
    if not line:
        return
    index = Path(folder) / PART_INDEX
    with _INDEX_LOCK:
        fd = os.open(index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # umask decides
        try:
            if os.fstat(fd).st_size and _last_byte(index) != b"\n":
                line = "\n" + line  # the previous append was torn by a kill: start afresh
            data = memoryview(line.encode())
            while data:  # a nearly full disk takes part of it; the next write raises ENOSPC
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1)


def read_index(folder: str | os.PathLike) -> dict[str, dict]:
    """Part name -> its latest index entry. Torn or garbled lines are skipped."""
    index = Path(folder) / PART_INDEX
    entries: dict[str, dict] = {}
    if not index.exists():
        return entries
    try:
        text = index.read_text(errors="replace")
    except OSError as exc:  # checksums unknown: parts are then decoded in full, as unindexed
        import warnings

        warnings.warn(f"cannot read the part index {index}: {exc.strerror or exc}; "
                      "checksums are not checked", stacklevel=2)
        return entries
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            entries[str(entry["part"])] = entry
        except (ValueError, KeyError, TypeError):
            continue
    return entries


def forget_parts(folder: str | os.PathLike, names: Iterable[str]) -> int:
    """Drop the index lines of ``names`` (parts removed by compaction or moved by repair);
    rewrites the index atomically. Returns how many entries were dropped."""
    folder = Path(folder)
    names = set(names)
    with _INDEX_LOCK:  # no append from this process may slip between the read and the replace
        entries = read_index(folder)
        keep = {n: e for n, e in entries.items() if n not in names}
        if len(keep) == len(entries):
            return 0
        tmp = folder / f".{PART_INDEX}.tmp"
        try:
            with open(tmp, "w") as fh:
                fh.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in keep.values())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, folder / PART_INDEX)
        except BaseException:  # a full disk: the old index stands, no temp file beside it
            tmp.unlink(missing_ok=True)
            raise
    return len(entries) - len(keep)


COMPACTION_INTENT = "_compaction.json"  # (pipeline.store.compaction.INTENT) a swap under way


def missing_parts(folder: str | os.PathLike) -> dict[str, int]:
    """Part name -> rows, for each part the index records but the folder does not hold.
    Not missing: a part whose temp file is still there (a writer killed between its index
    line and its rename: never published, its rows never stored), and any part while a
    compaction's swap is pending (it removes old files; its recovery tidies the index)."""
    folder = Path(folder)
    index = read_index(folder)
    if not index or (folder / COMPACTION_INTENT).exists():
        return {}
    on_disk = {p.name for p in folder.glob("part-*.parquet")}
    # A writer may rename its temp file in place between the listing and these checks: the
    # temp file first, then the part (the rename is atomic, so one of the two is seen).
    gone = [name for name in index if name not in on_disk
            and not (folder / f".{name}.tmp").exists() and not (folder / name).exists()]
    if not gone or (folder / COMPACTION_INTENT).exists():
        return {}
    # A compaction that committed and swapped meanwhile forgot its old parts in the index
    # before it removed its intent: only the lines still there count.
    index = read_index(folder)
    return {name: int(index[name].get("rows") or 0) for name in sorted(gone) if name in index}


def missing_parts_text(folder: str | os.PathLike, missing: dict[str, int]) -> str:
    """Why a table read with ``missing`` parts would be short, and what to do."""
    from pipeline.store.errors import QUARANTINE

    def some(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    names = sorted(missing)
    aside = Path(folder) / QUARANTINE
    moved = [name for name in names if aside.is_dir() and (aside / name).exists()]
    if moved:  # a verify --repair killed between moving the parts and rewriting the index
        gone = [name for name in names if name not in moved]
        return (f"{len(moved)} part file(s) recorded in {PART_INDEX} with "
                f"{sum(missing[n] for n in moved):,} row(s) are in {aside}/, not in {folder}: "
                f"{some(moved)}. A verify --repair moved them there and was stopped before it "
                "forgot them in the index"
                + (f"; {missing_parts_text(folder, {n: missing[n] for n in gone})}"
                   if gone else "")
                + f". Finish the repair with: python -m pipeline verify {folder} --repair")
    return (f"{len(names)} part file(s) recorded in {PART_INDEX} with {sum(missing.values()):,} "
            f"row(s) are no longer in {folder}: {some(names)} (deleted or moved by hand? or, in a "
            "folder written before 2026-11-28, never published by a writer killed mid-write); "
            "the table would lack their rows. Put them back, or forget them with: python -m "
            f"pipeline verify {folder} --repair, then rerun the sweep to recompute their tasks")
