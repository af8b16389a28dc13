"""The layer order, enforced by scanning every import in the package (function-level imports
included): kernels -> experiments -> engine/store -> report -> front doors (cli, __main__,
commands). A module may import its own layer or a lower one, never a higher one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"
LAYERS = {"kernels": 0, "experiments": 1, "engine": 2, "store": 2, "report": 3}
FRONT_DOOR = 4  # modules directly under pipeline/: cli.py, __main__.py, command modules
# Third-party imports a layer must not use (kernels stay pure numpy/scipy science).
FORBIDDEN = {
    "kernels": {"dask", "distributed", "hydra", "omegaconf", "pyarrow", "pandas", "matplotlib"},
    "experiments": {"dask", "distributed", "hydra", "omegaconf", "matplotlib"},
}


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "pipeline":
        raise ValueError(module)
    return LAYERS.get(parts[1], FRONT_DOOR) if len(parts) > 1 else FRONT_DOOR


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                base = module.split(".")[:-node.level]
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                found.append((node.lineno, node.module))
    return found


def violations(module: str, imports: list[tuple[int, str]]) -> list[str]:
    mine = layer_of(module)
    group = module.split(".")[1] if module.count(".") else ""
    bad = []
    for line, target in imports:
        top = target.split(".")[0]
        if top == "pipeline":
            if layer_of(target) > mine:
                bad.append(f"line {line}: {target}")
        elif top in FORBIDDEN.get(group, ()):
            bad.append(f"line {line}: {target} (not allowed in pipeline.{group})")
    return bad


def modules():
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_points_up(path):
    me = module_name(path)
    bad = violations(me, imports_of(path, me))
    assert not bad, f"{me} imports upward or a forbidden library: {bad}"


def test_the_scanner_flags_upward_and_forbidden_imports(tmp_path):
    # The rule must be able to fail: the two arrows issue 17 found, and dask in a kernel.
    probe = tmp_path / "probe.py"
    probe.write_text("import numpy\n\ndef f():\n    from pipeline.engine.schema import BOOKKEEPING\n"
                     "    from .low_influence import GRAPHS\n")
    found = imports_of(probe, "pipeline.experiments.leakage")
    assert found == [(1, "numpy"), (4, "pipeline.engine.schema"),
                     (5, "pipeline.experiments.low_influence")]
    assert violations("pipeline.experiments.leakage", found) == ["line 4: pipeline.engine.schema"]
    assert violations("pipeline.kernels.x", [(3, "dask.array")]) == [
        "line 3: dask.array (not allowed in pipeline.kernels)"]
    assert violations("pipeline.cli", [(1, "pipeline.report.build")]) == []
    assert violations("pipeline.report.core", [(1, "pipeline.cli")]) == ["line 1: pipeline.cli"]


def test_no_experiment_family_imports_another():
    """Families share code through underscore modules of the layer (``_graphs``, ``_columns``)
    or lower, never by importing each other: each is a plug-in that may be removed."""
    bad = []
    for path in sorted((PACKAGE / "experiments").glob("*.py")):
        me = module_name(path)
        for line, target in imports_of(path, me):
            parts = target.split(".")
            if (len(parts) >= 3 and parts[:2] == ["pipeline", "experiments"]
                    and not parts[2].startswith("_") and parts[2] != "base"):
                bad.append(f"{me} line {line}: {target}")
    assert not bad, bad
