"""Mutating admission webhooks: localkube calls them before the validating ones, as kube-apiserver does.

The webhooks are real HTTPS servers (the recording `WebhookServer` of test_webhooks.py, with its CA)
answering with base64 JSONPatches; they are registered with MutatingWebhookConfigurations through the
real `kubernetes` client and `kubectl`, confined to the test's namespace and removed after the test.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from localkube.testing import Handle
from tests.conftest import Kubectl
from tests.localkube import test_webhooks as validating_tests
from tests.localkube.test_tokens_and_access_reviews import client_as, grant
from tests.localkube.test_webhooks import (
    GROUP,
    LABEL,
    Configs,
    WebhookServer,
    allow,
    configmap,
    deny,
    kubectl_ok,
    rule,
    status_of,
    webhook,
)
from tests.waiting import wait_for

Obj = dict[str, Any]

# The validating webhook tests' fixtures: their certificates, recording HTTPS server and configurations.
pki = validating_tests.pki
server = validating_tests.server
closed_port = validating_tests.closed_port
configs = validating_tests.configs


def patched(ops: Callable[[Obj], list[Obj]]) -> Callable[[Obj], Obj]:
    """An answer that allows the request with the JSONPatch `ops(request)` computes."""
    def answer(request: Obj) -> Obj:
        patch = json.dumps(ops(request)).encode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(patch).decode()}
    return answer


def annotate(key: str, value: str | Callable[[Obj], str]) -> Callable[[Obj], Obj]:
    """A mutating answer adding one annotation (the map itself when the object has none)."""
    def ops(request: Obj) -> list[Obj]:
        out: list[Obj] = []
        if not (request["object"] or request["oldObject"])["metadata"].get("annotations"):
            out.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        v = value(request) if callable(value) else value
        out.append({"op": "add", "path": "/metadata/annotations/" + key.replace("/", "~1"), "value": v})
        return out
    return patched(ops)


@dataclass
class MutatingConfigs:
    """Creates MutatingWebhookConfigurations labelled for this test; all are deleted afterwards."""

    api: Any  # client.AdmissionregistrationV1Api
    run: str
    names: list[str] = field(default_factory=list)

    def body(self, *hooks: Obj, name: str = "") -> Obj:
        name = name or f"lk-{self.run}-{len(self.names)}"
        return {"apiVersion": f"{GROUP}/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name, "labels": {LABEL: self.run}}, "webhooks": list(hooks)}

    def create(self, *hooks: Obj, name: str = "") -> str:
        body = self.body(*hooks, name=name)
        self.api.create_mutating_webhook_configuration(body)
        self.names.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])


@pytest.fixture
def mutating(kube: client.ApiClient) -> Iterator[MutatingConfigs]:
    c = MutatingConfigs(client.AdmissionregistrationV1Api(kube), uuid.uuid4().hex[:8])
    yield c
    c.api.delete_collection_mutating_webhook_configuration(label_selector=f"{LABEL}={c.run}")


@pytest.fixture
def second_server(server: WebhookServer) -> Iterator[WebhookServer]:
    s = WebhookServer(server.pki)
    yield s
    s.close()


def annotations_on(obj: Any) -> dict[str, str]:
    return dict(obj.metadata.annotations or {})


# --------------------------------------------------------------------------------------------------
# the kind
# --------------------------------------------------------------------------------------------------


def test_mutating_configurations_are_served_with_the_real_defaults_and_validation(
        kube: client.ApiClient, kubectl: Kubectl, mutating: MutatingConfigs, server: WebhookServer,
        namespace: str) -> None:
    name = mutating.create(
        webhook("plain", server.url(), server.pki.ca_bundle, namespace=namespace, rules=[rule(["configmaps"])]),
        webhook("again", server.url(), server.pki.ca_bundle, namespace=namespace, rules=[rule(["configmaps"])],
                reinvocationPolicy="IfNeeded"))
    created = mutating.api.read_mutating_webhook_configuration(name)
    plain, again = created.webhooks
    assert (plain.failure_policy, plain.match_policy, plain.timeout_seconds, plain.reinvocation_policy) == \
        ("Fail", "Equivalent", 10, "Never")
    assert again.reinvocation_policy == "IfNeeded"
    assert plain.rules[0].scope == "*"

    assert kubectl_ok(kubectl("get", "mutatingwebhookconfigurations", name)).split()[:5] == \
        ["NAME", "WEBHOOKS", "AGE", name, "2"]
    resources = kubectl_ok(kubectl("api-resources", f"--api-group={GROUP}", "-o", "name"))
    assert f"mutatingwebhookconfigurations.{GROUP}" in resources.split()

    bad = mutating.body(webhook("bad", server.url(), None, namespace=None, rules=[rule(["configmaps"])],
                                reinvocationPolicy="Sometimes", sideEffects="Unknown"))
    with pytest.raises(ApiException) as e:
        mutating.api.create_mutating_webhook_configuration(bad)
    status = status_of(e.value)
    assert (e.value.status, status["reason"]) == (422, "Invalid")
    assert {(c["field"], c["message"]) for c in status["details"]["causes"]} == {
        ("webhooks[0].reinvocationPolicy", 'Unsupported value: "Sometimes": supported values: "IfNeeded", "Never"'),
        ("webhooks[0].sideEffects", 'Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"'),
    }
    wrong_type = mutating.body(webhook("typed", server.url(), None, namespace=None, rules=[rule(["configmaps"])],
                                       reinvocationPolicy=3))
    custom: Any = client.CustomObjectsApi(kube)
    with pytest.raises(ApiException) as e:
        custom.create_cluster_custom_object(GROUP, "v1", "mutatingwebhookconfigurations", wrong_type)
    assert (e.value.status, status_of(e.value)["message"]) == (
        400, 'MutatingWebhookConfiguration in version "v1" cannot be handled as a MutatingWebhookConfiguration: '
             "json: cannot unmarshal number into Go struct field MutatingWebhook.webhooks.reinvocationPolicy of "
             "type string")


# --------------------------------------------------------------------------------------------------
# mutation
# --------------------------------------------------------------------------------------------------


def test_a_mutating_webhook_patches_creates_and_updates_and_is_told_who_asks(
        localkube: Handle, kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer,
        namespace: str) -> None:
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "cm"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})
    robot = f"system:serviceaccount:{namespace}:robot"
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "cm"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]})
    server.answer = annotate("mutated-by", lambda req: req["operation"])
    mutating.create(webhook("annotate", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"])]))

    as_robot = config.new_client_from_config(str(localkube.kubeconfig))
    as_robot.set_default_header("Impersonate-User", robot)
    try:
        core: Any = client.CoreV1Api(as_robot)
        created = core.create_namespaced_config_map(namespace, configmap("cm", a="1"))
        assert annotations_on(created) == {"mutated-by": "CREATE"}
        updated = core.replace_namespaced_config_map("cm", namespace, {
            **configmap("cm", a="2"), "metadata": {"name": "cm", "annotations": {"mine": "x"}}})
        assert annotations_on(updated) == {"mine": "x", "mutated-by": "UPDATE"}
        stored = client.CoreV1Api(kube).read_namespaced_config_map("cm", namespace)
        assert annotations_on(stored) == {"mine": "x", "mutated-by": "UPDATE"}
        assert stored.data == {"a": "2"}
    finally:
        as_robot.close()

    create, update = server.requests()
    for req in (create, update):
        assert req["userInfo"]["username"] == robot
        assert req["userInfo"]["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                             "system:authenticated"]
        assert (req["namespace"], req["name"], req["dryRun"]) == (namespace, "cm", False)
        assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
        assert req["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert (create["operation"], create["oldObject"]) == ("CREATE", None)
    assert update["operation"] == "UPDATE"
    assert annotations_of(update["oldObject"]) == {"mutated-by": "CREATE"}
    assert annotations_of(update["object"]) == {"mine": "x"}


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def test_configurations_mutate_in_name_order_and_validating_webhooks_see_the_result(
        kube: client.ApiClient, mutating: MutatingConfigs, configs: Configs, server: WebhookServer,
        second_server: WebhookServer, namespace: str) -> None:
    first, second = server, second_server
    first.answer = annotate("first", "1")
    # The second sees what the first made of the object.
    second.answer = annotate("second", lambda req: "saw-first=" + annotations_of(req["object"]).get("first", "no"))
    validating = WebhookServer(server.pki)
    try:
        # Created in reverse: configurations are called in name order, not in creation order.
        mutating.create(webhook("second", second.url(), second.pki.ca_bundle, namespace=namespace,
                                rules=[rule(["configmaps"])]), name=f"lk-{mutating.run}-b")
        mutating.create(webhook("first", first.url(), first.pki.ca_bundle, namespace=namespace,
                                rules=[rule(["configmaps"])]), name=f"lk-{mutating.run}-a")
        configs.create(webhook("check", validating.url(), validating.pki.ca_bundle, namespace=namespace,
                               rules=[rule(["configmaps"])]))
        core: Any = client.CoreV1Api(kube)
        created = core.create_namespaced_config_map(namespace, configmap("ordered"))
        assert annotations_on(created) == {"first": "1", "second": "saw-first=1"}
        assert [annotations_of(r["object"]) for r in first.requests()] == [{}]
        assert [annotations_of(r["object"]) for r in second.requests()] == [{"first": "1"}]
        assert [annotations_of(r["object"]) for r in validating.requests()] == \
            [{"first": "1", "second": "saw-first=1"}]
    finally:
        validating.close()


def test_a_mutating_webhook_with_reinvocation_if_needed_sees_later_changes(
        kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer, second_server: WebhookServer,
        namespace: str) -> None:
    server.answer = annotate("count", lambda req: str(len(server.reviews)))
    second_server.answer = annotate("later", "yes")
    mutating.create(webhook("early", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"])], reinvocationPolicy="IfNeeded"),
                    webhook("late", second_server.url(), second_server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"])]))
    created = cast(Any, client.CoreV1Api(kube)).create_namespaced_config_map(namespace, configmap("twice"))
    # Called again because "late" changed the object after it, and shown that change.
    assert [annotations_of(r["object"]) for r in server.requests()] == [{}, {"count": "1", "later": "yes"}]
    assert annotations_on(created) == {"count": "2", "later": "yes"}
    assert len(second_server.requests()) == 1


def test_a_mutated_object_is_defaulted_and_validated_again(
        kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer, namespace: str) -> None:
    core: Any = client.CoreV1Api(kube)
    wait_for(lambda: core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items,
             what="the namespace's default ServiceAccount")
    # A container added by the webhook gets the defaults of the pod's own containers.
    server.answer = patched(lambda req: [{"op": "add", "path": "/spec/containers/-",
                                          "value": {"name": "sidecar", "image": "busybox:1.36"}}])
    mutating.create(webhook("sidecar", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["pods"], operations=["CREATE"])]))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
                    "restartPolicy": "Never"}}
    created = core.create_namespaced_pod(namespace, pod, dry_run="All")
    _, sidecar = created.spec.containers
    assert (sidecar.name, sidecar.termination_message_path, sidecar.image_pull_policy) == \
        ("sidecar", "/dev/termination-log", "IfNotPresent")
    # The ServiceAccount volume is not added a second time.
    assert len([v for v in created.spec.volumes if v.name.startswith("kube-api-access-")]) == 1
    assert server.requests()[0]["dryRun"] is True

    # A patch that makes the object invalid is refused as the invalid object would be.
    server.answer = patched(lambda req: [{"op": "add", "path": "/spec/containers/-",
                                          "value": {"name": "main", "image": "busybox:1.36"}}])
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, {**pod, "metadata": {"name": "p2"}})
    status = status_of(e.value)
    assert (e.value.status, status["reason"]) == (422, "Invalid")
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == \
        [("spec.containers[1].name", 'Duplicate value: "main"')]


def test_a_patch_may_not_change_what_identifies_the_object(
        kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer, namespace: str,
        other_namespace: str) -> None:
    core: Any = client.CoreV1Api(kube)
    core.create_namespaced_config_map(namespace, configmap("fixed"))

    def rename(req: Obj) -> list[Obj]:
        if req["operation"] == "CREATE":
            return [{"op": "replace", "path": "/metadata/namespace", "value": other_namespace}]
        return [{"op": "replace", "path": "/metadata/name", "value": "renamed"}]

    server.answer = patched(rename)
    mutating.create(webhook("rename", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"])]))
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map("fixed", namespace, {"data": {"k": "changed"}})
    status = status_of(e.value)
    assert (e.value.status, status["message"]) == (
        422, 'ConfigMap "fixed" is invalid: metadata.name: Invalid value: "renamed": field is immutable')
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("moved"))
    assert (e.value.status, status_of(e.value)["message"]) == (
        400, "the namespace of the provided object does not match the namespace sent on the request")
    assert core.read_namespaced_config_map("fixed", namespace).data == {"k": "v"}
    assert core.list_namespaced_config_map(other_namespace, field_selector="metadata.name=moved").items == []


# --------------------------------------------------------------------------------------------------
# refusals and failures
# --------------------------------------------------------------------------------------------------


def test_a_mutating_denial_refuses_the_request_before_validating_webhooks(
        kube: client.ApiClient, kubectl: Kubectl, mutating: MutatingConfigs, configs: Configs,
        server: WebhookServer, second_server: WebhookServer, namespace: str) -> None:
    server.answer = deny("configmaps need an owner", code=403)
    mutating.create(webhook("gate", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"], operations=["*"])]))
    configs.create(webhook("after", second_server.url(), second_server.pki.ca_bundle, namespace=namespace,
                           rules=[rule(["configmaps"], operations=["*"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("refused"))
    status = status_of(e.value)
    assert (e.value.status, status["reason"], status["message"]) == (
        403, "Forbidden", 'admission webhook "gate.localkube.test" denied the request: configmaps need an owner')
    result = kubectl("create", "configmap", "refused-too", "-n", namespace, "--from-literal=a=b")
    assert result.returncode != 0
    assert 'admission webhook "gate.localkube.test" denied the request: configmaps need an owner' in result.stderr
    assert second_server.requests() == []
    names = {cm.metadata.name for cm in core.list_namespaced_config_map(namespace).items}
    assert not names & {"refused", "refused-too"}


def test_failure_policy_decides_when_a_mutating_webhook_is_down(
        kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer, namespace: str,
        closed_port: int) -> None:
    url = f"https://127.0.0.1:{closed_port}/mutate"
    mutating.create(webhook("down", url, server.pki.ca_bundle, namespace=namespace, rules=[rule(["configmaps"])]))
    core: Any = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("fail-closed"))
    message = (f'failed calling webhook "down.localkube.test": failed to call webhook: Post "{url}?timeout=10s": '
               f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused")
    status = status_of(e.value)
    assert (e.value.status, status["reason"], status["message"]) == \
        (500, "InternalError", f"Internal error occurred: {message}")

    server.answer = annotate("after-ignored", "yes")
    mutating.create(webhook("ignored", url, server.pki.ca_bundle, namespace=namespace, failurePolicy="Ignore",
                            rules=[rule(["secrets"])]),
                    webhook("works", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["secrets"])]))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fail-open"}, "stringData": {"a": "b"}}
    created = core.create_namespaced_secret(namespace, secret)
    assert annotations_on(created) == {"after-ignored": "yes"}


def test_an_answer_with_a_bad_patch_is_a_failed_call_or_an_internal_error(
        kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer, namespace: str) -> None:
    mutating.create(webhook("broken", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"], operations=["*"])]))
    core: Any = client.CoreV1Api(kube)
    server.answer = lambda req: {**patched(lambda r: [])(req), "patchType": "MergePatch"}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("a"))
    assert status_of(e.value)["message"] == (
        'Internal error occurred: failed calling webhook "broken.localkube.test": received invalid webhook '
        'response: webhook returned invalid response.patchType of "MergePatch"')

    server.answer = patched(lambda req: [{"op": "replace", "path": "/nothing/here", "value": 1}])
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, configmap("b"))
    assert (e.value.status, status_of(e.value)["reason"]) == (500, "InternalError")
    assert "/nothing/here" in status_of(e.value)["message"]

    # DELETE has no object to patch.
    server.answer = allow
    core.create_namespaced_config_map(namespace, configmap("c"))
    server.answer = annotate("x", "y")
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map("c", namespace)
    assert status_of(e.value)["message"] == (
        'Internal error occurred: admission webhook "broken.localkube.test" attempted to modify the object, '
        "which is not supported for this operation")


def test_the_review_names_the_service_account_a_requested_token_authenticates_as(
        localkube: Handle, kube: client.ApiClient, mutating: MutatingConfigs, server: WebhookServer,
        namespace: str) -> None:
    core: Any = client.CoreV1Api(kube)
    sa = core.create_namespaced_service_account(namespace, {"metadata": {"name": "writer"}})
    grant(kube, namespace, "write-cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
          {"kind": "ServiceAccount", "name": "writer", "namespace": namespace})
    token = core.create_namespaced_service_account_token("writer", namespace, {"spec": {}}).status.token
    server.answer = annotate("created-by", lambda req: req["userInfo"]["username"])
    mutating.create(webhook("who", server.url(), server.pki.ca_bundle, namespace=namespace,
                            rules=[rule(["configmaps"])]))
    writer = f"system:serviceaccount:{namespace}:writer"
    with client_as(localkube, token=token) as api:
        created = cast(Any, client.CoreV1Api(api)).create_namespaced_config_map(namespace, configmap("mine"))
    assert annotations_on(created) == {"created-by": writer}
    assert server.requests()[0]["userInfo"] == {
        "username": writer, "uid": sa.metadata.uid,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]}
