"""The `AgentRun` resource (sympozium.ai/v1alpha1): spec, lifecycle hooks, status.

Field names and aliases follow Sympozium so existing YAML keeps working (`instanceRef` for
`agentRef`, `input` for `task`, `model.name` for `model.model`). See SPEC §1.2-1.3.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, WithJsonSchema, model_validator

from .approvals import ToolApprovalStatus, ToolDecisionRecord
from .base import K8sModel
from .bounds import (
    ARG_MAX_BYTES,
    ENV_VALUE_MAX_BYTES,
    SHORT_TEXT_MAX_BYTES,
    SYSTEM_PROMPT_MAX_BYTES,
    TASK_MAX_BYTES,
    text_schema,
)
from .resources import Resources

# Free text bounded in the CRD (models/bounds.py); the byte checks at admission and start are the exact bound.
ShortText = Annotated[str, text_schema(SHORT_TEXT_MAX_BYTES)]
EnvValue = Annotated[str, text_schema(ENV_VALUE_MAX_BYTES)]
Arg = Annotated[str, text_schema(ARG_MAX_BYTES)]
SystemPrompt = Annotated[str, text_schema(SYSTEM_PROMPT_MAX_BYTES)]

PHASES = ("Pending", "Running", "PostRunning", "Succeeded", "Failed", "Skipped")
TERMINAL_PHASES = frozenset({"Succeeded", "Failed", "Skipped"})


class SecretKeyRef(K8sModel):
    name: str
    key: str
    optional: bool | None = None


class EnvVarSource(K8sModel):
    secret_key_ref: SecretKeyRef | None = None


class EnvVar(K8sModel):
    name: ShortText
    value: EnvValue | None = None
    value_from: EnvVarSource | None = None

    def manifest(self) -> dict[str, Any]:
        """The container env entry: a Secret's key by reference (never its value), else the literal value."""
        if self.value_from is not None and self.value_from.secret_key_ref is not None:
            ref = self.value_from.secret_key_ref
            skr: dict[str, Any] = {"name": ref.name, "key": ref.key}
            if ref.optional is not None:
                skr["optional"] = ref.optional
            return {"name": self.name, "valueFrom": {"secretKeyRef": skr}}
        return {"name": self.name, "value": self.value or ""}


class LifecycleHook(K8sModel):
    name: str
    image: ShortText
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: list[Arg] = Field(default_factory=list)
    args: list[Arg] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    timeout: str | None = None
    gate: bool = False


class RBACRule(K8sModel):
    api_groups: list[str]
    resources: list[str]
    verbs: list[str]
    resource_names: list[str] = Field(default_factory=list)


class RetryPolicy(K8sModel):
    """A retry verdict runs the agent again with the feedback, up to maxAttempts or maxChainTokens (summed)."""

    # New (the shape of Sympozium's PR #338, SPEC §4). Checked when the run starts (models/resolve.py), so a
    # bad value fails the run naming the field rather than being refused by `kubectl apply`.

    max_attempts: int = 3
    on: list[str] = Field(default_factory=lambda: ["gate"])  # what may send an attempt back: only "gate" for now
    backoff: str | None = None  # Go duration waited before the next attempt
    max_chain_tokens: int | None = None


class Lifecycle(K8sModel):
    pre_run: list[LifecycleHook] = Field(default_factory=list)
    post_run: list[LifecycleHook] = Field(default_factory=list)
    rbac: list[RBACRule] = Field(default_factory=list)
    gate_default: Literal["block", "allow"] = "block"
    # New: bounds the wait for a verdict, measured from when the gate starts (SPEC §4).
    gate_timeout: str | None = None
    # New: size of the run's workspace PVC (SPEC §3.3 "1Gi (overridable)").
    workspace_size: str | None = None
    # New: a `retry` verdict runs the agent again (SPEC §4); without it, retry is a reject.
    retry: RetryPolicy | None = None


# A core/v1 object embedded as Sympozium embeds it (a Volume, a VolumeMount): kept whole and handed on as written.
KubeObject = dict[str, Any]


class LocalObjectReference(K8sModel):
    name: str = ""


class ModelSpec(K8sModel):
    provider: ShortText = ""
    model: ShortText = Field("", validation_alias=AliasChoices("model", "name"), serialization_alias="model")
    base_url: ShortText = Field("", alias="baseURL")
    thinking: ShortText = ""
    auth_secret_ref: ShortText = ""
    node_selector: dict[str, str] = Field(default_factory=dict)
    # Sympozium's, no effect here (models/compat.py): extra provider headers, a Model resource to use.
    provider_headers: dict[str, str] = Field(default_factory=dict)
    provider_headers_secret_ref: str = ""
    model_ref: str = ""


class ToolPolicy(K8sModel):
    allow: list[ShortText] = Field(default_factory=list)
    deny: list[ShortText] = Field(default_factory=list)


class SkillRef(K8sModel):
    skill_pack_ref: str = ""
    config_map_ref: str = ""
    params: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        """`skills: [k8s-ops]` (the CRD docs' form) is `{skillPackRef: k8s-ops}`."""
        return {"skillPackRef": data} if isinstance(data, str) else data


# In the CRD a skill is a string or an object: a structural schema has no such union, so the item keeps whatever
# it is given and resolution reports a malformed one naming the field.
SkillItem = Annotated[SkillRef, WithJsonSchema({
    "description": "a SkillPack name, or {skillPackRef, configMapRef, params}",
    "x-kubernetes-preserve-unknown-fields": True})]


class ParentRef(K8sModel):
    """A sub-agent's parent run (Sympozium's ParentRunRef); checked against the limits when the run starts."""

    run_name: str = ""
    session_key: str = ""
    spawn_depth: int = 0


class SeccompProfile(K8sModel):
    type: str


class Capabilities(K8sModel):
    drop: list[str] = Field(default_factory=list)


class SandboxSecurityContext(K8sModel):
    """Sympozium's sandbox securityContext; the sidecar is always read-only with ALL dropped (at least this)."""

    read_only_root_filesystem: bool = False
    run_as_non_root: bool = False
    capabilities: Capabilities | None = None
    # The agent pod's seccomp profile type (RuntimeDefault when unset), as Sympozium applies it.
    seccomp_profile: SeccompProfile | None = None


class SandboxSpec(K8sModel):
    """`spec.sandbox`: with `enabled`, a `sandbox` sidecar (`sleep infinity`) beside the agent, as Sympozium adds."""

    enabled: bool = False
    image: str = ""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    security_context: SandboxSecurityContext | None = None
    # Ours: the agent pod's runtimeClassName (Sympozium's CRD has no such field; agentSandbox.runtimeClass is its way).
    runtime_class: str = ""
    # The agent container's requests and limits (models/resources.py): typed, so the CRD keeps the quantities.
    resources: Resources | None = None


class AgentSandboxSpec(K8sModel):
    """`spec.agentSandbox`: here the agent's Job pod with `runtimeClassName` (Sympozium's Sandbox CR backend is
    not offered; `warmPoolRef` is refused)."""

    enabled: bool = False
    runtime_class: str = ""
    warm_pool_ref: str = ""
    resources: Resources | None = None


class AgentRunSpec(K8sModel):
    agent_ref: str = Field("", validation_alias=AliasChoices("agentRef", "instanceRef", "agent_ref"),
                           serialization_alias="agentRef")
    # Kept loose here so a non-string task reaches validation and fails the run with a clear message; a string one
    # is bounded by the CRD too (maxLength applies to strings only).
    task: Any = Field(None, validation_alias=AliasChoices("task", "input"), serialization_alias="task",
                      json_schema_extra={"maxLength": TASK_MAX_BYTES})
    agent_id: ShortText = ""
    session_key: ShortText = ""
    system_prompt: SystemPrompt = ""
    model: ModelSpec | None = None
    env: dict[str, EnvValue] = Field(default_factory=dict)
    timeout: str | None = None
    lifecycle: Lifecycle | None = None
    tool_policy: ToolPolicy | None = None
    skills: list[SkillItem] = Field(default_factory=list)
    sandbox: SandboxSpec | None = None
    agent_sandbox: AgentSandboxSpec | None = None
    parent: ParentRef | None = None
    cleanup: Literal["delete", "keep"] = "delete"
    mode: Literal["task", "server"] = "task"
    image: ShortText = ""
    # Sympozium's, with no effect here or handed on as written (models/compat.py says which).
    dry_run: bool = False
    canary_mode: bool = False
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    use_context: bool | None = None
    volumes: list[KubeObject] = Field(default_factory=list)
    volume_mounts: list[KubeObject] = Field(default_factory=list)


class ModelUsage(K8sModel):
    """One model's share of a run's usage (new): the model as the provider named it in its responses."""

    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    # Decimal USD, as estimatedCostUSD; absent when no price is known for the model.
    estimated_cost_usd: str | None = Field(None, alias="estimatedCostUSD")


class TokenUsage(K8sModel):
    input_tokens: int = 0  # cached input tokens included (OpenAI's convention; Anthropic's are added in)
    output_tokens: int = 0
    total_tokens: int = 0
    tool_calls: int = 0
    duration_ms: int = 0
    cached_input_tokens: int = 0  # new: how many of input_tokens the provider read from its prompt cache
    # New (SPEC §12): what the tokens cost, a decimal string in USD, priced by the control plane when each attempt's
    # agent ended (models/pricing.py) and summed over the attempts; absent when a model has no known price. Never
    # taken from what the agent reports.
    estimated_cost_usd: str | None = Field(None, alias="estimatedCostUSD")
    # New: per model, at most MODELS_KEPT (models/pricing.py), what each cost: the API's metrics count by model.
    models: list[ModelUsage] | None = None


class GateStatus(K8sModel):
    # "pending" while waiting, then the verdict (approved, rejected, rewritten, timeout, error,
    # allowed-by-default; retried while a retried run's next attempt runs, retries-exhausted), so one printer
    # column shows both.
    state: str = "pending"
    requested_at: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    # api, annotation or temporal (the verdict's way in), timeout or gate-hook (decided without one): what the
    # API's metrics count verdicts by.
    source: str | None = None
    reason: str | None = None
    # New: while the gate waits, the response it holds (the first RESPONSE_SHOWN_MAX_BYTES), so an approver sees what
    # they decide on; the gate's final status no longer carries it (status.result has the final text).
    response: str | None = None
    response_cut: bool | None = None


class AttemptRecord(K8sModel):
    """One attempt of a retried run, as the gate decided it: `retried` (sent back) or the final label."""

    attempt: int
    verdict: str
    decided_by: str | None = None
    reason: str | None = None  # cut to ATTEMPT_REASON_MAX_BYTES
    decided_at: str | None = None
    tokens: int = 0  # input + output tokens of this attempt's agent


class Condition(K8sModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class DelegateStatus(K8sModel):
    """A sub-agent run started under this one (Sympozium's `status.delegates` item). Here only `childRunName` is
    written, by the child's first step (activities/kube.py): the parent's workflow never writes `delegates`, so its
    own status writes keep the list."""

    child_run_name: str
    target_persona: str | None = None
    batch_id: str | None = Field(None, alias="batchId")
    task_id: str | None = None
    phase: str | None = None
    result: str | None = None
    error: str | None = None


class AgentRunStatus(K8sModel):
    phase: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    job_name: str | None = None
    pod_name: str | None = None
    post_run_job_name: str | None = None
    result: str | None = None
    error: str | None = None
    exit_code: int | None = None
    token_usage: TokenUsage | None = None
    gate_verdict: str | None = None
    gate: GateStatus | None = None
    # New (SPEC §10): the round of tool calls waiting for a person (or the last one), and every decision on one.
    tool_approval: ToolApprovalStatus | None = None
    tool_approvals: list[ToolDecisionRecord] | None = None
    # New (SPEC §10): the agent's active time across its containers (what `timeout` bounds), and the time the run
    # waited with no pod of the agent: for tool approvals and at the gate.
    active_ms: int | None = None
    waited_ms: int | None = None
    attempt: int | None = None  # a run with lifecycle.retry: the attempt running (or the last one)
    attempts: list[AttemptRecord] | None = None  # the last ATTEMPTS_KEPT attempts the gate decided
    # New: how often the agent was started again after its pod was lost (condition AgentRestarted says why).
    agent_restarts: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    workflow_id: str | None = None
    delegates: list[DelegateStatus] | None = None  # sub-agent runs started under this one
    observed_generation: int | None = None
    # Who wrote the lifecycle hooks this run executes, as recorded when it started: its creator for its own
    # spec.lifecycle, else its Agent's author (models/authorship.py). Under a gatePolicy with approvers, its gate hook's
    # verdict counts only when that is someone other than its creator (api/authority.py).
    lifecycle_author: str | None = None
    # New (SPEC §12): the run's W3C trace ID (32 hex): the trace of its control plane's steps and its agent's spans.
    trace_id: str | None = Field(None, alias="traceID")
