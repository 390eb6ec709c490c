"""No privilege escalation through `lifecycle.rbac` (SPEC §1.5, issue 12).

The worker mints a Role with a run's `lifecycle.rbac` rules for the run's hooks. Kubernetes itself refuses to let a
user create a Role granting what the user does not hold; without this check, anyone who may create an AgentRun
could have the worker grant their hooks anything the worker holds. So the validating webhook asks the apiserver, with
one SubjectAccessReview per permission a rule grants, whether the requesting user (name, groups, uid, extra, as
the apiserver authenticated them) may do it themselves in the run's namespace. It is the namespaced kind
(`LocalSubjectAccessReview`, the same decision), so the API needs `create localsubjectaccessreviews` only in the
namespaces it serves, not a cluster-wide grant. Wildcards are checked as wildcards
(`*` verb, resource or group), as Kubernetes' own escalation check requires holding the wildcard itself.

The rules checked are exactly those the run will get: its own `spec.lifecycle.rbac`, or, when the run has no
`lifecycle`, its Agent's defaults. Whoever sends the request is who is checked: a run created through the HTTP API
is checked as the API's own ServiceAccount (it cannot be checked as the token's identity, which is no Kubernetes
user), so the API can never have runs mint more than it holds. A schedule's tick is created by the worker and is
checked as the worker. An Agent's lifecycle defaults are checked the same way against whoever writes them (the
Agents' own webhook, `/admission/agents`), so what a run inherits was put there by someone who holds it. A cluster
without the webhooks has none of this: `lifecyclePolicy` at workflow start, and the worker's own rights, are all
that bound the rules.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from models.agentrun import Lifecycle, RBACRule
from models.base import FieldProblem, parse
from models.kube import Kube, KubeError
from models.policy import Refusal
from models.resolve import ResolvedRun

RULE_ESCALATION = "lifecycle-rbac-escalation"
# Each permission is one review; a run asking more than this many combinations is refused rather than left to
# outlast the webhook's timeout.
MAX_REVIEWS = 256
REVIEW_TIMEOUT_SECONDS = 5.0


class Unreviewable(Exception):
    """A SubjectAccessReview could not be made, so the rules cannot be checked (the caller fails closed)."""


@dataclass(frozen=True)
class Requester:
    """The requesting user as the apiserver authenticated it (an AdmissionRequest's userInfo)."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


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
    attributes = {"namespace": namespace, "verb": p.verb, "group": p.group, "resource": p.resource}
    if p.subresource:
        attributes["subresource"] = p.subresource
    if p.name:
        attributes["name"] = p.name
    spec: dict[str, Any] = {"user": who.username, "groups": list(who.groups), "resourceAttributes": attributes}
    if who.uid:
        spec["uid"] = who.uid
    if who.extra:
        spec["extra"] = {k: list(v) for k, v in who.extra}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": namespace}, "spec": spec}
    authz = client.AuthorizationV1Api(kube.api)
    try:
        review = await kube.call(authz.create_namespaced_local_subject_access_review, namespace, body,
                                 _request_timeout=REVIEW_TIMEOUT_SECONDS,
                                 action=f"review whether {who.username} may {p.describe()} in {namespace}")
    except KubeError as e:
        raise Unreviewable(str(e)) from e
    return bool(review.status and review.status.allowed)


async def escalation(kube: Kube, who: Requester, namespace: str,
                     rules: list[tuple[str, RBACRule]]) -> Refusal | None:
    """The first rule `who` could not exercise themselves, as a refusal naming the rule and the missing permission;
    None when they hold every permission the rules grant. `Unreviewable` when the apiserver cannot be asked."""
    asked = [(field, p) for field, rule in rules for p in permissions(rule)]
    if len(asked) > MAX_REVIEWS:
        return Refusal(RULE_ESCALATION, f"lifecycle.rbac grants {len(asked)} permission combinations (apiGroups x "
                                        f"resources x verbs x resourceNames); at most {MAX_REVIEWS} can be checked "
                                        "against what the requesting user holds")
    results = await asyncio.gather(*(_allowed(kube, who, namespace, p) for _, p in asked))
    for (field, p), ok in zip(asked, results, strict=True):
        if not ok:
            return Refusal(RULE_ESCALATION,
                           f'{field}: "{who.username}" may not grant {p.describe()} in namespace "{namespace}" to the '
                           "run's hooks: it does not hold that permission itself (nobody can give their hooks "
                           "permissions they do not hold)")
    return None
