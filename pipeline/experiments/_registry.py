"""The registry of experiments: ``register`` (called by each experiment module), ``registry``
and ``get_experiment``, with where each was registered (two modules registering one name make
it unusable, naming both), and the science sources each process imported (for
``provenance.loaded_code_id``). Re-exported by :mod:`pipeline.experiments.base`, where plug-ins
import ``register`` from."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.experiments.base import Experiment

_REGISTRY: dict[str, Experiment] = {}

# Source file -> sha256 of its bytes when this process imported it: a long-lived worker keeps
# the code it imported, whatever happens to the files later, and the engine compares
# (provenance.loaded_code_id) before trusting the files on disk to say what it runs. Contents,
# not times: a copy or a checkout that rewrites the same bytes is no change.
LOADED_SOURCES: dict[str, str] = {}
_SCIENCE_PREFIXES = ("pipeline.kernels", "pipeline.experiments")


def note_loaded_sources() -> None:
    """Record the science modules imported so far (those not recorded yet)."""
    import hashlib

    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (path and path not in LOADED_SOURCES and path.endswith(".py")
                and name.startswith(_SCIENCE_PREFIXES)):
            try:
                with open(path, "rb") as fh:
                    LOADED_SOURCES[path] = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                continue


# Where each experiment was registered: name -> (source file, line) of its register() call.
_ORIGINS: dict[str, tuple[str, int]] = {}
# Names registered from two places (a module copied from another, its name= left as it was):
# name -> every (file, line) that registered it. Such a name is in no registry() and cannot
# be used: whichever module imported last used to win, silently, its rows stored as the
# other's (and the other module was blamed as "failed to import").
CONFLICTS: dict[str, list[tuple[str, int]]] = {}


class ExperimentConflict(KeyError):
    """``get_experiment(name)`` of a name that two modules register (see :data:`CONFLICTS`).
    A ``KeyError``, so that code that treats an unknown name as unknown still does."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name
        self.message = conflict_message(name)

    def __str__(self) -> str:
        return self.message


def shown_path(path: str) -> str:
    """``path`` relative to the folder holding the ``pipeline`` package, if inside it."""
    from pathlib import Path

    try:
        return str(Path(path).resolve().relative_to(Path(__file__).resolve().parents[2]))
    except (ValueError, OSError):
        return str(path)


def _caller() -> tuple[str, int]:
    """The (file, line) of the register() call, outside this module."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return ("?", 0)
    return (frame.f_code.co_filename, frame.f_lineno)


def registered_at(name: str) -> str | None:
    """Where experiment ``name`` was registered (``pipeline/experiments/x.py, line 7``)."""
    origin = _ORIGINS.get(name)
    return None if origin is None else f"{shown_path(origin[0])}, line {origin[1]}"


def conflict_message(name: str) -> str:
    """What to say when ``name`` is used although several modules register it."""
    places = [f"{shown_path(f)} (line {line})" for f, line in CONFLICTS.get(name, ())]
    times = "twice" if len(places) == 2 else f"{len(places)} times"
    return (f"experiment '{name}' is registered {times}, by " + " and by ".join(places)
            + f"; a name must be unique, so none of them runs as '{name}' (one's results "
            "would be stored as the other's). Give the copy its own name=... in "
            "register(Experiment(...)) and its own conf/experiment/NAME.yaml, or delete it")


def register(experiment: Experiment) -> Experiment:
    """Make ``experiment`` known by its name. A name registered again from another place (a
    copied module) makes the name unusable for both; see :data:`CONFLICTS`."""
    name, origin = experiment.name, _caller()
    previous = _REGISTRY.get(name)
    if name in CONFLICTS:
        if origin not in CONFLICTS[name]:
            CONFLICTS[name].append(origin)
    elif previous is not None and previous is not experiment and _ORIGINS.get(name) != origin:
        CONFLICTS[name] = [_ORIGINS.pop(name, ("?", 0)), origin]
        del _REGISTRY[name]
    else:  # new, or the same call again (a module reloaded): replaces it
        _REGISTRY[name] = experiment
        _ORIGINS[name] = origin
    note_loaded_sources()  # its module and the kernels it imported have just been loaded
    return experiment


def registry() -> dict[str, Experiment]:
    """All experiments, importing every module of ``pipeline.experiments`` once. A name that
    two modules register is not among them (:data:`CONFLICTS`)."""
    from pipeline.experiments import discover

    discover()
    return dict(_REGISTRY)


def get_experiment_from(module: str, name: str) -> Experiment:
    """The experiment ``name``, importing only ``module`` (a module of this package) when it
    registers it: a worker rebuilding a grid the driver has already checked against every
    module. Importing every family cost each worker process about a second of CPU (scipy,
    networkx...) at every sweep's start, and each worker that joined or restarted. Any other
    case takes :func:`get_experiment`. The module's own import error, if any, is raised: the
    driver imported it, so the worker's environment differs (a package missing there)."""
    import importlib

    if name not in _REGISTRY and name not in CONFLICTS and \
            module.startswith("pipeline.experiments.") and module not in sys.modules:
        importlib.import_module(module)
    if name in _REGISTRY and name not in CONFLICTS:
        return _REGISTRY[name]
    return get_experiment(name)


def find(name: str) -> Experiment | None:
    """The experiment ``name`` if one module registers it, importing only the modules that
    may (:func:`pipeline.experiments.discover_for`); else ``None``, every module imported
    (for the messages: the names there are, the modules that failed, both registrations)."""
    from pipeline.experiments import discover_for

    discover_for(name)
    if name in _REGISTRY and name not in CONFLICTS:
        return _REGISTRY[name]
    registry()
    return None


def get_experiment(name: str) -> Experiment:
    """The experiment ``name``; ``KeyError`` if there is none, :class:`ExperimentConflict`
    (a ``KeyError`` that names both modules) if two modules register it."""
    experiment = find(name)
    if experiment is not None:
        return experiment
    if name in CONFLICTS:
        raise ExperimentConflict(name)
    raise KeyError(name)
