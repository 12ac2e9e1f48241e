"""A reload that watches itself (docs/operations.md, "The watch after a reload"): a config that is
valid but wrong is rolled back on its own, with the figures; a good one, a deliberate one
(--no-watch) and one judged on too little traffic stay. Each test sets only `[reload] watch` (3 s
instead of 30 s, to keep the suite fast); every threshold is the default."""
import re
import signal
import time

from conftest import (Load, metric, sluice_cli, sluice_config, toml_table, wait_until)
from test_service import NotifySocket

ADMIN = toml_table("admin", listen="127.0.0.1:0")
WATCH_S = 3
WATCH = toml_table("reload", watch=f"{WATCH_S}s")
# A valid config whose every request fails: the origins are asked to answer 500.
ANSWER_500 = 'request_headers = { set = { "X-Origin-Status" = "500" } }'
VERDICT = re.compile(r"^rolled back: failed share (\d+\.\d) % \(before 0\.0 %\) over (\d+(?:\.\d)? s)$", re.M)


def config(apps, upstream_extra="", server_keys=None, top=""):
    return sluice_config(apps, top=ADMIN + WATCH + top, upstream_extra=upstream_extra,
                         server_keys=server_keys)


def reload(s, *flags):
    return sluice_cli("reload", *flags, "--config", s.config_path, "--admin", s.admin_address)


def rolled_back_within_the_watch(s, bad_version):
    """The rollback's log line comes within watch + 1 s of the reload's, on sluice's clock."""
    reloaded = s.log_time(rf"reloaded .* \(config version {bad_version}\)")
    restored = s.log_time(rf"config version {bad_version + 1} restored the configuration before "
                          rf"version {bad_version}")
    assert 0 < restored - reloaded <= WATCH_S + 1, restored - reloaded


def test_a_reload_whose_servers_answer_500_is_rolled_back_with_the_figures(origins, sluice):
    apps = origins(3)
    s = sluice(config(apps))
    with Load(s.port, rate=150, max_seconds=30) as load:
        load.wait_for_more(100)  # the window before the reload
        s.config_path.write_text(config(apps, ANSWER_500))
        r = reload(s, "--wait")
        after = load.now()  # --wait returned: the rollback is done
        wait_until(lambda: len([x for x in load.records if x.sent >= after]) >= 100,
                   what="100 requests sent after the rollback")
    # `reload --wait` says why, with the figures, and fails.
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.startswith("reloaded: config version 2, watched for 3s\n"), r.stdout
    m = VERDICT.search(r.stdout)
    assert m and float(m.group(1)) >= 5.0, r.stdout
    rolled_back_within_the_watch(s, 2)
    # Before the reload and after the rollback, every request got 200.
    before = [x for x in load.records if x.done < load.records[0].sent + 0.5]
    late = [x for x in load.records if x.sent >= after]
    assert before and all(x.status == 200 for x in before), before
    assert len(late) >= 100 and [x for x in late if x.status != 200] == [], late
    # The counter, /api/status and the error log say the same.
    verdict = m.group(0)
    assert metric(s, "sluice_config_rollbacks_total") == 1
    st = s.status()
    assert st["config_version"] == 3
    assert (st["reload"]["state"], st["reload"]["version"], st["reload"]["verdict"]) == (
        "rolled_back", 2, verdict)
    assert s.log.wait_for(re.escape(f"config version 2 {verdict}; restoring the previous configuration"))

    # The same file again is refused, naming the rollback; `check --diff-running` shows what the
    # rollback undid; --no-watch applies it on purpose.
    again = reload(s)
    assert again.returncode == 1, again
    assert f"this file was rolled back before (config version 2, {verdict})" in again.stdout, again.stdout
    assert s.status()["config_version"] == 3
    diff = sluice_cli("check", s.config_path, "--diff-running", "--admin", s.admin_address)
    assert diff.returncode == 1, diff
    assert "request_headers" in diff.stdout, diff.stdout
    assert f"{s.config_path}: config version 2 {verdict}; the changes above were undone" in diff.stdout, diff.stdout
    forced = reload(s, "--wait", "--no-watch")
    assert (forced.returncode, forced.stdout) == (0, "reloaded: config version 4, not watched\napplied\n"), forced
    assert s.status()["reload"]["state"] == "unwatched"


def test_a_good_reload_stays(origins, sluice):
    apps = origins(3)
    s = sluice(config(apps))
    with Load(s.port, rate=100, max_seconds=30) as load:
        load.wait_for_more(100)
        s.config_path.write_text(config(apps, server_keys={"app-1": {"weight": 2}}))
        r = reload(s, "--wait")
        load.wait_for_more(50)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert re.search(r"^applied: failed share 0\.0 % \(before 0\.0 %\) over 3 s$", r.stdout, re.M), r.stdout
    assert load.failures() == []
    st = s.status()
    assert (st["config_version"], st["reload"]["state"]) == (2, "applied")
    assert metric(s, "sluice_config_rollbacks_total") == 0


def test_draining_two_of_three_is_rolled_back_unless_no_watch(origins, sluice):
    apps = origins(3)
    s = sluice(config(apps))
    drained = config(apps, server_keys={"app-1": {"drain": True}, "app-2": {"drain": True}})
    s.config_path.write_text(drained)
    r = reload(s, "--wait")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert re.search(r"^rolled back: upstream app: 1 of 3 servers up \(before 3 of 3\) after \d+(\.\d)? s$",
                     r.stdout, re.M), r.stdout
    assert [s.server_status(a.name)["draining"] for a in apps] == [False, False, False]
    # The deliberate change: applied, and still serving when the watch would have ended.
    forced = reload(s, "--wait", "--no-watch")
    assert forced.returncode == 0, (forced.stdout, forced.stderr)
    with Load(s.port, rate=100, max_seconds=30) as load:
        load.wait_for_more(int((WATCH_S + 1) * 100))
    assert load.failures() == []
    assert set(load.origins()) == {"app-3"}
    st = s.status()
    assert (st["config_version"], st["reload"]["state"]) == (4, "unwatched")


def test_a_health_path_failing_everywhere_is_rolled_back(origins, sluice):
    """Servers go down by their probes after a SIGHUP reload: the servers-up rule, with no
    traffic at all; systemd's STATUS= says so."""
    apps = origins(3)
    health = toml_table("upstreams.app.health", path="/health", interval="200ms", timeout="100ms")
    text = config(apps) + "\n" + health
    notify = NotifySocket()
    try:
        s = sluice(text, env=notify.env())
        notify.wait_for("READY")
        s.config_path.write_text(text.replace('path = "/health"', 'path = "/?status=404"'))
        s.proc.send_signal(signal.SIGHUP)
        # READY=1 after the reload, then again after the rollback, with the verdict in STATUS=.
        deadline = time.monotonic() + WATCH_S + 5
        status = ""
        while "rolled back" not in status:
            status = notify.next(max(0.01, deadline - time.monotonic())).get("STATUS", "")
        rolled_back_within_the_watch(s, 2)
        verdict = s.status()["reload"]["verdict"]
        assert re.fullmatch(r"rolled back: upstream app: 0 of 3 servers up \(before 3 of 3\) after "
                            r"\d+(\.\d)? s", verdict), verdict
        assert re.fullmatch(r"config version 3, \d/3 servers up; config version 2 " + re.escape(verdict),
                            status), status
        # The probes of the restored config bring the servers back.
        wait_until(lambda: [x["state"] for x in s.status()["upstreams"][0]["servers"]] == ["up"] * 3,
                   timeout=10, what="servers up again")
    finally:
        notify.close()


def test_too_little_traffic_stays_and_the_verdict_says_why(origins, sluice):
    apps = origins(3)
    s = sluice(config(apps))
    s.config_path.write_text(config(apps, ANSWER_500))
    with Load(s.port, rate=10, max_seconds=30, max_requests=20) as load:
        r = reload(s, "--wait")
    assert r.returncode == 0, (r.stdout, r.stderr)
    m = re.search(r"^applied: too little traffic to judge \((\d+) answers over 3 s, 100 needed\)$",
                  r.stdout, re.M)
    assert m and int(m.group(1)) < 100, r.stdout
    st = s.status()
    assert (st["config_version"], st["reload"]["state"]) == (2, "applied")
    assert [x.status for x in load.records][-1] == 500  # the new config serves


def test_state_survives_the_rollback_as_for_any_reload(origins, sluice, scripted):
    """A drain set through the API, a passive ejection and the pooled connections are the same
    after the rollback as before the bad reload (the rollback is a reload of the previous config:
    servers kept by identity)."""
    apps = origins(3)
    refused = "127.0.0.1:1"  # nothing listens: connect refused, ejected after 3 (passive default)
    passive = toml_table("upstreams.app.passive", fail_timeout="60s")
    text = config(apps + [refused]) + "\n" + passive
    s = sluice(text)
    assert s.admin("POST", "/api/upstreams/app/servers/app-1/drain").status == 200
    with Load(s.port, rate=100, max_seconds=30) as load:
        load.wait_for_more(100)
        wait_until(lambda: s.server_status(refused)["state"] == "ejected", what="the ejection")
        ejections = s.server_status(refused)["ejections"]
        connections = [a.stats()["connections"] for a in apps]
        s.config_path.write_text(config(apps + [refused], ANSWER_500) + "\n" + passive)
        r = reload(s, "--wait")
        load.wait_for_more(100)
    assert r.returncode == 1 and VERDICT.search(r.stdout), (r.stdout, r.stderr)
    app1 = s.server_status("app-1")
    assert (app1["draining"], app1["drain_source"]) == (True, "api")
    dead = s.server_status(refused)
    assert (dead["state"], dead["ejections"]) == ("ejected", ejections)
    # One client at a time, one worker: each origin kept the one pooled connection it had (the
    # one more connection is the /stats request's own).
    assert [a.stats()["connections"] for a in apps] == [c + 1 for c in connections]
    assert set(load.origins()) == {"app-2", "app-3"}
