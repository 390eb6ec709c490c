"""The `PersonaPack` resource: Sympozium's earlier name and shape of the Ensemble, still in its docs and users' YAML.

Field for field Sympozium's last v1alpha1 PersonaPack (before it became Ensemble): `personas` where the Ensemble
has `agentConfigs`, `sharedMemory.accessRules[].persona` where it has `agentConfig`, and fewer fields. The bridge
reads a PersonaPack as the Ensemble it is (`as_ensemble_spec`) and stamps it out the same way, under the
PersonaPack's own labels (`sympozium.ai/persona-pack`, `sympozium.ai/persona`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .agentrun import Lifecycle, SystemPrompt, ToolPolicy
from .base import K8sModel
from .ensemble import (
    Condition,
    EnsembleSpec,
    InstalledPersona,
    Obj,
    PackSpecBase,
    PersonaMemory,
    PersonaSchedule,
    PersonaWebEndpoint,
    Relationship,
)


class PersonaSpec(K8sModel):
    name: str
    display_name: str = ""
    system_prompt: SystemPrompt
    model: str = ""
    skills: list[str] = Field(default_factory=list)
    tool_policy: ToolPolicy | None = None
    schedule: PersonaSchedule | None = None
    memory: PersonaMemory | None = None
    channels: list[str] = Field(default_factory=list)
    web_endpoint: PersonaWebEndpoint | None = None
    lifecycle: Lifecycle | None = None


class PersonaAccessRule(K8sModel):
    persona: str
    access: Literal["read-write", "read-only"] = "read-write"


class PersonaSharedMemory(K8sModel):
    enabled: bool = False
    storage_size: str = ""
    access_rules: list[PersonaAccessRule] = Field(default_factory=list)


class PersonaRelationship(Relationship):
    type: Literal["delegation", "sequential", "supervision"]  # no "stimulus" yet


class PersonaPackSpec(PackSpecBase):
    personas: list[PersonaSpec]
    agent_sandbox: Obj | None = None
    shared_memory: PersonaSharedMemory | None = None
    relationships: list[PersonaRelationship] = Field(default_factory=list)
    workflow_type: Literal["autonomous", "pipeline", "delegation"] = "autonomous"


class PersonaPackStatus(K8sModel):
    phase: str | None = None
    persona_count: int | None = None
    installed_count: int | None = None
    installed_personas: list[InstalledPersona] = Field(default_factory=list)
    shared_memory_ready: bool | None = None
    conditions: list[Condition] = Field(default_factory=list)


def as_ensemble_spec(spec: PersonaPackSpec) -> EnsembleSpec:
    """The Ensemble a PersonaPack is: the same settings under the Ensemble's field names."""
    wire: dict[str, Any] = spec.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")
    wire["agentConfigs"] = wire.pop("personas")
    for rule in (wire.get("sharedMemory") or {}).get("accessRules") or []:
        rule["agentConfig"] = rule.pop("persona")
    return EnsembleSpec.model_validate(wire)
