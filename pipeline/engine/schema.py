"""Bookkeeping columns that the engine adds to every result row (defined in the experiment
layer, which reserves their names; see :mod:`pipeline.experiments._columns`)."""

from pipeline.experiments._columns import BOOKKEEPING, RESERVED_COLUMNS, SEED_COLUMN

__all__ = ["BOOKKEEPING", "RESERVED_COLUMNS", "SEED_COLUMN"]
