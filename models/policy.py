"""The `SympoziumPolicy` resource (SPEC §1.5), both shapes normalised into `PolicyRules`.

The current shape has `toolGating`, `sandboxPolicy`, `subagentPolicy`, `imagePolicy`,
`lifecyclePolicy`, `featureGates`; the docs shape has `template`, `requireApproval`,
`allowedTools`, `sandbox`. Enforcement reads only `PolicyRules`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import K8sModel, parse

ALWAYS_DENIED_ENV = ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "HOME", "SHELL", "USER", "HOSTNAME")


class ToolRule(K8sModel):
    tool: str
    action: Literal["allow", "deny", "ask"]


class ToolGating(K8sModel):
    default_action: Literal["allow", "deny", "ask"] = "allow"
    rules: list[ToolRule] = Field(default_factory=list)


class AgentSandboxPolicy(K8sModel):
    required: bool = False
    allowed_runtime_classes: list[str] = Field(default_factory=list)


class SandboxPolicy(K8sModel):
    required: bool = False
    max_cpu: str = Field("", alias="maxCPU")
    max_memory: str = ""
    agent_sandbox_policy: AgentSandboxPolicy | None = None


class SubagentPolicy(K8sModel):
    max_depth: int | None = None
    max_concurrent: int | None = None


class ImagePolicy(K8sModel):
    allowed_registries: list[str] = Field(default_factory=list)


class LifecyclePolicy(K8sModel):
    denied_resources: list[str] = Field(default_factory=list)


class DocsSandbox(K8sModel):
    enabled: bool = False
    runtime_class: str = ""


class PolicySpec(K8sModel):
    tool_gating: ToolGating | None = None
    sandbox_policy: SandboxPolicy | None = None
    subagent_policy: SubagentPolicy | None = None
    image_policy: ImagePolicy | None = None
    lifecycle_policy: LifecyclePolicy | None = None
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    denied_env: list[str] = Field(default_factory=list)
    # docs shape
    template: Literal["Permissive", "Default", "Restrictive"] | None = None
    require_approval: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    sandbox: DocsSandbox | None = None


class PolicyRules(K8sModel):
    name: str = ""
    denied_tools: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    approval_tools: list[str] = Field(default_factory=list)
    sandbox_required: bool = False
    agent_sandbox_required: bool = False
    allowed_runtime_classes: list[str] = Field(default_factory=list)
    max_depth: int | None = None
    max_concurrent: int | None = None
    allowed_registries: list[str] = Field(default_factory=list)
    denied_resources: list[str] = Field(default_factory=list)
    denied_env: list[str] = Field(default_factory=lambda: list(ALWAYS_DENIED_ENV))
    feature_gates: dict[str, bool] = Field(default_factory=dict)


def normalize_policy(obj: dict[str, Any]) -> PolicyRules:
    spec = parse(PolicySpec, obj.get("spec") or {}, "spec")
    rules = PolicyRules(name=str((obj.get("metadata") or {}).get("name", "")))
    if spec.tool_gating:
        rules.denied_tools = [r.tool for r in spec.tool_gating.rules if r.action == "deny"]
        rules.approval_tools = [r.tool for r in spec.tool_gating.rules if r.action == "ask"]
    if spec.sandbox_policy:
        rules.sandbox_required = spec.sandbox_policy.required
        asp = spec.sandbox_policy.agent_sandbox_policy
        if asp:
            rules.agent_sandbox_required = asp.required
            rules.allowed_runtime_classes = list(asp.allowed_runtime_classes)
    if spec.subagent_policy:
        rules.max_depth = spec.subagent_policy.max_depth
        rules.max_concurrent = spec.subagent_policy.max_concurrent
    if spec.image_policy:
        rules.allowed_registries = list(spec.image_policy.allowed_registries)
    if spec.lifecycle_policy:
        rules.denied_resources = list(spec.lifecycle_policy.denied_resources)
    rules.feature_gates = dict(spec.feature_gates)
    rules.denied_env = sorted(set(ALWAYS_DENIED_ENV) | set(spec.denied_env))
    # docs shape
    if spec.allowed_tools:
        rules.allowed_tools = list(spec.allowed_tools)
    if spec.require_approval:
        rules.approval_tools = sorted(set(rules.approval_tools) | set(spec.require_approval))
    if spec.sandbox and spec.sandbox.enabled:
        rules.sandbox_required = True
    if spec.template == "Restrictive":
        rules.sandbox_required = True
    return rules
