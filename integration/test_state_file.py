"""`[server] state_file`: a restart keeps what sluice knew about its servers — drains made through
the admin API and the probes' verdicts — and a broken state file never stops it starting."""
import json
import signal

from conftest import sluice_config, timed_request, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def config(origins, state_path, interval="2s"):
    return sluice_config(origins, top=ADMIN, server_extra=f'state_file = "{state_path}"',
                         upstream_extra=f"""
[upstreams.app.health]
path = "/health"
interval = "{interval}"
timeout = "100ms"
rise = 2
fall = 1
""")


def served_by(s, n=20):
    """X-Origin of `n` requests in a row."""
    seen = []
    for _ in range(n):
        r, _ = timed_request(s.port, "GET", "/")
        assert r.status == 200, r
        seen.append(r.header("X-Origin"))
    return seen


def test_api_drain_survives_a_restart(sluice, origins, tmp_path):
    os_ = origins(2)
    state = tmp_path / "state.json"
    s = sluice(config(os_, state))
    assert s.admin("POST", "/api/upstreams/app/servers/app-1/drain").status == 200
    # Written on the change itself (within one health tick), not only at stop: a crash keeps it.
    wait_until(lambda: state.exists() and '"server":"app-1","drained":true' in state.read_text(),
               what="state file with the drain")
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait()

    s2 = sluice(config(os_, state))
    st = s2.server_status("app-1")
    assert st["draining"] and st["drain_source"] == "api", st
    assert set(served_by(s2)) == {"app-2"}
    assert s2.log.wait_for(r"state file .*: 2 of 2 saved server\(s\) restored")
    # Undrained through the API: that survives too (at a graceful stop).
    assert s2.admin("POST", "/api/upstreams/app/servers/app-1/undrain").status == 200
    assert s2.stop() == 0
    s3 = sluice(config(os_, state))
    assert not s3.server_status("app-1")["draining"]


def test_server_down_by_probes_starts_down_until_it_passes_probes(sluice, origins, tmp_path):
    os_ = origins(2)
    state = tmp_path / "state.json"
    s = sluice(config(os_, state, interval="200ms"))
    os_[0].set_health(503)
    wait_until(lambda: s.server_status("app-1")["state"] == "down", timeout=10, what="app-1 down")
    assert s.stop() == 0
    saved = json.loads(state.read_text())
    assert {"upstream": "app", "server": "app-1"}.items() <= next(
        e for e in saved["servers"] if e["server"] == "app-1").items()

    # The server is healthy again, but the new process has not probed it yet: it starts down
    # and gets no traffic before its first `rise` (2) passing probes, at least ~2 s away.
    os_[0].set_health(200)
    s2 = sluice(config(os_, state, interval="2s"))
    assert s2.server_status("app-1")["state"] == "down"
    assert set(served_by(s2)) == {"app-2"}
    wait_until(lambda: s2.server_status("app-1")["state"] == "up", timeout=15, what="app-1 up")
    assert "app-1" in served_by(s2)


def test_truncated_state_file_is_logged_and_ignored(sluice, origins, tmp_path):
    os_ = origins(2)
    state = tmp_path / "state.json"
    state.write_text('{"format": "sluice-state", "version": 1, "servers": [{"upstream": "ap')
    s = sluice(config(os_, state))
    assert s.log.wait_for(rf"state file {state}: not JSON .*; ignored")
    assert sorted(set(served_by(s))) == ["app-1", "app-2"]
    # And it is replaced by a good one.
    wait_until(lambda: '"format":"sluice-state"' in state.read_text(), what="state file rewritten")


def test_foreign_state_file_is_ignored(sluice, origins, tmp_path):
    state = tmp_path / "state.json"
    state.write_text('{"hello": "world"}\n')
    s = sluice(config(origins(1), state))
    assert s.log.wait_for(r"not a sluice state file")
    r, _ = timed_request(s.port, "GET", "/")
    assert r.status == 200
