"""The `Ensemble` resource: a team of agent personas the bridge stamps out as Agents and SympoziumSchedules.

Field for field Sympozium's v1alpha1 Ensemble (names, types, enums and required fields as its CRD has them), so
its YAML applies with `kubectl apply --validate=strict` and nothing is pruned. Kubernetes-shaped values we only
carry (volumes, channel settings, the membrane) keep their whole content (`dict[str, Any]` becomes
`x-kubernetes-preserve-unknown-fields`). What each field does here is in models/personas.py and the README.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from .agent import SecretRef, Subagents
from .agentrun import EnvValue, Lifecycle, SystemPrompt, ToolPolicy
from .base import K8sModel
from .bounds import TASK_MAX_BYTES, text_schema

# A Kubernetes-shaped value we keep whole (a Volume, a channel's access rules): any object, nothing pruned.
Obj = Annotated[dict[str, Any], WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})]


class PersonaSchedule(K8sModel):
    type: Literal["heartbeat", "scheduled", "sweep"] = "heartbeat"
    interval: str = ""
    cron: str = ""
    task: Annotated[str, text_schema(TASK_MAX_BYTES)]


class AgentConfigSchedule(PersonaSchedule):
    first_tick: Literal["immediate", "afterInterval"] = "immediate"


class PersonaMemory(K8sModel):
    enabled: bool = True
    seeds: list[str] = Field(default_factory=list)


class AgentConfigMemory(PersonaMemory):
    max_size_kb: int | None = Field(None, alias="maxSizeKB")
    auto_store: bool | None = None


class PersonaWebEndpoint(K8sModel):
    enabled: bool
    hostname: str = ""


class AgentConfigWebEndpoint(PersonaWebEndpoint):
    rate_limit: Obj | None = None


class AgentConfigSpec(K8sModel):
    """One persona of an Ensemble (`spec.agentConfigs[]`)."""

    name: str
    display_name: str = ""
    system_prompt: SystemPrompt
    model: str = ""
    provider: str = ""
    base_url: str = Field("", alias="baseURL")
    provider_headers: dict[str, str] = Field(default_factory=dict)
    provider_headers_secret_ref: str = ""
    skills: list[str] = Field(default_factory=list)
    skill_params: dict[str, dict[str, str]] = Field(default_factory=dict)
    channel_configs: dict[str, str] = Field(default_factory=dict)
    tool_policy: ToolPolicy | None = None
    schedule: AgentConfigSchedule | None = None
    memory: AgentConfigMemory | None = None
    channels: list[str] = Field(default_factory=list)
    web_endpoint: AgentConfigWebEndpoint | None = None
    lifecycle: Lifecycle | None = None
    channel_access_control: dict[str, Obj] = Field(default_factory=dict)
    channel_triggers: dict[str, Obj] = Field(default_factory=dict)
    slack_options: Obj | None = None
    mcp_servers: list[Obj] = Field(default_factory=list)
    subagents: Subagents | None = None
    env: dict[str, EnvValue] = Field(default_factory=dict)
    run_timeout: str = ""


class SharedMemoryAccessRule(K8sModel):
    agent_config: str
    access: Literal["read-write", "read-only"] = "read-write"


class SharedMemorySpec(K8sModel):
    enabled: bool = False
    storage_size: str = ""
    access_rules: list[SharedMemoryAccessRule] = Field(default_factory=list)
    membrane: Obj | None = None


class StimulusSpec(K8sModel):
    name: str
    prompt: str
    trigger: Literal["onReady", "manual"] = "onReady"


# The PersonaPack's relationships have one type fewer (models/personapack.py).
class Relationship(K8sModel):
    source: str
    target: str
    type: Literal["delegation", "sequential", "supervision", "stimulus"]
    condition: str = ""
    timeout: str = ""
    result_format: str = ""


# What an Ensemble and the PersonaPack it grew out of share at the top of their spec (the persona list itself,
# `agentConfigs` or `personas`, is each kind's own). A comment, not a docstring: a docstring would become the
# CRD's description.
class PackSpecBase(K8sModel):
    enabled: bool = False
    description: str = ""
    category: str = ""
    version: str = ""
    auth_refs: list[SecretRef] = Field(default_factory=list)
    exclude_personas: list[str] = Field(default_factory=list)
    channel_configs: dict[str, str] = Field(default_factory=dict)
    policy_ref: str = ""
    base_url: str = Field("", alias="baseURL")
    skill_params: dict[str, dict[str, str]] = Field(default_factory=dict)
    task_override: str = ""
    channel_access_control: dict[str, Obj] = Field(default_factory=dict)


class EnsembleSpec(PackSpecBase):
    agent_configs: list[AgentConfigSpec]
    provider_headers: dict[str, str] = Field(default_factory=dict)
    provider_headers_secret_ref: str = ""
    model_ref: str = ""
    channel_triggers: dict[str, Obj] = Field(default_factory=dict)
    slack_options: Obj | None = None
    channel_volumes: dict[str, list[Obj]] = Field(default_factory=dict)
    channel_volume_mounts: dict[str, list[Obj]] = Field(default_factory=dict)
    agent_sandbox: Obj | None = None
    shared_memory: SharedMemorySpec | None = None
    auto_store_memory: bool | None = None
    stimulus: StimulusSpec | None = None
    relationships: list[Relationship] = Field(default_factory=list)
    workflow_type: Literal["autonomous", "pipeline", "delegation"] = "autonomous"
    volumes: list[Obj] = Field(default_factory=list)
    volume_mounts: list[Obj] = Field(default_factory=list)


class InstalledPersona(K8sModel):
    name: str
    instance_name: str
    schedule_name: str | None = None


class Condition(K8sModel):
    """metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = None
    last_transition_time: str
    reason: str
    message: str


class EnsembleStatus(K8sModel):
    phase: str | None = None
    persona_count: int | None = None
    installed_count: int | None = None
    installed_personas: list[InstalledPersona] = Field(default_factory=list)
    shared_memory_ready: bool | None = None
    token_budget_used: int | None = None
    circuit_breaker_open: bool | None = None
    consecutive_delegate_failures: int | None = None
    all_agents_serving: bool | None = None
    stimulus_delivered: bool | None = None
    stimulus_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
