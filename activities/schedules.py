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
from kubernetes.client.rest import ApiException
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from models.agentrun import TERMINAL_PHASES
from models.schedule import (
    RemoveRuns,
    RunName,
    ScheduleRef,
    TickCreated,
    TickPlan,
    TickRecord,
    TickRequest,
    run_name,
    temporal_schedule_id,
)
from models.timestamps import rfc3339

from .errors import kube_error
from .kube import RateLimiter, kube_call

GROUP, VERSION = "sympozium.ai", "v1alpha1"
LABEL_SCHEDULE = "sympozium.ai/schedule"
LABEL_INSTANCE = "sympozium.ai/instance"
LABEL_TYPE = "sympozium.ai/type"
# Tells the bridge that the tick workflow starts this run's workflow itself (as its child).
ANNOTATION_TICK = "agentrun.dev/tick-workflow"
ANNOTATION_TICK_TIME = "agentrun.dev/tick-time"
SCHEDULE_GONE = "ScheduleGone"
GONE_POLL_SECONDS = 1.0


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _not_terminal(run: dict[str, Any]) -> bool:
    meta = run.get("metadata") or {}
    return not meta.get("deletionTimestamp") and (run.get("status") or {}).get("phase") not in TERMINAL_PHASES


class ScheduleActivities:
    def __init__(self, api: client.ApiClient, *, limiter: RateLimiter | None = None) -> None:
        self.custom = client.CustomObjectsApi(api)
        # Shared with the worker's other Kubernetes activities.
        self.limiter = limiter or RateLimiter(50.0, 100)

    async def _call(self, fn: Callable[..., Any], *args: Any, action: str, creating: bool = False,
                    **kwargs: Any) -> Any:
        try:
            return await kube_call(self.limiter, fn, *args, action=action, creating=creating, **kwargs)
        except ApiException as e:
            raise kube_error(e, action=action, creating=creating) from e

    async def _schedule(self, ref: ScheduleRef) -> dict[str, Any] | None:
        """The schedule object if it still is the one that ticked (same uid, not being deleted)."""
        try:
            obj: Any = await kube_call(self.limiter, self.custom.get_namespaced_custom_object, GROUP, VERSION,
                                       ref.namespace, "sympoziumschedules", ref.name,
                                       action=f"read SympoziumSchedule {ref.name}")
        except ApiException as e:
            if e.status == 404:
                return None
            raise kube_error(e, action=f"read SympoziumSchedule {ref.name}") from e
        meta = obj.get("metadata") or {}
        if meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
            return None
        return cast(dict[str, Any], obj)

    async def _runs_of(self, ref: ScheduleRef) -> list[dict[str, Any]]:
        out = await self._call(self.custom.list_namespaced_custom_object, GROUP, VERSION, ref.namespace, "agentruns",
                               label_selector=f"{LABEL_SCHEDULE}={ref.name}", action=f"list runs of schedule {ref.name}")
        runs = [r for r in out.get("items") or []
                if ((r.get("metadata") or {}).get("labels") or {}).get(LABEL_SCHEDULE) == ref.name
                and any(o.get("uid") == ref.uid for o in (r["metadata"].get("ownerReferences") or []))]
        return runs

    @activity.defn
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
    async def remove_runs(self, req: RemoveRuns) -> None:
        """Delete runs and wait until they are gone: their workflows clean up and release them first."""
        for r in req.runs:
            body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=r.uid) if r.uid else None)
            try:
                await kube_call(self.limiter, self.custom.delete_namespaced_custom_object, GROUP, VERSION,
                                r.namespace, "agentruns", r.name, body=body, action=f"delete AgentRun {r.name}")
            except ApiException as e:
                if e.status not in (404, 409):  # 409: the uid precondition failed, it is another object now
                    raise kube_error(e, action=f"delete AgentRun {r.name} ({req.reason})") from e
        pending = list(req.runs)
        while pending:
            still = []
            for r in pending:
                try:
                    obj: Any = await kube_call(self.limiter, self.custom.get_namespaced_custom_object, GROUP,
                                               VERSION, r.namespace, "agentruns", r.name,
                                               action=f"read AgentRun {r.name}")
                except ApiException as e:
                    if e.status == 404:
                        continue
                    raise kube_error(e, action=f"read AgentRun {r.name}") from e
                if not r.uid or obj["metadata"]["uid"] == r.uid:
                    still.append(r)
            pending = still
            if pending:
                activity.heartbeat(f"waiting for {', '.join(p.name for p in pending)} to be cleaned up")
                await asyncio.sleep(GONE_POLL_SECONDS)

    @activity.defn
    async def create_scheduled_run(self, req: TickRequest) -> TickCreated:
        """Create `<schedule>-<tick>` owned by the schedule, with the Agent's defaults (SPEC §6)."""
        ref = req.schedule
        sched = await self._schedule(ref)
        if sched is None:
            return TickCreated(skip_reason="the schedule no longer exists")
        spec = sched.get("spec") or {}
        name = run_name(ref.name, _parse(req.tick_time), req.timezone)
        labels = {LABEL_SCHEDULE: ref.name, LABEL_INSTANCE: str(spec.get("agentRef", "")),
                  LABEL_TYPE: str(spec.get("type") or "scheduled")}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentRun",
            "metadata": {
                "name": name, "namespace": ref.namespace, "labels": labels,
                "annotations": {ANNOTATION_TICK: req.tick_workflow_id, ANNOTATION_TICK_TIME: req.tick_time},
                "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "SympoziumSchedule",
                                     "name": ref.name, "uid": ref.uid, "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            # Only what the schedule says: everything else falls back to the Agent when the run resolves.
            "spec": {"agentRef": spec.get("agentRef", ""), "task": spec.get("task", "")},
        }
        obj: Any
        try:
            obj = await kube_call(self.limiter, self.custom.create_namespaced_custom_object, GROUP, VERSION,
                                  ref.namespace, "agentruns", body, action=f"create AgentRun {name}", creating=True)
        except ApiException as e:
            if e.status != 409:
                raise kube_error(e, action=f"create AgentRun {name}", creating=True) from e
            obj = await self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, ref.namespace,
                                   "agentruns", name, action=f"read AgentRun {name}")
            if not any(o.get("uid") == ref.uid for o in obj["metadata"].get("ownerReferences") or []):
                return TickCreated(skip_reason=f"an AgentRun named {name} exists and was not made by this schedule")
        return TickCreated(namespace=ref.namespace, name=name, uid=obj["metadata"]["uid"])

    @activity.defn
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
        for _attempt in range(5):
            sched = await self._schedule(ref)
            if sched is None:
                return
            status = sched.get("status") or {}
            total = int(status.get("totalRuns") or 0)
            if status.get("lastRunName") != req.run_name:
                total += 1
            patch = {"metadata": {"resourceVersion": sched["metadata"]["resourceVersion"]},
                     "status": {"lastRunTime": req.tick_time, "lastRunName": req.run_name, "totalRuns": total,
                                "nextRunTime": next_run}}
            try:
                await kube_call(self.limiter, self.custom.patch_namespaced_custom_object_status, GROUP, VERSION,
                                ref.namespace, "sympoziumschedules", ref.name, patch,
                                action=f"write status of SympoziumSchedule {ref.name}")
                return
            except ApiException as e:
                if e.status == 404:
                    return
                if e.status != 409:
                    raise kube_error(e, action=f"write status of SympoziumSchedule {ref.name}") from e
        raise ApplicationError(f"status of SympoziumSchedule {ref.name} kept changing; retrying", type="Conflict")

    def all(self) -> list[Callable[..., Any]]:
        return [self.plan_tick, self.remove_runs, self.create_scheduled_run, self.record_tick]
