"""gRPC through sluice (docs/grpc.md): a python3-grpcio client speaking HTTP/2 (h2c) to sluice,
sluice speaking HTTP/2 to a python3-grpcio server behind an upstream with protocol = "h2c" (or
"h2" over TLS). Unary and streaming calls, metadata and trailers both ways, status codes,
messages of several MiB, streams multiplexed on shared connections, and the gRPC-shaped answers
sluice writes itself.

The services are generic handlers with bytes in and out (no generated code)."""
import json
import socket
import subprocess
import threading
import time
from concurrent import futures

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import pytest

from conftest import closed_port, metric_samples, sluice_config, toml_table, wait_until
from test_tls import pki  # noqa: F401 (a fixture)

H2C = "h2c = true"
BIG = 16 * 1024 * 1024
OPTIONS = [("grpc.max_send_message_length", BIG), ("grpc.max_receive_message_length", BIG)]


def ident(b):
    return b


class Service:
    """/t.T/{Echo,Fail,Many,Sum,Chat,Hold}; what each handler saw is recorded."""

    def __init__(self, hold=0):
        self.seen = []  # (method, metadata dict, peer)
        self.lock = threading.Lock()
        self.hold = hold  # Hold waits until this many calls are in
        self.held = threading.Barrier(hold) if hold else None
        self.cancelled = threading.Event()
        self.release = threading.Event()

    def note(self, method, context):
        with self.lock:
            self.seen.append((method, dict(context.invocation_metadata()), context.peer()))

    def echo(self, request, context):
        self.note("Echo", context)
        md = dict(context.invocation_metadata())
        context.send_initial_metadata((("x-initial", "i-" + md.get("x-call", "")),))
        context.set_trailing_metadata((("x-trailing", "t-" + md.get("x-call", "")),
                                       ("x-len", str(len(request)))))
        return request[::-1]

    def fail(self, request, context):
        self.note("Fail", context)
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + request.decode())

    def many(self, request, context):
        self.note("Many", context)
        for i in range(int(request)):
            yield b"%d" % i

    def sum(self, request_iterator, context):
        self.note("Sum", context)
        return b"%d" % sum(int(r) for r in request_iterator)

    def chat(self, request_iterator, context):
        self.note("Chat", context)
        for r in request_iterator:
            yield b"re:" + r

    def wait_call(self, request, context):
        """Answers only when released (or after 10 s); notes the cancellation the server sees."""
        self.note("Wait", context)
        context.add_callback(self.cancelled.set)
        self.release.wait(timeout=10)
        return request

    def hold_call(self, request, context):
        self.note("Hold", context)
        self.held.wait(timeout=20)
        return request

    def handler(self):
        h = grpc.unary_unary_rpc_method_handler
        return grpc.method_handlers_generic_handler("t.T", {
            "Echo": h(self.echo, ident, ident),
            "Fail": h(self.fail, ident, ident),
            "Hold": h(self.hold_call, ident, ident),
            "Wait": h(self.wait_call, ident, ident),
            "Many": grpc.unary_stream_rpc_method_handler(self.many, ident, ident),
            "Sum": grpc.stream_unary_rpc_method_handler(self.sum, ident, ident),
            "Chat": grpc.stream_stream_rpc_method_handler(self.chat, ident, ident),
        })


@pytest.fixture
def grpc_server():
    started = []

    def start(service, options=(), credentials=None):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[*OPTIONS, *options])
        handlers = service.handler()
        server.add_generic_rpc_handlers(handlers if isinstance(handlers, tuple) else (handlers,))
        port = (server.add_secure_port("127.0.0.1:0", credentials) if credentials
                else server.add_insecure_port("127.0.0.1:0"))
        server.start()
        started.append(server)
        return port

    start.servers = started  # to stop one early
    yield start
    for s in started:
        s.stop(grace=None)


def h2c_front(sluice, port, upstream_extra='protocol = "h2c"'):
    return sluice(sluice_config([f"127.0.0.1:{port}"], server_extra=H2C, upstream_extra=upstream_extra)
                  + toml_table("admin", listen="127.0.0.1:0"))


def upstream_figure(s, name):
    """sluice `s`'s one sample of the per-server metric `name` (one server)."""
    [value] = metric_samples(s, name, upstream="app")
    return value


def channel(s):
    return grpc.insecure_channel(f"127.0.0.1:{s.port}", options=OPTIONS)


def unary(ch, method, body, **kw):
    return ch.unary_unary(f"/t.T/{method}", request_serializer=ident, response_deserializer=ident)(body, **kw)


def test_unary_call_with_metadata_and_trailers_both_ways(sluice, grpc_server):
    svc = Service()
    s = h2c_front(sluice, grpc_server(svc))
    with channel(s) as ch:
        call = ch.unary_unary("/t.T/Echo", request_serializer=ident, response_deserializer=ident)
        answer, info = call.with_call(b"hello", metadata=(("x-call", "one"),), timeout=10)
        assert answer == b"olleh"
        assert ("x-initial", "i-one") in info.initial_metadata()
        assert ("x-trailing", "t-one") in info.trailing_metadata()
        assert ("x-len", "5") in info.trailing_metadata()
        assert info.code() == grpc.StatusCode.OK
    [(method, md, _)] = svc.seen
    assert method == "Echo" and md["x-call"] == "one"
    assert md["x-forwarded-for"] == "127.0.0.1"


def test_error_status_and_message_reach_the_client(sluice, grpc_server):
    svc = Service()
    s = h2c_front(sluice, grpc_server(svc))
    with channel(s) as ch, pytest.raises(grpc.RpcError) as e:
        unary(ch, "Fail", b"x1", timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == "no such thing: x1"
    assert [m for m, _, _ in svc.seen] == ["Fail"]


def test_messages_of_several_mib_both_ways(sluice, grpc_server):
    svc = Service()
    s = h2c_front(sluice, grpc_server(svc))
    body = bytes(range(256)) * (4 * 4096 + 3)  # 4 MiB and 768 bytes
    with channel(s) as ch:
        assert unary(ch, "Echo", body, timeout=30) == body[::-1]
        assert unary(ch, "Echo", b"small", timeout=10) == b"llams"


def test_server_client_and_bidirectional_streaming(sluice, grpc_server):
    svc = Service()
    s = h2c_front(sluice, grpc_server(svc))
    with channel(s) as ch:
        many = ch.unary_stream("/t.T/Many", request_serializer=ident, response_deserializer=ident)
        assert list(many(b"500", timeout=10)) == [b"%d" % i for i in range(500)]
        total = ch.stream_unary("/t.T/Sum", request_serializer=ident, response_deserializer=ident)
        assert total(iter([b"%d" % i for i in range(100)]), timeout=10) == b"4950"
        # Ping-pong: each message is sent only after the answer to the previous one came back,
        # which only a full-duplex relay can carry.
        chat = ch.stream_stream("/t.T/Chat", request_serializer=ident, response_deserializer=ident)
        out = []
        replies = []
        turn = threading.Semaphore(1)

        def requests():
            for i in range(20):
                assert turn.acquire(timeout=10)
                out.append(i)
                yield b"m%d" % i
        for r in chat(requests(), timeout=20):
            replies.append(r)
            turn.release()
        assert replies == [b"re:m%d" % i for i in range(20)]


def test_calls_share_one_upstream_connection_up_to_the_servers_stream_limit(sluice, grpc_server):
    svc = Service(hold=4)
    s = h2c_front(sluice, grpc_server(svc, options=[("grpc.max_concurrent_streams", 2)]))
    with channel(s) as ch:
        for i in range(5):
            assert unary(ch, "Echo", b"%d" % i, timeout=10) == b"%d" % i
        assert len({peer for _, _, peer in svc.seen}) == 1  # one connection carried the 5 calls
        assert upstream_figure(s, "sluice_upstream_http2_connections") == 1
        svc.seen.clear()
        # Four calls at once, the server taking two streams per connection: two connections.
        pool = futures.ThreadPoolExecutor(max_workers=4)
        calls = [pool.submit(unary, ch, "Hold", b"h%d" % i, timeout=20) for i in range(4)]
        assert sorted(c.result(timeout=30) for c in calls) == [b"h0", b"h1", b"h2", b"h3"]
        assert len({peer for _, _, peer in svc.seen}) == 2
        assert upstream_figure(s, "sluice_upstream_http2_connections") == 2
        assert s.admin("GET", "/api/status").json()["upstreams"][0]["servers"][0]["http2_connections"] == 2
    # The server stops: its connections close and are no longer counted.
    grpc_server.servers[0].stop(grace=None)
    wait_until(lambda: upstream_figure(s, "sluice_upstream_http2_connections") == 0, timeout=10,
               what="the connections counted as closed")


def test_no_server_is_a_grpc_unavailable_with_the_reason(sluice):
    s = h2c_front(sluice, closed_port())
    with channel(s) as ch, pytest.raises(grpc.RpcError) as e:
        unary(ch, "Echo", b"x", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert e.value.details() == "connect refused; not retried: no other server to try"


def test_each_calls_grpc_status_is_in_the_metrics_and_the_access_log(tmp_path, sluice, grpc_server):
    """The server's grpc-status (OK, NOT_FOUND) and sluice's own (UNAVAILABLE: no server)."""
    def front(server, log):
        text = sluice_config([server], server_extra=H2C, upstream_extra='protocol = "h2c"', access="json")
        text = text.replace("[log]\n", f'[log]\naccess_file = "{log}"\n', 1)
        return sluice(text + toml_table("admin", listen="127.0.0.1:0"))

    def call(s, method):
        with channel(s) as ch:
            try:
                unary(ch, method, b"x", timeout=10)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

    def count(s, **labels):
        return sum(metric_samples(s, "sluice_grpc_responses_total", upstream="app", **labels))

    def logged(log, n):
        wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= n, what=f"{n} access log lines")
        return [(r["status"], r["grpc_status"]) for r in map(json.loads, log.read_text().splitlines())]

    live = front(f"127.0.0.1:{grpc_server(Service())}", tmp_path / "live.log")
    assert [call(live, m) for m in ("Echo", "Fail", "Echo")] == [grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND,
                                                               grpc.StatusCode.OK]
    # Counted as each stream ends, which may be just after the client has its answer.
    wait_until(lambda: count(live) == 3, what="three calls counted")
    assert count(live, grpc_code="OK", source="upstream") == 2
    assert count(live, grpc_code="NOT_FOUND", source="upstream") == 1
    assert logged(tmp_path / "live.log", 3) == [(200, "0"), (200, "5"), (200, "0")]

    gone = front(f"127.0.0.1:{closed_port()}", tmp_path / "gone.log")
    assert call(gone, "Echo") == grpc.StatusCode.UNAVAILABLE
    wait_until(lambda: count(gone) == 1, what="the call counted")
    assert count(gone, grpc_code="UNAVAILABLE", source="sluice") == 1
    assert logged(tmp_path / "gone.log", 1) == [(502, "14")]


def test_h2_upstream_over_tls_with_alpn(sluice, grpc_server, pki):
    svc = Service()
    cert, key = pki.leaf("g.test", "DNS:g.test,IP:127.0.0.1")
    creds = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    port = grpc_server(svc, credentials=creds)
    s = h2c_front(sluice, port, f'protocol = "h2"\ntls = true\ntls_ca_file = "{pki.ca}"')
    with channel(s) as ch:
        answer, info = ch.unary_unary("/t.T/Echo", request_serializer=ident, response_deserializer=ident).with_call(
            b"secure", metadata=(("x-call", "tls"),), timeout=10)
    assert answer == b"eruces"
    assert ("x-trailing", "t-tls") in info.trailing_metadata()


def test_a_cancelled_call_is_cancelled_at_the_server(sluice, grpc_server):
    svc = Service()
    s = h2c_front(sluice, grpc_server(svc))
    with channel(s) as ch:
        call = ch.unary_unary("/t.T/Wait", request_serializer=ident, response_deserializer=ident).future(b"w")
        wait_until(lambda: svc.seen, what="the call at the server")
        assert not svc.cancelled.is_set()
        call.cancel()
        # The client's RST_STREAM reached sluice, whose reset of the upstream stream reached the
        # server while its handler was still waiting.
        assert svc.cancelled.wait(timeout=5)
        svc.release.set()


def grpc_frame(message):
    return b"\0" + len(message).to_bytes(4, "big") + message


def test_grpc_timeout_is_the_calls_deadline(sluice):
    # A server that never answers (a gRPC server would keep the deadline itself, grpc-timeout is
    # passed on to it), and a client (curl) with no deadline of its own: the 300 ms of
    # grpc-timeout are sluice's to keep, well within the route's response_timeout (30 s).
    stall = H2Origin("stall", "stall")
    try:
        s = sluice(sluice_config([stall.address], server_extra=H2C, upstream_extra='protocol = "h2c"'))
        started = time.monotonic()
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/null",
                            "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", "grpc-timeout: 300m",
                            "--data-binary", "@-", s.url("/t.T/Wait")],
                           input=grpc_frame(b"w"), capture_output=True, timeout=15)
        took = time.monotonic() - started
        head = p.stdout.decode().lower()
        assert p.returncode == 0, p.stderr
        assert head.startswith("http/2 200"), head
        assert "grpc-status: 4\r\n" in head, head  # DEADLINE_EXCEEDED
        assert "grpc-message: response timeout" in head, head
        assert 0.3 <= took < 3, took
        assert stall.requests == [("POST", "/t.T/Wait")]
    finally:
        stall.close()


class H2Origin:
    """A cleartext HTTP/2 server (python3-h2) that refuses every stream with REFUSED_STREAM
    (`mode="refuse"`), or answers its first stream's GOAWAY naming no stream processed
    (`mode="goaway"`), never answers (`mode="stall"`), or answers 200 "from NAME"
    (`mode="answer"`). Records each request's method and path."""

    def __init__(self, name, mode):
        self.name, self.mode = name, mode
        self.requests = []
        self.heads = []  # each request's fields, as a dict
        self.bodies = []
        self.trailers = []  # each request's trailers, as a dict
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, sock):
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        c.initiate_connection()
        sock.sendall(c.data_to_send())
        heads, bodies, trailers = {}, {}, {}
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                events = c.receive_data(data)
            except h2.exceptions.ProtocolError:
                return  # after our GOAWAY (mode "goaway") sluice's frames are no longer taken
            for event in events:
                if isinstance(event, h2.events.RequestReceived):
                    heads[event.stream_id] = dict((k.decode(), v.decode()) for k, v in event.headers)
                if isinstance(event, h2.events.TrailersReceived):
                    trailers[event.stream_id] = dict((k.decode(), v.decode()) for k, v in event.headers)
                if isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if isinstance(event, h2.events.StreamEnded):
                    self.bodies.append(bodies.pop(event.stream_id, b""))
                    self.trailers.append(trailers.pop(event.stream_id, {}))
                    self.respond(c, event.stream_id, heads.pop(event.stream_id))
            sock.sendall(c.data_to_send())

    def respond(self, c, stream_id, head):
        self.requests.append((head[":method"], head[":path"]))
        self.heads.append(head)
        if self.mode == "refuse":
            c.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
        elif self.mode == "stall":
            pass
        elif self.mode == "goaway":
            c.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=0)
        else:
            body = ("from %s\n" % self.name).encode()
            c.send_headers(stream_id, [(":status", "200"), ("content-length", str(len(body)))])
            c.send_data(stream_id, body, end_stream=True)

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("mode", ["refuse", "goaway"])
def test_a_stream_the_server_never_processed_is_retried_whatever_the_method(sluice, mode):
    bad, good = H2Origin("bad", mode), H2Origin("good", "answer")
    try:
        s = sluice(sluice_config([bad.address, good.address], server_extra=H2C, upstream_extra='protocol = "h2c"'))
        for method in ("POST", "GET"):
            bad.requests.clear()
            good.requests.clear()
            p = subprocess.run(["curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-X", method,
                                *(["--data-binary", "payload"] if method == "POST" else []),
                                "-w", "\n%{http_code}", s.url("/x")], capture_output=True, timeout=15)
            assert p.stdout.decode().endswith("\n200"), (p.stdout, p.stderr)
            assert p.stdout.decode().startswith("from good\n")
            # Round robin: the request met the refusing server first or not at all.
            assert good.requests == [(method, "/x")]
            assert bad.requests in ([], [(method, "/x")])
        # Over both requests the refusing server was met once at least.
        s2 = sluice(sluice_config([bad.address], server_extra=H2C, upstream_extra='protocol = "h2c"')
                    + toml_table("admin", listen="127.0.0.1:0"), name="alone.toml")
        bad.requests.clear()
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-X", "POST",
                            "--data-binary", "payload", "-D", "-", "-o", "/dev/null", s2.url("/y")],
                           capture_output=True, timeout=15)
        head = p.stdout.decode().lower()
        assert head.startswith("http/2 502"), head
        assert "sluice-error: upstream refused the stream (never processed); not retried: no other server to try" in head
        assert bad.requests == [("POST", "/y")]
        assert upstream_figure(s2, "sluice_upstream_http2_goaways_total") == (1 if mode == "goaway" else 0)
    finally:
        bad.close()
        good.close()


class HealthService(Service):
    """Service's calls, and grpc.health.v1.Health/Check answering `status[service]` (1 SERVING,
    2 NOT_SERVING; a service not listed: NOT_FOUND, as grpc's own health servicer does)."""

    def __init__(self):
        super().__init__()
        self.status = {"": 1}
        self.asked = []

    def check(self, request, context):
        service = request[2:].decode() if request[:1] == b"\x0a" else ""  # field 1, one length byte
        self.asked.append(service)
        if service not in self.status:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return b"\x08" + bytes([self.status[service]])

    def handler(self):
        return super().handler(), grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": grpc.unary_unary_rpc_method_handler(self.check, ident, ident)})


def grpc_probed(sluice, port, upstream='protocol = "h2c"', **health):
    keys = dict(protocol="grpc", interval="100ms", timeout="80ms", fall=2, rise=2, jitter=0, **health)
    return sluice(sluice_config([f"127.0.0.1:{port}"], server_extra=H2C,
                                upstream_extra=upstream + "\n" + toml_table("upstreams.app.health", **keys))
                  + toml_table("admin", listen="127.0.0.1:0"))


def health_of(s, port):
    st = s.server_status(f"127.0.0.1:{port}")
    return st["health_state"], st.get("reason", "")


def test_grpc_health_probes_follow_the_serving_status_of_the_named_service(sluice, grpc_server):
    svc = HealthService()
    svc.status["app.v1.Orders"] = 1
    port = grpc_server(svc)
    s = grpc_probed(sluice, port, service="app.v1.Orders")
    wait_until(lambda: svc.asked, what="a probe")
    assert set(svc.asked) == {"app.v1.Orders"}
    assert health_of(s, port)[0] == "up"
    svc.status["app.v1.Orders"] = 2
    wait_until(lambda: health_of(s, port)[0] == "down", timeout=5, what="down on NOT_SERVING")
    assert "health status NOT_SERVING" in health_of(s, port)[1]
    with channel(s) as ch, pytest.raises(grpc.RpcError) as e:
        unary(ch, "Echo", b"x", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE  # no healthy server: sluice's own answer
    svc.status["app.v1.Orders"] = 1
    wait_until(lambda: health_of(s, port)[0] == "up", timeout=5, what="up again on SERVING")
    with channel(s) as ch:
        assert unary(ch, "Echo", b"abc", timeout=10) == b"cba"


def test_a_grpc_server_without_the_health_service_is_down_with_the_status_it_gave(sluice, grpc_server):
    port = grpc_server(Service())  # no grpc.health.v1.Health
    s = grpc_probed(sluice, port)
    wait_until(lambda: health_of(s, port)[0] == "down", timeout=5, what="down")
    reason = health_of(s, port)[1]
    assert reason.startswith("2 consecutive probe failures: grpc-status 12 (UNIMPLEMENTED)"), reason


def test_grpc_health_probes_over_tls_verify_the_server_and_negotiate_h2(sluice, grpc_server, pki):
    svc = HealthService()
    cert, key = pki.leaf("g.test", "DNS:g.test,IP:127.0.0.1")
    port = grpc_server(svc, credentials=grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())]))
    s = grpc_probed(sluice, port, upstream=f'protocol = "h2"\ntls = true\ntls_ca_file = "{pki.ca}"')
    wait_until(lambda: len(svc.asked) >= 3, what="three probes")
    assert health_of(s, port)[0] == "up"
    assert s.server_status(f"127.0.0.1:{port}")["last_probe"]["passed"] is True
    svc.status[""] = 2
    wait_until(lambda: health_of(s, port)[0] == "down", timeout=5, what="down on NOT_SERVING")


class Busy(Service):
    """Echo answers UNAVAILABLE (a server shedding load, or shutting down), trailers only."""

    def echo(self, request, context):
        self.note("Echo", context)
        context.abort(grpc.StatusCode.UNAVAILABLE, "busy")


@pytest.mark.parametrize("listed", [True, False])
def test_retry_on_a_listed_grpc_code(sluice, grpc_server, listed):
    """With `retry.on` listing grpc:unavailable, a call a server answered UNAVAILABLE (trailers
    only) goes to the other server, though every gRPC call is a POST; on the defaults it is
    never retried: the client gets the server's own UNAVAILABLE."""
    busy, good = Busy(), Service()
    busy_port, good_port = grpc_server(busy), grpc_server(good)
    retry = toml_table("upstreams.app.retry", on=["connect", "refused", "grpc:unavailable"]) if listed else ""
    s = sluice(sluice_config([f"127.0.0.1:{busy_port}", f"127.0.0.1:{good_port}"], server_extra=H2C,
                             upstream_extra='protocol = "h2c"') + retry)
    outcomes = []
    with channel(s) as ch:
        for i in range(4):
            try:
                outcomes.append(unary(ch, "Echo", b"call%d" % i, timeout=10))
            except grpc.RpcError as e:
                outcomes.append((e.code(), e.details()))
    busy_calls = len(busy.seen)
    assert busy_calls >= 1  # round robin: some calls met the busy server first
    if listed:
        assert outcomes == [b"%dllac" % i for i in range(4)]
        assert len(good.seen) == 4
    else:
        assert outcomes.count((grpc.StatusCode.UNAVAILABLE, "busy")) == busy_calls
        assert len(good.seen) == 4 - busy_calls
