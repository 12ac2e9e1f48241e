"""Response compression at the edge (docs/compression.md): a real sluice in front of a real origin
(a Python HTTP server whose answers the test chooses), the coded bodies decoded by the libraries'
own Python bindings (zlib, python3-zstandard, python3-brotli)."""
import http.server
import socket
import threading
import zlib

import brotli
import pytest
import zstandard

from conftest import sluice_config

# Several MiB of text that compresses, and differs along its length (a lost or repeated piece shows).
BIG = b"".join(b"line %08d: the quick brown fox jumps over the lazy dog\n" % i for i in range(80_000))
EVENT_1 = b"data: first event\n\n"
EVENT_2 = b"data: second event\n\n"
PAGE = b"<html>" + b"hello compression " * 200 + b"</html>"  # 3.6 KB, above min_bytes


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body):
        path = self.path
        chunked = "chunked" in path
        status = 206 if "range" in path else 200
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("ETag", '"v1"')
        self.send_header("Accept-Ranges", "bytes")
        if "no-transform" in path:
            self.send_header("Cache-Control", "no-transform")
        if "encoded" in path:
            self.send_header("Content-Encoding", "identity-ish")
        if status == 206:
            self.send_header("Content-Range", f"bytes 0-{len(body) - 1}/{len(body) * 2}")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not chunked:
            self.wfile.write(body)
            return
        for i in range(0, len(body), 100_000):
            piece = body[i:i + 100_000]
            self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def body(self):
        if "big" in self.path:
            return BIG
        if "small" in self.path:
            return b"<p>tiny</p>"
        return PAGE

    def do_GET(self):
        if self.path == "/events":
            return self.events()
        self.answer(self.body())

    # A streaming origin: the first event, then nothing more until the test has decoded it (or
    # 20 s passed), then the second and the end.
    def events(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event, wait in ((EVENT_1, True), (EVENT_2, False)):
            self.wfile.write(b"%x\r\n" % len(event) + event + b"\r\n")
            self.wfile.flush()
            if wait:
                self.server.first_seen.wait(20)
        self.wfile.write(b"0\r\n\r\n")

    def do_HEAD(self):
        self.answer(self.body())


class Address(str):
    """The origin's host:port, with its server (`server.first_seen`)."""


@pytest.fixture
def origin():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.first_seen = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    address = Address(f"127.0.0.1:{server.server_address[1]}")
    address.server = server
    yield address
    server.shutdown()
    server.server_close()


def get(port, path, accept=None, method="GET"):
    """One request on a fresh connection, read to the end: (status, headers as (name, value) in
    order, body with the chunked framing removed)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: t", "Connection: close"]
    if accept is not None:
        lines.append(f"Accept-Encoding: {accept}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    headers = [tuple(part.strip() for part in f.split(":", 1)) for f in fields]
    names = {n.lower(): v for n, v in headers}
    body = rest
    if names.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            body += rest[:size]
            assert rest[size:size + 2] == b"\r\n"
            rest = rest[size + 2:]
    return int(status_line.split()[1]), headers, body


def field(headers, name):
    values = [v for n, v in headers if n.lower() == name.lower()]
    return values[0] if values else None


def decode(coding, body):
    if coding == "gzip":
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if coding == "br":
        return brotli.decompress(body)
    raise AssertionError(coding)


def start(sluice, origin, compress="{}"):
    return sluice(sluice_config([origin], upstream_extra=f"compress = {compress}" if compress else ""))


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_large_body_arrives_intact_in_each_coding(sluice, origin, coding, framing):
    s = start(sluice, origin)
    status, headers, body = get(s.port, f"/big-{framing}", accept=coding)
    assert status == 200
    assert field(headers, "Content-Encoding") == coding
    assert field(headers, "Transfer-Encoding") == "chunked"
    assert field(headers, "Content-Length") is None
    assert field(headers, "Accept-Ranges") is None
    assert field(headers, "ETag") == 'W/"v1"'
    assert field(headers, "Vary") == "Accept-Encoding"
    assert len(body) < len(BIG) // 4
    assert decode(coding, body) == BIG


def test_the_server_order_decides_a_tie(sluice, origin):
    s = start(sluice, origin)
    status, headers, body = get(s.port, "/page", accept="gzip, deflate, br, zstd")
    assert field(headers, "Content-Encoding") == "zstd"
    assert decode("zstd", body) == PAGE
    _, headers, _ = get(s.port, "/page", accept="gzip;q=1, br;q=0.5, zstd;q=0.1")
    assert field(headers, "Content-Encoding") == "gzip"


@pytest.mark.parametrize("path,accept", [
    ("/page-no-transform", "gzip"),
    ("/page-encoded", "gzip"),
    ("/page-range", "gzip"),
    ("/small", "gzip"),
    ("/page", None),
    ("/page", "identity"),
])
def test_skipped_answers_pass_unchanged(sluice, origin, path, accept):
    s = start(sluice, origin)
    status, headers, body = get(s.port, path, accept=accept)
    assert field(headers, "Content-Encoding") in (None, "identity-ish")
    assert field(headers, "ETag") == '"v1"'
    expected = b"<p>tiny</p>" if "small" in path else PAGE
    assert body == expected


def test_vary_also_on_identity_and_head(sluice, origin):
    s = start(sluice, origin)
    # The response qualifies: a client without Accept-Encoding gets identity, but the Vary says why.
    _, headers, body = get(s.port, "/page", accept=None)
    assert field(headers, "Vary") == "Accept-Encoding" and body == PAGE
    status, headers, body = get(s.port, "/page", accept="gzip", method="HEAD")
    assert status == 200 and body == b""
    assert field(headers, "Content-Encoding") is None
    assert field(headers, "Vary") == "Accept-Encoding"
    assert field(headers, "Content-Length") == str(len(PAGE))


def test_http10_client_gets_identity_with_vary(sluice, origin):
    s = start(sluice, origin)
    with socket.create_connection(("127.0.0.1", s.port), timeout=15) as c:
        c.sendall(b"GET /page HTTP/1.0\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n")
        data = b""
        while more := c.recv(1 << 16):
            data += more
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Content-Encoding" not in head and b"chunked" not in head
    assert b"\r\nVary: Accept-Encoding\r\n" in head
    assert body == PAGE


def test_off_by_default(sluice, origin):
    s = start(sluice, origin, compress=None)
    _, headers, body = get(s.port, "/big-chunked", accept="gzip, br, zstd")
    assert field(headers, "Content-Encoding") is None
    assert field(headers, "Vary") is None
    assert field(headers, "ETag") == '"v1"'
    assert body == BIG


def test_a_route_turns_it_off(sluice, origin):
    s = sluice(sluice_config([origin], upstream_extra="compress = {}", top="""
[[route]]
path_prefix = "/raw/"
upstream = "app"
compress = false
[[route]]
path_prefix = "/"
upstream = "app"
"""))
    _, headers, body = get(s.port, "/raw/page", accept="gzip")
    assert field(headers, "Content-Encoding") is None and body == PAGE
    _, headers, body = get(s.port, "/page", accept="gzip")
    assert field(headers, "Content-Encoding") == "gzip" and decode("gzip", body) == PAGE


def test_each_piece_reaches_the_client_while_the_origin_waits(sluice, origin):
    """The relay flushes the encoder after each piece: the first event is decodable before the
    origin sends anything more (it waits for the test to have decoded it)."""
    s = start(sluice, origin)
    with socket.create_connection(("127.0.0.1", s.port), timeout=15) as c:
        c.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(1 << 16)
        head, _, raw = data.partition(b"\r\n\r\n")
        assert b"Content-Encoding: gzip" in head
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        decoded = b""
        while EVENT_1 not in decoded:
            body, raw = unchunk(raw)
            decoded += decoder.decompress(body)
            if EVENT_1 not in decoded:
                more = c.recv(1 << 16)  # times out (15 s) when the event is held back
                assert more, "the connection closed before the first event"
                raw += more
        assert decoded == EVENT_1
        origin.server.first_seen.set()
        while more := c.recv(1 << 16):
            raw += more
        body, raw = unchunk(raw)
        assert raw == b"0\r\n\r\n"
        assert decoded + decoder.decompress(body) + decoder.flush() == EVENT_1 + EVENT_2


def unchunk(raw):
    """The data of the whole chunks at the start of `raw` (not the last-chunk), and what is left."""
    body = b""
    while True:
        size_line, sep, rest = raw.partition(b"\r\n")
        if not sep or int(size_line, 16) == 0 or len(rest) < int(size_line, 16) + 2:
            return body, raw
        size = int(size_line, 16)
        body += rest[:size]
        raw = rest[size + 2:]


# HTTP/2 clients (docs/http2.md): the same decision and coding, the body in DATA frames.

def h2_get(port, path, accept=None, method="GET"):
    """One request from a hand-made HTTP/2 client (python3-h2) over h2c: (status, headers as a
    dict of lowercase names, body)."""
    import h2.events
    from test_http2 import ended, events_until, h2_client
    sock, c = h2_client(port)
    fields = [(":method", method), (":scheme", "http"), (":authority", "t"), (":path", path)]
    if accept is not None:
        fields.append(("accept-encoding", accept))
    c.send_headers(1, fields, end_stream=True)
    sock.sendall(c.data_to_send())
    body = b""
    events = []
    while not ended(1)(events):
        new = events_until(sock, c, lambda ev: ev, timeout=10)
        assert new, "the connection closed"
        events += new
        for e in new:
            if isinstance(e, h2.events.DataReceived):
                body += e.data
                c.acknowledge_received_data(e.flow_controlled_length, 1)  # the window reopens
        sock.sendall(c.data_to_send())
    sock.close()
    [resp] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert not any(isinstance(e, h2.events.StreamReset) for e in events), events
    headers = {k.decode(): v.decode() for k, v in resp.headers}
    return int(headers[":status"]), headers, body


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_http2_clients_get_the_coded_body_whole(sluice, origin, coding, framing):
    s = sluice(sluice_config([origin], upstream_extra="compress = {}", server_extra="h2c = true"))
    status, headers, body = h2_get(s.port, f"/big-{framing}", accept=coding)
    assert status == 200
    assert headers.get("content-encoding") == coding
    assert "content-length" not in headers and "accept-ranges" not in headers
    assert headers.get("etag") == 'W/"v1"' and headers.get("vary") == "Accept-Encoding"
    assert len(body) < len(BIG) // 4
    assert decode(coding, body) == BIG
    # Without Accept-Encoding, and for HEAD: as the origin sent it (Vary still says why), as for
    # an HTTP/1.1 client.
    status, headers, body = h2_get(s.port, f"/big-{framing}")
    assert (status, headers.get("content-encoding"), body == BIG) == (200, None, True)
    assert headers.get("vary") == "Accept-Encoding"
    status, headers, body = h2_get(s.port, "/page", accept=coding, method="HEAD")
    assert (status, body, headers.get("content-encoding")) == (200, b"", None)
    assert headers.get("vary") == "Accept-Encoding" and headers.get("content-length") == str(len(PAGE))
