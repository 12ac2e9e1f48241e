"""System calls and context switches per proxied request, sluice beside nginx and HAProxy, in the
side-by-side benchmark's setup (one worker each on CPU 1, the three origins and wrk on CPU 0,
`small`: 64 keep-alive connections, `GET /`). Per round and proxy, `perf stat -e
'syscalls:sys_enter_*'` counts the proxy's system calls (every thread) while wrk runs for
--duration seconds, /proc gives its CPU time, context switches and minor page faults, and the
origins' counters the requests; each count is divided by those requests. Rounds alternate the order.

    /usr/bin/python3 bench/syscalls.py BUILD_DIR [--rounds N] [--duration S] [--path P]

Why: on loopback the kernel is ~85% of every proxy's CPU time, so a system call or a wake-up
saved per request is worth more than most user-space work (docs/performance.md). Needs perf with
tracepoints (the VM here has no hardware counters; tracepoints work). Loopback only; every
process started is ended by PID."""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from sidebyside import contenders, origins, wrk  # noqa: E402
from sidebyside.processes import cpu_split  # noqa: E402


def context_switches(pid):
    """(voluntary, involuntary) context switches summed over the process's threads."""
    vol = invol = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol += int(line.split()[1])
    return vol, invol


def minor_faults(pid):
    """Minor page faults of the whole process (/proc/PID/stat field 10)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[7])


def measure(running, og, path, duration):
    """perf attaches first and detaches after wrk is done, so the requests it saw are exactly
    the ones the origins count between the two readings."""
    _, reqs0 = og.counters()
    pid = running.pid
    cpu0, cs0, pf0 = cpu_split(pid), context_switches(pid), minor_faults(pid)
    perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_*", "-p", str(pid),
                             "--", "sleep", str(duration + 2)], stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)  # perf attached
        wrk.run(running.port, path=path, connections=64, duration=duration)
        _, counted = perf.communicate(timeout=duration + 30)
    finally:
        if perf.poll() is None:
            perf.kill()
            perf.wait()
    _, reqs1 = og.counters()
    cpu1, cs1, pf1 = cpu_split(pid), context_switches(pid), minor_faults(pid)
    reqs = max(reqs1 - reqs0, 1)
    row = {"req/s": reqs / duration,
           "user us": (cpu1[0] - cpu0[0]) * 1e6 / reqs, "sys us": (cpu1[1] - cpu0[1]) * 1e6 / reqs,
           "vol cs": (cs1[0] - cs0[0]) / reqs, "invol cs": (cs1[1] - cs0[1]) / reqs,
           "minor faults": (pf1 - pf0) / reqs}
    for line in counted.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit() and int(fields[0]) > 0:
            row[fields[2].replace("syscalls:sys_enter_", "")] = int(fields[0]) / reqs
    return row


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=4)
    p.add_argument("--path", default="/")
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sluice-syscalls-"))
    contenders.make_certificates(ROOT, work / "certs")
    proxies = [contenders.Sluice(a.build_dir, "1"), contenders.Nginx("1", 96),
               contenders.Haproxy("1")]
    og = origins.OriginSet("nginx", a.build_dir, work)
    rows = {c.name: [] for c in proxies}
    try:
        for i in range(a.rounds):
            for c in (proxies if i % 2 == 0 else proxies[::-1]):
                running = c.start(work, og)
                try:
                    rows[c.name].append(measure(running, og, a.path, a.duration))
                finally:
                    running.child.stop()
    finally:
        og.stop()
    keys = sorted({k for rs in rows.values() for r in rs for k in r},
                  key=lambda k: (k != "req/s", k))
    print("| per request | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in keys:
        cells = [sum(r.get(k, 0.0) for r in rs) / len(rs) for rs in rows.values()]
        fmt = "{:,.0f}" if k == "req/s" else "{:.3f}"
        print(f"| {k} | " + " | ".join(fmt.format(v) for v in cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
