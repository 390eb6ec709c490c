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

from . import authorship
from .agent import AgentProfile, normalize_agent
from .authorship import Author
from .base import FieldProblem
from .bounds import check_resolved_size
from .compat import check_agent_backend, ignored_fields
from .names import AGENTRUNS, AGENTS, API_VERSION, POLICIES
from .policy import TEMPLATES, PolicyRules, normalize_policy
from .resolve import SANDBOX_FIELD, ResolvedRun, check_subagent_limits, resolve_run
from .skills import SKILLPACKS, missing_packs, resolve_skills, skill_pack_names

# (plural, name) → the object in the run's namespace, or None if it does not exist; other
# errors propagate.
Reader = Callable[[str, str], Awaitable[dict[str, Any] | None]]
# The AgentRuns of the run's namespace (for a sub-agent's siblings).
RunLister = Callable[[], Awaitable[list[dict[str, Any]]]]
# Whether the cluster has a RuntimeClass of that name (cluster-scoped).
RuntimeClassCheck = Callable[[str], Awaitable[bool]]

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
    # The SkillPacks its skills name that do not exist (skipped, as Sympozium does), each as "<field>: <name>".
    missing_packs: list[str] = field(default_factory=list)
    # A sub-agent's parent run as the limit check read it (with `list_runs`), for the worker to link the child to.
    parent_run: dict[str, Any] | None = None
    # The Agent as read and normalised, and the author it records (models/authorship.py), once it was read.
    profile: AgentProfile | None = None
    agent_author: Author | None = None


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


# Sorts after every RFC 3339 time: a run not stored yet (at admission) was created after every stored one.
NOT_YET_CREATED = "~"


def _created(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("creationTimestamp") or NOT_YET_CREATED), str(meta.get("name") or "")


async def _check_parent(run: dict[str, Any], resolved: ResolvedRun, policy: PolicyRules | None, read: Reader,
                        list_runs: RunLister) -> dict[str, Any] | None:
    """A sub-agent against its parent run's Agent's `subagents` limits and the siblings created before it; the
    parent run, or None for a run that is not a sub-agent."""
    parent = resolved.parent
    if parent is None:
        return None
    parent_obj = await read("agentruns", parent.run_name)
    if parent_obj is None:
        raise FieldProblem("spec.parent.runName", f'parent AgentRun "{parent.run_name}" not found in namespace '
                                                  f'"{resolved.ref.namespace}"')
    parent_agent_name = agent_name_of(parent_obj)
    parent_agent = await read_agent(read, parent_agent_name) if parent_agent_name else None
    if parent_agent is None:
        raise FieldProblem("spec.parent.runName", f'the Agent "{parent_agent_name}" of parent AgentRun '
                                                  f'"{parent.run_name}" not found')
    uid, me = resolved.ref.uid, _created(run)
    siblings = sorted((r for r in await list_runs()
                       if ((r.get("spec") or {}).get("parent") or {}).get("runName") == parent.run_name
                       and (r.get("metadata") or {}).get("uid") != uid and _created(r) < me), key=_created)
    check_subagent_limits(resolved, parent_agent=parent_agent_name, limits=normalize_agent(parent_agent).subagents,
                          siblings=siblings, policy=policy)
    return parent_obj


async def evaluate_run(run: dict[str, Any], *, read: Reader, default_image: str, list_runs: RunLister | None = None,
                       runtime_class_exists: RuntimeClassCheck | None = None) -> Evaluation:
    """Resolve `run` against its Agent and that Agent's policy; problems are returned, not raised.

    With `list_runs`, a sub-agent is checked against its parent's limits; with `runtime_class_exists`, the
    RuntimeClass the agent pod asks for must exist (else its Job could never create the pod)."""
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
    out.agent_author = authorship.read(AGENTS, agent)
    try:
        check_agent_backend(agent)
        profile = out.profile = normalize_agent(agent)
        if profile.policy_ref:
            policy = await read_policy(read, profile.policy_ref)
            if policy is None:
                raise policy_not_found(profile.policy_ref, ns)
            out.policy = normalize_policy(policy)
        out.resolved = resolve_run(run, profile, default_image=default_image, policy=out.policy)
        # What follows can still refuse the run (a SkillPack's sidecar against the policy, the parent's limits, a
        # missing RuntimeClass): then it has no resolved spec, so the workflow fails it before anything is made.
        try:
            own = bool((run.get("spec") or {}).get("skills"))
            packs = {}
            for name in skill_pack_names(out.resolved.skills):
                obj = await read(SKILLPACKS, name)
                if obj is not None:
                    packs[name] = obj
            skills_field = "spec.skills" if own else f'Agent "{out.agent_name}" spec.skills'
            out.resolved.skill_packs = resolve_skills(out.resolved.skills, packs, policy=out.policy, field=skills_field)
            out.missing_packs = [f'{skills_field}: SkillPack "{n}" not found in namespace "{ns}"'
                                 for n in missing_packs(out.resolved.skills, packs)]
            if list_runs is not None:
                out.parent_run = await _check_parent(run, out.resolved, out.policy, read, list_runs)
            rc = out.resolved.runtime_class_name
            if rc and runtime_class_exists is not None and not await runtime_class_exists(rc):
                raise FieldProblem(SANDBOX_FIELD, f'RuntimeClass "{rc}" not found in the cluster: the agent pod could '
                                                  "never be created (create the RuntimeClass, or name an existing one)")
            check_resolved_size(out.resolved)  # everything it carries, the SkillPacks' sidecars included
        except FieldProblem:
            out.resolved = None
            raise
    except FieldProblem as p:
        out.problem = p
    out.ignored = ignored_fields(run, agent, policy)
    return out


def lifecycle_author(run: dict[str, Any], ev: Evaluation) -> str | None:
    """Who wrote the lifecycle hooks `run` executes (status.lifecycleAuthor): its creator for its own `lifecycle`,
    else its Agent's recorded author; None when that is not recorded (or the run did not resolve)."""
    if ev.resolved is None:
        return None
    spec = run.get("spec")
    if isinstance(spec, dict) and spec.get("lifecycle") is not None:
        creator = authorship.read(AGENTRUNS, run)
        return creator.username if creator is not None else None
    return ev.agent_author.username if ev.agent_author is not None else None
