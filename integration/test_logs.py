"""Log files ([log] access_file, error_file, error_format): logrotate's rename + SIGUSR1 (or the
admin API) loses no access log line; the JSON access log carries what an operator asks of it; the
error log goes to its file, as text or JSON; sluice's own answers log their real body size."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import SANITIZED, SLUICE, Conn, metric, sluice_config, toml_table, wait_until

REQUESTS = 1000
CLIENTS = 4


def with_log_keys(text, **keys):
    """`text` (a sluice_config) with extra keys in its [log] section."""
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    return text.replace("[log]\n", "[log]\n" + extra, 1)


def lines_of(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def catches(pid, sig):
    """True once `sig` is caught by process `pid` (SigCgt in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16) & (1 << (sig - 1)) != 0
    return False


def load_with_rotation(port, rotate):
    """REQUESTS keep-alive GETs from CLIENTS threads; `rotate()` runs once a third of them were
    answered, while the others keep coming. Returns the statuses seen."""
    statuses = []
    lock = threading.Lock()
    rotated = threading.Event()

    def client(count):
        with Conn(port, timeout=10) as c:
            for _ in range(count):
                r = c.request(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
                with lock:
                    statuses.append(r.status)
                    due = len(statuses) == REQUESTS // 3
                if due:
                    rotate()
                    rotated.set()

    threads = [threading.Thread(target=client, args=(REQUESTS // CLIENTS,)) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert rotated.is_set() and not any(t.is_alive() for t in threads)
    return statuses


def assert_rotation_kept_every_line(tmp_path, s, access, rotate):
    old = str(access) + ".1"

    def rename_then_reopen():
        # The writer thread writes a batch every interval: on a loaded machine the first third of
        # the requests can all still be in memory here. The rotation is meant to split lines that
        # were written, so it waits (while the other clients go on) for the first ones on disk.
        wait_until(lambda: lines_of(access), timeout=10, what="the first access log lines on disk")
        os.rename(access, old)  # what logrotate does before its postrotate script
        rotate()

    statuses = load_with_rotation(s.port, rename_then_reopen)
    assert statuses == [200] * REQUESTS
    wait_until(lambda: len(lines_of(old)) + len(lines_of(access)) >= REQUESTS, timeout=10,
               what="every access log line written")
    before, after = lines_of(old), lines_of(access)
    assert len(before) + len(after) == REQUESTS, (len(before), len(after))
    assert before and after, "the rotation happened mid-load: both files have lines"
    ids = [json.loads(line)["request_id"] for line in before + after]
    assert len(set(ids)) == REQUESTS  # each request once, none lost, none doubled


def test_rename_and_sigusr1_lose_no_access_log_line(tmp_path, origins, sluice):
    """Logrotate's way (rename, then `kill -USR1`) under load: the old file and the new one hold
    exactly one line per request between them."""
    access = tmp_path / "access.log"
    s = sluice(with_log_keys(sluice_config(origins(1), access="json", workers=2),
                             access_file=access))
    wait_until(lambda: catches(s.proc.pid, signal.SIGUSR1), what="SIGUSR1 handler")
    assert_rotation_kept_every_line(tmp_path, s, access, lambda: s.proc.send_signal(signal.SIGUSR1))
    s.log.wait_for(r"logs reopened \(SIGUSR1\)")


def test_admin_api_reopen_loses_no_access_log_line(tmp_path, origins, sluice):
    access = tmp_path / "access.log"
    text = with_log_keys(sluice_config(origins(1), access="json", workers=2), access_file=access)
    s = sluice(text + toml_table("admin", listen="127.0.0.1:0"))
    reopened = []
    assert_rotation_kept_every_line(
        tmp_path, s, access, lambda: reopened.append(s.admin("POST", "/api/logs/reopen")))
    assert reopened[0].status == 200 and reopened[0].json() == {"ok": True}, reopened[0]
    s.log.wait_for(r"logs reopened \(admin API\)")


def test_admin_api_reopen_is_a_post(tmp_path, origins, sluice):
    s = sluice(sluice_config(origins(1)) + toml_table("admin", listen="127.0.0.1:0"))
    r = s.admin("GET", "/api/logs/reopen")
    assert r.status == 405 and r.header("Allow") == "POST", r


def test_reopen_that_fails_keeps_the_old_file_and_says_why(tmp_path, origins, sluice):
    logs = tmp_path / "logs"
    logs.mkdir()
    access = logs / "access.log"
    s = sluice(with_log_keys(sluice_config(origins(1), access="json"), access_file=access)
               + toml_table("admin", listen="127.0.0.1:0"))
    os.rename(logs, tmp_path / "gone")  # the directory went away: the path cannot be opened
    r = s.admin("POST", "/api/logs/reopen")
    assert r.status == 500 and r.json()["ok"] is False, r
    assert "cannot open " + str(access) in r.json()["errors"][0], r.json()
    s.log.wait_for(r"log reopen: cannot open .*access\.log.*still writing to the previous file")
    with Conn(s.port) as c:
        assert c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
    wait_until(lambda: lines_of(tmp_path / "gone" / "access.log"), what="line in the old file")


def test_json_access_log_carries_every_field(tmp_path, origins, sluice):
    access = tmp_path / "access.log"
    routes = '[[route]]\nhost = "shop.test"\npath_prefix = "/api/"\nupstream = "app"\n'
    s = sluice(with_log_keys(sluice_config(origins(1), access="json", top=routes),
                             access_file=access))
    with Conn(s.port) as c:
        r = c.request(b"POST /api/slow?delay=150 HTTP/1.1\r\nHost: shop.test:8080\r\n"
                      b"User-Agent: curl/8.5 \"quoted\"\r\nX-Request-Id: abc-123\r\n"
                      b"Content-Length: 5\r\n\r\nhello")
        assert r.status == 200
        r = c.request(b"GET /api/ HTTP/1.0\r\nHost: shop.test\r\nConnection: keep-alive\r\n\r\n")
        assert r.status == 200
    wait_until(lambda: len(lines_of(access)) >= 2, what="two access log lines")
    first, second = (json.loads(line) for line in lines_of(access))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"]), first
    assert first["host"] == "shop.test:8080" and first["user_agent"] == 'curl/8.5 "quoted"'
    assert first["protocol"] == "HTTP/1.1" and second["protocol"] == "HTTP/1.0"
    assert first["route"] == "shop.test/api/" and first["upstream"] == "app"
    assert first["request_id"] == "abc-123" and first["attempts"] == 1
    assert first["bytes_in"] == 5 and first["bytes_out"] > 0
    assert first["retry"] is None and first["error"] is None
    # The origin waited 150 ms before answering: the first byte came after that, the connection
    # was ready long before, and both fit in the whole exchange.
    assert 0 <= first["upstream_connect_ms"] < 100, first
    assert 150 <= first["upstream_first_byte_ms"] <= first["duration_ms"], first
    # The second request went over the pooled connection: no connect to speak of.
    assert second["upstream_connect_ms"] < 5 and second["upstream_first_byte_ms"] < 100, second


def test_generated_answers_log_their_real_body_size(tmp_path, origins, sluice):
    access = tmp_path / "access.log"
    routes = '[[route]]\npath_prefix = "/api/"\nupstream = "app"\n'
    dead = "127.0.0.1:1"  # nothing listens on port 1: connect refused, 502
    text = sluice_config([dead], access="json", top=routes,
                         upstream_extra=toml_table("upstreams.app.retry", attempts=1))
    s = sluice(with_log_keys(text, access_file=access))
    bodies = []
    for target in (b"/nowhere", b"/api/x"):
        with Conn(s.port) as c:
            r = c.request(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n\r\n")
            bodies.append((r.status, len(r.body)))
    wait_until(lambda: len(lines_of(access)) >= 2, what="two access log lines")
    logged = [(rec["status"], rec["bytes_out"]) for rec in map(json.loads, lines_of(access))]
    assert [b[0] for b in bodies] == [404, 502]
    assert logged == bodies and all(n > 0 for _, n in bodies), (logged, bodies)
    no_route = json.loads(lines_of(access)[0])
    assert no_route["route"] is None and no_route["upstream_connect_ms"] is None


def test_text_access_log_gains_fields_and_keeps_its_start(tmp_path, origins, sluice):
    access = tmp_path / "access.log"
    s = sluice(with_log_keys(sluice_config(origins(1), access="text"), access_file=access))
    with Conn(s.port) as c:
        c.request(b"GET /t HTTP/1.1\r\nHost: h.test\r\nUser-Agent: ua/1\r\n\r\n")
    wait_until(lambda: lines_of(access), what="an access log line")
    line = lines_of(access)[0]
    assert re.match(r'\S+ 127\.0\.0\.1 "GET /t" 200 upstream=app server=app-1 attempts=1 in=0 '
                    r'out=\d+ [\d.]+ms id=\S+ proto=HTTP/1\.1 host="h\.test" ua="ua/1" route=- '
                    r'connect=[\d.]+ms first_byte=[\d.]+ms$', line), line


def test_error_file_and_json_format_through_reload(tmp_path, origins, sluice):
    """The error log moves to its file at a reload (file keys are live), then turns JSON."""
    errors = tmp_path / "error.log"
    text = sluice_config(origins(1))
    s = sluice(text)
    s.config_path.write_text(with_log_keys(text, error_file=errors))
    s.proc.send_signal(signal.SIGHUP)
    s.log.wait_for(r"error log file stderr -> .*error\.log")
    wait_until(lambda: any("reloaded" in line for line in lines_of(errors)),
               what="the reload logged in the error file")
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d info ", lines_of(errors)[-1])
    s.config_path.write_text(with_log_keys(text, error_file=errors, error_format="json"))
    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: lines_of(errors)[-1].startswith("{"), what="a JSON error log line")
    # The reload's line (the watch's follows it: docs/operations.md).
    record = next(json.loads(l) for l in reversed(lines_of(errors)) if l.startswith("{") and "reloaded" in l)
    assert record["level"] == "info", record
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"]), record
    # A reopen (logrotate) writes its own line to the new error file.
    os.rename(errors, str(errors) + ".1")
    s.proc.send_signal(signal.SIGUSR1)
    wait_until(lambda: lines_of(errors), what="the new error file")
    assert "logs reopened (SIGUSR1)" in json.loads(lines_of(errors)[0])["message"]


@pytest.mark.parametrize("key", ["access_file", "error_file"])
def test_a_log_file_in_a_missing_directory_is_refused_at_its_key(tmp_path, key):
    config = tmp_path / "sluice.toml"
    text = with_log_keys(sluice_config(["127.0.0.1:9"]), **{key: tmp_path / "no" / "x.log"})
    config.write_text(text)
    line = text.splitlines().index(next(l for l in text.splitlines() if l.startswith(key))) + 1
    for command in (["check", str(config)], ["run", "--config", str(config)]):
        r = subprocess.run([str(SLUICE), *command], capture_output=True, text=True, timeout=10)
        out = r.stdout + r.stderr
        assert r.returncode == 1, out
        assert re.search(rf"sluice\.toml:{line}:\d+: log\.{key}: directory '.*/no' does not exist",
                         out), out


def test_an_unread_stdout_neither_slows_requests_nor_holds_the_exit(tmp_path, origins, sluice):
    """The access log on stdout, a pipe nobody reads (a container whose log collector stopped):
    far more lines than the pipe holds (64 KiB) are all answered at once, none is dropped (the
    worker's buffer takes them), and SIGTERM still ends the process, exit 0, after the bounded
    wait for the log (2 s, docs/edge.md "Logs")."""
    s = sluice(sluice_config(origins(1), access="text") + toml_table("admin", listen="127.0.0.1:0"))
    with Conn(s.port, timeout=10) as c:
        for _ in range(1500):  # ~300 KB of text lines
            assert c.request(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
    assert metric(s, "sluice_access_log_dropped_total") == 0
    start = time.monotonic()
    assert s.stop(timeout=10) == 0
    took = time.monotonic() - start
    s.log.wait_for(r"access log: output blocked, lines still buffered are lost")
    # 2 s of bounded wait plus the stop itself (slower under a sanitizer's exit-time checks).
    assert took < (8.0 if SANITIZED else 4.0), f"the exit took {took:.1f} s, not the 2 s bounded wait"


def test_sigterm_writes_every_buffered_access_log_line(tmp_path, origins, sluice):
    """Lines still in the workers' buffers when SIGTERM comes are written before the exit."""
    access = tmp_path / "access.log"
    s = sluice(with_log_keys(sluice_config(origins(1), access="json", workers=2), access_file=access))
    with Conn(s.port, timeout=10) as c:
        for _ in range(200):
            assert c.request(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
    assert s.stop(timeout=10) == 0
    ids = [json.loads(line)["request_id"] for line in lines_of(access)]
    assert len(ids) == 200 and len(set(ids)) == 200
