"""The metrics as Prometheus sees them (docs/admin.md, "GET /metrics"): sluice's own answers
counted by status class with source="sluice", `return` answers counted, snake_case reasons,
process_* metrics; deploy/prometheus/alerts.yml passes promtool, and every metric it and the
Grafana dashboard (deploy/grafana/sluice.json) name is in a live scrape."""
import json
import os
import re
import subprocess
import time
from pathlib import Path

from conftest import Conn, closed_port, metric, metric_samples, sluice_config, toml_table, wait_until

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
DASHBOARD = ROOT / "deploy/grafana/sluice.json"
ADMIN = toml_table("admin", listen="127.0.0.1:0")
# /app/ to the upstream, /moved answered by sluice itself; anything else has no route (404).
ROUTES = """
[[route]]
path_prefix = "/app/"
upstream = "app"
[[route]]
path_prefix = "/moved"
return = { status = 301, location = "https://example.com/" }
"""
METRIC_NAME = re.compile(r"\b((?:sluice|process)_[a-z][a-z0-9_]*)\b")


def get(target="/", host="a"):
    return f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


def traffic_sluice(scripted, sluice):
    """A sluice whose scrape has every family: an origin's 200, sluice's own 502 (a refused
    server, retried), a `return` answer and a 404 without a route."""
    good = scripted("good")
    refused = f"127.0.0.1:{closed_port()}"
    s = sluice(sluice_config([good, refused], top=ADMIN) + ROUTES)
    for target in ("/app/1", "/app/2", "/moved", "/nowhere"):
        with Conn(s.port) as c:
            c.request(get(target))
    return s


def test_alert_rules_pass_promtool():
    r = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_metric_of_the_alerts_and_the_dashboard_is_scraped(scripted, sluice):
    s = traffic_sluice(scripted, sluice)
    scraped = set()
    for line in s.metrics_text().splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            scraped.add(name)
            if kind == "histogram":
                scraped |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
    named = set(METRIC_NAME.findall(ALERTS.read_text())) | {n for e in exprs for n in METRIC_NAME.findall(e)}
    assert named, "no metric named"
    assert named - scraped == set(), f"named but not exposed: {sorted(named - scraped)}"


def test_sluices_own_answers_are_counted_by_class_with_their_source(scripted, sluice):
    """A 503 sluice makes is a 5xx like an origin's (source="sluice"); `return` answers and a
    404 without a route are counted under upstream=""; reasons are snake_case; the duration
    histogram has a server label."""
    good = scripted("good")
    s = sluice(sluice_config([good], top=ADMIN, server_extra='error_detail = "status"') + ROUTES)
    r = s.admin("POST", "/api/upstreams/app/servers/good/drain")
    assert r.status == 200, r
    for target, status in (("/app/1", 503), ("/moved", 301), ("/moved", 301), ("/nowhere", 404)):
        with Conn(s.port) as c:
            assert c.request(get(target)).status == status, target
    # An exchange is counted once its answer was written, which the client may see first.
    wait_until(lambda: metric(s, "sluice_requests_total", upstream="", server="", code="4xx", source="sluice") == 1,
               timeout=5, what="the last answer to be counted")
    assert metric(s, "sluice_requests_total", upstream="app", server="", code="5xx", source="sluice") == 1, \
        [l for l in s.metrics_text().splitlines() if l.startswith("sluice_requests_total")]
    assert metric(s, "sluice_requests_total", upstream="", server="", code="3xx", source="sluice") == 2
    assert metric(s, "sluice_requests_total", upstream="", server="", code="4xx", source="sluice") == 1
    assert metric_samples(s, "sluice_requests_total", code="error") == []
    assert metric(s, "sluice_requests_total", upstream="app", server="good", code="2xx", source="upstream") == 0
    assert metric(s, "sluice_request_duration_seconds_count", upstream="app", server="") == 1
    assert metric(s, "sluice_request_duration_seconds_count", upstream="", server="") == 3
    buckets = [sample for sample in s.metrics_text().splitlines()
               if sample.startswith('sluice_request_duration_seconds_bucket{upstream="app",server=""')]
    assert any('le="30"' in b for b in buckets) and any('le="60"' in b for b in buckets), buckets
    for family in ("sluice_retries_total", "sluice_retries_skipped_total"):
        reasons = {m for m in re.findall(family + r'\{[^}]*reason="([^"]*)"', s.metrics_text())}
        assert reasons and all(" " not in r for r in reasons), reasons
    assert "connect_refused" in {m for m in re.findall(r'sluice_retries_total\{[^}]*reason="([^"]*)"', s.metrics_text())}


def test_process_metrics_describe_this_process(sluice, scripted):
    good = scripted("good")
    s = sluice(sluice_config([good], top=ADMIN))
    with open(f"/proc/{s.proc.pid}/status") as f:
        rss_kib = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    assert metric(s, "process_resident_memory_bytes") > 0.5 * rss_kib * 1024
    def cpu_seconds():  # utime + stime, fields 14 and 15 of proc(5)'s stat
        with open(f"/proc/{s.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    before = cpu_seconds()
    assert before <= metric(s, "process_cpu_seconds_total") <= cpu_seconds()
    assert 0 < metric(s, "process_open_fds") < metric(s, "process_max_fds")
    started = metric(s, "process_start_time_seconds")
    assert time.time() - 120 < started <= time.time(), started
