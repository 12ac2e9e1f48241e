"""Fleet mode (docs/fleet.md): three sluice instances on loopback share their drains through a
real Redis (Debian's redis-server on an ephemeral port, no persistence, stopped by PID). Each
sluice-origin counts the requests it received (`/stats`): a rule about which server gets
traffic is asserted there."""
import socket
import subprocess
import textwrap
import threading
import time

import pytest

from conftest import SLUICE, Background, Load, metric, metric_samples, sluice_config, timed_request, toml_table, wait_until
from test_idempotency import redis  # noqa: F401 (the fixture: redis-server on a loopback port)


class SlowRedis:
    """A TCP relay to Redis on a loopback port that holds each connection's first answer for
    `delay` seconds: a Redis slow to answer a starting instance."""

    def __init__(self, redis_port, delay):
        self.redis_port, self.delay = redis_port, delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.redis_port))
            threading.Thread(target=self._pipe, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.delay), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, delay):
        try:
            while data := src.recv(65536):
                time.sleep(delay)  # the first answer only: the relay's own lag, not the test's wait
                delay = 0.0
                dst.sendall(data)
        except OSError:
            pass
        finally:
            dst.close()

    def close(self):
        self.listener.close()


def fleet_config(origins, redis_url, name, upstream_extra="", fleet_extra="", server_extra=""):
    top = textwrap.dedent(f"""\
        [admin]
        listen = "127.0.0.1:0"

        [fleet]
        redis = "{redis_url}"
        name = "{name}"
        {fleet_extra}
        """)
    return sluice_config(origins, top=top, upstream_extra=upstream_extra, server_extra=server_extra)


# Active probes every 300 ms: the tests about probe leases.
HEALTH = toml_table("upstreams.app.health", interval="300ms", timeout="200ms")


def start_fleet(sluice, origins, r, n=3, upstream_extra="", fleet_extra=""):
    return [sluice(fleet_config(origins, r.url, f"lb-{i}", upstream_extra, fleet_extra), name=f"lb-{i}.toml")
            for i in range(1, n + 1)]


def drain(s, server, verb="drain"):
    resp = s.admin("POST", f"/api/upstreams/app/servers/{server}/{verb}")
    assert resp.status == 200, resp


def draining(s, server):
    return s.server_status(server)["draining"]


def counts(origins):
    return {o.name: o.stats()["requests"] for o in origins}


def send(s, n):
    """`n` GETs through `s`, one after another; every one must be answered 200."""
    for _ in range(n):
        resp = timed_request(s.port, "GET", "/")[0]
        assert resp.status == 200, resp


def test_a_drain_through_one_instance_reaches_every_instance_within_a_second(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r)
    t0 = time.monotonic()
    drain(lbs[0], "app-1")
    wait_until(lambda: all(draining(s, "app-1") for s in lbs), timeout=1.0,
               what="app-1 draining on every instance")
    assert time.monotonic() - t0 <= 1.0
    assert all(s.server_status("app-1")["drain_source"] == "api" for s in lbs)
    # The fleet as lb-1 sees it: the drain, and the two others, each with the same config and
    # the drain applied.
    view = wait_until(lambda: (lambda v: v if len(v["instances"]) == 2 and all(
        "app/app-1" in i["draining"] for i in v["instances"].values()) else None)(
            lbs[0].admin("GET", "/api/fleet").json()), timeout=2, what="lb-2 and lb-3 in lb-1's view")
    assert (view["name"], view["redis_up"], view["drains"]) == ("lb-1", True, ["app/app-1"])
    assert sorted(view["instances"]) == ["lb-2", "lb-3"]
    assert all(i["same_config"] is False for i in view["instances"].values())  # lb-N.toml differ by name
    for o in os_:
        o.reset_stats()
    for s in lbs:
        send(s, 12)
    got = counts(os_)
    assert got["app-1"] == 0, got
    assert got["app-2"] + got["app-3"] == 36, got
    # The undrain travels the same way.
    drain(lbs[2], "app-1", "undrain")
    wait_until(lambda: not any(draining(s, "app-1") for s in lbs), timeout=1.0,
               what="app-1 undrained on every instance")
    for s in lbs:
        assert s.log.wait_for(r"server app-1: (draining|undrained) through the (admin API|fleet)")


def test_drain_wait_through_one_instance_waits_for_a_slow_request_on_another(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r)
    app1 = os_[0]
    # Three slow requests at once through instance 3: round robin gives each server one.
    slow = Background(lbs[2].port, 3, target="/?delay=2500")
    wait_until(lambda: app1.stats()["in_flight"] == 1, timeout=5, what="a slow request held on app-1")
    started = time.monotonic()
    cli = subprocess.run([str(SLUICE), "drain", "--upstream", "app", "--server", "app-1", "--wait",
                          "--timeout", "20s", "--admin", lbs[1].admin_address],
                         capture_output=True, text=True, timeout=30)
    returned = time.monotonic()
    results = slow.join()
    assert all(not isinstance(resp, Exception) and resp.status == 200 for resp, _ in results), results
    # The drain waits for app-1's request alone: the others (app-2, app-3) may have started, and
    # ended, later.
    on_app1 = [done for resp, done in results if resp.header("X-Origin") == app1.name]
    assert len(on_app1) == 1, [(resp.header("X-Origin"), done) for resp, done in results]
    held_done = on_app1[0]
    assert cli.returncode == 0, cli.stderr
    assert "app/app-1: drained" in cli.stdout
    # It returned once the request held on instance 3 was over, not before.
    assert returned >= held_done, (returned - started, held_done - started)
    assert app1.stats()["in_flight"] == 0


def test_a_fresh_instance_picks_up_the_drains_before_its_first_request(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r, n=2)
    drain(lbs[0], "app-2")
    wait_until(lambda: draining(lbs[1], "app-2"), timeout=1.0, what="app-2 draining on lb-2")
    for o in os_:
        o.reset_stats()
    # Its Redis answers 300 ms late: the instance must not take a request before that answer.
    slow = SlowRedis(r.port, 0.3)
    fresh = sluice(fleet_config(os_, slow.url, "lb-9"), name="lb-9.toml")
    send(fresh, 12)  # at once: no wait for a sync
    slow.close()
    got = counts(os_)
    assert got["app-2"] == 0, got
    assert got["app-1"] + got["app-3"] == 12, got
    assert fresh.server_status("app-2")["drain_source"] == "api"


def probes(s, server):
    return sum(metric_samples(s, "sluice_health_checks_total", upstream="app", server=server))


def one_lease_per_server(lbs):
    held = [p for s in lbs for p in s.admin("GET", "/api/fleet").json()["probes"]]
    return sorted(held) == ["app/app-1", "app/app-2", "app/app-3"]


# The kinds of request a failure scenario asserts on: a GET, a POST without Idempotency-Key (not
# retryable on another server), a POST with one. Three of each kind at 17/s: 153 requests/s.
KINDS = {"GET": {}, "POST": {"method": "POST", "body": b"order=1"},
         "POST with Idempotency-Key": {"method": "POST", "body": b"order=1", "keyed": True}}


def test_redis_stopped_under_load_no_request_fails_and_the_drains_resync(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r, upstream_extra=HEALTH)
    wait_until(lambda: one_lease_per_server(lbs), timeout=5, what="one lease per server")
    drain(lbs[0], "app-1")
    wait_until(lambda: all(draining(s, "app-1") for s in lbs), timeout=1.0, what="app-1 drained")
    os_[0].reset_stats()
    loads = {(s.port, kind): Load(s.port, rate=17, max_seconds=40, max_requests=680, **args).start()
             for s in lbs for kind, args in KINDS.items()}

    def traffic():
        """About a second more of every kind through every instance (all loads at once)."""
        target = {key: len(load.records) + 17 for key, load in loads.items()}
        wait_until(lambda: all(len(load.records) >= target[key] for key, load in loads.items()),
                   timeout=10, interval=0.005, what="17 more requests of each load")
    try:
        traffic()
        port = r.port
        r.stop()  # SIGKILL: no persistence, Redis comes back empty
        for s in lbs:
            s.log.wait_for(r"fleet: Redis at .* unreachable", timeout=5)
        # Every instance probes every server on its own now (no verdict comes through Redis).
        before = {(s.port, o.name): probes(s, o.name) for s in lbs for o in os_}
        wait_until(lambda: all(probes(s, o.name) >= before[(s.port, o.name)] + 3 for s in lbs for o in os_),
                   timeout=5, what="three probes of each server by each instance")
        traffic()
        # A drain while Redis is gone: this instance's own until Redis is back.
        drain(lbs[1], "app-3")
        assert draining(lbs[1], "app-3")
        traffic()
        # The drain from before the outage held on every instance all through it.
        assert os_[0].stats()["requests"] == 0
        redis(port)
        # Back: the drain made meanwhile is published, and the one from before the outage is put
        # back by the instances that hold it (the restarted Redis lost it).
        wait_until(lambda: all(draining(s, "app-3") and draining(s, "app-1") for s in lbs),
                   timeout=10, what="app-3 drained on every instance after Redis came back")
        for s in lbs:
            s.log.wait_for(r"fleet: Redis at .* reachable again", timeout=5)
        wait_until(lambda: one_lease_per_server(lbs), timeout=5, what="one prober per server again")
        traffic()
    finally:
        records = {key: load.stop() for key, load in loads.items()}
    for (port, kind), rec in records.items():
        assert [x for x in rec if x.status != 200] == [], (port, kind)
        assert len(rec) >= 68, (port, kind, len(rec))
        assert not [x for x in rec if x.origin == "app-1"], (port, kind)
    assert os_[0].stats()["requests"] == 0
    for s in lbs:
        assert metric(s, "sluice_fleet_redis_lost_total") == 1
        assert metric(s, "sluice_fleet_redis_up") == 1


def test_each_server_is_probed_by_one_instance_of_three(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r, upstream_extra=HEALTH)
    wait_until(lambda: one_lease_per_server(lbs), timeout=5, what="one lease per server over the fleet")

    def who_probes_what_in_lb1s_view():
        view = lbs[0].admin("GET", "/api/fleet").json()
        return sorted(view["probes"] + [p for i in view["instances"].values() for p in i["probes"]])
    wait_until(lambda: who_probes_what_in_lb1s_view() == ["app/app-1", "app/app-2", "app/app-3"], timeout=2,
               what="every lease in lb-1's /api/fleet")
    for o in os_:
        o.reset_stats()
    t0 = time.monotonic()
    # 12 probes of each server: one prober per server needs 12 intervals (300 ms, jitter 10%) for
    # them; three would need a third of that.
    wait_until(lambda: all(o.stats()["health_requests"] >= 12 for o in os_), timeout=15,
               what="12 probes of each server")
    elapsed = time.monotonic() - t0
    assert elapsed >= 11 * 0.3 * 0.9, elapsed
    # Every instance has every server's verdict, its own prober's or the holder's.
    for s in lbs:
        for name in ("app-1", "app-2", "app-3"):
            st = s.server_status(name)
            assert st["state"] == "up" and st["last_probe"] is not None, (s.port, st)


def test_the_lease_holder_killed_another_instance_probes_its_server_within_lease_ttl(sluice, origins, redis):
    os_ = origins(3)
    r = redis()
    lbs = start_fleet(sluice, os_, r, upstream_extra=HEALTH, fleet_extra='lease_ttl = "2s"')

    def holder_of(field):
        found = [s for s in lbs if s.proc.poll() is None and field in s.admin("GET", "/api/fleet").json()["probes"]]
        return found[0] if len(found) == 1 else None
    holder = wait_until(lambda: holder_of("app/app-1"), timeout=5, what="app-1's lease holder")
    others = [s for s in lbs if s is not holder]
    holder.proc.kill()  # SIGKILL: its lease is not released, it expires
    holder.proc.wait()
    killed = time.monotonic()
    os_[0].set_health(503)
    # Another instance takes the lease after lease_ttl (2 s) and its next sync (250 ms), and its
    # fall (3) probes 300 ms apart mark app-1 down; every survivor applies that verdict.
    wait_until(lambda: all(s.server_status("app-1")["state"] == "down" for s in others), timeout=10,
               what="app-1 down on the surviving instances")
    assert time.monotonic() - killed <= 2.0 + 0.25 + 4 * 0.3 + 1.0
    assert wait_until(lambda: holder_of("app/app-1"), timeout=2, what="a new holder") in others


# An ejection lasts fail_timeout: long enough for every check made while it is in place, even
# under a sanitizer.
PASSIVE = toml_table("upstreams.app.passive", max_fails=3, fail_timeout="5s")


def answered_by(s, n):
    """`n` GETs through `s`, one after another, every one answered 200: {X-Origin: count}."""
    got = {}
    for _ in range(n):
        resp = timed_request(s.port, "GET", "/")[0]
        assert resp.status == 200, resp
        got[resp.header("X-Origin")] = got.get(resp.header("X-Origin"), 0) + 1
    return got


def disagreements(s):
    return s.admin("GET", "/api/fleet").json()["disagreements"]


def state(s, server):
    return s.server_status(server)["state"]


@pytest.mark.parametrize("share", [True, False], ids=["shared", "not_shared"])
def test_a_passive_ejection_on_one_instance_applies_on_every_instance_with_share_ejections(
        sluice, origins, scripted, redis, share):
    bad = scripted("bad", status=502)
    good, = origins(1, prefix="good")
    r = redis()
    lbs = start_fleet(sluice, [bad, good], r, upstream_extra=PASSIVE,
                      fleet_extra=f"share_ejections = {'true' if share else 'false'}")
    # Only lb-1 sees bad fail (each 502 is retried on good: the clients never notice).
    t0 = time.monotonic()
    assert answered_by(lbs[0], 6) == {"good-1": 6}
    assert state(lbs[0], "bad") == "ejected"
    bad.status = 200  # healthy again: from here on only the ejection keeps it out
    if not share:
        got = {**answered_by(lbs[1], 12), **{"lb-3 " + k: v for k, v in answered_by(lbs[2], 12).items()}}
        assert got.get("bad", 0) > 0 and got.get("lb-3 bad", 0) > 0, got
        assert state(lbs[0], "bad") == "ejected"  # all that while
        assert state(lbs[1], "bad") == "up" and state(lbs[2], "bad") == "up"
        # lb-1's fleet view shows the verdicts that differ.
        wait_until(lambda: disagreements(lbs[0]) == {"app/bad": {"lb-1": "ejected", "lb-2": "in", "lb-3": "in"}},
                   timeout=1, what="bad's differing verdicts in lb-1's /api/fleet")
        return
    wait_until(lambda: all(state(s, "bad") == "ejected" for s in lbs[1:]), timeout=1.0,
               what="bad ejected on lb-2 and lb-3")
    assert time.monotonic() - t0 <= 1.0
    wait_until(lambda: disagreements(lbs[0]) == {}, timeout=1, what="the instances agree on bad")
    before = bad.count()
    assert answered_by(lbs[1], 12) == {"good-1": 12}
    assert answered_by(lbs[2], 12) == {"good-1": 12}
    assert bad.count() == before
    assert "by lb-1 through the fleet: 3 failures in 5s: 502" in lbs[1].server_status("bad")["reason"]
    view = lbs[1].admin("GET", "/api/fleet").json()
    assert view["share_ejections"] is True
    assert [(e["server"], e["from"]) for e in view["ejections"]] == [("app/bad", "lb-1")], view
    assert 0 < view["ejections"][0]["left_ms"] <= 5000
    assert metric(lbs[0], "sluice_fleet_ejections_published_total") == 1
    assert [metric(s, "sluice_fleet_ejections_applied_total") for s in lbs] == [0, 1, 1]
    # The ejection ends on its own everywhere, and every instance sends to bad again.
    wait_until(lambda: all(state(s, "bad") == "up" for s in lbs), timeout=7,
               what="the ejection over on every instance")
    for s in lbs:
        assert answered_by(s, 4).get("bad", 0) > 0


def test_probes_per_server_are_one_per_interval_with_one_instance_and_with_three(sluice, origins, redis):
    """Probes counted at each origin over 30 s: one prober per server, so one probe per interval
    (1 s, jitter 10 %: 30/1.1 to 30/0.9, one more or less at the window's edges) whether the
    fleet has one instance or three. Both fleets run at the same time, each with its Redis."""
    health = toml_table("upstreams.app.health", interval="1s", timeout="500ms")
    alone_origins, fleet_origins = origins(3, prefix="one"), origins(3, prefix="three")
    alone = start_fleet(sluice, alone_origins, redis(), n=1, upstream_extra=health)
    three = start_fleet(sluice, fleet_origins, redis(), n=3, upstream_extra=health)
    assert alone[0].admin("GET", "/api/fleet").json()["redis_up"]

    def one_lease_each():
        held = [s.admin("GET", "/api/fleet").json()["probes"] for s in three]
        return [len(h) for h in held] == [1, 1, 1] and sorted(p for h in held for p in h) == [
            f"app/three-{i}" for i in (1, 2, 3)]
    # The first instance up takes every lease, and hands the excess over at renewal (lease_ttl 10 s
    # / 3): the count starts once the leases have spread.
    wait_until(one_lease_each, timeout=15, what="one lease per instance of three")
    for o in alone_origins + fleet_origins:
        o.reset_stats()
    time.sleep(30)  # the measurement window itself
    got = {o.name: o.stats()["health_requests"] for o in alone_origins + fleet_origins}
    assert all(26 <= n <= 34 for n in got.values()), got
    assert one_lease_each()  # no lease moved during the window


def test_with_redis_gone_an_ejection_is_local_and_it_is_shared_when_redis_is_back(sluice, origins, scripted, redis):
    bad = scripted("bad", status=502)
    good, = origins(1, prefix="good")
    r = redis()
    lbs = start_fleet(sluice, [bad, good], r, n=2, fleet_extra="share_ejections = true",
                      upstream_extra=toml_table("upstreams.app.passive", max_fails=3, fail_timeout="10s"))
    port = r.port
    r.stop()
    for s in lbs:
        s.log.wait_for(r"fleet: Redis at .* unreachable", timeout=5)
    assert answered_by(lbs[0], 6) == {"good-1": 6}
    assert state(lbs[0], "bad") == "ejected"
    bad.status = 200
    # Redis gone: lb-1's ejection is its own; lb-2 goes on sending to bad, and every request of
    # both is answered.
    assert answered_by(lbs[1], 12) == {"good-1": 6, "bad": 6}
    assert state(lbs[1], "bad") == "up"
    redis(port)
    # Back: the ejection still in place on lb-1 is written then, and lb-2 applies it.
    wait_until(lambda: state(lbs[1], "bad") == "ejected", timeout=10, what="bad ejected on lb-2 once Redis is back")
    assert answered_by(lbs[1], 6) == {"good-1": 6}
    assert metric(lbs[0], "sluice_fleet_ejections_published_total") == 1
