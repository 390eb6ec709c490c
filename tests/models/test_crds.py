"""The CRD manifests are generated from the models, structural, and behave on a real API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from cli.up import install_crds
from localkube.schema import check_structural
from localkube.testing import Handle
from models.crds import CRD_DIRS, all_crds, render
from tests.conftest import Kubectl
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"


@pytest.mark.parametrize("directory", CRD_DIRS)
def test_manifests_on_disk_match_the_models(directory: str) -> None:
    generated = all_crds()
    on_disk = {p.name for p in (ROOT / directory).glob("*.yaml")}
    assert on_disk == set(generated), "run `python -m models.crds`"
    for name, crd in generated.items():
        assert (ROOT / directory / name).read_text() == render(crd), f"{directory}/{name} drifted from models/; " \
                                                                      "regenerate with `python -m models.crds`"


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_manifests_spell_out_shared_schemas_without_yaml_aliases(name: str) -> None:
    text = (CRD_DIR / name).read_text()
    assert not [e for e in yaml.parse(text) if isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None)]
    assert yaml.safe_load(text) == all_crds()[name]


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_every_crd_schema_is_structural(name: str) -> None:
    schema = all_crds()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert check_structural(schema) == []


@pytest.fixture(scope="module")
def crds_installed(localkube: Handle) -> None:
    install_crds(localkube.kubeconfig)


def _custom(kube: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube)


def _create(kube: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], _custom(kube).create_namespaced_custom_object(
        "sympozium.ai", "v1alpha1", namespace, "agentruns", body))


def test_sympozium_yaml_with_legacy_aliases_is_stored_with_them(
        crds_installed: None, kube: client.ApiClient, namespace: str) -> None:
    run: dict[str, Any] = {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "legacy"},
        "spec": {"instanceRef": "helper", "input": "do it", "model": {"name": "gpt-4o", "provider": "openai"},
                 "lifecycle": {"postRun": [{"name": "gate", "image": "busybox:1.36", "gate": True}]}},
    }
    got = _create(kube, namespace, run)
    spec = got["spec"]
    assert spec["instanceRef"] == "helper" and spec["input"] == "do it" and spec["model"]["name"] == "gpt-4o"
    assert spec["lifecycle"]["gateDefault"] == "block", "the CRD defaults gateDefault to block"
    assert spec["cleanup"] == "delete" and spec["mode"] == "task"


def test_enum_violations_are_refused_at_admission_naming_the_field(
        crds_installed: None, kube: client.ApiClient, namespace: str) -> None:
    run = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "bad"},
           "spec": {"agentRef": "a", "task": "t", "cleanup": "sometimes"}}
    with pytest.raises(ApiException) as e:
        _create(kube, namespace, run)
    assert e.value.status == 422
    body = json.loads(e.value.body or "{}")
    assert "spec.cleanup" in body["message"] and '"sometimes"' in body["message"]


def test_a_task_given_as_an_object_is_stored_for_the_workflow_to_reject(
        crds_installed: None, kube: client.ApiClient, namespace: str) -> None:
    run = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "objtask"},
           "spec": {"agentRef": "a", "task": {"mode": "tool", "tool": "x"}}}
    got = _create(kube, namespace, run)
    assert got["spec"]["task"] == {"mode": "tool", "tool": "x"}


def test_status_is_only_written_through_the_status_subresource(
        crds_installed: None, kube: client.ApiClient, namespace: str) -> None:
    api = _custom(kube)
    run = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": "st"},
           "spec": {"agentRef": "a", "task": "t"}, "status": {"phase": "Succeeded"}}
    got = _create(kube, namespace, run)
    assert "status" not in got
    api.patch_namespaced_custom_object_status("sympozium.ai", "v1alpha1", namespace, "agentruns", "st",
                                              {"status": {"phase": "Pending", "gate": {"state": "pending"}}})
    got = cast(dict[str, Any], api.get_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agentruns", "st"))
    assert got["status"]["phase"] == "Pending"


def test_kubectl_get_shows_the_printer_columns(crds_installed: None, kubectl: Kubectl, namespace: str) -> None:
    manifest = yaml.safe_dump({"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                               "metadata": {"name": "cols", "namespace": namespace},
                               "spec": {"agentRef": "helper", "task": "t"}})
    out = kubectl("apply", "-f", "-", input=manifest)
    assert out.returncode == 0, out.stderr
    def listed() -> str | None:
        r = kubectl("get", "agentruns", "-n", namespace)
        return r.stdout if r.returncode == 0 and "cols" in r.stdout else None

    listing = wait_for(listed, what="kubectl get agentruns")
    header = listing.splitlines()[0].split()
    assert header == ["NAME", "AGENT", "PHASE", "GATE", "TOOLS", "AGE"]
    assert listing.splitlines()[1].split()[:2] == ["cols", "helper"]
