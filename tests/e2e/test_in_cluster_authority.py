"""The chart's webhook pair in `agentrun up --in-cluster`: the API's pod stamps creators and verdict writers, refuses
a verdict from someone allowed to patch runs but not named by the policy (and records it as an Event with its own
ServiceAccount's rights), and the bridge's pod — allowed to read exactly the chart's MutatingWebhookConfiguration —
makes the stamped approver `decidedBy`. The same pod refuses lifecycle RBAC its writer does not hold."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.e2e.test_in_cluster import G, V, _phase, _run, cluster, ns  # noqa: F401  (fixtures)
from tests.waiting import wait_for

VERDICT, BY = "sympozium.ai/gate-verdict", "sympozium.ai/gate-verdict-by"
PATCH_RUNS = [{"apiGroups": [G], "resources": ["agentruns"], "verbs": ["get", "patch"]}]


def _token_for(api: client.ApiClient, namespace: str, name: str) -> str:
    core: Any = client.CoreV1Api(api)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": PATCH_RUNS})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
    return str(core.create_namespaced_service_account_token(name, namespace, {"spec": {}}).status.token)


def _annotate_as(kubeconfig: str, token: str, namespace: str, run: str, notes: dict[str, str]) -> dict[str, Any]:
    api = config.new_client_from_config(kubeconfig)
    api.configuration.refresh_api_key_hook = None
    api.configuration.api_key_prefix = {}
    api.configuration.api_key = {"BearerToken": f"Bearer {token}"}
    try:
        return cast(dict[str, Any], client.CustomObjectsApi(api).patch_namespaced_custom_object(
            G, V, namespace, "agentruns", run, {"metadata": {"annotations": notes}}))
    finally:
        api.close()


def test_the_charts_webhooks_decide_who_may_give_an_annotation_verdict(cluster: dict[str, Any],  # noqa: F811
                                                                       ns: str) -> None:  # noqa: F811
    api = cluster["client"]
    custom: Any = client.CustomObjectsApi(api)
    approver = f"system:serviceaccount:{ns}:approver"
    custom.create_namespaced_custom_object(G, V, ns, "sympoziumpolicies", {
        "apiVersion": f"{G}/{V}", "kind": "SympoziumPolicy", "metadata": {"name": "review"},
        "spec": {"gatePolicy": {"approvers": [approver]}}})
    custom.create_namespaced_custom_object(G, V, ns, "agents", {
        "apiVersion": f"{G}/{V}", "kind": "Agent", "metadata": {"name": "helper"},
        "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo", "secret": ""}],
                 "policyRef": "review"}})
    made = custom.create_namespaced_custom_object(G, V, ns, "agentruns", {
        "apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "held"},
        "spec": {"agentRef": "helper", "task": "hello", "lifecycle": {
            "postRun": [{"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}],
            "gateTimeout": "5m"}}})
    assert made["metadata"]["annotations"]["agentrun.dev/created-by"] == "admin"  # stamped by the API's pod
    wait_for(lambda: ((_run(cluster, ns, "held").get("status") or {}).get("gate") or {}).get("state") == "pending",
             timeout=120, what="the gate to wait")
    mallory, approver_token = _token_for(api, ns, "mallory"), _token_for(api, ns, "approver")

    with pytest.raises(ApiException) as refused:
        _annotate_as(cluster["kubeconfig"], mallory, ns, "held", {VERDICT: json.dumps({"action": "approve"})})
    assert refused.value.status == 403
    assert "(gatePolicy.approvers)" in json.loads(str(refused.value.body))["message"]
    events: Any = client.CoreV1Api(api).list_namespaced_event(ns)
    assert [e.reason for e in events.items if e.involved_object.name == "held"
            and e.source.component == "agentrun-api"] == ["VerdictRefused"]

    stamped = _annotate_as(cluster["kubeconfig"], approver_token, ns, "held", {VERDICT: json.dumps({"action": "approve"})})
    assert stamped["metadata"]["annotations"][BY] == approver
    assert _phase(cluster, ns, "held") == "Succeeded"
    gate = _run(cluster, ns, "held")["status"]["gate"]
    assert (gate["state"], gate["decidedBy"]) == ("approved", approver), gate


def test_the_charts_webhooks_refuse_lifecycle_rbac_the_writer_does_not_hold(cluster: dict[str, Any],  # noqa: F811
                                                                            ns: str) -> None:  # noqa: F811
    """The API's pod reviews, with its own ServiceAccount's right to create LocalSubjectAccessReviews, what a
    ServiceAccount allowed only to patch runs could not grant: lifecycle RBAC on secrets, in a run or an Agent."""
    token = _token_for(cluster["client"], ns, "mallory")
    api = config.new_client_from_config(cluster["kubeconfig"])
    api.configuration.refresh_api_key_hook = None
    api.configuration.api_key_prefix = {}
    api.configuration.api_key = {"BearerToken": f"Bearer {token}"}
    secrets = {"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    who = f"system:serviceaccount:{ns}:mallory"
    try:
        # Mallory may create runs and Agents, so only the webhook can refuse these.
        client.RbacAuthorizationV1Api(cluster["client"]).create_namespaced_role(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "mallory-create"},
            "rules": [{"apiGroups": [G], "resources": ["agentruns", "agents"], "verbs": ["create"]}]})
        client.RbacAuthorizationV1Api(cluster["client"]).create_namespaced_role_binding(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "mallory-create"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mallory-create"},
            "subjects": [{"kind": "ServiceAccount", "name": "mallory", "namespace": ns}]})
        for plural, body, field in (
                ("agentruns", {"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "grab"},
                               "spec": {"agentRef": "helper", "task": "t", "lifecycle": secrets}},
                 "spec.lifecycle.rbac[0]"),
                ("agents", {"apiVersion": f"{G}/{V}", "kind": "Agent", "metadata": {"name": "lender"},
                            "spec": {"agents": {"default": {"lifecycle": secrets}}}},
                 "spec.agents.default.lifecycle.rbac[0]")):
            with pytest.raises(ApiException) as refused:
                client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, plural, body)
            assert refused.value.status == 403, refused.value.body
            message = json.loads(str(refused.value.body))["message"]
            assert f'{field}: "{who}" may not grant get secrets' in message, message
    finally:
        api.close()
