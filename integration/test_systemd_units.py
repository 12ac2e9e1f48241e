"""deploy/systemd/ under a real systemd: a Debian 12 root (scripts/systemd-root.sh, cached) booted
with `systemd-nspawn -b` on its own network namespace, the units and the binaries of the build
under test mounted where the package puts them, and sluice driven with systemctl as an operator
drives it. What docs/operations.md promises of the units is asserted here, per kind of request;
test_deploy.py checks the unit files' text and `systemd-analyze verify`.

Every request goes to the container's own loopback: the test's client threads enter the
container's network namespace (setns), the origins (sluice-origin) run as units inside it."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ORIGIN, ROOT, SANITIZED, SLUICE, timed_request, wait_until

UNITS = ROOT / "deploy" / "systemd"
CONFIG = "/etc/sluice/sluice.toml"
PORT = 80  # sluice.socket's ListenStream=0.0.0.0:80, unchanged
BOOT_TIMEOUT_S = 60
ROOT_TIMEOUT_S = 900  # making the cached root: a download from the Debian mirror

# The origins, as units of the container: `origin-PORT` answers `X-Origin: origin-PORT`. The
# execution log records each request once its body is read, before the delay (docs/origin.md):
# the test's sign that a request is in flight at the origin.
ORIGIN_UNIT = """\
[Unit]
Description=test origin on 127.0.0.1:%i
[Service]
ExecStart=/usr/local/bin/sluice-origin --listen 127.0.0.1:%i --name origin-%i --exec-log /run/origin-%i.log
"""


def _skip_reason():
    if SANITIZED:
        return ("the units run the release binary as installed; the sanitizer builds run the same "
                "code through the other integration tests")
    if os.geteuid() != 0:
        return "systemd-nspawn needs root"
    for tool in ("systemd-nspawn", "debootstrap", "nsenter", "ldd"):
        if shutil.which(tool) is None:
            return f"no {tool} (scripts/install-deps.sh installs it)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


class Machine:
    """A booted container: `ctl(...)` runs a command inside it (all its namespaces, as root);
    `pool` runs client code in its network namespace."""

    def __init__(self, leader, etc_sluice):
        self.leader, self.etc_sluice = leader, etc_sluice
        self.pool = ThreadPoolExecutor(max_workers=8, initializer=self._enter_net)

    def _enter_net(self):
        # A network namespace is per thread: every socket this thread opens is the container's.
        fd = os.open(f"/proc/{self.leader}/ns/net", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    def run(self, *args, timeout=60, check=True):
        p = subprocess.run(["nsenter", "-t", str(self.leader), "-a", "--", *args],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{args} exited {p.returncode}: {p.stdout}{p.stderr}")
        return p

    def ctl(self, *args, timeout=60, check=True):
        return self.run("systemctl", *args, timeout=timeout, check=check)

    def prop(self, unit, name):
        return self.ctl("show", "-p", name, "--value", unit).stdout.strip()

    def state(self, unit):
        return self.ctl("is-active", unit, check=False).stdout.strip()

    def journal(self, unit, since_cursor=None):
        args = ["journalctl", "-q", "-o", "cat", "--no-pager", "-u", unit]
        if since_cursor:
            args += ["--after-cursor", since_cursor]
        return self.run(*args).stdout

    def wait_journal(self, unit, cursor, *patterns, timeout=10):
        """The unit's journal since `cursor` once every pattern is in it: journald takes a
        service's output from a stream of its own, behind systemd's own messages about the unit.
        The access log's lines are left out."""
        def text():
            log = "\n".join(line for line in self.journal(unit, cursor).splitlines()
                            if " proto=HTTP/" not in line)
            return log if all(re.search(p, log) for p in patterns) else None
        try:
            return wait_until(text, timeout=timeout, what=f"{patterns} in the journal of {unit}")
        except TimeoutError as e:
            raise AssertionError(f"{e}:\n{self.journal(unit, cursor)[-4000:]}") from None

    def cursor(self):
        out = self.run("journalctl", "-q", "-n", "0", "--show-cursor", "--no-pager").stdout
        return out.strip().rsplit("cursor: ", 1)[-1]

    def file(self, path):
        """A file of the container, read through its init's root."""
        return Path(f"/proc/{self.leader}/root{path}")

    def install(self, binary, path):
        """Installs `binary` at `path` of the container as dpkg does: written beside, renamed over
        whatever was there (a running process keeps its old file)."""
        new = self.file(f"{path}.dpkg-new")
        shutil.copyfile(binary, new)
        new.chmod(0o755)
        new.rename(self.file(path))

    def write_config(self, text):
        # Written beside and renamed: sluice never reads half a file.
        tmp = self.etc_sluice / "sluice.toml.tmp"
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.rename(self.etc_sluice / "sluice.toml")

    def get(self, target="/", method="GET", body=b"", timeout=30.0, rid=""):
        """One request on a fresh connection from inside the container, as a future."""
        headers = [("X-Request-Id", rid)] if rid else []
        return self.pool.submit(timed_request, PORT, method=method, target=target,
                                headers=headers, body=body, timeout=timeout)


def packaged_config(origin_port):
    """deploy/debian/sluice.toml (the package's config) with the socket unit's address, as
    docs/operations.md tells an operator to make them equal, and the origin on `origin_port`."""
    text = (ROOT / "deploy" / "debian" / "sluice.toml").read_text()
    text = re.sub(r'(?m)^listen = \["127\.0\.0\.1:8080"\]$', 'listen = ["0.0.0.0:80"]', text, 1)
    text = re.sub(r'(?m)^address = "127\.0\.0\.1:9001"$', f'address = "127.0.0.1:{origin_port}"',
                  text, 1)
    assert '"0.0.0.0:80"' in text and f":{origin_port}" in text, "the packaged config changed"
    return text


def _libraries(binaries, root):
    """(host file, path in the root) for each shared library the binaries need that the root
    lacks: the Debian 12 packages the .deb's Depends would install, taken from this Debian 12."""
    out = subprocess.run(["ldd", *map(str, binaries)], capture_output=True, text=True,
                         check=True).stdout
    libs = {}
    for m in re.finditer(r"=> (/\S+) \(", out):
        # The same directory in the root (/lib is a link to /usr/lib in both), by its real path.
        where = f"{os.path.realpath(os.path.dirname(m.group(1)))}/{os.path.basename(m.group(1))}"
        if not os.path.exists(f"{root}{where}"):
            libs[where] = (os.path.realpath(m.group(1)), where)
    return sorted(libs.values())


def _is_container_init(pid):
    """True if `pid` is PID 1 of a PID namespace below this one."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    nspid = re.search(r"(?m)^NSpid:\s+(.*)$", status).group(1).split()
    return len(nspid) > 1 and nspid[-1] == "1"


def _container_init(nspawn_pid):
    """The container's PID 1 (systemd), a descendant of systemd-nspawn."""
    todo = [nspawn_pid]
    while todo:
        pid = todo.pop()
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except FileNotFoundError:
            continue
        for child in map(int, children):
            if _is_container_init(child):
                return child
            todo.append(child)
    return None


def _cgroups(name):
    """Directories `name` for the container in the hierarchies systemd tracks processes by, beside
    this process's own cgroup: without a service manager on the host (a CI container),
    `systemd-nspawn --keep-unit` runs the container in the cgroup it was started in, and two runs
    started in one cgroup would share one tree (each container's systemd would see the other's
    sluice.service)."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        own[controllers] = path
    if Path("/sys/fs/cgroup/systemd").is_dir():  # v1 or hybrid
        mounts = [("/sys/fs/cgroup/systemd", own.get("name=systemd", "/"))]
        if Path("/sys/fs/cgroup/unified/cgroup.procs").exists():
            mounts.append(("/sys/fs/cgroup/unified", own.get("", "/")))
    else:  # unified
        mounts = [("/sys/fs/cgroup", own.get("", "/"))]
    return [Path(f"{mount}{path.rstrip('/')}/{name}") for mount, path in mounts]


def _remove_cgroups(dirs):
    for top in dirs:
        for d, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            try:
                os.rmdir(d)  # a cgroup's files go with it
            except OSError:
                pass


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    made = subprocess.run([str(ROOT / "scripts" / "systemd-root.sh")], capture_output=True,
                          text=True, timeout=ROOT_TIMEOUT_S)
    assert made.returncode == 0, f"scripts/systemd-root.sh failed:\n{made.stderr[-3000:]}"
    root = made.stdout.strip().splitlines()[-1]

    stage = tmp_path_factory.mktemp("systemd")
    etc_sluice = stage / "etc-sluice"
    etc_sluice.mkdir()
    etc_sluice.chmod(0o755)
    (stage / "origin@.service").write_text(ORIGIN_UNIT)
    # Where the package installs each file (scripts/package.sh); the socket unit where
    # docs/operations.md says to copy it. The cached root itself is never written: --volatile=
    # overlay puts a throwaway tmpfs over it.
    binds = [
        (UNITS / "sluice.service", "/lib/systemd/system/sluice.service"),
        (UNITS / "sluice.socket", "/etc/systemd/system/sluice.socket"),
        (ROOT / "deploy" / "debian" / "sysusers.conf", "/usr/lib/sysusers.d/sluice.conf"),
        (stage / "origin@.service", "/etc/systemd/system/origin@.service"),
        *_libraries([SLUICE, ORIGIN], root),
    ]
    machine_name = f"sluice-test-{os.getpid()}"
    log_path = stage / "console.log"
    cmd = ["systemd-nspawn", "--quiet", "-D", root, "--volatile=overlay", "-b",
           "--private-network", "-M", machine_name,
           # No registration with systemd-machined: not needed, and absent in a CI container.
           "--register=no",
           f"--bind={etc_sluice}:/etc/sluice",
           *(f"--bind-ro={src}:{dst}" for src, dst in binds)]
    cgroups, enter = [], None
    if not Path("/run/systemd/system").is_dir():
        # No service manager on the host to make a scope unit for the container: it runs in a
        # cgroup of its own that this test makes (and removes).
        cmd.insert(1, "--keep-unit")
        cgroups = _cgroups(machine_name)
        for d in cgroups:
            d.mkdir()

        def enter():
            for d in cgroups:
                (d / "cgroup.procs").write_text("0")
    log = open(log_path, "w")
    nspawn = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=enter)
    m, leader = None, None
    try:
        leader = wait_until(lambda: nspawn.poll() is None and _container_init(nspawn.pid)
                            or nspawn.poll() is not None and -1, timeout=BOOT_TIMEOUT_S,
                            what="the container's init")
        assert leader != -1, f"systemd-nspawn exited {nspawn.returncode}:\n{log_path.read_text()}"
        m = Machine(leader, etc_sluice)
        # systemctl talks to PID 1 on its private socket, there once the manager is up.
        wait_until(lambda: m.file("/run/systemd/private").exists() or nspawn.poll() is not None,
                   timeout=BOOT_TIMEOUT_S, what="the container's service manager")
        # Copies, not bind mounts: the upgrade test replaces /usr/sbin/sluice as dpkg does.
        m.install(SLUICE, "/usr/sbin/sluice")
        m.install(ORIGIN, "/usr/local/bin/sluice-origin")
        m.write_config(packaged_config(9001))
        boot = m.ctl("is-system-running", "--wait", timeout=BOOT_TIMEOUT_S, check=False)
        failed = m.ctl("--failed", "--no-legend", check=False).stdout
        assert boot.stdout.strip() == "running", \
            f"boot: {boot.stdout} failed units: {failed}\n{log_path.read_text()[-3000:]}"
        m.ctl("start", "origin@9001", "origin@9002")
        for port in (9001, 9002):
            # sluice-origin prints this line once it is bound (docs/origin.md).
            wait_until(lambda: f"listening 127.0.0.1:{port}" in m.journal(f"origin@{port}"),
                       timeout=10, what=f"origin-{port} listening")
        # docs/operations.md: `systemctl enable --now sluice.socket`.
        m.ctl("enable", "--now", "sluice.socket")
        yield m
    finally:
        if m:
            m.pool.shutdown(wait=False, cancel_futures=True)
        nspawn.terminate()  # an orderly shutdown of the container (systemd-nspawn(1))
        try:
            nspawn.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # A killed systemd-nspawn would leave its container running: its init goes first
            # (and with it every process of its PID namespace), if it is still that process.
            if leader not in (None, -1) and _is_container_init(leader):
                os.kill(leader, signal.SIGKILL)
            nspawn.kill()
            nspawn.wait(timeout=10)
        log.close()
        _remove_cgroups(cgroups)


def main_pid(m):
    return int(m.prop("sluice.service", "MainPID"))


def status_text(m):
    return m.prop("sluice.service", "StatusText")


def assert_answered(response, origin, what):
    r = response
    assert r.status == 200 and r.header("X-Origin") == origin and r.body == f"{origin}\n".encode(), \
        f"{what}: {r!r}"


def test_the_first_connection_starts_sluice_on_the_socket_systemd_holds(machine):
    m = machine
    m.ctl("stop", "sluice.service")
    assert m.state("sluice.socket") == "active" and m.state("sluice.service") == "inactive"
    cursor = m.cursor()

    for method, body in (("GET", b""), ("POST", b"x" * 1000)):
        r, _ = m.get(method=method, body=body).result(timeout=60)
        assert_answered(r, "origin-9001", method)

    # Type=notify: active once sluice sent READY=1, after the first probe of its one server
    # (at most health_ready_timeout, 10 s); it accepts from the socket before that.
    wait_until(lambda: m.state("sluice.service") == "active", timeout=15, what="READY=1")
    # sluice took systemd's socket (LISTEN_FDS) instead of binding its own, and WatchdogSec=30s
    # reached it (WATCHDOG_USEC): it pings at half the period.
    m.wait_journal("sluice.service", cursor, re.escape("listening on 0.0.0.0:80 (inherited socket)"),
                   "systemd watchdog: pinging every 15000ms")
    assert re.fullmatch(r"config version \d+, 1/1 servers up", status_text(m)), status_text(m)
    # It runs as the sluice user of sysusers.d, not root.
    uid = m.run("id", "-u", "sluice").stdout.strip()
    proc_status = m.run("cat", f"/proc/{main_pid(m)}/status").stdout
    assert re.search(rf"(?m)^Uid:\s+{uid}\s+{uid}\s", proc_status), proc_status


def _client(m, stop, kind, results, limit=30000, window_s=120, pace_s=0.005):
    """Requests on fresh connections, one after another and at most one per `pace_s` (about 200
    a second), until `stop`, bounded in count and time: (request id, start, end, response or
    the exception)."""
    method, body = kind
    deadline = time.monotonic() + window_s
    for i in range(limit):
        if stop.is_set() or time.monotonic() > deadline:
            return
        rid = f"{method}-{i}"
        start = time.monotonic()
        try:
            r, _ = timed_request(PORT, method=method, body=body, timeout=30.0,
                                 headers=[("X-Request-Id", rid)])
        except Exception as e:  # noqa: BLE001 - a refused or reset connection is the finding
            r = e
        results.append((rid, start, time.monotonic(), r))
        time.sleep(max(0.0, start + pace_s - time.monotonic()))


class Load:
    """A GET client and a POST client (2000-byte body), each on fresh connections, running from
    20 answers of each kind until the `with` block ends."""
    KINDS = {"GET": ("GET", b""), "POST": ("POST", b"p" * 2000)}

    def __init__(self, m):
        self.m, self.stop = m, threading.Event()
        self.results = {k: [] for k in self.KINDS}

    def __enter__(self):
        self.clients = [self.m.pool.submit(_client, self.m, self.stop, kind, self.results[name])
                        for name, kind in self.KINDS.items()]
        self.wait_answers(20, "before")
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for c in self.clients:
            c.result(timeout=60)

    def wait_answers(self, n, when):
        counts = {k: len(r) for k, r in self.results.items()}
        wait_until(lambda: all(len(self.results[k]) >= counts[k] + n for k in self.KINDS),
                   timeout=30, what=f"{n} answers of each kind {when}")

    def assert_all_answered(self, origin, window, what):
        """Every request of each kind answered by `origin`, and some sent within `window`."""
        for name, rs in self.results.items():
            bad = [(rid, r) for rid, _, _, r in rs
                   if not (hasattr(r, "status") and r.status == 200
                           and r.header("X-Origin") == origin and r.header("X-Request-Id") == rid)]
            assert not bad, f"{name}: {len(bad)} of {len(rs)} not answered by {origin}: {bad[:5]}"
            during = [rid for rid, s, _, _ in rs if window[0] <= s < window[1]]
            assert during, f"{name}: no request was sent during the {what}"


def test_restart_keeps_every_connection_in_the_sockets_backlog(machine):
    """docs/operations.md: during `systemctl restart sluice` new connections wait in the socket
    unit's backlog: not one is refused or reset, for GETs and for POSTs with a body."""
    m = machine
    m.ctl("start", "sluice.service")
    before = main_pid(m)
    with Load(m) as load:
        restart_start = time.monotonic()
        m.ctl("restart", "sluice.service", timeout=90)
        restart_end = time.monotonic()
        load.wait_answers(20, "after the restart")
    assert main_pid(m) != before, "restart started a new sluice"
    assert m.state("sluice.socket") == "active"
    load.assert_all_answered("origin-9001", (restart_start, restart_end), "restart")


def test_binary_upgrade_by_usr2_after_replacing_the_binary_keeps_the_unit_and_every_request(machine):
    """docs/operations.md: replace the binary, then `systemctl kill --kill-whom=main -s USR2
    sluice`: the new process becomes the unit's main process (MAINPID=, NotifyAccess=all) under
    the unit's sandbox, without a restart of the unit, the old one exits, and no request of
    either kind fails."""
    m = machine
    m.ctl("start", "sluice.service")
    before = main_pid(m)
    # Both change if systemd saw the unit stop or start again, which an upgrade must not do.
    unit_times = ("InactiveEnterTimestampMonotonic", "ActiveEnterTimestampMonotonic")
    started = [m.prop("sluice.service", p) for p in unit_times]
    cursor = m.cursor()
    m.install(SLUICE, "/usr/sbin/sluice")
    assert m.run("readlink", f"/proc/{before}/exe").stdout.strip() == "/usr/sbin/sluice (deleted)"
    with Load(m) as load:
        start = time.monotonic()
        m.ctl("kill", "--kill-whom=main", "-s", "USR2", "sluice.service")
        after = wait_until(lambda: main_pid(m) not in (before, 0) and main_pid(m), timeout=30,
                           what="MAINPID moved to the new process")
        # The old process drained and exited: the unit holds the new one alone.
        wait_until(lambda: m.run("test", "-e", f"/proc/{before}", check=False).returncode != 0,
                   timeout=45, what="the old process exited")
        end = time.monotonic()
        load.wait_answers(20, "after the upgrade")
    # The unit's main process is the one the upgrade started (sluice's MAINPID=), not one that
    # systemd started again; it runs the file now at /usr/sbin/sluice.
    m.wait_journal("sluice.service", cursor, rf"upgrade: started /usr/sbin/sluice \(pid {after}\)")
    assert m.state("sluice.service") == "active"
    assert [m.prop("sluice.service", p) for p in unit_times] == started
    assert m.run("readlink", f"/proc/{after}/exe").stdout.strip() == "/usr/sbin/sluice"
    load.assert_all_answered("origin-9001", (start, end), "upgrade")


def test_a_crashed_sluice_is_restarted_and_connections_wait_for_it(machine):
    """Restart=on-failure (RestartSec=1s): a killed sluice is started again, and a connection
    made while it is down waits in the socket's backlog and is answered."""
    m = machine
    m.ctl("start", "sluice.service")
    before, restarts = main_pid(m), int(m.prop("sluice.service", "NRestarts"))
    m.ctl("kill", "-s", "KILL", "sluice.service")
    # Down: systemd waits RestartSec before starting it again.
    wait_until(lambda: m.prop("sluice.service", "SubState") == "auto-restart", timeout=10,
               what="the unit waiting to restart")
    for method, body in (("GET", b""), ("POST", b"c" * 1000)):
        f = m.get(method=method, body=body, rid=f"crash-{method}")
        assert_answered(f.result(timeout=30)[0], "origin-9001", f"{method} sent while sluice was down")
    assert main_pid(m) != before
    assert int(m.prop("sluice.service", "NRestarts")) == restarts + 1


def test_reload_applies_a_changed_config_and_keeps_it_when_the_next_is_bad(machine):
    m = machine
    m.ctl("start", "sluice.service")
    pid = main_pid(m)
    version = int(re.match(r"config version (\d+)", status_text(m)).group(1))
    try:
        # [log] access_file in the one directory besides the state's that the unit makes
        # writable (LogsDirectory=sluice).
        m.write_config(packaged_config(9002).replace(
            'access = "text"', 'access = "text"\naccess_file = "/var/log/sluice/access.log"'))
        # ExecReload: systemctl returns once sluice has applied it (RELOADING=1 ... READY=1).
        m.ctl("reload", "sluice.service")
        for method, body in (("GET", b""), ("POST", b"y" * 1000)):
            r = m.get(method=method, body=body, rid=f"reloaded-{method}").result(timeout=30)[0]
            assert_answered(r, "origin-9002", f"{method} after the reload")
        access_log = m.file("/var/log/sluice/access.log")
        wait_until(lambda: access_log.exists() and "id=reloaded-POST" in access_log.read_text(),
                   timeout=10, what="the access log written in /var/log/sluice")
        assert status_text(m).startswith(f"config version {version + 1}, "), status_text(m)

        cursor = m.cursor()
        m.write_config(packaged_config(9002).replace('balance = "round_robin"',
                                                     'balance = "round_robbin"'))
        m.ctl("reload", "sluice.service")
        for method, body in (("GET", b""), ("POST", b"z" * 1000)):
            assert_answered(m.get(method=method, body=body).result(timeout=30)[0], "origin-9002",
                            f"{method} after the refused reload")
        assert main_pid(m) == pid and m.state("sluice.service") == "active"
        assert status_text(m).startswith(f"config version {version + 1}, "), status_text(m)
        # The refusal names FILE:LINE:COL: key.path in the journal.
        m.wait_journal("sluice.service", cursor, rf"{CONFIG}:\d+:\d+: upstreams\.app\.balance")
    finally:
        m.write_config(packaged_config(9001))
        m.ctl("reload", "sluice.service")
    assert_answered(m.get().result(timeout=30)[0], "origin-9001", "GET after restoring")


def test_a_broken_config_fails_the_start_before_anything_is_bound(machine):
    """ExecStartPre=sluice check: `systemctl start` fails with the errors in the journal."""
    m = machine
    m.ctl("stop", "sluice.service")
    cursor = m.cursor()
    try:
        m.write_config(packaged_config(9001).replace('level = "info"', 'level = "loud"'))
        p = m.ctl("start", "sluice.service", check=False)
        assert p.returncode != 0
        assert m.prop("sluice.service", "Result") == "exit-code"
        log = m.wait_journal("sluice.service", cursor, rf"{CONFIG}:\d+:\d+: log\.level")
        assert "listening on" not in log, log
    finally:
        m.write_config(packaged_config(9001))
        m.ctl("reset-failed", "sluice.service", check=False)
    assert_answered(m.get().result(timeout=60)[0], "origin-9001", "GET once the file is fixed")


def test_stop_lets_in_flight_requests_finish_and_the_next_connection_starts_sluice_again(machine):
    """docs/operations.md: SIGTERM (KillMode=mixed) is a graceful shutdown: in-flight requests
    finish; the socket stays listening and the next connection starts sluice again."""
    m = machine
    m.ctl("start", "sluice.service")
    exec_log = m.file("/run/origin-9001.log")
    logged = len(exec_log.read_text().splitlines())
    slow = {"GET": m.get("/?delay=2000", rid="slow-get"),
            "POST": m.get("/?delay=2000", method="POST", body=b"s" * 5000, rid="slow-post")}
    # Both are at the origin (logged there before their delay) before the stop.
    wait_until(lambda: len(exec_log.read_text().splitlines()) >= logged + 2, timeout=20,
               what="both slow requests at the origin")
    stop_start = time.monotonic()
    m.ctl("stop", "sluice.service", timeout=60)
    stop_s = time.monotonic() - stop_start
    for method, f in slow.items():
        r, _ = f.result(timeout=30)
        assert_answered(r, "origin-9001", f"slow {method} in flight at the stop")
    assert m.prop("sluice.service", "Result") == "success"
    assert m.state("sluice.service") == "inactive"
    assert stop_s < 45, f"stop took {stop_s:.1f}s: systemd's SIGKILL, not a drain"
    # The state file, in the one writable directory, written once more at stop.
    state = m.run("stat", "-c", "%U %a", "/var/lib/sluice/state.json").stdout.split()
    assert state == ["sluice", "640"], state

    assert m.state("sluice.socket") == "active"
    assert_answered(m.get().result(timeout=60)[0], "origin-9001", "GET after the stop")
    wait_until(lambda: m.state("sluice.service") == "active", timeout=15, what="READY=1")


def test_stopping_socket_and_service_takes_sluice_down(machine):
    m = machine
    m.ctl("start", "sluice.service")
    m.ctl("stop", "sluice.socket", "sluice.service")
    assert m.state("sluice.service") == "inactive" and m.state("sluice.socket") == "inactive"
    with pytest.raises(ConnectionRefusedError):
        m.get(timeout=5).result(timeout=10)
    m.ctl("start", "sluice.socket")
    assert_answered(m.get().result(timeout=60)[0], "origin-9001", "GET after starting the socket")
