"""The command line's overrides before Hydra sees them: ``grid.X``/``params.X`` taken out of
Hydra's hands (replace semantics), and the checks whose Hydra messages misled (an unknown
experiment or cluster kind, a misspelt key with Hydra's advice to add it with ``+``)."""

from __future__ import annotations

import re
from typing import Any

from pipeline.validation import CONF_DIR, ConfigError, top_level_keys


_NODE_OVERRIDE = re.compile(r"^(~|\+\+|\+)?(grid|params)\.([A-Za-z_]\w*)(=(.*))?$", re.S)


def split_node_overrides(args: list[str]) -> tuple[list[str], list[tuple[str, str, Any]]]:
    """Take ``grid.X=...`` / ``params.X=...`` (and ``~grid.X``) out of Hydra's hands.

    They are parsed with Hydra's own value grammar but applied after composition with
    *replace* semantics: Hydra would merge a mapping into a mapping and refuse a list over a
    mapping, and would refuse keys the YAML does not list. Returns (other args, actions).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    rest, actions = [], []
    for arg in args:
        m = _NODE_OVERRIDE.match(arg)
        if not m:
            rest.append(arg)
            continue
        prefix, node, key, _, raw = m.groups()
        if prefix == "~":
            actions.append(("delete", f"{node}.{key}", None))
            continue
        if raw is None:
            raise ConfigError(f"'{arg}' needs a value: {node}.{key}=VALUE")
        try:
            chunks = _flat_list_chunks(raw)
            if chunks is not None:  # a long flat list: the same grammar, a chunk at a time
                values = [v for chunk in chunks for v in
                          parser.parse_overrides([f"{node}.{key}={chunk}"])[0].value()]
                actions.append(("set", f"{node}.{key}", values))
                continue
            override = parser.parse_overrides([f"{node}.{key}={raw}"])[0]
        except Exception as exc:
            raise ConfigError(f"cannot parse '{arg}': {exc}") from None
        if override.is_sweep_override():
            raise ConfigError(f"'{arg}': write grid axes as a list, grid.{key}=[a,b,c], or a "
                              "range helper such as '{range:[0,10]}' (a,b,c is Hydra's multirun "
                              "syntax, which grid. and params. do not take, with -m or without)"
                              + ("; params.X fixes one value" if node == "params" else ""))
        actions.append(("set", f"{node}.{key}", override.value()))
    return rest, actions


LIST_CHUNK = 256  # elements parsed at once in a long list
_FLAT_LIST = re.compile(r"^\s*\[([^\[\]{}()'\"\\$]*)\]\s*$", re.S)


def _flat_list_chunks(raw: str) -> list[str] | None:
    """``raw`` cut into lists of LIST_CHUNK elements, when it is a list longer than that whose
    elements are plain tokens (no quotes, brackets, braces, calls, escapes or interpolations:
    they could hold a comma); else None. Hydra's parser finds a list's i-th element by scanning
    its children, so a list of n took n^2 steps: 39 s for 20,000 values."""
    m = _FLAT_LIST.match(raw)
    if m is None:
        return None
    elements = m.group(1).split(",")
    if len(elements) <= LIST_CHUNK or any(not e.strip() for e in elements):
        return None  # (an empty element: Hydra's own error says where)
    return ["[" + ",".join(elements[i:i + LIST_CHUNK]) + "]"
            for i in range(0, len(elements), LIST_CHUNK)]


def apply_node_overrides(conf: dict, actions: list[tuple[str, str, Any]],
                         missing_ok: bool = False) -> set[str]:
    """Apply the ``grid.X``/``params.X`` actions of :func:`split_node_overrides` to the composed
    config. ``~grid.X`` for an X the config does not have is refused (a misspelt removal ran
    the whole axis it meant to drop), as Hydra refuses it elsewhere; with ``missing_ok`` (the
    jobs of a multirun over experiments, where one may lack what another has) it is skipped.
    Returns the removals that found their key."""
    import difflib

    removed = set()
    for action, dotted, value in actions:
        node, key = dotted.split(".", 1)
        target = conf.get(node)
        if target is None:
            target = conf[node] = {}
        elif not isinstance(target, dict):  # params=abc: replacing it dropped the YAML's values
            raise ConfigError(f"{node} must be a mapping of parameter names to values, got "
                              f"{target!r} (set one value with {node}.NAME=VALUE)")
        if action == "delete":
            if key not in target and missing_ok:
                continue
            if key not in target:
                close = difflib.get_close_matches(key, list(target), n=1)
                raise ConfigError(f"'~{dotted}': {node} has no '{key}' to remove"
                                  + (f" (did you mean '~{node}.{close[0]}'?)" if close else "")
                                  + f"; its keys: {', '.join(target) or 'none'}")
            del target[key]
            removed.add(dotted)
        else:
            target[key] = _plain(value)
    return removed


def params_typed(actions: list[tuple[str, str, Any]]) -> set[str]:
    """The parameters fixed on the command line (``params.X=...``)."""
    return {dotted.split(".", 1)[1] for action, dotted, _ in actions
            if action == "set" and dotted.startswith("params.")}


def command_line_keys(actions: list[tuple[str, str, Any]]) -> set[str]:
    """Every ``grid.X``/``params.X`` set on the command line."""
    return {dotted for action, dotted, _ in actions if action == "set"}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def available_experiments() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def available_clusters() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "cluster").glob("*.yaml"))


def check_cluster_choice(args: list[str]) -> None:
    """``cluster=KIND`` must name a conf/cluster/KIND.yaml (Hydra would print a traceback)."""
    known = available_clusters()
    for arg in args:
        if arg.startswith("cluster="):
            for kind in arg.split("=", 1)[1].split(","):
                if kind.strip() not in known:
                    raise ConfigError(f"unknown cluster '{kind.strip()}'; available kinds: "
                                      + ", ".join(known) + f" (the files of {CONF_DIR / 'cluster'})")


def default_cluster() -> str:
    """The cluster kind conf/config.yaml's defaults choose."""
    from omegaconf import OmegaConf

    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))["defaults"]:
        if isinstance(entry, dict) and "cluster" in entry:
            return str(entry["cluster"])
    return "local"


def check_cluster_overrides(args: list[str]) -> None:
    """A misspelt cluster key (``cluster.n_worker=2``) is refused with the kind's keys and the
    closest one. Hydra refused it too, but its advice was to add it with ``+cluster.n_worker``
    (which the cluster's own check then refused)."""
    import difflib

    from pipeline.engine.cluster_config import KINDS, cluster_keys

    kinds = [a.split("=", 1)[1] for a in args if a.startswith("cluster=")]
    kind = kinds[-1] if kinds else default_cluster()
    if kind not in KINDS:  # a multirun over kinds (local,slurm): each job is validated
        return
    allowed = cluster_keys(kind)
    for arg in args:
        key, sep, _ = arg.partition("=")
        parts = key.lstrip("+~").split(".")
        if parts[0] != "cluster" or len(parts) < 2 or parts[1] in allowed:
            continue
        # the batch systems' own words for dask-jobqueue's (SLURM's partition is its queue)
        synonyms = {"partition": "queue", "time": "walltime", "mem": "memory",
                    "cpus_per_task": "cores"}
        close = ([synonyms[parts[1]]] if synonyms.get(parts[1]) in allowed else
                 difflib.get_close_matches(parts[1], allowed, n=1))
        raise ConfigError(f"unknown key 'cluster.{parts[1]}' for cluster={kind}"
                          + (f" (did you mean 'cluster.{close[0]}'?)" if close else "")
                          + "; allowed: " + ", ".join(allowed))


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./:@%+-]*")  # what Hydra's grammar takes unquoted


def quote_results_dir(args: list[str]) -> list[str]:
    """A ``results_dir`` may hold any characters: Hydra's override grammar refuses many outside
    quotes (``run (copy)``, ``a#b``, ``it's``, ``[x]``, non-ASCII letters), so the value is
    quoted and escaped for it. Interpolations still resolve (``${oc.env:SCRATCH}/results``, as
    cluster scripts write). A leading ``~`` is the home folder, as a shell would have it. With ``-m``, a comma still separates the
    folders of a multirun sweep; a value already quoted for Hydra (``"'a b'"``) is left as is."""
    import os

    multirun = any(a in ("-m", "--multirun") for a in args)
    out, extra = [], []
    for arg in args:
        key, sep, value = arg.partition("=")
        quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "'\""  # for Hydra
        if sep and key.lstrip("+") == "results_dir" and not quoted:
            value = os.path.expanduser(value)
            if multirun and "," in value:
                arg = f"{key}=" + ",".join(_hydra_quoted(v) for v in value.split(","))
                if not any(a.lstrip("+").startswith("hydra.sweep.dir=") for a in args):
                    # Hydra resolves its sweep folder before the sweep's values: multirun.yaml
                    # went to the default results/.multirun, a folder nobody named
                    extra.append("hydra.sweep.dir=" + _hydra_quoted(
                        os.path.join(value.split(",")[0], ".multirun")))
            else:
                arg = f"{key}={_hydra_quoted(value)}"
        out.append(arg)
    return out + extra


def _hydra_quoted(value: str) -> str:
    """``value`` as a Hydra override reads it back exactly (but for its interpolations):
    quoted if it needs to be, with quotes and the backslashes before a quote or the end
    escaped."""
    if _PLAIN_PATH.fullmatch(value):  # also "": refused later, by name
        return value
    body = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    return "'" + body.replace("'", "\\'") + "'"


def check_experiment_choice(args: list[str]) -> None:
    """``experiment=NAME`` must name an experiment that one module registers and that has its
    ``conf/experiment/NAME.yaml`` (:func:`pipeline.validation.experiment_problem`)."""
    from pipeline.validation import experiment_problem

    for arg in args:
        if arg.startswith("experiment="):
            for name in arg.split("=", 1)[1].split(","):
                problem = experiment_problem(name.strip())
                if problem:
                    raise ConfigError(problem)


def check_top_level_overrides(args: list[str]) -> None:
    """A misspelt top-level key (``retry_faild=true``) is refused with the allowed keys.
    Hydra refused it too, but its advice was to add it with ``+retry_faild=true``."""
    import difflib

    allowed = top_level_keys()
    for arg in args:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith(("-", "+", "~")):  # ``+key`` adds on purpose: validate()
            continue
        head = re.split(r"[./@]", key, maxsplit=1)[0]  # hydra/launcher=..., cluster.x=...
        if head == "watchdog" and key.startswith("watchdog."):
            from pipeline.engine.watchdog import WATCHDOG_KEYS

            sub = key.split(".")[1]
            if sub not in WATCHDOG_KEYS:
                close = difflib.get_close_matches(sub, WATCHDOG_KEYS, n=1)
                raise ConfigError(f"unknown key 'watchdog.{sub}'"
                                  + (f" (did you mean 'watchdog.{close[0]}'?)" if close else "")
                                  + "; allowed: " + ", ".join(WATCHDOG_KEYS))
        value = arg.partition("=")[2].strip()
        if key in ("grid", "params") and (value.startswith("[") or (
                not value.startswith(("{", "$")) and "," not in value  # (a dict, ${...}, -m a,b)
                and value.lower() not in ("", "null"))):
            # Hydra's "Cannot merge DictConfig with ListConfig", with no word of what to write
            raise ConfigError(f"{key} must be a mapping of parameter names to values, got "
                              f"{value!r} (set " + ("an axis with grid.NAME=[a,b,c])"
                                                    if key == "grid" else
                                                    "one value with params.NAME=VALUE)"))
        if head not in allowed and head not in ("experiment", "hydra"):
            close = difflib.get_close_matches(head, sorted(allowed | {"experiment"}), n=1)
            raise ConfigError(f"unknown top-level key '{head}'"
                              + (f" (did you mean '{close[0]}'?)" if close else "")
                              + "; allowed: experiment, " + ", ".join(sorted(allowed)))
