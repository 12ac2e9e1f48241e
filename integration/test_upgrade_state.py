"""`sluice upgrade` hands what the old process knows about its servers to the new one in the
upgrade itself, with no state file: a server drained through the CLI stays drained, an ejected
one stays ejected for the rest of its ejection."""
import os
import re
import signal

from conftest import gone, sluice_cli, sluice_config, toml_table, wait_until
from test_listen_ownership import served_by

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def upgrade(s):
    """Upgrades `s` and waits for the old process to exit; returns the new pid."""
    r = sluice_cli("upgrade", "--admin", s.admin_address, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(re.search(r"upgraded: pid (\d+)", r.stdout).group(1))
    assert s.proc.wait(timeout=20) == 0
    return pid


def test_a_cli_drain_survives_an_upgrade_without_a_state_file(sluice, origins):
    servers = origins(3)
    s = sluice(sluice_config(servers, top=ADMIN))
    assert "state_file" not in s.config_path.read_text()
    r = sluice_cli("drain", "--upstream", "app", "--server", "app-2", "--admin", s.admin_address)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = upgrade(s)
    try:
        assert s.server_status("app-2")["draining"] is True
        assert s.server_status("app-2")["drain_source"] == "api"
        assert s.server_status("app-1")["draining"] is False
        assert sorted(set(served_by(s.port, 12))) == ["app-1", "app-3"]
        s.log.wait_for(r"server app/app-2: restored from the process this one replaces: up, drained")
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")


def test_an_ejection_survives_an_upgrade_without_a_state_file(sluice, origins):
    servers = origins(3)
    s = sluice(sluice_config(servers, top=ADMIN,
                             upstream_extra=toml_table("upstreams.app.passive", max_fails=3,
                                                        fail_timeout="60s")))
    broken = servers[2]
    broken.stop()
    # GETs to the stopped origin fail to connect and are retried elsewhere: every client gets its
    # 200 while app-3 collects the failures that eject it.
    for _ in range(60):
        if s.server_status("app-3")["state"] == "ejected":
            break
        served_by(s.port, 3)
    assert s.server_status("app-3")["state"] == "ejected"
    # The origin is back: a process that forgot the ejection would send it requests at once.
    back = origins.restart(broken)
    pid = upgrade(s)
    try:
        assert s.server_status("app-3")["state"] == "ejected"
        assert sorted(set(served_by(s.port, 12))) == ["app-1", "app-2"]
        assert back.stats()["requests"] == 0
        s.log.wait_for(r"server app/app-3: restored from the process this one replaces: ejected")
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")
