"""Harness for sluice's integration tests: real binaries on ephemeral loopback ports.

Every process a test starts is ended by the fixture that started it, by PID. Waits are for
conditions with deadlines (a line on a pipe, a port that accepts), never fixed sleeps.
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("SLUICE_BUILD_DIR", ROOT / "build" / "release"))
SLUICE = BUILD / "sluice"
ORIGIN = BUILD / "sluice-origin"
CLIENT = BUILD / "sluice-test-client"


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
    def __init__(self, name, extra_args=()):
        self.name = name
        self.proc = subprocess.Popen(
            [str(ORIGIN), "--listen", "127.0.0.1:0", "--name", name, *extra_args],
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

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Sluice:
    """A running sluice with a config written from `upstreams` and `extra` TOML text."""

    def __init__(self, tmp_path, toml_text, name="sluice.toml"):
        self.config_path = tmp_path / name
        self.config_path.write_text(toml_text)
        self.proc = subprocess.Popen(
            [str(SLUICE), "run", "--config", str(self.config_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.log = LogReader(self.proc, self.proc.stderr)
        line = self.log.wait_for(r"listening on 127\.0\.0\.1:(\d+)")
        self.port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
        self.log.wait_for(r"sluice .* started")
        self.address = f"127.0.0.1:{self.port}"

    def url(self, path="/"):
        return f"http://{self.address}{path}"

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


def sluice_config(origins, *, upstream="app", server_extra="", upstream_extra="", top="",
                  workers=1, access="off"):
    """A TOML config with one upstream over `origins` (Origin objects or address strings)."""
    servers = "".join(
        f'\n[[upstreams.{upstream}.servers]]\naddress = "{o if isinstance(o, str) else o.address}"\n'
        + ("" if isinstance(o, str) else f'name = "{o.name}"\n')
        for o in origins)
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
        balance = "round_robin"
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


def curl(*args, timeout=30):
    """Runs curl; returns (status_code, headers dict lowercased, body bytes)."""
    cmd = ["curl", "-sS", "-o", "-", "-D", "/dev/stderr", "--max-time", str(timeout), *args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout + 5)
    status, headers = 0, {}
    for line in p.stderr.decode(errors="replace").splitlines():
        if line.startswith("HTTP/"):
            status, headers = int(line.split()[1]), {}
        elif ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers, p.stdout


@pytest.fixture
def origins():
    started = []

    def start(n=3, prefix="app", extra_args=()):
        new = [Origin(f"{prefix}-{i + 1}", extra_args) for i in range(n)]
        started.extend(new)
        return new

    yield start
    for o in started:
        o.stop()


@pytest.fixture
def sluice(tmp_path):
    started = []

    def start(toml_text, name="sluice.toml"):
        s = Sluice(tmp_path, toml_text, name)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
