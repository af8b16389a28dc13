"""Dask clusters from the ``cluster:`` config node.

- ``kind: local``: an embedded ``LocalCluster`` (processes; ``n_workers`` x ``threads_per_worker``).
- ``kind: address``: connect to a running ``dask scheduler`` at ``address`` (``tls://`` with
  ``security: {ca_file, cert, key}``; see :mod:`pipeline.engine.address`).
- ``kind: slurm``: a dask-jobqueue ``SLURMCluster`` that scales adaptively between
  ``minimum_jobs`` and ``maximum_jobs`` batch jobs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterator, Mapping

from pipeline.engine.address import (AddressConfigError, SchedulerCheckFailed, check_security,
                                     make_security, probe_scheduler)
from pipeline.store.redact import redact

LOCAL_DASHBOARD = "127.0.0.1:8787"


class ClusterConfigError(ValueError):
    pass


def _get(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key, default) if cfg is not None else default
    return default if value is None else value


def make_slurm_cluster(cfg: Mapping[str, Any]):
    """Build (not start jobs for) a SLURMCluster with adaptive bounds from the config."""
    from dask_jobqueue import SLURMCluster

    kwargs = dict(
        queue=cfg.get("queue"),
        account=cfg.get("account"),
        cores=int(_get(cfg, "cores", 1)),
        processes=int(_get(cfg, "processes", 1)),
        memory=str(_get(cfg, "memory", "4GB")),
        walltime=str(_get(cfg, "walltime", "01:00:00")),
        job_extra_directives=list(_get(cfg, "job_extra_directives", [])),
        job_script_prologue=list(_get(cfg, "job_script_prologue", [])),
        local_directory=cfg.get("local_directory"),
        log_directory=cfg.get("log_directory"),
        scheduler_options={"dashboard_address": str(_get(cfg, "dashboard_address", ":8787"))},
    )
    if cfg.get("python"):
        kwargs["python"] = cfg["python"]
    cluster = SLURMCluster(**{k: v for k, v in kwargs.items() if v is not None})
    minimum, maximum = int(_get(cfg, "minimum_jobs", 0)), int(_get(cfg, "maximum_jobs", 10))
    if not 0 <= minimum <= maximum:
        raise ClusterConfigError(f"cluster.minimum_jobs ({minimum}) must be between 0 and "
                                 f"cluster.maximum_jobs ({maximum})")
    cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum)
    return cluster


def validate(cfg: Mapping[str, Any]) -> None:
    """Reject a bad cluster config before anything starts."""
    kind = _get(cfg, "kind", "local")
    if kind not in ("local", "address", "slurm"):
        raise ClusterConfigError(f"cluster.kind must be one of {{local, address, slurm}}, got {kind!r}")
    if kind == "local":
        n = cfg.get("n_workers")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ClusterConfigError(f"cluster.n_workers must be an integer >= 1 (or null for "
                                     f"one per core), got {n!r}")
        t = cfg.get("threads_per_worker")
        if t is not None and (not isinstance(t, int) or isinstance(t, bool) or t < 1):
            raise ClusterConfigError(f"cluster.threads_per_worker must be an integer >= 1, got {t!r}")
    if kind == "address":
        address = cfg.get("address")
        if not address or "://" not in str(address):
            raise ClusterConfigError("cluster=address needs cluster.address=tcp://HOST:PORT "
                                     f"(got {redact(str(address))!r})")
        if "@" in str(address).split("://", 1)[1].split("/", 1)[0]:
            raise ClusterConfigError(
                f"cluster.address={redact(str(address))}: a Dask address takes no user:password@ "
                "(schedulers authenticate clients by TLS certificates: tls://HOST:PORT with "
                "cluster.security)")
        try:
            check_security(cfg)  # TLS files: required for tls://, must exist
        except AddressConfigError as exc:
            raise ClusterConfigError(str(exc)) from None


@contextlib.contextmanager
def connect(cfg: Mapping[str, Any], log: logging.Logger) -> Iterator[Any]:
    """Yield a connected ``distributed.Client``; tear down what was started on exit."""
    from distributed import Client, LocalCluster

    validate(cfg)
    kind = _get(cfg, "kind", "local")
    if kind == "address":
        from dask.utils import parse_timedelta

        address, timeout = str(cfg["address"]), str(_get(cfg, "timeout", "30s"))
        security = make_security(check_security(cfg))
        try:  # a bounded identity check first: a wrong service must not hang or misparse
            probe_scheduler(address, security, parse_timedelta(timeout))
        except SchedulerCheckFailed as exc:
            raise type(exc)(redact(str(exc))) from None
        except OSError:
            pass  # nothing listening: the client below reports it in its own words
        client = Client(address, timeout=timeout, security=security)
        log.info("connected to scheduler %s (dashboard %s)", redact(address), client.dashboard_link)
        try:
            yield client
        finally:
            client.close()
        return
    if kind == "slurm":
        cluster = make_slurm_cluster(cfg)
    else:
        n_workers = cfg.get("n_workers") or os.cpu_count() or 1
        cluster = LocalCluster(
            n_workers=int(n_workers),
            threads_per_worker=int(_get(cfg, "threads_per_worker", 1)),
            processes=True,
            memory_limit=_get(cfg, "memory_limit", "auto"),
            # loopback by default: the dashboard is unauthenticated (see README, SSH tunnel)
            dashboard_address=str(_get(cfg, "dashboard_address", LOCAL_DASHBOARD)),
            silence_logs=logging.ERROR,
        )
    client = Client(cluster)
    log.info("%s cluster up; dashboard: %s", kind, client.dashboard_link)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()
        with contextlib.suppress(Exception):
            cluster.close()
