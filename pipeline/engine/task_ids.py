"""Task ids and seeds. A task id is the first 96 bits (hex) of the sha256 of a point's canonical
parameter string (``Grid.canonical``), and its seed the leading 63 bits of the same digest: both
are the same on any worker, in any run, in any order."""

from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np

TASK_ID_BYTES = 12  # a task id is the first 96 bits of the sha256 of its canonical string


def digests_of(canonicals: Iterable[str]) -> list[bytes]:
    """The sha256 digests the tasks' ids and seeds are cut from, a list at a time (a worker
    hashes a strip of points in one call)."""
    sha256 = hashlib.sha256
    return [sha256(text.encode()).digest() for text in canonicals]


def seeds_of_digests(digests: Iterable[bytes]) -> list[int]:
    """``seed_of(task id)`` of each digest, from the digest itself: its leading 63 bits."""
    from_bytes = int.from_bytes
    return [from_bytes(d, "big") >> 193 for d in digests]  # the leading 63 of 256 bits


def seeds_of_ids(ids: bytes) -> np.ndarray:
    """The seeds of a batch's id bytes (``TASK_ID_BYTES`` a point, as the worker sends them):
    the leading 63 bits, as :func:`seeds_of_digests` cuts them from whole digests, in numpy."""
    rows = np.frombuffer(ids, dtype=np.uint8).reshape(-1, TASK_ID_BYTES)
    return (np.ascontiguousarray(rows[:, :8]).view(">u8").ravel() >> np.uint64(1)).astype(np.int64)


def task_id_of_digest(digest: bytes) -> str:
    """The task id (hex) in a digest: its first ``TASK_ID_BYTES`` bytes."""
    return digest[:TASK_ID_BYTES].hex()


def task_id_of(canonical: str) -> str:
    """Stable 96-bit task id (hex) of a canonical parameter string."""
    return task_id_of_digest(digests_of([canonical])[0])


def seed_of(task_id: str) -> int:
    """The 63-bit seed of a task: the leading 63 bits of its id (itself a sha256 of the
    canonical parameters), so it is the same on any worker, in any run, in any order."""
    return int(task_id[:16], 16) >> 1
