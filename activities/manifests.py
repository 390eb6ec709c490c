"""The Kubernetes objects of one run, built as plain manifests from the resolved spec.

Pure functions, so the exact pod shape, env order, labels and names of SPEC §3 are tested
without a cluster. Every object has a deterministic name, an ownerReference to the run and
the run's labels, so a retried create finds (and adopts) what an earlier attempt made.
"""

from __future__ import annotations

import base64
import json
from copy import deepcopy
from typing import Any
from urllib.parse import quote

from activities import exec_manifests as xm
from activities import skill_manifests as skm
from agentrunner.approvals import TOOL_APPROVAL
from agentrunner.executor import TARGET_SANDBOX
from models import names
from models.bounds import ENV_TEXT_MAX_BYTES, utf8_len
from models.names import (
    AGENT_SERVICE_ACCOUNT,
    ANNOTATION_WORKFLOW,
    API_VERSION,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_RUN,
    LABEL_RUN_UID,
    MANAGED_BY,
    Component,
)
from models.resolve import ResolvedHook, ResolvedRun, mcp_auth_env
from models.resources import HELPER_DEFAULT
from models.skills import sidecar_account

Manifest = dict[str, Any]

RESULT_LIMIT = 32768  # bytes of AGENT_RESULT handed to postRun hooks
JOB_TTL_SECONDS = 300
SETUP_IMAGE = "busybox:1.36"
SKIP_MARKER = "__AGENTRUN_SKIP__"
RUN_MARKER = "__AGENTRUN_RUN__"  # the preRun Job's termination message when no hook asked to skip
# Keys an auth Secret may carry; each is mapped optionally, as Sympozium does.
AUTH_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OLLAMA_HOST",
             "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY",
             "API_KEY")
# A Secret that holds the key under `apiKey` (as this project's docs and many charts write it) gives the agent its
# key too: `apiKey` is not an env name, so it becomes PROVIDER_API_KEY, the variable Sympozium's agent-runner
# reads last (and agentrunner/config.py too).
API_KEY_SECRET_KEY = "apiKey"
API_KEY_ENV = "PROVIDER_API_KEY"
# The key of an MCP server's authSecret holding its bearer token when the Agent names none (Sympozium's default).
MCP_AUTH_KEY = "token"
# The agent's journal (SPEC §9): the workspace PVC's `state` directory, mounted here in the agent container only.
STATE_PATH = "/agentrun/state"
STATE_SUBPATH = "state"


def lifecycle_name(run: ResolvedRun) -> str:
    return names.lifecycle_name(run.ref.name)


def workspace_name(run: ResolvedRun) -> str:
    return names.workspace_name(run.ref.name)


def job_name(run: ResolvedRun, component: Component, attempt: int = 1) -> str:
    return names.job_name(run.ref.name, component, attempt)


def owner(run: ResolvedRun) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": "AgentRun", "name": run.ref.name, "uid": run.ref.uid,
            "controller": True, "blockOwnerDeletion": True}


def labels(run: ResolvedRun, component: str) -> dict[str, str]:
    """A run object's labels; `component` is a Job's Component (post-gate is labelled post-run) or
    `lifecycle` / `workspace`."""
    return {LABEL_RUN: run.ref.name, LABEL_INSTANCE: run.agent, LABEL_COMPONENT: names.component_label(component),
            LABEL_MANAGED: MANAGED_BY}


def _meta(run: ResolvedRun, name: str, component: str, workflow_id: str = "") -> Manifest:
    m: Manifest = {"name": name, "namespace": run.ref.namespace,
                   "labels": {**labels(run, component), LABEL_RUN_UID: run.ref.uid}, "ownerReferences": [owner(run)]}
    if workflow_id:
        m["annotations"] = {ANNOTATION_WORKFLOW: workflow_id}
    return m


# -- RBAC ---------------------------------------------------------------------------------------

def agent_service_account(namespace: str) -> Manifest:
    """The agent pod's identity: it holds no permissions (nothing binds to it)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": AGENT_SERVICE_ACCOUNT, "namespace": namespace,
                         "labels": {LABEL_MANAGED: MANAGED_BY}},
            "automountServiceAccountToken": False}


def lifecycle_rbac(run: ResolvedRun) -> list[Manifest]:
    """ServiceAccount, Role and RoleBinding for the hooks only (never the agent), SPEC §3.2."""
    name = lifecycle_name(run)
    rules = []
    for r in run.rbac:
        rule: Manifest = {"apiGroups": list(r.api_groups), "resources": list(r.resources), "verbs": list(r.verbs)}
        if r.resource_names:
            rule["resourceNames"] = list(r.resource_names)
        rules.append(rule)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(run, name, "lifecycle")},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(run, name, "lifecycle"),
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(run, name, "lifecycle"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": run.ref.namespace}]},
    ]


def skill_rbac(run: ResolvedRun) -> list[list[Manifest]]:
    """Per pack with a sidecar: its ServiceAccount, token Secret, Role and RoleBinding (activities/skill_manifests.py)."""
    return [skm.sidecar_rbac(run, p, _meta(run, sidecar_account(run.ref.name, p.name), "skill"))
            for p in run.sidecars]


# -- workspace ------------------------------------------------------------------------------------

def workspace_pvc(run: ResolvedRun) -> Manifest:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(run, workspace_name(run), "workspace"),
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": run.workspace_size}}}}


def _volumes(run: ResolvedRun) -> list[Manifest]:
    if run.has_workspace:
        return [{"name": "workspace", "persistentVolumeClaim": {"claimName": workspace_name(run)}},
                {"name": "tmp", "emptyDir": {}}]
    return [{"name": "workspace", "emptyDir": {}}, {"name": "ipc", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]


def _mounts(run: ResolvedRun) -> list[Manifest]:
    if run.has_workspace:
        return [{"name": "workspace", "mountPath": "/workspace", "subPath": "workspace"},
                {"name": "workspace", "mountPath": "/ipc", "subPath": "ipc"},
                {"name": "tmp", "mountPath": "/tmp"}]
    return [{"name": "workspace", "mountPath": "/workspace"}, {"name": "ipc", "mountPath": "/ipc"},
            {"name": "tmp", "mountPath": "/tmp"}]


SECURE_CONTAINER: Manifest = {
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}

SECURE_POD: Manifest = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _env(pairs: list[tuple[str, str]]) -> list[Manifest]:
    return [{"name": k, "value": v} for k, v in pairs]


def _common_hook_env(run: ResolvedRun) -> list[Manifest]:
    return _env([("AGENT_RUN_ID", run.ref.name), ("INSTANCE_NAME", run.agent), ("AGENT_NAMESPACE", run.ref.namespace)])


def _hook_own_env(hook: ResolvedHook) -> list[Manifest]:
    return [e.manifest() for e in hook.env]


def _spec_env(run: ResolvedRun) -> list[Manifest]:
    return _env(sorted(run.env.items()))


def _hook_container(hook: ResolvedHook, component: Component, env: list[Manifest], run: ResolvedRun) -> Manifest:
    c: Manifest = {"name": names.hook_container(component, hook.name), "image": hook.image, "env": env,
                   "volumeMounts": _mounts(run), "securityContext": dict(SECURE_CONTAINER),
                   "resources": run.hook_resources.wire()}
    if hook.command:
        c["command"] = list(hook.command)
    if hook.args:
        c["args"] = list(hook.args)
    if hook.image_pull_policy:
        c["imagePullPolicy"] = hook.image_pull_policy
    return c


def _job(run: ResolvedRun, component: Component, *, workflow_id: str, pod_spec: Manifest,
         deadline_seconds: int, attempt: int = 1, restart: int = 0, resumed: int = 0) -> Manifest:
    name = names.job_name(run.ref.name, component, attempt, restart, resumed)
    if run.image_pull_secrets:  # every pod of the run: hooks' images may be as private as the agent's
        pod_spec = {**pod_spec, "imagePullSecrets": [{"name": n} for n in run.image_pull_secrets]}
    spec: Manifest = {
        "backoffLimit": 0,
        # A pod deleted or evicted is not replaced while it terminates (the default would start a second agent
        # beside the dying one, on the same journal, until the Job fails); the workflow decides what follows.
        "podReplacementPolicy": "Failed",
        "activeDeadlineSeconds": max(1, deadline_seconds),
        "template": {"metadata": {"labels": labels(run, component)},
                     "spec": {"restartPolicy": "Never", "securityContext": deepcopy(SECURE_POD), **pod_spec}},
    }
    if run.cleanup != "keep":
        spec["ttlSecondsAfterFinished"] = JOB_TTL_SECONDS
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(run, name, component, workflow_id),
            "spec": spec}


def _setup_container(run: ResolvedRun) -> Manifest:
    """Creates /ipc/control, /ipc/output and /workspace/context before any hook, as Sympozium has them: a hook
    writes the skip file or context files (the docs' PagerDuty and Ensemble examples) without mkdir first."""
    return {"name": "setup", "image": SETUP_IMAGE,
            "command": ["sh", "-c", "mkdir -p /ipc/control /ipc/output /workspace/context"],
            "volumeMounts": _mounts(run), "securityContext": dict(SECURE_CONTAINER), "resources": HELPER_DEFAULT.wire()}


def hook_deadline(hooks: list[ResolvedHook]) -> int:
    """The Job-level bound: every hook's own timeout, plus slack for setup and the final container."""
    return sum(h.timeout_seconds for h in hooks) + 60


def prerun_job(run: ResolvedRun, *, workflow_id: str) -> Manifest:
    inits = [_setup_container(run)]
    for h in run.pre_run:
        inits.append(_hook_container(h, "prerun", [*_common_hook_env(run), *_hook_own_env(h), *_spec_env(run)], run))
    done = {"name": "done", "image": SETUP_IMAGE,
            # The answer goes into the container's termination message too, so the worker reads it from the
            # pod's status (no log read); the log keeps it for people and for workers that read the log.
            "command": ["sh", "-c", f'if [ -f /ipc/control/skip ]; then printf "{SKIP_MARKER}"; '
                                    f'cat /ipc/control/skip; {{ printf "{SKIP_MARKER}"; head -c 4000 /ipc/control/skip; }}'
                                    f' > /dev/termination-log; else printf "{RUN_MARKER}" > /dev/termination-log; fi'],
            "volumeMounts": _mounts(run), "securityContext": dict(SECURE_CONTAINER), "resources": HELPER_DEFAULT.wire()}
    pod = {"serviceAccountName": lifecycle_name(run) if run.rbac else AGENT_SERVICE_ACCOUNT,
           "automountServiceAccountToken": bool(run.rbac),
           "initContainers": inits, "containers": [done], "volumes": _volumes(run)}
    return _job(run, "prerun", workflow_id=workflow_id, pod_spec=pod, deadline_seconds=hook_deadline(run.pre_run))


# The run's input Secret (long task and system prompt) in the agent container, and the files the agent reads.
INPUT_VOLUME = "input"
INPUT_PATH = "/agent-input"
INPUT_KEYS = {"TASK": "task", "SYSTEM_PROMPT": "system-prompt"}  # Sympozium's keys of its `<run>-input`


def _long_inputs(run: ResolvedRun) -> dict[str, str]:
    """The task and system prompt too long for an env var (models/bounds.py), by env name: they go as files."""
    texts = {"TASK": run.task, "SYSTEM_PROMPT": run.system_prompt}
    return {k: v for k, v in texts.items() if utf8_len(v) > ENV_TEXT_MAX_BYTES}


def input_secret(run: ResolvedRun) -> Manifest | None:
    """The Secret holding the long task or system prompt for the agent's files; None when both fit env vars."""
    long = _long_inputs(run)
    if not long:
        return None
    data = {INPUT_KEYS[k]: base64.b64encode(v.encode("utf-8")).decode() for k, v in long.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(run, names.input_name(run.ref.name), "input"), "data": data}


def _text_env(run: ResolvedRun, name: str, text: str) -> list[Manifest]:
    """`TASK` (or `SYSTEM_PROMPT`) itself, or `TASK_FILE` naming the file when it is too long for one."""
    if name in _long_inputs(run):
        return [{"name": f"{name}_FILE", "value": f"{INPUT_PATH}/{INPUT_KEYS[name]}"}]
    return [{"name": name, "value": text}]


def agent_env(run: ResolvedRun, pod: list[Manifest] | None = None) -> list[Manifest]:
    """The agent container's env: SPEC §3.5's variables, its key (by reference), then what the pod tells it (`pod`:
    its command targets, tools, policy, journal), then spec.env sorted by key, which may name none of the others
    (models/policy.py RESERVED_AGENT_ENV)."""
    m = run.model
    env = _env([
        ("AGENT_RUN_ID", run.ref.name),
        ("INSTANCE_NAME", run.agent),
        ("AGENT_NAMESPACE", run.ref.namespace),
        ("AGENT_ID", run.agent_id),
        ("SESSION_KEY", run.session_key),
    ])
    env += _text_env(run, "TASK", run.task) + _text_env(run, "SYSTEM_PROMPT", run.system_prompt)
    env += _env([
        ("MODEL_PROVIDER", m.provider),
        ("MODEL_NAME", m.model),
        ("MODEL_BASE_URL", m.base_url),
        ("THINKING_MODE", m.thinking),
        ("TOOL_POLICY_ALLOW", ",".join(run.tool_policy.allow)),
        ("TOOL_POLICY_DENY", ",".join(run.tool_policy.deny)),
        ("RUN_TIMEOUT", f"{run.timeout_seconds}s"),
    ])
    if m.auth_secret_ref:
        env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": m.auth_secret_ref, "key": k, "optional": True}}}
                for k in AUTH_KEYS]
        env.append({"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": m.auth_secret_ref,
                                                                         "key": API_KEY_SECRET_KEY, "optional": True}}})
    return env + (pod or []) + _spec_env(run)


def _tools_env(run: ResolvedRun) -> list[Manifest]:
    """The policy's tool rules and the Agent's MCP servers, as the agent reads them (agentrunner/policy.py,
    agentrunner/tools/mcp.py). An MCP server's token comes from its authSecret by reference, never as a value."""
    env: list[Manifest] = []
    if run.tool_rules:
        env.append({"name": "AGENT_TOOL_POLICY", "value": run.tool_rules})
    if run.mcp_servers:
        servers = []
        for srv in run.mcp_servers:
            entry: dict[str, Any] = {"name": srv.name, "url": srv.url, "toolsPrefix": srv.tools_prefix,
                                     "authEnv": mcp_auth_env(srv.name)}
            if srv.timeout:
                entry["timeout"] = srv.timeout
            for key, value in (("headers", srv.headers), ("toolsAllow", srv.tools_allow),
                               ("toolsDeny", srv.tools_deny)):
                if value:
                    entry[key] = value
            servers.append(entry)
        env.append({"name": "AGENT_MCP_SERVERS", "value": json.dumps(servers, separators=(",", ":"))})
        env += [{"name": mcp_auth_env(srv.name), "valueFrom": {"secretKeyRef": {
            "name": srv.auth_secret, "key": srv.auth_key or MCP_AUTH_KEY, "optional": True}}}
            for srv in run.mcp_servers if srv.auth_secret]
    return env


def state_dir(attempt: int) -> str:
    """The agent's journal directory (AGENT_STATE_DIR) of one attempt: each attempt of a retried run has its own
    task, so its own journal; a restart of that attempt continues the same one."""
    return f"{STATE_PATH}/attempt-{attempt}"


def agent_job(run: ResolvedRun, *, workflow_id: str, attempt: int = 1, task: str | None = None, restart: int = 0,
              deadline_seconds: int | None = None, resumed: int = 0, resume: str | None = None) -> Manifest:
    """The agent's Job; a retried attempt has its own name and the task that carries the reviewer's feedback (cut
    to fit an env var, models/gate.py); a long task or system prompt is read from the run's input Secret. A
    restart (the agent's pod was lost) has its own name too, the same environment and journal, and what is left
    of the run's time (`deadline_seconds`); so does the agent started again after a wait (`resumed`, SPEC §10),
    with the decisions it continues with (`resume`, AGENT_RESUME): in the Job's spec, where neither the tools
    container nor a hook can change them.

    Its pod: the agent container (the key, never a command), the container where its commands run (the sandbox, or
    a tools container), each SkillPack's sidecar (its own token and RBAC), all wrapped by the executor and joined
    by its volume (activities/exec_manifests.py)."""
    pod_env = xm.agent_exec_env(run) + skm.agent_skill_env(run) + _tools_env(run) + observability_env(run)
    mounts = _mounts(run) + skm.agent_skill_mounts(run) + [xm.agent_exec_mount()]
    if run.journal:
        # The journal is on the workspace PVC beside /workspace, mounted by the agent container alone: commands
        # (the tools container, sidecars) and hooks write /workspace, never the record of what already happened.
        pod_env.append({"name": "AGENT_STATE_DIR", "value": state_dir(attempt)})
        mounts.append({"name": "workspace", "mountPath": STATE_PATH, "subPath": STATE_SUBPATH})
        if run.tool_approval is not None:
            # The agent may park a call that needs approval: the workflow starts it again with the decisions.
            pod_env.append({"name": "AGENT_WAITS", "value": TOOL_APPROVAL})
            if resume is not None:
                pod_env.append({"name": "AGENT_RESUME", "value": resume})
    env = agent_env(run, pod_env)
    if task is not None:
        env = [{"name": "TASK", "value": task} if e["name"] in ("TASK", "TASK_FILE") else e for e in env]
    volumes = _volumes(run) + xm.exec_volumes() + skm.skills_volumes(run)
    if _long_inputs(run):
        mounts.append({"name": INPUT_VOLUME, "mountPath": INPUT_PATH, "readOnly": True})
        volumes.append({"name": INPUT_VOLUME, "secret": {"secretName": names.input_name(run.ref.name)}})
    agent = {"name": "agent", "image": run.image, "env": env, "volumeMounts": mounts,
             "securityContext": dict(SECURE_CONTAINER), "resources": run.resources.wire()}
    workspace = next(m for m in _mounts(run) if m["mountPath"] == "/workspace")
    if run.sandbox_sidecar is not None:
        runner = sandbox_container(run, workspace)
    else:
        runner = xm.tools_container(run, workspace=workspace, skills=skm.agent_skill_mounts(run),
                                    resources=run.tools_resources.wire(), security=SECURE_CONTAINER)
    pod: Manifest = {"serviceAccountName": AGENT_SERVICE_ACCOUNT, "automountServiceAccountToken": False,
                     "initContainers": [runner, *skm.sidecar_containers(run, _mounts(run))],
                     "containers": [agent], "volumes": volumes}
    if run.model.node_selector:
        pod["nodeSelector"] = dict(run.model.node_selector)
    if run.runtime_class_name:
        pod["runtimeClassName"] = run.runtime_class_name
    job = _job(run, "agent-run", workflow_id=workflow_id, pod_spec=pod,
               deadline_seconds=run.timeout_seconds if deadline_seconds is None else deadline_seconds,
               attempt=attempt, restart=restart, resumed=resumed)
    pod_spec = job["spec"]["template"]["spec"]
    if run.seccomp_profile:
        pod_spec["securityContext"]["seccompProfile"] = {"type": run.seccomp_profile}
    if run.parent is not None:
        job["spec"]["template"]["metadata"]["labels"][names.LABEL_PARENT_RUN] = run.parent.run_name
    return job


def sandbox_container(run: ResolvedRun, workspace: Manifest) -> Manifest:
    """Sympozium's `sandbox` sidecar (`sleep infinity`, read-only root, ALL dropped, /workspace and /tmp), as a native
    sidecar (an init container with restartPolicy Always): Sympozium's controller reads the agent container's end
    itself, ours waits for the Job, which a plain `sleep infinity` container would never let complete. Its command
    runs under the executor, so the run's commands run here; its /tmp is its own, not the agent's."""
    sidecar = run.sandbox_sidecar
    assert sidecar is not None
    c: Manifest = {"name": "sandbox", "image": sidecar.image, "restartPolicy": "Always",
                   "command": xm.wrapped(TARGET_SANDBOX, ["sleep", "infinity"]),
                   "volumeMounts": [workspace, xm.exec_tmp_mount(), xm.target_mount(TARGET_SANDBOX)],
                   "securityContext": dict(SECURE_CONTAINER), "resources": sidecar.resources.wire()}
    if sidecar.image_pull_policy:
        c["imagePullPolicy"] = sidecar.image_pull_policy
    return c


def cut_utf8(text: str, limit: int = RESULT_LIMIT) -> str:
    """At most `limit` bytes of UTF-8, never splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def postrun_job(run: ResolvedRun, *, workflow_id: str, agent_exit_code: int, agent_result: str,
                component: Component = "post-run", gate_only: bool = False, attempt: int = 1,
                gate_verdict: str | None = None) -> Manifest:
    """postRun hooks as init containers. Without a gate: all of them, in `<run>-postrun`. With a gate, the
    `post-run` Job runs the gate hook alone (`gate_only`, per attempt), and the `post-gate` Job the others
    once the gate is resolved, with the final result as AGENT_RESULT and the verdict label as GATE_VERDICT.
    (Runs started before that split ask for all hooks, the gate hook first, in one Job.)"""
    hooks = run.hooks_of(component, gate_only=gate_only)
    inits = [_setup_container(run)]
    for h in hooks:
        pairs = [("AGENT_EXIT_CODE", str(agent_exit_code)), ("AGENT_RESULT", cut_utf8(agent_result))]
        if gate_verdict is not None:
            pairs.append(("GATE_VERDICT", gate_verdict))
        env = [*_common_hook_env(run), *_env(pairs), *_spec_env(run), *_hook_own_env(h)]
        if h.gate:
            env.append({"name": "GATE_MODE", "value": "true"})
        inits.append(_hook_container(h, component, env, run))
    done = {"name": "done", "image": SETUP_IMAGE, "command": ["true"], "volumeMounts": _mounts(run),
            "securityContext": dict(SECURE_CONTAINER), "resources": HELPER_DEFAULT.wire()}
    pod = {"serviceAccountName": lifecycle_name(run) if run.rbac else AGENT_SERVICE_ACCOUNT,
           "automountServiceAccountToken": bool(run.rbac),
           "initContainers": inits, "containers": [done], "volumes": _volumes(run)}
    return _job(run, component, workflow_id=workflow_id, pod_spec=pod, deadline_seconds=hook_deadline(hooks),
                attempt=attempt)


# -- traces (SPEC §12) ----------------------------------------------------------------------------

TRACEPARENT = "TRACEPARENT"
# The Secret named by an Agent's observability.headersSecretRef holds the OTLP export headers under this key, in
# OTEL_EXPORTER_OTLP_HEADERS' own format (`name=value,name2=value2`); it reaches the agent only by reference.
OTLP_HEADERS_SECRET_KEY = "headers"
OTLP_SECRET_HEADERS_ENV = "AGENT_OTLP_SECRET_HEADERS"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def observability_env(run: ResolvedRun) -> list[Manifest]:
    """The agent's exporter, from its Agent's `observability` (models/agent.py): the standard OTEL_* variables the
    runner reads (agentrunner/tracing.py), the headers Secret by `secretKeyRef` (never its value). Nothing without an
    enabled observability and an endpoint: the agent then exports nothing (and imports nothing for it)."""
    obs = run.observability
    if obs is None or not obs.enabled or not obs.otlp_endpoint:
        return []
    env: list[Manifest] = [{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": obs.otlp_endpoint},
           {"name": "OTEL_EXPORTER_OTLP_PROTOCOL", "value": obs.otlp_protocol or "http/protobuf"},
           {"name": "OTEL_SERVICE_NAME", "value": obs.service_name or "agentrun-agent"}]
    attrs = {"agentrun.run": run.ref.name, "agentrun.agent": run.agent, "k8s.namespace.name": run.ref.namespace,
             **obs.resource_attributes}
    env.append({"name": "OTEL_RESOURCE_ATTRIBUTES", "value": ",".join(
        f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(attrs.items()) if k and v)})
    if obs.headers:
        env.append({"name": "OTEL_EXPORTER_OTLP_HEADERS", "value": ",".join(
            f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(obs.headers.items()))})
    if obs.headers_secret_ref:
        env.append({"name": OTLP_SECRET_HEADERS_ENV, "valueFrom": {"secretKeyRef": {
            "name": obs.headers_secret_ref, "key": OTLP_HEADERS_SECRET_KEY, "optional": True}}})
    # Every run's root span is sampled by its trace ID at the Agent's ratio (traceidratio), whatever the control
    # plane sampled: the control plane and the agents of one trace agree whenever their ratios do.
    env += [{"name": "OTEL_TRACES_SAMPLER", "value": "traceidratio"},
            {"name": "OTEL_TRACES_SAMPLER_ARG", "value": obs.sampling_ratio or "1"}]
    if obs.capture_content:
        env.append({"name": CAPTURE_CONTENT_ENV, "value": "true"})
    return env


def traced(job: Manifest, traceparent: str) -> Manifest:
    """`job` with TRACEPARENT first in every container's env (the agent, the tools container and sidecars, each
    hook): each pod of the run continues the workflow's span it was started in. A hook's own env may set it after
    (hooks are the user's code); a run's env may not set it for the agent (models/policy.py)."""
    if not traceparent:
        return job
    pod = job["spec"]["template"]["spec"]
    for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        c["env"] = [{"name": TRACEPARENT, "value": traceparent}, *c.get("env", [])]
    return job
