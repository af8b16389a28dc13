"""Shutdown paths of the driver (review c): signals at awkward moments, the part writer under
a slow or failing disk, bounded waits. Real signals, real part files."""

import os
import signal
import threading

import pandas as pd
import pytest

import pipeline.store.parquet as parquet
from pipeline.engine.batch import run_batch
from pipeline.engine.grid import Grid
from pipeline.engine.watchdog import Terminated, termination_signals
from pipeline.experiments.base import get_experiment
from pipeline.store.parquet import PartWriter


def _grid(n):
    return Grid(get_experiment("calibration"), {"x": {"range": [0, n]}}, {"work_us": 0.0})


@pytest.mark.timeout(60)
def test_a_signal_while_the_writer_queue_is_full_loses_no_buffer(tmp_path, monkeypatch):
    """With two buffers queued for a slow disk, handing off a third waits in queue.put. A
    SIGTERM (or Ctrl-C) there dropped that buffer: it had already left the writer's buffer, was
    never queued, and close() then wrote the others and reported every row flushed."""
    grid = _grid(40)
    disk = threading.Event()
    real = parquet.write_part_file

    def slow_disk(*args, **kwargs):
        disk.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(parquet, "write_part_file", slow_disk)
    writer = PartWriter(tmp_path, "r", flush_rows=10)
    for start in range(0, 30, 10):  # one part being written, two queued
        writer.write(run_batch(grid, range(start, start + 10))[0])
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    with termination_signals():
        timer.start()
        with pytest.raises(Terminated):
            writer.write(run_batch(grid, range(30, 40))[0])  # the fourth waits for the queue
    timer.join()
    disk.set()
    writer.close()
    df = pd.read_parquet(tmp_path)
    assert sorted(df.x) == list(range(40)) and df.task_id.is_unique
    assert writer.rows == 40 and writer.buffered_rows == 0
