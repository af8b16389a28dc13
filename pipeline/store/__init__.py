"""Parquet part files written atomically, resume by task id, and the run manifest."""

from pipeline.store.integrity import BadPartFile, verify_store
from pipeline.store.parquet import load, read_manifest

__all__ = ["BadPartFile", "load", "read_manifest", "verify_store"]
