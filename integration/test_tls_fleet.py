"""Session ticket keys shared by a fleet through Redis ([fleet] with [[server.tls]] listeners
without session_ticket_key_file): a session made on one instance resumes on another, after a
reload and after a binary upgrade; keys rotate on ticket_key_rotation, a ticket resuming across
one rotation and not two; without Redis the instances keep their keys and keep serving.

A real redis-server on a loopback port (test_idempotency's fixture); openssl s_client saves the
session with its ticket (-sess_out) and offers it again (-sess_in)."""
import re
import signal

import pytest

from conftest import metric, wait_until
from test_fleet import fleet_config
from test_idempotency import redis  # noqa: F401 (the fixture: redis-server on a loopback port)
from test_tls import pki, tls_block, tls_port  # noqa: F401  (pki: the fixture)
from test_tls_resumption import VERSIONS, fixed_ports, new_session, resumed_after_an_upgrade, s_client


def fleet_tls_config(o, cert, redis_url, name, rotation=None):
    rotation_line = f'ticket_key_rotation = "{rotation}"' if rotation else ""
    return fleet_config([o], redis_url, name, fleet_extra=rotation_line, server_extra=tls_block([cert]))


def start(sluice, o, cert, r, names, rotation=None):
    return [sluice(fleet_tls_config(o, cert, r.url, n, rotation), name=f"{n}.toml") for n in names]


def ticket_keys(s):
    return s.admin("GET", "/api/fleet").json()["ticket_keys"]


def generation(s):
    return ticket_keys(s)["generation"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_hops_between_instances_and_survives_a_reload(sluice, origins, redis, pki, tmp_path, version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    r = redis()
    lb1, lb2 = start(sluice, o, cert, r, ["lb-1", "lb-2"])
    assert generation(lb1) == generation(lb2) == 1
    session = tmp_path / "session.pem"
    new_session(tls_port(lb1), pki.ca, version, session)
    assert s_client(tls_port(lb2), pki.ca, version, "-sess_in", session) == "Reused"
    lb2.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(lb2, "sluice_config_reloads_total", result="success") == 1, timeout=5)
    assert s_client(tls_port(lb2), pki.ca, version, "-sess_in", session) == "Reused"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_ticket_resumes_after_one_rotation_and_not_after_two(sluice, origins, redis, pki, tmp_path, version):
    """A ticket is sealed with the current key; one rotation later that key is the previous one
    (it still decrypts, on every instance), two rotations later it is gone."""
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    r = redis()
    lbs = start(sluice, o, cert, r, ["lb-1", "lb-2"], rotation="4s")
    lb1, lb2 = lbs
    session = tmp_path / "session.pem"
    g = generation(lb1)
    new_session(tls_port(lb1), pki.ca, version, session)
    if generation(lb1) != g:  # a rotation came between the two reads: the ticket's key is unknown
        g = generation(lb1)
        new_session(tls_port(lb1), pki.ca, version, session)
    wait_until(lambda: all(generation(s) == g + 1 for s in lbs), timeout=10, what="one rotation on both")
    assert s_client(tls_port(lb2), pki.ca, version, "-sess_in", session) == "Reused"
    wait_until(lambda: all(generation(s) >= g + 2 for s in lbs), timeout=10, what="a second rotation on both")
    assert s_client(tls_port(lb2), pki.ca, version, "-sess_in", session) == "New"
    # One instance made each generation: both logged the same ones in use, and one rotated.
    rotated = [line for s in lbs for line in s.log.poll() if re.search(rf"rotated to generation {g + 1}$", line)]
    assert len(rotated) == 1, rotated


def test_without_redis_the_instances_keep_their_keys_and_redis_gets_them_back(sluice, origins, redis, pki,
                                                                           tmp_path):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    r = redis()
    lb1, lb2 = start(sluice, o, cert, r, ["lb-1", "lb-2"])
    session = tmp_path / "session.pem"
    new_session(tls_port(lb1), pki.ca, "-tls1_3", session)
    port = r.port
    r.stop()  # SIGKILL; no persistence: it comes back empty
    for s in (lb1, lb2):
        s.log.wait_for(r"fleet: Redis at .* unreachable .*; session ticket keys stay as they are \(generation 1\)")
        assert ticket_keys(s)["redis_up"] is False
    assert s_client(tls_port(lb2), pki.ca, "-tls1_3", "-sess_in", session) == "Reused"
    assert s_client(tls_port(lb1), pki.ca, "-tls1_2") == "New"  # new handshakes are served too
    redis(port)
    for s in (lb1, lb2):
        s.log.wait_for(r"fleet: Redis at .* reachable again; session ticket keys resynced")
    # The restarted Redis holds the keys the fleet used: an instance started now resumes the session.
    [lb3] = start(sluice, o, cert, r, ["lb-3"])
    assert generation(lb3) == 1
    assert s_client(tls_port(lb3), pki.ca, "-tls1_3", "-sess_in", session) == "Reused"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_resumes_after_a_binary_upgrade(sluice, origins, redis, pki, version):
    [o] = origins(1)
    cert = pki.leaf("a.test", "DNS:a.test")
    r = redis()
    s = sluice(fixed_ports(fleet_tls_config(o, cert, r.url, "lb-1")))
    assert resumed_after_an_upgrade(s, pki.ca, version) == "Reused"
