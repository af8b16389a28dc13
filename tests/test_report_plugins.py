"""Report plug-ins are isolated from each other on import, as experiment modules are: a
plug-in that fails to import (of any experiment) made every report a Hydra traceback with
exit 2. Now it is skipped with a warning naming its file and error; the report of the
experiment it would have reported fails (exit 1), naming it, rather than fall back to the
generic summary.

The broken plug-ins live in a temporary folder added to ``pipeline.report.__path__`` (never in
the package itself: other tests run from the same tree)."""

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import pipeline.report as plugins
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.experiments.base import get_experiment
from pipeline.report import core
from pipeline.report.build import build_report
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
MISSING = "nonexistent_module_xyz"


def store_calibration(results_dir, n: int = 7) -> None:
    grid = Grid(get_experiment("calibration"), {"x": {"range": [0, n]}}, {"work_us": 0.0})
    table, _ = run_batch(grid, range(grid.total))
    PartWriter(Path(results_dir) / "calibration", "test").write(table)


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A folder of extra plug-ins searched by pipeline.report's discovery, which runs afresh
    (and whose registrations and broken modules are dropped after the test)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    core.reports("composition")  # the package's own plug-ins, registered for good (first)
    monkeypatch.setattr(plugins, "__path__", [*plugins.__path__, str(folder)])
    monkeypatch.setattr(plugins, "_discovered", False)
    monkeypatch.setattr(plugins, "BROKEN", {}, raising=False)
    monkeypatch.setattr(plugins, "_BROKEN_FILES", {}, raising=False)
    monkeypatch.setattr(core, "_REPORTS", defaultdict(list, {k: list(v) for k, v in
                                                              core._REPORTS.items()}))
    yield folder
    for name in list(sys.modules):  # a test plug-in that did import
        if name.startswith("pipeline.report.zz_"):
            del sys.modules[name]


def test_a_broken_plugin_of_another_experiment_is_skipped_with_a_warning(plugin_dir, tmp_path,
                                                                        capsys):
    (plugin_dir / "zz_broken.py").write_text(f"import {MISSING}\n")
    store_calibration(tmp_path / "r")
    with pytest.warns(UserWarning, match="zz_broken.py failed to import and is skipped: "
                      f"ModuleNotFoundError: No module named '{MISSING}'"):
        plugins.discover()  # a library's user is warned too
    assert build_report(tmp_path / "r", "calibration") == 0
    err = capsys.readouterr().err
    assert "zz_broken.py failed to import and is skipped" in err, err
    assert f"ModuleNotFoundError: No module named '{MISSING}'" in err, err
    out = tmp_path / "r" / "calibration" / "_report"
    assert (out / "summary.csv").exists()  # calibration has no plug-in: the generic summary
    assert "zz_broken" in plugins.BROKEN
    # the other families' plug-ins are all there
    assert core.reports("composition") and core.reports("lattice")


def test_a_broken_plugin_of_the_experiment_fails_its_report_naming_it(plugin_dir, tmp_path,
                                                                     capsys):
    (plugin_dir / "zz_calibration_report.py").write_text(
        "from pipeline.report.core import report_for\n"
        f"import {MISSING}\n\n\n"
        "@report_for('calibration')\n"
        "def calibration_table(df, out):\n"
        "    out.table('calibration', df)\n")
    store_calibration(tmp_path / "r")
    assert build_report(tmp_path / "r", "calibration") == 1
    assert plugins.broken_for("calibration") == ["zz_calibration_report"]
    assert plugins.broken_for("composition") == []
    err = capsys.readouterr().err
    assert "report module " in err and "zz_calibration_report.py failed to import: " \
        f"ModuleNotFoundError: No module named '{MISSING}'" in err, err
    out = tmp_path / "r" / "calibration" / "_report"
    assert not (out / "summary.csv").exists()  # not quietly replaced by the generic summary
    assert (out / "status.csv").exists()
    index = (out / "index.md").read_text()
    assert "zz_calibration_report.py` failed to import**" in index and MISSING in index
    assert "zz_calibration_report.py</code> failed to import" in (out / "index.html").read_text()


def test_a_plugin_that_does_not_parse_fails_the_report_of_its_family(plugin_dir, tmp_path,
                                                                    capsys):
    """No report_for(...) to read in a file that does not parse: the plug-in named after an
    experiment family module reports that family's experiments."""
    (plugin_dir / "calibration.py").write_text("def broken(:\n")
    store_calibration(tmp_path / "r")
    assert build_report(tmp_path / "r", "calibration") == 1
    err = capsys.readouterr().err
    assert "calibration.py failed to import: SyntaxError: invalid syntax" in err, err
    assert plugins.broken_for("calibration") == ["calibration"]


def test_the_command_line_report_survives_a_broken_plugin(tmp_path):
    """Through run.py's front door (pipeline.cli.main): it was a Hydra traceback, exit 2."""
    plugin = tmp_path / "plugins"
    plugin.mkdir()
    (plugin / "zz_broken.py").write_text(f"import {MISSING}\n")
    store_calibration(tmp_path / "r", n=3)
    code = ("import sys; import pipeline.report as r; r.__path__.append(sys.argv[1]); "
            "from pipeline.cli import main; sys.exit(main(sys.argv[2:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(plugin), "report=true",
                           "experiment=calibration", f"results_dir={tmp_path / 'r'}",
                           "report_scope=all"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "zz_broken.py failed to import and is skipped: ModuleNotFoundError" in proc.stderr
    assert "report: " in proc.stdout


def test_every_module_of_the_package_is_either_machinery_or_a_plugin_that_reports():
    """``discover()`` imports every module not listed as the report machinery as a family's
    plug-in: a machinery module missing from the list (``latex_text`` was, when it was split
    out of ``latex``) would be imported as a plug-in and, failing, be blamed as a broken
    family's report. Each plug-in registers at least one report; the machinery registers none."""
    import importlib
    import pkgutil

    plugins.discover()
    registered = {fn.__module__.rsplit(".", 1)[-1]
                  for functions in core._REPORTS.values() for fn in functions}
    names = {info.name for info in pkgutil.iter_modules([str(ROOT / "pipeline" / "report")])
             if not info.name.startswith("_")}
    for name in plugins._NOT_PLUGINS:
        importlib.import_module(f"pipeline.report.{name}")  # it exists
    assert set(plugins._NOT_PLUGINS) <= names
    assert registered.isdisjoint(plugins._NOT_PLUGINS)
    assert names - set(plugins._NOT_PLUGINS) == registered
