"""System calls and context switches per proxied request, sluice beside nginx and HAProxy, in the
side-by-side benchmark's setup (one worker each on CPU 1, the three origins and wrk on CPU 0,
`small`: 64 keep-alive connections, `GET /`). Per round and proxy, `perf stat -e
'syscalls:sys_enter_*'` counts the proxy's system calls (every thread) while wrk runs for
--duration seconds, /proc gives its CPU time, context switches and minor page faults, and the
origins' counters the requests; each count is divided by those requests. Rounds alternate the order.

    /usr/bin/python3 bench/syscalls.py BUILD_DIR [--rounds N] [--duration S] [--path P] [--close]
        [--events E,...] [--origin-events E,...]

`origins us` is the three origins' CPU time per request: the load side (CPU 0) is the
bottleneck of the `small` run, so what a proxy makes it do sets the request rate, and with it
how often the proxy runs out of work. `epoll_wait returning N` counts the calls by how many
events they handed over (tracepoint filters, counted in the kernel like the rest): a proxy that
waits for work gets fewer per call, and pays the call and the sleep over fewer requests.
--origin-events (e.g. sched:sched_waking,ipi:ipi_send_cpu) adds a second wrk run per proxy and
round with perf counting those events in the origins' context only, the proxy untraced (tracing
its system calls slows it, and a slower proxy sleeps less): what the load side pays to wake the
proxy when it sleeps.

Why: on loopback the kernel is ~85% of every proxy's CPU time, so a system call or a wake-up
saved per request is worth more than most user-space work (docs/performance.md). Needs perf with
tracepoints (the VM here has no hardware counters; tracepoints work). Loopback only; every
process started is ended by PID."""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from sidebyside import steady  # noqa: E402
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


# epoll_wait's returns by the number of events, one counter each (`perf stat` prints them in
# this order, all under the tracepoint's name).
BATCHES = (("1", "ret == 1"), ("2-4", "ret >= 2 && ret <= 4"), ("5+", "ret >= 5"))


def measure(running, og, path, duration, events=(), headers=()):
    pid = running.pid
    cpu0, cs0, pf0 = cpu_split(pid), context_switches(pid), minor_faults(pid)
    og0 = og.cpu_seconds()
    extra = [a for e in events for a in ("-e", e)]
    for _, condition in BATCHES:
        extra += ["-e", "syscalls:sys_exit_epoll_wait", "--filter", condition]
    reqs, counted = steady.under_perf(["stat", "-x,", "-e", "syscalls:sys_enter_*", *extra],
                                      running, og, path, duration, headers)
    cpu1, cs1, pf1 = cpu_split(pid), context_switches(pid), minor_faults(pid)
    row = {"req/s": reqs / duration, "origins us": (og.cpu_seconds() - og0) * 1e6 / reqs,
           "user us": (cpu1[0] - cpu0[0]) * 1e6 / reqs, "sys us": (cpu1[1] - cpu0[1]) * 1e6 / reqs,
           "vol cs": (cs1[0] - cs0[0]) / reqs, "invol cs": (cs1[1] - cs0[1]) / reqs,
           "minor faults": (pf1 - pf0) / reqs}
    batches = iter(BATCHES)
    for line in counted.splitlines():
        fields = line.split(",")
        if len(fields) <= 2:
            continue
        count = int(fields[0]) if fields[0].strip().isdigit() else 0  # or "<not counted>"
        if fields[2] == "syscalls:sys_exit_epoll_wait":
            row[f"epoll_wait returning {next(batches)[0]}"] = count / reqs
        elif count > 0:
            row[fields[2].replace("syscalls:sys_enter_", "")] = count / reqs
    return row


def origin_counts(running, og, path, duration, headers, events):
    """`events` counted in the origins' context over one more wrk run, per request; the proxy
    runs untraced."""
    reqs, err = steady.under_perf(["stat", "-x,", "-e", ",".join(events)], running, og, path,
                                  duration, headers, pids=og.pids)
    row = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit():
            row["origins' " + fields[2]] = int(fields[0]) / reqs
    return row


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=4)
    p.add_argument("--path", default="/")
    p.add_argument("--events", default="sched:sched_waking,ipi:ipi_send_cpu",
                   help="further perf events counted in the proxy's context, comma-separated "
                        "(default: the wake-ups it performs and the IPIs it sends)")
    p.add_argument("--close", action="store_true",
                   help="every request with `Connection: close` (the `close` scenario)")
    p.add_argument("--origin-events", default="",
                   help="perf events counted in the origins' context in a second, untraced run, "
                        "comma-separated (e.g. sched:sched_waking,ipi:ipi_send_cpu)")
    a = p.parse_args(argv)
    headers = ("Connection: close",) if a.close else ()
    events = [e for e in a.events.split(",") if e]
    origin_events = [e for e in a.origin_events.split(",") if e]

    def both(running, og):
        row = measure(running, og, a.path, a.duration, events, headers)
        if origin_events:
            row.update(origin_counts(running, og, a.path, a.duration, headers, origin_events))
        return row
    rows = steady.alternate(a.build_dir, a.rounds, both)
    print(steady.mean_table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
