#!/usr/bin/env python3
"""Hostile clients for test_adversarial.py, run as a separate process so that the attack does not
compete with the test's own latency measurements for Python's GIL.

    adversary.py slowloris PORT N INTERVAL RAMP MAX_SECONDS
        N connections opened evenly over RAMP seconds, each sending one byte of an endless
        request head at once and then every INTERVAL seconds. Prints "ready" as it starts; when every
        connection has been closed by the server or MAX_SECONDS passed, one JSON line:
        {"connections": [{"seconds": from connect to close or null, "answer": first line}...]}

    adversary.py flood PORT N HOLD_SECONDS
        Opens N connections as fast as it can (connect only, no bytes), prints "ready" and a JSON
        line {"connected": k, "errors": {...}}, keeps them open HOLD_SECONDS (or until stdin
        closes), closes them all and exits.

Every loop is bounded in count and time; every socket is closed on exit.
"""
import heapq
import json
import selectors
import socket
import sys
import time

HEAD = b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: "


def slowloris(port, n, interval, ramp, max_seconds):
    """Connections open one by one over `ramp` seconds (as a real slowloris trickles in), each
    then sends one more byte every `interval` seconds on its own schedule."""
    sel = selectors.DefaultSelector()
    conns, due = [], []  # due: heap of (time of the next byte, connection index)
    print("ready", flush=True)
    start = time.monotonic()
    deadline = start + max_seconds
    open_count = 0
    while (open_count or len(conns) < n) and time.monotonic() < deadline:
        now = time.monotonic()
        while len(conns) < n and start + len(conns) * ramp / n <= now:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            t0 = time.monotonic()
            s.sendall(HEAD[:1])
            s.setblocking(False)
            c = {"sock": s, "t0": t0, "sent": 1, "data": b"", "closed": None}
            sel.register(s, selectors.EVENT_READ, c)
            heapq.heappush(due, (t0 + interval, len(conns)))
            conns.append(c)
            open_count += 1
        while due and due[0][0] <= now:
            _, i = heapq.heappop(due)
            c = conns[i]
            if c["closed"] is not None:
                continue
            byte = HEAD[c["sent"]:c["sent"] + 1] or b"a"  # the head never ends
            try:
                c["sock"].send(byte)
                c["sent"] += 1
            except OSError:
                pass
            heapq.heappush(due, (now + interval, i))
        wake = [deadline]
        if due:
            wake.append(due[0][0])
        if len(conns) < n:
            wake.append(start + len(conns) * ramp / n)
        for key, _ in sel.select(max(0.0, min(wake) - time.monotonic())):
            c = key.data
            try:
                chunk = c["sock"].recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                chunk = b""
            if chunk:
                c["data"] += chunk
                continue
            c["closed"] = time.monotonic() - c["t0"]
            sel.unregister(c["sock"])
            c["sock"].close()
            open_count -= 1
    result = [{"seconds": c["closed"],
               "answer": c["data"].split(b"\r\n", 1)[0].decode("latin-1"),
               "bytes_sent": c["sent"]} for c in conns]
    for c in conns:
        if c["closed"] is None:
            c["sock"].close()
    print(json.dumps({"connections": result}), flush=True)


def flood(port, n, hold_seconds):
    socks, errors = [], {}
    for _ in range(n):
        try:
            s = socket.socket()
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
            socks.append(s)
        except OSError as e:
            s.close()
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
    print("ready", flush=True)
    print(json.dumps({"connected": len(socks), "errors": errors}), flush=True)
    # Hold until the test says so (closes our stdin) or the bound passes.
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    deadline = time.monotonic() + hold_seconds
    while time.monotonic() < deadline:
        if sel.select(max(0.0, deadline - time.monotonic())):
            if not sys.stdin.buffer.read1(1):
                break
    for s in socks:
        s.close()


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "slowloris":
        slowloris(port, int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
    elif mode == "flood":
        flood(port, int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(f"unknown mode {mode}")
