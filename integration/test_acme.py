"""ACME certificates ([[server.tls]] acme): sluice orders its listener's certificate from Debian's
pebble (a test ACME CA) on loopback, proves the domain over TLS-ALPN-01 on the listener itself,
and serves the issued certificate; a restart serves the stored certificate without a new order.

pebble resolves the domain through a DNS server the test runs (dns_responder.py, -dnsserver) and
validates on the port its config names (tlsPort): sluice's TLS listener, on a port the test picks.
pebble's own HTTPS certificate is made by the test; curl verifies the issued certificate against
pebble's root, fetched from pebble's management API."""
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.request

import pytest

from conftest import LogReader, closed_port, metric, sluice_config, wait_until
from dns_responder import DnsResponder
from test_tls import ADMIN, openssl

DOMAIN = "app.sluice.test"


class Pebble:
    def __init__(self, tmp_path, tls_port, http_port, dns_port, validity=0):
        self.dir = tmp_path / "pebble"
        self.dir.mkdir()
        self.cert, key = self.dir / "cert.pem", self.dir / "key.pem"
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", self.cert, "-days", "2", "-subj", "/CN=pebble",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        self.port, self.management_port = closed_port(), closed_port()
        config = {"pebble": {"listenAddress": f"127.0.0.1:{self.port}",
                             "managementListenAddress": f"127.0.0.1:{self.management_port}",
                             "certificate": str(self.cert), "privateKey": str(key),
                             "httpPort": http_port, "tlsPort": tls_port,
                             "ocspResponderURL": "", "externalAccountBindingRequired": False}}
        if validity:
            config["pebble"]["certificateValidityPeriod"] = validity
        (self.dir / "config.json").write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if k != "PEBBLE_VA_ALWAYS_VALID"}
        env["PEBBLE_VA_NOSLEEP"] = "1"
        self.proc = subprocess.Popen(["pebble", "-config", str(self.dir / "config.json"),
                                      "-dnsserver", f"127.0.0.1:{dns_port}"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self.log = LogReader(self.proc, self.proc.stdout)
        self.log.wait_for(r"Listening on: 127\.0\.0\.1:%d" % self.port, timeout=20)
        self.directory = f"https://127.0.0.1:{self.port}/dir"

    def root(self, path):
        """pebble's root certificate (a new one each run), written to `path`."""
        context = ssl.create_default_context(cafile=str(self.cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.management_port}/roots/0",
                                    context=context, timeout=10) as r:
            path.write_bytes(r.read())
        return path

    def orders(self):
        """Orders pebble created, from its log (a request it refused for a bad nonce, which it
        does to 5 % of them on purpose, and which sluice sends again, is not one)."""
        self.log.poll()
        return sum(1 for line in self.log.lines if "Added order" in line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def dns():
    d = DnsResponder()
    d.set(DOMAIN, a=["127.0.0.1"], ttl=60)
    yield d
    d.close()


@pytest.fixture
def pebble_for(tmp_path, dns):
    started = []

    def start(tls_port, http_port=0, validity=0):
        p = Pebble(tmp_path, tls_port, http_port or closed_port(), dns.port, validity)
        started.append(p)
        return p
    yield start
    for p in started:
        p.stop()


def acme_config(origin, tls_port, pebble, storage, challenge="tls-alpn-01", http_port=0):
    listener = (f'\n[[server.tls]]\nlisten = ["127.0.0.1:{tls_port}"]\n'
                f'acme = {{ domains = ["{DOMAIN}"], directory = "{pebble.directory}", '
                f'email = "ops@sluice.test", challenge = "{challenge}", ca_file = "{pebble.cert}" }}\n')
    text = sluice_config([origin], server_extra=listener, top=f'[acme]\nstorage = "{storage}"\n\n{ADMIN}')
    return text.replace('listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:{http_port}"]', 1)


def curl(tls_port, root):
    """Status and the issuer of the certificate curl verified, over TLS to DOMAIN."""
    p = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                        "--cacert", str(root), "--resolve", f"{DOMAIN}:{tls_port}:127.0.0.1",
                        f"https://{DOMAIN}:{tls_port}/"], capture_output=True, timeout=20)
    return p.stdout.decode(), p.stderr.decode()


def test_certificate_is_ordered_over_tls_alpn_and_served(origins, sluice, pebble_for, tmp_path):
    [o] = origins(1)
    tls_port = closed_port()
    pebble = pebble_for(tls_port)
    storage = tmp_path / "acme"
    s = sluice(acme_config(o, tls_port, pebble, storage))
    s.log.wait_for(r"acme: certificate for app\.sluice\.test issued", timeout=60)
    root = pebble.root(tmp_path / "pebble-root.pem")
    assert curl(tls_port, root) == ("200", "")
    assert pebble.orders() == 1
    [status] = s.status()["acme"]
    assert status["domains"] == [DOMAIN] and status["failures"] == 0 and status["last_error"] == ""
    # pebble's certificates last five years.
    assert 5 * 365 - 2 < metric(s, "sluice_acme_certificate_expiry_days", domain=DOMAIN) < 5 * 366
    [row] = s.admin("GET", "/api/dashboard").json()["certificates"]
    assert (row["domains"], row["failures"], row["last_error"], row["retry_in_s"]) == ([DOMAIN], 0, "", None)
    assert 5 * 365 - 2 < row["days_to_expiry"] < 5 * 366
    # Account key and certificate key readable by sluice's user only.
    assert os.stat(storage / "account.key").st_mode & 0o777 == 0o600
    assert os.stat(storage / DOMAIN / "key.pem").st_mode & 0o777 == 0o600
    cert_mtime = os.stat(storage / DOMAIN / "cert.pem").st_mtime_ns

    # A reload builds new listener contexts: they serve the issued certificate at once.
    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="success") == 1, timeout=5)
    assert curl(tls_port, root) == ("200", "")

    # A restart serves the stored certificate at once and orders nothing.
    s.stop()
    s = sluice(acme_config(o, tls_port, pebble, storage))
    assert curl(tls_port, root) == ("200", "")
    assert pebble.orders() == 1
    assert os.stat(storage / DOMAIN / "cert.pem").st_mtime_ns == cert_mtime
    assert not any("acme: ordered" in line for line in s.log.lines)


def test_certificate_is_ordered_over_http_01_on_the_plain_listener(origins, sluice, pebble_for, tmp_path):
    """HTTP-01: pebble fetches /.well-known/acme-challenge/TOKEN from the plain listener (its
    httpPort); the answer comes from sluice, not from the origin behind the catch-all route."""
    [o] = origins(1)
    tls_port, http_port = closed_port(), closed_port()
    pebble = pebble_for(tls_port, http_port)
    s = sluice(acme_config(o, tls_port, pebble, tmp_path / "acme", challenge="http-01", http_port=http_port))
    s.log.wait_for(r"acme: certificate for app\.sluice\.test issued", timeout=60)
    assert curl(tls_port, pebble.root(tmp_path / "pebble-root.pem")) == ("200", "")
    assert o.stats().get("requests", 0) == 1  # curl's request only: no challenge reached the origin


class KeptConnection:
    """One TLS keep-alive connection to DOMAIN on sluice's listener, verifying pebble's root."""

    def __init__(self, tls_port, root):
        context = ssl.create_default_context(cafile=str(root))
        self.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=10),
                                        server_hostname=DOMAIN)
        self.certificate = self.sock.getpeercert(binary_form=True)

    def get(self):
        self.sock.sendall(f"GET / HTTP/1.1\r\nHost: {DOMAIN}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(body) < length:
            body += self.sock.recv(65536)
        return int(head.split(b" ", 2)[1])

    def close(self):
        self.sock.close()


def test_a_short_lived_certificate_is_renewed_without_dropping_connections(origins, sluice, pebble_for, tmp_path):
    """pebble issues 30-second certificates: sluice renews with a third of the lifetime left. A
    connection made before the renewal keeps its certificate and keeps being served; a new one
    gets the new certificate."""
    [o] = origins(1)
    tls_port = closed_port()
    pebble = pebble_for(tls_port, validity=30)
    s = sluice(acme_config(o, tls_port, pebble, tmp_path / "acme"))
    s.log.wait_for(r"acme: certificate for app\.sluice\.test issued", timeout=60)
    root = pebble.root(tmp_path / "pebble-root.pem")
    kept = KeptConnection(tls_port, root)
    assert kept.get() == 200
    issued_at = time.monotonic()
    line = s.log.wait_for(r"acme: certificate for app\.sluice\.test issued.*", timeout=1)
    # The second issue: not before two thirds of the lifetime (20 s), well before the end.
    renewed = wait_second_issue(s, timeout=40)
    assert 15 < time.monotonic() - issued_at < 30, (line, renewed)
    assert pebble.orders() == 2
    assert kept.get() == 200  # the connection from before the swap is still served
    fresh = KeptConnection(tls_port, root)
    assert fresh.certificate != kept.certificate
    assert fresh.get() == 200
    kept.close()
    fresh.close()


def wait_second_issue(s, timeout):
    def second():
        s.log.poll()
        issued = [line for line in s.log.lines if "acme: certificate for app.sluice.test issued" in line]
        return issued[1] if len(issued) >= 2 else None

    return wait_until(second, timeout=timeout, interval=0.1, what="a renewal (a second 'issued')")


def test_until_issued_the_listener_shows_a_placeholder(origins, sluice, tmp_path, dns):
    """No CA to reach: the listener still accepts TLS with a self-signed certificate (which a
    verifying client refuses), the failure is logged with its retry, and nothing is served as if
    it were the real certificate."""
    [o] = origins(1)
    tls_port = closed_port()

    class Nowhere:
        directory = f"https://127.0.0.1:{closed_port()}/dir"
        cert = ""
    s = sluice(acme_config(o, tls_port, Nowhere, tmp_path / "acme").replace(', ca_file = ""', ""))
    s.log.wait_for(r"acme: certificate for app\.sluice\.test not obtained: .*; retry in 60s", timeout=30)
    [status] = s.status()["acme"]
    assert status["failures"] == 1 and "Connection refused" in status["last_error"] and status["next_attempt"]
    assert metric(s, "sluice_acme_failures", domain=DOMAIN) == 1
    [row] = s.admin("GET", "/api/dashboard").json()["certificates"]
    assert row["days_to_expiry"] is None and row["failures"] == 1 and "Connection refused" in row["last_error"]
    assert 0 < row["retry_in_s"] <= 60
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{tls_port}", "-servername", DOMAIN],
                       input=b"", capture_output=True, timeout=15)
    out = p.stdout.decode(errors="replace")
    assert "self-signed certificate" in out or "self signed certificate" in out, out
    assert f"CN = {DOMAIN}" in out


def test_a_ca_that_never_answers_does_not_hold_up_shutdown(origins, sluice, tmp_path, dns):
    """The CA accepts the connection and says nothing (each request step may take 30 s): SIGTERM
    still stops sluice at once, the order abandoned."""
    [o] = origins(1)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the kernel and are never read

    class Silent:
        directory = f"https://127.0.0.1:{silent.getsockname()[1]}/dir"
        cert = ""
    s = sluice(acme_config(o, closed_port(), Silent, tmp_path / "acme").replace(', ca_file = ""', ""))
    silent.settimeout(10)
    held, _ = silent.accept()  # the client's request is under way
    started = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(timeout=10)
    assert time.monotonic() - started < 3
    held.close()
    silent.close()

