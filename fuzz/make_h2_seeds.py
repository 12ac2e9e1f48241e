#!/usr/bin/python3
"""Writes the seeds of fuzz_h2 under fuzz/corpus/h2/ (re-run after editing; the files are checked in).

Each seed is byte 0 (the origin's answer and whether the frames come one at a time,
fuzz/targets/h2_session.cpp) and then the frames an
HTTP/2 client sends after its preface, made with Debian's python3-hyperframe and python3-hpack:
run it with /usr/bin/python3.
"""
import os
import shutil

from hpack import Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, PingFrame,
                              PriorityFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "h2")


def request(method="GET", path="/", extra=()):
    return [(":method", method), (":scheme", "http"), (":authority", "app.test"), (":path", path),
            *extra]


class Conn:
    """The client's frames, HPACK state kept across them as on one connection."""

    def __init__(self):
        self.enc = Encoder()
        self.out = SettingsFrame(0).serialize()

    def headers(self, sid, fields, end_stream=True, end_headers=True):
        f = HeadersFrame(sid)
        f.data = self.enc.encode(fields)
        f.flags.add("END_HEADERS") if end_headers else None
        f.flags.add("END_STREAM") if end_stream else None
        self.out += f.serialize()
        return self

    def raw(self, frame):
        self.out += frame.serialize()
        return self

    def data(self, sid, body, end_stream=True):
        f = DataFrame(sid)
        f.data = body
        if end_stream:
            f.flags.add("END_STREAM")
        return self.raw(f)


def seeds():
    s = {}
    s["get"] = Conn().headers(1, request())
    s["get-three-streams"] = Conn().headers(1, request(path="/a")).headers(3, request(path="/b")) \
        .headers(5, request(path="/c", extra=[("cookie", "a=1"), ("cookie", "b=2")]))
    s["post-length"] = Conn().headers(1, request("POST", "/p", [("content-length", "5")]), end_stream=False) \
        .data(1, b"hello")
    s["post-streamed-trailers"] = Conn().headers(1, request("POST", "/p"), end_stream=False) \
        .data(1, b"abc", end_stream=False).data(1, b"def", end_stream=False) \
        .headers(1, [("x-checksum", "1")])
    s["post-too-large"] = Conn().headers(1, request("POST", "/big"), end_stream=False) \
        .data(1, b"x" * 4000, end_stream=False).data(1, b"y" * 4000, end_stream=False) \
        .data(1, b"z" * 1000)
    s["length-mismatch"] = Conn().headers(1, request("POST", "/p", [("content-length", "9")]), end_stream=False) \
        .data(1, b"hello")
    s["uppercase-name"] = Conn().headers(1, request(extra=[("X-Upper", "1")]))
    s["connection-field"] = Conn().headers(1, request(extra=[("connection", "close")]))
    s["te-gzip"] = Conn().headers(1, request(extra=[("te", "gzip")]))
    s["no-path"] = Conn().headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", "a")])
    s["host-and-authority"] = Conn().headers(1, request(extra=[("host", "other.test")]))
    s["crlf-in-value"] = Conn().headers(1, request(extra=[("x-a", "1\r\nx-b: 2")]))
    s["connect"] = Conn().headers(1, [(":method", "CONNECT"), (":authority", "a.test:443")])
    s["upgrade"] = Conn().headers(1, request(extra=[("upgrade", "websocket")]))
    s["huge-field"] = Conn().headers(1, request(extra=[("x-big", "v" * 5000)]))
    s["reset-after-headers"] = Conn().headers(1, request("POST", "/p"), end_stream=False) \
        .raw(RstStreamFrame(1, error_code=8))
    rapid = Conn()
    for i in range(30):
        rapid.headers(1 + 2 * i, request(path=f"/r{i}")).raw(RstStreamFrame(1 + 2 * i, error_code=8))
    s["rapid-reset"] = rapid
    cont = Conn()
    h = HeadersFrame(1)
    block = cont.enc.encode(request(extra=[("x-long", "w" * 300)]))
    h.data = block[:20]
    h.flags.add("END_STREAM")
    c = ContinuationFrame(1)
    c.data = block[20:]
    c.flags.add("END_HEADERS")
    s["continuation"] = cont.raw(h).raw(c)
    pings = Conn()
    for i in range(20):
        pings.raw(PingFrame(0, opaque_data=bytes([i]) * 8))
    s["ping-flood"] = pings
    settings = Conn()
    for _ in range(20):
        settings.raw(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1}))
    s["settings-flood"] = settings.headers(1, request())
    s["window-priority"] = Conn().raw(WindowUpdateFrame(0, window_increment=1 << 20)) \
        .raw(PriorityFrame(1, depends_on=0, stream_weight=16)).headers(1, request()) \
        .raw(WindowUpdateFrame(1, window_increment=100))
    s["empty-data"] = Conn().headers(1, request("POST", "/p"), end_stream=False) \
        .data(1, b"", end_stream=False).data(1, b"", end_stream=False).data(1, b"ok")
    s["goaway"] = Conn().headers(1, request()).raw(GoAwayFrame(0, last_stream_id=1))
    s["head"] = Conn().headers(1, request("HEAD", "/h"))
    s["too-many-streams"] = Conn()
    for i in range(20):
        s["too-many-streams"].headers(1 + 2 * i, request("POST", f"/s{i}"), end_stream=False)
    s["even-stream-id"] = Conn().headers(2, request())
    s["data-on-idle-stream"] = Conn().data(7, b"x")
    return s


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for i, (name, conn) in enumerate(sorted(seeds().items())):
        # The four answers of the origin in turn, each seed both at once and a frame at a time.
        for one_by_one in (0, 4):
            with open(os.path.join(OUT, name + ("-framewise" if one_by_one else "")), "wb") as f:
                f.write(bytes([i % 4 | one_by_one]) + conn.out)


if __name__ == "__main__":
    main()
