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
import sys
import traceback
import warnings
from pathlib import Path

_discovered = False
BROKEN: dict[str, str] = {}  # module name -> import error


def _modules() -> list[pkgutil.ModuleInfo]:
    return [info for info in pkgutil.iter_modules(__path__)
            if info.name != "base" and not info.name.startswith("_")]


def _import(name: str) -> None:
    if name in BROKEN or f"{__name__}.{name}" in sys.modules:
        return
    try:
        importlib.import_module(f"{__name__}.{name}")
    except Exception as exc:  # one broken family must not hide the others
        BROKEN[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        # where in the module (the failing import, the line that raised): not Python's own
        # import machinery, nor a library frame below the module's line
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if Path(f.filename).resolve().parent == Path(__path__[0]).resolve()]
        if frames:
            BROKEN[name] += f" [{Path(frames[-1].filename).name}:{frames[-1].lineno}]"
        warnings.warn(f"experiment module {name!r} failed to import: {BROKEN[name]}")


def discover_for(experiment: str) -> None:
    """Import the modules that may register ``experiment``: those whose source holds the name
    in quotes (a package, or a source that cannot be read, is imported). A module copied from
    another holds it too, so a name registered twice is still found out; a name built at run
    time is only found by :func:`discover`, which callers fall back to. Every command paid for
    importing every family (scipy, networkx...: about half a second of CPU) to use one."""
    if _discovered:
        return
    quoted = (f'"{experiment}"', f"'{experiment}'")
    for info in _modules():
        try:
            source = (Path(info.module_finder.path) / f"{info.name}.py").read_text()
        except (OSError, AttributeError, UnicodeDecodeError):
            source = None
        if source is None or any(q in source for q in quoted):
            _import(info.name)


def discover() -> None:
    """Import every experiment module in this package (idempotent)."""
    global _discovered
    if _discovered:
        return
    for info in _modules():
        _import(info.name)
    from pipeline.experiments.base import CONFLICTS, conflict_message

    for name in CONFLICTS:
        warnings.warn(conflict_message(name))
    _discovered = True
