"""The Kubernetes side of a schedule tick (SPEC §6): decide, replace, create the run, record it.

Every step is idempotent under retry: the run's name is fixed by the tick time, a create that
finds the run already made by this schedule adopts it, and the schedule's `totalRuns` is only
counted when `lastRunName` changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from kubernetes import client
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from kube import Conflict, Kube, NotFound
from kube.resources import sympozium
from models import authorship
from models.agentrun import TERMINAL_PHASES
from models.names import (
    AGENTRUNS,
    ANNOTATION_TICK,
    ANNOTATION_TICK_TIME,
    API_VERSION,
    LABEL_INSTANCE,
    LABEL_SCHEDULE,
    LABEL_TYPE,
    SCHEDULES,
)
from models.schedule import (
    RemoveRuns,
    RunName,
    ScheduleRef,
    ScheduleStatus,
    TickCreated,
    TickPlan,
    TickRecord,
    TickRequest,
    run_name,
    schedule_agent,
    schedule_task,
    temporal_schedule_id,
)
from models.timestamps import rfc3339

from .errors import application_error, kube_activity

# Tells the bridge that the tick workflow starts this run's workflow itself (as its child).
SCHEDULE_GONE = "ScheduleGone"
GONE_POLL_SECONDS = 1.0


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _not_terminal(run: dict[str, Any]) -> bool:
    meta = run.get("metadata") or {}
    return not meta.get("deletionTimestamp") and (run.get("status") or {}).get("phase") not in TERMINAL_PHASES


class ScheduleActivities:
    def __init__(self, kube: Kube) -> None:
        # The worker's access layer, shared with its other Kubernetes activities (one rate limit).
        self.kube = kube

    async def _call(self, fn: Callable[..., Any], *args: Any, action: str, **kwargs: Any) -> Any:
        return await self.kube.call(fn, *args, action=action, **kwargs)

    async def _schedule(self, ref: ScheduleRef) -> dict[str, Any] | None:
        """The schedule object if it still is the one that ticked (same uid, not being deleted)."""
        try:
            obj: Any = await sympozium(self.kube, SCHEDULES).get(ref.namespace, ref.name,
                                                                 action=f"read SympoziumSchedule {ref.name}")
        except NotFound:
            return None
        meta = obj.get("metadata") or {}
        if meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
            return None
        return cast(dict[str, Any], obj)

    async def _runs_of(self, ref: ScheduleRef) -> list[dict[str, Any]]:
        out = await sympozium(self.kube, AGENTRUNS).list(
            ref.namespace, label_selector=f"{LABEL_SCHEDULE}={ref.name}",
            action=f"list runs of schedule {ref.name}")
        runs = [r for r in out.get("items") or []
                if ((r.get("metadata") or {}).get("labels") or {}).get(LABEL_SCHEDULE) == ref.name
                and any(o.get("uid") == ref.uid for o in (r["metadata"].get("ownerReferences") or []))]
        return runs

    @activity.defn
    @kube_activity
    async def plan_tick(self, req: TickRequest) -> TickPlan:
        """Name the tick's run and apply concurrencyPolicy: Forbid skips, Replace lists what to remove."""
        name = run_name(req.schedule.name, _parse(req.tick_time), req.timezone)
        if await self._schedule(req.schedule) is None:
            return TickPlan(run_name=name, skip_reason="the schedule no longer exists")
        if req.concurrency_policy == "Allow":
            return TickPlan(run_name=name)
        active = [r for r in await self._runs_of(req.schedule) if _not_terminal(r) and r["metadata"]["name"] != name]
        if not active:
            return TickPlan(run_name=name)
        names = sorted(r["metadata"]["name"] for r in active)
        if req.concurrency_policy == "Forbid":
            return TickPlan(run_name=name, skip_reason=f"concurrencyPolicy Forbid: {', '.join(names)} still running")
        return TickPlan(run_name=name, replace=[RunName(namespace=r["metadata"]["namespace"], name=r["metadata"]["name"],
                                                        uid=r["metadata"]["uid"]) for r in active])

    @activity.defn
    @kube_activity
    async def remove_runs(self, req: RemoveRuns) -> None:
        """Delete runs and wait until they are gone: their workflows clean up and release them first."""
        for r in req.runs:
            body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=r.uid) if r.uid else None)
            try:
                await sympozium(self.kube, AGENTRUNS).delete(r.namespace, r.name, body=body,
                                                             action=f"delete AgentRun {r.name} ({req.reason})")
            except (NotFound, Conflict):
                pass  # gone, or (the uid precondition failed) it is another object now
        pending = list(req.runs)
        while pending:
            still = []
            for r in pending:
                try:
                    obj: Any = await sympozium(self.kube, AGENTRUNS).get(r.namespace, r.name,
                                                                         action=f"read AgentRun {r.name}")
                except NotFound:
                    continue
                if not r.uid or obj["metadata"]["uid"] == r.uid:
                    still.append(r)
            pending = still
            if pending:
                activity.heartbeat(f"waiting for {', '.join(p.name for p in pending)} to be cleaned up")
                await asyncio.sleep(GONE_POLL_SECONDS)

    @activity.defn
    @kube_activity
    async def create_scheduled_run(self, req: TickRequest) -> TickCreated:
        """Create `<schedule>-<tick>` owned by the schedule, with the Agent's defaults (SPEC §6)."""
        ref = req.schedule
        sched = await self._schedule(ref)
        if sched is None:
            return TickCreated(skip_reason="the schedule no longer exists")
        spec = sched.get("spec") or {}
        name = run_name(ref.name, _parse(req.tick_time), req.timezone)
        agent = schedule_agent(spec)
        labels = {LABEL_SCHEDULE: ref.name, LABEL_INSTANCE: agent,
                  LABEL_TYPE: str(spec.get("type") or "scheduled")}
        # The run is its schedule's author's (models/authorship.py): its grants are checked against them at
        # admission, and they are its creator for separation of duties. A schedule written while no webhook recorded
        # an author gives its runs none: the admission webhook then stamps the worker itself.
        author = authorship.read(SCHEDULES, sched)
        body = {
            "apiVersion": API_VERSION, "kind": "AgentRun",
            "metadata": {
                "name": name, "namespace": ref.namespace, "labels": labels,
                "annotations": {ANNOTATION_TICK: req.tick_workflow_id, ANNOTATION_TICK_TIME: req.tick_time,
                                **(author.annotations(AGENTRUNS) if author is not None else {})},
                "ownerReferences": [{"apiVersion": API_VERSION, "kind": "SympoziumSchedule",
                                     "name": ref.name, "uid": ref.uid, "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            # Only what the schedule says: everything else falls back to the Agent when the run resolves.
            "spec": {"agentRef": agent, "task": schedule_task(spec)},
        }
        obj: Any
        try:
            obj = await sympozium(self.kube, AGENTRUNS).create(
                ref.namespace, body, action=f"create AgentRun {name}")
        except NotFound as e:
            raise application_error(e, creating=True) from e
        except Conflict:
            obj = await sympozium(self.kube, AGENTRUNS).get(ref.namespace, name, action=f"read AgentRun {name}")
            if not any(o.get("uid") == ref.uid for o in obj["metadata"].get("ownerReferences") or []):
                return TickCreated(skip_reason=f"an AgentRun named {name} exists and was not made by this schedule")
        return TickCreated(namespace=ref.namespace, name=name, uid=obj["metadata"]["uid"])

    @activity.defn
    @kube_activity
    async def record_tick(self, req: TickRecord) -> None:
        """Mirror the tick into the schedule's status: lastRunTime/Name, totalRuns, nextRunTime."""
        ref = req.schedule
        next_run: str | None = None
        try:
            desc = await activity.client().get_schedule_handle(temporal_schedule_id(ref)).describe()
            times = desc.info.next_action_times
            next_run = rfc3339(times[0]) if times and not desc.schedule.state.paused else None
        except RPCError:
            next_run = None  # the schedule was deleted meanwhile; the object is going too

        def ticked(sched: dict[str, Any]) -> dict[str, Any] | None:
            meta = sched.get("metadata") or {}
            if meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
                return None  # not the schedule that ticked any more
            status = ScheduleStatus.of(sched)
            total = status.total_runs + (status.last_run_name != req.run_name)
            tick = ScheduleStatus(last_run_time=req.tick_time, last_run_name=req.run_name, total_runs=total,
                                  next_run_time=next_run)
            sched["status"] = tick.merged_into(sched.get("status") or {})
            return sched

        try:
            await sympozium(self.kube, SCHEDULES).update_with_retry(
                (ref.namespace, ref.name), ticked, status=True,
                action=f"write status of SympoziumSchedule {ref.name}")
        except NotFound:
            return
        except Conflict as e:
            raise ApplicationError(f"status of SympoziumSchedule {ref.name} kept changing; retrying",
                                   type="Conflict") from e

    def all(self) -> list[Callable[..., Any]]:
        return [self.plan_tick, self.remove_runs, self.create_scheduled_run, self.record_tick]
