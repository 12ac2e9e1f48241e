"""The front door (issue #18 part B): PROXY protocol v1/v2 from a balancer in front, trusted
proxies and X-Forwarded-For (nginx's real_ip_recursive), and a route's allow/deny lists and rate
limit. Real sluice, real origins, raw sockets; see docs/edge.md."""
import socket
import struct
import textwrap

from conftest import Conn, metric, sluice_config, toml_table, wait_until

ADMIN = toml_table("admin", listen="127.0.0.1:0")


def seen_headers(resp):
    """The request headers the origin received, lower-cased name -> list of values."""
    out = {}
    for k, v in resp.json()["headers"]:
        out.setdefault(k.lower(), []).append(v)
    return out


def proxy_v2(src, dst="127.0.0.1", sport=40000, dport=80, tlvs=b""):
    """A v2 PROXY header (PROXY command, TCP over IPv4), with optional TLV bytes."""
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport) + tlvs
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


def get(s, target="/?echo=1", extra=""):
    return f"GET {target} HTTP/1.1\r\nHost: {s.address}\r\n{extra}\r\n".encode()


def proxied(origins, sluice, trusted='["127.0.0.1/32"]'):
    s = sluice(sluice_config(origins(1), access="json", top=ADMIN,
                             server_extra=f"proxy_protocol = true\ntrusted_proxies = {trusted}"))
    return s


def refused(s, data):
    """Sends `data` on a new connection: sluice closes it without a byte of answer."""
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
        c.sendall(data)
        c.settimeout(5)
        assert c.recv(4096) == b""


def test_proxy_v1_from_a_trusted_balancer_sets_the_client_address(origins, sluice):
    s = proxied(origins, sluice)
    with Conn(s.port) as c:
        # The header and the request in one packet: the bytes after the header are the request's.
        c.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n" + get(s))
        r = c.read_response()
        assert r.status == 200, r
        assert seen_headers(r)["x-forwarded-for"] == ["203.0.113.9"]
        # Keep-alive: the next request on the connection is the same client.
        r = c.request(get(s, extra="X-Forwarded-For: 198.51.100.1\r\n"))
        assert seen_headers(r)["x-forwarded-for"] == ["198.51.100.1, 203.0.113.9"]
    records = s.access_records(2)
    assert [rec["client"] for rec in records] == ["203.0.113.9", "203.0.113.9"]


def test_proxy_v2_fragmented_with_tlvs_sets_the_client_address(origins, sluice):
    s = proxied(origins, sluice)
    header = proxy_v2("192.0.2.44", tlvs=b"\x04\x00\x02ab")
    with Conn(s.port) as c:
        # In three pieces: the signature, the rest of the header with the request's first bytes.
        c.send(header[:7])
        c.send(header[7:20])
        c.send(header[20:] + get(s)[:5])
        c.send(get(s)[5:])
        r = c.read_response()
    assert r.status == 200, r
    assert seen_headers(r)["x-forwarded-for"] == ["192.0.2.44"]
    assert s.access_records(1)[0]["client"] == "192.0.2.44"


def test_proxy_v2_local_keeps_the_connection_address(origins, sluice):
    s = proxied(origins, sluice)
    local = b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"  # a balancer's own health check
    with Conn(s.port) as c:
        r = c.request(local + get(s))
    assert r.status == 200
    assert seen_headers(r)["x-forwarded-for"] == ["127.0.0.1"]


def test_untrusted_peer_and_malformed_headers_are_closed_and_counted(origins, sluice):
    s = proxied(origins, sluice, trusted='["10.0.0.0/8"]')
    refused(s, b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n" + get(s))
    wait_until(lambda: metric(s, "sluice_proxy_protocol_rejected_total", reason="untrusted") == 1,
               what="untrusted counted")

    t = proxied(origins, sluice)
    for bad in (get(t),                                           # no header at all
                b"PROXY TCP4 203.0.113.9 127.0.0.1 51000\r\n",    # a port missing
                b"PROXY TCP4 " + b"9" * 120 + b"\r\n",           # longer than 107 bytes
                proxy_v2("192.0.2.1")[:12] + b"\x31\x11\x00\x0c"):  # v2 with version 3
        refused(t, bad + get(t))
    wait_until(lambda: metric(t, "sluice_proxy_protocol_rejected_total", reason="malformed") == 4,
               what="malformed counted")
    # A valid header still works afterwards.
    with Conn(t.port) as c:
        assert c.request(b"PROXY UNKNOWN\r\n" + get(t)).status == 200


def test_a_listener_without_proxy_protocol_never_reads_a_header(origins, sluice, tmp_path):
    """Only a proxy_protocol listener reads a PROXY header. Beside one (here the TLS listener),
    plain requests on the other listener are served and nothing is counted as refused. (Built by
    GCC 12, `proxy_protocol_ && !co_await read_proxy_header()` ran the read on every connection:
    each was counted as an untrusted peer, and the answers were still right.)"""
    from test_tls import Pki, tls_block
    cert = Pki(tmp_path / "pki").leaf("a", "IP:127.0.0.1")
    s = sluice(sluice_config(origins(1), top=ADMIN, server_extra=(
        'trusted_proxies = ["10.0.0.0/8"]' + tls_block([cert], extra="proxy_protocol = true"))))
    for _ in range(5):
        with Conn(s.port) as c:
            assert c.request(get(s)).status == 200
    assert metric(s, "sluice_proxy_protocol_rejected_total", reason="untrusted") == 0


def test_trusted_x_forwarded_for_chain_is_resolved_like_real_ip_recursive(origins, sluice):
    s = sluice(sluice_config(origins(1), access="json",
                             server_extra='trusted_proxies = ["127.0.0.1/32", "10.0.0.0/8"]'))
    with Conn(s.port) as c:
        r = c.request(get(s, extra="X-Forwarded-For: 6.6.6.6, 203.0.113.5\r\n"
                                   "X-Forwarded-For: 10.1.1.1\r\n"))
        # The chain goes on unchanged, with our peer appended; the client is the last untrusted.
        assert seen_headers(r)["x-forwarded-for"] == ["6.6.6.6, 203.0.113.5, 10.1.1.1, 127.0.0.1"]
        c.request(get(s, extra="X-Forwarded-For: 10.2.2.2, 10.1.1.1\r\n"))  # all trusted: first
        c.request(get(s))                                                  # none: the peer
    assert [r["client"] for r in s.access_records(3)] == ["203.0.113.5", "10.2.2.2", "127.0.0.1"]


def test_untrusted_peer_x_forwarded_for_is_not_believed(origins, sluice):
    s = sluice(sluice_config(origins(1), access="json",
                             server_extra='trusted_proxies = ["10.0.0.0/8"]'))
    with Conn(s.port) as c:
        c.request(get(s, extra="X-Forwarded-For: 203.0.113.5\r\n"))
    assert s.access_records(1)[0]["client"] == "127.0.0.1"


def routes(origin_list, extra_routes, server_extra=""):
    cfg = sluice_config(origin_list, top=ADMIN, server_extra=server_extra)
    return cfg + textwrap.dedent(extra_routes)


def test_deny_answers_403_and_allow_lets_only_its_ranges_in(origins, sluice):
    s = sluice(routes(origins(1), """
        [[route]]
        path_prefix = "/"
        upstream = "app"

        [[route]]
        path_prefix = "/blocked/"
        upstream = "app"
        deny = ["127.0.0.0/8"]

        [[route]]
        path_prefix = "/internal/"
        upstream = "app"
        allow = ["10.0.0.0/8", "::1"]

        [[route]]
        path_prefix = "/office/"
        upstream = "app"
        allow = ["127.0.0.1"]
        """))
    with Conn(s.port) as c:
        assert c.request(get(s, "/open")).status == 200
    for target in ("/blocked/x", "/internal/x"):
        with Conn(s.port) as c:
            r = c.request(get(s, target))
            assert r.status == 403, r
            assert r.header("Sluice-Error") == "forbidden by route allow/deny"
    with Conn(s.port) as c:
        assert c.request(get(s, "/office/x")).status == 200
    assert metric(s, "sluice_admission_denied_total", route="*/blocked/") == 1
    assert metric(s, "sluice_admission_denied_total", route="*/internal/") == 1
    assert metric(s, "sluice_admission_denied_total", route="*/office/") == 0


def test_allow_list_sees_the_resolved_client_of_a_trusted_chain(origins, sluice):
    s = sluice(routes(origins(1), """
        [[route]]
        path_prefix = "/"
        upstream = "app"
        allow = ["192.0.2.0/24"]
        """, server_extra='trusted_proxies = ["127.0.0.1/32"]'))
    with Conn(s.port) as c:
        assert c.request(get(s, extra="X-Forwarded-For: 192.0.2.7\r\n")).status == 200
    with Conn(s.port) as c:
        assert c.request(get(s, extra="X-Forwarded-For: 198.51.100.7\r\n")).status == 403


def test_rate_limit_answers_429_with_retry_after_and_spares_other_keys(origins, sluice):
    # 1 per minute refills nothing within the test: exactly `burst` requests pass.
    s = sluice(routes(origins(1), """
        [[route]]
        path_prefix = "/"
        upstream = "app"
        rate_limit = { rate = "1/m", burst = 5, key = "header:X-Api-Key" }
        """))
    statuses = []
    for _ in range(12):  # one key, a bounded burst above burst + rate
        with Conn(s.port) as c:
            r = c.request(get(s, "/", "X-Api-Key: alice\r\n"))
            statuses.append(r.status)
            if r.status == 429:
                assert int(r.header("Retry-After")) >= 1, r
                assert r.header("Sluice-Error") == "rate limited"
    assert statuses == [200] * 5 + [429] * 7
    with Conn(s.port) as c:  # another key on the same address is unaffected
        assert c.request(get(s, "/", "X-Api-Key: bob\r\n")).status == 200
    assert metric(s, "sluice_rate_limited_total", route="*/") == 7


def test_rate_limit_holds_across_workers(origins, sluice):
    """A client's connections land on any worker: the bucket is shared, not one per worker."""
    s = sluice(routes(origins(1), """
        [[route]]
        path_prefix = "/"
        upstream = "app"
        rate_limit = { rate = "1/m", burst = 4 }
        """).replace("workers = 1", "workers = 2"))
    passed = 0
    for _ in range(16):
        with Conn(s.port) as c:
            passed += c.request(get(s, "/")).status == 200
    assert passed == 4


def test_forwarded_header_add(origins, sluice):
    s = sluice(sluice_config(origins(1), server_extra='forwarded_header = "add"'))
    with Conn(s.port) as c:
        r = c.request(get(s, extra="Forwarded: for=192.0.2.1\r\n"))
    assert seen_headers(r)["forwarded"] == [
        f'for=192.0.2.1, for=127.0.0.1;host="{s.address}";proto=http']


def test_proxy_header_comes_before_the_tls_handshake(origins, sluice, tmp_path):
    import ssl
    from test_tls import Pki, tls_block, tls_port
    pki = Pki(tmp_path / "pki")
    cert = pki.leaf("a.test", "DNS:a.test")
    s = sluice(sluice_config(origins(1), access="json", server_extra=(
        'trusted_proxies = ["127.0.0.1/32"]\n'
        + tls_block([cert], extra="proxy_protocol = true"))))
    port = tls_port(s)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    raw.sendall(proxy_v2("198.51.100.23"))  # in clear, then the TLS handshake on the same socket
    with ctx.wrap_socket(raw, server_hostname="a.test") as c:
        c.sendall(b"GET /?echo=1 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert b'"X-Forwarded-For","198.51.100.23"' in data.replace(b" ", b""), data
    assert s.access_records(1)[0]["client"] == "198.51.100.23"
    # The plain listener has no proxy_protocol: a plain request works as ever.
    with Conn(s.port) as c2:
        assert c2.request(get(s)).status == 200


def test_incomplete_proxy_header_is_closed_at_header_timeout_and_counted(origins, sluice):
    s = sluice(sluice_config(origins(1), top=ADMIN, server_extra=(
        'proxy_protocol = true\ntrusted_proxies = ["127.0.0.1/32"]\nheader_timeout = "300ms"')))
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
        c.sendall(b"PROXY TCP4 203.0.113.9")
        assert c.recv(4096) == b""  # closed by sluice, within the socket's 5 s timeout
    wait_until(lambda: metric(s, "sluice_proxy_protocol_rejected_total", reason="timeout") == 1,
               what="timeout counted")


def test_reload_keeps_the_buckets_of_an_unchanged_rate_limit(origins, sluice):
    route = """
        [[route]]
        path_prefix = "/"
        upstream = "app"
        rate_limit = {{ rate = "1/m", burst = {burst} }}
        """
    os_ = origins(1)
    s = sluice(routes(os_, route.format(burst=2)))

    def status():
        with Conn(s.port) as c:
            return c.request(get(s, "/")).status

    assert [status() for _ in range(3)] == [200, 200, 429]
    # Same route, same limit, another key elsewhere: the bucket carries over, still empty.
    s.config_path.write_text(routes(os_, route.format(burst=2), server_extra='idle_timeout = "61s"'))
    r = s.admin("POST", "/api/reload")
    assert (r.status, r.json()) == (200, {"ok": True, "version": 2, "watch_ms": 30000}), r
    assert status() == 429
    # A changed limit starts with full buckets; the counter goes on.
    s.config_path.write_text(routes(os_, route.format(burst=3)))
    assert s.admin("POST", "/api/reload").status == 200
    assert [status() for _ in range(4)] == [200, 200, 200, 429]
    assert metric(s, "sluice_rate_limited_total", route="*/") == 3


def test_hashing_on_client_ip_uses_the_client_behind_a_trusted_proxy(origins, sluice):
    """Every request comes from 127.0.0.1 (the trusted proxy): without trusted_proxies they would
    all hash to one server; with it, each real client sticks to its own."""
    s = sluice(sluice_config(origins(3), balance="hash",
                             server_extra='trusted_proxies = ["127.0.0.1/32"]'))

    def origin_for(client):
        with Conn(s.port) as c:
            return c.request(get(s, "/", f"X-Forwarded-For: {client}\r\n")).header("X-Origin")

    homes = {f"198.51.100.{i}": origin_for(f"198.51.100.{i}") for i in range(1, 31)}
    assert len(set(homes.values())) > 1, homes
    for client, home in homes.items():
        assert origin_for(client) == home
