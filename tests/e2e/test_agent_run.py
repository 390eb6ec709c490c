"""AgentRun end to end: kubectl-style create → workflow → status (SPEC §3)."""

from __future__ import annotations

from kubernetes import client

from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for


def test_plain_run_succeeds_with_the_agents_result(stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("r1", task="say hi"))
    run = stack.wait_phase(namespace, "r1")
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["result"].startswith("echo: say hi")
    assert status["workflowId"].startswith(f"agentrun/{namespace}/r1/")
    assert status["jobName"] == "r1" and status["startedAt"] and status["completedAt"]
    batch = client.BatchV1Api(stack.api)
    wait_for(lambda: not batch.list_namespaced_job(namespace, label_selector="sympozium.ai/agent-run=r1").items,
             what="the run's Job to be cleaned up (cleanup: delete)")
