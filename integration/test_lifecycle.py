"""Connection lifecycle: graceful shutdown, stale pooled connections, max_connections."""
import signal
import threading
import time

from conftest import (LOG_RESOLUTION, SANITIZED, SCHEDULING_SLACK, TICK, Conn,
                      assert_expired_on_time, sluice_config, wait_until)


def get(address, target="/"):
    return f"GET {target} HTTP/1.1\r\nHost: {address}\r\n\r\n".encode()


def test_sigterm_lets_in_flight_requests_finish_then_exits_0(origins, sluice):
    """Ten 2-second requests in flight at SIGTERM: all ten get their 200, an idle keep-alive
    connection is closed at once, no new connection is served, and the process exits 0 as soon as
    the ten are done, long before shutdown_timeout."""
    os_ = origins(1)
    s = sluice(sluice_config(os_, workers=2, server_extra='shutdown_timeout = "20s"'))

    # Idle keep-alive connections, sixteen so that every worker (SO_REUSEPORT) has some.
    idle = [Conn(s.port) for _ in range(16)]
    for c in idle:
        assert c.request(get(s.address)).status == 200

    results = [None] * 10

    def slow_request(i):
        try:
            with Conn(s.port, timeout=15) as c:
                r = c.request(get(s.address, "/?delay=2000"))
                results[i] = (r, time.monotonic())
        except Exception as e:  # reported by the assertion below
            results[i] = (e, time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=slow_request, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    wait_until(lambda: os_[0].stats()["in_flight"] == 10, timeout=3, what="10 requests in flight")

    sigterm_at = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)

    # Idle keep-alive connections are closed at SIGTERM, not when the busy ones finish.
    for c in idle:
        assert c.wait_closed(timeout=1.0), "idle keep-alive connection not closed at SIGTERM"
        c.close()
    assert time.monotonic() - sigterm_at < 1.0

    # A new connection is refused (or at least not served). Made once every worker has shown
    # that it is shutting down (closed its idle connections): each worker learns of the SIGTERM
    # by its own post(), and one that has not yet can still serve a new connection.
    try:
        with Conn(s.port, timeout=1.0) as late:
            late.send(get(s.address))
            r = late.read_response(timeout=1.0)
            raise AssertionError(f"a connection made {time.monotonic() - sigterm_at:.3f}s after "
                                 f"SIGTERM was served: {r}")
    except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, EOFError, TimeoutError):
        pass

    exited_at = wait_until(lambda: s.proc.poll() is not None and time.monotonic(), timeout=10,
                           interval=0.005, what="sluice exit")
    for t in threads:
        t.join(timeout=10)
    assert s.proc.returncode == 0
    for r, _ in results:
        assert not isinstance(r, Exception), results
        assert r.status == 200 and r.body == b"app-1\n", r
        assert (r.header("Connection") or "").lower() == "close", r
    # Exit came after the requests' 2 s (they were answered, not cut) and well before the 20 s.
    assert exited_at - started >= 1.9, exited_at - started
    assert exited_at - sigterm_at < 4.0, exited_at - sigterm_at
    assert max(done for _, done in results) <= exited_at + 0.5


def test_sigterm_with_nothing_in_flight_exits_at_once(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='shutdown_timeout = "20s"'))
    with Conn(s.port) as c:
        assert c.request(get(s.address)).status == 200
        start = time.monotonic()
        assert s.stop(signal.SIGTERM) == 0
        assert time.monotonic() - start < 2.0
        assert c.wait_closed(timeout=1)


def test_shutdown_timeout_cuts_requests_that_run_too_long(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='shutdown_timeout = "300ms"'))
    with Conn(s.port, timeout=10) as c:
        c.send(get(s.address, "/?delay=5000"))
        wait_until(lambda: os_[0].stats()["in_flight"] == 1, timeout=3, what="request in flight")
        assert s.stop(signal.SIGTERM) == 0
        assert c.wait_closed(timeout=1)
    # sluice's own log: from the signal to the cut (millisecond stamps).
    cut = s.log_time(r"shutdown timeout: closing 1 connection") - s.log_time(r"graceful shutdown")
    assert_expired_on_time(cut + LOG_RESOLUTION, 0.3, "shutdown_timeout")


def test_pooled_connections_closed_by_idle_origins_are_not_an_error(origins, sluice):
    """The origins close idle connections after 0.3 s, so every pooled connection is stale by the
    time round robin picks its server again. Each request (made once the origins have closed
    their side) still gets a 200, never a 502."""
    os_ = origins(3, extra_args=("--idle-timeout", "0.3"))
    s = sluice(sluice_config(os_))
    seen = []
    with Conn(s.port, timeout=10) as c:
        for i in range(6):
            r = c.request(get(s.address))
            seen.append((r.status, r.header("Sluice-Error"), r.body))
            # Wait until every origin has closed sluice's pooled connection (only the /stats
            # connection itself is open): a condition with a deadline, not a fixed sleep.
            wait_until(lambda: all(o.stats()["open_connections"] <= 1 for o in os_), timeout=5,
                       what="origins closed the idle pooled connections")
    assert seen == [(200, None, f"app-{i % 3 + 1}\n".encode()) for i in range(6)]
    assert [o.stats()["requests"] for o in os_] == [2, 2, 2]


def test_max_connections_holds_the_third_connection_until_one_closes(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, workers=1, server_extra="max_connections = 2"))
    first, second = Conn(s.port), Conn(s.port)
    try:
        assert first.request(get(s.address)).status == 200
        assert second.request(get(s.address)).status == 200
        third = Conn(s.port)  # completes in the kernel's backlog
        try:
            third.send(get(s.address))
            try:
                r = third.read_response(timeout=0.7)
                raise AssertionError(f"third connection served beyond max_connections: {r}")
            except TimeoutError:
                pass
            first.close()
            closed_at = time.monotonic()
            r = third.read_response(timeout=3)
            assert r.status == 200 and r.body == b"app-1\n", r
            assert time.monotonic() - closed_at < 2.0
            # The second connection still works too.
            assert second.request(get(s.address)).status == 200
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_client_gone_mid_upload_does_not_leak_the_upstream_connection(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    o = os_[0]
    with Conn(s.port) as c:
        c.send(f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\nContent-Length: {10 << 20}\r\n\r\n"
               .encode() + b"u" * (1 << 20))
        wait_until(lambda: o.stats()["in_flight"] == 1, timeout=3, what="upload reached origin")
    wait_until(lambda: o.stats()["open_connections"] <= 1 and o.stats()["in_flight"] == 0,
               timeout=3, what="origin connection closed after the client left")
    with Conn(s.port) as c:
        assert c.request(get(s.address)).status == 200


def test_client_gone_mid_download_stops_the_transfer(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    # Under a sanitizer its fixed overhead is there from the start: the budget counts from here.
    limit = 64 * 1024 + (s.rss_kib() if SANITIZED else 0)
    o = os_[0]
    with Conn(s.port) as c:
        c.send(get(s.address, f"/?size={1 << 30}"))
        got = 0
        while got < (1 << 20):
            got += len(c.sock.recv(65536))
    wait_until(lambda: o.stats()["open_connections"] <= 1, timeout=3,
               what="origin connection closed after the client left")
    assert s.peak_rss_kib() < limit
    with Conn(s.port) as c:
        assert c.request(get(s.address)).status == 200


def test_idle_client_connection_is_closed_after_idle_timeout(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='idle_timeout = "300ms"'))
    with Conn(s.port) as c:
        assert c.request(get(s.address)).status == 200
        # sluice's idle timer started when it wrote the answer, a fraction of a millisecond
        # before this read returned it: LOG_RESOLUTION covers that lag.
        start = time.monotonic()
        assert c.wait_closed(timeout=3)  # a blocking read: returns when sluice closes
        assert_expired_on_time(time.monotonic() - start + LOG_RESOLUTION, 0.3, "idle_timeout")


def test_keepalive_0_disables_upstream_pooling(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, upstream_extra="keepalive = 0"))
    o = os_[0]
    o.reset_stats()
    with Conn(s.port) as c:
        for _ in range(5):
            assert c.request(get(s.address)).status == 200
    # Five upstream connections plus the /stats one.
    assert o.stats()["connections"] == 6


def test_pooled_connection_is_closed_after_keepalive_timeout(raw_origin, sluice):
    o = raw_origin()  # never closes a connection itself
    s = sluice(sluice_config([o.address], upstream_extra='keepalive_timeout = "200ms"'))
    with Conn(s.port) as c:
        assert c.request(get(s.address)).status == 200
        # The pool's idle clock started when the answer's last byte left the origin, before this
        # read returned it: LOG_RESOLUTION covers that lag.
        answered = time.monotonic()
        pooled = o.wait_closed(0, timeout=3)  # the origin's blocking read sees sluice's FIN
        assert pooled.eof, pooled
        wait_until(lambda: pooled.closed is not None, what="the origin closing its side")
        # Idle pooled connections are swept once a second (the worker's sweep): closed within
        # [keepalive_timeout, keepalive_timeout + 1 s + tick].
        idle = pooled.closed - answered + LOG_RESOLUTION
        assert 0.2 <= idle <= 0.2 + 1.0 + TICK + SCHEDULING_SLACK, idle
        assert c.request(get(s.address)).status == 200
    assert o.connections == 2  # the second request on a new upstream connection
