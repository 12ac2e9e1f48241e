"""Behaviour the docs promise that no other test pinned: each test names the doc it holds to.
Default settings unless the test is about a knob; the origin's view wherever the promise is
about what reaches an origin."""
import signal
import socket
import subprocess
import time

import pytest

from conftest import (SLUICE, Conn, RawOrigin, closed_port, assert_expired_on_time, metric, metric_samples,
                      SCHEDULING_SLACK, TICK, sluice_config,
                      sluice_cli, toml_table, wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def get(target="/"):
    return f"GET {target} HTTP/1.1\r\nHost: a\r\n\r\n".encode()


def test_connect_is_answered_501_and_reaches_no_origin(scripted, sluice):
    """docs/http.md: `CONNECT` is answered with 501."""
    origin = scripted("a")
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n")
    assert (r.status, r.header("Sluice-Error")) == (501, "method not supported"), r
    origin.settle()
    assert (origin.accepted, origin.bytes_received()) == (0, b"")


def test_a_503_whose_retry_after_exceeds_the_deadline_is_not_retried(scripted, sluice):
    """docs/retries.md rule 6: a Retry-After on a 503 longer than what is left of the deadline
    means no retry (counted as `deadline`); a Retry-After of 0 is retried on the other server."""
    for retry_after, answered_by, bad_runs, good_runs in (("3600", None, 1, 0), ("0", "good", 1, 1)):
        bad = scripted("bad", status=503, headers=f"Retry-After: {retry_after}\r\n")
        good = scripted("good")
        s = sluice(sluice_config([bad.address, good.address], top=ADMIN))
        with Conn(s.port) as c:
            r = c.request(get())
        assert r.header("X-Origin") == (answered_by or "bad"), r
        assert r.status == (200 if answered_by else 503), r
        assert (bad.count(), good.count()) == (bad_runs, good_runs), retry_after
        skipped = metric(s, "sluice_retries_skipped_total", upstream="app", reason="deadline")
        assert skipped == (0 if answered_by else 1), retry_after
        s.stop()


def test_default_deadline_is_attempts_times_the_per_try_timeout(scripted, sluice):
    """docs/configuration.md: deadline 0 (the default) = attempts (2) × per_try_timeout: two
    hanging servers each get one try of 200 ms, then 504 at 400 ms."""
    hangs = [scripted(f"h{i}", behaviour="hang") for i in range(2)]
    s = sluice(sluice_config([h.address for h in hangs], access="json",
                             upstream_extra=toml_table("upstreams.app.retry",
                                                       per_try_timeout="200ms")))
    with Conn(s.port) as c:
        r = c.request(get())
    assert (r.status, r.header("Sluice-Error")) == (504, "response timeout; not retried: attempts exhausted"), r
    (rec,) = s.access_records(1)
    assert rec["attempts"] == 2, rec
    assert_expired_on_time(rec["duration_ms"] / 1000, 0.4, "default deadline")
    assert [h.count() for h in hangs] == [1, 1]


def blackhole():
    """A listener whose accept queue is full: further SYNs are dropped, so a connect to it
    times out (on loopback, where nothing else would). Returns (address, sockets to close)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    fillers = []
    for _ in range(4):  # backlog 0 still queues one or two: fill them
        f = socket.socket()
        f.setblocking(False)
        try:
            f.connect(lst.getsockname())
        except BlockingIOError:
            pass
        fillers.append(f)
    time.sleep(0.05)  # let the handshakes of the fillers complete (kernel work, no event to await)
    return f"127.0.0.1:{lst.getsockname()[1]}", [lst, *fillers]


def test_connect_timeout_is_a_502_retried_elsewhere_and_counted(scripted, sluice):
    """docs/http.md and docs/retries.md: a connect that does not complete within
    connect_timeout is `connect timeout` (502 when nothing else is left), it never reached the
    server so any method is retried on another server, and it is counted."""
    address, socks = blackhole()
    try:
        good = scripted("good")
        s = sluice(sluice_config([address], top=ADMIN, access="json",
                                 upstream_extra='connect_timeout = "200ms"'))
        with Conn(s.port) as c:
            r = c.request(get())
        assert (r.status, r.header("Sluice-Error")) == (
            502, "connect timeout; not retried: no other server to try"), r
        (rec,) = s.access_records(1)
        assert_expired_on_time(rec["duration_ms"] / 1000, 0.2, "connect_timeout")
        s.stop()

        s = sluice(sluice_config([address, good.address], top=ADMIN,
                                 upstream_extra='connect_timeout = "200ms"'))
        with Conn(s.port) as c:
            r = c.request(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
        assert (r.status, r.header("X-Origin"), r.header("Sluice-Attempts")) == (200, "good", "2"), r
        assert good.count("POST") == 1
        assert metric(s, "sluice_retries_total", upstream="app", reason="connect_timeout") == 1
    finally:
        for x in socks:
            x.close()


def test_fail_on_connect_counts_a_connect_timeout(scripted, sluice):
    """docs/configuration.md: `fail_on = ["connect"]` counts every connect failure (`refused`
    only refused ones): a connect that timed out counts against the server, as `retry.on =
    ["connect"]` retries it. One failure ejects it here (max_fails = 1; 1 of 2 servers is within
    max_ejected_percent)."""
    address, socks = blackhole()
    try:
        good = scripted("good")
        s = sluice(sluice_config([address, good.address], top=ADMIN, upstream_extra=(
            'connect_timeout = "200ms"\n'
            + toml_table("upstreams.app.passive", max_fails=1, fail_on=["connect"]))))
        with Conn(s.port) as c:  # round robin: the first request goes to the first server
            r = c.request(get())
        assert (r.status, r.header("X-Origin"), r.header("Sluice-Attempts")) == (200, "good", "2"), r
        line = s.log.wait_for(rf"server {address}: up -> ejected \(ejected\)", timeout=3)
        assert line.endswith("1 failures in 10s: connect timeout; ejected for 10s"), line
        assert s.server_status(address)["state"] == "ejected"
    finally:
        for x in socks:
            x.close()


def test_a_stale_pooled_connection_is_resent_without_using_an_attempt(scripted, sluice):
    """docs/retries.md: a reused keep-alive connection closed by the origin as the request
    arrived is retried once on a fresh connection to the same server; it does not use an
    attempt (attempts = 1 still succeeds) and is not a server failure."""
    once = scripted("once", behaviour="once")  # answers the first request of each connection
    s = sluice(sluice_config([once.address], top=ADMIN, access="json",
                             upstream_extra=toml_table("upstreams.app.retry", attempts=1)))
    for _ in range(3):
        with Conn(s.port) as c:
            r = c.request(get())
        assert (r.status, r.header("X-Origin")) == (200, "once"), r
        assert r.header("Sluice-Attempts") is None, r
    # Each request after the first went out on the pooled connection (dropped) and again on a
    # fresh one: 1 + 2 + 2 requests received, on 3 connections.
    assert (once.count(), once.accepted) == (5, 3)
    assert [rec["attempts"] for rec in s.access_records(3)] == [1, 1, 1]
    assert s.server_status(once.address)["state"] == "up"
    assert metric(s, "sluice_ejections_total", upstream="app") == 0
    assert sum(metric_samples(s, "sluice_retries_total", upstream="app")) == 0


def test_interim_1xx_answers_reach_the_client_before_the_final_one(raw_origin, sluice):
    """docs/http.md: 1xx interim responses (other than 100) are passed to HTTP/1.1 clients."""
    def respond(req):
        return b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + \
            RawOrigin.answer(req)
    origin = raw_origin(respond)
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        c.send(get("/x"))
        hint = c.read_response(interim=True)
        assert (hint.status, hint.header("Link")) == (103, "</style.css>; rel=preload"), hint
        r = c.read_response()
        assert (r.status, r.header("X-Seen")) == (200, "/x"), r
        assert c.request(get("/y")).header("X-Seen") == "/y"  # still in sync


def test_header_timeout_bounds_a_started_request_on_a_kept_alive_connection(scripted, sluice):
    """docs/configuration.md: idle_timeout applies between requests, header_timeout to a whole
    head once its first byte arrived, on a kept-alive connection too: a second request that
    stalls mid-head gets 408 at header_timeout, long before idle_timeout."""
    origin = scripted("a")
    s = sluice(sluice_config([origin.address],
                             server_extra='header_timeout = "300ms"\nidle_timeout = "30s"'))
    with Conn(s.port, timeout=10) as c:
        assert c.request(get("/first")).status == 200
        start = time.monotonic()
        c.send(b"GET /second HTTP/1.1\r\nHost: a\r\nX-Partial: ")
        r = c.read_response()
        elapsed = time.monotonic() - start
        assert (r.status, r.header("Sluice-Error")) == (408, "header timeout"), r
        assert c.wait_closed(timeout=3)
    assert_expired_on_time(elapsed, 0.3, "header_timeout")
    origin.settle()
    assert [e["target"] for e in origin.executed] == ["/first"] and origin.unparsed() == {}


def test_shutdown_timeout_0s_closes_a_request_in_flight_at_once(scripted, sluice):
    """docs/configuration.md: `shutdown_timeout = "0s"` = close at once on SIGTERM."""
    hang = scripted("hang", behaviour="hang")
    s = sluice(sluice_config([hang.address], server_extra='shutdown_timeout = "0s"'))
    with Conn(s.port, timeout=10) as c:
        c.send(get())
        wait_until(lambda: hang.count() == 1, what="the request at the origin")
        s.proc.send_signal(signal.SIGTERM)
        cut = s.log_time(r"shutdown timeout: closing 1 connection") - s.log_time(r"graceful shutdown")
        assert s.proc.wait(timeout=5) == 0
        with pytest.raises(EOFError):
            c.read_response()
    # At once: the drain poll (20 ms) and scheduling, no timeout to wait for.
    assert 0 <= cut <= 0.020 + TICK + SCHEDULING_SLACK, cut


def drain_args(s, server):
    return ["--upstream", "app", "--server", server, "--admin", s.admin_address]


def start_waiting_drain(s, server, timeout="20s"):
    return subprocess.Popen([str(SLUICE), "drain", *drain_args(s, server), "--wait",
                             "--timeout", timeout],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def with_a_request_held(scripted, sluice):
    """sluice in front of one origin that holds the one request sent to it."""
    hang = scripted("hang", behaviour="hang")
    s = sluice(sluice_config([hang.address], top=ADMIN))
    held = Conn(s.port, timeout=10)
    held.send(get())
    wait_until(lambda: hang.count() == 1, what="the request at the origin")
    return hang, s, held


def test_drain_wait_timing_out_exits_1_naming_what_is_in_flight(scripted, sluice):
    """docs/admin.md: on timeout, `sluice: timeout after T: U/S still has N request(s) in
    flight`, exit 1."""
    hang, s, held = with_a_request_held(scripted, sluice)
    with held:
        p = start_waiting_drain(s, hang.address, timeout="300ms")
        out, err = p.communicate(timeout=10)
    assert p.returncode == 1, (out, err)
    assert f"timeout after 300ms: app/{hang.address} still has 1 request(s) in flight" in err, err


def test_drain_wait_exits_1_when_the_server_is_undrained_meanwhile(scripted, sluice):
    hang, s, held = with_a_request_held(scripted, sluice)
    with held:
        p = start_waiting_drain(s, hang.address)
        wait_until(lambda: s.server_status(hang.address)["draining"], what="draining")
        assert sluice_cli("undrain", *drain_args(s, hang.address)).returncode == 0
        out, err = p.communicate(timeout=10)
    assert p.returncode == 1, (out, err)


def test_drain_wait_exits_0_when_a_reload_removed_the_server(scripted, sluice):
    hang, s, held = with_a_request_held(scripted, sluice)
    other = scripted("other")
    with held:
        p = start_waiting_drain(s, hang.address)
        wait_until(lambda: s.server_status(hang.address)["draining"], what="draining")
        s.config_path.write_text(sluice_config([other.address], top=ADMIN))
        assert s.admin("POST", "/api/reload").json()["ok"] is True
        out, err = p.communicate(timeout=10)
    assert p.returncode == 0, (out, err)
    assert "no longer configured" in out + err, (out, err)


def test_skipped_retries_are_counted_by_reason(scripted, sluice):
    """docs/admin.md: sluice_retries_skipped_total{reason} counts each failure not retried,
    by why: an unkeyed POST that reached a dropping server is `not idempotent`; with
    attempts = 1 a refused connect is `attempts exhausted`."""
    dropper, good = scripted("dropper", behaviour="drop"), scripted("good")
    s = sluice(sluice_config([dropper.address, good.address], top=ADMIN))
    with Conn(s.port) as c:
        r = c.request(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
    assert (r.status, dropper.count("POST"), good.count()) == (502, 1, 0), r
    assert metric(s, "sluice_retries_skipped_total", upstream="app", reason="not_idempotent") == 1
    assert sum(metric_samples(s, "sluice_retries_skipped_total", upstream="app")) == 1
    s.stop()

    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"], top=ADMIN,
                             upstream_extra=toml_table("upstreams.app.retry", attempts=1)))
    with Conn(s.port) as c:
        assert c.request(get()).status == 502
    assert metric(s, "sluice_retries_skipped_total", upstream="app",
                  reason="attempts_exhausted") == 1
    assert sum(metric_samples(s, "sluice_retries_skipped_total", upstream="app")) == 1


def test_a_refusing_server_is_ejected_once_and_counted(scripted, sluice):
    """Default passive checks (docs/health.md): a server refusing connections is ejected after
    its failures; every request is still answered by the other one (each failure retried), and
    sluice_ejections_total says 1."""
    good = scripted("good")
    refusing = f"127.0.0.1:{closed_port()}"
    s = sluice(sluice_config([refusing, good.address], top=ADMIN))
    for _ in range(12):
        with Conn(s.port) as c:
            r = c.request(get())
        assert (r.status, r.header("X-Origin")) == (200, "good"), r
    assert metric(s, "sluice_ejections_total", upstream="app") == 1
    assert s.server_status(refusing)["state"] == "ejected"
    retried = metric(s, "sluice_retries_total", upstream="app", reason="connect_refused")
    assert good.count() == 12 and retried == 3, retried


def test_a_request_of_101_field_lines_passes_and_102_are_431_before_any_origin(scripted, sluice):
    """docs/http.md: the head index keeps up to 101 field lines (HAProxy's tune.http.maxhdr); a
    request with more is answered 431 `header too large` and reaches no origin."""
    origin = scripted("a")
    s = sluice(sluice_config([origin.address]))

    def head(lines):  # Host plus lines - 1 others
        filler = "".join(f"Filler-{i}: v\r\n" for i in range(lines - 1))
        return f"GET / HTTP/1.1\r\nHost: a\r\n{filler}\r\n".encode()

    with Conn(s.port) as c:
        r = c.request(head(102))
    assert (r.status, r.header("Sluice-Error")) == (431, "header too large"), r
    origin.settle()
    assert (origin.accepted, origin.bytes_received()) == (0, b"")
    with Conn(s.port) as c:
        r = c.request(head(101))
    assert r.status == 200, r
    origin.settle()
    assert origin.count() == 1 and origin.bytes_received().count(b"\r\nFiller-") == 100
