"""A raw HTTP/1.1 keep-alive client for the parts wrk cannot do: readiness (time to first
successful request), idle connections (one request each, then silence; HTTP/1.1 or h2c) and the
bounded request loop run under valgrind. Content-Length responses only: every path the benchmark asks for gets
one from every origin and proxy.
"""
import socket
import time


class Connection:
    """One keep-alive client connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""

    def get(self, path="/"):
        """Sends `GET path` and reads the whole response; returns (status, body)."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        return self.read_response()

    def read_response(self):
        """Reads one whole response; returns (status, body)."""
        while b"\r\n\r\n" not in self._buf:
            self._fill()
        head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None:
            raise RuntimeError(f"response without Content-Length: {lines[0]!r}")
        while len(self._buf) < length:
            self._fill()
        body, self._buf = self._buf[:length], self._buf[length:]
        return status, body

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        self._buf += chunk

    def close(self):
        self.sock.close()


class H2Connection:
    """One HTTP/2 connection with prior knowledge (h2c), its frames written by hand: the preface,
    an empty SETTINGS, then `GET path` on stream 1 (HPACK: :method GET and :scheme http indexed,
    :path and :authority literal without indexing). The server's SETTINGS are acknowledged."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""

    @staticmethod
    def _frame(kind, flags, stream, payload=b""):
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

    def get_once(self, path="/"):
        """The connection's one request; returns its status (200 only: the answers here encode
        it as HPACK's indexed :status 200), once its stream ended."""
        literal = lambda index, value: bytes([index, len(value)]) + value.encode()
        block = b"\x82\x86" + literal(4, path) + literal(1, "bench")
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + self._frame(4, 0, 0)
                          + self._frame(1, 0x5, 1, block))  # HEADERS: END_STREAM | END_HEADERS
        status = None
        while True:
            kind, flags, stream, payload = self._next_frame()
            if kind == 4 and not flags & 1:
                self.sock.sendall(self._frame(4, 1, 0))  # SETTINGS ACK
            elif kind == 7:
                raise ConnectionError("GOAWAY from the server")
            elif stream == 1 and kind == 1 and status is None:
                status = 200 if payload[:1] == b"\x88" else 0
            elif stream == 1 and kind == 3:
                raise ConnectionError("stream 1 reset by the server")
            if stream == 1 and kind in (0, 1) and flags & 1:
                return status

    def _next_frame(self):
        while len(self._buf) < 9 or len(self._buf) < 9 + int.from_bytes(self._buf[:3], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self._buf += chunk
        length = int.from_bytes(self._buf[:3], "big")
        kind, flags = self._buf[3], self._buf[4]
        stream = int.from_bytes(self._buf[5:9], "big") & 0x7FFFFFFF
        payload, self._buf = self._buf[9:9 + length], self._buf[9 + length:]
        return kind, flags, stream, payload

    def close(self):
        self.sock.close()


def wait_first_ok(port, started_at, timeout, alive=lambda: True):
    """Polls `GET /` every millisecond until a 200 arrives; returns seconds since `started_at`
    (a time.monotonic() value). Raises if `alive()` turns false or `timeout` passes."""
    deadline = started_at + timeout
    while True:
        try:
            conn = Connection(port, timeout=max(0.5, deadline - time.monotonic()))
            try:
                status, _ = conn.get("/")
            finally:
                conn.close()
            if status == 200:
                return time.monotonic() - started_at
        except OSError:
            pass
        if not alive():
            raise RuntimeError(f"process for port {port} exited before answering")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no 200 on port {port} within {timeout}s")
        time.sleep(0.001)


def open_idle(port, count, path="/", h2=False):
    """Opens `count` connections (HTTP/1.1, or h2c with `h2`), each after one complete request,
    and leaves them idle."""
    conns = []
    try:
        for _ in range(count):
            conn = H2Connection(port) if h2 else Connection(port)
            status = conn.get_once(path) if h2 else conn.get(path)[0]
            if status != 200:
                raise RuntimeError(f"idle connection setup got status {status}")
            conns.append(conn)
    except BaseException:
        close_all(conns)
        raise
    return conns


def burst(port, count, path="/"):
    """`count` connections open at once, each sending a partial head (the request line and
    Host), then each completing it; every response read, then every connection closed.
    Raises on any non-200."""
    conns = []
    try:
        for _ in range(count):
            conns.append(Connection(port, timeout=30.0))
        for conn in conns:
            conn.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n".encode())
        for conn in conns:
            conn.sock.sendall(b"X-Burst: 1\r\n\r\n")
        for conn in conns:
            status, _ = conn.read_response()
            if status != 200:
                raise RuntimeError(f"burst request got status {status}")
    finally:
        close_all(conns)


def still_open(conns):
    """How many of the idle connections the server has not closed (no EOF readable)."""
    open_count = 0
    for conn in conns:
        conn.sock.setblocking(False)
        try:
            if conn.sock.recv(1, socket.MSG_PEEK) == b"":
                continue
        except BlockingIOError:
            pass  # nothing to read: still open
        except OSError:
            continue
        finally:
            conn.sock.setblocking(True)
        open_count += 1
    return open_count


def close_all(conns):
    for conn in conns:
        conn.close()


def request_loop(port, count, path="/"):
    """`count` sequential requests on one keep-alive connection; raises on any non-200."""
    conn = Connection(port, timeout=60.0)
    try:
        for _ in range(count):
            status, _ = conn.get(path)
            if status != 200:
                raise RuntimeError(f"request loop got status {status}")
    finally:
        conn.close()


def latency_run(port, requests, clients, timeout=180.0):
    """`requests` keep-alive `GET /`s shared by `clients` threads, each on its own connection.
    Returns (every request's latency in seconds, answers per body — the origin's name with
    sluice-origin —, errors). Bounded: `timeout` seconds in all."""
    import threading
    latencies, bodies, errors = [], {}, []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout
    share = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]

    def run(n):
        mine, seen = [], {}
        try:
            conn = Connection(port, timeout=30.0)
            try:
                for _ in range(n):
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"latency run past {timeout} s")
                    start = time.perf_counter()
                    status, body = conn.get("/")
                    mine.append(time.perf_counter() - start)
                    if status != 200:
                        raise RuntimeError(f"status {status}")
                    key = body.decode("latin-1").strip()
                    seen[key] = seen.get(key, 0) + 1
            finally:
                conn.close()
        except Exception as e:  # counted with the others'
            with lock:
                errors.append(repr(e))
        with lock:
            latencies.extend(mine)
            for k, v in seen.items():
                bodies[k] = bodies.get(k, 0) + v

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in share]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline + 10 - time.monotonic()))
    if any(t.is_alive() for t in threads):
        errors.append("client threads still running")
    return latencies, bodies, errors
