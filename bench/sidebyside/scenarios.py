"""What is measured. Every scenario runs in rounds that interleave the contenders (A B C, B C A,
C A B, ...) so that slow drifts of a shared machine hit all of them alike; the report compares
contenders within each round before taking medians.

Load scenarios (wrk, one thread, on CPU 0) count requests per second of the proxy's own CPU time
(utime + stime from /proc/PID/stat, before and after the run) and count the connections the
origins accept in steady state (a window inside each run); `grpc` runs them against gRPC servers
that only it starts. `idle` measures resident memory per idle client connection,
`startup` the time to the first proxied 200, `instr` user-space instructions per request under
callgrind, `slow-one` the latency that balancing policies keep when one origin of three turns slow.
"""
import math
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import client, h2load, profile, wrk
from .contenders import GRPC_PREFIX, Haproxy, Nginx, Sluice
from .origins import GRPC_REPLY, GRPC_REQUEST, OriginSet
from .processes import connections_to, rss_kib, settled_rss_kib


@dataclass
class Settings:
    rounds: int
    duration: int           # seconds per measured run
    warmup: int             # seconds of load per contender before a load scenario's rounds
    connections: int        # wrk connections for every load scenario
    idle_steps: tuple       # idle connections opened per step (two steps: marginal = 2nd step)
    instr_requests: int     # measured requests under callgrind (beyond instr_warm)
    instr_warm: int
    workdir: Path
    instr_connections: int = 1  # 1: sequential requests on one connection; more: wrk
    client_cpus: str = "0"      # the load side's CPUs (wrk, the origins, the harness)
    bin_dir: Path = None        # sluice-origin's directory (the slow-one scenario's origins)


@dataclass(frozen=True)
class Load:
    description: str
    path: str
    headers: tuple = ()
    tls: bool = False  # through each contender's TLS listener (same certificate for all)
    h2: bool = False   # HTTP/2 through h2load: h2c on the contender's h2c listener, or ALPN h2 with tls
    grpc: bool = False  # gRPC calls (POSTs of GRPC_REQUEST) to gRPC servers behind GRPC_PREFIX


GRPC_PATH = GRPC_PREFIX + "Unary"
GRPC_HEADERS = ("content-type: application/grpc", "te: trailers")
GRPC_MAX_STREAMS = 128  # the gRPC servers' SETTINGS_MAX_CONCURRENT_STREAMS (nginx-grpc-origin.conf.in)


# Descriptions are formatted with the run's settings: {n} wrk connections, {first} and {second}
# idle connections per step, {warm} and {count} requests under callgrind, {calls} HTTP/2 streams
# in flight and {grpc_bound} connections to one gRPC server that carry them.
LOADS = {
    "small": Load("{n} keep-alive connections, `GET /`, tiny body (`app-N\\n`, 6 bytes)", "/"),
    "1k": Load("{n} keep-alive connections, 1 KiB body (`GET /?size=1024`)", "/?size=1024"),
    "64k": Load("{n} keep-alive connections, 64 KiB body (`GET /?size=65536`)", "/?size=65536"),
    "close": Load("{n} connections sending `Connection: close`: a new client connection per "
                  "request, tiny body", "/", ("Connection: close",)),
    "reuse": Load("the `small` load ({n} keep-alive connections) again; what counts is "
                  "origin-side connections accepted per 1,000 requests in steady state (0 "
                  "expected)", "/"),
    "tls": Load("{n} keep-alive TLS connections (TLS 1.3, ECDSA P-256, the same certificate for "
                "every contender), `GET /`, tiny body", "/", tls=True),
    "tls-handshake": Load("{n} connections sending `Connection: close` over TLS: a full TLS "
                          "handshake (TLS 1.3, ECDSA P-256, no resumption: wrk does not resume) "
                          "per request, tiny body", "/", ("Connection: close",), tls=True),
    "h2c": Load("HTTP/2 with prior knowledge (h2c), {n} connections × {streams} concurrent streams "
                "(h2load), `GET /`, tiny body; the origins are HTTP/1.1", "/", h2=True),
    "h2-tls": Load("HTTP/2 over TLS (ALPN h2, TLS 1.3), {n} connections × {streams} concurrent streams "
                   "(h2load), `GET /`, tiny body; the origins are HTTP/1.1", "/", tls=True, h2=True),
    "grpc": Load("unary gRPC calls over h2c, {n} connections × {streams} concurrent streams (h2load), "
                 "`POST /bench.Echo/Unary` carrying one 12-byte gRPC message (`content-type: "
                 "application/grpc`, `te: trailers`); only 200s count. The servers: three more nginx "
                 "instances on the load side's core serving h2c, each reading a call to its end and "
                 "answering 200, one 12-byte message and the trailer `grpc-status: 0` "
                 "(SETTINGS_MAX_CONCURRENT_STREAMS 128). sluice: an upstream with `protocol = "
                 "\"h2c\"`; nginx: `grpc_pass` (upstream `keepalive`); HAProxy: `proto h2` servers. "
                 "One call through each contender (`nghttp -v`) must bring the message and the "
                 "trailer. Origin conns open: the proxy's connections to the gRPC server it holds "
                 "most to, the higher of two readings in steady state; multiplexed, at most "
                 "⌈{calls} streams / 128⌉ = {grpc_bound}",
                 GRPC_PATH, GRPC_HEADERS, h2=True, grpc=True),
}
H2_STREAMS = 10  # concurrent streams per connection in the HTTP/2 loads
SPECIAL = {
    "idle": "a fresh proxy each round; 100 requests, then {first:,} and {second:,} more keep-alive "
            "client connections, each idle after one request; VmRSS growth per connection, KiB "
            "(2nd step: the figure that counts)",
    "idle-h2": "as `idle`, with HTTP/2 connections (h2c with prior knowledge, one `GET /` stream "
               "each, then idle); VmRSS growth per connection, KiB (2nd step: the figure that counts)",
    "bursts": "a fresh proxy each round; 100 requests, then {bursts} bursts of {burst:,} "
              "connections open at once, each sending a partial head, then completing its "
              "request; VmRSS after each burst once it is steady (two readings 1.1 s apart), and "
              "its growth from burst 1 to burst {bursts}, KiB",
    "startup": "a fresh proxy each round: spawn to first proxied 200 (`GET /`), and VmRSS then",
    "slow-one": "three sluice-origins, the third adding 200 ms to 25 % of its answers (`--slow "
                "25:200`), and the same three all healthy; {slow_requests:,} keep-alive `GET /`s "
                "from 64 and from 4 concurrent clients (Python threads on the load side's core) "
                "through each balancing policy: sluice's `round_robin`, `least_conn`, `p2c`, "
                "`least_time`, nginx `least_conn`, HAProxy `leastconn` and `random`; p99 of "
                "every request's latency",
    "tls-resume": "TLS handshakes per proxy CPU-second, full and resumed: `openssl s_time` (one "
                  "client, sequential connections, TLS 1.3, `GET /` on each so that the session "
                  "ticket arrives) for {duration} s with `-new`, then with `-reuse`, against each "
                  "contender's TLS listener",
    "instr": "user-space instructions per proxied request under `valgrind --tool=callgrind`: "
             "(Ir after {total:,} requests − Ir after {warm:,}) / {count:,}, sequential "
             "keep-alive requests on one client connection",
}
# `instr` with --instr-connections N > 1.
INSTR_WRK = ("user-space instructions per proxied request under `valgrind --tool=callgrind`: "
             "(Ir after {warm:,} sequential requests then wrk with {conns} keep-alive "
             "connections for {duration} s − Ir after the {warm:,} alone) / the requests wrk "
             "made")


def describe(name, settings):
    """The description of scenario `name` for a run with `settings` (the JSON's settings dict)."""
    conns = settings.get("instr_connections", 1)
    if name == "instr" and conns > 1:
        text = INSTR_WRK
    else:
        text = LOADS[name].description if name in LOADS else SPECIAL[name]
    warm, count = settings["instr_warm"], settings["instr_requests"]
    step = settings["idle_connections_per_step"]
    calls = settings["connections"] * H2_STREAMS
    return text.format(n=settings["connections"], streams=H2_STREAMS, first=step, second=step, warm=warm,
                       calls=calls, grpc_bound=math.ceil(calls / GRPC_MAX_STREAMS),
                       bursts=BURSTS, burst=step, slow_requests=SLOW_REQUESTS,
                       count=count, total=warm + count, conns=conns, duration=settings.get("duration", 5))


ALL = list(LOADS) + list(SPECIAL)
BURSTS = 10  # bursts per round of `bursts`, each of idle_steps[0] connections
SLOW_REQUESTS = 5000  # per run of `slow-one`
SLOW_CLIENTS = (64, 4)
SLOW_ORIGIN = "25:200"
# The policies `slow-one` compares, per product: (name in the report, the product's own word).
POLICIES = {
    "sluice": [("round_robin", "round_robin"), ("least_conn", "least_conn"), ("p2c", "p2c"),
               ("least_time", "least_time")],
    "nginx": [("least_conn", "least_conn")],
    "haproxy": [("leastconn", "leastconn"), ("random", "random")],
}


def steady_rss_kib(pid):
    """VmRSS once two readings 1.1 s apart agree: a proxy returning memory from a periodic
    timer (sluice: once a second) has had its chance."""
    return settled_rss_kib(pid, interval=1.1, timeout=6.0)


def cpu_busy_ticks(cpus):
    """(busy, total) clock ticks of the listed CPUs ("0" or "0,1") from /proc/stat."""
    wanted = {f"cpu{c}" for c in cpus.split(",")}
    busy = total = 0
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in wanted:
                ticks = [int(x) for x in fields[1:]]
                total += sum(ticks[:8])  # guest time is counted in user already
                busy += sum(ticks[:8]) - ticks[3] - ticks[4]  # not idle, not iowait
    return busy, total


def rotation(contenders, round_index):
    k = round_index % len(contenders)
    return contenders[k:] + contenders[:k]


class Bench:
    def __init__(self, settings, contenders, origins, log):
        self.s = settings
        self.contenders = contenders
        self.origins = origins
        self.log = log

    def run(self, name):
        if name in LOADS:
            return self._load(name, LOADS[name])
        return getattr(self, f"_{name.replace('-', '_')}")()

    # Load scenarios -------------------------------------------------------------------------

    def _load(self, name, load):
        # The gRPC servers live as long as the scenario, on the load side's core like the origins.
        grpc = (OriginSet("grpc", self.s.bin_dir, Path(self.s.workdir) / "grpc-origins",
                          cpus=self.s.client_cpus.split(",")[0]) if load.grpc else None)
        origins = grpc or self.origins
        started = []
        try:
            for c in self.contenders:
                started.append(c.start(self.s.workdir, self.origins, grpc=grpc))
            running = {r.name: r for r in started}
            if grpc:
                request = Path(self.s.workdir) / "grpc-request.bin"
                request.write_bytes(GRPC_REQUEST)
                for r in started:
                    check_grpc_call(r, request, self.s.client_cpus)
                self.log(f"  {name}: a call through each contender has its answer and grpc-status 0 trailer")
            for r in started:
                if self.s.warmup > 0:  # wrk refuses -d0s
                    self._measure(r, load, self.s.warmup, origins)
            rounds = []
            for i in range(self.s.rounds):
                row = {}
                for c in rotation(self.contenders, i):
                    row[c.name] = self._measure(running[c.name], load, self.s.duration, origins)
                    m = row[c.name]
                    self.log(f"  {name} round {i + 1}/{self.s.rounds} {c.name:10s} "
                             f"{m['rps']:9.0f} req/s  {m['req_per_cpu_s']:9.0f} req/CPU-s  "
                             f"busy {m['proxy_cpu_busy']:.2f}  load side {m['load_cpu_busy']:.2f}  "
                             f"p99 {m['p99_ms']:.2f} ms  "
                             f"origin conns/1k {m['origin_conns_per_1k']:.2f}  errors {m['errors']}"
                             + (f"  origin conns open {m['origin_conns_open_max']} (all {m['origin_conns_open']})"
                                if load.grpc else ""))
                rounds.append(row)
        finally:
            for r in started:
                r.stop()
            if grpc:
                grpc.stop()
        return {"kind": "load", "path": load.path, "headers": list(load.headers), "rounds": rounds}

    def _measure(self, running, load, duration, origins):
        """One wrk run against `running`. The proxy's CPU time is read just before and after
        it. Origin-side connections are counted in a window inside the run (from a quarter of
        it, at most 1 s, to a quarter before its end, at most 0.5 s), against the requests the
        origins served in that window: at the edges of a run wrk opens its connections and cuts
        the requests in flight, which makes every proxy drop and reopen upstream connections,
        and that is not the steady state the figure is about. `origins`: those the load reaches.
        For gRPC, the connections the proxy holds to each gRPC server are read at both ends of
        the window too."""
        (user0, sys0), ocpu0 = running.cpu_split(), origins.cpu_seconds()
        load0 = cpu_busy_ticks(self.s.client_cpus)
        t0 = time.monotonic()
        scheme = "https" if load.tls else "http"
        if load.h2:
            generator = h2load
            child = h2load.start(running.tls_port if load.tls else running.h2c_port, path=load.path,
                                 connections=self.s.connections, streams=H2_STREAMS, duration=duration,
                                 scheme=scheme, headers=load.headers,
                                 data=Path(self.s.workdir) / "grpc-request.bin" if load.grpc else None)
        else:
            generator = wrk
            child = wrk.start(running.tls_port if load.tls else running.port, path=load.path,
                              connections=self.s.connections, duration=duration,
                              headers=load.headers, scheme=scheme)
        held = []
        ports = [int(a.rsplit(":", 1)[1]) for a in origins.addresses]

        def read_held():
            if load.grpc:
                held.append(connections_to(running.cpu_pids or (running.pid,), ports))

        try:
            time.sleep(min(1.0, duration / 4))
            conns0, reqs0 = origins.counters()
            read_held()
            time.sleep(max(0.0, t0 + duration - min(0.5, duration / 4) - time.monotonic()))
            conns1, reqs1 = origins.counters()
            read_held()
        finally:
            w = generator.finish(child)
        wall = time.monotonic() - t0
        load1 = cpu_busy_ticks(self.s.client_cpus)
        (user1, sys1), ocpu = running.cpu_split(), origins.cpu_seconds() - ocpu0
        user, system = user1 - user0, sys1 - sys0
        cpu = user + system
        if not running.child.alive():
            raise RuntimeError(f"{running.name} exited during the run")
        n, window_reqs = w["requests"], reqs1 - reqs0
        entry = {
            "requests": n,
            "seconds": round(w["seconds"], 3),
            "rps": n / w["seconds"],
            "proxy_cpu_s": round(cpu, 3),
            "proxy_cpu_busy": cpu / wall,
            "req_per_cpu_s": n / cpu if cpu > 0 else 0.0,
            # Where the CPU went: user space (the proxy's own code) and the kernel (system calls,
            # and on loopback the TCP receive processing of what it sends, done on its CPU).
            "user_us_per_req": user * 1e6 / n if n else None,
            "sys_us_per_req": system * 1e6 / n if n else None,
            "origin_cpu_busy": ocpu / wall,
            # The load side's core (wrk, the origins, the harness): near 1.00, it is what limits
            # the run, and the latencies include its queueing.
            "load_cpu_busy": (load1[0] - load0[0]) / max(1, load1[1] - load0[1]),
            "p50_ms": w["latency_ms"]["p50"],
            "p99_ms": w["latency_ms"]["p99"],
            "p999_ms": w["latency_ms"]["p999"],
            "origin_conns": conns1 - conns0,
            "origin_requests": window_reqs,
            "origin_conns_per_1k": (conns1 - conns0) * 1000.0 / window_reqs if window_reqs else 0.0,
            "errors": w["errors"],
            "error_kinds": w["error_kinds"],
        }
        if held:
            entry["origin_conns_open_max"] = max(max(h.values()) for h in held)
            entry["origin_conns_open"] = max(sum(h.values()) for h in held)
        return entry

    # Scenarios on a fresh proxy -------------------------------------------------------------

    def _fresh_rounds(self, kind, measure):
        """Each round, each contender (rotated) started anew; measure(c, r, i) gives its entry
        in the round's row while it runs, and it is stopped whatever happens."""
        rounds = []
        for i in range(self.s.rounds):
            row = {}
            for c in rotation(self.contenders, i):
                r = c.start(self.s.workdir, self.origins)
                try:
                    row[c.name] = measure(c, r, i)
                finally:
                    r.stop()
            rounds.append(row)
        return {"kind": kind, "rounds": rounds}

    # Idle connections -----------------------------------------------------------------------

    def _idle(self):
        return self._idle_connections("idle", h2=False)

    def _idle_h2(self):
        return self._idle_connections("idle-h2", h2=True)

    def _idle_connections(self, kind, h2):
        first, second = self.s.idle_steps

        def measure(c, r, i):
            conns = []
            try:
                client.request_loop(r.port, 100)  # upstream pool and code paths warm
                # Readings 1.1 s apart must agree (as in bursts): an idle connection's cost
                # is what stays once the proxy's periodic housekeeping (sluice parks after
                # 100 ms and trims the heap in its once-a-second sweep) has run.
                base = steady_rss_kib(r.pid)
                port = r.h2c_port if h2 else r.port
                conns += client.open_idle(port, first, h2=h2)
                rss1 = steady_rss_kib(r.pid)
                conns += client.open_idle(port, second, h2=h2)
                rss2 = steady_rss_kib(r.pid)
                still = client.still_open(conns)
            finally:
                client.close_all(conns)
            entry = {
                "rss_base_kib": base, "rss_first_kib": rss1, "rss_second_kib": rss2,
                "kib_per_conn": (rss2 - rss1) / second,
                "kib_per_conn_first": (rss1 - base) / first,
                "still_open": still, "opened": first + second,
            }
            self.log(f"  {kind} round {i + 1}/{self.s.rounds} {c.name:10s} "
                     f"base {base} KiB, +{first}: {rss1} KiB, +{second}: {rss2} KiB -> "
                     f"{entry['kib_per_conn']:.2f} KiB/conn ({still} still open)")
            return entry

        return self._fresh_rounds("idle", measure)

    # Bursts of connections with partial heads ---------------------------------------------

    def _bursts(self):
        """Resident memory after each of BURSTS bursts: memory a burst takes must come back
        (to the proxy's pools, then to the system), not pile up burst after burst."""
        count = self.s.idle_steps[0]

        def measure(c, r, i):
            client.request_loop(r.port, 100)
            base = settled_rss_kib(r.pid)
            after = []
            for _ in range(BURSTS):
                client.burst(r.port, count)
                after.append(steady_rss_kib(r.pid))
            self.log(f"  bursts round {i + 1}/{self.s.rounds} {c.name:10s} base {base} KiB, "
                     f"after each burst {after} KiB -> growth {after[-1] - after[0]} KiB")
            return {"rss_base_kib": base, "rss_after_kib": after,
                    "rss_first_kib": after[0], "rss_last_kib": after[-1],
                    "growth_kib": after[-1] - after[0], "peak_kib": max(after)}

        return self._fresh_rounds("bursts", measure)

    # Startup --------------------------------------------------------------------------------

    def _startup(self):
        def measure(c, r, i):
            rss = rss_kib(r.pid)
            self.log(f"  startup round {i + 1}/{self.s.rounds} {c.name:10s} "
                     f"{r.startup_s * 1000:.1f} ms, {rss} KiB")
            return {"startup_ms": r.startup_s * 1000.0, "rss_kib": rss}

        return self._fresh_rounds("startup", measure)

    # One slow origin of three ----------------------------------------------------------------

    def _policy_variants(self):
        """Each contender once per policy of its product, on its CPUs."""
        out = []
        for c in self.contenders:
            for label, word in POLICIES.get(c.product, []):
                name = f"{c.name}-{label}"
                if c.product == "sluice":
                    out.append(Sluice(c.binary.parent, c.cpus, workers=c.workers, name=name, balance=word))
                elif c.product == "nginx":
                    out.append(Nginx(c.cpus, c.keepalive, workers=c.workers, name=name, balance=word))
                else:
                    out.append(Haproxy(c.cpus, threads=c.threads, name=name, balance=word))
        return out

    def _slow_one(self):
        """Per client count and fleet (healthy, one slow), rounds rotating the policy variants,
        each started anew on that fleet: p50, p99 and the share of answers from the slow origin."""
        variants = self._policy_variants()
        rounds = []
        for i in range(self.s.rounds):
            row = {}
            for fleet, slow in (("healthy", None), ("slow", SLOW_ORIGIN)):
                og = OriginSet("sluice-origin", self.s.bin_dir, Path(self.s.workdir) / f"slow-{i}-{fleet}",
                               cpus=self.s.client_cpus.split(",")[0], slow=slow)
                try:
                    for clients in SLOW_CLIENTS:
                        for v in rotation(variants, i):
                            row[f"{v.name}|{fleet}|{clients}"] = self._latency(v, og, fleet, clients, i)
                finally:
                    og.stop()
            rounds.append(row)
        return {"kind": "latency", "rounds": rounds, "variants": [v.name for v in variants],
                "products": {v.name: v.product for v in variants}, "clients": list(SLOW_CLIENTS)}

    def _latency(self, variant, og, fleet, clients, i):
        r = variant.start(self.s.workdir, og)
        try:
            lat, bodies, errors = client.latency_run(r.port, SLOW_REQUESTS, clients)
        finally:
            r.stop()
        lat.sort()
        entry = {"p50_ms": lat[len(lat) // 2] * 1e3 if lat else None,
                 "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1e3 if lat else None,
                 "requests": len(lat), "errors": len(errors), "error_kinds": errors[:3],
                 "slow_share": bodies.get("app-3", 0) / max(1, len(lat))}
        self.log(f"  slow-one round {i + 1}/{self.s.rounds} {variant.name:22s} {fleet:7s} "
                 f"{clients:2d} clients: p50 {entry['p50_ms'] or 0:.1f} ms, p99 {entry['p99_ms'] or 0:.1f} ms, "
                 f"app-3 {entry['slow_share']:.1%}, errors {len(errors)}")
        return entry

    # Full and resumed TLS handshakes ----------------------------------------------------------

    def _tls_resume(self):
        """Per round, each contender (rotated, started once for the scenario): s_time -new and
        -reuse for `duration` seconds each; handshakes per proxy CPU-second for both."""
        started = [c.start(self.s.workdir, self.origins) for c in self.contenders]
        running = {r.name: r for r in started}
        try:
            rounds = []
            for i in range(self.s.rounds):
                row = {}
                for c in rotation(self.contenders, i):
                    r = running[c.name]
                    entry = {}
                    for mode in ("new", "reuse"):
                        n, cpu = self._s_time(r, mode)
                        entry[f"{mode}_per_cpu_s"] = n / cpu if cpu > 0 else 0.0
                        entry[f"{mode}_connections"] = n
                    entry["reuse_vs_new"] = (entry["reuse_per_cpu_s"] / entry["new_per_cpu_s"]
                                             if entry["new_per_cpu_s"] else None)
                    self.log(f"  tls-resume round {i + 1}/{self.s.rounds} {c.name:10s} "
                             f"full {entry['new_per_cpu_s']:8.0f}/CPU-s ({entry['new_connections']}), "
                             f"resumed {entry['reuse_per_cpu_s']:8.0f}/CPU-s ({entry['reuse_connections']})")
                    row[c.name] = entry
                rounds.append(row)
        finally:
            for r in started:
                r.stop()
        return {"kind": "tls-resume", "rounds": rounds}

    def _s_time(self, running, mode):
        """(connections made, the proxy's CPU seconds meanwhile) of one `openssl s_time` run."""
        cpu0 = running.cpu_seconds()
        done = subprocess.run(["taskset", "-c", self.s.client_cpus, "openssl", "s_time", "-connect",
                               f"127.0.0.1:{running.tls_port}", f"-{mode}", "-tls1_3", "-www", "/",
                               "-time", str(self.s.duration)],
                              capture_output=True, text=True, timeout=self.s.duration + 60)
        cpu = running.cpu_seconds() - cpu0
        found = re.findall(r"(\d+) connections in [\d.]+s", done.stdout)
        if done.returncode != 0 or not found:
            raise RuntimeError(f"s_time -{mode} against {running.name}: {done.stdout[-300:]} {done.stderr[-300:]}")
        return int(found[-1]), cpu

    # Instructions per request ---------------------------------------------------------------

    def _instr(self):
        """Two callgrind runs per contender: `instr_warm` sequential requests, then the same plus
        the measured load (`instr_requests` more sequential requests on one connection, or with
        instr_connections > 1, wrk with that many connections for `duration` seconds). The
        difference, divided by the measured requests, is the steady-state cost of a request; the
        per-function difference of the two profiles says where it goes (profile.py)."""
        warm, n, conns = self.s.instr_warm, self.s.instr_requests, self.s.instr_connections
        row = {}
        for c in self.contenders:
            files, totals, measured = {}, {}, None
            for step in ("base", "more"):
                out = Path(self.s.workdir) / f"callgrind-{c.name}-{step}.out"
                wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        "--dump-instr=no", "--dump-line=no",
                        *os.environ.get("SLUICE_CALLGRIND_ARGS", "").split()]
                t0 = time.monotonic()
                r = c.start(self.s.workdir, self.origins, wrap=wrap, timeout=120.0)
                try:
                    client.request_loop(r.port, warm)
                    if step == "more" and conns <= 1:
                        client.request_loop(r.port, n)
                        measured = n
                    elif step == "more":
                        w = wrk.run(r.port, path="/", connections=conns, duration=self.s.duration)
                        if w["errors"]:
                            raise RuntimeError(f"{c.name} under callgrind: wrk errors {w['error_kinds']}")
                        measured = w["requests"]
                finally:
                    status = r.stop(timeout=120.0)
                files[step], totals[step] = out, callgrind_total(out)
                self.log(f"  instr {c.name:10s} {step}: {totals[step]:,} Ir "
                         f"({time.monotonic() - t0:.1f} s, exit {status})")
            row[c.name] = {"ir_total_warm": totals["base"], "ir_total": totals["more"],
                           "requests": measured, "connections": max(1, conns),
                           "ir_per_request": (totals["more"] - totals["base"]) / measured,
                           "profile": profile.difference(files["base"], files["more"], measured,
                                                         top=25 if c.product == "sluice" else 12)}
        return {"kind": "instr", "rounds": [row]}


def check_grpc_call(running, request, cpus):
    """One gRPC call through `running`'s h2c listener (nghttp, verbose): the answer must be 200,
    `application/grpc`, carry the server's message, and end with `grpc-status: 0` in trailing
    HEADERS (after the DATA, with END_STREAM). h2load counts a 200 as a success whatever follows
    it, so a contender that dropped or mangled trailers would pass the load unnoticed."""
    done = subprocess.run(["taskset", "-c", cpus, "nghttp", "-v", f"--data={request}",
                           *(a for h in GRPC_HEADERS for a in ("-H", h)),
                           f"http://127.0.0.1:{running.h2c_port}{GRPC_PATH}"],
                          capture_output=True, timeout=30)
    out = done.stdout
    lines = out.decode("latin-1").splitlines()
    problems = []
    if done.returncode != 0:
        problems.append(f"nghttp exit {done.returncode}")
    if not any(re.search(r"recv \(stream_id=\d+\) :status: 200$", l) for l in lines):
        problems.append("no :status 200")
    if not any(re.search(r"recv \(stream_id=\d+\) content-type: application/grpc$", l) for l in lines):
        problems.append("no content-type application/grpc")
    if GRPC_REPLY not in out:
        problems.append("not the server's message")
    if any("recv RST_STREAM" in l for l in lines):
        problems.append("stream reset")
    # nghttp prints a HEADERS frame's fields, then the frame: the trailer's field comes after the
    # last DATA frame, and the next HEADERS frame after it must end the stream.
    data = [i for i, l in enumerate(lines) if "recv DATA frame" in l]
    status = [i for i, l in enumerate(lines)
              if re.search(r"recv \(stream_id=\d+\) grpc-status: 0$", l) and data and i > data[-1]]
    ending = [i for i, l in enumerate(lines)
              if status and i > status[0] and (m := re.search(r"recv HEADERS frame <.*flags=0x([0-9a-f]+)", l))
              and int(m.group(1), 16) & 0x1]
    if not (data and status and ending):
        problems.append("no trailing HEADERS with grpc-status: 0 and END_STREAM after the message")
    if problems:
        tail = out.decode("latin-1")[-1500:]
        raise RuntimeError(f"{running.name} fails the gRPC call check ({'; '.join(problems)}); "
                           f"nghttp -v said:\n{tail}\n{done.stderr.decode(errors='replace')[-300:]}")


def callgrind_total(path):
    """The total instruction count (Ir) of a callgrind output file."""
    totals = None
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                totals = int(line.split()[1])
                if line.startswith("totals:"):
                    break
    if totals is None:
        raise RuntimeError(f"no totals in {path}")
    return totals
