"""Active health checks through the real binary: sluice probes every server on a schedule and
takes one out after `fall` failed probes in a row, brings it back after `rise` passes, and with
`slow_start` lets a returning server's share grow instead of jumping.

Probes here run every 100-200 ms so that every story fits in a second or two."""
import signal
import time

import pytest

from conftest import (LOG_RESOLUTION, SANITIZED, SCHEDULING_SLACK, TICK, Conn, Load, sluice_config,
                      timed_request, toml_table, wait_until)

ADMIN = toml_table("admin", listen="127.0.0.1:0")
GET = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"


def health(**keys):
    return toml_table("upstreams.app.health", **keys)


def transition(s, server, change, timeout):
    """Waits for the log line of `server`'s state change `change` ("up -> down (went_down)")."""
    return s.log.wait_for(rf"upstream app server {server}: {change}", timeout=timeout)


def test_a_killed_origin_is_out_within_fall_probes_and_back_after_rise(origins, sluice):
    """SIGKILL one of three origins under ~150 req/s: within interval x fall + timeout (+ one
    interval) sluice stops trying it and the log says why (connect refused); no client sees an
    error at any time (passive checks, on by default, may eject it first; the requests that met
    it were retried within the default budget). Started again on the same port, it is back after
    `rise` probes."""
    interval, timeout, fall, rise = 0.2, 0.1, 3, 2
    fleet = origins(3)
    victim = fleet[1]
    s = sluice(sluice_config(fleet, top=ADMIN, workers=2,
                             upstream_extra=health(interval="200ms", timeout="100ms", fall=fall,
                                                   rise=rise)))
    with Load(s.port, rate=150, max_seconds=15) as load:
        wait_until(lambda: len(load.origins()) == 3, timeout=3, what="load on all three")
        killed_at = time.time()  # before the signal: sluice cannot notice it earlier
        victim.stop(signal.SIGKILL)
        line = transition(s, "app-2", r"(up|ejected) -> down \(went_down\)", timeout=3)
        assert line.endswith(f"{fall} consecutive probe failures: connect refused"), line
        # On sluice's clock (its log line's timestamp), not on this test's polling.
        down_at = s.log_time(r"upstream app server app-2: (up|ejected) -> down \(went_down\)")
        # fall probes, each interval x (1 +- jitter 10 %) after the previous; connect refused
        # ends each at once. The first may come at once after the kill.
        took = down_at - killed_at
        assert (fall - 1) * interval * 0.9 - LOG_RESOLUTION <= took, f"down after {took:.3f}s"
        assert took <= fall * interval * 1.1 + TICK + SCHEDULING_SLACK, f"down after {took:.3f}s"
        out_on_load_clock = load.now()
        tried = s.server_status("app-2")
        assert (tried["state"], tried["last_probe"]["detail"]) == ("down", "connect refused"), tried
        load.wait_for_more(90)  # none of these may go to app-2 any more
        assert s.server_status("app-2")["failures"] == tried["failures"]
        sent_while_down = load.now()

        restarted_at = time.time()  # before the start: sluice cannot see it earlier
        back = origins.restart(victim)
        line = transition(s, "app-2", r"down -> up \(came_up\)", timeout=3)
        assert line.endswith(f"probe passed {rise}/{rise}"), line
        up_at = s.log_time(r"upstream app server app-2: down -> up \(came_up\)")
        took = up_at - restarted_at
        assert (rise - 1) * interval * 0.9 - LOG_RESOLUTION <= took, f"up after {took:.3f}s"
        # The origin's start, then the first probe within an interval, then rise - 1 more.
        assert took <= (rise + 1) * interval * 1.1 + TICK + SCHEDULING_SLACK, f"up after {took:.3f}s"
        wait_until(lambda: back.stats()["requests"] >= 10, timeout=3, what="traffic back on app-2")
    assert load.failures() == [], load.failures()[:10]
    assert load.origins(since=out_on_load_clock, until=sent_while_down).keys() == {"app-1", "app-3"}


def test_an_origin_whose_health_fails_is_taken_out_although_it_still_serves(origins, sluice):
    fleet = origins(2)
    sick = fleet[0]
    s = sluice(sluice_config(fleet, upstream_extra=health(interval="100ms", timeout="80ms", fall=2,
                                                          rise=2)))
    sick.set_health(503)
    line = transition(s, "app-1", r"up -> down \(went_down\)", timeout=2)
    assert line.endswith("2 consecutive probe failures: status 503 not in 200-399"), line
    sick.reset_stats()
    answers = [timed_request(s.port)[0] for _ in range(10)]
    assert [(r.status, r.header("X-Origin")) for r in answers] == [(200, "app-2")] * 10
    assert sick.stats()["requests"] == 0
    direct = timed_request(sick.port)[0]  # it still answers whoever asks it directly
    assert (direct.status, direct.header("X-Origin")) == (200, "app-1")

    sick.set_health(200)
    transition(s, "app-1", r"down -> up \(came_up\): probe passed 2/2", timeout=2)
    answers = [timed_request(s.port)[0].header("X-Origin") for _ in range(10)]
    assert sorted(answers) == ["app-1"] * 5 + ["app-2"] * 5, answers


def test_when_every_origin_is_down_requests_get_a_fast_503(origins, sluice):
    fleet = origins(2)
    s = sluice(sluice_config(fleet, access="json",
                             upstream_extra=health(interval="100ms", timeout="80ms", fall=1)))
    for o in fleet:
        o.set_health(503)
    for o in fleet:
        transition(s, o.name, r"up -> down \(went_down\)", timeout=2)
    for _ in range(5):
        r, _ = timed_request(s.port)
        assert (r.status, r.header("Sluice-Error")) == (503, "no healthy server"), r
    # On sluice's clock: answered at once, not after a connect (or its 1 s timeout) to a server.
    durations = [rec["duration_ms"] for rec in s.access_records(5)]
    assert len(durations) == 5 and max(durations) < 1000 * TICK, durations
    assert [o.stats()["requests"] for o in fleet] == [0, 0]


def sample(conn, origin, seconds, limit=3000):
    """Sends GETs on `conn` back to back for `seconds` (at most `limit`); returns, per request,
    (wall time sent, wall time answered, whether `origin` answered it)."""
    end = time.monotonic() + seconds
    out = []
    while time.monotonic() < end and len(out) < limit:
        sent = time.time()
        r = conn.request(GET)
        assert r.status == 200, r
        out.append((sent, time.time(), r.header("X-Origin") == origin))
    return out


def ramp_share(elapsed, slow_start=2.0):
    """docs/health.md: share = clamp(time since it came back / slow_start, 10 %, 100 %)."""
    return min(1.0, max(0.1, elapsed / slow_start))


def assert_ramped_share(samples, came_back, what):
    """The hits of a ramping weight-1 server against a full weight-1 one: each request had the
    chance w / (1 + w), w its share at some moment between 200 ms before it was sent (the
    health clock steps the share every 100 ms, a tick may be late by as much again) and its
    answer. The weighted schedule keeps a server within a slot or two of its share; a few
    picks more or less allowed for the schedule's rebuilds at each step."""
    def chance(t):
        w = ramp_share(t - came_back)
        return w / (1 + w)
    hits = sum(hit for _, _, hit in samples)
    low = sum(chance(sent - 0.2) for sent, _, _ in samples)
    high = sum(chance(done + 0.001) for _, done, _ in samples)
    print(f"{what}: {hits} of {len(samples)}, expected {low:.1f} to {high:.1f}")
    assert low - 4 <= hits <= high + 4, (what, hits, len(samples), low, high)


def test_slow_start_ramps_a_recovered_origins_share(origins, sluice):
    """weighted, two equal servers, slow_start = 2s: a server that comes back gets, request by
    request, the share docs/health.md gives for that moment (10 % of its weight at first, half a
    second in, full once the ramp is over), on sluice's clock (its came_up log stamp)."""
    fleet = origins(2)
    back = fleet[1]
    s = sluice(sluice_config(fleet, balance="weighted", top=ADMIN,
                             upstream_extra='slow_start = "2s"\n'
                             + health(interval="100ms", timeout="80ms", fall=1, rise=1)))
    back.set_health(503)
    transition(s, "app-2", r"up -> down \(went_down\)", timeout=2)
    with Conn(s.port) as conn:
        back.set_health(200)
        came_back = s.log_time(r"upstream app server app-2: down -> slow_start \(came_up\)", timeout=2)
        early = sample(conn, "app-2", 0.5)
        wait_until(lambda: time.time() >= came_back + 1.0, timeout=2)
        middle = sample(conn, "app-2", 0.5)
        wait_until(lambda: s.server_status("app-2")["state"] == "up", timeout=2,
                   what="ramp complete")
        late = sample(conn, "app-2", 0.5)
    # Enough requests for the bands to mean something (fewer under sanitizers, which are slow).
    assert min(len(early), len(middle), len(late)) >= (30 if SANITIZED else 100), \
        (len(early), len(middle), len(late))
    assert_ramped_share(early, came_back, "early")
    assert_ramped_share(middle, came_back, "middle")
    assert_ramped_share(late, came_back, "late")


def test_slow_start_ramps_between_probes(origins, sluice):
    """Probes once a second, slow_start = 2s: half a second after coming back the server should
    be at ~25 % of its weight (docs/health.md: share = elapsed / slow_start, at least 10 %), not
    still at the 10 % floor waiting for the next probe to move it."""
    fleet = origins(2)
    back = fleet[1]
    s = sluice(sluice_config(fleet, balance="weighted", top=ADMIN,
                             upstream_extra='slow_start = "2s"\n'
                             + health(interval="1s", timeout="100ms", fall=1, rise=1, jitter=0)))
    back.set_health(503)
    transition(s, "app-2", r"up -> down \(went_down\)", timeout=3)
    back.set_health(200)
    # On sluice's clock: its log line's stamp (ms) is when the ramp started.
    came_back = s.log_time(r"upstream app server app-2: down -> slow_start \(came_up\)", timeout=3)
    wait_until(lambda: time.time() >= came_back + 0.6, timeout=2)
    before = time.time()
    weight = s.server_status("app-2")["effective_weight"]
    after = time.time()
    assert after - came_back < 0.9  # still well before the next probe
    # The health clock steps the share every 100 ms: it is the share of a moment in the last
    # step before the read (a further 100 ms allowed for a late tick on a loaded machine),
    # never one of a moment after it.
    low = max(0.1, (before - came_back - 0.2) / 2)
    high = (after - came_back + 0.001) / 2
    assert low <= weight <= high, (low, weight, high)


def test_the_end_of_slow_start_is_logged_for_every_server(origins, sluice):
    """Four servers come back together with slow_start = 300ms and probes every 10 ms: each of
    them logs `slow_start -> up (slow_start_done)`, as docs/health.md promises for every change
    of state."""
    fleet = origins(4)
    s = sluice(sluice_config(fleet, balance="weighted", top=ADMIN,
                             upstream_extra='slow_start = "300ms"\n'
                             + health(interval="10ms", timeout="8ms", fall=1, rise=1)))
    for o in fleet:
        o.set_health(503)
    for o in fleet:
        transition(s, o.name, r"up -> down \(went_down\)", timeout=2)
    for o in fleet:
        o.set_health(200)
    wait_until(lambda: all(s.server_status(o.name)["state"] == "up" for o in fleet), timeout=3,
               what="every ramp over")
    def logged():
        return {o.name for o in fleet
                if any(f"server {o.name}: slow_start -> up (slow_start_done)" in line
                       for line in s.log.poll())}
    wait_until(lambda: logged() == {o.name for o in fleet}, timeout=3, what="every end logged")
    assert logged() == {o.name for o in fleet}, s.log.lines[-12:]
