"""A scripted stand-in for the worker's activities, registered under their real names.

Workflow unit tests (test_agent_run_workflow.py) run AgentRunWorkflow on the SDK's time-skipping
test server with these activities instead of the Kubernetes ones, in the manner of
temporalio/samples-python `tests/sleep_for_days/workflow_test.py`. Each test scripts what the
cluster does (does a Job finish, does a hook keep running, what did the agent say) and then reads
back what the workflow asked for: the activity calls in order, the status it wrote, the events.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.kube import RUN_GONE
from models.agentrun import AgentRunStatus, Condition, ModelSpec
from models.events import RunEvent
from models.names import job_name
from models.resolve import ResolvedHook, ResolvedRetry, ResolvedRun, ResolvedToolApproval, RunRef
from models.run import StatusUpdate
from models.slots import SlotLimit
from models.steps import (
    AgentOutcome,
    BeginRun,
    CleanUp,
    DeleteJob,
    HookOutcome,
    JobFinished,
    JobRef,
    JobReport,
    JobRequest,
    JobStarted,
    JobState,
    Metrics,
    ObserveJob,
    ParkAgent,
    Parked,
    Published,
    Resolution,
    RunningHook,
    StartJob,
    StatusChange,
)
from models.timestamps import rfc3339
from workflows.agent_run import AgentRunWorkflow


def hook(name: str, *, timeout: int = 60, gate: bool = False) -> ResolvedHook:
    return ResolvedHook(name=name, image="busybox", command=["true"], timeout_seconds=timeout, gate=gate)


def resolved_run(name: str = "r", *, uid: str = "", pre_run: list[ResolvedHook] | None = None,
                 post_run: list[ResolvedHook] | None = None, timeout: int = 600, gate_timeout: int = 600,
                 gate_default: str = "block", agent: str = "a", retry: ResolvedRetry | None = None,
                 agent_restarts: int = 0, tool_approval: ResolvedToolApproval | None = None) -> ResolvedRun:
    """A run as resolve_run returns it; each has its own uid (so its own workflow ID) unless told."""
    return ResolvedRun.model_validate({
        "ref": RunRef(namespace="ns", name=name, uid=uid or f"uid-{uuid.uuid4().hex[:12]}"), "agent": agent, "task": "say hi", "agent_id": agent,
        "session_key": "s", "system_prompt": "", "image": "agent:dev", "model": ModelSpec(provider="echo", model="echo"), "env": {},
        "timeout_seconds": timeout, "pre_run": pre_run or [], "post_run": post_run or [],
        "gate_default": gate_default, "gate_timeout_seconds": gate_timeout, "retry": retry,
        "agent_restarts": agent_restarts, "tool_approval": tool_approval})


@dataclass
class JobScript:
    """What one Job of the run does once created."""

    finishes: bool = True  # reaches Complete or Failed on its own
    succeeded: bool = True
    reason: str = ""  # the Failed condition's reason (DeadlineExceeded, BackoffLimitExceeded)
    running_hook: str = ""  # the init container that runs (and, unless the Job finishes, never ends)
    signal: bool = True  # the bridge's job_finished signal arrives (else only the fallback check sees it)


@dataclass
class Job:
    ref: JobRef
    script: JobScript
    created: datetime
    attempt: int = 1
    deleted: bool = False
    finished: bool = False


@dataclass
class FakeCluster:
    """The cluster one run sees. `calls` lists (activity name, input) in the order they ran."""

    run: ResolvedRun | None
    problem: str | None = None
    problem_is_policy: bool = False
    gone: bool = False  # the run object no longer exists when the workflow starts
    fallback_seconds: int = 60
    slots: SlotLimit | None = None
    # By component; "<component>@<attempt>" scripts one attempt's Job of a retried run (else the component's).
    jobs: dict[str, JobScript] = field(default_factory=dict)
    hooks: dict[str, HookOutcome] = field(default_factory=dict)  # read_hook_outcome, by component
    agent: AgentOutcome = field(default_factory=lambda: AgentOutcome(
        status="success", response="hi there", metrics=Metrics(input_tokens=3, output_tokens=5)))
    agents: list[AgentOutcome] = field(default_factory=list)  # attempt N's outcome (the last for later ones)
    # The outcome of each agent container in the order their Jobs are created, whatever the attempt (the last for
    # later ones): an agent that parks (status waiting), then the one started again with the decisions, ...
    containers: list[AgentOutcome] = field(default_factory=list)
    # The pods of the first `lose` agent Jobs are lost (deleted) before their agent reports anything.
    lose: int = 0
    nats_down: bool = False  # steps cannot publish: their events come back for the workflow to retry
    fail_create: Exception | None = None  # start_job raises this
    fail_begin: Exception | None = None  # begin_run raises this (before it wrote Pending)
    fail_observe: Exception | None = None  # observe_job raises this
    run_version: int = 100  # the run's resourceVersion; the gate's step (clear_verdict) moves it on
    calls: list[tuple[str, Any]] = field(default_factory=list)
    created: list[Job] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)  # published, by a step or retried alone
    retried_events: list[RunEvent] = field(default_factory=list)  # published by publish_event (retried alone)
    # An activity named here waits (after being called) until the test releases it.
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    reached: dict[str, asyncio.Event] = field(default_factory=dict)
    _uids: itertools.count[int] = field(default_factory=itertools.count)

    # -- scripting from the test -------------------------------------------------------------

    def hold(self, name: str) -> None:
        self.holds[name] = asyncio.Event()
        self.reached[name] = asyncio.Event()

    def release(self, name: str) -> None:
        self.holds[name].set()

    def named(self, name: str) -> list[Any]:
        return [arg for n, arg in self.calls if n == name]

    def writes(self) -> list[StatusUpdate]:
        """Every status write, in order: Pending (begin_run), the ones made with a Job, the others."""
        out: list[StatusUpdate] = []
        for name, arg in self.calls:
            if name == "begin_run" and self.fail_begin is None:
                out.append(StatusUpdate(status=AgentRunStatus(phase="Pending", started_at=arg.started_at,
                                                              workflow_id=arg.workflow_id)))
            elif name == "start_job" and arg.status is not None:
                out.append(arg.status)
            elif name == "update_status":
                out.append(arg.update)
            elif name == "park_agent":
                out.append(arg.status)
            elif name == "clean_up" and arg.final is not None:  # the final status, written first by cleanup
                out.append(arg.final.update)
        return out

    def status(self) -> dict[str, Any]:
        """The run's status as the writes so far left it (fields set; conditions as last written)."""
        out: dict[str, Any] = {}
        conds: dict[str, Condition] = {}
        for w in self.writes():
            out.update(w.status.model_dump(exclude_none=True, exclude={"conditions"}))
            if w.conditions is not None:
                conds = {c.type: c for c in w.conditions}
        out["conditions"] = conds
        return out

    def phases(self) -> list[str]:
        return [w.status.phase for w in self.writes() if w.status.phase]

    def job_requests(self) -> list[JobRequest]:
        return [start.job for start in self.named("start_job")]

    def lost_jobs(self) -> list[Job]:
        """The agent Jobs whose pods are lost (`lose`)."""
        return [j for j in self.created if j.ref.component == "agent-run"][:self.lose]

    # -- the activities ----------------------------------------------------------------------

    async def _called(self, name: str, arg: Any) -> None:
        self.calls.append((name, arg))
        if name in self.holds:
            self.reached[name].set()
            await self.holds[name].wait()

    def activities(self) -> list[Callable[..., Any]]:
        cluster = self

        def published(events: list[RunEvent]) -> list[RunEvent]:
            if cluster.nats_down:
                return events
            cluster.events.extend(events)
            return []

        @activity.defn(name="begin_run")
        async def begin_run(req: BeginRun) -> Resolution:
            await cluster._called("begin_run", req)
            if cluster.gone:
                raise ApplicationError("AgentRun ns/r no longer exists", type=RUN_GONE, non_retryable=True)
            if cluster.fail_begin is not None:
                raise cluster.fail_begin
            return Resolution(resolved=cluster.run, problem=cluster.problem, problem_is_policy=cluster.problem_is_policy,
                              agent_name="a",
                              fallback_poll_seconds=cluster.fallback_seconds, slots=cluster.slots)

        @activity.defn(name="start_job")
        async def start_job(req: StartJob) -> JobStarted:
            await cluster._called("start_job", req)
            if cluster.fail_create is not None:
                raise cluster.fail_create
            version = None
            if req.clear_verdict:
                cluster.run_version += 1
                version = str(cluster.run_version)
            ref = JobRef(namespace=req.job.run.ref.namespace,
                         name=job_name(req.job.run.ref.name, req.job.component, req.job.attempt, req.job.restart,
                                       req.job.resumed),
                         uid=f"job-{next(cluster._uids)}", component=req.job.component)
            script = cluster.jobs.get(f"{req.job.component}@{req.job.attempt}",
                                      cluster.jobs.get(req.job.component, JobScript()))
            job = Job(ref=ref, script=script, created=activity.info().current_attempt_scheduled_time,
                      attempt=req.job.attempt, finished=script.finishes)
            cluster.created.append(job)
            if script.finishes and script.signal:
                # The bridge's fast path: the Job's completion reaches the workflow as a signal.
                await activity.client().get_workflow_handle(activity.info().workflow_id or "").signal(
                    AgentRunWorkflow.job_finished, JobFinished(name=ref.name, uid=ref.uid, succeeded=script.succeeded,
                                                               reason=script.reason))
            return JobStarted(job=ref, run_version=version, unpublished=published(req.events))

        @activity.defn(name="observe_job")
        async def observe_job(req: ObserveJob) -> JobReport:
            await cluster._called("observe_job", req)
            if cluster.fail_observe is not None:
                raise cluster.fail_observe
            ref = req.job
            job = next(j for j in cluster.created if j.ref.uid == ref.uid)
            if job.deleted:
                state = JobState(job=ref, missing=True, finished=True)
            else:
                state = JobState(job=ref, pod_name=f"{ref.name}-pod", finished=job.finished)
            if state.finished and not state.missing:
                state.succeeded, state.reason = job.script.succeeded, job.script.reason
            elif job.script.running_hook:
                state.running_hook = RunningHook(container=job.script.running_hook, started_at=rfc3339(job.created))
            report = JobReport(state=state)
            if req.timed_out or (state.finished and state.reason == "DeadlineExceeded"):
                report.agent = AgentOutcome(status="error", error="timeout", exit_code=124)
            elif state.finished and ref.component == "agent-run" and job in cluster.lost_jobs():
                report.agent = AgentOutcome(status="error", exit_code=143, lost="was deleted",
                                            error=f"the agent's pod {state.pod_name} of Job {ref.name} was deleted "
                                                  "before it reported a result")
            elif state.finished and ref.component == "agent-run" and cluster.containers:
                agents = [j for j in cluster.created if j.ref.component == "agent-run"]
                report.agent = cluster.containers[min(agents.index(job), len(cluster.containers) - 1)]
            elif state.finished and ref.component == "agent-run":
                report.agent = (cluster.agents[min(job.attempt, len(cluster.agents)) - 1] if cluster.agents
                                else cluster.agent)
            elif state.finished:
                report.hook = cluster.hooks.get(ref.component, HookOutcome(ok=state.succeeded))
            return report

        @activity.defn(name="update_status")
        async def update_status(req: StatusChange) -> Published:
            await cluster._called("update_status", req)
            return Published(unpublished=published(req.events))

        @activity.defn(name="delete_job")
        async def delete_job(req: DeleteJob) -> None:
            await cluster._called("delete_job", req)
            for j in cluster.created:
                if j.ref.uid == req.job.uid:
                    j.deleted = True

        @activity.defn(name="park_agent")
        async def park_agent(req: ParkAgent) -> Parked:
            await cluster._called("park_agent", req)
            for j in cluster.created:
                if any(j.ref.uid == k.uid for k in req.jobs):
                    j.deleted = True
            cluster.run_version += 1
            return Parked(run_version=str(cluster.run_version), unpublished=published(req.events))

        @activity.defn(name="clean_up")
        async def clean_up(req: CleanUp) -> Published | None:
            await cluster._called("clean_up", req)
            return Published(unpublished=published(req.final.events)) if req.final is not None else None

        @activity.defn(name="publish_event")
        async def publish_event(event: RunEvent) -> None:
            cluster.retried_events.append(event)
            cluster.events.append(event)

        return [begin_run, start_job, observe_job, update_status, delete_job, park_agent, clean_up, publish_event]
