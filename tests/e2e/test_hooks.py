"""Lifecycle hooks end to end (SPEC §3.2-3.8): phases, RBAC, the shared workspace, env, skip,
failures, timeouts and cleanup, observed through the Kubernetes API as a user would."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Record, Stack, agent, agent_run, condition, hook
from tests.waiting import wait_for

RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]


def _probe_pod(name: str, service_account: str, script: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"serviceAccountName": service_account, "automountServiceAccountToken": True,
                     "restartPolicy": "Never",
                     "containers": [{"name": "probe", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}}


def test_hooks_share_the_workspace_and_only_they_get_the_declared_rbac(stack: Stack, namespace: str,
                                                                      record: Record) -> None:
    ns, name, lc = namespace, "ws", "sympozium-lifecycle-ws"
    runs = record(ns, "agentruns")
    roles = record(ns, "roles")
    stack.create(ns, "agents", agent())
    pre = hook("fetch", "mkdir -p /workspace/context && echo 'fetched by prerun' > /workspace/context/x.txt && "
                        "kubectl auth can-i create configmaps")
    post = hook("report", 'kubectl create configmap "seen-$AGENT_RUN_ID" '
                          '--from-literal=context="$(cat /workspace/context/x.txt)" '
                          '--from-literal=result="$AGENT_RESULT" --from-literal=exit="$AGENT_EXIT_CODE"')
    stack.create(ns, "agentruns", agent_run(name, task="sleep:1 summarise", lifecycle={
        "preRun": [pre], "postRun": [post], "rbac": RULES}))

    # While the agent runs: the RBAC exists, with exactly the declared rules, bound only to the hooks' account.
    stack.wait_phase(ns, name, {"Running"})
    assert stack.pod_log(ns, name, "prerun", "pre-fetch").strip() == "yes"  # the hook holds the Role
    role = stack.rbac.read_namespaced_role(lc, ns)
    assert stack.api.sanitize_for_serialization(role.rules) == RULES
    binding = stack.rbac.read_namespaced_role_binding(lc, ns)
    assert [(s.kind, s.name, s.namespace) for s in binding.subjects] == [("ServiceAccount", lc, ns)]
    assert (binding.role_ref.kind, binding.role_ref.name) == ("Role", lc)
    for obj in (role, binding, stack.core.read_namespaced_service_account(lc, ns)):
        assert obj.metadata.labels["sympozium.ai/agent-run"] == name
        assert obj.metadata.labels["sympozium.ai/component"] == "lifecycle"
        assert [(o.kind, o.name) for o in obj.metadata.owner_references] == [("AgentRun", name)]
    other_bindings = [b for b in stack.rbac.list_namespaced_role_binding(ns).items
                      if any(s.name == "sympozium-agent" for s in b.subjects or [])]
    assert other_bindings == []
    agent_pod = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={name},sympozium.ai/component=agent-run").items[0]
    assert agent_pod.spec.service_account_name == "sympozium-agent"
    assert agent_pod.spec.automount_service_account_token is False
    # The agent's account is denied by RBAC even while the hooks' Role exists.
    stack.core.create_namespaced_pod(ns, _probe_pod(
        "probe", "sympozium-agent", "kubectl auth can-i create configmaps; kubectl get configmaps"))
    wait_for(lambda: stack.core.read_namespaced_pod("probe", ns).status.phase in ("Succeeded", "Failed"),
             what="the probe pod to finish")
    probe = stack.core.read_namespaced_pod_log("probe", ns)
    assert probe.splitlines()[0] == "no" and "Forbidden" in probe, probe

    run = stack.wait_phase(ns, name)
    status = run["status"]
    assert runs.final_phases(name) == ["Pending", "Running", "PostRunning", "Succeeded"]
    assert status["result"] == "echo: summarise\ncontext x.txt: fetched by prerun"
    assert status["postRunJobName"] == f"{name}-postrun" and status["exitCode"] == 0
    # The postRun hook saw the preRun's file and the agent's result, and could use its RBAC.
    seen = stack.core.read_namespaced_config_map(f"seen-{name}", ns).data
    assert seen == {"context": "fetched by prerun", "result": status["result"], "exit": "0"}
    # No standing permissions, no workspace: all gone once the run ended (it was not deleted).
    stack.wait_gone(ns, name, ("pvcs", "roles", "rolebindings", "serviceaccounts", "jobs"))
    assert stack.get_run(ns, name) is not None
    assert set(roles.created().values()) == {lc}


def test_rbac_is_created_only_when_declared(stack: Stack, namespace: str, record: Record) -> None:
    ns = namespace
    roles, accounts = record(ns, "roles"), record(ns, "serviceaccounts")
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("norbac", lifecycle={"preRun": [hook("pre", "true")]}))
    run = stack.wait_phase(ns, "norbac")
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert roles.created() == {}
    assert set(accounts.created().values()) <= {"default", "sympozium-agent"}


SHOW_ENV = ("env | grep -E '^(AGENT_RUN_ID|INSTANCE_NAME|AGENT_NAMESPACE|AGENT_EXIT_CODE|SHARED|OWN|TOKEN|ALPHA|ZED)=' "
            "| sort")


def _env_lines(log: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)


# "echo: " + 32759 bytes is 32765 bytes, so byte 32768 falls inside the 4-byte emoji.
LONG_TASK = "a" * 32759 + "😀" + "é€" * 100


def test_env_is_exactly_as_specified_and_cleanup_keep_leaves_the_jobs(stack: Stack, namespace: str) -> None:
    ns, name = namespace, "env"
    stack.create(ns, "agents", agent(env={"SHARED": "from-agent", "AGENT_ONLY": "x"}))
    task = LONG_TASK
    stack.core.create_namespaced_secret(ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook-secret"},
                                             "stringData": {"token": "s3cret"}})
    own = [{"name": "SHARED", "value": "from-hook"}, {"name": "OWN", "value": "mine"},
           {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hook-secret", "key": "token"}}}]
    stack.create(ns, "agentruns", agent_run(
        name, task=task, timeout="45s", cleanup="keep", env={"ZED": "z", "SHARED": "from-spec", "ALPHA": "a"},
        lifecycle={"preRun": [hook("pre", SHOW_ENV, env=own)],
                   "postRun": [hook("post", SHOW_ENV, env=own), hook("result", 'printf "%s" "$AGENT_RESULT"')]}))
    run = stack.wait_phase(ns, name)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    result = "echo: " + task
    assert status["result"] == result  # status.result is never cut
    common = {"AGENT_RUN_ID": name, "INSTANCE_NAME": "helper", "AGENT_NAMESPACE": ns, "ALPHA": "a", "ZED": "z",
              "OWN": "mine", "TOKEN": "s3cret"}
    # preRun: spec.env wins over the hook's own env; postRun: the hook's own env wins.
    assert _env_lines(stack.pod_log(ns, name, "prerun", "pre-pre")) == {**common, "SHARED": "from-spec"}
    assert _env_lines(stack.pod_log(ns, name, "post-run", "post-post")) == {
        **common, "SHARED": "from-hook", "AGENT_EXIT_CODE": "0"}
    cut = stack.pod_log(ns, name, "post-run", "post-result")
    assert cut == "echo: " + "a" * 32759 and len(cut.encode()) == 32765  # cut before the split emoji
    # The agent container: the run's trace (every container of a run's pods gets it first), the fixed variables in
    # order, what its pod tells it (where commands run, its journal), then spec.env sorted (the Agent's env is
    # replaced).
    agent_job = stack.batch.read_namespaced_job(name, ns)
    env = [(e.name, e.value) for e in agent_job.spec.template.spec.containers[0].env]
    assert [k for k, _ in env] == [
        "TRACEPARENT", "AGENT_RUN_ID", "INSTANCE_NAME", "AGENT_NAMESPACE", "AGENT_ID", "SESSION_KEY", "TASK", "SYSTEM_PROMPT",
        "MODEL_PROVIDER", "MODEL_NAME", "MODEL_BASE_URL", "THINKING_MODE", "TOOL_POLICY_ALLOW", "TOOL_POLICY_DENY",
        "RUN_TIMEOUT", "EXEC_TARGETS", "EXEC_DEFAULT_TARGET", "AGENT_STATE_DIR", "ALPHA", "SHARED", "ZED"]
    values = dict(env)
    assert (values["TASK"], values["MODEL_PROVIDER"], values["MODEL_NAME"], values["AGENT_ID"]) == (
        task, "echo", "echo-1", "primary")
    assert (values["SHARED"], values["RUN_TIMEOUT"]) == ("from-spec", "45s")
    # cleanup: keep leaves every Job (and its pods' logs) but never the workspace or RBAC.
    stack.wait_gone(ns, name, ("pvcs",))
    jobs = stack.batch.list_namespaced_job(ns, label_selector=f"sympozium.ai/agent-run={name}").items
    assert sorted(j.metadata.name for j in jobs) == [name, f"{name}-postrun", f"{name}-prerun"]
    assert all(j.spec.ttl_seconds_after_finished is None for j in jobs)


def test_agent_failures_reach_post_run_hooks_with_the_real_exit_code(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    post = {"postRun": [hook("post", 'echo "$AGENT_EXIT_CODE"; printf "%s" "$AGENT_RESULT"')]}
    stack.create(ns, "agentruns", agent_run("crash", task="exit:3", cleanup="keep", lifecycle=post))
    stack.create(ns, "agentruns", agent_run("fail", task="fail:the model said no", cleanup="keep", lifecycle=post))
    stack.create(ns, "agentruns", agent_run("bare", task="exit:5"))  # no hooks at all
    crash = stack.wait_phase(ns, "crash")["status"]
    assert crash["phase"] == "Failed" and "exited with code 3" in crash["error"], crash
    assert crash["exitCode"] == 3
    code, text = stack.pod_log(ns, "crash", "post-run", "post-post").split("\n", 1)
    assert code == "3" and text == crash["error"]
    fail = stack.wait_phase(ns, "fail")["status"]
    assert fail["phase"] == "Failed" and fail["error"] == "the model said no", fail
    code, text = stack.pod_log(ns, "fail", "post-run", "post-post").split("\n", 1)
    assert code == "1" and text == "the model said no"
    bare = stack.wait_phase(ns, "bare")["status"]
    assert bare["phase"] == "Failed" and "exited with code 5" in bare["error"], bare


def test_pre_run_hook_can_skip_the_run(stack: Stack, namespace: str, record: Record) -> None:
    ns = namespace
    runs, jobs = record(ns, "agentruns"), record(ns, "jobs")
    stack.create(ns, "agents", agent())
    post = [hook("post", "echo should not run")]
    stack.create(ns, "agentruns", agent_run("skip", lifecycle={
        "preRun": [hook("check", "echo 'nothing new since yesterday' > /ipc/control/skip"),
                   hook("later", "echo later hooks still run")], "postRun": post}))
    stack.create(ns, "agentruns", agent_run("skipempty", lifecycle={
        "preRun": [hook("check", ": > /ipc/control/skip")], "postRun": post}))
    stack.create(ns, "agentruns", agent_run("agentskip", task="skip:no work for me"))
    for name, result in (("skip", "nothing new since yesterday"), ("skipempty", "preRun hook requested skip"),
                         ("agentskip", "no work for me")):
        status = stack.wait_phase(ns, name)["status"]
        assert (status["phase"], status.get("result")) == ("Skipped", result), status
    assert runs.final_phases("skip") == ["Pending", "Skipped"]
    assert runs.final_phases("agentskip") == ["Pending", "Running", "Skipped"]
    # No agent and no postRun Job was ever created for a skipped run.
    made = set(jobs.created().values())
    assert {"skip-prerun", "skipempty-prerun", "agentskip"} == made, made
    stack.wait_gone(ns, "skip")


def test_pre_run_failure_fails_the_run_and_post_run_still_runs(stack: Stack, namespace: str,
                                                              record: Record) -> None:
    ns, name = namespace, "prefail"
    runs, jobs = record(ns, "agentruns"), record(ns, "jobs")
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, cleanup="keep", lifecycle={
        "preRun": [hook("ok", "true"), hook("bad", "echo cannot fetch >&2; exit 7"), hook("never", "true")],
        "postRun": [hook("post", 'echo "$AGENT_EXIT_CODE"; printf "%s" "$AGENT_RESULT"')]}))
    status = stack.wait_phase(ns, name)["status"]
    assert status["phase"] == "Failed", status
    assert '"bad"' in status["error"] and "exit code 7" in status["error"], status["error"]
    code, text = stack.pod_log(ns, name, "post-run", "post-post").split("\n", 1)
    assert code == "7" and text == status["error"]
    assert runs.final_phases(name) == ["Pending", "PostRunning", "Failed"]
    assert name not in jobs.created().values()  # the agent never ran


def test_timeout_still_runs_post_run_hooks_with_124(stack: Stack, namespace: str, record: Record) -> None:
    ns, name = namespace, "slow"
    runs = record(ns, "agentruns")
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, task="sleep:30", timeout="3s", cleanup="keep", lifecycle={
        "postRun": [hook("post", 'echo "$AGENT_EXIT_CODE"; printf "%s" "$AGENT_RESULT"')]}))
    status = stack.wait_phase(ns, name, timeout=25)["status"]
    assert (status["phase"], status["error"], status["exitCode"]) == ("Failed", "timeout", 124), status
    assert stack.pod_log(ns, name, "post-run", "post-post") == "124\ntimeout"
    assert runs.final_phases(name) == ["Pending", "Running", "PostRunning", "Failed"]
    # The timed-out agent Job was deleted even with cleanup: keep; the postRun Job is kept.
    wait_for(lambda: stack.run_objects(ns, name)["jobs"] == [f"{name}-postrun"], what="only the postRun Job left")


def test_failing_post_run_hook_sets_a_condition_and_keeps_the_phase(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("postfail", lifecycle={
        "postRun": [hook("notify", "exit 2")]}))
    run = stack.wait_phase(ns, "postfail")
    assert run["status"]["phase"] == "Succeeded" and run["status"]["result"] == "echo: hello", run["status"]
    cond = condition(run, "PostRunFailed")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "PostRunJobFailed"), cond
    assert '"notify"' in cond["message"] and "exit code 2" in cond["message"], cond


def test_each_hooks_timeout_is_enforced(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("prehang", lifecycle={
        "preRun": [hook("hang", "sleep 60", timeout="2s")]}))
    stack.create(ns, "agentruns", agent_run("posthang", lifecycle={
        "postRun": [hook("hang", "sleep 60", timeout="2s")]}))
    pre = stack.wait_phase(ns, "prehang", timeout=20)["status"]
    assert pre["phase"] == "Failed" and '"hang"' in pre["error"] and "timed out" in pre["error"], pre
    post = stack.wait_phase(ns, "posthang", timeout=20)
    assert post["status"]["phase"] == "Succeeded", post["status"]
    cond = condition(post, "PostRunFailed")
    assert cond is not None and '"hang"' in cond["message"] and "timed out" in cond["message"], cond
    stack.wait_gone(ns, "prehang")
    stack.wait_gone(ns, "posthang")


def test_agent_result_cut_with_all_multibyte_text(stack: Stack, namespace: str) -> None:
    ns, name = namespace, "euro"
    stack.create(ns, "agents", agent())
    task = "€" * 11000  # the result is 33006 bytes of UTF-8; byte 32768 falls inside a 3-byte character
    stack.create(ns, "agentruns", agent_run(name, task=task, cleanup="keep", lifecycle={
        "postRun": [hook("result", 'printf "%s" "$AGENT_RESULT"')]}))
    status = stack.wait_phase(ns, name)["status"]
    assert status["phase"] == "Succeeded", status
    assert status["result"] == "echo: " + task
    cut = stack.pod_log(ns, name, "post-run", "post-result")
    assert cut == "echo: " + "€" * 10920 and len(cut.encode()) == 32766
