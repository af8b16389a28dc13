"""Folders written whole or not at all (a data package, a report): built beside their target
under a hidden staging name, then swapped in by renames. A build cut short (a full disk,
Ctrl-C, kill -9) leaves the earlier folder as it was; what a killed build left is tidied, or
put back, by the next one.

Staging names are ``.NAME<mark>PID-RANDOM-HOST`` (``mark``: ``.exporting-``, ``.building-``, or
``.replaced-`` for an earlier folder moved aside): the owner's pid and host say whether a
leftover is stale (a pid means nothing on another node of a shared home)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import socket
from pathlib import Path
from typing import Callable, TypeVar

STAGING_MARKS = (".exporting-", ".building-", ".replaced-")

T = TypeVar("T")


def staging_name(target: Path, mark: str) -> Path:
    """A fresh hidden name beside ``target`` (see the module docstring)."""
    return target.parent / (f".{target.name}{mark}{os.getpid()}-{secrets.token_hex(4)}-"
                            f"{socket.gethostname()}")


def remove_stale_staging(target: Path) -> None:
    """Tidy what builds killed on this host left beside ``target`` (their pid is gone): a
    half-built folder is removed; an earlier folder moved aside is put back if nothing took
    its place (killed between the two renames of the swap), else removed."""
    from pipeline.store.manifest import pid_alive

    host = socket.gethostname()
    for path in target.parent.glob(f".{target.name}.*-*-*"):
        rest = path.name[len(target.name) + 1:]
        mark = next((m for m in STAGING_MARKS if rest.startswith(m)), None)
        pid, _, owner = rest[len(mark):].partition("-") if mark else ("", "", "")
        owner_host = owner.partition("-")[2]
        if not pid.isdigit() or owner_host != host or pid_alive(int(pid)):
            continue
        if mark == ".replaced-" and not target.exists():
            with contextlib.suppress(OSError):
                path.rename(target)
                continue
        shutil.rmtree(path, ignore_errors=True)


def swap_into_place(staging: Path, target: Path, attempts: int = 5) -> None:
    """Rename ``staging`` to ``target``; an earlier folder there is moved aside first and
    removed once the new one is in place, or put back if the swap fails (a Ctrl-C, a refused
    rename). Another build swapping at the same moment: the last one in wins whole."""
    for _ in range(attempts):
        old = None
        if target.exists():
            old = staging_name(target, ".replaced-")
            try:
                target.rename(old)
            except FileNotFoundError:  # another build moved it first
                old = None
        try:
            staging.rename(target)
        except BaseException as exc:
            if old is not None and not target.exists():
                with contextlib.suppress(OSError):  # the earlier folder goes back
                    old.rename(target)
                    old = None
            if not (isinstance(exc, OSError) and exc.errno in (errno.ENOTEMPTY, errno.EEXIST)):
                raise
            # another build put its folder there meanwhile: ours replaces it on the next try
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            continue
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(errno.EBUSY, f"could not put {target} in place: other builds keep "
                               "replacing it")


def build_whole(target: Path, build: Callable[[Path], T], mark: str = ".building-") -> T:
    """``build(staging)`` writes the new folder; it is then swapped in for ``target``. On any
    failure the staging folder is removed and ``target`` is left as it was. Returns what
    ``build`` returned."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target)
    staging = staging_name(target, mark)
    try:
        result = build(staging)
        swap_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result
