"""Durability: processes die mid-run and the run still completes, with no step done twice;
deleting a running run cancels it and removes everything it made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from tests.conftest import Kubectl
from tests.e2e.conftest import Faults, Record, Recorder, Stack, agent, agent_run, hook
from tests.waiting import wait_for

LIFECYCLE = {"preRun": [hook("pre", "echo context > /workspace/context.txt")],
             "postRun": [hook("post", "cat /workspace/context.txt")],
             "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}


def _agent_pod_running(stack: Stack, ns: str, run: str) -> bool:
    pods = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={run},sympozium.ai/component=agent-run").items
    return any(p.status.phase == "Running" for p in pods)


def _component(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get("sympozium.ai/component", ""))


def _ever(rec: Recorder, run: str, component: str) -> int:
    """How many distinct objects of the run's `component` were ever created."""
    return len(rec.created(lambda o: (o["metadata"].get("labels") or {}).get("sympozium.ai/agent-run") == run
                           and _component(o) == component))


def _assert_each_step_once(jobs: Recorder, pods: Recorder, run: str) -> None:
    for component in ("prerun", "agent-run", "post-run"):
        assert (_ever(jobs, run, component), _ever(pods, run, component)) == (1, 1), (
            component, jobs.created(), pods.created())


def _kill_and_restart_during_the_agent(stack: Stack, ns: str, record: Record, *, kill: Callable[[], None],
                                       start: Callable[[], None], while_down: Callable[[], None] | None = None) -> None:
    """A run with hooks and RBAC; `kill` while its agent runs, `while_down`, then `start` again."""
    jobs, pods = record(ns, "jobs"), record(ns, "pods")
    runs = record(ns, "agentruns")
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("durable", task="sleep:3 carry on", lifecycle=LIFECYCLE))
    wait_for(lambda: _agent_pod_running(stack, ns, "durable"), timeout=30, what="the agent pod to run")
    kill()
    try:
        if while_down is not None:
            while_down()
    finally:
        start()  # later tests need the process back, whatever happened here
    status = stack.wait_phase(ns, "durable", timeout=60)["status"]
    assert status["phase"] == "Succeeded" and status["result"] == "echo: carry on", status
    assert runs.final_phases("durable") == ["Pending", "Running", "PostRunning", "Succeeded"]
    _assert_each_step_once(jobs, pods, "durable")
    stack.wait_gone(ns, "durable")


def test_worker_killed_while_the_agent_runs_resumes_without_repeating_a_step(stack: Stack, namespace: str,
                                                                            record: Record) -> None:
    # The agent Job finishes while no worker is up; the restarted worker replays and carries on.
    def agent_finishes() -> None:
        wait_for(lambda: stack.batch.read_namespaced_job("durable", namespace).status.succeeded,
                 timeout=30, what="the agent Job to finish while the worker is down")

    _kill_and_restart_during_the_agent(stack, namespace, record, kill=stack.worker.kill, start=stack.worker.start,
                                       while_down=agent_finishes)


def test_bridge_killed_while_the_agent_runs_reconciles_on_restart(stack: Stack, namespace: str,
                                                                 record: Record) -> None:
    ns = namespace

    # While the bridge is down the agent Job finishes (no event) and a new run is created (not started).
    def missed_events() -> None:
        stack.create(ns, "agentruns", agent_run("whiledown", task="created while the bridge was down"))
        wait_for(lambda: stack.batch.read_namespaced_job("durable", ns).status.succeeded,
                 timeout=30, what="the agent Job to finish while the bridge is down")
        assert stack.get_run(ns, "whiledown").get("status") is None  # type: ignore[union-attr]

    _kill_and_restart_during_the_agent(stack, ns, record, kill=stack.bridge.kill, start=stack.bridge.start,
                                       while_down=missed_events)
    status = stack.wait_phase(ns, "whiledown")["status"]
    assert status["phase"] == "Succeeded", status


def test_temporal_server_restart_with_its_database_keeps_the_run(stack: Stack, namespace: str,
                                                                record: Record) -> None:
    # SIGKILL, then the same binary on the same port and database file; worker and bridge reconnect.
    def start() -> None:
        stack.temporal.start()

    _kill_and_restart_during_the_agent(stack, namespace, record, kill=stack.temporal.kill, start=start)


def test_deleting_a_running_run_cancels_it_and_removes_everything(stack: Stack, namespace: str,
                                                                 record: Record, kubectl: Kubectl) -> None:
    ns, name = namespace, "doomed"
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, task="sleep:60", lifecycle=LIFECYCLE))
    wait_for(lambda: _agent_pod_running(stack, ns, name), timeout=30, what="the agent pod to run")
    run = stack.get_run(ns, name)
    assert run is not None
    wid = run["status"]["workflowId"]
    objs = stack.run_objects(ns, name)
    assert objs["pvcs"] and objs["roles"] and objs["rolebindings"] and objs["serviceaccounts"], objs
    pods = record(ns, "pods", label_selector=f"sympozium.ai/agent-run={name}")
    # kubectl waits for the finalizer: it returns once the workflow's cleanup has released the object.
    done = kubectl("delete", "agentrun", name, "-n", ns, "--timeout=30s")
    assert done.returncode == 0, done.stderr
    assert stack.get_run(ns, name) is None
    stack.wait_gone(ns, name, timeout=15)
    # The agent pod was killed, long before its 60s task could end.
    pods.seen(lambda t, o: t == "DELETED" and _component(o) == "agent-run")
    wait_for(lambda: stack.workflow_status(wid) == WorkflowExecutionStatus.CANCELED, timeout=15,
             what="the workflow to end cancelled")


def test_run_created_while_temporal_is_down_starts_when_it_is_back(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    bridge_log = stack.bridge.log
    seen = bridge_log.stat().st_size
    stack.temporal.kill()
    try:
        stack.create(ns, "agentruns", agent_run("outage"))
        # The bridge's Temporal client gives up on the start (its own retries last ~10s).
        wait_for(lambda: f"{ns}/outage failed" in bridge_log.read_bytes()[seen:].decode(errors="replace"),
                 timeout=30, what="the bridge to fail starting the run's workflow")
    finally:
        stack.temporal.start()
    status = stack.wait_phase(ns, "outage", timeout=60)["status"]
    assert status["phase"] == "Succeeded", status


def test_a_deleted_and_recreated_run_is_a_new_execution(stack: Stack, namespace: str, kubectl: Kubectl) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("again", task="first"))
    first = stack.wait_phase(ns, "again")["status"]
    assert kubectl("delete", "agentrun", "again", "-n", ns, "--timeout=30s").returncode == 0
    stack.create(ns, "agentruns", agent_run("again", task="second"))
    second = stack.wait_phase(ns, "again")["status"]
    assert (first["result"], second["result"]) == ("echo: first", "echo: second")
    assert first["workflowId"] != second["workflowId"]
    for wid in (first["workflowId"], second["workflowId"]):
        wait_for(lambda wid=wid: stack.workflow_status(wid) == WorkflowExecutionStatus.COMPLETED,  # type: ignore[misc]
                 timeout=15, what=f"workflow {wid} to complete")


def test_deleting_a_run_during_its_final_cleanup_still_releases_it(stack: Stack, namespace: str, faults: Faults,
                                                                   kubectl: Kubectl) -> None:
    ns, name = namespace, "late"
    stack.create(ns, "agents", agent())
    # The workspace deletion stalls, so the run is deleted while its workflow is cleaning up.
    faults(ns, verb="delete", resource="persistentvolumeclaims", delay_seconds=3, times=1)
    stack.create(ns, "agentruns", agent_run(name, lifecycle={"preRun": [hook("pre", "true")]}))
    status = stack.wait_phase(ns, name)["status"]
    assert status["phase"] == "Succeeded", status
    done = kubectl("delete", "agentrun", name, "-n", ns, "--timeout=20s")
    assert done.returncode == 0, done.stderr
    stack.wait_gone(ns, name)


def _job(jobs: Recorder, run: str, component: str, *, done: bool = False) -> bool:
    def match(_typ: str, o: dict[str, Any]) -> bool:
        labels = o["metadata"].get("labels") or {}
        return (labels.get("sympozium.ai/agent-run") == run and _component(o) == component
                and (not done or bool((o.get("status") or {}).get("succeeded"))))
    return any(match(t, o) for t, o in jobs.snapshot())


# The moments a worker is killed at, one per step of a run: each is seen in the cluster just after
# the step began or ended, so the kill lands inside it or on the way to the next.
MOMENTS: dict[str, Callable[[Recorder, Recorder], bool]] = {
    "resolved, Pending": lambda runs, jobs: "Pending" in runs.phases("steps"),
    "preRun Job made": lambda runs, jobs: _job(jobs, "steps", "prerun"),
    "preRun done": lambda runs, jobs: _job(jobs, "steps", "prerun", done=True),
    "agent Job made": lambda runs, jobs: _job(jobs, "steps", "agent-run"),
    "agent done": lambda runs, jobs: _job(jobs, "steps", "agent-run", done=True),
    "postRun Job made": lambda runs, jobs: _job(jobs, "steps", "post-run"),
    "finished, cleaning up": lambda runs, jobs: "Succeeded" in runs.phases("steps"),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_worker_killed_at_each_step_makes_each_job_once_and_completes(stack: Stack, namespace: str, record: Record,
                                                                      moment: str) -> None:
    ns = namespace
    jobs, pods, runs = record(ns, "jobs"), record(ns, "pods"), record(ns, "agentruns")
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("steps", task="sleep:1 step by step", lifecycle=LIFECYCLE))
    wait_for(lambda: MOMENTS[moment](runs, jobs), timeout=60, interval=0.01, what=moment)
    stack.worker.kill()
    stack.worker.start()
    status = stack.wait_phase(ns, "steps", timeout=90)["status"]
    assert status["phase"] == "Succeeded" and status["result"] == "echo: step by step", status
    assert runs.final_phases("steps") == ["Pending", "Running", "PostRunning", "Succeeded"]
    _assert_each_step_once(jobs, pods, "steps")
    # A step that was running on the killed worker is retried once its attempt times out (KUBE_CALL, 30s).
    stack.wait_gone(ns, "steps", timeout=90)
