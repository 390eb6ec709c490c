"""The Kubernetes side of a run: every I/O step of AgentRunWorkflow, as a thin facade over the helpers that own it.

- activities/run_object.py: the AgentRun itself (read and resolved, its finalizer, status writes, verdict
  annotations, its parent);
- activities/run_made.py: what a run made (RBAC, accounts, the input Secret, the workspace, Jobs) and its removal;
- activities/job_reader.py: reading Jobs, pods, logs and outcomes (from the worker's shared view where it can);
- activities/kube_v1.py: the steps only the first workflow version calls, mixed in here, to be deleted with it.

Each activity is idempotent under retry: objects have deterministic names, a create that finds the object already
there adopts it (after checking it belongs to this run), and a delete that finds nothing is done. Calls go through
the access layer (kube/): one rate limit per worker, typed errors, and `kube_activity` turns what escapes an activity
into a retryable or non-retryable `ApplicationError` in one place (activities/errors.py). Activity names and payloads
are the workflows' contract (recorded histories replay against them): they never change here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client
from temporalio import activity
from temporalio.exceptions import ApplicationError

from kube import Kube, KubeError, NotFound
from kube.informer import Informer
from models import run_logs
from models.agentrun import AgentRunStatus
from models.approvals import TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION
from models.events import RunEvent
from models.names import ANNOTATION_GATE_FROM, job_name
from models.resolve import RunRef
from models.run import Phase, StatusUpdate
from models.steps import (
    BeginRun,
    CleanUp,
    DeleteJob,
    JobRef,
    JobReport,
    JobStarted,
    JobState,
    ObserveJob,
    ParkAgent,
    Parked,
    Published,
    Resolution,
    StartJob,
    StartRun,
    StatusChange,
)

from .errors import application_error, kube_activity
from .events import EventActivities
from .job_reader import JobReader, see_pod
from .kube_v1 import KubeActivitiesV1
from .pricing import PriceSource
from .run_made import RunMade
from .run_object import RUN_GONE, RunObject


class KubeActivities(KubeActivitiesV1):
    def __init__(self, api: client.ApiClient, *, default_image: str, fallback_poll_seconds: int = 60,
                 qps: float = 50.0, burst: int = 100, events: EventActivities | None = None,
                 informer: Informer | None = None, keep_log_bytes: int = run_logs.DEFAULT_KEEP_LOG_BYTES,
                 agent_restarts: int = 0, tools_image: str = "", prices: PriceSource | None = None,
                 agent_otlp_endpoint: str = "") -> None:
        self.kube = Kube(api, qps=qps, burst=burst)
        self.api = api
        # The worker's shared view of Jobs, pods, Agents and policies: looks are answered from it where it can.
        self.informer = informer
        # Steps publish the run events they are handed (without a NATS URL, publishing does nothing).
        self.events = events or EventActivities(None)
        self.run = RunObject(self.kube, default_image=default_image, fallback_poll_seconds=fallback_poll_seconds,
                             informer=informer)
        self.made = RunMade(self.kube)
        self.jobs = JobReader(self.kube, informer=informer, prices=prices, keep_log_bytes=keep_log_bytes)
        # How often a run's agent is started again after its pod was lost (its runs keep a journal for it).
        self.agent_restarts = agent_restarts
        # The tools container's image (where a run without a sandbox runs its commands); "": the run's own image.
        self.tools_image = tools_image
        # Where the agents of Agents whose observability names no endpoint export their spans ("" : nowhere).
        self.agent_otlp_endpoint = agent_otlp_endpoint

    @property
    def prices(self) -> PriceSource:
        """What agents' tokens cost (activities/pricing.py); the worker sets its own after construction."""
        return self.jobs.prices

    @prices.setter
    def prices(self, prices: PriceSource) -> None:
        self.jobs.prices = prices

    async def _write_status(self, ref: RunRef, update: StatusUpdate, *, first: bool = False) -> None:
        await self.run.write_status(ref, update, first=first)

    # -- the steps of AgentRunWorkflow (type "AgentRun"): fewer, fatter activities ---------------------

    @activity.defn
    @kube_activity
    async def begin_run(self, req: BeginRun) -> Resolution:
        """Read the run, add the finalizer, resolve the spec against its Agent and policy, and write Pending."""
        resolution = await self.run.resolve(StartRun(ref=req.ref, resource_version=req.resource_version,
                                                     finalizers=req.finalizers))
        if resolution.resolved is not None:
            # Fixed with the rest of the run's input: a run's restarts (and so its journal and workspace) and its
            # tools container's image never change in flight, whatever the worker's settings become.
            resolution.resolved.agent_restarts = self.agent_restarts
            resolution.resolved.tools_image = self.tools_image
            obs = resolution.resolved.observability
            if obs is not None and not obs.otlp_endpoint and self.agent_otlp_endpoint:
                obs.otlp_endpoint = self.agent_otlp_endpoint
        status = AgentRunStatus(phase=Phase.PENDING, started_at=req.started_at, workflow_id=req.workflow_id,
                                observed_generation=req.ref.generation, lifecycle_author=resolution.lifecycle_author,
                                trace_id=req.trace_id or None)
        await self.run.write_status(req.ref, StatusUpdate(status=status), first=True)
        return resolution

    @activity.defn
    @kube_activity
    async def start_job(self, req: StartJob) -> JobStarted:
        workspace = None
        if req.prepare:
            await self.made.ensure_lifecycle_rbac(req.job)
            if req.job.run.has_workspace:
                workspace = await self.made.ensure_workspace(req.job)
        version = None
        if req.clear_verdict:
            job, version = await self._start_gate_job(req)
        else:
            job = (await self.made.create_job(req.job))[0]
        if req.status is not None:
            await self.run.write_status(req.job.run.ref, req.status)
        return JobStarted(job=job, run_version=version, workspace_uid=workspace,
                          unpublished=await self._publish(req.events))

    async def _start_gate_job(self, req: StartJob) -> tuple[JobRef, str]:
        """The gate's Job, after clearing any earlier verdict annotation. The run's version from that moment
        is kept on the Job, so a retried step that finds the Job made reads it back instead of clearing
        again (which could remove the gate hook's own verdict)."""
        if activity.info().attempt > 1:
            try:
                job = await self.kube.call(self.kube.batch.read_namespaced_job,
                                           job_name(req.job.run.ref.name, "post-run", req.job.attempt),
                                           req.job.run.ref.namespace, action="read the gate's Job")
                if (job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) is not None:
                    ref, job = await self.made.create_job(req.job)  # adopts it (and checks it is this run's)
                    return ref, str((job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) or "")
            except NotFound:
                pass
        version = await self.run.clear_verdict(req.job.run.ref)
        ref, job = await self.made.create_job(req.job, {ANNOTATION_GATE_FROM: version})
        return ref, str((job.metadata.annotations or {}).get(ANNOTATION_GATE_FROM) or version)

    @activity.defn
    @kube_activity
    async def observe_job(self, req: ObserveJob) -> JobReport:
        """Where the Job is, and once it is over (or given up), what it produced: one read of its pod,
        plus its log where the outcome is in it. With the bridge's signal the Job itself is not read."""
        job = req.job
        if req.signal is not None:
            state = JobState(job=job, finished=True, succeeded=req.signal.succeeded, reason=req.signal.reason)
        elif req.timed_out:
            state = JobState(job=job)
        else:
            state = self.jobs.seen_state(job) or await self.jobs.job_state(job)
        pod = None if state.missing else await self.jobs.pod(job, over=state.finished or req.timed_out,
                                                             finished=state.finished)
        see_pod(state, pod)
        report = JobReport(state=state)
        if state.finished or req.timed_out:
            if job.component == "agent-run":
                # Past its activeDeadlineSeconds the Job controller killed the agent: a timeout too.
                timed_out = req.timed_out or state.reason == "DeadlineExceeded"
                report.agent = await self.jobs.agent_outcome(job, pod, timed_out=timed_out, pricing=req.pricing)
            else:
                report.hook = await self.jobs.hook_outcome(state, pod)
        return report

    @activity.defn
    @kube_activity
    async def delete_job(self, req: DeleteJob) -> None:
        """Stop a Job (a timeout, a verdict given while the gate hook still runs): its pods go with it, so the tail of
        their logs is kept first, as the cleanup keeps the others'."""
        try:
            await self.jobs.keep_stopped_logs(req.job)
        except Exception:  # a log is never worth a step that fails and retries
            activity.logger.exception("the logs of Job %s/%s are not kept", req.job.namespace, req.job.name)
        await self.made.delete(self.kube.batch.delete_namespaced_job, req.job.name, req.job.namespace,
                               propagation="Foreground" if req.foreground else "Background", uid=req.job.uid)

    @activity.defn
    @kube_activity
    async def park_agent(self, req: ParkAgent) -> Parked:
        """The agent parked until people decide (SPEC §10): its Jobs' logs kept and the Jobs deleted, and this step
        returns only once no pod of the run is left (the agent's, its sidecars', the tools container's, a hook's);
        then a tool-verdict annotation written before the wait is cleared (the run's version after that tells a
        decision by annotation from an older one), and the status that shows the waiting calls is written: nobody
        can see them as waiting while a pod of the run still exists."""
        ref = req.ref
        try:
            await self.jobs.keep_logs(ref, req.jobs)
        except Exception:  # a log is never worth a step that fails and retries
            activity.logger.exception("the logs of AgentRun %s/%s are not kept", ref.namespace, ref.name)
        for job in req.jobs:
            await self.made.delete(self.kube.batch.delete_namespaced_job, job.name, ref.namespace,
                                   propagation="Foreground", uid=job.uid)
        await self.made.pods_gone(ref)
        version = await self.run.clear_verdict(ref, (TOOL_VERDICT_ANNOTATION, TOOL_VERDICT_BY_ANNOTATION),
                                               "tool-verdict")
        await self.run.write_status(ref, req.status)
        return Parked(run_version=version, unpublished=await self._publish(req.events))

    @activity.defn
    @kube_activity
    async def update_status(self, req: StatusChange) -> Published:
        await self.run.write_status(req.ref, req.update, first=req.first)
        return Published(unpublished=await self._publish(req.events))

    @activity.defn
    @kube_activity
    async def clean_up(self, req: CleanUp) -> Published | None:
        """The run's final status and events (`req.final`), then remove what the run made (only what it made),
        then let the object go. A final status that cannot be written for good (the object is gone, or refused) is
        logged and the cleanup goes on: the run's finalizer must never stay for it."""
        ns, name, uid = req.ref.namespace, req.ref.name, req.ref.uid
        published: Published | None = None
        if req.final is not None:
            try:
                await self.run.write_status(req.ref, req.final.update, first=req.final.first)
            except (ApplicationError, KubeError) as e:
                failure = e if isinstance(e, ApplicationError) else application_error(e)
                if not failure.non_retryable:
                    raise
                activity.logger.warning("the final status of AgentRun %s/%s was not written: %s", ns, name, failure)
            published = Published(unpublished=await self._publish(req.final.events))
        if req.run is not None:
            if req.kill:
                await self.made.delete_jobs_of(ns, name, uid)  # a cut-short step may have made one not yet known
            else:
                # Before the Jobs go (their pods with them): the run is not being deleted, so its logs outlive them.
                try:
                    await self.jobs.keep_logs(req.ref, req.jobs)
                except Exception:  # a log is never worth a cleanup that fails and retries: the finalizer must go
                    activity.logger.exception("the logs of AgentRun %s/%s are not kept", ns, name)
            await self.made.remove(req)
        await self.run.release(req.ref)
        return published

    async def _publish(self, events: list[RunEvent]) -> list[RunEvent]:
        """Publish in order; from the first one NATS did not take, the rest go back to the workflow."""
        for i, event in enumerate(events):
            try:
                await self.events.publish_event(event)
            except ApplicationError as e:
                if e.non_retryable:
                    activity.logger.warning("event %s dropped: %s", event.message_id, e)
                    continue
                activity.logger.info("event %s not published now (%s); the workflow retries it", event.message_id, e)
                return events[i:]
        return []

    def all(self) -> list[Callable[..., Any]]:
        return [self.resolve_run, self.write_status, self.ensure_lifecycle_rbac, self.ensure_workspace,
                self.create_job, self.check_job, self.read_hook_outcome, self.read_agent_result,
                self.delete_job, self.cleanup, self.release_run,
                self.begin_run, self.start_job, self.observe_job, self.update_status, self.park_agent, self.clean_up]


__all__ = ["RUN_GONE", "AgentRunStatus", "KubeActivities"]
