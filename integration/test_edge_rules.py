"""The front-door rules an operator expects (docs/edge.md): headers set, added and removed on
both sides by the upstream's and the route's rules, with variables; a path prefix stripped or
rewritten before the origin sees it; fixed answers and redirects given without any upstream.

Real sluice, origins that keep every byte they received (RawOrigin), raw sockets and curl on
loopback ephemeral ports; every wait is for a condition with a deadline."""
import textwrap

from conftest import Conn, RawOrigin, curl, sluice_cli, wait_until


def config(origin_address, upstream_keys="", routes=""):
    """One upstream `app` over one server named app-1; `upstream_keys` go into its table, `routes`
    before it. The admin API is on (reloads)."""
    head = textwrap.dedent("""\
        [server]
        listen = ["127.0.0.1:0"]
        workers = 1
        [log]
        level = "info"
        access = "off"
        [admin]
        listen = "127.0.0.1:0"
        """)
    return (head + routes + f"\n[upstreams.app]\n{upstream_keys}\n[[upstreams.app.servers]]\n"
            f'address = "{origin_address}"\nname = "app-1"\n')


def origin_answering(extra_headers):
    """A RawOrigin whose answers carry `extra_headers` (CRLF-terminated lines)."""
    return RawOrigin(lambda req: RawOrigin.answer(req, headers=extra_headers))


def headers_of(req, name):
    return [v for k, v in req["headers"] if k == name]


def get(port, target="/", host="shop.example:8080", extra=""):
    with Conn(port) as c:
        return c.request(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())


def test_every_header_rule_kind_on_both_sides_with_every_variable(sluice):
    origin = origin_answering("Server: origin/1.0\r\nX-Powered-By: php\r\nVia: 1.1 origin\r\n")
    try:
        upstream_rules = textwrap.dedent("""\
            request_headers = { set = { "X-Env" = "prod", "X-Layer" = "upstream" }, add = { "Via" = "1.1 sluice" }, remove = ["X-Debug"] }
            response_headers = { set = { "X-Served-By" = "$server" }, remove = ["Server"] }
            """)
        route = textwrap.dedent("""\
            [[route]]
            path_prefix = "/"
            upstream = "app"
            request_headers = { set = { "X-Layer" = "route", "X-Vars" = "id=$request_id host=$host ip=$client_ip up=$upstream srv=$server v=$config_version uri=$request_uri" } }
            response_headers = { add = { "Via" = "1.1 sluice" }, remove = ["X-Powered-By"], set = { "Strict-Transport-Security" = "max-age=31536000", "X-Echo" = "${host}$$" } }
            """)
        s = sluice(config(origin.address, upstream_rules, route))
        r = get(s.port, "/p?q=1", extra="X-Debug: secret\r\nX-Env: dev\r\nX-Request-Id: rid-42\r\n")
        assert r.status == 200, r
        req, = origin.requests
        # Request side: the upstream's rules, then the route's (which overrides X-Layer).
        assert headers_of(req, "x-debug") == []
        assert headers_of(req, "x-env") == ["prod"]
        assert headers_of(req, "via") == ["1.1 sluice"]
        assert headers_of(req, "x-layer") == ["route"]
        assert headers_of(req, "x-vars") == [
            "id=rid-42 host=shop.example ip=127.0.0.1 up=app srv=app-1 v=1 uri=/p?q=1"]
        assert headers_of(req, "host") == ["shop.example:8080"]  # never touched
        # Response side.
        assert r.header("Server") is None
        assert r.header("X-Powered-By") is None
        assert r.header_all("Via") == ["1.1 origin", "1.1 sluice"]
        assert r.header("X-Served-By") == "app-1"
        assert r.header("Strict-Transport-Security") == "max-age=31536000"
        assert r.header("X-Echo") == "shop.example$"
        assert r.header("X-Request-Id") == "rid-42"
        assert r.body == b"seen /p?q=1\n"
    finally:
        origin.stop()


def test_rules_without_routes_are_the_upstreams_and_curl_sees_them(sluice):
    origin = origin_answering("Server: origin/1.0\r\n")
    try:
        s = sluice(config(origin.address, 'response_headers = { set = { "X-Cv" = "$config_version" }, remove = ["Server"] }'))
        status, headers, body = curl(s.url("/x"))
        assert (status, headers.get("x-cv"), "server" in headers) == (200, "1", False), headers
    finally:
        origin.stop()


def test_a_reload_that_changes_a_rule_applies_to_the_next_request(sluice):
    origin = RawOrigin()
    try:
        rules = 'request_headers = {{ set = {{ "X-Rule" = "{}" }} }}'
        s = sluice(config(origin.address, rules.format("one")))
        with Conn(s.port) as c:  # one keep-alive connection across the reload
            assert c.request(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
            s.config_path.write_text(config(origin.address, rules.format("two-$config_version")))
            r = s.admin("POST", "/api/reload")
            assert (r.status, r.json()) == (200, {"ok": True, "version": 2, "watch_ms": 30000}), r
            assert c.request(b"GET /b HTTP/1.1\r\nHost: t\r\n\r\n").status == 200
        assert [headers_of(q, "x-rule") for q in origin.requests] == [["one"], ["two-2"]]
    finally:
        origin.stop()


def test_check_refuses_framing_and_hop_by_hop_names_and_bad_values(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(config("127.0.0.1:9", textwrap.dedent("""\
        request_headers = { set = { "Transfer-Encoding" = "chunked" } }
        response_headers = { remove = ["Connection"], add = { "X-Ok" = "$nope" } }
        """)))
    p = sluice_cli("check", "--config", path)
    assert p.returncode == 1
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert lines[0].startswith(f"{path}:11:29: upstreams.app.request_headers.set.Transfer-Encoding: "
                               "header 'Transfer-Encoding' cannot be changed by a rule"), lines
    assert lines[1].startswith(f"{path}:12:32: upstreams.app.response_headers.remove[0]: header "
                               "'Connection' cannot be changed by a rule"), lines
    assert lines[2].startswith(f"{path}:12:64: upstreams.app.response_headers.add.X-Ok: "
                               "unknown variable '$nope'"), lines


def test_strip_prefix_and_rewrite_prefix_are_what_the_origin_sees(sluice):
    origin = RawOrigin()
    try:
        routes = textwrap.dedent("""\
            [[route]]
            path_prefix = "/api/"
            upstream = "app"
            strip_prefix = true
            [[route]]
            path_prefix = "/old"
            upstream = "app"
            rewrite_prefix = "/v2/"
            [[route]]
            path_prefix = "/"
            upstream = "app"
            """)
        s = sluice(config(origin.address, routes=routes))
        for target in ("/api/users?id=7&x=/api/", "/api/", "/old/items?q", "/old", "/other/x?y"):
            assert get(s.port, target).status == 200
        assert origin.targets() == ["/users?id=7&x=/api/", "/", "/v2/items?q", "/v2/", "/other/x?y"]
        assert origin.errors == []
    finally:
        origin.stop()


def test_return_redirect_uses_host_and_request_uri(sluice):
    routes = textwrap.dedent("""\
        [[route]]
        path_prefix = "/"
        return = { status = 301, location = "https://$host$request_uri" }
        response_headers = { set = { "X-Redirected-By" = "sluice" } }
        """)
    s = sluice(config("127.0.0.1:9", routes=routes).split("[upstreams.app]")[0])  # no upstream
    status, headers, body = curl("-H", "Host: shop.example:8080", s.url("/cart?item=3&q=a%20b"))
    assert status == 301
    assert headers["location"] == "https://shop.example/cart?item=3&q=a%20b"
    assert headers["x-redirected-by"] == "sluice"
    assert headers["content-length"] == "0" and body == b""
    # The connection stays open for the next request.
    with Conn(s.port) as c:
        for target in ("/a", "/b?c"):
            r = c.request(f"GET {target} HTTP/1.1\r\nHost: h.example\r\n\r\n".encode())
            assert (r.status, r.header("Location")) == (301, f"https://h.example{target}")


def test_return_503_is_answered_without_contacting_the_upstream(sluice):
    origin = RawOrigin()
    try:
        routes = textwrap.dedent("""\
            [[route]]
            path_prefix = "/maintenance"
            return = { status = 503, body = "maintenance\\n" }
            [[route]]
            path_prefix = "/"
            upstream = "app"
            """)
        s = sluice(config(origin.address, routes=routes))
        r = get(s.port, "/maintenance/page")
        assert (r.status, r.body, r.header("Content-Type")) == (503, b"maintenance\n",
                                                               "text/plain; charset=utf-8"), r
        assert r.header("Sluice-Error") is None  # the operator's answer, not a failure
        with Conn(s.port) as c:  # HEAD: the same head, no body
            r = c.request(b"HEAD /maintenance HTTP/1.1\r\nHost: t\r\n\r\n", head=True)
            assert (r.status, r.header("Content-Length"), r.body) == (503, "12", b"")
        assert origin.connections == 0
        # The other route still reaches the origin: it was there all along.
        assert get(s.port, "/x").status == 200
        wait_until(lambda: origin.connections == 1, what="origin connection for /x")
    finally:
        origin.stop()


def test_return_with_an_unread_body_closes_the_connection(sluice):
    routes = '[[route]]\npath_prefix = "/"\nreturn = { status = 403, body = "no" }\n'
    s = sluice(config("127.0.0.1:9", routes=routes).split("[upstreams.app]")[0])  # no upstream
    with Conn(s.port) as c:
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
        r = c.read_response()
        assert (r.status, r.body, r.header("Connection")) == (403, b"no", "close"), r
        assert c.wait_closed(timeout=5), "the connection stayed open after a return answer to an unread body"
