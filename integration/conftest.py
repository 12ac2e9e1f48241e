"""Harness for sluice's integration tests: real binaries on ephemeral loopback ports.

Every process a test starts is ended by the fixture that started it, by PID. Waits are for
conditions with deadlines (a line on a pipe, a port that accepts), never fixed sleeps.
"""
import datetime
import hashlib
import json
import os
import pathlib
import re
import resource
import select
import signal
import socket
import subprocess
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("SLUICE_BUILD_DIR", ROOT / "build" / "release"))
SLUICE = BUILD / "sluice"
ORIGIN = BUILD / "sluice-origin"
CLIENT = BUILD / "sluice-test-client"


def _sanitizers():
    """SLUICE_SANITIZE of the build under test ("" for none), from its CMake cache."""
    try:
        for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("SLUICE_SANITIZE:"):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


# Under ASan/UBSan/TSan every sluice a test started must end with no report on its stderr (the
# sanitizers print there; UBSan and ASan abort on the first one, see scripts/test.sh).
SANITIZED = _sanitizers() != ""
SANITIZER_REPORT = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer")


def wait_for_line(proc, stream, pattern, timeout=10.0, sink=None):
    """Reads `stream` line by line until `pattern` matches; returns the match. Lines read are
    appended to `sink` (a list) so that later assertions can look at them."""
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    buf = b""
    fd = stream.fileno()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no line matching {pattern!r} within {timeout}s; got {buf[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError(f"stream closed (exit {proc.poll()}) before {pattern!r}; got {buf[-2000:]!r}")
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            if sink is not None:
                sink.append(text)
            m = rx.search(text)
            if m:
                if buf and sink is not None:
                    sink.append(buf.decode(errors="replace"))
                return m


class LogReader:
    """Collects a process's stderr lines on demand (non-blocking)."""

    def __init__(self, proc, stream):
        self.proc, self.stream, self.lines, self._partial = proc, stream, [], b""
        os.set_blocking(stream.fileno(), False)

    def poll(self):
        while True:
            try:
                chunk = os.read(self.stream.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._partial += chunk
            *lines, self._partial = self._partial.split(b"\n")
            self.lines.extend(l.decode(errors="replace") for l in lines)
        return self.lines

    def wait_for(self, pattern, timeout=10.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.poll():
                if rx.search(line):
                    return line
            select.select([self.stream.fileno()], [], [], 0.05)
        raise TimeoutError(f"no log line matching {pattern!r}; have {self.lines[-20:]}")


class Origin:
    def __init__(self, name, extra_args=(), port=0):
        """`port`: 0 lets the OS pick; a given port brings an origin back where a killed one was."""
        self.name = name
        self.proc = subprocess.Popen(
            [str(ORIGIN), "--listen", f"127.0.0.1:{port}", "--name", name, *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        m = wait_for_line(self.proc, self.proc.stdout, r"listening 127\.0\.0\.1:(\d+)")
        self.port = int(m.group(1))
        self.address = f"127.0.0.1:{self.port}"

    def url(self, path="/"):
        return f"http://{self.address}{path}"

    def stats(self):
        with urllib.request.urlopen(self.url("/stats"), timeout=5) as r:
            return json.loads(r.read())

    def reset_stats(self):
        req = urllib.request.Request(self.url("/stats/reset"), method="POST", data=b"")
        urllib.request.urlopen(req, timeout=5).read()

    def set_health(self, code):
        """What its /health answers from now on (200 restores)."""
        req = urllib.request.Request(self.url(f"/health/status?code={code}"), method="POST",
                                     data=b"")
        urllib.request.urlopen(req, timeout=5).read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


ADMIN_LISTENING = re.compile(r"admin listening on 127\.0\.0\.1:(\d+)")


def with_error_detail(toml_text):
    """`toml_text` with `[server] error_detail = "full"` unless it sets error_detail itself: the
    tests read sluice's reasons from its answers (Sluice-Error, the body), which the default
    ("status") keeps to the access log; tests of the default set it explicitly. The line takes
    the place of the [server] table's first blank line where it has one, so that the lines a
    test's expected errors name stay where they were."""
    if re.search(r"^\s*error_detail\s*=", toml_text, re.M):
        return toml_text
    line = 'error_detail = "full"'
    server = re.search(r"^[ \t]*\[server\][ \t]*(#.*)?$", toml_text, re.M)
    if server is None:
        return f"[server]\n{line}\n" + toml_text
    table_end = re.compile(r"^[ \t]*\[", re.M).search(toml_text, server.end())
    end = table_end.start() if table_end else len(toml_text)
    blank = re.compile(r"^[ \t]*$", re.M).search(toml_text, server.end() + 1, end)
    if blank is not None and blank.start() < end:
        return toml_text[:blank.start()] + line + toml_text[blank.end():]
    return toml_text[:server.end()] + "\n" + line + toml_text[server.end():]


class ConfigPath(type(pathlib.Path())):
    """The path of a Sluice's config: what a test writes there (a reload) gets
    with_error_detail() too, as the first config did."""

    def write_text(self, data, *args, **kwargs):
        return super().write_text(with_error_detail(data), *args, **kwargs)


class Sluice:
    """A running sluice with a config written from `upstreams` and `extra` TOML text (with
    error_detail = "full" unless it says otherwise: with_error_detail())."""

    def __init__(self, tmp_path, toml_text, name="sluice.toml", wait_signals=True, nofile=None,
                 env=None, launcher=(), pass_fds=()):
        """`nofile`: the RLIMIT_NOFILE (soft and hard) sluice runs with; None inherits ours.
        `env`: extra environment variables. `launcher`: a command that execs sluice's command line
        (appended to it), with `pass_fds` inherited (socket activation)."""
        self.config_path = ConfigPath(tmp_path / name)
        self.config_path.write_text(toml_text)

        def limit_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.proc = subprocess.Popen(
            [*launcher, str(SLUICE), "run", "--config", str(self.config_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **env} if env else None, pass_fds=pass_fds,
            preexec_fn=limit_fds if nofile is not None else None)
        self.log = LogReader(self.proc, self.proc.stderr)
        self._access = None  # stdout, read on demand by access_records()
        line = self.log.wait_for(r"listening on 127\.0\.0\.1:(\d+)")
        self.port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
        self.log.wait_for(r"sluice .* started")
        self.address = f"127.0.0.1:{self.port}"
        # "admin listening on ..." comes before "started" when the config has an [admin] section.
        admin = next((m for m in map(ADMIN_LISTENING.search, self.log.lines) if m), None)
        self.admin_port = int(admin.group(1)) if admin else None
        if wait_signals:
            # A SIGTERM that arrives before the handlers are installed kills sluice outright. It
            # installs them before it logs "started" (test_cli.py pins that); this guard keeps a
            # regression there from turning every lifecycle test flaky.
            wait_until(self.signals_ready, timeout=5, interval=0.005, what="signal handlers")

    def signals_ready(self):
        """True once SIGHUP, SIGINT and SIGTERM are caught (SigCgt in /proc/PID/status)."""
        wanted = sum(1 << (sig - 1) for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM))
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16) & wanted == wanted
        return False

    def url(self, path="/"):
        return f"http://{self.address}{path}"

    @property
    def admin_address(self):
        return f"127.0.0.1:{self.admin_port}"

    def admin(self, method, path, token=None, timeout=5.0):
        """One admin API request on a fresh connection; returns the Response."""
        assert self.admin_port is not None, "this sluice has no [admin] section"
        headers = [("Authorization", f"Bearer {token}")] if token is not None else []
        if method == "POST":  # what the admin listener asks of a POST (docs/admin.md)
            headers.append(("Content-Type", "application/json"))
        return timed_request(self.admin_port, method, path, headers=headers, timeout=timeout,
                             host=self.admin_address)[0]

    def log_time(self, pattern, timeout=10.0):
        """The timestamp (seconds, millisecond resolution) of the first stderr line matching
        `pattern`, waiting for it: sluice's own clock, for intervals between two of its events."""
        line = self.log.wait_for(pattern, timeout=timeout)
        stamp = datetime.datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%f%z")
        return stamp.timestamp()

    def access_records(self, n=1, timeout=5.0):
        """The JSON access log records written so far (config `access = "json"`), waiting until
        there are at least `n`. Their `duration_ms` is sluice's own measure of an exchange, for
        timing assertions that must not include the test's own polling."""
        if self._access is None:
            self._access = LogReader(self.proc, self.proc.stdout)
        def enough():
            return len([l for l in self._access.poll() if l.startswith("{")]) >= n
        wait_until(enough, timeout=timeout, what=f"{n} access log records")
        return [json.loads(l) for l in self._access.lines if l.startswith("{")]

    def status(self):
        """GET /api/status, parsed."""
        r = self.admin("GET", "/api/status")
        assert r.status == 200, r
        return r.json()

    def server_status(self, server, upstream="app"):
        """The /api/status entry of one server (by identity)."""
        for u in self.status()["upstreams"]:
            if u["name"] == upstream:
                for s in u["servers"]:
                    if s["identity"] == server:
                        return s
        raise KeyError(f"no server {server!r} in upstream {upstream!r}")

    def metrics_text(self):
        r = self.admin("GET", "/metrics")
        assert r.status == 200, r
        return r.body.decode()

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def sanitizer_reports(self):
        """Sanitizer reports on stderr (each with the 40 lines after it), once it has exited."""
        lines = self.log.poll()
        found = []
        for i, line in enumerate(lines):
            if SANITIZER_REPORT.search(line):
                found.append("\n".join(lines[i:i + 40]))
        return found

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def peak_rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def toml_value(v):
    """A Python value as TOML: str -> quoted string, bool -> true/false, others as written."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else str(v)


def sluice_config(origins, *, upstream="app", server_extra="", upstream_extra="", top="",
                  workers=1, access="off", balance="round_robin", server_keys=None):
    """A TOML config with one upstream over `origins` (Origin objects or address strings).
    `server_keys` maps a server's name (or address, for a string) to extra keys of its
    `[[servers]]` table, e.g. {"app-1": {"weight": 3, "backup": True}}."""
    server_keys = server_keys or {}

    def server(o):
        key, address = (o, o) if isinstance(o, str) else (o.name, o.address)
        return (f'\n[[upstreams.{upstream}.servers]]\naddress = "{address}"\n'
                + ("" if isinstance(o, str) else f'name = "{o.name}"\n')
                + "".join(f"{k} = {toml_value(v)}\n" for k, v in server_keys.get(key, {}).items()))
    servers = "".join(server(o) for o in origins)
    return textwrap.dedent(f"""\
        [server]
        listen = ["127.0.0.1:0"]
        workers = {workers}
        {server_extra}

        [log]
        level = "info"
        access = "{access}"

        {top}

        [upstreams.{upstream}]
        balance = "{balance}"
        {upstream_extra}
        """) + servers


def raw_request(port, data, timeout=5.0, read_until_close=True):
    """Sends raw bytes, returns every byte the server sent until it closed (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if not read_until_close:
                break
        return b"".join(chunks)


# docs/architecture.md: timeouts are enforced by the worker's 25 ms tick, so one expires within
# [configured, configured + 25 ms]. Timing assertions allow that tick plus SCHEDULING_SLACK for a
# loaded CI machine on the upper side only: never below the configured value (that would accept
# a premature expiry).
TICK = 0.025
SCHEDULING_SLACK = 0.25  # a 2-core CI machine shared with builds: 100+ ms stalls were seen
LOG_RESOLUTION = 0.001  # stderr timestamps are in milliseconds (truncated)


def assert_expired_on_time(seconds, configured, what="timeout"):
    """`seconds` (sluice's own measure, e.g. an access log duration) is a timeout of
    `configured` seconds that fired within its documented precision."""
    assert configured <= seconds <= configured + TICK + SCHEDULING_SLACK, \
        f"{what}: {seconds:.3f}s for a configured {configured:.3f}s"


def metric_samples(s, name, **labels):
    """The values of sluice `s`'s /metrics samples `name` whose labels include `labels`."""
    from prometheus_client.parser import text_string_to_metric_families
    return [sample.value
            for family in text_string_to_metric_families(s.metrics_text())
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())]


def metric(s, name, **labels):
    """The value of one sample of sluice `s`'s /metrics (0 when absent)."""
    values = metric_samples(s, name, **labels)
    assert len(values) <= 1, (name, labels, values)
    return values[0] if values else 0


def gone(pid):
    """True once `pid` has exited (a zombie counts: it serves nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until(predicate, timeout=5.0, interval=0.02, what="condition"):
    """Polls `predicate` until it returns a truthy value (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not met within {timeout}s (last value {value!r})")
        time.sleep(interval)


def closed_port():
    """A loopback port that nothing listens on: bound by us (so the OS picked it), then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_client(*args, timeout=60):
    """Runs sluice-test-client with `args`; returns (exit code, its JSON summary)."""
    p = subprocess.run([str(CLIENT), "--timeout", str(timeout), *map(str, args)],
                       capture_output=True, timeout=timeout + 10)
    out = p.stdout.decode(errors="replace").strip()
    try:
        summary = json.loads(out.splitlines()[-1]) if out else {}
    except json.JSONDecodeError:
        summary = {"unparsed": out}
    if p.stderr:
        summary.setdefault("stderr", p.stderr.decode(errors="replace"))
    return p.returncode, summary


class Response:
    def __init__(self, status, version, headers, body):
        self.status, self.version, self.headers, self.body = status, version, headers, body

    def header(self, name, default=None):
        """The value of the first field called `name` (case-insensitive)."""
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"Response({self.status}, {self.headers!r}, {self.body[:200]!r})"


class Conn:
    """A raw client connection that can read HTTP/1.1 responses one at a time: for keep-alive,
    pipelining and the exact bytes on the wire. Every read is bounded by `timeout`."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no complete response in time; have {self.buf[:300]!r}")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            raise TimeoutError(f"no complete response in time; have {self.buf[:300]!r}")
        if not chunk:
            raise EOFError(f"connection closed; have {self.buf[:300]!r}")
        self.buf += chunk

    def _take_line(self, deadline):
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_raw_head(self, timeout=None):
        """The next response head as raw bytes (up to, not including, the blank line), consumed."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b"\r\n\r\n" not in self.buf:
            self._fill(deadline)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head

    def read_response(self, head=False, timeout=None, interim=False):
        """The next response (1xx skipped unless `interim`). `head`: it answers a HEAD."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            status_line = self._take_line(deadline).decode("latin-1")
            version, code = status_line.split(" ", 2)[:2]
            headers = []
            while True:
                line = self._take_line(deadline)
                if not line:
                    break
                if b":" not in line:
                    raise AssertionError(f"malformed header line {line!r} in {status_line!r}")
                k, v = line.decode("latin-1").split(":", 1)
                headers.append((k.strip(), v.strip()))
            status = int(code)
            if 100 <= status < 200 and not interim:
                continue
            r = Response(status, version, headers, b"")
            break
        if head or status < 200 or status in (204, 304):
            return r
        te = (r.header("Transfer-Encoding") or "").lower()
        cl = r.header("Content-Length")
        if te.endswith("chunked"):
            body = b""
            while True:
                size = int(self._take_line(deadline).split(b";")[0], 16)
                if size == 0:
                    while self._take_line(deadline):  # trailers up to the empty line
                        pass
                    break
                body += self._take(size, deadline)
                assert self._take(2, deadline) == b"\r\n", "chunk data not followed by CRLF"
        elif cl is not None:
            body = self._take(int(cl), deadline)
        else:  # close-delimited
            try:
                while True:
                    self._fill(deadline)
            except EOFError:
                pass
            body, self.buf = self.buf, b""
        r.body = body
        return r

    def request(self, data, head=False, timeout=None):
        self.send(data)
        return self.read_response(head=head, timeout=timeout)

    def wait_closed(self, timeout=5.0):
        """True when the peer closes (EOF or reset) within `timeout`, with no further bytes;
        raises if bytes arrive, returns False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk
            raise AssertionError(f"unexpected bytes while waiting for close: {self.buf[:300]!r}")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def timed_request(port, method="GET", target="/", headers=(), body=b"", timeout=10.0, host="t"):
    """One request on a fresh connection (Content-Length framing for a body, and for POST and
    PUT); returns (Response, seconds from sending it to having read the answer)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers)]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with Conn(port, timeout=timeout) as c:
        start = time.monotonic()
        c.send(data)
        r = c.read_response()
        return r, time.monotonic() - start


def toml_table(name, **keys):
    """`[name]` with `keys` as TOML values (see toml_value), for the
    `upstream_extra` of sluice_config."""
    return f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())


def curl(*args, timeout=30):
    """Runs curl; returns (status_code, headers dict lowercased, body bytes)."""
    return curl_with_code(*args, timeout=timeout)[:3]


def curl_with_code(*args, timeout=30):
    """curl(), and curl's exit code (18: the body ended short)."""
    cmd = ["curl", "-sS", "-o", "-", "-D", "/dev/stderr", "--max-time", str(timeout), *args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout + 5)
    status, headers = 0, {}
    for line in p.stderr.decode(errors="replace").splitlines():
        if line.startswith("HTTP/"):
            status, headers = int(line.split()[1]), {}
        elif ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers, p.stdout, p.returncode


@pytest.fixture
def origins():
    started = []

    def start(n=3, prefix="app", extra_args=()):
        new = [Origin(f"{prefix}-{i + 1}", extra_args) for i in range(n)]
        started.extend(new)
        return new

    def restart(origin, extra_args=()):
        """A new origin process with `origin`'s name on `origin`'s port (the old one must be
        gone): a server that comes back after a crash."""
        new = Origin(origin.name, extra_args, port=origin.port)
        started.append(new)
        return new

    start.restart = restart
    yield start
    for o in started:
        o.stop()


# How long a sanitized sluice gets to stop at a test's end: the default shutdown_timeout (30 s,
# docs/configuration.md) and 15 s for the sanitizers' exit checks.
SANITIZED_STOP_LIMIT_S = 45


@pytest.fixture
def sluice(tmp_path):
    started = []

    def start(toml_text, name="sluice.toml", nofile=None, **kwargs):
        s = Sluice(tmp_path, toml_text, name, nofile=nofile, **kwargs)
        started.append(s)
        return s

    yield start
    reports = []
    for s in started:
        if s.proc.poll() is None:
            if SANITIZED:
                # A graceful stop, so that LeakSanitizer's check at exit runs too. A test that
                # leaves a request held at a hanging origin (its origins stop after this fixture)
                # waits out the whole default shutdown_timeout (30 s) here: the limit is above it,
                # not equal to it (a sanitized build on a slow machine lost that race).
                try:
                    s.stop(timeout=SANITIZED_STOP_LIMIT_S)
                except subprocess.TimeoutExpired:
                    reports.append(f"sluice {s.proc.pid} did not stop within {SANITIZED_STOP_LIMIT_S} s of SIGTERM")
            else:
                s.proc.kill()
                s.proc.wait()
        if SANITIZED:
            reports += s.sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)


class ConnRecord:
    """What one accepted connection delivered, as the origin saw it: `received`, every byte that
    arrived, in order (what the server read, plus what was still unread in the socket when it
    closed: `unread` counts those); `eof`, the peer (sluice) closed its side; `reset`, the peer
    reset the connection; `opened` / `closed`, time.monotonic() stamps."""

    def __init__(self, index):
        self.index = index
        self.received = bytearray()
        self.eof = self.reset = False
        self.unread = 0
        self.parsed_until = 0  # servers that parse: bytes of `received` that were whole messages
        self.opened, self.closed = time.monotonic(), None

    def __repr__(self):
        end = "eof" if self.eof else "reset" if self.reset else "open" if self.closed is None \
            else "closed by origin"
        return f"<conn {self.index}: {len(self.received)} bytes, {end}: {bytes(self.received)[:200]!r}>"


class _RecordingSocket:
    """The accepted socket, as a server's _serve sees it: every recv() lands in the connection's
    ConnRecord before the server looks at it, so no server can forget to record a byte."""

    def __init__(self, sock, record, server):
        self._sock, self.record, self._server = sock, record, server

    def recv(self, n, *flags):
        try:
            data = self._sock.recv(n, *flags)
        except ConnectionResetError:
            with self._server._lock:
                self.record.reset = True
            raise
        with self._server._lock:
            if data:
                self.record.received += data
            elif not self._server._stopping.is_set():  # not our own shutdown() in stop()
                self.record.eof = True
        return data

    def close(self):
        # Peek (not read: a close with unread bytes must still reset, as before) at what arrived
        # but was never read, so `received` is everything sluice sent before we closed.
        try:
            pending = self._sock.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:
            pending = b""
        with self._server._lock:
            self.record.received += pending
            self.record.unread = len(pending)
            self.record.closed = time.monotonic()
        self._sock.close()

    def __getattr__(self, name):
        return getattr(self._sock, name)


class ThreadedServer:
    """A loopback TCP server inside the test process: one thread accepts, one thread per
    connection runs `self._serve(conn, *self._accepted(conn))`. Subclasses set their own state
    first, then call `super().__init__()` (which starts accepting); `stop()` closes the listener
    and every connection and joins the threads.

    Every server records the origin's view of each connection it accepted (`conns`, a list of
    ConnRecord: every byte received, EOF, reset), whatever its _serve parses: `accepted` (how
    many connections), `bytes_received()` (all bytes, all connections), `unparsed()` (bytes not
    part of a whole parsed request: half-forwarded messages), `wait_closed(i)`, and `settle()`
    to call first, so that no byte still in flight inside the test process is missed. A test of a
    rejected request asserts on these: usually no connection, or no byte of the bad message."""

    def __init__(self):
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._socks, self._threads = [], []
        self.conns = []
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._spawn(self._accept_loop)

    @property
    def accepted(self):
        with self._lock:
            return len(self.conns)

    def bytes_received(self, index=None):
        """The bytes connection `index` delivered, or those of every connection joined."""
        with self._lock:
            if index is not None:
                return bytes(self.conns[index].received)
            return b"".join(bytes(c.received) for c in self.conns)

    def wait_closed(self, index, timeout=5.0):
        """Until connection `index` has ended (EOF, reset, or closed by this server)."""
        wait_until(lambda: self.accepted > index and (
            self.conns[index].eof or self.conns[index].reset
            or self.conns[index].closed is not None),
            timeout=timeout, what=f"origin connection {index} to end")
        return self.conns[index]

    def settle(self, timeout=5.0):
        """Until every byte that has arrived on any open connection was read (and so recorded),
        and every connection the peer closed was seen closing: call it before asserting on what
        the origin received, so the answer the client got cannot outrun the origin's records."""
        def quiet():
            with self._lock:
                pending = [(c, s) for c, s in zip(self.conns, self._socks) if c.closed is None]
            for c, s in pending:
                try:
                    readable, _, _ = select.select([s], [], [], 0)
                except (OSError, ValueError):  # closed meanwhile
                    continue
                if readable and c.closed is None:
                    return False
            return True
        wait_until(quiet, timeout=timeout, what="origin reading every byte that arrived")

    def unparsed(self):
        """Per connection, the bytes received that are not part of a message the server parsed
        whole: a half request, stray bytes, an unread tail. {} when every byte that arrived
        belonged to a whole request."""
        with self._lock:
            return {c.index: bytes(c.received[c.parsed_until:]) for c in self.conns
                    if len(c.received) > c.parsed_until}

    @staticmethod
    def _parsed(conn, rest):
        """Under the lock, after a whole message was parsed from `conn` with `rest` left over:
        marks its bytes parsed and returns them."""
        record = conn.record
        end = len(record.received) - len(rest)
        raw, record.parsed_until = bytes(record.received[record.parsed_until:end]), end
        return raw

    def _accepted(self, conn):
        """Called under the lock for each new connection; returns extra arguments of _serve."""
        return ()

    def _serve(self, conn, *args):
        raise NotImplementedError

    def _spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._socks.append(sock)
                record = ConnRecord(len(self.conns))
                self.conns.append(record)
                conn = _RecordingSocket(sock, record, self)
                args = self._accepted(conn)
            self._spawn(self._serve, conn, *args)

    def stop(self):
        self._stopping.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(timeout=5)


class ScriptedOrigin(ThreadedServer):
    """An origin inside the test process that does what a test tells it, for the stories the real
    origin cannot tell when its query knobs would reach every server: `behaviour` is "answer"
    (`status`, keep-alive), "drop" (read the whole request, then close without answering),
    "hang" (read the whole request, never answer) or "once" (answer the first request of each
    connection, drop the second: a keep-alive connection closed just as a request arrived). It
    records every request it read completely
    (`executed`: `conn` index, method, target, lower-cased headers, body length, `body_sha256`,
    `trailers` as (lower-cased name, value) pairs), so a test can say "executed exactly once";
    every byte of every connection is in `conns` (ThreadedServer). One thread per connection;
    `stop()` closes everything and joins them."""

    def __init__(self, name, behaviour="answer", status=200, delay=0.0, headers=""):
        self.name, self.behaviour, self.status = name, behaviour, status
        self.delay = delay  # seconds to wait before each answer ("answer" and "once")
        self.headers = headers  # extra header lines of each answer, each ending in CRLF
        self.executed = []
        self.connections = 0
        super().__init__()

    def count(self, method=None):
        with self._lock:
            return sum(1 for r in self.executed if method is None or r["method"] == method)

    def _accepted(self, conn):
        self.connections += 1
        return ()

    @staticmethod
    def _read_until(conn, buf, marker):
        while marker not in buf:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return None
            buf += chunk
        return buf

    @staticmethod
    def _fields(lines):
        fields = []
        for line in lines:
            k, v = line.split(":", 1)
            fields.append((k.strip().lower(), v.strip()))
        return fields

    def _read_chunked(self, conn, buf, digest):
        """A chunked body into `digest`: (body bytes, trailers, rest) or None at EOF."""
        body_bytes = 0
        while True:
            buf = self._read_until(conn, buf, b"\r\n")
            if buf is None:
                return None
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            while len(buf) < size + 2:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return None
                buf += chunk
            digest.update(buf[:size])
            body_bytes += size
            buf = buf[size + 2:]
        if buf.startswith(b"\r\n"):  # no trailer section
            return body_bytes, [], buf[2:]
        buf = self._read_until(conn, buf, b"\r\n\r\n")  # RFC 9112 7.1.2: trailers, empty line
        if buf is None:
            return None
        section, buf = buf.split(b"\r\n\r\n", 1)
        return body_bytes, self._fields(section.decode("latin-1").split("\r\n")), buf

    def _read_sized(self, conn, buf, left, digest):
        """A Content-Length body into `digest`: (body bytes, rest) or None at EOF."""
        take = min(left, len(buf))
        digest.update(buf[:take])
        body_bytes, left, buf = take, left - take, buf[take:]
        while left > 0:
            chunk = conn.recv(min(left, 1 << 20))
            if not chunk:
                return None
            digest.update(chunk)
            body_bytes += len(chunk)
            left -= len(chunk)
        return body_bytes, buf

    def _read_request(self, conn, buf):
        """One request from `conn` (Content-Length or chunked body). Returns (record, rest) or
        (None, b"") when the peer closed first."""
        buf = self._read_until(conn, buf, b"\r\n\r\n")
        if buf is None:
            return None, b""
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, target = lines[0].split(" ")[:2]
        headers = dict(self._fields(lines[1:]))
        digest, trailers = hashlib.sha256(), []
        if headers.get("transfer-encoding", "").lower() == "chunked":
            got = self._read_chunked(conn, buf, digest)
            if got is None:
                return None, b""
            body_bytes, trailers, buf = got
        else:
            got = self._read_sized(conn, buf, int(headers.get("content-length", "0")), digest)
            if got is None:
                return None, b""
            body_bytes, buf = got
        return {"conn": conn.record.index, "method": method, "target": target,
                "headers": headers, "body_bytes": body_bytes,
                "body_sha256": digest.hexdigest(), "trailers": trailers}, buf

    def _serve(self, conn):
        buf, served = b"", 0
        try:
            while not self._stopping.is_set():
                record, buf = self._read_request(conn, buf)
                if record is None:
                    return
                with self._lock:
                    self._parsed(conn, buf)
                    self.executed.append(record)
                served += 1
                if self.behaviour == "drop" or (self.behaviour == "once" and served > 1):
                    return
                if self.behaviour == "hang":
                    conn.settimeout(0.1)
                    while not self._stopping.is_set():  # until sluice gives up on us
                        try:
                            if not conn.recv(1 << 16):
                                return
                        except socket.timeout:
                            continue
                    return
                if self.delay and self._stopping.wait(self.delay):
                    return
                body = f"{self.name}\n".encode()
                conn.sendall(f"HTTP/1.1 {self.status} X\r\nX-Origin: {self.name}\r\n{self.headers}"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture
def scripted():
    """Starts ScriptedOrigins: `scripted(name, behaviour, status, delay, headers)`; stops them all
    at the end."""
    started = []

    def start(name, behaviour="answer", status=200, delay=0.0, headers=""):
        o = ScriptedOrigin(name, behaviour, status, delay, headers)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def sluice_cli(*args, timeout=30):
    """Runs `sluice ARGS` (reload, drain, undrain, check); returns the CompletedProcess (text)."""
    return subprocess.run([str(SLUICE), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


class Load:
    """Steady GETs (or `method` with `body`) from a background thread: about `rate` per second
    over a keep-alive connection, a fresh connection every `fresh_every` requests (and after any
    error), until `stop()`, `max_seconds` or `max_requests`. `keyed`: each request carries its
    own `Idempotency-Key`. Every exchange is recorded as a Record."""

    class Record:
        __slots__ = ("sent", "done", "status", "origin", "error")

        def __init__(self, sent, done, status, origin, error):
            self.sent, self.done, self.status = sent, done, status
            self.origin, self.error = origin, error

        def __repr__(self):
            return f"Record(+{self.sent:.3f}s {self.status} {self.origin} {self.error})"

    def __init__(self, port, rate=150, target="/", headers=(), fresh_every=10, max_seconds=20,
                 max_requests=5000, timeout=5.0, method="GET", body=b"", keyed=False):
        self.port, self.rate, self.target, self.fresh_every = port, rate, target, fresh_every
        self.max_seconds, self.max_requests, self.timeout = max_seconds, max_requests, timeout
        lines = [f"{method} {target} HTTP/1.1", "Host: t", *(f"{k}: {v}" for k, v in headers)]
        if body or method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(body)}")
        self.head, self.body, self.keyed = "\r\n".join(lines), body, keyed
        self.request = (self.head + "\r\n\r\n").encode() + body
        self.records = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=self.timeout + 5)
        assert not self._thread.is_alive(), "load thread did not stop"
        return self.records

    def _run(self):
        conn = None
        for i in range(self.max_requests):
            due = self.t0 + i / self.rate
            if due - self.t0 > self.max_seconds:
                break
            if self._stop.wait(max(0.0, due - time.monotonic())):
                break
            sent = time.monotonic()
            try:
                if conn is None or i % self.fresh_every == 0:
                    if conn is not None:
                        conn.close()
                    conn = Conn(self.port, timeout=self.timeout)
                r = conn.request(self._request(i))
                self.records.append(Load.Record(sent - self.t0, time.monotonic() - self.t0,
                                                r.status, r.header("X-Origin"), None))
                if (r.header("Connection") or "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, EOFError, TimeoutError, ValueError) as e:
                self.records.append(Load.Record(sent - self.t0, time.monotonic() - self.t0,
                                                None, None, repr(e)))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _request(self, i):
        if not self.keyed:
            return self.request
        return (f"{self.head}\r\nIdempotency-Key: load-{id(self)}-{i}\r\n\r\n").encode() + self.body

    def now(self):
        """Seconds since the load started, on the records' clock."""
        return time.monotonic() - self.t0

    def wait_for_more(self, n, timeout=10.0):
        """Waits until the client has completed `n` more requests: an observation window measured
        in traffic, not in wall-clock time."""
        target = len(self.records) + n
        wait_until(lambda: len(self.records) >= target, timeout=timeout, interval=0.005,
                   what=f"{n} more requests")

    def failures(self):
        """Records of exchanges that did not end in a 200."""
        return [r for r in self.records if r.status != 200]

    def origins(self, since=0.0, until=float("inf")):
        """{X-Origin: count} of the answers to requests sent within [since, until)."""
        counts = {}
        for r in list(self.records):
            if since <= r.sent < until and r.origin is not None:
                counts[r.origin] = counts.get(r.origin, 0) + 1
        return counts


class Background:
    """`n` requests sent at once, each on its own connection from its own thread (e.g. slow ones
    to hold a server busy). `join()` returns [(Response or the exception, monotonic time done)]
    in the order they were started."""

    def __init__(self, port, n, target="/", headers=(), timeout=15.0):
        self.results = [None] * n
        self.threads = [threading.Thread(target=self._one, args=(i, port, target, headers, timeout),
                                         daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _one(self, i, port, target, headers, timeout):
        try:
            r = timed_request(port, target=target, headers=headers, timeout=timeout)[0]
        except (OSError, EOFError, TimeoutError, ValueError) as e:
            r = e
        self.results[i] = (r, time.monotonic())

    def join(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "background requests still running"
        return self.results


class RawOrigin(ThreadedServer):
    """An origin that keeps exactly the bytes it received on each connection, for the smuggling
    tests: what sluice forwarded, byte for byte, with nothing in between to normalise it.

    It parses what arrives with a deliberately strict HTTP/1.1 reader (CRLF only, exactly one of
    Content-Length (digits) or Transfer-Encoding: chunked, no obs-fold) and records each request
    as a dict (`conn`: connection index, `method`, `target`, `headers` (lower-cased name, value)
    pairs, `body`). Bytes it cannot parse are recorded in `errors` and end the connection, so a
    test can assert that sluice only ever sent well-formed, unambiguous requests.

    `respond(request) -> bytes | None` builds each answer (None: close without answering); the
    default is a 200 saying which request it answers (`X-Seen: TARGET`, `X-Conn: N`), so that a
    test can match every answer the client got to the request the origin saw. `connections`,
    `received[i]` (bytes of connection i) and `eof[i]` (sluice closed or reset connection i)
    describe the upstream connections (views of ThreadedServer's `conns`). Each request also
    keeps its `trailers` ((lower-cased name, value) pairs), `body_sha256` and `raw` (its bytes
    exactly as received)."""

    def __init__(self, respond=None):
        self.respond = respond or RawOrigin.answer
        self.requests, self.errors = [], []
        super().__init__()

    @property
    def received(self):
        with self._lock:
            return [c.received for c in self.conns]

    @property
    def eof(self):
        with self._lock:
            return [c.eof or c.reset for c in self.conns]

    @staticmethod
    def answer(req, status=200, extra=b"", headers=""):
        body = f"seen {req['target']}\n".encode()
        return (f"HTTP/1.1 {status} OK\r\nX-Seen: {req['target']}\r\nX-Conn: {req['conn']}\r\n"
                f"{headers}Content-Length: {len(body)}\r\n\r\n").encode() + body + extra

    @property
    def connections(self):
        return self.accepted

    def targets(self):
        with self._lock:
            return [r["target"] for r in self.requests]

    def _accepted(self, conn):
        return (conn.record.index,)

    def _recv(self, conn, index, buf):
        chunk = conn.recv(1 << 16)  # recorded in conns[index] by the socket itself
        if not chunk:
            raise EOFError
        return buf + chunk

    def _line(self, conn, index, buf):
        while b"\r\n" not in buf:
            buf = self._recv(conn, index, buf)
        line, buf = buf.split(b"\r\n", 1)
        if b"\r" in line or b"\n" in line:
            raise ValueError(f"bare CR/LF in {line!r}")
        return line, buf

    def _read_request(self, conn, index, buf):
        line, buf = self._line(conn, index, buf)
        parts = line.split(b" ")
        if len(parts) != 3 or parts[2] != b"HTTP/1.1":
            raise ValueError(f"bad request line {line!r}")
        headers = []
        while True:
            line, buf = self._line(conn, index, buf)
            if not line:
                break
            if line[:1] in (b" ", b"\t") or b":" not in line:
                raise ValueError(f"bad field line {line!r}")
            name, value = line.split(b":", 1)
            if name != name.strip() or any(c < 0x21 or c > 0x7e for c in name):
                raise ValueError(f"bad field name {name!r}")
            if any(c < 0x20 and c != 9 or c == 0x7f for c in value):
                raise ValueError(f"control byte in {line!r}")
            headers.append((name.decode().lower(), value.decode("latin-1").strip(" \t")))
        cls = [v for k, v in headers if k == "content-length"]
        tes = [v for k, v in headers if k == "transfer-encoding"]
        if cls and tes or len(cls) > 1 or len(tes) > 1:
            raise ValueError(f"ambiguous framing {headers!r}")
        body, trailers = b"", []
        if tes:
            if tes[0].lower() != "chunked":
                raise ValueError(f"transfer-encoding {tes[0]!r}")
            while True:
                size_line, buf = self._line(conn, index, buf)
                size_text = size_line.split(b";")[0]
                if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                    raise ValueError(f"bad chunk size {size_line!r}")
                size = int(size_text, 16)
                if size == 0:
                    while True:  # trailers up to the empty line (RFC 9112 7.1.2)
                        line, buf = self._line(conn, index, buf)
                        if not line:
                            break
                        if b":" not in line:
                            raise ValueError(f"bad trailer line {line!r}")
                        name, value = line.split(b":", 1)
                        trailers.append((name.decode("latin-1").lower(),
                                         value.decode("latin-1").strip(" \t")))
                    break
                while len(buf) < size + 2:
                    buf = self._recv(conn, index, buf)
                if buf[size:size + 2] != b"\r\n":
                    raise ValueError("chunk data not followed by CRLF")
                body, buf = body + buf[:size], buf[size + 2:]
        elif cls:
            if not cls[0].isdigit():
                raise ValueError(f"content-length {cls[0]!r}")
            n = int(cls[0])
            while len(buf) < n:
                buf = self._recv(conn, index, buf)
            body, buf = buf[:n], buf[n:]
        method, target = parts[0].decode("latin-1"), parts[1].decode("latin-1")
        return {"conn": index, "method": method, "target": target, "headers": headers,
                "body": body, "body_sha256": hashlib.sha256(body).hexdigest(),
                "trailers": trailers}, buf

    def _serve(self, conn, index):
        buf = b""
        try:
            while not self._stopping.is_set():
                req, buf = self._read_request(conn, index, buf)
                with self._lock:
                    req["raw"] = self._parsed(conn, buf)
                    self.requests.append(req)
                out = self.respond(req)
                if out is None:
                    return
                if callable(out):  # a script: send in steps
                    out(conn)
                else:
                    conn.sendall(out)
        except (EOFError, ConnectionResetError):  # recorded in conns[index] (eof / reset)
            pass
        except ValueError as e:
            with self._lock:
                self.errors.append((index, str(e)))
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture
def raw_origin():
    """Starts RawOrigins: `raw_origin(respond=None)`; stops them all at the end."""
    started = []

    def start(respond=None):
        o = RawOrigin(respond)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()
