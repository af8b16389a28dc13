"""Shared test set-up.

Under CI (CI=true) hypothesis runs derandomized: the same examples every run, so a red CI is
always reproducible. Locally it explores new examples each run (and remembers failures).
"""

import contextlib
import os
from pathlib import Path

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
    from pipeline.engine.batch import run_batch
    from pipeline.engine.batch_table import failed_batch_table
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


def _semaphores_in_use() -> set[str]:
    """Names of the POSIX semaphores (``/dev/shm/sem.*``) some readable process maps."""
    in_use = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # the process ended, or is another user's
            continue
        in_use.update(line.rsplit("/", 1)[1] for line in text.splitlines()
                      if "/dev/shm/sem." in line)
    return in_use


def _own_semaphores() -> set[str]:
    """Names of this user's multiprocessing semaphores in /dev/shm."""
    names = set()
    for sem in Path("/dev/shm").glob("sem.mp-*"):
        with contextlib.suppress(OSError):  # unlinked meanwhile
            if sem.stat().st_uid == os.getuid():
                names.add(sem.name)
    return names


@pytest.fixture(autouse=True, scope="session")
def no_semaphores_left_behind():
    """Remove the semaphores that processes killed by the tests left in /dev/shm.

    Dask's nanny makes its worker queues with multiprocessing's spawn context, whose named
    semaphores only multiprocessing's resource tracker unlinks; the tests that kill -9 a whole
    process group kill the tracker too. Removed at the end: those created during the session
    that no live process maps (another run's, or a live process's, are left alone)."""
    before = _own_semaphores()
    yield
    left = _own_semaphores() - before
    if left:
        for name in left - _semaphores_in_use():
            with contextlib.suppress(OSError):
                os.unlink(f"/dev/shm/{name}")
