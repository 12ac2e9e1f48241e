"""Heap allocations per keep-alive request, plain and TLS, under valgrind (memcheck's "total
heap usage" at exit): sluice serves N and then 2N sequential requests on one client connection;
(allocs(2N) - allocs(N)) / N is what one more request costs in steady state (0 expected).
With --instr, user-space instructions per request instead (callgrind's total Ir, same method).
With --rules, the upstream has header rules on both sides, with variables (docs/edge.md).

    python3 bench/allocs_per_request.py BUILD_DIR [N] [--plain-only] [--instr] [--access=text|json] [--rules] [--compress] [--idempotency] [--pause=S] [--put=BYTES] [--xtree=FILE] [--max=X]

--max=X: exit 1 if any figure is above X per request (scripts/test.sh runs it with --max=0.01:
the hot path allocates nothing per request).

--access: with the access log on (to a file in the scratch directory; default off).

With --compress the upstream has `compress = { min_bytes = 1 }` and every request asks for the
origin's JSON /stats with `Accept-Encoding: gzip`: each answer is gzip-coded and chunked.

With --idempotency the upstream has `[idempotency] mode = "replay"` and the requests carry no
key: what a request without a key costs once the feature is on (0 allocations expected).

With --pause=S the client waits S seconds before each request: past park_after (0.1 s) every
request wakes a parked connection (docs/architecture.md), so the figure is what a wake costs.

With --put=BYTES every request is a PUT with a body of BYTES (Content-Length): beyond the relay
block (64 KiB) the body is streamed, full duplex (docs/architecture.md). With --xtree=FILE
memcheck also writes where the allocations of the last run (2N requests) came from, by call
stack (valgrind's --xtree-memory=full; read it with callgrind_annotate).

Loopback only; every process started is ended by PID."""
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES = """request_headers = { set = { "X-Env" = "prod" }, add = { "X-Client" = "$client_ip $request_id $host" }, remove = ["X-Debug"] }
response_headers = { set = { "X-Served-By" = "$server", "X-Cv" = "$config_version" }, remove = ["Server"] }"""
IDEMPOTENCY = '[upstreams.app.idempotency]\nmode = "replay"\n'


def wait_line(proc, pattern, timeout=60):
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            break
        lines.append(line)
        m = rx.search(line)
        if m:
            return m, lines
    raise RuntimeError(f"no {pattern!r}: {''.join(lines)[-2000:]}")


def option(name, default=None):
    return next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), default)


def requests(sock, n):
    buf = b""
    pause = float(option("pause", "0"))
    put = int(option("put", "0"))
    request = (f"PUT / HTTP/1.1\r\nHost: t\r\nContent-Length: {put}\r\n\r\n".encode() + b"x" * put
               if put else b"GET /stats HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n"
               if "--compress" in sys.argv else b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    for i in range(n):
        if pause > 0:
            time.sleep(pause)
        sock.sendall(request)
        while True:
            end = response_end(buf)
            if end is not None:
                buf = buf[end:]
                break
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("closed")
            buf += chunk


def response_end(buf):
    """Where the first whole response in `buf` ends (Content-Length or chunked), or None."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    at = head_end + 4
    length = re.search(rb"Content-Length: (\d+)", buf[:head_end], re.I)
    if length:
        end = at + int(length.group(1))
        return end if len(buf) >= end else None
    while True:  # chunked (a compressed answer)
        line_end = buf.find(b"\r\n", at)
        if line_end < 0:
            return None
        size = int(buf[at:line_end].split(b";")[0], 16)
        at = line_end + 2 + size + 2
        if len(buf) < at:
            return None
        if size == 0:
            return at


def access_format():
    return next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--access=")), "off")


def allocs(build, work, n, use_tls, plain_only=False):
    origin = subprocess.Popen([str(build / "sluice-origin"), "--listen", "127.0.0.1:0", "--name", "o"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(re.search(rb"listening 127\.0\.0\.1:(\d+)", origin.stdout.readline()).group(1))
        conf = work / "sluice.toml"
        conf.write_text(f"""[server]
listen = ["127.0.0.1:0"]
workers = 1
{"" if plain_only else f'[[server.tls]]{chr(10)}listen = ["127.0.0.1:0"]{chr(10)}certificates = [ {{ cert = "{work}/cert.pem", key = "{work}/key.pem" }} ]'}
[log]
level = "info"
access = "{access_format()}"
{f'access_file = "{work}/access.log"' if access_format() != "off" else ""}
[upstreams.app]
{RULES if "--rules" in sys.argv else ""}
{"compress = { min_bytes = 1 }" if "--compress" in sys.argv else ""}
[[upstreams.app.servers]]
address = "127.0.0.1:{port}"
{IDEMPOTENCY if "--idempotency" in sys.argv else ""}""")
        tool = (["--tool=callgrind", f"--callgrind-out-file={work}/cg.out", "--dump-instr=no", "--dump-line=no"]
                if "--instr" in sys.argv else ["--tool=memcheck"])
        if option("xtree") and "--instr" not in sys.argv:
            tool += ["--xtree-memory=full", f"--xtree-memory-file={Path(option('xtree')).resolve()}"]
        proxy = subprocess.Popen(["valgrind", *tool, str(build / "sluice"), "run", "--config", str(conf)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            m, _ = wait_line(proxy, r"listening on 127\.0\.0\.1:(\d+) \(TLS" if use_tls else r"listening on 127\.0\.0\.1:(\d+)$")
            p = int(m.group(1))
            wait_line(proxy, r"started")
            raw = socket.create_connection(("127.0.0.1", p), timeout=30)
            sock = raw
            if use_tls:
                ctx = ssl.create_default_context(cafile=str(work / "ca.pem"))
                sock = ctx.wrap_socket(raw, server_hostname="localhost")
            requests(sock, n)
            sock.close()
        finally:
            proxy.terminate()
            _, err = proxy.communicate(timeout=120)
        if "--instr" in sys.argv:
            text = (work / "cg.out").read_text()
            return int(re.search(r"^(?:totals|summary): (\d+)", text, re.M).group(1))
        total = re.search(rb"total heap usage: ([\d,]+) allocs", err)
        return int(total.group(1).replace(b",", b""))
    finally:
        origin.terminate()
        origin.wait()


def main():
    build = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 1000
    if any(a.startswith("--pause=") for a in sys.argv) and n > 200:
        sys.exit("--pause: at most 200 requests (bounded in time)")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        subprocess.run([str(ROOT / "scripts" / "make-test-certs.sh"), str(work)], check=True, capture_output=True)
        plain_only = "--plain-only" in sys.argv
        limit = option("max")
        over = []
        for use_tls in (False,) if plain_only else (False, True):
            a, b = allocs(build, work, n, use_tls, plain_only), allocs(build, work, 2 * n, use_tls, plain_only)
            unit = "instructions" if "--instr" in sys.argv else "allocs"
            name = "TLS" if use_tls else "plain"
            print(f"{name:5}: {n} requests {a} {unit}, {2 * n} requests {b} {unit} "
                  f"-> {(b - a) / n:.3f} {unit} per request", flush=True)
            if limit is not None and (b - a) / n > float(limit):
                over.append(f"{name}: {(b - a) / n:.3f} {unit} per request, above {limit}")
        if over:
            sys.exit("; ".join(over))


if __name__ == "__main__":
    main()
