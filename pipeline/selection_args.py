"""Selections written as on the command line (``experiment=``, ``grid.*``, ``params.*``,
``run_id=``, ``code_id=``, ``version=``), for ``pipeline.load(select=...)`` and
``python -m pipeline export``. A front-door module: it composes the experiment's YAML with
Hydra as ``run.py`` does; the selecting itself is pipeline/report/selection.py.
"""

from __future__ import annotations

import difflib
from typing import Any, Sequence

import pandas as pd

from pipeline.report.selection import (Selection, SelectionError, as_tuple,
                                       refuse_empty_filters, select,
                                       versions_of)


SELECTION_KEYS = ("experiment", "run_id", "code_id", "version")


def parse_selection_args(name: str, args: Sequence[str]) -> Selection:
    """A selection from command-line words: ``experiment=NAME`` (the YAML's grid),
    ``grid.*``/``params.*``/``~grid.*`` overrides (on top of that YAML, as for a sweep; any of
    them implies the YAML grid), and ``run_id=``, ``code_id=``, ``version=`` (comma lists).
    Raises SelectionError naming the bad word."""
    from pipeline.overrides import split_node_overrides
    from pipeline.validation import ConfigError

    rest, actions = [], []
    try:
        rest, actions = split_node_overrides(list(args))
    except ConfigError as exc:
        raise SelectionError(str(exc)) from None
    keys: dict[str, Any] = {}
    use_grid = bool(actions)
    for word in rest:
        key, sep, value = word.partition("=")
        if not sep or key not in SELECTION_KEYS:
            close = difflib.get_close_matches(key, SELECTION_KEYS, n=1)
            hint = f" (did you mean {close[0]}=?)" if close and sep else ""
            raise SelectionError(f"unknown selection '{word}'{hint}; allowed: experiment=NAME, "
                                 "grid.PARAM=[...], params.PARAM=VALUE, run_id=ID[,ID], "
                                 "code_id=ID[,ID], version=N[,N]|latest")
        if key == "experiment":
            if value != name:
                raise SelectionError(f"experiment={value} does not match the folder's "
                                     f"experiment '{name}'")
            use_grid = True
        else:  # a,b or, as run.py report=true takes it, [a,b]
            listed = value[1:-1] if value.startswith("[") and value.endswith("]") else value
            keys[key] = [v.strip().strip("'\"") for v in listed.split(",") if v.strip()]
    refuse_empty_filters(**keys)
    grid = compose_grid(name, actions) if use_grid else None
    return Selection(grid=grid, run_ids=tuple(keys.get("run_id", ())),
                     code_ids=tuple(keys.get("code_id", ())),
                     versions=versions_of(keys.get("version")))


def compose_grid(name: str, node_actions) -> Any:
    """The Grid a sweep ``run.py experiment=NAME`` + overrides would run: Hydra composes
    ``conf/experiment/NAME.yaml``, then the grid/params overrides replace its values."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from pipeline.overrides import apply_node_overrides, available_experiments, params_typed
    from pipeline.validation import CONF_DIR, ConfigError, refuse_fixed_axes
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import ParamError, get_experiment

    if name not in available_experiments():
        raise SelectionError(f"no config conf/experiment/{name}.yaml to take the grid from; "
                             "available: " + ", ".join(available_experiments()))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"experiment={name}"])
            conf = OmegaConf.to_container(cfg, resolve=True)
    finally:
        GlobalHydra.instance().clear()
    try:
        apply_node_overrides(conf, node_actions)
    except ConfigError as exc:
        raise SelectionError(str(exc)) from None
    for node in ("grid", "params"):
        if conf.get(node) is not None and not isinstance(conf[node], dict):
            raise SelectionError(f"{node} must be a mapping of parameter names to values")
    try:  # as run.py refuses it (the axis won, and params.x=3 was dropped silently)
        refuse_fixed_axes(conf.get("grid") or {}, params_typed(node_actions))
    except ConfigError as exc:
        raise SelectionError(str(exc)) from None
    try:
        return Grid(get_experiment(name), conf.get("grid") or {}, conf.get("params") or {})
    except (ParamError, ConfigError) as exc:
        raise SelectionError(str(exc)) from None


def load_selected(results_dir, name: str, *, status=None, version=None, words=None,
                  grid=None, params=None, run_id=None, code_id=None,
                  on_error="raise") -> pd.DataFrame:
    """``pipeline.load`` with a selection (see its docstring); ``words`` is its ``select``."""
    refuse_empty_filters(run_id=run_id, code_id=code_id, version=version)
    if words is not None and (grid is not None or params is not None):
        raise SelectionError("give either select=[...] (run.py words) or grid=/params= "
                             "(dicts), not both")
    if isinstance(words, str):
        words = words.split()
    if words is not None:
        selection = parse_selection_args(name, words)
    elif grid is not None or params is not None:
        from pipeline.engine.grid import Grid
        from pipeline.experiments.base import ParamError, get_experiment

        try:
            selection = Selection(grid=Grid(get_experiment(name), grid or {}, params or {}))
        except ParamError as exc:
            raise SelectionError(str(exc)) from None
        except KeyError:  # an unknown name: KeyError's bare repr ('calibraton') said nothing
            from pipeline.validation import experiment_problem

            raise SelectionError(experiment_problem(name) or f"unknown experiment {name!r}") \
                from None
    else:
        selection = Selection()
    selection.run_ids += as_tuple(run_id)
    selection.code_ids += as_tuple(code_id)
    selection.versions += versions_of(version)
    df = select(results_dir, name, selection, status=status, on_error=on_error)
    covered = df.attrs.get("coverage", {}).get("grid")
    if covered is not None and covered["points"] and not covered["stored"] \
            and not covered.get("left_out_by_filter"):
        import warnings

        # an empty frame with the reason in attrs only read as "nothing was computed"
        hint = ("" if words is not None else
                "; grid=/params= give each parameter they leave out its declared default, "
                "not the YAML's (select=[...] takes run.py's words, YAML included)")
        why = [w for w in df.attrs["coverage"]["warnings"] if "point(s) of the grid" in w]
        warnings.warn(f"none of the {covered['points']:,} point(s) of the grid given is "
                      f"stored in '{name}'{hint}"
                      + (f" ({why[0]})" if why else "; df.attrs['coverage'] says more"),
                      stacklevel=3)
    return df
