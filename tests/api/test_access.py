"""RBAC for the API's callers (api/access.py) against the session's localkube: SubjectAccessReviews for the caller's
identity and groups, kept briefly and asked once for concurrent identical questions. Through the live API and console:
tests/e2e/test_api_access.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from api.access import Access, Ask, Denied
from api.auth import ANONYMOUS, Caller
from cli.roles import bind, ensure_roles, group, user
from kube import Kube
from localkube.testing import Handle
from models.roles import APPROVER, VIEWER


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kube(localkube: Handle, namespace: str) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ensure_roles(api)
    bind(api, "viewers", [user("vera@example.com"), group("auditors")], (VIEWER,), namespace=namespace)
    bind(api, "approvers", [user("abe@example.com")], (APPROVER,), namespace=namespace)
    yield api
    api.close()


async def test_rbac_decides_for_the_identity_and_its_groups_in_the_namespace_asked(
        kube: client.ApiClient, namespace: str, other_namespace: str) -> None:
    access = Access(Kube(kube))
    vera, abe, aud = Caller("vera@example.com"), Caller("abe@example.com"), Caller("zed", ("auditors",))
    assert await access.allowed(vera, Ask("list", "agentruns", namespace))
    assert not await access.allowed(vera, Ask("list", "agentruns", other_namespace))
    assert not await access.allowed(vera, Ask("approve", "agentruns", namespace, "r"))
    assert await access.allowed(abe, Ask("approve", "agentruns", namespace, "r"))
    assert not await access.allowed(abe, Ask("delete", "agentruns", namespace, "r"))
    assert await access.allowed(aud, Ask("get", "sympoziumpolicies", namespace, "p"))
    assert not await access.allowed(vera, Ask("get", "agentruns", ""))  # everywhere: only bound in one namespace
    with pytest.raises(Denied) as e:
        await access.require(vera, "delete", "agentruns", namespace, name="r")
    assert e.value.status_code == 403 and e.value.detail == (
        f'"vera@example.com" may not delete agentruns "r" in namespace "{namespace}" (Kubernetes RBAC: '
        f"agentrun-editor grants it, through a RoleBinding in {namespace})")
    assert await access.namespaces(vera, [namespace, other_namespace, "default"]) == [namespace]


async def test_answers_are_kept_briefly_and_concurrent_questions_asked_once(kube: client.ApiClient,
                                                                            namespace: str) -> None:
    clock = Clock()
    access = Access(Kube(kube), clock=clock, keep_seconds=5.0)
    vera = Caller("vera@example.com")
    ask = Ask("list", "agentruns", namespace)
    assert all(await asyncio.gather(*(access.allowed(vera, ask) for _ in range(20))))
    assert access.reviews == 1
    clock.now = 4.9
    assert await access.allowed(vera, ask) and access.reviews == 1
    clock.now = 5.1
    assert await access.allowed(vera, ask) and access.reviews == 2
    # Another identity, other groups or another question is another review.
    await access.allowed(Caller("vera@example.com", ("auditors",)), ask)
    await access.allowed(vera, Ask("get", "agentruns", namespace))
    assert access.reviews == 4


async def test_an_open_api_lets_anonymous_do_anything_and_no_one_else(kube: client.ApiClient,
                                                                     namespace: str) -> None:
    access = Access(Kube(kube), open=True)
    assert await access.allowed(ANONYMOUS, Ask("delete", "agentruns", namespace, "r")) and access.reviews == 0
    assert not await access.allowed(Caller("nobody"), Ask("delete", "agentruns", namespace, "r"))


async def test_a_named_question_is_asked_of_the_namespace_first_so_approving_many_runs_costs_one_review(
        kube: client.ApiClient, namespace: str) -> None:
    access = Access(Kube(kube))
    abe = Caller("abe@example.com")
    assert all([await access.allowed(abe, Ask("approve", "agentruns", namespace, f"r{i}")) for i in range(20)])
    assert access.reviews == 1, "allowed namespace-wide: allowed for every name"
    # A Role limited to one run's name: refused namespace-wide, so that name (and only it) is asked about.
    rbac: Any = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "one-run"}, "rules": [
        {"apiGroups": ["sympozium.ai"], "resources": ["agentruns"], "resourceNames": ["r1"], "verbs": ["approve"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "one-run"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                     "name": "one-run"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "nina@example.com"}]})
    nina = Caller("nina@example.com")
    assert await access.allowed(nina, Ask("approve", "agentruns", namespace, "r1"))
    assert not await access.allowed(nina, Ask("approve", "agentruns", namespace, "r2"))
    assert access.reviews == 1 + 3, "the namespace once (refused, kept), then each name"
