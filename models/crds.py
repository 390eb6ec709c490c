"""CustomResourceDefinitions generated from the pydantic models, so the two never drift.

    python -m models.crds deploy/crds      # (re)write the manifests

A test regenerates them and compares with `deploy/crds/`, and applies them to localkube.
Spec fields are checked by the schema only where a mistake cannot be better reported by
the workflow: enums, quantities and types. Task presence, durations, hook names and gate
rules are validated when the run starts, so such a run ends `Failed` with a message naming
the field (SPEC §3.1) instead of being refused by `kubectl apply` with no run to look at.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .agent import AgentSpec
from .agentrun import AgentRunSpec, AgentRunStatus
from .ensemble import EnsembleSpec, EnsembleStatus
from .model import ModelSpec, ModelStatus
from .names import GROUP, VERSION
from .personapack import PersonaPackSpec, PersonaPackStatus
from .policy import PolicySpec
from .schedule import ScheduleSpec, ScheduleStatus
from .skillpack import SkillPackSpec, SkillPackStatus


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """pydantic's JSON schema → a Kubernetes structural schema."""
    if isinstance(node, list):
        return [_structural(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(branches) == 1:
            return _structural({**branches[0], **rest}, defs)
        if all(set(b) <= {"type"} for b in branches) and {b.get("type") for b in branches} <= {
                "string", "object", "array", "integer", "number", "boolean"}:
            # A union of JSON types (e.g. a task given as text or an object) is kept as-is.
            union = {k: v for k, v in rest.items() if k in ("description",)}
            union["x-kubernetes-preserve-unknown-fields"] = True
            return union
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in ("title", "$defs"):
            continue
        if k == "default" and "enum" not in node:
            continue  # only enum defaults are materialised into stored objects
        if k == "properties":
            out[k] = {name: _structural(p, defs) for name, p in v.items()}
        elif k in ("items", "additionalProperties"):
            out[k] = _structural(v, defs) if isinstance(v, dict) else v
        else:
            out[k] = v
    if not out.get("type") and not out.get("x-kubernetes-preserve-unknown-fields") and "enum" not in out \
            and not out.get("x-kubernetes-int-or-string"):
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "object" and out.get("additionalProperties") in ({}, True):
        out.pop("additionalProperties")
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    result: dict[str, Any] = _structural(raw, defs)
    return result


def _root(spec: type[BaseModel], status: type[BaseModel] | None, description: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": schema_of(spec),
    }
    if status is not None:
        props["status"] = schema_of(status)
    return {"type": "object", "description": description, "properties": props}


def _with_aliases(spec_schema: dict[str, Any]) -> dict[str, Any]:
    """Sympozium's alternative field names must survive pruning: instanceRef, input, model.name."""
    props = spec_schema["properties"]
    props["instanceRef"] = dict(props["agentRef"])
    props["input"] = dict(props["task"])
    model_props = props["model"]["properties"]
    model_props["name"] = dict(model_props["model"])
    return spec_schema


def _with_schedule_aliases(spec_schema: dict[str, Any]) -> dict[str, Any]:
    """A SympoziumSchedule's older names instanceRef and input must survive pruning too; with them, neither
    spelling can be required by the schema, so `plan_schedule` checks that one is there (phase Error)."""
    props = spec_schema["properties"]
    props["instanceRef"] = dict(props["agentRef"])
    props["input"] = dict(props["task"])
    return spec_schema


def _crd(kind: str, plural: str, *, spec: type[BaseModel], status: type[BaseModel] | None, description: str,
         short_names: list[str], columns: list[dict[str, Any]]) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _root(spec, status, description)},
        "additionalPrinterColumns": [*columns, {"name": "Age", "type": "date",
                                                "jsonPath": ".metadata.creationTimestamp"}],
    }
    if status is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "agentrun"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": short_names, "categories": ["sympozium"]},
            "versions": [version],
        },
    }


def _agentrun_crd(crd: dict[str, Any]) -> dict[str, Any]:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    _with_aliases(root["properties"]["spec"])
    return crd


def _schedule_crd(crd: dict[str, Any]) -> dict[str, Any]:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    _with_schedule_aliases(root["properties"]["spec"])
    return crd


def all_crds() -> dict[str, dict[str, Any]]:
    """file name -> CRD manifest."""
    agent_cols: list[dict[str, Any]] = [{"name": "Model", "type": "string", "jsonPath": ".spec.agents.default.model"},
                  {"name": "Policy", "type": "string", "jsonPath": ".spec.policyRef", "priority": 1}]
    pack_cols: list[dict[str, Any]] = [
        {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
        {"name": "Personas", "type": "integer", "jsonPath": ".status.personaCount"},
        {"name": "Installed", "type": "integer", "jsonPath": ".status.installedCount"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}]
    return {
        "agents.yaml": _crd("Agent", "agents", spec=AgentSpec, status=None, short_names=["agt"],
                            description="A persistent agent profile: model, auth, defaults for its runs.",
                            columns=agent_cols),
        "sympoziuminstances.yaml": _crd(
            "SympoziumInstance", "sympoziuminstances", spec=AgentSpec, status=None, short_names=["si"],
            description="Legacy name of Agent; accepted and normalised the same way.", columns=agent_cols),
        "agentruns.yaml": _agentrun_crd(_crd(
            "AgentRun", "agentruns", spec=AgentRunSpec, status=AgentRunStatus, short_names=["ar"],
            description="One execution of an agent task, run as a durable Temporal workflow.",
            columns=[{"name": "Agent", "type": "string", "jsonPath": ".spec.agentRef"},
                     {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                     {"name": "Gate", "type": "string", "jsonPath": ".status.gate.state"},
                     {"name": "Tools", "type": "string", "jsonPath": ".status.toolApproval.state"},
                     {"name": "Verdict", "type": "string", "jsonPath": ".status.gateVerdict", "priority": 1},
                     {"name": "Tokens", "type": "integer", "jsonPath": ".status.tokenUsage.totalTokens",
                      "priority": 1},
                     {"name": "Cached", "type": "integer", "jsonPath": ".status.tokenUsage.cachedInputTokens",
                      "priority": 1},
                     {"name": "Restarts", "type": "integer", "jsonPath": ".status.agentRestarts", "priority": 1},
                     {"name": "Error", "type": "string", "jsonPath": ".status.error", "priority": 1}])),
        "sympoziumschedules.yaml": _schedule_crd(_crd(
            "SympoziumSchedule", "sympoziumschedules", spec=ScheduleSpec, status=ScheduleStatus,
            short_names=["ssched"], description="A cron schedule that creates AgentRuns (a Temporal Schedule).",
            columns=[{"name": "Agent", "type": "string", "jsonPath": ".spec.agentRef"},
                     {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
                     {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                     {"name": "Last Run", "type": "string", "jsonPath": ".status.lastRunName"},
                     {"name": "Next Run", "type": "string", "jsonPath": ".status.nextRunTime", "priority": 1}])),
        "sympoziumpolicies.yaml": _crd(
            "SympoziumPolicy", "sympoziumpolicies", spec=PolicySpec, status=None, short_names=["spol"],
            description="Rules enforced on runs of the Agents that reference it.",
            columns=[{"name": "Template", "type": "string", "jsonPath": ".spec.template"}]),
        "skillpacks.yaml": _crd(
            "SkillPack", "skillpacks", spec=SkillPackSpec, status=SkillPackStatus, short_names=["skp"],
            description="Skills (Markdown) mounted into agent pods at /skills, and an optional tool sidecar.",
            columns=[{"name": "Skills", "type": "integer", "jsonPath": ".status.skillCount"},
                     {"name": "ConfigMap", "type": "string", "jsonPath": ".status.configMapName"}]),
        "ensembles.yaml": _crd(
            "Ensemble", "ensembles", spec=EnsembleSpec, status=EnsembleStatus, short_names=[],
            description="A team of agent personas, stamped out as Agents and SympoziumSchedules while enabled.",
            columns=[*pack_cols[:3], {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflowType"},
                     pack_cols[3]]),
        "models.yaml": _crd(
            "Model", "models", spec=ModelSpec, status=ModelStatus, short_names=[],
            description="Sympozium's in-cluster model server; accepted, marked as not offered here (models/model.py).",
            columns=[{"name": "Server", "type": "string", "jsonPath": ".spec.inference.serverType"},
                     {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                     {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint"},
                     {"name": "GPU", "type": "integer", "jsonPath": ".spec.resources.gpu"}]),
        "personapacks.yaml": _crd(
            "PersonaPack", "personapacks", spec=PersonaPackSpec, status=PersonaPackStatus, short_names=[],
            description="Earlier name and shape of Ensemble; stamped out the same way.",
            columns=[*pack_cols[:3], {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflowType"},
                     pack_cols[3]]),
    }


class _PlainDumper(yaml.SafeDumper):
    """Writes a schema shared by two fields out twice instead of as an anchor and an alias (`&id001`/`*id001`):
    not every tool that reads CRDs resolves aliases, and a reader of the file should not have to."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(crd: dict[str, Any]) -> str:
    return "# Generated by `python -m models.crds deploy/crds` from models/; do not edit by hand.\n" + yaml.dump(
        crd, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=120)


# Where the manifests live: the plain install and the Helm chart's crds/ (Helm installs those before templates).
CRD_DIRS = ("deploy/crds", "deploy/chart/agentrun/crds")


def main(argv: list[str]) -> int:
    for out in map(Path, argv or CRD_DIRS):
        out.mkdir(parents=True, exist_ok=True)
        for name, crd in all_crds().items():
            (out / name).write_text(render(crd))
            print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
