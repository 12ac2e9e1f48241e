"""Every status sluice generates itself, with the Sluice-Error header that says why."""
import time

import pytest

from conftest import (Conn, assert_expired_on_time, closed_port, metric, run_client, sluice_config,
                      toml_table, wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def assert_no_byte_at(origin):
    """The origin received no byte of a refused request: sluice never connected to it (a head
    forwarded without its body is a connection; `requests` counts only whole requests). The
    origin counts a connection when its thread accepts it, which can come after the client read
    its answer: absence is watched for a while (a bounded window: there is no event to await)."""
    deadline = time.monotonic() + 0.2
    asked = 0
    while time.monotonic() < deadline:
        asked += 1  # each stats() is a connection of its own, counted
        assert origin.stats()["connections"] == asked, origin.stats()
        time.sleep(0.02)


def expect_error(port, data, status, reason, *, closes=True, timeout=5.0):
    """Sends `data`, reads one response: `status` with `Sluice-Error: reason`; then (when
    `closes`) the connection must be closed by sluice. Returns the response, with `elapsed`:
    seconds from connecting to the whole answer (a blocking read, no polling)."""
    start = time.monotonic()
    with Conn(port, timeout=timeout) as c:
        c.send(data)
        r = c.read_response()
        r.elapsed = time.monotonic() - start
        assert (r.status, r.header("Sluice-Error")) == (status, reason), r
        assert r.body.startswith(f"{status} ".encode()), r
        assert r.header("X-Request-Id"), r
        if closes:
            assert (r.header("Connection") or "").lower() == "close", r
            assert c.wait_closed(timeout=3), "sluice kept the connection open after the error"
        return r


def get(address, target="/"):
    return f"GET {target} HTTP/1.1\r\nHost: {address}\r\n\r\n".encode()


def test_502_when_the_server_refuses_connections(sluice):
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"]))
    expect_error(s.port, get(s.address), 502, "connect refused; not retried: no other server to try")


def test_503_when_the_upstream_has_no_servers(sluice):
    s = sluice(sluice_config([]))
    expect_error(s.port, get(s.address), 503, "no servers", closes=True)


def test_504_when_the_origin_is_slower_than_response_timeout(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, upstream_extra='response_timeout = "200ms"', access="json"))
    expect_error(s.port, get(s.address, "/?delay=2000"), 504,
                 "response timeout; not retried: no other server to try")
    (rec,) = s.access_records(1)
    assert (rec["status"], rec["attempts"]) == (504, 1), rec
    assert_expired_on_time(rec["duration_ms"] / 1000, 0.2, "response_timeout")


BAD_REQUESTS = {
    "cl_and_te": (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                  "content-length with transfer-encoding"),
    "te_and_cl": (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Length: 5\r\n\r\n0\r\n\r\n",
                  "content-length with transfer-encoding"),
    "obs_fold": (b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: first\r\n  second\r\n\r\n", "obs-fold"),
    "bare_lf": (b"GET / HTTP/1.1\nHost: a\n\n", "bare LF"),
    "bare_lf_in_fields": (b"GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", "bare LF"),
    "two_hosts": (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "repeated host"),
    "missing_host": (b"GET / HTTP/1.1\r\nX-A: b\r\n\r\n", "missing host"),
    "two_content_lengths": (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                            b"Content-Length: 1\r\n\r\nxx", "bad content-length"),
    "te_not_chunked": (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
                       "bad transfer-encoding"),
    "space_before_colon": (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", "space before colon"),
    "bad_chunk_size": (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"zz\r\nhello\r\n0\r\n\r\n", "bad chunk"),
    "http2_preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "bad version"),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_400_for_malformed_requests_then_close(scripted, sluice, name):
    """The client gets the 400; the origin gets no byte of the bad message."""
    origin = scripted("a")
    s = sluice(sluice_config([origin.address]))
    data, reason = BAD_REQUESTS[name]
    expect_error(s.port, data, 400, reason)
    origin.settle()
    assert origin.bytes_received() == b"", origin.conns


def test_400_closes_even_with_a_valid_request_behind_it(origins, sluice):
    """After a framing error nothing behind it is trusted: the pipelined request is not served."""
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    with Conn(s.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + get(s.address))
        r = c.read_response()
        assert r.status == 400
        assert c.wait_closed(timeout=3)
    assert_no_byte_at(os_[0])


def test_431_for_a_20kib_header(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    data = f"GET / HTTP/1.1\r\nHost: {s.address}\r\nX-Big: {'b' * 20 * 1024}\r\n\r\n".encode()
    expect_error(s.port, data, 431, "header too large")
    assert_no_byte_at(os_[0])


@pytest.mark.parametrize("size,status", [(16384, 200), (16385, 431)])
def test_max_header_bytes_boundary(origins, sluice, size, status):
    """A head of exactly max_header_bytes (16 KiB, request line and final CRLF included) is
    served; one byte more is not."""
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    head = f"GET / HTTP/1.1\r\nHost: {s.address}\r\nX-Big: \r\n\r\n"
    data = head.replace("X-Big: ", "X-Big: " + "b" * (size - len(head))).encode()
    assert len(data) == size
    with Conn(s.port) as c:
        assert c.request(data).status == status


@pytest.mark.parametrize("size,status", [(8192, 200), (8193, 414)])
def test_max_uri_bytes_boundary(origins, sluice, size, status):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    with Conn(s.port) as c:
        assert c.request(get(s.address, "/" + "u" * (size - 1))).status == status


def test_414_for_a_uri_over_8kib(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    expect_error(s.port, get(s.address, "/" + "u" * 9000), 414, "uri too long")
    assert_no_byte_at(os_[0])


def test_413_for_a_content_length_above_max_body_bytes(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='max_body_bytes = "1KiB"'))
    # The head alone is enough: the body is refused before it is read.
    data = f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\nContent-Length: 2048\r\n\r\n".encode()
    expect_error(s.port, data, 413, "body too large")
    assert_no_byte_at(os_[0])
    # At the limit it passes.
    with Conn(s.port) as c:
        r = c.request(f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\nContent-Length: 1024\r\n\r\n"
                      .encode() + b"x" * 1024)
        assert r.status == 200 and r.json()["body_bytes"] == 1024


def test_413_for_a_chunked_body_growing_past_max_body_bytes(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='max_body_bytes = "1KiB"'))
    chunk = b"400\r\n" + b"c" * 1024 + b"\r\n"
    data = (f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\nTransfer-Encoding: chunked\r\n\r\n"
            .encode() + chunk + chunk + b"0\r\n\r\n")
    expect_error(s.port, data, 413, "body too large")
    assert_no_byte_at(os_[0])
    # Exactly at the limit it passes.
    with Conn(s.port) as c:
        r = c.request(f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n".encode() + chunk + b"0\r\n\r\n")
        assert r.status == 200 and r.json()["body_bytes"] == 1024, r


def test_413_reaches_a_client_still_streaming_a_large_body(origins, sluice):
    """The client keeps writing a 64 MiB chunked body after sluice refused it: it must still read
    the 413 (not a connection reset)."""
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='max_body_bytes = "1KiB"'))
    rc, out = run_client("--url", s.url("/?sink=1"), "--upload", 64 << 20, "--chunked", timeout=20)
    assert out.get("status") == 413 and out.get("sluice_error") == "body too large", out


def test_404_when_no_route_matches(origins, sluice):
    os_ = origins(1)
    route = '[[route]]\npath_prefix = "/api/"\nupstream = "app"\n'
    s = sluice(sluice_config(os_, top=route))
    with Conn(s.port) as c:
        assert c.request(get(s.address, "/api/x")).body == b"app-1\n"
    expect_error(s.port, get(s.address, "/other"), 404, "no route", closes=True)


@pytest.mark.parametrize("case", ["404", "503"])
def test_connection_header_of_404_and_503_is_honoured(origins, sluice, case):
    """Either the error says `Connection: close` and the connection is closed, or it does not
    and the connection serves the next request: never a `close` that stays open."""
    if case == "404":
        os_ = origins(1)
        route = '[[route]]\npath_prefix = "/api/"\nupstream = "app"\n'
        s = sluice(sluice_config(os_, top=route))
    else:
        s = sluice(sluice_config([]))
    with Conn(s.port) as c:
        r = c.request(get(s.address, "/other"))
        assert r.status == int(case)
        if "close" in (r.header("Connection") or "").lower():
            assert c.wait_closed(timeout=1), "said Connection: close but kept the connection open"
        else:
            assert c.request(get(s.address, "/other")).status == int(case)


def test_408_for_a_client_that_stalls_mid_head(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='header_timeout = "300ms"'))
    r = expect_error(s.port, f"GET / HTTP/1.1\r\nHost: {s.address}\r\nX-Partial: ".encode(),
                     408, "header timeout")
    # No exchange started, so no access log record: the client's own blocking read measures it
    # (it started before sluice's timer could).
    assert_expired_on_time(r.elapsed, 0.3, "header_timeout")
    assert_no_byte_at(os_[0])


@pytest.mark.parametrize("framing,part", [
    ("Content-Length: 100", b"0123456789"),
    ("Transfer-Encoding: chunked", b"64\r\n0123456789"),
])
def test_408_for_a_client_that_stalls_mid_body(origins, sluice, framing, part):
    """Body bytes stop coming for idle_timeout: 408, and the half-sent upstream request is
    abandoned (its connection closed, not pooled)."""
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='idle_timeout = "300ms"', access="json"))
    expect_error(s.port, f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\n{framing}\r\n\r\n"
                 .encode() + part, 408, "body timeout")
    (rec,) = s.access_records(1)
    assert rec["status"] == 408, rec
    assert_expired_on_time(rec["duration_ms"] / 1000, 0.3, "idle_timeout")
    wait_until(lambda: os_[0].stats()["open_connections"] <= 1, timeout=3,
               what="upstream connection of the abandoned request closed")


def test_a_silent_new_connection_is_closed_after_header_timeout(origins, sluice):
    """No byte at all: nothing to answer, the connection is just closed. With `defer_accept`
    off, sluice accepts at the handshake and the timeout counts from there."""
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='header_timeout = "300ms"\ndefer_accept = false'))
    start = time.monotonic()
    with Conn(s.port) as c:
        assert c.wait_closed(timeout=3)  # a blocking read: returns when sluice closes
        assert_expired_on_time(time.monotonic() - start, 0.3, "header_timeout")


# The kernel hands a silent connection over at its first SYN-ACK retransmission (1 s, RFC 6298's
# initial RTO); header_timeout counts from there.
DEFERRED = 1.0


def test_by_default_a_silent_connection_waits_in_the_kernel_then_is_closed_at_header_timeout(
        origins, sluice):
    """`defer_accept` (the default): a connection that sends nothing costs sluice nothing until
    the kernel hands it over, about a second after the handshake; header_timeout then closes it.
    One that speaks after a pause of its own is served at once."""
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='header_timeout = "300ms"', top=ADMIN))
    start = time.monotonic()
    with Conn(s.port) as silent, Conn(s.port) as late:
        time.sleep(0.5)  # the pause under test: a client that has not spoken yet
        assert metric(s, "sluice_connections", side="client") == 0  # both still in the kernel
        late.send(f"GET / HTTP/1.1\r\nHost: {s.address}\r\n\r\n".encode())
        assert late.read_response().status == 200
        assert silent.wait_closed(timeout=5)
        assert_expired_on_time(time.monotonic() - start - DEFERRED, 0.3,
                               "header_timeout after the kernel's hand-over")
