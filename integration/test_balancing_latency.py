"""One slow instance of three (every 4th answer 200 ms late: `sluice-origin --slow 25:200`)
must not set the fleet's p99 under `least_time`: 5,000 keep-alive requests from 64 and from 4
concurrent clients, p99 within 1.5 x the p99 of the same run with every origin healthy (or 50 ms
above it: the machine's own noise, a quarter of the 200 ms a slow answer costs). The
other policies' p99s on the same fleet are printed beside it (round_robin and least_conn keep
sending the slow instance its share; p2c sees only requests in flight)."""
import threading
import time

import pytest

from conftest import Conn, sluice_config

REQUESTS = 5000
SLOW = ("--slow", "25:200")


def p99(latencies):
    ordered = sorted(latencies)
    return ordered[int(len(ordered) * 0.99) - 1]


def measure(s, clients):
    """REQUESTS keep-alive GETs shared by `clients` threads, each on its own connection; returns
    every request's latency in seconds and the answers per origin. Bounded: 120 s in all."""
    latencies, origins, errors = [], {}, []
    lock = threading.Lock()
    deadline = time.monotonic() + 120
    share = [REQUESTS // clients + (1 if i < REQUESTS % clients else 0) for i in range(clients)]

    def client(i):
        mine, seen = [], {}
        try:
            with Conn(s.port, timeout=10) as c:
                for _ in range(share[i]):
                    if time.monotonic() >= deadline:
                        raise TimeoutError("scenario ran past 120 s")
                    start = time.perf_counter()
                    r = c.request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                    mine.append(time.perf_counter() - start)
                    assert r.status == 200, r
                    seen[r.header("X-Origin")] = seen.get(r.header("X-Origin"), 0) + 1
        except Exception as e:  # reported below, with the others'
            errors.append(repr(e))
        with lock:
            latencies.extend(mine)
            for k, v in seen.items():
                origins[k] = origins.get(k, 0) + v

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=130)
    assert not any(t.is_alive() for t in threads), "client threads still running"
    assert errors == [] and len(latencies) == REQUESTS, (errors[:3], len(latencies))
    return latencies, origins


def run(origins, sluice, balance, clients, slow):
    fleet = origins(2) + origins(1, prefix="slow" if slow else "app-c", extra_args=SLOW if slow else ())
    s = sluice(sluice_config(fleet, balance=balance, workers=2), name=f"{balance}-{slow}.toml")
    latencies, seen = measure(s, clients)
    s.stop()
    for o in fleet:
        o.stop()
    return p99(latencies), seen


@pytest.mark.parametrize("clients", [64, 4])
def test_least_time_keeps_p99_near_healthy_with_one_slow_instance(origins, sluice, clients):
    # The healthy reference is measured before and after the degraded run, and the larger one
    # taken: the machine's load may change between runs, and each p99 carries it.
    before, _ = run(origins, sluice, "least_time", clients, slow=False)
    degraded, seen = run(origins, sluice, "least_time", clients, slow=True)
    after, _ = run(origins, sluice, "least_time", clients, slow=False)
    healthy = max(before, after)
    others = {b: run(origins, sluice, b, clients, slow=True) for b in ("round_robin", "least_conn", "p2c")}
    print(f"\n{clients} clients, {REQUESTS} requests, p99 ms: healthy {healthy * 1e3:.1f}; one slow: "
          f"least_time {degraded * 1e3:.1f} {seen}; "
          + "; ".join(f"{b} {p * 1e3:.1f} {o}" for b, (p, o) in others.items()))
    # Both p99s also carry the machine's scheduling noise (the healthy 4-client p99 goes from
    # 0.6 ms on a quiet machine to 20 ms on a loaded one): 1.5 x, or 50 ms above it, far below the
    # 200 ms a slow answer costs.
    assert degraded <= max(1.5 * healthy, healthy + 0.050), (healthy, degraded, seen)
