"""deploy/kubernetes/: strictly valid manifests that wire the controller as the backend expects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_eval_sandbox.config.kubernetes_settings import DEFAULT_RELAY_PORT
from agent_eval_sandbox.sandbox import labels as L
from tests.unit.sandbox.kube_fixtures import validate_strict

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _docs() -> dict[str, dict[str, Any]]:
    docs = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc if doc["kind"] not in docs else docs[doc["kind"]]
            docs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return docs


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_strictly_valid(path: Path):
    docs = list(yaml.safe_load_all(path.read_text()))
    assert docs
    for doc in docs:
        validate_strict(doc)
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "agent-eval"


def test_the_role_grants_only_what_the_backend_calls():
    role = _docs()["Role"]
    grants = {(rule["apiGroups"][0], resource): set(rule["verbs"])
              for rule in role["rules"] for resource in rule["resources"]}
    assert grants == {("", "pods"): {"create", "get", "list", "delete"}, ("", "pods/exec"): {"create", "get"},
                      ("", "pods/log"): {"get"},
                      ("networking.k8s.io", "networkpolicies"): {"create", "get", "list", "delete"}}
    binding = _docs()["RoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == _docs()["ServiceAccount"]["metadata"]["name"]


def test_the_job_runs_the_controller_behind_the_service_with_the_key_in_it_alone():
    docs = _docs()
    job, service = docs["Job"], docs["Service"]
    template = job["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == port["targetPort"] == DEFAULT_RELAY_PORT
    (container,) = template["spec"]["containers"]
    assert container["image"] == "agent-eval-sandbox-controller:0.1.0"
    assert container["ports"][0]["containerPort"] == DEFAULT_RELAY_PORT
    assert template["spec"]["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    secret_refs = [e for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert [e["valueFrom"]["secretKeyRef"]["name"] for e in secret_refs] == [docs["Secret"]["metadata"]["name"]]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    policy = docs["NetworkPolicy"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {L.MANAGED: "1"}}}]
