"""No escalation through lifecycle RBAC (SPEC §1.5, issue 12), against the whole stack.

The API's webhook pair is registered for the test's namespace as `agentrun up` registers it. People act as
ServiceAccounts with tokens from TokenRequest, through the real `kubernetes` client and `kubectl --token`: the
webhook reviews every permission a run's `lifecycle.rbac` grants against what its creator holds, so a user allowed
only to create AgentRuns cannot have the worker mint its hooks a Role on secrets.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.conftest import Kubectl
from tests.e2e.conftest import Stack, agent, agent_run
from tests.e2e.test_gate_authority import authority_api, protected, refused
from tests.localkube.test_tokens_and_access_reviews import client_as, grant, request_token, sa_subject

__all__ = ["authority_api", "protected"]  # fixtures: the API process and its webhooks registered for the namespace
G, V = "sympozium.ai", "v1alpha1"
CREATE_RUNS = [{"apiGroups": [G], "resources": ["agentruns"], "verbs": ["create", "get"]}]
GET_SECRETS = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


def account(stack: Stack, ns: str, name: str, rules: list[dict[str, Any]]) -> str:
    """A ServiceAccount holding exactly `rules` in `ns`; its token."""
    client.CoreV1Api(stack.api).create_namespaced_service_account(ns, {"metadata": {"name": name}})  # type: ignore[arg-type]
    grant(stack.api, ns, name, rules, sa_subject(ns, name))
    return str(request_token(stack.api, ns, name, expirationSeconds=3600).status.token)


def secrets_run(name: str, *verbs: str) -> dict[str, Any]:
    return agent_run(name, lifecycle={"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": list(verbs)}]})


def create_as(stack: Stack, token: str, ns: str, body: dict[str, Any]) -> None:
    with client_as(stack.kube, token=token) as api:
        client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "agentruns", body)


def test_a_user_allowed_only_to_create_runs_cannot_give_its_hooks_secrets(
        stack: Stack, protected: str, kubectl: Kubectl) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    token = account(stack, ns, "runner", CREATE_RUNS)
    message = refused(lambda: create_as(stack, token, ns, secrets_run("grab", "get", "list")))
    assert (f'denied the request: spec.lifecycle.rbac[0]: "system:serviceaccount:{ns}:runner" may not grant get '
            f'secrets in namespace "{ns}"') in message, message
    assert stack.get_run(ns, "grab") is None
    # `kubectl apply` is refused by the same webhook.
    body = secrets_run("grab", "get")
    body["metadata"]["namespace"] = ns
    out = kubectl("--token", token, "apply", "-f", "-", input=yaml.safe_dump(body))
    assert out.returncode != 0 and "denied the request: spec.lifecycle.rbac[0]" in out.stderr, out.stderr
    # A run asking for nothing it lacks is created.
    create_as(stack, token, ns, agent_run("plain"))
    assert stack.get_run(ns, "plain") is not None


def test_an_admin_may_grant_its_hooks_secrets(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", secrets_run("trusted", "get", "list"))  # the stack's admin kubeconfig
    assert stack.get_run(ns, "trusted") is not None


def test_a_user_may_delegate_get_secrets_that_it_holds_but_not_list(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent())
    token = account(stack, ns, "reader", CREATE_RUNS + GET_SECRETS)
    create_as(stack, token, ns, secrets_run("reads", "get"))
    assert stack.get_run(ns, "reads") is not None
    message = refused(lambda: create_as(stack, token, ns, secrets_run("lists", "get", "list")))
    assert f'spec.lifecycle.rbac[0]: "system:serviceaccount:{ns}:reader" may not grant list secrets' in message
    with pytest.raises(ApiException) as e:
        stack.custom.get_namespaced_custom_object(G, V, ns, "agentruns", "lists")
    assert e.value.status == 404


def test_a_run_inheriting_the_agents_lifecycle_rbac_is_checked_for_it(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "agents", agent(lifecycle={"rbac": [{"apiGroups": [""], "resources": ["secrets"],
                                                          "verbs": ["list"]}]}))
    token = account(stack, ns, "runner", CREATE_RUNS)
    message = refused(lambda: create_as(stack, token, ns, agent_run("inherits")))
    assert 'spec.lifecycle.rbac[0] (inherited from Agent "helper" spec.agents.default.lifecycle.rbac[0])' in message


def test_an_agents_lifecycle_defaults_may_grant_only_what_their_writer_holds(stack: Stack, protected: str) -> None:
    ns = protected
    token = account(stack, ns, "author", [{"apiGroups": [G], "resources": ["agents"], "verbs": ["create"]},
                                          *GET_SECRETS])

    def create(name: str, *verbs: str) -> None:
        body = agent(name, lifecycle={"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": list(verbs)}]})
        with client_as(stack.kube, token=token) as api:
            client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "agents", body)

    create("reads", "get")
    message = refused(lambda: create("lists", "get", "list"))
    assert f'spec.agents.default.lifecycle.rbac[0]: "system:serviceaccount:{ns}:author" may not grant list ' \
           "secrets" in message, message
