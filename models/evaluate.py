"""A run evaluated against its Agent and SympoziumPolicy: the one code path behind both checks.

The workflow's first activity (`KubeActivities.resolve_run`) and the admission webhook
(`api/admission.py`) both call `evaluate_run`, so a run the webhook admits is exactly a run the
workflow accepts, and a cluster without the webhook refuses the same runs at workflow start.
Reading objects is injected (`Reader`): the activity reads through its rate-limited client and
maps errors for Temporal's retries; the webhook reads with a short timeout and fails closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .agent import normalize_agent
from .base import FieldProblem
from .compat import check_agent_backend, ignored_fields
from .names import API_VERSION, POLICIES
from .policy import TEMPLATES, PolicyRules, normalize_policy
from .resolve import ResolvedRun, resolve_run
from .skills import SKILLPACKS, resolve_skills, skill_pack_names

# (plural, name) → the object in the run's namespace, or None if it does not exist; other
# errors propagate.
Reader = Callable[[str, str], Awaitable[dict[str, Any] | None]]

AGENT_PLURALS = ("agents", "sympoziuminstances")
# The policies Sympozium's Helm chart installs by default (permissive, restrictive; default is our third
# template), by object name. An Agent may name one without a SympoziumPolicy object of that name: with no
# installer putting them into every namespace, the name means the built-in template. An object of the name wins.
BUILTIN_POLICIES = {template.lower(): template for template in TEMPLATES}


@dataclass
class Evaluation:
    agent_name: str
    resolved: ResolvedRun | None = None
    # Why the run cannot start; a PolicyViolation when a policy rule refused it.
    problem: FieldProblem | None = None
    policy: PolicyRules | None = None
    # Fields of the run, its Agent or policy that have no effect here (models/compat.py): warned about, noted.
    ignored: list[str] = field(default_factory=list)


def agent_name_of(run: dict[str, Any]) -> str:
    spec = run.get("spec")
    if not isinstance(spec, dict):
        return ""
    return str(spec.get("agentRef") or spec.get("instanceRef") or "")


async def read_agent(read: Reader, name: str) -> dict[str, Any] | None:
    """The Agent of that name, or the legacy SympoziumInstance, or None."""
    for plural in AGENT_PLURALS:
        obj = await read(plural, name)
        if obj is not None:
            return obj
    return None


def builtin_policy(name: str) -> dict[str, Any] | None:
    """The built-in policy an Agent may name without an object, as the object it stands for; None if not one."""
    template = BUILTIN_POLICIES.get(name)
    if template is None:
        return None
    return {"apiVersion": API_VERSION, "kind": "SympoziumPolicy", "metadata": {"name": name},
            "spec": {"template": template}}


async def read_policy(read: Reader, name: str) -> dict[str, Any] | None:
    """The SympoziumPolicy of that name in the run's namespace, else the built-in one of that name, else None."""
    obj = await read(POLICIES, name)
    return obj if obj is not None else builtin_policy(name)


def policy_not_found(name: str, namespace: str) -> FieldProblem:
    builtin = ", ".join(BUILTIN_POLICIES)
    return FieldProblem("agent policyRef", f'SympoziumPolicy "{name}" not found in namespace "{namespace}": create '
                                           f"it (kubectl apply -n {namespace} -f a SympoziumPolicy named {name}; "
                                           f"examples/policies/ has three to start from) or name a built-in policy: "
                                           f"{builtin}")


async def evaluate_run(run: dict[str, Any], *, read: Reader, default_image: str) -> Evaluation:
    """Resolve `run` against its Agent and that Agent's policy; problems are returned, not raised."""
    ns = str((run.get("metadata") or {}).get("namespace", ""))
    out = Evaluation(agent_name=agent_name_of(run))
    if not out.agent_name:
        out.problem = FieldProblem("spec.agentRef", "required: the name of an Agent in the same namespace")
        return out
    agent = await read_agent(read, out.agent_name)
    if agent is None:
        out.problem = FieldProblem("spec.agentRef", f'Agent "{out.agent_name}" not found in namespace "{ns}"')
        return out
    policy: dict[str, Any] | None = None
    try:
        check_agent_backend(agent)
        profile = normalize_agent(agent)
        if profile.policy_ref:
            policy = await read_policy(read, profile.policy_ref)
            if policy is None:
                raise policy_not_found(profile.policy_ref, ns)
            out.policy = normalize_policy(policy)
        out.resolved = resolve_run(run, profile, default_image=default_image, policy=out.policy)
        own = bool((run.get("spec") or {}).get("skills"))
        packs = {}
        for name in skill_pack_names(out.resolved.skills):
            obj = await read(SKILLPACKS, name)
            if obj is not None:
                packs[name] = obj
        out.resolved.skill_packs = resolve_skills(out.resolved.skills, packs, policy=out.policy,
                                                  field="spec.skills" if own else f'Agent "{out.agent_name}" spec.skills')
    except FieldProblem as p:
        out.problem = p
    out.ignored = ignored_fields(run, agent, policy)
    return out
