"""The worker set read in place (pipeline/engine/scheduler_workers.py), shared by the watchdog
and other_code.py. Real parts: LocalClusters.
"""

import pytest


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
