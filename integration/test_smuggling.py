"""Request smuggling corpus: every case is rejected (the right 4xx, then the connection closes) or
normalised, the origin never sees a request hidden inside another one, and an upstream
connection is never reused after an ambiguous exchange.

The origin is a RawOrigin (conftest.py): it keeps every byte sluice sent and parses them with a
strict reader, so "what the origin saw" is exact. Each answer names the request it answers
(`X-Seen: TARGET`), which gives the central check of every case: the requests the origin parsed,
in order, are exactly the requests whose answers the client received, in order. A request hidden
in another one's body would show up at the origin without an answer of its own (or take the
answer meant for another), and fail that check. `/smuggled` marks the hidden requests.
"""
import socket
import threading

import pytest

from conftest import Conn, RawOrigin, sluice_config, wait_until

HIDDEN = b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
# After every case the client pipelines this; it is answered only when the case was normalised
# (and then it must be parsed as a request of its own, not as part of the case's body).
SENTINEL = b"GET /sentinel HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"


def post(*fields, body=b"", version=b"1.1"):
    head = b"POST / HTTP/" + version + b"\r\nHost: a\r\n" + b"".join(f + b"\r\n" for f in fields)
    return head + b"\r\n" + body


def chunked(*fields, body):
    return post(b"Transfer-Encoding: chunked", *fields, body=body)


# name: (request bytes, outcome). outcome is ("reject", status, Sluice-Error) or
# ("forward", [targets the origin must see, in order, sentinel excluded]).
CASES = {
    # CL.TE and TE.CL: both framings on one request.
    "cl_te": (post(b"Content-Length: 6", b"Transfer-Encoding: chunked",
                   body=b"0\r\n\r\n" + HIDDEN), ("reject", 400, "content-length with transfer-encoding")),
    "te_cl": (post(b"Transfer-Encoding: chunked", b"Content-Length: 3",
                   body=b"%x\r\n" % len(HIDDEN) + HIDDEN + b"\r\n0\r\n\r\n"),
              ("reject", 400, "content-length with transfer-encoding")),
    # TE.TE: one side is made not to recognise Transfer-Encoding.
    "te_space_before_colon": (post(b"Content-Length: 4", b"Transfer-Encoding : chunked",
                                   body=b"0\r\n\r\n" + HIDDEN), ("reject", 400, "space before colon")),
    "te_xchunked": (post(b"Transfer-Encoding: xchunked", body=b"0\r\n\r\n" + HIDDEN),
                    ("reject", 400, "bad transfer-encoding")),
    "te_xchunked_with_cl": (post(b"Content-Length: 4", b"Transfer-Encoding: xchunked",
                                 body=b"0\r\n\r\n" + HIDDEN),
                            ("reject", 400, "content-length with transfer-encoding")),
    "te_chunked_identity": (post(b"Transfer-Encoding: chunked, identity", body=b"0\r\n\r\n" + HIDDEN),
                            ("reject", 400, "bad transfer-encoding")),
    # A coding before chunked is well-formed but not one we handle (RFC 9112 §6.1): 501.
    "te_identity_chunked": (post(b"Transfer-Encoding: identity, chunked", body=b"0\r\n\r\n" + HIDDEN),
                            ("reject", 501, "unsupported transfer-coding")),
    "te_deflate_chunked": (post(b"Transfer-Encoding: deflate, chunked", body=b"0\r\n\r\n" + HIDDEN),
                           ("reject", 501, "unsupported transfer-coding")),
    # Underscore spellings of framing fields: a backend folding "_" into "-" reads them as framing.
    "te_underscore": (post(b"Content-Length: 0", b"Transfer_Encoding: chunked",
                           body=b"%x\r\n" % len(HIDDEN) + HIDDEN + b"\r\n0\r\n\r\n"),
                      ("reject", 400, "framing field variant")),
    "cl_underscore": (post(b"Content_Length: %d" % len(HIDDEN), body=HIDDEN),
                      ("reject", 400, "framing field variant")),
    "te_gzip": (post(b"Transfer-Encoding: gzip", body=HIDDEN), ("reject", 400, "bad transfer-encoding")),
    "te_quoted": (post(b'Transfer-Encoding: "chunked"', body=b"0\r\n\r\n" + HIDDEN),
                  ("reject", 400, "bad transfer-encoding")),
    "te_duplicate": (post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked",
                          body=b"0\r\n\r\n" + HIDDEN), ("reject", 400, "bad transfer-encoding")),
    "te_duplicate_identity": (post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: identity",
                                   body=b"0\r\n\r\n" + HIDDEN), ("reject", 400, "bad transfer-encoding")),
    "te_vertical_tab_before": (post(b"Transfer-Encoding:\x0bchunked", body=b"0\r\n\r\n" + HIDDEN),
                               ("reject", 400, "control byte")),
    "te_vertical_tab_after": (post(b"Transfer-Encoding: chunked\x0b", body=b"0\r\n\r\n" + HIDDEN),
                              ("reject", 400, "control byte")),
    "te_nul": (post(b"Transfer-Encoding: chunked\x00", body=b"0\r\n\r\n" + HIDDEN),
               ("reject", 400, "control byte")),
    "te_obs_fold": (post(b"X-A: b", b" Transfer-Encoding: chunked", body=b"0\r\n\r\n" + HIDDEN),
                    ("reject", 400, "obs-fold")),
    "te_folded_value": (post(b"Transfer-Encoding:", b" chunked", body=b"0\r\n\r\n" + HIDDEN),
                        ("reject", 400, "obs-fold")),
    "te_http10": (post(b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + HIDDEN, version=b"1.0"),
                  ("reject", 400, "bad transfer-encoding")),
    # Optional whitespace around a value is not part of it (RFC 9110 §5.5): a tab or spaces
    # around "chunked" is plain chunked, forwarded as such. Same for upper case.
    "te_tab": (post(b"Transfer-Encoding:\tchunked\t", body=b"6\r\n" + b"abcdef" + b"\r\n0\r\n\r\n"),
               ("forward", ["/"])),
    "te_upper_case": (post(b"TRANSFER-ENCODING: CHUNKED", body=b"0\r\n\r\n"), ("forward", ["/"])),
    # Content-Length forms.
    "cl_plus": (post(b"Content-Length: +6", body=b"abcdef"), ("reject", 400, "bad content-length")),
    "cl_minus": (post(b"Content-Length: -1", body=HIDDEN), ("reject", 400, "bad content-length")),
    "cl_inner_space": (post(b"Content-Length: 3 6", body=HIDDEN), ("reject", 400, "bad content-length")),
    "cl_hex": (post(b"Content-Length: 0x24", body=HIDDEN), ("reject", 400, "bad content-length")),
    "cl_decimal_point": (post(b"Content-Length: 6.0", body=b"abcdef"), ("reject", 400, "bad content-length")),
    "cl_empty": (post(b"Content-Length: ", body=HIDDEN), ("reject", 400, "bad content-length")),
    "cl_list": (post(b"Content-Length: 6, 6", body=b"abcdef"), ("reject", 400, "bad content-length")),
    "cl_duplicate": (post(b"Content-Length: 6", b"Content-Length: 6", body=b"abcdef"),
                     ("reject", 400, "bad content-length")),
    "cl_different": (post(b"Content-Length: 0", b"Content-Length: %d" % len(HIDDEN), body=HIDDEN),
                     ("reject", 400, "bad content-length")),
    "cl_2pow63": (post(b"Content-Length: 9223372036854775808", body=HIDDEN),
                  ("reject", 400, "bad content-length")),
    "cl_2pow64": (post(b"Content-Length: 18446744073709551616", body=HIDDEN),
                  ("reject", 400, "bad content-length")),
    "cl_huge": (post(b"Content-Length: " + b"9" * 40, body=HIDDEN), ("reject", 400, "bad content-length")),
    "cl_vertical_tab": (post(b"Content-Length: 6\x0b", body=b"abcdef"), ("reject", 400, "control byte")),
    # Leading zeros and OWS are valid Content-Length (1*DIGIT, RFC 9110 §8.6): forwarded, and the
    # body is exactly 6 bytes, so the hidden request behind it is the client's next request.
    "cl_leading_zeros": (post(b"Content-Length: 0006", body=b"abcdef"), ("forward", ["/"])),
    "cl_spaces_around": (post(b"Content-Length:   6  ", body=b"abcdef"), ("forward", ["/"])),
    # Chunk sizes.
    "chunk_size_overflow": (chunked(body=b"1" + b"0" * 16 + b"\r\nabc\r\n0\r\n\r\n"),
                            ("reject", 400, "bad chunk")),
    "chunk_size_overflow_long": (chunked(body=b"f" * 40 + b"\r\nabc\r\n0\r\n\r\n"),
                                 ("reject", 400, "bad chunk")),
    "chunk_size_0x": (chunked(body=b"0x5\r\nhello\r\n0\r\n\r\n"), ("reject", 400, "bad chunk")),
    "chunk_size_negative": (chunked(body=b"-5\r\nhello\r\n0\r\n\r\n"), ("reject", 400, "bad chunk")),
    "chunk_size_space": (chunked(body=b"5 \r\nhello\r\n0\r\n\r\n"), ("reject", 400, "bad chunk")),
    "chunk_size_bare_lf": (chunked(body=b"5\nhello\r\n0\r\n\r\n"), ("reject", 400, "bare LF")),
    "chunk_all_bare_lf": (chunked(body=b"5\nhello\n0\n\n"), ("reject", 400, "bare LF")),
    "chunk_data_bare_lf": (chunked(body=b"5\r\nhello\n0\r\n\r\n"), ("reject", 400, "bare LF")),
    "chunk_trailer_bare_lf": (chunked(body=b"5\r\nhello\r\n0\r\nX-A: b\n\r\n"),
                              ("reject", 400, "bare LF")),
    "chunk_final_bare_lf": (chunked(body=b"5\r\nhello\r\n0\r\n\n"), ("reject", 400, "bare LF")),
    # Chunk data not followed by CRLF: refused at that byte, not left waiting.
    "chunk_data_no_crlf": (chunked(body=b"5\r\nABCDE0\r\n\r\n"), ("reject", 400, "bad chunk")),
    "chunk_data_too_short": (chunked(body=b"5\r\nhel\r\n0\r\n\r\n"), ("reject", 400, "bad chunk")),
    # The last chunk missing: the next request's bytes are not a chunk size.
    "chunk_last_missing": (chunked(body=b"5\r\nhello\r\n"), ("reject", 400, "bad chunk")),
    "chunk_ext_unbalanced_quote": (chunked(body=b'5;a="b\r\nhello\r\n0\r\n\r\n'),
                                   ("reject", 400, "bad chunk")),
    "chunk_ext_huge": (chunked(body=b"5;a=" + b"b" * 100_000 + b"\r\nhello\r\n0\r\n\r\n"),
                       ("reject", 400, "chunk line too long")),
    "chunk_trailer_huge": (chunked(body=b"5\r\nhello\r\n0\r\nX-A: " + b"b" * 100_000 + b"\r\n\r\n"),
                           ("reject", 400, "trailer too large")),
    "chunk_data_too_long": (chunked(body=b"3\r\nhello\r\n0\r\n\r\n"), ("reject", 400, "bad chunk")),
    "chunk_last_bare_lf": (chunked(body=b"0\n\n" + HIDDEN), ("reject", 400, "bare LF")),
    # A hidden request inside chunk data or a chunk extension is body, re-chunked unambiguously.
    "chunk_data_with_request": (chunked(body=b"%x\r\n" % len(HIDDEN) + HIDDEN + b"\r\n0\r\n\r\n"),
                                ("forward", ["/"])),
    "chunk_extension": (chunked(body=b"5;a=b\r\nhello\r\n0\r\n\r\n"), ("forward", ["/"])),
    # A framing field in the trailer section is refused; other trailers are not forwarded.
    "chunk_trailer_framing": (chunked(body=b"0\r\nContent-Length: 40\r\n\r\n" + HIDDEN),
                              ("reject", 400, "bad trailer")),
    "chunk_trailer_te": (chunked(body=b"5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"),
                         ("reject", 400, "bad trailer")),
    "chunk_trailer_underscore": (chunked(body=b"5\r\nhello\r\n0\r\nContent_Length: 4\r\n\r\n"),
                                 ("reject", 400, "bad trailer")),
    "chunk_trailer": (chunked(body=b"0\r\nX-Checksum: 1\r\n\r\n"), ("forward", ["/"])),
    # Line ends, folding, NUL.
    "bare_cr_in_field": (b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rContent-Length: 36\r\n\r\n" + HIDDEN,
                         ("reject", 400, "bare CR")),
    "bare_lf_in_field": (b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\nContent-Length: 36\r\n\r\n" + HIDDEN,
                         ("reject", 400, "bare LF")),
    "bare_lf_head_end": (b"GET / HTTP/1.1\r\nHost: a\r\n\n" + HIDDEN, ("reject", 400, "bare LF")),
    "bare_cr_request_line": (b"GET / HTTP/1.1\rHost: a\r\n\r\n", ("reject", 400, "bare CR")),
    "obs_fold": (b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", ("reject", 400, "obs-fold")),
    "nul_in_value": (b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n", ("reject", 400, "control byte")),
    "nul_in_name": (b"GET / HTTP/1.1\r\nHost: a\r\nX-\x00A: b\r\n\r\n", ("reject", 400, "bad field name")),
    "nul_in_target": (b"GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n", ("reject", 400, "bad target")),
    "empty_field_name": (b"GET / HTTP/1.1\r\nHost: a\r\n: x\r\nContent-Length: 36\r\n\r\n" + HIDDEN,
                         ("reject", 400, "bad field name")),
    # Hop-by-hop abuse: Connection naming a framing field must not strip it (the body would
    # then be read as the next request).
    "connection_content_length": (post(b"Connection: Content-Length",
                                       b"Content-Length: %d" % len(HIDDEN), body=HIDDEN),
                                  ("forward", ["/"])),
    "connection_transfer_encoding": (chunked(b"Connection: Transfer-Encoding",
                                             body=b"%x\r\n" % len(HIDDEN) + HIDDEN + b"\r\n0\r\n\r\n"),
                                     ("forward", ["/"])),
    "connection_host": (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Host\r\n\r\n", ("forward", ["/"])),
    # Upgrade answered without 101: nothing is tunnelled, the pipelined request after it is an
    # HTTP request of its own.
    "upgrade_without_101": (b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
                            b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                            b"GET /second HTTP/1.1\r\nHost: a\r\n\r\n", ("forward", ["/", "/second"])),
    # Request-target forms: asterisk-form only for OPTIONS (RFC 9112 §3.2.4), no fragment.
    "asterisk_get": (b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", ("reject", 400, "asterisk-form not allowed")),
    "fragment": (b"GET /a#" + HIDDEN, ("reject", 400, "fragment in target")),
    # The HTTP/2 connection preface is not an HTTP/1 request.
    "http2_preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ("reject", 400, "bad version")),
}


def read_answers(conn, limit):
    """Responses until the connection closes (or `limit` were read); then whether it closed."""
    answers = []
    while len(answers) < limit:
        try:
            answers.append(conn.read_response())
        except EOFError:
            return answers, True
    return answers, conn.wait_closed(timeout=3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_smuggling_case(raw_origin, sluice, name):
    data, outcome = CASES[name]
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        c.send(data + SENTINEL)
        answers, closed = read_answers(c, 10)
    assert closed, f"{name}: sluice left the connection open: {answers}"
    statuses = [r.status for r in answers]
    if outcome[0] == "reject":
        _, status, reason = outcome
        assert statuses == [status], (name, answers)
        assert answers[0].header("Sluice-Error") == reason, (name, answers)
        assert (answers[0].header("Connection") or "").lower() == "close", answers
        expected_targets = []
        # Nothing of a refused request reaches the origin, not its head, not a byte of its body.
        assert b"".join(origin.received) == b"", (name, origin.received)
    else:
        expected_targets = outcome[1] + ["/sentinel"]
        assert statuses == [200] * len(expected_targets), (name, answers)
    # The origin saw exactly the requests the client got answers to, in order, could parse
    # every byte it received, and received no byte outside them: no half-forwarded head or
    # body, and for a rejected request no byte at all.
    origin.settle()
    assert origin.errors == [], (name, origin.errors, origin.received)
    assert origin.targets() == expected_targets, (name, origin.received)
    assert [r.header("X-Seen") for r in answers if r.header("X-Seen")] == expected_targets
    assert origin.unparsed() == {}, (name, origin.conns)
    if outcome[0] == "reject":
        assert origin.bytes_received() == b"", (name, origin.conns)


def test_normalised_bodies_arrive_intact(raw_origin, sluice):
    """What a normalised case forwards is the body the client framed: re-chunked chunked data
    and Content-Length bodies with leading zeros arrive byte for byte, trailers stripped."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    for name, body in [("chunk_data_with_request", HIDDEN), ("cl_leading_zeros", b"abcdef"),
                       ("te_tab", b"abcdef"), ("chunk_extension", b"hello"),
                       ("connection_content_length", HIDDEN), ("chunk_trailer", b"")]:
        before = len(origin.requests)
        with Conn(s.port) as c:
            c.send(CASES[name][0] + SENTINEL)
            read_answers(c, 10)
        origin.settle()
        got = origin.requests[before]
        assert got["body"] == body and got["trailers"] == [], (name, got)
        # One framing field, as RawOrigin insists; no Connection field (hop-by-hop, removed).
        names = [k for k, _ in got["headers"]]
        assert names.count("content-length") + names.count("transfer-encoding") == 1, got
        assert "connection" not in names, got


def test_h2c_upgrade_is_never_forwarded(raw_origin, sluice):
    """`Upgrade: h2c` (cleartext HTTP/2) is never passed on as an upgrade, whatever else sluice
    does with Upgrade: the origin sees no Upgrade/HTTP2-Settings, the client gets no 101, and a
    request pipelined behind it is handled as HTTP/1.1."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
               b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n" + SENTINEL)
        answers, closed = read_answers(c, 10)
    assert closed
    assert all(r.status != 101 for r in answers), answers
    for req in origin.requests:
        names = {k for k, _ in req["headers"]}
        assert not names & {"upgrade", "http2-settings"}, req
    origin.settle()
    assert origin.errors == []
    # docs/http.md: forwarded as a plain request, Upgrade and HTTP2-Settings removed; the
    # pipelined sentinel is read and answered as HTTP/1.1.
    assert [r.status for r in answers] == [200, 200], answers
    assert origin.targets() == ["/", "/sentinel"]
    assert origin.unparsed() == {}, origin.conns


def test_bad_chunk_after_the_head_was_forwarded_closes_the_upstream_connection(raw_origin, sluice):
    """A chunked body longer than the relay block (64 KiB) streams: one that turns bad after its
    first chunk went upstream gets 400 and a close, and the upstream connection (holding half a
    request, every forwarded chunk validated) is closed, not pooled. The next request comes on a
    new upstream connection. (A shorter body is checked whole first: see the CASES above.)"""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address]))
    first = 70_000
    with Conn(s.port) as c:
        c.send(chunked(body=b"%x\r\n" % first + b"a" * first + b"\r\n"))
        wait_until(lambda: origin.connections == 1 and len(origin.received[0]) > first,
                   what="the head and first chunk upstream")
        c.send(b"zz\r\n" + HIDDEN)
        answers, closed = read_answers(c, 10)
    assert [r.status for r in answers] == [400] and closed, answers
    assert answers[0].header("Sluice-Error") == "bad chunk"
    wait_until(lambda: origin.eof[0], what="sluice closing the half-sent upstream connection")
    assert origin.requests == [] and origin.errors == []
    with Conn(s.port) as c:
        r = c.request(b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r.status == 200 and r.header("X-Conn") == "1"
    assert b"smuggled" not in bytes(origin.received[0]) + bytes(origin.received[1])


def test_413_closes_without_reading_the_body(raw_origin, sluice):
    """A declared body over max_body_bytes: 413 and close; nothing of it (or the request hidden
    in it) reaches the origin, and the client can read the 413 although it was still sending."""
    origin = raw_origin()
    s = sluice(sluice_config([origin.address], server_extra='max_body_bytes = 1024'))
    with Conn(s.port) as c:
        c.send(post(b"Content-Length: 4096", body=HIDDEN))
        answers, closed = read_answers(c, 10)
    assert [r.status for r in answers] == [413] and closed, answers
    origin.settle()
    assert origin.connections == 0


# Ambiguous answers from the origin. `respond` builds the first answer; later answers are
# plain. After each, a second request must use a new upstream connection, the first one must
# have been closed by sluice, and the client must never see the extra bytes as a response.
STRAY = b"HTTP/1.1 200 OK\r\nX-Seen: /stray\r\nContent-Length: 0\r\n\r\n"


def first_then_plain(first):
    def respond(req):
        return first(req) if req["target"] == "/first" else RawOrigin.answer(req)
    return respond


AMBIGUOUS = {
    # Bytes after a Content-Length body, in the same write.
    "extra_bytes": (lambda req: RawOrigin.answer(req, extra=STRAY), "GET", 200),
    # A body on a HEAD answer: the head says 36 bytes, HEAD has none, the bytes are stray.
    "head_with_body": (lambda req: b"HTTP/1.1 200 OK\r\nContent-Length: 36\r\n\r\n" + STRAY[:36],
                       "HEAD", 200),
    # A body on a 204 (it has none by definition).
    "204_with_body": (lambda req: b"HTTP/1.1 204 No Content\r\n\r\n" + STRAY, "GET", 204),
    # Bytes after the last chunk.
    "chunked_trailing_bytes": (lambda req: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                               b"2\r\nok\r\n0\r\n\r\n" + STRAY, "GET", 200),
    # Both framings: refused as a bad response.
    "cl_and_te": (lambda req: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked"
                  b"\r\n\r\n0\r\n\r\n" + STRAY, "GET", 502),
    # Two Content-Lengths.
    "two_cl": (lambda req: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\nok"
               + STRAY, "GET", 502),
    # A switch nobody asked for.
    "unasked_101": (lambda req: b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\n\r\n" + STRAY, "GET", 502),
    # A bare LF in the head.
    "bare_lf": (lambda req: b"HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok" + STRAY, "GET", 502),
}


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_ambiguous_answer_never_returns_its_connection_to_the_pool(raw_origin, sluice, name):
    first, method, status = AMBIGUOUS[name]
    origin = raw_origin(first_then_plain(first))
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        r = c.request(f"{method} /first HTTP/1.1\r\nHost: a\r\n\r\n".encode(), head=method == "HEAD")
        assert r.status == status, r
        assert r.header("X-Seen") != "/stray"
        if status == 502:  # error answers close the client connection
            assert r.header("Sluice-Error") == "bad response; not retried: no other server to try"
            assert c.wait_closed()
    with Conn(s.port) as c:
        r2 = c.request(b"GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r2.status == 200 and r2.header("X-Seen") == "/second", r2
    assert r2.header("X-Conn") != "0", "the connection of an ambiguous answer was reused"
    wait_until(lambda: origin.eof[0], what="sluice closing the ambiguous connection")
    assert origin.targets() == ["/first", "/second"]


def test_stray_bytes_arriving_after_the_answer_are_caught_before_reuse(raw_origin, sluice):
    """The extra bytes come in a later write, after sluice has finished the answer and pooled
    the connection: the check before reuse (a non-blocking peek) finds them and discards it."""
    sent = threading.Event()

    def respond(req):
        if req["target"] != "/first":
            return RawOrigin.answer(req)

        def script(conn):
            conn.sendall(RawOrigin.answer(req))
            wait_until(lambda: answered.is_set(), what="the client reading the answer")
            conn.sendall(STRAY)
            sent.set()
        return script

    answered = threading.Event()
    origin = raw_origin(respond)
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        assert c.request(b"GET /first HTTP/1.1\r\nHost: a\r\n\r\n").status == 200
        answered.set()
        assert sent.wait(5)
        # The stray bytes are in sluice's receive queue once the origin's write returned (loopback
        # delivers synchronously).
        r2 = c.request(b"GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r2.status == 200 and r2.header("X-Seen") == "/second", r2
    assert r2.header("X-Conn") == "1"
    wait_until(lambda: origin.eof[0], what="sluice closing the connection with stray bytes")


def test_truncated_answer_closes_both_sides(raw_origin, sluice):
    """An answer cut short (fewer body bytes than announced, then close): the client sees the
    connection close before the announced length, never a complete-looking response, and the
    next request goes over a new upstream connection."""
    def respond(req):
        if req["target"] == "/first":
            return lambda conn: (conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"),
                                 conn.shutdown(socket.SHUT_WR))
        return RawOrigin.answer(req)
    origin = raw_origin(respond)
    s = sluice(sluice_config([origin.address]))
    with Conn(s.port) as c:
        c.send(b"GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
        with pytest.raises(EOFError):
            c.read_response()
    with Conn(s.port) as c:
        r = c.request(b"GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
    assert r.status == 200 and r.header("X-Conn") == "1", r


def test_absolute_form_target_wins_over_host_for_routing_and_the_origin(raw_origin, sluice):
    """RFC 9112 §3.2.2: with an absolute-form target the Host field is ignored. sluice routes by
    the target's authority and forwards that authority as Host, so a route chosen by one host can
    never reach an origin that serves another. Userinfo and non-HTTP schemes are 400."""
    good, other = raw_origin(), raw_origin()
    config = sluice_config([good.address]) + (
        f'\n[upstreams.other]\n[[upstreams.other.servers]]\naddress = "{other.address}"\n'
        '\n[[route]]\nhost = "b.example"\nupstream = "other"\n'
        '\n[[route]]\npath_prefix = "/"\nupstream = "app"\n')
    s = sluice(config)
    with Conn(s.port) as c:
        r = c.request(b"GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n")
        assert r.status == 200, r
    assert other.requests == [], other.requests
    got = good.requests[-1]
    assert [v for k, v in got["headers"] if k == "host"] == ["a.example"], got
    for target in (b"http://user@a.example/", b"ftp://a.example/"):
        with Conn(s.port) as c:
            r = c.request(b"GET " + target + b" HTTP/1.1\r\nHost: a.example\r\n\r\n")
            assert r.status == 400 and r.header("Sluice-Error") == "bad target", r
    assert len(good.requests) == 1 and other.requests == []
