"""No privilege escalation through what a run is handed: RBAC rules and Secrets (SPEC §1.5, issues 12 and 27).

The worker mints Roles with a run's `lifecycle.rbac` rules for its hooks and with a SkillPack's `sidecar.rbac` for
its sidecar (and, once the agent issue mints them, ClusterRoles with `clusterRBAC`), and it creates the pods that
read every Secret the run names. Kubernetes itself refuses to let a user create a Role granting what the user does
not hold, and lets whoever creates a pod read any Secret of its namespace; without this check, anyone who may create
an AgentRun could have the worker grant their hooks anything the worker holds, and read every Secret of the
namespace through a hook's env. So the admission webhooks ask the apiserver, with one SubjectAccessReview per
permission, whether the identity that authored the object (name and groups; uid and extra when it is the requesting
user) may do it themselves: each (apiGroup, resource, verb, resourceName) a rule grants, in the namespace
(`LocalSubjectAccessReview`, so namespaced rules need `create localsubjectaccessreviews` only in the namespaces
served) or cluster-wide for a ClusterRole's rules (`SubjectAccessReview`); and `get` on each Secret by name.
Wildcards are checked as wildcards (`*` verb, resource or group), as Kubernetes' own escalation check requires
holding the wildcard itself.

Who is checked is the object's author (models/authorship.py): the requesting user, or, for what the control plane
creates on someone's behalf (a run through the API, a schedule's tick, an Agent stamped from a pack), the author it
carries. A cluster without the webhooks has none of this: `lifecyclePolicy` at workflow start, and the worker's own
rights, are all that bound the rules.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from kube import Kube, KubeError
from models.agentrun import Lifecycle, RBACRule
from models.authorship import Author
from models.base import FieldProblem, parse
from models.policy import Refusal
from models.resolve import ResolvedRun
from models.secretrefs import SecretRef

RULE_ESCALATION = "lifecycle-rbac-escalation"
RULE_SECRET = "secret-by-reference"
# Each permission is one review; a run asking more than this many combinations is refused rather than left to
# outlast the webhook's timeout.
MAX_REVIEWS = 256
REVIEW_TIMEOUT_SECONDS = 5.0


class Unreviewable(Exception):
    """A SubjectAccessReview could not be made, so the rules cannot be checked (the caller fails closed)."""


@dataclass(frozen=True)
class Requester:
    """Who is checked: the requesting user as the apiserver authenticated it (an AdmissionRequest's userInfo), or
    the author a control plane component carries (name and groups only)."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, author: Author) -> Requester:
        return cls(author.username, author.groups)


@dataclass
class Grants:
    """What an object hands the pods made for it, each with the field that asks for it: Role rules (in its
    namespace), ClusterRole rules (cluster-wide) and Secrets (read by name)."""

    rules: list[tuple[str, RBACRule]] = field(default_factory=list)
    cluster_rules: list[tuple[str, RBACRule]] = field(default_factory=list)
    secrets: list[SecretRef] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rules or self.cluster_rules or self.secrets)

    def __add__(self, other: Grants) -> Grants:
        return Grants(self.rules + other.rules, self.cluster_rules + other.cluster_rules, self.secrets + other.secrets)


@dataclass(frozen=True)
class Permission:
    group: str
    resource: str
    subresource: str
    verb: str
    name: str = ""

    def describe(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        group = f' in API group "{self.group}"' if self.group else ""
        named = f' named "{self.name}"' if self.name else ""
        return f"{self.verb} {what}{named}{group}"


def permissions(rule: RBACRule) -> list[Permission]:
    """Every (apiGroup, resource, verb, resourceName) combination the rule grants."""
    out: list[Permission] = []
    for group in rule.api_groups or [""]:
        for combined in rule.resources:
            resource, _, sub = combined.partition("/")
            for verb in rule.verbs:
                for name in rule.resource_names or [""]:
                    out.append(Permission(group, resource, sub, verb, name))
    return out


def rules_checked(run: dict[str, Any], rbac: list[RBACRule] | None, agent: str) -> list[tuple[str, RBACRule]]:
    """The rules the run will grant, each with the field that asks for it. `rbac` is what resolution found (None if
    the run did not resolve: then the run's own rules, as far as they parse)."""
    raw = run.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    own = spec.get("lifecycle") is not None
    if rbac is None:
        if not own:
            return []
        try:
            rbac = parse(Lifecycle, spec["lifecycle"], "spec.lifecycle").rbac
        except FieldProblem:
            return []  # the run fails at start; an UPDATE that fixes it is checked again
    if own:
        return [(f"spec.lifecycle.rbac[{i}]", rule) for i, rule in enumerate(rbac)]
    return [(f'spec.lifecycle.rbac[{i}] (inherited from Agent "{agent}" spec.agents.default.lifecycle.rbac[{i}])',
             rule) for i, rule in enumerate(rbac)]


def skill_rules_checked(resolved: ResolvedRun | None) -> list[tuple[str, RBACRule]]:
    """A run's SkillPack sidecar rules, each named: the worker mints them for the run like lifecycle.rbac, so whoever
    creates the run must hold them too (whoever wrote the SkillPack)."""
    if resolved is None:
        return []
    return [(f'SkillPack "{p.name}" spec.sidecar.rbac[{j}] (skill of this run)', rule)
            for p in resolved.sidecars if p.sidecar is not None for j, rule in enumerate(p.sidecar.rules)]


async def _allowed(kube: Kube, who: Requester, namespace: str, p: Permission) -> bool:
    """`namespace` empty: a cluster-wide review (a ClusterRole's rule)."""
    attributes = {"verb": p.verb, "group": p.group, "resource": p.resource}
    if namespace:
        attributes["namespace"] = namespace
    if p.subresource:
        attributes["subresource"] = p.subresource
    if p.name:
        attributes["name"] = p.name
    spec: dict[str, Any] = {"user": who.username, "groups": list(who.groups), "resourceAttributes": attributes}
    if who.uid:
        spec["uid"] = who.uid
    if who.extra:
        spec["extra"] = {k: list(v) for k, v in who.extra}
    authz = client.AuthorizationV1Api(kube.api)
    where = f"in {namespace}" if namespace else "cluster-wide"
    action = f"review whether {who.username} may {p.describe()} {where}"
    try:
        if namespace:
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                    "metadata": {"namespace": namespace}, "spec": spec}
            review = await kube.call(authz.create_namespaced_local_subject_access_review, namespace, body,
                                     _request_timeout=REVIEW_TIMEOUT_SECONDS, action=action)
        else:
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
            review = await kube.call(authz.create_subject_access_review, body,
                                     _request_timeout=REVIEW_TIMEOUT_SECONDS, action=action)
    except KubeError as e:
        raise Unreviewable(str(e)) from e
    return bool(review.status and review.status.allowed)


async def refusal(kube: Kube, who: Requester, namespace: str, grants: Grants) -> Refusal | None:
    """The first grant `who` does not hold, as a refusal naming its field and what is missing; None when they hold
    all of them. `Unreviewable` when the apiserver cannot be asked (the caller fails closed)."""
    asked: list[tuple[str, str, Permission]] = [(f, namespace, p) for f, rule in grants.rules for p in permissions(rule)]
    asked += [(f, "", p) for f, rule in grants.cluster_rules for p in permissions(rule)]
    secrets = [(ref.field, namespace, Permission("", "secrets", "", "get", ref.name)) for ref in grants.secrets]
    if len(asked) + len(secrets) > MAX_REVIEWS:
        return Refusal(RULE_ESCALATION, f"the rules and Secrets here grant {len(asked) + len(secrets)} permission "
                                        "combinations (apiGroups x resources x verbs x resourceNames, and one per "
                                        f"Secret); at most {MAX_REVIEWS} can be checked against what "
                                        f'"{who.username}" holds')
    unique = list(dict.fromkeys((ns, p) for _, ns, p in asked + secrets))
    results = dict(zip(unique, await asyncio.gather(*(_allowed(kube, who, ns, p) for ns, p in unique)), strict=True))
    for field_name, ns, p in asked:
        if not results[(ns, p)]:
            where = f'in namespace "{ns}"' if ns else "cluster-wide (a ClusterRole)"
            return Refusal(RULE_ESCALATION,
                           f'{field_name}: "{who.username}" may not grant {p.describe()} {where}: it does not hold '
                           "that permission itself (nobody can give a run's hooks or sidecars permissions they do not "
                           "hold)")
    for field_name, ns, p in secrets:
        if not results[(ns, p)]:
            return Refusal(RULE_SECRET,
                           f'{field_name}: "{who.username}" may not get Secret "{p.name}" in namespace "{ns}": the '
                           "run's pods would read it on their behalf (nobody can hand a run a Secret they cannot "
                           "read themselves)")
    return None
