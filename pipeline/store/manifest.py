"""The run manifest (``_manifest.json``: one record per run, rewritten atomically) and the
sweep lock on an experiment folder (``.lock``, an flock the kernel drops when its holder
dies), with the verdict on runs left ``running`` by a driver that died."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import tempfile
import time
from typing import Callable
from pathlib import Path

from pipeline.store.integrity import MANIFEST, parse_manifest
from pipeline.store.redact import redact_secrets


class StoreLocked(RuntimeError):
    pass


def read_manifest(path: str | os.PathLike) -> dict:
    """The folder's run records; ``integrity.DamagedManifest`` (a ``BadPartFile``: exit 4
    and the repair command) if the manifest does not parse."""
    return parse_manifest(Path(path) / MANIFEST)


def update_manifest(path: str | os.PathLike, run: dict, make_latest: bool = True) -> None:
    """Insert or replace this run's record (by run_id), atomically (temp file + rename, so a
    reader on another process or host sees the old or the new manifest, never half of one).
    Passwords in addresses (``tcp://user:password@host``) are redacted from every string first."""
    run = redact_secrets(run)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(path)
    runs = manifest.get("runs", [])
    where = [i for i, r in enumerate(runs) if r.get("run_id") == run["run_id"]]
    if where:  # in place: a record's position says when its run started
        runs[where[0]] = run
    else:
        runs.append(run)
    manifest["runs"] = runs
    if make_latest or "latest" not in manifest:
        manifest["latest"] = run["run_id"]
    _write_manifest(path, manifest)


def record_repair(path: str | os.PathLike, repair: dict) -> None:
    """Add a ``verify --repair`` that took tasks out of the store (parts set aside or
    forgotten) to the manifest's ``repairs``: `status` says so after the last run, whose
    record alone read as complete."""
    path = Path(path)
    manifest = read_manifest(path)
    manifest["repairs"] = [*manifest.get("repairs", []), redact_secrets(repair)][-20:]
    _write_manifest(path, manifest)


def _write_manifest(path: Path, manifest: dict) -> None:
    # A per-process temp name: the driver's heartbeat and `status` may write at once.
    tmp = path / f".{MANIFEST}.{os.getpid()}.tmp"  # left by a kill: clean_manifest_temp_files
    try:
        with open(tmp, "w") as fh:
            fh.write(json.dumps(manifest, indent=2, default=str))
            fh.flush()
            os.fsync(fh.fileno())  # as the parts: a node crash must not leave it empty
        os.replace(tmp, path / MANIFEST)
    except BaseException:  # a full disk: no half-written temp file left beside the manifest
        tmp.unlink(missing_ok=True)
        raise


# Space set aside for a sweep's last manifest record: the disk that stops a sweep (full, or
# over quota) would refuse that record too, and `status` then read the crash as "killed".
MANIFEST_RESERVE = ".manifest-reserve"
MANIFEST_RESERVE_MIN_BYTES = 1 << 20
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def reserve_manifest_space(path: str | os.PathLike) -> str | None:
    """Allocate ``MANIFEST_RESERVE`` in ``path``: twice the manifest's size and 64 KiB, at
    least 1 MiB, for :func:`update_manifest_even_if_full`. None when done, else why not:
    "full" (the disk cannot spare it) or "not allocated" (a filesystem that stores such a
    file without holding its space, e.g. ZFS compressing it away): the sweep goes on without,
    as before the reserve existed."""
    path = Path(path)
    try:
        manifest_bytes = (path / MANIFEST).stat().st_size
    except OSError:
        manifest_bytes = 0
    size = max(MANIFEST_RESERVE_MIN_BYTES, 2 * manifest_bytes + (64 << 10))
    reserve = path / MANIFEST_RESERVE
    try:
        fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:  # no fallocate: bytes that no compression folds away
                if exc.errno in _DISK_FULL_ERRNOS:
                    raise
                for _ in range(0, size, 1 << 16):
                    os.write(fd, os.urandom(1 << 16))
            os.fsync(fd)
            held = os.fstat(fd).st_blocks * 512 >= size
        finally:
            os.close(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            reserve.unlink()
        return "full" if exc.errno in _DISK_FULL_ERRNOS else "not allocated"
    if not held:
        with contextlib.suppress(OSError):
            reserve.unlink()
        return "not allocated"
    return None


def release_manifest_space(path: str | os.PathLike) -> bool:
    """Remove the reserve (the sweep ended); True if there was one to remove. Never raises:
    it runs as the sweep ends, also on a disk gone read-only or a folder gone."""
    try:
        (Path(path) / MANIFEST_RESERVE).unlink()
        return True
    except OSError:
        return False


def update_manifest_even_if_full(path: str | os.PathLike, run: dict) -> None:
    """:func:`update_manifest`; on a full disk or quota, again after giving the reserve's
    space back (the record that says how the sweep ended matters most). Copy-on-write and
    network filesystems (btrfs, ZFS, Lustre quotas) return freed space a moment later: a few
    tries over about two seconds, each after a sync."""
    try:
        update_manifest(path, run)
        return
    except OSError as exc:
        if exc.errno not in _DISK_FULL_ERRNOS or not release_manifest_space(path):
            raise
    for attempt in range(4):
        try:
            update_manifest(path, run)
            return
        except OSError as exc:
            if exc.errno not in _DISK_FULL_ERRNOS or attempt == 3:
                raise
            os.sync()
            time.sleep(0.5)


MANIFEST_TEMP_MAX_AGE_S = 60.0  # a live writer holds its temp file for well under a second


def clean_manifest_temp_files(path: str | os.PathLike, now: float | None = None) -> int:
    """Remove the manifest temp files (``._manifest.json.PID.tmp``) of writers killed while
    writing, older than ``MANIFEST_TEMP_MAX_AGE_S`` (a live writer's, e.g. `status` on another
    node of a filesystem whose flock is node-local, is never touched); returns how many.
    Each kill left one under its own pid, as large as the manifest, and none was ever removed."""
    now = time.time() if now is None else now
    removed = 0
    for tmp in Path(path).glob(f".{MANIFEST}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > MANIFEST_TEMP_MAX_AGE_S:
                tmp.unlink()
                removed += 1
        except FileNotFoundError:  # its writer renamed it meanwhile
            pass
    return removed


# flock refused by the filesystem itself (NFS without a lock daemon, some FUSE mounts)
NO_LOCKS_ERRNOS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


def why_not_locked(exc: OSError) -> tuple[str, bool]:
    """Why :class:`SweepLock` could not create or lock its folder (``exc``, not
    :class:`StoreLocked`), as advice for the user, and whether the folder is the user's to
    change (exit 2) rather than a fault of the moment such as a full disk (exit 3)."""
    if exc.errno in NO_LOCKS_ERRNOS:
        return ("its filesystem has no file locks (NFS without a lock daemon?), and sweeps, "
                "compactions and repairs of one folder must exclude each other: keep results "
                "on a filesystem that has them", True)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free space, then rerun", False
    if isinstance(exc, PermissionError) or exc.errno in _NOT_A_FOLDER_ERRNOS:
        return "results go to results_dir/NAME/; choose a folder you can write", True
    return "rerun once the filesystem answers again", False  # EIO, ESTALE: a fault of the moment


def not_writable_here(exc: OSError) -> bool:
    """An error writing into an existing folder that is the user's to change (a read-only
    mount, another user's folder: exit 2), not a fault of the moment (a full disk, a file
    that vanished, an I/O error: exit 3). Narrower than :func:`why_not_locked`, whose
    creation errors (ENOENT, EEXIST...) mean a bad path only before anything is made."""
    return isinstance(exc, PermissionError) or exc.errno == errno.EROFS


# a path that cannot be a writable folder (a read-only mount, a dangling or looping symbolic
# link, a file on the way, /proc): the user's to change, not a fault of the moment
_NOT_A_FOLDER_ERRNOS = (errno.EROFS, errno.EEXIST, errno.ELOOP, errno.ENOTDIR, errno.ENOENT,
                        errno.ENAMETOOLONG, errno.EISDIR, errno.EINVAL)


def refuse_if_no_locks(path: Path) -> None:
    """Raise the filesystem's own OSError (ENOLCK...) if it refuses ``flock`` where ``path``
    is or would be made, before anything is created there: probed on a hidden temporary file
    (unnamed where the filesystem allows) in the nearest folder that exists."""
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        probe = tempfile.TemporaryFile(prefix=".lock-probe-", dir=folder)
    except OSError:
        return  # not writable: the mkdir or open that follows says so in its own words
    with probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in NO_LOCKS_ERRNOS:
                raise


def flock_within(fh, wait_s: float, on_wait: Callable[[], None] | None = None,
                 poll_s: float = 0.05) -> bool:
    """Take an exclusive ``flock`` on the open file ``fh``, waiting at most ``wait_s`` for its
    holder (``on_wait`` is called once if it waits); False if it is still held then."""
    deadline = time.monotonic() + wait_s
    announced = False
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            if not announced and on_wait is not None:
                on_wait()
                announced = True
            time.sleep(poll_s)


class FolderMoved(RuntimeError):
    """A locked results folder was moved or removed while a sweep wrote to it."""


class SweepLock:
    """An exclusive lock on an experiment folder; the kernel drops it if the driver dies.

    The lock file says who holds it (host, pid, start time, run id) so that the "another sweep
    is writing" error can name the holder."""

    def __init__(self, path: str | os.PathLike, run_id: str | None = None, wait_s: float = 0.0,
                 on_wait: Callable[[], None] | None = None, holder: str = "sweep"):
        """``wait_s``: how long a lock held by someone else is waited for before
        :class:`StoreLocked` (``status`` holds it for milliseconds while it records a dead
        run; a sweep starting then was refused). ``on_wait``: called once if it waits.
        ``holder``: what holds it (sweep, compaction, repair, status), for the error that
        names the holder (a compaction's lock was reported as "another sweep")."""
        self.path = Path(path)
        self.run_id = run_id
        self.holder = holder
        self.wait_s = wait_s
        self.on_wait = on_wait
        self.fh = None
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the held lock file

    def __enter__(self) -> "SweepLock":
        refuse_if_no_locks(self.path)  # before anything is made
        self.path.mkdir(parents=True, exist_ok=True)
        # "a+", not "w": opening must not truncate the holder's record before flock decides.
        self.fh = open(self.path / ".lock", "a+")
        try:
            got = flock_within(self.fh, self.wait_s, self.on_wait)
        except BaseException:  # Ctrl-C while waiting: the file is not left open
            self.fh.close()
            self.fh = None
            raise
        if not got:
            self.fh.seek(0)
            who, holder = _describe_holder(self.fh.read())
            self.fh.close()
            self.fh = None
            raise StoreLocked(f"{who} is writing to {self.path}{holder} "
                              f"(lock {self.path / '.lock'})")
        try:
            self.fh.seek(0)
            self.fh.truncate()
            self.fh.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                      "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
                                      "run_id": self.run_id, "holder": self.holder}) + "\n")
            self.fh.flush()
        except OSError:  # a full disk: the lock is of no use without its holder's record
            self.__exit__()
            raise
        held = os.fstat(self.fh.fileno())
        self.identity = (held.st_dev, held.st_ino)  # the file this lock holds (check_in_place)
        return self

    def check_in_place(self) -> None:
        """Raise :class:`FolderMoved` if ``path/.lock`` is no longer the file this lock holds:
        the folder was moved, renamed or removed while held (or its lock file deleted).
        Writing on at ``path`` would recreate it and split the results in two."""
        held, fh = self.identity, self.fh  # read once: the part writer's thread calls this
        if held is None:
            return
        try:
            here = os.stat(self.path / ".lock")
            if (here.st_dev, here.st_ino) == held:
                return
        except FileNotFoundError:
            pass
        except OSError as exc:  # ESTALE (removed on the NFS server), EACCES...
            raise FolderMoved(f"the results folder {self.path} can no longer be reached "
                              f"({exc.strerror or exc}); the sweep stopped writing") from None
        try:  # Linux: where the open lock file is now
            now = os.readlink(f"/proc/self/fd/{fh.fileno()}")
        except (OSError, ValueError, AttributeError):  # not Linux, or the lock let go meanwhile
            now = None
        gone = now is None or now.endswith(" (deleted)")
        if gone and self.path.is_dir():
            raise FolderMoved(f"the lock file {self.path / '.lock'} was deleted while the sweep "
                              "ran (by a temp-file cleaner?), or the folder replaced: another "
                              "sweep could write to it at once; the sweep stopped writing. "
                              "Rerun the same command to resume")
        if gone:
            raise FolderMoved(f"the results folder {self.path} was "
                              f"{'removed' if now else 'moved or removed'} while the sweep ran "
                              "(a move to another filesystem reads as removed); the sweep "
                              "stopped writing")
        if Path(now) == (self.path / ".lock").resolve():  # another folder put in its place
            raise FolderMoved(f"the results folder {self.path} was replaced while the sweep "
                              "ran; the sweep stopped writing")
        moved = Path(now).parent
        advice = (f"to resume there, rerun the same command with results_dir={moved.parent}"
                  if moved.name == self.path.name else
                  f"to resume there, rename it back to {self.path.name} (the experiment's "
                  f"name) and rerun the same command with results_dir={moved.parent}")
        raise FolderMoved(f"the results folder {self.path} was moved to {moved} while the sweep "
                          f"ran; the sweep stopped writing ({advice})")

    def __exit__(self, *exc) -> None:
        self.identity = None
        if self.fh:
            fh, self.fh = self.fh, None
            fcntl.flock(fh, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):  # its buffer cannot be written on a full disk
                fh.close()


_HOLDERS = {"sweep": "another sweep", "compaction": "a compaction (python -m pipeline compact)",
            "repair": "a repair (python -m pipeline verify --repair)",
            "status": "python -m pipeline status, recording a dead run,"}


def _describe_holder(text: str) -> tuple[str, str]:
    """Who holds a lock (from its file's record) and the details: host, pid, since, run."""
    try:
        info = json.loads(text)
    except ValueError:
        return "another sweep or command", ""
    if not isinstance(info, dict):
        return "another sweep or command", ""
    # (a record written before the holder was: a sweep's has a run id, the commands' none)
    who = _HOLDERS.get(info.get("holder") or ("sweep" if info.get("run_id") else ""),
                       "another command (a compaction or repair?)")
    parts = [f"{k} {info[k]}" for k in ("host", "pid") if info.get(k) is not None]
    if info.get("started_at"):
        parts.append(f"since {info['started_at']}")
    if info.get("run_id"):
        parts.append(f"run {info['run_id']}")
    return who, f" ({', '.join(parts)})" if parts else ""


def command_holding(path: str | os.PathLike, recorded=frozenset) -> str | None:
    """Who holds the folder's lock now, when its run records do not say so: a compaction or
    a repair ("a compaction (python -m pipeline compact) (host h, pid 7, since ...)"), or a
    sweep whose run id is not among ``recorded()`` yet (it is planning: reading the stored
    rows, which on a large store takes a while). None if no one holds it, or a recorded sweep
    does. ``recorded`` is called after the lock is found held: run ids read before could miss
    a sweep that recorded its run meanwhile, and call it planning. A lock taken and dropped at
    once to find out: a sweep starting meanwhile waits for it (``flock_within``)."""
    lock = Path(path) / ".lock"
    try:
        fh = open(lock)
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # held
            text = fh.read()
            who, details = _describe_holder(text)
            if who != _HOLDERS["sweep"]:
                return who + details
            try:
                run_id = json.loads(text).get("run_id")
            except (ValueError, AttributeError):
                return None
            if run_id in recorded():
                return None
            return (f"a sweep{details}, still planning (reading the stored rows: on a large "
                    "store, a while; its run is recorded when tasks start),")
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


STALE_HEARTBEAT_S = 600.0  # a live driver rewrites its record every few seconds


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def dead_run_state(run: dict, now: float | None = None, lock_held: bool = False,
                   lock_free_here: bool = False) -> str | None:
    """``"killed"`` or ``"stale"`` if this ``running`` record's driver is gone, else None.

    ``lock_held``: the caller holds the folder's lock, so no other driver is alive ("killed").
    ``lock_free_here``: the caller got the lock, which no driver of this host can then hold, so
    a record of this host is "killed" even if its pid lives (reused by another process after
    a kill -9 or a reboot: it read 'running' for ever). Other hosts' records keep the
    heartbeat rule (an flock may be local to each node on a cluster filesystem).
    Otherwise, on this host a record whose pid no longer exists is "killed"; on another host a
    record whose heartbeat (``heartbeat_at``, else ``started_at``) is older than
    ``STALE_HEARTBEAT_S`` is "stale"."""
    if run.get("status") != "running":
        return None
    if lock_held:
        return "killed"
    if run.get("host") == socket.gethostname() and run.get("pid"):
        if lock_free_here:
            return "killed"
        # on this host the pid decides (a live driver may be silent a while, e.g. waiting for
        # its first batch jobs)
        return None if pid_alive(int(run["pid"])) else "killed"
    beat = run.get("heartbeat_at") or run.get("started_at")
    try:
        age = (time.time() if now is None else now) - _parse_utc(beat)
    except (TypeError, ValueError):
        return None
    return "stale" if age > STALE_HEARTBEAT_S else None


def live_runs(manifest: dict) -> list[dict]:
    """The run records of ``manifest`` said ``running`` whose driver is alive as far as
    :func:`dead_run_state` can tell: the sweeps writing the folder now."""
    return [r for r in manifest.get("runs", [])
            if r.get("status") == "running" and dead_run_state(r) is None]


def sweeps_writing(path: str | os.PathLike) -> list[dict]:
    """The run records of the sweeps writing ``path`` now; [] also where the manifest cannot
    be read or is damaged (left to the commands that need it: a note's caller goes on)."""
    from pipeline.store.integrity import BadPartFile

    try:
        return live_runs(read_manifest(path))
    except (BadPartFile, OSError):
        return []


def nothing_stored_yet(path: str | os.PathLike) -> str | None:
    """Why a folder with no results has none, when a sweep is writing it: the driver keeps
    finished rows in memory until its first flush. None when no sweep writes it (or its run
    records cannot be read: the caller's own message stands)."""
    runs = sweeps_writing(path)
    if not runs:
        return None
    run = runs[-1]
    if not (run.get("pid") and run.get("host") and run.get("started_at")):
        return None  # a record that cannot say whose sweep: the caller's own message stands
    return (f"a sweep is writing it now (run {run.get('run_id')}, pid {run.get('pid')} on "
            f"{run.get('host')}, since {run.get('started_at')}) and has stored nothing yet: "
            "finished rows are written every flush_seconds (60 s by default) or flush_rows "
            f"once its tasks finish; try again then (python -m pipeline status {path} shows "
            "its progress)")


def _parse_utc(stamp: str) -> float:
    import calendar

    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def mark_dead_runs(path: str | os.PathLike, lock_held: bool = False,
                   lock_free_here: bool = False) -> list[dict]:
    """Mark run records left ``running`` by a dead driver (see :func:`dead_run_state`) and
    return them. Called by the next sweep (holding the lock) and by ``status``."""
    path = Path(path)
    changed = []
    for run in read_manifest(path).get("runs", []):
        state = dead_run_state(run, lock_held=lock_held, lock_free_here=lock_free_here)
        if state:
            run.update(status=state, error=run.get("error") or
                       f"the driver (host {run.get('host')}, pid {run.get('pid')}) stopped "
                       f"without recording an end; last heartbeat "
                       f"{run.get('heartbeat_at') or run.get('started_at')}")
            changed.append(run)
    for run in changed:
        update_manifest(path, run, make_latest=False)
    return changed
