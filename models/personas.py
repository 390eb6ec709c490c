"""What a PersonaPack or Ensemble stamps out: one Agent per persona, and a SympoziumSchedule for each persona
with a schedule, as Sympozium's Ensemble controller builds them (names, labels, owner reference, field by field).

Pure functions, so the expansion is tested without a cluster; bridge/personas.py makes the cluster match it.

- Names: the Agent is `<pack>-<persona>`, its schedule `<pack>-<persona>-schedule`.
- Labels: `sympozium.ai/ensemble` + `sympozium.ai/agent-config` (an Ensemble's) or `sympozium.ai/persona-pack` +
  `sympozium.ai/persona` (a PersonaPack's); `sympozium.ai/provider` when a persona pins its provider.
- The pack is every stamped object's controller owner, so Kubernetes' garbage collector deletes them with it.
- Only an enabled pack stamps anything (Sympozium's packs are catalog entries until activated); a persona in
  `excludePersonas` is left out, and so is the schedule of a persona that is the target of a `sequential`
  relationship (its predecessor's completion starts it in Sympozium, never a clock).
- A schedule's cron is `schedule.cron`, else `schedule.interval` as a cron staggered by two minutes per persona;
  `taskOverride` is prefixed to every persona's task.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from . import authorship
from .agent import SecretRef
from .authorship import Author
from .base import FieldProblem, parse
from .ensemble import AgentConfigSpec, EnsembleSpec, InstalledPersona
from .names import AGENTS, API_VERSION, SCHEDULES
from .personapack import PersonaPackSpec, as_ensemble_spec

Obj = dict[str, Any]
PackKind = Literal["Ensemble", "PersonaPack"]

ENSEMBLES = "ensembles"
PERSONAPACKS = "personapacks"
PLURALS: dict[PackKind, str] = {"Ensemble": ENSEMBLES, "PersonaPack": PERSONAPACKS}
# The labels Sympozium puts on what each kind stamps out: (the pack's name, the persona's name).
LABELS: dict[PackKind, tuple[str, str]] = {
    "Ensemble": ("sympozium.ai/ensemble", "sympozium.ai/agent-config"),
    "PersonaPack": ("sympozium.ai/persona-pack", "sympozium.ai/persona"),
}
LABEL_PROVIDER = "sympozium.ai/provider"
# The hash of what the bridge last wrote: a pack's edit changes it, so the stamped object is rewritten; fields
# the cluster's schema prunes never make the object look out of date.
ANNOTATION_STAMPED = "agentrun.dev/stamped-hash"
# The hash of the object as the cluster stored it after that write (our labels and spec): a stamped object whose
# spec no longer matches it was changed behind the pack's back, and the pack, its source of truth, puts it back.
ANNOTATION_STORED = "agentrun.dev/stored-hash"
DEFAULT_MODEL = "gpt-4o"  # Sympozium's, for a persona that names none
STAGGER_MINUTES = 2
# Skills Sympozium does not mount as SkillPacks ("mcp-bridge" marks the MCP sidecar).
NOT_SKILL_PACKS = {"mcp-bridge"}


@dataclass(frozen=True)
class Pack:
    """A PersonaPack or Ensemble object, read as an Ensemble."""

    kind: PackKind
    name: str
    namespace: str
    uid: str
    generation: int
    spec: EnsembleSpec
    # Who wrote it (models/authorship.py): what it stamps out carries this author, and is checked against them.
    author: Author | None = None


@dataclass
class Stamp:
    """Everything an enabled pack should have in the cluster right now."""

    agents: list[Obj] = field(default_factory=list)
    schedules: list[Obj] = field(default_factory=list)
    installed: list[InstalledPersona] = field(default_factory=list)


def read_pack(kind: PackKind, obj: Obj) -> Pack:
    """The pack object as a `Pack`; FieldProblem naming the field if its spec is malformed."""
    meta = obj.get("metadata") or {}
    raw = obj.get("spec") or {}
    if kind == "PersonaPack":
        spec = as_ensemble_spec(parse(PersonaPackSpec, raw, "spec"))
    else:
        spec = parse(EnsembleSpec, raw, "spec")
    return Pack(kind=kind, name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
                uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 1), spec=spec,
                author=authorship.read(PLURALS[kind], obj))


def agent_name(pack: Pack, persona: str) -> str:
    return f"{pack.name}-{persona}"


def schedule_name(pack: Pack, persona: str) -> str:
    return f"{agent_name(pack, persona)}-schedule"


def pack_selector(pack: Pack) -> str:
    """The label selector of everything this pack may have stamped out."""
    return f"{LABELS[pack.kind][0]}={pack.name}"


def owner_reference(pack: Pack) -> Obj:
    return {"apiVersion": API_VERSION, "kind": pack.kind, "name": pack.name, "uid": pack.uid,
            "controller": True, "blockOwnerDeletion": True}


def owned_by(obj: Obj, pack: Pack) -> bool:
    return any(r.get("uid") == pack.uid for r in (obj.get("metadata") or {}).get("ownerReferences") or [])


def stamped_hash(obj: Obj, label_keys: list[str] | None = None) -> str:
    """The hash of an object's spec and labels (only `label_keys` of them when given), as annotations record it."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if label_keys is not None:
        labels = {k: labels.get(k) for k in label_keys}
    body = {"labels": labels, "spec": obj.get("spec") or {}}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def _notes(obj: Obj, pack: Pack, plural: str) -> dict[str, str]:
    """The annotations of a stamped object: what the pack asked for, and (until the cluster prunes part of it,
    which the bridge then notes) what the cluster keeps of it; and the pack's author, which the admission webhook
    checks the object's grants against (the bridge that writes it is trusted to carry it, models/authorship.py), or
    the empty stamp of an author not known (the bridge is nobody's author)."""
    return {ANNOTATION_STAMPED: stamped_hash(obj),
            ANNOTATION_STORED: stamped_hash(obj, list(obj["metadata"]["labels"])),
            **(pack.author.annotations(plural) if pack.author is not None else authorship.UNKNOWN)}


def interval_to_cron(interval: str, offset: int) -> str:
    """Sympozium's interval → cron table, shifted by `offset` minutes; unknown intervals run hourly."""
    table = {
        ("1m", "1min"): "* * * * *",
        ("5m", "5min"): f"{offset % 5}/5 * * * *",
        ("10m", "10min"): f"{offset % 10}/10 * * * *",
        ("15m", "15min"): f"{offset % 15}/15 * * * *",
        ("30m", "30min"): f"{offset % 30}/30 * * * *",
        ("1h", "60m"): f"{offset % 60} * * * *",
        ("2h",): f"{offset % 60} */2 * * *",
        ("3h",): f"{offset % 60} */3 * * *",
        ("4h",): f"{offset % 60} */4 * * *",
        ("6h",): f"{offset % 60} */6 * * *",
        ("12h",): f"{offset % 60} */12 * * *",
        ("24h", "1d"): f"{offset % 60} 0 * * *",
    }
    key = interval.strip().lower()
    for names, cron in table.items():
        if key in names:
            return cron
    if " " in interval:  # already a cron expression
        return interval
    return f"{offset % 60} * * * *"


def _auth_refs(spec: EnsembleSpec, persona: AgentConfigSpec) -> list[SecretRef]:
    """The pack's auth refs; a persona that pins a provider takes only that provider's, when there are any."""
    if persona.provider:
        matched = [r for r in spec.auth_refs if r.provider == persona.provider]
        if matched:
            return matched
    return list(spec.auth_refs)


def _skills(spec: EnsembleSpec, persona: AgentConfigSpec) -> list[Obj]:
    out: list[Obj] = []
    for s in persona.skills:
        if s in NOT_SKILL_PACKS:
            continue
        ref: Obj = {"skillPackRef": s}
        # A persona's own params replace the pack's for that skill outright (no key-by-key merge).
        params = persona.skill_params.get(s) or spec.skill_params.get(s)
        if params:
            ref["params"] = dict(params)
        out.append(ref)
    return out


def _labels(pack: Pack, persona: AgentConfigSpec) -> dict[str, str]:
    pack_label, persona_label = LABELS[pack.kind]
    labels = {pack_label: pack.name, persona_label: persona.name}
    if persona.provider:
        labels[LABEL_PROVIDER] = persona.provider
    return labels


def _dump(model: BaseModel | None) -> Obj | None:
    # As written: defaults are the consumer's to apply, and the stamped Agent reads like the pack.
    return None if model is None else model.model_dump(by_alias=True, exclude_unset=True, exclude_none=True,
                                                       mode="json")


def _meta(pack: Pack, name: str, labels: dict[str, str]) -> Obj:
    return {"name": name, "namespace": pack.namespace, "labels": labels, "ownerReferences": [owner_reference(pack)]}


def build_agent(pack: Pack, persona: AgentConfigSpec) -> Obj:
    spec = pack.spec
    defaults: Obj = {"model": persona.model or DEFAULT_MODEL}
    base_url = persona.base_url or spec.base_url
    optional: Obj = {
        "baseURL": base_url,
        "providerHeaders": {**spec.provider_headers, **persona.provider_headers},
        "providerHeadersSecretRef": persona.provider_headers_secret_ref or spec.provider_headers_secret_ref,
        "agentSandbox": spec.agent_sandbox,
        "lifecycle": _dump(persona.lifecycle),
        "subagents": _dump(persona.subagents),
        "env": dict(persona.env),
        "runTimeout": persona.run_timeout,
    }
    defaults.update({k: v for k, v in optional.items() if v})
    memory: Obj = {"enabled": persona.memory.enabled if persona.memory else True,
                   "maxSizeKB": (persona.memory.max_size_kb if persona.memory and persona.memory.max_size_kb
                                 else 256),
                   "systemPrompt": persona.system_prompt}
    auto_store = persona.memory.auto_store if persona.memory and persona.memory.auto_store is not None \
        else spec.auto_store_memory
    if auto_store is not None:
        memory["autoStore"] = auto_store
    body: Obj = {
        "agents": {"default": defaults},
        "authRefs": [r.wire() for r in _auth_refs(spec, persona)],
        "skills": _skills(spec, persona),
        "policyRef": spec.policy_ref,
        # Ours: what a run's system prompt defaults to (Sympozium keeps it in memory.systemPrompt, also written).
        "systemPrompt": persona.system_prompt,
        "memory": memory,
        "displayName": persona.display_name,
        "channels": [_channel(spec, persona, ch) for ch in persona.channels],
        "mcpServers": persona.mcp_servers,
        "volumes": spec.volumes,
        "volumeMounts": spec.volume_mounts,
    }
    agent_spec = {k: v for k, v in body.items() if v or k in ("agents", "authRefs")}
    obj: Obj = {"apiVersion": API_VERSION, "kind": "Agent",
                "metadata": _meta(pack, agent_name(pack, persona.name), _labels(pack, persona)), "spec": agent_spec}
    obj["metadata"]["annotations"] = _notes(obj, pack, AGENTS)
    return obj


def _channel(spec: EnsembleSpec, persona: AgentConfigSpec, ch: str) -> Obj:
    """One of a persona's channels, its settings taken from the persona first, then the pack."""
    out: Obj = {"type": ch}
    secret = persona.channel_configs.get(ch) or spec.channel_configs.get(ch)
    if secret:
        out["configRef"] = {"secret": secret}
    access = persona.channel_access_control.get(ch) or spec.channel_access_control.get(ch)
    if access:
        out["accessControl"] = access
    triggers = persona.channel_triggers.get(ch) or spec.channel_triggers.get(ch)
    if triggers:
        out["triggers"] = triggers
    if ch == "slack" and (persona.slack_options or spec.slack_options):
        out["slack"] = persona.slack_options or spec.slack_options
    if spec.channel_volumes.get(ch):
        out["volumes"] = spec.channel_volumes[ch]
    if spec.channel_volume_mounts.get(ch):
        out["volumeMounts"] = spec.channel_volume_mounts[ch]
    return out


def _is_sequential_successor(spec: EnsembleSpec, persona: str) -> bool:
    return any(r.type == "sequential" and r.target == persona for r in spec.relationships)


def build_schedule(pack: Pack, persona: AgentConfigSpec, index: int) -> Obj | None:
    """The persona's SympoziumSchedule, or None when it has none (or a predecessor starts it)."""
    sched = persona.schedule
    if sched is None or _is_sequential_successor(pack.spec, persona.name):
        return None
    task = sched.task
    if pack.spec.task_override:
        task = f"TEAM OBJECTIVE: {pack.spec.task_override}\n\nYOUR ROLE TASK: {sched.task}"
    spec: Obj = {"agentRef": agent_name(pack, persona.name),
                 "schedule": sched.cron or interval_to_cron(sched.interval, index * STAGGER_MINUTES),
                 "task": task, "type": sched.type, "concurrencyPolicy": "Forbid", "includeMemory": True}
    # Stated even when the pack has none (a PersonaPack never has): the stored object then equals what was written.
    spec["firstTick"] = sched.first_tick
    pack_label, persona_label = LABELS[pack.kind]
    obj: Obj = {"apiVersion": API_VERSION, "kind": "SympoziumSchedule",
                "metadata": _meta(pack, schedule_name(pack, persona.name),
                                  {pack_label: pack.name, persona_label: persona.name}),
                "spec": spec}
    obj["metadata"]["annotations"] = _notes(obj, pack, SCHEDULES)
    return obj


def check(pack: Pack) -> None:
    """What an enabled pack cannot do here, as a FieldProblem naming the field."""
    if pack.spec.model_ref:
        raise FieldProblem("spec.modelRef", "Model resources (cluster-local inference) are not offered here; "
                                            "set baseURL and authRefs instead")
    names = [p.name for p in pack.spec.agent_configs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise FieldProblem("spec.agentConfigs" if pack.kind == "Ensemble" else "spec.personas",
                           f"persona names must be unique: {', '.join(dupes)}")
    if pack.kind == "Ensemble":  # the PersonaPack controller never checked its graph
        check_relationships(pack.spec)


def check_relationships(spec: EnsembleSpec) -> None:
    """Sympozium's check of an Ensemble's graph: a workflowType backed by its edges, one stimulus edge from the
    stimulus to a persona, edges between personas only, and no cycle of sequential or delegation edges."""
    rels = spec.relationships
    kinds = {r.type for r in rels}
    needed = {"pipeline": "sequential", "delegation": "delegation"}.get(spec.workflow_type)
    if needed and needed not in kinds:
        raise FieldProblem("spec.workflowType", f"{spec.workflow_type!r} needs at least one {needed} relationship")
    stimulus_edges = [i for i, r in enumerate(rels) if r.type == "stimulus"]
    if len(stimulus_edges) > 1:
        raise FieldProblem("spec.relationships", f"at most one stimulus relationship, found {len(stimulus_edges)}")
    if stimulus_edges and spec.stimulus is None:
        raise FieldProblem("spec.stimulus", "a stimulus relationship needs a stimulus")
    if spec.stimulus is not None:
        if not stimulus_edges:
            raise FieldProblem("spec.relationships", "the stimulus needs a stimulus relationship")
        if not spec.stimulus.prompt.strip():
            raise FieldProblem("spec.stimulus.prompt", "must not be empty")
        i = stimulus_edges[0]
        if rels[i].source != spec.stimulus.name:
            raise FieldProblem(f"spec.relationships[{i}].source",
                               f"must be the stimulus' name {spec.stimulus.name!r}, not {rels[i].source!r}")
    names = {p.name for p in spec.agent_configs}
    edges: dict[str, list[str]] = {}
    for i, r in enumerate(rels):
        for end in ("source", "target"):
            if (end, r.type) != ("source", "stimulus") and getattr(r, end) not in names:
                raise FieldProblem(f"spec.relationships[{i}].{end}", f"no persona is named {getattr(r, end)!r}")
        if r.type in ("sequential", "delegation"):
            edges.setdefault(r.source, []).append(r.target)
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in edges.get(node, []):
            if nxt in path:
                cycle = " -> ".join([*path[path.index(nxt):], nxt])
                raise FieldProblem("spec.relationships", f"cycle of sequential/delegation edges: {cycle}")
            if nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(node)

    for p in spec.agent_configs:
        if p.name not in done:
            visit(p.name, [p.name])


def ignored_fields(pack: Pack) -> list[str]:
    """The pack's settings with no effect here (for its `FieldsIgnored` condition): what Sympozium's controllers do
    with them at run time (shared memory, memory seeds, a stimulus, delegation, tool policies on scheduled runs,
    pipeline gating, the web-endpoint skill) does not exist here yet. What lands on the stamped Agent is the Agent's to report."""
    spec, out = pack.spec, []
    personas = "spec.agentConfigs" if pack.kind == "Ensemble" else "spec.personas"
    if spec.shared_memory is not None and spec.shared_memory.enabled:
        out.append("spec.sharedMemory")
    if spec.stimulus is not None:
        out.append("spec.stimulus")
    if spec.workflow_type != "autonomous":
        out.append("spec.workflowType")
    out += [f"spec.relationships[{i}]" for i, r in enumerate(spec.relationships) if r.type != "sequential"]
    for i, p in enumerate(spec.agent_configs):
        if p.memory is not None and p.memory.seeds:
            out.append(f"{personas}[{i}].memory.seeds")
        if p.tool_policy is not None and (p.tool_policy.allow or p.tool_policy.deny):
            out.append(f"{personas}[{i}].toolPolicy")
        if p.web_endpoint is not None and p.web_endpoint.enabled:
            out.append(f"{personas}[{i}].webEndpoint")  # Sympozium's web-endpoint skill, not offered here
    return out


def expand(pack: Pack) -> Stamp:
    """Everything `pack` stamps out (nothing while it is not enabled)."""
    out = Stamp()
    if not pack.spec.enabled:
        return out
    check(pack)
    excluded = set(pack.spec.exclude_personas)
    for i, persona in enumerate(pack.spec.agent_configs):
        if persona.name in excluded:
            continue
        out.agents.append(build_agent(pack, persona))
        sched = build_schedule(pack, persona, i)
        if sched is not None:
            out.schedules.append(sched)
        out.installed.append(InstalledPersona(name=persona.name, instance_name=agent_name(pack, persona.name),
                                              schedule_name=sched["metadata"]["name"] if sched else None))
    return out
