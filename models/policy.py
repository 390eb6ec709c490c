"""The `SympoziumPolicy` resource (SPEC §1.5), both shapes normalised into `PolicyRules`.

The current shape has `toolGating`, `sandboxPolicy`, `subagentPolicy`, `imagePolicy`,
`lifecyclePolicy`, `featureGates`, `gatePolicy` (who may decide a gate and a tool call), `toolApproval` (how long a
tool call waits for a decision); the docs shape has `template`, `requireApproval`,
`allowedTools`, `sandbox`. Enforcement reads only `PolicyRules`.

A docs-shape `template` means the built-in policy of that name (`TEMPLATES`, shipped as
`examples/policies/*.yaml`); fields the policy sets itself replace the template's field of the
same name, and the docs-shape fields (`allowedTools`, `requireApproval`, `sandbox`) apply on top.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import Field

from agentrunner.policy import ToolPolicy

from .base import FieldProblem, K8sModel, parse
from .resources import Quantity, parse_quantity

ALWAYS_DENIED_ENV = ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "HOME", "SHELL", "USER", "HOSTNAME")
# Variables agentrun sets on the agent from what is not the run's to decide: its SympoziumPolicy, its Agent, its
# SkillPacks, the pod's own layout. A run's `env` comes after them in the container and would replace them (the last
# of a name wins), so it may not name them: a run could otherwise lift its policy, forge its sidecars' tools, point
# the file tools' root at `/` (the agent's /proc holds the provider key) or send its Agent's key elsewhere.
RESERVED_AGENT_ENV: dict[str, str] = {
    "AGENT_TOOL_POLICY": "its SympoziumPolicy's tool rules",
    "MODEL_PROVIDER": "its model", "MODEL_BASE_URL": "its model",
    "AGENT_MCP_SERVERS": "its Agent's mcpServers",
    "AGENT_SIDECAR_TOOLS": "its SkillPacks' sidecar tools", "SIDECAR_TOOLS_MANIFEST_PATH": "its SkillPacks' sidecar tools",
    "AGENT_SKILL_PARAMS": "its skills' params", "SYMPOZIUM_SKILL_TARGETS": "its SkillPacks' sidecars",
    "EXEC_DIR": "the pod's executor", "EXEC_TARGETS": "the pod's executor", "EXEC_DEFAULT_TARGET": "the pod's executor",
    "AGENT_STATE_DIR": "the run's journal", "AGENT_WAITS": "the run's tool approvals",
    "AGENT_RESUME": "the run's tool approvals", "WORKSPACE_DIR": "the pod's layout", "SKILLS_DIR": "the pod's layout",
    "AGENT_CONTEXT_DIR": "the pod's layout", "AGENT_IPC_DIR": "the pod's layout",
    # A long task or system prompt is read from the run's input Secret: env naming another file would replace it
    # with whatever that file holds (one a preRun hook wrote, or one of the agent container's own).
    "TASK_FILE": "the run's input", "SYSTEM_PROMPT_FILE": "the run's input",
}
RESERVED_AGENT_ENV["TRACEPARENT"] = "the run's trace"
RESERVED_AGENT_ENV["AGENT_OTLP_SECRET_HEADERS"] = "its Agent's observability"
# OTEL_*: the Agent's observability sets the agent's exporter; a run's env must not send its spans (and the Agent's
# collector credentials with them) elsewhere, nor turn the capture of prompts on.
RESERVED_AGENT_ENV_PREFIXES: dict[str, str] = {"MCP_AUTH_": "its Agent's mcpServers' authSecret",
                                               "OTEL_": "its Agent's observability"}


def reserved_env(key: str) -> str | None:
    """Where agentrun takes `key` from when it sets it for the agent (None: a run's env may set it)."""
    if key in RESERVED_AGENT_ENV:
        return RESERVED_AGENT_ENV[key]
    return next((why for prefix, why in RESERVED_AGENT_ENV_PREFIXES.items() if key.startswith(prefix)), None)

# The built-in templates, as current-shape specs. They follow Sympozium's presets
# (config/policies/permissive.yaml and restrictive.yaml, and the default-policy sample, whose
# docs say Default asks for approval before execute_command); fields Sympozium has and we do not
# act on (networkPolicy, allowHostMounts, ...) are left out. examples/policies/ holds the same
# specs as objects, and a test keeps the two equal.
TEMPLATES: dict[str, dict[str, Any]] = {
    "Permissive": {
        "toolGating": {"defaultAction": "allow", "rules": []},
        "sandboxPolicy": {"required": False, "maxCPU": "8", "maxMemory": "16Gi"},
        "subagentPolicy": {"maxDepth": 5, "maxConcurrent": 10},
        "featureGates": {"code-execution": True, "sub-agents": True, "browser-automation": True,
                         "file-access": True},
    },
    "Default": {
        "toolGating": {"defaultAction": "allow", "rules": [{"tool": "execute_command", "action": "ask"}]},
        "sandboxPolicy": {"required": False, "maxCPU": "4", "maxMemory": "8Gi"},
        "subagentPolicy": {"maxDepth": 3, "maxConcurrent": 5},
        # Sympozium's Default also sets browser-automation: false; nothing here acts on it (there is no browser
        # tool), so it is left out as the other fields without effect are: with it, admission would warn.
        "featureGates": {"code-execution": True, "sub-agents": True, "file-access": True},
    },
    "Restrictive": {
        "toolGating": {"defaultAction": "deny", "rules": [
            {"tool": "execute_command", "action": "deny"},
            {"tool": "read_file", "action": "allow"},
            {"tool": "list_directory", "action": "allow"},
            {"tool": "write_file", "action": "deny"},
            {"tool": "fetch_url", "action": "deny"},
            {"tool": "send_channel_message", "action": "allow"},
        ]},
        "sandboxPolicy": {"required": True, "maxCPU": "2", "maxMemory": "4Gi",
                          "agentSandboxPolicy": {"required": False, "allowedRuntimeClasses": ["gvisor", "kata"]}},
        "subagentPolicy": {"maxDepth": 2, "maxConcurrent": 3},
        "imagePolicy": {"allowedRegistries": ["ghcr.io/sympozium-ai/", "docker.io/library/"]},
        "lifecyclePolicy": {"deniedResources": ["secrets", "clusterroles", "clusterrolebindings"]},
        # Sympozium's also sets browser-automation and file-access to false; nothing here acts on those gates (no
        # browser tool; the file tools are governed by toolGating above), so they are left out.
        "featureGates": {"code-execution": True, "sub-agents": True},
    },
}


class ToolRule(K8sModel):
    tool: str
    action: Literal["allow", "deny", "ask"]


class ToolGating(K8sModel):
    default_action: Literal["allow", "deny", "ask"] = "allow"
    rules: list[ToolRule] = Field(default_factory=list)


class AgentSandboxPolicy(K8sModel):
    required: bool = False
    default_runtime_class: str = ""
    allowed_runtime_classes: list[str] = Field(default_factory=list)


class PolicySeccompProfile(K8sModel):
    type: str


class SandboxPolicy(K8sModel):
    required: bool = False
    default_image: str = ""  # the sandbox sidecar's image when the run names none
    max_cpu: Quantity = Field("", alias="maxCPU")
    max_memory: Quantity = ""
    allow_host_mounts: bool = False  # nothing here mounts host paths: accepted, nothing to allow
    seccomp_profile: PolicySeccompProfile | None = None
    agent_sandbox_policy: AgentSandboxPolicy | None = None


class SubagentPolicy(K8sModel):
    max_depth: int | None = None
    max_concurrent: int | None = None


class ImagePolicy(K8sModel):
    allowed_registries: list[str] = Field(default_factory=list)


class LifecyclePolicy(K8sModel):
    denied_resources: list[str] = Field(default_factory=list)


GROUP_PREFIX = "group:"
RULE_APPROVERS = "gatePolicy.approvers"
RULE_DISTINCT_APPROVER = "gatePolicy.requireDistinctApprover"


class Refusal(NamedTuple):
    """Why a verdict (or a write) is refused: the rule's name (a metric label) and a message naming it."""

    rule: str
    message: str


class GatePolicy(K8sModel):
    """Who may give a gated run's verdict (SPEC §4, separation of duties).

    `approvers` entries are user names (`alice`, `system:serviceaccount:ns:sa`, an API token's identity) or
    `group:<name>`; empty means no list (anyone the other rules let through). With `requireDistinctApprover`
    the identity that created the run may never decide it.

    Users and groups are matched as what they are: a `group:` entry names a group and only a member of it matches
    (a user literally named "group:reviewers" is no member), and any other entry names a user, never a group.
    """

    approvers: list[str] = Field(default_factory=list)
    require_distinct_approver: bool = False

    @property
    def approving_users(self) -> frozenset[str]:
        return frozenset(a for a in self.approvers if not a.startswith(GROUP_PREFIX))

    @property
    def approving_groups(self) -> frozenset[str]:
        return frozenset(a.removeprefix(GROUP_PREFIX) for a in self.approvers if a.startswith(GROUP_PREFIX))

    def approves(self, identity: str, groups: list[str] | tuple[str, ...] = ()) -> bool:
        """`identity` is a user named in `approvers`, or one of its `groups` is a group named there."""
        return identity in self.approving_users or not self.approving_groups.isdisjoint(groups)

    def refusal(self, identity: str, groups: list[str] | tuple[str, ...] = (), *, creator: str | None,
                policy: str, what: str = "this gate", its: str = "its gate") -> Refusal | None:
        """Why `identity` may not decide a run created by `creator` under this policy (`what`, `its`: the gate, or
        its tool calls); None: it may."""
        if self.approvers and not self.approves(identity, groups):
            return Refusal(RULE_APPROVERS, f'"{identity}" may not decide {what}: it is not among the approvers '
                                           f'of policy "{policy}" ({RULE_APPROVERS})')
        if self.require_distinct_approver and creator and identity == creator:
            return Refusal(RULE_DISTINCT_APPROVER, f'"{identity}" created this run and may not decide {its} '
                                                   f'under policy "{policy}" ({RULE_DISTINCT_APPROVER})')
        return None


class ToolApprovalPolicy(K8sModel):
    """How long a tool call that needs approval (toolGating `ask`) waits for a decision, and what happens then (SPEC
    §10). It lives in the policy, not the run: a run's creator cannot approve their own calls by waiting out a short
    timeout of their choosing."""

    timeout: str = "30m"  # Go duration
    on_timeout: Literal["deny", "allow"] = "deny"


class EgressRule(K8sModel):
    host: str
    port: int | None = None


class NetworkPolicySpec(K8sModel):
    """Sympozium's; no NetworkPolicy is made here (models/compat.py)."""

    deny_all: bool = True
    allow_dns: bool = Field(True, alias="allowDNS")
    allow_event_bus: bool = True
    allowed_egress: list[EgressRule] = Field(default_factory=list)


class ModelPolicySpec(K8sModel):
    """Sympozium's; not enforced here (models/compat.py)."""

    allowed_namespaces: list[str] = Field(default_factory=list)
    allowed_models: list[str] = Field(default_factory=list)


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
    gate_policy: GatePolicy | None = None
    tool_approval: ToolApprovalPolicy | None = None
    network_policy: NetworkPolicySpec | None = None
    model_policy: ModelPolicySpec | None = None
    # docs shape
    template: Literal["Permissive", "Default", "Restrictive"] | None = None
    require_approval: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    sandbox: DocsSandbox | None = None


class PolicyRules(K8sModel):
    name: str = ""
    template: str = ""
    # With "deny", a run may allow only `allowed_tools` and `approval_tools`.
    default_tool_action: Literal["allow", "deny", "ask"] = "allow"
    denied_tools: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    approval_tools: list[str] = Field(default_factory=list)
    sandbox_required: bool = False
    agent_sandbox_required: bool = False
    allowed_runtime_classes: list[str] = Field(default_factory=list)
    default_runtime_class: str = ""
    sandbox_default_image: str = ""
    seccomp_profile: str = ""  # the agent pod's seccomp profile type when the run sets none
    max_depth: int | None = None
    max_concurrent: int | None = None
    allowed_registries: list[str] = Field(default_factory=list)
    denied_resources: list[str] = Field(default_factory=list)
    denied_env: list[str] = Field(default_factory=lambda: list(ALWAYS_DENIED_ENV))
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    gate: GatePolicy = Field(default_factory=GatePolicy)
    tool_approval: ToolApprovalPolicy = Field(default_factory=ToolApprovalPolicy)
    # sandboxPolicy.maxCPU / maxMemory: the most any one container of a run may request or be limited to.
    max_cpu: str = ""
    max_memory: str = ""

    def named(self) -> str:
        """How a refusal names this policy: `policy "strict"`, with its template when it has one."""
        return f'policy "{self.name}"' + (f" (template {self.template})" if self.template else "")

    def agent_tool_policy(self) -> str:
        """The tool rules as the agent reads them (``AGENT_TOOL_POLICY``, agentrunner/policy.py): one evaluation,
        the same order as ``models.resolve.check_policy``."""
        import json

        return json.dumps({"name": self.name, "template": self.template, "defaultAction": self.default_tool_action,
                           "allow": self.allowed_tools, "deny": self.denied_tools, "ask": self.approval_tools},
                          separators=(",", ":"))

    def agent_tools(self) -> ToolPolicy:
        """The agent's own evaluation of these rules (without a run's toolPolicy), for the control plane to decide
        exactly as the agent will."""
        return ToolPolicy(name=self.name, template=self.template, default_action=self.default_tool_action,
                          allow=tuple(self.allowed_tools), deny=tuple(self.denied_tools),
                          ask=tuple(self.approval_tools))

    @property
    def asks(self) -> bool:
        """Some tool needs a person's approval under these rules (an `ask` rule, or `ask` as the default)."""
        return bool(self.approval_tools) or self.default_tool_action == "ask"

    def image_allowed(self, image: str) -> bool:
        """imagePolicy.allowedRegistries: a prefix match; no list allows every image."""
        return not self.allowed_registries or any(image.startswith(p) for p in self.allowed_registries)

    def resource_denied(self, resource: str) -> bool:
        """lifecyclePolicy.deniedResources: a resource, or any subresource of it (`pods` denies `pods/exec`)."""
        return resource in self.denied_resources or resource.split("/")[0] in self.denied_resources


def normalize_policy(obj: dict[str, Any]) -> PolicyRules:
    raw = obj.get("spec") or {}
    if not isinstance(raw, dict):
        raise FieldProblem("spec", "must be an object")
    template = raw.get("template")
    if template is not None and template not in TEMPLATES:
        raise FieldProblem("spec.template", f"must be one of {', '.join(TEMPLATES)}, got {template!r}")
    if template is not None:
        # The template is the base; a field the policy sets itself replaces the template's whole field.
        raw = {**TEMPLATES[template], **{k: v for k, v in raw.items() if v is not None}}
    spec = parse(PolicySpec, raw, "spec")
    rules = PolicyRules(name=str((obj.get("metadata") or {}).get("name", "")), template=spec.template or "")
    if spec.tool_gating:
        rules.default_tool_action = spec.tool_gating.default_action
        rules.denied_tools = [r.tool for r in spec.tool_gating.rules if r.action == "deny"]
        rules.approval_tools = [r.tool for r in spec.tool_gating.rules if r.action == "ask"]
        rules.allowed_tools = [r.tool for r in spec.tool_gating.rules if r.action == "allow"]
    if spec.sandbox_policy:
        rules.sandbox_required = spec.sandbox_policy.required
        for key, value in (("maxCPU", spec.sandbox_policy.max_cpu), ("maxMemory", spec.sandbox_policy.max_memory)):
            if value:
                try:
                    parse_quantity(value)
                except ValueError as e:
                    raise FieldProblem(f"spec.sandboxPolicy.{key}", str(e)) from None
        rules.max_cpu, rules.max_memory = spec.sandbox_policy.max_cpu, spec.sandbox_policy.max_memory
        rules.sandbox_default_image = spec.sandbox_policy.default_image
        if spec.sandbox_policy.seccomp_profile:
            rules.seccomp_profile = spec.sandbox_policy.seccomp_profile.type
        asp = spec.sandbox_policy.agent_sandbox_policy
        if asp:
            rules.agent_sandbox_required = asp.required
            rules.default_runtime_class = asp.default_runtime_class
            rules.allowed_runtime_classes = list(asp.allowed_runtime_classes)
    if spec.subagent_policy:
        rules.max_depth = spec.subagent_policy.max_depth
        rules.max_concurrent = spec.subagent_policy.max_concurrent
    if spec.image_policy:
        rules.allowed_registries = list(spec.image_policy.allowed_registries)
    if spec.lifecycle_policy:
        rules.denied_resources = list(spec.lifecycle_policy.denied_resources)
    rules.feature_gates = dict(spec.feature_gates)
    if spec.gate_policy:
        rules.gate = spec.gate_policy
    if spec.tool_approval:
        rules.tool_approval = spec.tool_approval
    rules.denied_env = sorted(set(ALWAYS_DENIED_ENV) | set(spec.denied_env))
    # docs shape, on top of the template and the current-shape fields
    if spec.allowed_tools:
        # An allow-list replacing the allow rules: the run may allow these and the approval tools,
        # nothing else; tools a rule denies stay denied.
        rules.allowed_tools = list(spec.allowed_tools)
        rules.default_tool_action = "deny"
    if spec.require_approval:
        rules.approval_tools = sorted(set(rules.approval_tools) | set(spec.require_approval))
    if spec.sandbox and spec.sandbox.enabled:
        rules.sandbox_required = True
    return rules
