"""Binary upgrade (`sluice upgrade`, SIGUSR2): a new process takes over the listening sockets and
the old one drains, under load, without refusing a connection or failing a request; a new binary
that does not come up leaves the old one serving."""
import os
import re
import signal
import socket
import subprocess
import threading
import time

from conftest import SANITIZED, SLUICE, Conn, closed_port, gone, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def cli(*args, timeout=60):
    return subprocess.run([str(SLUICE), *args], capture_output=True, text=True, timeout=timeout)


class CountingConn(Conn):
    """A Conn that counts every byte it has received, parsed or not."""

    def __init__(self, port, timeout=5.0):
        super().__init__(port, timeout)
        self.received = 0

    def _fill(self, deadline):
        before = len(self.buf)
        try:
            super()._fill(deadline)
        finally:
            self.received += len(self.buf) - before


class Load:
    """Bounded load on one port until stopped: keep-alive clients, one-connection-per-request
    clients and slow requests (1.5 s at the origin) that are in flight across upgrades. Every
    request is answered; every outcome is counted."""

    KEEP_ALIVE_CLIENTS = 2
    MAX_REQUESTS = 1_000_000  # per client: a bound that max_seconds reaches first

    def __init__(self, port, max_seconds):
        self.port, self.until = port, time.monotonic() + max_seconds
        self.stopping = threading.Event()
        self.ended = []  # clients that ended (out of bounds, stopped, or failed)
        self.lock = threading.Lock()
        self.ok = self.failed = self.refused = self.slow_ok = self.slow_in_flight = 0
        self.resends = []  # (client, time): a request sent again after an idle close
        self.errors = []
        self.threads = [threading.Thread(target=self.guarded, args=(f, i), daemon=True)
                        for i, f in enumerate([self.keep_alive] * self.KEEP_ALIVE_CLIENTS
                                              + [self.fresh] * 2 + [self.slow] * 2)]

    def guarded(self, client, i):
        """A client; whatever ends it early is a failure, with its reason."""
        try:
            client(i)
        except BaseException as e:
            self.count("failed", f"client {i} ended: {e!r}")
            raise
        finally:
            self.ended.append(i)

    def state(self):
        with self.lock:
            return (f"{self.ok} ok, {self.slow_ok} slow, {self.failed} failed, {self.refused} "
                    f"refused, resends {self.resends}, errors {self.errors}, ended {self.ended}")

    def running(self):
        """Every client still sending (none ran out of its bounds)."""
        return not self.stopping.is_set() and time.monotonic() < self.until and not self.ended

    def count(self, field, error=None, by=1):
        with self.lock:
            setattr(self, field, getattr(self, field) + by)
            if error is not None and len(self.errors) < 20:
                self.errors.append(error)

    def answered(self):
        with self.lock:
            return self.ok + self.slow_ok

    def request(self, conn, target="/"):
        r = conn.request(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), timeout=10)
        return r.status, (r.header("connection") or "").lower() == "close"

    def keep_alive(self, client):
        """Requests back to back on one connection. RFC 9112 §9.3.1: a client may send a request
        again on a new connection only if the server closed an idle keep-alive connection before
        any byte of the response (the old process closes its idle connections when it drains):
        that resend is counted; the request must still be answered. Any other error (a reset
        with part of a response read, a timeout, a refused or new connection closed) fails."""
        conn = None
        for _ in range(self.MAX_REQUESTS):
            if not self.running():
                break
            used = conn is not None
            seen = conn.received if used else 0
            try:
                if conn is None:
                    conn = CountingConn(self.port)
                status, close = self.request(conn)
            except ConnectionRefusedError as e:
                self.count("refused", repr(e))
                conn = None
                continue
            except (ConnectionResetError, BrokenPipeError, EOFError) as e:
                nothing_read = conn is not None and conn.received == seen
                if conn is not None:
                    conn.close()
                conn = None
                if used and nothing_read:
                    with self.lock:
                        self.resends.append((client, time.monotonic()))
                    try:  # the same request, once, on a new connection: it must be answered
                        conn = CountingConn(self.port)
                        status, close = self.request(conn)
                    except (OSError, EOFError) as e2:
                        self.count("failed", f"resend: {e2!r}")
                        conn = None
                        continue
                else:
                    self.count("failed", repr(e))
                    continue
            except (OSError, EOFError) as e:  # a timeout, anything else: a request not answered
                self.count("failed", repr(e))
                if conn is not None:
                    conn.close()
                conn = None
                continue
            self.count("ok" if status == 200 else "failed", None if status == 200 else status)
            if close:
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def one_request(self, target, ok_field, timeout):
        """One request on a new connection, counted."""
        try:
            with Conn(self.port, timeout=timeout) as conn:
                status, _ = self.request(conn, target)
            self.count(ok_field if status == 200 else "failed", None if status == 200 else status)
        except ConnectionRefusedError as e:
            self.count("refused", repr(e))
        except (OSError, EOFError) as e:
            self.count("failed", repr(e))

    def fresh(self, _):
        for _ in range(self.MAX_REQUESTS):
            if not self.running():
                break
            self.one_request("/", "ok", 5)

    def slow(self, _):
        for _ in range(100):
            if not self.running():
                break
            self.count("slow_in_flight")
            self.one_request("/?delay=1500", "slow_ok", 10)
            self.count("slow_in_flight", by=-1)

    def __enter__(self):
        self.started = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        self.elapsed = time.monotonic() - self.started


def test_five_upgrades_under_load_refuse_nothing_and_fail_nothing(sluice, origins):
    s = sluice(sluice_config(origins(2), workers=2, top=ADMIN))
    pids = [s.proc.pid]
    with Load(s.port, max_seconds=60) as load:
        for i in range(5):
            # Load on the current process, a slow request in flight on it, before the next
            # upgrade: awaited, not paced.
            answered = load.answered()
            wait_until(lambda: load.answered() >= answered + 50 or not load.running(),
                       timeout=20, what="50 requests answered before the upgrade")
            wait_until(lambda: load.slow_in_flight > 0 or not load.running(), timeout=20,
                       what="a slow request in flight")
            assert load.running(), f"load ended before upgrade {i + 1}: {load.state()}"
            r = cli("upgrade", "--admin", s.admin_address)
            assert r.returncode == 0, r.stdout + r.stderr
            pid = int(re.search(r"upgraded: pid (\d+)", r.stdout).group(1))
            # The old process drains its in-flight (slow) requests and exits.
            wait_until(lambda: gone(pids[-1]), timeout=20, what=f"old pid {pids[-1]} to exit")
            assert not gone(pid)
            pids.append(pid)
        # The load went on through the fifth upgrade and is served by the last process.
        answered = load.answered()
        wait_until(lambda: load.answered() >= answered + 50 or not load.running(), timeout=20,
                   what="50 requests answered after the fifth upgrade")
        assert load.running(), f"load ended before the fifth upgrade was over: {load.state()}"
    try:
        assert load.refused == 0, load.errors
        assert load.failed == 0, load.errors
        assert load.slow_ok >= 5
        # A resend only where an old process closed an idle connection: at most once per
        # keep-alive client per upgrade.
        per_client = [sum(1 for c, _ in load.resends if c == k)
                      for k in range(Load.KEEP_ALIVE_CLIENTS)]
        assert max(per_client) <= 5, load.resends
        rate = (load.ok + load.slow_ok) / load.elapsed
        if not SANITIZED:  # the rate is a check that the load was real, not a promise
            assert rate >= 200, f"{rate:.0f} req/s"
        # The first process exited 0 after draining.
        assert s.proc.wait(timeout=5) == 0
        print(f"{load.ok + load.slow_ok} requests ({rate:.0f}/s), {load.slow_ok} slow, "
              f"{len(load.resends)} keep-alive resends, 5 upgrades")
    finally:
        os.kill(pids[-1], signal.SIGTERM)
        wait_until(lambda: gone(pids[-1]), timeout=20, what="last sluice to stop")


def test_upgrade_to_a_binary_that_exits_keeps_the_old_process_serving(sluice, origins, tmp_path):
    s = sluice(sluice_config(origins(1), top=ADMIN))
    bad = tmp_path / "sluice-broken"
    bad.write_text("#!/bin/sh\nexit 3\n")
    bad.chmod(0o755)
    r = cli("upgrade", "--binary", str(bad), "--admin", s.admin_address)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "exited with status 3" in r.stderr, r.stderr
    assert s.proc.poll() is None
    with Conn(s.port) as conn:
        assert conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
    s.log.wait_for(r"upgrade to .* failed: the new process exited with status 3")


def test_upgrade_with_a_bad_config_keeps_the_old_process_serving(sluice, origins):
    s = sluice(sluice_config(origins(1), top=ADMIN))
    good = s.config_path.read_text()
    s.config_path.write_text(good + "\n[server.nonsense]\n")
    r = cli("upgrade", "--admin", s.admin_address)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "exited with status 1" in r.stderr
    with Conn(s.port) as conn:
        assert conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
    assert s.proc.poll() is None


def test_sigusr2_upgrades_to_the_same_binary(sluice, origins):
    s = sluice(sluice_config(origins(1), top=ADMIN))
    s.proc.send_signal(signal.SIGUSR2)
    line = s.log.wait_for(r"upgrade: pid (\d+) accepts")
    pid = int(re.search(r"pid (\d+)", line).group(1))
    try:
        assert s.proc.wait(timeout=20) == 0
        with Conn(s.port) as conn:
            assert conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
        assert s.admin("GET", "/readyz").status == 200  # the admin socket came along
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")


def test_upgrade_after_a_reload_hands_over_the_listeners_and_admin_api_that_run(sluice, origins):
    """The sockets passed are those the reloads left open: an added listener and a moved admin
    API come along (adopted, not bound again), a removed listener does not."""
    a, = origins(1)
    s = sluice(sluice_config([a], workers=2, top=ADMIN))
    extra, admin_port = closed_port(), closed_port()
    s.config_path.write_text(
        sluice_config([a], workers=2, top=toml_table("admin", listen=f"127.0.0.1:{admin_port}"))
        .replace('listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:{extra}"]'))
    r = s.admin("POST", "/api/reload")
    assert (r.status, r.json()) == (200, {"ok": True, "version": 2, "watch_ms": 30000}), r
    s.log.wait_for(rf"stopped listening on 127\.0\.0\.1:{s.port}$")
    s.admin_port = admin_port

    r = cli("upgrade", "--admin", s.admin_address)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(re.search(r"upgraded: pid (\d+)", r.stdout).group(1))
    try:
        assert s.proc.wait(timeout=20) == 0
        s.log.wait_for(rf"listening on 127\.0\.0\.1:{extra} \(inherited socket\)$")
        s.log.wait_for(rf"admin listening on 127\.0\.0\.1:{admin_port}")
        assert not [l for l in s.log.poll() if "matches no listen address" in l], s.log.lines
        with Conn(extra) as conn:
            assert conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
        assert s.admin("GET", "/readyz").status == 200
        with socket.socket() as c:
            assert c.connect_ex(("127.0.0.1", s.port)) != 0  # removed by the reload: not passed
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")


def test_sigusr2_to_every_process_of_the_service_upgrades_once(sluice, origins):
    """`systemctl kill -s USR2` signals every process of the unit, the new one of the upgrade
    under way too. That one is still starting (its first probes are slow): it refuses, so the
    old process hands over to it, and it is the only new process."""
    o = origins(1)[0]
    health = toml_table("upstreams.app.health", path="/?delay=1500", interval="5s", timeout="3s")
    s = sluice(sluice_config([o], top=ADMIN, upstream_extra=health))
    s.log.wait_for(r"ready \(")  # after its own first probe
    s.proc.send_signal(signal.SIGUSR2)
    def new_pid():
        pids = [int(p) for p in re.findall(r"started: pid (\d+)", "\n".join(s.log.poll()))]
        return next((p for p in pids if p != s.proc.pid), None)
    wait_until(lambda: new_pid() is not None, timeout=20, what="the new process to start")
    new = new_pid()
    try:
        os.kill(new, signal.SIGUSR2)  # while its first probe waits for the slow origin
        s.log.wait_for(r"upgrade refused: this process is still starting")
        line = s.log.wait_for(r"upgrade: pid (\d+) accepts")
        assert int(re.search(r"pid (\d+)", line).group(1)) == new
        assert s.proc.wait(timeout=20) == 0
        with Conn(s.port) as conn:
            assert conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
        children = open(f"/proc/{new}/task/{new}/children").read().split()
        assert children == [], f"the new process started another: {children}"
        assert len(re.findall(r"upgrade: pid \d+ accepts", "\n".join(s.log.poll()))) == 1
    finally:
        os.kill(new, signal.SIGTERM)
        wait_until(lambda: gone(new), timeout=20, what="new sluice to stop")
