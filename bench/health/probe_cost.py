#!/usr/bin/env python3
"""Cost of active health probing: one sluice (workers = 1) probing N servers at a 1 s interval.

All N servers point at one sluice-origin (distinct names, same address), so the origin answers
every probe. Reports sluice's CPU time per wall second (from /proc/PID/stat) over several rounds
after a warm-up, and the probes the origin counted. Target (health issue): N = 1000 at 1 s under
5% of one core.

    bench/health/probe_cost.py [--build build/release] [--servers 1000] [--rounds 3] [--seconds 10]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def wait_line(proc, pattern, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else b""
        if not line:
            if proc.poll() is not None:
                break
            continue
        m = re.search(pattern, line.decode(errors="replace"))
        if m:
            return m
    raise RuntimeError(f"no line matching {pattern!r}")


def stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--servers", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    a = ap.parse_args()

    origin = subprocess.Popen([f"{a.build}/sluice-origin", "--listen", "127.0.0.1:0", "--name", "o"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    sluice = None
    try:
        port = int(wait_line(origin, r"listening 127\.0\.0\.1:(\d+)").group(1))
        servers = "".join(f'[[upstreams.app.servers]]\naddress = "127.0.0.1:{port}"\nname = "s{i}"\n'
                          for i in range(a.servers))
        text = ('[server]\nlisten = ["127.0.0.1:0"]\nworkers = 1\n[log]\naccess = "off"\n'
                '[upstreams.app.health]\ninterval = "1s"\ntimeout = "500ms"\n' + servers)
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(text)
        sluice = subprocess.Popen([f"{a.build}/sluice", "run", "--config", f.name],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        for raw in sluice.stderr:
            if b"started" in raw or time.monotonic() > deadline:
                break
        sluice.stderr.close()  # the log is not read further; no pipe may fill up
        time.sleep(a.warmup)  # a benchmark warm-up: first probes spread over the first interval
        rows = []
        for r in range(a.rounds):
            before_cpu, before = cpu_ticks(sluice.pid), stats(port)
            t0 = time.monotonic()
            time.sleep(a.seconds)
            after_cpu, after = cpu_ticks(sluice.pid), stats(port)
            wall = time.monotonic() - t0
            cpu = (after_cpu - before_cpu) / TICKS
            probes = after["health_requests"] - before["health_requests"]
            rows.append((cpu / wall, probes / wall, after["connections"] - before["connections"] - 1))  # -1: our /stats
            print(f"round {r + 1}: {100 * cpu / wall:.2f}% of one core, {probes / wall:.0f} probes/s, "
                  f"{1e6 * cpu / max(probes, 1):.1f} us CPU per probe, "
                  f"{rows[-1][2]} new origin connections", flush=True)
        rows.sort()
        med = rows[len(rows) // 2]
        print(f"median: {100 * med[0]:.2f}% of one core at {med[1]:.0f} probes/s")
    finally:
        for p in (sluice, origin):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
