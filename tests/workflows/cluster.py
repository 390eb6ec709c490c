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

from activities.events import RunEvent
from activities.kube import RUN_GONE
from activities.results import AgentOutcome, Metrics
from models.agentrun import Condition, ModelSpec
from models.resolve import ResolvedHook, ResolvedRun, RunRef
from models.slots import SlotLimit
from models.steps import (
    Cleanup,
    Component,
    DeleteJob,
    HookOutcome,
    JobFinished,
    JobRef,
    JobRequest,
    JobState,
    Resolution,
    ResultRequest,
    RunningHook,
    StartRun,
    StatusWrite,
)
from models.timestamps import rfc3339
from workflows.agent_run import AgentRunWorkflow


def hook(name: str, *, timeout: int = 60, gate: bool = False) -> ResolvedHook:
    return ResolvedHook(name=name, image="busybox", command=["true"], timeout_seconds=timeout, gate=gate)


def resolved_run(name: str = "r", *, uid: str = "", pre_run: list[ResolvedHook] | None = None,
                 post_run: list[ResolvedHook] | None = None, timeout: int = 600, gate_timeout: int = 600,
                 gate_default: str = "block", agent: str = "a") -> ResolvedRun:
    """A run as resolve_run returns it; each has its own uid (so its own workflow ID) unless told."""
    return ResolvedRun.model_validate({
        "ref": RunRef(namespace="ns", name=name, uid=uid or f"uid-{uuid.uuid4().hex[:12]}"), "agent": agent, "task": "say hi", "agent_id": agent,
        "session_key": "s", "system_prompt": "", "image": "agent:dev", "model": ModelSpec(provider="echo", model="echo"), "env": {},
        "timeout_seconds": timeout, "pre_run": pre_run or [], "post_run": post_run or [],
        "gate_default": gate_default, "gate_timeout_seconds": gate_timeout})


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
    deleted: bool = False
    finished: bool = False


@dataclass
class FakeCluster:
    """The cluster one run sees. `calls` lists (activity name, input) in the order they ran."""

    run: ResolvedRun | None
    problem: str | None = None
    gone: bool = False  # the run object no longer exists when the workflow starts
    fallback_seconds: int = 60
    slots: SlotLimit | None = None
    jobs: dict[str, JobScript] = field(default_factory=dict)  # by component
    hooks: dict[str, HookOutcome] = field(default_factory=dict)  # read_hook_outcome, by component
    agent: AgentOutcome = field(default_factory=lambda: AgentOutcome(
        status="success", response="hi there", metrics=Metrics(input_tokens=3, output_tokens=5)))
    calls: list[tuple[str, Any]] = field(default_factory=list)
    created: list[Job] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
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

    def status(self) -> dict[str, Any]:
        """The run's status as the writes so far left it (fields set, conditions upserted by type)."""
        out: dict[str, Any] = {}
        conds: dict[str, Condition] = {}
        for w in self.named("write_status"):
            out.update(w.status.model_dump(exclude_none=True, exclude={"conditions"}))
            conds.update({c.type: c for c in w.conditions})
        out["conditions"] = conds
        return out

    def phases(self) -> list[str]:
        return [w.status.phase for w in self.named("write_status") if w.status.phase]

    def job(self, component: Component) -> Job:
        return next(j for j in self.created if j.ref.component == component)

    # -- the activities ----------------------------------------------------------------------

    async def _called(self, name: str, arg: Any) -> None:
        self.calls.append((name, arg))
        if name in self.holds:
            self.reached[name].set()
            await self.holds[name].wait()

    def activities(self) -> list[Callable[..., Any]]:
        cluster = self

        @activity.defn(name="resolve_run")
        async def resolve_run(start: StartRun) -> Resolution:
            await cluster._called("resolve_run", start)
            if cluster.gone:
                raise ApplicationError("AgentRun ns/r no longer exists", type=RUN_GONE, non_retryable=True)
            return Resolution(resolved=cluster.run, problem=cluster.problem, agent_name="a",
                              fallback_poll_seconds=cluster.fallback_seconds, slots=cluster.slots)

        @activity.defn(name="write_status")
        async def write_status(req: StatusWrite) -> None:
            await cluster._called("write_status", req)

        @activity.defn(name="ensure_lifecycle_rbac")
        async def ensure_lifecycle_rbac(req: JobRequest) -> None:
            await cluster._called("ensure_lifecycle_rbac", req)

        @activity.defn(name="ensure_workspace")
        async def ensure_workspace(req: JobRequest) -> None:
            await cluster._called("ensure_workspace", req)

        @activity.defn(name="create_job")
        async def create_job(req: JobRequest) -> JobRef:
            await cluster._called("create_job", req)
            ref = JobRef(namespace=req.run.ref.namespace, name=f"{req.run.ref.name}-{req.component}",
                         uid=f"job-{next(cluster._uids)}", component=req.component)
            script = cluster.jobs.get(req.component, JobScript())
            job = Job(ref=ref, script=script, created=activity.info().current_attempt_scheduled_time,
                      finished=script.finishes)
            cluster.created.append(job)
            if script.finishes and script.signal:
                # The bridge's fast path: the Job's completion reaches the workflow as a signal.
                await activity.client().get_workflow_handle(activity.info().workflow_id or "").signal(
                    AgentRunWorkflow.job_finished, JobFinished(name=ref.name, uid=ref.uid, succeeded=script.succeeded))
            return ref

        @activity.defn(name="check_job")
        async def check_job(ref: JobRef) -> JobState:
            await cluster._called("check_job", ref)
            job = next(j for j in cluster.created if j.ref.uid == ref.uid)
            if job.deleted:
                return JobState(job=ref, missing=True, finished=True)
            state = JobState(job=ref, pod_name=f"{ref.name}-pod", finished=job.finished)
            if job.finished:
                state.succeeded, state.reason = job.script.succeeded, job.script.reason
            elif job.script.running_hook:
                state.running_hook = RunningHook(container=job.script.running_hook, started_at=rfc3339(job.created))
            return state

        @activity.defn(name="read_hook_outcome")
        async def read_hook_outcome(state: JobState) -> HookOutcome:
            await cluster._called("read_hook_outcome", state)
            return cluster.hooks.get(state.job.component, HookOutcome(ok=state.succeeded))

        @activity.defn(name="read_agent_result")
        async def read_agent_result(req: ResultRequest) -> AgentOutcome:
            await cluster._called("read_agent_result", req)
            if req.timed_out:
                return AgentOutcome(status="error", error="timeout", exit_code=124)
            return cluster.agent

        @activity.defn(name="delete_job")
        async def delete_job(req: DeleteJob) -> None:
            await cluster._called("delete_job", req)
            for j in cluster.created:
                if j.ref.uid == req.job.uid:
                    j.deleted = True

        @activity.defn(name="cleanup")
        async def cleanup(req: Cleanup) -> None:
            await cluster._called("cleanup", req)

        @activity.defn(name="release_run")
        async def release_run(start: StartRun) -> None:
            await cluster._called("release_run", start)

        @activity.defn(name="publish_event")
        async def publish_event(event: RunEvent) -> None:
            cluster.events.append(event)

        return [resolve_run, write_status, ensure_lifecycle_rbac, ensure_workspace, create_job, check_job,
                read_hook_outcome, read_agent_result, delete_job, cleanup, release_run, publish_event]


