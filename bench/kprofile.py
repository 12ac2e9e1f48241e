"""Where each proxy's CPU time goes, kernel included: microseconds per proxied request, by
function, sluice beside nginx and HAProxy in bench/syscalls.py's setup (`small`: 64 keep-alive
connections, `GET /`, one worker each on CPU 1). Per round and proxy, `perf record -e cpu-clock
-c 100000 -g` samples the proxy (every thread) every 100 us of its CPU time while wrk runs; a
function's samples x 100 us / the origins' requests is its cost per request. Rounds alternate
the order; the tables give the mean over the rounds.

    /usr/bin/python3 bench/kprofile.py BUILD_DIR [--rounds N] [--duration S] [--top N]
        [--keep DIR] [--period-us US]

--period-us 1000 samples every millisecond instead: a tenth of the overhead, so that the
proxies run as loaded as in bench/run.sh (at 100 us perf's own cost makes each proxy the
bottleneck, the one case where sluice never waits for work; session 20 measured both).

Prints three tables: the areas (user space, system call entry and exit, the TCP send path with
the loopback delivery and the receiver's wake-up it runs, the TCP receive path, epoll_wait with
its sleeps, interrupts and faults), each sample counted once; the inclusive time of the steps of
a loopback send and of a few other kernel functions; then the functions by self time, sorted by
sluice minus the better of the other two, largest first: where sluice pays more than its peers,
function by function.

Why: on loopback ~85% of every proxy's CPU is the kernel's, and sluice's kernel time per request
stayed ~0.5 us above nginx's with fewer system calls (bench/syscalls.py); system call counts
cannot say what each call cost, a profile can. Needs perf with the cpu-clock software event and
kernel symbols (root, kptr_restrict 0). Loopback only; every process started is ended by PID."""
import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from sidebyside import steady  # noqa: E402
from sidebyside.steady import mean  # noqa: E402

PERIOD_US = 100
# Areas: a kernel sample belongs to the first area of this list that has an entry point anywhere
# on its call chain; samples in user space count as "user space". Order matters: a fault or an
# interrupt inside tcp_sendmsg counts as itself, a wake-up inside tcp_sendmsg as the send path,
# which is what the sender pays for it.
AREAS = [
    ("page faults", r"^asm_exc_page_fault$"),
    ("interrupts (timer, IPI)", r"^asm_sysvec_|^asm_common_interrupt$"),
    ("TCP send (incl. loopback delivery, receiver's TCP input and wake-up)", r"^tcp_sendmsg$"),
    ("TCP receive (tcp_recvmsg, incl. ACKs it sends)", r"^tcp_recvmsg$"),
    ("epoll_wait (incl. sleeping, scheduler)", r"^do_epoll_wait$"),
    ("epoll_ctl", r"^do_epoll_ctl$"),
    ("other system calls' work", r"^__x64_sys_|^__do_sys_|^__se_sys_"),
    ("system call entry and exit", r"^entry_SYSCALL_64|^do_syscall_64$|^syscall_exit_|"
                                   r"^syscall_return_"),
]
AREA_RX = [(name, re.compile(rx)) for name, rx in AREAS]

# Functions whose inclusive time (anywhere on the chain) is worth a line of its own: the steps of
# a loopback send, in the order they nest.
INCLUSIVE = ["tcp_sendmsg", "tcp_write_xmit", "__dev_queue_xmit", "do_softirq.part.0",
             "tcp_v4_rcv", "tcp_rcv_established", "tcp_ack", "sock_def_readable",
             "ep_poll_callback", "try_to_wake_up", "tcp_recvmsg", "tcp_cleanup_rbuf",
             "do_epoll_wait", "schedule", "__sys_sendto", "__sys_recvfrom", "do_writev",
             "__x64_sys_getsockopt", "fdget", "fput", "__check_object_size", "_copy_to_iter",
             "_copy_from_iter", "__kmalloc_node_track_caller_noprof", "kmem_cache_alloc_node_noprof",
             "kfree", "__alloc_skb", "__kfree_skb", "skb_release_data"]


def samples(data):
    """Yields each sample's call chain, leaf first, as [(symbol, in the kernel)]."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    chain = []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if chain:
                yield chain
            chain = []
            continue
        m = re.match(r"^[0-9a-f]+\s+(.*?)\s+\((.*)\)$", line)
        if m:
            sym = m.group(1).split("+0x")[0]
            chain.append((sym if sym != "[unknown]" else f"[{Path(m.group(2)).name}]",
                          m.group(2) == "[kernel.kallsyms]"))


def attribute(data, reqs, period_us=PERIOD_US):
    """{'area:NAME': us/req, 'fn:SYMBOL': us/req (self)} for one recording."""
    row = defaultdict(float)
    per_sample = period_us / reqs
    for chain in samples(data):
        leaf, kernel = chain[0]
        row["fn:" + (leaf if kernel else "(user) " + leaf)] += per_sample
        row["total"] += per_sample
        if not kernel:
            row["area:user space"] += per_sample
            continue
        names = [s for s, _ in chain]
        for fn in set(names).intersection(INCLUSIVE):
            row["incl:" + fn] += per_sample
        area = next((a for a, rx in AREA_RX if any(rx.search(n) for n in names)), "other kernel")
        row["area:" + area] += per_sample
    return row


def measure(running, og, duration, keep, period_us):
    out = keep / f"{running.name}-{time.monotonic_ns()}.data"
    reqs, _ = steady.under_perf(["record", "-q", "-e", "cpu-clock", "-c", str(period_us * 1000),
                                 "-g", "-o", str(out)], running, og, "/", duration)
    row = attribute(out, reqs, period_us)
    row["req/s"] = reqs / duration
    return row


def tables(rows, top):
    names = list(rows)
    lines = ["| us per request | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    areas = [a for a, _ in AREAS] + ["other kernel", "user space"]
    for key in ["req/s", "total"] + ["area:" + a for a in areas]:
        cells = [mean(rows[n], key) for n in names]
        fmt = "{:,.0f}" if key == "req/s" else "{:.3f}"
        label = key.replace("area:", "")
        lines.append(f"| {label} | " + " | ".join(fmt.format(v) for v in cells) + " |")
    lines += ["", "| inclusive | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for fn in INCLUSIVE:
        cells = [mean(rows[n], "incl:" + fn) for n in names]
        lines.append(f"| `{fn}` | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    fns = {k for rs in rows.values() for r in rs for k in r if k.startswith("fn:")}
    first, others = names[0], names[1:]

    def excess(k):
        return mean(rows[first], k) - min(mean(rows[o], k) for o in others)
    lines += ["", "| function (self) | " + " | ".join(names) + f" | {first} - better other |",
              "|---|" + "---:|" * (len(names) + 1)]
    for k in sorted(fns, key=excess, reverse=True)[:top]:
        cells = [mean(rows[n], k) for n in names] + [excess(k)]
        lines.append(f"| `{k[3:]}` | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    return "\n".join(lines)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=4)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--keep", help="directory for the perf.data files (default: a temporary one)")
    p.add_argument("--period-us", type=int, default=PERIOD_US,
                   help=f"CPU time between samples, microseconds (default {PERIOD_US})")
    a = p.parse_args(argv)
    if not 10 <= a.period_us <= 100_000:
        p.error("--period-us 10-100000")
    keep = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="sluice-kprofile-"))
    keep.mkdir(parents=True, exist_ok=True)
    rows = steady.alternate(a.build_dir, a.rounds,
                            lambda running, og: measure(running, og, a.duration, keep, a.period_us))
    print(tables(rows, a.top))


if __name__ == "__main__":
    main(sys.argv[1:])
