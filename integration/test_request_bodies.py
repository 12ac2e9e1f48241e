"""Chunked request bodies are validated before they are forwarded (issue 14): a body up to the
relay block (64 KiB) is read and checked whole, so that nothing of a malformed one reaches the
origin (test_smuggling.py's CASES assert the origin received no byte) and a valid one can be
resent like a small Content-Length body. What the origin receives is asserted byte for byte
(RawOrigin keeps every byte of every upstream connection)."""
from conftest import Conn, sluice_config


def chunked_put(body, target=b"/"):
    return (b"PUT " + target + b" HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body)


def test_small_chunked_body_is_forwarded_whole_with_a_length(raw_origin, sluice):
    """A chunked body that fits the relay block goes upstream in one piece with its
    Content-Length: chunk extensions and trailer fields checked and dropped."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(chunked_put(b"5;ext=\"q\"\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n"))
    assert r.status == 200, r
    sent = bytes(origin.received[0])
    head, _, body = sent.partition(b"\r\n\r\n")
    assert body == b"hello world", sent
    fields = head.lower().split(b"\r\n")
    assert b"content-length: 11" in fields and not any(f.startswith(b"transfer-encoding") for f in fields)
    assert b"x-sum" not in head.lower() and b"ext" not in sent


def test_small_chunked_put_is_resent_after_a_reset(raw_origin, sluice):
    """Kept whole, a chunked PUT is retryable: the first origin closes without answering after
    reading it, the second gets the same bytes and answers."""
    closing = raw_origin(respond=lambda req: None)
    answering = raw_origin()
    s = sluice(sluice_config([closing.address, answering.address]))
    with Conn(s.port) as c:
        r = c.request(chunked_put(b"4\r\nbody\r\n0\r\n\r\n"))
    assert r.status == 200, r
    assert closing.requests and closing.requests[0]["body"] == b"body"
    assert answering.requests[0]["body"] == b"body"
    assert r.header("Sluice-Attempts") == "2"


def test_large_chunked_body_streams_chunk_by_chunk(raw_origin, sluice):
    """A body longer than the relay block streams; every chunk the origin got was validated,
    and the body arrives exactly, re-chunked."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    chunks = [bytes([65 + i % 26]) * (30_000 + i) for i in range(8)]
    body = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in chunks) + b"0\r\n\r\n"
    with Conn(s.port) as c:
        r = c.request(chunked_put(body))
    assert r.status == 200, r
    assert origin.errors == []
    assert origin.requests[0]["body"] == b"".join(chunks)
