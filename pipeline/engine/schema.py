"""Bookkeeping columns that the engine adds to every result row (defined in the experiment
layer, which reserves their names; see :mod:`pipeline.experiments._columns`)."""

from pipeline.experiments._columns import BOOKKEEPING, PROVENANCE, RESERVED_COLUMNS, SEED_COLUMN

# (description, unit) of every column the engine adds; units as in experiments.base.document.
BOOKKEEPING_DOCS = {
    "task_id": ("task identity: sha256 (96 bits, hex) of experiment, version and canonical "
                "parameters", None),
    "experiment_version": ("the experiment's declared version; changing it changes every id", None),
    "status": ("'ok', or 'failed' when the task raised (see error)", None),
    "error": ("exception type, message and location of a failed task", None),
    "elapsed_s": ("wall time inside the experiment function", "s"),
    "worker": ("address of the Dask worker that ran the task", None),
    "started_at": ("when the task started (UTC)", None),
    "finished_at": ("when the task finished (UTC)", None),
    "row_index": ("position of the row within its task (a task may emit several rows)", None),
    "seed": ("random seed of a stochastic task: the leading 63 bits of its task id", None),
    "run_id": ("the sweep run that computed this row (see the manifest)", None),
    "code_id": ("sha256 (64 bits, hex) of the source of the experiment module and the kernel "
                "modules it imports: rows with different code_ids were computed by different "
                "code", None),
}


def column_doc(experiment, name: str) -> tuple[str, str | None, bool]:
    """(description, unit, exact integer?) of a column of ``experiment``'s result table: the
    engine's bookkeeping columns, else the experiment's declarations as
    :func:`pipeline.experiments.base.declared_doc` reads them (the report reads the same)."""
    from pipeline.experiments.base import declared_doc

    if name in BOOKKEEPING_DOCS:
        return (*BOOKKEEPING_DOCS[name], False)
    doc = declared_doc(experiment, name)
    if doc.parameter and not (experiment.column_docs.get(name) or ("",))[0]:
        description = f"parameter: {doc.description}" if doc.description else f"parameter {name}"
        return description, doc.unit, False
    return doc.description, doc.unit, doc.exact


def field_metadata(experiment, name: str) -> dict[str, str] | None:
    """Arrow field metadata (``description``, ``unit``) of one column, or None if undocumented."""
    description, unit, exact = column_doc(experiment, name)
    meta = {}
    if description:
        meta["description"] = description
    if unit:
        meta["unit"] = unit
    if exact:
        meta["exact_integer"] = "true"
    return meta or None

__all__ = ["BOOKKEEPING", "RESERVED_COLUMNS", "SEED_COLUMN", "PROVENANCE", "column_doc",
           "field_metadata"]
