"""`sluice upgrade` hands what the old process knows about its servers to the new one in the
upgrade itself, with no state file: a server drained through the CLI stays drained, an ejected
one stays ejected for the rest of its ejection."""
import os
import re
import signal
import subprocess

from conftest import SLUICE, Conn, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def cli(*args, timeout=60):
    return subprocess.run([str(SLUICE), *args], capture_output=True, text=True, timeout=timeout)


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def origins_of(port, n):
    names = []
    for _ in range(n):
        with Conn(port) as conn:
            r = conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert r.status == 200, r
            names.append(r.header("x-origin"))
    return names


def upgrade(s):
    """Upgrades `s` and waits for the old process to exit; returns the new pid."""
    r = cli("upgrade", "--admin", s.admin_address)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(re.search(r"upgraded: pid (\d+)", r.stdout).group(1))
    assert s.proc.wait(timeout=20) == 0
    return pid


def test_a_cli_drain_survives_an_upgrade_without_a_state_file(sluice, origins):
    servers = origins(3)
    s = sluice(sluice_config(servers, top=ADMIN))
    assert "state_file" not in s.config_path.read_text()
    r = cli("drain", "--upstream", "app", "--server", "app-2", "--admin", s.admin_address)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = upgrade(s)
    try:
        assert s.server_status("app-2")["draining"] is True
        assert s.server_status("app-2")["drain_source"] == "api"
        assert s.server_status("app-1")["draining"] is False
        assert sorted(set(origins_of(s.port, 12))) == ["app-1", "app-3"]
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
        origins_of(s.port, 3)
    assert s.server_status("app-3")["state"] == "ejected"
    # The origin is back: a process that forgot the ejection would send it requests at once.
    back = origins.restart(broken)
    pid = upgrade(s)
    try:
        assert s.server_status("app-3")["state"] == "ejected"
        assert sorted(set(origins_of(s.port, 12))) == ["app-1", "app-2"]
        assert back.stats()["requests"] == 0
        s.log.wait_for(r"server app/app-3: restored from the process this one replaces: ejected")
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")
