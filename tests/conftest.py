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


def _mapped_files() -> set[tuple[int, int]]:
    """(device, inode) of every file some readable process maps. A semaphore's creator maps
    it under a temporary name (glibc creates ``sem.XXXXXX``, maps it, then links it to
    ``sem.mp-...`` and unlinks the temporary): only its inode, not its name, shows that it
    is in use. Matched by name, every semaphore no child had opened yet looked unused."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # the process ended, or is another user's
            continue
        for line in text.splitlines():
            if "/dev/shm/" not in line:
                continue
            fields = line.split()
            major, minor = (int(part, 16) for part in fields[3].split(":"))
            mapped.add((os.makedev(major, minor), int(fields[4])))
    return mapped


def _own_semaphores() -> dict[str, tuple[int, int]]:
    """This user's multiprocessing semaphores in /dev/shm: name -> (device, inode)."""
    found = {}
    for sem in Path("/dev/shm").glob("sem.mp-*"):
        with contextlib.suppress(OSError):  # unlinked meanwhile
            st = sem.stat()
            if st.st_uid == os.getuid():
                found[sem.name] = (st.st_dev, st.st_ino)
    return found


_SEMAPHORES_BEFORE: dict[str, tuple[int, int]] = {}


def _runs_the_whole_session(config) -> bool:
    """Not a pytest-xdist worker: the controller (or a run without xdist) ends last."""
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if _runs_the_whole_session(session.config):
        _SEMAPHORES_BEFORE.update(_own_semaphores())


def pytest_sessionfinish(session, exitstatus):
    """Remove the semaphores that processes killed by the tests left in /dev/shm.

    Dask's nanny makes its worker queues with multiprocessing's spawn context, whose named
    semaphores only multiprocessing's resource tracker unlinks; the tests that kill -9 a whole
    process group kill the tracker too. Removed once every test has run (in the xdist
    controller: a worker that finished first removed its sibling's live semaphores, and a
    worker process then failed to start, "SemLock FileNotFoundError"): those created during
    the session that no live process maps (another run's, or a live process's, are left)."""
    if not _runs_the_whole_session(session.config):
        return
    left = {name: key for name, key in _own_semaphores().items()
            if name not in _SEMAPHORES_BEFORE}
    if left:
        mapped = _mapped_files()
        for name, key in left.items():
            if key not in mapped:
                with contextlib.suppress(OSError):
                    os.unlink(f"/dev/shm/{name}")
