"""Paper-ready tables and figures from stored results.

Report functions are plug-ins: each module in this package (other than ``core``) registers
functions for the experiments it knows with :func:`pipeline.report.core.report_for`.
"""

import importlib
import pkgutil

_discovered = False
# the report machinery itself; every other module of the package is a family's plug-in
_NOT_PLUGINS = ("core", "build", "summary", "style", "columns", "html", "latex", "options")


def discover() -> None:
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _NOT_PLUGINS and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _discovered = True
