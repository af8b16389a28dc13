"""Issue 17 §3 and the address checks of §2: the local dashboard on loopback, a TLS sweep
against a real ``dask scheduler``/``dask worker`` pair (throwaway CA made here with
``cryptography``), no secret in the manifest, and a listening port that is not a Dask
scheduler."""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from pipeline.engine.address import (NotADaskScheduler, TLSHandshakeFailed, make_security,
                                     probe_scheduler)
from pipeline.engine.cluster import connect
from pipeline.engine.cluster_config import ClusterConfigError
from pipeline.engine.cluster_config import validate as validate_cluster
from pipeline.store.manifest import read_manifest, update_manifest

ROOT = Path(__file__).resolve().parents[1]
DASK = Path(sys.executable).with_name("dask")


def run_cli(*args, timeout=120, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- dashboard
def _non_loopback_ip() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


@pytest.mark.timeout(120)
def test_local_dashboard_listens_on_loopback_only_by_default():
    from omegaconf import OmegaConf

    default = OmegaConf.load(ROOT / "conf" / "cluster" / "local.yaml")
    assert default.dashboard_address == "127.0.0.1:8787"
    # No dashboard_address at all: the built-in default. (If another process holds 8787,
    # distributed moves to a free port on the same host, still loopback.)
    with connect({"kind": "local", "n_workers": 1}, logging.getLogger("test")) as client:
        port = client.cluster.scheduler.http_server.port
        listening = {c.laddr.ip for c in psutil.Process().net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        assert listening == {"127.0.0.1"}
        assert client.dashboard_link.startswith(f"http://127.0.0.1:{port}/")
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # reachable through loopback (where an SSH tunnel ends)
        other = _non_loopback_ip()
        if other:  # and not from another interface of this host
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=5).close()


@pytest.mark.timeout(120)
def test_the_local_clusters_own_event_loop_ends_with_it():
    """connect() runs the LocalCluster on an event loop thread of its own, started with SIGINT
    blocked (cluster._loop_deaf_to_sigint: its workers inherit the mask). Closed with the
    cluster, or each job of a multirun, in one process, left one thread more."""
    def loops():
        return [t for t in threading.enumerate() if t.name == "IO loop" and t.is_alive()]

    before = len(loops())
    with connect({"kind": "local", "n_workers": 1, "dashboard_address": ":0"},
                 logging.getLogger("test")) as client:
        assert client.loop is client.cluster.pipeline_loop_runner.loop
        assert len(loops()) == before + 1
        assert client.submit(lambda x: x * 3, 7).result(timeout=30) == 21
    assert len(loops()) == before


ANOTHER_USER = """
import sys
from distributed import Client
host_port = sys.argv[1].split("://", 1)[1]
for scheme in ("tcp", "tls"):
    try:
        with Client(f"{scheme}://{host_port}", timeout=5) as c:
            print("RAN", scheme, c.run_on_scheduler(lambda: "code ran in the scheduler"))
    except BaseException as exc:
        print("REFUSED", scheme, type(exc).__name__)
"""


@pytest.mark.timeout(120)
def test_another_local_user_cannot_drive_the_local_scheduler():
    """The LocalCluster's scheduler listened on plain tcp://127.0.0.1:PORT: on a shared login
    node any user (the port is in `ss -ltn`) could connect a Client and run code as the
    researcher. It speaks TLS with throwaway credentials only the sweep's processes hold."""
    with connect({"kind": "local", "n_workers": 1, "dashboard_address": ":0"},
                 logging.getLogger("test")) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(lambda x: x + 1, 1).result(timeout=30) == 2  # the sweep's own
        out = subprocess.run([sys.executable, "-c", ANOTHER_USER, address], capture_output=True,
                             text=True, timeout=60)
    assert "RAN" not in out.stdout, out.stdout
    assert out.stdout.count("REFUSED") == 2, out.stdout + out.stderr


# --------------------------------------------------------------------------- TLS
def _make_pki(folder: Path) -> dict[str, Path]:
    """A throwaway CA, and certificates signed by it for the scheduler, worker and client."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write_key(key, path):
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("pipeline test CA")).issuer_name(name("pipeline test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    paths = {"ca": folder / "ca.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for who in ("scheduler", "worker", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(who)).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                    critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        paths[who] = folder / f"{who}.pem"
        paths[who].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths[f"{who}_key"] = folder / f"{who}.key"
        write_key(key, paths[f"{who}_key"])
    return paths


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)


@pytest.fixture
def tls_cluster(tmp_path):
    """A real TLS ``dask scheduler`` and one ``dask worker``, on 127.0.0.1."""
    pki = _make_pki(tmp_path)
    sched_file = tmp_path / "scheduler.json"
    tls = lambda who: ["--tls-ca-file", str(pki["ca"]), "--tls-cert", str(pki[who]),  # noqa: E731
                       "--tls-key", str(pki[f"{who}_key"])]
    procs = [subprocess.Popen([str(DASK), "scheduler", "--protocol", "tls", "--host", "127.0.0.1",
                               "--port", "0", "--dashboard-address", "127.0.0.1:0",
                               "--scheduler-file", str(sched_file), *tls("scheduler")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        procs.append(subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1",
                                       "--nworkers", "1", "--no-nanny", "--no-dashboard",
                                       *tls("worker")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        yield address, pki
    finally:
        _stop(procs)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_tls_sweep_against_a_real_scheduler(tmp_path, tls_cluster):
    address, pki = tls_cluster
    common = ["experiment=calibration", f"results_dir={tmp_path / 'r'}", "cluster=address",
              f"cluster.address={address}", "grid.x={range:[0,20]}", "params.work_us=0",
              "progress=false", "cluster.timeout=20s"]
    # without the client certificate: refused before anything is written
    proc = run_cli(*common, timeout=60)
    assert proc.returncode == 2 and "cluster.security.ca_file" in proc.stderr
    assert not (tmp_path / "r").exists()
    # a client certificate from another CA, or plain tcp:// to the TLS port: named clearly
    (tmp_path / "rogue").mkdir()
    rogue = _make_pki(tmp_path / "rogue")
    with pytest.raises(TLSHandshakeFailed, match="check cluster.security"):
        probe_scheduler(address, make_security({"ca_file": str(rogue["ca"]), "cert": str(rogue["client"]),
                                                "key": str(rogue["client_key"])}), 10)
    with pytest.raises(NotADaskScheduler, match="tls:// needs cluster.security"):
        probe_scheduler(address.replace("tls://", "tcp://"), None, 10)
    # the same two through the CLI: bad input (exit 2) before anything is written
    rogue_args = [f"cluster.security.ca_file={rogue['ca']}", f"cluster.security.cert={rogue['client']}",
                  f"cluster.security.key={rogue['client_key']}"]
    proc = run_cli(*common, *rogue_args, timeout=60)
    assert proc.returncode == 2 and "the TLS handshake with" in proc.stderr, proc.stderr
    assert "check cluster.security" in proc.stderr and "Traceback" not in proc.stderr
    plain = [a.replace("tls://", "tcp://") if a.startswith("cluster.address=") else a for a in common]
    proc = run_cli(*plain, timeout=60)
    assert proc.returncode == 2 and "did not answer as a Dask scheduler" in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()
    # the right client certificate: the sweep runs over TLS
    proc = run_cli(*common, f"cluster.security.ca_file={pki['ca']}",
                   f"cluster.security.cert={pki['client']}",
                   f"cluster.security.key={pki['client_key']}", timeout=120)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(tmp_path / "r" / "calibration")
    assert len(df) == 20 and set(df.status) == {"ok"}
    assert df.worker.str.startswith("tls://127.0.0.1:").all()
    run = read_manifest(tmp_path / "r" / "calibration")["runs"][-1]
    assert run["status"] == "finished"
    assert run["config"]["cluster"]["security"]["key"] == str(pki["client_key"])  # paths kept


def test_security_settings_are_checked_up_front(tmp_path):
    key = tmp_path / "client.key"
    key.write_text("x")
    cases = [
        ({"address": "tcp://127.0.0.1:8786", "security": {"key": str(key)}}, "not tls://"),
        ({"address": "tls://127.0.0.1:8786", "security": {"ca_file": str(key), "cert": str(key),
                                                          "key": str(tmp_path / "nope.key")}},
         f"cluster.security.key={tmp_path / 'nope.key'}: no such readable file"),
        ({"address": "tls://127.0.0.1:8786", "security": {"ca_file": None, "cert": None, "key": None}},
         "set cluster.security.ca_file, cluster.security.cert, cluster.security.key"),
        ({"address": "tls://127.0.0.1:8786", "security": {"ca": str(key)}},
         "unknown key(s) cluster.security.ca"),
    ]
    for cfg, message in cases:
        with pytest.raises(ClusterConfigError) as err:
            validate_cluster({"kind": "address", **cfg})
        assert message in str(err.value)
    validate_cluster({"kind": "address", "address": "tls://h:1",
                      "security": {"ca_file": str(key), "cert": str(key), "key": str(key)}})


# --------------------------------------------------------------------------- redaction
@pytest.mark.timeout(240)
def test_no_password_reaches_the_manifest_log_or_terminal(tmp_path):
    """Through the real CLI: a password in a results_dir path and in addresses is never
    written to the manifest or the run log, nor printed to stdout or stderr (by the sweep,
    a dry run's job script, or status)."""
    secret = "hunter2-s3cr3t"
    results = f"{tmp_path}/sftp://alice:{secret}@files.example/res"
    proc = run_cli("experiment=calibration", f"results_dir={results}", "grid.x={range:[0,12]}",
                   "params.work_us=0", "cluster.n_workers=1", "cluster.dashboard_address=:0",
                   "progress=true", timeout=180)
    assert proc.returncode == 0, proc.stderr
    folder = Path(results) / "calibration"  # the folder exists under its real name...
    assert len(pd.read_parquet(folder)) == 12
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "_manifest.json" for p in written) and \
        any(p.suffix == ".log" for p in written)
    for p in written:  # ...but no file's content names the password
        assert secret.encode() not in p.read_bytes(), p
    assert "alice:***@files.example" in proc.stderr + proc.stdout  # the path is shown, redacted
    assert secret not in proc.stdout + proc.stderr
    log_text = next(p for p in written if p.suffix == ".log").read_text()
    assert "argv:" in log_text and "alice:***@" in log_text
    status = subprocess.run([sys.executable, "-m", "pipeline", "status",
                             str(Path(results)), "calibration"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0 and "calibration: 12 ok" in status.stdout, status.stderr
    assert secret not in status.stdout + status.stderr
    # an address in a batch job's prologue: the dry run prints the job script, redacted
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path / 'd'}", "cluster=slurm",
                   "dry_run=true",
                   f"cluster.job_script_prologue=[pip install https://bob:{secret}@git.example/x.git]",
                   timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "https://bob:***@git.example/x.git" in proc.stdout and secret not in proc.stdout + proc.stderr
    # an address with a password: refused, redacted, nothing written
    proc = run_cli("experiment=calibration", f"results_dir={tmp_path / 'a'}", "cluster=address",
                   f"cluster.address=tcp://alice:{secret}@127.0.0.1:8786", timeout=60)
    assert proc.returncode == 2 and "tcp://alice:***@127.0.0.1:8786" in proc.stderr
    assert secret not in proc.stderr + proc.stdout and not (tmp_path / "a").exists()


def test_no_password_reaches_the_manifest(tmp_path):
    secret = "hunter2-s3cr3t"
    # whatever string of a run record carries one (argv, config, an error) is redacted
    record = {"run_id": "r1", "argv": [f"cluster.job_script_prologue=[pip install "
                                       f"https://bob:{secret}@git.example/x.git]"],
              "config": {"cluster": {"security": {"key": "/home/me/.dask/client.key"},
                                     "prologue": [f"curl https://:{secret}@example/a"]}},
              "error": f"OSError: cannot reach tls://svc:{secret}@host:8786"}
    update_manifest(tmp_path, record)
    text = (tmp_path / "_manifest.json").read_text()
    assert secret not in text
    run = read_manifest(tmp_path)["runs"][0]
    assert run["argv"][0].endswith("https://bob:***@git.example/x.git]")
    assert run["config"]["cluster"]["security"]["key"] == "/home/me/.dask/client.key"
    assert run["error"] == "OSError: cannot reach tls://svc:***@host:8786"


@pytest.mark.timeout(60)
def test_redaction_takes_linear_time_on_long_texts():
    """A scheme was tried from every letter of a long run of letters, each try scanning to
    the run's end: a 2 MB error text took minutes (quadratic) to write to the manifest."""
    from pipeline.store.redact import redact

    long_run = "y" * 2_000_000
    for text in (long_run, long_run + "@", "@" + long_run + ":/", "a1" * 1_000_000 + "@:/"):
        assert redact(text) == text  # no password: unchanged (and returned in time)
    assert redact(long_run + " tcp://u:pw@h " + long_run) == long_run + " tcp://u:***@h " + long_run
    # the scheme is the whole run before ':/' (a digit first, too): still redacted
    assert redact("x=1tcp://u:pw@h") == "x=1tcp://u:***@h"
    assert redact("git+ssh://me:pw@host, sftp:/alice:pw@h") == \
        "git+ssh://me:***@host, sftp:/alice:***@h"


# --------------------------------------------------------------------------- not a scheduler
class _Peer:
    """A listening TCP service that is not Dask: silent (like HTTP, which waits for a request)
    or talkative (like SSH, which sends a banner at once)."""

    def __init__(self, banner: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.banner = banner
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.banner:
                conn.sendall(self.banner)

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("banner", [None, b"SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10\r\n" * 4],
                         ids=["silent", "ssh-banner"])
def test_a_port_that_is_not_a_dask_scheduler(tmp_path, banner):
    """Bad input (exit 2), found before anything is written, with no traceback: a silent
    peer (HTTP waits for a request) within cluster.timeout, a talkative one (an SSH banner,
    once read as a frame length: "Unable to allocate 3.07 EiB") at once."""
    peer = _Peer(banner)
    results = tmp_path / "r"
    try:
        if banner is None:
            t0 = time.monotonic()
            with pytest.raises(NotADaskScheduler, match="no Dask handshake within cluster.timeout"):
                probe_scheduler(f"tcp://127.0.0.1:{peer.port}", None, 2.0)
            assert time.monotonic() - t0 < 10  # bounded by cluster.timeout, not forever
        t0 = time.monotonic()
        proc = run_cli("experiment=calibration", f"results_dir={results}", "cluster=address",
                       f"cluster.address=tcp://127.0.0.1:{peer.port}", "cluster.timeout=3s",
                       "progress=false", timeout=120)
        took = time.monotonic() - t0
    finally:
        peer.close()
    assert proc.returncode == 2, proc.stderr
    why = "no Dask handshake within cluster.timeout" if banner is None else \
        "it sent bytes that are not Dask's protocol"
    assert f"the peer at tcp://127.0.0.1:{peer.port} accepted the connection but did not answer " \
           f"as a Dask scheduler ({why})" in proc.stderr
    assert "allocate" not in proc.stderr and "Traceback" not in proc.stderr
    assert not results.exists()  # no .lock, no manifest, no log
    assert took < 60


def test_credential_files_removed_with_their_folder_are_not_reported_at_exit(tmp_path,
                                                                           monkeypatch):
    """Ctrl-C while a SLURM cluster started: dask-jobqueue's temporary credential files were
    still referenced when the driver removed its folder, and each printed "Exception ignored
    in ... _TemporaryFileCloser ... FileNotFoundError" at exit. Those alone are dropped."""
    import gc
    import os
    import sys
    import tempfile

    from pipeline.engine.batch_cluster import make_tls_folder

    shown = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: shown.append(u.exc_value))
    folder, lock = make_tls_folder(str(tmp_path / ".pipeline-tls-0" / "driver"))
    try:
        ours = tempfile.NamedTemporaryFile(dir=folder)
        os.unlink(ours.name)  # the driver removed its folder first
        del ours
        other = tempfile.NamedTemporaryFile(dir=tmp_path)
        os.unlink(other.name)  # anyone else's: still reported
        del other
        gc.collect()
    finally:
        lock.close()
    assert [type(e).__name__ for e in shown] == ["FileNotFoundError"]
    assert not str(shown[0].filename).startswith(str(tmp_path / ".pipeline-tls-0"))
