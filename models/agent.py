"""The `Agent` resource (legacy kind `SympoziumInstance`), normalised into one profile.

Two shapes exist in the wild (SPEC §1.1): the current one keeps defaults under
`spec.agents.default` with `spec.authRefs`; the legacy one has `spec.provider{name, model,
apiKeySecret, baseURL}` and `spec.policy`. Both become the same `AgentProfile`, which is all
the rest of the system ever reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .agentrun import (
    EnvValue,
    EnvVar,
    KubeObject,
    Lifecycle,
    LocalObjectReference,
    ModelSpec,
    SandboxSpec,
    ShortText,
    SkillRef,
    SystemPrompt,
)
from .base import FieldProblem, K8sModel, parse
from .resources import Resources


class AuthRef(K8sModel):
    provider: str = ""
    secret: str = ""


class Subagents(K8sModel):
    """Limits on the sub-agents of this Agent's runs, checked when a run with `spec.parent` starts."""

    max_depth: int = 2
    max_concurrent: int = 5
    max_children_per_agent: int = 3


class WarmPool(K8sModel):
    """Sympozium's managed SandboxWarmPool: refused here (models/compat.py), typed so the CRD keeps it."""

    size: int | None = None
    runtime_class: str = ""
    resources: Resources | None = None


class AgentSandboxDefaults(K8sModel):
    """`agents.default.agentSandbox`: the default of a run that sets no `agentSandbox` (its pod's runtimeClassName)."""

    enabled: bool = False
    runtime_class: str = ""
    warm_pool: WarmPool | None = None


class AgentDefaults(K8sModel):
    model: ShortText = ""
    base_url: ShortText = Field("", alias="baseURL")
    provider_headers: dict[str, str] = Field(default_factory=dict)
    provider_headers_secret_ref: str = ""
    thinking: str = ""
    run_timeout: str | None = None
    env: dict[str, EnvValue] = Field(default_factory=dict)
    lifecycle: Lifecycle | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    subagents: Subagents = Field(default_factory=Subagents)
    image: ShortText = ""
    # Run-history limit per Agent (SPEC §6; default 50 when unset).
    run_history_limit: int | None = None
    # The agent container's requests and limits (models/resources.py); a run's spec.sandbox.resources wins.
    resources: Resources | None = None
    # Defaults of a run that sets none of its own (Sympozium stores them without copying them to runs; here asked-for
    # isolation is never dropped, so a run gets its Agent's).
    sandbox: SandboxSpec | None = None
    agent_sandbox: AgentSandboxDefaults | None = None


class AgentsBlock(K8sModel):
    default: AgentDefaults = Field(default_factory=AgentDefaults)


class LegacyProvider(K8sModel):
    name: str = ""
    model: str = ""
    api_key_secret: str = ""
    base_url: str = Field("", alias="baseURL")


# Sympozium's fields for features this control plane does not have (channels, memory, observability, MCP servers,
# the web endpoint): typed as upstream types them, so `kubectl apply --validate=strict` accepts them and nothing is
# pruned; models/compat.py lists them and has them warned about (admission) and noted in the run's status.

class SecretRef(K8sModel):
    """Sympozium's SecretRef: `secret` is required (an empty name is allowed, as for keyless providers)."""

    provider: str = ""
    secret: str


class ChannelAccessControl(K8sModel):
    allowed_senders: list[str] = Field(default_factory=list)
    denied_senders: list[str] = Field(default_factory=list)
    allowed_chats: list[str] = Field(default_factory=list)
    deny_message: str = ""


class ChannelTriggers(K8sModel):
    stop_keywords: list[str] = Field(default_factory=list)
    start_keywords: list[str] = Field(default_factory=list)


class SlackChannelOptions(K8sModel):
    emoji_on_trigger: str = ""
    emoji_on_stop: str = ""
    emoji_on_start: str = ""
    threading: bool = False
    allowed_triggers: list[str] = Field(default_factory=list)
    thread_stickiness: bool = False


class ChannelSpec(K8sModel):
    type: str
    config_ref: SecretRef | None = None
    access_control: ChannelAccessControl | None = None
    triggers: ChannelTriggers | None = None
    slack: SlackChannelOptions | None = None
    volumes: list[KubeObject] = Field(default_factory=list)
    volume_mounts: list[KubeObject] = Field(default_factory=list)


class MemorySpec(K8sModel):
    enabled: bool = True  # upstream: required, defaulted to true
    max_size_kb: int | None = Field(None, alias="maxSizeKB")
    auto_store: bool | None = None
    system_prompt: str = ""


class ObservabilitySpec(K8sModel):
    """OpenTelemetry export of the Agent's runs: where its agents send their spans."""

    enabled: bool = False  # upstream: required, defaulted to false
    otlp_endpoint: str = Field("", alias="otlpEndpoint")
    otlp_protocol: Literal["grpc", "http/protobuf"] | None = Field(None, alias="otlpProtocol")
    service_name: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    # A Secret whose key `headers` holds more headers (`name=value,...`): an auth token reaches the agent by
    # reference only.
    headers_secret_ref: str = ""
    sampling_ratio: str = ""
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    # New: put prompts, outputs and tool arguments and results on the spans (off: they stay off, as SPEC §12 says).
    capture_content: bool = False


class MCPServerRef(K8sModel):
    name: str = Field(min_length=1)
    url: str = ""
    tools_prefix: str = Field(min_length=1)
    timeout: int | None = None
    auth_secret: str = ""
    auth_key: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    tools_allow: list[str] = Field(default_factory=list)
    tools_deny: list[str] = Field(default_factory=list)


class RateLimitSpec(K8sModel):
    requests_per_minute: int | None = None
    burst_size: int | None = None


class WebEndpointSpec(K8sModel):
    enabled: bool = False  # upstream: required, defaulted to false
    hostname: str = ""
    auth_secret_ref: str = ""
    rate_limit: RateLimitSpec | None = None


class AgentSpec(K8sModel):
    display_name: str = ""
    channels: list[ChannelSpec] = Field(default_factory=list)
    memory: MemorySpec | None = None
    observability: ObservabilitySpec | None = None
    mcp_servers: list[MCPServerRef] = Field(default_factory=list)
    web_endpoint: WebEndpointSpec | None = None
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    volumes: list[KubeObject] = Field(default_factory=list)
    volume_mounts: list[KubeObject] = Field(default_factory=list)
    agents: AgentsBlock | None = None
    auth_refs: list[AuthRef] = Field(default_factory=list)
    skills: list[Any] = Field(default_factory=list)
    policy_ref: str = ""
    system_prompt: SystemPrompt = ""
    # legacy shape
    provider: LegacyProvider | None = None
    policy: Any = None


class AgentProfile(K8sModel):
    """What a run inherits from its Agent, whatever shape the Agent was written in."""

    name: str
    namespace: str
    model: ModelSpec = Field(default_factory=ModelSpec)
    run_timeout: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    lifecycle: Lifecycle | None = None
    skills: list[SkillRef] = Field(default_factory=list)
    policy_ref: str = ""
    system_prompt: str = ""
    subagents: Subagents = Field(default_factory=Subagents)
    auth_refs: list[AuthRef] = Field(default_factory=list)
    image: str = ""
    run_history_limit: int | None = None
    hook_env: list[EnvVar] = Field(default_factory=list)
    resources: Resources | None = None
    sandbox: SandboxSpec | None = None
    agent_sandbox: AgentSandboxDefaults | None = None
    # Secrets the kubelet pulls its runs' images with (spec.imagePullSecrets), for runs that name none themselves.
    image_pull_secrets: list[str] = Field(default_factory=list)
    # The MCP servers its runs' agents connect to (spec.mcpServers; entries without a url are not served here).
    mcp_servers: list[MCPServerRef] = Field(default_factory=list)
    # Where its runs' agents export their spans (spec.observability, when enabled).
    observability: ObservabilitySpec | None = None


def _skills(raw: list[Any], prefix: str) -> list[SkillRef]:
    out = []
    for i, s in enumerate(raw):
        if isinstance(s, str):
            out.append(SkillRef(skill_pack_ref=s))
        elif isinstance(s, dict):
            out.append(parse(SkillRef, s, f"{prefix}[{i}]"))
        else:
            raise FieldProblem(f"{prefix}[{i}]", "must be a skill name or {skillPackRef: ...}")
    return out


def normalize_agent(obj: dict[str, Any]) -> AgentProfile:
    """An Agent or SympoziumInstance object (any shape) as an AgentProfile; FieldProblem if malformed."""
    meta = obj.get("metadata") or {}
    spec = parse(AgentSpec, obj.get("spec") or {}, "spec")
    d = spec.agents.default if spec.agents else AgentDefaults()
    provider = spec.auth_refs[0].provider if spec.auth_refs else ""
    secret = spec.auth_refs[0].secret if spec.auth_refs else ""
    model = ModelSpec(provider=provider, model=d.model, base_url=d.base_url, thinking=d.thinking,
                      auth_secret_ref=secret, node_selector=dict(d.node_selector))
    policy_ref = spec.policy_ref
    if spec.provider is not None:  # legacy shape fills what the current shape leaves empty
        lp = spec.provider
        model.provider = model.provider or lp.name
        model.model = model.model or lp.model
        model.base_url = model.base_url or lp.base_url
        model.auth_secret_ref = model.auth_secret_ref or lp.api_key_secret
    if not policy_ref and isinstance(spec.policy, str):
        policy_ref = spec.policy
    elif not policy_ref and isinstance(spec.policy, dict):
        policy_ref = str(spec.policy.get("name") or spec.policy.get("policyRef") or "")
    return AgentProfile(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        model=model,
        run_timeout=d.run_timeout,
        env=dict(d.env),
        lifecycle=d.lifecycle,
        skills=_skills(spec.skills, "spec.skills"),
        policy_ref=policy_ref,
        system_prompt=spec.system_prompt,
        subagents=d.subagents,
        auth_refs=list(spec.auth_refs),
        image=d.image,
        run_history_limit=d.run_history_limit,
        resources=d.resources,
        sandbox=d.sandbox,
        agent_sandbox=d.agent_sandbox,
        image_pull_secrets=[r.name for r in spec.image_pull_secrets if r.name],
        mcp_servers=[m for m in spec.mcp_servers if m.url],
        observability=spec.observability if spec.observability is not None and spec.observability.enabled else None,
    )
