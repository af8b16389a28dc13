"""Parquet result store: one folder per experiment, result rows in part files (written by
``part_writer.PartWriter``, a few large files per sweep), read back as one table (:func:`load`).

Layout of ``results_dir/NAME/``::

    part-<run_id>-<seq>.parquet   result rows (each file written to a hidden temp name, then renamed)
    _parts.jsonl                  one line per part written: rows, bytes, sha256 (see integrity.py)
    _quarantine/                  bad files moved aside by ``python -m pipeline verify --repair``
    _manifest.json                one record per run: config, versions, commit, host, times, counts
                                  (manifest.py, with the lock)
    _report/                      written by the report step
    _logs/RUN_ID.log              one timestamped log per run (engine/progress.py)
    .lock                         held while a sweep writes here; says who holds it

Names starting with ``_`` or ``.`` are skipped by pyarrow's dataset discovery, so
``pandas.read_parquet(results_dir/NAME)`` reads exactly the result rows.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.store.errors import SelectionError
from pipeline.store.integrity import (ForeignPartFile, find_bad_parts, folder_experiment,
                                      foreign_parts, read_parts, read_schemas, record_part,
                                      scan_parts)

REPORT_DIR = "_report"



def experiment_dir(results_dir: str | os.PathLike, name: str) -> Path:
    return Path(results_dir) / name


def part_files(path: str | os.PathLike) -> list[Path]:
    """The folder's result files; while a committed compaction is still swapping files, its
    new set (see :mod:`pipeline.store.compaction`), so readers never see both sets."""
    from pipeline.store.compaction import committed_part_files

    path = Path(path)
    if not path.is_dir():
        return []
    committed = committed_part_files(path)
    if committed is not None:
        return sorted(committed)
    return sorted(p for p in path.glob("part-*.parquet") if p.is_file())


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def write_part_file(folder: str | os.PathLike, name: str, table: pa.Table) -> Path:
    """Write ``table`` as ``folder/name`` atomically: a hidden temp file, fsync, then rename.

    Every part file of the store is written through here (sweeps and compaction alike), so
    whatever the store records about a part (checksums, indexes) is recorded in one place.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / name
    tmp = folder / f".{name}.tmp"
    # Page CRCs: readers then detect bit rot inside a page instead of returning wrong values.
    pq.write_table(table, tmp, compression="zstd", write_page_checksum=True)
    with open(tmp, "rb+") as fh:  # make the bytes durable before the rename publishes them
        os.fsync(fh.fileno())
    # Indexed before the rename: a part on disk always has its checksum line (kill -9 safe).
    record_part(folder, name, tmp, table.num_rows)
    os.replace(tmp, final)
    return final


def clean_temp_files(path: str | os.PathLike) -> int:
    """Remove temp files left by a killed writer (parts, and the run manifest's); returns how
    many. Called with the folder's lock held."""
    from pipeline.store.manifest import clean_manifest_temp_files

    from pipeline.store.integrity import forget_parts

    removed, unpublished = 0, []
    for tmp in Path(path).glob(".part-*.parquet.tmp"):
        tmp.unlink(missing_ok=True)
        removed += 1
        final = tmp.name[1:-len(".tmp")]
        if not (tmp.parent / final).exists():  # indexed before its rename, never renamed
            unpublished.append(final)
    if unpublished:  # else its index line would read as a part deleted by hand
        forget_parts(path, unpublished)
    return removed + clean_manifest_temp_files(path)


ID_LENGTH = 24  # hex digits of a stored task id (task_ids.TASK_ID_BYTES bytes)
_ALL_FLAGS = np.uint64(0x0101010101010101)  # eight True bytes read as one word
_HEX = np.full(256, 255, dtype=np.uint8)
_HEX[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)


def unique_ids(ids: np.ndarray) -> np.ndarray:
    """``np.unique`` of an id array, by a sort and a neighbour mask: numpy 2.4's unique took
    4.3 s for 3.5M uint64 ids against 0.2 s (status, resume and dry runs of a large store
    waited on it)."""
    ids = np.sort(ids)
    if ids.size < 2:
        return ids
    keep = np.empty(ids.size, dtype=bool)
    keep[0] = True
    np.not_equal(ids[1:], ids[:-1], out=keep[1:])
    return ids[keep]


def id_prefixes(task_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The leading 64 bits of each 24-hex-digit task id, as uint64 (vectorised, no Python
    strings): a stored id set of 10^7 tasks then takes 80 MB instead of a gigabyte. One a
    row, aligned with ``task_ids``: an id of another length (edited by hand) or a null gives
    0 (it dropped them, misaligning its callers' masks, and a non-hex one raised ValueError:
    pipeline.load of a grid gave a traceback)."""
    arr = task_ids.combine_chunks() if isinstance(task_ids, pa.ChunkedArray) else task_ids
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
    if arr.null_count or not np.all(np.diff(offsets) == 24):
        return aligned_prefixes(arr)[0]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    # hex digit pairs to bytes, read as big-endian words: 24 bytes of temporaries a row (16
    # nibbles widened to uint64 took 128, with 16 shifted copies of the result)
    nibbles = _HEX[data.reshape(n, 24)[:, :16]]
    packed = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return packed.view(">u8").reshape(n).astype(np.uint64)


def well_formed_ids(task_ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Which task ids are 24 lowercase hex digits, as the engine writes them (False for a
    null): the id arrays (:func:`id_prefixes`, :func:`id_words`) read any other byte as 0xF,
    so two ids edited by hand could become one.

    Where every id is 24 bytes long (the engine's parts), read from the string buffer in
    numpy: Arrow's regex took 0.5 s for 4M ids, against about 0.1 (bench_id_checks), and the
    closing summary, resume and load run it on every stored row. Otherwise (nulls, other
    lengths or string types: edited by hand) the regex."""
    arr = task_ids.combine_chunks() if isinstance(task_ids, pa.ChunkedArray) else task_ids
    n = len(arr)
    if n and pa.types.is_string(arr.type) and not arr.null_count:
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
        if offsets[-1] - offsets[0] == n * ID_LENGTH and np.all(np.diff(offsets) == ID_LENGTH):
            digits = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
            # a byte is a digit if byte - '0' < 10 or byte - 'a' < 6 (uint8 wraps below);
            # an id's 24 flags, read as three words of eight, are then one byte of 1 each
            flags = (((digits - np.uint8(48)) < 10) | ((digits - np.uint8(97)) < 6))
            words = flags.view(np.uint64).reshape(n, 3)
            return pa.array((words[:, 0] & words[:, 1] & words[:, 2]) == _ALL_FLAGS)
    return pc.fill_null(pc.match_substring_regex(arr, "^[0-9a-f]{24}$"), False)


def aligned_prefixes(task_ids: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(prefixes, well_formed): one uint64 a row, aligned with ``task_ids``, and which rows
    hold a well-formed id (:func:`well_formed_ids`; the others' prefixes are 0)."""
    well_formed = np.asarray(well_formed_ids(task_ids), dtype=bool)
    out = np.zeros(len(well_formed), dtype=np.uint64)
    if well_formed.all():
        out[:] = id_prefixes(task_ids)
    elif well_formed.any():
        out[well_formed] = id_prefixes(task_ids.filter(pa.array(well_formed)))
    return out, well_formed


def read_again_if_swapped(read):
    """``read()``, once more (up to a few times) if a part file it listed vanished before it
    was read: a compaction swapped the set under a reader that holds no lock (its old files
    go right after its commit). A missing file is not a damaged one. ``read`` may raise
    :class:`BadPartFile` naming the vanished file, or pyarrow's FileNotFoundError."""
    from pipeline.store.integrity import BadPartFile

    for attempt in range(5):
        try:
            return read()
        except (BadPartFile, FileNotFoundError) as exc:
            vanished = not exc.path.exists() if isinstance(exc, BadPartFile) else True
            if not vanished or attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))


def stored_ids(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Sorted id prefixes (see :func:`id_prefixes`) of tasks stored ok, and of tasks stored
    only as failed. Parts the index records that are gone raise :class:`MissingPartFile`, as a
    damaged one raises: a resume would recompute them, silently."""
    from pipeline.store.integrity import MissingPartFile, missing_parts

    missing = missing_parts(path)
    if missing:
        raise MissingPartFile(path, missing)
    return read_again_if_swapped(lambda: _stored_ids(path))


def _stored_ids(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    return _scan_ids(path, ["task_id", "status"]).get(0, (_EMPTY, _EMPTY))


_EMPTY = np.zeros(0, dtype=np.uint64)


def _scan_ids(path, columns: list[str], group=None) -> dict:
    """{group: (sorted unique id prefixes stored ok, those stored only as failed)}, reading
    the part files a batch at a time and keeping 8 bytes a row: a whole-table read took about
    0.3 KB a stored row (30 GB for 10^8). ``group`` names an integer column to group by (the
    experiment version); without it everything is group 0. Malformed ids are skipped."""
    files = part_files(path)
    if not files:
        return {}
    checked_schemas(path, files)  # a damaged footer or a foreign file is named (exit 4)
    ok_parts: dict[int, list] = {}
    failed_parts: dict[int, list] = {}
    for batch in scan_parts(files, columns):
        ids = batch.column("task_id")
        keep = well_formed_ids(ids)
        if not pc.all(keep).as_py():
            batch = batch.filter(keep)
            ids = batch.column("task_id")
        prefixes = id_prefixes(ids)
        ok = np.asarray(pc.fill_null(pc.equal(batch.column("status"), "ok"), False),
                        dtype=bool)
        keys = (np.asarray(pc.fill_null(batch.column(group), -1)) if group else
                np.zeros(0, dtype=np.int64))
        for value in (np.unique(keys).tolist() if group else [0]):  # a handful of versions
            here = keys == value if group else np.ones(len(ok), dtype=bool)
            ok_parts.setdefault(value, []).append(prefixes[here & ok])
            failed_parts.setdefault(value, []).append(prefixes[here & ~ok])
    out = {}
    for value in list(ok_parts):
        ok = unique_ids(np.concatenate(ok_parts.pop(value)))
        failed = unique_ids(np.concatenate(failed_parts.pop(value)))
        out[value] = (ok, np.setdiff1d(failed, ok, assume_unique=True))
    return out


def stored_counts_by_version(path: str | os.PathLike) -> dict[int, tuple[int, int]]:
    """Per experiment version: (tasks stored ok, tasks stored only as failed), counted as
    :func:`stored_ids` counts them. Ids hash the version, so a resume counts those of its
    own version only."""
    return read_again_if_swapped(lambda: _stored_counts_by_version(path))


def _stored_counts_by_version(path: str | os.PathLike) -> dict[int, tuple[int, int]]:
    scanned = _scan_ids(path, ["task_id", "status", "experiment_version"], "experiment_version")
    return {int(v): (int(ok.size), int(failed.size)) for v, (ok, failed) in scanned.items()}


def stored_failure_errors(path: str | os.PathLike, version: int,
                          limit: int = 3) -> tuple[list[tuple[int, str, int]], int]:
    """The errors of the tasks of ``version`` stored only as failed (none of their attempts
    ok), by kind, most common first: up to ``limit`` (tasks, an example, how many distinct
    texts) triples, and how many kinds there are. Texts that differ only in their numbers
    are one kind (an error names its point's values: "at x=7"). A task counts once, with the
    error of its last stored attempt."""
    return read_again_if_swapped(lambda: _stored_failure_errors(path, version, limit))


def _stored_failure_errors(path, version: int, limit: int):
    files = part_files(path)
    if not files:
        return [], 0
    checked_schemas(path, files)
    # a batch at a time: the ok ids (8 bytes a row) and the failed rows' errors are kept
    ok_parts, failed_ids, errors = [], [], []
    for batch in scan_parts(files, ["task_id", "status", "error", "experiment_version"]):
        batch = batch.filter(pc.fill_null(pc.and_(
            pc.equal(batch.column("experiment_version"), version),
            well_formed_ids(batch.column("task_id"))), False))
        ok_mask = pc.fill_null(pc.equal(batch.column("status"), "ok"), False)
        ok_parts.append(id_prefixes(batch.column("task_id").filter(ok_mask)))
        failed = batch.filter(pc.invert(ok_mask))
        if failed.num_rows:
            failed_ids.append(id_prefixes(failed.column("task_id")))
            errors.extend(failed.column("error").fill_null("(no error recorded)").to_pylist())
    if not errors:
        return [], 0
    ok = unique_ids(np.concatenate(ok_parts))
    frame = pd.DataFrame({"id": np.concatenate(failed_ids), "error": errors})
    frame = frame[~contains(ok, frame["id"].to_numpy())].drop_duplicates("id", keep="last")
    frame["kind"] = frame["error"].str.replace(_NUMBER, "#", regex=True)
    kinds = frame.groupby("kind", sort=False).agg(  # ties: in the order first stored
        tasks=("id", "size"), example=("error", "first"), texts=("error", "nunique"))
    kinds = kinds.iloc[np.argsort(-kinds["tasks"].to_numpy(), kind="stable")]
    return ([(int(k.tasks), str(k.example), int(k.texts)) for k in kinds.head(limit).itertuples()],
            len(kinds))


_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"  # what makes one error text another's kind


def checked_schemas(path: str | os.PathLike, files: list[Path] | None = None) -> list:
    """The schemas of the folder's part files (footers only, cheap). A damaged footer raises
    :class:`~pipeline.store.integrity.BadPartFile`; a ``part-*.parquet`` file that ``verify``
    would call foreign (another schema, another experiment) raises
    :class:`~pipeline.store.integrity.ForeignPartFile`: its rows must not mix into results."""
    files = part_files(path) if files is None else files
    schemas, _ = read_schemas(files)
    foreign = foreign_parts(files, schemas, folder_experiment(path)) if files else []
    if foreign:
        raise ForeignPartFile(*foreign[0])
    return schemas


def contains(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Membership of ``ids`` in a sorted uint64 array (binary search)."""
    if sorted_ids.size == 0:
        return np.zeros(ids.shape, dtype=bool)
    if ids.size > 4096 and sorted_ids.size > 4096:
        # the queries sorted first: searches in order stay in the cache (ids are random;
        # bench_stored_ids: 0.32x the time for 3.5M queries among 3.15M ids)
        order = np.argsort(ids)
        found = np.empty(ids.size, dtype=bool)
        queries = ids[order]
        pos = np.minimum(np.searchsorted(sorted_ids, queries), sorted_ids.size - 1)
        found[order] = sorted_ids[pos] == queries
        return found
    pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return sorted_ids[pos] == ids


def read_table(path: str | os.PathLike, on_error: str = "raise") -> pa.Table | None:
    """Every stored row (all part files). A damaged part raises :class:`BadPartFile` naming
    it and the repair command, a foreign one (see :func:`checked_schemas`)
    :class:`ForeignPartFile`; ``on_error="skip"`` leaves both out with a warning."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    from pipeline.store.integrity import MissingPartFile, missing_parts, missing_parts_text

    missing = missing_parts(path)  # deleted by hand: the table would look whole, and be short
    if missing and on_error == "raise":
        raise MissingPartFile(path, missing)
    if missing:
        import warnings

        warnings.warn(missing_parts_text(path, missing), stacklevel=3)
    return read_again_if_swapped(lambda: _read_table(path, on_error))


def _read_table(path: str | os.PathLike, on_error: str) -> pa.Table | None:
    files = part_files(path)
    if on_error == "skip":
        import warnings

        bad = find_bad_parts(files)
        vanished = [f for f, _ in bad if not f.exists()]
        if vanished:  # not damaged: the set changed under us (read again, not skipped)
            from pipeline.store.integrity import BadPartFile

            raise BadPartFile(vanished[0], "it vanished while being read")
        from pipeline.store.errors import NOT_DAMAGED, PERMISSION_DENIED

        for f, reason in bad:  # --repair would move a file we may only not open: say which
            advice = (NOT_DAMAGED if reason == PERMISSION_DENIED else
                      f"repair with: python -m pipeline verify {f.parent} --repair")
            warnings.warn(f"skipped unreadable part file {f} ({reason}); {advice}",
                          stacklevel=3)
        damaged = {f for f, _ in bad}
        files = [f for f in files if f not in damaged]
        schemas, _ = read_schemas(files)
        foreign = {f: why for f, why in foreign_parts(files, schemas, folder_experiment(path))}
        for f, why in foreign.items():
            warnings.warn(f"skipped part file {f}: not a result part of this folder's "
                          f"experiment ({why}); move it aside with: python -m pipeline verify "
                          f"{f.parent} --repair", stacklevel=3)
        schemas = [s for f, s in zip(files, schemas) if f not in foreign]
        files = [f for f in files if f not in foreign]
    elif files:
        schemas = checked_schemas(path, files)
    if not files:
        return None
    return read_parts(files, schema=unified_schema(schemas))


def unified_schema(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for the folder's parts (the first part's metadata). A column whose type
    changed with the experiment version (an int64 count that became an exact decimal string)
    takes the type of the newest version that has it, and older rows are cast to it when read:
    ``verify`` accepts such older parts, so readers must not refuse the folder."""
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        pass

    def version(schema: pa.Schema) -> int:
        try:
            return int((schema.metadata or {}).get(b"version", b"-1"))
        except ValueError:
            return -1

    newest: dict[str, pa.DataType] = {}
    for schema in sorted(schemas, key=version, reverse=True):  # the newest version first
        for f in schema:
            newest.setdefault(f.name, f.type)
    aligned = [pa.schema([f.with_type(newest[f.name]) for f in s], metadata=s.metadata)
               for s in schemas]
    return pa.unify_schemas(aligned, promote_options="permissive")


def deduplicate_table(table: pa.Table) -> pa.Table:
    """One result per task: a task stored ok anywhere drops its failed rows; a task stored by
    several attempts keeps the rows of its latest finished one (so a recomputation that emits
    fewer rows leaves none of the old ones behind); any rows still repeating a
    (task_id, row_index) keep the latest finished. Row order is storage order.

    Done in Arrow (hash joins in C++): a sweep's folder of millions of rows normally has no
    duplicates at all, and then this costs two hash passes.
    """
    status = table["status"]
    failed = pc.equal(status, "failed")
    if pc.any(failed).as_py():
        ok_ids = pc.unique(table.filter(pc.invert(failed))["task_id"])
        retried = pc.and_(failed, pc.is_in(table["task_id"], value_set=ok_ids))
        if pc.any(retried).as_py():
            table = table.filter(pc.invert(retried))
    key = table["task_id"]
    if pc.max(table["row_index"]).as_py():
        key = pc.binary_join_element_wise(key, pc.cast(table["row_index"], pa.string()), ":")
    if pc.count_distinct(key).as_py() == table.num_rows:
        return table
    # rows of one attempt share its finished_at: keep each task's latest attempt
    latest = table.select(["task_id", "finished_at"]).group_by("task_id").aggregate(
        [("finished_at", "max")])
    stamp = pc.fill_null(pc.cast(table["finished_at"], pa.int64()), -1)
    ends = latest.append_column("_end", pc.fill_null(pc.cast(latest["finished_at_max"],
                                                             pa.int64()), -1))
    ids = pc.index_in(table["task_id"], value_set=ends["task_id"])
    table = table.filter(pc.equal(stamp, pc.take(ends["_end"], ids)))
    key = table["task_id"]
    if pc.max(table["row_index"]).as_py():
        key = pc.binary_join_element_wise(key, pc.cast(table["row_index"], pa.string()), ":")
    if pc.count_distinct(key).as_py() == table.num_rows:
        return table
    order = pc.sort_indices(table, sort_keys=[("finished_at", "ascending")])
    positions = pa.table({"key": key.take(order), "pos": pa.array(np.arange(table.num_rows))})
    last = positions.group_by("key").aggregate([("pos", "max")])["pos_max"]
    kept = np.sort(order.to_numpy()[last.to_numpy()])  # back to storage positions
    return table.take(pa.array(kept))  # kept rows, in storage order


def id_words(task_ids: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A 24-hex-digit task id as two words, its leading 64 bits (:func:`id_prefixes`) and the
    trailing 32: the whole id, for decisions that drop rows (a 64-bit prefix collides once in
    about 4,000 stores of 10^8 tasks). Every id must be well-formed (:func:`well_formed_ids`)."""
    arr = task_ids.combine_chunks() if isinstance(task_ids, pa.ChunkedArray) else task_ids
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint32)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    nibbles = _HEX[data.reshape(n, 24)[:, 16:]]
    tail = ((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).view(">u4").reshape(n).astype(np.uint32)
    return id_prefixes(arr), tail


def arrays_hold(rows: pa.RecordBatch) -> bool:
    """Whether :func:`key_arrays` can hold ``rows`` exactly: every id well-formed, no status
    or row index unknown. Rows edited by hand may not be; their readers then take the Arrow
    rule (:func:`deduplicate_table`) on the id strings."""
    names = rows.schema.names
    return not (rows.column("status").null_count
                or ("row_index" in names and rows.column("row_index").null_count)
                or not pc.all(well_formed_ids(rows.column("task_id"))).as_py())


def key_arrays(rows: pa.RecordBatch) -> tuple[np.ndarray, ...]:
    """load's keys of ``rows`` (see :func:`arrays_hold`) as :func:`kept_positions` takes them:
    the id's two words, the row index (0 without the column), failed (the status not ok)
    and the finish time (int64 microseconds; -1 unknown or without the column)."""
    n, names = rows.num_rows, rows.schema.names
    head, tail = id_words(rows.column("task_id"))

    def int64s(name: str, unknown: int) -> np.ndarray:
        if name not in names:
            return np.full(n, unknown, dtype=np.int64)
        return np.asarray(pc.fill_null(pc.cast(rows.column(name), pa.int64()), unknown))

    failed = np.asarray(pc.fill_null(pc.not_equal(rows.column("status"), "ok"), True))
    return head, tail, int64s("row_index", 0), failed, int64s("finished_at", -1)


def task_numbers(head: np.ndarray, tail: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's task as a number from 0 (rows of one task id, given as its two words
    (:func:`id_words`), share it), and how many tasks there are."""
    n = head.size
    order = np.argsort(head, kind="stable")  # one key: faster than lexsort on (tail, head)
    sorted_head, sorted_tail = head[order], tail[order]
    same_head = sorted_head[1:] == sorted_head[:-1]
    if np.any(same_head & (sorted_tail[1:] != sorted_tail[:-1])):  # prefixes that collide
        order = np.lexsort((tail, head))
        sorted_head, sorted_tail = head[order], tail[order]
        same_head = sorted_head[1:] == sorted_head[:-1]
    new = np.ones(n, dtype=bool)
    new[1:] = ~(same_head & (sorted_tail[1:] == sorted_tail[:-1]))
    task = np.empty(n, dtype=np.int64)
    task[order] = np.cumsum(new) - 1
    return task, int(new.sum())


def kept_positions(head: np.ndarray, tail: np.ndarray, row_index: np.ndarray,
                   failed: np.ndarray, stamp: np.ndarray) -> np.ndarray:
    """:func:`deduplicate_table`'s rule on arrays, one entry a stored row in storage order:
    the task id as two words (:func:`id_words`), the row index, whether the row failed, and
    the finish time (int64, -1 when unknown). Returns the positions kept, ascending. By sorts
    instead of hash tables of the id strings: about a third of the memory (compaction's plan).

    1. A task stored ok anywhere drops its failed rows.
    2. If a (task, row index) still repeats: each task keeps the rows of its latest finish
       time; then each (task, row index) still repeating keeps its last row in storage order
       (they share the finish time, and the Arrow rule's stable sort by it keeps the last)."""
    return kept_positions_of_tasks(*task_numbers(head, tail), row_index, failed, stamp)


def kept_positions_of_tasks(task: np.ndarray, tasks: int, row_index: np.ndarray,
                            failed: np.ndarray, stamp: np.ndarray) -> np.ndarray:
    """:func:`kept_positions`, given each row's task number (:func:`task_numbers`), for a
    caller that uses the numbers too."""
    n = task.size
    alive = np.ones(n, dtype=bool)
    if failed.any():
        has_ok = np.zeros(tasks, dtype=bool)
        has_ok[task[~failed]] = True
        alive &= ~(failed & has_ok[task])

    spread = int(row_index.max()) - int(row_index.min()) + 1 if n else 1
    lowest = int(row_index.min()) if n else 0

    def last_of_each_key(rows: np.ndarray) -> np.ndarray:
        """Of ``rows`` (ascending positions), the last of each (task, row index)."""
        if tasks * spread < 2**62:  # one int64 key: a stable argsort keeps storage order
            key = task[rows] * spread + (row_index[rows] - lowest)
            by_key = rows[np.argsort(key, kind="stable")]
            del key
        else:
            by_key = rows[np.lexsort((row_index[rows], task[rows]))]  # stable: storage order
        last = np.ones(by_key.size, dtype=bool)
        if by_key.size > 1:
            last[:-1] = ((task[by_key][1:] != task[by_key][:-1])
                         | (row_index[by_key][1:] != row_index[by_key][:-1]))
        return by_key[last]

    rows = np.flatnonzero(alive)
    if tasks == n:  # a row a task (a sweep's usual store): every key is unique, no sort needed
        return rows
    unique = last_of_each_key(rows)
    if unique.size == rows.size:
        return rows
    latest = np.full(tasks, np.iinfo(np.int64).min)
    np.maximum.at(latest, task[rows], stamp[rows])
    rows = rows[stamp[rows] == latest[task[rows]]]
    return np.sort(last_of_each_key(rows))


def deduplicate(df: pd.DataFrame) -> pd.DataFrame:
    """The same rule on a DataFrame (see :func:`deduplicate_table`)."""
    if df.empty:
        return df
    out = deduplicate_table(pa.Table.from_pandas(df, preserve_index=False)).to_pandas()
    out.attrs = dict(df.attrs)
    return out


def where_results_are(results_dir: str | os.PathLike, name: str) -> str:
    """A hint for a load that found nothing at results_dir/name: the experiment's own folder
    given as results_dir, a misspelt name, or what is stored there (the message only named
    the path, where run.py's checks say what to give)."""
    import difflib

    from pipeline.store.integrity import experiment_folders, is_results_folder

    results = Path(results_dir)
    try:
        if not results.is_dir():
            return f" ({results} does not exist)"
        if is_results_folder(results):  # results_dir=RESULTS_DIR/NAME
            return (f" ({results} is itself an experiment's folder: "
                    f"pipeline.load({str(results.parent)!r}, {results.name!r}))")
        if (results / name).is_dir():  # the right folder, with no parts in it (yet)
            return (f" (the folder holds no part file: nothing stored yet, or every part set "
                    f"aside; python -m pipeline status {results / name} says which)")
        stored = experiment_folders(results)
    except OSError:  # another user's private folder beside ours: the plain message stands
        return ""
    if not stored:
        return f" (no experiment's results are stored under {results})"
    close = difflib.get_close_matches(name, stored, n=1)
    return ((f" (did you mean {close[0]!r}? " if close else " (")
            + f"stored under {results}: {', '.join(stored)})")


def load(results_dir: str | os.PathLike, name: str, status: str | None = None,
         version: int | str | list | None = None, on_error: str = "raise") -> pd.DataFrame:
    """The whole result table of experiment ``name``, one row set per task id.

    ``status="ok"`` keeps only successful rows. ``version`` keeps experiment versions (an int,
    ``"latest"``, or a list of them); by default rows of every version are returned (their
    task ids differ). Raises FileNotFoundError if nothing is stored, :class:`BadPartFile`
    (naming the file and ``python -m pipeline verify DIR --repair``) if a part file is damaged,
    and its subclass :class:`ForeignPartFile` if a ``part-*.parquet`` file is not a result part
    of this experiment (what ``verify`` calls foreign), unless ``on_error="skip"``, which leaves
    such parts out with a warning.
    """
    path = experiment_dir(results_dir, name)
    table = read_table(path, on_error=on_error)
    if table is None:
        raise FileNotFoundError(f"no results for experiment '{name}' under {path}"
                                + where_results_are(results_dir, name))
    if version is not None:  # an int, "latest", or a list of them (as pipeline.load documents)
        latest = pc.max(table["experiment_version"]).as_py()
        wanted = [latest if v == "latest" else int(v)
                  for v in (version if isinstance(version, (list, tuple)) else [version])]
        stored = sorted(pc.unique(table["experiment_version"]).to_pylist())
        absent = sorted(set(wanted) - set(stored))
        if absent:  # a typo selected nothing, silently
            raise SelectionError(f"version={version!r}: no rows of version "
                             f"{', '.join(map(str, absent))} are stored for '{name}'; stored: "
                             f"{', '.join(map(str, stored))} (or 'latest')")
        table = table.filter(pc.is_in(table["experiment_version"],
                                      value_set=pa.array(wanted, pa.int64())))
    table = deduplicate_table(table)
    if status is not None:
        table = table.filter(pc.equal(table["status"], status))
    df = table_to_pandas(table)
    df.attrs["experiment"] = name
    return df


def table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """``table.to_pandas()``, with exact integers: an integer column holding nulls (a failed
    row's outputs) becomes pandas' nullable ``Int64`` (``<NA>``) rather than float64, which
    rounded 3**39 to 4052555153018976256 (and 1,048,576 printed as 1.04858e+06). Columns
    without nulls stay ``int64``."""
    df = table.to_pandas()
    for name in table.column_names:
        column = table[name]
        if pa.types.is_integer(column.type) and column.null_count:
            df[name] = column.to_pandas(types_mapper=_NULLABLE_INTEGERS.get)
    return df


_NULLABLE_INTEGERS = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(),
                      pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype(),
                      pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
                      pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype()}
