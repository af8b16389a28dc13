"""Parquet part files written atomically, resume by task id, and the run manifest."""

from pipeline.store.integrity import BadPartFile, verify_store
from pipeline.store.manifest import read_manifest
from pipeline.store.parquet import load

__all__ = ["BadPartFile", "load", "read_manifest", "verify_store"]
