"""The fleet's deployment files against real schemas, not only their shape.

- DaemonSet, ConfigMap, Service: the Kubernetes OpenAPI schemas `kubernetes-validate` ships, strict
  (an unknown field, e.g. a mis-cased `hostPid`, is an error as with `kubectl apply --validate=strict`).
- ServiceMonitor, PrometheusRule: the prometheus-operator CRD schemas, as the models
  `cloudcoil-models-prometheus-operator` generates from the operator's CRDs (types, enums, duration
  patterns); a manifest must also round-trip through them unchanged, so an unknown field (which the API
  server's structural schema would prune) fails too.
- docker-compose.yml: the Compose specification schema `check-jsonschema` ships (vendor.compose-spec).
"""

from __future__ import annotations

import copy
import subprocess
import sys

import kubernetes_validate as kv
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as operator_models

from tests.deploy.deploy_helpers import DEPLOY

K8S = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "docker-compose" / "docker-compose.yml"
KUBERNETES_VERSION = "1.31"  # the oldest release the manifests target (DaemonSet apps/v1, Service v1)


def manifests() -> list[dict]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") != "Kustomization"]
    return out


def builtin_kinds() -> list[dict]:
    return [d for d in manifests() if d["apiVersion"] in ("v1", "apps/v1")]


def crd_kinds() -> list[dict]:
    return [d for d in manifests() if d["apiVersion"].startswith("monitoring.coreos.com/")]


def k8s_validate(doc: dict) -> None:
    kv.validate(doc, KUBERNETES_VERSION, strict=True)


def crd_validate(doc: dict) -> None:
    model = getattr(operator_models, doc["kind"]).model_validate(doc)
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert back == doc, f"{doc['kind']}: fields the CRD schema does not know were dropped"


def test_every_manifest_is_covered_by_a_schema():
    kinds = sorted(d["kind"] for d in manifests())
    assert kinds == ["ConfigMap", "DaemonSet", "PrometheusRule", "Service", "ServiceMonitor"]
    assert len(builtin_kinds()) + len(crd_kinds()) == len(kinds)


@pytest.mark.parametrize("doc", builtin_kinds(), ids=lambda d: d["kind"])
def test_builtin_manifests_validate_against_the_kubernetes_schema(doc):
    k8s_validate(doc)


def test_kubernetes_schema_refuses_a_misspelled_field_and_a_wrong_type():
    ds = next(d for d in builtin_kinds() if d["kind"] == "DaemonSet")
    typo = copy.deepcopy(ds)
    typo["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(kv.ValidationError, match="hostPid"):
        k8s_validate(typo)
    svc = copy.deepcopy(next(d for d in builtin_kinds() if d["kind"] == "Service"))
    svc["spec"]["ports"][0]["port"] = "metrics"
    with pytest.raises(kv.ValidationError):
        k8s_validate(svc)


@pytest.mark.parametrize("doc", crd_kinds(), ids=lambda d: d["kind"])
def test_operator_manifests_validate_against_the_crd_schema(doc):
    crd_validate(doc)


def test_crd_schema_refuses_a_bad_duration_and_an_unknown_field():
    sm = copy.deepcopy(next(d for d in crd_kinds() if d["kind"] == "ServiceMonitor"))
    sm["spec"]["endpoints"][0]["interval"] = "30 seconds"
    with pytest.raises(Exception, match="interval"):
        crd_validate(sm)
    rule = copy.deepcopy(next(d for d in crd_kinds() if d["kind"] == "PrometheusRule"))
    rule["spec"]["groups"][0]["rules"][0]["recrod"] = "x"
    with pytest.raises(AssertionError, match="PrometheusRule"):
        crd_validate(rule)


def _compose_check(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_file_validates_against_the_compose_specification(tmp_path):
    res = _compose_check(COMPOSE)
    assert res.returncode == 0, res.stdout + res.stderr
    bad = yaml.safe_load(COMPOSE.read_text())
    bad["services"]["prometheus"]["restart_policy"] = "always"  # not a service key (restart is)
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(bad))
    res = _compose_check(path)
    assert res.returncode == 1 and "restart_policy" in res.stdout + res.stderr
