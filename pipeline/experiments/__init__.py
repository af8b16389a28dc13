"""Experiment families, one module each; every module registers its experiments on import.

Adding a family means adding a module here: the engine, the CLI and the report core find it
by discovery and need no change.
"""

from __future__ import annotations

import importlib
import pkgutil

_discovered = False


def discover() -> None:
    """Import every experiment module in this package (idempotent)."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _discovered = True
