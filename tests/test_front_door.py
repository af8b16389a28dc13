"""``python -m pipeline``'s front door: every bad invocation gets one line naming what was
wrong and what is accepted (exit 2, nothing written); --help/-h is help on stdout, exit 0.

A user trial: ``python -m pipeline report`` printed the usage alone (exit 2), with no word of
an unknown command nor of ``run.py ... report=true``; ``--help`` exited 2 on stderr;
``status RESULTS_DIR NAME version=1`` printed the usage alone; ``status RESULTS_DIR/NAME
status=ok`` said 'no experiment folder .../status=ok'. All real subprocess runs.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["list", "describe", "export", "verify", "status", "compact"]


def pipeline_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def snapshot(root: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def test_report_is_an_unknown_command_pointing_at_run_py(tmp_path):
    line = one_error_line(pipeline_cli("report", cwd=tmp_path))
    assert "unknown command 'report'" in line
    assert "python run.py experiment=NAME report=true" in line and "README.md" in line
    assert "commands: " + ", ".join(COMMANDS) in line
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert "did you mean 'status'" in one_error_line(pipeline_cli("stauts"))
    # help of a word that is no command: the same error, not the usage and exit 0
    assert "python run.py experiment=NAME report=true" in one_error_line(
        pipeline_cli("help", "report"))
    assert "python run.py experiment=NAME" in one_error_line(pipeline_cli("sweep"))


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_is_on_stdout_and_exits_0(flag):
    proc = pipeline_cli(flag)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("usage: python -m pipeline COMMAND [ARGS]\n")
    for command in COMMANDS:
        assert f"\n  {command} " in proc.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_is_on_stdout_and_exits_0(command):
    for args in ([command, "--help"], [command, "-h"], ["help", command]):
        proc = pipeline_cli(*args)
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr)
        assert proc.stdout.startswith(f"usage: python -m pipeline {command}"), proc.stdout


def test_no_command_is_the_usage_and_an_error_exit_2():
    proc = pipeline_cli()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: python -m pipeline COMMAND [ARGS]\n")
    assert proc.stderr.endswith("error: no command given\n")


def _results(tmp_path):
    """A real results folder (a small sweep of calibration)."""
    proc = subprocess.run([sys.executable, "run.py", "experiment=calibration",
                           "grid.x={range:[0,4]}", "params.work_us=0", f"results_dir={tmp_path}",
                           "cluster.n_workers=1", "cluster.dashboard_address=:0",
                           "progress=false"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return tmp_path


def test_status_refuses_selection_words_in_one_line(tmp_path):
    results = _results(tmp_path)
    before = snapshot(results)
    line = one_error_line(pipeline_cli("status", results, "calibration", "version=1"))
    assert line.startswith("error: status takes no selection words (version=1)")
    assert "pipeline.load(" in line and "usage: python -m pipeline status [RESULTS_DIR [NAME]]" \
        in line
    line = one_error_line(pipeline_cli("status", results / "calibration", "status=ok"))
    assert line.startswith("error: status takes no selection words (status=ok)")
    assert "no experiment folder" not in line
    line = one_error_line(pipeline_cli("status", results, "calibration", "extra"))
    assert "status takes at most RESULTS_DIR and NAME (got 3 arguments" in line
    assert "status takes no options (got --watch)" in one_error_line(
        pipeline_cli("status", results, "--watch"))
    assert snapshot(results) == before  # nothing written, no dead run marked
    good = pipeline_cli("status", results, "calibration")  # the right way still works
    assert good.returncode == 0 and good.stdout.startswith("calibration: 4 ok, 0 failed")


def test_status_of_a_file_or_a_missing_directory_says_which(tmp_path):
    (tmp_path / "afile").write_text("not a folder")  # it said "no results directory" of it
    line = one_error_line(pipeline_cli("status", tmp_path / "afile"))
    assert line.startswith(f"error: {tmp_path / 'afile'}: is a file, not a results directory")
    line = one_error_line(pipeline_cli("status", tmp_path / "nowhere"))
    assert line.startswith(f"error: {tmp_path / 'nowhere'}: no such directory (usage: ")


def test_other_commands_name_what_was_wrong(tmp_path):
    results = _results(tmp_path)
    folder = results / "calibration"
    before = snapshot(results)
    assert "verify takes one experiment folder RESULTS_DIR/NAME (got none)" in one_error_line(
        pipeline_cli("verify"))
    assert "verify's only option is --repair (got --fix)" in one_error_line(
        pipeline_cli("verify", folder, "--fix"))
    assert "verify takes no selection words (version=1)" in one_error_line(
        pipeline_cli("verify", folder, "version=1", "--repair"))
    assert "list takes no arguments (got x)" in one_error_line(pipeline_cli("list", "x"))
    assert "describe takes one experiment NAME (got none)" in one_error_line(
        pipeline_cli("describe"))
    assert "python -m pipeline describe calibration" in one_error_line(
        pipeline_cli("describe", "experiment=calibration"))
    assert "run.py word" in one_error_line(pipeline_cli("experiment=calibration"))
    assert snapshot(results) == before
    assert pipeline_cli("verify", folder).returncode == 0


def test_list_shows_plain_text_descriptions():
    """`list` printed the docstrings' reStructuredText: 'calibration  ``calibration``: a
    synthetic workload ...'. The double backticks are gone, and so is a leading repetition of
    the experiment's own name."""
    proc = pipeline_cli("list")
    assert proc.returncode == 0, proc.stderr
    assert "``" not in proc.stdout, proc.stdout
    lines = {line.split()[0]: line.split(None, 1)[1] for line in proc.stdout.splitlines()}
    assert lines["calibration"] == ("A synthetic workload for measuring and testing the engine "
                                    "itself.")
    assert lines["leakage"].startswith("Optimal eps-DP channels on graphs of datasets, their "
                                       "utility and min-entropy leakage")
    assert lines["low_influence"].startswith("Influence, DP, VDP and independence of finite "
                                             "mechanisms")
    assert lines["composition"].startswith("Optimal k-fold composition of (eps, delta)-DP")
    described = pipeline_cli("describe", "calibration").stdout.splitlines()  # the same line
    assert described[1] == "A synthetic workload for measuring and testing the engine itself."


def test_list_line_strips_double_backticks_only():
    from pipeline.__main__ import _list_line

    assert _list_line("calibration", "``calibration``: a synthetic workload.\n\nMore.") == \
        "A synthetic workload."
    assert _list_line("leakage", "Experiment ``leakage``: optimal channels\nof ``x``.") == \
        "Optimal channels of x."
    # another name, or a name not at the start, is kept (as plain text)
    assert _list_line("edge_dp", "``edge_test``: exact size, ``k`` of ``edge_dp``.") == \
        "edge_test: exact size, k of edge_dp."
