"""Typed inputs and results of the AgentRun workflow, its activities and its signals.

Everything that crosses the workflow boundary is one of these (pydantic, with defaults on
new fields), never a loose dict: histories stay readable in the Temporal UI and replayable.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .agentrun import AgentRunStatus, Condition
from .names import Component
from .resolve import ResolvedRun, RunRef
from .slots import SlotLimit

__all__ = ["Component"]


class StartRun(BaseModel):
    """The workflow's input: which run object to execute."""

    ref: RunRef


class Resolution(BaseModel):
    """The resolved spec (or why it is invalid), plus the worker settings the run will use."""

    resolved: ResolvedRun | None = None
    problem: str | None = None
    fallback_poll_seconds: int = 60
    agent_name: str = ""
    # Set when the Agent's policy caps concurrent runs (maxConcurrent): the run waits for a slot.
    slots: SlotLimit | None = None


class StatusWrite(BaseModel):
    """Set the fields of `status` that are not None (others are left alone); conditions are upserted by type."""

    ref: RunRef
    status: AgentRunStatus
    conditions: list[Condition] = Field(default_factory=list)


class JobRequest(BaseModel):
    run: ResolvedRun
    component: Component
    workflow_id: str
    agent_exit_code: int = 0
    agent_result: str = ""


class JobRef(BaseModel):
    namespace: str
    name: str
    uid: str
    component: Component


class RunningHook(BaseModel):
    container: str
    started_at: str


class JobState(BaseModel):
    job: JobRef
    finished: bool = False
    succeeded: bool = False
    reason: str = ""  # the Job's Failed reason: DeadlineExceeded, BackoffLimitExceeded
    pod_name: str = ""
    running_hook: RunningHook | None = None
    missing: bool = False


class JobFinished(BaseModel):
    """Signal from the bridge: a Job of this run reached Complete or Failed."""

    name: str
    uid: str
    succeeded: bool


class HookOutcome(BaseModel):
    ok: bool
    failed_hook: str = ""
    exit_code: int = 0
    skip_reason: str | None = None
    message: str = ""


class ResultRequest(BaseModel):
    job: JobRef
    timed_out: bool = False


class Cleanup(BaseModel):
    run: ResolvedRun | None = None
    ref: RunRef
    keep_jobs: bool = False
    kill_jobs: bool = False


class DeleteJob(BaseModel):
    job: JobRef
    foreground: bool = True
