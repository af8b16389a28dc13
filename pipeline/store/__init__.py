"""Parquet part files written atomically, resume by task id, and the run manifest."""

__all__ = ["BadPartFile", "load", "read_manifest", "verify_store"]

# Imported on first use: ``pipeline.store.redact`` is on every command's path, and ``load``
# brings pandas (about half a second of CPU), which ``verify``, for one, does not need.
_HOMES = {"BadPartFile": "pipeline.store.integrity", "verify_store": "pipeline.store.integrity",
          "read_manifest": "pipeline.store.manifest", "load": "pipeline.store.parquet"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'pipeline.store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
