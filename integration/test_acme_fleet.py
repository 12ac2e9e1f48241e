"""ACME in a fleet ([fleet] with an acme table): one instance orders the certificate from pebble
under a lease and shares it (chain and key) through Redis; another instance takes it from there
and serves it without ordering, and answers the order's challenge when the CA's validation
reaches it instead of the instance that orders.

pebble validates TLS-ALPN-01 on one port (its tlsPort), one instance's listener. Fixtures from
test_acme (pebble, its DNS) and test_idempotency (a real redis-server on a loopback port)."""
import os
import subprocess

from conftest import closed_port, wait_until
from test_acme import DOMAIN, acme_config, curl, dns, pebble_for  # noqa: F401 (fixtures)
from test_idempotency import redis  # noqa: F401 (the fixture)
from test_tls import served_cert


def fleet_acme_config(o, tls_port, pebble, storage, r, name):
    return acme_config(o, tls_port, pebble, storage) + f'\n[fleet]\nredis = "{r.url}"\nname = "{name}"\n'


def test_one_instance_orders_and_the_other_serves_the_certificate_from_redis(origins, sluice, pebble_for, redis,
                                                                             tmp_path):
    [o] = origins(1)
    r = redis()
    port1, port2 = closed_port(), closed_port()
    pebble = pebble_for(port1)
    lb1 = sluice(fleet_acme_config(o, port1, pebble, tmp_path / "acme-1", r, "lb-1"), name="lb-1.toml")
    lb1.log.wait_for(r"fleet: this instance orders the certificate for app\.sluice\.test", timeout=10)
    lb1.log.wait_for(r"acme: certificate for app\.sluice\.test issued", timeout=60)
    lb1.log.wait_for(r"fleet: certificate for app\.sluice\.test shared with the fleet", timeout=10)

    storage2 = tmp_path / "acme-2"
    lb2 = sluice(fleet_acme_config(o, port2, pebble, storage2, r, "lb-2"), name="lb-2.toml")
    # Its ACME client asks the fleet before ordering: not its turn, then the certificate arrives.
    lb2.log.wait_for(r"acme: certificate for app\.sluice\.test: another instance of the fleet orders it", timeout=10)
    lb2.log.wait_for(r"fleet: certificate for app\.sluice\.test taken from the fleet", timeout=10)
    root = pebble.root(tmp_path / "pebble-root.pem")
    assert curl(port2, root) == ("200", "")
    assert served_cert(port2, DOMAIN, root) == served_cert(port1, DOMAIN, root)
    assert pebble.orders() == 1
    assert not [l for l in lb2.log.poll() if "acme: ordered" in l or "orders the certificate" in l], "\n".join(lb2.log.lines)
    # Kept in lb-2's storage as if it had ordered it: a restart serves it at once.
    assert os.stat(storage2 / DOMAIN / "key.pem").st_mode & 0o777 == 0o600
    [status] = lb2.status()["acme"]
    assert status["failures"] == 0 and status["not_after"]


def test_the_challenge_is_answered_by_an_instance_that_does_not_order(origins, sluice, pebble_for, redis, tmp_path):
    """pebble validates on lb-2's listener while lb-1 orders: lb-1 holds the lease (set under its
    name before it starts, as a restarted lb-1 finds its own), lb-2 answers the challenge it
    reads from Redis."""
    [o] = origins(1)
    r = redis()
    port1, port2 = closed_port(), closed_port()
    pebble = pebble_for(port2)
    subprocess.run(["redis-cli", "-p", str(r.port), "SET", f"sluice:fleet:acme:lease:{DOMAIN}", "lb-1", "PX", "60000"],
                   check=True, capture_output=True, timeout=10)
    lb2 = sluice(fleet_acme_config(o, port2, pebble, tmp_path / "acme-2", r, "lb-2"), name="lb-2.toml")
    lb2.log.wait_for(r"acme: certificate for app\.sluice\.test: another instance of the fleet orders it", timeout=10)
    lb1 = sluice(fleet_acme_config(o, port1, pebble, tmp_path / "acme-1", r, "lb-1"), name="lb-1.toml")
    lb1.log.wait_for(r"fleet: this instance orders the certificate for app\.sluice\.test", timeout=10)
    lb2.log.wait_for(r"fleet: answering the tls-alpn-01 challenge for app\.sluice\.test of another instance's order",
                     timeout=15)
    lb1.log.wait_for(r"acme: certificate for app\.sluice\.test issued", timeout=60)
    lb2.log.wait_for(r"fleet: certificate for app\.sluice\.test taken from the fleet", timeout=10)
    root = pebble.root(tmp_path / "pebble-root.pem")
    assert curl(port2, root) == ("200", "")
    assert curl(port1, root) == ("200", "")
    assert pebble.orders() == 1


def test_a_renewal_is_ordered_once_for_the_fleet_and_served_by_both(origins, sluice, pebble_for, redis, tmp_path):
    """pebble issues 30-second certificates: at two thirds of the lifetime both instances find
    the certificate due; one takes the lease and orders, the other answers the challenge if the
    validation reaches it and takes the renewed certificate from Redis."""
    [o] = origins(1)
    r = redis()
    port1, port2 = closed_port(), closed_port()
    pebble = pebble_for(port2, validity=30)
    subprocess.run(["redis-cli", "-p", str(r.port), "SET", f"sluice:fleet:acme:lease:{DOMAIN}", "lb-1", "PX", "60000"],
                   check=True, capture_output=True, timeout=10)
    lb2 = sluice(fleet_acme_config(o, port2, pebble, tmp_path / "acme-2", r, "lb-2"), name="lb-2.toml")
    lb1 = sluice(fleet_acme_config(o, port1, pebble, tmp_path / "acme-1", r, "lb-1"), name="lb-1.toml")
    lb2.log.wait_for(r"fleet: certificate for app\.sluice\.test taken from the fleet", timeout=60)
    root = pebble.root(tmp_path / "pebble-root.pem")
    first = served_cert(port1, DOMAIN, root)
    assert served_cert(port2, DOMAIN, root) == first

    def renewed_on_both():
        now = served_cert(port1, DOMAIN, root), served_cert(port2, DOMAIN, root)
        return now[0] != first and now[0] == now[1]
    wait_until(renewed_on_both, timeout=40, interval=0.5, what="the renewed certificate on both instances")
    assert pebble.orders() == 2
    assert curl(port1, root) == ("200", "") and curl(port2, root) == ("200", "")
