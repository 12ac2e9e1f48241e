"""HTTP/1.1 clients reaching the servers of an h2c or h2 upstream (docs/http2.md): requests go as
HTTP/2 streams on connections the worker shares, bodies both ways, answers framed for the client
(chunked when the server gave no length), never-processed streams retried, broken answers cut.
The server is python3-h2's, sending within the flow-control windows sluice grants it."""
import hashlib
import socket
import ssl
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import pytest

from conftest import Conn, curl_with_code, metric, sluice_config, toml_table, wait_until
from test_grpc import H2Origin
from test_tls import pki  # noqa: F401 (a fixture)

ADMIN = toml_table("admin", listen="127.0.0.1:0")
H2C = 'protocol = "h2c"'


class H2Server:
    """A cleartext (or, with `tls`, TLS with ALPN h2) HTTP/2 server. Paths:
    /echo        200, the request's body, with no content-length
    /bytes/N     200, N bytes of a fixed pattern, no content-length (?length: with it)
    /status/N    status N, no body
    /cut         200, 1000 bytes of a body announced as 100000, then RST_STREAM(INTERNAL_ERROR)
    /early       413 as soon as the request's head came, then RST_STREAM(NO_ERROR) (RFC 9113 §8.1)
    /noread      the body is never read (its window never opens again)
    /bighead/N   200 with a field of N bytes
    anything else: 200 "from NAME\\n" with its content-length.
    Records each whole request's fields (a dict) and body, the paths of the streams sluice reset,
    the PINGs it answered; counts its connections. Each PING it answers it follows with one of its
    own: sluice's ACK of that says sluice has read the answer (`pings_read`). freeze(): the connections open so far stop
    answering (a hung server, or a path that drops packets)."""

    def __init__(self, name="h2", tls=None):
        self.name, self.tls = name, tls
        self.heads, self.bodies, self.resets, self.connections = [], [], [], 0
        self.pings, self.pings_read, self.frozen = 0, 0, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.connection, args=(conn, self.connections), daemon=True).start()

    def freeze(self):
        self.frozen = self.connections

    def connection(self, sock, index):
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
                assert sock.selected_alpn_protocol() == "h2"
            self.speak(sock, index)
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            sock.close()

    def speak(self, sock, index):
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        c.initiate_connection()
        sock.sendall(c.data_to_send())
        heads, bodies, paths = {}, {}, {}
        out = {}  # stream -> [bytes still to send, then "end" or "reset"]
        while True:
            data = sock.recv(65536)
            if not data:
                return
            if index <= self.frozen:  # silent from now on, until sluice closes the connection
                deadline = time.monotonic() + 30
                while sock.recv(65536) and time.monotonic() < deadline:
                    pass
                return
            for event in c.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    heads[event.stream_id] = dict((k.decode(), v.decode()) for k, v in event.headers)
                    paths[event.stream_id] = heads[event.stream_id][":path"]
                    if paths[event.stream_id] == "/early":
                        c.send_headers(event.stream_id, [(":status", "413"), ("content-length", "0")], end_stream=True)
                        c.reset_stream(event.stream_id, error_code=h2.errors.ErrorCodes.NO_ERROR)
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    if paths[event.stream_id] != "/noread":
                        c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    head, body = heads.pop(event.stream_id), bodies.pop(event.stream_id, b"")
                    self.heads.append(head)
                    self.bodies.append(body)
                    self.respond(c, event.stream_id, head, body, out)
                elif isinstance(event, h2.events.PingReceived):
                    self.pings += 1
                    c.ping(b"sluice?!")
                elif isinstance(event, h2.events.PingAckReceived):
                    self.pings_read += 1
                elif isinstance(event, h2.events.StreamReset):
                    out.pop(event.stream_id, None)
                    heads.pop(event.stream_id, None)
                    if event.remote_reset:
                        self.resets.append(paths[event.stream_id])
            self.flush(c, out)
            sock.sendall(c.data_to_send())

    def respond(self, c, sid, head, body, out):
        path = head[":path"]
        if path == "/echo":
            c.send_headers(sid, [(":status", "200"), ("content-type", "application/octet-stream")])
            out[sid] = [body, "end"]
        elif path.startswith("/bytes/"):
            n = int(path.split("/")[2].split("?")[0])
            fields = [(":status", "200")] + ([("content-length", str(n))] if "?length" in path else [])
            c.send_headers(sid, fields)
            out[sid] = [pattern(n), "end"]
        elif path.startswith("/bighead/"):
            c.send_headers(sid, [(":status", "200"), ("x-big", "b" * int(path.split("/")[2]))], end_stream=True)
        elif path.startswith("/status/"):
            c.send_headers(sid, [(":status", path.split("/")[2])], end_stream=True)
        elif path == "/cut":
            c.send_headers(sid, [(":status", "200"), ("content-length", "100000")])
            out[sid] = [pattern(1000), "reset"]
        else:
            answer = ("from %s\n" % self.name).encode()
            c.send_headers(sid, [(":status", "200"), ("content-length", str(len(answer)))])
            out[sid] = [b"" if head[":method"] == "HEAD" else answer, "end"]

    @staticmethod
    def flush(c, out):
        """What each stream has to send, within its window and the connection's."""
        for sid in list(out):
            rest, then = out[sid]
            while rest:
                n = min(len(rest), c.local_flow_control_window(sid), c.max_outbound_frame_size)
                if n <= 0:
                    break
                c.send_data(sid, rest[:n])
                rest = rest[n:]
            out[sid][0] = rest
            if not rest:
                if then == "end":
                    c.end_stream(sid)
                else:
                    c.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
                del out[sid]

    def close(self):
        self.sock.close()


def pattern(n):
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]


@pytest.fixture
def h2_server():
    made = []

    def start(*args, **kwargs):
        made.append(H2Server(*args, **kwargs))
        return made[-1]
    yield start
    for s in made:
        s.close()


def curl(*args, timeout=30):
    """curl over HTTP/1.1: (status, headers lowercased, body, curl's exit code)."""
    return curl_with_code("--http1.1", *args, timeout=timeout)


def front(sluice, server, upstream_extra=H2C, **kwargs):
    return sluice(sluice_config([server.address], upstream_extra=upstream_extra, top=ADMIN, **kwargs))


def test_http11_requests_reach_an_h2c_server_as_http2_streams(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    status, headers, body, _ = curl("-H", "X-Custom: v", s.url("/a?x=1"))
    assert (status, body) == (200, b"from h2\n")
    assert headers["content-length"] == "8" and "x-request-id" in headers
    status, _, body, _ = curl("--data-binary", "hello", s.url("/echo"))
    assert (status, body) == (200, b"hello")
    get, post = o.heads
    assert (get[":method"], get[":scheme"], get[":path"], get[":authority"]) == ("GET", "http", "/a?x=1",
                                                                                  f"127.0.0.1:{s.port}")
    assert get["x-custom"] == "v" and get["x-forwarded-for"] == "127.0.0.1"
    # RFC 9113 §8.2.2: no connection-specific field, and Host only as :authority.
    assert not {"connection", "keep-alive", "transfer-encoding", "upgrade", "host"} & set(get)
    assert (post[":method"], post.get("content-length"), o.bodies[1]) == ("POST", "5", b"hello")


def test_keep_alive_requests_share_one_connection_to_the_server(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    with Conn(s.port) as c:
        for i in range(5):
            c.send(f"GET /n{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            r = c.read_response()
            assert (r.status, r.body) == (200, b"from h2\n")
    assert [h[":path"] for h in o.heads] == [f"/n{i}" for i in range(5)]
    assert o.connections == 1
    assert metric(s, "sluice_upstream_http2_connections", upstream="app", server=o.address) == 1


def test_large_bodies_both_ways_and_chunked_framing_towards_the_client(sluice, h2_server, tmp_path):
    o = h2_server()
    s = front(sluice, o)
    big = tmp_path / "big"
    data = bytes(range(256)) * 4096 * 3  # 3 MiB: streamed, far past the relay block and the windows
    big.write_bytes(data)
    status, headers, body, _ = curl("--data-binary", f"@{big}", s.url("/echo"), timeout=60)
    assert status == 200 and headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(data).hexdigest()
    assert o.heads[-1].get("content-length") == str(len(data)) and o.bodies[-1] == data
    # A chunked upload reaches the server as DATA, with neither length nor transfer-encoding.
    status, _, body, _ = curl("-H", "Transfer-Encoding: chunked", "--data-binary", f"@{big}", s.url("/echo"),
                              timeout=60)
    assert status == 200 and body == data
    assert o.bodies[-1] == data and not {"transfer-encoding", "content-length"} & set(o.heads[-1])
    # A length the server gave is kept; an HTTP/1.0 client gets an unsized answer up to the close.
    status, headers, body, _ = curl(s.url("/bytes/200000?length"))
    assert (status, headers.get("content-length"), body) == (200, "200000", pattern(200000))
    p = subprocess.run(["curl", "-sS", "--http1.0", "-D", "/dev/stderr", "--max-time", "20",
                        s.url("/bytes/150000")], capture_output=True, timeout=25)
    assert p.returncode == 0 and p.stdout == pattern(150000)
    assert "transfer-encoding" not in p.stderr.decode().lower()


def test_answers_without_a_body(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    with Conn(s.port) as c:
        # HTTP/2 has no reason phrase: the registered one goes to HTTP/1.1 clients.
        c.send(b"HEAD /status/404 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert c.read_raw_head().startswith(b"HTTP/1.1 404 Not Found\r\n")
        c.send(b"HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n")
        r = c.read_response(head=True)
        assert (r.status, r.header("Content-Length"), r.body) == (200, "8", b"")
        c.send(b"GET /status/204 HTTP/1.1\r\nHost: t\r\n\r\n")
        r = c.read_response()
        assert (r.status, r.body) == (204, b"")
        assert r.header("Transfer-Encoding") is None
        c.send(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")  # the connection goes on
        assert c.read_response().body == b"from h2\n"


def test_an_upgrade_is_refused_and_never_reaches_the_server(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    with Conn(s.port) as c:
        c.send(b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        r = c.read_response()
    assert r.status == 501 and r.header("Sluice-Error") == "upgrade to an HTTP/2 upstream"
    assert o.heads == []


@pytest.mark.parametrize("mode", ["refuse", "goaway"])
def test_a_stream_the_server_never_processed_is_retried_for_http11_clients(sluice, mode):
    """Whatever the method, on default settings: a GET and an unkeyed POST each go again,
    because the server said it never processed them (REFUSED_STREAM, or GOAWAY below the
    stream); every one is answered by the good server."""
    bad, good = H2Origin("bad", mode), H2Origin("good", "answer")
    try:
        s = sluice(sluice_config([bad, good], upstream_extra=H2C))
        for method in ("POST", "GET"):
            bad.requests.clear()
            good.requests.clear()
            for _ in range(2):  # round robin: the bad server is met first at least once
                args = ("--data-binary", "payload") if method == "POST" else ()
                status, _, body, _ = curl(*args, s.url("/p"))
                assert (status, body) == (200, b"from good\n")
            assert bad.requests and set(bad.requests) == {(method, "/p")}
            assert good.requests == [(method, "/p")] * 2
        assert good.bodies[:2] == [b"payload"] * 2
    finally:
        bad.close()
        good.close()


def test_a_server_that_resets_mid_answer_cuts_the_client_and_counts_against_it(sluice, h2_server):
    o = h2_server()
    s = sluice(sluice_config([o.address], upstream_extra=H2C, top=ADMIN, access="json"))
    status, headers, body, code = curl(s.url("/cut"))
    assert status == 200 and headers["content-length"] == "100000"
    assert code == 18 and body == pattern(1000)  # curl: "transfer closed with outstanding read data"
    rec = s.access_records(1)[-1]
    assert (rec["status"], rec["error"]) == (200, "upstream body cut")
    # Nothing was retried (the answer had begun); the server's failure count has it.
    assert len(o.heads) == 1
    assert s.status()["upstreams"][0]["servers"][0]["failures"] == 1
    assert metric(s, "sluice_requests_total", code="cut") == 1


def test_a_server_that_never_answers_times_out_with_504(sluice):
    o = H2Origin("stall", "stall")
    try:
        s = sluice(sluice_config([o], upstream_extra=H2C + '\nresponse_timeout = "500ms"'))
        status, headers, _, _ = curl(s.url("/slow"))
        assert status == 504 and headers["sluice-error"].startswith("response timeout"), headers
        assert o.requests == [("GET", "/slow")]  # an answer that timed out is not asked again
    finally:
        o.close()


def test_an_h2_server_over_tls_with_alpn(sluice, h2_server, pki):
    cert, key = pki.leaf("h.test", "DNS:h.test,IP:127.0.0.1")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    o = h2_server("tls", tls=ctx)
    s = front(sluice, o, upstream_extra=f'protocol = "h2"\ntls = true\ntls_ca_file = "{pki.ca}"')
    status, _, body, _ = curl(s.url("/t"))
    assert (status, body) == (200, b"from tls\n")
    status, _, body, _ = curl("--data-binary", "over tls", s.url("/echo"))
    assert (status, body) == (200, b"over tls")
    assert o.heads[0][":scheme"] == "https" and o.connections == 1


def test_a_client_that_stops_sending_its_body_gets_408_and_the_server_no_request(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o, upstream_extra=H2C + '\nsend_timeout = "500ms"')
    with Conn(s.port) as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n" + b"x" * 100000)
        r = c.read_response(timeout=10)
        assert (r.status, r.header("Sluice-Error")) == (408, "body timeout")
    # The server never saw the request end: its stream was reset, not ended short.
    wait_until(lambda: o.resets == ["/echo"], what="the stream reset at the server")
    assert o.heads == []


def test_a_server_that_stops_reading_the_body_gets_504_send_timeout(sluice, h2_server, tmp_path):
    o = h2_server()
    s = front(sluice, o, upstream_extra=H2C + '\nsend_timeout = "500ms"')
    big = tmp_path / "big"
    big.write_bytes(b"y" * (1 << 20))
    status, headers, _, _ = curl("--data-binary", f"@{big}", s.url("/noread"))
    assert status == 504 and headers["sluice-error"].startswith("upstream send timeout"), headers
    wait_until(lambda: o.resets == ["/noread"], what="the stream reset at the server")


def test_an_early_answer_stops_the_upload_and_reaches_the_client(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    with Conn(s.port) as c:
        c.send(b"POST /early HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n" + b"z" * 100000)
        r = c.read_response(timeout=10)
        assert r.status == 413
        # The rest of the body was never read: the connection cannot carry a next request.
        assert r.header("Connection") == "close"
        assert c.wait_closed(timeout=5)


def test_a_client_gone_mid_answer_resets_the_servers_stream(sluice, h2_server):
    o = h2_server()
    s = front(sluice, o)
    with Conn(s.port) as c:
        c.send(b"GET /bytes/50000000 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert c.read_raw_head().startswith(b"HTTP/1.1 200")
    wait_until(lambda: o.resets == ["/bytes/50000000"], timeout=10, what="the stream reset at the server")


def test_an_idle_connection_is_checked_with_ping_and_closed_when_unanswered(sluice, h2_server):
    """Half of keepalive_timeout into an idle spell, one PING; answered, the connection stays and
    carries the next request; unanswered within connect_timeout, it is closed and the next request
    takes a new one (instead of being sent into a dead connection and timing out)."""
    o = h2_server()
    s = front(sluice, o, upstream_extra=H2C + '\nkeepalive_timeout = "2s"')
    assert curl(s.url("/a"))[0] == 200
    wait_until(lambda: o.pings_read == 1, what="a PING on the idle connection, answered")
    assert curl(s.url("/b"))[:3:2] == (200, b"from h2\n")
    assert o.connections == 1
    o.freeze()
    s.log.wait_for(r"server 127\.0\.0\.1:\d+: HTTP/2 connection closed: PING unanswered within 1000 ms", timeout=10)
    wait_until(lambda: metric(s, "sluice_upstream_http2_connections", upstream="app", server=o.address) == 0,
               what="the connection no longer counted")
    # Per kind of request, on the server's defaults: an unkeyed POST first (never retried, so it
    # fails if it is sent into the dead connection), then a GET, both on a new connection.
    assert curl("--data-binary", "once", s.url("/echo"))[:3:2] == (200, b"once")
    assert curl(s.url("/c"))[:3:2] == (200, b"from h2\n")
    assert o.connections == 2 and [h[":path"] for h in o.heads] == ["/a", "/b", "/echo", "/c"]


def test_an_answer_head_over_max_header_bytes_is_a_bad_response(sluice, h2_server):
    """As for an HTTP/1.1 origin: the server's head is bounded by max_header_bytes (16 KiB)."""
    o = h2_server()
    s = front(sluice, o)
    status, _, body, _ = curl(s.url("/bighead/15000"))
    assert status == 200
    status, headers, _, _ = curl(s.url("/bighead/17000"))
    assert status == 502 and headers["sluice-error"].startswith("upstream response head over max_header_bytes"), headers
    assert [h[":path"] for h in o.heads] == ["/bighead/15000", "/bighead/17000"]  # not retried
