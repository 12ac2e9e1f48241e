"""What ships for running sluice as a system service: the systemd units (deploy/systemd/)."""
import configparser
import shutil
import subprocess

import pytest

from conftest import ROOT, SLUICE

UNITS = ROOT / "deploy" / "systemd"


def unit(name):
    """A unit file's [Section] -> {key: value} (the last value of a repeated key)."""
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    p.read(UNITS / name)
    return p


def test_service_unit_is_notify_with_reload_and_a_hardened_dedicated_user():
    s = unit("sluice.service")["Service"]
    assert s["Type"] == "notify"
    assert s["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert s["ExecStart"] == "/usr/sbin/sluice run --config /etc/sluice/sluice.toml"
    assert s["User"] == "sluice" and s["Group"] == "sluice"
    assert s["AmbientCapabilities"] == "CAP_NET_BIND_SERVICE"
    assert s["CapabilityBoundingSet"] == "CAP_NET_BIND_SERVICE"
    assert s["ProtectSystem"] == "strict"
    assert s["StateDirectory"] == "sluice"  # the one writable place: the state file
    assert s["NoNewPrivileges"] == "yes"
    # Two descriptors per connection for the default max_connections (10000), plus the pools.
    assert int(s["LimitNOFILE"]) >= 2 * 10000 + 1024


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_units_pass_systemd_analyze_verify(tmp_path):
    # verify checks that ExecStart's binary exists: point it at the one just built.
    for name in ("sluice.service", "sluice.socket"):
        text = (UNITS / name).read_text().replace("/usr/sbin/sluice", str(SLUICE))
        (tmp_path / name).write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "sluice.service"),
                        str(tmp_path / "sluice.socket")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr

