"""The 64-bit id prefixes of many grid points at once, as the store indexes them.

One ``task_id(i)`` at a time decodes the index, joins every parameter into its canonical
string and formats a hex id, all in Python per point. :func:`point_prefixes` builds a chunk's
canonical strings column by column (:meth:`~pipeline.engine.grid.Grid.batch_canonical`, as a
batch hashes the ids it stores) and cuts the prefixes from the digests in numpy: 2-3x
faster (``benchmarks/bench_coverage.py``, ``benchmarks/bench_resume_plan.py``), with memory
bounded by one chunk's strings beside the answer.
"""

from __future__ import annotations

import numpy as np

from pipeline.engine.task_ids import digests_of

PREFIX_CHUNK = 65_536  # points whose canonical strings are held at once


def point_prefixes(grid, indices=None) -> np.ndarray:
    """The id prefixes (``int(task_id[:16], 16)``, uint64) of the points ``indices`` of
    ``grid``, in the order given; of every point, in index order, when ``indices`` is None
    (8 bytes a point, the indices made a chunk at a time)."""
    if indices is None:
        out = np.empty(grid.total, dtype=np.uint64)
        for start in range(0, grid.total, PREFIX_CHUNK):
            stop = min(grid.total, start + PREFIX_CHUNK)
            out[start:stop] = _chunk_prefixes(grid, np.arange(start, stop, dtype=np.int64))
        return out
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    out = np.empty(idx.size, dtype=np.uint64)
    for start in range(0, idx.size, PREFIX_CHUNK):
        chunk = idx[start:start + PREFIX_CHUNK]
        out[start:start + chunk.size] = _chunk_prefixes(grid, chunk)
    return out


def _chunk_prefixes(grid, indices: np.ndarray) -> np.ndarray:
    """The leading 8 bytes of each point's sha256, big-endian."""
    if not indices.size:
        return np.zeros(0, dtype=np.uint64)
    _, strings = grid.batch_canonical(indices)
    digests = np.frombuffer(b"".join(digests_of(strings(0, indices.size))), dtype=np.uint8)
    head = np.ascontiguousarray(digests.reshape(indices.size, -1)[:, :8])
    return head.view(">u8").ravel().astype(np.uint64)
