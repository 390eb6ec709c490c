"""The ClusterRoles people are bound to, to use agentrun through its API and console (SPEC §7, api/access.py).

The API asks Kubernetes RBAC (a SubjectAccessReview) before every call, so what a person may do through it is what
these roles, bound to them, grant: `agentrun-viewer` reads, `agentrun-editor` also creates and deletes runs and
edits schedules, `agentrun-approver` decides gates with the verb `approve` on agentruns (as Kubernetes' own approvals
use a verb of their own). Deciding is kept apart from editing on purpose: separation of duties (`gatePolicy`) starts
with who holds `approve` at all. Agents, SympoziumPolicies and SkillPacks are not written through the API; who
administers them is the cluster's own roles' business (a SympoziumPolicy says who decides, so editors should not hold
it).

The Helm chart ships the same roles (deploy/chart/agentrun/templates/roles.yaml; tests/deploy compare them), with
aggregation labels so that the built-in `view`, `edit` and `admin` roles include them; `agentrun up` creates them in
its localkube and binds its token's identity cluster-wide (cli/roles.py).
"""

from __future__ import annotations

from typing import Any

from .names import GROUP

VIEWER = "agentrun-viewer"
EDITOR = "agentrun-editor"
APPROVER = "agentrun-approver"
# Every kind of the group, read: runs, their schedules and what they are resolved against (the console shows them).
READABLE = ["agentruns", "sympoziumschedules", "agents", "sympoziuminstances", "sympoziumpolicies", "skillpacks",
            "ensembles", "personapacks", "models"]
READ = ["get", "list", "watch"]
# Aggregation into the built-in roles (the chart's `rbac.aggregateToDefaultRoles`): view reads, edit also writes runs
# and schedules, admin also approves.
AGGREGATE_TO = {VIEWER: "view", EDITOR: "edit", APPROVER: "admin"}


def rules(role: str) -> list[dict[str, Any]]:
    """The rules of one of the three roles."""
    read = {"apiGroups": [GROUP], "resources": list(READABLE), "verbs": list(READ)}
    if role == VIEWER:
        return [read]
    if role == EDITOR:
        return [read, {"apiGroups": [GROUP], "resources": ["agentruns", "sympoziumschedules"],
                       "verbs": ["create", "update", "patch", "delete"]}]
    if role == APPROVER:
        return [{"apiGroups": [GROUP], "resources": ["agentruns"], "verbs": [*READ, "approve"]}]
    raise KeyError(role)


def cluster_roles(*, aggregate: bool = False) -> list[dict[str, Any]]:
    """The three ClusterRoles as objects (with the aggregation labels when `aggregate`)."""
    out = []
    for role in (VIEWER, EDITOR, APPROVER):
        labels = {"app.kubernetes.io/part-of": "agentrun"}
        if aggregate:
            labels[f"rbac.authorization.k8s.io/aggregate-to-{AGGREGATE_TO[role]}"] = "true"
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": role, "labels": labels}, "rules": rules(role)})
    return out
