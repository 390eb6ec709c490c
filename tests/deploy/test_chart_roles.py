"""The chart's ClusterRoles for people (issue 27, hole 8): the API authorises every call with RBAC, so the chart ships
the roles to bind (the rules models/roles.py gives `agentrun up`), aggregated into the built-in ones unless told not
to, binds its own token's identity, and lets the API ask the cluster about tokens and callers."""

from __future__ import annotations

from typing import Any

import helm_python as helm

from models.roles import cluster_roles
from tests.deploy.test_chart import NS, chart, component_env, of, rendered

__all__ = ["chart"]


def _roles(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in of(docs, "ClusterRole") if r["metadata"]["name"].startswith(
        ("agentrun-viewer", "agentrun-editor", "agentrun-approver"))}


def test_the_peoples_roles_are_the_ones_agentrun_up_makes_aggregated_into_view_edit_and_admin(
        chart: helm.Chart) -> None:
    roles = _roles(rendered(chart, {}))
    expected = {r["metadata"]["name"]: r for r in cluster_roles(aggregate=True)}
    assert {n: r["rules"] for n, r in roles.items()} == {n: r["rules"] for n, r in expected.items()}
    for name, role in roles.items():
        labels = {k: v for k, v in role["metadata"]["labels"].items() if k.startswith("rbac.")}
        assert labels == {k: v for k, v in expected[name]["metadata"]["labels"].items() if k.startswith("rbac.")}
    assert roles["agentrun-approver"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    plain = _roles(rendered(chart, {"rbac": {"aggregateToDefaultRoles": False}}))
    assert all(not any(k.startswith("rbac.") for k in r["metadata"]["labels"]) for r in plain.values())
    assert _roles(rendered(chart, {"rbac": {"createRoles": False}})) == {}


def test_the_generated_tokens_identity_is_bound_where_the_release_serves(chart: helm.Chart) -> None:
    admin = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "admin"}]
    cluster = rendered(chart, {})
    bound = {b["roleRef"]["name"] for b in of(cluster, "ClusterRoleBinding") if b["subjects"] == admin}
    assert bound == {"agentrun-viewer", "agentrun-editor", "agentrun-approver"}
    listed = rendered(chart, {"watchNamespaces": ["team-a", "team-b"]})
    assert not [b for b in of(listed, "ClusterRoleBinding") if b["subjects"] == admin]
    assert sorted((b["metadata"]["namespace"], b["roleRef"]["name"]) for b in of(listed, "RoleBinding")
                  if b["subjects"] == admin) == sorted((ns, r) for ns in ("team-a", "team-b") for r in bound)
    own = rendered(chart, {"api": {"tokens": {"existingSecret": "mine"}}})
    assert not [b for b in of(own, "ClusterRoleBinding") + of(own, "RoleBinding") if b["subjects"] == admin]


def test_token_review_and_trusted_proxies_reach_the_api(chart: helm.Chart) -> None:
    env = component_env(rendered(chart, {"api": {"tokenReview": {"enabled": False, "audiences": ["agentrun"]},
                                                  "forwardedAllowIps": "10.0.0.0/8"}}), "api")
    assert (env["AGENTRUN_TOKEN_REVIEW"]["value"], env["AGENTRUN_TOKEN_REVIEW_AUDIENCES"]["value"],
            env["AGENTRUN_FORWARDED_ALLOW_IPS"]["value"]) == ("false", '["agentrun"]', "10.0.0.0/8")
    default = component_env(rendered(chart, {}), "api")
    assert default["AGENTRUN_TOKEN_REVIEW"]["value"] == "true" and default["AGENTRUN_FORWARDED_ALLOW_IPS"]["value"] == ""
    assert NS
