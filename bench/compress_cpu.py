"""sluice's CPU per KiB of response body, identity and each coding (compress = {}): one worker,
a local origin answering ~4.6 MB of text lines (very repetitive: an upper bound of the ratio, a
lower one of the CPU per KiB), N sequential requests per coding on fresh connections; sluice's
utime + stime from /proc over those requests, divided by the KiB relayed.

    /usr/bin/python3 bench/compress_cpu.py BUILD_DIR
"""
import http.server, os, socket, subprocess, sys, threading, time, re
BIG = b"".join(b"line %08d: the quick brown fox jumps over the lazy dog\n" % i for i in range(80_000))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BIG))); self.end_headers(); self.wfile.write(BIG)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
build = sys.argv[1]
conf = f"""[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
level = "info"
access = "off"
[upstreams.app]
compress = {{}}
[[upstreams.app.servers]]
address = "127.0.0.1:{srv.server_address[1]}"
"""
import tempfile
conf_path = os.path.join(tempfile.mkdtemp(), "sluice.toml")
open(conf_path, "w").write(conf)
p = subprocess.Popen([f"{build}/sluice", "run", "--config", conf_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
port = None
t0 = time.time()
while port is None and time.time() - t0 < 10:
    line = p.stdout.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if m and "listening on" in line and "admin" not in line: port = int(m.group(1))
def cpu():
    f = open(f"/proc/{p.pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def get(accept):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAccept-Encoding: {accept}\r\n\r\n".encode())
    n = 0
    while d := s.recv(1 << 16): n += len(d)
    s.close(); return n
try:
    N = 20
    for accept in ["identity", "gzip", "zstd", "br"]:
        get(accept)
        c0 = cpu(); n = sum(get(accept) for _ in range(N)); c1 = cpu()
        kib = N * len(BIG) / 1024
        print(f"{accept:8s}: {N} x {len(BIG)} B, {n // N} B out each, sluice CPU {c1 - c0:.2f} s -> {(c1 - c0) / kib * 1e6:.1f} us per KiB")
finally:
    p.kill(); p.wait()
