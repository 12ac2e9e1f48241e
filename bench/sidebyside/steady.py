"""The steady-state harness shared by bench/syscalls.py and bench/kprofile.py: sluice, nginx and
HAProxy, one worker each on CPU 1, the three nginx origins and wrk on CPU 0, rounds alternating
the proxies' order; `measure(running, origins)` returns one row per proxy and round."""
import subprocess
import tempfile
import time
from pathlib import Path

from . import contenders, origins, wrk

ROOT = Path(__file__).resolve().parent.parent.parent


def alternate(build_dir, rounds, measure):
    """{proxy name: [row per round]}; every process started here is stopped by its handle."""
    work = Path(tempfile.mkdtemp(prefix="sluice-steady-"))
    contenders.make_certificates(ROOT, work / "certs")
    proxies = [contenders.Sluice(build_dir, "1"), contenders.Nginx("1", 96),
               contenders.Haproxy("1")]
    og = origins.OriginSet("nginx", build_dir, work)
    rows = {c.name: [] for c in proxies}
    try:
        for i in range(rounds):
            for c in (proxies if i % 2 == 0 else proxies[::-1]):
                running = c.start(work, og)
                try:
                    rows[c.name].append(measure(running, og))
                finally:
                    running.child.stop()
    finally:
        og.stop()
    return rows


def under_perf(perf_args, running, og, path, duration, headers=(), pids=None):
    """`perf PERF_ARGS -p PID` attached to the proxy (or to `pids`, e.g. the origins') around
    one wrk run (64 connections, `path`, `duration` s): perf attaches first and detaches after wrk
    is done, so what it saw belongs to exactly the requests the origins count between the two
    readings. Returns (those requests, perf's stderr)."""
    _, reqs0 = og.counters()
    watched = ",".join(map(str, pids)) if pids else str(running.pid)
    perf = subprocess.Popen(["perf", *perf_args, "-p", watched, "--", "sleep", str(duration + 2)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)  # perf attached
        wrk.run(running.port, path=path, connections=64, duration=duration, headers=headers)
        _, err = perf.communicate(timeout=duration + 30)
    finally:
        if perf.poll() is None:
            perf.kill()
            perf.wait()
    _, reqs1 = og.counters()
    return max(reqs1 - reqs0, 1), err


def mean(rows, key):
    """The mean of one key over a proxy's rounds (0 where a round lacks it)."""
    return sum(r.get(key, 0.0) for r in rows) / len(rows)


def mean_table(rows, first="req/s"):
    """A markdown table of each key's mean over the rounds, a column per proxy."""
    keys = sorted({k for rs in rows.values() for r in rs for k in r},
                  key=lambda k: (k != first, k))
    lines = ["| per request | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)]
    for k in keys:
        cells = [mean(rs, k) for rs in rows.values()]
        fmt = "{:,.0f}" if k == first else "{:.3f}"
        lines.append(f"| {k} | " + " | ".join(fmt.format(v) for v in cells) + " |")
    return "\n".join(lines)
