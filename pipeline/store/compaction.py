"""Compaction: rewrite a result folder into few large part files, atomically.

The commit protocol (as in Delta Lake or Iceberg, with the folder itself as the table):

1. under the store's lock, read every part file and keep one row per (task_id, row_index)
   exactly as :func:`pipeline.store.parquet.load` does (:func:`deduplicate_table`);
2. write the new files, through :func:`write_part_file`, into a hidden staging folder
   ``_compacting-<id>/`` (invisible to readers: its name starts with ``_``);
3. commit: write the intent ``_compaction.json`` (old files, new files) atomically. From this
   moment the new set is the table; before it, the old set is;
4. swap: rename each staged file into the folder, delete each old file, then the intent and
   the staging folder.

A kill before step 3 leaves the old set plus a staging folder, which the next open deletes
(roll back). A kill after step 3 leaves the intent, and the next open finishes the swap (roll
forward); until then :func:`committed_part_files` resolves the new set from the intent, so
``pipeline.load`` reads exactly the new set at any moment. "The next open" is the next
compaction or sweep on the folder (both hold the lock), see :func:`recover`.

A committed new set with files missing (its staging folder deleted by hand, or lost by the
filesystem) is never rolled forward: that would delete the old files for files that are not
there. While the old set is whole it stays the table (roll back); if it is not either, every
file that exists is kept and ``load`` keeps one row per task and row, and what neither set
still holds is recomputed by the next sweep. A damaged intent is :class:`DamagedIntent`
(exit 4); ``verify --repair`` sets it aside with :func:`set_aside_damaged_intent`, which
first brings the part index up to date with what the swap did (see :func:`_settle_index`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.store.integrity import BadPartFile


INTENT = "_compaction.json"
STAGING_PREFIX = "_compacting-"
TARGET_ROWS = 1_000_000
TARGET_MIB = 128
PAUSE_ENV = "PIPELINE_COMPACT_PAUSE_AT"  # tests: sleep at a step so a kill lands there


def _pause_at(step: str) -> None:
    """Test hook: with PIPELINE_COMPACT_PAUSE_AT=step, announce the step and sleep (to be killed)."""
    if os.environ.get(PAUSE_ENV) == step:
        print(f"compaction paused at {step}", flush=True)
        time.sleep(120)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DamagedIntent(BadPartFile):
    """A compaction commit (``_compaction.json``) that does not parse: which files are the
    table cannot be told from it. Raised like a bad part (exit 4, the repair command) instead
    of a JSONDecodeError traceback from every command."""

    problem = "is damaged"

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path, self.reason = Path(path), reason
        folder = self.path.parent
        RuntimeError.__init__(
            self, f"the compaction commit {self.path} {self.problem} ({reason}).\nSet it aside "
            f"with: python -m pipeline verify {folder} --repair\n(every part file is kept, so "
            f"no row is lost; then python -m pipeline compact {folder} leaves one file set)")


def read_intent(path: str | os.PathLike) -> dict | None:
    """The pending compaction's commit, or None; :class:`DamagedIntent` if it does not parse."""
    file = Path(path) / INTENT
    try:
        text = file.read_text()
    except FileNotFoundError:
        return None
    try:
        intent = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DamagedIntent(file, f"not valid JSON: {exc}") from None
    names = lambda key: (isinstance(intent.get(key), list)  # noqa: E731
                         and all(isinstance(n, str) and "/" not in n for n in intent[key]))
    if not (isinstance(intent, dict) and isinstance(intent.get("staging"), str)
            and intent["staging"].startswith(STAGING_PREFIX) and "/" not in intent["staging"]
            and names("old") and names("new")):  # no name may lead out of the folder
        raise DamagedIntent(file, "not a compaction commit: staging, old and new expected")
    return intent


def _missing_new(path: Path, intent: dict) -> list[str]:
    staging = path / intent["staging"]
    return [n for n in intent["new"] if not (path / n).exists() and not (staging / n).exists()]


def committed_part_files(path: str | os.PathLike) -> list[Path] | None:
    """The part files of a folder whose compaction committed but did not finish swapping:
    each new file where it is now (folder or staging). None when no compaction is pending.
    With new files missing, what :func:`recover` will keep: the old set while it is whole,
    else every file there is."""
    path = Path(path)
    intent = read_intent(path)
    if intent is None:
        return None
    staging = path / intent["staging"]
    if _missing_new(path, intent):
        old = [path / n for n in intent["old"] if (path / n).exists()]
        if len(old) == len(intent["old"]):
            return old
        return old + [f for n in intent["new"] for f in (path / n, staging / n) if f.exists()]
    files = []
    for name in intent["new"]:
        moved = path / name
        files.append(moved if moved.exists() else staging / name)
    return files


def recover(path: str | os.PathLike) -> str | None:
    """Finish or undo an interrupted compaction; call with the store's lock held.

    Returns "rolled forward", "rolled back", a longer account when the committed set had
    files missing, or None (nothing to do)."""
    path = Path(path)
    if not path.is_dir():
        return None
    intent = read_intent(path)
    if intent is not None:
        if _missing_new(path, intent):
            return _undo(path, intent)
        _swap(path, intent)
        return "rolled forward"
    stale = [d for d in path.glob(STAGING_PREFIX + "*") if d.is_dir()]
    for d in stale:
        shutil.rmtree(d, ignore_errors=True)
    return "rolled back" if stale else None


def _undo(path: Path, intent: dict) -> str:
    """A committed new set with files missing: never finished (that deleted the old files for
    nothing). The old set, while whole, stays the table and the new files (copies of its rows)
    go; otherwise every file there is stays, the staged ones moved in beside the others."""
    from pipeline.store.integrity import forget_parts

    staging = path / intent["staging"]
    missing = _missing_new(path, intent)
    gone = [n for n in intent["old"] if not (path / n).exists()]
    if not gone:
        for name in intent["new"]:
            (path / name).unlink(missing_ok=True)
        forget_parts(path, intent["new"])
        outcome = (f"rolled back: {len(missing)} of its {len(intent['new'])} new file(s) were "
                   "missing, so the old files, all there, were kept")
    else:
        for name in intent["new"]:
            if (staging / name).exists():
                os.replace(staging / name, path / name)
        _reindex(path, {"new": intent["new"], "old": gone})
        outcome = (f"left as found: {len(missing)} new and {len(gone)} old file(s) were missing, "
                   "so neither set was whole; every file there was kept (pipeline.load keeps "
                   "one row per task), and the next sweep recomputes any task they lost")
    _fsync_dir(path)
    (path / INTENT).unlink(missing_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(path)
    return outcome


def set_aside_damaged_intent(path: str | os.PathLike) -> tuple[list[Path], dict[str, int]]:
    """``verify --repair`` of a :class:`DamagedIntent`: move it and its staging folders to
    ``_quarantine/`` (never deleting). Every part file stays, old and new, so no row is lost
    and ``load`` keeps one per task; ``compact`` then leaves one file set. First the part index
    follows what the swap did (:func:`_settle_index`): else the old parts it had removed read
    as missing, lost rows to recompute, though their rows are in the new files. Call with the
    lock held. Returns the new paths, and the old parts forgotten (name -> rows)."""
    from pipeline.store.integrity import QUARANTINE

    path = Path(path)
    target = path / QUARANTINE
    target.mkdir(exist_ok=True)
    moved, forgotten = [], {}
    staged = sorted(d for d in path.glob(STAGING_PREFIX + "*") if d.is_dir())
    for staging in staged:  # before the intent goes: a repair killed meanwhile starts afresh
        forgotten.update(_settle_index(path, staging))
    for item in [f for f in (path / INTENT, *staged) if f.exists()]:  # re-read under the lock
        dest, n = target / item.name, 1
        while dest.exists():
            dest, n = target / f"{item.name}.{n}", n + 1
        os.replace(item, dest)
        moved.append(dest)
    _fsync_dir(path)
    return moved, forgotten


def _settle_index(path: Path, staging: Path) -> dict[str, int]:
    """The part index of ``path`` after a swap from ``staging`` whose intent is unreadable:
    the new files it moved in are indexed (their lines from the staging folder's own index,
    where ``write_part_file`` recorded them, for each file whose bytes still match); and, if
    every new file is in the folder and intact, the indexed parts no longer on disk are
    forgotten: a commit lists every part in the folder as old (a compaction with a part
    missing never commits), the new files hold each of their rows, and the swap removes old
    files only once every new file is in. A part indexed after the compaction started is
    never among them. If the new set is not whole there, nothing is forgotten: a gone part's
    rows may be nowhere else, and verify reports it missing. Returns name -> rows forgotten."""
    from pipeline.store.part_index import append_entries, file_sha256, forget_parts, read_index

    stamp = staging.name[len(STAGING_PREFIX):]
    prefix = f"part-{stamp}-compacted-"
    new = read_index(staging)
    names = [f"{prefix}{seq:06d}.parquet" for seq in range(len(new))]
    seen = {f.name for d in (path, staging) for f in d.glob(prefix + "*.parquet")}
    if not new or sorted(new) != names or not seen <= set(names):
        return {}  # which files the new set is cannot be told: leave the index as it is

    def intact(name: str) -> bool:
        entry, file = new[name], path / name
        try:
            return (file.stat().st_size == entry.get("bytes")
                    and file_sha256(file) == entry.get("sha256"))
        except OSError:  # not there (still staged), or unreadable: not known intact
            return False

    moved_in = [name for name in names if intact(name)]
    index = read_index(path)
    append_entries(path, [new[n] for n in moved_in if n not in index])
    if len(moved_in) < len(names):
        return {}
    started = stamp[:16]  # %Y%m%dT%H%M%SZ, as written_at without its separators
    gone = {name: int(entry.get("rows") or 0) for name, entry in index.items()
            if name not in new and not (path / name).exists()
            and not (path / f".{name}.tmp").exists()
            and str(entry.get("written_at", "~")).replace("-", "").replace(":", "") <= started}
    forget_parts(path, gone)
    return gone


def _swap(path: Path, intent: dict) -> None:
    staging = path / intent["staging"]
    # Indexed before they appear, as a sweep's parts are: verify reads a part named since the
    # index began but without an entry as one the index lost. (Entries of new files are never
    # "missing" while the intent stands; an undo forgets them.)
    from pipeline.store.part_index import append_entries, read_index

    staged, known = read_index(staging), read_index(path)
    append_entries(path, [staged[name] for name in intent["new"]
                          if name in staged and name not in known and (staging / name).exists()])
    for i, name in enumerate(intent["new"]):
        if (staging / name).exists():
            os.replace(staging / name, path / name)
        if i == 0:
            _pause_at("swapping")
    for i, name in enumerate(intent["old"]):
        (path / name).unlink(missing_ok=True)
        if i == 0:
            _pause_at("removing")
    _fsync_dir(path)
    _reindex(path, intent)
    (path / INTENT).unlink(missing_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(path)


def _newest_version(table) -> int | None:
    """The newest experiment version among ``table``'s rows (None without any)."""
    import pyarrow.compute as pc

    if "experiment_version" not in table.column_names or not table.num_rows:
        return None
    return pc.max(table["experiment_version"]).as_py()


def _newest_version_metadata(table, newest: int | None | str = "from the rows"):
    """The schema metadata's ``version`` is the newest experiment version among the rows
    (``newest``: given, when ``table`` is a part of them): the unified schema kept the oldest
    part's, and a file labelled with an old version has its declared types left unchecked by
    ``verify`` (older versions may differ by design)."""
    meta = dict(table.schema.metadata or {})
    if newest == "from the rows":
        newest = _newest_version(table)
    if b"version" in meta and newest is not None:
        meta[b"version"] = str(newest).encode()
        table = table.replace_schema_metadata(meta)
    return table


def _reindex(path: Path, intent: dict) -> None:
    """The part index (``_parts.jsonl``, for ``verify``) follows the swap: the new files'
    checksums in, the old files out. Idempotent, so a recovered swap may run it again."""
    import pyarrow.parquet as pq

    from pipeline.store.integrity import forget_parts, read_index, record_part

    known = read_index(path)
    for name in intent["new"]:
        if name not in known and (path / name).exists():
            record_part(path, name, path / name, pq.read_metadata(path / name).num_rows)
    forget_parts(path, intent["old"])


@dataclass
class CompactionResult:
    files_before: int
    files_after: int
    rows_before: int
    rows_after: int
    rewritten: bool
    recovered: str | None = None


def files_for(rows: int, nbytes: float, target_rows: int = TARGET_ROWS,
              target_mib: float = TARGET_MIB) -> tuple[int, int]:
    """(rows per file, files) that ``rows`` rows of ``nbytes`` in memory are written as: at
    most ``target_rows`` rows and about ``target_mib`` MiB in memory per file."""
    bytes_per_row = max(1.0, nbytes / max(1, rows))
    per_file = int(max(1, min(target_rows, target_mib * 2**20 / bytes_per_row)))
    return per_file, max(1, -(-rows // per_file))


def files_after_compaction(path: str | os.PathLike, target_rows: int = TARGET_ROWS,
                           target_mib: float = TARGET_MIB) -> tuple[int, int, int] | None:
    """(part files now, their bytes on disk, files after ``compact`` at most), from the
    Parquet footers alone (rows, uncompressed sizes; duplicates counted, so an upper bound);
    None if a part cannot be read now (moved by a repair or a compaction meanwhile)."""
    import pyarrow.parquet as pq

    from pipeline.store.parquet import part_files

    parts = part_files(path)
    rows = nbytes = size = 0
    try:
        for part in parts:
            meta = pq.ParquetFile(part).metadata
            rows += meta.num_rows
            nbytes += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            size += part.stat().st_size
    except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
        return None
    return len(parts), size, files_for(rows, nbytes, target_rows, target_mib)[1]


def compact(path: str | os.PathLike, target_rows: int = TARGET_ROWS,
            target_mib: float = TARGET_MIB) -> CompactionResult:
    """Rewrite ``path`` (one experiment's folder) into files of about ``target_rows`` rows or
    ``target_mib`` MiB (in memory), keeping one row per (task_id, row_index) as ``load`` does.
    Takes the store's lock (raises StoreLocked if a sweep holds it). Idempotent: a folder that
    is already compact (no duplicate rows, no more files than the target size needs) is left
    untouched."""
    from pipeline.store.manifest import SweepLock
    from pipeline.store.parquet import clean_temp_files, new_run_id, part_files, write_part_file

    path = Path(path)
    with SweepLock(path, holder="compaction"):
        recovered = recover(path)
        clean_temp_files(path)
        old = part_files(path)
        if not old:
            return CompactionResult(0, 0, 0, 0, False, recovered)
        plan = _plan_rows(path, old)
        rows_before, rows_after = plan.rows_before, int(plan.kept.size)
        per_file, needed = files_for(rows_after, plan.nbytes, target_rows, target_mib)
        if rows_after == rows_before and len(old) <= needed:
            return CompactionResult(len(old), len(old), rows_before, rows_before, False, recovered)
        stamp = new_run_id()
        staging = path / f"{STAGING_PREFIX}{stamp}"
        new_names = []
        tmp = path / f".{INTENT}.tmp"
        try:
            for seq, chunk in enumerate(plan.chunks(per_file)):
                name = f"part-{stamp}-compacted-{seq:06d}.parquet"
                write_part_file(staging, name, chunk)
                new_names.append(name)
            _fsync_dir(staging)
            _pause_at("staged")
            intent = {"staging": staging.name, "old": [f.name for f in old], "new": new_names,
                      "rows": rows_after, "created_at": stamp}
            with open(tmp, "w") as fh:
                json.dump(intent, fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:  # not committed (a full disk, say): the old set stays the table
            tmp.unlink(missing_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        os.replace(tmp, path / INTENT)  # the commit point
        _fsync_dir(path)
        _pause_at("committed")
        _swap(path, intent)
        return CompactionResult(len(old), len(new_names), rows_before, rows_after, True,
                                recovered)


# what deduplicate_table decides on: a compaction holds these, not the whole table
_KEY_COLUMNS = ("task_id", "row_index", "status", "finished_at", "experiment_version")


@dataclass
class _RowPlan:
    """The rows a compaction keeps, decided from the key columns alone, and the parts they are
    read from one at a time: the whole table in memory took 4.3 GB for 9.1M rows (about
    48 GB for 10^8), where the keys take a tenth of it and a part at a time."""
    files: list
    schema: object
    starts: object  # each file's first row in storage order
    kept: object  # storage positions kept, ascending
    rows_before: int
    nbytes: float  # the kept rows' size in memory, as the whole deduplicated table had it
    newest_version: int | None

    def parts(self):
        """Each part's kept rows, in storage order (the schema unified, as read_table has it)."""
        import numpy as np
        import pyarrow as pa

        from pipeline.store.integrity import read_parts

        for i, f in enumerate(self.files):
            lo, hi = np.searchsorted(self.kept, [self.starts[i], self.starts[i + 1]])
            if hi > lo:
                table = read_parts([f], schema=self.schema)
                if table.num_rows != self.starts[i + 1] - self.starts[i]:  # rows keyed elsewhere
                    raise BadPartFile(f, "its rows differ in number from its footer's")
                yield _newest_version_metadata(
                    table.take(pa.array(self.kept[lo:hi] - self.starts[i])), self.newest_version)

    def chunks(self, per_file: int):
        """The kept rows as tables of ``per_file`` rows (the last one shorter)."""
        import pyarrow as pa

        buffer, held = [], 0
        for part in self.parts():
            buffer.append(part)
            held += part.num_rows
            while held >= per_file:
                table = pa.concat_tables(buffer)
                yield table.slice(0, per_file)
                rest = table.slice(per_file)
                buffer, held = ([rest] if rest.num_rows else []), rest.num_rows
        if held:
            yield pa.concat_tables(buffer)


def _plan_rows(path: Path, files: list) -> _RowPlan:
    import numpy as np

    from pipeline.store.integrity import MissingPartFile, missing_parts
    from pipeline.store.parquet import checked_schemas, unified_schema

    missing = missing_parts(path)  # deleted by hand: the table would look whole, and be short
    if missing:
        raise MissingPartFile(path, missing)
    schema = unified_schema(checked_schemas(path, files))
    rows = [_rows(f) for f in files]
    starts = np.concatenate(([0], np.cumsum(rows))).astype(np.int64)
    columns = [c for c in _KEY_COLUMNS if c in schema.names]
    kept, newest = _kept_by_sorting(files, rows, columns, schema)
    if kept is None:  # ids or row indices the arrays cannot hold: the Arrow rule on the keys
        kept, newest = _kept_by_hashing(files, rows, columns, schema)
    plan = _RowPlan(files, schema, starts, kept, int(starts[-1]), 0.0, newest)
    plan.nbytes = float(sum(part.nbytes for part in plan.parts()))
    return plan


def _kept_by_sorting(files, rows: list, columns: list, schema):
    """(positions kept, newest version among them) from the key columns read a batch at a
    time into arrays of 33 bytes a row (:func:`pipeline.store.parquet.kept_positions`): the
    key table and its hash tables held about 200 bytes a row (20 GB for 10^8). (None, None)
    when an id is not 24 lowercase hex digits, or a row index or status is unknown (rows edited
    by hand): the Arrow rule then."""
    import numpy as np
    import pyarrow.compute as pc

    from pipeline.store.integrity import scan_parts
    from pipeline.store.parquet import arrays_hold, key_arrays, kept_positions

    if not {"task_id", "status", "row_index"} <= set(columns):
        return None, None
    total = int(sum(rows))
    head, tail = np.empty(total, np.uint64), np.empty(total, np.uint32)
    row_index, stamp = np.empty(total, np.int64), np.empty(total, np.int64)
    failed, version = np.empty(total, bool), np.full(total, -1, np.int64)
    at = 0
    for i, f in enumerate(files):
        start = at
        for batch in scan_parts([f], columns, schema=schema):
            n = batch.num_rows
            if at + n > total:
                raise BadPartFile(f, "its rows differ in number from its footer's")
            if not arrays_hold(batch):
                return None, None
            here = slice(at, at + n)
            head[here], tail[here], row_index[here], failed[here], stamp[here] = \
                key_arrays(batch)
            if "experiment_version" in columns:
                version[at:at + n] = np.asarray(pc.fill_null(batch.column("experiment_version"),
                                                             -1))
            at += n
        if at - start != rows[i]:  # a footer that disagrees with its rows: name the file
            raise BadPartFile(f, "its rows differ in number from its footer's")
    kept = kept_positions(head, tail, row_index, failed, stamp)
    del head, tail, row_index, failed, stamp
    newest = (int(version[kept].max()) if "experiment_version" in columns and kept.size
              else None)
    return kept, newest


def _kept_by_hashing(files, rows: list, columns: list, schema):
    """:func:`_kept_by_sorting` by ``deduplicate_table`` on the key columns read whole."""
    import numpy as np
    import pyarrow as pa

    from pipeline.store.integrity import read_parts
    from pipeline.store.parquet import deduplicate_table

    keys = read_parts(files, columns=columns, schema=schema)
    if keys.num_rows != sum(rows):  # a footer that disagrees with its rows: name the file
        for f, n in zip(files, rows):
            if read_parts([f], columns=columns, schema=schema).num_rows != n:
                raise BadPartFile(f, "its rows differ in number from its footer's")
        raise BadPartFile(files[0], "the parts' rows differ in number from their footers'")
    keys = keys.append_column("_position", pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    kept_table = deduplicate_table(keys)
    return np.sort(kept_table["_position"].to_numpy()), _newest_version(kept_table)


def _rows(file) -> int:
    """A part's rows as the scan counts them: the sum over its row groups."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(file)
    return sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
