"""What you edit is what runs: a reload applies every key of the file, or refuses the whole file
and says why, and the old config keeps serving. Listeners and the admin API move, the log level
and the access-log format switch, and a key that needs a restart is refused by name.

Every wait is for a condition with a deadline; ports are loopback ephemeral ones."""
import os
import socket
import time

from conftest import (Conn, LogReader, assert_expired_on_time, closed_port, sluice_cli,
                      sluice_config, timed_request, toml_table, wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def answers(port):
    try:
        return timed_request(port, timeout=3)[0].status == 200
    except OSError:
        return False


def refuses(port):
    with socket.socket() as c:
        return c.connect_ex(("127.0.0.1", port)) != 0


def reload_ok(s, version):
    r = s.admin("POST", "/api/reload")
    # watch_ms: the watch after the reload (test_reload_watch.py).
    assert (r.status, r.json()["ok"], r.json()["version"]) == (200, True, version), r


def test_reload_adds_and_removes_listeners_moves_the_admin_api_and_switches_the_logs(
        origins, sluice):
    a, = origins(1)
    s = sluice(sluice_config([a], top=ADMIN))
    access = LogReader(s.proc, s.proc.stdout)
    extra, admin_port = closed_port(), closed_port()

    # A second listener, the admin API on a fixed port, JSON access lines, debug level.
    s.config_path.write_text(
        sluice_config([a], access="json", top=toml_table("admin", listen=f"127.0.0.1:{admin_port}"))
        .replace('listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:0", "127.0.0.1:{extra}"]')
        .replace('level = "info"', 'level = "debug"'))
    reload_ok(s, 2)
    s.log.wait_for(rf"listening on 127\.0\.0\.1:{extra}$")
    s.log.wait_for(rf"admin listening on 127\.0\.0\.1:{admin_port}")
    s.log.wait_for(r"log level info -> debug")
    s.log.wait_for(r"access log off -> json")
    assert answers(extra) and answers(s.port)
    access.wait_for(r'^\{"time":.*"status":200')
    old_admin, s.admin_port = s.admin_port, admin_port
    assert s.status()["config_version"] == 2
    wait_until(lambda: refuses(old_admin), timeout=5, what="old admin port closed")

    # The first listener goes: it refuses, the other one still answers.
    s.config_path.write_text(
        sluice_config([a], access="json", top=toml_table("admin", listen=f"127.0.0.1:{admin_port}"))
        .replace('listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:{extra}"]'))
    reload_ok(s, 3)
    s.log.wait_for(rf"stopped listening on 127\.0\.0\.1:{s.port}$")
    s.log.wait_for(r"log level debug -> info")
    wait_until(lambda: refuses(s.port), timeout=5, what="removed listener closed")
    assert answers(extra)


def test_a_reload_whose_new_port_is_taken_fails_whole_and_the_old_listeners_serve(
        origins, sluice):
    a, = origins(1)
    s = sluice(sluice_config([a], top=ADMIN))
    running = s.config_path.read_text()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        free = closed_port()
        s.config_path.write_text(
            sluice_config([a], top=ADMIN, access="json").replace(
                'listen = ["127.0.0.1:0"]',
                f'listen = ["127.0.0.1:0", "127.0.0.1:{free}", "127.0.0.1:{port}"]'))
        r = s.admin("POST", "/api/reload")
        assert r.status == 422, r
        # The holder is this test's own process (docs/operations.md, "One address, one sluice").
        holder = f"{open('/proc/self/comm').read().strip()} (pid {os.getpid()})"
        assert r.json()["errors"] == [
            f"{s.config_path}: cannot listen on 127.0.0.1:{port}: address already in use by "
            f"{holder}"], r
    # Nothing of the file applied: the free port was not kept, the old config still serves.
    assert refuses(free)
    assert answers(s.port)
    assert s.status()["config_version"] == 1
    assert s.admin("GET", "/api/config").body.decode() == running


def test_changing_workers_is_refused_by_name_and_traffic_is_unaffected(origins, sluice):
    a, = origins(1)
    s = sluice(sluice_config([a], top=ADMIN, workers=2))
    running = s.config_path.read_text()
    s.config_path.write_text(sluice_config([a], top=ADMIN, workers=1))
    line = s.config_path.read_text().splitlines()[2]
    column = line.index("1") + 1
    assert line.strip() == "workers = 1"
    cli = sluice_cli("reload", "--config", s.config_path, "--admin", s.admin_address)
    assert cli.returncode == 1, cli
    assert cli.stdout.splitlines() == [
        f"{s.config_path}:3:{column}: server.workers: changing this needs a restart "
        "(running: 2, file: 1)"], cli
    assert "the previous configuration keeps serving" in cli.stderr, cli
    assert s.status()["config_version"] == 1
    assert s.admin("GET", "/api/config").body.decode() == running
    assert all(answers(s.port) for _ in range(4))

    diff = sluice_cli("check", s.config_path, "--diff-running", "--admin", s.admin_address)
    assert "~ server.workers: 2 -> 1 (needs a restart)" in diff.stdout.splitlines(), diff


def test_reload_config_of_another_file_fails_and_names_the_running_file(tmp_path, origins,
                                                                        sluice):
    a, b = origins(2)
    s = sluice(sluice_config([a], top=ADMIN))
    other = tmp_path / "other.toml"
    other.write_text(sluice_config([a, b], top=ADMIN))
    r = sluice_cli("reload", "--config", other, "--admin", s.admin_address)
    assert r.returncode == 1, r
    assert f"{other} is not the running config: the running sluice reloads {s.config_path}" \
        in r.stderr, r
    assert s.status()["config_version"] == 1
    # Its own file, however it is spelled, reloads.
    spelled = tmp_path / "." / s.config_path.name
    ok = sluice_cli("reload", "--config", spelled, "--admin", s.admin_address)
    assert (ok.returncode, ok.stdout) == (0, "reloaded: config version 2\n"), ok


# (what is wrong, extra TOML for the file, the key the error names)
BAD_FILES = [
    ("unresolvable host", {"address": "no-such-host.invalid:80"}, "upstreams.app.servers[0].address"),
    ("dotted number that is no IPv4 address", {"address": "999.1.1.1:80"},
     "upstreams.app.servers[0].address"),
    ("missing token file", {"admin": 'token_file = "/nonexistent/sluice.token"'}, "admin.token_file"),
    ("empty token file", {"admin": 'token_file = "{empty}"'}, "admin.token_file"),
    ("backoff above backoff_max", {"retry": 'backoff = "1s"\nbackoff_max = "10ms"'},
     "upstreams.app.retry.backoff"),
    ("per-try timeout above response_timeout",
     {"upstream": 'response_timeout = "1s"', "retry": 'per_try_timeout = "2s"'},
     "upstreams.app.retry.per_try_timeout"),
    ("deadline shorter than one try", {"retry": 'per_try_timeout = "1s"\ndeadline = "500ms"'},
     "upstreams.app.retry.deadline"),
    ("idempotency header that is no header name", {"retry": 'idempotency_header = "bad header"'},
     "upstreams.app.retry.idempotency_header"),
]


def bad_config(origin, case, empty_token):
    address = case.get("address", origin.address)
    admin = 'listen = "127.0.0.1:0"\n' + case.get("admin", "").format(empty=empty_token)
    text = sluice_config([address], top="[admin]\n" + admin,
                         upstream_extra=case.get("upstream", ""))
    if "retry" in case:
        text += "\n[upstreams.app.retry]\n" + case["retry"] + "\n"
    return text


def test_check_run_and_reload_reject_exactly_the_same_files(tmp_path, origins, sluice):
    """One validation: every file `check` refuses, `run` refuses and a reload refuses, each with
    the same FILE:LINE:COL: key: message."""
    a, = origins(1)
    s = sluice(sluice_config([a], top=ADMIN))
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    for what, case, key in BAD_FILES:
        # check and run read a copy; the running sluice reloads its own file with the same text.
        text = bad_config(a, case, empty)
        copy = tmp_path / "bad.toml"
        copy.write_text(text)
        check = sluice_cli("check", copy)
        assert check.returncode == 1, (what, check)
        *errors, summary = check.stdout.splitlines()
        assert summary == f"{copy}: 1 error(s)", (what, check.stdout)
        assert errors[0].startswith(f"{copy}:") and f": {key}: " in errors[0], (what, errors)
        located = errors[0][len(str(copy)):]

        run = sluice_cli("run", "--config", copy, timeout=10)
        assert run.returncode == 1, (what, run)
        assert f"{copy}{located}" in run.stderr.splitlines(), (what, run.stderr)
        assert "listening on" not in run.stderr, (what, run.stderr)

        s.config_path.write_text(text)
        r = s.admin("POST", "/api/reload")
        assert (r.status, r.json()["errors"]) == (422, [f"{s.config_path}{located}"]), (what, r)
    assert s.status()["config_version"] == 1
    assert answers(s.port)


def test_diff_running_shows_drains_set_through_the_api_and_a_file_drain_is_logged(
        origins, sluice):
    a, b = origins(2)
    s = sluice(sluice_config([a, b], top=ADMIN, server_keys={"app-2": {"drain": True}}))
    s.log.wait_for(r"server app/app-2: draining \(drain = true in the config\)")
    assert s.admin("POST", "/api/upstreams/app/servers/app-1/drain").status == 200
    assert s.admin("POST", "/api/upstreams/app/servers/app-2/undrain").status == 200
    # The same file: nothing in it changes, but what runs differs from it.
    r = sluice_cli("check", s.config_path, "--diff-running", "--admin", s.admin_address)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert "no changes" not in r.stdout, r.stdout
    assert ("upstream app: server app-1 drained through the API (file: drain = false); "
            "stays drained after the reload") in lines, r.stdout
    assert ("upstream app: server app-2 undrained through the API (file: drain = true); "
            "stays undrained after the reload") in lines, r.stdout


def test_reload_turns_defer_accept_off_on_the_open_listeners(origins, sluice):
    """`defer_accept` is live: after the reload the same listening socket hands a silent
    connection over at its handshake, so header_timeout closes it on time."""
    a, = origins(1)
    s = sluice(sluice_config([a], server_extra='header_timeout = "300ms"', top=ADMIN))
    s.config_path.write_text(sluice_config([a], server_extra='header_timeout = "300ms"\n'
                                           'defer_accept = false', top=ADMIN))
    reload_ok(s, 2)
    start = time.monotonic()
    with Conn(s.port) as silent:
        assert silent.wait_closed(timeout=3)
        assert_expired_on_time(time.monotonic() - start, 0.3, "header_timeout, not deferred")
