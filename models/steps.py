"""Typed inputs and results of the AgentRun workflow, its activities and its signals.

Everything that crosses the workflow boundary is one of these (pydantic, with defaults on
new fields), never a loose dict: histories stay readable in the Temporal UI and replayable.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .agentrun import AgentRunStatus, Condition
from .approvals import AgentWait
from .events import RunEvent
from .names import Component
from .resolve import ResolvedRun, RunRef
from .run import StatusUpdate
from .slots import SlotLimit


class ModelTokens(BaseModel):
    """One model's calls and tokens, as the agent reported them (its result's `metrics.models`), and what the
    control plane priced them at."""

    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: str | None = None  # decimal USD; None: no known price


class Metrics(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    duration_ms: int = 0
    cached_input_tokens: int = 0  # of input_tokens, read from the provider's prompt cache
    models: list[ModelTokens] = Field(default_factory=list)
    # What these tokens cost (decimal USD), priced by the worker as the agent's outcome was read (models/pricing.py);
    # None: not priced (a model without a known price, or an outcome read before prices existed).
    cost_usd: str | None = None
    # The agent's active time across the containers of its attempt, as its journal counts it (SPEC §10: what the
    # run's timeout bounds); 0 where the agent did not say.
    active_ms: int = 0


class Pricing(BaseModel):
    """What the worker needs to price an agent's tokens: the run's provider, and its model for tokens the agent did
    not attribute to one."""

    provider: str = ""
    model: str = ""


class AgentOutcome(BaseModel):
    """What the agent run produced, as the workflow records it."""

    # "waiting": the agent parked (its container ended) until a person decides on `wait` (SPEC §10).
    status: Literal["success", "error", "skipped", "waiting"]
    response: str = ""
    error: str = ""
    exit_code: int = 0
    metrics: Metrics = Field(default_factory=Metrics)
    has_marker: bool = False
    cut_from: int = 0  # when the response or error was cut to fit RESULT_MAX_BYTES: its size before, in bytes
    # Why the agent's pod was lost before it reported a result (deleted, evicted, its node gone: results.lost_why);
    # "" for an agent that ended by itself. A lost agent may be started again, to continue from its journal.
    lost: str = ""
    wait: AgentWait | None = None  # status "waiting": what the agent waits for


# The most of an agent's response (or error) that enters a Temporal payload and status.result: well under
# Temporal's 2 MB payload limit and etcd's 1.5 MB object limit, with room for the rest of the status.
RESULT_MAX_BYTES = 256 * 1024


class StartRun(BaseModel):
    """The workflow's input: which run object to execute; with the version of it the bridge saw, so the
    first step can add its finalizer without reading the object first (it reads when that version is gone)."""

    ref: RunRef
    resource_version: str | None = None
    finalizers: list[str] = Field(default_factory=list)
    # The W3C traceparent of the trace the run belongs to (SPEC §12): where the bridge (or a schedule's tick)
    # started it. The workflow's spans join it ("" for workflows started before traces, or by hand).
    traceparent: str = ""


class Resolution(BaseModel):
    """The resolved spec (or why it is invalid), plus the worker settings the run will use."""

    resolved: ResolvedRun | None = None
    problem: str | None = None
    problem_is_policy: bool = False  # the problem is a SympoziumPolicy rule's refusal
    fallback_poll_seconds: int = 60
    agent_name: str = ""
    # Set when the Agent's policy caps concurrent runs (maxConcurrent): the run waits for a slot.
    slots: SlotLimit | None = None
    # Fields of the run, its Agent or policy with no effect here (models/compat.py), for the FieldsIgnored condition.
    ignored: list[str] = Field(default_factory=list)
    # Who wrote the lifecycle hooks the run executes (status.lifecycleAuthor): the run's creator for its own, else
    # its Agent's recorded author; None when unrecorded.
    lifecycle_author: str | None = None


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
    gate_only: bool = False  # the post-run Job of a gated run: the gate hook alone
    gate_verdict: str | None = None  # the post-gate Job: the gate's label, as GATE_VERDICT
    attempt: int = 1  # a retried run's attempt: its agent and gate Jobs have their own names
    task: str | None = None  # a retried attempt's task (the original, the rejected output, the feedback)
    restart: int = 0  # the agent started again after its pod was lost: its Job of this restart (names.job_name)
    deadline_seconds: int | None = None  # the agent Job's activeDeadlineSeconds when not the run's timeout
    # The W3C traceparent of the workflow's span for this Job (the agent's attempt, the hooks): TRACEPARENT in
    # every container of its pod ("" : none).
    traceparent: str = ""
    # The agent started again after a wait (SPEC §10): its Job of this resume (names.job_name), and AGENT_RESUME.
    resumed: int = 0
    resume: str | None = None


class JobRef(BaseModel):
    namespace: str
    name: str
    uid: str
    component: Component
    labelled: bool = False  # carries the run-uid label (Jobs made before that label existed do not)


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
    reason: str = ""  # the Failed condition's reason (DeadlineExceeded, BackoffLimitExceeded)


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


# -- the steps of AgentRunWorkflow (type "AgentRun"): fewer, fatter activities ------------------------
# Each step does its Kubernetes work, then publishes the run events handed to it (their IDs are the
# workflow's); events it could not publish come back in `unpublished`, and the workflow retries those
# alone, so NATS being down never fails or slows a step.


class BeginRun(BaseModel):
    """Read the run, its Agent and policy; add the finalizer; resolve; write Pending."""

    ref: RunRef
    workflow_id: str
    started_at: str
    resource_version: str | None = None  # as the bridge saw the object (StartRun)
    finalizers: list[str] = Field(default_factory=list)
    trace_id: str = ""  # the run's trace (status.traceID); "" : none


class StartJob(BaseModel):
    """Create one Job of the run (first, when `prepare`: the agent's account, lifecycle RBAC and workspace),
    then write `status` (needs no read) and publish `events`."""

    job: JobRequest
    prepare: bool = False
    status: StatusUpdate | None = None
    events: list[RunEvent] = Field(default_factory=list)
    # The gate starts: remove a verdict annotation written before it (it is no verdict), first; the run's
    # resourceVersion after that tells later annotation verdicts from older ones.
    clear_verdict: bool = False


class JobStarted(BaseModel):
    job: JobRef
    run_version: str | None = None  # with clear_verdict: the run's resourceVersion once the annotation is gone
    workspace_uid: str | None = None  # the workspace PVC's, when this step made (or found) it
    unpublished: list[RunEvent] = Field(default_factory=list)


class ObserveJob(BaseModel):
    """Where a Job is; once finished (the bridge's signal says so, or the Job does), what it produced.

    `timed_out`: the workflow gives up on the agent (its deadline): read what it said so far."""

    job: JobRef
    signal: JobFinished | None = None
    timed_out: bool = False
    hook_names: list[str] = Field(default_factory=list)
    # The agent's Job: how its tokens are priced (None: they are not, as for runs before prices existed).
    pricing: Pricing | None = None


class JobReport(BaseModel):
    state: JobState
    hook: HookOutcome | None = None  # a finished hook Job
    agent: AgentOutcome | None = None  # a finished (or given up) agent Job


class ParkAgent(BaseModel):
    """The agent parked (SPEC §10): keep the logs of the run's Jobs and delete them, so that no pod of the run exists
    while it waits (the activity returns once none is left); clear a tool-verdict annotation written before the wait
    (the run's resourceVersion after that tells later annotation decisions from older ones); then write `status`
    and publish `events`."""

    ref: RunRef
    jobs: list[JobRef] = Field(default_factory=list)
    status: StatusUpdate
    events: list[RunEvent] = Field(default_factory=list)


class Parked(BaseModel):
    run_version: str | None = None
    unpublished: list[RunEvent] = Field(default_factory=list)


class StatusChange(BaseModel):
    """Write status (no read first) and publish events."""

    ref: RunRef
    update: StatusUpdate
    events: list[RunEvent] = Field(default_factory=list)
    first: bool = False  # no status was written yet (the run failed before Pending): `status` is added whole


class Published(BaseModel):
    unpublished: list[RunEvent] = Field(default_factory=list)


class CleanUp(BaseModel):
    """Remove what the run made, then its finalizer: the Jobs the workflow knows of (all of the run's
    when `kill`, since a deletion can cut a step short), the workspace and the lifecycle RBAC."""

    ref: RunRef
    run: ResolvedRun | None = None
    jobs: list[JobRef] = Field(default_factory=list)
    keep_jobs: bool = False
    kill: bool = False
    workspace_uid: str | None = None  # known: deleted with it as a precondition, no read first
    # The run's final status and events, written and published first (the run's end costs one step, not two).
    final: StatusChange | None = None
