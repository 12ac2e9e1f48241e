"""wrk, one thread, as the load generator; its summary comes back as JSON from bench/wrk-report.lua."""
import json
import subprocess
from pathlib import Path

from .processes import Child

REPORT_SCRIPT = Path(__file__).resolve().parent.parent / "wrk-report.lua"


def start(port, *, path, connections, duration, headers=(), cpus="0", scheme="http"):
    """Starts `wrk -t1 -cCONNECTIONS -dDURATION` against 127.0.0.1:port; `finish` collects it."""
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(REPORT_SCRIPT)]
    for h in headers:
        argv += ["-H", h]
    argv.append(f"{scheme}://127.0.0.1:{port}{path}")
    child = Child(argv, name="wrk", cpus=cpus, stdout=subprocess.PIPE)
    child.duration = duration
    return child


def finish(child):
    """Waits for a started wrk; returns requests, seconds, bytes, errors (connect/read/write/
    timeout errors plus non-2xx/3xx statuses, summed, and each kind) and latency percentiles in
    milliseconds."""
    out = child.communicate(timeout=child.duration + 30)
    line = next((l for l in out.splitlines() if l.startswith("WRK_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary (exit {child.proc.returncode}):\n{out}")
    raw = json.loads(line[len("WRK_JSON "):])
    lat = raw["latency_us"]
    return {
        "requests": raw["requests"],
        "seconds": raw["duration_us"] / 1e6,
        "bytes": raw["bytes"],
        "errors": sum(raw["errors"].values()),
        "error_kinds": raw["errors"],
        "latency_ms": {k: lat[k] / 1000.0 for k in ("mean", "p50", "p90", "p99", "p999", "max")},
    }


def run(port, **kwargs):
    return finish(start(port, **kwargs))
