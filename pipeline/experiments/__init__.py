"""Experiment families, one module each; every module registers its experiments on import.

Adding a family means adding a module here: the engine, the CLI and the report core find it
by discovery and need no change. A module that fails to import is recorded in ``BROKEN``
(with its error) and does not take the other families down with it. A name that two modules
register (a module copied, its ``name=`` left as it was) is recorded in
:data:`pipeline.experiments.base.CONFLICTS` and cannot be used until one is renamed.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback
import warnings

_discovered = False
BROKEN: dict[str, str] = {}  # module name -> import error


def discover() -> None:
    """Import every experiment module in this package (idempotent)."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:  # one broken family must not hide the others
            BROKEN[info.name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            warnings.warn(f"experiment module {info.name!r} failed to import: {BROKEN[info.name]}")
    from pipeline.experiments.base import CONFLICTS, conflict_message

    for name in CONFLICTS:
        warnings.warn(conflict_message(name))
    _discovered = True
