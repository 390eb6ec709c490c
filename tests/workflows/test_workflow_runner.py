"""The worker's workflow runner (worker/main.py WORKFLOW_RUNNER: outside the SDK's sandbox) runs a run to its verdict,
also when every workflow task is a replay (no workflow kept in the cache)."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from models.gate import Verdict
from models.run import workflow_id
from models.steps import StartRun
from worker.main import WORKFLOW_RUNNER
from workflows.agent_run import AgentRunWorkflow, RunResult

from .cluster import FakeCluster, resolved_run
from .test_agent_run_workflow import GATE_HOOK, WAITING_GATE, _gate, env

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["env"]  # the module's time-skipping server, shared with test_agent_run_workflow's fixture


@pytest.mark.parametrize("cached", [100, 0])
async def test_the_workers_runner_takes_a_gated_run_to_its_verdict(env: WorkflowEnvironment, cached: int) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    assert cluster.run is not None
    queue = f"q-{uuid.uuid4()}"
    # max_cached_workflows=0: each task replays the history so far.
    async with Worker(env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=cluster.activities(),
                      workflow_runner=WORKFLOW_RUNNER, max_cached_workflows=cached):
        handle = await env.client.start_workflow(AgentRunWorkflow.run, StartRun(ref=cluster.run.ref),
                                                 id=workflow_id(cluster.run.ref), task_queue=queue)
        await _gate(handle)
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve",
                                                                                      decided_by="alice"))
        assert (view.state, view.decided_by) == ("approved", "temporal:alice")
        assert await handle.result() == RunResult(phase="Succeeded", result="hi there")
    assert cluster.phases() == ["Pending", "Running", "PostRunning", "Succeeded"]
    assert [d.job.component for d in cluster.named("delete_job")] == ["post-run"]
