"""The command line: check, --version, --help, run's start-up and exit codes."""
import re
import signal
import socket
import subprocess

import pytest

from conftest import ROOT, SLUICE, LogReader, sluice_config

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


def test_unknown_argument_exits_2_with_usage():
    p = sluice_cmd("--frobnicate")
    assert p.returncode == 2
    assert "unknown argument '--frobnicate'" in p.stderr
    assert "Usage:" in p.stderr


def test_unknown_command_exits_2():
    p = sluice_cmd("serve")
    assert p.returncode == 2
    assert "unknown command 'serve'" in p.stderr


def test_run_refuses_a_bad_config(tmp_path):
    (tmp_path / "bad.toml").write_text(BAD)
    p = sluice_cmd("run", "--config", "bad.toml", cwd=tmp_path)
    assert p.returncode == 1
    assert "bad.toml:3:1: server.workrs: unknown key 'workrs'" in p.stderr
    assert "not starting" in p.stderr
    assert "listening" not in p.stderr


def test_run_exits_1_when_it_cannot_listen(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        f = tmp_path / "s.toml"
        f.write_text(sluice_config(["127.0.0.1:9"]).replace("127.0.0.1:0", f"127.0.0.1:{port}"))
        p = sluice_cmd("run", "--config", f)
    assert p.returncode == 1
    # What failed, in the user's words: the address and the reason, no source location.
    assert f"error cannot listen on 127.0.0.1:{port}: address already in use\n" in p.stderr, p.stderr
    assert ".hpp" not in p.stderr and "[system:" not in p.stderr, p.stderr


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
