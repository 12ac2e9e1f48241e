"""Servers from DNS (docs/discovery.md): a name with `resolve = true` and an upstream's
`discover = { srv = ... }`, answered by a DNS server on loopback that each test controls
(dns_responder.py). Origins that one name gives live on distinct loopback addresses
(127.0.0.2, 127.0.0.3, ...) on one port, as the pods of a headless Service do."""
import re
import subprocess
import time

import pytest

from conftest import (ORIGIN, SLUICE, Background, Conn, Load, Origin, sluice_config, timed_request,
                      wait_for_line, wait_until)
from dns_responder import DnsResponder

TTL = 1


class IpOrigin(Origin):
    """An origin on a given loopback address (Origin binds 127.0.0.1)."""

    def __init__(self, name, ip, port=0):
        self.name, self.ip = name, ip
        self.proc = subprocess.Popen(
            [str(ORIGIN), "--listen", f"{ip}:{port}", "--name", name],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        m = wait_for_line(self.proc, self.proc.stdout, rf"listening {re.escape(ip)}:(\d+)")
        self.port = int(m.group(1))
        self.address = f"{ip}:{self.port}"
        self.stats_calls = 0

    def stats(self):
        self.stats_calls += 1  # each is a connection of its own
        return super().stats()

    def proxied_connections(self):
        """Connections the origin accepted from sluice (its own stats requests left out)."""
        return self.stats()["connections"] - self.stats_calls


@pytest.fixture
def dns():
    responders = []

    def start():
        responders.append(DnsResponder())
        return responders[-1]

    yield start
    for r in responders:
        r.close()


@pytest.fixture
def ip_origins():
    """ip_origins(n): origins app-1..app-n on 127.0.0.2.. sharing one port."""
    started = []

    def start(n, first=1):
        # The first origin's port may be taken on another address: then all start again.
        for _ in range(5):
            out, port = [], 0
            try:
                for i in range(first, first + n):
                    out.append(IpOrigin(f"app-{i}", f"127.0.0.{i + 1}", port))
                    port = out[-1].port
            except (EOFError, TimeoutError, OSError):
                for o in out:
                    o.stop()
                continue
            started.extend(out)
            return out
        raise RuntimeError(f"no common port for {n} origins")

    yield start
    for o in started:
        o.stop()


def dns_top(responder, extra=""):
    return (f'[dns]\nservers = ["127.0.0.1:{responder.port}"]\ntimeout = "200ms"\nattempts = 2\n'
            f'{extra}\n[admin]\nlisten = "127.0.0.1:0"\n')


def resolved_config(responder, port, name="app.test", **kwargs):
    cfg = sluice_config([], top=dns_top(responder), **kwargs)
    return cfg + f'\n[[upstreams.app.servers]]\naddress = "{name}:{port}"\nresolve = true\n'


def servers(s, upstream="app"):
    return {srv["address"]: srv for u in s.status()["upstreams"] if u["name"] == upstream
            for srv in u["servers"]}


def wait_servers(s, addresses, timeout=5.0):
    wait_until(lambda: set(servers(s)) == set(addresses), timeout=timeout, interval=0.02,
               what=f"servers {sorted(addresses)}")


def spread(port, n, headers=()):
    """X-Origin counts of `n` sequential requests on one keep-alive connection."""
    counts = {}
    with Conn(port) as c:
        lines = ["GET / HTTP/1.1", "Host: t", *(f"{k}: {v}" for k, v in headers)]
        req = ("\r\n".join(lines) + "\r\n\r\n").encode()
        for _ in range(n):
            r = c.request(req)
            assert r.status == 200, r
            counts[r.header("X-Origin")] = counts.get(r.header("X-Origin"), 0) + 1
    return counts


def test_a_records_become_servers_and_changes_apply_within_the_ttl(dns, ip_origins, sluice):
    """3 A records -> 3 servers. The answer becomes 2 of them plus a new one: within TTL + 1 s
    the removed server gets no new request while its slow in-flight request finishes, the new
    one gets traffic, and the survivors keep their pooled connections."""
    responder = dns()
    fleet = ip_origins(4)
    a1, a2, a3, a4 = fleet
    responder.set("app.test", a=[a1.ip, a2.ip, a3.ip], ttl=TTL)
    s = sluice(resolved_config(responder, a1.port))
    wait_servers(s, [a1.address, a2.address, a3.address])
    st = servers(s)
    assert st[a1.address]["identity"] == f"app.test@{a1.address}"
    assert st[a1.address]["origin"] == "dns" and st[a1.address]["source"] == "app.test"
    assert spread(s.port, 30) == {"app-1": 10, "app-2": 10, "app-3": 10}
    pooled = {o.name: o.proxied_connections() for o in (a2, a3)}

    slow = Background(s.port, 3, target="/?delay=2500")  # one on each server (round robin)
    wait_until(lambda: all(o.stats()["in_flight"] == 1 for o in (a1, a2, a3)), timeout=5,
               what="a slow request on each server")
    changed = time.monotonic()
    responder.set("app.test", a=[a2.ip, a3.ip, a4.ip], ttl=TTL)
    wait_servers(s, [a2.address, a3.address, a4.address], timeout=TTL + 1.5)
    assert time.monotonic() - changed <= TTL + 1.0
    assert a1.stats()["in_flight"] == 1  # applied while its request was still running
    results = slow.join()
    assert [r.status for r, _ in results] == [200, 200, 200]  # ... which finished
    assert spread(s.port, 30) == {"app-2": 10, "app-3": 10, "app-4": 10}
    assert a1.stats()["requests"] == 10 + 1  # no new request on the removed server
    # The survivors' pooled connections outlived the change: no new connection to them.
    assert {o.name: o.proxied_connections() for o in (a2, a3)} == pooled
    s.log.wait_for(rf"upstream app: \+{re.escape(a4.address)} -{re.escape(a1.address)} "
                   rf"\(dns app\.test, ttl {TTL}s\)")


def test_srv_weights_split_traffic_and_priority_two_is_a_backup(dns, origins, sluice):
    """SRV weights 3 and 1 split the traffic 3:1; the priority-2 target is used only when both
    primaries are down."""
    responder = dns()
    one, two, three = origins(3)
    responder.set("_http._tcp.app.test", ttl=TTL, srv=[
        (10, 3, one.port, "one.test"), (10, 1, two.port, "two.test"), (20, 1, three.port, "three.test")])
    for name in ("one.test", "two.test", "three.test"):
        responder.set(name, a=["127.0.0.1"], ttl=TTL)
    health = '[upstreams.app.health]\ninterval = "200ms"\ntimeout = "150ms"\nrise = 1\nfall = 1\n'
    cfg = sluice_config([], top=dns_top(responder), balance="weighted",
                        upstream_extra='discover = { srv = "_http._tcp.app.test" }') + health
    s = sluice(cfg)
    wait_until(lambda: len(servers(s)) == 3, timeout=5, what="three SRV servers")
    st = servers(s)
    assert st[one.address]["weight"] == 3 and not st[one.address]["backup"]
    assert st[two.address]["weight"] == 1 and not st[two.address]["backup"]
    assert st[three.address]["backup"] and st[three.address]["origin"] == "srv"
    assert spread(s.port, 400) == {"app-1": 300, "app-2": 100}
    one.set_health(503)
    two.set_health(503)
    wait_until(lambda: all(servers(s)[o.address]["state"] == "down" for o in (one, two)),
               timeout=5, what="both primaries down")
    assert spread(s.port, 20) == {"app-3": 20}
    one.set_health(200)
    wait_until(lambda: servers(s)[one.address]["state"] == "up", timeout=5, what="app-1 back up")
    assert spread(s.port, 20) == {"app-1": 20}


def test_resolver_stops_answering_servers_stay_stale_and_no_request_fails(dns, ip_origins, sluice):
    responder = dns()
    a1, a2 = ip_origins(2)
    responder.set("app.test", a=[a1.ip, a2.ip], ttl=TTL)
    s = sluice(resolved_config(responder, a1.port))
    wait_servers(s, [a1.address, a2.address])
    with Load(s.port, rate=100, max_seconds=20) as load:
        load.wait_for_more(50)
        responder.mode = "drop"
        wait_until(lambda: all(v.get("stale") for v in servers(s).values()), timeout=TTL + 3,
                   what="servers shown stale")
        load.wait_for_more(150)
        st = servers(s)
        assert set(st) == {a1.address, a2.address}
        assert all(v["stale_for_ms"] > 0 for v in st.values())
        (source,) = [u for u in s.status()["upstreams"] if u["name"] == "app"][0]["discovery"]
        assert source["stale"] and "imeout" in source["last_error"]
        responder.mode = "answer"
        wait_until(lambda: not any(v.get("stale") for v in servers(s).values()), timeout=TTL + 3,
                   what="fresh again")
        load.wait_for_more(50)
    assert load.failures() == []
    assert s.metrics_text().count('sluice_dns_resolutions_total{upstream="app",name="app.test",result="failed"}') == 1


def test_bounded_load_through_membership_changes_has_no_failed_request(dns, ip_origins, sluice):
    responder = dns()
    fleet = ip_origins(4)
    address = {o.ip: o.address for o in fleet}
    sets = [[0, 1, 2], [1, 2, 3], [3], [0, 3], [0, 1, 2, 3], [2]]
    responder.set("app.test", a=[fleet[i].ip for i in sets[0]], ttl=TTL)
    s = sluice(resolved_config(responder, fleet[0].port, workers=2))
    wait_servers(s, [address[fleet[i].ip] for i in sets[0]])
    with Load(s.port, rate=150, max_seconds=40, max_requests=6000) as load:
        for members in sets[1:]:
            load.wait_for_more(30)
            responder.set("app.test", a=[fleet[i].ip for i in members], ttl=TTL)
            wait_servers(s, [fleet[i].address for i in members], timeout=TTL + 2)
            load.wait_for_more(60)
            since = load.now()
            load.wait_for_more(60)
            assert set(load.origins(since=since)) == {fleet[i].name for i in members}
    assert len(load.records) >= 500
    assert load.failures() == []
    changes = [line for line in s.metrics_text().splitlines()
               if line.startswith('sluice_discovery_changes_total{upstream="app"')]
    assert changes == ['sluice_discovery_changes_total{upstream="app",name="app.test"} 6']


def test_two_instances_seeing_answers_in_different_orders_route_every_key_alike(dns, ip_origins, sluice):
    forward, backward = dns(), dns()
    fleet = ip_origins(5)
    for r in (forward, backward):
        r.set("app.test", a=[o.ip for o in fleet], ttl=300)
    backward.reverse = True
    instances = [sluice(resolved_config(r, fleet[0].port, balance="hash",
                                        upstream_extra='hash_key = "header:X-Key"'),
                        name=f"sluice-{i}.toml")
                 for i, r in enumerate((forward, backward))]
    for s in instances:
        wait_servers(s, [o.address for o in fleet])
    mappings = []
    for s in instances:
        mapping = []
        with Conn(s.port, timeout=10) as c:
            for key in range(10_000):
                r = c.request(f"GET / HTTP/1.1\r\nHost: t\r\nX-Key: k{key}\r\n\r\n".encode())
                assert r.status == 200
                mapping.append(r.header("X-Origin"))
        mappings.append(mapping)
    assert mappings[0] == mappings[1]
    assert set(mappings[0]) == {o.name for o in fleet}  # every server owns keys


def test_check_resolve_prints_the_servers_and_fails_on_a_name_that_gives_none(dns, tmp_path):
    responder = dns()
    responder.set("app.test", a=["127.0.0.3", "127.0.0.2"], ttl=30)
    path = tmp_path / "sluice.toml"
    path.write_text(resolved_config(responder, 8080).replace("[admin]\n", "[x]\n").replace(
        '[x]\nlisten = "127.0.0.1:0"\n', ""))
    r = subprocess.run([str(SLUICE), "check", str(path), "--resolve"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[1:] == [
        "upstream app: server app.test@127.0.0.2:8080 weight 1 (dns app.test, ttl 30s)",
        "upstream app: server app.test@127.0.0.3:8080 weight 1 (dns app.test, ttl 30s)"]
    path.write_text(path.read_text().replace("app.test:8080", "gone.test:8080"))
    r = subprocess.run([str(SLUICE), "check", str(path), "--resolve"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1
    assert r.stdout.splitlines()[-1].startswith("upstream app: dns gone.test: ")
    assert r.stdout.splitlines()[-1].endswith("; no servers")


def test_check_diff_says_a_server_becomes_resolved(dns, tmp_path):
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    base = '[upstreams.app]\n[[upstreams.app.servers]]\naddress = "localhost:8080"\n'
    old.write_text(base)
    new.write_text(base + "resolve = true\n")
    r = subprocess.run([str(SLUICE), "check", str(new), "--diff", str(old)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("upstream app: ~ server localhost:8080 resolved through DNS (every A/AAAA record a "
            "server)") in r.stdout.splitlines()


def test_reload_keeps_a_names_servers_and_their_state(dns, ip_origins, sluice):
    """A reload that keeps a name keeps its servers (same identity: same server, with its
    drain) without asking DNS again; the file's new settings apply to them."""
    responder = dns()
    a1, a2 = ip_origins(2)
    responder.set("app.test", a=[a1.ip, a2.ip], ttl=300)
    s = sluice(resolved_config(responder, a1.port))
    wait_servers(s, [a1.address, a2.address])
    asked = responder.count("app.test")
    ident = f"app.test@{a1.address}"
    assert s.admin("POST", f"/api/upstreams/app/servers/{ident}/drain").status == 200
    s.config_path.write_text(s.config_path.read_text() + "max_conns = 5\n")
    r = s.admin("POST", "/api/reload")
    assert r.status == 200, r
    st = servers(s)
    assert st[a1.address]["draining"] and not st[a2.address]["draining"]
    assert st[a1.address]["max_conns"] == 5 and st[a2.address]["max_conns"] == 5
    assert responder.count("app.test") == asked
    assert spread(s.port, 10) == {"app-2": 10}


def test_graceful_stop_while_the_resolver_is_silent(dns, ip_origins, sluice):
    """A query in flight does not hold the process up at SIGTERM."""
    responder = dns()
    (a1,) = ip_origins(1)
    responder.set("app.test", a=[a1.ip], ttl=TTL)
    s = sluice(resolved_config(responder, a1.port).replace('timeout = "200ms"', 'timeout = "5s"'))
    wait_servers(s, [a1.address])
    responder.mode = "drop"
    wait_until(lambda: responder.count("app.test") >= 2, timeout=TTL + 3, what="a query out")
    started = time.monotonic()
    assert s.stop(timeout=10) == 0
    assert time.monotonic() - started < 3


def test_reload_to_another_name_swaps_its_servers(dns, ip_origins, sluice):
    """A reload that replaces a name: the new one is resolved at once, its servers join when it
    answers, and the old name's servers leave; no request fails on the way."""
    responder = dns()
    a1, a2 = ip_origins(2)
    responder.set("old.test", a=[a1.ip], ttl=300)
    responder.set("new.test", a=[a2.ip], ttl=300)
    s = sluice(resolved_config(responder, a1.port, name="old.test"))
    wait_servers(s, [a1.address])
    with Load(s.port, rate=100, max_seconds=20) as load:
        load.wait_for_more(30)
        s.config_path.write_text(s.config_path.read_text().replace("old.test", "new.test"))
        assert s.admin("POST", "/api/reload").status == 200
        wait_servers(s, [a2.address], timeout=3)
        since = load.now()
        load.wait_for_more(60)
        assert load.origins(since=since) == {"app-2": len([r for r in load.records if r.sent >= since])}
    assert [srv["identity"] for srv in servers(s).values()] == [f"new.test@{a2.address}"]
    assert load.failures() == []
