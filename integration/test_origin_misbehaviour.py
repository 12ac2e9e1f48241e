"""What an origin does wrong does not reach the client (issue 14): codings before chunked are
kept with their bytes, framing fields of responses without content are dropped, an origin's
Sluice-* fields are dropped, and the text access log escapes what it quotes."""
import json
import re
import socket

from conftest import Conn, LogReader, metric, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")

GZIP_BODY = bytes(range(256)) * 4


def answer_with(raw):
    return lambda req: raw


def test_gzip_chunked_is_relayed_with_its_codings(raw_origin, sluice):
    """Transfer-Encoding: gzip, chunked: the client gets that field and the (re-chunked) bytes
    unchanged, so it knows to gunzip them."""
    origin = raw_origin(respond=answer_with(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        + b"%x\r\n" % len(GZIP_BODY) + GZIP_BODY + b"\r\n0\r\n\r\n"))
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r.status == 200
    assert r.header("Transfer-Encoding") == "gzip, chunked"
    assert r.body == GZIP_BODY


def test_gzip_chunked_to_an_http10_client_is_a_bad_response(raw_origin, sluice):
    """HTTP/1.0 has no Transfer-Encoding: the codings could not be passed on, so 502."""
    origin = raw_origin(respond=answer_with(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.0\r\nHost: a\r\n\r\n")
    assert r.status == 502 and r.header("Sluice-Error") == "bad response"


def test_no_framing_fields_on_responses_without_content(raw_origin, sluice):
    """RFC 9110 §8.6, §15.2: 204, 304 and 103 forwarded without the Content-Length the origin
    put on them; the next response on the connection is read where it starts."""
    for status, reason in [(204, "No Content"), (304, "Not Modified")]:
        origin = raw_origin(respond=answer_with(
            f"HTTP/1.1 {status} {reason}\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\n".encode()))
        s = sluice(sluice_config([origin.address]))
        with Conn(s.port) as c:
            c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            head = c.read_raw_head()
        assert head.startswith(f"HTTP/1.1 {status}".encode()), head
        assert b"content-length" not in head.lower() and b"ETag" in head, head
    origin = raw_origin(respond=lambda req: RawOriginEarlyHints)
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        interim = c.read_raw_head()
        final = c.read_response()
    assert interim.startswith(b"HTTP/1.1 103"), interim
    assert b"content-length" not in interim.lower() and b"Link" in interim, interim
    assert final.status == 200 and final.body == b"ok"


RawOriginEarlyHints = (b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nContent-Length: 7\r\n\r\n"
                       b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def test_origin_cannot_speak_as_sluice(raw_origin, sluice):
    origin = raw_origin(respond=answer_with(
        b"HTTP/1.1 200 OK\r\nSluice-Error: no route\r\nSluice-Attempts: 3\r\n"
        b"Content-Length: 2\r\n\r\nok"))
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r.status == 200 and r.body == b"ok"
    assert r.header("Sluice-Error") is None and r.header("Sluice-Attempts") is None


def test_text_access_log_escapes_quotes(raw_origin, sluice):
    """A target with `"` cannot end the quoted request field early: `"GET /a\\"b HTTP"`."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address], access="text"))
    access = LogReader(s.proc, s.proc.stdout)
    with Conn(s.port) as c:
        r = c.request(b'GET /a"b\\c HTTP/1.1\r\nHost: a\r\n\r\n')
    assert r.status == 200
    line = access.wait_for(r"GET /a")
    assert '"GET /a\\"b\\\\c"' in line, line
    assert re.search(r'"GET (?:[^"\\]|\\.)*" 200 ', line), line


def cut_after(raw):
    """A script for RawOrigin: send `raw`, then close the connection."""
    def script(conn):
        conn.sendall(raw)
        conn.shutdown(socket.SHUT_RDWR)
    return lambda req: script


def test_body_cut_after_the_head_is_a_failure(raw_origin, sluice):
    """A short Content-Length body then close: the client has the 200 head already, so its
    connection is cut; the access log says `upstream body cut`, /metrics counts it under
    code="cut" (not 2xx) and the server's failure count (passive health) has it."""
    origin = raw_origin(respond=cut_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
    s = sluice(sluice_config([origin.address], access="json", top=ADMIN))
    access = LogReader(s.proc, s.proc.stdout)
    with Conn(s.port) as c:
        c.send(b"GET /cut HTTP/1.1\r\nHost: a\r\n\r\n")
        head = c.read_raw_head()
        assert head.startswith(b"HTTP/1.1 200"), head
        assert c.wait_closed(timeout=5)
    record = json.loads(access.wait_for(r'"target":"/cut"'))
    assert record["status"] == 200 and record["error"] == "upstream body cut", record
    metrics = s.metrics_text()
    assert re.search(r'sluice_requests_total\{[^}]*code="cut"[^}]*\} 1', metrics), metrics
    assert not re.search(r'sluice_requests_total\{[^}]*code="2xx"[^}]*\} [1-9]', metrics)
    entry = s.status()["upstreams"][0]["servers"][0]
    assert entry["failures"] == 1, entry


def test_bad_first_chunk_is_a_bad_response(raw_origin, sluice):
    """The body's first chunk is malformed before anything reached the client: 502 bad
    response (not `upstream reset`), counted as sluice's own answer, not as the origin's 2xx."""
    origin = raw_origin(respond=cut_after(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"))
    s = sluice(sluice_config([origin.address], top=ADMIN))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r.status == 502 and r.header("Sluice-Error") == "bad response", r
    # The answer is counted when the exchange ends, just after its last byte left: wait for it.
    counted = r'sluice_requests_total\{[^}]*code="5xx",source="sluice"\} 1'
    wait_until(lambda: re.search(counted, s.metrics_text()), timeout=3, what="the 502 counted")
    assert not re.search(r'sluice_requests_total\{[^}]*code="2xx"[^}]*\} [1-9]', s.metrics_text())


def test_response_lines_leave_in_their_order_up_to_101(raw_origin, sluice):
    """The response head goes on as the origin's bytes with sluice's edits spliced in (the head
    index, docs/http.md): field lines keep their order of arrival, lines of one name included; up
    to 101 field lines pass, a head with more is a bad response (502)."""
    def respond(req):
        n = {"/many": 101, "/too-many": 102}.get(req["target"], 0)
        lines = (b"".join(b"X-F%d: %d\r\n" % (i, i) for i in range(n - 1)) if n
                 else b"Set-Cookie: a=1\r\nX-Mid: 1\r\nSet-Cookie: b=2\r\n")
        return b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\nok"

    origin = raw_origin(respond=respond)
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        assert r.status == 200 and r.body == b"ok"
        assert [(k, v) for k, v in r.headers if k in ("Set-Cookie", "X-Mid")] == [
            ("Set-Cookie", "a=1"), ("X-Mid", "1"), ("Set-Cookie", "b=2")]
        r = c.request(b"GET /many HTTP/1.1\r\nHost: a\r\n\r\n")
        assert r.status == 200 and r.body == b"ok"
        assert [k for k, _ in r.headers if k.startswith("X-F")] == ["X-F%d" % i for i in range(100)]
        r = c.request(b"GET /too-many HTTP/1.1\r\nHost: a\r\n\r\n")
        assert r.status == 502
        assert r.header("Sluice-Error").startswith("bad response")
    # One oversized answer spoils only its own request: on default settings the next ones, of
    # either size, are still served by that origin.
    with Conn(s.port) as c:
        for target in (b"/many", b"/"):
            r = c.request(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
            assert (r.status, r.body) == (200, b"ok"), (target, r)


def test_a_client_that_leaves_mid_answer_is_logged_and_counted_as_a_cut(origins, sluice):
    """A client that reads the head and a little of a large answer, then resets its connection:
    the access log says `client closed` (not a clean 200), /metrics counts it as a cut by the
    client (code="cut", source="client"), not as the origin's 2xx, and the server's failure count
    (passive health) does not have it: the origin did nothing wrong."""
    (origin,) = origins(1)
    s = sluice(sluice_config([origin.address], access="json", top=ADMIN))
    access = LogReader(s.proc, s.proc.stdout)
    size = 64 * 1024 * 1024  # far more than the loopback socket buffers hold
    with Conn(s.port) as c:
        c.send(b"GET /?size=%d HTTP/1.1\r\nHost: a\r\n\r\n" % size)
        head = c.read_raw_head()
        assert head.startswith(b"HTTP/1.1 200"), head
        c.sock.recv(4096)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    record = json.loads(access.wait_for(r'"target":"/\?size='))
    assert record["status"] == 200 and record["error"] == "client closed", record
    assert 0 < record["bytes_out"] < size, record
    assert metric(s, "sluice_requests_total", upstream="app", server=origin.address, code="cut", source="client") == 1
    assert metric(s, "sluice_requests_total", upstream="app", server=origin.address, code="2xx", source="upstream") == 0
    entry = s.status()["upstreams"][0]["servers"][0]
    assert entry["failures"] == 0, entry
