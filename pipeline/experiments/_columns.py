"""Bookkeeping columns that the engine adds to every result row.

Defined in the experiment layer (which must not import the engine) because experiments may
not declare parameters or columns under these names; ``pipeline.engine.schema`` re-exports them.
"""

import pyarrow as pa

BOOKKEEPING = {
    "task_id": pa.string(),
    "experiment_version": pa.int64(),
    "status": pa.string(),  # "ok" or "failed"
    "error": pa.string(),
    "elapsed_s": pa.float64(),
    "worker": pa.string(),
    "started_at": pa.timestamp("us", tz="UTC"),
    "finished_at": pa.timestamp("us", tz="UTC"),
    "row_index": pa.int64(),  # position of the row within its task (tasks may emit several)
}
SEED_COLUMN = ("seed", pa.int64())
# Provenance stamped on every row by the driver (engine/provenance.py, PartWriter's stamp).
PROVENANCE = {"run_id": pa.string(), "code_id": pa.string()}
RESERVED_COLUMNS = tuple(BOOKKEEPING) + (SEED_COLUMN[0],) + tuple(PROVENANCE)
