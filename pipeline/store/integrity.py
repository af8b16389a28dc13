"""Integrity of a result folder: a checksum index of the part files, verification, quarantine.

``write_part_file`` records every part in ``_parts.jsonl`` (one JSON line per part: name,
rows, bytes, sha256) *before* it renames the finished temp file into place, so a part on disk
always has its line, even after ``kill -9``. The index is append-only; a torn last line (a
kill mid-append) is ignored. Compaction and repair forget the lines of the parts they remove
(:func:`forget_parts`); any other line whose file is gone is a missing part
(:func:`missing_parts`, in :mod:`pipeline.store.part_index` with the index itself).

:func:`verify_store` classifies every file that ``pandas.read_parquet(folder)`` would read:

- good: the footer reads, the bytes match the recorded sha256 and row count (parts written
  before the index existed are decoded in full instead), and the schema is the experiment's;
- corrupt: unreadable, truncated, or bytes/row count differing from what was written;
- foreign: not a part of this experiment (another name, a directory, another schema): a raw
  ``pandas.read_parquet(folder)``, which the store promises, would trip on it;
- unreadable: this user may not open it (its permissions: a folder copied from another user, a
  chmod). Nothing says it is damaged, so it is neither corrupt nor moved: its permissions are
  the fix (:class:`UnreadablePartFile`).

:func:`quarantine` moves the corrupt and foreign ones to ``_quarantine/`` (never deletes): their
tasks are no longer stored, so a resume recomputes exactly them. Readers (``load``, resume,
``report``) raise :class:`BadPartFile` naming the file and the repair command.

:func:`is_results_folder` tells a folder the store wrote (a results folder, RESULTS_DIR/NAME)
from any other: ``verify``, ``compact`` and ``status`` act on nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

# the part index has its own module; its names are re-exported here, where callers found them
from pipeline.store.part_index import (COMPACTION_INTENT, PART_INDEX,  # noqa: F401
                                       file_sha256, forget_parts, missing_parts,
                                       missing_parts_text, read_index, record_part)
# so do the errors (and the run manifest's parser), in their own module
from pipeline.store.errors import (MANIFEST, NOT_DAMAGED, PERMISSION_DENIED,  # noqa: F401
                                   QUARANTINE, BadPartFile, DamagedManifest, ForeignPartFile,
                                   MissingPartFile, UnreadableManifest, UnreadablePartFile,
                                   _reason, parse_manifest, part_error)

PART_NAME = re.compile(r"^part-.+\.parquet$")


def check_part_checksums(folder: str | os.PathLike, files: Sequence[Path]) -> None:
    """Raise :class:`BadPartFile` for the first of ``files`` whose bytes differ from the size
    and sha256 recorded when it was written: bit rot in any column, which a reader of a few
    columns (a resume's plan, ``status``) does not decode. Parts written before the index
    existed are left to their readers. Reads every byte of them once."""
    index = read_index(folder)
    for path in files:
        entry = index.get(path.name)
        if entry is None:
            continue
        try:  # opened first: a file this user may not read is not called damaged (see verify)
            size = path.stat().st_size
            with open(path, "rb"):
                pass
            # the size before the hash: a truncated file is not read whole to be refused
            digest = file_sha256(path) if size == entry.get("bytes") else None
        except FileNotFoundError:  # swapped away by a compaction meanwhile
            continue
        except PermissionError:  # a folder copied from another user: not damaged
            raise UnreadablePartFile(path) from None
        except OSError as exc:  # EIO
            raise BadPartFile(path, f"cannot be read: {exc.strerror or exc}") from None
        if size != entry.get("bytes"):
            raise BadPartFile(path, f"{size} bytes on disk, {entry.get('bytes')} written")
        if digest != entry.get("sha256"):
            raise BadPartFile(path, "sha256 differs from the one recorded when written")


# --------------------------------------------------------------------------- reading
def _read_one(path: Path, columns: Sequence[str] | None = None):
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=list(columns) if columns else None,
                             page_checksum_verification=True)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on a damaged file
        raise part_error(path, exc) from None


def read_schemas(files: Sequence[Path], on_error: str = "raise"):
    """(schemas, bad files) of ``files``; with ``on_error="raise"`` the first unreadable footer
    raises :class:`BadPartFile`."""
    import pyarrow.parquet as pq

    schemas, bad = [], []
    for f in files:
        try:
            schemas.append(pq.read_schema(f))
        except Exception as exc:
            if on_error == "raise":
                raise part_error(f, exc) from None
            bad.append((f, _reason(exc)))
    return schemas, bad


def experiment_folders(folder: str | os.PathLike) -> list[str]:
    """Names of the subfolders of ``folder`` that are experiment result folders (see
    :func:`is_results_folder`): ``folder`` is then a RESULTS_DIR, given where a command wants
    RESULTS_DIR/NAME. verify listed each as a foreign directory (and ``--repair`` moved it, a
    sweep writing it included, to ``_quarantine/``); compact said "no part files, nothing to
    compact"."""
    found = []
    for sub in sorted(Path(folder).iterdir()):
        if sub.name.startswith(("_", ".")) or not sub.is_dir():
            continue
        if is_results_folder(sub):
            found.append(sub.name)
    return found


LOCK_FILE = ".lock"  # pipeline.store.manifest.SweepLock's
# the names a sweep gives its parts: part-<run id>-<seq>.parquet, and compaction's
# part-<stamp>-compacted-<seq>.parquet (run ids: pipeline.store.parquet.new_run_id)
_SWEEP_PART_NAME = re.compile(r"^part-\d{8}T\d{6}Z-[0-9a-f]{6}-(compacted-)?\d{6}\.parquet$")
# what quarantine() puts in _quarantine/ (a name already there gets a numeric suffix)
_QUARANTINED_NAME = re.compile(r"^(part-.+\.parquet|" + re.escape(MANIFEST) + r")(\.\d+)?$")


def is_results_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a results folder, RESULTS_DIR/NAME as the store writes it: it
    holds any of a run manifest (``_manifest.json``, readable or not), a part index
    (``_parts.jsonl``), a compaction's commit (``_compaction.json``), a result part file (a
    ``part-*.parquet`` file with the pipeline's bookkeeping columns or a sweep's part name),
    what a repair moved to ``_quarantine/``, or the lock record of a sweep (``.lock`` naming a
    run: a sweep that has not written anything else yet).

    Anything else (a folder of notes and plots, a Spark or Dask output folder of
    ``part-*.parquet`` files of its own, an empty folder) is not: ``verify --repair`` moved
    every file of such a folder to ``_quarantine/``, ``compact`` left a ``.lock`` in it and
    ``status`` listed its subfolders as experiments. Nothing here writes or locks."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    from pipeline.store.compaction import INTENT

    if any((folder / name).is_file() for name in (MANIFEST, PART_INDEX, INTENT)):
        return True
    for part in sorted(folder.glob("part-*.parquet")):
        if part.is_file() and (_SWEEP_PART_NAME.match(part.name) or _is_result_part(part)):
            return True
    quarantined = folder / QUARANTINE
    if quarantined.is_dir() and any(_QUARANTINED_NAME.match(p.name)
                                    for p in quarantined.iterdir()):
        return True
    return _sweep_lock_record(folder / LOCK_FILE)


def _is_result_part(path: Path) -> bool:
    """Whether ``path``'s footer reads and has the pipeline's bookkeeping columns (of any
    experiment): a result part, possibly foreign to the folder, not a stranger's file."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception:  # unreadable: judged by the other signs
        return False
    return _schema_problem(schema, None) is None


def _sweep_lock_record(lock: Path) -> bool:
    """Whether ``lock`` holds the record of a sweep (a run id): written by ``run.py`` when it
    takes a new folder, before its run log and manifest."""
    try:
        if not lock.is_file() or lock.stat().st_size > 65536:
            return False
        record = json.loads(lock.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and bool(record.get("run_id"))


def not_a_results_folder(folder: str | os.PathLike) -> str:
    """The one-line error of a command given a folder that :func:`is_results_folder` denies."""
    return (f"error: {folder} is not a results folder: it holds no {MANIFEST}, {PART_INDEX} "
            "or result part file (part-*.parquet) written by a sweep; expected RESULTS_DIR/NAME "
            "as run.py writes it, e.g. results/calibration (nothing was changed)")


def folder_experiment(folder: str | os.PathLike):
    """The registered experiment a result folder belongs to (by its name), or None. Only the
    modules that may register that name are imported (``find``): a broken module of another
    family is not this folder's business, and its warning on every status or load misled."""
    from pipeline.experiments.base import find

    folder = Path(folder)
    return find(folder.name) or find(folder.resolve().name)


def foreign_parts(files: Sequence[Path], schemas: Sequence, experiment) -> list[tuple[Path, str]]:
    """The files among ``files`` (with their ``schemas``) that :func:`verify_store` calls
    foreign: not a result part of ``experiment`` (or of any experiment, if None)."""
    out = []
    for f, schema in zip(files, schemas):
        problem = _schema_problem(schema, experiment)
        if problem:
            out.append((Path(f), problem))
    return out


def read_parts(files: Sequence[Path], columns: Sequence[str] | None = None, schema=None):
    """All rows of ``files`` as one table (the fast dataset scan). If the scan fails, each
    file is read alone to find the damaged one, which is raised as :class:`BadPartFile`."""
    import pyarrow.dataset as ds

    # Page CRCs (written by write_part_file) are checked: a flipped bit raises, not misreads.
    verified = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
        page_checksum_verification=True))
    try:
        return ds.dataset([str(f) for f in files], schema=schema, format=verified).to_table(
            columns=list(columns) if columns else None)
    except Exception:
        for f in files:
            _read_one(Path(f), columns)
        raise


SCAN_BATCH_ROWS = 1 << 17  # a few MB of key columns: memory is one batch, not the store


def scan_parts(files: Sequence[Path], columns: Sequence[str], schema=None,
               batch_rows: int | None = None):
    """The rows of ``files`` as record batches of at most ``batch_rows`` rows (default
    :data:`SCAN_BATCH_ROWS`), in storage order (as :func:`read_parts` lays them out), typed
    as ``schema`` (the folder's unified schema: a column a file lacks is null, one whose type
    changed is cast). Readers that
    reduce what they read (id sets, counts) then hold one batch, not the store: a whole-table
    read of a resume's key columns took about 0.4 KB a stored row, 40 GB for 10^8. One file
    at a time on this thread (the dataset scanner's read-ahead and thread pools held twice as
    much). A damaged file raises :class:`BadPartFile` naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns, batch_rows = list(columns), batch_rows or SCAN_BATCH_ROWS
    for f in files:
        path = Path(f)
        try:
            # page CRCs (written by write_part_file) are checked: a flipped bit raises
            reader = pq.ParquetFile(path, page_checksum_verification=True)
            have = reader.schema_arrow
            wanted = [c for c in columns if c in have.names]
            batches = (reader.iter_batches(batch_size=batch_rows, columns=wanted,
                                           use_threads=False) if wanted else iter(()))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on a damaged file
            raise part_error(path, exc) from None
        target = pa.schema([schema.field(c) if schema is not None and c in schema.names
                            else have.field(c) if c in have.names
                            else pa.field(c, pa.null()) for c in columns])
        if not wanted:  # none of the columns asked for: its rows still count, as nulls
            yield pa.RecordBatch.from_arrays(
                [pa.nulls(reader.metadata.num_rows, t.type) for t in target], schema=target)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:
                raise part_error(path, exc) from None
            # a type that changed with the version is cast here, outside the damage check:
            # a file that reads is not damaged
            yield pa.RecordBatch.from_arrays(
                [batch.column(c) if c in wanted else pa.nulls(batch.num_rows,
                                                               target.field(c).type)
                 for c in columns], names=columns).cast(target)


def find_bad_parts(files: Sequence[Path]) -> list[tuple[Path, str]]:
    """Every file of ``files`` that cannot be decoded in full, with the reason."""
    bad = []
    for f in files:
        try:
            _read_one(Path(f))
        except BadPartFile as exc:
            bad.append((Path(f), exc.reason))
    return bad


# --------------------------------------------------------------------------- verification
@dataclass
class VerifyReport:
    folder: Path
    good: list[str] = field(default_factory=list)
    unindexed: list[str] = field(default_factory=list)  # good, but written without a checksum
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)
    missing: dict[str, int] = field(default_factory=dict)  # indexed, gone: name -> rows
    rows: int = 0
    manifest: str | None = None  # why the run manifest does not parse (None: it does)
    # parts (and the manifest) this user may not open: not damaged, never moved or forgotten
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # the foreign files that are part files (part-*.parquet; the others: strays, folders)
    foreign_parts: list[str] = field(default_factory=list)
    # good parts a sweep or compaction wrote after the index began (their names' stamps) that
    # it has no entry for: the index lost lines (cut, edited), so a part deleted since would
    # go unnoticed; --repair records them as they are now
    unrecorded: list[str] = field(default_factory=list)
    # foreign parts that are byte-for-byte copies of indexed ones (their rows are there)
    copies: list[str] = field(default_factory=list)
    # the bad part files that held tasks of the experiment (damaged ones are presumed to):
    # a rerun recomputes their tasks once they are moved aside; the other bad files, none
    held_tasks: list[str] = field(default_factory=list)

    @property
    def part_files(self) -> int:
        """How many part files (part-*.parquet) the folder holds, whatever their verdict."""
        return (len(self.good) + len(self.unindexed) + len(self.corrupt)
                + len(self.foreign_parts)
                + len([name for name, _ in self.unreadable if name != MANIFEST]))

    @property
    def bad(self) -> list[tuple[str, str]]:
        """What :func:`quarantine` moves aside (never an unreadable file)."""
        return self.corrupt + self.foreign

    @property
    def ok(self) -> bool:
        return (not self.bad and self.manifest is None and not self.missing
                and not self.unreadable and not self.unrecorded)


def _schema_problem(schema, experiment) -> str | None:
    """Why ``schema`` is not a result part of ``experiment`` (None if it is)."""
    from pipeline.experiments._columns import BOOKKEEPING

    names = set(schema.names)
    lacking = [c for c in BOOKKEEPING if c not in names]
    if lacking:
        return f"not a pipeline result part: no column(s) {', '.join(lacking)}"
    meta = schema.metadata or {}
    written_for = meta.get(b"experiment", b"").decode()
    if experiment is None:
        return None
    if written_for and written_for != experiment.name:
        return f"written by experiment '{written_for}', not '{experiment.name}'"
    if meta.get(b"version", b"").decode() not in ("", str(experiment.version)):
        return None  # an older version of the experiment: its own columns, kept by design
    declared = [(p.name, p.arrow_type) for p in experiment.params] + list(experiment.columns.items())
    declared += list(BOOKKEEPING.items())
    # written by this experiment at this version: its declaration changed without a version
    # bump, and these are the user's own results (moving them aside lost them to a rerun)
    same = written_for == experiment.name and meta.get(b"version") is not None
    hint = (f"; written by '{experiment.name}' version {experiment.version} as declared before: "
            f"if its parameters or columns changed, bump its version (its module's version=; "
            f"these rows stay readable as version {experiment.version}) instead of moving them "
            "aside" if same else "")
    for name, typ in declared:
        if name not in names:
            return f"column '{name}' of the declared schema is missing{hint}"
        got = schema.field(name).type
        if got != typ:
            return f"column '{name}' is {got}, declared {typ}{hint}"
    return None


def _holds_tasks_of(schema, experiment) -> bool:
    """Whether a foreign part of ``schema`` holds rows of ``experiment``'s tasks (in a schema
    it does not declare): a result part, not written by another experiment."""
    if _schema_problem(schema, None) is not None:  # no task_id: no tasks at all
        return False
    written_for = (schema.metadata or {}).get(b"experiment", b"").decode()
    return experiment is None or written_for in ("", experiment.name)


def verify_store(folder: str | os.PathLike, experiment=None) -> VerifyReport:
    """Check every file ``pandas.read_parquet(folder)`` would read (see the module doc).

    verify holds no lock: a compaction (or a repair) may swap the folder's files while they
    are checked. A listed file that vanishes is not a damaged one: the folder is checked
    again (up to a few times), so the report is of one set of files, the current one."""
    folder = Path(folder)
    for attempt in range(5):
        report, vanished = _verify_once(folder, experiment)
        if not vanished:
            break
        time.sleep(0.05 * (attempt + 1))
    return report


def stray_entries(folder: str | os.PathLike) -> list[str]:
    """Names in ``folder`` that ``pandas.read_parquet(folder)`` reads but that are no part
    file: a notes.txt, a folder (it descends into it). It fails on the first, or mixes in
    what the second holds; ``pipeline.load`` reads only the part files. Cheap: one listing,
    no file opened (``verify`` checks the part files themselves)."""
    out = []
    for path in sorted(Path(folder).iterdir()):
        if path.name.startswith(("_", ".")):  # invisible to Parquet readers
            continue
        if path.is_dir() or not PART_NAME.match(path.name):
            out.append(path.name + ("/" if path.is_dir() else ""))
    return out


class _Vanished(Exception):
    pass


def _index_began(index: dict[str, dict]) -> str | None:
    """The stamp (``YYYYMMDDTHHMMSSZ``) of the oldest indexed part a sweep or compaction
    named: every part written since has an entry (appended before its rename)."""
    stamps = [name[5:21] for name in index if _SWEEP_PART_NAME.match(name)]
    return min(stamps, default=None)


def _verify_once(folder: Path, experiment) -> tuple[VerifyReport, bool]:
    report = VerifyReport(folder)
    index = read_index(folder)
    vanished = False
    for path in sorted(folder.iterdir()):
        name = path.name
        if name.startswith(("_", ".")):
            continue  # invisible to Parquet readers: manifest, index, report, lock, temp files
        try:
            _verify_file(report, path, index.get(name), experiment)
        except (_Vanished, FileNotFoundError):
            vanished = True
    try:
        _check_unindexed(report, index)
    except FileNotFoundError:
        vanished = True
    if report.unrecorded:  # a compaction may have swapped its files in meanwhile: ask again
        now = read_index(folder)
        if any(name in now for name in report.unrecorded) or \
                (folder / COMPACTION_INTENT).exists():
            vanished = True
    report.missing = missing_parts(folder)
    try:
        parse_manifest(folder / MANIFEST)
    except UnreadableManifest as exc:
        report.unreadable.append((MANIFEST, exc.reason))
    except DamagedManifest as exc:
        report.manifest = exc.reason
    return report, vanished


def _check_unindexed(report: VerifyReport, index: dict[str, dict]) -> None:
    """The good parts with no index entry. A byte-for-byte copy of a good part (indexed or
    not) is foreign: ``pandas.read_parquet`` reads its rows twice. Where the folder has an
    index, a part named by a sweep or compaction since the index began is one it lost (a
    cut or edited index: a part deleted since would go unnoticed). Only files whose size
    another part shares are hashed (an unindexed part was decoded in full already)."""
    if not report.unindexed:
        return
    folder = report.folder
    size = {name: (folder / name).stat().st_size for name in report.unindexed}
    sizes: dict[int, int] = {}
    for name in report.good:
        sizes[index[name].get("bytes")] = sizes.get(index[name].get("bytes"), 0) + 1
    for n in size.values():
        sizes[n] = sizes.get(n, 0) + 1
    good_by_sha = {index[name].get("sha256"): name for name in report.good}
    for name in sorted(report.unindexed):
        if sizes.get(size[name], 0) < 2:
            continue
        digest = file_sha256(folder / name)
        original = good_by_sha.get(digest)
        if original is None:  # the first of identical unindexed files is the original
            good_by_sha[digest] = name
            continue
        report.unindexed.remove(name)
        report.rows -= _rows(folder / name)
        report.foreign.append((name, f"a byte-for-byte copy of {original}: pandas.read_parquet "
                                     "would read its rows twice (pipeline.load keeps one)"))
        report.foreign_parts.append(name)
        report.copies.append(name)
    began = _index_began(index)
    if began is None:  # no index (a folder written before it existed), or it lost every line
        return
    report.unrecorded = [name for name in report.unindexed
                         if _SWEEP_PART_NAME.match(name) and name[5:21] >= began]


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def record_unrecorded(report: VerifyReport) -> list[str]:
    """``--repair``: index the parts the index lost (checked good just now, under the lock),
    with their checksums as they are now."""
    for name in report.unrecorded:
        path = report.folder / name
        record_part(report.folder, name, path, _rows(path))
    return list(report.unrecorded)


def _verify_file(report: VerifyReport, path: Path, entry: dict | None, experiment) -> None:
    import pyarrow.parquet as pq

    name = path.name

    def corrupt(why: str) -> None:
        if not path.exists():  # removed while checked (a compaction's swap), not damaged
            raise _Vanished(name)
        report.corrupt.append((name, why))
        report.held_tasks.append(name)  # what it held cannot be read: presumed tasks

    if path.is_dir():
        report.foreign.append((name, "a directory: Parquet readers would descend into it"))
        return
    if not PART_NAME.match(name):
        report.foreign.append((name, "not a part file (part-*.parquet)"))
        return

    def unreadable() -> None:  # its permissions, not damage: --repair must leave it
        size = path.stat().st_size
        odd = entry is not None and size != entry.get("bytes")
        report.unreadable.append((name, PERMISSION_DENIED + (
            f"; {size} bytes on disk, {entry.get('bytes')} written: verify it once readable"
            if odd else "")))

    try:
        with open(path, "rb"):
            pass
    except PermissionError:
        return unreadable()
    if entry is not None:  # recorded when written: size and sha256 decide, before parsing
        size = path.stat().st_size
        if size != entry.get("bytes"):
            return corrupt(f"{size} bytes on disk, {entry.get('bytes')} written")
        try:
            digest = file_sha256(path)
        except FileNotFoundError:
            raise
        except PermissionError:  # chmod'ed since the check above
            return unreadable()
        except OSError as exc:  # EIO: --repair moves it aside
            return corrupt(f"cannot be read: {exc.strerror or exc}")
        if digest != entry.get("sha256"):
            return corrupt("sha256 differs from the one recorded when written")
    try:
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
    except PermissionError:
        return unreadable()
    except Exception as exc:
        return corrupt(_reason(exc))
    problem = _schema_problem(schema, experiment)
    if problem:
        report.foreign.append((name, problem))
        report.foreign_parts.append(name)
        if meta.num_rows and _holds_tasks_of(schema, experiment):
            report.held_tasks.append(name)
        return
    if entry is not None:
        if meta.num_rows != entry.get("rows"):
            return corrupt(f"{meta.num_rows} rows, {entry.get('rows')} written")
        report.good.append(name)
    else:  # written before part checksums existed: decode it all instead
        try:
            _read_one(path)
        except UnreadablePartFile:
            return unreadable()
        except BadPartFile as exc:
            return corrupt(exc.reason)
        report.unindexed.append(name)
    report.rows += meta.num_rows


def quarantine(report: VerifyReport) -> list[tuple[str, Path]]:
    """Move every bad file of ``report`` (a damaged manifest too) to ``folder/_quarantine/``
    (never deleting; a name already there gets a numeric suffix) and forget the parts and the
    vanished ones in the index. Unreadable files (permissions) stay where they are, indexed.
    All or nothing: if a move or the index rewrite fails (a full disk), the files moved so far
    are put back before the error is raised, so the index never lists a part that was moved
    (verify read it as deleted by hand). Returns (name, new path) pairs."""
    folder = report.folder
    target_dir = folder / QUARANTINE
    made_dir = not target_dir.exists()
    moved = []
    damaged = [(MANIFEST, report.manifest)] if report.manifest is not None else []
    try:
        for name, _ in report.bad + damaged:
            target_dir.mkdir(exist_ok=True)
            target = target_dir / name
            n = 1
            while target.exists():
                target = target_dir / f"{name}.{n}"
                n += 1
            shutil.move(str(folder / name), str(target))
            moved.append((name, target))
        forget_parts(folder, [name for name, _ in moved] + list(report.missing))
    except OSError:  # not after a Ctrl-C: the index may have been replaced already
        # a rename back to the name just freed needs no space; if it fails all the same, the
        # part reads as missing and the next --repair forgets it (its file is in _quarantine/)
        for name, target in reversed(moved):
            try:
                shutil.move(str(target), str(folder / name))
            except OSError:
                pass
        if made_dir:
            try:
                target_dir.rmdir()  # only if empty: nothing stays moved
            except OSError:
                pass
        raise
    return moved
