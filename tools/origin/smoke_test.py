#!/usr/bin/env python3
"""Smoke test for sluice-origin: starts it on ephemeral loopback ports and checks every knob, the
control paths and the protocol corners over raw sockets (so that nothing in between normalizes
what the origin sends). Ends every process it starts, by PID.

Usage: tools/origin/smoke_test.py [PATH/TO/sluice-origin]   (default: build/release/sluice-origin)
"""
import hashlib, json, os, signal, socket, subprocess, sys, time
from pathlib import Path

BIN = sys.argv[1] if len(sys.argv) > 1 else str(
    Path(__file__).resolve().parents[2] / "build" / "release" / "sluice-origin")
PATTERN = b"0123456789abcdef"


def pattern(n):
    return (PATTERN * (n // 16 + 1))[:n]


def start(*extra, name="app-1"):
    p = subprocess.Popen([BIN, "--listen", "127.0.0.1:0", "--name", name, *extra],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("listening 127.0.0.1:"), line
    return p, int(line.rsplit(":", 1)[1])


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        d = self.s.recv(1 << 16)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def response(self, head=False):
        status = self.line()
        code = int(status.split()[1])
        hdrs = []
        while True:
            l = self.line()
            if not l:
                break
            k, v = l.split(b":", 1)
            hdrs.append((k.decode().lower(), v.strip().decode()))
        h = dict(hdrs)
        if code == 100:
            return code, h, b""
        if head or code in (204, 304):
            return code, h, b""
        if h.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                n = int(self.line().split(b";")[0], 16)
                if n == 0:
                    assert self.line() == b""
                    break
                body += self.take(n)
                assert self.take(2) == b"\r\n"
            return code, h, body
        return code, h, self.take(int(h["content-length"]))

    def eof(self):
        try:
            while True:
                d = self.s.recv(1 << 16)
                if not d:
                    return True
                self.buf += d
        except ConnectionResetError:
            return True


def req(port, target="/", method="GET", headers=(), body=None, version="1.1"):
    s = connect(port)
    h = f"{method} {target} HTTP/{version}\r\nHost: t\r\n"
    for k, v in headers:
        h += f"{k}: {v}\r\n"
    if body is not None:
        h += f"Content-Length: {len(body)}\r\n"
    s.sendall(h.encode() + b"\r\n" + (body or b""))
    r = Reader(s)
    out = r.response(head=(method == "HEAD"))
    s.close()
    return out


def wait_until(fn, timeout=5.0):
    """Polls fn() until it returns something truthy or the deadline passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.01)


def check(name, cond, detail=""):
    if not cond:
        print("FAIL", name, detail)
        sys.exit(1)
    print("ok  ", name)


p, port = start()
try:
    c, h, b = req(port)
    check("default", c == 200 and b == b"app-1\n" and h["x-origin"] == "app-1", (c, h, b))
    c, h, b = req(port, "/x?status=503")
    check("status query", c == 503 and b == b"app-1\n" and h["x-origin"] == "app-1")
    c, h, b = req(port, "/x", headers=[("X-Origin-Status", "404")])
    check("status header", c == 404)
    c, h, b = req(port, "/x?status=201", headers=[("X-Origin-Status", "404")])
    check("query wins", c == 201)
    c, h, b = req(port, "/x?status=abc")
    check("bad knob 400", c == 400 and b"status" in b)
    c, h, b = req(port, "/x?size=100000")
    check("size", c == 200 and b == pattern(100000) and h["content-length"] == "100000")
    c, h, b = req(port, "/x?size=0")
    check("size 0", c == 200 and b == b"")
    c, h, b = req(port, "/x?size=600000&chunked=1")
    check("chunked size", b == pattern(600000) and "content-length" not in h)
    c, h, b = req(port, "/x?chunked=1")
    check("chunked name", b == b"app-1\n" and h["transfer-encoding"] == "chunked")
    c, h, b = req(port, "/x?size=1000", method="HEAD")
    check("HEAD", c == 200 and h["content-length"] == "1000")
    c, h, b = req(port, "/x?status=204&size=10")
    check("204 bodiless", c == 204 and "content-length" not in h)

    # delay: concurrent delays overlap
    t0 = time.time()
    socks = []
    for i in range(5):
        s = connect(port)
        s.sendall(b"GET /d?delay=300 HTTP/1.1\r\nHost: t\r\n\r\n")
        socks.append(s)
    stats = lambda: json.loads(req(port, "/stats")[2])
    st = wait_until(lambda: (lambda x: x if x["in_flight"] == 5 else None)(stats()))
    check("in_flight during delay", st and st["max_in_flight"] >= 5, st)
    for s in socks:
        c, h, b = Reader(s).response()
        assert c == 200
        s.close()
    el = time.time() - t0
    check("delay concurrent", 0.28 < el < 1.0, el)

    # echo
    c, h, b = req(port, "/e?echo=1&a=b", method="PUT", headers=[("X-Foo", " bar"), ("x-foo", "Two")], body=b"hello")
    j = json.loads(b)
    check("echo", c == 200 and h["content-type"] == "application/json" and j["method"] == "PUT"
          and j["target"] == "/e?echo=1&a=b" and j["headers"][1] == ["X-Foo", "bar"]
          and j["headers"][2] == ["x-foo", "Two"] and j["body_bytes"] == 5 and j["version"] == "HTTP/1.1", j)

    # sink with CL, sha256
    data = os.urandom(3_000_000)
    c, h, b = req(port, "/s?sink=sha256", method="POST", body=data)
    j = json.loads(b)
    check("sink sha256", j["body_bytes"] == len(data) and j["sha256"] == hashlib.sha256(data).hexdigest(), j)

    # chunked upload, odd chunk sizes, with trailers
    s = connect(port)
    s.sendall(b"POST /s?sink=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    total = 0
    for n in (1, 100, 70000, 5, 300000):
        s.sendall(b"%x;ext=1\r\n" % n + b"x" * n + b"\r\n")
        total += n
    s.sendall(b"0\r\nTrailer-A: 1\r\n\r\n")
    r = Reader(s)
    c, h, b = r.response()
    check("chunked sink", json.loads(b)["body_bytes"] == total and "sha256" not in json.loads(b), b)
    # same connection still usable
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    check("keep-alive after chunked", r.response()[2] == b"app-1\n")
    s.close()

    # echo of a chunked body with trailers
    s = connect(port)
    s.sendall(b"POST /e?echo=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"3\r\nabc\r\n0\r\nX-Trailer: yes\r\n\r\n")
    j = json.loads(Reader(s).response()[2])
    check("echo trailers", j["body_bytes"] == 3 and j["trailers"] == [["X-Trailer", "yes"]]
          and j["headers"][-1] == ["Transfer-Encoding", "chunked"], j)
    s.close()

    # body discarded for a plain request
    c, h, b = req(port, "/p", method="POST", body=b"x" * 100000)
    check("post discard", c == 200 and b == b"app-1\n")

    # expect 100-continue
    s = connect(port)
    s.sendall(b"POST /s?sink=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
    r = Reader(s)
    c, h, b = r.response()
    check("100 continue", c == 100)
    s.sendall(b"abcd")
    c, h, b = r.response()
    check("after continue", c == 200 and json.loads(b)["body_bytes"] == 4)
    s.close()

    # pipelining, in order, with a delay in the middle
    s = connect(port)
    s.sendall(b"GET /1?delay=100 HTTP/1.1\r\nHost: t\r\n\r\n\r\n"
              b"GET /2?size=3 HTTP/1.1\r\nHost: t\r\n\r\n"
              b"POST /3?echo=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi"
              b"GET /4?status=202 HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    rs = [r.response() for _ in range(4)]
    check("pipelining", [x[0] for x in rs] == [200, 200, 200, 202] and rs[1][2] == b"012"
          and json.loads(rs[2][2])["target"] == "/3?echo=1", rs)
    s.close()

    # many pipelined in one go
    s = connect(port)
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" * 1000)
    r = Reader(s)
    check("pipeline 1000", all(r.response()[2] == b"app-1\n" for _ in range(1000)))
    s.close()

    # close=after
    s = connect(port)
    s.sendall(b"GET /x?close=after HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    c, h, b = r.response()
    check("close after", c == 200 and h["connection"] == "close" and r.eof())
    s.close()

    # close=before
    s = connect(port)
    s.sendall(b"POST /x?close=before HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc")
    r = Reader(s)
    check("close before", r.eof() and r.buf == b"", r.buf)
    s.close()

    # close=mid
    for extra in ("", "&chunked=1"):
        s = connect(port)
        s.sendall(f"GET /x?close=mid&size=100000{extra} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        r = Reader(s)
        r.eof()
        head, body = r.buf.split(b"\r\n\r\n", 1)
        if extra:
            check("close mid chunked", b"0\r\n\r\n" not in body[-7:] and len(body) > 50000 - 1, len(body))
        else:
            check("close mid", body == pattern(50000) and b"Content-Length: 100000" in head, len(body))
        s.close()
    s = connect(port)
    s.sendall(b"GET /x?close=mid HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    r.eof()
    check("close mid default size", r.buf.split(b"\r\n\r\n", 1)[1] == pattern(500))
    s.close()

    # HTTP/1.0
    s = connect(port)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    r = Reader(s)
    c, h, b = r.response()
    check("http/1.0 close", c == 200 and h.get("connection") == "close" and r.eof())
    s.close()
    s = connect(port)
    s.sendall(b"GET /?chunked=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    r = Reader(s)
    c, h, b = r.response()
    check("http/1.0 keep-alive", h.get("connection") == "keep-alive" and "content-length" in h and b == b"app-1\n", h)
    s.sendall(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    check("http/1.0 second", r.response()[2] == b"app-1\n")
    s.close()

    # malformed
    for bad in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n",
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        s = connect(port)
        s.sendall(bad)
        r = Reader(s)
        c, h, b = r.response()
        check("malformed %r" % bad[:40], c == 400 and h.get("connection") == "close" and r.eof())
        s.close()
    s = connect(port)
    s.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    r = Reader(s)
    check("431", r.response()[0] == 431)
    s.close()
    # big but allowed header
    c, h, b = req(port, "/?echo=1", headers=[("X-Big", "b" * 60000)])
    check("60k header echo", json.loads(b)["headers"][1][1] == "b" * 60000)

    # client disconnects mid-request and mid-response
    for junk in (b"GET / HT", b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc"):
        s = connect(port)
        s.sendall(junk)
        s.close()
    s = connect(port)
    s.sendall(b"GET /?size=100000000 HTTP/1.1\r\nHost: t\r\n\r\n")
    s.recv(1000)
    s.close()
    c, h, b = req(port)
    check("survives disconnects", c == 200)

    # health
    c, h, b = req(port, "/health")
    check("health", c == 200 and b == b"ok")
    c, h, b = req(port, "/health/status?code=503", method="POST")
    check("health set", c == 200)
    c, h, b = req(port, "/health")
    check("health 503", c == 503 and h["x-origin"] == "app-1")
    c, h, b = req(port, "/health/status?code=200", method="PUT")
    check("health restore", req(port, "/health")[0] == 200)
    c, h, b = req(port, "/health/status?code=42", method="POST")
    check("health bad code", c == 400)

    # The server sees the test's earlier closes a moment later; wait for the gauge to settle.
    wait_until(lambda: stats()["open_connections"] == 1)
    st = stats()
    check("stats", st["name"] == "app-1" and st["health_requests"] == 3 and st["post_requests"] >= 3
          and st["in_flight"] == 0 and st["open_connections"] == 1, st)
    c, h, b = req(port, "/stats/reset")
    check("reset needs POST", c == 405)
    c, h, b = req(port, "/stats/reset", method="POST")
    st = json.loads(b)
    check("reset", st["requests"] == 0 and st["connections"] == 0 and st["max_in_flight"] == 0, st)
    req(port, "/a")
    req(port, "/b", method="POST", body=b"x")
    st = json.loads(req(port, "/stats")[2])
    check("counts after reset", st["requests"] == 2 and st["post_requests"] == 1 and st["connections"] == 3, st)

    # 1 GiB download with flat memory
    def rss():
        with open(f"/proc/{p.pid}/status") as f:
            return int([l for l in f if l.startswith("VmRSS")][0].split()[1])
    before = rss()
    s = connect(port)
    s.sendall(b"GET /?size=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n")
    got = 0
    t0 = time.time()
    first = s.recv(1 << 20)
    head, rest = first.split(b"\r\n\r\n", 1)
    got = len(rest)
    while got < 1073741824:
        d = s.recv(1 << 20)
        assert d
        got += len(d)
    el = time.time() - t0
    check("1 GiB download %.2fs %.0f MB/s rss %d->%d kB" % (el, 1024 / el, before, rss()),
          got == 1073741824 and rss() - before < 20000)
    s.close()

    # 1 GiB chunked upload
    s = connect(port)
    s.sendall(b"POST /?sink=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % (1 << 20) + b"y" * (1 << 20) + b"\r\n"
    t0 = time.time()
    for _ in range(1024):
        s.sendall(chunk)
    s.sendall(b"0\r\n\r\n")
    c, h, b = Reader(s).response()
    el = time.time() - t0
    check("1 GiB chunked upload %.2fs rss %d kB" % (el, rss()), json.loads(b)["body_bytes"] == 1 << 30 and rss() - before < 20000)
    s.close()
finally:
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=5)
check("SIGTERM exit 0", rc == 0, rc)

# idle timeout
p, port = start("--idle-timeout", "0.5")
try:
    s = connect(port)
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    r.response()
    t0 = time.time()
    check("idle close", r.eof() and 0.45 < time.time() - t0 < 1.5, time.time() - t0)
    # a slow request (delay longer than the idle timeout) is not cut
    c, h, b = req(port, "/?delay=900")
    check("delay longer than idle timeout", c == 200)
finally:
    p.send_signal(signal.SIGINT)
    check("SIGINT exit 0", p.wait(timeout=5) == 0)

# execution log and --fail-every
import tempfile
log_path = os.path.join(tempfile.mkdtemp(prefix="origin-smoke-"), "exec.log")
p, port = start("--exec-log", log_path, "--fail-every", "3")
try:
    c, h, b = req(port, "/a", headers=[("X-Request-Id", "r1")])
    check("exec log: answered", c == 200)
    req(port, "/b", method="POST", headers=[("X-Request-Id", "r2"), ("Idempotency-Key", "k2")],
        body=b"hi")
    req(port, "/stats")  # control paths are not executions
    s = connect(port)
    s.sendall(b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n")  # the 3rd: cut mid-body
    r = Reader(s)
    status = r.line()
    hdrs = {}
    while True:
        l = r.line()
        if not l:
            break
        k, v = l.decode().split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    r.eof()
    check("fail-every: 3rd cut mid-body", b" 200 " in status + b" " and
          len(r.buf) == int(hdrs["content-length"]) // 2, (status, hdrs, len(r.buf)))
    c, h, b = req(port, "/d")
    check("fail-every: 4th whole", c == 200 and b == b"app-1\n", (c, b))
    with open(log_path) as f:
        lines = f.read().splitlines()
    check("exec log lines", lines == ["GET /a r1 -", "POST /b r2 k2", "GET /c - -", "GET /d - -"],
          lines)
finally:
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=5)

# threads and IPv6
p = subprocess.Popen([BIN, "--listen", "[::1]:0", "--name", "v6", "--threads", "2"],
                     stdout=subprocess.PIPE, text=True)
try:
    line = p.stdout.readline().strip()
    check("ipv6 line", line.startswith("listening [::1]:"), line)
    port = int(line.rsplit(":", 1)[1])
    for i in range(4):
        s = socket.create_connection(("::1", port), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        check("threads + ipv6 request %d" % i, Reader(s).response()[2] == b"v6\n")
        s.close()
finally:
    p.send_signal(signal.SIGTERM)
check("threads + ipv6 exit 0", p.wait(timeout=5) == 0)
print("all passed")
