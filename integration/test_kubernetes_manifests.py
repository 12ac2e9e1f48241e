"""deploy/kubernetes/: the manifests parse as YAML (no cluster needed), hold what a zero-loss
rollout needs, and the TOML in their ConfigMap is a config sluice accepts."""
import subprocess
from pathlib import Path

import yaml

from conftest import ROOT, SLUICE

MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))


def documents():
    docs = []
    for path in MANIFESTS:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def one(kind, name=None):
    found = [d for d in documents() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)}"
    return found[0]


def test_every_manifest_is_valid_yaml_with_kind_and_name():
    assert MANIFESTS
    for d in documents():
        assert d["apiVersion"] and d["kind"] and d["metadata"]["name"], d


def test_deployment_probes_the_admin_listener_and_drains_before_it_stops():
    pod = one("Deployment", "sluice")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert {"name": "admin", "containerPort": 9901} in c["ports"]
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    toml = one("ConfigMap", "sluice-config")["data"]["sluice.toml"]
    seconds = lambda key: int(next(l for l in toml.splitlines() if l.startswith(key)).split('"')[1].rstrip("s"))
    # Kubernetes kills the pod after the grace period: preStop, shutdown_delay and
    # shutdown_timeout must all fit in it.
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + seconds("shutdown_delay") + seconds("shutdown_timeout")


def test_configmap_config_passes_check_and_resolves_the_headless_service(tmp_path):
    toml = one("ConfigMap", "sluice-config")["data"]["sluice.toml"]
    # The admin token comes from the Secret mounted at /var/run/sluice (its key "token").
    (c,) = one("Deployment", "sluice")["spec"]["template"]["spec"]["containers"]
    assert {"name": "token", "mountPath": "/var/run/sluice", "readOnly": True} in c["volumeMounts"]
    assert 'token_file = "/var/run/sluice/token"' in toml
    token = tmp_path / "token"
    token.write_text("secret\n")
    path = tmp_path / "sluice.toml"
    path.write_text(toml.replace("/var/run/sluice/token", str(token)))
    r = subprocess.run([str(SLUICE), "check", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    headless = one("Service", "app-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert 'address = "app-headless.default.svc.cluster.local:8080"\nresolve = true' in toml
