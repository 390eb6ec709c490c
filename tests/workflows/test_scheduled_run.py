"""ScheduledRunWorkflow against the SDK's time-skipping test server, its activities mocked by name.

A tick names its run after its own second, so a second trigger in the same second finds the run the first made:
that run's workflow must not start again once it has finished (CI once saw a finished run run twice so)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from models.run import RUN_FAILED, RunResult
from models.schedule import (
    ScheduledTick,
    ScheduleRef,
    TickCreated,
    TickPlan,
    TickRecord,
    TickRequest,
    TickResult,
)
from models.steps import StartRun
from workflows.scheduled_run import ScheduledRunWorkflow

from .test_agent_run_workflow import env

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["env"]  # the module's time-skipping server, shared with test_agent_run_workflow's fixture

STARTS: list[str] = []  # one entry per execution of the run's workflow (its one activity)


@activity.defn(name="plan_tick")
async def plan_tick(req: TickRequest) -> TickPlan:
    return TickPlan(run_name="beat-20261127054606")


@activity.defn(name="create_scheduled_run")
async def create_scheduled_run(req: TickRequest) -> TickCreated:
    # As the real one does on a Conflict with a run the schedule owns: the run that is there already.
    return TickCreated(namespace="ns", name="beat-20261127054606", uid="uid-1")


@activity.defn(name="record_tick")
async def record_tick(req: TickRecord) -> None:
    return None


@activity.defn(name="executed")
async def executed(start: StartRun) -> None:
    STARTS.append(start.ref.name)


@workflow.defn(name="AgentRun")
class FinishedRun:
    """Stands in for AgentRunWorkflow: records that it executed, and succeeds."""

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        await workflow.execute_activity(executed, start, start_to_close_timeout=timedelta(seconds=10))
        return RunResult(phase="Succeeded")


async def test_a_second_tick_in_the_same_second_does_not_run_the_finished_run_again(env: WorkflowEnvironment) -> None:
    queue = f"q-{uuid.uuid4()}"
    tick = ScheduledTick(schedule=ScheduleRef(namespace="ns", name="beat", uid="s-1"))
    async with Worker(env.client, task_queue=queue, workflows=[ScheduledRunWorkflow, FinishedRun],
                      activities=[plan_tick, create_scheduled_run, record_tick, executed]):
        first: TickResult = await env.client.execute_workflow(ScheduledRunWorkflow.run, tick, id=f"tick-{queue}-1",
                                                              task_queue=queue)
        again: TickResult = await env.client.execute_workflow(ScheduledRunWorkflow.run, tick, id=f"tick-{queue}-2",
                                                              task_queue=queue)
    assert (first.run_name, first.phase) == ("beat-20261127054606", "Succeeded")
    assert (again.run_name, again.phase, again.error) == ("beat-20261127054606", "Started", None)
    assert STARTS == ["beat-20261127054606"]  # the run's workflow executed once


@activity.defn(name="create_scheduled_run")
async def create_failing_run(req: TickRequest) -> TickCreated:
    return TickCreated(namespace="ns", name="beat-20261127054606", uid="uid-2")  # a run (and workflow) of its own


@workflow.defn(name="AgentRun")
class FailedRun:
    """Stands in for AgentRunWorkflow of a run that failed: its workflow fails as the real one does (RunFailed)."""

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        failed = RunResult(phase="Failed", error="the agent exited with code 3")
        raise ApplicationError(failed.error or "", failed, type=RUN_FAILED, non_retryable=True)


async def test_a_tick_whose_run_failed_says_failed_with_the_runs_error(env: WorkflowEnvironment) -> None:
    queue = f"q-{uuid.uuid4()}"
    tick = ScheduledTick(schedule=ScheduleRef(namespace="ns", name="beat", uid="s-2"))
    async with Worker(env.client, task_queue=queue, workflows=[ScheduledRunWorkflow, FailedRun],
                      activities=[plan_tick, create_failing_run, record_tick]):
        result: TickResult = await env.client.execute_workflow(ScheduledRunWorkflow.run, tick, id=f"tick-{queue}",
                                                               task_queue=queue)
    assert (result.phase, result.error) == ("Failed", "the agent exited with code 3"), "not Deleted: it ended"
