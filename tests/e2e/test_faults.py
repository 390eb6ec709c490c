"""Kubernetes API failures (localkube fault injection): transient ones are retried to success
without duplicating anything; permanent ones fail the run at once with a clear error."""

from __future__ import annotations

from temporalio.client import WorkflowExecutionStatus

from tests.conftest import Kubectl
from tests.e2e.conftest import Faults, Record, Stack, agent, agent_run, hook
from tests.waiting import wait_for


def _hits(stack: Stack) -> dict[int, int]:
    return {f["id"]: f["hits"] for f in stack.kube.admin("GET", "/localkube/faults")["faults"]}


def test_transient_failures_are_retried_to_success(stack: Stack, namespace: str, record: Record, faults: Faults) -> None:
    ns, name = namespace, "flaky"
    runs, jobs = record(ns, "agentruns"), record(ns, "jobs")
    stack.create(ns, "agents", agent())
    injected = {
        faults(ns, verb="create", resource="jobs", code=500, times=2): 2,
        faults(ns, verb="patch", resource="agentruns", code=429, times=3): 3,
        faults(ns, verb="create", resource="persistentvolumeclaims", code=503, times=1): 1,
        faults(ns, verb="create", resource="roles", code=500, times=1): 1,
        faults(ns, verb="get", resource="pods", subresource="log", code=500, times=1): 1,
    }
    stack.create(ns, "agentruns", agent_run(name, lifecycle={
        "preRun": [hook("pre", "true")], "postRun": [hook("post", "true")],
        "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}))
    status = stack.wait_phase(ns, name, timeout=60)["status"]
    assert status["phase"] == "Succeeded" and status["result"] == "echo: hello", status
    assert runs.final_phases(name) == ["Pending", "Running", "PostRunning", "Succeeded"]
    hits = _hits(stack)
    assert {fid: hits[fid] for fid in injected} == injected  # every fault was met, and only that often
    made = sorted(jobs.created().values())
    assert made == sorted([name, f"{name}-prerun", f"{name}-postrun"])  # no step duplicated by a retry
    stack.wait_gone(ns, name)


def test_permanent_failures_fail_the_run_with_a_clear_error_and_no_retry_storm(
        stack: Stack, namespace: str, record: Record, faults: Faults) -> None:
    ns = namespace
    jobs = record(ns, "jobs")
    stack.create(ns, "agents", agent())
    forbidden = faults(ns, verb="create", resource="jobs", code=403, times=-1, message="jobs are not for you")
    # Once: every run has a workspace now (its journal), so the second run's must be made.
    invalid = faults(ns, verb="create", resource="persistentvolumeclaims", code=422, times=1,
                     message="storage request is invalid")
    stack.create(ns, "agentruns", agent_run("nopvc", lifecycle={  # fails creating the workspace
        "preRun": [hook("pre", "true")],
        "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}))
    nopvc = stack.wait_phase(ns, "nopvc", timeout=30)["status"]
    stack.create(ns, "agentruns", agent_run("nojob"))  # then fails creating the agent Job
    nojob = stack.wait_phase(ns, "nojob", timeout=30)["status"]
    assert nojob["phase"] == "Failed", nojob
    assert "jobs are not for you" in nojob["error"] and "403" in nojob["error"] and "Job" in nojob["error"], nojob
    assert nopvc["phase"] == "Failed", nopvc
    assert "storage request is invalid" in nopvc["error"] and "422" in nopvc["error"], nopvc
    assert "PersistentVolumeClaim" in nopvc["error"] or "workspace" in nopvc["error"], nopvc
    # Cleanup still ran: the failed run's RBAC is gone, and nothing was retried into a storm.
    stack.wait_gone(ns, "nopvc")
    hits = _hits(stack)
    assert hits[forbidden] == 1 and hits[invalid] == 1, hits
    assert jobs.created() == {}


def test_a_permanent_failure_reading_the_agent_fails_the_run_and_releases_it(
        stack: Stack, namespace: str, faults: Faults, kubectl: Kubectl) -> None:
    ns = namespace
    # The worker's view holds every Agent it has seen and reads only one it has not; that read is what is
    # refused here, so there is no Agent for the view to hold (the worker cannot tell it apart from one
    # it may not read).
    denied = faults(ns, verb="get", resource="agents", code=403, times=-1, message="agents are off limits")
    stack.create(ns, "agentruns", agent_run("blind"))
    status = stack.wait_phase(ns, "blind", timeout=30)["status"]
    assert status["phase"] == "Failed" and "agents are off limits" in status["error"], status
    wid = status["workflowId"]
    # Ended, as failed (issue 26: a Failed run's workflow fails, after its status is written), not retrying forever.
    wait_for(lambda: stack.workflow_status(wid) == WorkflowExecutionStatus.FAILED, timeout=15,
             what="the workflow to end failed (not to retry its task forever)")
    assert _hits(stack)[denied] == 1
    done = kubectl("delete", "agentrun", "blind", "-n", ns, "--timeout=15s")  # no finalizer left behind
    assert done.returncode == 0, done.stderr
