"""What ships for running sluice as a system service: the systemd units (deploy/systemd/) and the
Debian package (scripts/package.sh)."""
import configparser
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, SLUICE

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
    # The shell's kill builtin: /bin/kill (procps) is not a dependency of the package.
    assert s["ExecReload"] == "/bin/sh -c 'kill -HUP $$MAINPID'"
    assert s["ExecStart"] == "/usr/sbin/sluice run --config /etc/sluice/sluice.toml"
    assert s["User"] == "sluice" and s["Group"] == "sluice"
    assert s["AmbientCapabilities"] == "CAP_NET_BIND_SERVICE"
    assert s["CapabilityBoundingSet"] == "CAP_NET_BIND_SERVICE"
    assert s["ProtectSystem"] == "strict"
    assert s["StateDirectory"] == "sluice"  # the one writable place: the state file
    assert s["NoNewPrivileges"] == "yes"
    # Two descriptors per connection for the default max_connections (10000), plus the pools.
    assert int(s["LimitNOFILE"]) >= 2 * 10000 + 1024


def test_restarting_the_service_leaves_the_socket_unit_listening():
    """By systemd.unit(5), PartOf=, BindsTo= and Requires= on the service make a restart (or stop)
    of the service restart (or stop) the socket unit too: its listener would close, refusing the
    connections that should wait in the backlog while sluice restarts (docs/operations.md)."""
    sock = unit("sluice.socket")
    propagating = ("PartOf", "BindsTo", "Requires", "Requisite", "Upholds")
    for key in propagating:
        assert "sluice.service" not in sock["Unit"].get(key, ""), f"sluice.socket {key}="
    # Nor may the service push its stops and restarts to the socket from its side.
    service = unit("sluice.service")["Unit"]
    for key in ("PropagatesStopTo",):
        assert "sluice.socket" not in service.get(key, ""), f"sluice.service {key}="
    # The socket triggers the service by name: no Service= pointing elsewhere.
    assert sock["Socket"].get("Service", "sluice.service") == "sluice.service"
    assert sock["Install"]["WantedBy"] == "sockets.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_units_pass_systemd_analyze_verify(tmp_path):
    # verify checks that ExecStart's binary exists: point it at the one just built.
    for name in ("sluice.service", "sluice.socket"):
        text = (UNITS / name).read_text().replace("/usr/sbin/sluice", str(SLUICE))
        (tmp_path / name).write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "sluice.service"),
                        str(tmp_path / "sluice.socket")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr


# The Debian package: built once for the tests below (scripts/package.sh, ~15 s).
@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if shutil.which("dpkg-deb") is None or shutil.which("dpkg-shlibdeps") is None:
        pytest.skip("no dpkg-dev")
    out = tmp_path_factory.mktemp("deb")
    p = subprocess.run([str(ROOT / "scripts" / "package.sh"), str(out)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "BUILD_DIR": str(BUILD)})
    assert p.returncode == 0, p.stderr
    path = Path(p.stdout.strip().splitlines()[-1])
    assert path.is_file()
    return path


def deb_field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_package_holds_binary_conffile_unit_and_man_pages(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    files = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    for path in ("/usr/sbin/sluice", "/etc/sluice/sluice.toml", "/lib/systemd/system/sluice.service",
                 "/usr/lib/sysusers.d/sluice.conf", "/usr/share/man/man8/sluice.8.gz",
                 "/usr/share/man/man5/sluice.toml.5.gz", "/usr/share/doc/sluice/copyright",
                 "/usr/share/doc/sluice/examples/sluice.socket"):
        assert path in files, path
    conffiles = subprocess.run(["dpkg-deb", "--info", str(deb), "conffiles"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert conffiles == ["/etc/sluice/sluice.toml"]
    # Dependencies come from the binary's shared libraries (dpkg-shlibdeps), not a hand-kept list.
    depends = deb_field(deb, "Depends")
    for lib in ("libc6", "libstdc++6", "libssl3", "libsystemd0", "libspdlog"):
        assert lib in depends, depends


@pytest.mark.skipif(shutil.which("lintian") is None, reason="no lintian")
def test_lintian_reports_no_errors(deb):
    p = subprocess.run(["lintian", "--fail-on", "error", str(deb)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not [l for l in p.stdout.splitlines() if l.startswith("E:")], p.stdout


def man_text(path):
    p = subprocess.run(["man", "-l", "-Tutf8", str(path)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "MANWIDTH": "100"})
    assert p.returncode == 0, p.stderr
    # Bold and underline as overstrikes: plain text for the checks.
    return re.sub(r".\x08", "", p.stdout)


@pytest.mark.skipif(shutil.which("man") is None, reason="no man")
def test_man_page_tables_keep_escaped_bars_and_end_each_entry_with_one_full_stop(tmp_path):
    """docs/configuration.md writes a literal bar in a table cell as `\\|` (GitHub's syntax): it
    is part of the cell, not a boundary, and the man page shows the bar."""
    subprocess.run(["/usr/bin/python3", str(ROOT / "scripts" / "gen-man.py"), str(SLUICE),
                    str(tmp_path)], check=True, timeout=60)
    roff = (tmp_path / "sluice.toml.5").read_text()
    page5 = " ".join(man_text(tmp_path / "sluice.toml.5").split())
    for whole in ('proto=http|https appended (X-Forwarded-* are sent either way)',
                  '"COUNT/s|m|h" (COUNT 1..1000000, required); burst 1..10000000'):
        assert whole in page5, whole
    # The entry's details end with the meaning's own full stop, not a doubled one.
    doubled = [l for l in roff.splitlines() if re.search(r"[^.]\.\.$", l)]  # "..." is an ellipsis
    assert not doubled, doubled
    assert "See docs/edge.md." in page5


def test_unpacked_package_runs_and_its_man_pages_render(deb, tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    binary = root / "usr/sbin/sluice"
    assert subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                          check=True).stdout.startswith("sluice ")
    check = subprocess.run([str(binary), "check", str(root / "etc/sluice/sluice.toml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    page8 = man_text(root / "usr/share/man/man8/sluice.8.gz")
    for word in ("SYNOPSIS", "COMMANDS", "SIGNALS", "SIGHUP", "SIGTERM", "SIGUSR2",
                 "/etc/sluice/sluice.toml"):
        assert word in page8, word
    # Every subcommand of `sluice --help` is in sluice(8): both come from the same text.
    for command in ("run", "check", "reload", "drain", "undrain", "upgrade"):
        assert f"sluice {command}" in page8, command

    page5 = man_text(root / "usr/share/man/man5/sluice.toml.5.gz")
    # Every key of the full example config is described (the page is docs/configuration.md).
    keys = set(re.findall(r"^#? ?([a-z_]+) = ", (ROOT / "conf/full-example.toml").read_text(), re.M))
    assert len(keys) > 40
    missing = sorted(k for k in keys if not re.search(rf"^\s+(?:[a-z_]+, )*{k}\b", page5, re.M))
    assert not missing, missing


def test_package_installs_and_purges_cleanly_in_a_scratch_root(deb, tmp_path):
    """dpkg --root with chrootless maintainer scripts: they act on $DPKG_ROOT, never on this
    machine (the dependencies are not in the empty root, hence --force-depends)."""
    root = tmp_path / "root"
    (root / "var/lib/dpkg/updates").mkdir(parents=True)
    (root / "var/lib/dpkg/info").mkdir()
    (root / "var/lib/dpkg/status").touch()
    dpkg = ["dpkg", f"--root={root}", "--force-script-chrootless", "--log=/dev/null"]
    p = subprocess.run([*dpkg, "--force-depends", "-i", str(deb)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (root / "usr/sbin/sluice").is_file()
    assert re.search(r"^sluice:x:\d+:\d+:.*:/var/lib/sluice:/usr/sbin/nologin$",
                     (root / "etc/passwd").read_text(), re.M)
    p = subprocess.run([*dpkg, "--purge", "sluice"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    left = [str(f.relative_to(root)) for f in root.rglob("*")
            if f.is_file() and not str(f.relative_to(root)).startswith(("var/lib/dpkg", "etc/"))]
    assert left == [], left
    assert not (root / "etc/sluice").exists()


def test_the_pgo_training_run_drives_sluice_through_its_paths_and_ends_it_cleanly():
    """scripts/build-pgo.sh's training (scripts/pgo_train.py), run here against the build under
    test: every load it makes is answered, sluice exits 0 at its SIGTERM (the profile is written
    at exit), and nothing it started is left running."""
    before = subprocess.run(["pgrep", "-f", str(BUILD / "sluice-origin")], capture_output=True,
                            text=True).stdout.split()
    p = subprocess.run(["/usr/bin/python3", str(ROOT / "scripts" / "pgo_train.py"), str(BUILD)],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "pgo_train.py: trained" in p.stderr
    after = subprocess.run(["pgrep", "-f", str(BUILD / "sluice-origin")], capture_output=True,
                           text=True).stdout.split()
    assert set(after) <= set(before), "an origin of the training run is still running"
