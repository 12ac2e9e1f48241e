"""OCSP stapling on TLS listeners (docs/tls.md, "OCSP stapling"): sluice fetches the status of a
listener certificate whose AIA names a responder, in the background, and staples it; a revoked
certificate's answer is stapled once the responder says so; a responder that does not answer
never holds a handshake up.

The responder is `openssl ocsp` over the test's own CA index (index.txt, which it reads again
when it changes), answering with a nextUpdate one minute ahead (-nmin 1), so that sluice asks
again after 30 s. Every certificate is made by the test with the openssl CLI."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import metric, metric_samples, sluice_config, wait_until
from test_tls import ADMIN, Pki, openssl, tls_block, tls_port


class Responder:
    """`openssl ocsp` on an ephemeral port (it binds the wildcard address; the test only connects
    over loopback), signing with the CA's key, for the CA's index."""

    def __init__(self, pki):
        self.pki = pki
        self.index = pki.dir / "index.txt"
        self.index.write_text("")
        self.proc = subprocess.Popen(
            ["openssl", "ocsp", "-index", str(self.index), "-port", "0", "-rsigner", str(pki.ca),
             "-rkey", str(pki.ca_key), "-CA", str(pki.ca), "-nmin", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"ACCEPT \S+:(\d+)", line)
        assert m, line + self.proc.stderr.read1().decode()
        self.port = int(m.group(1))

    def record(self, cert, state="V"):
        """Sets `cert`'s line in the index: V (valid) or R (revoked)."""
        serial = openssl("x509", "-in", cert, "-noout", "-serial").decode().strip().split("=")[1]
        subject = "/CN=" + openssl("x509", "-in", cert, "-noout", "-subject", "-nameopt", "RFC2253").decode().strip().split("CN=")[1]
        revoked = "\t260101000000Z" if state == "R" else "\t"
        # The responder reads the index again when its inode (or times) change, once it has
        # answered the request it is waiting for: a new file renamed over it (whatever the
        # clock's resolution), then one request of the test's own, and the next fetch of sluice's
        # gets the new status.
        new = self.index.with_suffix(".new")
        new.write_text(f"{state}\t301231235959Z{revoked}\t{serial}\tunknown\t{subject}\n")
        os.replace(new, self.index)
        openssl("ocsp", "-issuer", self.pki.ca, "-cert", cert, "-url", f"http://127.0.0.1:{self.port}/",
                "-noverify")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def leaf_with_responder(pki, name, url):
    """(cert, key): a leaf for DNS:name whose AIA names `url`, the chain file holding the CA
    after it (the issuer sluice needs to ask for its status)."""
    key, csr, pem, ext = (pki.dir / f"{name}.{x}" for x in ("key", "csr", "pem", "ext"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    ext.write_text(f"subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\n"
                   f"authorityInfoAccess=OCSP;URI:{url}\n")
    openssl("x509", "-req", "-in", csr, "-CA", pki.ca, "-CAkey", pki.ca_key,
            "-CAcreateserial", "-out", pem, "-days", "1", "-extfile", ext)
    chain = pki.dir / f"{name}.chain.pem"
    chain.write_bytes(pem.read_bytes() + pki.ca.read_bytes())
    return chain, key


def s_client_status(port, pki, name="leaf.test"):
    """(seconds the handshake took, s_client's output) for a client asking for a staple."""
    start = time.monotonic()
    p = subprocess.run(["openssl", "s_client", "-status", "-connect", f"127.0.0.1:{port}",
                        "-servername", name, "-CAfile", str(pki.ca)],
                       input=b"", capture_output=True, timeout=15)
    return time.monotonic() - start, p.stdout.decode(errors="replace")


def stapled(out):
    """The stapled status ("good", "revoked", ...), or None when nothing was stapled."""
    if "OCSP response: no response sent" in out:
        return None
    assert "OCSP Response Status: successful" in out, out
    return re.search(r"Cert Status: (\w+)", out).group(1)


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki", "ocsp test CA")


def test_a_certificate_with_a_responder_is_stapled_good_then_revoked_and_kept_through_an_outage_and_reload(
        sluice, origins, pki):
    responder = Responder(pki)
    try:
        cert = leaf_with_responder(pki, "leaf.test", f"http://127.0.0.1:{responder.port}/")
        responder.record(cert[0], "V")
        [o] = origins(1)
        s = sluice(sluice_config([o], server_extra=tls_block([cert]), top=ADMIN))  # stapling is on by default
        port = tls_port(s)
        wait_until(lambda: stapled(s_client_status(port, pki)[1]) == "good", timeout=20,
                   what="a good staple")
        s.log.wait_for(r"OCSP: '.*leaf\.test\.chain\.pem' is good, stapled")
        # The responder's answers are valid for a minute (-nmin 1).
        assert 0 < metric(s, "sluice_tls_ocsp_staple_expiry_seconds", cert=str(cert[0]), status="good") <= 60
        assert 0 <= metric(s, "sluice_tls_ocsp_staple_age_seconds", cert=str(cert[0])) <= 60
        assert metric(s, "sluice_tls_ocsp_fetch_failures_total", cert=str(cert[0])) == 0

        # The certificate is revoked: sluice's next fetch (half-way to nextUpdate, 30 s) staples
        # the revocation instead of the good answer it had.
        responder.record(cert[0], "R")
        wait_until(lambda: stapled(s_client_status(port, pki)[1]) == "revoked", timeout=60,
                   interval=1, what="the revocation stapled")
        s.log.wait_for(r"OCSP: '.*leaf\.test\.chain\.pem' is REVOKED")
        assert metric_samples(s, "sluice_tls_ocsp_staple_expiry_seconds", status="good") == []
        assert 0 < metric(s, "sluice_tls_ocsp_staple_expiry_seconds", cert=str(cert[0]), status="revoked") <= 60

        # The responder goes away: handshakes go on, with the last answer while it is valid.
        responder.stop()
        took, out = s_client_status(port, pki)
        assert stapled(out) == "revoked"
        assert "Verify return code: 0 (ok)" in out
        assert took < 2.0, f"handshake took {took:.2f} s"
        # A reload builds new listener contexts: the certificate keeps its response.
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: metric(s, "sluice_config_reloads_total", result="success") == 1, timeout=5)
        assert stapled(s_client_status(port, pki)[1]) == "revoked"
    finally:
        responder.stop()


def test_a_responder_that_never_answers_holds_no_handshake_up(sluice, origins, pki):
    # A listening socket that never accepts: sluice's fetch connects and waits for an answer
    # that does not come (10 s), while every handshake goes on at once without a staple.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        cert = leaf_with_responder(pki, "leaf.test", f"http://127.0.0.1:{silent.getsockname()[1]}/")
        [o] = origins(1)
        s = sluice(sluice_config([o], server_extra=tls_block([cert])))
        port = tls_port(s)
        for _ in range(3):
            took, out = s_client_status(port, pki)
            assert stapled(out) is None
            assert "Verify return code: 0 (ok)" in out
            assert took < 2.0, f"handshake took {took:.2f} s"
    finally:
        silent.close()


def test_ocsp_stapling_false_staples_nothing(sluice, origins, pki):
    responder = Responder(pki)
    try:
        cert = leaf_with_responder(pki, "leaf.test", f"http://127.0.0.1:{responder.port}/")
        responder.record(cert[0], "V")
        # Two listeners on one certificate file: one stapling, one not. The stapling one proves
        # that the answer was fetched; the other never staples it.
        [o] = origins(1)
        s = sluice(sluice_config([o], server_extra=tls_block([cert]) + tls_block(
            [cert], extra="ocsp_stapling = false")))
        found = re.findall(r"listening on 127\.0\.0\.1:(\d+) \(TLS, server\.tls\[(\d)\]", "\n".join(s.log.lines))
        ports = {int(index): int(port) for port, index in found}
        assert len(ports) == 2
        wait_until(lambda: stapled(s_client_status(ports[0], pki)[1]) == "good", timeout=20,
                   what="a good staple on the stapling listener")
        took, out = s_client_status(ports[1], pki)
        assert stapled(out) is None
        assert "Verify return code: 0 (ok)" in out
    finally:
        responder.stop()
