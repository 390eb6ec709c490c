"""The activities only the first workflow version calls (`AgentRunWorkflowV1`, workflows/agent_run_v1.py): one
Kubernetes step per activity, as runs that started before the type "AgentRun" existed still call them.

They are mixed into `KubeActivities` (activities/kube.py), so the worker registers exactly the names and payloads it
always has and recorded histories replay; each is a thin call into the helpers the current version uses too
(activities/run_object.py, run_made.py, job_reader.py). This module goes, whole, with `agent_run_v1.py`, when the
last run of that version is gone: CONTRIBUTING.md, "Retiring a workflow version", says when and how.
"""

from __future__ import annotations

from temporalio import activity

from models.steps import (
    Cleanup,
    HookOutcome,
    JobRef,
    JobRequest,
    JobState,
    Resolution,
    ResultRequest,
    StartRun,
    StatusWrite,
)

from .errors import kube_activity
from .job_reader import JobReader, see_pod
from .results import AgentOutcome
from .run_made import RunMade
from .run_object import RunObject


class KubeActivitiesV1:
    """AgentRunWorkflowV1's steps; `KubeActivities` provides the helpers."""

    run: RunObject
    made: RunMade
    jobs: JobReader

    @activity.defn
    @kube_activity
    async def resolve_run(self, start: StartRun) -> Resolution:
        """Read the run, its Agent and policy; add our finalizer; resolve and validate the spec."""
        return await self.run.resolve(start)

    @activity.defn
    @kube_activity
    async def write_status(self, req: StatusWrite) -> None:
        """Write status through the status subresource; conditions are upserted by type, never duplicated."""
        await self.run.merge_status(req)

    @activity.defn
    @kube_activity
    async def ensure_lifecycle_rbac(self, req: JobRequest) -> None:
        await self.made.ensure_lifecycle_rbac(req)

    @activity.defn
    @kube_activity
    async def ensure_workspace(self, req: JobRequest) -> None:
        await self.made.ensure_workspace(req)

    @activity.defn
    @kube_activity
    async def create_job(self, req: JobRequest) -> JobRef:
        return (await self.made.create_job(req))[0]

    @activity.defn
    @kube_activity
    async def check_job(self, job: JobRef) -> JobState:
        state = await self.jobs.job_state(job)
        if not state.missing:
            see_pod(state, await self.jobs.pod_of(job))
        return state

    @activity.defn
    @kube_activity
    async def read_hook_outcome(self, state: JobState) -> HookOutcome:
        """Which hook failed (and how), or the preRun skip request."""
        return await self.jobs.hook_outcome(state, await self.jobs.pod_of(state.job))

    @activity.defn
    @kube_activity
    async def read_agent_result(self, req: ResultRequest) -> AgentOutcome:
        return await self.jobs.agent_outcome(req.job, await self.jobs.pod_of(req.job), timed_out=req.timed_out)

    @activity.defn
    @kube_activity
    async def cleanup(self, req: Cleanup) -> None:
        """Remove what the run created: Jobs (unless kept), the workspace PVC, the lifecycle RBAC."""
        await self.made.remove_all(req)

    @activity.defn
    @kube_activity
    async def release_run(self, start: StartRun) -> None:
        """Remove our finalizer, so a deleted run object goes away once cleanup is done."""
        await self.run.release_careful(start)


__all__ = ["KubeActivitiesV1"]
