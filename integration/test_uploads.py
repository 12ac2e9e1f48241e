"""Full-duplex uploads (issue 14): while a streamed request body is still being forwarded, sluice
reads the origin's answer. An early final answer (413 + close before the origin read an 8 MiB
body) reaches the client; `response_timeout` counts from the last request byte sent; an upload
is bounded by `send_timeout` without progress, not by its total duration. Each failure has its
own label, and only the origin's count against it (passive health).

The clients here pace their bodies themselves (a slow client is the scenario under test), and the
origins read at a bounded rate; every loop is bounded in bytes and time. Durations come from
sluice's own access log (duration_ms), never from the test's clock."""
import hashlib
import socket
import threading
import time

import pytest

from conftest import (SCHEDULING_SLACK, TICK, Conn, ThreadedServer, assert_expired_on_time,
                      sluice_config, toml_table)

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def put_head(length=None, chunked=False, target="/up"):
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    return f"PUT {target} HTTP/1.1\r\nHost: a\r\n{framing}\r\n\r\n".encode()


def chunked(pieces):
    """The chunked encoding of `pieces` (an iterable of bytes), as an iterator, last-chunk last."""
    for p in pieces:
        yield b"%x\r\n" % len(p) + p + b"\r\n"
    yield b"0\r\n\r\n"


class Sender:
    """Sends `head` then each piece of `pieces` on `conn` in a thread (pausing `pace` seconds
    before each piece), so the test can read the answer while the body is still going; a send that
    fails (sluice closed after an early answer) ends it, and is recorded in `error`."""

    def __init__(self, conn, head, pieces, pace=0.0):
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(conn, head, pieces, pace), daemon=True)
        self.thread.start()

    def _run(self, conn, head, pieces, pace):
        try:
            conn.sock.sendall(head)
            for p in pieces:
                if pace:
                    time.sleep(pace)
                conn.sock.sendall(p)
        except OSError as e:
            self.error = e

    def join(self, timeout=20.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "client still sending"


class EarlyAnswerOrigin(ThreadedServer):
    """Reads a request head, answers 413 with Connection: close and closes, never reading the body:
    what an origin with a body limit does."""

    def _serve(self, conn):
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
            conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
                         b"Content-Length: 9\r\n\r\ntoo large")
        except OSError:
            pass
        finally:
            conn.close()


class SlowReader(ThreadedServer):
    """Reads a Content-Length request at about `rate` bytes per second (one recv of at most 64 KiB
    every 64 KiB / rate seconds), then answers 200 with the body's SHA-256. `stall_after`: stop
    reading after that many body bytes (and never answer) instead."""

    def __init__(self, rate, stall_after=None):
        self.rate, self.stall_after = rate, stall_after
        super().__init__()
        # A small receive buffer (inherited by accepted sockets): what the origin has not read
        # stays mostly in sluice's socket, not in a 32 MiB autotuned buffer here.
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)

    def _serve(self, conn):
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
            head, body = buf.split(b"\r\n\r\n", 1)
            length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")][0])
            digest, got = hashlib.sha256(body), len(body)
            while got < length:
                if self.stall_after is not None and got >= self.stall_after:
                    self._stopping.wait(30)  # until the test ends: sluice must give up first
                    return
                time.sleep((1 << 16) / self.rate)
                chunk = conn.recv(min(1 << 16, length - got))
                if not chunk:
                    return
                digest.update(chunk)
                got += len(chunk)
            answer = digest.hexdigest().encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(answer) + answer)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture
def servers():
    started = []

    def start(cls, *args):
        o = cls(*args)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def server_health(s, identity):
    entry = s.server_status(identity)
    return entry["state"], entry["failures"]


def test_slow_uploads_longer_than_response_timeout_succeed_and_eject_nobody(scripted, sluice):
    """Three clients uploading 300 KB at about 100 KB/s (over 3 s each) with response_timeout =
    2s and an origin that answers at once: all 200, and the server is not ejected (its failure
    count stays 0): the upload is not the origin's time to answer."""
    origin = scripted("app-1")
    s = sluice(sluice_config([origin], upstream_extra='response_timeout = "2s"', top=ADMIN,
                             access="json"))
    piece, pieces = b"u" * 10_000, 30
    results = [None] * 3

    def upload(i):
        with Conn(s.port, timeout=15) as c:
            sender = Sender(c, put_head(len(piece) * pieces), [piece] * pieces, pace=0.1)
            results[i] = c.read_response(timeout=15)
            sender.join()

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert [r.status for r in results] == [200] * 3, results
    assert origin.count("PUT") == 3
    assert all(r["body_bytes"] == 300_000 for r in origin.executed)
    records = s.access_records(3)
    assert all(r["status"] == 200 and r["duration_ms"] >= 3000 for r in records), records
    assert server_health(s, "app-1") == ("up", 0)


def test_an_upload_with_no_progress_for_send_timeout_gets_408_and_does_not_count(scripted, sluice):
    """A client that sends 100 KB of a 300 KB body and then nothing: after send_timeout, 408
    `body timeout`, and the server's failure count stays 0 (the stall was the client's)."""
    origin = scripted("app-1")
    s = sluice(sluice_config([origin], upstream_extra='send_timeout = "1s"', top=ADMIN,
                             access="json"))
    with Conn(s.port, timeout=10) as c:
        c.send(put_head(300_000) + b"s" * 100_000)
        r = c.read_response(timeout=10)
    assert r.status == 408, r
    assert r.header("Sluice-Error") == "body timeout"
    (rec,) = s.access_records(1)
    assert rec["error"] == "body timeout"
    assert_expired_on_time(rec["duration_ms"] / 1000, 1.0, "send_timeout")
    assert server_health(s, "app-1") == ("up", 0)
    assert origin.count() == 0  # the origin never got a whole request


def test_an_origin_that_stops_reading_is_a_send_timeout_counted_against_it(servers, sluice):
    """The other side of the same bound: the origin stops reading the body (and never answers).
    After send_timeout without progress the client gets 504 `upstream send timeout`, and it
    counts as the server's failure."""
    origin = servers(SlowReader, 50_000_000, 1_000_000)
    s = sluice(sluice_config([origin.address], upstream_extra='send_timeout = "1s"', top=ADMIN,
                             access="json"))
    size = 32 << 20  # more than loopback's socket buffers can hold
    with Conn(s.port, timeout=15) as c:
        sender = Sender(c, put_head(size), (b"o" * (1 << 20) for _ in range(32)))
        r = c.read_response(timeout=15)
        c.close()
        sender.join()
    assert r.status == 504, r
    # A streamed body cannot be resent, so it says why it was not retried.
    assert r.header("Sluice-Error") == "upstream send timeout; not retried: body too large"
    (rec,) = s.access_records(1)
    assert rec["error"] == "upstream send timeout"
    # From the start: filling the socket buffers (well under a second on loopback), then 1 s
    # without progress.
    assert 1.0 <= rec["duration_ms"] / 1000 <= 2.0 + TICK + SCHEDULING_SLACK, rec
    assert server_health(s, origin.address)[1] == 1


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_an_early_413_before_an_8_mib_body_reaches_the_client(servers, sluice, framing):
    """The origin reads the head, answers 413 + Connection: close and closes without reading the
    8 MiB body: the client gets that 413 (not `502 upstream reset`), its connection is closed
    (its body was not read), and the server's failure count stays 0."""
    origin = servers(EarlyAnswerOrigin)
    s = sluice(sluice_config([origin.address], top=ADMIN, access="json"))
    size, piece = 8 << 20, b"b" * (1 << 16)
    if framing == "chunked":
        head, pieces = put_head(chunked=True), chunked(piece for _ in range(size // len(piece)))
    else:
        head, pieces = put_head(size), (piece for _ in range(size // len(piece)))
    with Conn(s.port, timeout=10) as c:
        sender = Sender(c, head, pieces)
        r = c.read_response(timeout=10)
        assert r.status == 413, r
        assert r.body == b"too large"
        assert r.header("Sluice-Error") is None
        assert r.header("Connection") == "close"
        assert c.wait_closed(timeout=5)
        sender.join()
    (rec,) = s.access_records(1)
    assert rec["status"] == 413 and not rec.get("error"), rec
    assert server_health(s, origin.address)[1] == 0


def test_a_body_sluice_refuses_before_reading_it_gets_its_answer_not_a_reset(origins, sluice):
    """sluice's own 413 (the Content-Length is over max_body_bytes) goes before the body was read.
    A client that sends its whole request before it reads (most do) is still sending 4 MiB then.
    sluice half-closes and discards what still comes until the client closes (a lingering close):
    closing with unread input would make the kernel reset the connection, and the client's send
    would fail before it ever read the 413. Five connections, each must send its body, read its
    413 and then see the connection end."""
    (origin,) = origins(1)
    s = sluice(sluice_config([origin], server_extra='max_body_bytes = "64KiB"'))
    size = 4 << 20
    for _ in range(5):
        with Conn(s.port, timeout=10) as c:
            c.sock.sendall(put_head(size) + b"b" * size)
            r = c.read_response(timeout=10)
            assert r.status == 413, r
            assert c.wait_closed(timeout=10)


def test_a_long_upload_to_a_slow_steady_origin_is_not_cut(servers, sluice):
    """The 20 MB upload to an origin reading 200 KB/s, scaled down: 4 MB read at about 1.3 MB/s
    takes about 3 s, three times send_timeout and response_timeout (1 s each). It is never cut:
    every step made progress; the body arrives whole."""
    origin = servers(SlowReader, 1_300_000)
    s = sluice(sluice_config([origin.address], top=ADMIN, access="json",
                             upstream_extra='send_timeout = "1s"\nresponse_timeout = "1s"'))
    piece = bytes(range(256)) * 256  # 64 KiB
    size = 64 * len(piece)
    with Conn(s.port, timeout=20) as c:
        sender = Sender(c, put_head(size), [piece] * 64)
        r = c.read_response(timeout=20)
        sender.join()
    assert r.status == 200, r
    assert r.body == hashlib.sha256(piece * 64).hexdigest().encode()
    (rec,) = s.access_records(1)
    assert rec["duration_ms"] >= 2000, rec  # longer than either timeout, by far
    assert server_health(s, origin.address)[1] == 0
