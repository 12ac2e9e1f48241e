"""Child processes of the benchmark: started pinned to CPUs, measured from /proc, ended by PID.

Every `Child` is registered until it has been reaped, so that `stop_all()` (called on any exit,
including SIGTERM/SIGINT) ends exactly the processes this harness started, by their PIDs, and
the processes they forked (an nginx master's worker), also by PID.
"""
import os
import random
import select
import signal
import socket
import subprocess
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

_running = []  # Children not yet reaped, oldest first


class Child:
    """A process started by the harness, optionally pinned with `taskset -c CPUS` (taskset execs
    the program, so `pid` is the program's own PID)."""

    def __init__(self, argv, *, name, cpus=None, log_path=None, stdout=None, env=None):
        cmd = ["taskset", "-c", cpus, *argv] if cpus else list(argv)
        self.name = name
        self.argv = cmd
        self._log = open(log_path, "wb") if log_path else None
        sink = self._log if self._log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=stdout if stdout is not None else sink,
            stderr=sink, env=env)
        self.pid = self.proc.pid
        _running.append(self)

    def alive(self):
        return self.proc.poll() is None

    def read_line(self, timeout):
        """The first line of stdout (started with stdout=PIPE), within `timeout` seconds."""
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"{self.name}: no output line within {timeout}s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"{self.name} exited ({self.proc.poll()}) before printing a line")
            buf += chunk
        return buf.split(b"\n", 1)[0].decode(errors="replace")

    def communicate(self, timeout):
        """Waits for the exit (killing it by PID after `timeout`); returns stdout as text."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(signal.SIGKILL)
            raise
        finally:
            self._forget()
        return (out or b"").decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends `sig` to the PID, waits up to `timeout` s, then SIGKILL; then ends by PID any child
        it forked that outlived it. Returns the exit status."""
        descendants = descendant_pids(self.pid)
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        for pid in descendants:
            _kill_and_wait(pid)
        self._forget()
        return self.proc.returncode

    def _forget(self):
        if self in _running:
            _running.remove(self)
        if self._log:
            self._log.close()
            self._log = None


def _kill_and_wait(pid, timeout=5.0):
    """Ends an orphaned grandchild by PID (it is not ours to reap: wait until /proc loses it)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.01)


def stop_all():
    """Ends every child still registered, newest first (load generators before proxies before
    origins)."""
    for child in reversed(list(_running)):
        try:
            child.stop(timeout=5.0)
        except Exception as e:  # keep ending the others
            print(f"warning: could not stop {child.name} (pid {child.pid}): {e}")


def descendant_pids(pid):
    """Children and grandchildren of `pid`, from /proc/PID/task/*/children."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                continue
            found += kids
            todo += kids
    return found


def cpu_split(pid):
    """(utime, stime) of the whole process (all threads), in seconds, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS  # fields 14 and 15


def cpu_seconds(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    user, system = cpu_split(pid)
    return user + system


def connections_to(pids, ports):
    """{port: established TCP connections from the processes `pids` to 127.0.0.1:port} for each
    of `ports`: their sockets (/proc/PID/fd) matched to the kernel's table (/proc/PID/net/tcp)."""
    inodes = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                link = os.readlink(f"{fd_dir}/{fd}")
            except FileNotFoundError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    wanted = {f"0100007F:{p:04X}": p for p in ports}
    counts = dict.fromkeys(ports, 0)
    with open(f"/proc/{pids[0]}/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            # fields: sl, local, remote, state (01: ESTABLISHED), ..., inode (the 10th)
            if fields[3] == "01" and fields[2] in wanted and fields[9] in inodes:
                counts[wanted[fields[2]]] += 1
    return counts


def rss_kib(pid):
    """VmRSS of the process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def settled_rss_kib(pid, *, interval=0.1, timeout=2.0):
    """VmRSS once two readings `interval` apart agree (or the last reading after `timeout`)."""
    last = rss_kib(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = rss_kib(pid)
        if now == last:
            return now
        last = now
    return last


def free_port():
    """A loopback port that is free now, chosen below the ephemeral range (32768+) so that no
    outgoing connection of the benchmark itself can take it between this check and the bind."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-31999 on 127.0.0.1")
