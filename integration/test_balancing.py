"""Balancing policies through the real binary: weighted shares, a cookie that keeps a session on
one origin, least_conn steering around a slow origin, max_conns as a hard cap, and backups that
only serve when no primary can. Counts come from the test client's X-Origin tally and from the
origins' own /stats."""
import threading
import time

from conftest import Conn, assert_expired_on_time, run_client, sluice_config, timed_request, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def concurrently(n, fn):
    """Runs fn(i) for i in range(n) on n threads; returns the results in order."""
    results = [None] * n

    def run(i):
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "client threads still running"
    return results


def tally(summaries):
    """Sums the X-Origin counts of several sluice-test-client summaries."""
    total = {}
    for code, summary in summaries:
        assert code == 0 and set(summary["statuses"]) == {"200"}, summary
        for origin, n in summary["origins"].items():
            total[origin] = total.get(origin, 0) + n
    return total


def test_weighted_5_3_1_shares_hold_within_1_percent_over_9000_requests(origins, sluice):
    fleet = origins(3)
    s = sluice(sluice_config(fleet, balance="weighted", workers=2,
                             server_keys={"app-1": {"weight": 5}, "app-2": {"weight": 3},
                                          "app-3": {"weight": 1}}))
    # Three keep-alive clients at once, so that both workers pick from the shared schedule.
    counts = tally(concurrently(3, lambda i: run_client("--url", s.url("/"), "--requests", 3000,
                                                         "--keepalive", timeout=60)))
    assert sum(counts.values()) == 9000, counts
    for name, weight in (("app-1", 5), ("app-2", 3), ("app-3", 1)):
        assert abs(counts[name] / 9000 - weight / 9) <= 0.01, counts
    assert [o.stats()["requests"] for o in fleet] == [counts[o.name] for o in fleet]


def test_a_session_cookie_keeps_a_client_on_one_origin(origins, sluice):
    fleet = origins(3)
    s = sluice(sluice_config(fleet, balance="hash", workers=2,
                             upstream_extra='hash_key = "cookie:session"'))
    code, summary = run_client("--url", s.url("/"), "--requests", 1000, "--keepalive",
                               "--header", "Cookie: theme=dark; session=alice-42", timeout=60)
    assert code == 0 and summary["statuses"] == {"200": 1000}, summary
    assert list(summary["origins"].values()) == [1000], summary  # one origin, every time
    # Other sessions spread over the fleet, each staying where it landed.
    homes = {}
    for i in range(30):
        cookie = f"session=user-{i}"
        seen = {timed_request(s.port, headers=[("Cookie", cookie)])[0].header("X-Origin")
                for _ in range(3)}
        assert len(seen) == 1, (cookie, seen)
        homes[cookie] = seen.pop()
    assert set(homes.values()) == {o.name for o in fleet}, homes


def test_least_conn_sends_little_to_an_origin_that_answers_slowly(origins, scripted, sluice):
    """Two fast origins and one that takes 100 ms per answer, four keep-alive clients sending
    back to back for one second: least_conn sends the slow one a request only when it is no
    busier than the fast ones, so it gets a small share (round robin would give it a third).
    The clients stop together at a deadline rather than after a count, so the load stays
    concurrent to the end (a lone client sees every server idle, and least_conn is then round
    robin)."""
    fast = origins(2)
    slow = scripted("slow", delay=0.1)
    s = sluice(sluice_config([*fast, slow], balance="least_conn", workers=2))
    deadline = time.monotonic() + 1.0

    def client(i):
        seen = {}
        with Conn(s.port, timeout=10) as c:
            for _ in range(5000):
                if time.monotonic() >= deadline:
                    break
                r = c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                assert r.status == 200, r
                seen[r.header("X-Origin")] = seen.get(r.header("X-Origin"), 0) + 1
        return seen

    counts = {}
    for seen in concurrently(4, client):
        for origin, n in seen.items():
            counts[origin] = counts.get(origin, 0) + n
    total = sum(counts.values())
    assert total >= 200, counts
    assert 0 < counts.get("slow", 0) <= 0.1 * total, counts
    assert slow.count() == counts["slow"]


def test_max_conns_caps_what_one_origin_has_in_flight(origins, sluice):
    """app-1 has max_conns = 2; eight clients on two workers send 50 ms requests: app-1 never has
    more than two at once (its own high-water mark says so), the overflow goes to app-2, nobody
    gets an error."""
    capped, other = origins(2)
    s = sluice(sluice_config([capped, other], workers=2,
                             server_keys={"app-1": {"max_conns": 2}}))

    def client(i):
        with Conn(s.port, timeout=10) as c:
            return [c.request(b"GET /?delay=50 HTTP/1.1\r\nHost: t\r\n\r\n").status
                    for _ in range(12)]

    statuses = concurrently(8, client)
    assert {st for per_client in statuses for st in per_client} == {200}, statuses
    assert capped.stats()["max_in_flight"] == 2, capped.stats()
    assert other.stats()["max_in_flight"] >= 3, other.stats()
    assert capped.stats()["requests"] + other.stats()["requests"] == 96


def test_a_backup_serves_only_while_no_primary_can(origins, sluice):
    primaries = origins(2)
    backup, = origins(1, prefix="backup")
    s = sluice(sluice_config([*primaries, backup], workers=2, top=ADMIN,
                             server_keys={"backup-1": {"backup": True}},
                             upstream_extra=toml_table("upstreams.app.health", interval="100ms",
                                                       timeout="80ms", fall=1, rise=1)))
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"app-1": 15, "app-2": 15}, summary

    primaries[0].set_health(503)
    s.log.wait_for(r"server app-1: up -> down", timeout=2)
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"app-2": 30}, summary  # one primary left is enough

    primaries[1].set_health(503)
    s.log.wait_for(r"server app-2: up -> down", timeout=2)
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"backup-1": 30}, summary

    for o in primaries:
        o.set_health(200)
    for o in primaries:
        s.log.wait_for(rf"server {o.name}: down -> up", timeout=2)
    backup.reset_stats()
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"app-1": 15, "app-2": 15}, summary
    assert backup.stats()["requests"] == 0

    # Draining every primary (healthy as they are) hands the traffic to the backup too.
    for o in primaries:
        assert s.admin("POST", f"/api/upstreams/app/servers/{o.name}/drain").status == 200
    code, summary = run_client("--url", s.url("/"), "--requests", 30, "--keepalive", timeout=20)
    assert summary["origins"] == {"backup-1": 30}, summary


def test_the_queue_holds_what_max_conns_turns_away_and_serves_it_in_order(origins, sluice):
    """max_conns = 1, queue_size = 5, an origin that takes 300 ms: of seven requests sent one
    after another (each once the earlier ones are in flight or queued), one is served, five wait in
    the queue and are served in the order they came, and the seventh gets 503 `queue full` at
    once."""
    o, = origins(1)
    s = sluice(sluice_config([o], server_keys={"app-1": {"max_conns": 1}},
                             top='[admin]\nlisten = "127.0.0.1:0"\n',
                             upstream_extra='queue_size = 5\nqueue_timeout = "10s"\n'))
    finished, lock = [], threading.Lock()

    def send(i):
        r, _ = timed_request(s.port, target=f"/?delay=300&n={i}", timeout=15)
        with lock:
            finished.append((i, r.status, r.header("Sluice-Error")))

    def queued():
        return s.status()["upstreams"][0]["queued"]

    threads = []
    for i in range(6):
        t = threading.Thread(target=send, args=(i,))
        t.start()
        threads.append(t)
        # Request i is in flight (i = 0) or the i-th in the queue before i + 1 leaves.
        wait_until(lambda: o.stats()["in_flight"] == 1 and queued() == i, timeout=5,
                   interval=0.002, what=f"request {i} admitted")
    r, took = timed_request(s.port, target="/?n=6", timeout=5)
    assert (r.status, r.header("Sluice-Error")) == (503, "queue full"), r
    assert took < 0.3, took
    for t in threads:
        t.join(timeout=20)
    assert [f[1] for f in finished] == [200] * 6, finished
    assert [f[0] for f in finished] == list(range(6)), finished  # first come, first served
    assert o.stats()["max_in_flight"] == 1


def test_a_request_that_waits_too_long_in_the_queue_gets_503_queue_timeout(origins, sluice):
    o, = origins(1)
    s = sluice(sluice_config([o], server_keys={"app-1": {"max_conns": 1}}, access="json",
                             upstream_extra='queue_size = 5\nqueue_timeout = "200ms"\n'))
    holder = threading.Thread(target=lambda: timed_request(s.port, target="/?delay=1500", timeout=10))
    holder.start()
    wait_until(lambda: o.stats()["in_flight"] == 1, timeout=5, interval=0.002, what="slot taken")
    r, _ = timed_request(s.port, target="/", timeout=5)
    assert (r.status, r.header("Sluice-Error")) == (503, "queue timeout"), r
    record, = s.access_records(1)  # the holder's is logged when it ends, 1.5 s later
    assert record["error"] == "queue timeout", record
    assert_expired_on_time(record["duration_ms"] / 1000, 0.2, "queue_timeout")
    holder.join(timeout=10)


def test_two_independent_sluice_processes_map_every_key_alike_whatever_the_server_order(
        origins, sluice):
    """Consistent hashing is keyed on server identity, not list position: two processes started
    separately, one with the server list reversed, send each of 200 keys to the same origin."""
    fleet = origins(3)
    extra = 'hash_key = "header:X-User"'
    a = sluice(sluice_config(fleet, balance="hash", upstream_extra=extra), name="a.toml")
    b = sluice(sluice_config(list(reversed(fleet)), balance="hash", upstream_extra=extra),
               name="b.toml")
    for i in range(200):
        user = [("X-User", f"user-{i}")]
        home_a = timed_request(a.port, headers=user)[0].header("X-Origin")
        home_b = timed_request(b.port, headers=user)[0].header("X-Origin")
        assert home_a == home_b, (i, home_a, home_b)
