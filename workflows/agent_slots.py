"""AgentSlotsWorkflow: the maxConcurrent slots of one Agent, as a durable first-come-first-served semaphore.

The queue has to outlive worker and server restarts and be shared by every worker, and a run
over the limit has to wait without holding a pod: a workflow per Agent (ID
`agentslots/<namespace>/<agent>`) gives all of that. The first run that asks starts it
(update-with-start, activities/slots.py); it ends after a while with nobody holding or waiting.

- A run asks with the `acquire` update and is answered at once: granted, or queued at position k.
  Waiters are served in the runs' creation order (arrival order within the same second).
- A waiting run receives `slot` signals: its new position while it is near the front, then its
  grant. The latest limit a run brought wins, so an edited policy takes effect (a lowered limit
  takes no slot back; it grants nothing until enough holders are done).
- A run gives its slot back, or leaves the queue, with the `release` signal from its cleanup.
- Nothing leaks: a notice that cannot be delivered (the run's workflow is gone) frees the place,
  and while slots are held a slow periodic check (an activity) frees the slots of holders whose
  workflows ended without releasing (terminated, say).

It continues as new, carrying its state, once its history grows past a bound, and it sets no
timer while nobody holds a slot except the one that ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.slots import SlotActivities
    from models.slots import (
        ACQUIRE_UPDATE,
        INVALID_SLOT_REQUEST,
        RELEASE_SIGNAL,
        SLOT_SIGNAL,
        SLOTS_WORKFLOW,
        SlotCheck,
        SlotCheckResult,
        SlotEntry,
        SlotNotice,
        SlotRelease,
        SlotRequest,
        SlotsState,
    )

    from . import policies
    from .awaiting import wait_until

# Waiters this near the front are told whenever their position changes; those further back keep
# the position they were told until they come this near (so a release costs a bounded number of signals).
POSITION_UPDATES = 20


@workflow.defn(name=SLOTS_WORKFLOW)
class AgentSlotsWorkflow:
    @workflow.init
    def __init__(self, state: SlotsState) -> None:
        # Set before any handler runs: update-with-start delivers the first `acquire` with the start.
        self._s = state
        self._changes = 0

    # -- handlers ------------------------------------------------------------------------------

    @workflow.query
    def state(self) -> SlotsState:
        return self._s

    @workflow.update(name=ACQUIRE_UPDATE)
    def acquire(self, req: SlotRequest) -> SlotNotice:
        s = self._s
        s.limit, s.policy, s.check_seconds = req.limit, req.policy, max(1, req.check_seconds)
        wid = req.workflow_id
        if self._find(wid) is None:
            s.arrivals += 1
            s.queue.append(SlotEntry(workflow_id=wid, run_name=req.run_name, created_at=req.created_at,
                                     arrival=s.arrivals))
            # Stable: runs created in the same second keep their arrival order.
            s.queue.sort(key=lambda e: (e.created_at, e.arrival))
        self._grant()
        s.outbox.pop(wid, None)  # the reply tells it
        self._changes += 1
        return self._notice(wid)

    @acquire.validator
    def _check_request(self, req: SlotRequest) -> None:
        if not req.workflow_id:
            raise ApplicationError("a slot request needs the run's workflow ID", type=INVALID_SLOT_REQUEST)
        if req.limit < 1:
            raise ApplicationError(f"maxConcurrent must be at least 1, got {req.limit}", type=INVALID_SLOT_REQUEST)

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, rel: SlotRelease) -> None:
        self._drop(rel.workflow_id)
        self._grant()
        self._changes += 1

    # -- run -------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: SlotsState) -> None:
        s = self._s
        next_check: datetime | None = None
        idle_until: datetime | None = None
        while True:
            await self._deliver()
            info = workflow.info()
            if info.get_current_history_length() >= s.max_history_events or info.is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(s)  # undelivered notices travel in the state
            now = workflow.now()
            if s.holders:
                idle_until = None
                next_check = next_check or now + timedelta(seconds=s.check_seconds)
                wake = next_check
            else:
                next_check = None
                idle = timedelta(seconds=s.idle_seconds) if s.idle_seconds is not None else policies.SLOTS_IDLE
                idle_until = idle_until or now + idle
                wake = idle_until
            if await wait_until(self._news(), seconds=max((wake - now).total_seconds(), 0.001)):
                continue
            if s.holders:
                next_check = None
                await self._check_holders()
            elif not s.queue and not s.outbox and workflow.all_handlers_finished():
                return  # idle: the next run that asks starts a new one

    # -- steps -----------------------------------------------------------------------------------

    def _news(self) -> Callable[[], bool]:
        """True once there is a notice to send or a handler changed anything since now."""
        seen = self._changes
        return lambda: bool(self._s.outbox) or self._changes != seen

    def _find(self, wid: str) -> SlotEntry | None:
        return next((e for e in (*self._s.holders, *self._s.queue) if e.workflow_id == wid), None)

    def _notice(self, wid: str) -> SlotNotice:
        s = self._s
        s.seq += 1
        holding = any(e.workflow_id == wid for e in s.holders)
        position = 0 if holding else 1 + next((i for i, e in enumerate(s.queue) if e.workflow_id == wid), -1)
        if not holding:
            s.told[wid] = position
        return SlotNotice(seq=s.seq, granted=holding, position=position, limit=s.limit, in_use=len(s.holders))

    def _grant(self) -> None:
        """Fill free slots from the front of the queue, then tell waiters near the front their new place."""
        s = self._s
        while s.queue and len(s.holders) < s.limit:
            entry = s.queue.pop(0)
            s.holders.append(entry)
            s.told.pop(entry.workflow_id, None)
            s.outbox[entry.workflow_id] = self._notice(entry.workflow_id)
        for i, entry in enumerate(s.queue[:POSITION_UPDATES]):
            if s.told.get(entry.workflow_id) != i + 1:
                s.outbox[entry.workflow_id] = self._notice(entry.workflow_id)

    def _drop(self, wid: str) -> None:
        s = self._s
        s.holders = [e for e in s.holders if e.workflow_id != wid]
        s.queue = [e for e in s.queue if e.workflow_id != wid]
        s.told.pop(wid, None)
        s.outbox.pop(wid, None)

    async def _deliver(self) -> None:
        """Send the pending notices; a run whose workflow is gone loses its slot or its place."""
        s = self._s
        while s.outbox:
            batch = list(s.outbox.items())
            s.outbox.clear()
            sent = await asyncio.gather(*(self._send(wid, notice) for wid, notice in batch))
            gone = [wid for (wid, _n), ok in zip(batch, sent, strict=True) if not ok]
            for wid in gone:
                self._drop(wid)
            if gone:
                self._grant()

    async def _send(self, wid: str, notice: SlotNotice) -> bool:
        try:
            await workflow.get_external_workflow_handle(wid).signal(SLOT_SIGNAL, notice)
        except FailureError as e:
            # The only way a signal to a run fails is that its workflow is not running any more.
            workflow.logger.info("run workflow %s is gone (%s): its %s is freed", wid, e,
                                 "slot" if notice.granted else "place in the queue")
            return False
        return True

    async def _check_holders(self) -> None:
        """Free the slots of holders whose workflows ended without giving them back."""
        s = self._s
        try:
            found: SlotCheckResult = await workflow.execute_activity_method(
                SlotActivities.check_slot_holders, SlotCheck(workflow_ids=[e.workflow_id for e in s.holders]),
                summary=f"are the {len(s.holders)} holder(s) still running?",
                start_to_close_timeout=policies.SLOT_CALL, schedule_to_close_timeout=policies.SLOT_CHECK_STEP,
                retry_policy=policies.SLOT_RETRY)
        except ActivityError as e:
            workflow.logger.warning("could not check the slot holders (%s); trying again at the next check", e)
            return
        for wid in found.closed:
            workflow.logger.warning("slot holder %s ended without giving its slot back: freed", wid)
            self._drop(wid)
        if found.closed:
            self._grant()
            self._changes += 1
