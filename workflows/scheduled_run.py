"""ScheduledRunWorkflow: one tick of a SympoziumSchedule (SPEC §6), started by its Temporal Schedule.

It names the run after the tick time (so a tick can never create two), applies
concurrencyPolicy, creates the AgentRun owned by the schedule, and then follows the run's
workflow as its child, so the Temporal UI shows schedule → tick → run. Because the tick stays
open while its run is not finished, the Temporal Schedule's overlap policy does the rest:
Forbid = SKIP, Allow = ALLOW_ALL, Replace = CANCEL_OTHER (this workflow, when cancelled,
removes its run and waits for the run's cleanup before the next tick starts).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from activities.schedules import ScheduleActivities
    from models.resolve import RunRef
    from models.run import RUN_FAILED
    from models.schedule import (
        RemoveRuns,
        RunName,
        ScheduledTick,
        TickCreated,
        TickPlan,
        TickRecord,
        TickRequest,
        TickResult,
    )
    from models.steps import StartRun
    from models.timestamps import rfc3339

    from . import policies, tracing

from .agent_run import SA_NAME, SA_NAMESPACE, SA_PHASE, AgentRunWorkflow, RunResult, workflow_id
from .agent_run_v1 import AgentRunWorkflowV1

SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
# Ticks with this marker start their run's workflow only if that workflow ID never ran (REJECT_DUPLICATE).
ONE_EXECUTION_PATCH = "tick-child-once"


@workflow.defn
class ScheduledRunWorkflow:
    def __init__(self) -> None:
        self._result = TickResult()

    @workflow.query
    def tick(self) -> TickResult:
        return self._result

    @workflow.run
    async def run(self, tick: ScheduledTick) -> TickResult:
        """The tick, in a span of its own: the trace its run joins (workflows/tracing.py)."""
        s = tick.schedule
        with tracing.run_span(f"SympoziumSchedule {s.namespace}/{s.name} tick", traceparent="",
                              attributes={"agentrun.schedule": s.name, "k8s.namespace.name": s.namespace}):
            return await self._tick(tick)

    async def _tick(self, tick: ScheduledTick) -> TickResult:
        info = workflow.info()
        # The tick's time: the Schedule's nominal time (also for backfills and manual triggers).
        when = info.typed_search_attributes.get(SCHEDULED_START) or info.workflow_start_time
        # catchupWindow: a tick whose workflow could only begin long after it was started (workers
        # down) is dropped. Temporal's own catchup window covers ticks missed while it was down.
        late = (workflow.now() - info.workflow_start_time).total_seconds()
        if tick.catchup_seconds is not None and late > tick.catchup_seconds:
            return self._done(skipped=f"started {late:.0f}s after its tick, beyond catchupWindow "
                                      f"({tick.catchup_seconds}s)")
        req = TickRequest(schedule=tick.schedule, tick_time=rfc3339(when), timezone=tick.timezone,
                          concurrency_policy=tick.concurrency_policy, tick_workflow_id=info.workflow_id)
        # 1. Name the run and apply concurrencyPolicy.
        plan: TickPlan = await self._act(ScheduleActivities.plan_tick, req,
                                         f"concurrencyPolicy {tick.concurrency_policy}")
        self._result.run_name = plan.run_name
        if plan.skip_reason is not None:
            return self._done(skipped=plan.skip_reason)
        # 2. Replace: the running runs go first, their cleanup included.
        if plan.replace:
            await self._remove(plan.replace, "replaced by the next tick (concurrencyPolicy Replace)")
        # 3. The run itself, owned by the schedule.
        made: TickCreated = await self._act(ScheduleActivities.create_scheduled_run, req,
                                            f"create AgentRun {plan.run_name}")
        if made.skip_reason is not None:
            return self._done(skipped=made.skip_reason)
        await self._act(ScheduleActivities.record_tick,
                        TickRecord(schedule=tick.schedule, tick_time=req.tick_time, run_name=made.name),
                        "record the tick in the schedule's status")
        # 4. Follow the run as a child workflow.
        return await self._follow(RunRef(namespace=made.namespace, name=made.name, uid=made.uid))

    async def _follow(self, ref: RunRef) -> TickResult:
        # Ticks recorded before the type "AgentRun" existed started (and replay) version 1.
        run = AgentRunWorkflow.run if workflow.patched("agent-run-type-v2") else AgentRunWorkflowV1.run
        # One execution per run object, ever (as the bridge starts them): a tick in the same second as an earlier one
        # names the same run, and must not start that finished run's workflow again.
        reuse = (WorkflowIDReusePolicy.REJECT_DUPLICATE if workflow.patched(ONE_EXECUTION_PATCH)
                 else WorkflowIDReusePolicy.ALLOW_DUPLICATE)
        try:
            child = await workflow.start_child_workflow(
                run, StartRun(ref=ref, traceparent=tracing.current_traceparent()), id=workflow_id(ref),
                id_reuse_policy=reuse,
                # The run outlives this tick if the tick is closed: its object and cleanup are its own.
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                cancellation_type=workflow.ChildWorkflowCancellationType.ABANDON,
                search_attributes=TypedSearchAttributes([SearchAttributePair(SA_NAMESPACE, ref.namespace),
                                                         SearchAttributePair(SA_NAME, ref.name),
                                                         SearchAttributePair(SA_PHASE, "Pending")]),
                static_summary=f"AgentRun {ref.namespace}/{ref.name}",
            )
        except WorkflowAlreadyStartedError:
            # The bridge started it (this tick looked gone to it), or it ran already (the tick of an earlier trigger in
            # the same second made it): the run goes on, or stays finished, unfollowed.
            return self._done(phase="Started")
        try:
            result: RunResult = await child
        except asyncio.CancelledError:
            # Replace (the next tick cancels this one) or a cancelled tick: the run goes, cleanup first.
            self._result.phase = "Replaced"
            await self._remove([RunName(namespace=ref.namespace, name=ref.name, uid=ref.uid)],
                               "its tick was cancelled (concurrencyPolicy Replace)")
            raise
        except ChildWorkflowError as e:
            if isinstance(e.cause, ApplicationError) and e.cause.type == RUN_FAILED:  # the run failed (it ended)
                return self._done(phase="Failed", error=e.cause.message)
            return self._done(phase="Deleted", error=str(e.cause or e))
        return self._done(phase=result.phase, error=result.error)

    async def _remove(self, runs: list[RunName], reason: str) -> None:
        await workflow.execute_activity_method(
            ScheduleActivities.remove_runs, RemoveRuns(runs=runs, reason=reason),
            summary=f"remove {', '.join(r.name for r in runs)}: {reason}",
            start_to_close_timeout=policies.REMOVE_RUNS_STEP, heartbeat_timeout=policies.REMOVE_RUNS_HEARTBEAT,
            retry_policy=policies.KUBE_RETRY)

    def _done(self, **fields: Any) -> TickResult:
        self._result = self._result.model_copy(update=fields)
        return self._result

    async def _act(self, fn: Any, arg: Any, summary: str) -> Any:
        try:
            return await workflow.execute_activity_method(
                fn, arg, summary=summary, start_to_close_timeout=policies.KUBE_CALL,
                schedule_to_close_timeout=policies.KUBE_STEP, retry_policy=policies.KUBE_RETRY)
        except ActivityError:
            self._result.error = f"{summary} failed"
            raise
