"""Issue 16: provenance per row, scoped selections, data-package export, other readers.

Stores are written with the engine's own batch function and part writer (real part files,
real provenance stamp, real manifest); the scoped-report and rerun_changed tests go through
``run.py`` on a real LocalCluster.
"""

import csv
import glob
import hashlib
import json
import time
import re
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import pipeline
from conftest import fill_disk
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.provenance import code_id, code_modules, provenance_stamp
from pipeline.experiments.base import get_experiment
from pipeline.report.selection import SelectionError
from pipeline.store.manifest import update_manifest
from pipeline.store.parquet import experiment_dir, write_part_file
from pipeline.store.part_writer import PartWriter

ROOT = Path(__file__).resolve().parents[1]
FAST = ["cluster.dashboard_address=:0", "progress=false", "cluster.n_workers=1"]
BIN = Path(sys.executable).parent
INT64_MAX = 2**63 - 1


def store(results_dir, name, grid_cfg, params, run_id, code=None, stamp=True):
    """Run every point of the grid through run_batch and write it as the driver does."""
    exp = get_experiment(name)
    grid = Grid(exp, grid_cfg, params)
    path = experiment_dir(results_dir, name)
    table, _ = run_batch(grid, range(grid.total))
    if stamp:
        marks = provenance_stamp(exp, run_id)
        if code is not None:
            marks["code_id"] = (code, marks["code_id"][1])
        PartWriter(path, run_id, stamp=marks).write(table)
    else:  # a part written before provenance was recorded
        write_part_file(path, f"part-{run_id}-000000.parquet", table)
    update_manifest(path, {
        "run_id": run_id, "experiment": name, "status": "finished",
        "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z",
        "host": "node-secret-7", "user": "alice", "pid": 4242, "argv": ["--password=x"],
        "git": {"commit": "c" * 40, "dirty": False}, "packages": {"numpy": "2.0"},
        "config": {"grid": grid_cfg, "params": params, "results_dir": "/home/alice/r",
                   "cluster": {"address": "tcp://10.0.0.1:8786"}}})
    return grid


def run_cli(*args, timeout=240):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def export(folder, to, *extra):
    return subprocess.run([sys.executable, "-m", "pipeline", "export", str(folder), "--to",
                           str(to), *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


# --------------------------------------------------------------------------- provenance
def test_code_id_covers_the_kernels_the_experiment_imports():
    assert code_modules("pipeline.experiments.lattice") == (
        "pipeline.experiments.lattice", "pipeline.kernels", "pipeline.kernels.graphs",
        "pipeline.kernels.lattice_counts", "pipeline.kernels.lattice_spectra",
        "pipeline.kernels.lattices")
    # leakage builds on the shared graph families and the finite-mechanism kernels
    mods = code_modules("pipeline.experiments.leakage")
    assert "pipeline.experiments._graphs" in mods
    assert "pipeline.experiments.low_influence" not in mods
    assert "pipeline.kernels.finite_mechanisms" in mods and "pipeline.experiments.base" not in mods
    files = b"".join(name.encode() + b"\0" + open(
        __import__("importlib").util.find_spec(name).origin, "rb").read() + b"\0"
        for name in code_modules("pipeline.experiments.composition"))
    assert code_id(get_experiment("composition")) == hashlib.sha256(files).hexdigest()[:16]
    assert code_id(get_experiment("composition")) != code_id(get_experiment("lattice"))


def test_rows_carry_run_and_code_ids_and_documented_fields(tmp_path):
    store(tmp_path, "independent_sets", {"m": [1, 2]}, {"lattice": "488", "n": 2}, "old", stamp=False)
    store(tmp_path, "independent_sets", {"m": [3]}, {"lattice": "488", "n": 2}, "new")
    df = pipeline.load(tmp_path, "independent_sets")  # old parts without the columns still load
    assert len(df) == 3
    new = df[df.m == 3].iloc[0]
    assert new.run_id == "new" and new.code_id == code_id(get_experiment("independent_sets"))
    assert df[df.m < 3].run_id.isna().all() and df[df.m < 3].code_id.isna().all()
    part = next((tmp_path / "independent_sets").glob("part-new-*.parquet"))
    schema = pq.read_schema(part)
    meta = {f.name: f.metadata or {} for f in schema}
    assert meta["log_count"][b"unit"] == b"nat" and b"ln(count)" in meta["log_count"][b"description"]
    assert meta["count"][b"exact_integer"] == b"true"
    assert meta["elapsed_s"][b"unit"] == b"s"
    assert b"run" in meta["run_id"][b"description"] and b"sha256" in meta["code_id"][b"description"]
    assert meta["m"][b"description"].startswith(b"parameter: rows")
    assert meta["m"][b"unit"] == b"1" and b"unit" not in meta["boundary"]  # a count; a label


# --------------------------------------------------------------------------- export
EXPORTS = {  # grid, params, a column to look at, its unit
    "composition": ({"eps": [0.1, 1.0], "k": [1, 10, 1000]},
                    {"delta": 0.0, "delta_target": 1e-9}, "eps_optimal", "nat"),
    "lattice": ({"base": ["hexagonal", "square"], "insertions": [0, 1]},
                {"L1": 6, "L2": 6, "boundary": "torus"}, "spanning_trees", "1"),
    "independent_sets": ({"m": [2, 9], "boundary": ["free", "torus"]},
                         {"lattice": "488", "n": 9}, "count", "1"),
    # list-typed parameter and column (Table Schema arrays)
    "composition_hetero": ({"k": [3, 5]}, {"pld": False}, "eps_values", "nat"),
}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_export_is_a_valid_data_package_equal_to_load(tmp_path, name):
    grid_cfg, params, key_column, unit = EXPORTS[name]
    grid = store(tmp_path / "r", name, grid_cfg, params, "run1")
    # a second run recomputes one point: the package keeps one row per (task_id, row_index)
    store(tmp_path / "r", name, {k: v[:1] for k, v in grid_cfg.items()}, params, "run2")
    loaded = pipeline.load(tmp_path / "r", name)
    assert loaded.task_id.nunique() == grid.total

    proc = export(tmp_path / "r" / name, tmp_path / "pkg", "--format", "both",
                  "--author", "Ada Lovelace")
    assert proc.returncode == 0, proc.stderr
    pkg = tmp_path / "pkg"
    check = subprocess.run([str(BIN / "frictionless"), "validate", "datapackage.json"], cwd=pkg,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr

    descriptor = json.loads((pkg / "datapackage.json").read_text())
    parquet, csv_res = descriptor["resources"]
    schema = csv_res["schema"]
    assert schema["primaryKey"] == ["task_id", "row_index"]
    fields = {f["name"]: f for f in schema["fields"]}
    assert set(fields) == set(loaded.columns) - {"worker"}  # machine details are left out
    workers = set(loaded.worker)  # "host:pid" here, a Dask worker's address on a cluster
    loaded = loaded.drop(columns="worker")
    exp = get_experiment(name)
    for column in exp.columns:  # every output column declares its meaning
        assert fields[column]["description"], column
    assert fields[key_column]["unit"] == unit

    # the Parquet resource is load()'s table, row for row
    from_parquet = pd.read_parquet(pkg / parquet["path"])
    pd.testing.assert_frame_equal(from_parquet, loaded)
    meta = pq.read_schema(pkg / parquet["path"]).field(key_column).metadata
    assert meta[b"description"].decode() == fields[key_column]["description"].split(" (exact")[0]
    # the CSV carries the same values; exact integers beyond int64 stay exact strings
    with open(pkg / csv_res["path"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    csv_text = (pkg / csv_res["path"]).read_text()
    assert workers and not any(w in csv_text for w in workers)
    assert len(rows) == len(loaded)
    for row, (_, want) in zip(rows, loaded.iterrows()):
        for column in exp.columns:
            value = want[column]
            if fields[column]["type"] == "number":
                got = float({"INF": "inf", "-INF": "-inf"}.get(row[column], row[column] or "nan"))
                assert got == value or (math.isnan(got) and pd.isna(value)), column
            elif fields[column]["type"] == "string":
                assert row[column] == ("" if pd.isna(value) else value), column
            elif fields[column]["type"] == "array":
                assert json.loads(row[column]) == list(value), column
    if name in ("lattice", "independent_sets"):
        exact = [int(v) for v in loaded[key_column].dropna()]
        assert max(exact) > INT64_MAX
        assert fields[key_column]["constraints"]["pattern"] == "[0-9]+"
        assert sorted(r[key_column] for r in rows) == sorted(map(str, exact))

    # checksums: the resources' hash and SHA256SUMS, which sha256sum itself accepts
    for res in descriptor["resources"]:
        digest = hashlib.sha256((pkg / res["path"]).read_bytes()).hexdigest()
        assert res["hash"] == f"sha256:{digest}"
    sums = (pkg / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ", 1)[1] for line in sums}
    assert {"datapackage.json", "README.md", "CITATION.cff", parquet["path"],
            csv_res["path"]} <= listed
    assert subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=pkg,
                          timeout=60).returncode == 0

    # grids and provenance; nothing of the machine or the user leaks
    meta = descriptor["pipeline"]
    assert meta["grids"]["run1"] == {"grid": grid_cfg, "params": params}
    assert [r["run_id"] for r in meta["provenance"]["runs"]] == ["run1", "run2"]
    assert meta["provenance"]["commits"] == ["c" * 40]
    assert meta["provenance"]["code_ids"] == {code_id(exp): len(loaded)}
    text = (pkg / "datapackage.json").read_text()
    for secret in ("node-secret-7", "alice", "10.0.0.1", "--password"):
        assert secret not in text
    readme = (pkg / "README.md").read_text()
    assert f"`{key_column}`" in readme and "pl.read_parquet" in readme
    # each column's row reads back as its 4 cells, the description unchanged ('|lambda|' was
    # written '/lambda/': a bare '|' ends a Markdown cell)
    rows = {line.split("`")[1]: line for line in readme.splitlines() if line.startswith("| `")}
    for column, field in fields.items():
        cells = re.split(r"(?<!\\)\|", rows[column])[1:-1]
        assert len(cells) == 4, rows[column]
        description = cells[3].strip().replace("\\|", "|").replace("\\\\", "\\")
        assert description == field.get("description", "").replace("\n", " "), column
    assert exp.doc.split()[0] in readme and (pkg / "docs").is_dir()
    cff = (pkg / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in cff and '"Ada Lovelace"' in cff and "license: CC-BY-4.0" in cff


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_exports_of_the_same_rows_are_the_same_bytes(tmp_path):
    """datapackage.json's "created" was the export's clock, so two exports of the same rows
    differed there and in SHA256SUMS. It is now the end of the last run the rows come from,
    or SOURCE_DATE_EPOCH, which CITATION.cff's date-released also takes."""
    store(tmp_path / "r", "composition", {"eps": [0.1, 0.5], "k": [2]}, {}, "run1")
    folder = tmp_path / "r" / "composition"
    assert export(folder, tmp_path / "a").returncode == 0
    time.sleep(1.1)  # the old clock's next second
    assert export(folder, tmp_path / "b").returncode == 0
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*")
                   if p.is_file())
    assert Path("SHA256SUMS") in files and Path("datapackage.json") in files
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert json.loads((tmp_path / "a" / "datapackage.json").read_text())["created"] == \
        "2026-01-01T00:01:00Z"  # the run's finished_at (store() above)
    proc = subprocess.run([sys.executable, "-m", "pipeline", "export", str(folder), "--to",
                           str(tmp_path / "c")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SOURCE_DATE_EPOCH": "86400"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "c" / "datapackage.json").read_text())["created"] == \
        "1970-01-02T00:00:00Z"
    assert "date-released: 1970-01-02\n" in (tmp_path / "c" / "CITATION.cff").read_text()


def test_export_selection_and_bad_arguments(tmp_path):
    store(tmp_path / "r", "independent_sets", {"m": [1, 2, 3]}, {"lattice": "488", "n": 2}, "a")
    store(tmp_path / "r", "independent_sets", {"m": [4]}, {"lattice": "488", "n": 2}, "b")
    folder = tmp_path / "r" / "independent_sets"
    proc = export(folder, tmp_path / "pkg", "--format", "csv", "run_id=b")
    assert proc.returncode == 0, proc.stderr
    descriptor = json.loads((tmp_path / "pkg" / "datapackage.json").read_text())
    assert [r["format"] for r in descriptor["resources"]] == ["csv"]
    assert descriptor["pipeline"]["coverage"]["rows"] == 1
    # a grid selection (the YAML's grid, overridden as in a sweep) reports missing points
    proc = export(folder, tmp_path / "pkg2", "--format", "parquet", "grid.m=[1,2,3,4,5]",
                  "grid.n=[2]", "grid.boundary=[free]")
    assert proc.returncode == 0, proc.stderr
    assert "1 of 5 point(s) of the grid have no stored row" in proc.stderr
    cov = json.loads((tmp_path / "pkg2" / "datapackage.json").read_text())["pipeline"]["coverage"]
    assert cov["grid"]["missing_examples"][0]["m"] == 5 and cov["rows"] == 4
    for bad, message in ((["--format", "xlsx"], "--format must be one of"),
                         (["grid.nope=[1]"], "parameter 'nope'"),
                         (["run_id=zzz"], "run_id 'zzz': no run of 'independent_sets' has "
                                          "this id; its runs: a, b;"),
                         (["colour=red"], "unknown selection 'colour=red'"),
                         (["versoin=2"], "'versoin=2' (did you mean version=?)")):
        proc = export(folder, tmp_path / "bad", *bad)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "bad").exists()
    # RESULTS_DIR instead of RESULTS_DIR/NAME: said so, naming the folder to give (it read
    # "no results for experiment 'r'")
    proc = export(folder.parent, tmp_path / "bad")
    assert proc.returncode == 2, proc.stderr
    assert f"is not an experiment's results folder (RESULTS_DIR/NAME); it holds {folder}: " \
        "give one of them" in proc.stderr, proc.stderr
    assert not (tmp_path / "bad").exists()
    # without --author, the author CITATION.cff names is said (it came from git silently)
    proc = export(folder, tmp_path / "pkg3", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    from pipeline.report.export import default_author

    assert f"note: CITATION.cff names {default_author()!r} as the author" in proc.stderr
    assert f'name: "{default_author()}"' in (tmp_path / "pkg3" / "CITATION.cff").read_text()
    helped = subprocess.run([sys.executable, "-m", "pipeline", "export", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    for option in ("--to DIR", "--format F", "--license L", "--author NAME", "run_id=ID"):
        assert option in helped.stdout, helped.stdout  # each option explained, not only usage


# --------------------------------------------------------------------------- selections
OTHER_CODE = "feedfacefeedface"
IS_PARAMS = {"lattice": "488", "n": 2}  # boundary: its default, free


@pytest.fixture
def mixed_store(tmp_path):
    """independent_sets rows of run a (m = 1..3, this code), run b (m = 4, other code), a part
    written before provenance was recorded (m = 5: no run_id, no code_id), and rows of an
    older experiment version (m = 1..2, run v0)."""
    store(tmp_path, "independent_sets", {"m": [1, 2, 3]}, IS_PARAMS, "a")
    store(tmp_path, "independent_sets", {"m": [4]}, IS_PARAMS, "b", code=OTHER_CODE)
    store(tmp_path, "independent_sets", {"m": [5]}, IS_PARAMS, "old", stamp=False)
    import dataclasses

    exp = get_experiment("independent_sets")
    older = dataclasses.replace(exp, version=0)  # the same experiment as an older version
    table, _ = run_batch(Grid(older, {"m": [1, 2]}, IS_PARAMS), range(2))
    assert set(table["experiment_version"].to_pylist()) == {0}
    PartWriter(experiment_dir(tmp_path, "independent_sets"), "v0",
               stamp=provenance_stamp(exp, "v0")).write(table)
    return tmp_path


def test_code_ids_of_different_versions_are_not_called_the_same_version(tmp_path):
    """Version 0 computed by other code, version 1 by this code: expected (the version was
    bumped for the change), so the coverage warns that versions mix, not that 'some rows were
    computed by other code under the same version', which it said of any two code_ids."""
    import dataclasses

    here = code_id(get_experiment("independent_sets"))
    store(tmp_path, "independent_sets", {"m": [1, 2]}, IS_PARAMS, "a")
    older = dataclasses.replace(get_experiment("independent_sets"), version=0)
    table, _ = run_batch(Grid(older, {"m": [1]}, IS_PARAMS), range(1))
    marks = provenance_stamp(older, "v0")
    marks["code_id"] = (OTHER_CODE, marks["code_id"][1])
    PartWriter(experiment_dir(tmp_path, "independent_sets"), "v0", stamp=marks).write(table)
    both = pipeline.load(tmp_path, "independent_sets", version=[0, 1], run_id=["a", "v0"])
    cov = both.attrs["coverage"]
    assert cov["code_ids"] == {here: 2, OTHER_CODE: 1}
    assert cov["warnings"] == ["the selection mixes experiment versions [0, 1]"]
    # within one version, other code is still a warning, naming only that version's rows
    store(tmp_path, "independent_sets", {"m": [3]}, IS_PARAMS, "b", code=OTHER_CODE)
    cov = pipeline.load(tmp_path, "independent_sets", version=[0, 1],
                        run_id=["a", "b", "v0"]).attrs["coverage"]
    mixed = [w for w in cov["warnings"] if "code_ids" in w]
    assert mixed == [f"the selection mixes 2 code_ids ({here}: 2 rows, {OTHER_CODE}: 1 rows): "
                     "some rows were computed by other code under the same version"], mixed


def test_load_with_a_selection(mixed_store):
    """pipeline.load(...) with every kind of selection, and the warnings of its coverage."""
    from pipeline.report.selection import SelectionError

    here = code_id(get_experiment("independent_sets"))
    load = lambda **kw: pipeline.load(mixed_store, "independent_sets", **kw)  # noqa: E731
    everything = load()
    assert len(everything) == 7 and sorted(everything.experiment_version) == [0, 0] + [1] * 5
    assert "coverage" not in everything.attrs  # no selection: the plain table
    df = load(run_id="a")
    assert sorted(df.m) == [1, 2, 3] and set(df.code_id) == {here}
    cov = df.attrs["coverage"]
    assert [r["run_id"] for r in cov["runs"]] == ["a"] and cov["code_ids"] == {here: 3}
    assert cov["warnings"] == []
    # two runs of different code: the rows mix code_ids, and the coverage says so
    df = load(run_id=["a", "b"])
    assert sorted(df.m) == [1, 2, 3, 4]
    warnings = df.attrs["coverage"]["warnings"]
    assert len(warnings) == 1 and "the selection mixes 2 code_ids" in warnings[0]
    assert f"{here}: 3 rows" in warnings[0] and f"{OTHER_CODE}: 1 rows" in warnings[0]
    assert sorted(load(code_id=OTHER_CODE).m) == [4]
    assert sorted(load(code_id=[here], version="latest").m) == [1, 2, 3]
    # versions: the latest, an older one, both (a warning)
    assert sorted(load(version="latest", run_id=["a", "b", "v0"]).m) == [1, 2, 3, 4]
    old = load(version=0, run_id="v0")
    assert sorted(old.m) == [1, 2] and set(old.experiment_version) == {0}
    both = load(version=[0, 1], run_id=["a", "v0"])
    assert len(both) == 5
    assert "the selection mixes experiment versions [0, 1]" in both.attrs["coverage"]["warnings"]
    # a grid (dicts): exactly its points; a point never stored is reported missing; rows of
    # the part without provenance carry no code_id, and mixed with others that is a warning
    df = load(grid={"m": [1, 5, 9]}, params=IS_PARAMS)
    assert sorted(df.m) == [1, 5]
    cov = df.attrs["coverage"]
    assert cov["grid"]["points"] == 3 and cov["grid"]["missing"] == 1
    assert cov["grid"]["missing_examples"][0]["m"] == 9
    assert cov["rows_without_code_id"] == 1 and cov["rows_without_run_id"] == 1
    assert ("1 row(s) carry no code_id (written before code identities were recorded)"
            in cov["warnings"])
    assert "1 of 3 point(s) of the grid have no stored row (run the sweep to fill them in)" \
        in cov["warnings"]
    # the words of run.py: the YAML's grid with overrides on top, then a run_id filter
    words = ["experiment=independent_sets", "grid.m=[1,2,4]", "grid.n=[2]",
             "grid.boundary=[free]"]
    assert sorted(load(select=words).m) == [1, 2, 4]
    assert sorted(load(select=words, run_id="a").m) == [1, 2]
    with pytest.raises(SelectionError, match=r"code_id '0000000000000000': no row of "
                                             r"'independent_sets' was computed by this code; "
                                             r"its code_ids: "):
        load(select=words, code_id="0000000000000000")  # a typo: it selected nothing, silently
    assert sorted(load(select=words, code_id=OTHER_CODE).m) == [4]  # a known code
    # a run_id that is no run of the folder (a typo) is an error, as an unknown version is;
    # a known one whose rows the other filters leave out is an empty selection
    with pytest.raises(SelectionError, match=r"run_id 'nosuch': no run of 'independent_sets' "
                                             r"has this id; its runs: .*python -m pipeline status"):
        load(run_id="nosuch")
    with pytest.raises(SelectionError, match=r"run_id 'v00': .*\(did you mean 'v0'\?\)"):
        load(run_id=["a", "v00"])  # beside a good one too
    assert load(run_id="a", code_id=OTHER_CODE).empty  # "a": in the rows only


def test_an_empty_filter_is_refused_not_read_as_no_filter(mixed_store, tmp_path):
    """run_id=[] (or code_id, version) took everything stored, in load, the select words, and
    run.py report=true."""
    from pipeline.cli import main
    from pipeline.report.selection import SelectionError

    load = lambda **kw: pipeline.load(mixed_store, "independent_sets", **kw)  # noqa: E731
    for key in ("run_id", "code_id", "version"):
        with pytest.raises(SelectionError, match=f"{key}=\\[\\] selects nothing"):
            load(**{key: []})
        with pytest.raises(SelectionError, match=f"{key}=\\[\\] selects nothing"):
            load(select=["experiment=independent_sets", f"{key}="])
    before = sorted(p.name for p in (mixed_store / "independent_sets").iterdir())
    assert main(["experiment=independent_sets", f"results_dir={mixed_store}", "report=true",
                 "report_scope=all", "run_id=[]"]) == 2
    assert sorted(p.name for p in (mixed_store / "independent_sets").iterdir()) == before


def test_load_refuses_a_status_or_version_that_selects_nothing_by_a_typo(mixed_store):
    """status='okk' and a version never stored returned an empty table without a word (the
    report refuses the same selection, exit 2). A filter that is valid but matches nothing
    (no failed row) is still an empty table."""
    from pipeline.report.selection import SelectionError

    load = lambda **kw: pipeline.load(mixed_store, "independent_sets", **kw)  # noqa: E731
    with pytest.raises(SelectionError, match="status='okk': allowed None .* 'ok' or 'failed'"):
        load(status="okk")
    with pytest.raises(SelectionError, match="status='okk'"):
        load(status="okk", select=["experiment=independent_sets"])
    # a SelectionError as for a run_id or a status (it was a plain ValueError alone)
    with pytest.raises(SelectionError, match="no rows of version 7 are stored .* stored: 0, 1"):
        load(version=7)
    with pytest.raises(SelectionError, match="no rows of version 7"):
        load(version=[0, 7])
    assert load(status="failed").empty  # valid, and nothing failed
    assert sorted(load(version=0, status="ok").m) == [1, 2]
    # beside a run_id, version=7 gave an empty table without a word
    with pytest.raises(SelectionError, match="version=7: no rows of version 7 are stored for "
                                             r"'independent_sets'; stored: 0, 1 \(or 'latest'\)"):
        load(version=7, run_id="a")
    # not a version at all: int('lastest') raised its raw ValueError, and True was version 1
    for bad in ("lastest", "Latest", "2,3", True, [1, "x"]):
        with pytest.raises(SelectionError, match="version must be an integer, a list of "
                                                 "integers or 'latest', got "):
            load(version=bad)


def test_a_selection_loads_the_rows_of_a_folder_whose_manifest_is_damaged(mixed_store):
    """The rows do not depend on the run manifest (README): a plain load read them, but any
    selection raised DamagedManifest. It reads them now, saying that the runs' records are
    unknown."""
    folder = experiment_dir(mixed_store, "independent_sets")
    before = pipeline.load(mixed_store, "independent_sets", run_id="a")
    (folder / "_manifest.json").write_text('{"runs": [{"run_id": "a", "st')  # cut mid-write
    with pytest.warns(UserWarning, match="the run manifest .*_manifest.json is damaged .*: the "
                                         "rows are read, but their runs' states and commits "
                                         "are unknown; python -m pipeline verify"):
        after = pipeline.load(mixed_store, "independent_sets", run_id="a")
    pd.testing.assert_frame_equal(after, before)
    assert sorted(after.m) == [1, 2, 3]
    with pytest.raises(SelectionError, match="run_id 'nosuch': no run of 'independent_sets'"):
        pipeline.load(mixed_store, "independent_sets", run_id="nosuch")  # the rows tell it


def test_a_selection_refuses_a_fixed_parameter_that_is_also_an_axis(mixed_store):
    """run.py refuses params.m=3 beside grid.m=[...] (the axis won); load(select=...) and
    export returned the axis's points and dropped params.m silently."""
    words = ["experiment=independent_sets", "grid.m=[1,2]", "params.m=3"]
    with pytest.raises(SelectionError, match=r"params.m is set, but m is also a grid axis "):
        pipeline.load(mixed_store, "independent_sets", select=words)


def test_load_takes_a_list_of_versions_without_other_selection(mixed_store):
    """``version=`` is documented as "latest", an int or a list; a list with no other selection
    raised TypeError (int() of a list) instead of keeping those versions."""
    load = lambda **kw: pipeline.load(mixed_store, "independent_sets", **kw)  # noqa: E731
    assert sorted(load(version=[0]).m) == [1, 2]
    assert len(load(version=[0, 1])) == 7
    assert sorted(load(version=["latest"]).m) == [1, 2, 3, 4, 5]
    assert sorted(load(version=[0], status="ok").m) == [1, 2]


def test_a_point_stored_failed_is_not_missing_from_an_ok_selection(tmp_path):
    """load(grid=..., status="ok") returns the ok rows; its coverage must not call the grid's
    failed points missing ("no stored row (run the sweep to fill them in)"): they are
    stored, and a rerun skips them unless retry_failed=true. It did."""
    from pipeline.engine.batch_table import failed_batch_table

    exp = get_experiment("independent_sets")
    grid = Grid(exp, {"m": [1, 2, 3]}, IS_PARAMS)
    table, _ = run_batch(grid, [0, 1])
    failed = failed_batch_table(grid, [2], "RuntimeError: synthetic")
    PartWriter(experiment_dir(tmp_path, "independent_sets"), "a").write(
        pa.concat_tables([table, failed.cast(table.schema)]))
    ok = pipeline.load(tmp_path, "independent_sets", grid={"m": [1, 2, 3]}, params=IS_PARAMS,
                       status="ok")
    assert sorted(ok.m) == [1, 2]
    cov = ok.attrs["coverage"]
    assert cov["grid"]["missing"] == 0 and cov["grid"]["stored"] == 3, cov["grid"]
    assert not [w for w in cov["warnings"] if "no stored row" in w]
    # a point never stored is still missing
    cov = pipeline.load(tmp_path, "independent_sets", grid={"m": [1, 2, 3, 4]},
                        params=IS_PARAMS, status="ok").attrs["coverage"]
    assert cov["grid"]["missing"] == 1 and cov["grid"]["missing_examples"][0]["m"] == 4


def test_report_of_an_older_version_names_its_versions(mixed_store):
    """index.md and index.html name the version(s) the report's rows have: a report of
    version 0 said 'rows of older version(s) 1 are stored too' (1 is newer), and one of
    versions 0 and 1 said 'experiment version 0' (the first row's)."""
    from pipeline.report.build import build_report
    from pipeline.report.selection import Selection

    outdir = mixed_store / "independent_sets" / "_report"
    assert build_report(mixed_store, "independent_sets", selection=Selection(versions=(0,))) == 0
    for page in ((outdir / "index.md").read_text(), (outdir / "index.html").read_text()):
        assert "experiment version 0;" in page and "older version(s) 1" not in page
        assert "newer version(s) 1 are stored too" in page
    assert build_report(mixed_store, "independent_sets",
                        selection=Selection(versions=(0, 1))) == 0
    for page in ((outdir / "index.md").read_text(), (outdir / "index.html").read_text()):
        assert "experiment versions 0, 1;" in page and "stored too" not in page


def test_a_report_of_rows_newer_than_the_code_says_so(tmp_path, capsys):
    """Rows of version 2 reported by a checkout whose experiment is version 1: drawn by the
    older report functions without a word (load() warned)."""
    import dataclasses

    from pipeline.report.build import build_report

    exp = get_experiment("independent_sets")
    newer = dataclasses.replace(exp, version=exp.version + 1)  # computed by a newer branch
    table, _ = run_batch(Grid(newer, {"m": [1, 2]}, IS_PARAMS), range(2))
    PartWriter(experiment_dir(tmp_path, "independent_sets"), "v-next",
               stamp=provenance_stamp(exp, "v-next")).write(table)
    assert build_report(tmp_path, "independent_sets") == 0
    text = (f"rows of version(s) {exp.version + 1} of 'independent_sets', newer than this "
            f"code's version {exp.version} (an older checkout?)")
    assert f"warning: {text}" in capsys.readouterr().err
    assert text in (tmp_path / "independent_sets" / "_report" / "index.md").read_text()
    # rows of the code's own version: no such warning
    store(tmp_path / "same", "independent_sets", {"m": [1, 2]}, IS_PARAMS, "a")
    assert build_report(tmp_path / "same", "independent_sets") == 0
    assert "newer than this code's version" not in capsys.readouterr().err


def test_exported_parquet_is_labelled_with_the_version_of_its_rows(mixed_store, tmp_path):
    """The exported Parquet file's schema metadata names the experiment version of its rows
    (the newest among them, as compaction labels its files). It carried the first part's
    label: an export of version 0 said version 1, and one of version 1 from a folder whose
    oldest part is version 0 said 0."""
    from pipeline.report.export import export_package
    from pipeline.report.selection import Selection

    for version in (0, 1):
        out = tmp_path / f"pkg{version}"
        export_package(mixed_store, "independent_sets", out, "parquet",
                       Selection(versions=(version,)))
        data = out / "data" / "independent_sets.parquet"
        assert set(pq.read_table(data)["experiment_version"].to_pylist()) == {version}
        assert pq.read_schema(data).metadata[b"version"] == str(version).encode()


def _package_files_check(out):
    """Every file of the package is listed in SHA256SUMS with its digest, and nothing else."""
    import hashlib

    listed = {}
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {p.relative_to(out).as_posix() for p in out.rglob("*")
               if p.is_file() and p.name != "SHA256SUMS"}
    assert set(listed) == present
    for name, digest in listed.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name


def test_an_export_to_a_full_disk_exits_3_and_leaves_the_earlier_package(mixed_store, tmpfs):
    """On a real full disk the export command ended in pyarrow's traceback. Now: one line
    naming the cause, exit 3, the earlier package byte for byte, nothing left beside it."""
    disk = tmpfs("size=16m", "disk")
    out = disk / "pkg"
    first = export(mixed_store / "independent_sets", out)
    assert first.returncode == 0, first.stderr
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    fill_disk(disk)  # to the last byte
    proc = export(mixed_store / "independent_sets", out)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"error: could not export {mixed_store / 'independent_sets'} to {out}:" in proc.stderr
    assert "No space left on device" in proc.stderr and "nothing was exported" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in disk.iterdir()) == ["_filler", "pkg"]


def test_an_export_that_fails_half_way_leaves_the_earlier_package_whole(mixed_store, tmp_path,
                                                                        monkeypatch):
    """An export killed or failing half-way (a full disk, Ctrl-C) had removed the earlier
    package and left half a new one without datapackage.json, which the next export then
    refused to replace. Now it is built beside the target and swapped in whole."""
    import pipeline.report.export as export_module
    from pipeline.report.export import export_package
    from pipeline.report.swap import remove_stale_staging

    out = tmp_path / "pkg"
    export_package(mixed_store, "independent_sets", out, "both")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def disk_full(table, file):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "write_csv", disk_full)
    with pytest.raises(OSError, match="No space left"):
        export_package(mixed_store, "independent_sets", out, "both")
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the earlier package, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["independent_sets", "pkg"]
    monkeypatch.undo()

    # the swap itself refused (EACCES) or cut by Ctrl-C between its two renames: the earlier
    # package was moved aside and then deleted, leaving nothing at --to
    from pathlib import Path

    real_rename = Path.rename
    for error in (PermissionError(13, "Permission denied"), KeyboardInterrupt()):
        def refused(self, dest, error=error):
            if self.name.startswith(".pkg.exporting-"):
                raise error
            return real_rename(self, dest)

        monkeypatch.setattr(Path, "rename", refused)
        with pytest.raises(type(error)):
            export_package(mixed_store, "independent_sets", out, "csv")
        monkeypatch.undo()
        after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert after == before, type(error)  # put back
        assert sorted(p.name for p in tmp_path.iterdir()) == ["independent_sets", "pkg"]

    # what an export killed with kill -9 on this host leaves (its pid gone) is tidied by the
    # next one: half a package removed, an earlier package moved aside put back if --to is empty
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    stale = tmp_path / f".pkg.exporting-{dead.pid}-0a1b2c3d-{host}"
    (stale / "data").mkdir(parents=True)
    mine = tmp_path / f".pkg.exporting-{os.getpid()}-0a1b2c3d-{host}"  # a live export's: kept
    mine.mkdir()
    elsewhere = tmp_path / f".pkg.exporting-{dead.pid}-0a1b2c3d-node-b.example"  # not judged
    elsewhere.mkdir()
    remove_stale_staging(out)
    assert not stale.exists() and mine.exists() and elsewhere.exists()
    mine.rmdir()
    elsewhere.rmdir()
    aside = tmp_path / f".pkg.replaced-{dead.pid}-0a1b2c3d-{host}"
    out.rename(aside)  # killed between the swap's two renames
    remove_stale_staging(out)
    assert not aside.exists()
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    export_package(mixed_store, "independent_sets", out, "csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["independent_sets", "pkg"]
    assert not (out / "data" / "independent_sets.parquet").exists()  # replaced whole
    _package_files_check(out)


def test_exports_to_one_folder_at_once_do_not_mix_their_files(mixed_store, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.report.export import export_package

    out = tmp_path / "pkg"
    formats = ["parquet", "csv", "both", "parquet", "csv", "both"]
    with ThreadPoolExecutor(len(formats)) as pool:
        for future in [pool.submit(export_package, mixed_store, "independent_sets", out, fmt)
                       for fmt in formats]:
            future.result()
    _package_files_check(out)  # one export's files, whole
    data = {p.name for p in (out / "data").iterdir()}
    assert data in ({"independent_sets.parquet"}, {"independent_sets.csv"},
                    {"independent_sets.parquet", "independent_sets.csv"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["independent_sets", "pkg"]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_report_and_export_take_run_code_and_version_selections(mixed_store, tmp_path):
    """run.py report=true with run_id=/code_id=/version=, and export with code_id=/version=:
    the rows they cover, and the warnings on stderr."""
    here = code_id(get_experiment("independent_sets"))
    base = ["report=true", "experiment=independent_sets", f"results_dir={mixed_store}",
            "report_scope=all"]
    report = mixed_store / "independent_sets" / "_report"

    def rows_of(index: str) -> int:
        return int(index.split("- rows: ", 1)[1].split(";", 1)[0])

    proc = run_cli(*base, "run_id=b")
    assert proc.returncode == 0, proc.stderr
    index = (report / "index.md").read_text()
    assert "run_id in {b}" in index and rows_of(index) == 1 and f"`{OTHER_CODE}` (1 rows)" in index
    proc = run_cli(*base, f"code_id={here}")
    assert proc.returncode == 0, proc.stderr
    index = (report / "index.md").read_text()
    assert rows_of(index) == 3 and "`b`" not in index  # run b's code is not this code
    proc = run_cli(*base, "version=0")
    assert proc.returncode == 0, proc.stderr
    index = (report / "index.md").read_text()
    assert "version in {0}" in index and rows_of(index) == 2 and "experiment version(s): 0" in index
    proc = run_cli(*base, "run_id=[a,b]")  # two code_ids: a warning, also on stderr
    assert proc.returncode == 0, proc.stderr
    assert "warning: the selection mixes 2 code_ids" in proc.stderr
    assert "**warning**: the selection mixes 2 code_ids" in (report / "index.md").read_text()
    proc = run_cli(*base, "run_id=nosuch")  # named, with the folder's runs, as load() says
    assert proc.returncode == 2 and ("error: run_id 'nosuch': no run of 'independent_sets' "
                                     "has this id; its runs: a, b, old, v0;") in proc.stderr
    proc = run_cli(*base, "version=7")  # nothing of it stored: said, not a traceback
    assert proc.returncode == 2 and ("error: version=7: no rows of version 7 are stored for "
                                     "'independent_sets'; stored: 0, 1") in proc.stderr

    folder = mixed_store / "independent_sets"
    for words, rows, warning in (
            ([f"code_id={OTHER_CODE}"], 1, None),
            (["version=0"], 2, None),
            (["version=0,1"], 7, "the selection mixes experiment versions [0, 1]"),
            (["experiment=independent_sets", "grid.m=[1,5]", "grid.n=[2]",
              "grid.boundary=[free]"], 2, "1 row(s) carry no code_id")):
        to = tmp_path / ("pkg-" + str(len(list(tmp_path.glob("pkg-*")))))
        proc = export(folder, to, "--format", "csv", *words)
        assert proc.returncode == 0, proc.stderr
        cov = json.loads((to / "datapackage.json").read_text())["pipeline"]["coverage"]
        assert cov["rows"] == rows, (words, cov["rows"])
        if warning:
            assert f"warning: {warning}" in proc.stderr, proc.stderr
        else:
            assert "warning:" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- readers
def test_readme_reader_lines_run(tmp_path, monkeypatch):
    """The README's pandas / polars / DuckDB lines, as printed there, on a results folder."""
    # an old part without run_id/code_id first: the parts' schemas differ
    store(tmp_path, "independent_sets", {"m": [1, 2]}, {"lattice": "488", "n": 2}, "one",
          stamp=False)
    store(tmp_path, "independent_sets", {"m": [3]}, {"lattice": "488", "n": 2}, "two")
    readme = (ROOT / "README.md").read_text()
    section = readme.split("**Other readers.**", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) >= 3
    monkeypatch.chdir(tmp_path)
    os.rename(tmp_path / "independent_sets", tmp_path / "results_is")
    expected_counts = sorted(pipeline.load(tmp_path, "results_is")["count"])
    readers = []
    for line in lines:
        scope: dict = {}
        exec(line.replace("results/composition", "results_is"), scope)  # noqa: S102
        frame = scope["df"]
        readers.append(type(frame).__module__.split(".")[0])
        frame = frame.df() if hasattr(frame, "df") else frame
        frame = frame.to_pandas() if hasattr(frame, "to_pandas") else frame
        assert len(frame) == 3 and sorted(frame["m"]) == [1, 2, 3], line
        if readers[-1] != "pandas":  # these read every part's columns
            assert set(frame["run_id"].dropna()) == {"two"}, line
        assert sorted(frame["count"]) == expected_counts, line  # exact strings, as stored
    assert readers == ["pandas", "polars", "duckdb"]
    assert glob.glob(str(tmp_path / "results_is" / "_manifest.json"))


# --------------------------------------------------------------------------- through run.py
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_report_is_scoped_to_its_grid_whatever_else_lands(tmp_path):
    grid_a = ["experiment=composition", "grid.eps=[0.1,0.5]", "grid.k=[1,10]",
              "grid.delta=[0.0]", "grid.delta_target=[1e-6]", f"results_dir={tmp_path}"]
    assert run_cli(*grid_a, *FAST).returncode == 0
    assert run_cli(*grid_a, "report=true").returncode == 0
    report = tmp_path / "composition" / "_report"
    first = {p.name: p.read_text() for p in report.glob("*.csv")}
    assert first
    grid_b = ["experiment=composition", "grid.eps=[0.2,0.3,0.7]", "grid.k=[2,3]",
              "grid.delta=[0.0]", "grid.delta_target=[1e-6]", f"results_dir={tmp_path}"]
    assert run_cli(*grid_b, *FAST).returncode == 0
    proc = run_cli(*grid_a, "report=true")
    assert proc.returncode == 0, proc.stderr
    again = {p.name: p.read_text() for p in report.glob("*.csv")}
    assert again == first
    index = (report / "index.md").read_text()
    assert "grid points: 4; stored: 4; missing: 0" in index
    # the provenance names the run that wrote these rows, not the later, unrelated one
    raw = pd.read_parquet(tmp_path / "composition", columns=["eps", "run_id"])
    ids_a = set(raw.loc[raw.eps.isin([0.1, 0.5]), "run_id"])
    ids_b = set(raw.run_id) - ids_a
    assert len(ids_a) == 1 and len(ids_b) == 1
    page = (report / "index.html").read_text()
    for text in (index, page):
        assert all(i in text for i in ids_a) and not any(i in text for i in ids_b)
    assert f"`{code_id(get_experiment('composition'))}` (4 rows)" in index
    # everything stored, on request; and a grid with missing points says so
    proc = run_cli(*grid_a, "report=true", "report_scope=all")
    assert proc.returncode == 0 and "rows: 10" in (report / "index.md").read_text()
    proc = run_cli(*grid_a, "grid.k=[1,10,100]", "report=true")
    assert proc.returncode == 0
    assert "2 of 6 point(s) of the grid have no stored row" in proc.stderr
    proc = run_cli(*grid_a, "report=true", "report_scope=some")
    assert proc.returncode == 2 and "report_scope must be one of {grid, all}" in proc.stderr
    proc = run_cli(*grid_a, "run_id=x")  # a sweep takes no row selection
    assert proc.returncode == 2 and "run_id select(s) rows for report=true" in proc.stderr


def _config_shown(index_md: str, page: str) -> tuple[dict, dict]:
    """The configuration index.md and index.html show as the latest run's."""
    import html as htmlmod

    md = index_md.split("): configuration", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    pre = page.split("): configuration</summary><pre>", 1)[1].split("</pre>", 1)[0]
    return json.loads(md), json.loads(htmlmod.unescape(pre))


GRID_A = ({"eps": [0.1, 0.5], "k": [1, 10]}, {"delta": 0.0, "delta_target": 1e-6})
GRID_B = ({"eps": [0.2, 0.3, 0.7], "k": [2, 3]}, {"delta": 0.0, "delta_target": 1e-6})


def test_report_provenance_is_scoped_to_the_runs_of_its_rows(tmp_path):
    """Report a grid, let an unrelated sweep (another grid, another run) land in the folder,
    report again: the same tables, and index.md and index.html name only the run whose rows
    the report shows, with that run's configuration (not the latest run of the folder)."""
    from pipeline.report.build import build_report
    from pipeline.report.selection import Selection, selection_from_options

    grid = store(tmp_path, "composition", *GRID_A, "run-a")
    report = tmp_path / "composition" / "_report"
    assert build_report(tmp_path, "composition", selection=selection_from_options(grid, {})) == 0
    first = {p.name: p.read_text() for p in report.glob("*.csv")}
    store(tmp_path, "composition", *GRID_B, "run-b")
    assert build_report(tmp_path, "composition", selection=selection_from_options(grid, {})) == 0
    assert {p.name: p.read_text() for p in report.glob("*.csv")} == first
    index, page = (report / "index.md").read_text(), (report / "index.html").read_text()
    for text in (index, page):
        assert "run-a" in text and "run-b" not in text
    provenance = page[page.index('<h2 id="provenance">'):]
    assert "<td>run-a</td>" in provenance and "Latest of these runs (run-a)" in provenance
    for shown in _config_shown(index, page):
        assert shown["grid"] == GRID_A[0]
    # everything stored: both runs, and the latest of them is run-b
    assert build_report(tmp_path, "composition", selection=Selection()) == 0
    index, page = (report / "index.md").read_text(), (report / "index.html").read_text()
    for text in (index, page):
        assert "run-a" in text and "run-b" in text
    for shown in _config_shown(index, page):
        assert shown["grid"] == GRID_B[0]


def test_report_provenance_of_rows_without_a_run_id(tmp_path):
    from pipeline.report.build import build_report
    from pipeline.report.selection import Selection

    store(tmp_path, "composition", *GRID_A, "old", stamp=False)  # before run ids existed
    assert build_report(tmp_path, "composition", selection=Selection()) == 0
    report = tmp_path / "composition" / "_report"
    for text in ((report / "index.md").read_text(), (report / "index.html").read_text()):
        assert "4 row(s) carry no run_id" in text and "No run wrote a row of this report" in text
        assert "Latest of these runs" not in text  # no run's configuration is claimed


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_resume_after_a_code_change_warns_and_rerun_changed_recomputes(tmp_path):
    grid_cfg = {"eps": [0.1, 0.5], "k": [1, 10], "delta": [0.0], "delta_target": [1e-6]}
    store(tmp_path, "composition", grid_cfg, {}, "old", code="0123456789abcdef")
    args = ["experiment=composition", "grid.eps=[0.1,0.5]", "grid.k=[1,10]", "grid.delta=[0.0]",
            "grid.delta_target=[1e-6]", f"results_dir={tmp_path}", *FAST]
    proc = run_cli(*args, "dry_run=true")
    assert "other code:    4 stored ok point(s) computed by another code_id" in proc.stdout
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "4 stored point(s) of this grid were computed by other code (code_id " \
           "0123456789abcdef" in proc.stderr and "rerun_changed=true" in proc.stderr
    assert set(pipeline.load(tmp_path, "composition").code_id) == {"0123456789abcdef"}
    proc = run_cli(*args, "rerun_changed=true")
    assert proc.returncode == 0, proc.stderr
    assert "4 to run" in proc.stderr
    df = pipeline.load(tmp_path, "composition")
    assert len(df) == 4 and set(df.code_id) == {code_id(get_experiment("composition"))}
    assert len(pd.read_parquet(tmp_path / "composition")) == 8  # the old rows stay stored
    proc = run_cli(*args)
    assert proc.returncode == 0 and "computed by other code" not in proc.stderr


@pytest.mark.timeout(120)
def test_every_output_column_of_every_experiment_has_a_description_and_unit():
    from pipeline.engine.schema import column_doc
    from pipeline.experiments.base import registry

    units = {None, "1", "nat", "bit", "s"}
    for name, exp in registry().items():  # parameters: the next test
        for column, typ in exp.columns.items():
            description, unit, exact = column_doc(exp, column)
            assert description and unit in units, (name, column)
            if exact:  # exact integers are stored as decimal strings
                assert typ == pa.string(), (name, column)
            if pa.types.is_floating(typ) and column.startswith("log_"):
                assert unit == "nat", (name, column)
    out = subprocess.run([sys.executable, "-m", "pipeline", "describe", "lattice"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout
    assert "[nat]" in out and "ln tau(G), tau = number of spanning trees" in out


def test_readme_units_legend_covers_the_units_of_the_exported_columns(tmp_path):
    """calibration's work_us is in microseconds (unit ``us``), but the README's legend was a
    fixed line of 1, nat, bit and s: it now lists the units the package's columns declare."""
    from pipeline.report.export import export_package

    store(tmp_path / "r", "calibration", {"x": [1, 2]}, {"work_us": 0.0}, "run1")
    export_package(tmp_path / "r", "calibration", tmp_path / "pkg", fmt="parquet")
    readme = (tmp_path / "pkg" / "README.md").read_text()
    assert "| `work_us` | number (double) | us |" in readme
    legend = next(line for line in readme.splitlines() if line.startswith("Units:"))
    assert legend == ("Units: `1` is a dimensionless number, `s` seconds, `us` microseconds; "
                      "an empty unit is a label or a flag."), legend  # no exact integers here
    # a package with exact integer columns says so, naming them
    store(tmp_path / "r", "independent_sets", {"m": [1, 2]}, {"lattice": "488", "n": 2}, "run2")
    export_package(tmp_path / "r", "independent_sets", tmp_path / "pkg2", fmt="parquet")
    readme = (tmp_path / "pkg2" / "README.md").read_text()
    legend = next(line for line in readme.splitlines() if line.startswith("Units:"))
    assert legend.endswith("an empty unit is a label or a flag. Exact integers beyond 64 bits "
                           "are decimal strings, with a float `log_*` column beside them "
                           "(`count`)."), legend


def test_every_declared_unit_has_its_meaning_in_the_readme_legend():
    """Every unit any registered experiment (or the engine's bookkeeping) declares is one the
    README's legend explains, not one it merely repeats."""
    from pipeline.engine.schema import BOOKKEEPING_DOCS
    from pipeline.experiments.base import registry
    from pipeline.report.export import UNIT_MEANINGS, units_legend

    declared = {entry[1] for exp in registry().values() for entry in exp.column_docs.values()}
    declared |= {unit for _, unit in BOOKKEEPING_DOCS.values()}
    declared.discard(None)
    assert "us" in declared and declared <= set(UNIT_MEANINGS), declared - set(UNIT_MEANINGS)
    legend = units_legend([{"unit": u} for u in sorted(declared)])
    for unit in declared:
        assert f"`{unit}` {'is ' if unit == '1' else ''}{UNIT_MEANINGS[unit]}" in legend
    assert units_legend([{"unit": "kg"}, {}]) == (
        "Units: `kg` (as declared); an empty unit is a label or a flag.")


@pytest.mark.timeout(120)
def test_every_parameter_of_every_experiment_has_a_description_and_unit():
    """Parameters are columns of every row too: each declares its unit beside its Param.doc
    (a ``("", unit)`` entry of ``document()``), and the store, the export and the report all
    read it through ``declared_doc``."""
    from pipeline.engine.schema import column_doc, field_metadata
    from pipeline.experiments.base import declared_doc, registry
    from pipeline.report.columns import column_meta

    units = {None, "1", "nat", "bit", "s", "us"}
    numeric = (int, float, "int_list", "float_list")
    for name, exp in registry().items():
        for p in exp.params:
            assert p.name in exp.column_docs, (name, p.name)  # its unit is declared
            doc = declared_doc(exp, p.name)
            assert doc.parameter and doc.description and not doc.exact, (name, p.name)
            assert doc.unit in units, (name, p.name, doc.unit)
            if p.type in numeric and not p.name.endswith("seed"):
                assert doc.unit is not None, (name, p.name)  # a quantity has a unit
            else:
                assert doc.unit is None, (name, p.name)  # a label, a flag, a seed: none
            if p.type in (float, "float_list") and p.name.startswith("eps"):
                assert doc.unit == "nat", (name, p.name)
            description, unit, exact = column_doc(exp, p.name)
            assert unit == doc.unit and not exact
            assert description == (f"parameter: {p.doc}" if not exp.column_docs[p.name][0]
                                   else exp.column_docs[p.name][0])
            meta = field_metadata(exp, p.name) or {}
            assert meta.get("unit") == doc.unit, (name, p.name)
            shown = column_meta(name, p.name)  # the report's header reads the same
            assert shown.description == doc.description
            assert shown.unit == ("" if doc.unit in (None, "1") else doc.unit)


def test_documentation_is_not_part_of_a_task_id():
    """Editing descriptions and units changes no task id and needs no version bump."""
    import dataclasses

    for name, (grid_cfg, params) in {"lattice": ({"L1": [3, 4]}, {"base": "square"}),
                                     "composition": ({"eps": [0.1, 1.0]}, {"k": 3})}.items():
        exp = get_experiment(name)
        bare = dataclasses.replace(exp, column_docs={})
        assert exp.column_docs and not bare.column_docs
        documented, undocumented = Grid(exp, grid_cfg, params), Grid(bare, grid_cfg, params)
        assert [documented.task_id(i) for i in range(documented.total)] == \
            [undocumented.task_id(i) for i in range(undocumented.total)]


def test_a_recomputed_task_keeps_only_its_latest_rows(tmp_path):
    """rerun_changed's guarantee in load: the new attempt's rows replace all the old ones,
    even when the old code emitted more rows for the task."""
    exp = get_experiment("composition_region")
    grid = Grid(exp, {"k": [2, 3]}, {"eps": 0.4})
    path = experiment_dir(tmp_path, "composition_region")
    old, _ = run_batch(grid, range(grid.total))
    extra = old.set_column(old.schema.get_field_index("row_index"), "row_index",
                           pc.add(old["row_index"], 100))
    PartWriter(path, "old", stamp=provenance_stamp(exp, "old")).write(
        pa.concat_tables([old, extra]))
    new, _ = run_batch(grid, range(grid.total))
    PartWriter(path, "new", stamp=provenance_stamp(exp, "new")).write(new)
    df = pipeline.load(tmp_path, "composition_region")
    assert len(df) == new.num_rows and set(df.run_id) == {"new"}
    assert df.row_index.max() < 100
    assert df.groupby("task_id").row_index.apply(sorted).map(
        lambda r: r == list(range(len(r)))).all()


def test_report_and_export_during_a_sweep_say_it_is_a_snapshot(tmp_path):
    """report=true and export while a sweep writes the folder: the report warned that the
    points not reached yet had 'no stored row (run the sweep to fill them in)', as if nothing
    were running, and neither said the rows were a snapshot. Now both say a sweep is still
    writing (run id and start; no host or pid, which an exported package must not carry)."""
    grid_cfg = {"x": [0, 1, 2, 3]}
    params = {"work_us": 0.0}
    store(tmp_path, "calibration", {"x": [0, 1]}, params, "done")
    folder = experiment_dir(tmp_path, "calibration")
    words = ["experiment=calibration", "grid.x=[0,1,2,3]", "params.work_us=0",
             f"results_dir={tmp_path}"]
    snapshot = ("a sweep is still writing to this folder (run live, since "
                "2026-01-02T00:00:00Z; python -m pipeline status shows it): this is a snapshot "
                "of the rows stored so far; run it again when the sweep has finished")
    # a driver that is alive: this process, on this host (as status judges it)
    update_manifest(folder, {"run_id": "live", "experiment": "calibration", "status": "running",
                             "started_at": "2026-01-02T00:00:00Z", "host": socket.gethostname(),
                             "pid": os.getpid(), "config": {"grid": grid_cfg, "params": params}})
    proc = run_cli(*words, "report=true")
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {snapshot}\n" in proc.stderr
    assert ("warning: 2 of 4 point(s) of the grid have no stored row yet (the sweep above is "
            "still writing)\n") in proc.stderr
    assert "run the sweep to fill them in" not in proc.stderr
    index = (folder / "_report" / "index.md").read_text()
    assert f"- **warning**: {snapshot}\n" in index
    proc = export(folder, tmp_path / "pkg")
    assert proc.returncode == 0, proc.stderr
    package = (tmp_path / "pkg" / "datapackage.json").read_text()
    assert snapshot in package
    assert f"pid {os.getpid()}" not in package and f" on {socket.gethostname()}" not in package
    # the driver gone (a dead pid): no snapshot warning; the missing points want a sweep
    update_manifest(folder, {"run_id": "live", "experiment": "calibration", "status": "running",
                             "started_at": "2026-01-02T00:00:00Z", "host": socket.gethostname(),
                             "pid": 2**22 + 12345, "config": {"grid": grid_cfg, "params": params}})
    proc = run_cli(*words, "report=true")
    assert "still writing" not in proc.stderr
    assert "2 of 4 point(s) of the grid have no stored row (run the sweep to fill them in)" \
        in proc.stderr


def test_export_names_an_unknown_run_id_and_takes_a_bracketed_list(mixed_store, tmp_path):
    """export run_id=typo said only "no stored rows match the selection" where load() names the
    folder's runs and the closest one; version=[0,1] (the form report=true takes) was refused
    as "got '[0'"; params.m=3 beside grid.m=[..] exported the axis's points and dropped it."""
    folder = experiment_dir(mixed_store, "independent_sets")
    proc = export(folder, tmp_path / "typo", "run_id=aa")
    assert proc.returncode == 2, proc.stderr
    assert "error: run_id 'aa': no run of 'independent_sets' has this id" in proc.stderr
    assert not (tmp_path / "typo").exists()
    proc = export(folder, tmp_path / "fixed", "experiment=independent_sets", "grid.m=[1,2]",
                  "params.m=3")
    assert proc.returncode == 2 and "params.m is set, but m is also a grid axis" in proc.stderr
    assert not (tmp_path / "fixed").exists()
    proc = export(folder, tmp_path / "both", "--format", "csv", "version=[0,1]", "run_id=[a,v0]")
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(tmp_path / "both" / "data" / "independent_sets.csv")
    assert sorted(zip(rows.experiment_version, rows.m)) == [(0, 1), (0, 2), (1, 1), (1, 2),
                                                            (1, 3)]


def test_export_refuses_a_version_not_stored_beside_one_that_is(mixed_store, tmp_path):
    """version=[1,2] with only 0 and 1 stored exported version 1 as if both were there (report
    and load refused it); version=3 alone said "no stored rows match" without the versions
    the folder has."""
    folder = experiment_dir(mixed_store, "independent_sets")
    for words in (["version=[1,2]"], ["version=3"]):
        proc = export(folder, tmp_path / "v", *words)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        absent = words[0].rsplit("=", 1)[1].strip("[]").split(",")[-1]
        assert (f"version={absent}: no rows of version {absent} are stored for "
                "'independent_sets'; stored: 0, 1 (or 'latest')") in proc.stderr, proc.stderr
        assert not (tmp_path / "v").exists()


def test_export_warns_of_failed_rows_and_refuses_a_package_of_failures(tmp_path):
    """A folder with failed tasks exported them with exit 0 and no word (report=true warns),
    and a selection of failed tasks only exported a package without one result."""
    store(tmp_path, "calibration", {"x": list(range(8))},
          {"work_us": 0.0, "fail_every": 4}, "a")  # x = 0 and 4 fail
    folder = experiment_dir(tmp_path, "calibration")
    proc = export(folder, tmp_path / "pkg")
    assert proc.returncode == 0, proc.stderr
    warning = ("2 of 8 exported task(s) failed: their rows have status = failed, null outputs "
               "and the error")
    assert f"warning: {warning}" in proc.stderr, proc.stderr
    descriptor = json.loads((tmp_path / "pkg" / "datapackage.json").read_text())
    assert any(w.startswith(warning) for w in descriptor["pipeline"]["coverage"]["warnings"])
    proc = export(folder, tmp_path / "failures", "experiment=calibration", "grid.x=[0,4]",
                  "params.work_us=0", "params.fail_every=4")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("every one of the 2 selected task(s) of 'calibration' failed: nothing to publish"
            in proc.stderr), proc.stderr
    assert not (tmp_path / "failures").exists()


def test_export_refuses_to_replace_another_experiments_package(mixed_store, tmp_path):
    """--to holding an independent_sets package, given for a calibration export (a mistyped
    folder): the package was replaced without a word."""
    proc = export(experiment_dir(mixed_store, "independent_sets"), tmp_path / "pkg")
    assert proc.returncode == 0, proc.stderr
    before = (tmp_path / "pkg" / "datapackage.json").read_text()
    store(tmp_path / "cal", "calibration", {"x": [1, 2]}, {"work_us": 0.0}, "c")
    proc = export(experiment_dir(tmp_path / "cal", "calibration"), tmp_path / "pkg")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"{tmp_path / 'pkg'} holds the data package of experiment 'independent_sets', not "
            "'calibration'") in proc.stderr, proc.stderr
    assert (tmp_path / "pkg" / "datapackage.json").read_text() == before
    proc = export(experiment_dir(mixed_store, "independent_sets"), tmp_path / "pkg")
    assert proc.returncode == 0, proc.stderr  # the same experiment's: replaced, as documented


def _csv_text_expected(col) -> list:
    """The CSV text Table Schema reads back, value by value in Python (the oracle): a time as
    its UTC instant, 2026-12-06T16:32:27.095710Z (years of four digits); a float as Arrow
    spells a finite one, and INF, -INF or NaN."""
    import datetime as dt
    import math

    if pa.types.is_timestamp(col.type):
        per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[col.type.unit]
        epoch = dt.datetime(1970, 1, 1)
        out = []
        for v in pc.cast(col, pa.int64()).to_pylist():
            if v is None:
                out.append(None)
                continue
            t = epoch + dt.timedelta(microseconds=v * 10**6 // per_second)
            out.append(f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
                       f"{t.second:02d}.{t.microsecond:06d}Z")
        return out
    finite = pc.cast(col, pa.string()).to_pylist()
    return [None if v is None else "NaN" if math.isnan(v) else "INF" if v == math.inf
            else "-INF" if v == -math.inf else text
            for v, text in zip(col.to_pylist(), finite)]


@pytest.mark.parametrize("seed", range(5))
def test_the_csv_text_of_times_and_floats_is_what_strftime_and_respelling_gave(seed):
    """Times are printed by a cast to text (strftime took 4.4 s a column of 4M rows) and floats
    are respelled only where one is not finite: the text is the oracle's, value by value,
    over random instants from year 1 to 9999 (before 1970 too, whole seconds, nulls), time
    zones and units, and floats with and without inf, -inf, nan and nulls."""
    import numpy as np

    from pipeline.report.export import _csv_column

    rng = np.random.default_rng(seed)
    n = 2_000
    us = rng.integers(-62135596800 * 10**6, 253402300799 * 10**6, n)
    us[:50] = us[:50] // 10**6 * 10**6  # whole seconds
    us[50:60] = [0, -1, 1, 10**6, -10**6, 86_400 * 10**6 - 1, 951_782_400 * 10**6,
                 -62135596800 * 10**6, 253402300799999999, 1_733_500_000_000_000]
    nulls = rng.random(n) < 0.05
    for typ in (pa.timestamp("us", tz="UTC"), pa.timestamp("us"),
                pa.timestamp("us", tz="Europe/Paris"), pa.timestamp("ms", tz="UTC"),
                pa.timestamp("s")):
        unit = {"us": 1, "ms": 1_000, "s": 10**6}[typ.unit]
        col = pa.chunked_array([pa.array(us // unit, pa.int64(), mask=nulls).cast(typ)])
        assert _csv_column(col).to_pylist() == _csv_text_expected(col), typ
    values = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
    for special in ([], [np.inf], [-np.inf, np.nan], [np.nan, np.inf, -np.inf, -0.0]):
        floats = values.copy()
        floats[: len(special)] = special
        for typ in (pa.float64(), pa.float32()):
            col = pa.chunked_array([pa.array(floats, mask=nulls).cast(typ, safe=False)])
            assert _csv_column(col).to_pylist() == _csv_text_expected(col), (typ, special)
