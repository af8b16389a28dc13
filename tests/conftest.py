"""Shared test set-up.

Under CI (CI=true) hypothesis runs derandomized: the same examples every run, so a red CI is
always reproducible. Locally it explores new examples each run (and remembers failures).
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def result_frame():
    """Build a result DataFrame the way a sweep stores it: each point run through the engine's
    own batch function (typed columns, task ids, seeds from the ids), plus ``failed`` failed
    rows. ``experiment`` is a name or an Experiment."""
    from pipeline.engine.batch import failed_batch_table, run_batch
    from pipeline.engine.grid import Grid
    from pipeline.experiments.base import get_experiment

    def build(experiment, points, failed: int = 0):
        exp = get_experiment(experiment) if isinstance(experiment, str) else experiment
        tables = [run_batch(Grid(exp, {}, point), [0])[0] for point in points]
        tables += [failed_batch_table(Grid(exp, {}, points[0]), [0], "RuntimeError: synthetic")
                   for _ in range(failed)]
        df = pa.concat_tables(tables).to_pandas()
        df.attrs["experiment"] = exp.name
        return df

    return build


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a real tmpfs (root only) with the given options: ``tmpfs("ro,size=1m")`` returns
    its folder, unmounted after the test; the test skips, saying why, where mount fails."""
    import subprocess

    mounts = []

    def mount(options: str, name: str = "mnt"):
        folder = tmp_path / name
        folder.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs ({options}): {proc.stderr.strip()}")
        mounts.append(folder)
        return folder

    yield mount
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill_disk(folder) -> None:
    """Write ``folder/_filler`` until its filesystem is full, to the last byte."""
    import errno
    from pathlib import Path

    with open(Path(folder) / "_filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.fixture
def small_disk(tmpfs):
    """A real 4 MiB tmpfs to fill."""
    return tmpfs("size=4m", "small")

