"""No escalation through lifecycle RBAC (SPEC §1.5): the admission webhook reviews, with SubjectAccessReviews in the
real localkube, every permission a run's `lifecycle.rbac` grants, for the requesting user in the run's namespace."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from cli.up import install_crds
from localkube.testing import Handle
from tests.api.test_admission import G, V, _obj, admit, app_state, review, run, webhook

__all__ = ["app_state", "webhook"]  # fixtures shared with test_admission
RBAC_GROUP = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def ns(localkube: Handle) -> Iterator[str]:
    """Agents without a policy (so only the escalation check decides); "reader" may get secrets and the
    configmap "only", and nothing else."""
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    core: Any = client.CoreV1Api(api)
    custom, rbac = client.CustomObjectsApi(api), client.RbacAuthorizationV1Api(api)
    name = f"esc-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    custom.create_namespaced_custom_object(G, V, name, "agents", _obj("Agent", "free", {"agents": {"default": {}}}))
    custom.create_namespaced_custom_object(G, V, name, "agents", _obj("Agent", "lending", {"agents": {"default": {
        "lifecycle": {"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}}}}))
    rules = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["only"]}]
    rbac.create_namespaced_role(name, {"metadata": {"name": "reader"}, "rules": rules})  # type: ignore[arg-type]
    rbac.create_namespaced_role_binding(name, {  # type: ignore[arg-type]
        "metadata": {"name": "reader"}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "reader", "apiGroup": RBAC_GROUP}]})
    yield name
    core.delete_namespace(name)
    api.close()


def asking(ns: str, *rules: dict[str, Any], user: str = "reader", groups: tuple[str, ...] = (),
           agent: str = "free", lifecycle: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"task": "t"}
    if lifecycle:
        spec["lifecycle"] = {"rbac": list(rules)}
    body = review(ns, run(ns, agent, spec))
    body["request"]["userInfo"] = {"username": user, "groups": [*groups, "system:authenticated"]}
    return body


def rule(resource: str, *verbs: str, group: str = "", names: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
    if names:
        out["resourceNames"] = list(names)
    return out


def refusal(resp: dict[str, Any]) -> str:
    assert resp["allowed"] is False, resp
    assert (resp["status"]["code"], resp["status"]["reason"]) == (403, "Forbidden"), resp
    message: str = resp["status"]["message"]
    return message


async def test_a_user_may_delegate_what_it_holds_and_nothing_more(webhook: httpx.AsyncClient, ns: str) -> None:
    assert (await admit(webhook, asking(ns, rule("secrets", "get"))))["allowed"] is True
    message = refusal(await admit(webhook, asking(ns, rule("configmaps", "get", names=("only",)),
                                                  rule("secrets", "get", "list"))))
    assert message.startswith('spec.lifecycle.rbac[1]: "reader" may not grant list secrets in namespace'), message
    assert "does not hold that permission itself" in message


async def test_a_user_without_rights_is_refused_naming_the_rule(webhook: httpx.AsyncClient, ns: str) -> None:
    message = refusal(await admit(webhook, asking(ns, rule("secrets", "get"), user="nobody")))
    assert message.startswith('spec.lifecycle.rbac[0]: "nobody" may not grant get secrets'), message


async def test_resource_names_are_checked_name_by_name(webhook: httpx.AsyncClient, ns: str) -> None:
    assert (await admit(webhook, asking(ns, rule("configmaps", "get", names=("only",)))))["allowed"] is True
    message = refusal(await admit(webhook, asking(ns, rule("configmaps", "get", names=("only", "other")))))
    assert 'may not grant get configmaps named "other"' in message
    refusal(await admit(webhook, asking(ns, rule("configmaps", "get"))))  # every configmap is more than one


async def test_wildcards_must_be_held_as_wildcards(webhook: httpx.AsyncClient, ns: str) -> None:
    assert 'may not grant * secrets' in refusal(await admit(webhook, asking(ns, rule("secrets", "*"))))
    everything = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert 'may not grant * * in API group "*"' in refusal(await admit(webhook, asking(ns, everything)))
    admin = asking(ns, everything, rule("pods/log", "get"), user="root", groups=("system:masters",))
    assert (await admit(webhook, admin))["allowed"] is True


async def test_an_agents_lifecycle_defaults_are_checked_for_a_run_that_inherits_them(
        webhook: httpx.AsyncClient, ns: str) -> None:
    message = refusal(await admit(webhook, asking(ns, agent="lending", lifecycle=False)))
    assert message.startswith('spec.lifecycle.rbac[0] (inherited from Agent "lending" '
                              'spec.agents.default.lifecycle.rbac[0]): "reader" may not grant list secrets'), message
    # A run with a lifecycle of its own does not inherit the Agent's.
    assert (await admit(webhook, asking(ns, rule("secrets", "get"), agent="lending")))["allowed"] is True


async def test_an_update_is_reviewed_when_the_spec_changes(webhook: httpx.AsyncClient, ns: str) -> None:
    old = run(ns, "free", {"task": "t", "lifecycle": {"rbac": [rule("secrets", "get")]}})
    edited = {**old, "spec": {**old["spec"], "lifecycle": {"rbac": [rule("secrets", "get", "delete")]}}}
    body = review(ns, edited, op="UPDATE", old=old)
    body["request"]["userInfo"] = {"username": "reader", "groups": ["system:authenticated"]}
    assert "may not grant delete secrets" in refusal(await admit(webhook, body))


async def test_reviews_that_cannot_be_made_refuse_the_run_saying_so(webhook: httpx.AsyncClient, ns: str,
                                                                  localkube: Handle) -> None:
    localkube.inject_fault(verb="create", resource="localsubjectaccessreviews", code=500, times=1)
    try:
        resp = await admit(webhook, asking(ns, rule("secrets", "get")))
    finally:
        localkube.clear_faults()
    assert resp["allowed"] is False and resp["status"]["code"] == 503, resp
    assert "cannot check the run's lifecycle.rbac against what reader may do" in resp["status"]["message"]
    assert (await admit(webhook, asking(ns, rule("secrets", "get"))))["allowed"] is True


def agent_review(ns: str, rbac: list[dict[str, Any]], *, user: str = "reader", op: str = "CREATE",
                 old_rbac: list[dict[str, Any]] | None = None, kind: str = "Agent",
                 resource: str = "agents") -> dict[str, Any]:
    def obj(rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": f"{G}/{V}", "kind": kind, "metadata": {"name": "a1", "namespace": ns},
                "spec": {"agents": {"default": {"lifecycle": {"rbac": rules}}}}}
    body = review(ns, obj(rbac), op=op, old=obj(old_rbac) if old_rbac is not None else None)
    body["request"]["resource"] = {"group": G, "version": V, "resource": resource}
    body["request"]["kind"] = {"group": G, "version": V, "kind": kind}
    body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    return body


async def admit_agent(webhook: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await webhook.post("/admission/agents", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["response"]
    assert out["uid"] == body["request"]["uid"]
    return out


async def test_an_agents_lifecycle_defaults_may_grant_only_what_their_writer_holds(
        webhook: httpx.AsyncClient, ns: str) -> None:
    assert (await admit_agent(webhook, agent_review(ns, [rule("secrets", "get")])))["allowed"] is True
    message = refusal(await admit_agent(webhook, agent_review(ns, [rule("secrets", "get"), rule("secrets", "list")])))
    assert message.startswith('spec.agents.default.lifecycle.rbac[1]: "reader" may not grant list secrets'), message
    legacy = agent_review(ns, [rule("pods", "delete")], kind="SympoziumInstance", resource="sympoziuminstances")
    assert "may not grant delete pods" in refusal(await admit_agent(webhook, legacy))
    # Adding a rule is checked on update; an update that leaves the rules as they were is not (anyone allowed to
    # edit the Agent may change its model without holding what its owner delegated).
    added = agent_review(ns, [rule("secrets", "get", "delete")], op="UPDATE", old_rbac=[rule("secrets", "get")])
    assert "may not grant delete secrets" in refusal(await admit_agent(webhook, added))
    same = agent_review(ns, [rule("secrets", "*")], user="nobody", op="UPDATE", old_rbac=[rule("secrets", "*")])
    assert (await admit_agent(webhook, same))["allowed"] is True


async def test_the_agents_webhook_admits_only_agent_kinds(webhook: httpx.AsyncClient, ns: str) -> None:
    body = agent_review(ns, [], resource="agentruns")
    r = await webhook.post("/admission/agents", json=body)
    assert r.status_code == 400 and "not sympozium.ai 'agentruns'" in r.json()["detail"], r.text


def test_a_runs_skill_pack_sidecar_rules_are_checked_like_lifecycle_rbac() -> None:
    from api.escalation import skill_rules_checked
    from models.agent import normalize_agent
    from models.resolve import resolve_run
    from models.skills import resolve_skills
    run = resolve_run({"metadata": {"name": "r", "namespace": "ns", "uid": "u"},
                       "spec": {"agentRef": "a", "task": "t", "skills": ["tools", "plain"]}},
                      normalize_agent({"metadata": {"name": "a", "namespace": "ns"}, "spec": {}}), default_image="i")
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    run.skill_packs = resolve_skills(run.skills, {
        "tools": {"spec": {"skills": [], "sidecar": {"image": "t", "rbac": [rule]}}},
        "plain": {"spec": {"skills": []}}}, field="spec.skills")
    [(field, checked)] = skill_rules_checked(run)
    assert field == 'SkillPack "tools" spec.sidecar.rbac[0] (skill of this run)'
    assert checked.wire() == {**rule, "resourceNames": []}
    assert skill_rules_checked(None) == []
