"""Deployment examples: Prometheus configs, Alertmanager routing, the compose stack, the Kubernetes manifests."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_binary
from tests.deploy.deploy_helpers import DEPLOY, PROM, REPO, rules_gen

AM = DEPLOY / "alertmanager" / "alertmanager.yml"
COMPOSE = DEPLOY / "docker-compose" / "docker-compose.yml"
K8S = DEPLOY / "kubernetes"


def k8s_docs() -> dict[str, dict]:
    """Every Kubernetes object by kind (one of each here)."""
    docs = {}
    for path in K8S.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") != "Kustomization":
                docs[doc["kind"]] = doc
    return docs


@pytest.mark.parametrize("name", ["prometheus-single.yml", "prometheus-fleet.yml"])
def test_prometheus_examples_pass_promtool_and_scrape_the_rules_job(name):
    promtool = require_binary("promtool")
    out = subprocess.run([promtool, "check", "config", name], capture_output=True, text=True, cwd=PROM)
    assert out.returncode == 0, out.stdout + out.stderr
    cfg = yaml.safe_load((PROM / name).read_text())
    assert cfg["rule_files"] == ["rules.yml"]
    (job,) = cfg["scrape_configs"]
    assert f'job="{job["job_name"]}"' == rules_gen().SELECTOR


def test_fleet_file_sd_targets_file_is_valid():
    cfg = yaml.safe_load((PROM / "prometheus-fleet.yml").read_text())
    pattern = cfg["scrape_configs"][0]["file_sd_configs"][0]["files"][0]
    files = list(PROM.glob(pattern))
    assert files
    for f in files:
        groups = json.loads(f.read_text())
        assert groups and all(re.fullmatch(r"[\w.-]+:\d+", t) for g in groups for t in g["targets"])


def test_alertmanager_config_is_valid_and_routes_by_severity():
    amtool = require_binary("amtool")
    out = subprocess.run([amtool, "check-config", str(AM)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    for labels, receiver in (
        (["severity=critical", "gotcha=G4"], "pager"),
        (["severity=warning", "gotcha=G3"], "chat"),
    ):
        r = subprocess.run(
            [amtool, "config", "routes", "test", f"--config.file={AM}", *labels],
            capture_output=True,
            text=True,
        )
        assert r.stdout.strip() == receiver, r.stdout + r.stderr


def test_alertmanager_inhibits_warnings_under_a_critical_of_the_same_gotcha_and_instance():
    (rule,) = yaml.safe_load(AM.read_text())["inhibit_rules"]
    assert rule["source_matchers"] == ['severity="critical"']
    assert rule["target_matchers"] == ['severity="warning"']
    assert set(rule["equal"]) == {"gotcha", "instance"}


def test_compose_stack_pins_images_and_mounts_files_that_exist():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"prometheus", "alertmanager", "grafana"}
    for name, svc in services.items():
        image = svc["image"]
        assert re.search(r":v?\d+\.\d+\.\d+$", image) or "@sha256:" in image, f"{name}: {image} is not pinned"
        for v in svc.get("volumes", []):
            src, dst = v.split(":")[:2]
            if src.startswith("."):
                assert (COMPOSE.parent / src).resolve().exists(), f"{name}: {src} does not exist"
            else:
                assert src in compose["volumes"], f"{name}: named volume {src} undeclared"
    prom = services["prometheus"]
    config = next(a.split("=", 1)[1] for a in prom["command"] if a.startswith("--config.file="))
    mounted = {v.split(":")[1]: v.split(":")[0] for v in prom["volumes"]}
    assert config in mounted and "/etc/prometheus/rules.yml" in mounted
    assert (COMPOSE.parent / mounted["/etc/prometheus/rules.yml"]).resolve() == PROM / "rules.yml"
    am = services["alertmanager"]
    assert any(v.startswith("../alertmanager/alertmanager.yml:") for v in am["volumes"])
    assert any(v.startswith("../../grafana/provisioning/") for v in services["grafana"]["volumes"])


def test_daemonset_sees_the_host_and_nvml_and_matches_service_and_servicemonitor():
    docs = k8s_docs()
    ds, svc, sm = docs["DaemonSet"], docs["Service"], docs["ServiceMonitor"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["runtimeClassName"] == "nvidia"
    (c,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    for host, inside in (("/proc", "/host/proc"), ("/sys", "/host/sys")):
        assert mounts[inside]["readOnly"] is True
        assert vols[mounts[inside]["name"]]["hostPath"]["path"] == host
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["SPARK_WATCHD_SOURCES__PROC_ROOT"] == "/host/proc"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    port = next(p for p in c["ports"] if p["name"] == "metrics")
    assert svc["spec"]["ports"][0]["name"] == sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert port["containerPort"] == svc["spec"]["ports"][0]["port"] == 9761
    assert "0.0.0.0:9761" in c["args"]
    # The scrape job is the Service's app.kubernetes.io/name, which is what the rules select.
    assert svc["metadata"]["labels"][sm["spec"]["jobLabel"]] == "spark-watchd"


def test_kustomization_lists_every_manifest():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    assert all(Path(K8S / r).exists() for r in kust["resources"])
    assert REPO in K8S.parents
