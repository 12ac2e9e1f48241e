"""Hostile clients, bounded: slowloris, a slow reader, a connection flood above max_connections,
and header bombs. Each shows that sluice answers the attacker as it should, keeps its memory and
file descriptors bounded, and that normal clients do not notice.

Latency comparisons ("p99 within 5 ms of the baseline", plus a quarter of the baseline's p99
when the machine is loaded) are made against a twin: a second sluice with the same config in front of the same origin, that is not attacked. The client sends its
requests to the attacked sluice and to the twin in turn, request by request, so both samples see
exactly the same machine (a build running on the shared 2-core machine hits both alike; measuring
baseline and attack in separate phases proved flaky under such load). The attacks run in a
separate process (adversary.py) so that they do not compete with the measuring client for
Python's GIL.
"""
import json
import math
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SANITIZED, Conn, Origin, sluice_config, toml_table, wait_until
from test_tls import Pki, tls_block, tls_port

ADVERSARY = Path(__file__).resolve().parent / "adversary.py"


def p99(samples):
    s = sorted(samples)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


def latencies(port, seconds, rate=100, conns=None, while_=None, each=None, max_samples=2000):
    """GETs at a steady `rate` for `seconds` (or while `while_()` holds), each timed from connect
    (or from send, on the given keep-alive `conns`, used round robin) to the whole answer, which
    must be a 200. `each()` runs after every request. Bounded by `max_samples`."""
    return paired([conns or port], seconds, rate, while_, each, max_samples)[0]


def paired(targets, seconds, rate=200, while_=None, each=None, max_samples=4000):
    """Like latencies(), with the requests going to each of `targets` in turn (a port: a fresh
    connection per request; a list of Conns: keep-alive, round robin). Returns one list of
    samples per target. Comparing an attacked sluice with an unattacked twin sampled in
    alternation, request by request, puts both under exactly the same machine conditions."""
    out = [[] for _ in targets]
    data = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    start = time.monotonic()
    for i in range(max_samples):
        due = start + i / rate
        if due - start > seconds or (while_ is not None and not while_()):
            break
        time.sleep(max(0.0, due - time.monotonic()))  # pacing the load, not waiting for an event
        k = i % len(targets)
        target = targets[k]
        t0 = time.monotonic()
        if isinstance(target, int):
            with Conn(target, timeout=10) as c:
                r = c.request(data)
        else:
            r = target[(i // len(targets)) % len(target)].request(data)
        out[k].append(time.monotonic() - t0)
        assert r.status == 200, r
        if each is not None:
            each()
    return out


def assert_p99_within_5ms(baseline, attacked, what):
    """p99 under attack at most 5 ms above the baseline's (the unattacked twin's), plus a quarter
    of the twin's p99 when the machine is loaded. An allowance rather than a bare ratio: on the
    shared 2-core machine (load average 7 to 16) the busier of two processes waits a few ms
    longer in the run queue now and then, whatever it does, and a ratio to a sub-millisecond twin
    either fails on that or (floored) lets a 16 x slowdown pass. The twin's p99 is the measure of
    that load: it is under 1 ms on a quiet machine (the allowance is then 5.25 ms at most) and
    grows with the run queue, and so does the noise between two samples taken in alternation.
    Measured there (attacked / twin p99, ms): slowloris 3.1/4.1, 4.7/2.0, 11.5/17.0, 12.4/9.1;
    slow reader 3.9/0.9, 4.2/3.1, 12.3/8.2, 27.2/22.0 (a CI run beside a second CI run: 5.2 ms
    above, allowed 10.5); flood 2.4/0.6, 6.5/2.8, 0.5/0.3. A worker blocked 7 ms per request
    while the attack lasts measured 28.1/8.0 (allowed 7.0 above: fails). Head-of-line blocking
    behind the attack, or a worker busy with it, costs more and fails this."""
    b, a = p99(baseline), p99(attacked)
    allowed = 0.005 + 0.25 * b
    print(f"{what}: baseline p99 {b * 1000:.2f} ms ({len(baseline)}), "
          f"attacked p99 {a * 1000:.2f} ms ({len(attacked)}), allowed {allowed * 1000:.2f} ms above")
    assert a <= b + allowed, (what, b, a)


def adversary(*args):
    p = subprocess.Popen([sys.executable, str(ADVERSARY), *map(str, args)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line == "ready", line
    return p


def finish(p, timeout):
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return json.loads(out.strip().splitlines()[-1])


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def origin():
    o = Origin("app-1")
    yield o
    o.stop()


def test_slowloris_is_closed_with_408_at_header_timeout_and_others_do_not_notice(origin, sluice):
    """500 connections trickling in over a second, each sending a header byte per second: every
    one gets 408 and is closed at header_timeout (2 s), while fresh-connection GETs (100/s) keep
    their p99 within 5 ms of the unattacked twin's. Two rounds; sluice's RSS stays bounded."""
    config = sluice_config([origin], server_extra='header_timeout = "2s"')
    s = sluice(config)
    twin = sluice(config, name="twin.toml")
    paired([s.port, twin.port], 0.5)  # warm up: pool, allocator
    rss_before = s.rss_kib()
    baseline, attacked = [], []
    for _ in range(2):
        p = adversary("slowloris", s.port, 500, 1.0, 1.0, 10)
        a, b = paired([s.port, twin.port], 6.0, while_=lambda: p.poll() is None)
        attacked += a
        baseline += b
        conns = finish(p, timeout=10)["connections"]
        assert len(conns) == 500
        answers = {}
        for c in conns:
            answer = c["answer"].split(" ")[1] if c["answer"] else None
            answers[answer] = answers.get(answer, 0) + 1
        assert answers == {"408": 500}, answers
        times = sorted(c["seconds"] for c in conns)
        # Closed at header_timeout: not before (the deadline runs from each connection's accept),
        # and not much after (deadlines are checked every 25 ms; the attacker notices on its
        # next select, and a busy machine adds some).
        # The attacker's clock starts at its connect, before sluice's accept: never below 2 s.
        assert times[0] >= 2.0 and times[-1] <= 3.0, (times[0], times[-1])
        # Each trickled 2 or 3 bytes: the timeout is on the whole head, not between bytes.
        assert max(c["bytes_sent"] for c in conns) <= 4
    assert_p99_within_5ms(baseline, attacked, "slowloris")
    # 500 half-read heads cost at most one head buffer each (32 KiB): well under 32 MiB.
    assert s.peak_rss_kib() - rss_before < 32 * 1024, (rss_before, s.peak_rss_kib())


def test_slow_reader_gets_back_pressure_not_buffering(origin, sluice):
    """A client reads a 100 MiB answer at 1 MiB/s. Scaled down in time: it reads for 3 s (3 MiB)
    and leaves. Meanwhile sluice's RSS grows by less than 8 MiB (it holds one relay block, not
    the body), the origin is still writing (it could send 100 MiB in a tenth of a second, so the
    back-pressure reached it), and other clients' p99 stays within 5 ms of the unattacked twin's.
    When the reader leaves, sluice closes the upstream connection."""
    s = sluice(sluice_config([origin]))
    twin = sluice(sluice_config([origin]), name="twin.toml")
    paired([s.port, twin.port], 0.5)
    rss_before = s.rss_kib()

    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    reader.connect(("127.0.0.1", s.port))
    reader.settimeout(5)
    reader.sendall(b"GET /?size=104857600 HTTP/1.1\r\nHost: a\r\n\r\n")
    got = 0

    def read_slowly():
        nonlocal got
        start = time.monotonic()
        while time.monotonic() - start < 3.0:
            due = (time.monotonic() - start) * (1 << 20)  # 1 MiB/s
            while got < due:
                chunk = reader.recv(min(64 * 1024, int(due - got) + 1))
                if not chunk:
                    return
                got += len(chunk)
            time.sleep(1 / 32)  # pacing the reader

    t = threading.Thread(target=read_slowly, daemon=True)
    t.start()
    attacked, baseline = paired([s.port, twin.port], 4.0, while_=t.is_alive)
    in_flight = origin.stats()["in_flight"]
    t.join(timeout=10)
    assert not t.is_alive()
    assert in_flight == 1  # still writing the 100 MiB after seconds: held back
    assert 2.5 * (1 << 20) <= got <= 3.5 * (1 << 20), got  # the reader did read at 1 MiB/s
    growth = s.peak_rss_kib() - rss_before
    assert growth < 8 * 1024, (rss_before, s.peak_rss_kib())
    reader.close()
    assert_p99_within_5ms(baseline, attacked, "slow reader")
    # The reader is gone: sluice stops relaying and closes the upstream connection.
    wait_until(lambda: origin.stats()["in_flight"] == 0, timeout=5, what="the origin's write to end")


def send_queue(local_port, remote_port):
    """What the loopback socket from local_port to remote_port holds written and not yet
    acknowledged (/proc/net/tcp's tx_queue), or None when there is no such socket."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[1].endswith(f":{local_port:04X}") and f[2].endswith(f":{remote_port:04X}"):
            return int(f[4].split(":")[0], 16)
    return None


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_slow_readers_answer_waits_at_the_origin_not_in_sluices_socket(origin, sluice, tmp_path, tls):
    """A client that stops reading a 32 MiB answer after its head: sluice's socket to it holds no
    more than what sluice may leave unsent there (128 KiB) and what is in flight to the client's
    64 KiB window, not megabytes of the answer (the kernel would take 4 MiB), and the origin is
    still writing. Then the client reads on and gets every byte. Over TLS as in plain."""
    extra = ""
    if tls:
        pki = Pki(tmp_path / "pki")
        extra = tls_block([pki.leaf("a.test", "DNS:a.test,IP:127.0.0.1")])
    s = sluice(sluice_config([origin], server_extra=extra))
    port = tls_port(s) if tls else s.port
    size = 32 << 20
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.connect(("127.0.0.1", port))
    raw.settimeout(10)
    reader = raw
    if tls:
        context = ssl.create_default_context(cafile=str(pki.ca))
        reader = context.wrap_socket(raw, server_hostname="a.test")
    reader.sendall(f"GET /?size={size} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += reader.recv(1)
    assert got.startswith(b"HTTP/1.1 200"), got
    mine = reader.getsockname()[1]
    wait_until(lambda: (send_queue(port, mine) or 0) > 0, timeout=5, what="the answer to reach sluice's socket")
    peak, until = 0, time.monotonic() + 1.0
    while time.monotonic() < until:  # the window in which the kernel would have taken megabytes
        peak = max(peak, send_queue(port, mine) or 0)
        time.sleep(0.02)
    print(f"sluice's socket to the stopped reader held at most {peak} bytes")
    assert peak < 512 * 1024, peak
    assert origin.stats()["in_flight"] == 1
    body = 0
    while body < size:
        chunk = reader.recv(1 << 20)
        assert chunk, body
        body += len(chunk)
    assert body == size
    reader.close()


@pytest.mark.skipif(SANITIZED, reason="the sanitizers' quarantine keeps freed memory resident")
def test_slow_readers_waiting_for_room_hold_no_relay_block(origin, sluice):
    """200 clients each ask for a 1 MiB answer and never read: the rest of each answer waits in the
    kernel's buffers, and sluice holds per reader its exchange (about 20 KiB), not the 64 KiB relay
    block a wait holding the untaken piece would keep (about 100 KiB a reader)."""
    s = sluice(sluice_config([origin]))
    with Conn(s.port) as c:  # the worker's pools warmed by one exchange
        assert c.request(b"GET /?size=1048576 HTTP/1.1\r\nHost: a\r\n\r\n").status == 200
    before = s.rss_kib()
    readers = []
    try:
        for _ in range(200):
            r = socket.socket()
            r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            r.connect(("127.0.0.1", s.port))
            r.sendall(b"GET /?size=1048576 HTTP/1.1\r\nHost: a\r\n\r\n")
            readers.append(r)
        for r in readers:  # every answer under way: its first bytes reached the reader
            r.settimeout(10)
            assert r.recv(1, socket.MSG_PEEK)
        # The blocks the first pieces took go back to the worker's pools at once; the pools give
        # what then stays unused back to the system within a few seconds.
        per_reader = lambda: (s.rss_kib() - before) / 200
        wait_until(lambda: per_reader() < 40, timeout=10, what="sluice's memory per slow reader under 40 KiB")
        print(f"{per_reader():.1f} KiB per slow reader")
    finally:
        for r in readers:
            r.close()


def test_connection_flood_above_max_connections_waits_in_the_backlog(origin, sluice):
    """max_connections = 64 on one worker. 1,000 connections arrive at once (and stay, silent):
    sluice never holds more than 64 client connections (its fd count stays bounded), nothing
    crashes, the excess waits in the kernel's backlog and is taken as slots free up (an accepted
    silent connection is closed at header_timeout, 0.5 s), and 8 clients already connected keep
    being served (200/s, keep-alive) with their p99 within 5 ms of an unattacked twin's. Two
    rounds."""
    config = sluice_config([origin], server_extra='max_connections = 64\nheader_timeout = "500ms"')
    s = sluice(config)
    twin = sluice(config, name="twin.toml")
    # Each served connection sends its first request right after connecting: a new connection
    # has header_timeout (0.5 s) from accept, which a stalled test process could otherwise miss.
    def connected(port):
        c = Conn(port, timeout=10)
        assert c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").status == 200
        return c
    served = [connected(s.port) for _ in range(8)]
    twin_served = [connected(twin.port) for _ in range(8)]
    try:
        paired([served, twin_served], 0.5)  # warm up
        fds_before = open_fds(s.proc.pid)
        max_fds = fds_before
        baseline, attacked = [], []

        def sample_fds():
            nonlocal max_fds
            max_fds = max(max_fds, open_fds(s.proc.pid))

        for _ in range(2):
            flood = adversary("flood", s.port, 1000, 30)
            try:
                flood_result = json.loads(flood.stdout.readline())
                assert flood_result["connected"] == 1000, flood_result  # the backlog took them all
                a, b = paired([served, twin_served], 2.5, rate=400, each=sample_fds)
                attacked += a
                baseline += b
            finally:
                flood.stdin.close()
                flood.wait(timeout=10)
            # The flood's connections still queued are taken and found closed.
            wait_until(lambda: open_fds(s.proc.pid) <= fds_before, timeout=10,
                       what="sluice back to its fds before the flood")
        assert s.proc.poll() is None, "sluice died"
        # fds_before holds the listeners, the 8 served connections and their pooled upstream
        # connection; the flood can add only the 56 client slots left.
        print(f"fds: {fds_before} before, at most {max_fds} under the flood")
        assert max_fds == fds_before + 56, (fds_before, max_fds)  # exactly its 64, no more
        assert_p99_within_5ms(baseline, attacked, "connection flood")
    finally:
        for c in served + twin_served:
            c.close()
    # Afterwards a new client is served at once.
    assert latencies(s.port, 0.01)[0] < 2.0


def test_connection_over_the_limit_waits_then_is_served(origin, sluice):
    """At max_connections a new connection is not refused: it waits in the backlog, unanswered,
    and is served as soon as a slot frees."""
    s = sluice(sluice_config([origin], server_extra="max_connections = 4"))
    held = [Conn(s.port) for _ in range(4)]
    try:
        for c in held:
            assert c.request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").status == 200
        with Conn(s.port, timeout=10) as waiting:  # connect succeeds: the kernel's backlog
            waiting.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            with pytest.raises(TimeoutError):
                waiting.read_response(timeout=0.5)  # not accepted yet: no answer
            held.pop().close()
            assert waiting.read_response(timeout=5).status == 200
    finally:
        for c in held:
            c.close()


def test_fd_limit_below_max_connections_clamps_the_accept_limit(origin, sluice):
    """sluice runs with 160 file descriptors and the default max_connections (10,000). It says
    so at start-up and accepts only what the descriptors can hold ((160 - 64 reserved - 64 idle
    pool, keepalive 32 and the surplus of a burst as much again) / 2 = 16), so a flood of 300 connections waits in the backlog instead of taking the
    descriptors a served client needs for its upstream connections: that client (whose every
    answer closes the upstream connection, so each request needs a new one) keeps getting 200s.
    Before the clamp it got 502 `connect failed` (EMFILE)."""
    s = sluice(sluice_config([origin], top=toml_table("admin", listen="127.0.0.1:0")), nofile=160)

    def client_connections():
        m = re.search(r'^sluice_connections\{side="client"\} (\S+)$', s.metrics_text(), re.M)
        return int(float(m.group(1)))

    warning = next(l for l in s.log.poll() if "max_connections" in l)
    assert "accepting at most 16 connections" in warning, warning
    with Conn(s.port, timeout=10) as served:
        assert served.request(b"GET /?close=after HTTP/1.1\r\nHost: a\r\n\r\n").status == 200
        fds_before = open_fds(s.proc.pid)
        flood = adversary("flood", s.port, 300, 30)
        try:
            assert json.loads(flood.stdout.readline())["connected"] == 300
            # The other 15 slots fill up; no more.
            wait_until(lambda: client_connections() == 16, timeout=5,
                       what="sluice at its clamped limit")
            for _ in range(20):
                r = served.request(b"GET /?close=after HTTP/1.1\r\nHost: a\r\n\r\n")
                assert r.status == 200, r
            assert client_connections() == 16
            # The last request's upstream connection (the origin closes it after its answer) is
            # closed just after the answer reaches the client: awaited, not assumed.
            wait_until(lambda: open_fds(s.proc.pid) <= fds_before + 16, timeout=2,
                       what="no descriptors beyond the 16 clamped client connections")
        finally:
            flood.stdin.close()
            flood.wait(timeout=10)
    assert not any("Too many open files" in l for l in s.log.poll())


def test_each_of_two_workers_accepts_its_share_of_max_connections(origin, sluice):
    """max_connections = 3 with workers = 2: each worker accepts ceil(3 / 2) = 2 connections
    (docs/configuration.md), so 20 silent connections leave exactly 4 accepted (a cap over the
    whole process would hold 3, none at all 20) and the rest in the backlog; as the flood
    leaves, a new client is served."""
    s = sluice(sluice_config([origin], workers=2, server_extra="max_connections = 3",
                             top=toml_table("admin", listen="127.0.0.1:0")))

    def client_connections():
        m = re.search(r'^sluice_connections\{side="client"\} (\S+)$', s.metrics_text(), re.M)
        return int(float(m.group(1)))

    flood = adversary("flood", s.port, 20, 30)
    try:
        assert json.loads(flood.stdout.readline())["connected"] == 20
        # SO_REUSEPORT spreads 20 connections over both workers: each fills its 2 slots.
        wait_until(lambda: client_connections() == 4, timeout=5, what="both workers at their share")
        with Conn(s.port, timeout=10) as waiting:
            waiting.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            with pytest.raises(TimeoutError):
                waiting.read_response(timeout=0.5)  # in the backlog behind the flood
            assert client_connections() == 4
    finally:
        flood.stdin.close()
        flood.wait(timeout=10)
    assert latencies(s.port, 0.01)[0] < 2.0  # the flood gone, a new client is served


HEADER_BOMBS = {
    # 10,000 tiny header lines (60 KB): 431 as soon as max_header_bytes (16 KiB) is passed.
    "10k_tiny_headers": (b"GET / HTTP/1.1\r\nHost: a\r\n" + b"X: y\r\n" * 10_000 + b"\r\n", 431,
                         "header too large"),
    # One 1 MiB header line.
    "1mib_header": (b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * (1 << 20) + b"\r\n\r\n", 431,
                    "header too large"),
    # A 100 KiB request-target: 414 as soon as max_uri_bytes (8 KiB) is passed.
    "100kib_uri": (b"GET /" + b"u" * (100 << 10) + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414,
                   "uri too long"),
}


@pytest.mark.parametrize("name", sorted(HEADER_BOMBS))
def test_header_bomb_gets_4xx_and_close_with_bounded_memory(scripted, sluice, name):
    """The bomb is answered (431/414) and the connection closed, even though the client is still
    sending when the answer comes; 20 bombs in parallel leave sluice's RSS within a few MiB and
    the origin sees nothing: no new connection, not one byte."""
    data, status, reason = HEADER_BOMBS[name]
    origin = scripted("a")
    s = sluice(sluice_config([origin.address]))
    warm = len(latencies(s.port, 0.2))
    origin.settle()
    seen_before = (origin.accepted, origin.bytes_received())
    rss_before = s.rss_kib()
    results = [None] * 20

    def bomb(i):
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # sluice answered and closed before taking it all: expected
            got = b""
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
            results[i] = got

    threads = [threading.Thread(target=bomb, args=(i,), daemon=True) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    for got in results:
        head = got.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        assert head.startswith(f"HTTP/1.1 {status} "), got[:300]
        assert f"Sluice-Error: {reason}" in head and "Connection: close" in head, head
    assert s.peak_rss_kib() - rss_before < 8 * 1024, (rss_before, s.peak_rss_kib())
    origin.settle()
    assert (origin.accepted, origin.bytes_received()) == seen_before, origin.conns
    assert origin.count() == warm and origin.unparsed() == {}  # the warm-up only, each whole
