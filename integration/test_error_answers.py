"""What a client sees of sluice's answers (docs/configuration.md `error_detail`, `error_pages`;
docs/http.md): a Date on every answer (RFC 9110 §6.6.1), the origin's own Date kept; with the
default `error_detail = "status"` no internals, while the access log keeps them; the operator's
error pages."""
import email.utils
import time

from conftest import Conn, closed_port, sluice_config

STATUS_ONLY = 'error_detail = "status"'


def get(target="/"):
    return f"GET {target} HTTP/1.1\r\nHost: a\r\n\r\n".encode()


def assert_now(date):
    """`date` is an IMF-fixdate within a second or two of the test's clock."""
    assert date is not None and date.endswith(" GMT") and len(date) == 29, date
    at = email.utils.parsedate_to_datetime(date).timestamp()
    assert abs(at - time.time()) < 3, date


def test_an_answer_without_date_gets_one_and_an_origins_date_is_kept(scripted, sluice):
    """The origin's answer without Date reaches the client with sluice's; one with Date keeps
    it, byte for byte, and only one Date field."""
    bare = scripted("bare")
    dated = scripted("dated", headers="Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n")
    for origin in (bare, dated):
        s = sluice(sluice_config([origin]))
        with Conn(s.port) as c:
            r = c.request(get())
        assert r.status == 200 and r.header("X-Origin") == origin.name, r
        assert len(r.header_all("Date")) == 1, r.headers
        if origin is dated:
            assert r.header("Date") == "Sun, 06 Nov 1994 08:49:37 GMT"
        else:
            assert_now(r.header("Date"))


def test_sluices_own_answers_carry_date(sluice):
    """An error sluice makes (502, 404 without a route) and a `return` answer have a Date."""
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"]) + """
[[route]]
path_prefix = "/api/"
upstream = "app"
[[route]]
path_prefix = "/moved"
return = { status = 301, location = "https://example.com/" }
""")
    for target, status in (("/api/x", 502), ("/moved", 301), ("/none", 404)):
        with Conn(s.port) as c:
            r = c.request(get(target))
        assert r.status == status, r
        assert_now(r.header("Date"))


def test_status_only_answers_show_no_internals_and_the_log_keeps_them(scripted, sluice):
    """error_detail = "status" (the default): a 502 after a refused connection and retries
    says only its status line; the access log still names the error and the attempts. A
    forwarded answer after a retry carries no Sluice-Attempts either."""
    refused = f"127.0.0.1:{closed_port()}"
    s = sluice(sluice_config([refused], server_extra=STATUS_ONLY, access="json"))
    with Conn(s.port) as c:
        r = c.request(get())
    assert r.status == 502, r
    assert [k for k, _ in r.headers if k.lower().startswith("sluice-")] == [], r.headers
    assert r.body == b"502 Bad Gateway\n", r.body
    assert b"app" not in r.body and b"refused" not in r.body
    record = s.access_records(1)[0]
    assert (record["status"], record["error"]) == (502, "connect refused"), record
    assert record["upstream"] == "app"

    good = scripted("good")
    t = sluice(sluice_config([refused, good], server_extra=STATUS_ONLY, access="json"))
    answers = []
    with Conn(t.port) as c:
        for _ in range(2):  # one of the two starts at the refusing server and is retried
            answers.append(c.request(get()))
    assert [a.status for a in answers] == [200, 200], answers
    assert all(a.header("Sluice-Attempts") is None for a in answers), [a.headers for a in answers]
    assert sorted(r["attempts"] for r in t.access_records(2)) == [1, 2]  # the log keeps the count


def test_full_detail_names_the_reason(sluice):
    """error_detail = "full": Sluice-Error and the reason in the body, as before."""
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"], server_extra='error_detail = "full"'))
    with Conn(s.port) as c:
        r = c.request(get())
    why = "connect refused; not retried: no other server to try"
    assert (r.status, r.header("Sluice-Error")) == (502, why), r
    assert r.body == f"502 Bad Gateway: {why}\n".encode(), r.body


def test_error_pages_are_served_by_status_then_class(sluice, tmp_path):
    """error_pages: the page of the exact status, else of its class, with its Content-Type; a
    route's own page first."""
    page_502 = tmp_path / "502.html"
    page_502.write_text("<h1>We will be right back</h1>\n")
    page_4xx = tmp_path / "4xx.txt"
    page_4xx.write_text("not here\n")
    route_page = tmp_path / "api-5xx.json"
    route_page.write_text('{"error":"unavailable"}')
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"],
                             server_extra=f'{STATUS_ONLY}\nerror_pages = {{ 502 = "{page_502}", "4xx" = "{page_4xx}" }}')
               + f"""
[[route]]
path_prefix = "/"
upstream = "app"
[[route]]
host = "api.test"
path_prefix = "/"
upstream = "app"
error_pages = {{ "5xx" = "{route_page}" }}
""")
    with Conn(s.port) as c:
        r = c.request(get())
    assert (r.status, r.header("Content-Type")) == (502, "text/html; charset=utf-8"), r
    assert r.body == b"<h1>We will be right back</h1>\n"
    assert r.header("Sluice-Error") is None and r.header("X-Request-Id")
    with Conn(s.port) as c:
        r = c.request(b"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
    assert (r.status, r.header("Content-Type"), r.body) == (502, "application/json", b'{"error":"unavailable"}'), r
    with Conn(s.port) as c:  # a bad request head: 400, the 4xx page
        r = c.request(b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n")
    assert (r.status, r.header("Content-Type"), r.body) == (400, "text/plain; charset=utf-8", b"not here\n"), r


def test_the_log_counts_the_body_of_an_error_page(sluice, tmp_path):
    """bytes_out of sluice's own answer is the body the client took, counted after the write:
    all of a 1 MiB error page for a client that read it. (A client that leaves mid-page is
    counted with what was written before it left: the unit test of body_bytes_sent(); on
    loopback the kernel takes the whole page at once, so no write here ends part way.)"""
    page = tmp_path / "502.html"
    page.write_bytes(b"x" * (1 << 20))
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}"], access="json",
                             server_extra=f'{STATUS_ONLY}\nerror_pages = {{ 502 = "{page}" }}'))
    with Conn(s.port) as c:
        r = c.request(get("/whole"))
    assert (r.status, len(r.body)) == (502, 1 << 20), r
    record = s.access_records(1)[0]
    assert (record["target"], record["bytes_out"]) == ("/whole", 1 << 20), record
