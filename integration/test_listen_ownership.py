"""One address, one sluice: SO_REUSEPORT would let a second sluice of the same user join the
first one's listening sockets and take a share of its connections without a word. A second
process on a running sluice's address is refused at start-up (and a reload that adds such an
address is rejected), naming the holder; `sluice upgrade` still hands the sockets over; a sluice
killed outright leaves nothing behind that blocks the next start."""
import os
import re
import signal
import subprocess

from conftest import SLUICE, Conn, closed_port, gone, sluice_cli, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def on_port(config, port):
    return config.replace('listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:{port}"]')


def start_second(tmp_path, config):
    """`sluice run` on `config`; returns (exit code, stderr) once it exits within 10 s (a sluice
    that starts serving instead is killed and the test fails on its exit code)."""
    path = tmp_path / "second.toml"
    path.write_text(config)
    proc = subprocess.Popen([str(SLUICE), "run", "--config", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return None, err
    return proc.returncode, err


def served_by(port, n=24):
    """The X-Origin of `n` requests, each on a new connection (the kernel spreads connections,
    not requests, over SO_REUSEPORT sockets)."""
    names = []
    for _ in range(n):
        with Conn(port) as conn:
            r = conn.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert r.status == 200, r
            names.append(r.header("x-origin"))
    return names


def test_a_second_sluice_on_a_running_ones_address_is_refused_and_takes_nothing(sluice, origins, tmp_path):
    mine, other = origins(2)
    first = sluice(sluice_config([mine], workers=2))
    code, err = start_second(tmp_path, on_port(sluice_config([other]), first.port))
    assert code == 1, err
    assert (f"cannot listen on 127.0.0.1:{first.port}: address already in use by sluice "
            f"(pid {first.proc.pid}); two sluice processes never share an address: "
            f"`sluice upgrade` replaces a running one") in err, err
    assert "started" not in err, err
    # Every connection still reaches the first sluice (the second one's origin would answer
    # "app-2" had it joined the port).
    assert served_by(first.port) == ["app-1"] * 24
    assert other.stats()["requests"] == 0
    assert first.proc.poll() is None


def test_a_reload_that_adds_a_running_sluices_address_is_rejected(sluice, origins):
    mine, other = origins(2)
    first = sluice(sluice_config([mine]))
    second = sluice(sluice_config([other], top=ADMIN))
    config = second.config_path.read_text()
    second.config_path.write_text(config.replace(
        'listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:0", "127.0.0.1:{first.port}"]'))
    r = second.admin("POST", "/api/reload")
    assert r.status == 422, r
    assert (f"cannot listen on 127.0.0.1:{first.port}: address already in use by sluice "
            f"(pid {first.proc.pid})") in r.json()["errors"][0], r.json()
    assert served_by(first.port) == ["app-1"] * 24
    assert other.stats()["requests"] == 0


def test_upgrade_still_takes_the_sockets_over_and_the_new_process_holds_them(sluice, origins, tmp_path):
    mine, other = origins(2)
    first = sluice(sluice_config([mine], workers=2, top=ADMIN))
    r = sluice_cli("upgrade", "--admin", first.admin_address, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(re.search(r"upgraded: pid (\d+)", r.stdout).group(1))
    try:
        assert first.proc.wait(timeout=20) == 0
        assert served_by(first.port) == ["app-1"] * 24
        code, err = start_second(tmp_path, on_port(sluice_config([other]), first.port))
        assert code == 1, err
        assert f"address already in use by sluice (pid {pid})" in err, err
        assert served_by(first.port) == ["app-1"] * 24
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: gone(pid), timeout=20, what="new sluice to stop")


def test_a_killed_sluice_leaves_nothing_that_blocks_the_next_start(sluice, origins):
    a, = origins(1)
    port = closed_port()
    first = sluice(on_port(sluice_config([a], workers=2), port))
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    again = sluice(on_port(sluice_config([a], workers=2), port))
    assert again.port == port
    assert served_by(port, 4) == ["app-1"] * 4
