"""Passive health: live requests that fail (as `fail_on` lists) eject their server for a while,
never more than `max_ejected_percent` of the pool; when every server is out, `when_all_down`
decides between a fast 503 and spreading over all of them anyway. Drained servers get nothing.

No active checks are configured anywhere here: every verdict comes from live traffic."""
import statistics

from conftest import closed_port, sluice_config, timed_request, toml_table, wait_until


def send(port, target="/"):
    return timed_request(port, target=target)


def passive(when_all_down=None, retry_attempts=None, **keys):
    """`upstream_extra` text: optional `when_all_down`, `[upstreams.app.passive]` with `keys`, and
    `[upstreams.app.retry] attempts` when given."""
    text = f'when_all_down = "{when_all_down}"\n' if when_all_down else ""
    text += toml_table("upstreams.app.passive", **keys)
    if retry_attempts is not None:
        text += toml_table("upstreams.app.retry", attempts=retry_attempts)
    return text


def ejections(s):
    """The log lines of passive ejections so far."""
    return [line for line in s.log.poll() if "-> ejected (ejected)" in line]


def test_a_server_answering_502_is_ejected_and_gets_no_more_requests(origins, scripted, sluice):
    bad = scripted("bad", status=502)
    good, = origins(1, prefix="good")
    s = sluice(sluice_config([bad, good], upstream_extra=passive(max_fails=3, fail_timeout="10s")))
    answers = [send(s.port)[0] for _ in range(12)]
    # The clients never noticed: each 502 was retried on the good server.
    assert [(r.status, r.header("X-Origin")) for r in answers] == [(200, "good-1")] * 12, answers
    line = s.log.wait_for(r"upstream app server bad: up -> ejected \(ejected\): ", timeout=5)
    assert "3 failures in 10s: 502" in line, line
    assert bad.count() == 3
    assert good.stats()["requests"] == 12


def test_an_ejected_server_gets_a_trial_after_fail_timeout_and_backs_off(origins, scripted,
                                                                          sluice):
    """Ejected for fail_timeout; then one live result decides: a failure ejects it for twice as
    long, a success keeps it in."""
    bad = scripted("bad", status=502)
    good, = origins(1, prefix="good")
    s = sluice(sluice_config([bad, good],
                             upstream_extra=passive(max_fails=3, fail_timeout="300ms")))
    for _ in range(8):
        send(s.port)
    assert bad.count() == 3
    s.log.wait_for(r"server bad: ejected -> up \(half_open\)", timeout=3)
    assert {send(s.port)[0].status for _ in range(4)} == {200}
    line = s.log.wait_for(r"server bad: up -> ejected \(reejected\)", timeout=3)
    assert "half-open request failed: 502; ejected for 600ms (ejection 2 in a row)" in line, line
    assert bad.count() == 4  # one trial request, then out again
    assert {send(s.port)[0].status for _ in range(4)} == {200}
    assert bad.count() == 4
    bad.status = 200  # repaired while out
    wait_until(lambda: sum("server bad: ejected -> up (half_open)" in l for l in s.log.poll()) == 2,
               timeout=3, what="second half-open")
    answers = [send(s.port)[0] for _ in range(6)]
    assert {r.status for r in answers} == {200}
    s.log.wait_for(r"server bad: up -> up \(recovered\): half-open request succeeded", timeout=3)
    assert bad.count() >= 6  # back in rotation


def test_500_on_every_server_ejects_nobody(origins, sluice):
    """500 is the application's answer, not a sign of a broken server: not in fail_on by default."""
    fleet = origins(2)
    s = sluice(sluice_config(fleet, upstream_extra=passive(max_fails=2)))
    assert {send(s.port, "/broken?status=500")[0].status for _ in range(12)} == {500}
    for o in fleet:
        o.reset_stats()
    assert {send(s.port)[0].status for _ in range(6)} == {200}
    assert [o.stats()["requests"] for o in fleet] == [3, 3]
    assert ejections(s) == []


def test_max_ejected_percent_keeps_one_of_two_failing_servers_in(origins, sluice):
    fleet = origins(2)
    s = sluice(sluice_config(fleet, upstream_extra=passive(
        max_fails=2, max_ejected_percent=50, retry_attempts=1)))
    answers = [send(s.port, "/?status=502")[0] for _ in range(12)]
    # Every answer is the origins' own 502: the pool never ran out of servers.
    assert [r.status for r in answers] == [502] * 12, answers
    assert all(r.header("Sluice-Error") is None for r in answers), answers
    refused = s.log.wait_for(r"ejection_refused", timeout=5)
    assert "2 of 2 servers would be ejected (max_ejected_percent 50)" in refused, refused
    assert len(ejections(s)) == 1, s.log.lines
    # The one left in keeps taking every request.
    survivor = answers[-1].header("X-Origin")
    assert {r.header("X-Origin") for r in answers[-6:]} == {survivor}


def eject_both(origins, sluice, when_all_down):
    """Two origins behind an upstream that may eject them all, and a request that ejects both
    (it fails on the first, and its retry fails on the second)."""
    fleet = origins(2)
    s = sluice(sluice_config(fleet, upstream_extra=passive(
        when_all_down, max_fails=1, fail_timeout="30s", max_ejected_percent=100)))
    r, _ = send(s.port, "/?status=502")
    assert (r.status, r.header("Sluice-Attempts")) == (502, "2"), r
    s.log.wait_for(r"server app-1: up -> ejected", timeout=5)
    s.log.wait_for(r"server app-2: up -> ejected", timeout=5)
    for o in fleet:
        o.reset_stats()
    return fleet, s


def expect_fast_no_healthy_server(s):
    took = []
    for _ in range(5):
        r, elapsed = send(s.port)
        assert (r.status, r.header("Sluice-Error")) == (503, "no healthy server"), r
        assert r.body == b"503 Service Unavailable: no healthy server in upstream app\n", r
        took.append(elapsed)
    assert statistics.median(took) < 0.05, took


def test_all_ejected_with_when_all_down_fail_answers_503_at_once(origins, sluice):
    fleet, s = eject_both(origins, sluice, "fail")
    expect_fast_no_healthy_server(s)
    assert [o.stats()["requests"] for o in fleet] == [0, 0]


def test_all_refusing_with_when_all_down_fail_answers_503_at_once(sluice):
    s = sluice(sluice_config([f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"],
                             upstream_extra=passive("fail", max_fails=1, fail_timeout="30s",
                                                    max_ejected_percent=100)))
    r, _ = send(s.port)
    assert (r.status, r.header("Sluice-Error")) == (502, "connect refused; not retried: attempts exhausted"), r
    both = wait_until(lambda: len(ejections(s)) == 2 and ejections(s), what="two ejections")
    assert all("connect refused" in line for line in both), both
    expect_fast_no_healthy_server(s)


def test_all_ejected_with_when_all_down_panic_still_serves(origins, sluice):
    fleet, s = eject_both(origins, sluice, "panic")
    answers = [send(s.port)[0] for _ in range(4)]
    assert [r.status for r in answers] == [200] * 4, answers
    assert sum(o.stats()["requests"] for o in fleet) == 4
    s.log.wait_for(r"no healthy server, panic mode", timeout=5)


def test_a_server_drained_in_the_file_gets_no_requests(origins, sluice):
    live, drained = origins(2)
    config = sluice_config([live, drained]).replace(
        f'name = "{drained.name}"\n', f'name = "{drained.name}"\ndrain = true\n')
    assert "drain = true" in config
    s = sluice(config)
    answers = [send(s.port)[0] for _ in range(6)]
    assert [(r.status, r.header("X-Origin")) for r in answers] == [(200, live.name)] * 6, answers
    assert drained.stats()["requests"] == 0
