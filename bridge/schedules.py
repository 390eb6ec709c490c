"""SympoziumSchedule ⇒ Temporal Schedule (SPEC §6): the bridge's half of schedules.

Each schedule object is mirrored into exactly one Temporal Schedule whose ID comes from the
object's namespace, name and uid. Edits update it, `suspend` pauses it, deletion (held by our
finalizer) deletes it. An invalid cron or time zone sets `phase: Error` and leaves no Temporal
Schedule behind. The ticks themselves never pass through the bridge: Temporal starts
`ScheduledRunWorkflow` on a worker, so a tick happens exactly once however many bridges run.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.client import ScheduleSpec as TemporalSpec
from temporalio.service import RPCError, RPCStatusCode

from kube import Conflict, Kube, KubeError, NotFound, finalizer_added, finalizer_removed
from kube.resources import sympozium
from models.base import FieldProblem, parse
from models.names import SCHEDULE_FINALIZER, SCHEDULES
from models.schedule import (
    ScheduledTick,
    SchedulePlan,
    ScheduleRef,
    ScheduleSpec,
    ScheduleStatus,
    plan_schedule,
    temporal_schedule_id,
    tick_workflow_id,
)
from models.timestamps import rfc3339
from workflows.scheduled_run import ScheduledRunWorkflow

log = logging.getLogger("agentrun.bridge.schedules")
OVERLAP = {"Forbid": ScheduleOverlapPolicy.SKIP, "Allow": ScheduleOverlapPolicy.ALLOW_ALL,
           "Replace": ScheduleOverlapPolicy.CANCEL_OTHER}
# Temporal refuses catch-up windows shorter than this; shorter ones are still honoured by the tick.
MIN_TEMPORAL_CATCHUP = timedelta(seconds=10)


def ref_of(obj: dict[str, Any]) -> ScheduleRef:
    m = obj["metadata"]
    return ScheduleRef(namespace=m["namespace"], name=m["name"], uid=m["uid"])


def temporal_schedule(ref: ScheduleRef, plan: SchedulePlan, *, task_queue: str) -> Schedule:
    """The Temporal Schedule a validated SympoziumSchedule maps to."""
    tick = ScheduledTick(schedule=ref, timezone=plan.timezone, concurrency_policy=plan.overlap,
                         catchup_seconds=plan.catchup_seconds)
    spec = TemporalSpec(
        cron_expressions=[plan.cron] if plan.cron else [],
        intervals=[ScheduleIntervalSpec(every=timedelta(seconds=plan.every_seconds))] if plan.every_seconds else [],
        time_zone_name=plan.timezone,
    )
    policy = SchedulePolicy(overlap=OVERLAP[plan.overlap])
    if plan.catchup_seconds is not None:
        policy.catchup_window = max(MIN_TEMPORAL_CATCHUP, timedelta(seconds=plan.catchup_seconds))
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ScheduledRunWorkflow.run, tick, id=tick_workflow_id(ref), task_queue=task_queue,
            static_summary=f"tick of SympoziumSchedule {ref.namespace}/{ref.name}",
            static_details=f"kubectl get sympoziumschedule {ref.name} -n {ref.namespace} -o yaml"),
        spec=spec, policy=policy,
        state=ScheduleState(paused=plan.paused, note="spec.suspend is true" if plan.paused else ""),
    )


class ScheduleSync:
    def __init__(self, kube: Kube, temporal: Client, *, task_queue: str) -> None:
        self.kube = kube
        self.temporal = temporal
        self.task_queue = task_queue
        # (uid, generation) already mirrored by this process; status writes do not bump generation.
        self._synced: set[tuple[str, int]] = set()
        # The last seen version of every live schedule object, for the periodic resync.
        self._objects: dict[str, dict[str, Any]] = {}

    async def on_schedule(self, typ: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if not (meta.get("namespace") and meta.get("name") and meta.get("uid")):
            return
        ref = ref_of(obj)
        if typ == "DELETED" or meta.get("deletionTimestamp"):
            self._objects.pop(ref.uid, None)
            await self._delete(ref, obj if typ != "DELETED" else None)
            return
        self._objects[ref.uid] = obj
        key = (ref.uid, int(meta.get("generation") or 1))
        if key in self._synced:
            return
        if not await self._ensure_finalizer(obj):
            return  # changed or deleted since this version: the newer one arrives as its own event
        try:
            plan = plan_schedule(parse(ScheduleSpec, obj.get("spec") or {}, "spec"))
        except FieldProblem as p:
            # Nothing may tick for an invalid schedule, including an earlier valid version of it.
            await self._delete_temporal(ref)
            await self._write_status(ref, ScheduleStatus(phase="Error", message=str(p), next_run_time=None,
                                                         observed_generation=key[1]))
            self._synced.add(key)
            log.info("schedule %s/%s is invalid: %s", ref.namespace, ref.name, p)
            return
        schedule = temporal_schedule(ref, plan, task_queue=self.task_queue)
        sid = temporal_schedule_id(ref)
        status = ScheduleStatus.of(obj)
        never_ran = not status.last_run_time and not status.total_runs
        try:
            handle = await self.temporal.create_schedule(
                sid, schedule, trigger_immediately=plan.trigger_immediately and never_ran and not plan.paused)
            log.info("created Temporal Schedule %s", sid)
        except ScheduleAlreadyRunningError:
            handle = self.temporal.get_schedule_handle(sid)

            def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=schedule)

            await handle.update(replace)
            log.info("updated Temporal Schedule %s", sid)
        desc = await handle.describe()
        times = desc.info.next_action_times
        await self._write_status(ref, ScheduleStatus(
            phase="Suspended" if plan.paused else "Active", message=None,
            next_run_time=rfc3339(times[0]) if times and not plan.paused else None, observed_generation=key[1]))
        self._synced.add(key)

    async def resync(self, interval: float) -> None:
        """Keep status and Temporal in line between events: `nextRunTime` moves on after ticks that
        created no run (skipped by Forbid), and a Temporal Schedule removed behind our back (or a
        Temporal server that lost its state) is recreated from the object."""
        while True:
            await asyncio.sleep(interval)
            for uid, obj in list(self._objects.items()):
                try:
                    await self._resync_one(uid, obj)
                except (RPCError, KubeError) as e:
                    log.warning("resync of schedule %s/%s failed: %s", obj["metadata"]["namespace"],
                                obj["metadata"]["name"], e)

    async def _resync_one(self, uid: str, obj: dict[str, Any]) -> None:
        status = ScheduleStatus.of(obj)
        if status.phase not in ("Active", "Suspended"):
            return
        ref = ref_of(obj)
        try:
            desc = await self.temporal.get_schedule_handle(temporal_schedule_id(ref)).describe()
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            log.info("Temporal Schedule of %s/%s is missing; recreating it", ref.namespace, ref.name)
            self._synced.discard((uid, int(obj["metadata"].get("generation") or 1)))
            await self.on_schedule("MODIFIED", obj)
            return
        times = desc.info.next_action_times
        paused = desc.schedule.state.paused
        next_run = rfc3339(times[0]) if times and not paused else None
        if next_run != status.next_run_time:
            await self._write_status(ref, ScheduleStatus(next_run_time=next_run))

    async def _delete(self, ref: ScheduleRef, obj: dict[str, Any] | None) -> None:
        await self._delete_temporal(ref)
        if obj is None:
            return
        patch = finalizer_removed(obj["metadata"], SCHEDULE_FINALIZER)
        if patch is None:
            return
        try:
            await sympozium(self.kube, SCHEDULES).patch(
                ref.namespace, ref.name, patch,
                action=f"release SympoziumSchedule {ref.namespace}/{ref.name}")
            log.info("released schedule %s/%s", ref.namespace, ref.name)
        except (NotFound, Conflict):
            pass  # gone, or changed meanwhile: the newer version arrives as its own event

    async def _delete_temporal(self, ref: ScheduleRef) -> None:
        try:
            await self.temporal.get_schedule_handle(temporal_schedule_id(ref)).delete()
            log.info("deleted Temporal Schedule %s", temporal_schedule_id(ref))
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise

    async def _ensure_finalizer(self, obj: dict[str, Any]) -> bool:
        """The finalizer on this version of the object; False when the object changed or went meanwhile."""
        m = obj["metadata"]
        patch = finalizer_added(m, SCHEDULE_FINALIZER)
        if patch is None:
            return True
        try:
            await sympozium(self.kube, SCHEDULES).patch(
                m["namespace"], m["name"], patch,
                action=f"add finalizer to SympoziumSchedule {m['namespace']}/{m['name']}")
        except (Conflict, NotFound):
            return False
        return True

    async def _write_status(self, ref: ScheduleRef, status: ScheduleStatus) -> None:
        """A merge patch of the fields `status` was given (None removes one)."""
        try:
            await sympozium(self.kube, SCHEDULES).patch_status(
                ref.namespace, ref.name, {"status": status.fields()},
                action=f"write status of SympoziumSchedule {ref.namespace}/{ref.name}")
        except NotFound:
            pass
