"""A batch's grid indices, in the two forms the engine passes around: a ``range`` when they
are consecutive (a few bytes in flight and on the wire, whatever the batch size; the common
case), an int64 array otherwise (points returned by a stopped batch, a resume's gaps)."""

from __future__ import annotations

import numpy as np


def compact_chunk(chunk: np.ndarray):
    """A run of consecutive indices as a ``range``, anything else as it is."""
    if chunk.size > 1 and int(chunk[-1]) - int(chunk[0]) + 1 == chunk.size:
        return range(int(chunk[0]), int(chunk[-1]) + 1)
    return chunk


def as_indices(chunk) -> np.ndarray:
    """The inverse: a batch's grid indices as an int64 array; a ``range`` without a Python
    loop (``np.asarray`` iterates a range element by element)."""
    if isinstance(chunk, range):
        return np.arange(chunk.start, chunk.stop, chunk.step, dtype=np.int64)
    return np.asarray(chunk, dtype=np.int64)


def holds(chunk, index: int) -> bool:
    """Whether grid index ``index`` is in the batch ``chunk`` (a range: without a loop)."""
    if isinstance(chunk, range):
        return index in chunk
    return bool(np.any(np.asarray(chunk) == index))
