"""``cluster=address``: TLS settings and a bounded check that the peer is a Dask scheduler.

``cluster.security`` holds the client side of distributed's TLS (``ca_file``, ``cert``,
``key``: PEM paths), required for a ``tls://`` address. Before the client connects, the
driver asks the peer for its identity over one connection, every step bounded by
``cluster.timeout``: a service that is not a Dask scheduler (an HTTP or SSH server on that
port) used to make distributed read its reply as a frame length and fail with "Unable to
allocate 3.07 EiB", or wait forever.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Mapping

SECURITY_KEYS = ("ca_file", "cert", "key")


class AddressConfigError(ValueError):
    """A bad ``cluster.address``/``cluster.security`` setting (reported as bad input)."""


class SchedulerCheckFailed(ConnectionError):
    """Something listens at ``cluster.address``, but the client cannot use it."""


class NotADaskScheduler(SchedulerCheckFailed):
    """The peer accepted a connection but did not answer as a Dask scheduler."""


class TLSHandshakeFailed(SchedulerCheckFailed):
    """The TLS handshake failed: the certificates of ``cluster.security`` do not fit."""


def check_security(cfg: Mapping[str, Any]) -> dict[str, str] | None:
    """Validate ``cluster.security`` against ``cluster.address``; returns the PEM paths (or
    None when there is no TLS). A ``tls://`` address needs all three files; the files must
    exist and be readable."""
    address = str(cfg.get("address") or "")
    security = cfg.get("security") or {}
    if not isinstance(security, Mapping):
        raise AddressConfigError("cluster.security must be a mapping with keys "
                                 + ", ".join(SECURITY_KEYS))
    unknown = set(security) - set(SECURITY_KEYS)
    if unknown:
        raise AddressConfigError(f"unknown key(s) cluster.security.{', '.join(sorted(unknown))}; "
                                 "allowed: " + ", ".join(SECURITY_KEYS))
    given = {k: str(v) for k, v in security.items() if v not in (None, "")}
    tls = address.startswith("tls://")
    if not tls:
        if given:
            raise AddressConfigError(f"cluster.security is set but cluster.address={address} is "
                                     "not tls://: use tls://HOST:PORT, or drop cluster.security")
        return None
    missing = [k for k in SECURITY_KEYS if k not in given]
    if missing:
        raise AddressConfigError(
            f"cluster.address={address} uses TLS: set " + ", ".join(
                f"cluster.security.{k}" for k in missing)
            + " (PEM files: the CA that signed the scheduler's certificate, and this client's "
            "certificate and key)")
    for key, path in given.items():
        if not Path(path).is_file() or not os.access(path, os.R_OK):
            raise AddressConfigError(f"cluster.security.{key}={path}: no such readable file")
    return given


def make_security(paths: Mapping[str, str] | None):
    """distributed's ``Security`` for the client side (None without TLS)."""
    if not paths:
        return None
    from distributed.security import Security

    return Security(tls_ca_file=paths["ca_file"], tls_client_cert=paths["cert"],
                    tls_client_key=paths["key"], require_encryption=True)


def probe_scheduler(address: str, security, timeout_s: float) -> dict:
    """Ask the peer at ``address`` for its identity; returns it. Raises ``OSError`` when
    nothing accepts the connection (left to the client's own error), and
    :class:`NotADaskScheduler` when something answers, but not as a Dask scheduler."""
    return asyncio.run(_probe(address, security, timeout_s))


async def _probe(address: str, security, timeout_s: float) -> dict:
    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port

    _, location = parse_address(address)
    host, port = parse_host_port(location)
    # Plain TCP first: nothing listening is the client's usual "cannot connect" (a crash,
    # exit 3), not a wrong peer.
    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    writer.close()
    args = security.get_connection_args("client") if security is not None else {}
    comm = None
    try:
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s, **args), timeout_s)
        await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), timeout_s)
        reply = await asyncio.wait_for(comm.read(), timeout_s)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # garbage read as a frame length (MemoryError), a timeout, ...
        text = str(exc)
        if address.startswith("tls://") and ("TLS" in text or "SSL" in text or "certificate" in text):
            raise TLSHandshakeFailed(
                f"the TLS handshake with {address} failed ({type(exc).__name__}: "
                f"{text.splitlines()[0][:200]}): check cluster.security: ca_file must be the CA "
                "that signed the scheduler's certificate, cert and key a client pair signed by "
                "the CA the scheduler trusts") from None
        raise NotADaskScheduler(_not_dask(address, exc)) from None
    finally:
        if comm is not None:
            comm.abort()
    if not isinstance(reply, Mapping) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, Mapping) else type(reply).__name__
        raise NotADaskScheduler(f"the peer at {address} answered, but as {kind!r}, not as a Dask "
                                "scheduler: point cluster.address at the scheduler's port")
    return dict(reply)


def _not_dask(address: str, exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        why = "no Dask handshake within cluster.timeout"
    elif isinstance(exc, (MemoryError, OverflowError, ValueError, TypeError)):
        why = "it sent bytes that are not Dask's protocol"  # e.g. a banner read as a length
    else:
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        why = f"{type(exc).__name__}{': ' + text if text else ''}"
    return (f"the peer at {address} accepted the connection but did not answer as a Dask "
            f"scheduler ({why}); point "
            "cluster.address at the port of a running `dask scheduler` (tls:// needs "
            "cluster.security)")
