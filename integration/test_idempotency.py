"""Idempotency-Key requests collapsed and replayed (docs/idempotency.md): in one process with the
memory store, and across two sluice processes through a real Redis (Debian's redis-server,
started here on a loopback port with no persistence, stopped by PID). The origin's execution log
(`sluice-origin --exec-log`) counts how many times each keyed request really ran."""
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import (SANITIZED, assert_expired_on_time, Conn, Origin, closed_port, curl_with_code, metric,
                      sluice_config, timed_request, wait_for_line, wait_until)

REDIS = "/usr/bin/redis-server"


class RedisServer:
    """redis-server on 127.0.0.1:`port` (a free one when 0), no persistence."""

    def __init__(self, port=0):
        if port == 0:
            port = closed_port()
        self.port = port
        self.proc = subprocess.Popen(
            [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--protected-mode", "no"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_for_line(self.proc, self.proc.stdout, r"Ready to accept connections")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)


@pytest.fixture
def redis():
    started = []

    def start(port=0):
        r = RedisServer(port)
        started.append(r)
        return r

    yield start
    for r in started:
        if r.proc.poll() is None:
            r.proc.send_signal(signal.SIGCONT)
        r.stop()


@pytest.fixture
def logged_origin(tmp_path):
    """One sluice-origin with an execution log; `executions(key)` counts a key's runs."""
    started = []

    def start(name="app-1"):
        log = tmp_path / f"{name}.exec"
        o = Origin(name, ["--exec-log", str(log)])
        o.exec_log = log

        def executions(key=None):
            if not log.exists():
                return 0
            lines = log.read_text().splitlines()
            return sum(1 for line in lines if key is None or line.split(" ")[3] == key)
        o.executions = executions
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def config(origins, admin=True, access="json", **idem):
    keys = {"mode": "replay", **idem}
    section = "[upstreams.app.idempotency]\n" + "".join(
        f"{k} = {v if isinstance(v, list) else repr(v).replace(chr(39), chr(34))}\n"
        for k, v in keys.items())
    top = '[admin]\nlisten = "127.0.0.1:0"\n' if admin else ""
    return sluice_config(origins, workers=2, access=access, top=top) + "\n" + section


def post(port, key, body=b'{"amount":1}', target="/pay?echo=1", headers=(), timeout=10.0):
    h = [("Idempotency-Key", key), *headers] if key else list(headers)
    return timed_request(port, "POST", target, headers=h, body=body, timeout=timeout)


def concurrently(*calls):
    """Runs the calls at once, each on its own thread; returns their results in order."""
    results = [None] * len(calls)

    def run(i, fn):
        results[i] = fn()
    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return results


def outcome(s, name):
    return metric(s, "sluice_idempotency_total", upstream="app", outcome=name)


def test_two_concurrent_duplicates_execute_once(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o], mode="collapse"))
    # The origin takes 1 s: the second arrives while the first is in flight.
    slow = "/pay?echo=1&delay=1000"
    (a, _), (b, _) = concurrently(lambda: post(s.port, "k-1", target=slow),
                                  lambda: post(s.port, "k-1", target=slow))
    assert a.status == b.status == 200
    assert a.body == b.body, "both get the first execution's answer"
    assert [a.header("Idempotent-Replayed"), b.header("Idempotent-Replayed")].count("true") == 1
    assert o.executions("k-1") == 1
    assert outcome(s, "first") == 1
    assert outcome(s, "collapsed") == 1


def test_replay_a_second_later_then_executed_again_after_the_window(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o], replay_window="2500ms"))
    first, _ = post(s.port, "k-2")
    assert first.status == 200
    started = time.monotonic()
    time.sleep(1.0)  # the story: the client resends a second later
    again, _ = post(s.port, "k-2")
    assert again.status == 200
    assert again.header("Idempotent-Replayed") == "true"
    assert again.body == first.body
    assert again.header("X-Request-Id") != first.header("X-Request-Id"), "each answer its own id"
    assert o.executions("k-2") == 1, "the origin was not contacted"
    records = s.access_records(2)
    assert [r.get("idempotency") for r in records[-2:]] == ["first", "replayed"]
    # After replay_window the key is forgotten: the same request runs again.
    time.sleep(max(0.0, started + 2.6 - time.monotonic()))
    late, _ = post(s.port, "k-2")
    assert late.status == 200 and late.header("Idempotent-Replayed") is None
    assert o.executions("k-2") == 2


def test_same_key_other_body_is_422_and_never_forwarded(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o]))
    assert post(s.port, "k-3", body=b'{"amount":1}')[0].status == 200
    r, _ = post(s.port, "k-3", body=b'{"amount":1000}')
    assert r.status == 422
    assert r.header("Content-Type") == "application/problem+json"
    assert r.json()["status"] == 422
    assert o.executions("k-3") == 1
    assert outcome(s, "mismatch") == 1


def test_two_tenants_with_the_same_key_are_both_executed(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o]))
    alice, _ = post(s.port, "k-4", headers=[("Authorization", "Bearer alice")])
    bob, _ = post(s.port, "k-4", body=b'{"other":2}', headers=[("Authorization", "Bearer bob")])
    assert alice.status == bob.status == 200
    assert bob.header("Idempotent-Replayed") is None
    assert o.executions("k-4") == 2


def test_a_keyed_body_larger_than_the_buffer_is_refused_not_forwarded(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o]))
    r, _ = post(s.port, "k-5", body=b"x" * (65 * 1024))
    assert r.status == 413
    assert r.header("Content-Type") == "application/problem+json"
    assert o.executions() == 0
    # Without a key the same body goes through.
    assert post(s.port, None, body=b"x" * (65 * 1024))[0].status == 200


def test_a_keyed_request_retried_on_another_server_keeps_its_claim(sluice, logged_origin):
    o = logged_origin()
    # The first server refuses connections: a keyed POST that tries it first is retried on the
    # second (round robin: within two keys one does).
    s = sluice(config([f"127.0.0.1:{closed_port()}", o]))
    for i in range(10):
        key = f"k-6-{i}"
        retries = metric(s, "sluice_retries_total", upstream="app", reason="connect_refused")
        assert post(s.port, key)[0].status == 200
        if metric(s, "sluice_retries_total", upstream="app", reason="connect_refused") > retries:
            break
    else:
        pytest.fail("no request tried the refusing server first")
    for _ in range(2):
        r, _ = post(s.port, key)
        assert r.status == 200 and r.header("Idempotent-Replayed") == "true"
    assert o.executions(key) == 1


def test_two_sluice_processes_share_one_redis(sluice, logged_origin, redis):
    o = logged_origin()
    r = redis()
    text = config([o], store=r.url)
    a = sluice(text, name="a.toml")
    b = sluice(text, name="b.toml")
    slow = "/pay?echo=1&delay=1000"
    (ra, _), (rb, _) = concurrently(lambda: post(a.port, "k-7", target=slow),
                                    lambda: post(b.port, "k-7", target=slow))
    assert ra.status == rb.status == 200
    assert ra.body == rb.body
    assert [ra.header("Idempotent-Replayed"), rb.header("Idempotent-Replayed")].count("true") == 1
    assert o.executions("k-7") == 1
    # A replay through the other instance than the one that executed it.
    for s in (a, b):
        again, _ = post(s.port, "k-7", target=slow)
        assert again.status == 200 and again.header("Idempotent-Replayed") == "true"
        assert again.body == ra.body
    assert o.executions("k-7") == 1


def test_redis_killed_forward_serves_every_request_and_protection_resumes(sluice, logged_origin,
                                                                         redis):
    o = logged_origin()
    r = redis()
    s = sluice(config([o], store=r.url))
    assert post(s.port, "before")[0].status == 200
    assert post(s.port, "before")[0].header("Idempotent-Replayed") == "true"
    port = r.port
    r.stop()  # SIGKILL mid-run
    for i in range(20):
        resp, took = post(s.port, f"down-{i}")
        assert resp.status == 200, resp
        assert took < 2.0
    # Per kind, on the default on_store_error = "forward": unkeyed POSTs and GETs are served too.
    assert post(s.port, None)[0].status == 200
    assert timed_request(s.port, "GET", "/")[0].status == 200
    assert outcome(s, "store_error") == 20  # each keyed POST while Redis was gone, once
    assert s.log.wait_for(r"idempotency store .* failed")
    # Redis back on the same address: protection resumes without a sluice restart. Each poll uses
    # a new key (a key sent while the store was still unreachable ran unprotected), until one
    # that was stored is replayed: that key ran once.
    redis(port)
    tries = iter(range(1000))

    def resumed():
        key = f"after-{next(tries)}"
        first = post(s.port, key)[0]
        if first.status != 200 or post(s.port, key)[0].header("Idempotent-Replayed") != "true":
            return None
        return key
    key = wait_until(resumed, timeout=10, what="replays through the restarted Redis")
    assert o.executions(key) == 1


def test_redis_down_or_stalled_with_reject_answers_503_quickly(sluice, logged_origin, redis):
    o = logged_origin()
    r = redis()
    s = sluice(config([o], store=r.url, on_store_error="reject", store_timeout="300ms"))
    assert post(s.port, "ok")[0].status == 200
    # Stalled (SIGSTOP): connections are accepted by the kernel, nothing answers.
    r.proc.send_signal(signal.SIGSTOP)
    resp, took = post(s.port, "stalled")
    assert resp.status == 503 and resp.header("Retry-After") == "1"
    # The client's blocking read, started before sluice's store timer could start.
    assert_expired_on_time(took, 0.3, "store_timeout")
    assert post(s.port, None)[0].status == 200, "a request without a key is not concerned"
    r.proc.send_signal(signal.SIGCONT)
    r.stop()
    resp, took = post(s.port, "killed")
    assert resp.status == 503 and took < 0.3  # refused at once: not left to store_timeout
    assert o.executions("stalled") == 0 and o.executions("killed") == 0


def test_100000_keys_into_a_1mib_memory_store_stay_bounded(sluice, logged_origin):
    o = logged_origin()
    # No access log: its 100,000 lines would fill the stdout pipe the fixture reads only on
    # demand, and a sanitized run's graceful stop would wait on the blocked log writer.
    s = sluice(config([o], access="off", memory_limit="1MiB", max_stored_body="64KiB"))
    rss_before = s.rss_kib()
    # Under a sanitizer 20,000 (still six times what the store holds), within the time bound.
    n, batch, sent = 20_000 if SANITIZED else 100_000, 200, 0
    deadline = time.monotonic() + 240
    with Conn(s.port, timeout=30) as c:
        while sent < n and time.monotonic() < deadline:
            data = b"".join(
                f"POST /k HTTP/1.1\r\nHost: t\r\nIdempotency-Key: bulk-{sent + i}\r\n"
                f"Content-Length: 0\r\n\r\n".encode() for i in range(batch))
            c.send(data)
            for _ in range(batch):
                assert c.read_response().status == 200
            sent += batch
    assert sent == n, f"only {sent} requests within the time bound"
    status = next(u for u in s.status()["upstreams"] if u["name"] == "app")["idempotency"]
    assert status["store"] == "memory"
    assert status["bytes"] <= 1024 * 1024
    assert status["evictions"] == n - status["entries"]
    assert metric(s, "sluice_idempotency_evictions_total", upstream="app") == status["evictions"]
    if not SANITIZED:  # ASan's quarantine keeps freed memory on purpose
        assert s.rss_kib() - rss_before < 32 * 1024, "RSS grew by more than 32 MiB"
    # The oldest were evicted, the newest are still replayed.
    assert post(s.port, f"bulk-{n - 1}", body=b"", target="/k")[0].header("Idempotent-Replayed") == "true"


def test_a_reload_keeps_the_memory_store_and_a_store_change_starts_afresh(sluice, logged_origin):
    o = logged_origin()
    s = sluice(config([o], wait="10s"))
    assert post(s.port, "k-8")[0].status == 200
    # The same section, another unrelated key: the answers survive the reload.
    s.config_path.write_text(config([o], wait="20s"))
    r = s.admin("POST", "/api/reload")
    assert (r.status, r.json()["ok"]) == (200, True), r
    assert post(s.port, "k-8")[0].header("Idempotent-Replayed") == "true"
    # Another memory_limit is another store: empty.
    s.config_path.write_text(config([o], wait="20s", memory_limit="2MiB"))
    r = s.admin("POST", "/api/reload")
    assert (r.status, r.json()["ok"]) == (200, True), r
    assert post(s.port, "k-8")[0].header("Idempotent-Replayed") is None
    assert o.executions("k-8") == 2


def records_of(s, responses):
    """The JSON access log record of each response, found by its X-Request-Id."""
    ids = [r.header("X-Request-Id") for r in responses]
    assert None not in ids and len(set(ids)) == len(ids), ids

    def all_logged():
        by_id = {rec["request_id"]: rec for rec in s.access_records()}
        return by_id if all(i in by_id for i in ids) else None
    by_id = wait_until(all_logged, timeout=5, what="an access log record per answer")
    return [by_id[i] for i in ids]


def test_access_log_counts_the_body_of_collapsed_replayed_and_refused_answers(sluice,
                                                                              logged_origin):
    """bytes_out is the body sent (docs/edge.md), for answers from the store and sluice's
    refusals as for the origin's."""
    o = logged_origin()
    s = sluice(config([o]))
    slow = "/pay?echo=1&delay=1000"
    (a, _), (b, _) = concurrently(lambda: post(s.port, "k-9", target=slow),
                                  lambda: post(s.port, "k-9", target=slow))
    first, collapsed = (b, a) if a.header("Idempotent-Replayed") == "true" else (a, b)
    replayed, _ = post(s.port, "k-9", target=slow)
    refused, _ = post(s.port, "k-9", body=b'{"amount":1000}', target=slow)
    answers = {"first": first, "collapsed": collapsed, "replayed": replayed, "mismatch": refused}
    assert [r.status for r in answers.values()] == [200, 200, 200, 422]
    assert [r.header("Idempotent-Replayed") for r in (collapsed, replayed)] == ["true", "true"]
    assert o.executions("k-9") == 1
    for (kind, r), rec in zip(answers.items(), records_of(s, answers.values())):
        assert rec["idempotency"] == kind
        assert len(r.body) > 0
        assert rec["bytes_out"] == len(r.body), (kind, rec)


def with_attempts(s, key_prefix, attempts):
    """A keyed POST that took `attempts` tries (2: its first met the refusing server and was
    retried; round robin: within two keys one is), and its key."""
    for i in range(10):
        key = f"{key_prefix}-{i}"
        r, _ = post(s.port, key)
        assert r.status == 200
        if records_of(s, [r])[0]["attempts"] == attempts:
            return r, key
    pytest.fail(f"no request took {attempts} attempts")


def test_a_replay_says_how_many_attempts_the_first_execution_took(sluice, logged_origin):
    """With error_detail = "full" a replay carries the Sluice-Attempts its first execution's
    answer carried; the access log's attempts are the replay's own (no server tried)."""
    o = logged_origin()
    s = sluice(config([f"127.0.0.1:{closed_port()}", o]))
    first, key = with_attempts(s, "k-10", 2)
    assert first.header("Sluice-Attempts") == "2"
    replays = [post(s.port, key)[0] for _ in range(2)]
    for r in replays:
        assert r.status == 200 and r.header("Idempotent-Replayed") == "true"
        assert r.header_all("Sluice-Attempts") == ["2"]
    assert [rec["attempts"] for rec in records_of(s, replays)] == [0, 0]
    # An answer that took one attempt carries none, and neither do its replays.
    once, once_key = with_attempts(s, "k-10-once", 1)
    assert once.header("Sluice-Attempts") is None
    assert post(s.port, once_key)[0].header_all("Sluice-Attempts") == []
    assert o.executions(key) == 1


def test_error_detail_status_shows_no_attempts_on_replays(sluice, logged_origin):
    """The default error_detail = "status" shows Sluice-Attempts on no answer, replays included."""
    o = logged_origin()
    s = sluice(config([f"127.0.0.1:{closed_port()}", o]).replace(
        "[server]\n", '[server]\nerror_detail = "status"\n', 1))
    first, key = with_attempts(s, "k-11", 2)
    replay, _ = post(s.port, key)
    assert replay.header("Idempotent-Replayed") == "true"
    assert first.header("Sluice-Attempts") is None and replay.header("Sluice-Attempts") is None
    assert o.executions(key) == 1


# HTTP/2 clients (docs/http2.md): a keyed stream is guarded as an HTTP/1.1 request is.

def h2_config(origins, **idem):
    return config(origins, **idem).replace("[server]\n", "[server]\nh2c = true\n", 1)


def h2_post(port, key, body='{"amount":1}', target="/pay?echo=1"):
    """curl with HTTP/2 prior knowledge: (status, headers, body)."""
    status, headers, out, code = curl_with_code(
        "--http2-prior-knowledge", "-X", "POST", "-H", f"Idempotency-Key: {key}", "--data-binary", body,
        f"http://127.0.0.1:{port}{target}")
    assert code == 0, (code, status, headers, out)
    return status, headers, out


def test_http2_keyed_posts_are_replayed_and_refused_as_http11s_are(sluice, logged_origin, tmp_path):
    o = logged_origin()
    s = sluice(h2_config([o]))
    first = h2_post(s.port, "h-1")
    assert first[0] == 200 and "idempotent-replayed" not in first[1]
    again = h2_post(s.port, "h-1")
    assert again[0] == 200 and again[1].get("idempotent-replayed") == "true"
    assert again[2] == first[2]
    assert again[1]["x-request-id"] != first[1]["x-request-id"]
    mismatch = h2_post(s.port, "h-1", body='{"amount":1000}')
    assert mismatch[0] == 422 and mismatch[1]["content-type"] == "application/problem+json"
    assert o.executions("h-1") == 1, "the origin ran the keyed request once"
    # Two workers write their records each on its own: matched by request id, not by order.
    by_id = {r["request_id"]: r for r in s.access_records(3)}
    assert [(by_id[a[1]["x-request-id"]]["protocol"], by_id[a[1]["x-request-id"]].get("idempotency"))
            for a in (first, again, mismatch)] == [
        ("HTTP/2.0", "first"), ("HTTP/2.0", "replayed"), ("HTTP/2.0", "mismatch")]
    # A keyed body that cannot come whole within the stream's window is refused, never forwarded.
    big = tmp_path / "big"
    big.write_bytes(b"x" * (70 * 1024))
    # nghttp, not curl: sluice answers before the body's end, then resets the stream with NO_ERROR
    # (RFC 9113 §8.1), which curl reports as an error without the answer.
    p = subprocess.run(["nghttp", "-v", "-d", str(big), "-H", "idempotency-key: h-2",
                        f"http://127.0.0.1:{s.port}/pay?echo=1"], capture_output=True, timeout=20)
    assert re.search(rb"recv \(stream_id=\d+\) :status: 413", p.stdout), p.stdout[-2000:]
    assert o.executions() == 1
    assert outcome(s, "too_large") == 1


def test_http2_keyed_body_sent_after_its_head_is_waited_for_then_guarded(sluice, logged_origin):
    """The stream starts with its head; the body comes in later DATA frames: the guard waits for
    all of it (the fingerprint needs it) before the key is claimed and anything is forwarded."""
    from test_http2 import base, ended, events_until, h2_client
    import h2.events
    o = logged_origin()
    s = sluice(h2_config([o]))
    sock, c = h2_client(s.port)
    answers = []
    for stream_id in (1, 3):
        head = base(s.port, "/pay?echo=1")
        head[0] = (":method", "POST")
        c.send_headers(stream_id, head + [("idempotency-key", "h-3")])
        c.ping(b"headsent")  # answered once sluice read the head: the stream has started
        sock.sendall(c.data_to_send())
        events_until(sock, c, lambda ev: any(isinstance(e, h2.events.PingAckReceived) for e in ev))
        for piece, last in ((b'{"amount":', False), (b'7}', True)):
            c.send_data(stream_id, piece, end_stream=last)
            sock.sendall(c.data_to_send())
        events = events_until(sock, c, ended(stream_id), timeout=10)
        [resp] = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
        answers.append(dict(resp.headers))
    sock.close()
    assert [a[b":status"] for a in answers] == [b"200", b"200"]
    assert b"idempotent-replayed" not in answers[0] and answers[1][b"idempotent-replayed"] == b"true"
    assert o.executions("h-3") == 1
