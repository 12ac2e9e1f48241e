"""WebSocket and other Upgrades: an Upgrade request is forwarded with its Connection: upgrade; only a
101 from the origin turns the connection into a byte tunnel; h2c is never forwarded; a tunnel
counts as in flight on its server, survives reloads and drains until tunnel_drain_timeout, is
closed when silent for tunnel_idle_timeout, and by SIGTERM at shutdown_timeout.

The WebSocket client is sluice-test-client (Beast): `--websocket N` for bulk echo,
`--websocket-script` (WsScript below) for a tunnel the test drives step by step. Every wait has a
deadline."""
import os
import select
import signal
import subprocess
import time


from conftest import metric
from conftest import (CLIENT, LOG_RESOLUTION, SCHEDULING_SLACK, SLUICE, TICK, Conn,
                      assert_expired_on_time, run_client, sluice_cli, sluice_config, toml_table,
                      wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")
WS = "/chat?websocket=1"
HANDSHAKE = ("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: keep-alive, Upgrade\r\n"
             "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")




class WsScript:
    """A WebSocket client process driven line by line: `echo N`, `wait-close`, `close`. Each
    command's answer is one JSON line; reads have deadlines."""

    def __init__(self, port, target=WS, timeout=60):
        self.proc = subprocess.Popen(
            [str(CLIENT), "--timeout", str(timeout), "--url", f"http://127.0.0.1:{port}{target}",
             "--websocket-script"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf = b""
        self.handshake = self.read()

    def read(self, timeout=10.0):
        import json
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer from the client; have {self.buf!r}")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError(f"client ended; have {self.buf!r}")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, text, timeout=10.0):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()
        return self.read(timeout)

    def echo(self, n=10):
        r = self.command(f"echo {n}")
        assert r.get("ok") and r["echoed"] == n, r
        return r

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def start(origins, sluice, *, server_extra="", upstream_extra="", top=ADMIN, n=1, **kw):
    os_ = origins(n, prefix="ws")
    s = sluice(sluice_config(os_, server_extra=server_extra, upstream_extra=upstream_extra,
                             top=top, **kw))
    return os_, s


# The WebSocket client is another process: what it reports reaches the test this much after
# sluice moved the bytes (a pipe hop), so client-side stamps are early by up to this.
CLIENT_LAG = 0.01


def assert_tunnel_closed_on_time(after, timeout, closed):
    """tunnel_drain_timeout: a tunnel notices a reload or a drain at its next check (every
    250 ms) and closes `timeout` after that: never early, at most ~0.3 s late
    (docs/configuration.md). `after` runs from sluice's own log stamp of the event."""
    assert timeout - LOG_RESOLUTION <= after <= timeout + 0.25 + TICK + SCHEDULING_SLACK, \
        (after, closed)


def tunnel_count(s, server="ws-1"):
    st = s.server_status(server)
    return st["tunnels"], st["in_flight"]


def test_ten_thousand_messages_echo_intact_both_ways(origins, sluice):
    """10,000 messages (text and binary, 1 B to 100 KiB, every byte position-dependent) written
    while their echoes are read, through sluice: every echo equals what was sent."""
    (o,), s = start(origins, sluice)
    rc, out = run_client("--url", s.url(WS), "--websocket", 10000, timeout=120)
    assert rc == 0, out
    assert (out["handshake_status"], out["origin"]) == (101, "ws-1"), out
    assert (out["sent"], out["echoed"], out["mismatches"]) == (10000, 10000, 0), out
    assert out["bytes_echoed"] == out["bytes_sent"] > 10000 * 1000, out
    assert out["closed"] == "normal", out
    # The tunnel is gone: no longer in flight, counted as closed by its peers.
    wait_until(lambda: tunnel_count(s) == (0, 0), timeout=5, what="tunnel ended")
    assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="closed") == 1
    assert metric(s, "sluice_requests_total", upstream="app", server="ws-1", code="1xx") == 1


def test_an_open_tunnel_is_in_flight_and_counted(origins, sluice):
    (o,), s = start(origins, sluice)
    ws = WsScript(s.port)
    try:
        assert ws.handshake["handshake_status"] == 101, ws.handshake
        ws.echo(5)
        assert tunnel_count(s) == (1, 1)
        assert metric(s, "sluice_tunnels", upstream="app", server="ws-1") == 1
        assert metric(s, "sluice_upstream_in_flight", upstream="app", server="ws-1") == 1
        assert ws.command("close")["closed"] == "normal"
        wait_until(lambda: tunnel_count(s) == (0, 0), timeout=5, what="tunnel ended")
        assert metric(s, "sluice_tunnels", upstream="app", server="ws-1") == 0
    finally:
        ws.stop()


def test_the_upgrade_reaches_the_origin_with_connection_upgrade_only(origins, sluice):
    """The origin's echo (no websocket knob: an ordinary 200) shows what was forwarded: Upgrade and
    `Connection: upgrade`; the other hop-by-hop fields are gone."""
    (o,), s = start(origins, sluice, top="")
    with Conn(s.port) as c:
        c.send(HANDSHAKE.format(target="/?echo=1").replace(
            "Host: t\r\n", "Host: t\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\n").replace(
            "keep-alive, Upgrade", "keep-alive, Upgrade, X-Hop").encode())
        r = c.read_response()
    assert r.status == 200, r
    headers = {k.lower(): v for k, v in r.json()["headers"]}
    assert headers["upgrade"] == "websocket"
    assert headers["connection"] == "upgrade"
    assert "keep-alive" not in headers and "x-hop" not in headers
    assert headers["sec-websocket-key"] == "dGhlIHNhbXBsZSBub25jZQ=="


def test_a_non_101_answer_is_not_tunnelled_and_a_pipelined_request_is_http(origins, sluice):
    """The origin declines the upgrade (an ordinary 200): the client gets that answer without
    Upgrade, and the next request, already sent behind the first, is read as HTTP and answered."""
    (o,), s = start(origins, sluice, top="")
    with Conn(s.port) as c:
        c.send(HANDSHAKE.format(target="/declined").encode()
               + b"GET /next?echo=1 HTTP/1.1\r\nHost: t\r\nX-Seq: 2\r\n\r\n")
        first = c.read_response()
        assert first.status == 200 and first.body == b"ws-1\n", first
        assert first.header("Upgrade") is None and first.header("Connection") is None, first
        second = c.read_response()
        assert second.status == 200, second
        assert second.json()["target"] == "/next?echo=1"
        assert ["X-Seq", "2"] in second.json()["headers"]
        # Still HTTP: a third request on the same connection.
        assert c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200


def test_an_h2c_upgrade_is_never_forwarded(origins, sluice):
    (o,), s = start(origins, sluice, top="")
    with Conn(s.port) as c:
        r = c.request(b"GET /?echo=1 HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                      b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
        assert r.status == 200, r
        names = {k.lower() for k, _ in r.json()["headers"]}
        assert not names & {"upgrade", "connection", "http2-settings"}, names
        # Offered next to another protocol, h2c alone is dropped.
        r = c.request(b"GET /?echo=1 HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
                      b"Upgrade: h2c, websocket\r\nHTTP2-Settings: x\r\n\r\n")
        headers = {k.lower(): v for k, v in r.json()["headers"]}
        assert headers.get("upgrade") == "websocket" and "http2-settings" not in headers, headers


def test_a_101_that_was_not_asked_for_is_a_bad_response(scripted, sluice):
    """A 101 to a plain request, or to an upgrade without an Upgrade field naming an offered
    protocol, is a protocol error: 502, nothing tunnelled."""
    rogue = scripted("rogue", status=101)
    s = sluice(sluice_config([rogue.address], top=ADMIN,
                             upstream_extra='[upstreams.app.retry]\nattempts = 1\n'))
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert (r.status, r.header("Sluice-Error")) == (
        502, "bad response; not retried: attempts exhausted"), r
    with Conn(s.port) as c:
        r = c.request(HANDSHAKE.format(target="/").encode())
    assert (r.status, r.header("Sluice-Error")) == (
        502, "bad response; not retried: attempts exhausted"), r
    assert s.server_status(rogue.address)["tunnels"] == 0


def test_an_upgrade_is_not_resent_once_the_request_was_sent(scripted, sluice):
    """Two servers that take a request and drop the connection: a plain GET is retried on the
    second, an upgrade request is not (the first may have switched protocols already)."""
    droppers = [scripted(f"drop-{i}", behaviour="drop") for i in (1, 2)]
    s = sluice(sluice_config([d.address for d in droppers]))
    with Conn(s.port) as c:
        r = c.request(HANDSHAKE.format(target=WS).encode())
    assert (r.status, r.header("Sluice-Error")) == (
        502, "upstream reset; not retried: not idempotent"), r
    assert sum(d.count() for d in droppers) == 1
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert r.status == 502, r
    assert sum(d.count() for d in droppers) == 3


def test_a_tunnel_survives_a_reload_and_closes_at_tunnel_drain_timeout(origins, sluice):
    (o,), s = start(origins, sluice, server_extra='tunnel_drain_timeout = "2s"')
    ws = WsScript(s.port)
    try:
        ws.echo(10)
        s.proc.send_signal(signal.SIGHUP)
        reloaded = s.log_time(r"reloaded .* \(config version 2\)")
        ws.echo(10)  # the tunnel outlives the reload
        assert tunnel_count(s) == (1, 1)
        # A new tunnel after the reload works as well (and is not the one that will close).
        rc, out = run_client("--url", s.url(WS), "--websocket", 100)
        assert rc == 0, out
        closed = ws.command("wait-close", timeout=10)
        assert_tunnel_closed_on_time(time.time() - reloaded, 2.0, closed)
        wait_until(lambda: tunnel_count(s) == (0, 0), timeout=5, what="tunnel ended")
        assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="drain") == 1
        assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="closed") == 1
    finally:
        ws.stop()


def test_a_tunnel_survives_a_drain_of_its_server_which_waits_for_it(origins, sluice):
    """Draining the server: the tunnel goes on (and keeps the server from being drained: drain
    --wait waits) until tunnel_drain_timeout closes it."""
    (o,), s = start(origins, sluice, server_extra='tunnel_drain_timeout = "2s"')
    ws = WsScript(s.port)
    try:
        ws.echo(10)
        waiter = subprocess.Popen([str(SLUICE), "drain", "--upstream", "app", "--server", "ws-1",
                                   "--admin", s.admin_address, "--wait", "--timeout", "20s"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: s.server_status("ws-1")["draining"], timeout=5, what="draining")
            started = s.log_time(r"server ws-1: draining through the admin API")
            ws.echo(10)  # still open while draining
            st = s.server_status("ws-1")
            assert (st["tunnels"], st["in_flight"], st["drained"]) == (1, 1, False), st
            assert waiter.poll() is None, "drain --wait returned with a tunnel open"
            closed = ws.command("wait-close", timeout=10)
            assert_tunnel_closed_on_time(time.time() - started, 2.0, closed)
            out, err = waiter.communicate(timeout=10)
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        assert waiter.returncode == 0, (out, err)
        assert out.endswith("app/ws-1: drained\n"), out
        assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="drain") == 1
    finally:
        ws.stop()


def test_undraining_in_time_keeps_the_tunnel(origins, sluice):
    (o,), s = start(origins, sluice, server_extra='tunnel_drain_timeout = "2s"')
    ws = WsScript(s.port)
    try:
        drain = ["--upstream", "app", "--server", "ws-1", "--admin", s.admin_address]
        assert sluice_cli("drain", *drain).returncode == 0
        ws.echo(5)
        assert sluice_cli("undrain", *drain).returncode == 0
        undrained = time.monotonic()
        # Past the drain timeout the tunnel still echoes.
        while time.monotonic() - undrained < 3.0:
            ws.echo(1)
        assert tunnel_count(s) == (1, 1)
        assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="drain") == 0
    finally:
        ws.stop()


def test_tunnel_idle_timeout_closes_a_silent_tunnel_only(origins, sluice):
    (o,), s = start(origins, sluice, upstream_extra='tunnel_idle_timeout = "1s"')
    ws = WsScript(s.port)
    try:
        # Messages every 0.3 s keep it open well past the idle timeout ...
        begun = time.monotonic()
        while True:
            ws.echo(1)
            silent = time.monotonic()
            if silent - begun >= 2.5:
                break
            time.sleep(0.3)  # the silence under test, shorter than the timeout
        # ... and silence closes it.
        closed = ws.command("wait-close", timeout=10)
        # `silent` was taken when the echo reached this process, up to CLIENT_LAG after sluice
        # saw the tunnel's last byte.
        assert_expired_on_time(time.monotonic() - silent + CLIENT_LAG, 1.0, "tunnel_idle_timeout")
        wait_until(lambda: tunnel_count(s) == (0, 0), timeout=5, what="tunnel ended")
        assert metric(s, "sluice_tunnels_closed_total", upstream="app", reason="idle") == 1
    finally:
        ws.stop()


def test_sigterm_closes_tunnels_at_shutdown_timeout(origins, sluice):
    (o,), s = start(origins, sluice, server_extra='shutdown_timeout = "1500ms"', top="")
    ws = WsScript(s.port)
    try:
        ws.echo(5)
        s.proc.send_signal(signal.SIGTERM)
        stopped = s.log_time(r"graceful shutdown")
        ws.echo(5)  # open during the shutdown timeout
        closed = ws.command("wait-close", timeout=10)
        cut = s.log_time(r"shutdown timeout: closing 1 connection")
        assert s.proc.wait(timeout=10) == 0
        assert_expired_on_time(cut - stopped + LOG_RESOLUTION, 1.5, "shutdown_timeout")
    finally:
        ws.stop()
