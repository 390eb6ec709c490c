"""The console's read-only Agents and Policies pages: what a run is resolved against (an Agent's model, policy,
hooks, lifecycle; a SympoziumPolicy's gatePolicy, tool gating, sandbox and lifecycle limits), listed per namespace,
and each one's page with its whole spec as YAML text. RBAC must let the signed-in identity list (or get) what a page
shows: Agents (and SympoziumInstances) and, for the policies' pages, which also name the Agents that use them,
SympoziumPolicies and Agents.

Read straight from the cluster, one list or read per page view (these pages are looked at, not followed). What an
object holds is shown as text only: the templates autoescape, and the spec is YAML in a <pre>.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import yaml
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kube import NotFound
from kube.resources import sympozium
from models.evaluate import agent_name_of, builtin_policy
from models.names import AGENTS, POLICIES
from models.policy import TEMPLATES

from ..deps import Namespace, State, StateDep
from .routes import ConsoleError, ConsoleSession, page
from .views import agent_usage

router = APIRouter(include_in_schema=False)
LEGACY_AGENTS = "sympoziuminstances"  # the Agent's older kind (SPEC §1.1), shown with the Agents

Obj = dict[str, Any]


@dataclass(frozen=True)
class AgentRow:
    name: str
    kind: str
    model: str
    policy: str
    pre_run: int
    post_run: int
    gated: bool
    created: str


def _defaults(obj: Obj) -> Obj:
    spec = obj.get("spec") or {}
    return cast(Obj, ((spec.get("agents") or {}).get("default")) or {})


def model_of(obj: Obj) -> str:
    """The model the Agent's runs get by default: spec.agents.default.model, or the legacy provider's."""
    return str(_defaults(obj).get("model") or ((obj.get("spec") or {}).get("provider") or {}).get("model") or "")


def lifecycle_of(obj: Obj) -> Obj:
    return cast(Obj, _defaults(obj).get("lifecycle") or {})


def agent_row(obj: Obj, kind: str) -> AgentRow:
    meta, spec, lc = obj.get("metadata") or {}, obj.get("spec") or {}, lifecycle_of(obj)
    post = lc.get("postRun") or []
    return AgentRow(name=str(meta.get("name") or ""), kind=kind, model=model_of(obj),
                    policy=str(spec.get("policyRef") or ""), pre_run=len(lc.get("preRun") or []),
                    post_run=len(post), gated=any(isinstance(h, dict) and h.get("gate") for h in post),
                    created=str(meta.get("creationTimestamp") or ""))


def as_yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False).rstrip()


async def _list(state: State, namespace: str, plural: str) -> list[Obj]:
    try:
        items = await sympozium(state.kube, plural).list(namespace, action=f"list {plural} in {namespace}")
    except NotFound:  # a kind the cluster does not serve (the legacy one's CRD not installed)
        return []
    return sorted(cast(list[Obj], items.get("items") or []), key=lambda o: str(o["metadata"]["name"]))


async def _read(state: State, namespace: str, plurals: tuple[str, ...], name: str, what: str) -> tuple[Obj, str]:
    for plural in plurals:
        try:
            obj = await sympozium(state.kube, plural).get(
                namespace, name, action=f"read {plural} {namespace}/{name}")
            return cast(Obj, obj), plural
        except NotFound:
            continue
    raise ConsoleError(404, f'{what} "{name}" not found in namespace "{namespace}"')


def _bare(obj: Obj) -> Obj:
    """The object as a reader wants it: spec (and status) without managedFields and the like."""
    meta = obj.get("metadata") or {}
    keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations", "creationTimestamp") if meta.get(k)}
    return {"metadata": keep, **{k: v for k, v in obj.items() if k in ("spec", "status")}}


@router.get("/agents", response_class=HTMLResponse)
async def agents_page(request: Request, who: ConsoleSession, state: StateDep,
                      namespace: Namespace = "default") -> HTMLResponse:
    await state.allow(who.caller, "list", AGENTS, namespace)
    rows = [agent_row(o, "Agent") for o in await _list(state, namespace, AGENTS)]
    rows += [agent_row(o, "SympoziumInstance") for o in await _list(state, namespace, LEGACY_AGENTS)]
    return page(request, "agents.html", who=who, section="agents", namespace=namespace, rows=rows)


@router.get("/agents/{name}", response_class=HTMLResponse)
async def agent_page(request: Request, name: str, who: ConsoleSession, state: StateDep,
                     namespace: Namespace = "default") -> HTMLResponse:
    await state.allow(who.caller, "get", AGENTS, namespace, name=name)
    obj, plural = await _read(state, namespace, (AGENTS, LEGACY_AGENTS), name, "agent")
    spec = obj.get("spec") or {}
    lc = lifecycle_of(obj)
    runs = [r for r in state.runwatch.list(namespace) if agent_name_of(r) == name]
    return page(request, "agent.html", who=who, section="agents", namespace=namespace, name=name,
                kind="Agent" if plural == AGENTS else "SympoziumInstance", spec=spec, defaults=_defaults(obj),
                model=model_of(obj), lc=lc, hooks=[("preRun", h) for h in lc.get("preRun") or []]
                + [("postRun", h) for h in lc.get("postRun") or []], runs=len(runs), source=as_yaml(_bare(obj)),
                usage=agent_usage(runs))


@router.get("/policies", response_class=HTMLResponse)
async def policies_page(request: Request, who: ConsoleSession, state: StateDep,
                        namespace: Namespace = "default") -> HTMLResponse:
    await state.allow(who.caller, "list", POLICIES, namespace)
    await state.allow(who.caller, "list", AGENTS, namespace)
    policies = await _list(state, namespace, POLICIES)
    agents = await _list(state, namespace, AGENTS)
    used: dict[str, list[str]] = {}
    for a in agents:
        ref = str((a.get("spec") or {}).get("policyRef") or "")
        used.setdefault(ref, []).append(str(a["metadata"]["name"]))
    rows = [{"name": str(p["metadata"]["name"]), "spec": p.get("spec") or {},
             "agents": used.get(str(p["metadata"]["name"]), []),
             "created": str(p["metadata"].get("creationTimestamp") or "")} for p in policies]
    return page(request, "policies.html", who=who, section="policies", namespace=namespace, rows=rows)


@router.get("/policies/{name}", response_class=HTMLResponse)
async def policy_page(request: Request, name: str, who: ConsoleSession, state: StateDep,
                      namespace: Namespace = "default") -> HTMLResponse:
    await state.allow(who.caller, "get", POLICIES, namespace, name=name)
    await state.allow(who.caller, "list", AGENTS, namespace)
    builtin = False
    try:
        obj, _ = await _read(state, namespace, (POLICIES,), name, "policy")
    except ConsoleError:
        # A built-in name an Agent may use without an object (models/evaluate.py): its template's rules.
        stand_in = builtin_policy(name)
        if stand_in is None:
            raise
        obj, builtin = stand_in, True
    agents = [str(a["metadata"]["name"]) for a in await _list(state, namespace, AGENTS)
              if (a.get("spec") or {}).get("policyRef") == name]
    spec = obj.get("spec") or {}
    shown = {**TEMPLATES[spec["template"]], **spec} if builtin else spec
    return page(request, "policy.html", who=who, section="policies", namespace=namespace, name=name,
                spec=shown, agents=agents, source=as_yaml(_bare(obj)), as_yaml=as_yaml, builtin=builtin)
