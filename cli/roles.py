"""The API's ClusterRoles (models/roles.py) in a cluster, and bindings of identities to them: what `agentrun up` does
for its own token's identity (cluster-wide), and what tests do for the identities they call the API as."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kube import Conflict, typed_errors
from models.roles import APPROVER, EDITOR, VIEWER, cluster_roles

ALL = (VIEWER, EDITOR, APPROVER)
RBAC_GROUP = "rbac.authorization.k8s.io"


def ensure_roles(api: client.ApiClient) -> None:
    """Create the three ClusterRoles, or replace them with today's rules."""
    rbac: Any = client.RbacAuthorizationV1Api(api)
    for role in cluster_roles():
        name = role["metadata"]["name"]
        try:
            with typed_errors(f"create ClusterRole {name}"):
                rbac.create_cluster_role(role)
        except Conflict:
            with typed_errors(f"replace ClusterRole {name}"):
                rbac.replace_cluster_role(name, role)


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "name": name, "apiGroup": RBAC_GROUP}


def group(name: str) -> dict[str, str]:
    return {"kind": "Group", "name": name, "apiGroup": RBAC_GROUP}


def bind(api: client.ApiClient, binding: str, subjects: list[dict[str, str]], roles: tuple[str, ...] = ALL, *,
         namespace: str = "") -> None:
    """Bind `subjects` to each of `roles`, in `namespace` (a RoleBinding to the ClusterRole) or, without one,
    cluster-wide; bindings named `<binding>-<role>`, replaced when they exist."""
    rbac: Any = client.RbacAuthorizationV1Api(api)
    for role in roles:
        name = f"{binding}-{role}"
        body = {"metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "agentrun"}},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects}
        kind = "RoleBinding" if namespace else "ClusterRoleBinding"
        try:
            with typed_errors(f"create {kind} {name}"):
                if namespace:
                    rbac.create_namespaced_role_binding(namespace, body)
                else:
                    rbac.create_cluster_role_binding(body)
        except Conflict:
            with typed_errors(f"replace {kind} {name}"):
                if namespace:
                    rbac.replace_namespaced_role_binding(name, namespace, body)
                else:
                    rbac.replace_cluster_role_binding(name, body)
