"""The exact shape of a run's Kubernetes objects (SPEC §3)."""

from __future__ import annotations

import base64
import json
from typing import Any

from activities.manifests import (
    agent_job,
    cut_utf8,
    input_secret,
    job_name,
    lifecycle_rbac,
    postrun_job,
    prerun_job,
    workspace_pvc,
)
from agentrunner.executor import wrap
from models.agent import normalize_agent
from models.bounds import ENV_TEXT_MAX_BYTES
from models.resolve import ResolvedRun, resolve_run

AGENT = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                         "spec": {"authRefs": [{"provider": "openai", "secret": "key"}],
                                  "agents": {"default": {"model": "gpt"}}}})


def resolved(**spec: Any) -> ResolvedRun:
    obj = {"metadata": {"name": "run1", "namespace": "ns", "uid": "uid-1"},
           "spec": {"agentRef": "helper", "task": "do", **spec}}
    return resolve_run(obj, AGENT, default_image="agent:1")


def env_of(container: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(e["name"], e.get("value", e.get("valueFrom"))) for e in container["env"]]


HOOKS = {"lifecycle": {
    "preRun": [{"name": "fetch", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
                "env": [{"name": "OWN", "value": "hook"}, {"name": "SHARED", "value": "from-hook"}]}],
    "postRun": [{"name": "report", "image": "busybox:1.36", "env": [{"name": "SHARED", "value": "from-hook"}]},
                {"name": "gate", "image": "busybox:1.36", "gate": True}],
    "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]}],
}}


def test_agent_job_has_the_specified_shape_env_and_labels() -> None:
    run = resolved(env={"ZED": "z", "ALPHA": "a"}, timeout="90s")
    job = agent_job(run, workflow_id="wf")
    assert job["metadata"]["name"] == "run1"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert job["metadata"]["labels"] == {"sympozium.ai/agent-run": "run1", "sympozium.ai/instance": "helper",
                                         "sympozium.ai/component": "agent-run",
                                         "app.kubernetes.io/managed-by": "agentrun", "agentrun.dev/run-uid": "uid-1"}
    spec = job["spec"]
    assert "agentrun.dev/run-uid" not in spec["template"]["metadata"]["labels"], "the run's objects, not its pods"
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 90 and spec["ttlSecondsAfterFinished"] == 300
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"]["sympozium.ai/component"] == "agent-run"
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "sympozium-agent"
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    (c,) = pod["containers"]
    assert c["name"] == "agent" and c["image"] == "agent:1"
    assert c["securityContext"] == {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}
    names = [n for n, _ in env_of(c)]
    assert names[:14] == ["AGENT_RUN_ID", "INSTANCE_NAME", "AGENT_NAMESPACE", "AGENT_ID", "SESSION_KEY", "TASK",
                          "SYSTEM_PROMPT", "MODEL_PROVIDER", "MODEL_NAME", "MODEL_BASE_URL", "THINKING_MODE",
                          "TOOL_POLICY_ALLOW", "TOOL_POLICY_DENY", "RUN_TIMEOUT"]
    assert names[-2:] == ["ALPHA", "ZED"], "spec.env comes last, sorted by key"
    assert dict(env_of(c))["TASK"] == "do"
    assert {"secretKeyRef": {"name": "key", "key": "OPENAI_API_KEY", "optional": True}} in [v for _, v in env_of(c)]
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/workspace", "/ipc", "/tmp", "/agentrun/exec"]


def test_runs_without_hooks_use_empty_dirs_and_runs_with_hooks_share_the_pvc() -> None:
    plain = agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]
    assert all("emptyDir" in v for v in plain["volumes"])
    hooked = agent_job(resolved(**HOOKS), workflow_id="wf")["spec"]["template"]["spec"]
    assert hooked["volumes"][0] == {"name": "workspace", "persistentVolumeClaim": {"claimName": "run1-workspace"}}
    subpaths = {m["mountPath"]: m.get("subPath") for m in hooked["containers"][0]["volumeMounts"]}
    assert subpaths == {"/workspace": "workspace", "/ipc": "ipc", "/tmp": None, "/agentrun/exec": None}


def test_prerun_job_runs_hooks_in_order_under_the_lifecycle_account_with_spec_env_winning() -> None:
    run = resolved(env={"SHARED": "from-spec"}, **HOOKS)
    job = prerun_job(run, workflow_id="wf")
    assert job["metadata"]["name"] == "run1-prerun"
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["setup", "pre-fetch"]
    assert pod["serviceAccountName"] == "sympozium-lifecycle-run1"
    env = env_of(pod["initContainers"][1])
    assert env[:3] == [("AGENT_RUN_ID", "run1"), ("INSTANCE_NAME", "helper"), ("AGENT_NAMESPACE", "ns")]
    shared = [v for n, v in env if n == "SHARED"]
    assert shared[-1] == "from-spec", "for preRun hooks spec.env wins (it comes last)"
    assert job["spec"]["activeDeadlineSeconds"] == 300 + 60


def test_postrun_job_puts_the_gate_first_and_lets_the_hook_env_win() -> None:
    run = resolved(env={"SHARED": "from-spec"}, **HOOKS)
    job = postrun_job(run, workflow_id="wf", agent_exit_code=3, agent_result="boom")
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["name"] == "run1-postrun"
    assert [c["name"] for c in pod["initContainers"]] == ["setup", "post-gate", "post-report"]
    gate_env = dict(env_of(pod["initContainers"][1]))
    assert gate_env["GATE_MODE"] == "true" and gate_env["AGENT_EXIT_CODE"] == "3" and gate_env["AGENT_RESULT"] == "boom"
    report = env_of(pod["initContainers"][2])
    assert [v for n, v in report if n == "SHARED"][-1] == "from-hook"
    assert "GATE_MODE" not in dict(report)


def test_agent_result_is_cut_at_32768_bytes_on_a_character_boundary() -> None:
    text = "é" * 20000  # 2 bytes each: 40000 bytes
    cut = cut_utf8(text)
    assert len(cut.encode()) == 32768 and cut == "é" * 16384
    text3 = "a" + "€" * 20000  # 1 + 3 bytes each
    cut3 = cut_utf8(text3)
    assert len(cut3.encode()) <= 32768 and cut3.encode().decode() == cut3
    assert len(cut3.encode()) == 1 + 3 * ((32768 - 1) // 3)
    assert cut_utf8("short") == "short"


def test_lifecycle_rbac_binds_exactly_the_declared_rules_to_the_hook_account() -> None:
    sa, role, binding = lifecycle_rbac(resolved(**HOOKS))
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["name"] == "sympozium-lifecycle-run1"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sympozium-lifecycle-run1", "namespace": "ns"}]
    assert binding["roleRef"]["name"] == "sympozium-lifecycle-run1"
    for obj in (sa, role, binding):
        assert obj["metadata"]["labels"]["sympozium.ai/component"] == "lifecycle"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "AgentRun"


def test_workspace_pvc_is_rwo_with_the_requested_size() -> None:
    pvc = workspace_pvc(resolved(lifecycle={"workspaceSize": "2Gi", "preRun": [{"name": "a", "image": "i"}]}))
    assert pvc["metadata"]["name"] == "run1-workspace"
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    assert "storageClassName" not in pvc["spec"]


def test_cleanup_keep_drops_the_job_ttl() -> None:
    job = agent_job(resolved(cleanup="keep"), workflow_id="wf")
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_job_names_of_a_long_run_stay_distinct_and_fit() -> None:
    short = resolved()
    assert [job_name(short, c) for c in ("prerun", "agent-run", "post-run")] == ["run1-prerun", "run1", "run1-postrun"]
    long = resolved().model_copy(update={"ref": short.ref.model_copy(update={"name": "r" * 63})})
    names = [job_name(long, c) for c in ("prerun", "agent-run", "post-run")]
    assert len(set(names)) == 3 and all(len(n) <= 63 for n in names), names
    assert names[1] == "r" * 63 and names[0].endswith("-prerun") and names[2].endswith("-postrun")
    assert names == [job_name(long, c) for c in ("prerun", "agent-run", "post-run")]  # deterministic


def test_every_container_carries_requests_and_limits() -> None:
    run = resolved(sandbox={"resources": {"limits": {"memory": "768Mi"}}}, **HOOKS)
    agent = agent_job(run, workflow_id="wf")["spec"]["template"]["spec"]["containers"][0]
    assert agent["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                  "limits": {"cpu": "1", "memory": "768Mi"}}
    for job in (prerun_job(run, workflow_id="wf"), postrun_job(run, workflow_id="wf", agent_exit_code=0,
                                                                agent_result="ok")):
        pod = job["spec"]["template"]["spec"]
        hooks = [c for c in pod["initContainers"] if c["name"] != "setup"]
        assert hooks and all(c["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                "limits": {"cpu": "500m", "memory": "512Mi"}} for c in hooks)
        assert all(c["resources"]["limits"] for c in [*pod["initContainers"], *pod["containers"]])


def test_auth_secret_keys_reach_the_agent_only_as_optional_secret_key_refs() -> None:
    """Sympozium's allowed keys each by its own name, and a key stored as `apiKey` as PROVIDER_API_KEY (the
    variable the agent reads last); never a literal value."""
    (c,) = agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert list(refs) == ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
                          "OLLAMA_HOST", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY",
                          "OPENROUTER_API_KEY", "API_KEY", "PROVIDER_API_KEY"]
    assert all(r["name"] == "key" and r["optional"] is True for r in refs.values())
    assert refs["PROVIDER_API_KEY"]["key"] == "apiKey"
    assert all(refs[k]["key"] == k for k in refs if k != "PROVIDER_API_KEY")
    # No auth Secret: no references at all.
    keyless = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                               "spec": {"agents": {"default": {"model": "m", "baseURL": "http://x/v1"}}}})
    obj = {"metadata": {"name": "run1", "namespace": "ns", "uid": "u"}, "spec": {"agentRef": "helper", "task": "t"}}
    (bare,) = agent_job(resolve_run(obj, keyless, default_image="a"), workflow_id="wf")["spec"]["template"]["spec"][
        "containers"]
    assert not any("valueFrom" in e for e in bare["env"])


def test_the_setup_container_makes_the_context_and_control_dirs_before_the_first_hook() -> None:
    for job in (prerun_job(resolved(**HOOKS), workflow_id="wf"),
                postrun_job(resolved(**HOOKS), workflow_id="wf", agent_exit_code=0, agent_result="r")):
        setup = job["spec"]["template"]["spec"]["initContainers"][0]
        assert setup["name"] == "setup"
        assert setup["command"] == ["sh", "-c", "mkdir -p /ipc/control /ipc/output /workspace/context"]
        assert setup["securityContext"]["readOnlyRootFilesystem"] is True
        assert [m["mountPath"] for m in setup["volumeMounts"]] == ["/workspace", "/ipc", "/tmp"]


def test_agent_sandbox_sets_the_pods_runtime_class_and_the_sandbox_adds_sympoziums_sidecar() -> None:
    job = agent_job(resolved(agentSandbox={"enabled": True, "runtimeClass": "gvisor"},
                             sandbox={"enabled": True, "image": "sandbox:1",
                                      "securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
                    workflow_id="wf")
    pod = job["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "gvisor" and pod["restartPolicy"] == "Never"  # still a Job pod
    assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    [sidecar] = pod["initContainers"]
    assert sidecar == {
        "name": "sandbox", "image": "sandbox:1", "restartPolicy": "Always",
        "command": wrap("sandbox", ["sleep", "infinity"]),  # the run's commands run here
        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}, {"name": "exec-tmp", "mountPath": "/tmp"},
                         {"name": "exec", "mountPath": "/agentrun/exec/sandbox", "subPath": "sandbox"}],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}}
    assert [c["name"] for c in pod["containers"]] == ["agent"]
    assert {"name": "EXEC_DEFAULT_TARGET", "value": "sandbox"} in pod["containers"][0]["env"]
    plain = agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]
    assert "runtimeClassName" not in plain and [c["name"] for c in plain["initContainers"]] == ["tools"]
    assert plain["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_sub_agents_pods_carry_the_parent_run_label() -> None:
    job = agent_job(resolved(parent={"runName": "boss", "sessionKey": "s", "spawnDepth": 1}), workflow_id="wf")
    assert job["spec"]["template"]["metadata"]["labels"]["sympozium.ai/parent-run"] == "boss"


def test_image_pull_secrets_of_the_run_else_its_agent_go_on_every_pod_of_the_run() -> None:
    pulling = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                               "spec": {"authRefs": [{"provider": "openai", "secret": "key"}],
                                        "agents": {"default": {"model": "gpt"}},
                                        "imagePullSecrets": [{"name": "agent-registry"}]}})
    obj: dict[str, Any] = {"metadata": {"name": "run1", "namespace": "ns", "uid": "uid-1"},
                           "spec": {"agentRef": "helper", "task": "do", **HOOKS}}
    inherited = resolve_run(obj, pulling, default_image="agent:1")
    own = resolve_run({**obj, "spec": {**obj["spec"], "imagePullSecrets": [{"name": "mine"}, {"name": "other"}]}},
                      pulling, default_image="agent:1")
    for run, names in ((inherited, ["agent-registry"]), (own, ["mine", "other"])):
        for job in (agent_job(run, workflow_id="wf"), prerun_job(run, workflow_id="wf"),
                    postrun_job(run, workflow_id="wf", agent_exit_code=0, agent_result="ok")):
            assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": n} for n in names], job
    assert "imagePullSecrets" not in agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]


def test_a_task_too_long_for_an_env_var_reaches_the_agent_as_a_file_of_the_runs_input_secret() -> None:
    """Issue 27, hole 6: a task over ENV_TEXT_MAX_BYTES is no env var (the kernel refuses one over 128 KiB); the agent
    reads it from the run's input Secret, mounted read-only, named by TASK_FILE. A short task stays TASK."""
    short = resolved()
    assert input_secret(short) is None
    (c,) = agent_job(short, workflow_id="wf")["spec"]["template"]["spec"]["containers"]
    assert ("TASK", "do") in env_of(c) and not any(n.endswith("_FILE") for n, _ in env_of(c))

    task = "é" * (ENV_TEXT_MAX_BYTES // 2 + 1)  # fewer characters than the bound, more bytes
    run = resolved(task=task, systemPrompt="short prompt")
    secret = input_secret(run)
    assert secret is not None
    assert secret["metadata"]["name"] == "sympozium-input-run1"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert base64.b64decode(secret["data"]["task"]).decode() == task and list(secret["data"]) == ["task"]
    pod = agent_job(run, workflow_id="wf")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = dict(env_of(c))
    assert (env["TASK_FILE"], env["SYSTEM_PROMPT"]) == ("/agent-input/task", "short prompt") and "TASK" not in env
    assert {"name": "input", "mountPath": "/agent-input", "readOnly": True} in c["volumeMounts"]
    assert {"name": "input", "secret": {"secretName": "sympozium-input-run1"}} in pod["volumes"]
    assert len(json.dumps(c["env"]).encode()) < ENV_TEXT_MAX_BYTES

    # A retried attempt's task (the original, the rejected answer and the feedback, each cut) is TASK again.
    (c,) = agent_job(run, workflow_id="wf", attempt=2, task="again")["spec"]["template"]["spec"]["containers"]
    env = dict(env_of(c))
    assert env["TASK"] == "again" and "TASK_FILE" not in env


def test_a_restartable_agent_keeps_its_journal_on_the_workspace_pvc_in_a_directory_only_it_mounts() -> None:
    run = resolved(**HOOKS).model_copy(update={"agent_restarts": 2})
    plain = resolved().model_copy(update={"agent_restarts": 2})
    for r in (run, plain):
        pod = agent_job(r, workflow_id="wf")["spec"]["template"]["spec"]
        assert pod["volumes"][0] == {"name": "workspace", "persistentVolumeClaim": {"claimName": "run1-workspace"}}
        (agent,) = pod["containers"]
        mounts = {m["mountPath"]: m.get("subPath") for m in agent["volumeMounts"]}
        assert mounts["/agentrun/state"] == "state" and mounts["/workspace"] == "workspace"
        assert dict(env_of(agent))["AGENT_STATE_DIR"] == "/agentrun/state/attempt-1"
        for c in pod.get("initContainers") or []:
            assert "/agentrun/state" not in {m["mountPath"] for m in c["volumeMounts"]}, c["name"]
    assert dict(env_of(agent_job(run, workflow_id="wf", attempt=2)["spec"]["template"]["spec"]["containers"][0]))[
        "AGENT_STATE_DIR"] == "/agentrun/state/attempt-2", "each attempt (its own task) has its own journal"
    for job in (prerun_job(run, workflow_id="wf"), postrun_job(run, workflow_id="wf", agent_exit_code=0,
                                                                agent_result="")):
        for c in job["spec"]["template"]["spec"]["initContainers"] + job["spec"]["template"]["spec"]["containers"]:
            assert "/agentrun/state" not in {m["mountPath"] for m in c["volumeMounts"]}, "hooks never see it"
    without = agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]["containers"][0]
    assert "AGENT_STATE_DIR" not in dict(env_of(without)), "no restarts: no journal"


def test_an_agent_started_again_has_its_own_job_the_same_environment_and_what_is_left_of_its_time() -> None:
    run = resolved(timeout="10m").model_copy(update={"agent_restarts": 2})
    first = agent_job(run, workflow_id="wf")
    again = agent_job(run, workflow_id="wf", restart=1, deadline_seconds=420)
    assert again["metadata"]["name"] == "run1-restart1" and again["spec"]["activeDeadlineSeconds"] == 420
    assert first["spec"]["activeDeadlineSeconds"] == 600
    assert again["spec"]["template"]["spec"]["containers"] == first["spec"]["template"]["spec"]["containers"]


def test_no_job_of_a_run_replaces_a_pod_that_is_still_terminating() -> None:
    run = resolved(**HOOKS)
    for job in (agent_job(run, workflow_id="wf"), prerun_job(run, workflow_id="wf"),
                postrun_job(run, workflow_id="wf", agent_exit_code=0, agent_result="")):
        assert job["spec"]["podReplacementPolicy"] == "Failed"


# -- traces (SPEC §12) ----------------------------------------------------------------------------

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_every_container_of_every_pod_of_the_run_gets_its_traceparent() -> None:
    from activities.manifests import traced

    run = resolved(**HOOKS, sandbox={"enabled": True})
    for job in (agent_job(run, workflow_id="wf"), prerun_job(run, workflow_id="wf"),
                postrun_job(run, workflow_id="wf", agent_exit_code=0, agent_result="ok")):
        pod = traced(job, TP)["spec"]["template"]["spec"]
        containers = [*pod.get("initContainers", []), *pod["containers"]]
        assert len(containers) >= 2
        assert all(env_of(c)[0] == ("TRACEPARENT", TP) for c in containers), [c["name"] for c in containers]
    untraced = agent_job(run, workflow_id="wf")
    assert traced(untraced, "") == untraced


def test_the_agents_exporter_follows_its_agents_observability_and_its_headers_secret_is_a_reference() -> None:
    agent = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {
        "authRefs": [{"provider": "openai", "secret": "key"}], "agents": {"default": {"model": "gpt"}},
        "observability": {"enabled": True, "otlpEndpoint": "http://collector:4318", "serviceName": "helper-agent",
                          "headersSecretRef": "otlp-auth", "headers": {"x-tenant": "a b"},
                          "resourceAttributes": {"team": "ops"}, "samplingRatio": "0.25"}}})
    run = resolve_run({"metadata": {"name": "run1", "namespace": "ns", "uid": "uid-1"},
                       "spec": {"agentRef": "helper", "task": "do"}}, agent, default_image="agent:1")
    env = dict(env_of(agent_job(run, workflow_id="wf")["spec"]["template"]["spec"]["containers"][0]))
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" and env["OTEL_SERVICE_NAME"] == "helper-agent"
    assert env["OTEL_EXPORTER_OTLP_HEADERS"] == "x-tenant=a%20b"
    assert env["AGENT_OTLP_SECRET_HEADERS"] == {"secretKeyRef": {"name": "otlp-auth", "key": "headers",
                                                                 "optional": True}}
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25" and "team=ops" in env["OTEL_RESOURCE_ATTRIBUTES"]
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in env, "content stays off spans by default"
    # No observability: no exporter at all (the runner then imports nothing of OpenTelemetry).
    plain = dict(env_of(agent_job(resolved(), workflow_id="wf")["spec"]["template"]["spec"]["containers"][0]))
    assert not [k for k in plain if k.startswith("OTEL_")]
