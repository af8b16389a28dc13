"""Export an experiment's stored results as a Frictionless Data Package, ready to publish.

``python -m pipeline export RESULTS_DIR/NAME --to DIR [--format parquet|csv|both]`` writes::

    DIR/datapackage.json   Table Schema per resource (type, description, unit, primary key
                           (task_id, row_index)), sha256 hash and size of each data file, the
                           grid(s), the selection and what it covers, provenance (runs, git
                           commits, package versions, configs)
    DIR/data/NAME.parquet  the deduplicated table, as ``pipeline.load`` gives it (Arrow types
                           and field metadata kept)
    DIR/data/NAME.csv      the same rows as CSV (RFC 4180, UTF-8; exact integers beyond int64
                           stay exact decimal strings; INF/-INF/NaN as Table Schema writes them)
    DIR/README.md          what each column means, which seed and equation, how to load it
    DIR/CITATION.cff       how to cite the data set
    DIR/docs/FAMILY.md     the experiment family's documentation, when the source tree has it
    DIR/SHA256SUMS         ``sha256sum -c SHA256SUMS`` checks every file above

Provenance copies only what the manifest records, minus host, user, pid, the command line and
the cluster settings (machine details, not science); nothing is added.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from pipeline.report.selection import Selection, coverage, coverage_lines, pick
from pipeline.report.swap import build_whole

FORMATS = ("parquet", "csv", "both")
DEFAULT_LICENSE = "CC-BY-4.0"
LICENSES = {
    "CC-BY-4.0": ("Creative Commons Attribution 4.0",
                  "https://creativecommons.org/licenses/by/4.0/"),
    "CC0-1.0": ("Creative Commons Zero v1.0 Universal",
                "https://creativecommons.org/publicdomain/zero/1.0/"),
    "ODC-By-1.0": ("Open Data Commons Attribution License v1.0",
                   "https://opendatacommons.org/licenses/by/1-0/"),
}
RUN_KEYS = ("run_id", "status", "started_at", "finished_at", "experiment", "version", "code_id",
            "git", "python", "platform", "packages", "counts")
PRIMARY_KEY = ["task_id", "row_index"]
REPO_ROOT = Path(__file__).resolve().parents[2]


class ExportError(ValueError):
    """Bad export arguments or nothing to export (exit code 2)."""


def table_schema_type(typ: pa.DataType) -> str:
    if pa.types.is_integer(typ):
        return "integer"
    if pa.types.is_floating(typ):
        return "number"
    if pa.types.is_boolean(typ):
        return "boolean"
    if pa.types.is_timestamp(typ):
        return "datetime"
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return "array"
    return "string"


def table_schema(experiment, schema: pa.Schema) -> dict:
    """Frictionless Table Schema of the exported table: one field per column with its type,
    description, unit (``unit``, a custom property) and the Arrow type it is stored as."""
    from pipeline.engine.schema import column_doc

    fields = []
    for f in schema:
        description, unit, exact = column_doc(experiment, f.name) if experiment else ("", None,
                                                                                       False)
        field = {"name": f.name, "type": table_schema_type(f.type), "arrowType": str(f.type)}
        if description:
            field["description"] = description
        if unit:
            field["unit"] = unit
        if exact:
            field["constraints"] = {"pattern": "[0-9]+"}
            field["description"] = (description + " (exact integer, as a decimal string)").strip()
        if f.name in PRIMARY_KEY:
            field.setdefault("constraints", {})["required"] = True
        fields.append(field)
    return {"fields": fields, "primaryKey": list(PRIMARY_KEY), "missingValues": [""]}


def _parquet_schema(schema: dict) -> dict:
    """The Table Schema of the Parquet resource: list columns are typed ``any`` there (their
    ``arrowType`` says list<...>), because frictionless reads Parquet lists as numpy arrays,
    which its ``array`` type rejects; the CSV resource keeps ``array`` (JSON text)."""
    fields = [{**f, "type": "any"} if f["type"] == "array" else f for f in schema["fields"]]
    return {**schema, "fields": fields}


def _csv_column(col: pa.ChunkedArray) -> pa.Array:
    """One column as the strings Table Schema reads back exactly."""
    typ = col.type
    if pa.types.is_floating(typ):
        text = pc.cast(col, pa.string())
        if pc.all(pc.is_finite(col)).as_py() is not False:  # (nulls aside) nothing to respell
            return text
        for raw, spec in (("-inf", "-INF"), ("inf", "INF"), ("nan", "NaN"), ("-nan", "NaN")):
            text = pc.if_else(pc.equal(text, raw), spec, text)
        return text
    if pa.types.is_timestamp(typ):
        # 2026-12-06T16:32:27.095710Z: the UTC instant as Arrow prints it without a zone, the
        # space made a T; strftime("%Y-%m-%dT%H:%M:%SZ") gives the same text at 3.7x the time
        # (4.4 s a column of 4M rows)
        utc = pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC")), pa.timestamp("us"))
        text = pc.replace_substring(pc.cast(utc, pa.string()), " ", "T", max_replacements=1)
        return pc.binary_join_element_wise(text, pa.scalar("Z"), "")
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.array([None if v is None else json.dumps(v) for v in col.to_pylist()],
                        pa.string())
    return pc.cast(col, pa.string())


def write_csv(table: pa.Table, file: Path) -> None:
    text = pa.table({name: _csv_column(table[name]) for name in table.column_names})
    pacsv.write_csv(text, file, write_options=pacsv.WriteOptions(quoting_style="needed"))


def sha256_of(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _docs_file(experiment) -> Path | None:
    """The family's docs/*.md in the source tree: docs/MODULE.md, else the one naming it."""
    docs = REPO_ROOT / "docs"
    module = experiment.run.__module__.rsplit(".", 1)[-1]
    if (docs / f"{module}.md").is_file():
        return docs / f"{module}.md"
    for file in sorted(docs.glob("*.md")) if docs.is_dir() else []:
        if file.name != "errata.md" and f"`{experiment.name}`" in file.read_text():
            return file
    return None


def _strict_json(value):
    """Non-finite floats as strings ("inf", "nan"): JSON itself has no Infinity or NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    return value


MACHINE_COLUMNS = ("worker",)


def _created(runs: list[dict]) -> str:
    """The package's ``created``: ``SOURCE_DATE_EPOCH`` where set (reproducible builds), else
    the end of the last run whose rows it holds, so that two exports of the same rows are the
    same bytes (the export's own clock made datapackage.json and SHA256SUMS differ), else now."""
    epoch = _source_date_epoch()
    if epoch is not None:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    ends = [str(r.get("finished_at")) for r in runs if r.get("finished_at")]
    return max(ends) if ends else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` (reproducible-builds.org), or None: the time of the export."""
    import os

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(epoch) if epoch.isdigit() else None


def _public_run(run: dict) -> dict:
    out = {k: run[k] for k in RUN_KEYS if k in run}
    config = dict(run.get("config") or {})
    for key in ("cluster", "results_dir"):  # machine details, not science
        config.pop(key, None)
    out["config"] = config
    return out


def export_package(results_dir, name: str, to, fmt: str = "both",
                   selection: Selection | None = None, license: str = DEFAULT_LICENSE,
                   authors: tuple[str, ...] = ()) -> dict:
    """Write the data package of experiment ``name`` (rows picked by ``selection``, then
    deduplicated as by ``load``) into the folder ``to``; returns the coverage summary."""
    from pipeline.experiments.base import get_experiment
    from pipeline.store.compaction import _newest_version_metadata
    from pipeline.store.manifest import read_manifest
    from pipeline.store.parquet import experiment_dir

    if fmt not in FORMATS:
        raise ExportError(f"--format must be one of {{{', '.join(FORMATS)}}}, got {fmt!r}")
    if license not in LICENSES:
        raise ExportError(f"--license must be one of {{{', '.join(LICENSES)}}}, got {license!r}")
    selection = selection or Selection()
    path = experiment_dir(results_dir, name)
    picked = pick(path, selection)  # the store is read once: the scope note counts from it
    if picked is None:
        from pipeline.store.manifest import nothing_stored_yet

        yet = nothing_stored_yet(path)
        raise ExportError(f"no results for experiment '{name}' under {path}"
                          + (f": {yet}" if yet else ""))
    table = picked.table
    if table.num_rows == 0:
        why = ""
        if selection.grid is not None:  # e.g. its points stored under another version only
            frame = table.select(["task_id", "status", "experiment_version"]).to_pandas()
            frame.attrs["experiment"] = name
            warned = coverage(frame, selection, read_manifest(path), picked)["warnings"]
            why = "".join(f"; {w}" for w in warned if "point(s) of the grid" in w)
        raise ExportError(f"no stored rows of '{name}' match the selection "
                          f"({selection.describe()}){why}")
    # labelled with the version of its rows, not the first part's (as compaction labels files)
    table = _newest_version_metadata(table)
    # Dask worker addresses (cluster hosts and ports) are machine details, not science: left
    # out as the run records' host and cluster settings are
    table = table.drop_columns([c for c in MACHINE_COLUMNS if c in table.column_names])
    try:
        experiment = get_experiment(name)
    except KeyError:
        experiment = None
    if experiment is not None:  # the declarations now, whatever the oldest part carried
        from pipeline.engine.schema import field_metadata

        table = table.cast(pa.schema([f.with_metadata(field_metadata(experiment, f.name))
                                      for f in table.schema], metadata=table.schema.metadata))
    manifest = read_manifest(path)
    frame = table.select([c for c in ("task_id", "status", "experiment_version", "run_id",
                                      "code_id") if c in table.column_names]).to_pandas()
    frame.attrs["experiment"] = name
    cov = coverage(frame, selection, manifest, picked)
    if cov["tasks_failed"] and not cov["tasks_ok"]:  # a package of error messages
        raise ExportError(f"every one of the {cov['tasks_failed']:,} selected task(s) of "
                          f"'{name}' failed: nothing to publish (their errors: python -m "
                          f"pipeline status {path}); rerun them with the sweep's command and "
                          "retry_failed=true")
    if cov["tasks_failed"]:  # printed, and kept in datapackage.json's coverage
        cov["warnings"].append(
            f"{cov['tasks_failed']:,} of {cov['tasks']:,} exported task(s) failed: their rows "
            "have status = failed, null outputs and the error (rerun them with the sweep's "
            "command and retry_failed=true, then export again)")

    target = Path(to)
    if target.exists() and (not target.is_dir() or (any(target.iterdir()) and
                                                  not (target / "datapackage.json").is_file())):
        raise ExportError(f"{target} exists and is not an earlier data package: give an empty "
                          "or new folder")
    earlier = _package_experiment(target)
    if earlier is not None and earlier != name:  # a mistyped --to replaced another's package
        raise ExportError(f"{target} holds the data package of experiment '{earlier}', not "
                          f"'{name}': give another folder (or remove it first to replace it)")
    # Built beside the target and swapped in whole: an export killed or failing half-way left
    # a package without its datapackage.json, which the next export then refused to replace,
    # and two exports to one folder mixed their files.
    build_whole(target, lambda out: _write_package(out, table, name, fmt, experiment, manifest,
                                                   cov, selection, license, authors),
                mark=".exporting-")
    note = scope_note(picked, selection)
    return {**cov, "scope_note": note} if note else cov


def _package_experiment(target: Path) -> str | None:
    """The experiment of the data package already in ``target`` (None: none, or unreadable)."""
    try:
        descriptor = json.loads((target / "datapackage.json").read_text())
        return str(descriptor["pipeline"]["experiment"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def scope_note(picked, selection: Selection) -> str | None:
    """One line when the selection's grid (``experiment=NAME``, ``grid.*``/``params.*`` words)
    leaves out stored ok points that the same command without those words would export: the
    grid's scope was otherwise silent. The stored points counted are those the grid can
    match: of the experiment versions its points are matched under (``version=``, else this
    code's version; other versions' points have other task ids, and "10 of 52" counted
    them), under the run_id/code_id filters, as the report counts them
    (:func:`pipeline.report.selection.points_outside_grid`, on what ``pick`` read: no second
    read of the store). None without a grid or when it leaves nothing out."""
    from pipeline.report.selection import points_outside_grid

    counts = points_outside_grid(picked, selection)
    if counts is None:
        return None
    in_grid, outside = counts
    versions = ", ".join(map(str, picked.versions))
    return (f"{in_grid:,} of {in_grid + outside:,} stored ok point(s) are in the selected grid "
            "(experiment=/grid./params. words: the YAML's grid; counted among the points of "
            f"experiment version(s) {versions}); without those words export takes every stored "
            "point")


def _write_package(out: Path, table, name, fmt, experiment, manifest, cov, selection, license,
                   authors) -> None:
    (out / "data").mkdir(parents=True, exist_ok=True)
    resources = []
    if fmt in ("parquet", "both"):
        file = out / "data" / f"{name}.parquet"
        pq.write_table(table, file, compression="zstd")
        resources.append(("parquet", file, "application/vnd.apache.parquet"))
    if fmt in ("csv", "both"):
        file = out / "data" / f"{name}.csv"
        write_csv(table, file)
        resources.append(("csv", file, "text/csv"))
    schema = table_schema(experiment, table.schema)
    package_name = re.sub(r"[^a-z0-9._-]+", "-", f"pipeline-{name}".lower())
    title, url = LICENSES[license]
    doc = (experiment.doc if experiment else "").strip()
    runs = {r.get("run_id"): r for r in manifest.get("runs", [])}
    used = [runs[r["run_id"]] for r in cov["runs"] if r["run_id"] in runs]
    descriptor = {
        "profile": "tabular-data-package",
        "name": package_name,
        "title": f"{name}: results of the pipeline experiment",
        "description": doc.split("\n\n")[0] if doc else name,
        "created": _created(used),
        "licenses": [{"name": license, "title": title, "path": url}],
        "resources": [],
        "pipeline": {
            "experiment": name,
            "selection": cov["selection"],
            "coverage": cov,
            # The parameters of the grid(s) the rows came from: the selected grid, and the
            # grid and fixed params each contributing run swept.
            "grids": ({"selected": cov.get("grid")} if selection.grid is not None else {}) | {
                run.get("run_id"): {"grid": (run.get("config") or {}).get("grid"),
                                    "params": (run.get("config") or {}).get("params")}
                for run in used},
            "provenance": {"runs": [_public_run(r) for r in used],
                           "commits": cov["commits"], "code_ids": cov["code_ids"]},
        },
    }
    for fmt_name, file, mediatype in resources:
        resource = {"name": f"{name}-{fmt_name}" if len(resources) > 1 else name,
                    "path": f"data/{file.name}", "profile": "tabular-data-resource",
                    "format": fmt_name, "mediatype": mediatype,
                    "hash": f"sha256:{sha256_of(file)}",
                    "schema": schema if fmt_name == "csv" else _parquet_schema(schema)}
        if fmt_name == "csv":
            # frictionless checks bytes by streaming the file: it does for CSV, not Parquet
            resource.update(encoding="utf-8", bytes=file.stat().st_size)
        descriptor["resources"].append(resource)
    (out / "datapackage.json").write_text(
        json.dumps(_strict_json(descriptor), indent=2, default=str, allow_nan=False) + "\n")
    docs = _docs_file(experiment) if experiment else None
    if docs:
        (out / "docs").mkdir(exist_ok=True)
        shutil.copyfile(docs, out / "docs" / docs.name)
    (out / "README.md").write_text(_readme(name, experiment, schema, descriptor, cov, docs,
                                           resources))
    (out / "CITATION.cff").write_text(_citation(name, doc, license, cov, authors))
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    (out / "SHA256SUMS").write_text("".join(f"{sha256_of(p)}  {p.relative_to(out).as_posix()}\n"
                                            for p in files))


def _readme(name, experiment, schema, descriptor, cov, docs, resources) -> str:
    doc = (experiment.doc if experiment else "").strip()
    lines = [f"# {name}: data package", "",
             f"Results of the `{name}` experiment of `pipeline`"
             + (f" (experiment version(s) {', '.join(map(str, cov['versions']))})"
                if cov["versions"] else "") + ".", "",
             "## What it computes (seed and equation)", "", doc or "(no description)", ""]
    if docs:
        lines += [f"The family's full documentation, with the seed's equations and the checks "
                  f"against known answers, is in [docs/{docs.name}](docs/{docs.name}).", ""]
    lines += ["## What it covers", "", *coverage_lines(cov), "",
              "One row per task and row index (primary key `task_id`, `row_index`), as "
              "`pipeline.load` gives it: a task that failed and later succeeded keeps only its "
              "successful rows; failed tasks are kept with `status = failed` and their `error`.",
              "", "## Columns", "", "| column | type | unit | description |", "|---|---|---|---|"]
    for f in schema["fields"]:
        lines.append(f"| `{f['name']}` | {f['type']} ({f['arrowType']}) | {f.get('unit', '')} | "
                     f"{_table_cell(f.get('description', ''))} |")
    exact = [f["name"] for f in schema["fields"]
             if (f.get("constraints") or {}).get("pattern") == "[0-9]+"]
    # said only of a package that has such columns, naming them
    lines += ["", units_legend(schema["fields"]) + (
        " Exact integers beyond 64 bits are decimal strings, with a float `log_*` column "
        f"beside them ({', '.join(f'`{n}`' for n in exact)})." if exact else ""), "",
              "## How to load it", "", "```python"]
    for fmt_name, file, _ in resources:
        rel = f"data/{file.name}"
        if fmt_name == "parquet":
            lines += [f'import pandas as pd; df = pd.read_parquet("{rel}")',
                      f'import polars as pl; df = pl.read_parquet("{rel}")',
                      f'import duckdb; rel = duckdb.read_parquet("{rel}")']
        else:
            lines += [f'import pandas as pd; df = pd.read_csv("{rel}", dtype=str)  '
                      "# then convert with the types of datapackage.json",
                      'from frictionless import Package; rows = '
                      'Package("datapackage.json").resources[0].read_rows()  # typed']
    lines += ["```", "", "Check the files with `sha256sum -c SHA256SUMS`; validate the package "
              "with `frictionless validate datapackage.json`.", "",
              "## Licence and citation", "",
              f"{descriptor['licenses'][0]['title']} ({descriptor['licenses'][0]['name']}). "
              "See CITATION.cff.", ""]
    return "\n".join(lines)


# what each unit a column may declare means (document()'s UCUM-style strings, and the
# bookkeeping columns'), in the legend's order; the legend lists those the columns use
UNIT_MEANINGS = {"1": "a dimensionless number", "nat": "a natural logarithm", "bit": "base 2",
                 "s": "seconds", "us": "microseconds"}


def units_legend(fields) -> str:
    """The README's line on the units of ``fields`` (Table Schema fields): each unit they
    declare, with its meaning (a fixed list of 1, nat, bit and s left out calibration's
    ``us``)."""
    used = {f["unit"] for f in fields if f.get("unit")}
    units = [u for u in UNIT_MEANINGS if u in used] + sorted(used - set(UNIT_MEANINGS))
    parts = [f"`{u}` {UNIT_MEANINGS.get(u, '(as declared)')}" for u in units]
    if parts and units[0] == "1":
        parts[0] = f"`1` is {UNIT_MEANINGS['1']}"
    return "Units: " + (", ".join(parts) + "; an empty" if parts else "an empty") + \
        " unit is a label or a flag."


def _yaml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def _citation(name, doc, license, cov, authors) -> str:
    if not authors:
        authors = (default_author(),)
    lines = ["cff-version: 1.2.0",
             'message: "If you use this data set, please cite it as below."',
             "type: dataset",
             f"title: {_yaml_str(f'{name}: results of the pipeline experiment')}",
             "authors:"]
    lines += [f"  - name: {_yaml_str(a)}" for a in authors]
    lines += [f"date-released: {time.strftime('%Y-%m-%d', time.gmtime(_source_date_epoch()))}",
              f"license: {license}"]
    if doc:
        lines.append(f"abstract: {_yaml_str(' '.join(doc.split()))}")
    if len(cov["commits"]) == 1:
        lines.append(f"commit: {_yaml_str(cov['commits'][0])}")
    lines.append(f"keywords: [{', '.join(_yaml_str(k) for k in ('pipeline', name))}]")
    return "\n".join(lines) + "\n"


def default_author() -> str:
    """CITATION.cff's author when none is given: git's user.name here, else "Unknown"."""
    return _git_user() or "Unknown"


def _git_user() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "config", "user.name"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _table_cell(text: str) -> str:
    """``text`` in a Markdown table cell: a bare '|' ends the cell, so it is escaped (GFM's
    ``\\|``), not replaced by '/' (``|lambda|`` read ``/lambda/``, a division)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

