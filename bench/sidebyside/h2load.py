"""h2load (nghttp2-client), one thread, as the HTTP/2 load generator: `-c CONNECTIONS -m STREAMS`
for a duration; its summary and its per-request log come back as wrk.finish()'s dict."""
import re
import subprocess
import tempfile
from pathlib import Path

from .processes import Child


def start(port, *, path, connections, streams, duration, cpus="0", scheme="http", headers=(),
          data=None):
    """Starts h2load against 127.0.0.1:port: h2c with prior knowledge for `http`, ALPN h2 for
    `https`; a GET, or with `data` (a file) a POST of that file's bytes; `finish` collects it."""
    log = Path(tempfile.mkstemp(prefix="h2load-", suffix=".log")[1])
    argv = ["h2load", "-t1", f"-c{connections}", f"-m{streams}", f"-D{duration}",
            "--warm-up-time=0", f"--log-file={log}"]
    for h in headers:
        argv += ["-H", h]
    if data is not None:
        argv.append(f"--data={data}")
    argv.append(f"{scheme}://127.0.0.1:{port}{path}")
    child = Child(argv, name="h2load", cpus=cpus, stdout=subprocess.PIPE)
    child.duration = duration
    child.log = log
    return child


def _percentile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def finish(child):
    """Waits for a started h2load; returns what wrk.finish() returns: requests (those that
    succeeded with a 2xx status: h2load's "succeeded" counts 3xx too), seconds, bytes, errors
    (failed and errored requests, and 4xx/5xx statuses) and latency percentiles in milliseconds
    from the per-request log."""
    out = child.communicate(timeout=child.duration + 30)
    done = re.search(r"finished in ([\d.]+)(m?s)", out)
    counts = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                       r"(\d+) errored", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    traffic = re.search(r"traffic: .*?\((\d+)\) total", out)
    if not (done and counts and codes):
        raise RuntimeError(f"h2load printed no summary (exit {child.proc.returncode}):\n{out}")
    seconds = float(done.group(1)) / (1000.0 if done.group(2) == "ms" else 1.0)
    durations = []
    try:
        for line in child.log.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) >= 3:
                durations.append(int(fields[2]) / 1000.0)
    finally:
        child.log.unlink(missing_ok=True)
    durations.sort()
    failed, errored = int(counts.group(5)), int(counts.group(6))
    bad_status = int(codes.group(3)) + int(codes.group(4))
    return {
        "requests": min(int(counts.group(4)), int(codes.group(1))),
        "seconds": seconds,
        "bytes": int(traffic.group(1)) if traffic else 0,
        "errors": failed + errored + bad_status,
        "error_kinds": {"failed": failed, "errored": errored, "4xx_5xx": bad_status},
        "latency_ms": {"mean": sum(durations) / len(durations) if durations else 0.0,
                       **{k: _percentile(durations, q) for k, q in
                          (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))},
                       "max": durations[-1] if durations else 0.0},
    }
