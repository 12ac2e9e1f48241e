"""TLS: termination on [[server.tls]] listeners (SNI, ALPN, versions, reload of certificates,
handshake deadline and counting) and TLS to upstreams (verification with the right and the wrong
CA, pooled TLS connections, health probes over TLS).

Certificates are made per test with the openssl CLI in the test's temporary directory; no key is
checked in. The TLS origin is a second sluice terminating TLS in front of a plain sluice-origin."""
import re
import signal
import ssl
import threading
import socket
import subprocess
import time

import pytest

from conftest import metric
from conftest import (Conn, assert_expired_on_time, sluice_config, timed_request, toml_table,
                      wait_until)

# Sluice-Error of a failure on an upstream's only server (#13: it says why it was not retried).
NOT_RETRIED_ALONE = "; not retried: no other server to try"
ADMIN = toml_table("admin", listen="127.0.0.1:0")


def openssl(*args, input=None):
    p = subprocess.run(["openssl", *map(str, args)], capture_output=True, input=input, timeout=30)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


class Pki:
    """A CA in `directory`, and leaf certificates it signs."""

    def __init__(self, directory, name="sluice test CA"):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key, self.ca = self.dir / "ca.key", self.dir / "ca.pem"
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", self.ca_key, "-out", self.ca, "-days", "2", "-subj", f"/CN={name}")

    def leaf(self, name, sans):
        """(cert, key) paths for `sans` ("DNS:a.test,IP:127.0.0.1"), signed by the CA."""
        key, csr, pem, ext = (self.dir / f"{name}.{x}" for x in ("key", "csr", "pem", "ext"))
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
        ext.write_text(f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n")
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                "-CAcreateserial", "-out", pem, "-days", "1", "-extfile", ext)
        return pem, key


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


def tls_block(certs, listen="127.0.0.1:0", extra=""):
    """A [[server.tls]] table (in [server]'s extra keys) for (cert, key) pairs."""
    pairs = ", ".join(f'{{ cert = "{c}", key = "{k}" }}' for c, k in certs)
    return f'\n[[server.tls]]\nlisten = ["{listen}"]\ncertificates = [ {pairs} ]\n{extra}\n'


def tls_port(s):
    for line in s.log.lines:
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(TLS", line)
        if m:
            return int(m.group(1))
    raise AssertionError("no TLS listener in the log")




def served_cert(port, servername, ca):
    """(subject, SHA-256 fingerprint) of the certificate the listener presents for `servername`."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                        "-servername", servername, "-CAfile", str(ca)],
                       input=b"", capture_output=True, timeout=15)
    pem = re.search(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", p.stdout, re.S)
    assert pem, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
    out = openssl("x509", "-noout", "-subject", "-fingerprint", "-sha256", input=pem.group(0)).decode()
    subject = re.search(r"subject=.*CN\s*=\s*([^,\n]+)", out).group(1).strip()
    fingerprint = re.search(r"Fingerprint=(\S+)", out).group(1)
    return subject, fingerprint


def curl_tls(port, *urls_and_args, ca, name="a.test", timeout=20):
    return subprocess.run(["curl", "-sS", "--max-time", str(timeout), "--cacert", str(ca),
                           "--resolve", f"{name}:{port}:127.0.0.1", *map(str, urls_and_args)],
                          capture_output=True, timeout=timeout + 5)


def test_many_keepalive_requests_over_one_tls_connection(origins, sluice, pki):
    """curl through the TLS listener: 200 requests, one connection (curl made one connect and
    reused it), ALPN http/1.1 (curl told to offer only it: the listener prefers h2, which
    test_http2.py covers), and the origin sees X-Forwarded-Proto: https."""
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config([o], server_extra=tls_block([cert])))
    port = tls_port(s)
    n = 200
    args = []
    for i in range(n):
        args += [f"https://a.test:{port}/n{i}", "-o", "/dev/null"]
    p = curl_tls(port, "--http1.1", "-w", "%{num_connects} %{http_code} %{http_version}\n", *args, ca=pki.ca)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode().splitlines()
    assert lines == ["1 200 1.1"] + ["0 200 1.1"] * (n - 1)

    p = curl_tls(port, "--http1.1", f"https://a.test:{port}/?echo=1", "-v", ca=pki.ca)
    assert p.returncode == 0, p.stderr
    assert b"ALPN: server accepted http/1.1" in p.stderr
    echo = __import__("json").loads(p.stdout)
    assert ["X-Forwarded-Proto", "https"] in echo["headers"]
    # The plain listener still says http.
    r = timed_request(s.port, target="/?echo=1")[0]
    assert ["X-Forwarded-Proto", "http"] in r.json()["headers"]


def test_sni_picks_the_certificate_for_each_name(origins, sluice, pki):
    [o] = origins(1)
    a = pki.leaf("a.test", "DNS:a.test")
    b = pki.leaf("b.test", "DNS:b.test,DNS:*.wild.test")
    s = sluice(sluice_config([o], server_extra=tls_block([a, b])))
    port = tls_port(s)
    assert served_cert(port, "a.test", pki.ca)[0] == "a.test"
    assert served_cert(port, "b.test", pki.ca)[0] == "b.test"
    assert served_cert(port, "x.wild.test", pki.ca)[0] == "b.test"
    assert served_cert(port, "unknown.test", pki.ca)[0] == "a.test"  # the first is the default
    # And a verifying client gets through under both names.
    for name in ("a.test", "b.test", "x.wild.test"):
        p = curl_tls(port, f"https://{name}:{port}/", ca=pki.ca, name=name)
        assert (p.returncode, p.stdout) == (0, b"app-1\n"), p.stderr


def test_reload_rejects_a_bad_key_and_keeps_serving_the_old_certificate(origins, sluice, pki):
    [o] = origins(1)
    cert, key = pki.leaf("a.test", "DNS:a.test")
    other_cert, other_key = pki.leaf("other", "DNS:a.test")
    s = sluice(sluice_config([o], server_extra=tls_block([(cert, key)]), top=ADMIN))
    port = tls_port(s)
    before = served_cert(port, "a.test", pki.ca)

    # The key file is replaced by one that does not match the certificate: the reload fails,
    # naming the file at its line in the config, and the old certificate stays.
    key.write_bytes(other_key.read_bytes())
    s.proc.send_signal(signal.SIGHUP)
    line = s.log.wait_for(r"reload rejected: .*key does not match")
    assert re.search(rf"{re.escape(str(s.config_path))}:\d+:\d+: server\.tls\[0\]\.certificates\[0\]\.key: "
                     rf"'{re.escape(str(key))}': key does not match the certificate in '{re.escape(str(cert))}'",
                     line), line
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="failure") == 1, timeout=3)
    assert served_cert(port, "a.test", pki.ca) == before
    p = curl_tls(port, f"https://a.test:{port}/", ca=pki.ca)
    assert (p.returncode, p.stdout) == (0, b"app-1\n"), p.stderr

    # A good pair in the same files: the reload loads it and new connections get it.
    cert.write_bytes(other_cert.read_bytes())
    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="success") == 1, timeout=3)
    after = served_cert(port, "a.test", pki.ca)
    assert after[0] == "other" and after != before


def test_missing_certificate_is_a_config_error_at_start(tmp_path, pki):
    from conftest import SLUICE
    cert, key = pki.leaf("a.test", "DNS:a.test")
    path = tmp_path / "bad.toml"
    path.write_text(sluice_config(["127.0.0.1:9"], server_extra=tls_block([(tmp_path / "nope.pem", key)])))
    p = subprocess.run([str(SLUICE), "check", "--config", str(path)], capture_output=True, timeout=15)
    assert p.returncode != 0
    out = (p.stdout + p.stderr).decode()
    assert re.search(rf"{re.escape(str(path))}:\d+:\d+: server\.tls\[0\]\.certificates\[0\]\.cert: "
                     rf"cannot read '{re.escape(str(tmp_path / 'nope.pem'))}': No such file or directory", out), out


def test_min_version_13_refuses_a_tls12_client_and_counts_it(origins, sluice, pki):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config([o], server_extra=tls_block([cert], extra='min_version = "1.3"'), top=ADMIN))
    port = tls_port(s)
    old = curl_tls(port, "--tls-max", "1.2", f"https://a.test:{port}/", ca=pki.ca)
    assert old.returncode == 35, old  # CURLE_SSL_CONNECT_ERROR
    new = curl_tls(port, "--tlsv1.3", f"https://a.test:{port}/", ca=pki.ca)
    assert (new.returncode, new.stdout) == (0, b"app-1\n"), new.stderr
    wait_until(lambda: metric(s, "sluice_tls_handshake_failures_total") == 1, timeout=3)
    assert metric(s, "sluice_tls_handshakes_total") == 1
    # Counted, not logged at error (per connection failures are the client's business).
    assert not [l for l in s.log.poll() if " error " in l or " warn " in l]


def test_a_client_that_never_handshakes_is_closed_at_header_timeout(origins, sluice, pki):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    # defer_accept off: the timer starts at the handshake (test_errors.py has the default's).
    config = sluice_config([o], server_extra='header_timeout = "300ms"\ndefer_accept = false\n'
                           + tls_block([cert]), top=ADMIN)
    s = sluice(config.replace('level = "info"', 'level = "debug"'))
    port = tls_port(s)
    start = time.monotonic()  # before connecting: sluice's timer cannot start earlier
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        try:
            data = c.recv(1)  # a blocking read: returns when sluice closes
        except ConnectionResetError:
            data = b""
        elapsed = time.monotonic() - start
    assert data == b"", data
    assert_expired_on_time(elapsed, 0.3, "header_timeout on the TLS handshake")
    wait_until(lambda: metric(s, "sluice_tls_handshake_failures_total") == 1, timeout=3)
    s.log.wait_for(r"debug client 127\.0\.0\.1: TLS handshake failed")


@pytest.fixture
def tls_origin(origins, sluice, pki):
    """A TLS origin: a sluice terminating TLS (certificate for a.test and 127.0.0.1, signed by
    `pki`) in front of a plain sluice-origin. Returns (the back sluice, its TLS port)."""
    [o] = origins(1)
    cert = pki.leaf("origin", "DNS:a.test,IP:127.0.0.1")
    back = sluice(sluice_config([o], server_extra=tls_block([cert]), top=ADMIN), name="back.toml")
    return back, tls_port(back)


def front_config(port, upstream_extra, top=""):
    return sluice_config([f"https://127.0.0.1:{port}"], upstream_extra=upstream_extra, top=top)


def test_upstream_tls_with_the_right_ca_is_verified_and_pooled(sluice, pki, tls_origin):
    back, port = tls_origin
    front = sluice(front_config(port, f'tls_ca_file = "{pki.ca}"'), name="front.toml")
    with Conn(front.port) as c:
        for i in range(50):
            c.send(f"GET /r{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            r = c.read_response()
            assert (r.status, r.body) == (200, b"app-1\n"), r
    # 50 requests, one TLS connection from front to back: the pool keeps TLS sessions.
    assert metric(back, "sluice_tls_handshakes_total") == 1
    r = timed_request(front.port, target="/?echo=1")[0]
    # The back sluice saw TLS from the front one.
    assert ["X-Forwarded-Proto", "https"] in r.json()["headers"]


def test_upstream_tls_fails_closed_with_the_wrong_ca(sluice, tmp_path, tls_origin):
    back, port = tls_origin
    other = Pki(tmp_path / "other", name="another CA")
    front = sluice(front_config(port, f'tls_ca_file = "{other.ca}"'), name="front.toml")
    for _ in range(3):
        r = timed_request(front.port)[0]
        assert r.status == 502, r
        assert r.header("Sluice-Error") == ("upstream certificate verify failed: "
                                            "unable to get local issuer certificate"
                                            "; not retried: no other server to try"), r
    assert metric(back, "sluice_tls_handshakes_total") == 0


def test_upstream_tls_checks_the_server_name(sluice, pki, tls_origin):
    back, port = tls_origin
    ok = sluice(front_config(port, f'tls_ca_file = "{pki.ca}"\ntls_server_name = "a.test"'), name="ok.toml")
    assert timed_request(ok.port)[0].status == 200
    wrong = sluice(front_config(port, f'tls_ca_file = "{pki.ca}"\ntls_server_name = "b.test"'), name="wrong.toml")
    r = timed_request(wrong.port)[0]
    assert (r.status, r.header("Sluice-Error")) == (
        502, "upstream certificate verify failed: hostname mismatch" + NOT_RETRIED_ALONE), r


def test_health_probes_to_a_tls_server_use_tls(sluice, pki, tmp_path, tls_origin):
    back, port = tls_origin
    health = toml_table("upstreams.app.health", interval="200ms", timeout="150ms", rise=1, fall=1)
    good = sluice(front_config(port, f'tls_ca_file = "{pki.ca}"', top=ADMIN + health), name="good.toml")
    wait_until(lambda: (good.server_status(f"127.0.0.1:{port}").get("last_probe") or {}).get("passed"),
               timeout=5, what="a passing TLS probe")
    other = Pki(tmp_path / "other", name="another CA")
    bad = sluice(front_config(port, f'tls_ca_file = "{other.ca}"', top=ADMIN + health), name="bad.toml")
    wait_until(lambda: bad.server_status(f"127.0.0.1:{port}")["state"] == "down", timeout=5,
               what="the server down after a failed TLS probe")
    assert bad.server_status(f"127.0.0.1:{port}")["last_probe"]["detail"] == (
        "certificate verify failed: unable to get local issuer certificate")


def test_a_reload_that_changes_the_ca_retires_pooled_tls_connections(sluice, pki, tmp_path, tls_origin):
    """A connection verified under the old CA is not reused after a reload to another CA: the
    next request makes a new connection, which fails verification (502), instead of riding on the
    pooled one."""
    back, port = tls_origin
    front = sluice(front_config(port, f'tls_ca_file = "{pki.ca}"', top=ADMIN), name="front.toml")
    with Conn(front.port) as c:
        for i in range(5):
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert c.read_response().status == 200
    assert metric(back, "sluice_tls_handshakes_total") == 1  # one pooled connection
    other = Pki(tmp_path / "other", name="another CA")
    front.config_path.write_text(front_config(port, f'tls_ca_file = "{other.ca}"', top=ADMIN))
    front.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(front, "sluice_config_reloads_total", result="success") == 1, timeout=3)
    r = timed_request(front.port)[0]
    assert (r.status, r.header("Sluice-Error")) == (
        502, "upstream certificate verify failed: unable to get local issuer certificate"
        + NOT_RETRIED_ALONE), r


def tls_get(port, ca, path="/", name="a.test", sock_timeout=10):
    """One request on a new TLS connection (Python's ssl); returns (status line, body)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=sock_timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


def test_two_workers_share_the_certificates_under_parallel_handshakes(origins, sluice, pki):
    """Both workers serve TLS with the snapshot's contexts: 4 clients x 50 new TLS connections
    at once, every one answered."""
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config([o], workers=2, server_extra=tls_block([cert]), top=ADMIN))
    port = tls_port(s)
    results, errors = [], []

    def client():
        try:
            for _ in range(50):
                results.append(tls_get(port, pki.ca))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert results == [(b"HTTP/1.1 200 OK", b"app-1\n")] * 200
    assert metric(s, "sluice_tls_handshakes_total") == 200
    assert metric(s, "sluice_tls_handshake_failures_total") == 0


def test_sigterm_closes_idle_tls_connections_at_once(origins, sluice, pki):
    """An idle keep-alive TLS connection (waiting in a TLS read, not a readiness wait) is closed by
    graceful shutdown at once, and sluice exits 0 well before shutdown_timeout."""
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config([o], server_extra='shutdown_timeout = "20s"\n' + tls_block([cert])))
    port = tls_port(s)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="a.test") as c:
            c.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
            data = b""
            while not data.endswith(b"app-1\n"):
                data += c.recv(65536)
            assert data.startswith(b"HTTP/1.1 200 OK")
            start = time.monotonic()
            assert s.stop(timeout=10) == 0
            assert time.monotonic() - start < 5
            try:
                assert c.recv(1) == b""  # closed (close_notify or EOF), nothing else
            except (ssl.SSLError, ConnectionResetError):
                pass
