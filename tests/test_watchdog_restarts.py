"""The watchdog's LocalCluster restarts (pipeline/engine/watchdog.py): counted in a row until a
batch returns its points, not until workers join again (a restart's workers always join: the
count never passed 1, the log said "attempt 1 of 3" at every restart and the sweep never gave
up); and the worker set read in place, shared with other_code.py.

Real parts: LocalClusters and tasks that never return; only the watchdog's clock is the test's.
"""

import logging
import time

import pytest

from dask_processes import wait_for



@pytest.mark.timeout(240)
def test_restarts_count_in_a_row_until_a_task_finishes_not_until_workers_join(caplog):
    """On the real Watchdog and a real LocalCluster (the clock alone is the test's, so the
    30 s start grace and the timeouts pass at once): a worker joining after a restart leaves
    the count alone, a task finishing starts it again, and the third restart in a row without
    one is the last: the next no-progress limit ends the sweep."""
    import dask
    from distributed import Client, LocalCluster

    from pipeline.engine.hung_points import Stuck
    from pipeline.engine.watchdog import LOCAL_RESTARTS, NoProgress, Watchdog

    assert LOCAL_RESTARTS == 3
    now = [0.0]
    caplog.set_level(logging.WARNING, logger="pipeline")
    # a restart kills the worker running the stuck task: it stays queued (not KilledWorker)
    with dask.config.set({"distributed.scheduler.allowed-failures": 100}), \
            LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=":0",
                         silence_logs=50) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        dog = Watchdog(client, no_workers_timeout=None, no_progress_timeout=5.0,
                       clock=lambda: now[0])
        stuck = client.submit(time.sleep, 3600, pure=False)
        dog.check()

        def restart_at(t: float) -> None:
            before = set(cluster.scheduler.workers)
            now[0] = t
            dog.check()  # no task finished for > 5 s, and the start grace is over: restart
            wait_for(lambda: cluster.scheduler.workers
                     and not set(cluster.scheduler.workers) & before, 60,
                     "the restarted worker to join")
            now[0] = t + 1
            dog.check()  # the worker joined

        restart_at(6.0)
        assert dog.restarts == 1  # (was 0 here: the worker joining had reset it)
        quick = client.submit(time.sleep, 1.5, pure=False)
        dog.check()  # seen queued
        quick.result(timeout=60)
        now[0] = 8.0
        dog.check()  # a task finished: the restarts start from 0 again
        assert dog.restarts == 0

        for attempt, t in enumerate((40.0, 80.0, 120.0), 1):
            restart_at(t)
            assert dog.restarts == attempt
        # a hung point stored failed (HungPoints.fail_stuck) is progress: the restart after
        # it is the first again, so hung points one after another do not end the sweep
        dog.on_stuck = lambda limit_s: Stuck({"tcp://127.0.0.1:1"}, None)  # their workers
        restart_at(160.0)
        assert dog.restarts == 1
        dog.on_stuck = lambda limit_s: Stuck(set(), None)  # nothing stored: it counts on
        restart_at(200.0)
        restart_at(240.0)
        assert dog.restarts == 3
        now[0] = 280.0
        with pytest.raises(NoProgress, match=r"no task finished for \d+ s .*; 3 worker "
                                             r"restart\(s\) did not help"):
            dog.check()
        del stuck

    said = [r.getMessage() for r in caplog.records if "restarting the LocalCluster" in r.message]
    assert [m[m.index("(attempt"):] for m in said] == [
        "(attempt 1 of 3)", "(attempt 1 of 3)", "(attempt 2 of 3)", "(attempt 3 of 3)",
        "(attempt 1 of 3)", "(attempt 2 of 3)", "(attempt 3 of 3)"]


@pytest.mark.timeout(120)
def test_the_worker_set_read_in_place_by_the_watchdog_and_other_code():
    from distributed import Client, LocalCluster

    from pipeline.engine.other_code import OtherCodeWorkers
    from pipeline.engine.scheduler_workers import embedded_scheduler, workers_in_place
    from pipeline.engine.watchdog import Watchdog

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=50) as cluster:
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=60)
            assert embedded_scheduler(client) is cluster.scheduler
            expected = set(cluster.scheduler.workers)
            assert len(expected) == 2 and workers_in_place(cluster.scheduler) == expected
            assert Watchdog(client)._current_workers() == expected
            assert OtherCodeWorkers(client, None, "code")._current() == expected
        with Client(cluster.scheduler_address) as remote:  # no scheduler in this process
            assert embedded_scheduler(remote) is None
            assert Watchdog(remote)._current_workers() == expected  # asked, with a bound

    class Changing:  # a worker joins or leaves while the set is read
        reads = 0

        @property
        def workers(self):
            Changing.reads += 1
            raise RuntimeError("dictionary changed size during iteration")

    assert workers_in_place(Changing()) is None and Changing.reads == 1
    assert workers_in_place(Changing(), tries=3) is None and Changing.reads == 4
    assert workers_in_place(None) is None


def test_no_workers_left_is_said_once_on_the_terminal_then_in_the_run_log(caplog):
    """A point that kills its worker empties a one-worker cluster at each attempt, a restart
    a second apart: the terminal got "no Dask workers left" each time. Once now; the repeats
    within NO_WORKERS_REPEAT_S go to the run log (pipeline.runlog, which never reaches the
    terminal), and one after that quiet spell, or after NO_WORKERS_BACK_S with workers, is
    said again."""
    from pipeline.engine.progress import runlog
    from pipeline.engine.watchdog import NO_WORKERS_BACK_S, NO_WORKERS_REPEAT_S, Watchdog

    now = [0.0]
    dog = Watchdog(None, clock=lambda: now[0])
    said = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append((record.name, record.getMessage()))

    keep = Keep()
    logging.getLogger("pipeline").addHandler(keep)
    runlog.addHandler(keep)
    try:
        for back, gone in ((1.0, 1.5), (2.0, 2.5), (3.0, 3.5), (4.0, 4.0 + NO_WORKERS_BACK_S),
                           (200.0, 200.5 + NO_WORKERS_REPEAT_S)):
            now[0] = back
            dog._log_membership({"tcp://w:1"})
            now[0] = gone
            dog._log_membership(set())  # all gone
    finally:
        logging.getLogger("pipeline").removeHandler(keep)
        runlog.removeHandler(keep)
    gone = [name for name, message in said if message.startswith("no Dask workers left")]
    # a crash loop (back for a second) quiet; an outage after a minute with workers, or
    # after the quiet spell, said again
    assert gone == ["pipeline", "pipeline.runlog", "pipeline.runlog", "pipeline", "pipeline"]
    assert runlog.propagate is False
