"""kube-apiserver semantics of localkube, driven the way clients drive a real cluster.

Everything here goes over HTTPS: the real `kubernetes` client (typed and dynamic) and raw
HTTP through httpx where the wire matters (status codes, headers, watch framing). Each test
name is a claim about the real API server that localkube must share; a failure means a
client written against localkube would break (or pass wrongly) against a cluster.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from localkube.testing import Handle, running_localkube, ssl_context
from tests.waiting import wait_for

Obj = dict[str, Any]
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# -- helpers -----------------------------------------------------------------------------------


def configmap(name: str = "", *, labels: dict[str, str] | None = None, data: dict[str, str] | None = None,
              **metadata: Any) -> Obj:
    md: Obj = dict(metadata)
    if name:
        md["name"] = name
    if labels:
        md["labels"] = labels
    out: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
    if data is not None:
        out["data"] = data
    return out


def owner_ref(owner: Obj, *, block: bool = False) -> Obj:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block}


def error_body(exc: ApiException) -> Obj:
    body: Obj = json.loads(exc.body or "{}")
    return body


def assert_status(resp: httpx.Response, code: int, reason: str | None = None) -> Obj:
    """The response is a `kind: Status` failure with this HTTP code (and reason)."""
    assert resp.status_code == code, resp.text
    body: Obj = resp.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure"
    assert body["code"] == code
    assert body["message"]
    if reason is not None:
        assert body["reason"] == reason, body
    return body


def rv(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def gone(read: Callable[[], object]) -> bool:
    """True once `read` answers 404."""
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def watch_events(http: httpx.Client, path: str, *, count: int | None = None, timeout: float = 10,
                 **params: str) -> list[Obj]:
    """Raw watch: the decoded events of one stream, stopping after `count` (or when the server ends it)."""
    events: list[Obj] = []
    query = {"watch": "1", "timeoutSeconds": str(int(timeout)), **params}
    with http.stream("GET", path, params=query, timeout=timeout + 10) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if not line.strip():
                continue
            events.append(json.loads(line))
            if count is not None and len(events) >= count:
                break
    return events


def collect(func: Callable[..., Any], *args: Any, count: int, timeout: int = 10, **kwargs: Any) -> list[Obj]:
    """Watch through the kubernetes client until `count` events arrived."""
    w = watch.Watch()
    out: list[Obj] = []
    for ev in w.stream(func, *args, timeout_seconds=timeout, _request_timeout=timeout + 10, **kwargs):
        out.append({"type": ev["type"], "object": ev["raw_object"]})
        if len(out) >= count:
            w.stop()
    return out


def names(items: list[Any]) -> list[str]:
    return [i.metadata.name if hasattr(i, "metadata") else i["metadata"]["name"] for i in items]


@pytest.fixture
def http(localkube: Handle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=localkube.url, verify=ssl_context(localkube.kubeconfig),
                      headers={"Authorization": f"Bearer {localkube.token}"}, timeout=30) as c:
        yield c


@pytest.fixture
def core(kube: client.ApiClient) -> Any:
    """CoreV1Api, typed Any: its models make every field Optional, which would bury each claim in asserts."""
    return client.CoreV1Api(kube)


def crd_body(group: str, plural: str, kind: str, *, scope: str = "Namespaced",
             short_names: tuple[str, ...] = (), status_subresource: bool = True) -> Obj:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "color": {"type": "string", "enum": ["blue", "red", "green"], "default": "blue"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "limits": {"type": "object", "default": {},
                               "properties": {"cpu": {"type": "integer", "default": 2}}},
                },
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "observed": {"type": "integer"}},
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": kind + "List",
                      "shortNames": list(short_names)},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema},
                          "subresources": {"status": {}} if status_subresource else {}}],
        },
    }


@dataclass
class CRD:
    group: str
    plural: str
    kind: str
    version: str = "v1"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, ns: str, name: str = "", sub: str = "") -> str:
        p = f"/apis/{self.group}/{self.version}/namespaces/{ns}/{self.plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p

    def obj(self, name: str, **spec: Any) -> Obj:
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def widgets(localkube: Handle) -> Iterator[CRD]:
    """A namespaced CRD with a status subresource, defaults, and a short name, for this module."""
    crd = CRD(f"w{uuid.uuid4().hex[:8]}.example.com", "widgets", "Widget")
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ext: Any = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(crd_body(crd.group, crd.plural, crd.kind, short_names=("wg",)))
    yield crd
    ext.delete_custom_resource_definition(f"{crd.plural}.{crd.group}")
    api.close()


@pytest.fixture
def custom(kube: client.ApiClient) -> Any:
    return client.CustomObjectsApi(kube)


def default_sa(core: Any, ns: str) -> None:
    wait_for(lambda: not gone(lambda: core.read_namespaced_service_account("default", ns)),
             what=f"default ServiceAccount in {ns}")


def run_pod(core: Any, ns: str, name: str, command: list[str], *, sa: str = "default",
            labels: dict[str, str] | None = None, phase: str = "Succeeded") -> Obj:
    default_sa(core, ns)
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"restartPolicy": "Never", "serviceAccountName": sa, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": command}]},
    })
    pod = wait_for(lambda: (p := core.read_namespaced_pod(name, ns)).status.phase in ("Succeeded", "Failed") and p,
                   what=f"pod {name} to finish")
    assert pod.status.phase == phase, pod.status
    return client.ApiClient().sanitize_for_serialization(pod)


def sa_token(core: Any, ns: str, *, sa: str = "default", pod: str = "token-reader") -> str:
    """A ServiceAccount token the way a workload gets one: read from inside a pod, via its log."""
    run_pod(core, ns, pod, ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"], sa=sa)
    token = core.read_namespaced_pod_log(pod, ns).strip()
    assert token
    return str(token)


# -- object metadata -------------------------------------------------------------------------


def test_create_answers_201_with_uid_creation_timestamp_and_resource_version(core: Any,
                                                                               http: httpx.Client,
                                                                               namespace: str) -> None:
    _, code, _ = core.create_namespaced_config_map_with_http_info(namespace, configmap("typed"))
    assert code == 201
    resp = http.post(cm_path(namespace), json=configmap("meta"))
    assert resp.status_code == 201
    m = resp.json()["metadata"]
    assert UUID.match(m["uid"]), m["uid"]
    assert RFC3339.match(m["creationTimestamp"]), m["creationTimestamp"]
    assert int(m["resourceVersion"]) > 0
    assert m["namespace"] == namespace
    assert "generation" not in m  # ConfigMaps have no spec, so no generation
    assert http.get(cm_path(namespace, "meta")).json() == resp.json()


def test_update_keeps_uid_and_creation_timestamp(core: Any, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, configmap("keep", data={"a": "1"}))
    body = configmap("keep", data={"a": "2"}, resourceVersion=created.metadata.resource_version)
    updated = core.replace_namespaced_config_map("keep", namespace, body)
    assert updated.metadata.uid == created.metadata.uid
    assert updated.metadata.creation_timestamp == created.metadata.creation_timestamp
    assert updated.data == {"a": "2"}


def test_resource_version_increases_strictly_across_all_writes(core: Any, namespace: str) -> None:
    seen: list[int] = []
    a = core.create_namespaced_config_map(namespace, configmap("a"))
    seen.append(int(a.metadata.resource_version))
    s = core.create_namespaced_secret(namespace, {"apiVersion": "v1", "kind": "Secret",
                                                  "metadata": {"name": "s"}, "stringData": {"k": "v"}})
    seen.append(int(s.metadata.resource_version))
    a = core.patch_namespaced_config_map("a", namespace, {"data": {"x": "1"}})
    seen.append(int(a.metadata.resource_version))
    b = core.create_namespaced_config_map(namespace, configmap("b"))
    seen.append(int(b.metadata.resource_version))
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen
    listed = core.list_namespaced_config_map(namespace)
    assert int(listed.metadata.resource_version) >= seen[-1]


def test_generate_name_gets_a_random_suffix_per_object(core: Any, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, configmap(generateName="gen-"))
    second = core.create_namespaced_config_map(namespace, configmap(generateName="gen-"))
    for obj in (first, second):
        assert re.fullmatch(r"gen-[a-z0-9]{5}", obj.metadata.name), obj.metadata.name
        assert obj.metadata.generate_name == "gen-"
    assert first.metadata.name != second.metadata.name


def test_generation_bumps_on_spec_changes_only(kube: client.ApiClient, namespace: str, widgets: CRD) -> None:
    dyn = DynamicClient(kube)
    res = dyn.resources.get(api_version=widgets.api_version, kind=widgets.kind)
    created = res.create(body=widgets.obj("gen", size=1), namespace=namespace)
    assert created.metadata.generation == 1
    labelled = res.patch(name="gen", namespace=namespace, body={"metadata": {"labels": {"a": "b"}}},
                         content_type=MERGE)
    assert labelled.metadata.generation == 1
    assert int(labelled.metadata.resourceVersion) > int(created.metadata.resourceVersion)
    status = res.status.patch(name="gen", namespace=namespace, body={"status": {"phase": "Ready"}},
                              content_type=MERGE)
    assert status.status.phase == "Ready"
    assert status.metadata.generation == 1
    spec = res.patch(name="gen", namespace=namespace, body={"spec": {"size": 2}}, content_type=MERGE)
    assert spec.metadata.generation == 2
    again = res.patch(name="gen", namespace=namespace, body={"spec": {"size": 3}}, content_type=MERGE)
    assert again.metadata.generation == 3


def test_create_ignores_a_client_set_uid_and_generation(namespace: str, custom: Any, widgets: CRD) -> None:
    body = widgets.obj("forged", size=1)
    body["metadata"].update({"generation": 42, "uid": "not-a-real-uid", "creationTimestamp": "2001-01-01T00:00:00Z"})
    obj = custom.create_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural, body)
    assert obj["metadata"]["generation"] == 1
    assert UUID.match(obj["metadata"]["uid"])
    assert obj["metadata"]["creationTimestamp"] != "2001-01-01T00:00:00Z"


def test_create_carrying_a_resource_version_is_refused_like_etcd_storage_does(http: httpx.Client,
                                                                               namespace: str) -> None:
    # Re-creating an object as it was read (resourceVersion still set) is a client bug the real
    # server reports as a 500; localkube must not let it pass either, but answers 400 (README).
    read = http.post(cm_path(namespace), json=configmap("reborn")).json()
    http.delete(cm_path(namespace, "reborn")).raise_for_status()
    resp = http.post(cm_path(namespace), json=read)
    assert resp.status_code == 400
    body = resp.json()
    assert body["kind"] == "Status" and body["code"] == 400 and body["reason"] == "BadRequest"
    assert body["message"] == "resourceVersion should not be set on objects to be created"
    del read["metadata"]["resourceVersion"]
    assert http.post(cm_path(namespace), json=read).status_code == 201


# -- create / get / conflicts ----------------------------------------------------------------


def test_creating_an_existing_name_is_409_already_exists(core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("dup"))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("dup"))
    assert e.value.status == 409
    body = error_body(e.value)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'
    assert body["details"] == {"name": "dup", "kind": "configmaps"}


def test_missing_object_is_404_not_found_with_details(http: httpx.Client, namespace: str) -> None:
    body = assert_status(http.get(cm_path(namespace, "nope")), 404, "NotFound")
    assert body["message"] == 'configmaps "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "configmaps"}
    job = assert_status(http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/nope"), 404, "NotFound")
    assert job["message"] == 'jobs.batch "nope" not found'
    assert job["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


def test_put_with_a_stale_resource_version_is_409_conflict(core: Any, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, configmap("race", data={"v": "0"}))
    stale = first.metadata.resource_version
    core.replace_namespaced_config_map("race", namespace, configmap("race", data={"v": "1"}, resourceVersion=stale))
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("race", namespace, configmap("race", data={"v": "2"}, resourceVersion=stale))
    assert e.value.status == 409
    body = error_body(e.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "race": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert core.read_namespaced_config_map("race", namespace).data == {"v": "1"}


def test_put_without_resource_version_is_an_unconditional_update(core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("blind", data={"v": "0"}))
    updated = core.replace_namespaced_config_map("blind", namespace, configmap("blind", data={"v": "1"}))
    assert updated.data == {"v": "1"}


@pytest.mark.parametrize(("content_type", "patch"), [
    (MERGE, {"metadata": {"resourceVersion": "{rv}"}, "data": {"v": "2"}}),
    (STRATEGIC, {"metadata": {"resourceVersion": "{rv}"}, "data": {"v": "2"}}),
    (JSON_PATCH, [{"op": "replace", "path": "/metadata/resourceVersion", "value": "{rv}"},
                  {"op": "replace", "path": "/data/v", "value": "2"}]),
], ids=["merge", "strategic", "json"])
def test_patch_carrying_a_stale_resource_version_is_409_conflict(http: httpx.Client, namespace: str,
                                                                 content_type: str, patch: Any) -> None:
    created = http.post(cm_path(namespace), json=configmap("p", data={"v": "0"})).json()
    http.patch(cm_path(namespace, "p"), content=json.dumps({"data": {"v": "1"}}),
               headers={"Content-Type": MERGE}).raise_for_status()
    raw = json.dumps(patch).replace("{rv}", created["metadata"]["resourceVersion"])
    resp = http.patch(cm_path(namespace, "p"), content=raw, headers={"Content-Type": content_type})
    assert_status(resp, 409, "Conflict")
    # With the current resourceVersion the same patch goes through.
    current = http.get(cm_path(namespace, "p")).json()["metadata"]["resourceVersion"]
    ok = http.patch(cm_path(namespace, "p"), content=json.dumps(patch).replace("{rv}", current),
                    headers={"Content-Type": content_type})
    assert ok.status_code == 200, ok.text
    assert ok.json()["data"] == {"v": "2"}


def test_put_and_delete_of_a_missing_object_are_404(http: httpx.Client, namespace: str) -> None:
    assert_status(http.put(cm_path(namespace, "ghost"), json=configmap("ghost")), 404, "NotFound")
    assert_status(http.delete(cm_path(namespace, "ghost")), 404, "NotFound")
    assert_status(http.patch(cm_path(namespace, "ghost"), headers={"Content-Type": MERGE}, content=b"{}"),
                  404, "NotFound")


def test_put_of_a_body_from_an_earlier_incarnation_is_409(http: httpx.Client, namespace: str) -> None:
    first = http.post(cm_path(namespace), json=configmap("again", data={"v": "1"})).json()
    http.delete(cm_path(namespace, "again")).raise_for_status()
    http.post(cm_path(namespace), json=configmap("again", data={"v": "2"})).raise_for_status()
    stale = {**first, "metadata": {k: v for k, v in first["metadata"].items() if k != "resourceVersion"}}
    body = assert_status(http.put(cm_path(namespace, "again"), json=stale), 409, "Conflict")
    assert body["message"].startswith('Operation cannot be fulfilled on configmaps "again": ')
    assert f"UID in precondition: {first['metadata']['uid']}" in body["message"]
    assert http.get(cm_path(namespace, "again")).json()["data"] == {"v": "2"}


def test_delete_preconditions_on_uid_and_resource_version_are_409(http: httpx.Client, namespace: str) -> None:
    obj = http.post(cm_path(namespace), json=configmap("pre")).json()
    http.patch(cm_path(namespace, "pre"), headers={"Content-Type": MERGE}, content=b'{"data":{"a":"b"}}')
    for pre in ({"uid": str(uuid.uuid4())}, {"resourceVersion": obj["metadata"]["resourceVersion"]}):
        resp = http.request("DELETE", cm_path(namespace, "pre"), json={"preconditions": pre})
        body = assert_status(resp, 409, "Conflict")
        assert "Precondition failed" in body["message"]
    current = http.get(cm_path(namespace, "pre")).json()["metadata"]
    ok = http.request("DELETE", cm_path(namespace, "pre"), json={"preconditions": {
        "uid": current["uid"], "resourceVersion": current["resourceVersion"]}})
    assert ok.status_code == 200, ok.text
    assert_status(http.get(cm_path(namespace, "pre")), 404)


def test_dry_run_create_answers_like_a_create_but_stores_nothing(http: httpx.Client, namespace: str) -> None:
    resp = http.post(cm_path(namespace), params={"dryRun": "All"}, json=configmap("dry", data={"a": "b"}))
    assert resp.status_code == 201, resp.text
    assert resp.json()["metadata"]["uid"] and resp.json()["data"] == {"a": "b"}
    assert_status(http.get(cm_path(namespace, "dry")), 404)
    invalid = http.post(cm_path(namespace), params={"dryRun": "All"}, json=configmap("Dry_Run"))
    assert_status(invalid, 422, "Invalid")  # validation still runs


def test_invalid_name_is_422_invalid_with_causes(core: Any, namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("Bad_Name"))
    assert e.value.status == 422
    body = error_body(e.value)
    assert body["kind"] == "Status" and body["reason"] == "Invalid" and body["code"] == 422
    assert body["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
                                      "a lowercase RFC 1123 subdomain")
    assert body["details"]["name"] == "Bad_Name" and body["details"]["kind"] == "ConfigMap"
    [cause] = body["details"]["causes"]
    assert cause["reason"] == "FieldValueInvalid" and cause["field"] == "metadata.name"


def test_namespace_names_must_be_dns_labels(core: Any) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "has.dots"}})
    assert e.value.status == 422
    assert "RFC 1123 label" in error_body(e.value)["message"]


def test_missing_name_is_422_field_value_required(core: Any, namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap(data={"a": "b"}))
    assert e.value.status == 422
    body = error_body(e.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "field": "metadata.name",
                                          "message": "Required value: name or generateName is required"}]


def test_pod_without_containers_is_422_naming_the_missing_field(core: Any, namespace: str) -> None:
    default_sa(core, namespace)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod",
                                               "metadata": {"name": "empty"}, "spec": {"containers": []}})
    assert e.value.status == 422
    body = error_body(e.value)
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Pod"
    assert {"reason": "FieldValueRequired", "field": "spec.containers", "message": "Required value"} in \
        body["details"]["causes"]


def test_job_with_an_invalid_restart_policy_lists_every_cause(http: httpx.Client, namespace: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
           "spec": {"backoffLimit": -1, "template": {"spec": {"restartPolicy": "Always",
                                                              "containers": [{"name": "c"}]}}}}
    body = assert_status(http.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", json=job), 422, "Invalid")
    assert body["details"]["group"] == "batch" and body["details"]["kind"] == "Job"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert {"spec.backoffLimit", "spec.template.spec.restartPolicy", "spec.template.spec.containers[0].image"} <= fields
    assert body["message"].startswith('Job.batch "bad" is invalid: [')


def test_deletecollection_deletes_only_the_selected_objects(core: Any, namespace: str) -> None:
    for i in range(3):
        core.create_namespaced_config_map(namespace, configmap(f"drop-{i}", labels={"batch": "drop"}))
    core.create_namespaced_config_map(namespace, configmap("stay", labels={"batch": "keep"}))
    core.delete_collection_namespaced_config_map(namespace, label_selector="batch=drop")
    left = names(core.list_namespaced_config_map(namespace, label_selector="batch").items)
    assert left == ["stay"]


# -- updates and patches -----------------------------------------------------------------------


def test_put_replaces_the_whole_object(core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("put", labels={"a": "1"}, data={"x": "1", "y": "2"}))
    replaced = core.replace_namespaced_config_map("put", namespace, configmap("put", data={"z": "3"}))
    assert replaced.data == {"z": "3"}
    assert not replaced.metadata.labels


def test_json_merge_patch_merges_maps_and_null_deletes(http: httpx.Client, namespace: str) -> None:
    http.post(cm_path(namespace), json=configmap("mp", labels={"a": "1", "b": "2"}, data={"x": "1", "y": "2"}))
    resp = http.patch(cm_path(namespace, "mp"), headers={"Content-Type": MERGE},
                      content=json.dumps({"metadata": {"labels": {"a": None, "c": "3"}}, "data": {"x": "9"}}))
    assert resp.status_code == 200, resp.text
    obj = resp.json()
    assert obj["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert obj["data"] == {"x": "9", "y": "2"}


def test_json_patch_applies_operations_in_order_and_a_failed_test_is_422(http: httpx.Client, namespace: str) -> None:
    http.post(cm_path(namespace), json=configmap("jp", data={"x": "1"}))
    ops = [{"op": "add", "path": "/data/y", "value": "2"},
           {"op": "test", "path": "/data/y", "value": "2"},
           {"op": "remove", "path": "/data/x"},
           {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}]
    resp = http.patch(cm_path(namespace, "jp"), headers={"Content-Type": JSON_PATCH}, content=json.dumps(ops))
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"] == {"y": "2"}
    assert resp.json()["metadata"]["labels"] == {"k": "v"}
    failed = http.patch(cm_path(namespace, "jp"), headers={"Content-Type": JSON_PATCH},
                        content=json.dumps([{"op": "test", "path": "/data/y", "value": "nope"},
                                            {"op": "remove", "path": "/data/y"}]))
    assert_status(failed, 422)
    assert http.get(cm_path(namespace, "jp")).json()["data"] == {"y": "2"}
    malformed = http.patch(cm_path(namespace, "jp"), headers={"Content-Type": JSON_PATCH},
                           content=json.dumps({"op": "add"}))
    assert_status(malformed, 400, "BadRequest")


def test_strategic_merge_patch_merges_containers_and_env_by_name(core: Any, namespace: str) -> None:
    default_sa(core, namespace)
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smp"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "a", "image": "busybox:1", "command": ["true"],
             "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "b", "image": "busybox:1", "command": ["true"]},
        ]},
    })
    # Only images may change on a pod, so a patch that *replaced* `env` (dropping Y) or the
    # container list would be rejected; merging by name keeps the rest and the pod spec valid.
    patched = core.patch_namespaced_pod("smp", namespace, {"spec": {"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "busybox:2"},
    ]}})
    containers = {c.name: c for c in patched.spec.containers}
    assert [c.name for c in patched.spec.containers] == ["a", "b"]
    assert containers["b"].image == "busybox:2"
    assert containers["a"].image == "busybox:1"
    assert [(e.name, e.value) for e in containers["a"].env] == [("X", "1"), ("Y", "2")]
    assert containers["b"].command == ["true"]


def test_strategic_merge_patch_deletes_list_items_with_patch_directive(http: httpx.Client, namespace: str) -> None:
    owner = http.post(cm_path(namespace), json=configmap("o1")).json()
    other = http.post(cm_path(namespace), json=configmap("o2")).json()
    http.post(cm_path(namespace), json=configmap("dep", ownerReferences=[owner_ref(owner), owner_ref(other)]))
    resp = http.patch(cm_path(namespace, "dep"), headers={"Content-Type": STRATEGIC}, content=json.dumps(
        {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner["metadata"]["uid"]}]}}))
    assert resp.status_code == 200, resp.text
    assert [r["name"] for r in resp.json()["metadata"]["ownerReferences"]] == ["o2"]


def test_strategic_merge_patch_on_a_custom_resource_is_415(http: httpx.Client, namespace: str, widgets: CRD) -> None:
    http.post(widgets.path(namespace), json=widgets.obj("smp", size=1)).raise_for_status()
    resp = http.patch(widgets.path(namespace, "smp"), headers={"Content-Type": STRATEGIC},
                      content=json.dumps({"spec": {"size": 2}}))
    body = assert_status(resp, 415, "UnsupportedMediaType")
    assert "application/merge-patch+json" in body["message"]
    ok = http.patch(widgets.path(namespace, "smp"), headers={"Content-Type": MERGE},
                    content=json.dumps({"spec": {"size": 2}}))
    assert ok.status_code == 200 and ok.json()["spec"]["size"] == 2


def test_unknown_patch_content_type_is_415(http: httpx.Client, namespace: str) -> None:
    http.post(cm_path(namespace), json=configmap("ct"))
    resp = http.patch(cm_path(namespace, "ct"), headers={"Content-Type": "text/plain"}, content=b"{}")
    body = assert_status(resp, 415, "UnsupportedMediaType")
    assert body["message"] == "415: Unsupported Media Type"  # go-restful's refusal, as apiserver wraps it


def test_noop_update_keeps_the_resource_version(core: Any, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, configmap("same", labels={"a": "1"}, data={"k": "v"}))
    put = core.replace_namespaced_config_map("same", namespace, configmap(
        "same", labels={"a": "1"}, data={"k": "v"}, resourceVersion=created.metadata.resource_version))
    assert put.metadata.resource_version == created.metadata.resource_version
    patched = core.patch_namespaced_config_map("same", namespace, {"data": {"k": "v"}})
    assert patched.metadata.resource_version == created.metadata.resource_version
    changed = core.patch_namespaced_config_map("same", namespace, {"data": {"k": "w"}})
    assert int(changed.metadata.resource_version) > int(created.metadata.resource_version)


def test_custom_resource_put_requires_a_resource_version(http: httpx.Client, namespace: str, widgets: CRD) -> None:
    http.post(widgets.path(namespace), json=widgets.obj("norv", size=1)).raise_for_status()
    body = assert_status(http.put(widgets.path(namespace, "norv"), json=widgets.obj("norv", size=2)), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


# -- status subresource --------------------------------------------------------------------------


def test_custom_resource_main_endpoint_ignores_status_and_status_endpoint_ignores_the_rest(
        http: httpx.Client, namespace: str, widgets: CRD) -> None:
    body = widgets.obj("split", size=1)
    body["status"] = {"phase": "Forged"}
    created = http.post(widgets.path(namespace), json=body).json()
    assert "status" not in created  # create drops status when the status subresource is on

    cur = http.patch(widgets.path(namespace, "split", "status"), headers={"Content-Type": MERGE},
                     content=json.dumps({"status": {"phase": "Ready"}})).json()
    assert cur["status"] == {"phase": "Ready"}

    put = dict(cur, spec={"size": 5}, status={"phase": "Hacked"})
    main = http.put(widgets.path(namespace, "split"), json=put)
    assert main.status_code == 200, main.text
    assert main.json()["spec"]["size"] == 5
    assert main.json()["status"] == {"phase": "Ready"}

    cur = main.json()
    via_status = dict(cur, spec={"size": 9}, status={"phase": "Done", "observed": 2})
    via_status["metadata"] = dict(cur["metadata"], labels={"sneaky": "yes"})
    st = http.put(widgets.path(namespace, "split", "status"), json=via_status)
    assert st.status_code == 200, st.text
    assert st.json()["status"] == {"phase": "Done", "observed": 2}
    assert st.json()["spec"]["size"] == 5
    assert "labels" not in st.json()["metadata"]
    assert st.json()["metadata"]["generation"] == 2  # only the one spec change counted
    # /status honours resourceVersion preconditions like the main endpoint.
    assert_status(http.put(widgets.path(namespace, "split", "status"), json=via_status), 409, "Conflict")


def test_custom_resource_without_status_subresource_stores_status_and_counts_it_in_generation(
        kube: client.ApiClient, http: httpx.Client, namespace: str) -> None:
    crd = CRD(f"n{uuid.uuid4().hex[:8]}.example.com", "gizmos", "Gizmo")
    ext: Any = client.ApiextensionsV1Api(kube)
    ext.create_custom_resource_definition(crd_body(crd.group, crd.plural, crd.kind, status_subresource=False))
    try:
        body = crd.obj("plain", size=1)
        body["status"] = {"phase": "Set"}
        created = http.post(crd.path(namespace), json=body).json()
        assert created["status"] == {"phase": "Set"}
        assert created["metadata"]["generation"] == 1
        assert_status(http.get(crd.path(namespace, "plain", "status")), 404)
        patched = http.patch(crd.path(namespace, "plain"), headers={"Content-Type": MERGE},
                             content=json.dumps({"status": {"phase": "Changed"}}))
        assert patched.json()["status"] == {"phase": "Changed"}
        assert patched.json()["metadata"]["generation"] == 2
        resources = {r["name"] for r in http.get(f"/apis/{crd.group}/v1").json()["resources"]}
        assert resources == {"gizmos"}
    finally:
        ext.delete_custom_resource_definition(f"{crd.plural}.{crd.group}")


def test_job_main_endpoint_ignores_status_and_status_endpoint_ignores_spec(http: httpx.Client,
                                                                             namespace: str) -> None:
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "split"},
           "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                           "containers": [{"name": "c", "image": "busybox",
                                                                           "command": ["true"]}]}}}}
    created = http.post(jobs, json=job).json()
    assert created["metadata"]["generation"] == 1

    main = http.patch(f"{jobs}/split", headers={"Content-Type": MERGE},
                      content=json.dumps({"spec": {"activeDeadlineSeconds": 600}, "status": {"succeeded": 7}}))
    assert main.status_code == 200, main.text
    assert main.json()["spec"]["activeDeadlineSeconds"] == 600
    assert main.json()["status"].get("succeeded") != 7
    assert main.json()["metadata"]["generation"] == 2

    st = http.patch(f"{jobs}/split/status", headers={"Content-Type": MERGE},
                    content=json.dumps({"spec": {"activeDeadlineSeconds": 5}, "status": {"failed": 4}}))
    assert st.status_code == 200, st.text
    assert st.json()["status"]["failed"] == 4
    assert st.json()["spec"]["activeDeadlineSeconds"] == 600
    assert st.json()["metadata"]["generation"] == 2


# -- selectors and paging -------------------------------------------------------------------------


@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=web", ["a"]),
    ("tier==web", ["a"]),
    ("tier!=web", ["b", "c", "d"]),
    ("tier in (web,db)", ["a", "b"]),
    ("tier notin (web,db)", ["c", "d"]),
    ("tier", ["a", "b", "c"]),
    ("!tier", ["d"]),
    ("tier,env=prod", ["a", "c"]),
    ("tier in (web,db),env!=prod", ["b"]),
])
def test_label_selectors_have_kubernetes_semantics(core: Any, namespace: str,
                                                   selector: str, expected: list[str]) -> None:
    for name, labels in {"a": {"tier": "web", "env": "prod"}, "b": {"tier": "db", "env": "dev"},
                         "c": {"tier": "cache", "env": "prod"}, "d": {"env": "dev"}}.items():
        core.create_namespaced_config_map(namespace, configmap(name, labels={"set": "sel", **labels}))
    found = names(core.list_namespaced_config_map(namespace, label_selector=f"set=sel,{selector}").items)
    assert found == expected


def test_field_selectors_on_name_and_namespace(core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("one"))
    core.create_namespaced_config_map(namespace, configmap("two"))
    assert names(core.list_namespaced_config_map(namespace, field_selector="metadata.name=one").items) == ["one"]
    not_one = names(core.list_namespaced_config_map(namespace, field_selector="metadata.name!=one").items)
    assert "one" not in not_one and "two" in not_one
    everywhere = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={namespace}")
    assert {i.metadata.namespace for i in everywhere.items} == {namespace}
    assert {"one", "two"} <= set(names(everywhere.items))
    both = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={namespace},metadata.name=two")
    assert names(both.items) == ["two"]


def test_field_selector_on_pod_phase(core: Any, namespace: str) -> None:
    run_pod(core, namespace, "ok", ["true"])
    run_pod(core, namespace, "bad", ["false"], phase="Failed")
    assert names(core.list_namespaced_pod(namespace, field_selector="status.phase=Succeeded").items) == ["ok"]
    assert names(core.list_namespaced_pod(namespace, field_selector="status.phase=Failed").items) == ["bad"]
    assert names(core.list_namespaced_pod(namespace, field_selector="status.phase!=Failed").items) == ["ok"]


@pytest.mark.parametrize("query", [
    {"labelSelector": "tier in (web"},
    {"labelSelector": "tier notin web"},
    {"labelSelector": "=web"},
    {"labelSelector": "Bad Key=x"},
    {"fieldSelector": "metadata.name"},
    {"fieldSelector": "spec.nodeName=x"},
    {"fieldSelector": "status.phase=Running"},
], ids=lambda q: next(iter(q.values())))
def test_malformed_or_unsupported_selectors_are_400(http: httpx.Client, namespace: str, query: dict[str, str]) -> None:
    assert_status(http.get(cm_path(namespace), params=query), 400, "BadRequest")


def test_limit_and_continue_page_through_a_list_in_name_order(core: Any, namespace: str) -> None:
    for i in (3, 1, 4, 0, 2):
        core.create_namespaced_config_map(namespace, configmap(f"page-{i}", labels={"paged": "y"}))
    seen: list[str] = []
    page = core.list_namespaced_config_map(namespace, label_selector="paged", limit=2)
    assert names(page.items) == ["page-0", "page-1"]
    assert page.metadata._continue and page.metadata.remaining_item_count == 3
    seen += names(page.items)
    while page.metadata._continue:
        page = core.list_namespaced_config_map(namespace, label_selector="paged", limit=2,
                                               _continue=page.metadata._continue)
        assert len(page.items) <= 2
        seen += names(page.items)
    assert seen == [f"page-{i}" for i in range(5)]
    assert page.metadata.remaining_item_count is None


# -- watch ----------------------------------------------------------------------------------------


def test_watch_delivers_added_modified_deleted_in_order(core: Any, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, configmap("w"))
    core.patch_namespaced_config_map("w", namespace, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("w", namespace)
    events = collect(core.list_namespaced_config_map, namespace, resource_version=start, count=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(e["object"]["metadata"]["name"] == "w" for e in events)
    assert events[1]["object"]["data"] == {"k": "v"}
    versions = [rv(e["object"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_watch_streams_live_changes_after_the_initial_state(core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("before", labels={"live": "y"}))
    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    for ev in w.stream(core.list_namespaced_config_map, namespace, label_selector="live", timeout_seconds=10,
                       _request_timeout=20):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 1:  # the watch is open: everything from here on arrives live
            core.create_namespaced_config_map(namespace, configmap("after", labels={"live": "y"}))
            core.patch_namespaced_config_map("after", namespace, {"data": {"a": "b"}})
            core.delete_namespaced_config_map("after", namespace)
        if ev["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "before"), ("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_watch_resumes_after_the_given_resource_version(core: Any, namespace: str) -> None:
    a = core.create_namespaced_config_map(namespace, configmap("a"))
    core.patch_namespaced_config_map("a", namespace, {"data": {"n": "1"}})
    core.create_namespaced_config_map(namespace, configmap("b"))
    events = collect(core.list_namespaced_config_map, namespace, resource_version=a.metadata.resource_version,
                     count=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "a"), ("ADDED", "b")]


def test_watch_timeout_seconds_closes_the_stream(http: httpx.Client, namespace: str) -> None:
    began = time.monotonic()
    events = watch_events(http, cm_path(namespace), timeout=1,
                          resourceVersion=http.get(cm_path(namespace)).json()["metadata"]["resourceVersion"])
    elapsed = time.monotonic() - began
    assert events == []
    assert 0.9 <= elapsed < 5, elapsed


def test_watch_with_allow_bookmarks_sends_bookmark_events(http: httpx.Client, namespace: str) -> None:
    start = http.get(cm_path(namespace)).json()["metadata"]["resourceVersion"]
    events = watch_events(http, cm_path(namespace), count=1, timeout=5, resourceVersion=start,
                          allowWatchBookmarks="true")
    [bookmark] = events
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "ConfigMap" and bookmark["object"]["apiVersion"] == "v1"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(start)


def test_watch_without_bookmarks_never_sends_them(http: httpx.Client, namespace: str) -> None:
    start = http.get(cm_path(namespace)).json()["metadata"]["resourceVersion"]
    assert watch_events(http, cm_path(namespace), timeout=1, resourceVersion=start) == []


def test_watch_from_a_version_older_than_the_window_is_410_expired(tmp_path: Path) -> None:
    with running_localkube(tmp_path, event_window=5) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        core: Any = client.CoreV1Api(api)
        start = core.list_namespaced_config_map("default").metadata.resource_version
        for i in range(8):
            core.create_namespaced_config_map("default", configmap(f"old-{i}"))
        with httpx.Client(base_url=lk.url, verify=ssl_context(lk.kubeconfig),
                          headers={"Authorization": f"Bearer {lk.token}"}) as http:
            [event] = watch_events(http, cm_path("default"), timeout=5, resourceVersion=start)
            assert event["type"] == "ERROR"
            status = event["object"]
            assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
            assert status["message"].startswith(f"too old resource version: {start} (")
            # A version inside the window still resumes.
            recent = core.list_namespaced_config_map("default").items[-1].metadata.resource_version
            core.create_namespaced_config_map("default", configmap("fresh"))
            [added] = watch_events(http, cm_path("default"), count=1, timeout=5, resourceVersion=recent)
            assert added["type"] == "ADDED" and added["object"]["metadata"]["name"] == "fresh"
        with pytest.raises(ApiException) as e:
            collect(core.list_namespaced_config_map, "default", resource_version=start, count=1, timeout=3)
        assert e.value.status == 410
        api.close()


def test_selector_filtered_watch_reports_objects_leaving_and_entering_the_selector(
        core: Any, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, configmap("mover", labels={"app": "sel"}))
    core.patch_namespaced_config_map("mover", namespace, {"metadata": {"labels": {"app": "other"}}})
    core.patch_namespaced_config_map("mover", namespace, {"data": {"ignored": "while outside"}})
    core.patch_namespaced_config_map("mover", namespace, {"metadata": {"labels": {"app": "sel"}}})
    core.delete_namespaced_config_map("mover", namespace)
    events = collect(core.list_namespaced_config_map, namespace, resource_version=start, label_selector="app=sel",
                     count=4)
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED", "DELETED"]
    # The DELETED for leaving the selector carries the object as it now is (outside it).
    assert events[1]["object"]["metadata"]["labels"] == {"app": "other"}


def test_field_selector_watch_only_sees_the_named_object(core: Any, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, configmap("noise"))
    core.create_namespaced_config_map(namespace, configmap("signal"))
    events = collect(core.list_namespaced_config_map, namespace, resource_version=start,
                     field_selector="metadata.name=signal", count=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "signal")]


def test_all_namespaces_watch_sees_every_namespace(core: Any, namespace: str) -> None:
    other = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        mark = uuid.uuid4().hex[:8]
        start = core.list_config_map_for_all_namespaces(limit=1).metadata.resource_version
        core.create_namespaced_config_map(namespace, configmap("x", labels={"mark": mark}))
        core.create_namespaced_config_map(other, configmap("x", labels={"mark": mark}))
        events = collect(core.list_config_map_for_all_namespaces, resource_version=start,
                         label_selector=f"mark={mark}", count=2)
        assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in events] == [
            ("ADDED", namespace), ("ADDED", other)]
    finally:
        core.delete_namespace(other)


def test_namespaced_watch_does_not_see_other_namespaces(core: Any, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map("default", configmap(f"elsewhere-{uuid.uuid4().hex[:6]}"))
    core.create_namespaced_config_map(namespace, configmap("here"))
    events = collect(core.list_namespaced_config_map, namespace, resource_version=start, count=1)
    assert events[0]["object"]["metadata"]["name"] == "here"


def test_custom_resource_watch(custom: Any, namespace: str, widgets: CRD) -> None:
    start = custom.list_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural)["metadata"][
        "resourceVersion"]
    custom.create_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural, widgets.obj("cw", size=1))
    custom.patch_namespaced_custom_object_status(widgets.group, "v1", namespace, widgets.plural, "cw",
                                                 {"status": {"phase": "Up"}}, _content_type=MERGE)
    custom.delete_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural, "cw")
    events = collect(custom.list_namespaced_custom_object, widgets.group, "v1", namespace, widgets.plural,
                     resource_version=start, count=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[0]["object"]["kind"] == widgets.kind
    assert events[0]["object"]["apiVersion"] == widgets.api_version
    assert events[1]["object"]["status"] == {"phase": "Up"}


# -- custom resource definitions ---------------------------------------------------------------


def test_crd_registers_its_resource_in_discovery(http: httpx.Client, widgets: CRD) -> None:
    groups = http.get("/apis").json()
    [group] = [g for g in groups["groups"] if g["name"] == widgets.group]
    assert group["preferredVersion"] == {"groupVersion": widgets.api_version, "version": "v1"}
    resources = http.get(f"/apis/{widgets.group}/v1").json()
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == widgets.api_version
    by_name = {r["name"]: r for r in resources["resources"]}
    main = by_name["widgets"]
    assert main["kind"] == "Widget" and main["singularName"] == "widget"
    assert main["namespaced"] is True
    assert main["shortNames"] == ["wg"]
    assert set(main["verbs"]) == {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    assert set(by_name["widgets/status"]["verbs"]) == {"get", "patch", "update"}


def test_crd_is_established_with_accepted_names(kube: client.ApiClient, widgets: CRD) -> None:
    crd: Any = client.ApiextensionsV1Api(kube).read_custom_resource_definition(f"{widgets.plural}.{widgets.group}")
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    assert crd.status.accepted_names.short_names == ["wg"]
    assert crd.status.stored_versions == ["v1"]


def test_custom_resource_gets_schema_defaults(custom: Any, namespace: str, widgets: CRD) -> None:
    obj = custom.create_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural,
                                                 widgets.obj("dflt", size=3))
    assert obj["spec"] == {"size": 3, "color": "blue", "limits": {"cpu": 2}}
    got = custom.get_namespaced_custom_object(widgets.group, "v1", namespace, widgets.plural, "dflt")
    assert got["spec"] == obj["spec"]


@pytest.mark.parametrize(("spec", "field", "reason"), [
    ({"size": "big"}, "spec.size", "FieldValueTypeInvalid"),
    ({"size": 0}, "spec.size", "FieldValueInvalid"),
    ({"color": "blue"}, "spec.size", "FieldValueRequired"),
    ({"size": 1, "color": "purple"}, "spec.color", "FieldValueNotSupported"),
    ({"size": 1, "tags": "x"}, "spec.tags", "FieldValueTypeInvalid"),
], ids=["type", "minimum", "required", "enum", "array"])
def test_custom_resource_schema_violations_are_422(http: httpx.Client, namespace: str, widgets: CRD,
                                                   spec: Obj, field: str, reason: str) -> None:
    body = assert_status(http.post(widgets.path(namespace), json=widgets.obj("bad", **spec)), 422, "Invalid")
    assert body["details"]["kind"] == widgets.kind and body["details"]["group"] == widgets.group
    assert body["message"].startswith(f'{widgets.kind}.{widgets.group} "bad" is invalid: {field}')
    assert {"field": field, "reason": reason} in [{"field": c["field"], "reason": c["reason"]}
                                                  for c in body["details"]["causes"]]


def test_unknown_custom_resource_fields_are_pruned_with_a_warning(http: httpx.Client, namespace: str,
                                                                  widgets: CRD) -> None:
    body = widgets.obj("prune", size=1, extra="gone")
    body["topLevel"] = 1
    resp = http.post(widgets.path(namespace), json=body)
    assert resp.status_code == 201, resp.text
    assert "extra" not in resp.json()["spec"] and "topLevel" not in resp.json()
    warnings = resp.headers.get_list("warning")
    # The warn-text is a quoted string, so its own quotes are escaped, as kube-apiserver sends it.
    assert '299 - "unknown field \\"spec.extra\\""' in warnings, warnings
    stored = http.get(widgets.path(namespace, "prune")).json()
    assert "extra" not in stored["spec"]


def test_unknown_custom_resource_fields_with_strict_validation_are_400(http: httpx.Client, namespace: str,
                                                                       widgets: CRD) -> None:
    resp = http.post(widgets.path(namespace), params={"fieldValidation": "Strict"},
                     json=widgets.obj("strict", size=1, extra="no"))
    body = assert_status(resp, 400, "BadRequest")
    assert 'unknown field "spec.extra"' in body["message"]
    assert_status(http.get(widgets.path(namespace, "strict")), 404)


def test_deleting_a_crd_removes_its_resource_and_objects(kube: client.ApiClient, http: httpx.Client) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    ext: Any = client.ApiextensionsV1Api(kube)
    custom: Any = client.CustomObjectsApi(kube)
    name = f"gadgets.{group}"
    ext.create_custom_resource_definition(crd_body(group, "gadgets", "Gadget", scope="Cluster"))
    resources = http.get(f"/apis/{group}/v1").json()["resources"]
    assert [r["namespaced"] for r in resources if r["name"] == "gadgets"] == [False]
    custom.create_cluster_custom_object(group, "v1", "gadgets", {"apiVersion": f"{group}/v1", "kind": "Gadget",
                                                                 "metadata": {"name": "g1"}, "spec": {"size": 1}})
    ext.delete_custom_resource_definition(name)
    wait_for(lambda: gone(lambda: ext.read_custom_resource_definition(name)), what="the CRD to be deleted")
    assert_status(http.get(f"/apis/{group}/v1"), 404)
    assert_status(http.get(f"/apis/{group}/v1/gadgets"), 404)
    assert group not in [g["name"] for g in http.get("/apis").json()["groups"]]
    # Recreating the CRD does not bring the old objects back.
    ext.create_custom_resource_definition(crd_body(group, "gadgets", "Gadget", scope="Cluster"))
    try:
        assert custom.list_cluster_custom_object(group, "v1", "gadgets")["items"] == []
    finally:
        ext.delete_custom_resource_definition(name)


# -- finalizers and garbage collection ---------------------------------------------------------


def test_object_with_a_finalizer_stays_until_the_finalizer_is_removed(core: Any, http: httpx.Client,
                                                                      namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("held", finalizers=["example.com/hold"]))
    resp = http.delete(cm_path(namespace, "held"))
    assert resp.status_code in (200, 202), resp.text
    assert resp.json()["metadata"]["deletionTimestamp"]
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["example.com/hold"]
    # Deleting again changes nothing; adding a finalizer while deleting is refused.
    again = http.delete(cm_path(namespace, "held"))
    assert again.json()["metadata"]["resourceVersion"] == held.metadata.resource_version
    refused = http.patch(cm_path(namespace, "held"), headers={"Content-Type": MERGE}, content=json.dumps(
        {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}))
    assert_status(refused, 422, "Invalid")
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    assert gone(lambda: core.read_namespaced_config_map("held", namespace))


def test_delete_held_by_a_finalizer_answers_200_like_kube_apiserver(http: httpx.Client, namespace: str) -> None:
    http.post(cm_path(namespace), json=configmap("held200", finalizers=["example.com/hold"]))
    try:
        assert http.delete(cm_path(namespace, "held200")).status_code == 200
    finally:
        http.patch(cm_path(namespace, "held200"), headers={"Content-Type": MERGE},
                   content=json.dumps({"metadata": {"finalizers": None}}))


def test_background_deletion_collects_dependents(core: Any, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, configmap("owner"))
    raw_owner = client.ApiClient().sanitize_for_serialization(owner)
    for i in range(2):
        core.create_namespaced_config_map(namespace, configmap(f"dep-{i}", ownerReferences=[owner_ref(raw_owner)]))
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")
    assert gone(lambda: core.read_namespaced_config_map("owner", namespace))  # the owner goes at once
    wait_for(lambda: all(gone(partial(core.read_namespaced_config_map, d, namespace)) for d in ("dep-0", "dep-1")),
             what="both dependents to be collected")


def test_foreground_deletion_waits_for_blocking_dependents(core: Any, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    owner = client.ApiClient().sanitize_for_serialization(
        core.create_namespaced_config_map(namespace, configmap("fg-owner")))
    core.create_namespaced_config_map(namespace, configmap(
        "blocker", ownerReferences=[owner_ref(owner, block=True)], finalizers=["example.com/hold"]))
    core.create_namespaced_config_map(namespace, configmap("free", ownerReferences=[owner_ref(owner)]))
    core.delete_namespaced_config_map("fg-owner", namespace, propagation_policy="Foreground")

    deleting = core.read_namespaced_config_map("fg-owner", namespace)
    assert deleting.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in deleting.metadata.finalizers
    wait_for(lambda: core.read_namespaced_config_map("blocker", namespace).metadata.deletion_timestamp,
             what="the blocking dependent to be deleted")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("free", namespace)),
             what="the non-blocking dependent to be collected")
    # The blocking dependent still exists (held by its own finalizer), so the owner waits.
    waiting = core.read_namespaced_config_map("fg-owner", namespace)
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    assert core.read_namespaced_config_map("blocker", namespace).metadata.finalizers == ["example.com/hold"]

    core.patch_namespaced_config_map("blocker", namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("fg-owner", namespace)),
             what="the owner to go once its blocking dependent is gone")
    # A dependent without dependents of its own is deleted in the background, as by the real
    # garbage collector: it never carries the foregroundDeletion finalizer itself.
    history = collect(core.list_namespaced_config_map, namespace, resource_version=start,
                      field_selector="metadata.name=blocker", count=3)
    assert [e["type"] for e in history] == ["ADDED", "MODIFIED", "DELETED"]
    assert all("foregroundDeletion" not in (e["object"]["metadata"].get("finalizers") or []) for e in history)


def test_orphan_deletion_keeps_dependents_and_removes_their_owner_references(core: Any,
                                                                             namespace: str) -> None:
    owner = client.ApiClient().sanitize_for_serialization(
        core.create_namespaced_config_map(namespace, configmap("or-owner")))
    other = client.ApiClient().sanitize_for_serialization(
        core.create_namespaced_config_map(namespace, configmap("other-owner")))
    core.create_namespaced_config_map(namespace, configmap("orphan", ownerReferences=[owner_ref(owner)]))
    core.create_namespaced_config_map(namespace, configmap(
        "shared", ownerReferences=[owner_ref(owner), owner_ref(other)]))
    core.delete_namespaced_config_map("or-owner", namespace, propagation_policy="Orphan")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("or-owner", namespace)),
             what="the owner to be deleted")
    assert not core.read_namespaced_config_map("orphan", namespace).metadata.owner_references
    shared = core.read_namespaced_config_map("shared", namespace)
    assert [r.name for r in shared.metadata.owner_references] == ["other-owner"]


def test_dependent_with_a_missing_owner_is_collected(core: Any, namespace: str) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    core.create_namespaced_config_map(namespace, configmap("stray", ownerReferences=[ghost]))
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("stray", namespace)),
             what="the dependent of a missing owner to be collected")


def test_dependent_keeps_living_while_one_of_its_owners_exists(core: Any, namespace: str) -> None:
    a = client.ApiClient().sanitize_for_serialization(core.create_namespaced_config_map(namespace, configmap("a")))
    b = client.ApiClient().sanitize_for_serialization(core.create_namespaced_config_map(namespace, configmap("b")))
    core.create_namespaced_config_map(namespace, configmap("both", ownerReferences=[owner_ref(a), owner_ref(b)]))
    core.delete_namespaced_config_map("a", namespace, propagation_policy="Background")
    wait_for(lambda: [r.name for r in core.read_namespaced_config_map("both", namespace).metadata.owner_references]
             == ["b"], what="the deleted owner's reference to be dropped")
    core.delete_namespaced_config_map("b", namespace)
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("both", namespace)),
             what="the dependent to go with its last owner")


def test_deleting_a_job_orphans_its_pods_by_default_with_a_warning(core: Any, http: httpx.Client,
                                                                   namespace: str) -> None:
    default_sa(core, namespace)
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    http.post(jobs, json={"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "orph"},
                          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                              {"name": "c", "image": "busybox", "command": ["true"]}]}}}}).raise_for_status()
    pod = wait_for(lambda: core.list_namespaced_pod(namespace, label_selector="job-name=orph").items,
                   what="the Job's pod")[0]
    assert [r.kind for r in pod.metadata.owner_references] == ["Job"]
    resp = http.delete(f"{jobs}/orph")
    # 200 on a real server; see test_delete_held_by_a_finalizer_answers_200_like_kube_apiserver.
    assert resp.is_success, resp.text
    assert resp.json()["metadata"]["finalizers"] == ["orphan"]
    warning = resp.headers.get("warning", "")
    assert warning.startswith("299 - ") and "child pods are preserved by default" in warning
    wait_for(lambda: http.get(f"{jobs}/orph").status_code == 404, what="the Job to be deleted")
    wait_for(lambda: not core.read_namespaced_pod(pod.metadata.name, namespace).metadata.owner_references,
             what="the pod's ownerReference to be removed")
    assert core.read_namespaced_pod(pod.metadata.name, namespace).metadata.name == pod.metadata.name


def test_deleting_a_job_with_background_propagation_removes_its_pods(core: Any, http: httpx.Client,
                                                                     namespace: str) -> None:
    default_sa(core, namespace)
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    http.post(jobs, json={"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bg"},
                          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                              {"name": "c", "image": "busybox", "command": ["true"]}]}}}}).raise_for_status()
    wait_for(lambda: core.list_namespaced_pod(namespace, label_selector="job-name=bg").items, what="the Job's pod")
    resp = http.delete(f"{jobs}/bg", params={"propagationPolicy": "Background"})
    assert resp.status_code == 200 and "warning" not in resp.headers
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="job-name=bg").items,
             what="the Job's pods to be collected")


# -- namespaces ------------------------------------------------------------------------------------


def test_every_namespace_gets_a_default_service_account(core: Any, namespace: str) -> None:
    default_sa(core, namespace)
    wait_for(lambda: not gone(lambda: core.read_namespaced_config_map("kube-root-ca.crt", namespace)),
             what="the kube-root-ca.crt ConfigMap")


def test_namespace_deletion_removes_its_objects_and_then_the_namespace(core: Any, custom: Any, widgets: CRD) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    core.create_namespaced_config_map(ns, configmap("plain"))
    core.create_namespaced_config_map(ns, configmap("held", finalizers=["example.com/hold"]))
    custom.create_namespaced_custom_object(widgets.group, "v1", ns, widgets.plural, widgets.obj("cr", size=1))
    core.delete_namespace(ns)
    terminating = core.read_namespace(ns)
    assert terminating.status.phase == "Terminating" and terminating.metadata.deletion_timestamp
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("plain", ns)), what="plain to be deleted")
    wait_for(lambda: gone(lambda: custom.get_namespaced_custom_object(widgets.group, "v1", ns, widgets.plural, "cr")),
             what="the custom resource to be deleted")
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, configmap("late"))
    assert e.value.status == 403
    assert "because it is being terminated" in error_body(e.value)["message"]
    assert core.read_namespace(ns).status.phase == "Terminating"  # held by the finalizer inside it
    core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    wait_for(lambda: gone(lambda: core.read_namespace(ns)), what="the namespace to be removed")
    assert gone(lambda: core.read_namespaced_config_map("held", ns))


def test_creating_in_a_missing_namespace_is_404(core: Any) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("no-such-ns", configmap("x"))
    assert e.value.status == 404
    assert error_body(e.value)["message"] == 'namespaces "no-such-ns" not found'


# -- persistence -----------------------------------------------------------------------------------


def test_persisted_objects_and_watch_positions_survive_a_restart(tmp_path: Path) -> None:
    with running_localkube(tmp_path, persist=True) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        core: Any = client.CoreV1Api(api)
        created = core.create_namespaced_config_map("default", configmap("kept", data={"a": "1"}))
        modified = core.patch_namespaced_config_map("kept", "default", {"data": {"b": "2"}})
        api.close()
    with running_localkube(tmp_path, persist=True) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        core = client.CoreV1Api(api)
        back = core.read_namespaced_config_map("kept", "default")
        assert back.metadata.uid == created.metadata.uid
        assert back.metadata.resource_version == modified.metadata.resource_version
        assert back.data == {"a": "1", "b": "2"}
        after = core.patch_namespaced_config_map("kept", "default", {"data": {"c": "3"}})
        assert int(after.metadata.resource_version) > int(modified.metadata.resource_version)
        events = collect(core.list_namespaced_config_map, "default", resource_version=created.metadata.resource_version,
                         field_selector="metadata.name=kept", count=2)
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
            ("MODIFIED", modified.metadata.resource_version), ("MODIFIED", after.metadata.resource_version)]
        api.close()


def test_without_persist_a_restart_starts_empty(tmp_path: Path) -> None:
    with running_localkube(tmp_path) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        core: Any = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", configmap("fleeting"))
        api.close()
    with running_localkube(tmp_path) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        assert gone(lambda: client.CoreV1Api(api).read_namespaced_config_map("fleeting", "default"))
        api.close()


# -- authentication and RBAC -----------------------------------------------------------------------


def as_token(localkube: Handle, token: str) -> httpx.Client:
    return httpx.Client(base_url=localkube.url, verify=ssl_context(localkube.kubeconfig),
                        headers={"Authorization": f"Bearer {token}"}, timeout=30)


def role(name: str, *rules: Obj) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": list(rules)}


def binding(name: str, role_name: str, ns: str, sa: str = "default") -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}


def test_unauthenticated_requests_are_401(localkube: Handle, namespace: str) -> None:
    with httpx.Client(base_url=localkube.url, verify=ssl_context(localkube.kubeconfig)) as anon:
        assert_status(anon.get(cm_path(namespace)), 401, "Unauthorized")
        assert_status(anon.get("/api"), 401, "Unauthorized")
    with as_token(localkube, "not-a-token") as bogus:
        assert_status(bogus.get(cm_path(namespace)), 401, "Unauthorized")


def test_service_account_is_forbidden_until_a_role_binding_allows_it(localkube: Handle, kube: client.ApiClient,
                                                                     core: Any, namespace: str) -> None:
    token = sa_token(core, namespace)
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    user = f"system:serviceaccount:{namespace}:default"
    with as_token(localkube, token) as sa:
        denied = assert_status(sa.get(cm_path(namespace)), 403, "Forbidden")
        assert denied["message"] == (f'configmaps is forbidden: User "{user}" cannot list resource "configmaps" '
                                     f'in API group "" in the namespace "{namespace}"')
        rbac.create_namespaced_role(namespace, role("cm-reader", {"apiGroups": [""], "resources": ["configmaps"],
                                                                  "verbs": ["get", "list", "watch"]}))
        rbac.create_namespaced_role_binding(namespace, binding("cm-reader", "cm-reader", namespace))
        listed = sa.get(cm_path(namespace))
        assert listed.status_code == 200, listed.text
        assert "kube-root-ca.crt" in [i["metadata"]["name"] for i in listed.json()["items"]]
        write = assert_status(sa.post(cm_path(namespace), json=configmap("nope")), 403, "Forbidden")
        assert f'User "{user}" cannot create resource "configmaps"' in write["message"]
        # The grant is namespaced: the same list elsewhere stays forbidden.
        assert_status(sa.get(cm_path("default")), 403, "Forbidden")
        assert_status(sa.get("/api/v1/configmaps"), 403, "Forbidden")


def test_pod_logs_need_a_rule_for_the_log_subresource(localkube: Handle, kube: client.ApiClient,
                                                      core: Any, namespace: str) -> None:
    token = sa_token(core, namespace)
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, role("pods", {"apiGroups": [""], "resources": ["pods"],
                                                         "verbs": ["get"]}))
    rbac.create_namespaced_role_binding(namespace, binding("pods", "pods", namespace))
    log_path = f"/api/v1/namespaces/{namespace}/pods/token-reader/log"
    with as_token(localkube, token) as sa:
        assert sa.get(f"/api/v1/namespaces/{namespace}/pods/token-reader").status_code == 200
        denied = assert_status(sa.get(log_path), 403, "Forbidden")
        assert 'cannot get resource "pods/log" in API group ""' in denied["message"]
        rbac.patch_namespaced_role("pods", namespace, [{"op": "add", "path": "/rules/-", "value": {
            "apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}}])
        allowed = sa.get(log_path)
        assert allowed.status_code == 200 and allowed.text.strip() == token


def test_resource_names_restrict_a_rule_to_the_named_objects(localkube: Handle, kube: client.ApiClient,
                                                             core: Any, namespace: str) -> None:
    token = sa_token(core, namespace)
    for n in ("allowed", "other"):
        core.create_namespaced_config_map(namespace, configmap(n, data={"n": n}))
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, role("one", {"apiGroups": [""], "resources": ["configmaps"],
                                                        "resourceNames": ["allowed"],
                                                        "verbs": ["get", "patch"]}))
    rbac.create_namespaced_role_binding(namespace, binding("one", "one", namespace))
    with as_token(localkube, token) as sa:
        assert sa.get(cm_path(namespace, "allowed")).json()["data"] == {"n": "allowed"}
        patched = sa.patch(cm_path(namespace, "allowed"), headers={"Content-Type": MERGE},
                           content=json.dumps({"data": {"n": "changed"}}))
        assert patched.status_code == 200, patched.text
        assert_status(sa.get(cm_path(namespace, "other")), 403, "Forbidden")
        assert_status(sa.get(cm_path(namespace)), 403, "Forbidden")  # list has no name to match


def test_a_pod_token_stops_working_when_the_pod_is_deleted(localkube: Handle, core: Any,
                                                           namespace: str) -> None:
    token = sa_token(core, namespace)
    with as_token(localkube, token) as sa:
        assert_status(sa.get(cm_path(namespace)), 403)  # authenticated, merely not authorized
        core.delete_namespaced_pod("token-reader", namespace, grace_period_seconds=0)
        wait_for(lambda: gone(lambda: core.read_namespaced_pod("token-reader", namespace)), what="pod deletion")
        assert_status(sa.get(cm_path(namespace)), 401, "Unauthorized")


def test_self_subject_access_review_answers_for_the_caller(localkube: Handle, core: Any,
                                                           namespace: str) -> None:
    token = sa_token(core, namespace)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": namespace, "verb": "list", "resource": "configmaps"}}}
    with as_token(localkube, token) as sa:
        resp = sa.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
        assert resp.status_code == 201, resp.text
        assert resp.json()["status"]["allowed"] is False


# -- fault injection ---------------------------------------------------------------------------------


def test_injected_fault_fails_matching_requests_n_times_then_recovers(localkube: Handle, core: Any,
                                                                      namespace: str) -> None:
    localkube.inject_fault(verb="create", resource="configmaps", namespace=namespace, code=500, times=2)
    try:
        for _ in range(2):
            with pytest.raises(ApiException) as e:
                core.create_namespaced_config_map(namespace, configmap("flaky"))
            assert e.value.status == 500
            body = error_body(e.value)
            assert body["kind"] == "Status" and body["reason"] == "InternalError"
        # Other verbs and resources were never affected.
        core.list_namespaced_config_map(namespace)
        core.create_namespaced_secret(namespace, {"apiVersion": "v1", "kind": "Secret",
                                                  "metadata": {"name": "unaffected"}})
        created = core.create_namespaced_config_map(namespace, configmap("flaky"))
        assert created.metadata.name == "flaky"
    finally:
        localkube.clear_faults()


def test_injected_429_carries_retry_after(localkube: Handle, http: httpx.Client, namespace: str) -> None:
    localkube.inject_fault(verb="patch", resource="configmaps", namespace=namespace, code=429, times=1)
    try:
        http.post(cm_path(namespace), json=configmap("busy"))
        resp = http.patch(cm_path(namespace, "busy"), headers={"Content-Type": MERGE}, content=b'{"data":{}}')
        body = assert_status(resp, 429, "TooManyRequests")
        assert body["details"]["retryAfterSeconds"] >= 1
        again = http.patch(cm_path(namespace, "busy"), headers={"Content-Type": MERGE}, content=b'{"data":{}}')
        assert again.status_code == 200
    finally:
        localkube.clear_faults()


def test_injected_delay_slows_matching_requests(localkube: Handle, core: Any, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, configmap("slow"))
    localkube.inject_fault(verb="get", resource="configmaps", namespace=namespace, name="slow",
                           delay_seconds=0.5, times=1)
    try:
        began = time.monotonic()
        assert core.read_namespaced_config_map("slow", namespace).metadata.name == "slow"
        assert time.monotonic() - began >= 0.5
        [fault] = localkube.admin("GET", "/localkube/faults")["faults"]
        assert fault["hits"] == 1 and fault["times"] == 0
    finally:
        localkube.clear_faults()


def test_fault_endpoint_is_admin_only(localkube: Handle, core: Any, namespace: str) -> None:
    token = sa_token(core, namespace)
    with as_token(localkube, token) as sa:
        assert_status(sa.post("/localkube/faults", json={"code": 500}), 403, "Forbidden")


# -- bad input never yields a 500 ----------------------------------------------------------------------


BAD_INPUT: list[Any] = [
    ("invalid-json", "POST", "{cms}", b'{"apiVersion": "v1", "kind": ', 400),
    ("json-array", "POST", "{cms}", b"[]", 400),
    ("wrong-kind", "POST", "{cms}", json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}), 400),
    ("wrong-api-version", "POST", "{cms}",
     json.dumps({"apiVersion": "batch/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}), 400),
    ("metadata-not-an-object", "POST", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}), 400),
    ("data-value-not-a-string", "POST", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"n": 1}}), 400),
    ("data-not-a-map", "POST", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": ["a"]}), 400),
    ("label-value-not-a-string", "POST", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": True}}}), 400),
    ("namespace-mismatch", "POST", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}), 400),
    ("name-mismatch-on-put", "PUT", "{cms}/target",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}), 400),
    ("empty-body", "POST", "{cms}", b"", 400),
    ("unknown-resource", "GET", "/api/v1/namespaces/{ns}/widgets", None, 404),
    ("unknown-group", "GET", "/apis/nope.example.com/v1/things", None, 404),
    ("unknown-group-discovery", "GET", "/apis/nope.example.com/v1", None, 404),
    ("unknown-version", "GET", "/apis/batch/v9/namespaces/{ns}/jobs", None, 404),
    ("unknown-subresource", "GET", "{cms}/target/scale", None, 404),
    ("unknown-path", "GET", "/definitely/not/kubernetes", None, 404),
    ("malformed-continue", "GET", "{cms}?limit=1&continue=%25%25garbage", None, 400),
    ("non-numeric-limit", "GET", "{cms}?limit=many", None, 400),
    ("bad-timeout-seconds", "GET", "{cms}?watch=1&timeoutSeconds=soon", None, 400),
    ("bad-watch-resource-version", "GET", "{cms}?watch=1&resourceVersion=abc&timeoutSeconds=1", None, 400),
    pytest.param("bad-field-validation", "POST", "{cms}?fieldValidation=Loose",
                 json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}), 422,
                 id="bad-field-validation"),
    pytest.param("bad-dry-run", "POST", "{cms}?dryRun=Maybe",
                 json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}), 422,
                 id="bad-dry-run"),
    ("bad-propagation-policy", "DELETE", "{cms}/target", json.dumps({"propagationPolicy": "Sideways"}), 422),
    ("bad-grace-period", "DELETE", "{cms}/target?gracePeriodSeconds=never", None, 400),
    ("post-to-a-named-object", "POST", "{cms}/target",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}}), 405),
    ("put-to-a-collection", "PUT", "{cms}",
     json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}}), 405),
    ("patch-a-collection", "PATCH", "{cms}", b"{}", 405),
    ("post-to-discovery", "POST", "/api/v1", b"{}", 405),
    ("delete-a-namespace-collection", "DELETE", "/api/v1/namespaces", None, 405),
    ("patch-not-an-object", "PATCH", "{cms}/target", b"[1, 2]", 400),
    ("strategic-patch-invalid-json", "PATCH", "{cms}/target", b"{nope", 400),
]


@pytest.mark.parametrize(("case", "method", "path", "content", "code"), BAD_INPUT,
                         ids=[c[0] if isinstance(c, tuple) else c.id for c in BAD_INPUT])
def test_bad_input_gets_the_real_status_never_a_500(http: httpx.Client, namespace: str, case: str, method: str,
                                                    path: str, content: str | bytes | None, code: int) -> None:
    cms = cm_path(namespace)
    http.post(cms, json=configmap("target")).raise_for_status()
    url = path.replace("{cms}", cms).replace("{ns}", namespace)
    ctype = STRATEGIC if method == "PATCH" else "application/json"
    resp = http.request(method, url, content=content, headers={"Content-Type": ctype} if content is not None else {})
    assert_status(resp, code)
    assert http.get(cm_path(namespace, "target")).status_code == 200  # nothing broke


def test_undecodable_field_types_are_400_with_the_go_decoding_message(http: httpx.Client, namespace: str) -> None:
    resp = http.post(cm_path(namespace), json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"},
                                               "data": {"n": 1}})
    body = assert_status(resp, 400, "BadRequest")
    assert body["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
                               "number into Go struct field ConfigMap.data of type string")


def test_body_over_3_mib_is_413(http: httpx.Client, namespace: str) -> None:
    huge = configmap("huge", data={"blob": "x" * (3 * 1024 * 1024 + 1024)})
    assert_status(http.post(cm_path(namespace), json=huge), 413, "RequestEntityTooLarge")
    assert_status(http.get(cm_path(namespace, "huge")), 404)


def test_configmap_data_over_1_mib_is_422_too_long(http: httpx.Client, namespace: str) -> None:
    big = configmap("big", data={"a": "x" * (512 * 1024), "b": "y" * (512 * 1024 + 1)})
    body = assert_status(http.post(cm_path(namespace), json=big), 422, "Invalid")
    assert [c["reason"] for c in body["details"]["causes"]] == ["FieldValueTooLong"]
    exactly = configmap("limit", data={"a": "x" * (1024 * 1024)})
    assert http.post(cm_path(namespace), json=exactly).status_code == 201


def test_secret_data_over_1_mib_decoded_is_422_too_long(http: httpx.Client, namespace: str) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
              "stringData": {"blob": "x" * (1024 * 1024 + 1)}}
    body = assert_status(http.post(f"/api/v1/namespaces/{namespace}/secrets", json=secret), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "data"


def test_configmap_keys_must_be_valid_config_keys(http: httpx.Client, namespace: str) -> None:
    body = assert_status(http.post(cm_path(namespace), json=configmap("keys", data={"bad key": "v", "ok.key_1": "v"})),
                         422, "Invalid")
    [cause] = body["details"]["causes"]
    assert cause["field"] == "data[bad key]" and cause["reason"] == "FieldValueInvalid"
    assert "a valid config key must consist of alphanumeric characters" in cause["message"]


def test_a_watch_closed_by_its_timeout_during_a_burst_loses_nothing_when_resumed_from_its_bookmark(
        http: httpx.Client, localkube: Handle, namespace: str) -> None:
    # The bridge resumes every watch from the last resourceVersion it saw, bookmarks included:
    # events still queued when a watch times out must reach the client before the closing bookmark.
    writers, each = 12, 100
    total = writers * each
    rv = http.get(cm_path(namespace)).json()["metadata"]["resourceVersion"]
    seen: set[str] = set()

    def writer(n: int) -> None:
        with httpx.Client(base_url=localkube.url, verify=ssl_context(localkube.kubeconfig),
                          headers={"Authorization": f"Bearer {localkube.token}"}, timeout=30) as w:
            for i in range(each):
                w.post(cm_path(namespace), json=configmap(f"burst-{n}-{i}")).raise_for_status()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(seen) < total and time.monotonic() < deadline:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1", "allowWatchBookmarks": "true"}
        with http.stream("GET", cm_path(namespace), params=params) as stream:
            for line in stream.iter_lines():
                ev = json.loads(line)
                rv = ev["object"]["metadata"]["resourceVersion"]
                if ev["type"] == "ADDED":
                    seen.add(ev["object"]["metadata"]["name"])
    for t in threads:
        t.join()
    assert len(seen) == total, f"missed {total - len(seen)} creations"
