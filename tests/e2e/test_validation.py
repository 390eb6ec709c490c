"""Invalid and malformed runs (SPEC §3.1): they end Failed naming the field, create nothing, and
never take the bridge or the worker down."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Record, Stack, agent, agent_run, condition, hook
from tests.waiting import wait_for


def _without_task(name: str) -> dict[str, Any]:
    body = agent_run(name)
    del body["spec"]["task"]
    return body


INVALID: dict[str, tuple[dict[str, Any], str]] = {
    "notask": (_without_task("notask"), "spec.task"),
    "blanktask": (agent_run("blanktask", task="   "), "spec.task"),
    "baddur": (agent_run("baddur", timeout="5 minutes"), "spec.timeout"),
    "badhookdur": (agent_run("badhookdur", lifecycle={"preRun": [hook("a", "true", timeout="soon")]}),
                   "spec.lifecycle.preRun[0].timeout"),
    "twogates": (agent_run("twogates", lifecycle={"postRun": [hook("a", "true", gate=True),
                                                              hook("b", "true", gate=True)]}),
                 "spec.lifecycle.postRun"),
    "pregate": (agent_run("pregate", lifecycle={"preRun": [hook("a", "true", gate=True)]}),
                "spec.lifecycle.preRun[0].gate"),
    "duphooks": (agent_run("duphooks", lifecycle={"postRun": [hook("same", "true"), hook("same", "true")]}),
                 "spec.lifecycle.postRun[1].name"),
    "badhookname": (agent_run("badhookname", lifecycle={"preRun": [hook("Not_A_Label", "true")]}),
                    "spec.lifecycle.preRun[0].name"),
    "badenv": (agent_run("badenv", env={"LD_PRELOAD": "/evil.so"}), "spec.env.LD_PRELOAD"),
    "noagent": (agent_run("noagent", agent_ref="nobody"), "spec.agentRef"),
    "taskobject": (agent_run("taskobject", task={"text": "hi"}), "spec.task"),  # type: ignore[arg-type]
    # Backends Sympozium has and this control plane does not (models/compat.py).
    "servermode": (agent_run("servermode", mode="server"), "spec.mode"),
    "warmpool": (agent_run("warmpool", agentSandbox={"enabled": True, "warmPoolRef": "pool"}),
                 "spec.agentSandbox.warmPoolRef"),
}


def test_invalid_runs_fail_naming_the_field_and_create_nothing(stack: Stack, namespace: str,
                                                               record: Record) -> None:
    ns = namespace
    watched = {kind: record(ns, kind) for kind in ("jobs", "pods", "persistentvolumeclaims", "roles",
                                                   "rolebindings", "serviceaccounts")}
    stack.create(ns, "agents", agent())
    for body, _field in INVALID.values():
        stack.create(ns, "agentruns", body)
    for name, (_body, field) in INVALID.items():
        run = stack.wait_phase(ns, name)
        status = run["status"]
        assert status["phase"] == "Failed", (name, status)
        assert status["error"].startswith(field + ":"), (name, field, status["error"])
        cond = condition(run, "Validated")
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "InvalidSpec"), (name, cond)
        assert status["completedAt"] and "jobName" not in status
    for kind, rec in watched.items():
        made = set(rec.created().values()) - {"default"}  # the namespace's own ServiceAccount
        assert made == set(), (kind, made)
    # A failed run holds no finalizer: deleting it just works.
    stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "notask")
    wait_for(lambda: stack.get_run(ns, "notask") is None, what="the invalid run to be deletable")


def test_malformed_objects_do_not_take_down_the_bridge_or_worker(stack: Stack, namespace: str) -> None:
    ns = namespace
    # An Agent whose spec our models cannot read, and runs that point at it or carry odd shapes.
    stack.create(ns, "agents", {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent",
                                "metadata": {"name": "broken"}, "spec": {"skills": [42, {"skillPackRef": 7}]}})
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("onbroken", agent_ref="broken"))
    stack.create(ns, "agentruns", {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                                   "metadata": {"name": "nospec"}})
    stack.create(ns, "agentruns", agent_run("listtask", task=["a", "b"]))  # type: ignore[arg-type]
    stack.create(ns, "agentruns", agent_run("bothenv", lifecycle={"preRun": [hook("a", "true", env=[
        {"name": "X", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])]}))
    # A Job that looks like a run's (label, workflow annotation) but belongs to no workflow at all.
    stack.batch.create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "stray", "labels": {"sympozium.ai/agent-run": "ghost"},
                     "annotations": {"agentrun.dev/workflow-id": "agentrun/nowhere/ghost/0000"}},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "exit 0"]}]}}}})
    expected = {"onbroken": "spec.skills[0]", "nospec": "spec.agentRef", "listtask": "spec.task",
                "bothenv": "spec.lifecycle.preRun[0].env[0]"}
    for name, field in expected.items():
        status = stack.wait_phase(ns, name)["status"]
        assert status["phase"] == "Failed" and status["error"].startswith(field), (name, status)
    wait_for(lambda: (stack.batch.read_namespaced_job("stray", ns).status.succeeded or 0) >= 1,
             what="the stray Job to finish")
    # Both processes are still up, and a later valid run goes through.
    assert stack.bridge.proc is not None and stack.bridge.proc.poll() is None
    assert stack.worker.proc is not None and stack.worker.proc.poll() is None
    stack.create(ns, "agentruns", agent_run("fine"))
    status = stack.wait_phase(ns, "fine")["status"]
    assert status["phase"] == "Succeeded", status


def test_long_run_names_get_distinct_job_names(stack: Stack, namespace: str) -> None:
    ns, name = namespace, "r" * 63  # the longest legal name: "<name>-prerun" would not fit a Job name
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, cleanup="keep", lifecycle={
        "preRun": [hook("pre", "echo pre")], "postRun": [hook("post", "echo post")]}))
    status = stack.wait_phase(ns, name)["status"]
    assert status["phase"] == "Succeeded", status
    jobs = {j.metadata.labels["sympozium.ai/component"]: j.metadata.name for j in stack.batch.list_namespaced_job(
        ns, label_selector=f"sympozium.ai/agent-run={name}").items}
    assert set(jobs) == {"prerun", "agent-run", "post-run"} and len(set(jobs.values())) == 3, jobs
    assert all(len(n) <= 63 for n in jobs.values())
