"""Determinism: every AgentRun workflow history this session produced (the runs of the tests
before this one: worker, bridge and server restarts, cancellations, faults, timeouts) replays
with the current workflow code. test_record_histories.py does the same per run shape and
keeps recorded copies for tests/workflows/test_replay.py."""

from __future__ import annotations

import asyncio

from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.e2e.conftest import Stack, agent, agent_run, hook
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1


async def _histories(address: str) -> list[WorkflowHistory]:
    temporal = await Client.connect(address, data_converter=pydantic_data_converter)
    out = []
    async for wf in temporal.list_workflows('WorkflowType = "AgentRun" AND ExecutionStatus != "Running"'):
        out.append(await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history())
    return out


async def _replay(histories: list[WorkflowHistory]) -> dict[str, str]:
    async def each() -> object:
        for h in histories:
            yield h

    replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1], data_converter=pydantic_data_converter)
    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)  # type: ignore[arg-type]
    by_run = {h.run_id: h.workflow_id for h in histories}
    return {by_run.get(run_id, run_id): repr(err) for run_id, err in results.replay_failures.items()}


def test_every_history_of_the_session_replays_with_the_current_code(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("full", lifecycle={
        "preRun": [hook("pre", "true")], "postRun": [hook("post", "exit 1")],
        "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}))
    stack.create(ns, "agentruns", agent_run("broken", task="fail:nope"))
    wids = {stack.wait_phase(ns, name)["status"]["workflowId"] for name in ("full", "broken")}

    def closed() -> list[WorkflowHistory] | None:
        """The session's closed histories, once both runs' workflows are among them: a run's terminal status is
        written as its cleanup begins, before its workflow closes, and listing lags behind closing."""
        histories = asyncio.run(_histories(stack.temporal.address))
        return histories if wids <= {h.workflow_id for h in histories} else None

    histories = wait_for(closed, timeout=60, interval=0.5, what="both runs' workflows closed and listed")
    failures = asyncio.run(_replay(histories))
    assert failures == {}, failures
