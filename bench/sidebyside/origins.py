"""The three origins behind every contender, on CPU 0, and their accepted-connection counters.

Two kinds answer the same paths (`/` with a tiny body, `/?size=N` with N bytes): the project's
`sluice-origin`, and nginx with one worker (`return 200` and pre-written body files). `calibrate`
measures both and the faster one serves the run, so that the origin is never the bottleneck.
A third kind, `grpc` (nginx serving h2c, one canned gRPC answer to every call), serves only the
grpc scenario.
"""
import json
import re
import subprocess
import time
from pathlib import Path

from . import client, wrk
from .conf import render
from .processes import Child, cpu_seconds, descendant_pids, free_port

BODY_SIZES = (1024, 65536)
PATTERN = b"0123456789abcdef"


def grpc_frame(payload):
    """One gRPC message as it goes in a DATA frame: a 0 flag (not compressed), the payload's
    length (4 bytes, big-endian), the payload."""
    return b"\0" + len(payload).to_bytes(4, "big") + payload


# The grpc scenario's call and answer: one small protobuf message each (field 1, a 5-byte
# string). Neither contains `"`, `\` or `$`, so the answer can stand in an nginx quoted string.
GRPC_REQUEST = grpc_frame(b"\x0a\x05hello")
GRPC_REPLY = grpc_frame(b"\x0a\x05world")


class OriginSet:
    """Three running origins; `counters()` sums their accepted-connection and request counters,
    read over one kept-open connection per origin so that reading them does not add to them."""

    def __init__(self, kind, bin_dir, workdir, cpus="0", slow=None):
        """`slow` ("PERCENT:MS", sluice-origin only): the third origin adds MS milliseconds to
        PERCENT % of its answers (`sluice-origin --slow`)."""
        self.kind = kind
        self.children, self.addresses, self.pids, stats_ports = [], [], [], []
        for i in (1, 2, 3):
            name = f"app-{i}"
            if kind == "sluice-origin":
                extra = ("--slow", slow) if slow and i == 3 else ()
                child, port = _start_sluice_origin(bin_dir, name, cpus, extra)
                pid, stats_port = child.pid, port
            elif kind == "grpc":
                child, port, pid, stats_port = _start_grpc_origin(Path(workdir) / f"grpc-{i}", f"grpc-{i}", cpus)
            else:
                child, port, pid = _start_nginx_origin(Path(workdir) / f"origin-{i}", name, cpus)
                stats_port = port
            self.children.append(child)
            self.addresses.append(f"127.0.0.1:{port}")
            self.pids.append(pid)
            stats_ports.append(stats_port)
        self._stats_conns = [client.Connection(p) for p in stats_ports]

    def counters(self):
        """(connections accepted, requests served) so far by the three origins, summed. The
        stats connections themselves were accepted once, before any measurement."""
        conns = reqs = 0
        for conn in self._stats_conns:
            status, body = conn.get("/stats")
            if status != 200:
                raise RuntimeError(f"origin /stats answered {status}")
            c, r = _counters(self.kind, body)
            conns, reqs = conns + c, reqs + r
        return conns, reqs

    def cpu_seconds(self):
        return sum(cpu_seconds(pid) for pid in self.pids)

    def stop(self):
        client.close_all(self._stats_conns)
        for child in self.children:
            child.stop()


def _counters(kind, body):
    if kind == "sluice-origin":
        stats = json.loads(body)
        return int(stats["connections"]), int(stats["requests"])
    # stub_status: "Active connections: 1 \nserver accepts handled requests\n 5 5 9 \n..."; its
    # request count includes the /stats requests (one per reading: negligible).
    m = re.search(rb"accepts handled requests\s+(\d+)\s+\d+\s+(\d+)", body)
    if not m:
        raise RuntimeError(f"unexpected stub_status body {body[:200]!r}")
    return int(m.group(1)), int(m.group(2))


def _start_sluice_origin(bin_dir, name, cpus, extra=()):
    child = Child([str(Path(bin_dir) / "sluice-origin"), "--listen", "127.0.0.1:0", "--name", name, *extra],
                  name=name, cpus=cpus, stdout=subprocess.PIPE)
    line = child.read_line(timeout=10)
    m = re.fullmatch(r"listening 127\.0\.0\.1:(\d+)", line)
    if not m:
        child.stop()
        raise RuntimeError(f"sluice-origin said {line!r}")
    return child, int(m.group(1))


def _start_grpc_origin(directory, name, cpus):
    """nginx-grpc-origin.conf.in: (child, h2c port, worker pid, HTTP/1.1 stats port)."""
    directory.mkdir(parents=True, exist_ok=True)
    port, stats_port = free_port(), free_port()
    while stats_port == port:
        stats_port = free_port()
    conf = render("nginx-grpc-origin.conf.in", directory / "nginx.conf", dir=directory, port=port,
                  stats_port=stats_port, reply=GRPC_REPLY.decode("ascii"))
    child = Child(["nginx", "-p", str(directory), "-e", str(directory / "error.log"), "-c", str(conf)],
                  name=f"nginx-{name}", cpus=cpus)
    client.wait_first_ok(stats_port, time.monotonic(), timeout=10, alive=child.alive)
    workers = descendant_pids(child.pid)
    if len(workers) != 1:
        child.stop()
        raise RuntimeError(f"nginx gRPC origin {name}: expected one worker, found {workers}")
    return child, port, workers[0], stats_port


def _start_nginx_origin(directory, name, cpus):
    www = directory / "www"
    www.mkdir(parents=True, exist_ok=True)
    for size in BODY_SIZES:
        (www / f"body-{size}").write_bytes((PATTERN * (size // 16 + 1))[:size])
    port = free_port()
    conf = render("nginx-origin.conf.in", directory / "nginx.conf", dir=directory, port=port,
                  name=name)
    child = Child(["nginx", "-p", str(directory), "-e", str(directory / "error.log"), "-c", str(conf)],
                  name=f"nginx-{name}", cpus=cpus)
    client.wait_first_ok(port, time.monotonic(), timeout=10, alive=child.alive)
    workers = descendant_pids(child.pid)
    if len(workers) != 1:
        child.stop()
        raise RuntimeError(f"nginx origin {name}: expected one worker, found {workers}")
    return child, port, workers[0]


def calibrate(bin_dir, workdir, seconds=1, rounds=2):
    """Runs each kind alone on CPU 0 with wrk (64 connections) on CPU 1, `rounds` times in
    alternating order, and measures the origin's CPU time per request; the least disturbed
    (lowest) reading per kind counts. Returns ({kind: {...}}, the kind to use)."""
    kinds = ("sluice-origin", "nginx")
    readings = {k: [] for k in kinds}
    for i in range(rounds):
        for kind in (kinds if i % 2 == 0 else kinds[::-1]):
            origins = OriginSet(kind, bin_dir, Path(workdir) / f"{kind}-{i}")
            try:
                port = int(origins.addresses[0].rsplit(":", 1)[1])
                pid = origins.pids[0]
                before = cpu_seconds(pid)
                run = wrk.run(port, path="/", connections=64, duration=seconds, cpus="1")
                cpu = cpu_seconds(pid) - before
                readings[kind].append({
                    "requests_per_s": round(run["requests"] / run["seconds"]),
                    "cpu_us_per_request": round(cpu * 1e6 / max(1, run["requests"]), 2),
                    "errors": run["errors"],
                })
            finally:
                origins.stop()
    results = {k: min(v, key=lambda r: r["cpu_us_per_request"] or float("inf"))
               for k, v in readings.items()}
    # nginx must be clearly faster to be chosen: readings within 10% of each other are noise on
    # a shared machine, and one origin kind from run to run keeps results comparable.
    cost = {k: results[k]["cpu_us_per_request"] or float("inf") for k in kinds}
    fastest = "nginx" if cost["nginx"] < 0.9 * cost["sluice-origin"] else "sluice-origin"
    return results, fastest
