"""``calibration``: a synthetic workload for measuring and testing the engine itself.

Each point busy-waits ``work_us`` microseconds (a stand-in kernel of known cost), takes one
uniform number from the task seed (``draw``: the seed's leading 53 bits, so the harness adds no
RNG set-up cost to the kernel), and optionally fails (``fail_every``), kills its worker (``crash_at``), hangs (``hang_at``) or
emits several rows (``rows``). Use it to calibrate a cluster (``python run.py experiment=calibration``) and in the
engine's tests and benchmarks; it carries no science.

``work_mode=sleep`` waits with ``time.sleep`` instead of spinning: sleep releases the GIL, so a few
worker processes with hundreds of threads each behave like hundreds of busy cores. That is how
to rehearse a cluster-sized sweep (scheduler load, batch sizing, part files) on a small machine.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa

from pipeline.experiments.base import Choice, Experiment, Interval, Param, register


def spin(seconds: float) -> None:
    """Busy-wait (not sleep), so the cost is CPU work like a real kernel's."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run(p: dict, seed: int) -> list[dict]:
    x = p["x"]  # each lookup is read once: this is the harness's stand-in kernel, kept lean
    if x == p["crash_at"]:
        os._exit(70)  # the whole worker process dies, as on a segfault or the OOM killer
    if x == p["hang_at"]:
        while True:  # a point that never returns (a deadlock, a solver that never converges)
            time.sleep(3600)
    work_us = p["work_us"]
    if work_us > 0:
        if p["work_mode"] == "sleep":
            time.sleep(work_us * 1e-6)  # releases the GIL: threads wait in parallel
        else:
            spin(work_us * 1e-6)
    fail_every = p["fail_every"]
    if fail_every and x % fail_every == 0:
        raise ValueError(f"calibration failure requested at x={x}")
    draw = (seed >> 10) * 2.0**-53
    rows = p["rows"]
    if rows == 1:  # the common case
        return {"value": x * p["scale"], "draw": draw, "label": f"x{x}-r0"}
    scale = p["scale"]
    return [{"value": x * scale + r, "draw": draw, "label": f"x{x}-r{r}"} for r in range(rows)]


EXPERIMENT = register(Experiment(
    name="calibration",
    version=2,  # 2: hang_at added; every parameter is part of the task id, so ids changed
    doc=__doc__,
    stochastic=True,
    params=[
        Param("x", int, 0, Interval(0, None), "point label; the usual sweep axis"),
        Param("work_us", float, 10.0, Interval(0, 60e6), "busy-wait per point, microseconds"),
        Param("work_mode", str, "spin", Choice("spin", "sleep"),
              "spin: busy-wait (CPU work); sleep: time.sleep (no CPU, releases the GIL)"),
        Param("scale", float, 1.0, None, "value = x * scale + row"),
        Param("rows", int, 1, Interval(1, 1000), "rows emitted per point"),
        Param("fail_every", int, 0, Interval(0, None),
              "raise at points where x % fail_every == 0 (0: never)"),
        Param("crash_at", int, -1, Interval(-1, None),
              "kill the worker process at the point x == crash_at (-1: never)"),
        Param("hang_at", int, -1, Interval(-1, None),
              "the point x == hang_at sleeps forever (-1: never); for testing task_timeout"),
    ],
    columns={"value": pa.float64(), "draw": pa.float64(), "label": pa.string()},
    run=run,
))


from pipeline.experiments.base import document  # noqa: E402

document(EXPERIMENT, {
    "x": ("", "1"), "work_us": ("", "us"), "work_mode": ("", None), "scale": ("", "1"),
    "rows": ("", "1"), "fail_every": ("", "1"), "crash_at": ("", "1"), "hang_at": ("", "1"),
    "value": ("x * scale + row: a known answer to check the harness by", "1"),
    "draw": ("uniform number in [0, 1) from the task seed (its leading 53 bits)", "1"),
    "label": ("x<x>-r<row>: identifies the row", None),
})
