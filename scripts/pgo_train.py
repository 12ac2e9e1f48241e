"""The training run of scripts/build-pgo.sh: drives an instrumented sluice (BUILD_DIR/sluice, one
worker, two sluice-origins, a plain and a TLS listener) through what it does in production, so
that the counts it writes at exit say which paths are hot: keep-alive GETs with small and 1 KiB
and 64 KiB bodies, a new connection per request, TLS keep-alive, streamed uploads, and a few
malformed requests. Then SIGTERM: the counts are written when the process exits.

    /usr/bin/python3 scripts/pgo_train.py BUILD_DIR

Loopback only (ports picked by the kernel); every load is bounded in time; every process started
here is ended by its PID."""
import http.client
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wait_for(stream, pattern, timeout=30.0):
    """The first match of `pattern` in the lines `stream` prints within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if m := rx.search(line):
            return m
    raise RuntimeError(f"no {pattern!r} in: {''.join(seen)[-2000:]}")


def wrk(url, seconds, connections=64, headers=()):
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s"]
    for h in headers:
        argv += ["-H", h]
    subprocess.run(argv + [url], check=True, capture_output=True, timeout=seconds + 30)


def uploads(port, count, size):
    """`count` PUTs of `size` bytes on one keep-alive connection (streamed beyond 64 KiB)."""
    body = b"x" * size
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for _ in range(count):
            conn.request("PUT", "/", body=body)
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"an upload got {answer.status}")
    finally:
        conn.close()


def malformed(port):
    """Requests sluice must refuse (400s): the error paths get their counts too, not only the
    hot path's."""
    for bad in (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                b"GET /\x01 HTTP/1.1\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(bad)
            while s.recv(65536):
                pass


def main(build_dir):
    build = Path(build_dir).resolve()
    children = []
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-pgo-") as d:
            work = Path(d)
            subprocess.run([str(ROOT / "scripts" / "make-test-certs.sh"), str(work)], check=True,
                           capture_output=True, timeout=60)
            addresses = []
            for name in ("o1", "o2"):
                o = subprocess.Popen([str(build / "sluice-origin"), "--listen", "127.0.0.1:0",
                                      "--name", name], stdout=subprocess.PIPE, text=True)
                children.append(o)
                addresses.append(wait_for(o.stdout, r"listening (127\.0\.0\.1:\d+)").group(1))
            servers = "".join(f'[[upstreams.app.servers]]\naddress = "{a}"\nname = "{n}"\n'
                              for n, a in zip(("o1", "o2"), addresses))
            conf = work / "sluice.toml"
            conf.write_text(f"""[server]
listen = ["127.0.0.1:0"]
workers = 1
shutdown_timeout = "2s"
[[server.tls]]
listen = ["127.0.0.1:0"]
certificates = [ {{ cert = "{work}/cert.pem", key = "{work}/key.pem" }} ]
[log]
level = "info"
access = "off"
[upstreams.app]
{servers}""")
            proxy = subprocess.Popen([str(build / "sluice"), "run", "--config", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            children.append(proxy)
            port = int(wait_for(proxy.stderr, r"listening on 127\.0\.0\.1:(\d+)$").group(1))
            tls = int(wait_for(proxy.stderr, r"listening on 127\.0\.0\.1:(\d+) \(TLS").group(1))
            wait_for(proxy.stderr, r"started")
            # Its log from here on is not read: drained, so that a full pipe never stalls it.
            threading.Thread(target=proxy.stderr.read, daemon=True).start()
            base = f"http://127.0.0.1:{port}"
            wrk(base + "/", 5)
            wrk(base + "/?size=1024", 2)
            wrk(base + "/?size=65536", 2)
            wrk(base + "/", 2, headers=("Connection: close",))
            wrk(f"https://127.0.0.1:{tls}/", 2)
            uploads(port, 50, 100 * 1024)
            uploads(port, 200, 2 * 1024)
            malformed(port)
            proxy.terminate()
            if proxy.wait(timeout=30) != 0:
                raise RuntimeError(f"sluice exited with {proxy.returncode}")
    finally:
        for c in children:
            if c.poll() is None:
                c.terminate()
                c.wait(timeout=10)
    print("pgo_train.py: trained", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
