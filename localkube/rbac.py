"""RBAC authorization with the semantics of the real kube-apiserver.

localkube serves the Kubernetes API to ordinary clients (kubectl, client-go, the Python client,
controllers running under service accounts). Those clients expect the server to enforce
``rbac.authorization.k8s.io/v1`` the way a real cluster does: a service account that is only bound to
a Role in ``ns1`` must get a 403 in ``ns2``, with the very same ``Status`` message text that kubectl and
controllers print and sometimes parse. This module is a faithful, dependency-free port of
``k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac`` (``rbac.go`` + ``rule.go``) and of the helpers in
``pkg/apis/rbac/v1/evaluation_helpers.go``, operating on the plain JSON (dict) form of Role, ClusterRole,
RoleBinding and ClusterRoleBinding so that it can sit directly on top of localkube's object store.

Semantics reproduced from upstream:

* Rules are visited ClusterRoleBindings first, then (only for namespaced requests) the RoleBindings of
  the request's namespace; the first matching rule allows. Nothing ever denies explicitly.
* ``verbs`` and ``apiGroups`` match exactly or via ``*``. ``resources`` match ``*``, the exact combined
  ``resource/subresource`` string, or ``*/subresource``. As upstream, ``pods/*`` is *not* a wildcard
  over subresources (it only matches a subresource literally named ``*``) and a bare ``pods`` does not
  match ``pods/log``.
* ``resourceNames`` restrict only when non-empty, and then the request's name must be listed, so such a
  rule never matches ``list``/``watch``/``create``/``deletecollection`` requests that carry no name.
* ``nonResourceURLs`` match ``*``, exactly, or by prefix when the rule ends in ``*``. Non-resource
  requests have no namespace, so only ClusterRoleBindings can grant them.
* A RoleBinding may reference a Role of its own namespace or a ClusterRole, whose rules then apply only
  inside the binding's namespace.
* Subjects: ``User`` and ``Group`` match by name; ``ServiceAccount`` matches
  ``system:serviceaccount:<namespace>:<name>``, the namespace defaulting to the binding's namespace for
  RoleBindings (a ServiceAccount subject without namespace in a ClusterRoleBinding matches nobody).
* Bindings whose role is missing are skipped; the lookup error is reported in the deny reason exactly as
  upstream (``RBAC: role.rbac.authorization.k8s.io "x" not found``).

Not supported: ClusterRole ``aggregationRule`` (the aggregation controller is not emulated; the default
``admin``/``edit``/``view`` roles below ship with their aggregated rules flattened in), and the
``system:masters`` short-circuit that kube-apiserver configures *outside* RBAC (here ``system:masters``
is powerful only through the default ``cluster-admin`` ClusterRoleBinding).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Attributes",
    "RBACSource",
    "UserInfo",
    "authorize",
    "default_cluster_role_bindings",
    "default_cluster_roles",
    "forbidden_message",
    "rule_allows",
    "rules_for",
]

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_GROUP}/v1"

SERVICE_ACCOUNT_USERNAME_PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
MASTERS_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    """The authenticated identity of a request (k8s.io/apiserver/pkg/authentication/user.Info)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    @staticmethod
    def service_account(namespace: str, name: str, uid: str = "") -> UserInfo:
        """The identity a service-account token authenticates as, groups included (uid: the ServiceAccount's)."""
        return UserInfo(
            name=f"{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}",
            groups=(
                ALL_SERVICE_ACCOUNTS_GROUP,
                f"{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}",
                AUTHENTICATED_GROUP,
            ),
            uid=uid,
        )


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do (k8s.io/apiserver/pkg/authorization/authorizer.Attributes)."""

    verb: str
    resource_request: bool
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


class RBACSource(Protocol):
    """Read access to the RBAC objects; getters return None when the object does not exist."""

    def get_role(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def get_cluster_role(self, name: str) -> Mapping[str, Any] | None: ...

    def list_role_bindings(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def list_cluster_role_bindings(self) -> Iterable[Mapping[str, Any]]: ...


class StoredObjects(Protocol):
    """localkube's object store, as far as `StoreRBAC` reads it."""

    def get(self, key: tuple[str, str], namespace: str, name: str) -> Any: ...

    def select(self, key: tuple[str, str], namespace: str | None = None) -> list[Any]: ...


class StoreRBAC:
    """The RBACSource of a running localkube: its stored Roles, ClusterRoles and bindings, read at each decision
    (the RBAC authorizer's listers)."""

    def __init__(self, store: StoredObjects) -> None:
        self.store = store

    def get_role(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.store.get((RBAC_GROUP, "roles"), namespace, name)

    def get_cluster_role(self, name: str) -> Mapping[str, Any] | None:
        return self.store.get((RBAC_GROUP, "clusterroles"), "", name)

    def list_role_bindings(self, namespace: str) -> list[Any]:
        return self.store.select((RBAC_GROUP, "rolebindings"), namespace)

    def list_cluster_role_bindings(self) -> list[Any]:
        return self.store.select((RBAC_GROUP, "clusterrolebindings"))


# --------------------------------------------------------------------------------------------------
# Rule evaluation (pkg/apis/rbac/v1/evaluation_helpers.go)
# --------------------------------------------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    """A JSON string list that may be absent or null."""
    if not value:
        return []
    return [v for v in value if isinstance(v, str)]


def _verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    return any(v == "*" or v == verb for v in _strings(rule.get("verbs")))


def _api_group_matches(rule: Mapping[str, Any], group: str) -> bool:
    return any(g == "*" or g == group for g in _strings(rule.get("apiGroups")))


def _resource_matches(rule: Mapping[str, Any], combined: str, subresource: str) -> bool:
    for r in _strings(rule.get("resources")):
        if r == "*" or r == combined:
            return True
        if subresource and len(r) == len(subresource) + 2 and r.startswith("*/") and r.endswith(subresource):
            return True
    return False


def _resource_name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = _strings(rule.get("resourceNames"))
    return not names or name in names


def _non_resource_url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for url in _strings(rule.get("nonResourceURLs")):
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """Whether one PolicyRule grants the request (rbac.go RuleAllows)."""
    if attrs.resource_request:
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        return (
            _verb_matches(rule, attrs.verb)
            and _api_group_matches(rule, attrs.api_group)
            and _resource_matches(rule, combined, attrs.subresource)
            and _resource_name_matches(rule, attrs.name)
        )
    return _verb_matches(rule, attrs.verb) and _non_resource_url_matches(rule, attrs.path)


# --------------------------------------------------------------------------------------------------
# Rule resolution (pkg/registry/rbac/validation/rule.go)
# --------------------------------------------------------------------------------------------------


def _go_quote(s: str) -> str:
    """Go's %q / strconv.Quote, close enough for names and messages."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _subjects(binding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    subjects = binding.get("subjects") or []
    return [s for s in subjects if isinstance(s, Mapping)]


def _applies_to_user(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    kind = subject.get("kind", "")
    name = subject.get("name", "")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        if not sa_namespace:
            return False
        return user.name == f"{SERVICE_ACCOUNT_USERNAME_PREFIX}{sa_namespace}:{name}"
    return False


def _applies_to(
    user: UserInfo, subjects: list[Mapping[str, Any]], namespace: str
) -> Mapping[str, Any] | None:
    for subject in subjects:
        if _applies_to_user(user, subject, namespace):
            return subject
    return None


def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind = str(subject.get("kind", ""))
    name = str(subject.get("name", ""))
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return f"{kind} {_go_quote(f'{name}/{ns}')}"
    return f"{kind} {_go_quote(name)}"


def _describe_binding(binding: Mapping[str, Any], subject: Mapping[str, Any], namespaced: bool) -> str:
    meta = _meta(binding)
    role_ref = binding.get("roleRef") or {}
    ref = f"{role_ref.get('kind', '')} {_go_quote(str(role_ref.get('name', '')))}"
    if namespaced:
        ns = str(meta.get("namespace", ""))
        label = _go_quote(f"{meta.get('name', '')}/{ns}")
        return f"RoleBinding {label} of {ref} to {_describe_subject(subject, ns)}"
    label = _go_quote(str(meta.get("name", "")))
    return f"ClusterRoleBinding {label} of {ref} to {_describe_subject(subject, '')}"


class _RoleRefError(Exception):
    pass


def _role_reference_rules(
    role_ref: Mapping[str, Any], binding_namespace: str, source: RBACSource
) -> list[Mapping[str, Any]]:
    kind = role_ref.get("kind", "")
    name = str(role_ref.get("name", ""))
    role: Mapping[str, Any] | None
    if kind == "Role":
        role = source.get_role(binding_namespace, name) if binding_namespace else None
        if role is None:
            raise _RoleRefError(f"role.{RBAC_GROUP} {_go_quote(name)} not found")
    elif kind == "ClusterRole":
        role = source.get_cluster_role(name)
        if role is None:
            raise _RoleRefError(f"clusterrole.{RBAC_GROUP} {_go_quote(name)} not found")
    else:
        raise _RoleRefError(f"unsupported role reference kind: {_go_quote(str(kind))}")
    rules = role.get("rules") or []
    return [r for r in rules if isinstance(r, Mapping)]


def _visit_rules(
    user: UserInfo, namespace: str, source: RBACSource, errors: list[str]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Yield (source description, rule) in upstream order; role lookup failures go to ``errors``."""
    for crb in source.list_cluster_role_bindings():
        subject = _applies_to(user, _subjects(crb), "")
        if subject is None:
            continue
        try:
            rules = _role_reference_rules(crb.get("roleRef") or {}, "", source)
        except _RoleRefError as e:
            errors.append(str(e))
            continue
        description = _describe_binding(crb, subject, namespaced=False)
        for rule in rules:
            yield description, rule

    if not namespace:
        return
    for rb in source.list_role_bindings(namespace):
        subject = _applies_to(user, _subjects(rb), namespace)
        if subject is None:
            continue
        try:
            rules = _role_reference_rules(rb.get("roleRef") or {}, namespace, source)
        except _RoleRefError as e:
            errors.append(str(e))
            continue
        description = _describe_binding(rb, subject, namespaced=True)
        for rule in rules:
            yield description, rule


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(errs).Error(): single message bare, several de-duplicated in brackets."""
    unique = list(dict.fromkeys(errors))
    if len(errors) == 1 or len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def rules_for(user: UserInfo, namespace: str, source: RBACSource) -> tuple[list[dict[str, Any]], list[str]]:
    """All rules that apply to ``user`` in ``namespace`` ('' = cluster scope) and the lookup errors met.

    The building block of SelfSubjectRulesReview (DefaultRuleResolver.RulesFor).
    """
    errors: list[str] = []
    rules = [dict(rule) for _, rule in _visit_rules(user, namespace, source, errors)]
    return rules, errors


def authorize(user: UserInfo, attrs: Attributes, source: RBACSource) -> tuple[bool, str]:
    """Decide a request as the RBAC authorizer does; returns (allowed, reason).

    On allow the reason names the granting binding, e.g.
    ``RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group
    "system:masters"``. On deny (upstream: DecisionNoOpinion) the reason is empty unless some referenced
    role could not be resolved, in which case it is ``RBAC: <errors>``.
    """
    errors: list[str] = []
    for description, rule in _visit_rules(user, attrs.namespace, source, errors):
        if rule_allows(attrs, rule):
            return True, f"RBAC: allowed by {description}"
    if errors:
        return False, f"RBAC: {_aggregate(errors)}"
    return False, ""


# --------------------------------------------------------------------------------------------------
# 403 message (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go)
# --------------------------------------------------------------------------------------------------


def _sanitize(msg: str) -> str:
    """Avoid emitting errors that look like valid HTML, as the apiserver's sanitizer does."""
    return msg.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _forbidden_detail(user: UserInfo, attrs: Attributes) -> str:
    username = _go_quote(user.name)
    if not attrs.resource_request:
        return f"User {username} cannot {attrs.verb} path {_go_quote(attrs.path)}"
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    head = (
        f"User {username} cannot {attrs.verb} resource {_go_quote(resource)} "
        f"in API group {_go_quote(attrs.api_group)}"
    )
    if attrs.namespace:
        return f"{head} in the namespace {_go_quote(attrs.namespace)}"
    return f"{head} at the cluster scope"


def forbidden_message(user: UserInfo, attrs: Attributes, reason: str = "") -> str:
    """The ``message`` of the 403 Status the real apiserver returns for a denied request.

    ``reason`` is the authorizer's reason; the real server appends it after ``": "`` when non-empty.
    """
    detail = _sanitize(_forbidden_detail(user, attrs))
    if reason:
        detail = f"{detail}: {reason}"
    # apierrors.NewForbidden(GroupResource{Group, Resource}, name, err); the resource excludes the
    # subresource, and non-resource requests have an empty GroupResource.
    group = attrs.api_group if attrs.resource_request else ""
    resource = attrs.resource if attrs.resource_request else ""
    if not group and not resource:
        return f"forbidden: {detail}"
    qualified = f"{resource}.{group}" if group else resource
    if not attrs.name:
        return f"{qualified} is forbidden: {detail}"
    return f"{qualified} {_go_quote(attrs.name)} is forbidden: {detail}"


# --------------------------------------------------------------------------------------------------
# Bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go)
# --------------------------------------------------------------------------------------------------

_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_READ_WRITE = _READ + _WRITE


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, Any]:
    return {"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)}


def _url_rule(verbs: list[str], urls: list[str]) -> dict[str, Any]:
    return {"verbs": list(verbs), "nonResourceURLs": list(urls)}


def _bootstrap_metadata(name: str, extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/bootstrapping": "rbac-defaults"}
    labels.update(extra_labels or {})
    return {
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }


def _cluster_role(
    name: str, rules: list[dict[str, Any]], extra_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": _bootstrap_metadata(name, extra_labels),
        "rules": rules,
    }


def _view_rules() -> list[dict[str, Any]]:
    return [
        _rule(_READ, [""], [
            "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
            "services", "services/status", "endpoints", "persistentvolumeclaims",
            "persistentvolumeclaims/status", "configmaps",
        ]),
        _rule(_READ, [""], [
            "limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
            "namespaces/status", "replicationcontrollers/status", "pods/log",
        ]),
        _rule(_READ, [""], ["namespaces"]),
        _rule(_READ, ["discovery.k8s.io"], ["endpointslices"]),
        _rule(_READ, ["apps"], [
            "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
            "daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
            "replicasets", "replicasets/status", "replicasets/scale",
        ]),
        _rule(_READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
        _rule(_READ, ["batch"], ["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
        _rule(_READ, ["extensions"], [
            "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
            "ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
            "replicationcontrollers/scale", "networkpolicies",
        ]),
        _rule(_READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        _rule(_READ, ["networking.k8s.io"], ["networkpolicies", "ingresses", "ingresses/status"]),
    ]


def _edit_only_rules() -> list[dict[str, Any]]:
    return [
        _rule(_READ, [""], [
            "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy",
        ]),
        _rule(["impersonate"], [""], ["serviceaccounts"]),
        _rule(_WRITE, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
        _rule(["create"], [""], ["pods/eviction"]),
        _rule(_WRITE, [""], [
            "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
            "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events",
        ]),
        _rule(["create"], [""], ["serviceaccounts/token"]),
        _rule(_WRITE, ["apps"], [
            "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
            "deployments/rollback", "replicasets", "replicasets/scale",
        ]),
        _rule(_WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
        _rule(_WRITE, ["batch"], ["jobs", "cronjobs"]),
        _rule(_WRITE, ["extensions"], [
            "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
            "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies",
        ]),
        _rule(_WRITE, ["policy"], ["poddisruptionbudgets"]),
        _rule(_WRITE, ["networking.k8s.io"], ["networkpolicies", "ingresses"]),
    ]


def _admin_only_rules() -> list[dict[str, Any]]:
    return [
        _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
        _rule(_READ_WRITE, [RBAC_GROUP], ["roles", "rolebindings"]),
    ]


def default_cluster_roles() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoles that matter to ordinary clients (fresh copies on every call).

    ``admin``/``edit``/``view`` carry the rules the aggregation controller would have produced from the
    ``system:aggregate-to-*`` roles; they have no ``aggregationRule`` because aggregation is not emulated.
    """
    return [
        _cluster_role("cluster-admin", [
            _rule(["*"], ["*"], ["*"]),
            _url_rule(["*"], ["*"]),
        ]),
        _cluster_role("system:discovery", [
            _url_rule(["get"], [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                "/readyz", "/version", "/version/",
            ]),
        ]),
        _cluster_role("system:public-info-viewer", [
            _url_rule(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"]),
        ]),
        _cluster_role("system:basic-user", [
            _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
        ]),
        # What a server that delegates authentication and authorization to the API server needs (kube-aggregator's
        # and webhooks' role).
        _cluster_role("system:auth-delegator", [
            _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
        ]),
        _cluster_role("admin", _admin_only_rules() + _edit_only_rules() + _view_rules()),
        _cluster_role(
            "edit",
            _edit_only_rules() + _view_rules(),
            {"rbac.authorization.k8s.io/aggregate-to-admin": "true"},
        ),
        _cluster_role("view", _view_rules(), {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
    ]


def _cluster_role_binding(name: str, groups: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": _bootstrap_metadata(name),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
    }


def default_cluster_role_bindings() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoleBindings for the roles above (fresh copies on every call)."""
    return [
        _cluster_role_binding("cluster-admin", [MASTERS_GROUP]),
        _cluster_role_binding("system:discovery", [AUTHENTICATED_GROUP]),
        _cluster_role_binding("system:basic-user", [AUTHENTICATED_GROUP]),
        _cluster_role_binding("system:public-info-viewer", [AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
    ]
