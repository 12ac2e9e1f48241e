"""Slow and abusive clients, side by side: how sluice, nginx and HAProxy (one worker each on CPU 1,
the bench's configurations, their default timeouts) cope with slow readers, slow bodies and
half-sent heads. bench/abuse.sh installs, builds and calls this:

python3 -m sidebyside.abuse [--rounds N] [--only sluice,haproxy] [--ramp-connections N] ...

Three phases per round, each proxy in turn (the order rotates from round to round), each on a
freshly started proxy:
- `ramp`: slowhttptest -X opens slow readers of a 1 MiB answer while a legit client sends one
  `GET /` (tiny answer) every 200 ms, each on a fresh connection; its latencies and failures,
  the proxy's RSS at the start, at the attack's end and `--settle` seconds later.
- `slow_read`, `slow_body`, `half_head`: N connections of one kind (hostile.py), held open until
  the proxy has accepted all N and its RSS is steady; ΔRSS / N.
Every process it starts is ended by PID when it finishes, fails or is interrupted; all traffic
goes to 127.0.0.1; every loop is bounded in count and time.
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import __main__ as side
from . import client, hostile
from .contenders import Haproxy, Nginx, Sluice, make_certificates
from .origins import OriginSet
from .processes import Child, rss_kib, settled_rss_kib, stop_all

ROOT = side.ROOT
PROXY_CPUS, CLIENT_CPUS = side.PROXY_CPUS, side.CLIENT_CPUS
PHASES = ("ramp", *hostile.KINDS)
LEGIT_INTERVAL = 0.2   # seconds between the legit client's requests
LEGIT_TIMEOUT = 10.0   # per socket operation of a legit request; beyond it the request failed
MB_KIB = 1e6 / 1024    # 5 MB (10^6 bytes) targets, in KiB
KIND_LABEL = {"slow_read": "slow reader", "slow_body": "slow body", "half_head": "half-sent head"}


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/abuse.sh",
        description="Slow and abusive clients: sluice vs nginx vs HAProxy, one worker each on CPU 1.")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3, 1-20)")
    p.add_argument("--only", default="", help="comma-separated subset of sluice,nginx,haproxy")
    p.add_argument("--phases", default=",".join(PHASES),
                   help=f"comma-separated subset of {','.join(PHASES)} (default: all)")
    p.add_argument("--ramp-connections", type=int, default=1000,
                   help="slowhttptest -c: slow readers of the ramp (default 1000)")
    p.add_argument("--ramp-rate", type=int, default=200,
                   help="slowhttptest -r: new slow readers per second (default 200)")
    p.add_argument("--ramp-seconds", type=int, default=10,
                   help="slowhttptest -l: length of the ramp attack (default 10)")
    p.add_argument("--hold", type=int, default=500,
                   help="connections per hostile kind in the memory phases (default 500)")
    p.add_argument("--settle", type=float, default=5.0,
                   help="seconds after the ramp's end for the memory-returned reading (default 5)")
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build/release"),
                   help="where sluice and sluice-origin are taken from (default $BUILD_DIR or build/release)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--tag", default="abuse", help="result files <date>-<commit>-<tag> (default abuse)")
    p.add_argument("--keep-workdir", action="store_true", help="keep configs and logs")
    a = p.parse_args(argv)
    if not 1 <= a.rounds <= 20 or not 1 <= a.ramp_connections <= 5000 or not 1 <= a.hold <= 5000:
        p.error("--rounds 1-20, --ramp-connections 1-5000, --hold 1-5000")
    if not 1 <= a.ramp_rate <= 5000 or not 2 <= a.ramp_seconds <= 120 or not 0 <= a.settle <= 60:
        p.error("--ramp-rate 1-5000, --ramp-seconds 2-120, --settle 0-60")
    if not a.tag or not all(ch.isalnum() or ch == "-" for ch in a.tag):
        p.error("--tag: letters, digits and - only")
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    a.phases = [s.strip() for s in a.phases.split(",") if s.strip()]
    if set(a.only) - {"sluice", "nginx", "haproxy"} or set(a.phases) - set(PHASES) or not a.phases:
        p.error("--only: from sluice,nginx,haproxy; --phases: from " + ",".join(PHASES))
    return a


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentile(values, q):
    """Nearest-rank percentile (q in 0-100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class Abuse:
    def __init__(self, a, workdir, origins, contenders):
        self.a, self.workdir, self.origins = a, workdir, origins
        self.contenders = contenders

    def start(self, contender):
        run = contender.start(self.workdir / "proxies", self.origins)
        # Warm-up: the small path and the 1 MiB path once each, so that the start reading is
        # not the proxy's first-touch memory.
        client.request_loop(run.port, 100, "/")
        client.request_loop(run.port, 3, f"/?size={hostile.BIG}")
        return run

    def ramp(self, contender, round_no):
        a = self.a
        run = self.start(contender)
        try:
            start = settled_rss_kib(run.pid, interval=0.5, timeout=3.0)
            argv = ["slowhttptest", "-X", "-c", str(a.ramp_connections), "-r", str(a.ramp_rate),
                    "-w", "512", "-y", "1024", "-n", "5", "-z", "32", "-k", "3", "-p", "3",
                    "-l", str(a.ramp_seconds), "-u", f"http://127.0.0.1:{run.port}/?size={hostile.BIG}"]
            attacker_log = self.workdir / f"slowhttptest-{contender.name}-{round_no}.log"
            attacker = Child(argv, name="slowhttptest", cpus=CLIENT_CPUS, log_path=attacker_log)
            legit_state = {}
            legit = threading.Thread(target=_legit_loop, args=(run.port, legit_state),
                                     name="legit", daemon=True)
            peak_held, peak_rss, timeline = 0, start, []
            t0 = time.monotonic()
            deadline = t0 + a.ramp_seconds + 15
            legit.start()
            # The proxy's side, sampled twice a second while the legit client runs beside it.
            while attacker.alive() and run.child.alive() and time.monotonic() < deadline:
                try:
                    now_held, now_rss = hostile.held(run.pid, run.port), rss_kib(run.pid)
                except (OSError, RuntimeError):
                    break  # the proxy is gone: stayed_up says so
                timeline.append((round(time.monotonic() - t0, 1), now_held, now_rss))
                peak_held, peak_rss = max(peak_held, now_held), max(peak_rss, now_rss)
                try:
                    attacker.proc.wait(timeout=0.5)  # returns as soon as the attack ends
                except subprocess.TimeoutExpired:
                    pass
            ended = time.monotonic()
            overran = attacker.alive()
            attacker.stop()
            up = run.child.alive()
            rss_end = rss_kib(run.pid) if up else None
            legit_state["stop"] = True
            legit.join(timeout=2 * LEGIT_TIMEOUT + 1)
            latencies, failures = legit_state["latencies"], legit_state["failures"]
            result = {"legit_ms": [round(x, 2) for x in latencies], "legit_failed": failures,
                      "legit_sent": len(latencies) + len(failures),
                      "attack_s": round(ended - t0, 1), "attacker_overran": overran,
                      "attacker": _attacker_summary(attacker_log),
                      "peak_held": peak_held, "rss_start_kib": start, "rss_peak_kib": peak_rss,
                      "timeline_s_held_rss_kib": timeline}
            if up and run.child.alive():
                result["rss_end_kib"] = rss_end
                time.sleep(max(0.0, ended + a.settle - time.monotonic()))
                result["rss_settled_kib"] = rss_kib(run.pid)
                result["held_settled"] = hostile.held(run.pid, run.port)
            result["stayed_up"] = run.child.alive()
            return result
        finally:
            run.stop()

    def hold(self, contender, kind):
        n = self.a.hold
        run = self.start(contender)
        socks = []
        try:
            return self._hold(run, kind, n, socks)
        except (OSError, RuntimeError):
            if run.child.alive():
                raise
            # The proxy died under the attack: that is the finding.
            return {"count": n, "held": 0, "held_at_reading": 0, "kib_per_conn": None,
                    "peak_kib_per_conn": None, "steady": False, "origin_connections": 0,
                    "stayed_up": False}
        finally:
            hostile.close_all(socks)
            run.stop()

    def _hold(self, run, kind, n, socks):
        """Opens `n` connections of `kind` (into `socks`), waits until they are held and VmRSS
        is steady; the readings."""
        before = settled_rss_kib(run.pid, interval=0.5, timeout=3.0)
        tcp_before = _tcp_mem_kib()
        origin_conns_before, _ = self.origins.counters()
        t0 = time.monotonic()
        socks += hostile.open_hostile(kind, run.port, n)
        held = hostile.wait_held(run.pid, run.port, n, kind, socks, timeout=5.0)
        rss, readings = _steady_rss(run.pid, kind, socks)
        held_at_reading = hostile.held(run.pid, run.port)
        tcp = _tcp_mem_kib()
        reading_s = time.monotonic() - t0
        origin_conns, _ = self.origins.counters()
        per_conn = (rss - before) / held_at_reading if held_at_reading else None
        return {"count": n, "held": held, "held_at_reading": held_at_reading,
                "rss_before_kib": before, "rss_kib": rss, "rss_readings_kib": readings,
                "steady": _steady(readings),
                "peak_kib_per_conn": round((max(readings) - before) / held_at_reading, 2)
                if held_at_reading else None,
                "reading_after_s": round(reading_s, 1),
                "kib_per_conn": round(per_conn, 2) if per_conn is not None else None,
                "tcp_kib_per_conn": round((tcp - tcp_before) / held_at_reading, 1) if held_at_reading else None,
                "origin_connections": origin_conns - origin_conns_before,
                "stayed_up": run.child.alive()}

    def run(self):
        names = [c.name for c in self.contenders]
        rounds = []
        for r in range(self.a.rounds):
            k = r % len(self.contenders)
            order = self.contenders[k:] + self.contenders[:k]
            one = {"order": [c.name for c in order], "loadavg": _loadavg(),
                   "phases": {p: {} for p in self.a.phases}}
            for phase in self.a.phases:
                for c in order:
                    t0 = time.monotonic()
                    res = self.ramp(c, r) if phase == "ramp" else self.hold(c, phase)
                    one["phases"][phase][c.name] = res
                    log(f"round {r + 1} {phase} {c.name}: {_brief(phase, res)} "
                        f"({time.monotonic() - t0:.1f} s)")
            rounds.append(one)
        return {"rounds": rounds, "summary": summarize(rounds, names, self.a.phases)}


def _steady_rss(pid, kind, socks, interval=0.5, timeout=6.0, agree=4):
    """VmRSS once `agree` readings `interval` apart are equal (1.5 s: long enough for periodic
    housekeeping such as sluice's parking and heap trim to have run), or the last reading after
    `timeout`; slow bodies trickle at each reading. Returns it and all the readings."""
    readings = [rss_kib(pid)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _steady(readings, agree):
        time.sleep(interval)
        hostile.trickle(kind, socks)
        readings.append(rss_kib(pid))
    return readings[-1], readings


def _tcp_mem_kib():
    """The kernel's memory for every TCP socket on the machine, KiB (/proc/net/sockstat's TCP
    `mem`, in pages): what a hostile connection costs in socket buffers wherever they sit (the
    proxy's send queue, its origin connections, the origin's), which VmRSS does not show."""
    for line in open("/proc/net/sockstat"):
        if line.startswith("TCP:"):
            f = line.split()
            return int(f[f.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    return 0


def _steady(readings, agree=4):
    return len(readings) >= agree and len(set(readings[-agree:])) == 1


def _legit_loop(port, state):
    """The legit client: a `GET /` on a fresh connection every LEGIT_INTERVAL until
    state["stop"]; a request slower than the interval makes the next start at the next tick.
    Fills state["latencies"] (ms of each 200) and state["failures"]."""
    latencies, failures = state.setdefault("latencies", []), state.setdefault("failures", [])
    t0 = tick = time.monotonic()
    while not state.get("stop") and tick - t0 < 600:
        took, error = hostile.legit_get(port, LEGIT_TIMEOUT)
        if error:
            failures.append({"at_s": round(tick - t0, 2), "error": error})
        else:
            latencies.append(took * 1000)
        tick += LEGIT_INTERVAL
        while tick < time.monotonic():
            tick += LEGIT_INTERVAL
        time.sleep(max(0.0, tick - time.monotonic()))


def _loadavg():
    return open("/proc/loadavg").read().split()[0]


def _attacker_summary(log_path):
    """slowhttptest's own view, from its log: the most connections it reported connected at
    once (it prints a status block now and then, not every second) and its exit reason."""
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", Path(log_path).read_text(errors="replace"))
    connected = [int(x) for x in re.findall(r"^connected:\s+(\d+)", text, re.M)]
    exit_status = re.findall(r"^Exit status:\s*(.*)$", text, re.M)
    return {"max_connected_reported": max(connected) if connected else None,
            "exit_status": exit_status[-1].strip() if exit_status else None}


def _brief(phase, res):
    if phase == "ramp":
        lat = res["legit_ms"]
        p99 = f"{percentile(lat, 99):.0f}" if lat else "-"
        return (f"legit p99 {p99} ms, failed {len(res['legit_failed'])}/{res['legit_sent']}, "
                f"peak held {res['peak_held']}, RSS {res['rss_start_kib']} -> "
                f"{res.get('rss_end_kib')} -> {res.get('rss_settled_kib')} KiB, up {res['stayed_up']}")
    return (f"held {res['held_at_reading']}/{res['count']}, {res['kib_per_conn']} KiB/conn, "
            f"origin conns {res['origin_connections']}, up {res['stayed_up']}")


def summarize(rounds, names, phases):
    out = {}
    for name in names:
        s = {}
        if "ramp" in phases:
            ramps = [r["phases"]["ramp"][name] for r in rounds]
            lat = [x for res in ramps for x in res["legit_ms"]]
            s["ramp"] = {
                "legit_p50_ms": round(percentile(lat, 50), 1) if lat else None,
                "legit_p99_ms": round(percentile(lat, 99), 1) if lat else None,
                "legit_max_ms": round(max(lat), 1) if lat else None,
                "legit_p99_ms_rounds": [round(percentile(res["legit_ms"], 99), 1)
                                        if res["legit_ms"] else None for res in ramps],
                "legit_failed": sum(len(res["legit_failed"]) for res in ramps),
                "legit_sent": sum(res["legit_sent"] for res in ramps),
                "peak_held_median": statistics.median(res["peak_held"] for res in ramps),
                "rss_start_kib": statistics.median(res["rss_start_kib"] for res in ramps),
                "rss_peak_kib": statistics.median(res["rss_peak_kib"] for res in ramps),
                "rss_end_kib": _median_of(ramps, "rss_end_kib"),
                "rss_settled_kib": _median_of(ramps, "rss_settled_kib"),
                "returned_excess_kib_rounds": [
                    res["rss_settled_kib"] - res["rss_start_kib"] if "rss_settled_kib" in res
                    else None for res in ramps],
                "stayed_up": all(res["stayed_up"] for res in ramps),
            }
        for kind in hostile.KINDS:
            if kind not in phases:
                continue
            holds = [r["phases"][kind][name] for r in rounds]
            per = [h["kib_per_conn"] for h in holds if h["kib_per_conn"] is not None]
            peak = [h["peak_kib_per_conn"] for h in holds if h["peak_kib_per_conn"] is not None]
            s[kind] = {"kib_per_conn": round(statistics.median(per), 2) if per else None,
                       "peak_kib_per_conn": round(statistics.median(peak), 2) if peak else None,
                       "kib_per_conn_rounds": [h["kib_per_conn"] for h in holds],
                       "tcp_kib_per_conn": _median_or_none([h.get("tcp_kib_per_conn") for h in holds]),
                       "held_min": min(h["held_at_reading"] for h in holds),
                       "unsteady_rounds": sum(not h["steady"] for h in holds),
                       "count": holds[0]["count"],
                       "origin_connections_median": statistics.median(
                           h["origin_connections"] for h in holds),
                       "stayed_up": all(h["stayed_up"] for h in holds)}
        out[name] = s
    return out


def _median_or_none(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 1) if values else None


def _median_of(results, key):
    values = [r[key] for r in results if key in r]
    return statistics.median(values) if values else None


def evaluate_targets(summary):
    """The issue's targets for sluice, where the peers they compare with were measured."""
    targets = []
    sl = summary.get("sluice")
    if not sl:
        return targets
    peers = [n for n in ("nginx", "haproxy") if n in summary]
    ramp = sl.get("ramp")
    if ramp and "haproxy" in summary and summary["haproxy"]["ramp"]["legit_p99_ms"]:
        ha = summary["haproxy"]["ramp"]["legit_p99_ms"]
        ratio = ramp["legit_p99_ms"] / ha if ramp["legit_p99_ms"] is not None else None
        targets.append({"check": "ramp: legit p99 ≤ 1.5 × HAProxy's", "value": ramp["legit_p99_ms"],
                        "bound": round(1.5 * ha, 1), "ratio": round(ratio, 2) if ratio else None,
                        "met": ratio is not None and ratio <= 1.5})
    for kind in hostile.KINDS:
        if kind not in sl or not peers or sl[kind]["kib_per_conn"] is None:
            continue
        peer_values = [summary[p][kind]["kib_per_conn"] for p in peers
                       if summary[p][kind]["kib_per_conn"] is not None]
        if not peer_values:
            continue
        better = min(peer_values)
        targets.append({"check": f"{KIND_LABEL[kind]}: KiB per connection ≤ the better peer's",
                        "value": sl[kind]["kib_per_conn"], "bound": better,
                        "met": sl[kind]["kib_per_conn"] <= better})
    if ramp and ramp["returned_excess_kib_rounds"]:
        excess = [x for x in ramp["returned_excess_kib_rounds"] if x is not None]
        worst = max(excess) if excess else None
        targets.append({"check": "memory returned: RSS within 5 MB of the start, settled after the ramp "
                                 "(worst round)",
                        "value": round(worst / MB_KIB, 1) if worst is not None else None,
                        "bound": 5.0, "met": worst is not None and worst <= 5 * MB_KIB})
    return targets


def _fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def markdown(doc):
    s, names = doc["summary"], doc["contenders"]
    st = doc["settings"]
    m = doc["machine"]
    lines = [f"# Slow and abusive clients — {doc['date']}, commit {doc['commit']}"
             + (" (dirty)" if doc["dirty"] else ""), "",
             f"`{doc['command']}` — {st['rounds']} interleaved rounds, one worker each on CPU "
             f"{PROXY_CPUS}; slowhttptest, the hostile clients, the legit client and three "
             f"sluice-origins on CPU {CLIENT_CPUS}; each phase on a freshly started proxy with the "
             f"bench's configuration (bench/conf/) and its default timeouts. "
             f"{m['nproc']} CPUs, {m['cpu_model']}, kernel {m['kernel']}; load average "
             f"{m['loadavg_start']} at the start, {m.get('loadavg_end', '?')} at the end "
             f"(per round: {', '.join(r['loadavg'] for r in doc['rounds'])}). "
             f"Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items())
             + f". Wall time {doc['elapsed_s']:.0f} s.", ""]
    if doc["targets"]:
        lines += ["| target (sluice) | sluice | bound | met |", "|---|---|---|---|"]
        for t in doc["targets"]:
            lines.append(f"| {t['check']} | {_fmt(t['value'], 1)} | {_fmt(t['bound'], 1)} | "
                         f"{'yes' if t['met'] else '**no**'} |")
        lines.append("")
    if "ramp" in st["phases"]:
        lines += [f"## Slow-read ramp",
                  "",
                  f"`slowhttptest -X -c {st['ramp_connections']} -r {st['ramp_rate']} -w 512 -y 1024 "
                  f"-n 5 -z 32 -k 3 -p 3 -l {st['ramp_seconds']}` against `/?size={hostile.BIG}`; "
                  f"a legit `GET /` every {LEGIT_INTERVAL * 1000:.0f} ms on a fresh connection "
                  f"for as long as the attack runs. Latencies of all rounds pooled; a request "
                  f"fails on a connection error, a non-200, or {LEGIT_TIMEOUT:.0f} s without "
                  f"progress. Memory: RSS after warm-up, at the attack's end (slowhttptest "
                  f"closed its connections), {st['settle']:.0f} s after (medians over rounds).", "",
                  "| proxy | legit p50 ms | p99 ms | max ms | p99 per round | failed / sent | "
                  "slow readers held (peak) | RSS start MiB | peak | end | +settle | +settle − start, MB (rounds) | stayed up |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in names:
            r = s[n]["ramp"]
            mib = lambda kib: _fmt(kib / 1024 if kib is not None else None, 1)
            excess = ", ".join(_fmt(x / MB_KIB if x is not None else None, 1)
                               for x in r["returned_excess_kib_rounds"])
            lines.append(
                f"| {n} | {_fmt(r['legit_p50_ms'], 1)} | {_fmt(r['legit_p99_ms'], 1)} | "
                f"{_fmt(r['legit_max_ms'], 1)} | {', '.join(_fmt(x, 0) for x in r['legit_p99_ms_rounds'])} | "
                f"{r['legit_failed']} / {r['legit_sent']} | {r['peak_held_median']:.0f} | "
                f"{mib(r['rss_start_kib'])} | {mib(r['rss_peak_kib'])} | {mib(r['rss_end_kib'])} | "
                f"{mib(r['rss_settled_kib'])} | {excess} | {'yes' if r['stayed_up'] else '**no**'} |")
        lines.append("")
    kinds = [k for k in hostile.KINDS if k in st["phases"]]
    if kinds:
        lines += ["## Memory per hostile connection", "",
                  f"{st['hold']} connections of one kind on a fresh proxy, held until it has "
                  f"accepted all of them (ESTABLISHED sockets of the proxy's port among its own "
                  f"descriptors) and its RSS is steady (four readings 0.5 s apart agree, at most 6 s: "
                  f"periodic housekeeping such as sluice's parking has run); KiB per connection = "
                  f"ΔRSS / connections held at the reading (median over rounds; peak: the highest "
                  f"reading of the hold instead). Slow reader: 1 KiB receive buffer, `GET /?size={hostile.BIG}`, never "
                  f"reads. Slow body: `POST` with `Content-Length: {hostile.BIG}`, 16 body bytes, "
                  f"then one byte every half second. Half-sent head: request line and three headers, no "
                  f"blank line. Origin connections: opened by the proxy during the phase. Kernel: the "
                  f"growth of every TCP socket's buffers on the machine (/proc/net/sockstat) per "
                  f"connection held, wherever the answer or body waits (the proxy's sockets, the "
                  f"origins'); not in VmRSS.", "",
                  "| proxy | " + " | ".join(f"{KIND_LABEL[k]} KiB/conn (rounds) | peak | kernel KiB/conn | held (min) | origin conns"
                                            for k in kinds) + " | stayed up |",
                  "|---|" + "---|---|---|---|---|" * len(kinds) + "---|"]
        for n in names:
            cells = []
            for k in kinds:
                h = s[n][k]
                rounds_txt = ", ".join(_fmt(x, 1) for x in h["kib_per_conn_rounds"])
                unsteady = f", {h['unsteady_rounds']} unsteady" if h["unsteady_rounds"] else ""
                cells.append(f"**{_fmt(h['kib_per_conn'], 1)}** ({rounds_txt}{unsteady}) | "
                             f"{_fmt(h['peak_kib_per_conn'], 1)} | {_fmt(h.get('tcp_kib_per_conn'), 1)} | "
                             f"{h['held_min']}/{h['count']} | {h['origin_connections_median']:.0f}")
            up = all(s[n][k]["stayed_up"] for k in kinds)
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {'yes' if up else '**no**'} |")
        lines.append("")
    return "\n".join(lines)


def build_contenders(bin_dir, only):
    all_of = [Sluice(bin_dir, PROXY_CPUS), Nginx(PROXY_CPUS), Haproxy(PROXY_CPUS)]
    return [c for c in all_of if not only or c.name in only]


def main(argv):
    a = parse_args(argv)
    bin_dir = (ROOT / a.build_dir).resolve()
    for b in ("sluice", "sluice-origin"):
        if not (bin_dir / b).exists():
            sys.exit(f"{bin_dir / b} missing: build first (scripts/build.sh)")
    if "ramp" in a.phases and not shutil.which("slowhttptest"):
        sys.exit("slowhttptest missing: scripts/install-deps.sh --bench")
    contenders = build_contenders(bin_dir, a.only)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-abuse-"))
    started_at = datetime.datetime.now()
    short, dirty = side.commit()
    doc = {"date": started_at.strftime("%Y-%m-%d"), "started": started_at.isoformat(timespec="seconds"),
           "commit": short, "dirty": dirty, "command": shlex.join(["bench/abuse.sh", *argv]),
           "machine": side.machine(), "contenders": [c.name for c in contenders],
           "versions": {c.product: c.version() for c in contenders}}
    doc["versions"]["slowhttptest"] = side._text(["slowhttptest", "-h"]).split("version ")[-1].split()[0] \
        if shutil.which("slowhttptest") else "?"
    doc["settings"] = {"rounds": a.rounds, "phases": a.phases, "ramp_connections": a.ramp_connections,
                       "ramp_rate": a.ramp_rate, "ramp_seconds": a.ramp_seconds, "hold": a.hold,
                       "settle": a.settle, "legit_interval_s": LEGIT_INTERVAL,
                       "legit_timeout_s": LEGIT_TIMEOUT, "build_dir": str(bin_dir),
                       "cpus": {c.name: c.cpus for c in contenders}, "client_cpus": CLIENT_CPUS}
    log(f"abuse bench: {', '.join(doc['contenders'])}; phases {','.join(a.phases)}; "
        f"{a.rounds} rounds; work dir {workdir}")
    origins = None
    t0 = time.monotonic()
    try:
        origins = OriginSet("sluice-origin", bin_dir, workdir / "origins", cpus=CLIENT_CPUS)
        make_certificates(ROOT, workdir / "tls")
        (workdir / "proxies").mkdir()
        doc.update(Abuse(a, workdir, origins, contenders).run())
    finally:
        if origins:
            origins.stop()
        stop_all()
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    doc["machine"]["loadavg_end"] = _loadavg()
    doc["targets"] = evaluate_targets(doc["summary"])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{doc['date']}-{short}-{a.tag}"
    md = markdown(doc)
    (out / f"{stem}.md").write_text(md + "\n")
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(md)
    log(f"written: {out / stem}.md and .json ({doc['elapsed_s']} s)")
    if a.keep_workdir:
        log(f"work dir kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, side._on_sigterm)
    signal.signal(signal.SIGHUP, side._on_sigterm)
    try:
        main(sys.argv[1:])
    finally:
        stop_all()
