"""Paper-ready tables and figures from stored results.

Report functions are plug-ins: each module in this package (other than ``core``) registers
functions for the experiments it knows with :func:`pipeline.report.core.report_for`.

A plug-in module that fails to import is recorded in ``BROKEN`` (with its error) and does not
take the reports of the other experiments down with it (as ``pipeline.experiments`` isolates
its modules); :func:`broken_for` names the broken modules that would have reported an
experiment, whose report then fails (exit 1) rather than quietly fall back to the generic
summary.
"""

import ast
import importlib
import pkgutil
import warnings
from pathlib import Path

_discovered = False
# the report machinery itself; every other module of the package is a family's plug-in
_NOT_PLUGINS = ("core", "build", "summary", "style", "columns", "html", "latex", "latex_text",
                "options", "selection", "export", "swap", "versions")
BROKEN: dict[str, str] = {}  # plug-in module name -> its import error
_BROKEN_FILES: dict[str, str] = {}  # plug-in module name -> its file


def discover() -> None:
    """Import every report plug-in of this package (idempotent); one that fails to import is
    skipped with a warning naming its file and error, and recorded in :data:`BROKEN`."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_PLUGINS or info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:  # one broken plug-in must not cost every other report
            # one line (format_exception_only gives a SyntaxError three)
            BROKEN[info.name] = f"{type(exc).__name__}: {exc}".replace("\n", " ")
            _BROKEN_FILES[info.name] = _module_file(info)
            _unregister(f"{__name__}.{info.name}")
            warnings.warn(broken_message(info.name), stacklevel=2)
    _discovered = True


def _module_file(info) -> str:
    folder = Path(getattr(info.module_finder, "path", "")).resolve()
    return str(folder / info.name / "__init__.py" if info.ispkg else folder / f"{info.name}.py")


def _unregister(module: str) -> None:
    """Drop what a plug-in registered before its import failed: half a family's report."""
    from pipeline.report.core import _REPORTS

    for functions in _REPORTS.values():
        functions[:] = [fn for fn in functions if getattr(fn, "__module__", None) != module]


def broken_file(module: str) -> str:
    """The file of a broken plug-in, relative to the working directory when inside it."""
    path = Path(_BROKEN_FILES.get(module, module))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def broken_message(module: str) -> str:
    """One line: which plug-in file failed to import, and its error."""
    return f"report module {broken_file(module)} failed to import and is skipped: {BROKEN[module]}"


def broken_for(experiment_name: str) -> list[str]:
    """The broken plug-in modules (:data:`BROKEN`) that report ``experiment_name``: those whose
    source names it in a ``report_for(...)`` call, and the one named after the family module
    that registers it (``report/lattice.py`` for the experiments of ``experiments/lattice.py``)."""
    discover()
    return [m for m in BROKEN if experiment_name in _reported_by(m)]


def _reported_by(module: str) -> set[str]:
    names = set()
    try:
        tree = ast.parse(Path(_BROKEN_FILES[module]).read_text())
    except (OSError, SyntaxError, ValueError, KeyError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == "report_for":
                names |= {a.value for a in node.args
                          if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    try:
        from pipeline.experiments.base import registry

        names |= {name for name, exp in registry().items()
                  if getattr(exp.run, "__module__", None) == f"pipeline.experiments.{module}"}
    except Exception:  # the registry is not this function's to fail on
        pass
    return names
