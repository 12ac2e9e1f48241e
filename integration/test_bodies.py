"""Bodies: streamed both ways with flat memory, chunked framing, Expect: 100-continue."""
import hashlib
import json
import subprocess
import time

from conftest import SANITIZED, Conn, curl, run_client, sluice_config

GIB = 1 << 30
RSS_LIMIT_KIB = 64 * 1024


def rss_limit_kib(s):
    """64 MiB of peak RSS. Under a sanitizer the shadow memory and allocator metadata come on top
    from the start, so there the 64 MiB are counted from the RSS after start-up: streaming a GiB
    still may not grow memory by more than that."""
    return RSS_LIMIT_KIB + (s.rss_kib() if SANITIZED else 0)


def client_body(n):
    """The bytes sluice-test-client --upload n sends: one 64 KiB slice pattern, repeated."""
    slice_ = bytes(ord("a") + (i * 7) % 26 for i in range(64 * 1024))
    return (slice_ * (n // len(slice_) + 1))[:n]


def test_1gib_download_streams_with_flat_memory(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    limit = rss_limit_kib(s)
    rc, out = run_client("--url", s.url(f"/?size={GIB}"), "--download", timeout=60)
    assert rc == 0, out
    assert out["status"] == 200 and out["body_bytes"] == GIB and out["content_length"] == GIB, out
    peak = s.peak_rss_kib()
    assert peak < limit, f"sluice peak RSS {peak} KiB"


def test_1gib_chunked_download_streams_with_flat_memory(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    limit = rss_limit_kib(s)
    rc, out = run_client("--url", s.url(f"/?size={GIB}&chunked=1"), "--download", timeout=60)
    assert rc == 0, out
    assert out["status"] == 200 and out["chunked"] and out["body_bytes"] == GIB, out
    assert s.peak_rss_kib() < limit


def test_1gib_upload_streams_with_flat_memory(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_, server_extra='max_body_bytes = "2GiB"'))
    limit = rss_limit_kib(s)
    rc, out = run_client("--url", s.url("/?sink=1"), "--upload", GIB, timeout=60)
    assert rc == 0, out
    assert out["status"] == 200 and out["sent_bytes"] == GIB, out
    assert out["body"] == {"body_bytes": GIB}, out
    peak = s.peak_rss_kib()
    assert peak < limit, f"sluice peak RSS {peak} KiB"


def test_chunked_upload_arrives_exactly(origins, sluice):
    """A chunked upload (64 KiB chunks and an odd tail) reaches the origin byte for byte, each
    chunk validated before it is forwarded, with memory bounded all the same."""
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    limit = rss_limit_kib(s)
    n = (16 << 20) + 12345
    rc, out = run_client("--url", s.url("/?sink=sha256"), "--upload", n, "--chunked")
    assert rc == 0, out
    assert out["status"] == 200, out
    assert out["body"]["body_bytes"] == n, out
    assert out["body"]["sha256"] == hashlib.sha256(client_body(n)).hexdigest()
    assert s.peak_rss_kib() < limit, f"sluice peak RSS {s.peak_rss_kib()} KiB"


def test_chunked_upload_with_curl(origins, sluice, tmp_path):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    data = bytes(range(256)) * 4000 + b"tail"
    f = tmp_path / "body.bin"
    f.write_bytes(data)
    status, _, body = curl("-H", "Transfer-Encoding: chunked", "--data-binary", f"@{f}",
                           s.url("/?sink=sha256"))
    assert status == 200, body
    result = json.loads(body)
    assert result["body_bytes"] == len(data)
    assert result["sha256"] == hashlib.sha256(data).hexdigest()


def test_small_chunks_and_chunk_extensions_are_reframed(scripted, sluice):
    """Many tiny chunks, one with an extension, and trailers: the origin receives the exact body
    bytes (digest, not just the length), re-chunked, the client's trailer stripped."""
    origin = scripted("a")
    s = sluice(sluice_config([origin.address]))
    chunks = b"".join(b"1\r\nx\r\n" for _ in range(500)) + b"3;ext=1\r\nabc\r\n"
    with Conn(s.port) as c:
        r = c.request(f"POST / HTTP/1.1\r\nHost: {s.address}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n".encode() + chunks +
                      b"0\r\nX-Trailer: t\r\n\r\n")
        assert r.status == 200, r
        # The connection stays in sync after the trailer.
        assert c.request(f"GET / HTTP/1.1\r\nHost: {s.address}\r\n\r\n".encode()).status == 200
    origin.settle()
    post, get = origin.executed
    body = b"x" * 500 + b"abc"
    assert (post["body_bytes"], post["body_sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    assert post["trailers"] == [], post
    assert b"ext=1" not in origin.bytes_received() and b"X-Trailer" not in origin.bytes_received()
    assert get["target"] == "/" and origin.unparsed() == {}


def test_expect_100_continue_is_answered_by_sluice(origins, sluice):
    """sluice sends 100 Continue itself when it starts reading the body, and does not forward the
    Expect header."""
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    with Conn(s.port) as c:
        c.send(f"POST /?echo=1 HTTP/1.1\r\nHost: {s.address}\r\nContent-Length: 10\r\n"
               "Expect: 100-continue\r\n\r\n".encode())
        interim = c.read_response(interim=True, timeout=3)
        assert interim.status == 100, interim
        c.send(b"0123456789")
        r = c.read_response()
        assert r.status == 200, r
        assert r.json()["body_bytes"] == 10
        assert not [k for k, _ in r.json()["headers"] if k.lower() == "expect"], r.json()


def test_expect_100_continue_upload_with_curl(origins, sluice, tmp_path):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    f = tmp_path / "body.bin"
    f.write_bytes(b"e" * (3 << 20))
    start = time.monotonic()
    p = subprocess.run(["curl", "-sS", "-v", "--max-time", "20", "-H", "Expect: 100-continue",
                        "--data-binary", f"@{f}", s.url("/?sink=1")],
                       capture_output=True, timeout=30)
    elapsed = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    assert b"HTTP/1.1 100 Continue" in p.stderr
    assert p.stdout == b'{"body_bytes":3145728}'
    # curl waits up to 1 s for the 100 before sending anyway; the 100 must come before that.
    assert elapsed < 0.9, elapsed


def test_upload_with_content_length_keeps_the_connection_usable(origins, sluice):
    os_ = origins(1)
    s = sluice(sluice_config(os_))
    with Conn(s.port) as c:
        for size in (0, 1, 65536, 200001):
            r = c.request(f"POST /?sink=1 HTTP/1.1\r\nHost: {s.address}\r\n"
                          f"Content-Length: {size}\r\n\r\n".encode() + b"p" * size)
            assert r.status == 200 and r.json() == {"body_bytes": size}, r
