"""The Temporal Schedule that prunes run history (SPEC §6), kept in line with the settings.

Pruning runs from a Schedule rather than a loop in the bridge: Temporal starts exactly one pass
per interval however many bridge replicas exist, and skips a tick while a pass still runs. The
leading bridge creates the Schedule, or updates it to the current settings (interval, N,
namespaces, task queue) when it already exists; `prune.enabled = false` removes it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from models.prune import PruneRequest
from workflows.prune import PruneHistoryWorkflow

if TYPE_CHECKING:
    from .settings import BridgeSettings

log = logging.getLogger("agentrun.bridge.prune")
# Temporal unreachable while taking the lead: try again with backoff, the bridge keeps working.
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
# A tick missed while Temporal was down still runs if it is at most this late (one pass is enough).
MIN_CATCHUP = timedelta(minutes=1)


def prune_schedule(settings: BridgeSettings) -> Schedule:
    p = settings.prune
    every = timedelta(seconds=p.interval_seconds)
    req = PruneRequest(keep=p.keep, namespaces=list(settings.namespaces))
    return Schedule(
        action=ScheduleActionStartWorkflow(
            PruneHistoryWorkflow.run, req, id=p.schedule_id, task_queue=settings.temporal.task_queue,
            static_summary=f"Prune AgentRun history to the newest {p.keep} terminal runs per Agent"),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=max(every, MIN_CATCHUP)),
        state=ScheduleState(note="managed by the agentrun bridge (AGENTRUN_PRUNE__*)"),
    )


async def ensure_prune_schedule(temporal: Client, settings: BridgeSettings) -> None:
    """Create the pruning Schedule, or update it to the current settings; delete it when disabled."""
    p = settings.prune
    handle = temporal.get_schedule_handle(p.schedule_id)
    if not p.enabled:
        try:
            await handle.delete()
            log.info("run-history pruning disabled: deleted schedule %s", p.schedule_id)
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
        return
    schedule = prune_schedule(settings)
    try:
        await temporal.create_schedule(p.schedule_id, schedule)
        log.info("created schedule %s (every %ss, keep %d)", p.schedule_id, p.interval_seconds, p.keep)
        return
    except ScheduleAlreadyRunningError:
        pass

    def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
        # An operator's pause (and its note) outlives bridge restarts; the rest follows the settings.
        schedule.state = current.description.schedule.state
        return ScheduleUpdate(schedule=schedule)

    await handle.update(update)
    log.info("updated schedule %s (every %ss, keep %d)", p.schedule_id, p.interval_seconds, p.keep)


async def keep_prune_schedule(temporal: Client, settings: BridgeSettings) -> None:
    """`ensure_prune_schedule` until it succeeds; failures are logged and retried, never fatal."""
    delay = RETRY_FIRST_SECONDS
    while True:
        try:
            await ensure_prune_schedule(temporal, settings)
            return
        except Exception:  # Temporal down or slow: the watches go on, the schedule is retried
            log.exception("could not ensure schedule %s; retrying in %.0fs", settings.prune.schedule_id, delay)
        await asyncio.sleep(delay)
        delay = min(RETRY_MAX_SECONDS, delay * 2)
