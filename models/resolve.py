"""Resolving a run against its Agent (SPEC §1.2) and validating the result (SPEC §3.1).

Pure functions: the workflow's input is `ResolvedRun`, computed once when the workflow
starts, so later edits of the Agent never change a run in flight. Every problem is a
`FieldProblem` naming the field, which becomes the run's `Failed` message.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from pydantic import Field
from pydantic.alias_generators import to_camel

from agentrunner.config import AZURE, DEFAULT_BASE_URLS, ECHO, PROVIDER_KEY_ENV, provider_problem

from . import bounds
from .agent import AgentProfile, MCPServerRef, ObservabilitySpec, Subagents
from .agentrun import (
    TERMINAL_PHASES,
    AgentRunSpec,
    AgentSandboxSpec,
    EnvVar,
    LifecycleHook,
    ModelSpec,
    ParentRef,
    RBACRule,
    RetryPolicy,
    SandboxSpec,
    SkillRef,
    ToolPolicy,
)
from .base import FieldProblem, K8sModel, PolicyViolation, parse
from .compat import check_run_backend
from .duration import parse_duration
from .names import LABEL_RUN, MAX_LABEL_VALUE
from .policy import ALWAYS_DENIED_ENV, PolicyRules, reserved_env
from .resources import (
    AGENT_DEFAULT,
    HOOK_DEFAULT,
    SANDBOX_DEFAULT,
    TOOLS_DEFAULT,
    Caps,
    Resources,
    parse_resources,
    resolve_resources,
)
from .skills import ResolvedSkillPack

DEFAULT_RUN_TIMEOUT = "10m"
DEFAULT_HOOK_TIMEOUT = "5m"
DEFAULT_GATE_TIMEOUT = "10m"
DEFAULT_TOOL_APPROVAL_TIMEOUT = "30m"
DEFAULT_WORKSPACE_SIZE = "1Gi"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# Sympozium's sandbox sidecar image (its controller's imageRef("sandbox")) when neither the run nor the policy names one.
DEFAULT_SANDBOX_IMAGE = "ghcr.io/sympozium-ai/sympozium/sandbox:latest"
SANDBOX_FIELD = "spec.agentSandbox.runtimeClass"


class SandboxSidecar(K8sModel):
    """`spec.sandbox.enabled`: the `sandbox` container beside the agent, as Sympozium adds it (`sleep infinity`)."""

    image: str
    image_pull_policy: str | None = None
    resources: Resources = Field(default_factory=lambda: SANDBOX_DEFAULT.model_copy(deep=True))


class ResolvedHook(K8sModel):
    name: str
    image: str
    image_pull_policy: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    timeout_seconds: int
    gate: bool = False


class ResolvedRetry(K8sModel):
    """`lifecycle.retry`, checked: a retry verdict runs the agent again while attempts and tokens are left."""

    max_attempts: int
    backoff_seconds: float = 0
    max_chain_tokens: int | None = None


class ResolvedToolApproval(K8sModel):
    """The policy's `toolApproval`, for a run whose agent may need a person's approval (SPEC §10)."""

    timeout_seconds: int
    on_timeout: Literal["deny", "allow"] = "deny"


class RunRef(K8sModel):
    """Identity of the run object; the workflow ID is derived from it."""

    namespace: str
    name: str
    uid: str
    generation: int = 1


class ResolvedRun(K8sModel):
    ref: RunRef
    agent: str
    task: str
    agent_id: str
    session_key: str
    system_prompt: str
    model: ModelSpec
    env: dict[str, str]
    timeout_seconds: int
    pre_run: list[ResolvedHook] = Field(default_factory=list)
    post_run: list[ResolvedHook] = Field(default_factory=list)
    rbac: list[RBACRule] = Field(default_factory=list)
    gate_default: Literal["block", "allow"] = "block"
    gate_timeout_seconds: int
    workspace_size: str = DEFAULT_WORKSPACE_SIZE
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    skills: list[SkillRef] = Field(default_factory=list)
    sandbox: SandboxSpec | None = None
    agent_sandbox: AgentSandboxSpec | None = None
    parent: ParentRef | None = None
    cleanup: Literal["delete", "keep"] = "delete"
    image: str
    labels: dict[str, str] = Field(default_factory=dict)
    retry: ResolvedRetry | None = None  # None: a retry verdict is a reject
    # Requests and limits of the agent container and of each hook (models/resources.py), under the policy's caps.
    resources: Resources = Field(default_factory=lambda: AGENT_DEFAULT.model_copy(deep=True))
    hook_resources: Resources = Field(default_factory=lambda: HOOK_DEFAULT.model_copy(deep=True))
    # `skills` resolved against their SkillPacks (models/skills.py): /skills and the sidecars.
    skill_packs: list[ResolvedSkillPack] = Field(default_factory=list)
    # The agent pod's runtimeClassName (spec.agentSandbox.runtimeClass, or the policy's defaultRuntimeClass).
    runtime_class_name: str = ""
    sandbox_sidecar: SandboxSidecar | None = None
    seccomp_profile: str = ""  # the agent pod's seccomp profile type; "" keeps RuntimeDefault
    # The pods' imagePullSecrets: the run's spec.imagePullSecrets, else its Agent's (as Sympozium's scheduled runs get).
    image_pull_secrets: list[str] = Field(default_factory=list)
    # How often the agent is started again when its pod is lost before it reported a result (SPEC §9, "Journal"):
    # the worker's setting when the run starts (0 for runs started before restarts existed, and when disabled).
    agent_restarts: int = 0
    # The policy's tool rules as the agent reads them (AGENT_TOOL_POLICY; "" without a policy): the same
    # evaluation as `check_policy`'s (agentrunner/policy.py).
    tool_rules: str = ""
    # The Agent's MCP servers its agent connects to (MCP_AUTH_<SERVER> from each one's authSecret).
    mcp_servers: list[MCPServerRef] = Field(default_factory=list)
    # The image of the tools container, where commands run when the run has no sandbox (the worker's setting;
    # "" for runs resolved before it existed, or outside the worker: the run's image).
    tools_image: str = ""
    tools_resources: Resources = Field(default_factory=lambda: TOOLS_DEFAULT.model_copy(deep=True))
    # Where the agent exports its spans: its Agent's enabled `observability`, checked (None: it exports none).
    observability: ObservabilitySpec | None = None
    # Set when the policy makes some tool ask for a person's approval: the agent may park a call and wait (SPEC §10),
    # so it keeps a journal. None for runs resolved before approvals existed, and without `ask`.
    tool_approval: ResolvedToolApproval | None = None

    @property
    def has_hooks(self) -> bool:
        return bool(self.pre_run or self.post_run)

    @property
    def journal(self) -> bool:
        """The agent keeps a journal on the workspace PVC: a restartable agent, or one that may wait for an approval,
        continues from it."""
        return self.agent_restarts > 0 or self.tool_approval is not None

    @property
    def has_workspace(self) -> bool:
        """The run has a workspace PVC (its hooks share /workspace with the agent, or its agent keeps a journal)."""
        return self.has_hooks or self.journal

    @property
    def sidecars(self) -> list[ResolvedSkillPack]:
        return [p for p in self.skill_packs if p.sidecar is not None]

    @property
    def gate_hook(self) -> ResolvedHook | None:
        return next((h for h in self.post_run if h.gate), None)

    def hooks_of(self, component: str, *, gate_only: bool = False) -> list[ResolvedHook]:
        """The hooks one Job of `component` runs: the preRun hooks; with a gate, the gate hook alone
        (`gate_only`) or, in `post-gate`, the others; else every postRun hook, the gate hook first (runs
        started before the gate hook ran alone still ask for that)."""
        if component == "prerun":
            return list(self.pre_run)
        if component == "post-gate":
            return [h for h in self.post_run if not h.gate]
        if gate_only and self.gate_hook is not None:
            return [self.gate_hook]
        return sorted(self.post_run, key=lambda h: not h.gate)  # stable: the others keep their order


def _seconds(value: str | None, default: str, field: str) -> int:
    text = value if value not in (None, "") else default
    try:
        d = parse_duration(str(text))
    except ValueError as e:
        raise FieldProblem(field, str(e)) from None
    if d.total_seconds() <= 0:
        raise FieldProblem(field, f"must be a positive duration, got {text!r}")
    return max(1, round(d.total_seconds()))


def _retry(policy: RetryPolicy | None, post: list[ResolvedHook]) -> ResolvedRetry | None:
    field = "spec.lifecycle.retry"
    if policy is None:
        return None
    if not any(h.gate for h in post):
        raise FieldProblem(field, "needs a postRun hook with gate: true (a retry verdict comes from the gate)")
    if policy.max_attempts < 1:
        raise FieldProblem(f"{field}.maxAttempts", f"must be at least 1, got {policy.max_attempts}")
    for i, on in enumerate(policy.on):
        if on != "gate":
            raise FieldProblem(f"{field}.on[{i}]", f'unknown value {on!r}: only "gate" can send an attempt back')
    if policy.max_chain_tokens is not None and policy.max_chain_tokens < 1:
        raise FieldProblem(f"{field}.maxChainTokens", f"must be at least 1, got {policy.max_chain_tokens}")
    backoff = 0.0
    if policy.backoff not in (None, ""):
        try:
            backoff = parse_duration(str(policy.backoff)).total_seconds()
        except ValueError as e:
            raise FieldProblem(f"{field}.backoff", str(e)) from None
        if backoff < 0:
            raise FieldProblem(f"{field}.backoff", f"must not be negative, got {policy.backoff!r}")
    return ResolvedRetry(max_attempts=policy.max_attempts, backoff_seconds=backoff,
                         max_chain_tokens=policy.max_chain_tokens)


def _hooks(hooks: list[LifecycleHook], field: str, *, allow_gate: bool) -> list[ResolvedHook]:
    out: list[ResolvedHook] = []
    seen: set[str] = set()
    gates = [h.name for h in hooks if h.gate]
    if gates and not allow_gate:
        i = next(i for i, h in enumerate(hooks) if h.gate)
        raise FieldProblem(f"{field}[{i}].gate",
                           f'gate: true is only valid on postRun hooks, not preRun (hook "{hooks[i].name}")')
    if len(gates) > 1:
        raise FieldProblem(field, f"at most one postRun hook may set gate: true, found {len(gates)}")
    for i, h in enumerate(hooks):
        if not DNS_LABEL.match(h.name) or len(h.name) > 58:
            raise FieldProblem(f"{field}[{i}].name",
                               f"{h.name!r} must be a DNS label (lower case letters, digits, '-') of at most 58 "
                               "characters")
        if h.name in seen:
            raise FieldProblem(f"{field}[{i}].name", f"duplicate hook name {h.name!r}")
        seen.add(h.name)
        if not h.image:
            raise FieldProblem(f"{field}[{i}].image", "required")
        for j, e in enumerate(h.env):
            if (e.value is None) == (e.value_from is None):
                raise FieldProblem(f"{field}[{i}].env[{j}]", "exactly one of value or valueFrom must be set")
            if e.value_from is not None and e.value_from.secret_key_ref is None:
                raise FieldProblem(f"{field}[{i}].env[{j}].valueFrom", "only secretKeyRef is supported")
        out.append(ResolvedHook(
            name=h.name, image=h.image, image_pull_policy=h.image_pull_policy, command=list(h.command),
            args=list(h.args), env=list(h.env), gate=h.gate,
            timeout_seconds=_seconds(h.timeout, DEFAULT_HOOK_TIMEOUT, f"{field}[{i}].timeout"),
        ))
    return out


def _resources(spec: AgentRunSpec, agent: AgentProfile, policy: PolicyRules | None) -> tuple[Resources, Resources]:
    """The agent container's resources (the run's `spec.sandbox.resources`, else the Agent's, else the default) and
    the hooks' (the default), under the policy's `maxCPU`/`maxMemory`."""
    # Sympozium's sandbox.resources and agentSandbox.resources (the sandbox's container, which here is the agent's),
    # the run's before its Agent's.
    candidates = [(spec.sandbox.resources if spec.sandbox else None, "spec.sandbox.resources"),
                  (spec.agent_sandbox.resources if spec.agent_sandbox else None, "spec.agentSandbox.resources"),
                  (agent.sandbox.resources if agent.sandbox else None, "agent spec.agents.default.sandbox.resources"),
                  (agent.resources, "agent spec.agents.default.resources")]
    asked = [(parse_resources(r.wire() if r else None, field), field) for r, field in candidates]
    caps = Caps(cpu=policy.max_cpu, memory=policy.max_memory, where=policy.named()) if policy is not None else None
    return resolve_resources(asked, AGENT_DEFAULT, caps), resolve_resources([], HOOK_DEFAULT, caps)


def effective_sandboxes(spec: AgentRunSpec, agent: AgentProfile) -> tuple[SandboxSpec | None, AgentSandboxSpec | None]:
    """The run's `sandbox` and `agentSandbox`, else its Agent's `agents.default` ones."""
    agent_sandbox = spec.agent_sandbox
    if agent_sandbox is None and agent.agent_sandbox is not None:
        agent_sandbox = AgentSandboxSpec(enabled=agent.agent_sandbox.enabled,
                                         runtime_class=agent.agent_sandbox.runtime_class)
    return spec.sandbox or agent.sandbox, agent_sandbox


def _sandboxes(sandbox: SandboxSpec | None, agent_sandbox: AgentSandboxSpec | None,
               policy: PolicyRules | None) -> tuple[str, SandboxSidecar | None, str]:
    """The agent pod's runtime class, its sandbox sidecar and seccomp profile; what cannot be honoured is refused,
    never dropped: a run that asked for isolation gets it or fails naming the field. Sympozium refuses agentSandbox
    with sandbox.enabled (two backends); here both are one Job pod, so a run may have the runtime class and the
    sidecar (which its Restrictive template, requiring a sandbox and listing runtime classes, needs)."""
    runtime_class = ""
    if agent_sandbox is not None and agent_sandbox.enabled:
        runtime_class = agent_sandbox.runtime_class or (policy.default_runtime_class if policy else "")
        if not runtime_class:
            raise FieldProblem(SANDBOX_FIELD, "required when agentSandbox.enabled is true (the RuntimeClass, e.g. "
                               "gvisor or kata, the agent pod runs with; the policy's "
                               "agentSandboxPolicy.defaultRuntimeClass is not set either)")
        if not DNS_SUBDOMAIN.match(runtime_class) or len(runtime_class) > 253:
            raise FieldProblem(SANDBOX_FIELD, f"{runtime_class!r} is not a RuntimeClass name")
    sidecar = None
    if sandbox is not None and sandbox.enabled:
        runtime_class = runtime_class or sandbox.runtime_class
        caps = Caps(cpu=policy.max_cpu, memory=policy.max_memory, where=policy.named()) if policy is not None else None
        sidecar = SandboxSidecar(image=sandbox.image or (policy.sandbox_default_image if policy else "")
                                 or DEFAULT_SANDBOX_IMAGE,
                                 image_pull_policy=sandbox.image_pull_policy,
                                 resources=resolve_resources([], SANDBOX_DEFAULT, caps))
    seccomp = ""
    if sandbox is not None and sandbox.security_context and sandbox.security_context.seccomp_profile:
        seccomp = sandbox.security_context.seccomp_profile.type
    seccomp = seccomp or (policy.seccomp_profile if policy else "")
    if seccomp and seccomp not in ("RuntimeDefault", "Unconfined", "Localhost"):
        raise FieldProblem("spec.sandbox.securityContext.seccompProfile.type",
                           f"must be RuntimeDefault, Unconfined or Localhost, got {seccomp!r}")
    return runtime_class, sidecar, seccomp


def _parent(spec: AgentRunSpec) -> ParentRef | None:
    parent = spec.parent
    if parent is None:
        return None
    if not parent.run_name:
        raise FieldProblem("spec.parent.runName", "required: the name of the parent AgentRun in the same namespace")
    if parent.spawn_depth < 1:
        raise FieldProblem("spec.parent.spawnDepth", f"must be at least 1 for a sub-agent, got {parent.spawn_depth}")
    return parent


def resolve_run(
    obj: dict[str, Any],
    agent: AgentProfile,
    *,
    default_image: str,
    policy: PolicyRules | None = None,
) -> ResolvedRun:
    """Merge the run's spec with its Agent's defaults and validate; raises FieldProblem."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if len(name) > MAX_LABEL_VALUE:
        raise FieldProblem("metadata.name", f"at most {MAX_LABEL_VALUE} characters for an AgentRun ({len(name)} given): "
                                            f"the name labels the run's Jobs and pods ({LABEL_RUN}), and a label "
                                            f"value is at most {MAX_LABEL_VALUE} characters")
    check_run_backend(obj)  # a backend we do not offer refuses the run, naming the field (models/compat.py)
    spec = parse(AgentRunSpec, obj.get("spec") or {}, "spec")
    task = spec.task
    if task is None or (isinstance(task, str) and not task.strip()):
        raise FieldProblem("spec.task", "required: a non-empty string prompt")
    if not isinstance(task, str):
        raise FieldProblem("spec.task", f"must be a string prompt, got {type(task).__name__}")
    lifecycle = spec.lifecycle or agent.lifecycle
    pre = _hooks(lifecycle.pre_run if lifecycle else [], "spec.lifecycle.preRun", allow_gate=False)
    post = _hooks(lifecycle.post_run if lifecycle else [], "spec.lifecycle.postRun", allow_gate=True)
    env = dict(spec.env or agent.env)  # the run's field, else the Agent's (SPEC §1.2)
    for key in sorted(env):
        if not ENV_KEY.match(key):
            raise FieldProblem(f"spec.env.{key}", "must be a C identifier (letters, digits, '_'; not starting with a digit)")
        if key in ALWAYS_DENIED_ENV:
            raise PolicyViolation(f"spec.env.{key}", f"setting {key} is not allowed (always denied: "
                                  f"{', '.join(ALWAYS_DENIED_ENV)})")
        source = reserved_env(key)
        if source is not None:
            raise PolicyViolation(f"spec.env.{key}", f"{key} is set for the agent by agentrun ({source}); env may "
                                                     "not replace it")
        if policy is not None and key in policy.denied_env:
            raise PolicyViolation(f"spec.env.{key}",
                                  f"setting {key} is not allowed by {policy.named()}, rule deniedEnv")
    model = agent.model.model_copy(deep=True)
    if spec.model is not None:
        for name in ("provider", "model", "base_url", "thinking", "auth_secret_ref"):
            value = getattr(spec.model, name)
            if value:
                setattr(model, name, value)
        if spec.model.node_selector:
            model.node_selector = dict(spec.model.node_selector)
    image = spec.image or agent.image or default_image
    if image == default_image:
        _check_provider(model, spec.model.provider if spec.model else "", agent)
    resources, hook_resources = _resources(spec, agent, policy)
    sandbox, agent_sandbox = effective_sandboxes(spec, agent)
    runtime_class, sidecar, seccomp = _sandboxes(sandbox, agent_sandbox, policy)
    workspace_size = (lifecycle.workspace_size if lifecycle else None) or DEFAULT_WORKSPACE_SIZE
    if not QUANTITY.match(workspace_size):
        raise FieldProblem("spec.lifecycle.workspaceSize", f"{workspace_size!r} is not a storage quantity like 1Gi")
    resolved = ResolvedRun(
        ref=RunRef(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                   uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 1)),
        agent=spec.agent_ref,
        task=task,
        agent_id=spec.agent_id or "primary",
        session_key=spec.session_key or f"session-{meta.get('uid', '')[:8]}",
        system_prompt=spec.system_prompt or agent.system_prompt,
        model=model,
        env=dict(sorted(env.items())),
        timeout_seconds=_seconds(spec.timeout or agent.run_timeout, DEFAULT_RUN_TIMEOUT,
                                 "spec.timeout" if spec.timeout else "agent runTimeout"),
        pre_run=pre,
        post_run=post,
        rbac=list(lifecycle.rbac) if lifecycle else [],
        gate_default=lifecycle.gate_default if lifecycle else "block",
        gate_timeout_seconds=_seconds(lifecycle.gate_timeout if lifecycle else None, DEFAULT_GATE_TIMEOUT,
                                      "spec.lifecycle.gateTimeout"),
        workspace_size=workspace_size,
        tool_policy=spec.tool_policy or ToolPolicy(),
        skills=spec.skills or agent.skills,
        sandbox=sandbox,
        agent_sandbox=agent_sandbox,
        parent=_parent(spec),
        cleanup=spec.cleanup,
        image=image,
        labels=dict(meta.get("labels") or {}),
        retry=_retry(lifecycle.retry if lifecycle else None, post),
        resources=resources,
        hook_resources=hook_resources,
        runtime_class_name=runtime_class,
        sandbox_sidecar=sidecar,
        seccomp_profile=seccomp,
        image_pull_secrets=[r.name for r in spec.image_pull_secrets if r.name] or list(agent.image_pull_secrets),
        mcp_servers=_mcp_servers(agent),
        observability=_observability(agent),
        tools_resources=resolve_resources([], TOOLS_DEFAULT, Caps(cpu=policy.max_cpu, memory=policy.max_memory,
                                                                  where=policy.named()) if policy else None),
        tool_rules=policy.agent_tool_policy() if policy is not None else "",
        tool_approval=_tool_approval(policy),
    )
    _check_bounds(spec, agent, resolved)
    if policy is not None:
        check_policy(resolved, policy)
    return resolved


def _tool_approval(policy: PolicyRules | None) -> ResolvedToolApproval | None:
    if policy is None or not policy.asks:
        return None
    return ResolvedToolApproval(
        timeout_seconds=_seconds(policy.tool_approval.timeout, DEFAULT_TOOL_APPROVAL_TIMEOUT,
                                 f"{policy.named()} toolApproval.timeout"),
        on_timeout=policy.tool_approval.on_timeout)


def _check_bounds(spec: AgentRunSpec, agent: AgentProfile, run: ResolvedRun) -> None:
    """Each free-text field the run carries into its workflow within its bound (models/bounds.py), named as the run
    or its Agent wrote it; the whole run is bounded once its skills are resolved (`bounds.check_resolved_size`)."""
    bounds.check_text("spec.task", run.task, bounds.TASK_MAX_BYTES,
                      what="a long task reaches the agent as a file, but the run itself must fit its workflow")
    own_prompt = bool(spec.system_prompt)
    bounds.check_text("spec.systemPrompt" if own_prompt else "agent spec.systemPrompt", run.system_prompt,
                      bounds.SYSTEM_PROMPT_MAX_BYTES)
    bounds.check_env_map("spec.env" if spec.env else "agent spec.agents.default.env", run.env)
    for name in ("agent_id", "session_key", "image"):
        bounds.check_text(f"spec.{to_camel(name)}", getattr(run, name), bounds.SHORT_TEXT_MAX_BYTES)
    for name in ("provider", "model", "base_url", "thinking", "auth_secret_ref"):
        field = "baseURL" if name == "base_url" else to_camel(name)
        bounds.check_text(f"spec.model.{field}", getattr(run.model, name), bounds.SHORT_TEXT_MAX_BYTES)
    for kind in ("allow", "deny"):
        for i, tool in enumerate(getattr(run.tool_policy, kind)):
            bounds.check_text(f"spec.toolPolicy.{kind}[{i}]", tool, bounds.SHORT_TEXT_MAX_BYTES)
    for i, skill in enumerate(run.skills):
        for key, value in sorted(skill.params.items()):
            bounds.check_text(f"spec.skills[{i}].params.{key}", value, bounds.ENV_VALUE_MAX_BYTES)
    bounds.check_hooks("spec.lifecycle.preRun", run.pre_run)
    bounds.check_hooks("spec.lifecycle.postRun", run.post_run)


def check_agent_bounds(agent: AgentProfile) -> None:
    """An Agent's defaults its runs inherit, each within its bound (models/bounds.py), named as the Agent has them
    (current shape)."""
    bounds.check_text("spec.systemPrompt", agent.system_prompt, bounds.SYSTEM_PROMPT_MAX_BYTES)
    bounds.check_env_map("spec.agents.default.env", agent.env)
    if agent.lifecycle is not None:
        bounds.check_hooks("spec.agents.default.lifecycle.preRun", agent.lifecycle.pre_run)
        bounds.check_hooks("spec.agents.default.lifecycle.postRun", agent.lifecycle.post_run)


def _mcp_servers(agent: AgentProfile) -> list[MCPServerRef]:
    """The Agent's MCP servers, checked: each tool name is `<toolsPrefix>_<tool>` and each server's token reaches the
    agent as MCP_AUTH_<NAME>, so neither may be shared by two servers."""
    prefixes: set[str] = set()
    auth: set[str] = set()
    for i, m in enumerate(agent.mcp_servers):
        at = f'Agent "{agent.name}" spec.mcpServers[{i}]'
        if not m.url.startswith(("http://", "https://")):
            raise FieldProblem(f"{at}.url", f"{m.url!r} must be an http:// or https:// URL (streamable HTTP)")
        if m.tools_prefix in prefixes:
            raise FieldProblem(f"{at}.toolsPrefix", f"{m.tools_prefix!r} is another server's too: prefixes must be "
                                                    "unique (tools are named <toolsPrefix>_<tool>)")
        env = mcp_auth_env(m.name)
        if env in auth:
            raise FieldProblem(f"{at}.name", f"{m.name!r} names the same token variable ({env}) as another server")
        prefixes.add(m.tools_prefix)
        auth.add(env)
    return list(agent.mcp_servers)


def _observability(agent: AgentProfile) -> ObservabilitySpec | None:
    """The Agent's enabled `observability`, checked: an endpoint the exporter can use, a ratio between 0 and 1, names
    and values within their bounds (they become the agent's env)."""
    obs = agent.observability
    if obs is None or not obs.enabled:
        return None
    at = f'Agent "{agent.name}" spec.observability'
    endpoint = obs.otlp_endpoint.strip()
    if endpoint and (obs.otlp_protocol != "grpc" and not endpoint.startswith(("http://", "https://"))):
        raise FieldProblem(f"{at}.otlpEndpoint", f"{endpoint!r} must be an http:// or https:// URL for "
                                                 "http/protobuf (host:port only with otlpProtocol: grpc)")
    if obs.sampling_ratio.strip():
        try:
            ratio = float(obs.sampling_ratio)
        except ValueError:
            raise FieldProblem(f"{at}.samplingRatio", f"{obs.sampling_ratio!r} is not a number") from None
        if not 0 <= ratio <= 1:
            raise FieldProblem(f"{at}.samplingRatio", f"{obs.sampling_ratio!r} must be between 0 and 1")
    for name in ("otlp_endpoint", "service_name", "headers_secret_ref"):
        bounds.check_text(f"{at}.{to_camel(name)}", getattr(obs, name), bounds.SHORT_TEXT_MAX_BYTES)
    for field in ("headers", "resource_attributes"):
        for key, value in sorted(getattr(obs, field).items()):
            bounds.check_text(f"{at}.{to_camel(field)}.{key}", value, bounds.ENV_VALUE_MAX_BYTES)
    return obs.model_copy(update={"otlp_endpoint": endpoint})


def mcp_auth_env(server: str) -> str:
    """Where an MCP server's token reaches the agent (agentrunner/tools/mcp.py reads the name from the server's
    entry): MCP_AUTH_<NAME>, upper case, other characters as `_` (Sympozium's variable)."""
    return "MCP_AUTH_" + re.sub(r"[^A-Z0-9]", "_", server.upper())


def _check_provider(model: ModelSpec, run_provider: str, agent: AgentProfile) -> None:
    """A provider the reference agent cannot serve fails the run at start, naming the field it came from, instead
    of in the agent pod. (Another agent image may support more, so only runs of the default image are checked.)"""
    problem = provider_problem(model.provider, model.base_url)
    if problem is None:
        return
    if run_provider:
        field = "spec.model.provider"
    elif agent.auth_refs and agent.auth_refs[0].provider:
        field = "agent spec.authRefs[0].provider"
    else:
        field = "agent spec.provider.name"
    meant = _meant_provider(model.provider, model.base_url)
    if meant is not None:
        # A typo of a known name, in a run that would fail at start anyway: refused at admission (as a policy rule
        # is), so `kubectl apply` says it at once.
        raise PolicyViolation(field, f'unknown provider "{model.provider}": did you mean "{meant}"? ({problem})')
    raise FieldProblem(field, problem)


# Providers known by name (the ones with a default endpoint or a key variable of their own): what a misspelt name
# is compared with.
KNOWN_PROVIDERS = sorted({*DEFAULT_BASE_URLS, *PROVIDER_KEY_ENV, AZURE, ECHO})
MISSPELT = 0.8  # difflib's similarity above which an unknown name is taken for a typo ("opneai": 0.83 to "openai")


def _meant_provider(provider: str, base_url: str) -> str | None:
    """The known provider an unknown name (given no baseURL) is a typo of, if it is close to one."""
    name = provider.strip().lower()
    if base_url.strip() or name in KNOWN_PROVIDERS:
        return None
    close = difflib.get_close_matches(name, KNOWN_PROVIDERS, n=1, cutoff=MISSPELT)
    return close[0] if close else None


def check_policy(run: ResolvedRun, policy: PolicyRules) -> None:
    """The SympoziumPolicy rules that refuse a run outright (SPEC §1.5); each message names the rule. A tool the run
    allows is decided by the agent's own evaluation (agentrunner/policy.py, on the rules it is handed), so a run is
    refused here exactly for the tools its agent would refuse."""
    where = policy.named()
    tools = policy.agent_tools()
    for i, tool in enumerate(run.tool_policy.allow):
        field = f"spec.toolPolicy.allow[{i}]"
        if tools.decide(tool).action != "deny":
            continue
        if tool in policy.denied_tools:
            raise PolicyViolation(field, f'tool "{tool}" is denied by {where}, rule toolGating ({tool}: deny)')
        allowed = ", ".join(sorted({*policy.allowed_tools, *policy.approval_tools})) or "none"
        raise PolicyViolation(field, f'tool "{tool}" is not allowed by {where}, rule toolGating defaultAction: '
                              f"deny (allowed: {allowed})")
    if policy.sandbox_required and not (run.sandbox and run.sandbox.enabled):
        raise PolicyViolation("spec.sandbox.enabled", f"a sandbox is required by {where}, rule sandboxPolicy.required")
    if policy.agent_sandbox_required and not (run.agent_sandbox and run.agent_sandbox.enabled):
        raise PolicyViolation("spec.agentSandbox.enabled",
                              f"an agent sandbox is required by {where}, rule sandboxPolicy.agentSandboxPolicy.required")
    if run.runtime_class_name and policy.allowed_runtime_classes \
            and run.runtime_class_name not in policy.allowed_runtime_classes:
        raise PolicyViolation(SANDBOX_FIELD,
                              f'runtime class "{run.runtime_class_name}" is not allowed by {where}, rule '
                              f"sandboxPolicy.agentSandboxPolicy.allowedRuntimeClasses "
                              f"({', '.join(policy.allowed_runtime_classes)})")
    if policy.feature_gates.get("sub-agents") is False and run.parent:
        raise PolicyViolation("spec.parent", f"sub-agents are disabled by {where}, rule featureGates.sub-agents")
    if policy.max_depth and run.parent and run.parent.spawn_depth > policy.max_depth:
        raise PolicyViolation("spec.parent.spawnDepth",
                              f"sub-agent depth {run.parent.spawn_depth} exceeds the maximum {policy.max_depth} of "
                              f"{where}, rule subagentPolicy.maxDepth")
    if policy.allowed_registries:
        registries = f"rule imagePolicy.allowedRegistries ({', '.join(policy.allowed_registries)})"
        for kind, hooks in (("preRun", run.pre_run), ("postRun", run.post_run)):
            for i, h in enumerate(hooks):
                if not policy.image_allowed(h.image):
                    raise PolicyViolation(f"spec.lifecycle.{kind}[{i}].image",
                                          f'image "{h.image}" is not from a registry allowed by {where}, {registries}')
        if run.sandbox and run.sandbox.enabled and run.sandbox.image and not policy.image_allowed(run.sandbox.image):
            raise PolicyViolation("spec.sandbox.image",
                                  f'image "{run.sandbox.image}" is not from a registry allowed by {where}, {registries}')
    for i, rule in enumerate(run.rbac):
        for r in rule.resources:
            if policy.resource_denied(r):
                raise PolicyViolation(f"spec.lifecycle.rbac[{i}].resources",
                                      f'lifecycle RBAC access to "{r}" is denied by {where}, rule '
                                      "lifecyclePolicy.deniedResources")


def approval_tools(run: ResolvedRun, policy: PolicyRules) -> list[str]:
    """The tools the run allows that the policy lets through only with approval (toolGating `ask`), as the agent
    decides them."""
    tools = policy.agent_tools()
    return [tool for tool in run.tool_policy.allow if tools.decide(tool).action == "ask"]


def check_subagent_limits(run: ResolvedRun, *, parent_agent: str, limits: Subagents, siblings: list[dict[str, Any]],
                          policy: PolicyRules | None) -> None:
    """A sub-agent's place under its parent run (SPEC §1.2, Sympozium's SpawnRouter): its depth within the parent
    Agent's `subagents.maxDepth`, its rank among the parent's children within `maxChildrenPerAgent`, and the parent's
    unfinished children within `maxConcurrent`. `siblings` are the parent's other children created before this run
    (oldest first), so the same children are refused however often the check is repeated."""
    parent = run.parent
    if parent is None:
        return
    agent_field = f'Agent "{parent_agent}" spec.agents.default.subagents'
    if limits.max_depth > 0 and parent.spawn_depth > limits.max_depth:
        raise PolicyViolation("spec.parent.spawnDepth",
                              f"sub-agent depth {parent.spawn_depth} exceeds the maximum {limits.max_depth} of "
                              f"{agent_field}.maxDepth")
    if limits.max_children_per_agent > 0 and len(siblings) >= limits.max_children_per_agent:
        raise PolicyViolation("spec.parent.runName",
                              f'parent run "{parent.run_name}" already has {len(siblings)} sub-agents: the maximum is '
                              f"{limits.max_children_per_agent} ({agent_field}.maxChildrenPerAgent)")
    running = [s for s in siblings if ((s.get("status") or {}).get("phase") or "") not in TERMINAL_PHASES]
    if limits.max_concurrent > 0 and len(running) >= limits.max_concurrent:
        raise PolicyViolation("spec.parent.runName",
                              f'parent run "{parent.run_name}" already has {len(running)} unfinished sub-agents: the '
                              f"maximum is {limits.max_concurrent} ({agent_field}.maxConcurrent)")
