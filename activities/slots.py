"""The Temporal side of maxConcurrent: asking an Agent's slots workflow for a slot, and checking holders.

These talk to Temporal, not Kubernetes, with the worker's own client (`activity.client()`). The
slots workflow is created on demand by the first run that asks (update-with-start), on the task
queue of the worker that asked, so no process has to set it up beforehand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import WithStartWorkflowOperation, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from models.slots import (
    ACQUIRE_UPDATE,
    INVALID_SLOT_REQUEST,
    SLOTS_WORKFLOW,
    SlotCheck,
    SlotCheckResult,
    SlotNotice,
    SlotRequest,
    SlotsState,
    slots_workflow_id,
)


class SlotActivities:
    """Stateless: the client is the worker's, the task queue the one this activity runs on."""

    @activity.defn
    async def acquire_slot(self, req: SlotRequest) -> SlotNotice:
        """Ask for a slot (starting the Agent's slots workflow if it is not running): granted, or a place in line.

        Idempotent: the update ID is the run's workflow ID, and asking again while holding or
        waiting answers with the same slot or the current place."""
        wid = slots_workflow_id(req.namespace, req.agent)
        start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
            SLOTS_WORKFLOW,
            SlotsState(namespace=req.namespace, agent=req.agent, limit=req.limit, policy=req.policy,
                       check_seconds=req.check_seconds),
            id=wid,
            task_queue=activity.info().task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"maxConcurrent slots of Agent {req.namespace}/{req.agent}",
        )
        try:
            notice: SlotNotice = await activity.client().execute_update_with_start_workflow(
                ACQUIRE_UPDATE, req, start_workflow_operation=start, id=f"acquire/{req.workflow_id}",
                result_type=SlotNotice)
        except WorkflowUpdateFailedError as e:
            cause = e.cause
            if isinstance(cause, ApplicationError) and cause.type == INVALID_SLOT_REQUEST:
                raise ApplicationError(cause.message, type=INVALID_SLOT_REQUEST, non_retryable=True) from e
            raise  # e.g. the slots workflow was ending just then: the retry starts a new one
        activity.logger.info("slot of %s for %s: %s", wid, req.workflow_id,
                             "granted" if notice.granted else f"queued at position {notice.position}")
        return notice

    @activity.defn
    async def check_slot_holders(self, check: SlotCheck) -> SlotCheckResult:
        """Which holders' workflows are no longer running: terminated or timed out without giving their slot back."""
        client = activity.client()

        async def closed(wid: str) -> bool:
            try:
                desc = await client.get_workflow_handle(wid).describe()
            except RPCError as e:
                if e.status == RPCStatusCode.NOT_FOUND:
                    return True
                raise
            return desc.status != WorkflowExecutionStatus.RUNNING

        flags = await asyncio.gather(*(closed(w) for w in check.workflow_ids))
        return SlotCheckResult(closed=[w for w, gone in zip(check.workflow_ids, flags, strict=True) if gone])

    def all(self) -> list[Callable[..., Any]]:
        return [self.acquire_slot, self.check_slot_holders]
