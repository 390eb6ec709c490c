"""RunEventsWorkflow (workflow type "RunEvents"): a finished run's events that NATS has not taken yet (SPEC §5).

A run's workflow closes when its run ends, NATS or no NATS: a schedule's `Forbid` must not skip ticks for a run
that finished, nor `Replace` delete one, because the run's workflow still waits on events. The events still
unpublished when the run ends are handed to this workflow, started by the run's workflow with parent close policy
ABANDON so it outlives it; it publishes each event with its fixed message ID for up to an hour (the same budget
a run's own retries had), and NATS JetStream drops a duplicate, so each event arrives once.

Deterministic: publishing is an activity.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.events import EventActivities
    from models.events import RunEvent

    from . import policies


async def publish(event: RunEvent) -> bool:
    """One event, retried on its own within its budget; whether NATS took it (a give-up is logged, not raised)."""
    try:
        await workflow.execute_activity_method(
            EventActivities.publish_event, event, summary=f"event {event.topic}",
            start_to_close_timeout=policies.EVENT_CALL, schedule_to_close_timeout=policies.EVENT_BUDGET,
            retry_policy=policies.EVENT_RETRY)
        return True
    except (ActivityError, asyncio.CancelledError):  # given up, or stopped (the run hands it on: run_record.py)
        workflow.logger.warning("event %s could not be published", event.message_id)
        return False


def events_workflow_id(run_workflow_id: str) -> str:
    """The one RunEvents workflow of a run's workflow (a run's workflow ID names one execution: it has its uid)."""
    return f"{run_workflow_id}/events"


@workflow.defn(name="RunEvents")
class RunEventsWorkflow:
    @workflow.run
    async def run(self, events: list[RunEvent]) -> int:
        """Publish every event (concurrently, in their own retries); how many NATS took."""
        taken = await asyncio.gather(*(publish(e) for e in events))
        return sum(taken)
