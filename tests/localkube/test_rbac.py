"""Tests for localkube.rbac: the kube-apiserver RBAC authorizer over plain dict objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from localkube.rbac import (
    Attributes,
    UserInfo,
    authorize,
    default_cluster_role_bindings,
    default_cluster_roles,
    forbidden_message,
    rule_allows,
    rules_for,
)

# --------------------------------------------------------------------------------------------------
# A tiny in-memory RBACSource and object builders
# --------------------------------------------------------------------------------------------------


class MemorySource:
    def __init__(self) -> None:
        self.roles: dict[tuple[str, str], dict[str, Any]] = {}
        self.cluster_roles: dict[str, dict[str, Any]] = {}
        self.role_bindings: list[dict[str, Any]] = []
        self.cluster_role_bindings: list[dict[str, Any]] = []

    def get_role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.roles.get((namespace, name))

    def get_cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.cluster_roles.get(name)

    def list_role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return [b for b in self.role_bindings if b["metadata"]["namespace"] == namespace]

    def list_cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]:
        return list(self.cluster_role_bindings)

    # builders ------------------------------------------------------------------------------------

    def add_role(self, namespace: str, name: str, *rules: dict[str, Any]) -> None:
        self.roles[(namespace, name)] = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": list(rules),
        }

    def add_cluster_role(self, name: str, *rules: dict[str, Any]) -> None:
        self.cluster_roles[name] = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": list(rules),
        }

    def bind(
        self, namespace: str, name: str, role_kind: str, role_name: str, *subjects: dict[str, Any]
    ) -> None:
        self.role_bindings.append({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
            "subjects": list(subjects),
        })

    def cluster_bind(self, name: str, role_name: str, *subjects: dict[str, Any]) -> None:
        self.cluster_role_bindings.append({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": list(subjects),
        })


def rule(
    verbs: list[str],
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    names: list[str] | None = None,
    urls: list[str] | None = None,
) -> dict[str, Any]:
    r: dict[str, Any] = {"verbs": verbs}
    if groups is not None:
        r["apiGroups"] = groups
    if resources is not None:
        r["resources"] = resources
    if names is not None:
        r["resourceNames"] = names
    if urls is not None:
        r["nonResourceURLs"] = urls
    return r


def user_subject(name: str) -> dict[str, Any]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def group_subject(name: str) -> dict[str, Any]:
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def sa_subject(name: str, namespace: str | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"kind": "ServiceAccount", "name": name}
    if namespace is not None:
        s["namespace"] = namespace
    return s


def res(
    verb: str,
    resource: str,
    namespace: str = "",
    name: str = "",
    group: str = "",
    subresource: str = "",
) -> Attributes:
    return Attributes(
        verb=verb,
        resource_request=True,
        api_group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


def url(verb: str, path: str) -> Attributes:
    return Attributes(verb=verb, resource_request=False, path=path)


ALICE = UserInfo("alice", ("devs", "system:authenticated"))
BOB = UserInfo("bob", ("system:authenticated",))
BUILDER = UserInfo.service_account("ns1", "builder")


def allowed(user: UserInfo, attrs: Attributes, source: MemorySource) -> bool:
    return authorize(user, attrs, source)[0]


def source_with_default_policy() -> MemorySource:
    src = MemorySource()
    for cr in default_cluster_roles():
        src.cluster_roles[cr["metadata"]["name"]] = cr
    src.cluster_role_bindings.extend(default_cluster_role_bindings())
    return src


# --------------------------------------------------------------------------------------------------
# UserInfo
# --------------------------------------------------------------------------------------------------


def test_service_account_user_info_has_kubernetes_name_and_groups() -> None:
    sa = UserInfo.service_account("ns1", "builder")
    assert sa.name == "system:serviceaccount:ns1:builder"
    assert sa.groups == ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated")


# --------------------------------------------------------------------------------------------------
# Basic matching
# --------------------------------------------------------------------------------------------------


def test_no_bindings_denies_with_empty_reason() -> None:
    assert authorize(ALICE, res("get", "pods", "ns1", "p"), MemorySource()) == (False, "")


def test_role_binding_to_role_allows_listed_verbs_only() -> None:
    src = MemorySource()
    src.add_role("ns1", "reader", rule(["get", "list"], [""], ["pods"]))
    src.bind("ns1", "read", "Role", "reader", user_subject("alice"))
    assert allowed(ALICE, res("get", "pods", "ns1", "p"), src)
    assert allowed(ALICE, res("list", "pods", "ns1"), src)
    assert not allowed(ALICE, res("delete", "pods", "ns1", "p"), src)
    assert not allowed(ALICE, res("watch", "pods", "ns1"), src)


def test_allow_reason_names_role_binding_role_and_subject() -> None:
    src = MemorySource()
    src.add_role("ns1", "reader", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "read", "Role", "reader", user_subject("alice"))
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert ok
    assert reason == 'RBAC: allowed by RoleBinding "read/ns1" of Role "reader" to User "alice"'


def test_allow_reason_names_cluster_role_binding() -> None:
    src = source_with_default_policy()
    admin = UserInfo("admin", ("system:masters", "system:authenticated"))
    ok, reason = authorize(admin, res("delete", "nodes", name="n1"), src)
    assert ok
    assert reason == (
        'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" '
        'to Group "system:masters"'
    )


def test_api_group_must_match() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], ["apps"], ["deployments"]))
    src.bind("ns1", "b", "Role", "r", user_subject("alice"))
    assert allowed(ALICE, res("get", "deployments", "ns1", "d", group="apps"), src)
    assert not allowed(ALICE, res("get", "deployments", "ns1", "d", group="extensions"), src)
    assert not allowed(ALICE, res("get", "deployments", "ns1", "d"), src)


def test_core_group_rule_does_not_match_named_group() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", user_subject("alice"))
    assert not allowed(ALICE, res("get", "pods", "ns1", "p", group="metrics.k8s.io"), src)


def test_rule_without_api_groups_never_matches_a_resource_request() -> None:
    assert not rule_allows(res("get", "pods", "ns1", "p"), rule(["get"], None, ["pods"]))


def test_null_fields_in_rules_and_bindings_are_tolerated() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": None})
    src.bind("ns1", "b", "Role", "r", user_subject("alice"))
    src.role_bindings.append({"metadata": {"name": "empty", "namespace": "ns1"}, "roleRef": None, "subjects": None})
    assert allowed(ALICE, res("get", "pods", "ns1", "p"), src)


# --------------------------------------------------------------------------------------------------
# Wildcards
# --------------------------------------------------------------------------------------------------


def test_star_verb_matches_any_verb() -> None:
    r = rule(["*"], [""], ["pods"])
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "escalate"):
        assert rule_allows(res(verb, "pods", "ns1"), r)


def test_star_api_group_matches_any_group_including_core() -> None:
    r = rule(["get"], ["*"], ["widgets"])
    assert rule_allows(res("get", "widgets", "ns1", group=""), r)
    assert rule_allows(res("get", "widgets", "ns1", group="example.com"), r)


def test_star_resource_matches_resources_and_subresources() -> None:
    r = rule(["get"], [""], ["*"])
    assert rule_allows(res("get", "pods", "ns1", "p"), r)
    assert rule_allows(res("get", "pods", "ns1", "p", subresource="log"), r)


def test_full_wildcard_cluster_role_grants_everything_in_bound_namespace() -> None:
    src = MemorySource()
    src.add_cluster_role("all", rule(["*"], ["*"], ["*"]))
    src.bind("ns1", "b", "ClusterRole", "all", user_subject("alice"))
    assert allowed(ALICE, res("deletecollection", "agentruns", "ns1", group="sympozium.ai"), src)
    assert not allowed(ALICE, res("get", "agentruns", "ns2", "r", group="sympozium.ai"), src)


# --------------------------------------------------------------------------------------------------
# Subresources
# --------------------------------------------------------------------------------------------------


def test_parent_resource_rule_does_not_grant_its_subresources() -> None:
    r = rule(["get", "patch"], [""], ["pods"])
    assert not rule_allows(res("get", "pods", "ns1", "p", subresource="log"), r)
    assert not rule_allows(res("patch", "pods", "ns1", "p", subresource="status"), r)


def test_subresource_rule_does_not_grant_the_parent_resource() -> None:
    r = rule(["get"], [""], ["pods/log"])
    assert rule_allows(res("get", "pods", "ns1", "p", subresource="log"), r)
    assert not rule_allows(res("get", "pods", "ns1", "p"), r)
    assert not rule_allows(res("get", "pods", "ns1", "p", subresource="exec"), r)


def test_star_slash_subresource_matches_that_subresource_of_any_resource() -> None:
    r = rule(["patch"], ["*"], ["*/status"])
    assert rule_allows(res("patch", "pods", "ns1", "p", subresource="status"), r)
    assert rule_allows(res("patch", "agentruns", "ns1", "r", group="sympozium.ai", subresource="status"), r)
    assert not rule_allows(res("patch", "pods", "ns1", "p"), r)
    assert not rule_allows(res("patch", "pods", "ns1", "p", subresource="scale"), r)


def test_star_slash_subresource_does_not_match_a_longer_subresource_with_same_suffix() -> None:
    r = rule(["get"], [""], ["*/status"])
    assert not rule_allows(res("get", "things", "ns1", "t", subresource="substatus"), r)


def test_resource_slash_star_is_not_a_subresource_wildcard_as_in_kubernetes() -> None:
    r = rule(["get"], [""], ["pods/*"])
    assert not rule_allows(res("get", "pods", "ns1", "p", subresource="log"), r)
    assert not rule_allows(res("get", "pods", "ns1", "p"), r)
    # it only matches a subresource literally named "*", exactly like upstream ResourceMatches
    assert rule_allows(res("get", "pods", "ns1", "p", subresource="*"), r)


# --------------------------------------------------------------------------------------------------
# resourceNames
# --------------------------------------------------------------------------------------------------


def test_resource_names_restrict_to_listed_names() -> None:
    r = rule(["get", "update"], [""], ["configmaps"], names=["settings"])
    assert rule_allows(res("get", "configmaps", "ns1", "settings"), r)
    assert rule_allows(res("update", "configmaps", "ns1", "settings"), r)
    assert not rule_allows(res("get", "configmaps", "ns1", "other"), r)


def test_resource_names_rule_never_matches_requests_without_a_name() -> None:
    r = rule(["*"], [""], ["configmaps"], names=["settings"])
    assert not rule_allows(res("list", "configmaps", "ns1"), r)
    assert not rule_allows(res("watch", "configmaps", "ns1"), r)
    assert not rule_allows(res("create", "configmaps", "ns1"), r)
    assert not rule_allows(res("deletecollection", "configmaps", "ns1"), r)


def test_watch_of_a_single_named_object_matches_resource_names() -> None:
    # kubectl get cm settings --watch sends a fieldSelector metadata.name=settings, which the apiserver
    # turns into a named request; the authorizer only sees the name.
    r = rule(["watch", "list"], [""], ["configmaps"], names=["settings"])
    assert rule_allows(res("watch", "configmaps", "ns1", "settings"), r)


def test_empty_resource_names_list_does_not_restrict() -> None:
    r = rule(["get"], [""], ["configmaps"], names=[])
    assert rule_allows(res("get", "configmaps", "ns1", "anything"), r)
    assert rule_allows(res("get", "configmaps", "ns1"), r)


# --------------------------------------------------------------------------------------------------
# Subjects
# --------------------------------------------------------------------------------------------------


def test_group_subject_matches_members_only() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", group_subject("devs"))
    assert allowed(ALICE, res("get", "pods", "ns1", "p"), src)
    assert not allowed(BOB, res("get", "pods", "ns1", "p"), src)


def test_user_subject_does_not_match_a_group_of_the_same_name() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", user_subject("devs"))
    assert not allowed(ALICE, res("get", "pods", "ns1", "p"), src)


def test_group_subject_covers_all_service_accounts_of_a_namespace() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["list"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", group_subject("system:serviceaccounts:ns1"))
    assert allowed(BUILDER, res("list", "pods", "ns1"), src)
    assert not allowed(UserInfo.service_account("ns2", "builder"), res("list", "pods", "ns1"), src)


def test_service_account_subject_with_explicit_namespace() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", sa_subject("builder", "ns1"))
    assert allowed(BUILDER, res("get", "pods", "ns1", "p"), src)
    assert not allowed(UserInfo.service_account("ns1", "other"), res("get", "pods", "ns1", "p"), src)


def test_service_account_subject_namespace_defaults_to_role_binding_namespace() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", sa_subject("builder"))
    ok, reason = authorize(BUILDER, res("get", "pods", "ns1", "p"), src)
    assert ok
    assert reason == 'RBAC: allowed by RoleBinding "b/ns1" of Role "r" to ServiceAccount "builder/ns1"'
    assert not allowed(UserInfo.service_account("ns2", "builder"), res("get", "pods", "ns1", "p"), src)


def test_role_binding_can_grant_a_service_account_of_another_namespace() -> None:
    src = MemorySource()
    src.add_role("ns2", "r", rule(["get"], [""], ["secrets"]))
    src.bind("ns2", "b", "Role", "r", sa_subject("builder", "ns1"))
    assert allowed(BUILDER, res("get", "secrets", "ns2", "s"), src)


def test_service_account_subject_without_namespace_in_cluster_role_binding_matches_nobody() -> None:
    src = MemorySource()
    src.add_cluster_role("reader", rule(["get"], [""], ["pods"]))
    src.cluster_bind("b", "reader", sa_subject("builder"))
    assert not allowed(BUILDER, res("get", "pods", "ns1", "p"), src)
    src.cluster_bind("b2", "reader", sa_subject("builder", "ns1"))
    assert allowed(BUILDER, res("get", "pods", "ns1", "p"), src)


def test_service_account_is_not_matched_by_user_subject_of_its_short_name() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", user_subject("builder"))
    assert not allowed(BUILDER, res("get", "pods", "ns1", "p"), src)
    src.bind("ns1", "b2", "Role", "r", user_subject("system:serviceaccount:ns1:builder"))
    assert allowed(BUILDER, res("get", "pods", "ns1", "p"), src)


def test_unknown_subject_kind_matches_nobody() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", {"kind": "Robot", "name": "alice"})
    assert not allowed(ALICE, res("get", "pods", "ns1", "p"), src)


def test_reason_names_the_first_matching_subject_of_the_binding() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", user_subject("carol"), group_subject("devs"), user_subject("alice"))
    assert authorize(ALICE, res("get", "pods", "ns1", "p"), src) == (
        True,
        'RBAC: allowed by RoleBinding "b/ns1" of Role "r" to Group "devs"',
    )


# --------------------------------------------------------------------------------------------------
# Namespace scoping
# --------------------------------------------------------------------------------------------------


def test_role_binding_does_not_grant_access_in_other_namespaces() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["*"], ["*"], ["*"]))
    src.bind("ns1", "b", "Role", "r", sa_subject("builder"))
    assert allowed(BUILDER, res("get", "pods", "ns1", "p"), src)
    assert not allowed(BUILDER, res("get", "pods", "ns2", "p"), src)


def test_role_binding_to_cluster_role_is_scoped_to_its_namespace() -> None:
    src = MemorySource()
    src.add_cluster_role("pod-reader", rule(["get", "list"], [""], ["pods"]))
    src.bind("ns1", "b", "ClusterRole", "pod-reader", user_subject("alice"))
    ok, reason = authorize(ALICE, res("list", "pods", "ns1"), src)
    assert ok
    assert reason == 'RBAC: allowed by RoleBinding "b/ns1" of ClusterRole "pod-reader" to User "alice"'
    assert not allowed(ALICE, res("list", "pods", "ns2"), src)
    # listing across all namespaces is a cluster-scoped request
    assert not allowed(ALICE, res("list", "pods"), src)


def test_role_binding_does_not_grant_cluster_scoped_resources() -> None:
    src = MemorySource()
    src.add_cluster_role("node-reader", rule(["get"], [""], ["nodes"]))
    src.bind("ns1", "b", "ClusterRole", "node-reader", user_subject("alice"))
    assert not allowed(ALICE, res("get", "nodes", name="n1"), src)


def test_role_binding_refers_to_role_in_its_own_namespace_only() -> None:
    src = MemorySource()
    src.add_role("ns2", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "b", "Role", "r", user_subject("alice"))
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert not ok
    assert reason == 'RBAC: role.rbac.authorization.k8s.io "r" not found'


def test_cluster_role_binding_grants_in_every_namespace_and_at_cluster_scope() -> None:
    src = MemorySource()
    src.add_cluster_role("reader", rule(["get", "list"], ["*"], ["*"]))
    src.cluster_bind("b", "reader", group_subject("devs"))
    assert allowed(ALICE, res("get", "pods", "ns1", "p"), src)
    assert allowed(ALICE, res("get", "pods", "anywhere", "p"), src)
    assert allowed(ALICE, res("list", "pods"), src)
    assert allowed(ALICE, res("get", "nodes", name="n1"), src)
    assert not allowed(BOB, res("get", "pods", "ns1", "p"), src)


def test_cluster_role_binding_referencing_a_role_is_ignored() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.cluster_role_bindings.append({
        "metadata": {"name": "weird"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [user_subject("alice")],
    })
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert not ok
    assert reason == 'RBAC: role.rbac.authorization.k8s.io "r" not found'


# --------------------------------------------------------------------------------------------------
# Missing roles
# --------------------------------------------------------------------------------------------------


def test_binding_to_missing_cluster_role_is_skipped_and_reported() -> None:
    src = MemorySource()
    src.cluster_bind("b", "ghost", user_subject("alice"))
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert not ok
    assert reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found'


def test_missing_role_does_not_hide_a_later_granting_binding() -> None:
    src = MemorySource()
    src.add_role("ns1", "r", rule(["get"], [""], ["pods"]))
    src.bind("ns1", "a-missing", "Role", "ghost", user_subject("alice"))
    src.bind("ns1", "b-present", "Role", "r", user_subject("alice"))
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert ok
    assert reason == 'RBAC: allowed by RoleBinding "b-present/ns1" of Role "r" to User "alice"'


def test_several_missing_roles_are_aggregated_in_brackets_and_deduplicated() -> None:
    src = MemorySource()
    src.cluster_bind("c1", "ghost", user_subject("alice"))
    src.cluster_bind("c2", "ghost", user_subject("alice"))
    src.bind("ns1", "b", "Role", "phantom", user_subject("alice"))
    ok, reason = authorize(ALICE, res("get", "pods", "ns1", "p"), src)
    assert not ok
    assert reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "ghost" not found, '
        'role.rbac.authorization.k8s.io "phantom" not found]'
    )


def test_missing_roles_of_bindings_for_other_users_are_not_reported() -> None:
    src = MemorySource()
    src.cluster_bind("c1", "ghost", user_subject("bob"))
    assert authorize(ALICE, res("get", "pods", "ns1", "p"), src) == (False, "")


def test_unsupported_role_ref_kind_is_reported() -> None:
    src = MemorySource()
    src.bind("ns1", "b", "Policy", "p", user_subject("alice"))
    assert authorize(ALICE, res("get", "pods", "ns1", "p"), src) == (
        False,
        'RBAC: unsupported role reference kind: "Policy"',
    )


# --------------------------------------------------------------------------------------------------
# Non-resource URLs
# --------------------------------------------------------------------------------------------------


def test_non_resource_url_exact_match() -> None:
    r = rule(["get"], urls=["/version"])
    assert rule_allows(url("get", "/version"), r)
    assert not rule_allows(url("get", "/version/"), r)
    assert not rule_allows(url("get", "/versions"), r)
    assert not rule_allows(url("post", "/version"), r)


def test_non_resource_url_trailing_star_is_a_prefix_match() -> None:
    r = rule(["get"], urls=["/apis/*"])
    assert rule_allows(url("get", "/apis/apps/v1"), r)
    assert rule_allows(url("get", "/apis/"), r)
    assert not rule_allows(url("get", "/apis"), r)
    r2 = rule(["get"], urls=["/logs*"])
    assert rule_allows(url("get", "/logs"), r2)
    assert rule_allows(url("get", "/logsomething/x"), r2)


def test_non_resource_url_star_matches_every_path() -> None:
    assert rule_allows(url("post", "/anything/at/all"), rule(["*"], urls=["*"]))


def test_resource_rules_do_not_grant_non_resource_urls_and_vice_versa() -> None:
    assert not rule_allows(url("get", "/healthz"), rule(["*"], ["*"], ["*"]))
    assert not rule_allows(res("get", "pods", "ns1", "p"), rule(["*"], urls=["*"]))


def test_non_resource_urls_are_granted_only_through_cluster_role_bindings() -> None:
    src = MemorySource()
    src.add_cluster_role("metrics", rule(["get"], urls=["/metrics"]))
    src.bind("ns1", "b", "ClusterRole", "metrics", user_subject("alice"))
    assert not allowed(ALICE, url("get", "/metrics"), src)
    src.cluster_bind("cb", "metrics", user_subject("alice"))
    assert allowed(ALICE, url("get", "/metrics"), src)


# --------------------------------------------------------------------------------------------------
# forbidden_message
# --------------------------------------------------------------------------------------------------


def test_forbidden_message_for_named_namespaced_custom_resource() -> None:
    sa = UserInfo.service_account("ns", "sa")
    attrs = res("patch", "agentruns", "ns", "run1", group="sympozium.ai")
    assert forbidden_message(sa, attrs) == (
        'agentruns.sympozium.ai "run1" is forbidden: User "system:serviceaccount:ns:sa" cannot patch '
        'resource "agentruns" in API group "sympozium.ai" in the namespace "ns"'
    )


def test_forbidden_message_without_name_has_no_quoted_name() -> None:
    sa = UserInfo.service_account("ns", "sa")
    assert forbidden_message(sa, res("list", "agentruns", "ns", group="sympozium.ai")) == (
        'agentruns.sympozium.ai is forbidden: User "system:serviceaccount:ns:sa" cannot list '
        'resource "agentruns" in API group "sympozium.ai" in the namespace "ns"'
    )


def test_forbidden_message_for_core_group_uses_bare_resource_and_empty_group() -> None:
    assert forbidden_message(BOB, res("get", "pods", "default", "web")) == (
        'pods "web" is forbidden: User "bob" cannot get resource "pods" in API group "" '
        'in the namespace "default"'
    )


def test_forbidden_message_for_subresource_keeps_parent_in_prefix() -> None:
    assert forbidden_message(BOB, res("get", "pods", "ns", "web", subresource="log")) == (
        'pods "web" is forbidden: User "bob" cannot get resource "pods/log" in API group "" '
        'in the namespace "ns"'
    )


def test_forbidden_message_for_cluster_scoped_request() -> None:
    assert forbidden_message(BOB, res("list", "namespaces")) == (
        'namespaces is forbidden: User "bob" cannot list resource "namespaces" in API group "" '
        "at the cluster scope"
    )
    assert forbidden_message(BOB, res("get", "clusterroles", name="admin", group="rbac.authorization.k8s.io")) == (
        'clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "bob" cannot get resource '
        '"clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope'
    )


def test_forbidden_message_for_non_resource_path() -> None:
    assert forbidden_message(UserInfo("x"), url("get", "/foo")) == (
        'forbidden: User "x" cannot get path "/foo"'
    )


def test_forbidden_message_appends_authorizer_reason() -> None:
    msg = forbidden_message(BOB, res("get", "pods", "ns", "p"), 'RBAC: role.rbac.authorization.k8s.io "r" not found')
    assert msg == (
        'pods "p" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "ns": '
        'RBAC: role.rbac.authorization.k8s.io "r" not found'
    )


def test_forbidden_message_escapes_html_and_go_quotes() -> None:
    odd = UserInfo('<b>"eve"</b>')
    assert forbidden_message(odd, url("get", "/a&b")) == (
        'forbidden: User "&lt;b&gt;\\"eve\\"&lt;/b&gt;" cannot get path "/a&amp;b"'
    )


def test_forbidden_message_for_anonymous_user() -> None:
    anon = UserInfo("system:anonymous", ("system:unauthenticated",))
    assert forbidden_message(anon, res("list", "pods", "default")) == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    )


# --------------------------------------------------------------------------------------------------
# rules_for
# --------------------------------------------------------------------------------------------------


def test_rules_for_collects_cluster_then_namespace_rules_and_errors() -> None:
    src = MemorySource()
    src.add_cluster_role("c", rule(["get"], [""], ["nodes"]))
    src.add_role("ns1", "r", rule(["list"], [""], ["pods"]))
    src.cluster_bind("cb", "c", user_subject("alice"))
    src.bind("ns1", "rb", "Role", "r", user_subject("alice"))
    src.bind("ns1", "gone", "Role", "ghost", user_subject("alice"))
    src.bind("ns2", "other", "Role", "r", user_subject("alice"))
    rules, errors = rules_for(ALICE, "ns1", src)
    assert rules == [rule(["get"], [""], ["nodes"]), rule(["list"], [""], ["pods"])]
    assert errors == ['role.rbac.authorization.k8s.io "ghost" not found']
    cluster_rules, cluster_errors = rules_for(ALICE, "", src)
    assert cluster_rules == [rule(["get"], [""], ["nodes"])]
    assert cluster_errors == []


# --------------------------------------------------------------------------------------------------
# Default bootstrap policy
# --------------------------------------------------------------------------------------------------


def test_default_objects_carry_bootstrap_label_and_autoupdate_annotation() -> None:
    objs = default_cluster_roles() + default_cluster_role_bindings()
    assert objs
    for obj in objs:
        assert obj["apiVersion"] == "rbac.authorization.k8s.io/v1"
        assert obj["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert obj["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def test_default_cluster_roles_include_the_well_known_names() -> None:
    names = {cr["metadata"]["name"] for cr in default_cluster_roles()}
    assert {
        "cluster-admin", "admin", "edit", "view",
        "system:discovery", "system:public-info-viewer", "system:basic-user",
    } <= names
    for cr in default_cluster_roles():
        assert cr["kind"] == "ClusterRole"
        assert "aggregationRule" not in cr


def test_default_bindings_reference_existing_roles_and_expected_groups() -> None:
    role_names = {cr["metadata"]["name"] for cr in default_cluster_roles()}
    subjects = {}
    for crb in default_cluster_role_bindings():
        assert crb["kind"] == "ClusterRoleBinding"
        assert crb["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": crb["metadata"]["name"],
        }
        assert crb["roleRef"]["name"] in role_names
        subjects[crb["metadata"]["name"]] = [(s["kind"], s["name"]) for s in crb["subjects"]]
    assert subjects == {
        "cluster-admin": [("Group", "system:masters")],
        "system:discovery": [("Group", "system:authenticated")],
        "system:basic-user": [("Group", "system:authenticated")],
        "system:public-info-viewer": [("Group", "system:authenticated"), ("Group", "system:unauthenticated")],
    }


def test_default_objects_are_fresh_copies() -> None:
    first = default_cluster_roles()
    first[0]["rules"].clear()
    first[0]["metadata"]["labels"]["x"] = "y"
    second = default_cluster_roles()
    assert second[0]["rules"]
    assert "x" not in second[0]["metadata"]["labels"]


def test_default_policy_lets_any_authenticated_user_discover_the_api() -> None:
    src = source_with_default_policy()
    for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3", "/healthz", "/readyz"):
        assert allowed(BUILDER, url("get", path), src), path
    assert not allowed(BUILDER, url("get", "/metrics"), src)
    assert not allowed(BUILDER, url("post", "/api"), src)


def test_default_policy_lets_unauthenticated_users_read_only_public_info() -> None:
    src = source_with_default_policy()
    anon = UserInfo("system:anonymous", ("system:unauthenticated",))
    assert allowed(anon, url("get", "/version"), src)
    assert allowed(anon, url("get", "/livez"), src)
    assert not allowed(anon, url("get", "/api"), src)
    assert not allowed(anon, url("get", "/apis/apps/v1"), src)
    assert not allowed(anon, res("list", "pods", "default"), src)


def test_default_policy_lets_authenticated_users_review_their_own_access() -> None:
    src = source_with_default_policy()
    assert allowed(BUILDER, res("create", "selfsubjectaccessreviews", group="authorization.k8s.io"), src)
    assert allowed(BUILDER, res("create", "selfsubjectrulesreviews", group="authorization.k8s.io"), src)
    assert allowed(BUILDER, res("create", "selfsubjectreviews", group="authentication.k8s.io"), src)
    assert not allowed(BUILDER, res("create", "subjectaccessreviews", group="authorization.k8s.io"), src)


def test_default_policy_gives_system_masters_everything() -> None:
    src = source_with_default_policy()
    admin = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))
    assert allowed(admin, res("delete", "nodes", name="n1"), src)
    assert allowed(admin, res("escalate", "clusterroles", name="x", group="rbac.authorization.k8s.io"), src)
    assert allowed(admin, res("patch", "agentruns", "ns", "r", group="sympozium.ai", subresource="status"), src)
    assert allowed(admin, url("get", "/metrics"), src)
    assert not allowed(BUILDER, res("delete", "nodes", name="n1"), src)


def test_default_view_edit_admin_roles_grant_increasing_power_in_bound_namespace() -> None:
    src = source_with_default_policy()
    viewer, editor, owner = UserInfo("viewer"), UserInfo("editor"), UserInfo("owner")
    src.bind("ns1", "v", "ClusterRole", "view", user_subject("viewer"))
    src.bind("ns1", "e", "ClusterRole", "edit", user_subject("editor"))
    src.bind("ns1", "a", "ClusterRole", "admin", user_subject("owner"))

    read_pods = res("list", "pods", "ns1")
    read_logs = res("get", "pods", "ns1", "p", subresource="log")
    read_secret = res("get", "secrets", "ns1", "s")
    create_deploy = res("create", "deployments", "ns1", group="apps")
    create_rolebinding = res("create", "rolebindings", "ns1", group="rbac.authorization.k8s.io")

    assert allowed(viewer, read_pods, src)
    assert allowed(viewer, read_logs, src)
    assert not allowed(viewer, read_secret, src)
    assert not allowed(viewer, create_deploy, src)

    assert allowed(editor, read_pods, src)
    assert allowed(editor, read_secret, src)
    assert allowed(editor, create_deploy, src)
    assert not allowed(editor, create_rolebinding, src)

    assert allowed(owner, read_secret, src)
    assert allowed(owner, create_deploy, src)
    assert allowed(owner, create_rolebinding, src)

    for who in (viewer, editor, owner):
        assert not allowed(who, res("list", "pods", "ns2"), src)
        assert not allowed(who, res("list", "nodes"), src)
