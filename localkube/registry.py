"""The resource types localkube serves: the built-in ones and those that CRDs register.

Discovery documents, URL routing, OpenAPI and kind-to-resource lookups (for ownerReferences)
are all derived from this one table, so a CRD becomes fully usable the moment it is created.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass
class ResourceType:
    group: str
    version: str
    resource: str  # plural
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    # Jobs are orphaning by default in batch/v1 (a compatibility rule of the real server).
    default_propagation: str = "Background"
    # Whether metadata.generation is maintained (bumped on spec changes).
    generation: bool = True
    # Custom resources: the CRD's version entry (schema, printer columns) and storage flags.
    crd: dict[str, Any] | None = None
    name_rule: str = "subdomain"  # subdomain | label | path
    served_versions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()
        if not self.served_versions:
            self.served_versions = [self.version]

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.resource)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def is_custom(self) -> bool:
        return self.crd is not None

    @property
    def qualified(self) -> str:
        """How the real server names the resource in messages: 'pods', 'jobs.batch'."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def schema_for(self, version: str) -> dict[str, Any] | None:
        if self.crd is None:
            return None
        for v in self.crd.get("versions", []):
            if v.get("name") == version:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                return schema if isinstance(schema, dict) else None
        return None

    def printer_columns(self, version: str) -> list[dict[str, Any]]:
        if self.crd is None:
            return []
        for v in self.crd.get("versions", []):
            if v.get("name") == version:
                cols = v.get("additionalPrinterColumns")
                return list(cols) if isinstance(cols, list) else []
        return []

    def storage_version_hash(self) -> str:
        digest = hashlib.sha256(f"{self.group}/{self.version}/{self.kind}".encode()).digest()
        import base64

        return base64.b64encode(digest[:8]).decode()


def _builtin() -> list[ResourceType]:
    core = [
        ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",),
                     subresources=("status", "finalize"), generation=False, name_rule="label",
                     verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
        ResourceType("", "v1", "nodes", "Node", namespaced=False, short_names=("no",),
                     subresources=("status",), generation=False),
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",), generation=False,
                     subresources=("token",)),
        ResourceType("", "v1", "secrets", "Secret", generation=False),
        ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",), generation=False),
        ResourceType("", "v1", "events", "Event", short_names=("ev",), generation=False),
        ResourceType("", "v1", "pods", "Pod", short_names=("po",), categories=("all",),
                     subresources=("status", "log", "eviction")),
        ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",),
                     subresources=("status",), generation=False),
        ResourceType("", "v1", "services", "Service", short_names=("svc",), categories=("all",),
                     subresources=("status",), generation=False, name_rule="label"),
        ResourceType("", "v1", "endpoints", "Endpoints", short_names=("ep",), generation=False),
    ]
    others = [
        ResourceType("batch", "v1", "jobs", "Job", categories=("all",), subresources=("status",),
                     default_propagation="Orphan"),
        ResourceType("apps", "v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",),
                     subresources=("status",)),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), categories=("all",),
                     subresources=("status",)),
        # Stored and served, not enforced (localkube has no evictions, no network policy, no ingress controller).
        ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
                     subresources=("status",)),
        ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",)),
        ResourceType("networking.k8s.io", "v1", "ingresses", "Ingress", short_names=("ing",),
                     subresources=("status",)),
        ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", generation=False, name_rule="path"),
        ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", generation=False,
                     name_rule="path"),
        ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False,
                     generation=False, name_rule="path"),
        ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                     namespaced=False, generation=False, name_rule="path"),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", generation=False),
        ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False,
                     short_names=("sc",), generation=False),
        # Stored and checked at pod admission (the RuntimeClass plug-in); the handler is not run: pods run as any other.
        ResourceType("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False, generation=False),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                     namespaced=False, short_names=("crd", "crds"), subresources=("status",)),
        ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
                     namespaced=False, verbs=("create",), generation=False),
        ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                     namespaced=False, verbs=("create",), generation=False),
        ResourceType("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
                     verbs=("create",), generation=False),
        ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False,
                     verbs=("create",), generation=False),
        ResourceType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                     "ValidatingWebhookConfiguration", namespaced=False, categories=("api-extensions",)),
        ResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                     "MutatingWebhookConfiguration", namespaced=False, categories=("api-extensions",)),
    ]
    return core + others


# Group versions the real server always lists, in its preferred order.
GROUP_ORDER = [
    "",
    "apps",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "authorization.k8s.io",
    "batch",
    "networking.k8s.io",
    "policy",
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "node.k8s.io",
]


class Registry:
    def __init__(self) -> None:
        # (group, version, resource) -> type; one ResourceType per served version.
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rt in _builtin():
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.resource)] = rt

    def remove_group_resource(self, group: str, resource: str) -> None:
        for k in [k for k in self._types if k[0] == group and k[2] == resource]:
            del self._types[k]

    def lookup(self, group: str, version: str, resource: str) -> ResourceType | None:
        return self._types.get((group, version, resource))

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        for rt in self._types.values():
            if rt.group == group and rt.kind == kind:
                return rt
        return None

    def by_key(self, group: str, resource: str) -> ResourceType | None:
        for rt in self._types.values():
            if rt.group == group and rt.resource == resource:
                return rt
        return None

    def all(self) -> Iterable[ResourceType]:
        return list(self._types.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, the preferred (storage) one first."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        for group, versions in out.items():
            rt0 = next(t for t in self._types.values() if t.group == group)
            if rt0.crd is not None:
                order = [v["name"] for v in rt0.crd.get("versions", []) if v.get("served")]
                versions.sort(key=lambda v: order.index(v) if v in order else 99)
        return out

    def types_in(self, group: str, version: str) -> list[ResourceType]:
        return sorted(
            (rt for rt in self._types.values() if rt.group == group and rt.version == version),
            key=lambda t: t.resource,
        )

    def groups_ordered(self) -> list[str]:
        groups = [g for g in self.group_versions() if g]
        known = [g for g in GROUP_ORDER if g in groups]
        return known + sorted(g for g in groups if g not in GROUP_ORDER)


def crd_resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions", []) if v.get("served")]
    out = []
    for v in served:
        subs = v.get("subresources") or {}
        out.append(
            ResourceType(
                group=spec["group"],
                version=v["name"],
                resource=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subs),
                crd=spec,
                served_versions=[x["name"] for x in served],
            )
        )
    return out
