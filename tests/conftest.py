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
def small_disk(tmp_path):
    """A real 4 MiB tmpfs (root only), unmounted after the test."""
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill: {proc.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)

