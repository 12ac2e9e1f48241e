"""The command line: check, --version, --help, run's start-up and exit codes."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SLUICE, LogReader, closed_port, sluice_config

CONF_FILES = sorted((ROOT / "conf").glob("*.toml"))


def sluice_cmd(*args, cwd=None, timeout=10):
    return subprocess.run([str(SLUICE), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.mark.parametrize("path", CONF_FILES, ids=[p.name for p in CONF_FILES])
def test_check_accepts_every_shipped_config(path):
    p = sluice_cmd("check", path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout
    assert re.fullmatch(rf"{re.escape(str(path))}: ok: \d+ listeners?, \d+ upstreams? "
                        r"\(\d+ servers?\), \d+ routes?, (admin \S+|no admin)", lines[0]), lines[0]


def test_check_with_config_flag(tmp_path):
    f = tmp_path / "one.toml"
    f.write_text(sluice_config(["127.0.0.1:9001"]))
    p = sluice_cmd("check", "--config", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == f"{f}: ok: 1 listener, 1 upstream (1 server), 0 routes, no admin\n"


BAD = """\
[server]
listen = ["127.0.0.1"]
workrs = 4
idle_timeout = "60"

[log]
level = "loud"

[[route]]
path_prefix = "/api"
upstream = "ap"

[upstreams.app]
balance = "round_robin"

[[upstreams.app.servers]]
address = "127.0.0.1:9001"
weight = 0
"""


def test_check_reports_every_error_with_position_and_key_path(tmp_path):
    """The example of docs/configuration.md, line for line."""
    (tmp_path / "bad.toml").write_text(BAD)
    p = sluice_cmd("check", "bad.toml", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stdout.splitlines() == [
        "bad.toml:2:11: server.listen[0]: missing port in '127.0.0.1' (expected host:port)",
        "bad.toml:3:1: server.workrs: unknown key 'workrs'; did you mean 'workers'?",
        'bad.toml:4:16: server.idle_timeout: missing unit in \'60\'; add one of ms, s, m, h '
        '(e.g. "60s")',
        "bad.toml:7:9: log.level: unknown log level 'loud'; expected one of: trace, debug, info, "
        "warn, error",
        "bad.toml:11:12: route[0].upstream: unknown upstream 'ap'; did you mean 'app'?",
        "bad.toml:18:10: upstreams.app.servers[0].weight: must be between 1 and 1000, got 0; to "
        "take a server out of rotation, drain it instead of setting weight 0",
        "bad.toml: 6 error(s)",
    ]


@pytest.mark.parametrize("text", [
    '[server]\nmax_body_bytes = "16KB"\n[upstreams.app]\n',
    '[server]\nworkers = "two"\n[upstreams.app]\n',
    '[upstreams.a]\n[upstreams.b]\n',
    '[server]\nlisten = ["127.0.0.1:1", "127.0.0.1:1"]\n[upstreams.app]\n',
])
def test_check_error_lines_have_the_documented_shape(tmp_path, text):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    p = sluice_cmd("check", f)
    assert p.returncode == 1, p.stdout
    lines = p.stdout.splitlines()
    assert lines and lines[-1] == f"{f}: {len(lines) - 1} error(s)", p
    for line in lines[:-1]:
        assert re.fullmatch(rf"{re.escape(str(f))}:\d+:\d+: [\w.\[\]-]+: .+", line), line


def test_check_reports_a_toml_syntax_error_alone(tmp_path):
    f = tmp_path / "broken.toml"
    f.write_text('[server]\nlisten = ["127.0.0.1:0"\nworkrs = 4\n')
    p = sluice_cmd("check", f)
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == f"{f}: 1 error(s)", lines
    assert re.match(rf"{re.escape(str(f))}:\d+:\d+: ", lines[0]), lines[0]


def test_check_of_a_missing_file(tmp_path):
    f = tmp_path / "nope.toml"
    p = sluice_cmd("check", f)
    assert p.returncode == 1
    assert p.stdout.startswith(f"{f}: cannot read: "), p.stdout


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    p = sluice_cmd(flag)
    assert p.returncode == 0
    assert re.fullmatch(r"sluice \d+\.\d+\.\d+\n", p.stdout), p.stdout


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(flag):
    p = sluice_cmd(flag)
    assert p.returncode == 0
    for text in ("Usage:", "sluice run", "sluice check", "--version"):
        assert text in p.stdout, p.stdout


def test_unknown_argument_exits_2_with_one_line_and_a_pointer_to_the_help():
    """The error is the answer, not 40 lines of help that scroll it away (git, systemctl)."""
    p = sluice_cmd("--frobnicate")
    assert p.returncode == 2
    assert p.stderr == "sluice: unknown argument '--frobnicate'\nsee 'sluice --help'\n", p.stderr
    assert p.stdout == ""


def test_unknown_command_exits_2():
    p = sluice_cmd("serve")
    assert p.returncode == 2
    assert p.stderr == "sluice: unknown command 'serve'\nsee 'sluice --help'\n", p.stderr


def test_a_misused_flag_is_one_line_too():
    p = sluice_cmd("drain", "--upstream", "app")
    assert p.returncode == 2
    assert p.stderr == "sluice: drain needs --upstream U and --server S\nsee 'sluice --help'\n", p.stderr


def test_default_config_is_etc_for_an_installed_binary_and_conf_for_a_build_tree(tmp_path):
    """An installed binary (under .../usr/sbin, .../usr/bin, /usr/local/...) reads
    /etc/sluice/sluice.toml by default, as the packaged unit and the man page say; one run from
    a build tree reads conf/sluice.toml in the working directory, as the demo does."""
    installed = tmp_path / "root" / "usr" / "sbin" / "sluice"
    installed.parent.mkdir(parents=True)
    shutil.copy(SLUICE, installed)
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run([str(installed), "check"], capture_output=True, text=True, cwd=work,
                       timeout=10)
    if not os.path.exists("/etc/sluice/sluice.toml"):
        assert p.returncode == 1
        assert p.stdout.startswith("/etc/sluice/sluice.toml: cannot read: "), p.stdout
    assert "conf/sluice.toml" not in p.stdout + p.stderr
    q = sluice_cmd("check", cwd=work)
    assert q.returncode == 1
    assert q.stdout.startswith("conf/sluice.toml: cannot read: "), q.stdout


def test_check_diff_says_a_reload_would_be_refused_for_a_restart_only_key(tmp_path):
    """`reload` refuses a file that changes a restart-only key; `check --diff` says so on a line
    of its own and exits 1, instead of listing the change and exiting 0."""
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(sluice_config(["127.0.0.1:9"], workers=2))
    new.write_text(sluice_config(["127.0.0.1:9"], workers=1))
    p = sluice_cmd("check", new, "--diff", old)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert "~ server.workers: 2 -> 1 (needs a restart)" in lines, lines
    assert lines[-1] == ("reload would be refused: 1 key(s) need a restart (server.workers); "
                         "`sluice upgrade` or a restart applies them"), lines
    # A change a reload applies is listed and passes.
    new.write_text(sluice_config(["127.0.0.1:9", "127.0.0.1:10"], workers=2))
    p = sluice_cmd("check", new, "--diff", old)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not [l for l in p.stdout.splitlines() if "refused" in l], p.stdout


def test_run_refuses_a_bad_config(tmp_path):
    (tmp_path / "bad.toml").write_text(BAD)
    p = sluice_cmd("run", "--config", "bad.toml", cwd=tmp_path)
    assert p.returncode == 1
    assert "bad.toml:3:1: server.workrs: unknown key 'workrs'" in p.stderr
    assert "not starting" in p.stderr
    assert "listening" not in p.stderr


def run_on_a_taken_port(tmp_path, config_of):
    """`sluice run` on the config `config_of(port)` while this process listens on `port`;
    returns (port, CompletedProcess)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        f = tmp_path / "s.toml"
        f.write_text(config_of(port))
        return port, sluice_cmd("run", "--config", f)


def test_run_exits_1_when_it_cannot_listen(tmp_path):
    port, p = run_on_a_taken_port(
        tmp_path, lambda port: sluice_config(["127.0.0.1:9"]).replace("127.0.0.1:0", f"127.0.0.1:{port}"))
    assert p.returncode == 1
    # What failed, in the user's words: the address, the reason and who holds it (this test's
    # own process), no source location.
    holder = f"{Path('/proc/self/comm').read_text().strip()} (pid {os.getpid()})"
    assert (f"error cannot listen on 127.0.0.1:{port}: address already in use by {holder}\n"
            in p.stderr), p.stderr
    assert ".hpp" not in p.stderr and "[system:" not in p.stderr, p.stderr


def test_run_exits_1_when_the_admin_port_is_taken_and_says_why_in_plain_words(tmp_path):
    port, p = run_on_a_taken_port(
        tmp_path, lambda port: sluice_config(["127.0.0.1:9"], top=f'[admin]\nlisten = "127.0.0.1:{port}"\n'))
    assert p.returncode == 1
    assert (f"error admin: cannot listen on admin address 127.0.0.1:{port}: address already in use\n"
            in p.stderr), p.stderr
    assert ".hpp" not in p.stderr and "[system:" not in p.stderr, p.stderr


def test_log_lines_name_the_warn_level_as_the_config_does(tmp_path, sluice, origins):
    """`[log] level` says `warn`; a line at that level says `warn` too (text and JSON), not
    spdlog's `warning`, so that grepping for what one configured finds it."""
    a, = origins(1)
    # An explicit max_connections the descriptor limit cannot hold is a warning at start-up.
    text = sluice(sluice_config([a], server_extra="max_connections = 9000"), nofile=160)
    line = next(l for l in text.log.lines if "max_connections 9000" in l)
    assert line.split(" ")[1] == "warn", line
    assert not [l for l in text.log.lines if " warning " in l], text.log.lines
    js = sluice(sluice_config([a], server_extra="max_connections = 9000")
                .replace('level = "info"', 'level = "info"\nerror_format = "json"'),
                name="json.toml", nofile=160)
    record = next(json.loads(l) for l in js.log.lines if "max_connections 9000" in l)
    assert record["level"] == "warn", record


def test_status_summarises_upstreams_and_servers(sluice, origins):
    a, b, c = origins(3)
    s = sluice(sluice_config([a, b, c], top='[admin]\nlisten = "127.0.0.1:0"\n'))
    assert sluice_cmd("drain", "--upstream", "app", "--server", "app-2", "--admin",
                      s.admin_address).returncode == 0
    p = sluice_cmd("status", "--admin", s.admin_address)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"config version 1 ({s.config_path})", lines
    assert lines[1] == "upstream app (round_robin): 2/3 servers up", lines
    assert re.fullmatch(rf"  app-1  {a.address}  up: .*; in flight 0, requests 0, failures 0", lines[2]), lines
    assert re.fullmatch(rf"  app-2  {b.address}  drained \(api\), health up; in flight 0, "
                        r"requests 0, failures 0", lines[3]), lines
    assert len(lines) == 5, lines
    # No admin API there: exit 2, as the other admin commands.
    p = sluice_cmd("status", "--admin", f"127.0.0.1:{closed_port()}")
    assert p.returncode == 2
    assert "cannot reach the admin API" in p.stderr


def test_sigterm_right_after_start_is_graceful(tmp_path):
    """A supervisor that sends SIGTERM as soon as sluice says it started gets a graceful exit 0."""
    f = tmp_path / "s.toml"
    f.write_text(sluice_config(["127.0.0.1:9"]))
    codes = []
    for _ in range(30):
        proc = subprocess.Popen([str(SLUICE), "run", "--config", str(f)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            LogReader(proc, proc.stderr).wait_for(r"sluice .* started")
            proc.send_signal(signal.SIGTERM)
            codes.append(proc.wait(timeout=10))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == [0] * 30, codes


def test_the_start_line_names_the_pid_as_sluice_writes_no_pid_file(sluice, origins):
    """docs/operations.md: without systemd, a signal's target is the pid sluice logs at start."""
    a, = origins(1)
    s = sluice(sluice_config([a]))
    line = next(l for l in s.log.lines if " started: " in l)
    assert f"started: pid {s.proc.pid}, 1 worker(s), config {s.config_path} (version 1)" in line, line
