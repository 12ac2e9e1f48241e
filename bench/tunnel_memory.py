"""Resident memory per open Upgrade tunnel (a WebSocket after its 101): sluice (one worker) in front
of a sluice-origin with `websocket=1`; N raw client connections send the WebSocket handshake, and
once every 101 came back, sluice's resident memory minus what it was with no tunnel, divided by N,
is what one open tunnel costs. Two rounds of N, the second on a process whose pools and heap the
first warmed, each measured after every tunnel closed again (what is kept then is reported too).

    /usr/bin/python3 bench/tunnel_memory.py BUILD_DIR [N]      (N at most 2000, default 1000)

Loopback only, bounded in time; every process started is ended by its PID."""
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HANDSHAKE = (b"GET /chat?websocket=1 HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
             b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_line(stream, pattern, timeout=30):
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    while time.monotonic() < deadline:
        line = stream.readline().decode(errors="replace")
        if not line:
            break
        m = rx.search(line)
        if m:
            return m
    raise RuntimeError(f"no {pattern!r}")


def open_tunnels(port, n, deadline):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HANDSHAKE)
        socks.append(s)
    for s in socks:
        got = b""
        while b"\r\n\r\n" not in got:
            if time.monotonic() > deadline:
                raise RuntimeError("handshakes took too long")
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("closed before its 101")
            got += chunk
        if not got.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(got[:200])
    return socks


def settle(pid, seconds=0.5):
    time.sleep(seconds)  # the worker's tick and heap trim run every 25 ms / on their own schedule
    return rss_kib(pid)


def main():
    build = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    if n > 2000:
        sys.exit("at most 2000 tunnels")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8 * n + 1024), hard))
    deadline = time.monotonic() + 120
    origin = subprocess.Popen([str(build / "sluice-origin"), "--listen", "127.0.0.1:0", "--name", "o"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        port = int(wait_line(origin.stdout, r"listening 127\.0\.0\.1:(\d+)").group(1))
        with tempfile.TemporaryDirectory() as d:
            conf = Path(d) / "sluice.toml"
            conf.write_text(f"""[server]
listen = ["127.0.0.1:0"]
workers = 1
max_connections = {4 * n}
[log]
level = "info"
[upstreams.app]
keepalive = 0
[[upstreams.app.servers]]
address = "127.0.0.1:{port}"
""")
            proxy = subprocess.Popen([str(build / "sluice"), "run", "--config", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            p = int(wait_line(proxy.stderr, r"listening on 127\.0\.0\.1:(\d+)$").group(1))
            wait_line(proxy.stderr, r"started")
            for round_ in (1, 2):
                before = settle(proxy.pid)
                socks = open_tunnels(p, n, deadline)
                during = settle(proxy.pid)
                for s in socks:
                    s.close()
                after = settle(proxy.pid, 1.0)
                print(f"round {round_}: {n} open tunnels: {before} -> {during} KiB resident, "
                      f"{(during - before) / n:.2f} KiB per tunnel; {after} KiB after they closed")
    finally:
        for proc in (proxy, origin):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)


if __name__ == "__main__":
    main()
