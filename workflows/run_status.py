"""What a step writes into the run's status: when its Job starts, and at the run's end (SPEC §3, §4).

AgentRunWorkflow writes the status without reading it first, so each write carries exactly the fields
its step changes; which fields those are is decided here, apart from the steps themselves, so that
the workflow reads as its steps. So is what else a Job's start carries: the Job's request, and the
step's summary in the Temporal UI. Pure: no I/O, no clock (times come in as arguments).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.agentrun import AgentRunStatus, AttemptRecord, Condition, GateStatus, TokenUsage
    from models.names import Component, job_name
    from models.resolve import ResolvedRun
    from models.run import Phase, StatusUpdate
    from models.steps import AgentOutcome, JobRequest


def job_request(run: ResolvedRun, component: Component, *, workflow_id: str, attempt: int, task: str | None,
                agent: AgentOutcome | None, gate_only: bool, after_gate: tuple[str, str] | None, restart: int = 0,
                deadline_seconds: int | None = None, resumed: int = 0, resume: str | None = None,
                traceparent: str = "") -> JobRequest:
    """The Job a step starts. `agent`: the agent's outcome, for postRun hooks; `gate_only`: the gate hook alone;
    `after_gate` = (label, final result): the other postRun hooks, once the gate is resolved; `restart`: the agent
    started again after its pod was lost, within `deadline_seconds`; `resumed`: started again after a wait, with the
    decisions `resume` (SPEC §10); `traceparent`: its pod's TRACEPARENT."""
    req = JobRequest(run=run, component=component, workflow_id=workflow_id, attempt=attempt, task=task,
                     traceparent=traceparent)
    if restart or resumed:
        req.restart, req.deadline_seconds = restart, deadline_seconds
    if resumed:
        req.resumed, req.resume = resumed, resume
    if agent is not None:
        # postRun hooks see the agent's exit code and text.
        req.agent_exit_code = agent.exit_code
        req.agent_result = agent.response if agent.status == "success" else agent.error
    if gate_only:
        req.gate_only = True
    if after_gate is not None:
        # The hooks after the gate see the final result and the verdict's label.
        req.gate_verdict, req.agent_result = after_gate
    return req


def job_summary(run: ResolvedRun, component: Component, attempt: int, *, gate_only: bool, prepare: bool,
                restart: int = 0, resumed: int = 0, restarts: int | None = None) -> str:
    """A Job's start as the Temporal UI names it: the agent's Job by its name (and which restart or resume it is),
    the gate's by its hook, the others by their hooks' count; `prepare`: the step makes the run's lifecycle RBAC and
    workspace first. `restarts`: the attempt's restarts in all (`restart` counts those since the last resume)."""
    if component == "agent-run":
        summary = f"agent Job {job_name(run.ref.name, component, attempt, restart, resumed)}"
        if restart:
            summary += f" (restart {restarts or restart} of {run.agent_restarts}, from its journal)"
        elif resumed:
            summary += f" (resumed with the decisions of wait {resumed}, from its journal)"
    elif component == "post-run" and gate_only:
        summary = f"gate hook {run.hooks_of(component, gate_only=True)[0].name}"
    else:
        summary = f"{component} Job with {len(run.hooks_of(component, gate_only=gate_only))} hook(s)"
    if prepare:
        summary = ("lifecycle RBAC, " if run.rbac else "") + ("workspace, " if run.has_workspace else "") + summary
    return summary


def job_status(phase: Phase | None, job: str, *, conditions: list[Condition], gate: GateStatus,
               attempt: int = 1, attempts: list[AttemptRecord] | None = None, with_retry: bool = False,
               pending_gate: GateStatus | None = None, pod: str | None = None, agent: AgentOutcome | None = None,
               gate_only: bool = False, after_gate: tuple[str, str] | None = None,
               restart: int = 0, resumed: AgentRunStatus | None = None,
               token_usage: TokenUsage | None = None) -> StatusUpdate | None:
    """The status a Job's start writes (None: none). `phase`: the phase the Job starts (Running for the agent,
    PostRunning for the first postRun Job); `job`: its name; `conditions`: every condition recorded so far;
    `gate`: the gate as it stands; `pending_gate`: the gate this Job starts; `with_retry`: the run has
    lifecycle.retry; `restart`: the agent's Job started again after its pod was lost (the attempt's restarts in
    all); `resumed`: started again after a wait, with what the wait's end changes (the decisions, the time waited);
    `token_usage`: the agent's usage, written as soon as it is known; other arguments as `job_request`'s."""
    status: AgentRunStatus | None = None
    write_conditions = False
    if resumed is not None:  # the run stays Running: its new Job, the decisions that resumed it, the time waited
        status = resumed.model_copy(update={"job_name": job})
        if restart:
            status.agent_restarts = restart
        write_conditions = True
    elif restart:  # the run stays Running: its new Job, how often it restarted, and why (AgentRestarted)
        status = AgentRunStatus(job_name=job, agent_restarts=restart)
        write_conditions = True
    elif phase == Phase.RUNNING:
        status = AgentRunStatus(phase=phase, job_name=job)
        if with_retry:  # the attempt starts: the status says which, and how the earlier ones ended
            status.attempt, status.attempts = attempt, attempts
        if attempt > 1:  # the last attempt's gate is no longer pending: it sent the attempt back
            status.gate = gate
            write_conditions = True
    elif phase == Phase.POST_RUNNING:
        status = AgentRunStatus(phase=phase, post_run_job_name=job, gate=pending_gate, pod_name=pod)
    if agent is not None:  # the status shows the agent's exit code from now
        status = status or AgentRunStatus()
        status.exit_code = agent.exit_code
    if token_usage is not None and (token_usage.input_tokens or token_usage.output_tokens):
        status = status or AgentRunStatus()
        status.token_usage = token_usage
    if gate_only:
        write_conditions = True  # e.g. a verdict refused before the gate
    if after_gate is not None:  # the gate is resolved: the status says so now
        status = status or AgentRunStatus()
        status.gate, status.gate_verdict = gate, after_gate[0]
        write_conditions = True
    if status is None:
        return None
    return StatusUpdate(status=status, conditions=conditions if write_conditions else None)


def final_status(phase: Phase, *, completed_at: str, workflow_id: str, result: str | None = None,
                 error: str | None = None, exit_code: int | None = None, gate: GateStatus | None = None,
                 pod: str | None = None, attempt: int = 1, attempts: list[AttemptRecord] | None = None,
                 token_usage: TokenUsage | None = None, active_ms: int | None = None,
                 waited_ms: int | None = None) -> AgentRunStatus:
    """The run's last status. `attempts`: the attempts kept, once a run with lifecycle.retry had one decided;
    a token usage of nothing is left out; `active_ms` and `waited_ms` (SPEC §10), once an agent ran."""
    status = AgentRunStatus(phase=phase, completed_at=completed_at, workflow_id=workflow_id, result=result,
                            error=error, exit_code=exit_code, gate=gate, gate_verdict=gate.state if gate else None,
                            pod_name=pod, active_ms=active_ms, waited_ms=waited_ms)
    if attempts:
        status.attempt, status.attempts = attempt, attempts
    if token_usage is not None and (token_usage.input_tokens or token_usage.output_tokens):
        status.token_usage = token_usage
    return status
