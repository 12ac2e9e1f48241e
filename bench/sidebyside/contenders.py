"""The proxies under test, configured equivalently: one worker/thread, no access log, round robin
(or the policy a contender is made with: `balance`, each in its own words) over the same three
origins, keep-alive upstream connections, a plain and a TLS listener (the
same throw-away ECDSA certificate for all, TLS 1.2-1.3, their default ciphers and session
tickets); each start gets a fresh directory, fresh free ports, and is pinned to its CPUs.
Started for the grpc scenario, each also sends the gRPC path (GRPC_PREFIX) to an upstream of
three h2c gRPC servers, balanced as the other one. Templates: bench/conf/.
"""
import itertools
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import client
from .conf import render
from .processes import Child, cpu_seconds, cpu_split, descendant_pids, free_port

_start_ids = itertools.count(1)

# The grpc scenario's calls are `/bench.Echo/Unary`; every contender routes this prefix to the
# gRPC servers and everything else to the HTTP/1.1 origins as in the other scenarios.
GRPC_PREFIX = "/bench.Echo/"
# nginx's grpc_pass carries one call per upstream connection (no multiplexing), so its idle cache
# must hold as many as there are calls in flight (640 with the default 64 connections × 10
# streams): with fewer, every call beyond it would close its connection and the next would open one.
NGINX_GRPC_KEEPALIVE = 4096


@dataclass
class Running:
    """A started contender. `pid` is the process whose CPU time and RSS are measured: the proxy
    itself, or for nginx with a master process, its single worker."""
    name: str
    child: Child
    port: int
    pid: int
    startup_s: float
    cpu_pids: tuple = ()  # whose CPU time counts (nginx with two workers: both); default (pid,)
    tls_port: int = 0
    h2c_port: int = 0  # HTTP/2 with prior knowledge (nginx and HAProxy serve only that on it)

    def cpu_seconds(self):
        return sum(cpu_seconds(p) for p in (self.cpu_pids or (self.pid,)))

    def cpu_split(self):
        """(user, system) CPU seconds of the pids that count."""
        splits = [cpu_split(p) for p in (self.cpu_pids or (self.pid,))]
        return sum(u for u, _ in splits), sum(s for _, s in splits)

    def stop(self, timeout=30.0):
        return self.child.stop(timeout=timeout)


class Contender:
    name = "?"      # as reported (sluice-w2 and sluice-w1 are two contenders)
    product = "?"   # the program, for its version

    def __init__(self, cpus):
        self.cpus = cpus

    # Where the TLS certificate is (set once per run by the harness: make_certificates()).
    certs = None

    def prepare(self, directory, port, origins, under_valgrind, tls_port, h2c_port, grpc):
        """Writes the config into `directory`; returns the argv that serves it on `port` (plain),
        `tls_port` (TLS, ALPN h2 and http/1.1) and `h2c_port` (h2c with prior knowledge). `grpc`:
        None, or the gRPC servers (an OriginSet) that GRPC_PREFIX goes to."""
        raise NotImplementedError

    def measured_pid(self, child, under_valgrind):
        return child.pid

    def cpu_pids(self, child, under_valgrind):
        """The processes whose CPU time is the contender's (default: the measured one)."""
        return (self.measured_pid(child, under_valgrind),)

    def version(self):
        raise NotImplementedError

    def start(self, workdir, origins, *, wrap=(), timeout=10.0, grpc=None):
        """Starts the contender (under the `wrap` command, e.g. valgrind, if given) and waits for
        its first 200; startup_s is the time from spawning to that answer. `grpc`: see prepare."""
        directory = Path(workdir) / f"{self.name}-{next(_start_ids)}"
        directory.mkdir(parents=True)
        ports = set()
        while len(ports) < 3:
            ports.add(free_port())
        port, tls_port, h2c_port = sorted(ports)
        argv = self.prepare(directory, port, origins, under_valgrind=bool(wrap), tls_port=tls_port,
                            h2c_port=h2c_port, grpc=grpc)
        started = time.monotonic()
        child = Child([*wrap, *argv], name=self.name, cpus=self.cpus,
                      log_path=directory / "output.log")
        try:
            startup = client.wait_first_ok(port, started, timeout, alive=child.alive)
            pid = self.measured_pid(child, under_valgrind=bool(wrap))
            cpu_pids = tuple(self.cpu_pids(child, under_valgrind=bool(wrap)))
        except BaseException:
            child.stop()
            raise
        return Running(self.name, child, port, pid, startup, cpu_pids, tls_port, h2c_port)


class Sluice(Contender):
    product = "sluice"

    def __init__(self, bin_dir, cpus, workers=1, name="sluice", balance="round_robin"):
        super().__init__(cpus)
        self.binary = Path(bin_dir) / "sluice"
        self.workers = workers
        self.name = name
        self.balance = balance

    def prepare(self, directory, port, origins, under_valgrind, tls_port, h2c_port, grpc):
        servers = "\n".join(
            f'[[upstreams.app.servers]]\naddress = "{a}"\nname = "app-{i}"\n'
            for i, a in enumerate(origins.addresses, 1))
        conf = render("sluice.toml.in", directory / "sluice.toml", port=port,
                      workers=self.workers, servers=servers, tls_port=tls_port, h2c_port=h2c_port,
                      balance=self.balance, grpc=self._grpc(grpc),
                      cert=self.certs / "cert.pem", key=self.certs / "key.pem")
        return [str(self.binary), "run", "--config", str(conf)]

    def _grpc(self, grpc):
        if grpc is None:
            return ""
        servers = "\n".join(
            f'[[upstreams.grpc.servers]]\naddress = "{a}"\nname = "grpc-{i}"\n'
            for i, a in enumerate(grpc.addresses, 1))
        # Two upstreams need routes: "/" keeps the other traffic where it went without them.
        return (f'[upstreams.grpc]\nprotocol = "h2c"\nbalance = "{self.balance}"\n\n{servers}\n'
                f'[[route]]\npath_prefix = "/"\nupstream = "app"\n\n'
                f'[[route]]\npath_prefix = "{GRPC_PREFIX}"\nupstream = "grpc"\n')

    def version(self):
        return _first_line([str(self.binary), "--version"]).replace("sluice ", "")


class Nginx(Contender):
    product = "nginx"
    defer_accept = False  # --others-defer-accept: `listen ... deferred`

    def __init__(self, cpus, keepalive=96, workers=1, name="nginx", balance=""):
        super().__init__(cpus)
        self.keepalive = keepalive
        self.workers = workers
        self.name = name
        self.balance = balance  # "" (round robin) or an upstream directive such as "least_conn"

    def prepare(self, directory, port, origins, under_valgrind, tls_port, h2c_port, grpc):
        o1, o2, o3 = origins.addresses
        # Under valgrind nginx runs as one process (master_process off): the same worker code,
        # with no fork for valgrind to follow.
        conf = render("nginx.conf.in", directory / "nginx.conf", dir=directory, port=port,
                      origin1=o1, origin2=o2, origin3=o3, keepalive=self.keepalive,
                      balance=f"{self.balance};" if self.balance else "",
                      workers=1 if under_valgrind else self.workers,
                      master_process="off" if under_valgrind else "on", tls_port=tls_port, h2c_port=h2c_port,
                      cert=self.certs / "cert.pem", key=self.certs / "key.pem",
                      defer=" deferred" if self.defer_accept else "",
                      grpc_upstream=self._grpc_upstream(grpc),
                      grpc_location=(f"        location {GRPC_PREFIX} {{\n            grpc_pass grpc://grpc;\n"
                                     f"        }}" if grpc else ""))
        return ["nginx", "-p", str(directory), "-e", str(directory / "error.log"), "-c", str(conf)]

    def _grpc_upstream(self, grpc):
        if grpc is None:
            return ""
        servers = "".join(f"        server {a};\n" for a in grpc.addresses)
        balance = f"        {self.balance};\n" if self.balance else ""
        return (f"    upstream grpc {{\n{balance}{servers}"
                f"        keepalive {NGINX_GRPC_KEEPALIVE};\n"
                f"        keepalive_requests 1000000;\n"
                f"        keepalive_timeout 60s;\n    }}")

    def measured_pid(self, child, under_valgrind):
        return self.cpu_pids(child, under_valgrind)[0]

    def cpu_pids(self, child, under_valgrind):
        if under_valgrind:
            return [child.pid]
        # The workers are forked right after the master starts; a first 200 means at least one
        # is serving, so wait briefly for all of them.
        deadline = time.monotonic() + 5.0
        while True:
            workers = descendant_pids(child.pid)
            if len(workers) == self.workers or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if len(workers) != self.workers:
            raise RuntimeError(f"nginx: expected {self.workers} worker process(es), found {workers}")
        return workers

    def version(self):
        return _first_line(["nginx", "-v"]).replace("nginx version: nginx/", "")


class Haproxy(Contender):
    product = "haproxy"
    defer_accept = False  # --others-defer-accept: `bind ... defer-accept`

    def __init__(self, cpus, threads=1, name="haproxy", balance="roundrobin"):
        super().__init__(cpus)
        self.threads = threads
        self.name = name
        self.balance = balance

    def prepare(self, directory, port, origins, under_valgrind, tls_port, h2c_port, grpc):
        o1, o2, o3 = origins.addresses
        # HAProxy reads the certificate and its key from one file.
        pem = directory / "cert+key.pem"
        pem.write_bytes((self.certs / "cert.pem").read_bytes() + (self.certs / "key.pem").read_bytes())
        conf = render("haproxy.cfg.in", directory / "haproxy.cfg", port=port,
                      origin1=o1, origin2=o2, origin3=o3, threads=self.threads, balance=self.balance,
                      tls_port=tls_port, h2c_port=h2c_port, pem=pem,
                      defer=" defer-accept" if self.defer_accept else "",
                      grpc_use_backend=(f"    use_backend grpc if {{ path_beg {GRPC_PREFIX} }}"
                                        if grpc else ""),
                      grpc_backend=self._grpc_backend(grpc))
        return ["haproxy", "-db", "-f", str(conf)]

    def _grpc_backend(self, grpc):
        if grpc is None:
            return ""
        servers = "".join(f"    server grpc-{i} {a} proto h2\n" for i, a in enumerate(grpc.addresses, 1))
        return f"\nbackend grpc\n    balance {self.balance}\n{servers}"

    def version(self):
        return _first_line(["haproxy", "-v"]).replace("HAProxy version ", "").split()[0]


def _first_line(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    return ((done.stdout or "") + (done.stderr or "")).strip().splitlines()[0]


def make_certificates(root, directory):
    """A throw-away CA and certificate (scripts/make-test-certs.sh) that every contender serves."""
    subprocess.run([str(root / "scripts" / "make-test-certs.sh"), str(directory)], check=True,
                    capture_output=True, timeout=60)
    Contender.certs = Path(directory)
