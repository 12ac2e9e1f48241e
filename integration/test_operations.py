"""Operations: what an operator does to a running sluice, under traffic. Reloads (SIGHUP, the API
and `sluice reload`), draining a server (API, CLI, or `drain = true` in the file), a graceful
stop with `shutdown_delay`, the metrics and status an operator reads, and the admin token.

Every load here is a bounded background client (conftest.Load) on loopback; every wait is for a
condition with a deadline."""
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import SCHEDULING_SLACK, metric, metric_samples, with_error_detail
from conftest import (LOG_RESOLUTION, SLUICE, Background, Conn, Load, assert_expired_on_time,
                      run_client, sluice_cli, sluice_config,
                      timed_request, toml_table, wait_until, closed_port)

ADMIN = toml_table("admin", listen="127.0.0.1:0")
# Fast probes: a server whose /health fails is down within fall x interval (~0.4 s).
FAST_HEALTH = toml_table("upstreams.app.health", interval="200ms", timeout="150ms", rise=2, fall=2)
GET = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
ERROR_LINE = re.compile(r"^(?P<file>/\S+):(?P<line>\d+):(?P<col>\d+): (?P<key>\S+): .+$")






def reload_via(s, how, version):
    """Reloads `s` by SIGHUP or POST /api/reload and waits until `version` serves."""
    if how == "sighup":
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: s.status()["config_version"] == version, timeout=3, interval=0.01,
                   what=f"config version {version} after SIGHUP")
    else:
        r = s.admin("POST", "/api/reload")
        # watch_ms: the watch after the reload (test_reload_watch.py).
        assert (r.status, r.json()["ok"], r.json()["version"]) == (200, True, version), r


def test_fifty_reloads_under_load_fail_no_request_keep_health_and_apply_a_weight_change(
        origins, sluice):
    """50 reloads, SIGHUP and API in turn, while a client sends ~150 req/s: no request fails,
    a server that active checks took out stays out (its verdict survives every reload, no probe
    needed), and a weight change from 1:1 to 3:1 shows in the traffic."""
    a, b, sick = origins(3)
    sick.set_health(503)

    def config(weight_a):
        return sluice_config([a, b, sick], balance="weighted", workers=2, top=ADMIN,
                             upstream_extra=FAST_HEALTH,
                             server_keys={"app-1": {"weight": weight_a}})

    s = sluice(config(1))
    s.log.wait_for(r"upstream app server app-3: up -> down \(went_down\): 2 consecutive probe "
                   r"failures: status 503", timeout=3)
    with Load(s.port, rate=150, max_seconds=20) as load:
        wait_until(lambda: len(load.records) >= 20, timeout=3, what="load running")
        for i in range(50):
            weight_a = 1 if i < 10 else 3
            s.config_path.write_text(config(weight_a))
            reload_via(s, "sighup" if i % 2 == 0 else "api", version=2 + i)
            # Straight after the reload, far less than the 2 x 200 ms that `fall` probes need:
            # still down, so the verdict was kept, not earned again.
            sick_now = s.server_status("app-3")
            assert (sick_now["state"], sick_now["health_state"]) == ("down", "down"), (i, sick_now)
            if i == 9:
                one_to_one_until = load.now()
            if i == 10:
                three_to_one_from = load.now()
            load.wait_for_more(15)  # every config version serves some traffic
        end = load.now()
    assert load.failures() == [], load.failures()[:10]
    assert len(load.records) >= 300, len(load.records)
    assert sick.stats()["requests"] == 0
    # Shares during the storm (each reload restarts the schedule, hence bands, not exact counts).
    before = load.origins(until=one_to_one_until)
    after = load.origins(since=three_to_one_from, until=end)
    assert set(before) == set(after) == {"app-1", "app-2"}, (before, after)
    assert 0.4 <= before["app-1"] / sum(before.values()) <= 0.6, before
    assert 0.68 <= after["app-1"] / sum(after.values()) <= 0.85, after
    # Once the storm is over, the smooth weighted schedule is exact: 3:1.
    code, summary = run_client("--url", s.url("/"), "--requests", 400, "--keepalive", timeout=30)
    assert code == 0 and summary["origins"] == {"app-1": 300, "app-2": 100}, summary
    assert s.status()["config_version"] == 51
    assert metric(s, "sluice_config_reloads_total", result="success") == 50
    assert metric(s, "sluice_config_reloads_total", result="failure") == 0


def test_a_bad_file_on_reload_is_rejected_with_every_error_and_the_old_config_keeps_serving(
        origins, sluice):
    a, b = origins(2)
    s = sluice(sluice_config([a], top=ADMIN))
    path = s.config_path
    path.write_text(sluice_config([a, b], top=ADMIN, server_keys={"app-2": {"weight": 0}})
                    .replace("workers = 1", "workrs = 1"))
    check = sluice_cli("check", path)
    assert check.returncode == 1, check
    *errors, summary = check.stdout.splitlines()
    assert summary == f"{path}: 2 error(s)", check
    assert len(errors) == 2 and all(ERROR_LINE.match(e) for e in errors), errors
    assert re.match(rf"{re.escape(str(path))}:3:\d+: server\.workrs: unknown key 'workrs'; "
                    r"did you mean 'workers'\?$", errors[0]), errors
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: upstreams\.app\.servers\[1\]\.weight: ",
                    errors[1]), errors

    # `sluice reload --config F` checks F first and does not bother the process.
    local = sluice_cli("reload", "--config", path, "--admin", s.admin_address)
    assert local.returncode == 1, local
    assert local.stdout.splitlines() == errors, local
    assert "2 error(s)" in local.stderr, local
    assert metric(s, "sluice_config_reloads_total", result="failure") == 0

    # `sluice reload --admin` alone: the process reloads its file and says why it refuses.
    remote = sluice_cli("reload", "--admin", s.admin_address)
    assert remote.returncode == 1, remote
    assert remote.stdout.splitlines() == errors, remote
    assert "the previous configuration keeps serving" in remote.stderr, remote
    assert metric(s, "sluice_config_reloads_total", result="failure") == 1

    r = s.admin("POST", "/api/reload")
    assert (r.status, r.json()) == (422, {"ok": False, "errors": errors}), r
    assert metric(s, "sluice_config_reloads_total", result="failure") == 2

    s.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="failure") == 3,
               timeout=3, what="SIGHUP reload rejected")
    assert metric(s, "sluice_config_reloads_total", result="success") == 0

    # The old config (app-1 alone, version 1) still serves.
    assert s.status()["config_version"] == 1
    answers = [timed_request(s.port)[0] for _ in range(6)]
    assert [(r.status, r.header("X-Origin")) for r in answers] == [(200, "app-1")] * 6
    assert b.stats()["requests"] == 0

    # Fixed: the same command now reloads, and app-2 takes its share.
    path.write_text(sluice_config([a, b], top=ADMIN))
    fixed = sluice_cli("reload", "--config", path, "--admin", s.admin_address)
    assert (fixed.returncode, fixed.stdout) == (0, "reloaded: config version 2, watched for 30s\n"), fixed
    assert metric(s, "sluice_config_reloads_total", result="success") == 1
    code, summary = run_client("--url", s.url("/"), "--requests", 10, "--keepalive", timeout=20)
    assert summary["origins"] == {"app-1": 5, "app-2": 5}, summary


def pin_for(s, origin, header="X-Pin"):
    """A value of `header` that the hash policy sends to `origin`."""
    for i in range(200):
        r = timed_request(s.port, headers=[(header, f"pin-{i}")])[0]
        if r.header("X-Origin") == origin:
            return f"pin-{i}"
    raise AssertionError(f"no {header} value maps to {origin}")


@pytest.mark.parametrize("how", ["api", "config"])
def test_drain_under_load_lets_ten_slow_requests_finish_and_sends_nothing_new(how, origins, sluice):
    """Ten 3-second requests run on app-1 when it is drained (`sluice drain --wait`, or
    `drain = true` in the file and a reload) while a client keeps sending ~150 req/s: nothing new
    reaches app-1, the ten finish with 200, the drain is reported complete right after the last
    one, and undraining gives app-1 its share back. The slow requests are steered to app-1 by
    a hashed header; the rest of the traffic has no such header and goes round robin."""
    a, b = origins(2)

    def config(drain):
        return sluice_config([a, b], balance="hash", workers=2, top=ADMIN,
                             upstream_extra='hash_key = "header:X-Pin"',
                             server_keys={"app-1": {"drain": True}} if drain else None)

    s = sluice(config(False))
    pin = pin_for(s, "app-1")
    slow = Background(s.port, 10, "/slow?delay=3000", headers=[("X-Pin", pin)])
    wait_until(lambda: a.stats()["in_flight"] == 10, timeout=3, what="ten slow requests on app-1")
    drain_cli = ["--upstream", "app", "--server", "app-1", "--admin", s.admin_address]
    exited = []
    with Load(s.port, rate=150, max_seconds=20) as load:
        wait_until(lambda: set(load.origins()) == {"app-1", "app-2"}, timeout=3,
                   what="load on both servers")
        if how == "api":
            waiter = subprocess.Popen(
                [str(SLUICE), "drain", *drain_cli, "--wait", "--timeout", "20s"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            watcher = threading.Thread(
                target=lambda: (waiter.wait(timeout=30), exited.append(time.monotonic())),
                daemon=True)
            watcher.start()
            wait_until(lambda: s.server_status("app-1")["draining"], timeout=3, interval=0.01,
                       what="draining")
        else:
            s.config_path.write_text(config(True))
            r = sluice_cli("reload", "--config", s.config_path, "--admin", s.admin_address)
            assert r.returncode == 0, r
        drained_at = load.now()
        # Once sluice counts only the ten slow requests in flight on app-1, every request picked
        # before the drain has been answered: from here on app-1 must get no new request at all
        # (docs/admin.md), not even one "picked just before".
        status = wait_until(lambda: (st := s.server_status("app-1"))["in_flight"] == 10 and st,
                            timeout=1, what="only the ten in flight")
        requests_after_drain = a.stats()["requests"]
        assert (status["draining"], status["drain_source"], status["drained"]) == (True, how, False)
        load.wait_for_more(15)

        if how == "api":
            load.wait_for_more(75)  # several of the CLI's 100 ms polls, by the load's clock
            assert waiter.poll() is None, "drain --wait returned while requests were in flight"
        else:
            wait_until(lambda: s.server_status("app-1")["drained"], timeout=10, interval=0.02,
                       what="drained")
            exited.append(time.monotonic())
        results = slow.join(timeout=10)
        if how == "api":
            watcher.join(timeout=10)
        answers = [(r.status, r.header("X-Origin")) for r, _ in results]
        assert answers == [(200, "app-1")] * 10, results
        last_done = max(done for _, done in results)
        # Reported drained right after the last one: within one of the CLI's 100 ms polls (the
        # test's 20 ms ones for a reload), on a loaded machine SCHEDULING_SLACK later at most.
        # (Slightly before is possible: sluice counts the request done as its last byte leaves.)
        print(f"drained {exited[0] - last_done:.3f} s after the last request")
        assert exited and -0.05 <= exited[0] - last_done <= 0.1 + SCHEDULING_SLACK, (exited, last_done)
        if how == "api":
            assert waiter.returncode == 0, (waiter.stdout.read(), waiter.stderr.read())
            out = waiter.stdout.read()
            assert "app/app-1: 10 request(s) in flight" in out, out
            assert out.endswith("app/app-1: drained\n"), out
        assert a.stats()["requests"] == requests_after_drain
        assert load.origins(since=drained_at).keys() == {"app-2"}
        status = s.server_status("app-1")
        assert (status["draining"], status["drained"], status["in_flight"]) == (True, True, 0)

        if how == "api":
            r = sluice_cli("undrain", *drain_cli)
            assert (r.returncode, r.stdout) == (0, "app/app-1: undrained\n"), r
        else:
            s.config_path.write_text(config(False))
            r = sluice_cli("reload", "--config", s.config_path, "--admin", s.admin_address)
            assert r.returncode == 0, r
        undrained_at = load.now()
        assert s.server_status("app-1")["drain_source"] == ""
        wait_until(lambda: load.now() > undrained_at + 0.8, timeout=3, what="traffic after undrain")
    back = load.origins(since=undrained_at + 0.05)
    assert 0.35 <= back.get("app-1", 0) / sum(back.values()) <= 0.65, back
    assert load.failures() == [], load.failures()[:10]


def test_an_api_drain_survives_a_reload_that_moves_the_server_to_a_new_address(origins, sluice):
    """The rolling deploy: drain app-1, start its new version elsewhere, point app-1 at it and
    reload. app-1 must stay drained (no traffic) until the operator undrains it."""
    a, b = origins(2)
    s = sluice(sluice_config([a, b], top=ADMIN))
    assert s.admin("POST", "/api/upstreams/app/servers/app-1/drain").status == 200
    new_a, = origins(1)  # also called app-1, on a new port
    s.config_path.write_text(sluice_config([new_a, b], top=ADMIN))
    assert s.admin("POST", "/api/reload").json() == {"ok": True, "version": 2, "watch_ms": 30000}
    status = s.server_status("app-1")
    assert status["address"] == new_a.address
    answers = [timed_request(s.port)[0].header("X-Origin") for _ in range(6)]
    assert (status["draining"], status["drain_source"]) == (True, "api"), status
    assert new_a.stats()["requests"] == 0, answers


def connect_or_refused(port):
    """A GET on a fresh connection: its status, or "refused" when nothing accepts any more (a
    reset: the connect landed in the backlog of a listener closing at that moment)."""
    try:
        return timed_request(port, timeout=3)[0].status
    except (ConnectionRefusedError, ConnectionResetError):
        return "refused"


def test_sigterm_with_shutdown_delay_fails_readiness_first_then_drains_and_exits_0(origins, sluice):
    a, = origins(1)
    s = sluice(sluice_config([a], top=ADMIN, server_extra='shutdown_delay = "1s"'))
    kept = Conn(s.port)
    assert kept.request(GET).status == 200
    slow = Background(s.port, 1, "/slow?delay=1800")
    wait_until(lambda: a.stats()["in_flight"] == 1, timeout=3, what="slow request in flight")
    assert s.admin("GET", "/readyz").status == 200

    sent = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    # At once: the signal reaches the control loop asynchronously, so allow it a few ms.
    ready = wait_until(lambda: (r := s.admin("GET", "/readyz")).status == 503 and r,
                       timeout=0.1, interval=0.005, what="/readyz 503")
    assert ready.body == b"not ready", ready
    assert s.admin("GET", "/healthz").status == 200

    # During the delay: new connections and kept-alive ones are served.
    served = []
    while time.monotonic() - sent < 0.8:
        served.append(connect_or_refused(s.port))
        time.sleep(0.1)
    assert served and set(served) == {200}, served
    assert kept.request(GET).status == 200

    # Then the listeners close, not before the delay is over (sluice's own log stamps)...
    delay = s.log_time(r"shutdown: no longer accepting") - s.log_time(r"graceful shutdown")
    assert_expired_on_time(delay + LOG_RESOLUTION, 1.0, "shutdown_delay")
    wait_until(lambda: connect_or_refused(s.port) == "refused", timeout=2, interval=0.02,
               what="listeners closed")
    # ...the request in flight finishes, and sluice exits 0 once it has.
    (r, done), = slow.join(timeout=5)
    assert r.status == 200, r
    assert s.proc.wait(timeout=5) == 0
    assert time.monotonic() >= done
    kept.close()


def test_metrics_and_status_count_what_the_test_sent(origins, sluice):
    """30 requests over three servers round robin are 10/10/10 in sluice_requests_total and in
    /api/status; ten picks of a closed port (no retries) are ten 502s and ten failures."""
    fleet = origins(3)
    dead = f"127.0.0.1:{closed_port()}"
    s = sluice(sluice_config(fleet, top=ADMIN, workers=2))
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"app-1": 10, "app-2": 10, "app-3": 10}, summary
    for o in fleet:
        assert metric(s, "sluice_requests_total", upstream="app", server=o.name, code="2xx") == 10
        st = s.server_status(o.name)
        assert (st["requests"], st["failures"]) == (10, 0), st
    assert sum(metric_samples(s, "sluice_request_duration_seconds_count", upstream="app")) == 30
    assert sum(metric_samples(s, "sluice_requests_total")) == 30

    # Passive checks off (they are on by default and would eject the dead server after 3).
    s.config_path.write_text(sluice_config([*fleet, dead], top=ADMIN, workers=2,
                                           upstream_extra=toml_table("upstreams.app.retry",
                                                                     attempts=1)
                                           + toml_table("upstreams.app.passive", max_fails=0)))
    assert s.admin("POST", "/api/reload").status == 200
    code, summary = run_client("--url", s.url("/"), "--requests", 40, "--keepalive", timeout=20)
    assert summary["statuses"] == {"200": 30, "502": 10}, summary
    for o in fleet:
        assert metric(s, "sluice_requests_total", upstream="app", server=o.name, code="2xx") == 20
        assert s.server_status(o.name)["failures"] == 0
    st = s.server_status(dead)
    assert (st["requests"], st["failures"]) == (10, 10), st
    assert sum(metric_samples(s, "sluice_requests_total", server=dead)) == 10
    assert sum(metric_samples(s, "sluice_requests_total")) == 70
    assert sum(metric_samples(s, "sluice_request_duration_seconds_count", upstream="app")) == 70


def test_metrics_count_the_503s_sluice_answers_itself_when_every_server_is_down(origins, sluice):
    """An outage must show in the request metrics: five 503 `no healthy server` answers are five
    requests in sluice_requests_total (server="") and five observations of their duration."""
    fleet = origins(2)
    s = sluice(sluice_config(fleet, top=ADMIN, upstream_extra=toml_table(
        "upstreams.app.health", interval="100ms", timeout="80ms", fall=1)))
    for o in fleet:
        o.set_health(503)
    for o in fleet:
        s.log.wait_for(rf"upstream app server {o.name}: up -> down", timeout=2)
    for _ in range(5):
        r = timed_request(s.port)[0]
        assert (r.status, r.header("Sluice-Error")) == (503, "no healthy server"), r
    # A request is counted when its exchange ends, just after its answer was written: the last
    # one may land a moment after the client read it.
    wait_until(lambda: sum(metric_samples(s, "sluice_requests_total", upstream="app")) >= 5,
               timeout=2, what="the fifth request counted")
    assert sum(metric_samples(s, "sluice_requests_total", upstream="app")) == 5
    assert sum(metric_samples(s, "sluice_requests_total", upstream="app", server="")) == 5
    assert sum(metric_samples(s, "sluice_request_duration_seconds_count", upstream="app")) == 5


def test_with_a_token_file_a_drain_without_the_token_is_401_and_changes_nothing(origins, sluice,
                                                                                 tmp_path):
    fleet = origins(2)
    token_file = tmp_path / "admin.token"
    token_file.write_text("s3cret-token\n")
    s = sluice(sluice_config(fleet, top=toml_table("admin", listen="127.0.0.1:0",
                                                   token_file=str(token_file))))
    path = "/api/upstreams/app/servers/app-1/drain"
    for token in (None, "wrong", "s3cret-toke"):  # absent, wrong, a prefix
        r = s.admin("POST", path, token=token)
        assert r.status == 401, (token, r)
        assert r.header("WWW-Authenticate") == 'Bearer realm="sluice-admin"', r
        assert s.server_status("app-1")["draining"] is False
    cli = sluice_cli("drain", "--upstream", "app", "--server", "app-1", "--admin", s.admin_address)
    assert cli.returncode == 1 and "401" in cli.stderr, cli
    assert s.server_status("app-1")["draining"] is False

    r = s.admin("POST", path, token="s3cret-token")
    assert r.status == 200, r
    assert r.json() == {"upstream": "app", "server": "app-1", "draining": True}, r
    status = s.server_status("app-1")
    assert (status["draining"], status["drain_source"]) == (True, "api"), status
    assert s.admin("GET", "/api/status").status == 200  # reading needs no token
    cli = sluice_cli("undrain", "--upstream", "app", "--server", "app-1",
                     "--admin", s.admin_address, "--token-file", token_file)
    assert cli.returncode == 0, cli
    assert s.server_status("app-1")["draining"] is False


def test_watch_config_applies_an_edit_and_rejects_a_bad_one(origins, sluice):
    """[server] watch_config = true: saving the file reloads it (no signal, no API call); a
    broken save is rejected and the running config keeps serving."""
    a, b = origins(2)
    watch = "watch_config = true"
    s = sluice(sluice_config([a], server_extra=watch, top=ADMIN))
    assert {timed_request(s.port)[0].header("X-Origin") for _ in range(4)} == {"app-1"}

    # An editor-style save: write a temporary file, rename it over the config.
    tmp = s.config_path.with_suffix(".tmp")
    tmp.write_text(sluice_config([a, b], server_extra=watch, top=ADMIN))
    tmp.replace(s.config_path)
    wait_until(lambda: s.status()["config_version"] == 2, timeout=5, what="reload by file watch")
    assert {timed_request(s.port)[0].header("X-Origin") for _ in range(4)} == {"app-1", "app-2"}

    s.config_path.write_text(sluice_config([a, b], server_extra=watch, top=ADMIN) + "\nbroken = [\n")
    wait_until(lambda: metric(s, "sluice_config_reloads_total", result="failure") == 1, timeout=5,
               what="rejected reload")
    assert s.status()["config_version"] == 2
    assert {timed_request(s.port)[0].header("X-Origin") for _ in range(4)} == {"app-1", "app-2"}


def test_retries_are_counted_by_the_failure_retried(origins, scripted, sluice):
    """A 503 answered by one server and retried on the other shows up as
    sluice_retries_total{reason="status"}; a refused connection as reason="connect_refused"."""
    bad = scripted("bad", status=503)
    good, = origins(1, prefix="good")
    s = sluice(sluice_config([bad, good], top=ADMIN))  # default retry settings
    for _ in range(4):
        assert timed_request(s.port)[0].status == 200
    assert metric(s, "sluice_retries_total", upstream="app", reason="status") == 2
    assert metric(s, "sluice_retries_total", upstream="app", reason="connect_refused") == 0

    t = sluice(sluice_config([f"127.0.0.1:{closed_port()}", good], top=ADMIN), name="t.toml")
    for _ in range(4):
        assert timed_request(t.port)[0].status == 200
    assert metric(t, "sluice_retries_total", upstream="app", reason="connect_refused") == 2


def test_check_diff_running_compares_a_new_file_with_what_the_process_serves(tmp_path, sluice):
    fleet = ["127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"]
    s = sluice(sluice_config(fleet, top=ADMIN))
    # The file on disk changes without a reload: the diff must still be against what runs.
    s.config_path.write_text(sluice_config(fleet, top=ADMIN,
                                           server_keys={"127.0.0.1:9102": {"weight": 5}}))
    new = tmp_path / "new.toml"
    # As the running config got it (conftest.with_error_detail), so that only the servers differ.
    new.write_text(with_error_detail(sluice_config(["127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9104"],
                                                   top=ADMIN, server_keys={"127.0.0.1:9102": {"weight": 3}})))
    r = sluice_cli("check", new, "--diff-running", "--admin", s.admin_address)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert f"no changes from" not in r.stdout
    assert "upstream app: - server 127.0.0.1:9103" in lines, r.stdout
    assert "upstream app: ~ server 127.0.0.1:9102 weight 1 -> 3" in lines, r.stdout
    assert any(l.startswith("upstream app: + server 127.0.0.1:9104") for l in lines), r.stdout

    # Against itself after a reload of that file: nothing to change.
    s.config_path.write_text(new.read_text())
    assert s.admin("POST", "/api/reload").status == 200
    same = sluice_cli("check", new, "--diff-running", "--admin", s.admin_address)
    assert same.returncode == 0 and "no changes from the running config" in same.stdout, same
    assert str(s.config_path) in same.stdout, same


def test_check_diff_running_without_a_reachable_admin_api_exits_2(tmp_path):
    new = tmp_path / "new.toml"
    new.write_text(sluice_config(["127.0.0.1:9101"]))
    r = sluice_cli("check", new, "--diff-running", "--admin", f"127.0.0.1:{closed_port()}")
    assert r.returncode == 2, r
    assert "cannot reach the admin API" in r.stderr, r


def test_connections_gauge_counts_client_and_upstream_sides(origins, sluice):
    """sluice_connections{side="upstream"}: connections in use by a request plus idle in the
    pools. Two slow requests in flight hold two (on two servers); afterwards both connections
    wait in the pool, and a drain of their server closes its idle one."""
    fleet = origins(2)
    s = sluice(sluice_config(fleet, top=ADMIN, workers=2))
    assert metric(s, "sluice_connections", side="upstream") == 0
    slow = Background(s.port, 2, target="/?delay=1500")
    wait_until(lambda: metric(s, "sluice_connections", side="upstream") == 2, timeout=5,
               interval=0.02, what="two upstream connections in use")
    assert metric(s, "sluice_connections", side="client") >= 2
    assert [r.status for r, _ in slow.join()] == [200, 200]
    # Both answers were complete and kept-alive: the connections are now idle in the pools.
    wait_until(lambda: metric(s, "sluice_connections", side="client") == 0, timeout=5,
               interval=0.02, what="client connections closed")
    assert metric(s, "sluice_connections", side="upstream") == 2
    assert s.admin("POST", f"/api/upstreams/app/servers/{fleet[0].name}/drain").status == 200
    wait_until(lambda: metric(s, "sluice_connections", side="upstream") == 1, timeout=5,
               interval=0.02, what="the drained server's idle connection closed")
