"""Hostile clients for the abuse benchmark (bench/abuse.sh), and the count of the connections a
proxy really holds.

The three kinds are held open by our own sockets, so that their number is exact: a slow reader
(a tiny receive buffer, `GET` of a 1 MiB answer, never reads), a slow body (`POST` with a 1 MiB
`Content-Length` whose body trickles, a byte per connection per `trickle()`), a half-sent head
(request line and a few headers, never the blank line). Everything goes to 127.0.0.1.
"""
import os
import socket
import time

from . import client

KINDS = ("slow_read", "slow_body", "half_head")
BIG = 1048576  # the slow readers' answer and the slow bodies' announced length, bytes

_REQUESTS = {
    "slow_read": f"GET /?size={BIG} HTTP/1.1\r\nHost: bench\r\n\r\n".encode(),
    "slow_body": (f"POST / HTTP/1.1\r\nHost: bench\r\nContent-Type: application/octet-stream\r\n"
                  f"Content-Length: {BIG}\r\n\r\n").encode() + b"x" * 16,
    "half_head": b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: abuse-bench\r\nAccept: */*\r\n",
}
# The slow readers' receive buffer (the kernel doubles it, then clamps to its minimum): what the
# proxy can push into a connection before it has to hold the rest itself.
SLOW_READ_RCVBUF = 1024


def open_hostile(kind, port, count, timeout=10.0):
    """Opens `count` connections of `kind` to 127.0.0.1:port, each sending its partial request.
    Returns the sockets (non-blocking); the caller closes them with close_all()."""
    socks = []
    deadline = time.monotonic() + timeout
    try:
        for _ in range(count):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind}: only {len(socks)} of {count} connected in {timeout}s")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            if kind == "slow_read":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_READ_RCVBUF)
            s.settimeout(max(0.1, deadline - time.monotonic()))
            s.connect(("127.0.0.1", port))
            s.sendall(_REQUESTS[kind])
            s.setblocking(False)
    except BaseException:
        close_all(socks)
        raise
    return socks


def trickle(kind, socks):
    """One more body byte on every slow-body connection (nothing for the other kinds)."""
    if kind != "slow_body":
        return
    for s in socks:
        try:
            s.send(b"x")
        except OSError:
            pass  # closed by the proxy, or the buffer full: counted by held()


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def held(pid, port):
    """Client connections to `port` that process `pid` has accepted and that are still
    ESTABLISHED: rows of /proc/net/tcp with that local port in state 01 whose socket inode is one
    of the process's descriptors (a connection still in the accept queue has none). 0 once the
    process is gone."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        return 0
    for fd in fds:
        try:
            link = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    local = f":{port:04X}"
    count = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1].endswith(local) and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def wait_held(pid, port, count, kind, socks, timeout):
    """Waits (trickling slow bodies every half second) until `pid` holds `count` connections on
    `port`, or `timeout` passes; returns the last count."""
    deadline = time.monotonic() + timeout
    next_trickle = time.monotonic() + 0.5
    while True:
        now_held = held(pid, port)
        if now_held >= count or time.monotonic() > deadline:
            return now_held
        if time.monotonic() >= next_trickle:
            trickle(kind, socks)
            next_trickle += 0.5
        time.sleep(0.05)


def legit_get(port, timeout):
    """One `GET /` on a fresh connection (closed after the answer): (seconds, None) for a 200,
    (seconds, reason) otherwise."""
    t0 = time.monotonic()
    try:
        conn = client.Connection(port, timeout=timeout)
        try:
            status, _ = conn.get("/")
        finally:
            conn.close()
    except (OSError, RuntimeError, ValueError) as e:
        return time.monotonic() - t0, type(e).__name__
    took = time.monotonic() - t0
    return took, None if status == 200 else f"status {status}"
