"""sluice under a service manager: sd_notify readiness, reload and stop notifications, watchdog
pings, and socket activation (LISTEN_FDS), as systemd drives them (Type=notify)."""
import os
import re
import signal
import socket
import struct
import tempfile
import time

import pytest

from conftest import Conn, sluice_config, timed_request, wait_until


SO_TIMESTAMPNS = 35  # linux/asm-generic/socket.h (not exported by Python's socket module)


class NotifySocket:
    """systemd's end of sd_notify(3): a datagram socket whose path goes in NOTIFY_SOCKET."""

    def __init__(self):
        # AF_UNIX paths are short (108 bytes): a directory of its own under /tmp.
        self.dir = tempfile.mkdtemp(prefix="sluice-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        # The kernel stamps each datagram as it is queued (SO_TIMESTAMPNS, linux/socket.h):
        # the time sluice sent it, not the time this test got round to reading it.
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.received = []  # (time sent, CLOCK_REALTIME seconds; {key: value})

    def env(self, **extra):
        return {"NOTIFY_SOCKET": self.path, **extra}

    def next(self, timeout=10.0):
        """The next message as a dict, or AssertionError after `timeout`."""
        self.sock.settimeout(timeout)
        try:
            data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16))
        except socket.timeout:
            raise AssertionError(f"no sd_notify message within {timeout}s; had {self.received}")
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        stamps = [struct.unpack("qq", d[:16]) for level, kind, d in ancillary
                  if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS]
        assert stamps, ancillary
        self.received.append((stamps[0][0] + stamps[0][1] / 1e9, fields))
        return fields

    def wait_for(self, key, timeout=10.0):
        """Messages up to and including the first that has `key`; the ones before it skipped
        unless they are watchdog pings (returned in order)."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            m = self.next(max(0.01, deadline - time.monotonic()))
            seen.append(m)
            if key in m:
                return seen

    def close(self):
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


@pytest.fixture
def notify():
    n = NotifySocket()
    yield n
    n.close()


def health_config(origins, interval="200ms"):
    return sluice_config(origins, upstream_extra=f"""
[upstreams.app.health]
path = "/health"
interval = "{interval}"
timeout = "100ms"
""")


def test_ready_after_listeners_answer_and_first_probes(sluice, origins, notify):
    os_ = origins(2)
    s = sluice(health_config(os_), env=notify.env())
    first = notify.wait_for("READY")[-1]
    assert first["READY"] == "1"
    assert re.fullmatch(r"config version 1, 2/2 servers up", first["STATUS"]), first
    # Ready means serving: the listener answers at once.
    r, _ = timed_request(s.port, "GET", "/")
    assert r.status == 200
    # And every server had its first probe before READY (logged in that order).
    assert s.log.wait_for(r"ready \(first health probes done\)")
    for o in os_:
        assert o.stats()["health_requests"] >= 1, o.stats()


def test_ready_at_health_ready_timeout_when_probes_never_finish(sluice, origins, notify):
    os_ = origins(1)
    # The first probe may start at once (its offset is random within the interval), so it is made
    # to never finish in time: the origin holds /health for 60 s, the probe waits 30 s for it.
    text = health_config(os_, interval="60s").replace(
        "workers = 1", 'workers = 1\nhealth_ready_timeout = "300ms"').replace(
        'path = "/health"', 'path = "/health?delay=60000"').replace('timeout = "100ms"', 'timeout = "30s"')
    s = sluice(text, env=notify.env())
    assert notify.wait_for("READY")[-1]["READY"] == "1"
    assert s.log.wait_for(r"ready \(health_ready_timeout passed")


def test_reloading_then_ready_around_sighup(sluice, origins, notify):
    s = sluice(sluice_config(origins(1)), env=notify.env())
    notify.wait_for("READY")
    s.proc.send_signal(signal.SIGHUP)
    reloading = notify.wait_for("RELOADING")[-1]
    assert reloading["RELOADING"] == "1"
    # MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds, the clock Python's monotonic() reads.
    assert abs(int(reloading["MONOTONIC_USEC"]) / 1e6 - time.monotonic()) < 5
    ready = notify.wait_for("READY")[-1]
    assert ready["STATUS"].startswith("config version 2,"), ready


def test_stopping_at_sigterm(sluice, origins, notify):
    s = sluice(sluice_config(origins(1)), env=notify.env())
    notify.wait_for("READY")
    s.proc.send_signal(signal.SIGTERM)
    assert notify.wait_for("STOPPING")[-1]["STOPPING"] == "1"
    assert s.proc.wait(timeout=10) == 0


def test_watchdog_pings_within_the_requested_period(sluice, origins, notify):
    period = 0.4  # WATCHDOG_USEC: systemd restarts the service if no ping comes within it
    sluice(sluice_config(origins(1)), env=notify.env(WATCHDOG_USEC=str(int(period * 1e6))))
    pings = []
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        m = notify.next()
        if "WATCHDOG" in m:
            pings.append(notify.received[-1][0])
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert len(pings) >= 4, pings
    # Half the period, as sd_watchdog_enabled(3) advises: every gap well inside the period.
    assert all(period / 4 < g < period for g in gaps), gaps


# Execs the rest of its arguments with descriptor argv[1] as fd 3 and LISTEN_FDS=1 for its own
# PID, which exec keeps: what systemd does for a socket-activated service.
LAUNCHER = ["/usr/bin/python3", "-c", """
import os, sys
fd = int(sys.argv[1])
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.environ["LISTEN_FDS"] = "1"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])
"""]


def listening_inodes(pid):
    """Socket inodes in LISTEN state that process `pid` holds."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] == "0A":  # TCP_LISTEN
                    listening.add(int(cols[9]))
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            held.add(int(m.group(1)))
    return held & listening


def test_socket_activation_serves_on_the_passed_socket_and_binds_nothing(sluice, origins, notify):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    text = sluice_config(origins(1), workers=2).replace(
        'listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:{port}"]')
    s = sluice(text, env=notify.env(), launcher=[*LAUNCHER, str(listener.fileno())],
               pass_fds=(listener.fileno(),))
    assert s.port == port
    notify.wait_for("READY")
    for _ in range(4):
        r, _ = timed_request(port, "GET", "/")
        assert r.status == 200
    # Every listening socket sluice holds is the one we passed (no SO_REUSEPORT on it: a bind of
    # its own would have failed anyway).
    assert listening_inodes(s.proc.pid) == {os.fstat(listener.fileno()).st_ino}
    assert "inherited" in "\n".join(s.log.lines)
    listener.close()


def test_inherited_socket_matching_no_listen_address_is_closed(sluice, origins):
    # On another loopback address: the config's 127.0.0.1:0 would take any socket on 127.0.0.1.
    stray = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stray.bind(("127.0.0.2", 0))
    stray.listen(4)
    stray_port = stray.getsockname()[1]
    s = sluice(sluice_config(origins(1)), launcher=[*LAUNCHER, str(stray.fileno())],
               pass_fds=(stray.fileno(),))
    s.log.wait_for(rf"inherited listener 127\.0\.0\.2:{stray_port} matches no listen address")
    assert os.fstat(stray.fileno()).st_ino not in listening_inodes(s.proc.pid)
    r, _ = timed_request(s.port, "GET", "/")
    assert r.status == 200
    stray.close()
