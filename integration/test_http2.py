"""HTTP/2 to clients (docs/http2.md): h2c with prior knowledge on a plain listener with
[server] h2c = true, ALPN h2 on TLS listeners; every stream forwarded to an HTTP/1.1 origin as a
well-formed HTTP/1.1 request (the origin's view asserted byte for byte), malformed streams
refused with nothing forwarded, Rapid Reset answered with GOAWAY(ENHANCE_YOUR_CALM).

Real clients: curl (--http2-prior-knowledge, --http2 over TLS), nghttp, h2load; hand-made frames
with python3-h2 (its outbound validation off, so that it sends what a hostile client would)."""
import re
import signal
import socket
import subprocess
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hpack
import hyperframe.frame
import pytest

from conftest import RawOrigin, metric, sluice_config, toml_table, wait_until
from test_grpc import H2Origin
from test_tls import pki, tls_block, tls_port  # noqa: F401 (pki is a fixture)

H2C = "h2c = true"
ADMIN = toml_table("admin", listen="127.0.0.1:0")


def curl_h2(*args, timeout=20):
    p = subprocess.run(["curl", "-sS", "--max-time", str(timeout), "-w", "\n%{http_code} %{http_version}",
                        *map(str, args)], capture_output=True, timeout=timeout + 5)
    assert p.returncode == 0, p.stderr
    body, _, tail = p.stdout.rpartition(b"\n")
    code, version = tail.decode().split()
    return int(code), version, body


def requests_seen(origin, n):
    wait_until(lambda: len(origin.requests) >= n, what=f"{n} requests at the origin")
    origin.settle()
    return origin.requests


def header(req, name):
    return [v for k, v in req["headers"] if k == name]


def test_h2c_prior_knowledge_get_and_post_reach_the_origin_as_http11(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    assert curl_h2("--http2-prior-knowledge", f"http://t.test:{s.port}/a?x=1",
                   "--resolve", f"t.test:{s.port}:127.0.0.1") == (200, "2", b"seen /a?x=1\n")
    body = b"hello, origin\n" * 100
    code, version, answer = curl_h2("--http2-prior-knowledge", "--data-binary", body.decode(), s.url("/b"),
                                    "-H", "Cookie: a=1", "-H", "Cookie: b=2")
    assert (code, version, answer) == (200, "2", b"seen /b\n")
    get, post = requests_seen(o, 2)
    assert (get["method"], get["target"], header(get, "host")) == ("GET", "/a?x=1", [f"t.test:{s.port}"])
    assert header(get, "content-length") == [] and header(get, "transfer-encoding") == []
    assert (post["method"], post["target"], post["body"]) == ("POST", "/b", body)
    assert header(post, "content-length") == [str(len(body))]
    # RFC 9113 §8.2.3: the cookie crumbs arrive as one field.
    assert header(post, "cookie") == ["a=1; b=2"]
    assert header(post, "x-forwarded-proto") == ["http"]
    assert o.errors == [] and o.unparsed() == {}


def test_an_interim_103_reaches_the_http2_client_before_the_final_answer(raw_origin, sluice):
    """An origin's 103 Early Hints goes on as a HEADERS frame without END_STREAM (RFC 9113 §8.1),
    spliced as for an HTTP/1.1 client (no framing fields), before the final answer."""
    o = raw_origin(lambda req: b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n"
                               b"Content-Length: 7\r\n\r\n" + RawOrigin.answer(req))
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    c.send_headers(1, base(s.port, "/x"), end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    sock.close()
    heads = [e for e in events if isinstance(e, (h2.events.InformationalResponseReceived, h2.events.ResponseReceived))]
    assert [type(e).__name__ for e in heads] == ["InformationalResponseReceived", "ResponseReceived"]
    hint, final = (dict(e.headers) for e in heads)
    assert hint[b":status"] == b"103" and hint[b"link"] == b"</style.css>; rel=preload"
    assert b"content-length" not in hint
    assert final[b":status"] == b"200"
    assert b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived)) == b"seen /x\n"


def test_h2c_is_off_by_default(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address]))
    p = subprocess.run(["curl", "-sS", "--max-time", "5", "--http2-prior-knowledge", s.url("/")],
                       capture_output=True, timeout=10)
    assert p.returncode != 0
    o.settle()
    assert o.accepted == 0


def test_tls_listener_offers_h2_by_alpn_unless_told_not_to(raw_origin, sluice, pki):
    o = raw_origin()
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config([o.address], server_extra=tls_block([cert])))  # the default: h2 first
    port = tls_port(s)
    common = ["--cacert", pki.ca, "--resolve", f"a.test:{port}:127.0.0.1"]
    assert curl_h2("--http2", *common, f"https://a.test:{port}/tls") == (200, "2", b"seen /tls\n")
    [req] = requests_seen(o, 1)
    assert header(req, "x-forwarded-proto") == ["https"] and header(req, "host") == [f"a.test:{port}"]
    # A client that offers only http/1.1 gets it from the same listener.
    assert curl_h2("--http1.1", *common, f"https://a.test:{port}/old") == (200, "1.1", b"seen /old\n")
    off = sluice(sluice_config([o.address], server_extra=tls_block([cert], extra='alpn = ["http/1.1"]')))
    port = tls_port(off)
    common = ["--cacert", pki.ca, "--resolve", f"a.test:{port}:127.0.0.1"]
    assert curl_h2("--http2", *common, f"https://a.test:{port}/one") == (200, "1.1", b"seen /one\n")


def test_concurrent_streams_on_one_connection_nghttp(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    urls = [s.url(f"/n{i}") for i in range(8)]
    p = subprocess.run(["nghttp", "-n", "--stat", *urls], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().count(" 200 ") == 8, p.stdout
    seen = requests_seen(o, 8)
    assert sorted(r["target"] for r in seen) == sorted(f"/n{i}" for i in range(8))
    assert o.errors == [] and o.unparsed() == {}


def test_h2load_bounded_run_all_succeed(origins, sluice):
    [o] = origins(1)
    s = sluice(sluice_config([o], server_extra=H2C))
    p = subprocess.run(["h2load", "-n", "200", "-c", "2", "-m", "10", s.url("/")],
                       capture_output=True, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert re.search(r"requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored", out), out
    assert re.search(r"status codes: 200 2xx", out), out


# ---- hand-made frames (python3-h2)

def h2_client(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    config = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                       normalize_outbound_headers=False, validate_inbound_headers=False)
    c = h2.connection.H2Connection(config=config)
    c.initiate_connection()
    sock.sendall(c.data_to_send())
    return sock, c


def events_until(sock, c, done, timeout=5.0):
    events, deadline = [], time.monotonic() + timeout
    while not done(events):
        assert time.monotonic() < deadline, events
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        events += c.receive_data(data)
        out = c.data_to_send()
        if out:
            sock.sendall(out)
    return events


def ended(stream_id):
    def done(events):
        return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) and e.stream_id == stream_id
                   for e in events) or any(isinstance(e, h2.events.ConnectionTerminated) for e in events)
    return done


def base(port, path="/ok"):
    return [(":method", "GET"), (":scheme", "http"), (":authority", f"t.test:{port}"), (":path", path)]


def refusal_cases(port):
    b = base(port)
    return {
        "uppercase name": b + [("X-Upper", "1")],
        "connection field": b + [("connection", "close")],
        "keep-alive field": b + [("keep-alive", "5")],
        "transfer-encoding": b + [("transfer-encoding", "chunked")],
        "upgrade field": b + [("upgrade", "websocket")],
        "te other than trailers": b + [("te", "gzip")],
        "no :path": b[:3],
        "no :method": b[1:],
        "no :scheme": [b[0]] + b[2:],
        "duplicate :path": b + [(":path", "/other")],
        "pseudo after regular": b[:3] + [("x-a", "1"), b[3]],
        "unknown pseudo": b + [(":foo", "bar")],
        "CR in value": b + [("x-a", "1\r\nx-injected: 1")],
        "LF in value": b + [("x-a", "1\nx-injected: 1")],
        "NUL in value": b + [("x-a", "1\x00")],
        "space in name": b + [("x a", "1")],
        "Host differs from :authority": b + [("host", "evil.test")],
        "empty :path": b[:3] + [(":path", "")],
    }


@pytest.mark.parametrize("case", list(refusal_cases(0)))
def test_malformed_stream_is_reset_and_nothing_reaches_the_origin(raw_origin, sluice, case):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    c.send_headers(1, refusal_cases(s.port)[case], end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    resets = [e for e in events if isinstance(e, h2.events.StreamReset)]
    assert [e.error_code for e in resets] == [h2.errors.ErrorCodes.PROTOCOL_ERROR], events
    # The connection still serves a good stream.
    c.send_headers(3, base(s.port, "/after"), end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(3))
    assert [e.headers for e in events if isinstance(e, h2.events.ResponseReceived)][0][0] == (b":status", b"200")
    [req] = requests_seen(o, 1)
    assert req["target"] == "/after"
    assert o.unparsed() == {}
    sock.close()


def test_content_length_mismatch_resets_and_forwards_nothing(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    post = base(s.port, "/post")
    post[0] = (":method", "POST")
    c.send_headers(1, post + [("content-length", "10")])
    c.send_data(1, b"12345", end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    assert [e.error_code for e in events if isinstance(e, h2.events.StreamReset)] == \
        [h2.errors.ErrorCodes.PROTOCOL_ERROR], events
    c.send_headers(3, post + [("content-length", "20")])
    c.send_data(3, b"x" * 21, end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(3))
    assert [e.error_code for e in events if isinstance(e, h2.events.StreamReset)] == \
        [h2.errors.ErrorCodes.PROTOCOL_ERROR], events
    o.settle()
    assert o.accepted == 0
    sock.close()


def test_connect_is_refused_with_501(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    c.send_headers(1, [(":method", "CONNECT"), (":authority", "example.test:443")])
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    [resp] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert dict(resp.headers)[b":status"] == b"501"
    o.settle()
    assert o.accepted == 0
    sock.close()


def test_rapid_reset_gets_goaway_enhance_your_calm(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C + "\nhttp2_max_early_resets = 50", top=ADMIN))
    sock, c = h2_client(s.port)
    for i in range(60):
        sid = 1 + 2 * i
        c.send_headers(sid, base(s.port, f"/r{i}"), end_stream=True)
        c.reset_stream(sid)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, lambda ev: any(isinstance(e, h2.events.ConnectionTerminated) for e in ev))
    [goaway] = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    o.settle()
    # Every stream was reset in the same read as it opened: none reached the origin.
    assert o.accepted == 0
    sock.close()
    # The streams after the 50th are not looked at: the connection was closing.
    assert [metric(s, f"sluice_http2_{name}_total") for name in ("connections", "streams", "early_resets", "calm_closes")] \
        == [1, 50, 50, 1]


def test_after_its_last_request_a_connection_says_goaway_and_the_client_goes_on_over_a_new_one(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C + "\nhttp2_max_requests = 2"))
    sock, c = h2_client(s.port)
    for sid in (1, 3, 5):
        c.send_headers(sid, base(s.port, f"/m{sid}"), end_stream=True)
    sock.sendall(c.data_to_send())
    # Everything until sluice closes, read frame by frame (python3-h2 takes a GOAWAY for the end
    # of the connection and would refuse the answers that follow it).
    sock.settimeout(5)
    wire = b""
    while chunk := sock.recv(65536):
        wire += chunk
    sock.close()
    decoder, statuses, goaways = hpack.Decoder(), {}, []
    while len(wire) >= 9:
        frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(wire[:9]))
        frame.parse_body(memoryview(wire[9:9 + length]))
        wire = wire[9 + length:]
        if isinstance(frame, hyperframe.frame.HeadersFrame):
            statuses[frame.stream_id] = dict(decoder.decode(frame.data))[":status"]
        elif isinstance(frame, hyperframe.frame.GoAwayFrame):
            goaways.append((frame.error_code, frame.last_stream_id))
    assert goaways == [(0, 3)] and statuses == {1: "200", 3: "200"}
    # Stream 5 was never processed: the client sends it again on a new connection.
    sock, c = h2_client(s.port)
    c.send_headers(1, base(s.port, "/m5"), end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    assert [dict(e.headers)[b":status"] for e in events if isinstance(e, h2.events.ResponseReceived)] == [b"200"]
    sock.close()
    assert sorted(r["target"] for r in requests_seen(o, 3)) == ["/m1", "/m3", "/m5"]


PROBE = b"probe!!!"  # the opaque data of the PING that ends a flood


def flood(port, frames, timeout=10.0):
    """Sends the preface and SETTINGS, then `frames` (hyperframe frames), then a PING, reading
    what comes back (acknowledging nothing): a GOAWAY's error code; "alive" when the PING's ACK
    came first (sluice took every frame and kept the connection); None when the connection
    ended, or nothing decided within `timeout`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + hyperframe.frame.SettingsFrame(0).serialize()
                 + b"".join(f.serialize() for f in frames)
                 + hyperframe.frame.PingFrame(0, opaque_data=PROBE).serialize())
    data, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            while len(data) >= 9:
                frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(data[:9]))
                if len(data) < 9 + length:
                    break
                frame.parse_body(memoryview(data[9:9 + length]))
                data = data[9 + length:]
                if isinstance(frame, hyperframe.frame.GoAwayFrame):
                    return frame.error_code
                if isinstance(frame, hyperframe.frame.PingFrame) and "ACK" in frame.flags \
                        and frame.opaque_data == PROBE:
                    return "alive"
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
    except TimeoutError:
        return None
    finally:
        sock.close()
    return None


def request_headers(stream_id, port, end_stream):
    """HEADERS for `GET /` on `stream_id`, HPACK-encoded by python3-h2's encoder."""
    import hpack
    frame = hyperframe.frame.HeadersFrame(stream_id, hpack.Encoder().encode(base(port, "/glitch")))
    frame.flags.add("END_HEADERS")
    if end_stream:
        frame.flags.add("END_STREAM")
    return frame


def glitch_frames(kind, port, n):
    """`n` frames of one kind of glitch (docs/http2.md, Defences)."""
    if kind == "ping":
        return [hyperframe.frame.PingFrame(0, opaque_data=i.to_bytes(8, "big")) for i in range(n)]
    if kind == "settings":
        return [hyperframe.frame.SettingsFrame(0, settings={h2.settings.SettingCodes.MAX_FRAME_SIZE: 16384})
                for _ in range(n)]
    if kind == "priority":
        return [hyperframe.frame.PriorityFrame(2 * i + 1, depends_on=0, stream_weight=15) for i in range(n)]
    if kind == "empty_data":
        return [request_headers(1, port, end_stream=False)] + [hyperframe.frame.DataFrame(1, b"") for _ in range(n)]
    # invalid_frame: a stream's WINDOW_UPDATE past 2^31 - 1 is a stream error, which nghttp2
    # answers by resetting the stream itself (MadeYouReset: resets the client did not send).
    frames = []
    for i in range(n):
        frames += [request_headers(2 * i + 1, port, end_stream=False),
                   hyperframe.frame.WindowUpdateFrame(2 * i + 1, window_increment=2 ** 31 - 1)]
    return frames


@pytest.mark.parametrize("kind", ["ping", "settings", "priority", "empty_data", "invalid_frame"])
def test_a_flood_of_frames_without_a_request_gets_goaway_enhance_your_calm(raw_origin, sluice, kind):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C + "\nhttp2_max_glitches = 50", top=ADMIN))
    assert flood(s.port, glitch_frames(kind, s.port, 60)) == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert metric(s, "sluice_http2_glitches_total", kind=kind) == 50
    assert metric(s, "sluice_http2_glitch_closes_total") == 1
    # Below the budget the same frames are served as ever: the connection stays up (the PING
    # after them is answered).
    assert flood(s.port, glitch_frames(kind, s.port, 10)) == "alive"
    assert metric(s, "sluice_http2_glitch_closes_total") == 1
    o.settle()
    # What may have reached the origin: the streams the frames opened, on the first connection
    # only before its GOAWAY (PING, SETTINGS and PRIORITY open none; the empty DATA go on one
    # stream; each invalid frame's stream was opened by its HEADERS).
    opened = {"ping": 0, "settings": 0, "priority": 0, "empty_data": 1 + 1, "invalid_frame": 50 + 10}[kind]
    assert o.accepted <= opened


def test_on_default_settings_a_thousand_pings_close_the_connection_and_fewer_do_not(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C, top=ADMIN))
    # 998 PINGs and the probe's: 999 glitches, one short of http2_max_glitches' default (1000).
    assert flood(s.port, glitch_frames("ping", s.port, 998)) == "alive"
    assert flood(s.port, glitch_frames("ping", s.port, 1000)) == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert metric(s, "sluice_http2_glitch_closes_total") == 1


def test_access_log_says_http2(origins, sluice):
    [o] = origins(1)
    s = sluice(sluice_config([o], server_extra=H2C, access="json"))
    assert curl_h2("--http2-prior-knowledge", s.url("/logged"))[0] == 200
    [record] = s.access_records(1)
    assert (record["protocol"], record["status"], record["target"]) == ("HTTP/2.0", 200, "/logged")


def test_settings_announce_the_limits(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    events = events_until(sock, c, lambda ev: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in ev))
    [changed] = [e for e in events if isinstance(e, h2.events.RemoteSettingsChanged)]
    got = {k: v.new_value for k, v in changed.changed_settings.items()}
    S = h2.settings.SettingCodes
    assert (got[S.MAX_CONCURRENT_STREAMS], got[S.INITIAL_WINDOW_SIZE], got[S.MAX_HEADER_LIST_SIZE],
            got[S.ENABLE_PUSH]) == (128, 65535, 16 * 1024, 0)
    sock.close()


def test_graceful_shutdown_sends_goaway_and_lets_the_open_stream_finish(scripted, sluice):
    """SIGTERM while a stream waits for its origin: a GOAWAY(NO_ERROR) with the largest stream
    id, then one naming that stream as the last, and the stream's answer whole. (nghttp as the client: python3-h2 takes a GOAWAY for
    the connection's end.)"""
    o = scripted("slow", delay=2.0)  # past the second GOAWAY, 1 s after the first
    s = sluice(sluice_config([o.address], server_extra=H2C))
    client = subprocess.Popen(["nghttp", "-v", s.url("/slow")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: o.connections == 1, what="the request at the origin")
    s.proc.send_signal(signal.SIGTERM)
    out, err = client.communicate(timeout=20)
    out = out.decode()
    assert client.returncode == 0, out + err.decode()
    # RFC 9113 §6.8: first the largest stream id (open no more), then the last stream taken.
    goaways = re.findall(r"recv GOAWAY frame .*\n\s*\(last_stream_id=(\d+), error_code=NO_ERROR", out)
    assert goaways == ["2147483647", "13"], out
    assert re.search(r"recv \(stream_id=13\) :status: 200", out), out
    assert re.search(r"recv DATA frame <length=\d+, flags=0x01, stream_id=13>", out), out
    assert s.proc.wait(timeout=10) == 0
    assert o.count() == 1


def test_a_stream_reset_while_at_the_origin_cancels_its_upstream_request(scripted, sluice):
    """The client resets a stream whose request the origin holds: sluice closes that origin
    connection (the origin's work for it stops being awaited) and the client connection goes on."""
    o = scripted("hang", behaviour="hang")
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    c.send_headers(1, base(s.port, "/held"), end_stream=True)
    sock.sendall(c.data_to_send())
    wait_until(lambda: o.count() == 1, what="the request at the origin")
    c.reset_stream(1)
    sock.sendall(c.data_to_send())
    record = o.wait_closed(0)
    assert record.eof or record.reset
    sock.close()


def test_open_streams_resets_both_ways_and_goaways_sent_are_counted(scripted, sluice):
    o = scripted("hang", behaviour="hang")
    s = sluice(sluice_config([o.address], server_extra=H2C, top=ADMIN))
    assert [metric(s, f"sluice_http2_open_{n}") for n in ("connections", "streams")] == [0, 0]
    sock, c = h2_client(s.port)
    for sid in (1, 3, 5):
        c.send_headers(sid, base(s.port, f"/held{sid}"), end_stream=True)
    sock.sendall(c.data_to_send())
    wait_until(lambda: o.count() == 3, what="three requests at the origin")
    assert [metric(s, f"sluice_http2_open_{n}") for n in ("connections", "streams")] == [1, 3]
    c.reset_stream(1, error_code=h2.errors.ErrorCodes.CANCEL)
    c.send_headers(7, base(s.port) + [("X-Upper", "1")], end_stream=True)  # malformed: sluice resets it
    sock.sendall(c.data_to_send())
    wait_until(lambda: metric(s, "sluice_http2_open_streams") == 2, what="the reset stream closed")

    def resets(direction, reason):
        return metric(s, "sluice_http2_resets_total", direction=direction, reason=reason)
    wait_until(lambda: resets("sent", "protocol_error") == 1, what="the malformed stream reset")
    assert resets("received", "cancel") == 1
    assert metric(s, "sluice_http2_goaways_sent_total") == 0
    # A PING on a stream is a connection error (RFC 9113 §6.7): GOAWAY(PROTOCOL_ERROR), and the
    # connection and its streams are gone.
    sock.sendall(b"\x00\x00\x08\x06\x00\x00\x00\x00\x01" + b"12345678")  # length 8, PING, stream 1
    events = events_until(sock, c, lambda ev: any(isinstance(e, h2.events.ConnectionTerminated) for e in ev))
    assert [e.error_code for e in events if isinstance(e, h2.events.ConnectionTerminated)] == \
        [h2.errors.ErrorCodes.PROTOCOL_ERROR]
    assert metric(s, "sluice_http2_goaways_sent_total") == 1
    wait_until(lambda: [metric(s, f"sluice_http2_open_{n}") for n in ("connections", "streams")] == [0, 0],
               what="the connection and its streams counted as closed")
    sock.close()


def test_a_client_that_never_opens_its_window_is_reset_then_closed(origins, sluice):
    """A zero-window reader (RFC 9113 §6.9.2: SETTINGS_INITIAL_WINDOW_SIZE 0, never a
    WINDOW_UPDATE): its stream is reset (CANCEL) after idle_timeout without progress, the idle
    connection then gets GOAWAY and is closed; the access log says why."""
    [o] = origins(1)
    s = sluice(sluice_config([o], server_extra=H2C + '\nidle_timeout = "1s"', access="json"))
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    config = h2.config.H2Configuration(client_side=True)
    c = h2.connection.H2Connection(config=config)
    c.local_settings = h2.settings.Settings(client=True, initial_values={
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.initiate_connection()
    c.send_headers(1, base(s.port, "/big?size=100000"), end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1), timeout=10)
    assert [e.error_code for e in events if isinstance(e, h2.events.StreamReset)] == \
        [h2.errors.ErrorCodes.CANCEL], events
    [record] = s.access_records(1)
    assert (record["protocol"], record["status"], record["error"]) == ("HTTP/2.0", 200, "client write timeout")
    events = events_until(sock, c, lambda ev: any(isinstance(e, h2.events.ConnectionTerminated) for e in ev),
                          timeout=10)
    sock.settimeout(5)
    while sock.recv(65536):
        pass  # until sluice closes it
    sock.close()


def test_a_head_over_max_header_bytes_is_answered_431_and_not_forwarded(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C + '\nmax_header_bytes = "4KiB"'))
    sock, c = h2_client(s.port)
    c.send_headers(1, base(s.port, "/big-head") + [("x-big", "a" * 5000)], end_stream=True)
    sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1))
    [resp] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert dict(resp.headers)[b":status"] == b"431"
    o.settle()
    assert o.accepted == 0
    sock.close()


def test_a_large_body_streams_to_the_origin_with_its_length(raw_origin, sluice, tmp_path):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    body = bytes(range(256)) * 4096  # 1 MiB
    f = tmp_path / "body"
    f.write_bytes(body)
    assert curl_h2("--http2-prior-knowledge", "--data-binary", f"@{f}", s.url("/up")) == (200, "2", b"seen /up\n")
    [req] = requests_seen(o, 1)
    assert (req["method"], header(req, "content-length"), req["body"] == body) == ("POST", [str(len(body))], True)
    assert o.errors == [] and o.unparsed() == {}


def test_a_body_without_content_length_streams_chunked(raw_origin, sluice):
    o = raw_origin()
    s = sluice(sluice_config([o.address], server_extra=H2C))
    sock, c = h2_client(s.port)
    post = base(s.port, "/chunks")
    post[0] = (":method", "POST")
    c.send_headers(1, post)
    sock.sendall(c.data_to_send())
    body = b""
    for i in range(20):
        piece = bytes([65 + i]) * 10000
        body += piece
        # Within the windows: sluice opens them as the origin takes the bytes.
        events_until(sock, c, lambda ev: c.local_flow_control_window(1) >= len(piece) or
                     any(isinstance(e, h2.events.StreamReset) for e in ev))
        c.send_data(1, piece, end_stream=i == 19)
        sock.sendall(c.data_to_send())
    events = events_until(sock, c, ended(1), timeout=10)
    [resp] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert dict(resp.headers)[b":status"] == b"200"
    [req] = requests_seen(o, 1)
    assert header(req, "transfer-encoding") == ["chunked"] and header(req, "content-length") == []
    assert req["body"] == body
    assert o.errors == [] and o.unparsed() == {}
    sock.close()


def test_h2c_upstream_gets_http2_from_http2_clients(sluice):
    o = H2Origin("h2", "answer")
    try:
        s = sluice(sluice_config([o.address], server_extra=H2C, upstream_extra='protocol = "h2c"'))
        assert curl_h2("--http2-prior-knowledge", "-H", "X-Custom: v", "-H", "Connection: keep-alive",
                       s.url("/a?x=1")) == (200, "2", b"from h2\n")
        code, version, body = curl_h2("--http2-prior-knowledge", "--data-binary", "hello", s.url("/b"))
        assert (code, version, body) == (200, "2", b"from h2\n")
        get, post = o.heads
        assert (get[":method"], get[":scheme"], get[":path"], get[":authority"]) == ("GET", "http", "/a?x=1",
                                                                                      f"127.0.0.1:{s.port}")
        assert get["x-custom"] == "v" and get["x-forwarded-for"] == "127.0.0.1" and get["x-forwarded-proto"] == "http"
        assert "x-request-id" in get
        # RFC 9113 §8.2.2: no connection-specific field, and Host only as :authority.
        assert not {"connection", "keep-alive", "transfer-encoding", "upgrade", "host"} & set(get)
        assert (post[":method"], post[":path"], post.get("content-length")) == ("POST", "/b", "5")
    finally:
        o.close()


def test_request_trailers_reach_an_h2c_upstream(sluice):
    o = H2Origin("h2", "answer")
    try:
        s = sluice(sluice_config([o.address], server_extra=H2C, upstream_extra='protocol = "h2c"'))
        sock, c = h2_client(s.port)
        head = [(":method", "POST"), (":scheme", "http"), (":authority", f"t.test:{s.port}"), (":path", "/up"),
                ("te", "trailers")]
        c.send_headers(1, head)
        sock.sendall(c.data_to_send())
        c.send_data(1, b"part one,")
        sock.sendall(c.data_to_send())
        c.send_data(1, b" part two")
        c.send_headers(1, [("x-checksum", "abc"), ("x-count", "2")], end_stream=True)
        sock.sendall(c.data_to_send())
        events = events_until(sock, c, ended(1))
        sock.close()
        [response] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
        assert dict(response.headers)[b":status"] == b"200"
        assert o.bodies == [b"part one, part two"]
        assert o.trailers == [{"x-checksum": "abc", "x-count": "2"}]
    finally:
        o.close()


def test_an_h2c_server_that_stops_reading_a_streamed_body_gets_504_send_timeout(sluice, tmp_path):
    from test_h2_upstream_http1 import H2Server
    o = H2Server()
    try:
        s = sluice(sluice_config([o.address], server_extra=H2C, upstream_extra='protocol = "h2c"\nsend_timeout = "500ms"'))
        big = tmp_path / "big"
        big.write_bytes(b"y" * (1 << 20))
        # nghttp, not curl: curl takes the RST_STREAM(NO_ERROR) that follows an answer given
        # before the request's end (RFC 9113 §8.1) as an error and drops the answer.
        p = subprocess.run(["nghttp", "-v", "-d", str(big), s.url("/noread")], capture_output=True, timeout=25)
        out = p.stdout.decode()
        assert re.search(r"recv \(stream_id=\d+\) :status: 504", out), out[-2000:]
        assert re.search(r"recv \(stream_id=\d+\) sluice-error: upstream send timeout", out), out[-2000:]
        wait_until(lambda: o.resets == ["/noread"], what="the stream reset at the server")
    finally:
        o.close()
