"""RuntimeClasses (node.k8s.io/v1) and native sidecars in localkube, through the real client and kubectl: a pod naming
a RuntimeClass that does not exist is refused at admission as kube-apiserver's RuntimeClass plug-in refuses it, and a
Job's pod with a `sleep infinity` sidecar still completes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.conftest import Kubectl
from tests.waiting import wait_for

Obj = dict[str, Any]


def runtime_class(name: str, handler: str = "runsc") -> Obj:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": handler}


def sh_pod(name: str, rc: str | None = None, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                 "spec": {"restartPolicy": "Never", "containers": [
                     {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}], **spec}}
    if rc:
        body["spec"]["runtimeClassName"] = rc
    return body


@pytest.fixture
def node(kube: client.ApiClient) -> Any:
    return client.NodeV1Api(kube)


def test_runtime_classes_are_served_cluster_scoped_and_kubectl_works(kubectl: Kubectl, node: Any) -> None:
    resources = kubectl("api-resources", "--api-group=node.k8s.io", "-o", "wide")
    assert resources.returncode == 0, resources.stderr
    assert "runtimeclasses" in resources.stdout and "false" in resources.stdout.split("runtimeclasses", 1)[1]
    applied = kubectl("apply", "--validate=strict", "-f", "-", input=json.dumps(runtime_class("rc-kubectl")))
    assert applied.returncode == 0, applied.stderr
    got = kubectl("get", "runtimeclass", "rc-kubectl")
    assert got.returncode == 0 and "runsc" in got.stdout, got
    assert node.read_runtime_class("rc-kubectl").handler == "runsc"
    with pytest.raises(ApiException) as e:
        node.patch_runtime_class("rc-kubectl", {"handler": "kata"})
    assert e.value.status == 422 and "handler" in str(e.value.body)
    with pytest.raises(ApiException) as e:
        node.create_runtime_class({**runtime_class("rc-bad"), "handler": ""})
    assert e.value.status == 422 and "handler" in str(e.value.body)
    assert kubectl("delete", "runtimeclass", "rc-kubectl").returncode == 0
    with pytest.raises(ApiException) as e:
        node.read_runtime_class("rc-kubectl")
    assert e.value.status == 404


def test_a_pod_naming_a_missing_runtime_class_is_refused_and_an_existing_one_is_recorded(
        kube: client.ApiClient, namespace: str, node: Any) -> None:
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, sh_pod("p1", rc="rc-missing"))
    assert e.value.status == 403
    assert json.loads(str(e.value.body))["message"] == \
        'pods "p1" is forbidden: pod rejected: RuntimeClass "rc-missing" not found'
    node.create_runtime_class(runtime_class("rc-present"))
    try:
        core.create_namespaced_pod(namespace, sh_pod("p2", rc="rc-present"))
        done = wait_for(lambda: (p := core.read_namespaced_pod("p2", namespace)).status.phase == "Succeeded" and p,
                        timeout=20, what="pod p2 Succeeded")
        assert done.spec.runtime_class_name == "rc-present"
    finally:
        node.delete_runtime_class("rc-present")


def test_a_job_whose_pod_names_a_missing_runtime_class_records_failed_create_and_makes_no_pod(
        kube: client.ApiClient, namespace: str) -> None:
    batch: Any = client.BatchV1Api(kube)
    core: Any = client.CoreV1Api(kube)
    spec = sh_pod("x", rc="rc-nowhere")["spec"]
    batch.create_namespaced_job(namespace, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                                            "spec": {"backoffLimit": 0, "template": {"spec": spec}}})
    event = wait_for(lambda: next((e for e in core.list_namespaced_event(namespace).items
                                   if e.reason == "FailedCreate" and e.involved_object.name == "j"), None),
                     timeout=20, what="FailedCreate event")
    assert 'RuntimeClass "rc-nowhere" not found' in event.message
    assert core.list_namespaced_pod(namespace, label_selector="job-name=j").items == []


def test_a_native_sidecar_runs_beside_the_main_container_and_ends_with_it(kube: client.ApiClient,
                                                                          namespace: str) -> None:
    core: Any = client.CoreV1Api(kube)
    sidecar = {"name": "sandbox", "image": "busybox:1.36", "restartPolicy": "Always",
               "command": ["sleep", "infinity"]}
    core.create_namespaced_pod(namespace, sh_pod("side", initContainers=[sidecar]))
    done = wait_for(lambda: (p := core.read_namespaced_pod("side", namespace)).status.phase == "Succeeded" and p,
                    timeout=30, what="pod with a sidecar Succeeded")
    [status] = done.status.init_container_statuses
    assert status.name == "sandbox" and status.state.terminated is not None
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, sh_pod("bad", containers=[{**sidecar, "name": "main"}]))
    assert e.value.status == 422 and "spec.containers[0].restartPolicy" in str(e.value.body)
