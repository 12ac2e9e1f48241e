"""Recoverable failures never become errors, on default settings (issue: retries and health).

Every test here runs sluice with no [retry], [passive] or [health] section unless the test is
about one of their knobs, and asserts per kind of request (method x key) what must succeed:
- a request that never reached a server (connect refused) is always resent;
- a GET, and a POST with an Idempotency-Key, that were in flight on a server that dies are
  resent to another server, within the retry budget, which a burst from one dead server out of
  three never exhausts;
- a POST without a key that reached the dying server gets 502 and ran exactly once.
"""
import asyncio
import json
import os
import re
import signal
import time
import uuid

from conftest import LOG_RESOLUTION, Conn, Load, Origin, closed_port, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def read_exec_log(path):
    """{request id: [(method, key)]} from a sluice-origin --exec-log file (read while the origin
    may be writing it: a last line not yet ended is left for the next reading)."""
    runs = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            method, _target, rid, key = line.split()
            runs.setdefault(rid, []).append((method, key))
    return runs


async def one_request(port, kind, rid, delay_ms, timeout=20.0):
    """One request on its own connection: (status, headers) or (None, error)."""
    headers = [f"X-Request-Id: {rid}", "Host: t"]
    body = b""
    if kind == "get":
        line = f"GET /?delay={delay_ms} HTTP/1.1"
    else:
        line = f"POST /?delay={delay_ms} HTTP/1.1"
        body = b"x" * 100
        headers.append(f"Content-Length: {len(body)}")
        if kind == "post_keyed":
            headers.append(f"Idempotency-Key: {rid}")
    data = ("\r\n".join([line, *headers]) + "\r\n\r\n").encode() + body
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, asyncio.TimeoutError) as e:
        return None, repr(e)
    try:
        writer.write(data)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        fields = {}
        for h in lines[1:]:
            if ":" in h:
                k, v = h.split(":", 1)
                fields[k.strip().lower()] = v.strip()
        await asyncio.wait_for(reader.readexactly(int(fields.get("content-length", "0"))), timeout)
        return status, fields
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
        return None, repr(e)
    finally:
        writer.close()


async def open_loop(port, rate, seconds, delay_ms, on_tick):
    """A bounded open-loop load: `rate` requests per second for `seconds`, kinds in the mix
    70 % GET, 15 % keyed POST, 15 % POST without a key (in a fixed rotation). on_tick(t, sent)
    runs every 100 ms on the load's clock (seconds since start), `sent` being the requests sent so
    far as (request id, kind, time sent)."""
    mix = ["get"] * 14 + ["post_keyed"] * 3 + ["post"] * 3
    tasks, sent = [], []
    t0 = time.monotonic()
    next_tick = 0.0
    for i in range(int(rate * seconds)):
        due = t0 + i / rate
        while time.monotonic() < due:
            await asyncio.sleep(min(0.005, max(0.0, due - time.monotonic())))
        now = time.monotonic() - t0
        if now >= next_tick:
            on_tick(now, sent)
            next_tick += 0.1
        kind = mix[i % len(mix)]
        rid = f"r{i}-{uuid.uuid4().hex[:8]}"
        sent.append((rid, kind, now))
        tasks.append(asyncio.create_task(one_request(port, kind, rid, delay_ms)))
    results = await asyncio.gather(*tasks)
    return [(rid, kind, t, r) for (rid, kind, t), r in zip(sent, results)]


# What the kill waits for on the victim, per kind: requests it took (its execution log) that were
# sent less than RUNNING_AGE ago. It holds each 1.5 s from when it took it, which is after the
# send, so each is still held at least 1.5 - RUNNING_AGE s after the tick that counted it.
RUNNING_AGE = 1.2
AWAITED = {"get": 15, "post_keyed": 3, "post": 5}
CUT = "upstream reset; not retried: not idempotent"


def access_log_by_id(path, n):
    """{request id: JSON access log record}, once sluice has logged at least `n` exchanges."""
    def records():
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(l) for l in lines if l.endswith("}")]
    wait_until(lambda: len(records()) >= n, timeout=15, what=f"{n} access log records")
    return {r["request_id"]: r for r in records()}


def test_sigkill_of_a_busy_origin_loses_no_get_and_no_keyed_post_on_defaults(tmp_path, sluice):
    """Three origins, default settings (two workers), 120 req/s for 10 s, every request held
    1.5 s by its origin, so that about 60 are in flight on each. One origin is SIGKILLed after 5 s,
    at the first 100 ms tick at which, of each kind, enough requests are running on it (AWAITED:
    which worker, and so which origin, takes a request is not fixed, so what is in flight at a
    fixed instant varies).
    What the victim had taken and never answered is read from the records, not from the test's
    clock: its execution log (taken) and sluice's access log (the server that answered). Each
    GET and keyed POST among them must get 200 from another server; each unkeyed POST among them
    gets 502 (`upstream reset; not retried: not idempotent`) from the victim and ran exactly once;
    every other request gets 200, and every unkeyed POST ran exactly once."""
    logs = [tmp_path / f"exec-{i}.log" for i in range(3)]
    access = tmp_path / "access.log"
    fleet = [Origin(f"app-{i + 1}", ("--exec-log", str(logs[i]))) for i in range(3)]
    victim = fleet[1]
    try:
        s = sluice(sluice_config(fleet, top=f'access_file = "{access}"\n' + ADMIN, workers=2,
                                 access="json"))
        killed = {}

        def tick(t, sent):
            if t < 5.0 or killed:
                return
            taken = read_exec_log(logs[1])
            running = {kind: [] for kind in AWAITED}
            for rid, kind, at in sent:
                if rid in taken and at > t - RUNNING_AGE:
                    running[kind].append(rid)
            if all(len(running[kind]) >= n for kind, n in AWAITED.items()):
                victim.stop(signal.SIGKILL)
                killed["at"], killed["running"] = t, running

        results = asyncio.run(open_loop(s.port, rate=120, seconds=10, delay_ms=1500, on_tick=tick))
    finally:
        for o in fleet:
            o.stop()
    assert killed, "never enough requests of each kind running on the origin: it was never killed"
    runs = [read_exec_log(p) for p in logs]
    on_victim = runs[1]
    records = access_log_by_id(access, len(results))
    counts, cut, bad = {}, {kind: set() for kind in AWAITED}, []
    for rid, kind, t, (status, fields) in results:
        counts.setdefault(kind, {}).setdefault(status, 0)
        counts[kind][status] += 1
        record = records.get(rid)
        if record is None or not isinstance(fields, dict) or fields.get("x-request-id") != rid:
            bad.append((rid, kind, t, status, fields, record))
            continue
        servers = record["server"].split(",")
        answered_by_victim = servers[-1] == victim.name and record["status"] == 200
        if rid in on_victim and not answered_by_victim:
            cut[kind].add(rid)
        executions = sum(len(r.get(rid, [])) for r in runs)
        if kind == "post" and executions != 1:
            bad.append((rid, kind, t, status, "executions", executions))
        if kind == "post" and rid in cut[kind]:
            # Reached the victim, which died holding it: not resent, named, from the victim.
            if not (status == 502 and fields.get("sluice-error") == CUT and
                    servers == [victim.name] and record["error"] == "upstream reset"):
                bad.append((rid, kind, t, status, fields, record))
        elif rid in cut[kind]:
            # Resent to another server, which answered.
            if not (status == 200 and servers[0] == victim.name and servers[-1] != victim.name):
                bad.append((rid, kind, t, status, fields, record))
        elif status != 200:
            bad.append((rid, kind, t, status, fields, record))
    print("outcomes per kind:", counts, "cut on the killed origin:",
          {kind: len(rids) for kind, rids in cut.items()}, "killed at", killed["at"], "awaiting",
          {kind: len(rids) for kind, rids in killed["running"].items()})
    assert bad == [], bad[:10]
    # The scenario really had work of each kind in flight on the victim when it died: every
    # request the kill waited for was cut by it (and got its answer above).
    for kind, rids in killed["running"].items():
        assert set(rids) <= cut[kind], (kind, sorted(set(rids) - cut[kind]))


def test_every_origin_503_the_retry_budget_bounds_what_reaches_them(origins, sluice):
    """Every answer a 503 (retryable by default), a bounded load of ~1,000 requests in 5 s: the
    origins see at most (1 + budget) x client requests + budget_min_per_sec x budget_window
    (the reserve, available at start), plus one budget slot of slack; and more than the client
    sent (the budget does allow retries)."""
    fleet = origins(3)
    s = sluice(sluice_config(fleet, top=ADMIN, workers=2))
    with Load(s.port, rate=200, target="/?status=503", max_seconds=5, max_requests=1000) as load:
        wait_until(lambda: len(load.records) >= 1000, timeout=15, what="1,000 requests")
    sent = len(load.records)
    assert all(r.status == 503 for r in load.records), load.failures()[:5]
    seen = sum(o.stats()["requests"] for o in fleet)
    budget, reserve = 0.2, 10 * 10
    slack = budget * 200  # one slot (1 s) of deposits: the window is exact to a tenth of it
    print(f"client requests {sent}, origin requests {seen}, bound {(1 + budget) * sent + reserve + slack}")
    assert sent < seen <= (1 + budget) * sent + reserve + slack
    skipped = s.metrics_text()
    assert re.search(r'sluice_retries_skipped_total\{upstream="app",reason="budget_exhausted"\} [1-9]', skipped)


def test_a_fresh_process_retries_its_first_request_from_a_dead_server(origins, sluice):
    """One of three servers is a closed port, nothing configured: 60 sequential GETs on a freshly
    started sluice, the first of which goes to the closed port: all 200 (a request that never
    reached a server is always resent, and the budget's reserve is there from the start)."""
    fleet = origins(2)
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}", *fleet], workers=1))
    answers = []
    for _ in range(60):
        with Conn(s.port) as c:
            answers.append(c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert [r.status for r in answers] == [200] * 60, [(r.status, r.header("Sluice-Error")) for r in answers if r.status != 200]
    # At the default level the first failure of a window is logged (once: rate-limited).
    s.log.wait_for(r"up -> up \(failure\): failure 1 of 3 in 10s: connect refused", timeout=3)


def test_an_origin_that_resets_every_request_is_ejected_on_defaults(origins, scripted, sluice):
    """No [passive] section: a server that drops every request is out after 3 failures, logged
    once with the reason; unkeyed POSTs (not retryable once sent) see exactly those 3 502s."""
    good = origins(2)
    bad = scripted("bad", behaviour="drop")
    s = sluice(sluice_config([good[0], bad, good[1]], workers=1))
    statuses = []
    for i in range(90):
        with Conn(s.port) as c:
            r = c.request(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi")
            statuses.append((r.status, r.header("Sluice-Error")))
    failed = [x for x in statuses if x[0] != 200]
    assert failed == [(502, "upstream reset; not retried: not idempotent")] * 3, failed
    assert bad.count() == 3
    line = s.log.wait_for(r"server bad: up -> ejected \(ejected\)", timeout=3)
    assert line.endswith("3 failures in 10s: connection reset; ejected for 10s"), line
    assert len([l for l in s.log.poll() if "(ejected)" in l]) == 1


def test_active_checks_end_an_ejection_whatever_its_backoff(origins, sluice):
    """Killed under load, an origin is ejected (passive) and marked down (probes); kept dead for
    4 s, then restarted on its port: it is back up within rise x interval (+ jitter, + one
    interval for the first probe to come round) of its restart, by the log's clock, and takes
    traffic; no GET failed at any time."""
    interval, rise = 0.2, 2
    fleet = origins(3)
    victim = fleet[1]
    s = sluice(sluice_config(fleet, top=ADMIN, workers=2,
                             upstream_extra=toml_table("upstreams.app.health", interval="200ms",
                                                       timeout="100ms", rise=rise, fall=2)))
    with Load(s.port, rate=100, max_seconds=15) as load:
        wait_until(lambda: len(load.origins()) == 3, timeout=3, what="load on all three")
        victim.stop(signal.SIGKILL)
        # Ejected first (passive: ~33 requests/s meet it, probes need fall x interval), then
        # down by probes: the ejection is what the probes end.
        s.log.wait_for(r"upstream app server app-2: up -> ejected \(ejected\)", timeout=3)
        s.log.wait_for(r"upstream app server app-2: ejected -> down \(went_down\)", timeout=3)
        load.wait_for_more(400, timeout=10)  # 4 s of traffic while it is dead
        restarting = time.time()
        back = origins.restart(victim)
        restarted = time.time()
        came_up = s.log_time(r"upstream app server app-2: down -> up \(came_up\)", timeout=3)
        took = came_up - restarted
        assert took <= interval * (rise + 1) * 1.1 + 0.05, took
        # rise passes, each interval x (1 +- 10 % jitter) after the previous one (the first may
        # come at once): not before (rise - 1) intervals from the restart's start.
        assert came_up - restarting >= (rise - 1) * interval * 0.9 - LOG_RESOLUTION, came_up - restarting
        wait_until(lambda: back.stats()["requests"] >= 10, timeout=3, what="traffic back on app-2")
        status = s.server_status("app-2")
        assert status["state"] == "up", status
    assert load.failures() == [], load.failures()[:10]
