"""The admin listener against a browser on the same host (issue #14, "Admin listener"): with no
token (the shipped config), a cross-site form POST, a text/plain fetch() and a DNS-rebinding page
(a foreign Host) change nothing; 100 idle connections cannot starve /healthz; the CLI still works.
Raw sockets on loopback, what a browser would send."""
import re
import socket
import threading
import time

from conftest import (Conn, assert_expired_on_time, sluice_cli, sluice_config, timed_request,
                      toml_table, wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")
DRAIN = "/api/upstreams/app/servers/app-1/drain"


def post(s, path, headers, host=None, body=b""):
    return timed_request(s.admin_port, "POST", path, headers=headers, body=body,
                         host=host or s.admin_address)[0]


def test_a_cross_site_form_post_is_refused_and_drains_nothing(origins, sluice):
    s = sluice(sluice_config(origins(2), top=ADMIN))
    form = [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site")]
    r = post(s, DRAIN, form, body=b"x=1")
    assert r.status == 403, r
    assert "cross-site" in r.json()["error"], r
    # An older browser without Fetch Metadata still sends Origin on a cross-site POST.
    r = post(s, DRAIN, [("Content-Type", "application/x-www-form-urlencoded"),
                        ("Origin", "http://evil.example")], body=b"x=1")
    assert r.status == 403, r
    assert s.server_status("app-1")["draining"] is False


def test_a_text_plain_post_is_415_and_reloads_nothing(origins, sluice):
    s = sluice(sluice_config(origins(2), top=ADMIN))
    for headers in ([("Content-Type", "text/plain")], []):
        r = post(s, "/api/reload", headers, body=b"{}")
        assert r.status == 415, r
        r = post(s, DRAIN, headers)
        assert r.status == 415, r
    assert s.status()["config_version"] == 1
    assert s.server_status("app-1")["draining"] is False


def test_a_foreign_host_is_421_for_reading_and_for_changing(origins, sluice):
    """A DNS-rebinding page runs under its own name: the browser sends that name as Host."""
    s = sluice(sluice_config(origins(2), top=ADMIN))
    for method, path in (("GET", "/api/status"), ("GET", "/"), ("POST", DRAIN)):
        r = timed_request(s.admin_port, method, path, host=f"rebind.evil.example:{s.admin_port}",
                          headers=[("Content-Type", "application/json")])[0]
        assert r.status == 421, (method, path, r)
    assert s.server_status("app-1")["draining"] is False
    # The listener's own names work: localhost and the listen address.
    for host in (f"localhost:{s.admin_port}", s.admin_address):
        assert timed_request(s.admin_port, "GET", "/api/status", host=host)[0].status == 200


def test_allowed_hosts_adds_a_name(origins, sluice):
    s = sluice(sluice_config(origins(1), top=toml_table(
        "admin", listen="127.0.0.1:0", allowed_hosts=["sluice.internal"])))
    assert timed_request(s.admin_port, "GET", "/healthz", host="sluice.internal:9901")[0].status == 200
    assert timed_request(s.admin_port, "GET", "/healthz", host="other.internal")[0].status == 421


def test_a_json_post_from_the_same_origin_is_accepted(origins, sluice):
    s = sluice(sluice_config(origins(2), top=ADMIN))
    r = post(s, DRAIN, [("Content-Type", "application/json"),
                        ("Origin", f"http://{s.admin_address}"), ("Sec-Fetch-Site", "same-origin")],
             body=b"{}")
    assert r.status == 200, r
    assert s.server_status("app-1")["draining"] is True


def test_the_cli_still_drains_undrains_and_reloads(origins, sluice):
    os_ = origins(2)
    s = sluice(sluice_config(os_, top=ADMIN))
    where = ["--admin", s.admin_address]
    # `drain --wait` returns once app-1 has nothing in flight: a slow request is, when it starts.
    answers = []
    slow = [threading.Thread(target=lambda: answers.append(
        timed_request(s.port, target="/?delay=1000", timeout=10)[0].status)) for _ in range(2)]
    for t in slow:  # round robin: one on each server
        t.start()
    wait_until(lambda: os_[0].stats()["in_flight"] == 1, timeout=5, what="a request on app-1")
    r = sluice_cli("drain", "--upstream", "app", "--server", "app-1", "--wait", *where)
    assert r.returncode == 0, r
    assert os_[0].stats()["in_flight"] == 0  # it waited for app-1's request to end
    for t in slow:
        t.join(timeout=10)
    assert answers == [200, 200]
    assert s.server_status("app-1")["draining"] is True
    r = sluice_cli("undrain", "--upstream", "app", "--server", "app-1", *where)
    assert r.returncode == 0, r
    r = sluice_cli("reload", *where)
    assert r.returncode == 0 and "config version 2" in r.stdout, r


def test_a_hundred_idle_connections_do_not_starve_healthz(origins, sluice):
    s = sluice(sluice_config(origins(1), top=ADMIN))
    idle = []
    try:
        for _ in range(100):
            idle.append(socket.create_connection(("127.0.0.1", s.admin_port), timeout=5))
        # The probe queues behind all 100 in the accept backlog; idle ones make way for it.
        for _ in range(5):
            start = time.monotonic()
            r = timed_request(s.admin_port, "GET", "/healthz", host=s.admin_address, timeout=2)[0]
            elapsed = time.monotonic() - start
            assert r.status == 200, r
            # Starved, it would wait for an idle connection's 5 s header timeout.
            assert elapsed < 1.0, elapsed
    finally:
        for c in idle:
            c.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(origins, sluice):
    s = sluice(sluice_config(origins(1), top=ADMIN))
    start = time.monotonic()  # before the connect: sluice's timer cannot start earlier
    with Conn(s.admin_port, timeout=10) as c:
        assert c.wait_closed(timeout=8)
        assert_expired_on_time(time.monotonic() - start, 5.0, "admin header_timeout")


def admin_connections(s, n, source="127.0.0.1"):
    """`n` connections to the admin listener from `source`, each accepted (its eviction turn
    taken) before the next is made: a request and its answer go over it, and it stays open,
    waiting for its next request."""
    conns = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", s.admin_port), timeout=5, source_address=(source, 0))
        c.sendall(f"GET /healthz HTTP/1.1\r\nHost: {s.admin_address}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
        while len(body) < length:
            body += c.recv(65536)
        assert head.startswith(b"HTTP/1.1 200") and len(body) == length, data
        conns.append(c)
    return conns


def closed_now(c, timeout=2.0):
    """True when the admin listener closed `c` (within `timeout`), False when it is still open."""
    c.settimeout(timeout)
    try:
        return c.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_one_client_holds_at_most_16_admin_connections_the_oldest_idle_makes_way(origins, sluice):
    """The 17th to 20th connections from one address each close that address's oldest
    connection waiting for a request: connections 1 to 4 are closed, 5 to 20 stay open."""
    s = sluice(sluice_config(origins(1), top=ADMIN))
    conns = admin_connections(s, 20)
    try:
        assert [closed_now(c) for c in conns[:4]] == [True] * 4
        assert [closed_now(c, timeout=0.2) for c in conns[4:]] == [False] * 16
    finally:
        for c in conns:
            c.close()


def test_the_admin_listener_holds_at_most_64_connections_the_oldest_idle_makes_way(origins, sluice):
    """16 connections from each of 127.0.0.2 to 127.0.0.5 fill the 64; one more from 127.0.0.6
    closes the oldest connection of all (127.0.0.2's first) and nothing else."""
    s = sluice(sluice_config(origins(1), top=ADMIN))
    conns = []
    try:
        for k in range(2, 6):
            conns += admin_connections(s, 16, source=f"127.0.0.{k}")
        assert not any(closed_now(c, timeout=0.05) for c in conns)
        conns += admin_connections(s, 1, source="127.0.0.6")
        assert closed_now(conns[0])
        assert [closed_now(c, timeout=0.05) for c in conns[1:]] == [False] * 64
    finally:
        for c in conns:
            c.close()


def test_a_later_request_must_be_complete_5s_after_its_first_byte(origins, sluice):
    """On a kept-alive connection the next request may wait idle (60 s) for its first byte; from
    that byte on its head must be complete within 5 s, else the connection is closed."""
    s = sluice(sluice_config(origins(1), top=ADMIN))
    [c] = admin_connections(s, 1)
    with c:
        start = time.monotonic()  # before the byte: sluice's timer cannot start earlier
        c.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert closed_now(c, timeout=8)
        assert_expired_on_time(time.monotonic() - start, 5.0, "admin header_timeout")
