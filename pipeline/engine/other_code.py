"""Workers that run other code than the sweep stamps on its rows (``code_id``), met mid-sweep.

A worker that joined or restarted after an edit (or kept old modules) would have its rows
carry this sweep's code_id without having run that code. On a cluster the sweep started, its
batches go out again to the other workers and it is retired; on a pool at an address, not
the sweep's to close, its points are stored failed, saying why (it would take them again),
and ``retry_failed=true`` reruns them. An adaptive cluster (SLURM, PBS...) stops growing at the
first such worker: every job started after an edit loads the edited code, so replacements would
only be retired in turn (and a batch bounced between them stored failed); its jobs not yet
running are cancelled. Either way the sweep ends (:class:`WorkersRunOtherCode`, exit 3) when no
worker runs its code any more. The driver loop (``runner.py``) calls
:meth:`OtherCodeWorkers.returned` for each such batch, and :meth:`OtherCodeWorkers.act` once a
wake, outside its held signals (it asks every worker, then the scheduler, each bounded).
"""

from __future__ import annotations

import logging
import time

from pipeline.engine.batch_cluster import job_of
from pipeline.engine.provenance import other_code_message
from pipeline.engine.scheduler_workers import embedded_scheduler, workers_in_place
from pipeline.engine.watchdog import WorkersRunOtherCode
from pipeline.engine.worker_calls import retire_workers, worker_codes

log = logging.getLogger("pipeline")

REQUEUES = 8  # times a batch run with other code goes out again (then: stored failed)
ASK_S = 60.0  # with no new such worker, the workers are asked at most this often
SCALE_DOWN_TIMEOUT_S = 60.0  # cancelling the jobs of an adaptive cluster that stopped growing


class OtherCodeWorkers:
    def __init__(self, client, grid, code: str):
        self.client, self.grid, self.code = client, grid, code
        self.owned = getattr(client, "cluster", None) is not None  # not a pool at an address
        self.workers: dict[str, str] = {}  # worker -> the other code_id it returned rows of
        self.news: set[str] = set()  # such workers to act on
        self.logged: set[str] = set()
        self.retired: set[str] = set()
        self.asked = float("-inf")  # when the workers were last asked for their code
        self.tries: dict[tuple[int, int], int] = {}  # (first index, length) -> returns
        cluster = getattr(client, "cluster", None)
        self.adaptive = getattr(cluster, "_adaptive", None) if self.owned else None
        self.growth_stopped = False

    def returned(self, worker: str, loaded: str, chunk) -> str | None:
        """A batch ``chunk`` came back from ``worker`` computed with code ``loaded``: None if
        it goes out again (the caller resubmits it), else the error to store its points with."""
        self.workers[worker] = loaded
        if worker not in self.retired:
            self.news.add(worker)
        where = (int(chunk[0]), len(chunk))
        self.tries[where] = self.tries.get(where, 0) + 1
        if self.owned and self.tries[where] <= REQUEUES:
            return None
        return other_code_message(worker, loaded, self.code, self.grid.name)

    def act(self) -> None:
        """Log the new such workers, retire them (a cluster the sweep started), or end the
        sweep when no worker runs its code."""
        if self.growth_stopped:
            self._end_when_none_left()
        if not self.news:
            return
        news = sorted(self.news - self.logged)
        now = time.monotonic()
        if not news and now - self.asked < ASK_S:
            return  # a broadcast each wake would hold the loop for a slow worker's answer
        self.asked = now
        self.logged.update(self.news)
        self.news.clear()
        codes = worker_codes(self.client, self.grid)
        if codes and not any(got == self.code for got in codes.values()):
            raise WorkersRunOtherCode(
                f"no worker runs the code this sweep started with (code_id {self.code}) any "
                f"more: experiment '{self.grid.name}''s files changed since, and every worker "
                f"now runs code_id {', '.join(sorted(set(codes.values())))}. The rows stored "
                "so far are kept; run the sweep again to compute the rest with the code on "
                "disk (rerun_changed=true also recomputes the rows of the old code)")
        for worker in news:
            log.error("%s", other_code_message(
                worker, self.workers[worker], self.code, self.grid.name,
                "It is retired, and its points go to the other workers" if self.owned else
                "Its points are stored as failed (a pool at an address is not this sweep's to "
                "close): restart it so that it loads the code on disk, then rerun with "
                "retry_failed=true"))
        # (no answer, or no worker now: the watchdog sees to that; tried again at its next
        # batch run with other code)
        others = sorted(w for w, got in (codes or {}).items() if got != self.code)
        self.workers.update({w: codes[w] for w in others})
        if self.owned and others:  # with any that has not returned a batch yet
            self.retired.update(retire_workers(self.client, others))
        if self.adaptive is not None and not self.growth_stopped and codes is not None:
            self._stop_growth(codes)

    def _stop_growth(self, codes: dict[str, str]) -> None:
        """Stop adaptive scaling, and cancel the jobs with no worker on the sweep's code (not
        yet running, or all of their workers retired): a job started from now on would load
        the edited code too."""
        cluster = self.client.cluster
        try:
            self.adaptive.stop(reason="workers run other code than the sweep")
        except Exception as exc:  # only a stopped one
            log.debug("adaptive scaling did not stop: %s", exc)
        self.growth_stopped = True
        keep = {job_of(cluster, self._name_of(w)) for w, got in codes.items()
                if got == self.code}
        current = self._current()
        keep |= {job_of(cluster, self._name_of(w)) for w in current or ()
                 if w not in codes}  # no answer yet: not known to run other code
        # (workers unknown: nothing cancelled, rather than a job of ours)
        drop = sorted((set(cluster.worker_spec) - keep), key=str) if current is not None else []
        log.warning(
            "the cluster stops growing: every job started from now on would load the edited "
            "code. The sweep goes on with the %d worker(s) that run its code%s; when none is "
            "left it ends (exit 3), and a rerun computes the rest",
            sum(got == self.code for got in codes.values()),
            f" ({len(drop)} job(s) not on it cancelled)" if drop else "")
        if drop:
            try:
                cluster.sync(cluster.scale_down, drop, callback_timeout=SCALE_DOWN_TIMEOUT_S)
            except Exception as exc:
                log.warning("could not cancel job(s) %s: %s: %s", ", ".join(map(str, drop)),
                            type(exc).__name__, exc)

    def _current(self) -> set[str] | None:
        """The workers connected now (read in place: a batch cluster's scheduler is here), or
        None if unknown (changed while read, or no scheduler here)."""
        return workers_in_place(embedded_scheduler(self.client), tries=3)

    def _name_of(self, worker: str):
        ws = getattr(self.client.cluster.scheduler, "workers", {}).get(worker)
        return ws.name if ws is not None else worker

    def _end_when_none_left(self) -> None:
        """Once the cluster stopped growing, no worker will join on the sweep's code: end the
        sweep when every worker connected is known to run other code, or none is."""
        current = self._current()
        if current is None:  # unknown this wake (changed while read): the next one decides
            return
        if not current - set(self.workers):
            raise WorkersRunOtherCode(
                f"no worker runs the code this sweep started with (code_id {self.code}) any "
                f"more: experiment '{self.grid.name}''s files changed during the sweep, so "
                "the cluster stopped growing (its new jobs would run the edited code), and "
                "the last worker on the sweep's code has left. The rows stored so far are "
                "kept; run the sweep again to compute the rest with the code on disk "
                "(rerun_changed=true also recomputes the rows of the old code)")
