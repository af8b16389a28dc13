"""Parquet part files written atomically, resume by task id, and the run manifest."""

from pipeline.store.parquet import load, read_manifest

__all__ = ["load", "read_manifest"]
