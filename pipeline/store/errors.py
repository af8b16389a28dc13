"""The errors of a result folder's files, raised by every reader (``load``, resume, ``status``,
``report``, ``export``, ``compact``) and mapped to exit 4, and the run manifest's parser.
Re-exported by :mod:`pipeline.store.integrity`, where callers import them.

A file this user may not open (its permissions) is not a damaged one: :class:`UnreadablePartFile`
and :class:`UnreadableManifest` say so, and ``verify --repair`` leaves them where they are."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.store.part_index import PART_INDEX, missing_parts_text

QUARANTINE = "_quarantine"
MANIFEST = "_manifest.json"  # the run records (pipeline.store.manifest writes it)


class SelectionError(ValueError):
    """A bad selection key or value (exit code 2): a version, run id or status that selects
    nothing. Defined here, where the store's own ``load`` refuses an absent version, and
    re-exported by :mod:`pipeline.report.selection`, where the other selections are checked."""


class BadPartFile(RuntimeError):
    """A part file that cannot be read; the message names it and the repair command."""

    problem = "is unreadable"

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = Path(path)
        self.reason = reason
        folder = self.path.parent
        super().__init__(
            f"part file {self.path} {self.problem} ({reason}).\n"
            f"Check the folder with: python -m pipeline verify {folder}\n"
            f"Move bad files to {folder / QUARANTINE}/ with: python -m pipeline verify {folder} "
            f"--repair\nthen rerun the sweep to recompute their tasks")

    @property
    def remedy(self) -> str:
        """What to do, in a line (``status`` prints it after the problem)."""
        return f"python -m pipeline verify {self.path.parent} --repair moves it aside"


PERMISSION_DENIED = "Permission denied"
NOT_DAMAGED = ("a file permission problem, not damage: let this user read it (chmod/chown, or "
               "run as its owner), then run the command again; verify --repair leaves it as it is")


class _NotDamaged:
    """A file this user may not open (its permissions): the message and remedy of
    :class:`UnreadablePartFile` and :class:`UnreadableManifest`."""

    problem = "cannot be read"
    label = "file"

    def __init__(self, path: str | os.PathLike, reason: str = PERMISSION_DENIED):
        self.path, self.reason = Path(path), reason
        RuntimeError.__init__(self, f"{self.label} {self.path} {self.problem} ({reason}): "
                              f"{NOT_DAMAGED}")

    @property
    def remedy(self) -> str:
        return NOT_DAMAGED


class UnreadablePartFile(_NotDamaged, BadPartFile):
    """A part file this user may not open: its permissions (a folder copied from another
    user, a chmod), not damage. Exit 4 like a damaged part, but ``verify --repair`` never
    moves it aside nor forgets it (it moved a good file to ``_quarantine/``, and a resume
    recomputed its tasks): its permissions are the fix."""

    label = "part file"


def part_error(path: str | os.PathLike, exc: BaseException) -> BadPartFile:
    """The error of part ``path`` that raised ``exc`` when opened or decoded."""
    if isinstance(exc, PermissionError):
        return UnreadablePartFile(path)
    return BadPartFile(path, _reason(exc))


class DamagedManifest(BadPartFile):
    """A run manifest that does not parse (a node crash mid-write on a filesystem that lost
    the temp file's data, an edit by hand). The results do not depend on it: every part and
    its checksum stay. Raised like a bad part, so every command stops with exit 4 and the
    repair command, instead of a JSONDecodeError traceback."""

    problem = "is damaged"

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = Path(path)
        self.reason = reason
        folder = self.path.parent
        RuntimeError.__init__(
            self,
            f"the run manifest {self.path} {self.problem} ({reason}); the results in the part "
            f"files are not affected.\nCheck the folder with: python -m pipeline verify "
            f"{folder}\nMove it to {folder / QUARANTINE}/ with: python -m pipeline verify "
            f"{folder} --repair\n(the records of earlier runs go with it; the next sweep "
            "starts a new one and resumes as before)")


class UnreadableManifest(_NotDamaged, DamagedManifest):
    """A run manifest this user may not open (its permissions): not damaged, so ``verify
    --repair`` leaves it where it is."""

    label = "the run manifest"


def parse_manifest(file: Path) -> dict:
    """The manifest in ``file`` ({"runs": []} if there is none); :class:`DamagedManifest` if
    it does not parse as one."""
    try:
        text = file.read_text()
    except FileNotFoundError:
        return {"runs": []}
    except PermissionError:  # a folder copied from another user: not damaged
        raise UnreadableManifest(file) from None
    except OSError as exc:  # EIO
        raise DamagedManifest(file, f"cannot be read: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DamagedManifest(file, f"not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("runs", []), list):
        raise DamagedManifest(file, "not a run manifest: no list of runs")
    return manifest


class ForeignPartFile(BadPartFile):
    """A ``part-*.parquet`` file that is not a result part of the folder's experiment (another
    schema, another experiment): what ``verify`` lists as foreign. Readers refuse it rather
    than mix its rows in; ``verify --repair`` moves it aside like a damaged one."""

    problem = "is not a result part of this folder's experiment"


class MissingPartFile(BadPartFile):
    """Part files recorded in the index that are no longer on disk, outside any compaction:
    deleted or moved by hand, or lost by the filesystem. Their rows are gone from the table,
    which read as a smaller, complete-looking one."""

    problem = "is missing"

    def __init__(self, folder: str | os.PathLike, missing: dict[str, int]):
        self.missing = dict(missing)
        self.path = Path(folder) / sorted(missing)[0]
        self.reason = (f"recorded in {PART_INDEX} with {missing[sorted(missing)[0]]:,} rows, "
                       "not on disk")
        RuntimeError.__init__(self, missing_parts_text(folder, missing))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"
