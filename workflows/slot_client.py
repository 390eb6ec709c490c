"""A run's side of maxConcurrent: ask the Agent's slots workflow for a slot, wait in line, give it back.

Used by AgentRunWorkflow; the slots workflow itself is workflows/agent_slots.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from activities.slots import SlotActivities
    from models.resolve import RunRef
    from models.slots import (
        RELEASE_SIGNAL,
        SlotLimit,
        SlotNotice,
        SlotRelease,
        SlotRequest,
        slots_workflow_id,
    )

    from . import policies
    from .awaiting import wait_until

# Told when the run's place changes: (message, position); position 0 once the slot is granted after a wait.
OnQueue = Callable[[str, int], Awaitable[None]]


class SlotClient:
    def __init__(self) -> None:
        self.notice: SlotNotice | None = None
        self._slots_wid: str | None = None  # the Agent's slots workflow, once asked (until given back)

    def take(self, notice: SlotNotice, *, reask: bool = False) -> None:
        """Keep the newest notice; a granted slot is never taken back.

        The reply to asking again is taken even if its `seq` is lower: a slots workflow that was
        terminated and started afresh counts from 1 again."""
        old = self.notice
        if old is None or (not old.granted and (reask or notice.seq > old.seq)):
            self.notice = notice

    async def wait(self, ref: RunRef, agent: str, limit: SlotLimit, *, check_seconds: int, on_queue: OnQueue) -> None:
        """Wait, durably and in creation order, for one of `agent`'s slots. `check_seconds`: how often the
        slots workflow looks for holders that ended without giving their slot back."""
        req = SlotRequest(namespace=ref.namespace, agent=agent, workflow_id=workflow.info().workflow_id,
                          run_name=ref.name, created_at=limit.created_at, limit=limit.limit, policy=limit.policy,
                          check_seconds=check_seconds)
        # Set before asking: a run cancelled while asking still gives back whatever it was given.
        self._slots_wid = slots_workflow_id(req.namespace, req.agent)
        self.take(await self._ask(req))
        told = 0
        while True:
            notice = self.notice
            assert notice is not None
            if notice.granted:
                break
            if notice.position != told:
                told = notice.position
                await on_queue(f'waiting for a slot: Agent "{req.agent}" runs at most {notice.limit} at a time '
                               f'(maxConcurrent of SympoziumPolicy "{limit.policy}"); position {told} in the queue',
                               told)
            if not await wait_until(lambda n=notice: self.notice is not n,  # type: ignore[misc]
                                    seconds=policies.SLOT_REASK.total_seconds()):
                # No news for long: ask again (harmless), in case the slots workflow was terminated.
                self.take(await self._ask(req), reask=True)
        if told:
            await on_queue(f'slot granted: Agent "{req.agent}" runs at most {notice.limit} at a time', 0)

    async def _ask(self, req: SlotRequest) -> SlotNotice:
        notice: SlotNotice = await workflow.execute_activity_method(
            SlotActivities.acquire_slot, req, summary=f"ask for a slot of Agent {req.agent} (maxConcurrent {req.limit})",
            start_to_close_timeout=policies.SLOT_CALL, schedule_to_close_timeout=policies.SLOT_STEP,
            retry_policy=policies.SLOT_RETRY,
            # Deleted while asking: the answer lands before the slot is given back, so nothing is left behind.
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        return notice

    async def give_back(self) -> None:
        """Give the slot back, or leave the queue, exactly once; the Agent's next waiting run may start."""
        if self._slots_wid is None:
            return
        slots, self._slots_wid = self._slots_wid, None
        try:
            await workflow.get_external_workflow_handle(slots).signal(
                RELEASE_SIGNAL, SlotRelease(workflow_id=workflow.info().workflow_id))
        except FailureError as e:
            # Not running: nothing is held there (its check frees holders that are gone anyway).
            workflow.logger.info("slots workflow %s is not running (%s); nothing to give back", slots, e)
