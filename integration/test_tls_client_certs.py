"""Client certificates on TLS listeners (docs/tls.md): `verify_client` off, optional and required,
for clients showing a valid certificate, an expired one, one from another CA, and none; what the
origin sees of the certificate through header rules ($client_cert_*); what the access log says;
and a route with `require_client_cert` answering 403 to a client without a verified one.

Every certificate is made by the test with the openssl CLI (test_tls.Pki); no key is checked in."""
import http.client
import json
import re
import signal
import socket
import ssl

import pytest

from conftest import metric, sluice_config, toml_table, wait_until
from test_tls import Pki, openssl, tls_block, tls_port

# Header rules that show the origin every variable of the client certificate.
SHOW_CERT = ('request_headers = { set = { "X-Cert-Subject" = "$client_cert_subject", '
             '"X-Cert-San" = "$client_cert_san", "X-Cert-Fingerprint" = "$client_cert_fingerprint", '
             '"X-Cert-Verify" = "$client_cert_verify" } }')
ROUTES = """
[[route]]
path_prefix = "/"
upstream = "app"

[[route]]
path_prefix = "/secure/"
upstream = "app"
require_client_cert = true
"""
KINDS = ["valid", "expired", "wrong_ca", "none"]


class Clients:
    """The listener's certificate (a.test, from the server CA), and the four kinds of client:
    `valid` and `expired` signed by the client CA, `wrong_ca` by a CA sluice does not trust,
    `none` without a certificate."""

    def __init__(self, directory):
        self.server = Pki(directory / "server", "server CA")
        self.listener = self.server.leaf("a.test", "DNS:a.test")
        self.client_ca = Pki(directory / "clients", "client CA")
        self.other_ca = Pki(directory / "other", "other CA")
        self.certs = {
            "valid": self.client_ca.leaf("alice", "email:alice@example.com,DNS:alice.test"),
            "expired": self.client_leaf(self.client_ca, "bob", days=-1),
            "wrong_ca": self.other_ca.leaf("mallory", "DNS:mallory.test"),
            "none": None,
        }
        self.version = ssl.TLSVersion.MAXIMUM_SUPPORTED  # the highest TLS version clients offer

    @staticmethod
    def client_leaf(pki, name, days):
        """A leaf whose notAfter is `days` from now (negative: expired already)."""
        key, csr, pem = (pki.dir / f"{name}.{x}" for x in ("key", "csr", "pem"))
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
        openssl("x509", "-req", "-in", csr, "-CA", pki.ca, "-CAkey", pki.ca_key,
                "-CAcreateserial", "-out", pem, "-days", days)
        return pem, key

    def fingerprint(self, kind):
        out = openssl("x509", "-in", self.certs[kind][0], "-noout", "-fingerprint", "-sha256").decode()
        return out.strip().split("=", 1)[1].replace(":", "").lower()


@pytest.fixture
def clients(tmp_path):
    return Clients(tmp_path)


def config(o, clients, extra="", top=""):
    return sluice_config([o], server_extra=tls_block([clients.listener], extra=extra),
                         upstream_extra=SHOW_CERT, top=ROUTES + top, access="json")


def asking(clients, mode):
    return f'client_ca_file = "{clients.client_ca.ca}"\nverify_client = "{mode}"'


def start(sluice, origins, clients, mode):
    [o] = origins(1)
    s = sluice(config(o, clients, "" if mode is None else asking(clients, mode)))
    return s, o, tls_port(s)


def get(port, clients, kind, path="/?echo=1", resume=None):
    """One request on a new TLS connection showing `kind`'s certificate: (status, headers, body),
    or the ssl.SSLError / OSError that ended the connection instead. With `resume` (a dict), the
    connection offers resume["session"] when there is one, and leaves its own session there and
    whether it was resumed in resume["reused"]."""
    ctx = (resume or {}).get("ctx")  # a session is resumed by the context that made it
    if ctx is None:
        ctx = ssl.create_default_context(cafile=str(clients.server.ca))
        ctx.maximum_version = clients.version
        if clients.certs[kind] is not None:
            ctx.load_cert_chain(*map(str, clients.certs[kind]))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="a.test",
                                session=(resume or {}).get("session")) as tls:
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n".encode())
            r = http.client.HTTPResponse(tls)
            r.begin()
            answer = r.status, dict(r.getheaders()), r.read()
            if resume is not None:
                resume.update(ctx=ctx, session=tls.session, reused=tls.session_reused)
            return answer
    except (ssl.SSLError, OSError) as e:
        return e


def seen_at_origin(answer):
    """The X-Cert-* fields the origin received (its echo of the request's head)."""
    status, _, body = answer
    assert status == 200, answer
    return {k: v for k, v in json.loads(body)["headers"] if k.startswith("X-Cert-")}


def test_off_asks_for_no_certificate_and_shows_none(sluice, origins, clients):
    """verify_client left out ("off", today's behaviour): every client is served, whatever it
    holds; the origin gets no X-Cert-* line (each expands to nothing), and a route with
    require_client_cert refuses them all with 403."""
    s, o, port = start(sluice, origins, clients, None)
    for kind in KINDS:
        assert seen_at_origin(get(port, clients, kind)) == {}, kind
    before = o.stats()["requests"]
    for kind in KINDS:
        status, headers, _ = get(port, clients, kind, "/secure/x")
        assert (status, headers.get("Sluice-Error")) == (403, "client certificate required"), kind
    assert o.stats()["requests"] == before  # none of them reached the origin
    records = s.access_records(2 * len(KINDS))
    assert [r["client_cert_verify"] for r in records] == [None] * (2 * len(KINDS))
    assert [r["error"] for r in records[len(KINDS):]] == ["client certificate required"] * len(KINDS)


def test_optional_serves_every_client_and_the_origin_sees_what_it_showed(sluice, origins, clients):
    """verify_client = "optional": each kind is served, and the origin sees the subject, the
    first subjectAltName, the SHA-256 fingerprint and the verification's result; only the valid
    certificate passes require_client_cert."""
    s, o, port = start(sluice, origins, clients, "optional")
    expected = {
        "valid": {"X-Cert-Subject": "CN=alice", "X-Cert-San": "alice@example.com",
                  "X-Cert-Fingerprint": clients.fingerprint("valid"), "X-Cert-Verify": "SUCCESS"},
        "expired": {"X-Cert-Subject": "CN=bob", "X-Cert-Fingerprint": clients.fingerprint("expired"),
                    "X-Cert-Verify": "FAILED:certificate has expired"},
        "wrong_ca": {"X-Cert-Subject": "CN=mallory", "X-Cert-San": "mallory.test",
                     "X-Cert-Fingerprint": clients.fingerprint("wrong_ca"),
                     "X-Cert-Verify": "FAILED:unable to verify the first certificate"},
        "none": {"X-Cert-Verify": "NONE"},
    }
    for kind in KINDS:
        assert seen_at_origin(get(port, clients, kind)) == expected[kind], kind
    before = o.stats()["requests"]
    answers = {kind: get(port, clients, kind, "/secure/x") for kind in KINDS}
    assert {k: (a[0], a[1].get("Sluice-Error")) for k, a in answers.items()} == {
        "valid": (200, None), "expired": (403, "client certificate required"),
        "wrong_ca": (403, "client certificate required"), "none": (403, "client certificate required")}
    assert o.stats()["requests"] == before + 1  # the valid one alone
    records = s.access_records(2 * len(KINDS))
    assert [(r["status"], r["client_cert_verify"], r["client_cert_subject"]) for r in records[len(KINDS):]] == [
        (200, "SUCCESS", "CN=alice"), (403, "FAILED:certificate has expired", "CN=bob"),
        (403, "FAILED:unable to verify the first certificate", "CN=mallory"), (403, "NONE", None)]


# What the client is told: the TLS alert sluice's OpenSSL sends for each kind (TLS 1.3 tells a
# client after its own side of the handshake completed, on its first read).
ALERTS = {"expired": "CERTIFICATE_EXPIRED", "wrong_ca": "UNKNOWN_CA", "none": "CERTIFICATE_REQUIRED"}


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_required_ends_the_handshake_of_a_client_without_a_valid_certificate(sluice, origins, clients,
                                                                             version):
    """verify_client = "required": the valid client is served and the origin sees SUCCESS; the
    expired, the wrong CA's and the absent certificate each end in a TLS alert, and no byte of
    their requests reaches the origin."""
    s, o, port = start(sluice, origins, clients, "required")
    clients.version = getattr(ssl.TLSVersion, version)
    assert seen_at_origin(get(port, clients, "valid"))["X-Cert-Verify"] == "SUCCESS"
    before = o.stats()["requests"]
    for kind, alert in ALERTS.items():
        failure = get(port, clients, kind)
        assert isinstance(failure, ssl.SSLError), (kind, failure)
        if kind != "none" or version == "TLSv1_3":  # TLS 1.2 has no certificate_required alert
            assert alert in str(failure), (kind, failure)
    assert o.stats()["requests"] == before
    assert get(port, clients, "valid", "/secure/x")[0] == 200


def test_a_reload_turns_verification_on_and_refuses_a_mode_without_its_ca(sluice, origins, clients):
    """verify_client is live: a reload asking for "required" without client_ca_file is refused,
    naming the key at its line, and the listener keeps serving as before; with the CA, the
    reload takes effect on new connections."""
    [o] = origins(1)
    admin = toml_table("admin", listen="127.0.0.1:0")
    s = sluice(config(o, clients, top=admin))
    port = tls_port(s)
    assert seen_at_origin(get(port, clients, "none")) == {}

    s.config_path.write_text(config(o, clients, 'verify_client = "required"', top=admin))
    s.proc.send_signal(signal.SIGHUP)
    line = s.log.wait_for(r"reload rejected: .*verify_client")
    assert re.search(rf'{re.escape(str(s.config_path))}:\d+:\d+: server\.tls\[0\]\.verify_client: '
                     rf'verify_client = "required" needs client_ca_file', line), line
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="failure") == 1, timeout=3)
    assert seen_at_origin(get(port, clients, "none")) == {}

    s.config_path.write_text(config(o, clients, asking(clients, "required"), top=admin))
    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="success") == 1, timeout=3)
    assert "CERTIFICATE_REQUIRED" in str(get(port, clients, "none"))
    assert seen_at_origin(get(port, clients, "valid"))["X-Cert-Verify"] == "SUCCESS"


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_a_resumed_session_keeps_the_certificate_of_its_full_handshake(sluice, origins, clients, version):
    """A client resuming its session shows no certificate again: what the full handshake verified
    is what the resumed connection's requests see and what require_client_cert lets through."""
    s, o, port = start(sluice, origins, clients, "optional")
    clients.version = getattr(ssl.TLSVersion, version)
    resume = {}
    first = seen_at_origin(get(port, clients, "valid", resume=resume))
    assert resume["reused"] is False and first["X-Cert-Verify"] == "SUCCESS"
    again = get(port, clients, "valid", "/secure/?echo=1", resume=resume)
    assert resume["reused"] is True
    assert seen_at_origin(again) == first
