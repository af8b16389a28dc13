"""Code identity of an experiment: ``code_id``, stamped on every stored row.

``code_id`` is the sha256 (first 16 hex digits) of the source files of the experiment's module
and of every ``pipeline.kernels`` / ``pipeline.experiments`` module it imports, followed
transitively (found by reading ``import`` statements, not by importing). The contract module
``pipeline.experiments.base`` is left out: it declares, it does not compute. Any edit to one of
those files (a kernel fix, a changed default) gives a new code_id even without a ``version``
bump, so rows computed by other code can be found and, with ``rerun_changed=true``, recomputed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import threading

SCIENCE_PACKAGES = ("pipeline.kernels", "pipeline.experiments")
NOT_SCIENCE = {"pipeline.experiments", "pipeline.experiments.base"}


def _source(module: str) -> tuple[str | None, bytes | None]:
    """(file path, bytes) of a module's source without importing it, or (None, None)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None, None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None, None
    with open(spec.origin, "rb") as fh:
        return spec.origin, fh.read()


def _is_science(module: str) -> bool:
    return module not in NOT_SCIENCE and any(
        module == pkg or module.startswith(pkg + ".") for pkg in SCIENCE_PACKAGES)


def _imports(module: str, source: bytes, is_package: bool) -> set[str]:
    """Modules named by the import statements of ``source`` (``from P import m`` gives P.m
    when that is a module, else P)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module if is_package else module.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                parent = f"{base}.{node.module}" if node.module else base
            else:
                parent = node.module or ""
            out.add(parent)
            for alias in node.names:
                if _is_science(f"{parent}.{alias.name}") and _source(f"{parent}.{alias.name}")[0]:
                    out.add(f"{parent}.{alias.name}")
    return out


@functools.lru_cache(maxsize=None)
def code_modules(module: str) -> tuple[str, ...]:
    """``module`` and the science modules it imports, transitively, sorted by name."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or not _is_science(name):
            continue
        path, source = _source(name)
        if source is None:
            continue
        seen.add(name)
        todo.extend(_imports(name, source, path.endswith("__init__.py")))
    return tuple(sorted(seen))


@functools.lru_cache(maxsize=None)
def module_code_id(module: str) -> str:
    digest = hashlib.sha256()
    for name in code_modules(module):
        digest.update(name.encode() + b"\0" + _source(name)[1] + b"\0")
    return digest.hexdigest()[:16]


def code_id(experiment) -> str:
    """The code identity of ``experiment`` (see the module docstring); cached per process."""
    return module_code_id(experiment.run.__module__)


CHANGED_SINCE_LOADED = "+changed"  # suffix of a loaded_code_id the files no longer describe
_LOADED_IDS: dict[str, str] = {}
_LOADED_LOCK = threading.Lock()


def _loaded_code_id(module: str) -> str:
    from pipeline.experiments.base import LOADED_SOURCES, note_loaded_sources

    note_loaded_sources()  # kernels imported since the last register() (inside run, say)
    try:
        current = module_code_id(module)
        for name in code_modules(module):
            path, source = _source(name)
            if path in LOADED_SOURCES and hashlib.sha256(source).hexdigest() != LOADED_SOURCES[path]:
                return current + CHANGED_SINCE_LOADED
    except OSError:  # a file gone (a branch switched under the worker): not what it loaded
        return "unknown" + CHANGED_SINCE_LOADED
    return current


def loaded_code_id(experiment) -> str:
    """The code identity of what this process has *loaded* for ``experiment``: its
    :func:`code_id` while the files hold what it imported; with ``CHANGED_SINCE_LOADED``
    appended if one has changed since (a long-lived worker keeps the old code in memory).
    Computed once per process (what is loaded does not change), under a lock: hundreds of
    threads start their first batch together on a worker that joins."""
    module = experiment.run.__module__
    known = _LOADED_IDS.get(module)
    if known is None:
        with _LOADED_LOCK:
            known = _LOADED_IDS.get(module)
            if known is None:
                known = _LOADED_IDS[module] = _loaded_code_id(module)
    return known


def other_code_message(worker: str, loaded: str, expected: str, name: str,
                       advice: str = "Restart the workers so that they load the code on disk"
                       ) -> str:
    """Why a worker's results cannot be stamped with this sweep's code_id."""
    if loaded.endswith(CHANGED_SINCE_LOADED):
        why = ("it imported the experiment's modules before their files changed, and runs "
               "the old code")
    else:
        why = f"it runs code_id {loaded}"
    return (f"worker {worker} computes experiment '{name}' with other code than this sweep "
            f"(code_id {expected}): {why}. {advice}")


def provenance_stamp(experiment, run_id: str) -> dict:
    """The ``PartWriter`` stamp: ``run_id`` and ``code_id`` on every row, documented fields."""
    import pyarrow as pa

    from pipeline.engine.schema import PROVENANCE, field_metadata

    values = {"run_id": run_id, "code_id": code_id(experiment)}
    return {name: (values[name], pa.field(name, typ, metadata=field_metadata(experiment, name)))
            for name, typ in PROVENANCE.items()}


def stale_points(grid, path, current: str):
    """The grid's points whose latest stored ok attempt (the rows ``load`` returns) was
    computed by code other than ``current`` (another code_id, or none recorded: rows written
    before code_ids were): their sorted id prefixes (see
    :func:`pipeline.store.parquet.id_prefixes`), and those other code_ids. Cheap when nothing
    is stale (ids and code_ids only); otherwise the stored parameters are matched against the
    grid (:func:`pipeline.engine.resume.grid_row_batches`), linear in what is stored: hashing the
    grid to find them took about 3 s per 10^6 points before a resume after any edit could
    start (50 minutes for 10^9)."""
    import numpy as np
    import pyarrow.parquet as pq

    from pipeline.engine.resume import grid_row_batches
    from pipeline.store.parquet import contains, part_files, unified_schema, unique_ids

    none = np.zeros(0, dtype=np.uint64), []
    files = part_files(path)
    if not files:
        return none
    # a column whose type changed with the version (see unified_schema) must not refuse the folder
    schema = unified_schema([pq.read_schema(f) for f in files])
    if "code_id" in schema.names and not _other_code_stored(files, schema, current):
        return none  # the usual case, found a batch at a time from two small columns
    # Each task's latest ok attempt, as load keeps it (failed rows never outrank ok ones):
    # a task whose latest rows came from other code is stale even if an older attempt had
    # the current code (an edit rerun, then reverted), or a compaction changed the answer.
    heads, codes_of, names = _latest_ok_codes(files, schema)
    is_current = codes_of == (names.index(current) if current in names else -2)
    fresh = unique_ids(heads[is_current])
    other_ids = unique_ids(heads[~is_current])
    other_ids = other_ids[~contains(fresh, other_ids)]
    if other_ids.size == 0:
        return none
    ids = [hits["task_key"].to_numpy()[(hits["status"] == "ok").to_numpy()]
           for hits in grid_row_batches(grid, path)]
    if not ids:
        return none
    ids = np.concatenate(ids)
    stale = contains(other_ids, ids)
    if not stale.any():
        return none
    stale_ids = unique_ids(ids[stale])
    # the code_ids of the stale tasks' latest attempts (those load returns), not of older ones
    found = codes_of[~is_current & contains(stale_ids, heads)]
    codes = sorted({names[c] if c >= 0 else "none recorded" for c in np.unique(found).tolist()})
    return stale_ids, codes


def _latest_ok_codes(files, schema):
    """(id prefixes, code indices, code names) of the rows ``load`` keeps among the stored
    ok rows (index -1: no code_id recorded). The key columns are scanned a batch at a time
    into arrays (:func:`pipeline.store.parquet.kept_positions`): the ok rows' keys read whole
    and deduplicated in Arrow held about 330 bytes a row, on every resume after an edit. An
    id the arrays cannot hold (edited by hand) takes that Arrow path."""
    import numpy as np
    import pyarrow.compute as pc

    from pipeline.store.integrity import scan_parts
    from pipeline.store.parquet import arrays_hold, key_arrays, kept_positions

    has_code = "code_id" in schema.names
    columns = ["task_id", "status", "finished_at", "row_index"] + (["code_id"] if has_code
                                                                   else [])
    names: list[str] = []
    parts = {k: [] for k in ("head", "tail", "row_index", "failed", "stamp", "code")}
    for batch in scan_parts(files, columns, schema=schema):
        batch = batch.filter(pc.fill_null(pc.equal(batch.column("status"), "ok"), False))
        if not arrays_hold(batch):
            return _latest_ok_codes_by_hashing(files, schema, columns)
        for name, values in zip(("head", "tail", "row_index", "failed", "stamp"),
                                key_arrays(batch)):
            parts[name].append(values)
        code = np.full(batch.num_rows, -1, dtype=np.int32)
        if has_code:
            encoded = batch.column("code_id").dictionary_encode()
            for c in encoded.dictionary.to_pylist():  # a handful of code_ids in a store
                if c not in names:
                    names.append(c)
            positions = [names.index(c) for c in encoded.dictionary.to_pylist()]
            valid = np.asarray(encoded.indices.is_valid())
            code[valid] = np.asarray(positions, dtype=np.int32)[
                np.asarray(encoded.indices.fill_null(0))[valid]]
        parts["code"].append(code)
    if not parts["head"]:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int32), names
    head, tail, row_index, failed, stamp, code = (np.concatenate(parts.pop(k)) for k in (
        "head", "tail", "row_index", "failed", "stamp", "code"))
    kept = kept_positions(head, tail, row_index, failed, stamp)
    return head[kept], code[kept], names


def _latest_ok_codes_by_hashing(files, schema, columns):
    """:func:`_latest_ok_codes` by ``deduplicate_table`` on the ok rows' keys read whole."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from pipeline.store.parquet import aligned_prefixes, deduplicate_table

    table = ds.dataset([str(f) for f in files], schema=schema, format="parquet").to_table(
        columns=columns, filter=pc.equal(pc.field("status"), "ok"))
    if "code_id" not in table.column_names:
        table = table.append_column("code_id", pa.nulls(table.num_rows, pa.string()))
    table = deduplicate_table(table)
    codes = table["code_id"].to_pylist()
    names = sorted({c for c in codes if c is not None})
    index = {c: i for i, c in enumerate(names)}
    return (aligned_prefixes(table["task_id"])[0],
            np.array([index.get(c, -1) if c is not None else -1 for c in codes],
                     dtype=np.int32), names)


def _other_code_stored(files, schema, current: str) -> bool:
    """Whether any ok row was computed by code other than ``current`` (or by code not
    recorded), read a batch at a time."""
    import pyarrow.compute as pc

    from pipeline.store.integrity import scan_parts

    for batch in scan_parts(files, ["status", "code_id"], schema=schema):
        ok = pc.fill_null(pc.equal(batch.column("status"), "ok"), False)
        same = pc.fill_null(pc.equal(batch.column("code_id"), current), False)
        if pc.any(pc.and_(ok, pc.invert(same))).as_py():
            return True
    return False


def check_code_changes(grid, path, plan, rerun_changed: bool, log) -> int:
    """Warn when stored ok rows of this grid were computed by other code under the same
    version; with ``rerun_changed`` add those points to ``plan.pending`` (the new rows win
    in load's deduplication: the latest finished row of a task and row index is kept).
    Returns how many such points there are."""
    current = code_id(grid.experiment)
    ids, codes = stale_points(grid, path, current)
    if not ids.size:
        return 0
    if rerun_changed:
        log.warning("rerun_changed=true: recomputing %d stored point(s) computed by other code "
                    "(code_id %s; now %s)", ids.size, ", ".join(codes), current)
        plan.pending.include(ids)
        plan.done_ok -= int(ids.size)
    else:
        log.warning("warning: %d stored point(s) of this grid were computed by other code "
                    "(code_id %s; now %s) under the same version %d: they are kept as they "
                    "are. Bump the experiment's version if results change, or rerun with "
                    "rerun_changed=true to recompute them", ids.size, ", ".join(codes),
                    current, grid.version)
    return int(ids.size)
