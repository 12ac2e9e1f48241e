"""Command line of the side-by-side benchmark; bench/run.sh installs, builds and calls this.

python3 -m sidebyside [--rounds N] [--duration S] [--scenarios LIST] [--workers 1|2] ...
(run from bench/, or with bench/ on PYTHONPATH). Every process it starts is ended by PID before
it exits, on success, on error and on SIGTERM/SIGINT.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import origins as origins_mod
from . import report
from .contenders import Haproxy, Nginx, Sluice, make_certificates
from .processes import stop_all
from .scenarios import ALL, LOADS, Bench, Settings, describe

ROOT = Path(__file__).resolve().parent.parent.parent
PROXY_CPUS, CLIENT_CPUS = "1", "0"
DEFAULT_SETTINGS = {"connections": 64, "idle_connections_per_step": 1000, "instr_warm": 1000,
                    "instr_requests": 20000}


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/run.sh",
        description="sluice vs nginx vs HAProxy, one worker each on CPU 1, per proxy CPU-second.",
        epilog="Scenarios (with the defaults): " + "; ".join(
            f"{k}: {describe(k, DEFAULT_SETTINGS)}" for k in ALL) + ".")
    p.add_argument("--render", metavar="JSON",
                   help="only rewrite the markdown (and summaries) of an earlier result file")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5, 1-50)")
    p.add_argument("--duration", type=int, default=5, help="seconds per measured run (default 5, 1-120)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of warm-up load per contender (default 2)")
    p.add_argument("--scenarios", default=None,
                   help=f"comma-separated, from {','.join(ALL)} (default: all; with --workers 2: "
                        f"{','.join(LOADS)})")
    p.add_argument("--workers", type=int, choices=(1, 2), default=1,
                   help="1: sluice vs nginx vs HAProxy; 2: sluice workers=2 (CPUs 0-1) vs workers=1 (CPU 1)")
    p.add_argument("--only-sluice", action="store_true",
                   help="with --workers 1: sluice alone (memory scenarios such as idle and bursts "
                        "do not need the others; no targets are evaluated)")
    p.add_argument("--with-others", action="store_true",
                   help="with --workers 2: also nginx worker_processes 2 vs 1 and HAProxy nbthread 2 "
                        "vs 1, for reference")
    p.add_argument("--origin", choices=("auto", "sluice-origin", "nginx"), default="auto",
                   help="origin kind (default auto: the one with less CPU per request)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections (default 64)")
    p.add_argument("--idle-connections", type=int, default=1000,
                   help="idle connections per step, two steps (default 1000)")
    p.add_argument("--instr-requests", type=int, default=20000,
                   help="requests counted under callgrind (default 20000)")
    p.add_argument("--instr-warm", type=int, default=1000,
                   help="requests of the baseline callgrind run (default 1000)")
    p.add_argument("--instr-connections", type=int, default=1,
                   help="instr load: 1 (default) = --instr-requests sequential requests on one "
                        "connection; N > 1 = wrk with N connections for --duration seconds")
    p.add_argument("--nginx-keepalive", type=int, default=96,
                   help="nginx upstream `keepalive`, idle connections per worker for the whole upstream "
                        "(default 96: sluice keeps 32 per server, three servers)")
    p.add_argument("--pgo", action="store_true",
                   help="sluice as the package is built, with profile-guided optimisation: "
                        "bench/run.sh builds it with scripts/build-pgo.sh into build/pgo")
    p.add_argument("--others-defer-accept", action="store_true",
                   help="nginx `listen ... deferred` and HAProxy `bind ... defer-accept` "
                        "(TCP_DEFER_ACCEPT, off by default in both; on by default in sluice)")
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build/release"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"),
                   help="directory for <date>-<commit>.md/.json (default bench/results)")
    p.add_argument("--tag", default="",
                   help="added to the result files' name: <date>-<commit>-<tag>.md (letters, digits, -)")
    p.add_argument("--keep-workdir", action="store_true", help="keep configs, logs, callgrind files")
    a = p.parse_args(argv)
    if not 1 <= a.rounds <= 50 or not 1 <= a.duration <= 120 or not 0 <= a.warmup <= 60:
        p.error("--rounds 1-50, --duration 1-120, --warmup 0-60")
    if not 1 <= a.connections <= 1000 or not 1 <= a.idle_connections <= 5000:
        p.error("--connections 1-1000, --idle-connections 1-5000")
    if not 1 <= a.instr_requests <= 1_000_000 or not 1 <= a.instr_warm <= 100_000:
        p.error("--instr-requests 1-1000000, --instr-warm 1-100000")
    if not 1 <= a.instr_connections <= 1000:
        p.error("--instr-connections 1-1000")
    if a.tag and not all(ch.isalnum() or ch == "-" for ch in a.tag):
        p.error("--tag: letters, digits and - only")
    default = ALL if a.workers == 1 else list(LOADS)
    a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()] if a.scenarios else default
    unknown = [s for s in a.scenarios if s not in ALL]
    if unknown or not a.scenarios:
        p.error(f"unknown scenario(s) {unknown}; choose from {','.join(ALL)}")
    return a


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _text(argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout + done.stderr).strip()


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((l.split(":", 1)[1].strip() for l in open("/proc/meminfo") if l.startswith("MemTotal")), "?")
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "memory": f"{int(mem.split()[0]) / 1048576:.0f} GiB" if mem != "?" else "?",
            "loadavg_start": open("/proc/loadavg").read().split()[0]}


def commit():
    short = _text(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    # GIT_OPTIONAL_LOCKS=0: `git status` must not refresh (write) the index of a shared tree.
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    try:
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=30, cwd=ROOT,
                                    env=env).stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        dirty = False
    return short, dirty


def render(path):
    """Recomputes summaries, targets and descriptions of a result JSON and rewrites it and its
    markdown: the figures stay, the presentation follows the current code."""
    path = Path(path)
    doc = json.loads(path.read_text())
    for name, result in doc["scenarios"].items():
        result["description"] = describe(name, doc["settings"])
        result["summary"] = report.summarize(result, doc["contenders"])
    doc["targets"] = report.evaluate_targets(doc["scenarios"], doc["contenders"])
    doc["round_checks"] = report.evaluate_round_checks(doc["scenarios"], doc["contenders"])
    path.write_text(json.dumps(doc, indent=1) + "\n")
    path.with_suffix(".md").write_text(report.markdown(doc))
    log(f"rewritten: {path.with_suffix('.md')} and {path.name}")



def pgo_mode(bin_dir):
    """The build's SLUICE_PGO ('use': built with profile-guided optimisation), '' when none."""
    cache = Path(bin_dir) / "CMakeCache.txt"
    if not cache.exists():
        return ""
    m = re.search(r"^SLUICE_PGO:STRING=(.*)$", cache.read_text(), re.M)
    return m.group(1) if m else ""

def main(argv):
    a = parse_args(argv)
    if a.render:
        return render(a.render)
    bin_dir = (ROOT / a.build_dir).resolve()
    for b in ("sluice", "sluice-origin"):
        if not (bin_dir / b).exists():
            sys.exit(f"{bin_dir / b} missing: build first (scripts/build.sh)")
    if a.pgo and pgo_mode(bin_dir) != "use":
        sys.exit(f"--pgo: {bin_dir} is not a PGO build (scripts/build-pgo.sh)")
    if "instr" in a.scenarios and not shutil.which("valgrind"):
        sys.exit("valgrind missing: scripts/install-deps.sh --bench")
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    started_at = datetime.datetime.now()
    short, dirty = commit()
    doc = {"date": started_at.strftime("%Y-%m-%d"), "started": started_at.isoformat(timespec="seconds"),
           "commit": short, "dirty": dirty,
           "command": shlex.join(["bench/run.sh", *argv]),
           "machine": machine()}
    Nginx.defer_accept = Haproxy.defer_accept = a.others_defer_accept
    if a.workers == 1:
        contenders = [Sluice(bin_dir, PROXY_CPUS)]
        if not a.only_sluice:
            contenders += [Nginx(PROXY_CPUS, a.nginx_keepalive), Haproxy(PROXY_CPUS)]
    else:
        # First is the one compared: sluice-w2 ÷ sluice-w1.
        both = f"{CLIENT_CPUS},{PROXY_CPUS}"
        contenders = [Sluice(bin_dir, both, workers=2, name="sluice-w2"),
                      Sluice(bin_dir, PROXY_CPUS, workers=1, name="sluice-w1")]
        if a.with_others:
            contenders += [Nginx(both, a.nginx_keepalive, workers=2, name="nginx-w2"),
                           Nginx(PROXY_CPUS, a.nginx_keepalive, workers=1, name="nginx-w1"),
                           Haproxy(both, threads=2, name="haproxy-w2"),
                           Haproxy(PROXY_CPUS, threads=1, name="haproxy-w1")]
    names = [c.name for c in contenders]
    doc["contenders"] = names
    doc["versions"] = {c.product: c.version() for c in contenders}
    doc["versions"]["wrk"] = _text(["wrk", "-v"]).split()[1] if _text(["wrk", "-v"]) else "?"
    if "instr" in a.scenarios:
        doc["versions"]["valgrind"] = _text(["valgrind", "--version"]).replace("valgrind-", "")
    warmup = min(a.warmup, a.duration)
    doc["settings"] = {"rounds": a.rounds, "duration": a.duration, "warmup": warmup,
                       "connections": a.connections, "idle_connections_per_step": a.idle_connections,
                       "instr_requests": a.instr_requests, "instr_warm": a.instr_warm,
                       "instr_connections": a.instr_connections,
                       "nginx_keepalive": a.nginx_keepalive, "workers_mode": a.workers,
                       "with_others": a.with_others,
                       "others_defer_accept": a.others_defer_accept,
                       "cpus": {c.name: c.cpus for c in contenders}, "client_cpus": CLIENT_CPUS,
                       "build_dir": str(bin_dir), "pgo": pgo_mode(bin_dir),
                       "scenarios": a.scenarios}
    log(f"sluice bench: {', '.join(names)}; scenarios {','.join(a.scenarios)}; "
        f"{a.rounds} rounds × {a.duration} s; work dir {workdir}")
    origins = None
    t_start = time.monotonic()
    try:
        if a.origin == "auto":
            cal, kind = origins_mod.calibrate(bin_dir, workdir / "calibrate")
            log(f"origin calibration: {cal} -> {kind}")
            doc["origin"] = {"kind": kind, "calibration": cal}
        else:
            kind = a.origin
            doc["origin"] = {"kind": kind}
        origins = origins_mod.OriginSet(kind, bin_dir, workdir / "origins", cpus=CLIENT_CPUS)
        make_certificates(ROOT, workdir / "tls")
        settings = Settings(rounds=a.rounds, duration=a.duration, warmup=warmup,
                            connections=a.connections,
                            idle_steps=(a.idle_connections, a.idle_connections),
                            instr_requests=a.instr_requests, instr_warm=a.instr_warm,
                            instr_connections=a.instr_connections, workdir=workdir, bin_dir=bin_dir,
                            client_cpus=CLIENT_CPUS if a.workers == 1 else f"{CLIENT_CPUS},{PROXY_CPUS}")
        bench = Bench(settings, contenders, origins, log)
        doc["scenarios"] = {}
        for name in a.scenarios:
            log(f"scenario {name}")
            t0 = time.monotonic()
            result = bench.run(name)
            result["description"] = describe(name, doc["settings"])
            result["summary"] = report.summarize(result, names)
            result["elapsed_s"] = round(time.monotonic() - t0, 1)
            doc["scenarios"][name] = result
    finally:
        if origins:
            origins.stop()
        stop_all()
    doc["elapsed_s"] = round(time.monotonic() - t_start, 1)
    doc["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[0]
    doc["targets"] = report.evaluate_targets(doc["scenarios"], names)
    doc["round_checks"] = report.evaluate_round_checks(doc["scenarios"], names)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = (f"{doc['date']}-{short}" + ("" if a.workers == 1 else "-workers2")
            + (f"-{a.tag}" if a.tag else ""))
    md = report.markdown(doc)
    (out / f"{stem}.md").write_text(md)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(md)
    log(f"written: {out / stem}.md and .json ({doc['elapsed_s']} s)")
    if not a.keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log(f"work dir kept: {workdir}")


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGHUP, _on_sigterm)
    try:
        main(sys.argv[1:])
    finally:
        stop_all()
