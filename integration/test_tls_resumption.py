"""TLS session resumption with ticket keys from a file ([[server.tls]] session_ticket_key_file):
a session from before a reload, or from another sluice process given the same file, is resumed;
without the file each process (and each reload) has its own random ticket keys.

openssl s_client saves the session with the ticket it was sent (-sess_out) and offers it on the
next connection (-sess_in); its summary line says "Reused" or "New". Each case runs on TLS 1.2
(tickets in the handshake) and 1.3 (tickets after it)."""
import os
import re
import signal
import subprocess

import pytest

from conftest import SLUICE, closed_port, gone, metric, sluice_config, wait_until
from test_tls import ADMIN, pki, tls_block, tls_port  # noqa: F401  (pki: the fixture)

VERSIONS = ["-tls1_2", "-tls1_3"]


def s_client(port, ca, version, *session_args):
    """One connection with an HTTP request; "Reused" or "New" from s_client's summary."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "a.test",
                        "-CAfile", str(ca), "-verify_return_error", "-ign_eof", version,
                        *map(str, session_args)],
                       input=b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
                       capture_output=True, timeout=20)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0 and "200 OK" in out, out + p.stderr.decode(errors="replace")
    if "\nReused," in out:
        return "Reused"
    assert "\nNew," in out, out
    return "New"


def new_session(port, ca, version, path):
    assert s_client(port, ca, version, "-sess_out", path) == "New"
    assert os.path.getsize(path) > 0


@pytest.fixture
def ticket_key(tmp_path):
    """Two 80-byte keys, as `openssl rand 160` makes them."""
    path = tmp_path / "ticket.key"
    path.write_bytes(os.urandom(160))
    return path


def listener(o, cert, key_file=None, top=""):
    extra = f'session_ticket_key_file = "{key_file}"\n' if key_file else ""
    return sluice_config([o], server_extra=tls_block([cert], extra=extra), top=top)


def fixed_ports(config):
    """The config with a port of its own for each listener: the new process of an upgrade matches
    the sockets it inherits to the listen addresses, and port 0 matches any."""
    return re.sub(r'"127\.0\.0\.1:0"', lambda _: f'"127.0.0.1:{closed_port()}"', config)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_is_resumed_after_a_reload(origins, sluice, pki, ticket_key, tmp_path, version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(listener(o, cert, ticket_key, top=ADMIN))
    port = tls_port(s)
    session = tmp_path / "session.pem"
    new_session(port, pki.ca, version, session)
    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="success") == 1, timeout=5)
    assert s_client(port, pki.ca, version, "-sess_in", session) == "Reused"


def resumed_after_an_upgrade(s, ca, version):
    """A session made on `s`, then SIGUSR2: "Reused" or "New" on the process that took over
    (once the old one has exited), which is stopped after."""
    port = tls_port(s)
    session = s.config_path.parent / "session.pem"
    new_session(port, ca, version, session)
    s.proc.send_signal(signal.SIGUSR2)
    line = s.log.wait_for(r"upgrade: pid (\d+) accepts")
    pid = int(re.search(r"pid (\d+)", line).group(1))
    try:
        assert s.proc.wait(timeout=20) == 0
        return s_client(port, ca, version, "-sess_in", session)
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_is_resumed_after_a_binary_upgrade(origins, sluice, pki, ticket_key, version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(fixed_ports(listener(o, cert, ticket_key)))
    assert resumed_after_an_upgrade(s, pki.ca, version) == "Reused"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_hops_between_processes_sharing_the_key_file(origins, sluice, pki, ticket_key, tmp_path,
                                                               version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    first = sluice(listener(o, cert, ticket_key), name="first.toml")
    second = sluice(listener(o, cert, ticket_key), name="second.toml")
    session = tmp_path / "session.pem"
    new_session(tls_port(first), pki.ca, version, session)
    assert s_client(tls_port(second), pki.ca, version, "-sess_in", session) == "Reused"


@pytest.mark.parametrize("version", VERSIONS)
def test_without_the_key_file_another_process_does_a_full_handshake(origins, sluice, pki, tmp_path, version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    first = sluice(listener(o, cert), name="first.toml")
    second = sluice(listener(o, cert), name="second.toml")
    session = tmp_path / "session.pem"
    new_session(tls_port(first), pki.ca, version, session)
    assert s_client(tls_port(first), pki.ca, version, "-sess_in", session) == "Reused"  # it does resume
    assert s_client(tls_port(second), pki.ca, version, "-sess_in", session) == "New"


def test_a_bad_key_file_is_refused_by_check_and_reload(origins, sluice, pki, ticket_key, tmp_path):
    """A reload with a key file of the wrong size is rejected at the key's line and the old keys
    stay: a session made before it is still resumed."""
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(listener(o, cert, ticket_key, top=ADMIN))
    port = tls_port(s)
    session = tmp_path / "session.pem"
    new_session(port, pki.ca, "-tls1_3", session)
    ticket_key.write_bytes(os.urandom(48))  # nginx's AES-128 layout: not taken
    p = subprocess.run([str(SLUICE), "check", "--config", str(s.config_path)], capture_output=True, timeout=20)
    assert p.returncode != 0
    assert "session_ticket_key_file: '%s': must hold one or more 80-byte keys" % ticket_key in (p.stdout + p.stderr).decode()
    s.proc.send_signal(signal.SIGHUP)
    s.log.wait_for(r"reload rejected: .*:\d+:\d+: server\.tls\[0\]\.session_ticket_key_file: .*got 48 bytes")
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="failure") == 1, timeout=5)
    assert s_client(port, pki.ca, "-tls1_3", "-sess_in", session) == "Reused"
