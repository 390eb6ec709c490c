"""AgentRunWorkflow (workflow type "AgentRun"): one AgentRun custom resource, executed durably (SPEC §3).

The run reads as SPEC §3's steps: resolve and write Pending → (a slot of the Agent) → preRun hooks →
the agent → postRun hooks and the response gate → finish → clean up, the last also when the run is
deleted (the workflow is cancelled). With `lifecycle.retry`, a retry verdict runs the agent and the gate
again, as attempt 2, 3, ... (SPEC §4). Each step is one activity that does all of its Kubernetes
work, writes the status it changes (no read first: the workflow knows every condition it wrote)
and publishes the step's events, so a run of preRun + agent + postRun takes eight activities, three of
them local: looking at a Job once it ended (or at the fallback check) is a read with no effect, run as a
local activity, so the step that follows is scheduled in the same workflow task.

It never polls a Job tightly: the bridge signals `job_finished`, and a slow fallback look covers a
missed event. All I/O is in activities; this module only decides. Runs started before this type
existed finish on workflows/agent_run_v1.py.

The bookkeeping beside the steps lives in helpers of its own: run_record.py (conditions and events until a
step writes them), run_status.py (which status fields a step writes), made.py (what the cleanup removes),
job_watch.py (waiting for a Job), gate.py (which verdict counts), attempts.py (a retried run's attempts),
slot_client.py (maxConcurrent) and awaiting.py (waiting with a timeout, and a cleanup that a cancellation
cannot stop half way).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.kube import RUN_GONE, KubeActivities
    from models import tracecontext
    from models.agentrun import AgentRunStatus, GateStatus, TokenUsage
    from models.approvals import (
        TOOL_APPROVAL,
        ToolApprovalStatus,
        ToolApprovalView,
        ToolDecision,
        resume_env,
    )
    from models.approvals import marked as marked_decision
    from models.gate import (
        GateView,
        Verdict,
        cut_utf8,
        marked,
        retry_task,
    )
    from models.names import Component, job_name
    from models.resolve import ResolvedRun
    from models.run import (
        RUN_FAILED,
        FailureReason,
        Phase,
        RunResult,
        RunState,
        StatusUpdate,
        workflow_id,
    )
    from models.search_attributes import SA_AGENT, SA_GATE, SA_NAME, SA_NAMESPACE, SA_PHASE, SA_TOOL_APPROVAL
    from models.signing import authenticated
    from models.slots import SLOT_SIGNAL, SlotNotice
    from models.steps import (
        AgentOutcome,
        BeginRun,
        DeleteJob,
        HookOutcome,
        JobFinished,
        JobRef,
        JobReport,
        JobStarted,
        ObserveJob,
        ParkAgent,
        Pricing,
        Published,
        Resolution,
        StartJob,
        StartRun,
        StatusChange,
    )
    from models.timestamps import rfc3339

    from . import policies, tracing
    from .attempts import Attempts
    from .awaiting import to_the_end, wait_until
    from .gate import Gate, gate_hook_failed
    from .job_watch import JobWatch, hooks_outcome
    from .made import Made
    from .run_record import RunRecord
    from .run_status import final_status, job_request, job_status, job_summary
    from .slot_client import SlotClient
    from .tool_approval import ToolApprovals, ToolRefusal

A = TypeVar("A")
R = TypeVar("R")

# Runs started with this marker take verdicts only while the gate waits (refusing, and recording, the others),
# run the gate hook alone and the other postRun hooks after the verdict, and stop a gate hook at gateTimeout.
GATE_PATCH = "gate-hooks-after-verdict"
# Runs that reach their end with this marker write their final status and events in the cleanup step, first thing:
# the end of a run is one step, not two.
FINISH_PATCH = "final-status-in-cleanup"
# Runs with this marker carry a FieldsIgnored condition naming the Sympozium fields that have no effect here.
FIELDS_IGNORED_PATCH = "fields-ignored-condition"
# Runs of sub-agents with this marker carry a SubAgent condition naming their parent run (the parent lists its
# children in status.delegates).
SUB_AGENT_PATCH = "sub-agent-condition"
# Runs started with this marker look at their Jobs in a local activity: a read of the worker's shared view (and
# of a finished pod's log) that runs inside the workflow task that asked for it, so the step after a Job's end
# is scheduled in that same task; no activity task travels through the server for it.
LOCAL_OBSERVE_PATCH = "observe-locally"
# Runs whose agent's pod was lost before it reported a result (deleted, evicted, its node gone) with this marker
# start the agent again, in a Job of its own, up to the run's agent_restarts times; it continues from its journal.
RESTART_PATCH = "agent-restarts"
# The least time left of a run's timeout for which a lost agent is started again (less: the run fails).
MIN_RESTART_SECONDS = 5
# Runs whose first verdict came with this marker take a verdict that claims our API or bridge as theirs only with their
# signature for this run, once (models/signing.py), wherever the worker has signing keys; before it, arriving
# encrypted was the proof, which the codec server's /codec/encode gave any API token. Set where the first verdict is
# handled, so only runs that get a verdict carry it.
SIGNED_VERDICTS_PATCH = "signed-verdicts"
# Runs that end Failed with this marker end their workflow failed (after the run's status, cleanup and events are
# written), with the run's error and RunResult: filtering the Temporal UI by status finds the failed runs.
FAILED_RUN_FAILS_PATCH = "failed-run-fails"
# Runs whose agent parks with this marker wait for people's decisions on its tool calls with no pod of the run
# (SPEC §10: status.toolApproval, the search attribute, the park step), then start it again with them.
TOOL_APPROVAL_PATCH = "tool-approvals"
# Runs whose gate begins to wait with this marker, when no verdict can start anything more (no postRun hook after
# the gate, no lifecycle.retry), are cleaned up then, not after the verdict: their Jobs' logs kept and the Jobs,
# workspace and RBAC removed, the finalizer released; the verdict's only request is then the final status write.
# See `_clean_up_at_gate` for why the finalizer is not needed while such a run waits. With more to start after the
# verdict, their finished Jobs have their logs kept and go (`_finished_jobs_go`).
CLEAN_AT_GATE_PATCH = "cleanup-before-gate-wait"
# The held response the gate's status shows while it waits (the approver's view; AGENT_RESULT's bound).
GATE_RESPONSE_SHOWN_BYTES = 32 * 1024

__all__ = ["SA_NAME", "SA_NAMESPACE", "SA_PHASE", "AgentRunWorkflow", "RunResult", "RunState", "workflow_id"]


@workflow.defn(name="AgentRun")
class AgentRunWorkflow:
    def __init__(self) -> None:
        self._state = RunState()
        self._run: ResolvedRun | None = None
        self._watch = JobWatch(self._observe, self._stop)  # the bridge's signals, the fallback look, deadlines
        self._made = Made()  # the run's Jobs and workspace, for the cleanup step
        self._resumed_status: AgentRunStatus | None = None  # what an agent started again after a wait writes
        self._gate = Gate()
        self._slots = SlotClient()
        self._record = RunRecord(self._state)  # conditions and events, until a step writes them
        self._step = ""  # the summary of the step running, for a failure's message
        self._pod: str | None = None  # the agent's pod, once it ran
        self._attempt = 1  # a retried run's attempt (its agent and gate); steps of attempt 2 on say which
        self._attempts = Attempts()  # how the gate decided each attempt, and what each agent used
        self._naming = False  # a later attempt's steps run: their summaries name it ("attempt 2: ...")
        self._final: StatusChange | None = None  # the final status, for the cleanup step to write first
        self._observe_locally = False  # LOCAL_OBSERVE_PATCH
        self._nonces: set[str] = set()  # of the signed verdicts (and tool decisions) taken as ours: each is good once
        self._tools = ToolApprovals()  # tool calls waiting for people (SPEC §10)
        self._active_ms = 0  # the agent's active time of the attempts that ended (SPEC §10: what timeout bounds)
        self._waited_ms = 0  # time parked: at tool approvals, at the gate
        self._trace_id = ""  # the run's W3C trace ID (status.traceID; "" : not traced)

    # -- handlers (the same names as version 1, so the bridge, API and CLI speak to both) -----------------

    @workflow.signal
    def job_finished(self, event: JobFinished) -> None:
        """From the bridge: one of this run's Jobs completed or failed."""
        self._watch.finished[event.uid] = event

    @workflow.query
    def status(self) -> RunState:
        return self._state

    @workflow.signal(name=SLOT_SIGNAL)
    def slot(self, notice: SlotNotice) -> None:
        """From the Agent's slots workflow: this run's new place in the queue, or its slot."""
        self._slots.take(notice)

    @workflow.query
    def gate(self) -> GateView:
        return self._gate.view

    @workflow.signal
    def verdict(self, verdict: Verdict) -> None:
        """A verdict without a reply (the annotation path); the first one while the gate waits wins."""
        self._gate.offer(self._authentic(verdict))
        self._record.refusals_of(self._gate)

    @workflow.update
    async def submit_verdict(self, verdict: Verdict) -> GateView:
        """A verdict with a reply: the gate once it is resolved. A verdict the gate cannot take fails the
        Update with the reason (the API answers 409), and is recorded in the history and the conditions."""
        verdict = self._authentic(verdict)
        attempt = self._gate.attempt
        refusal = self._gate.submit(verdict)
        if refusal is not None:
            self._record.refusals_of(self._gate)
            raise ApplicationError(refusal.why, type="VerdictRefused", non_retryable=True)
        if not self._gate.waiting:  # old rules: taken, for the gate to decide when it starts
            return GateView(state="accepted", reason="kept until the gate starts", decided_by=verdict.decided_by)
        # This attempt's gate as resolved (a retry verdict's next attempt may have opened a new gate since).
        await workflow.wait_condition(lambda: self._gate.answered_for(attempt))
        return self._gate.view_of(attempt)

    def _authentic(self, verdict: Verdict) -> Verdict:
        """The verdict with the identity the run records: what it claims if our API or bridge signed it for this run
        (SIGNED_VERDICTS_PATCH; the worker verified the signature as it decoded it), else a Temporal claim."""
        if not workflow.patched(SIGNED_VERDICTS_PATCH):
            return marked(verdict)
        verdict.signed = authenticated(verdict, workflow_id=workflow.info().workflow_id, seen=self._nonces)
        return marked(verdict, signatures=True)

    @submit_verdict.validator
    def _check_verdict(self, verdict: Verdict) -> None:
        if not self._gate.strict:  # strict runs take every Update in, to record a refusal in the history
            self._gate.check(verdict)

    @workflow.query
    def tool_approval(self) -> ToolApprovalStatus | None:
        """The round of tool calls waiting for people (state pending), or the last one."""
        return self._tools.status

    @workflow.signal
    def tool_decision(self, decision: ToolDecision) -> None:
        """A decision without a reply (the annotation path): taken if its call waits for one, else refused and
        recorded."""
        self._tools.offer(self._authentic_decision(decision), decided_at=rfc3339(workflow.now()))
        self._record.decisions_of(self._tools)

    @workflow.update
    async def decide_tool_call(self, decision: ToolDecision) -> ToolApprovalView:
        """A decision with a reply (the API, or Temporal): the call as decided and what still waits. A decision the
        run cannot take fails the Update with the reason (the API answers 409), and is recorded in the history and
        the conditions. Every Update is taken in (no validator), so that refusals are recorded too."""
        decision = self._authentic_decision(decision)
        if self._tools.parking:  # the round opens once no pod of the run is left: decide then
            await workflow.wait_condition(lambda: not self._tools.parking or self._tools.done)
        outcome = self._tools.submit(decision, decided_at=rfc3339(workflow.now()))
        self._record.decisions_of(self._tools)
        if isinstance(outcome, ToolRefusal):
            raise ApplicationError(outcome.why, type="ToolDecisionRefused", non_retryable=True)
        return self._tools.view(outcome)

    def _authentic_decision(self, decision: ToolDecision) -> ToolDecision:
        """As `_authentic` for verdicts: what it claims if our API or bridge signed it for this run, else a Temporal
        claim (`temporal:<claim>`)."""
        decision.signed = authenticated(decision, workflow_id=workflow.info().workflow_id, seen=self._nonces)
        return marked_decision(decision)

    # -- the run ------------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        """The run, in its span (workflows/tracing.py): the trace the bridge or a schedule's tick started for it."""
        ref = start.ref
        with tracing.run_span(f"AgentRun {ref.namespace}/{ref.name}", traceparent=start.traceparent,
                              attributes={"agentrun.run": ref.name, "k8s.namespace.name": ref.namespace,
                                          "temporal.workflow.id": workflow.info().workflow_id}) as span:
            self._trace_id = tracecontext.trace_id_of(tracing.traceparent_of(span) or start.traceparent)
            outcome = await self._steps(start)
            span.set_attribute("agentrun.phase", str(outcome.phase))
            if outcome.error:
                span.set_attribute("agentrun.error", outcome.error[:500])
            return outcome

    async def _steps(self, start: StartRun) -> RunResult:
        self._gate.strict = workflow.patched(GATE_PATCH)
        self._observe_locally = workflow.patched(LOCAL_OBSERVE_PATCH)
        self._record.ref = start.ref
        workflow.upsert_search_attributes([SA_NAMESPACE.value_set(start.ref.namespace),
                                           SA_NAME.value_set(start.ref.name), SA_PHASE.value_set(Phase.PENDING)])
        try:
            outcome = await self._execute(start)
        except asyncio.CancelledError:
            # The run object is being deleted: kill its Jobs, remove what it made, let the object go.
            self._state.step = "cancelled: cleaning up"
            await self._clean_up(kill=True)
            raise
        try:
            await self._clean_up(kill=False)
        except asyncio.CancelledError:
            pass  # deleted while cleaning up after it ended: the run's outcome stands
        await self._record.flush()
        if outcome.phase == Phase.FAILED and workflow.patched(FAILED_RUN_FAILS_PATCH):
            raise ApplicationError(outcome.error or "the run failed", outcome, type=RUN_FAILED, non_retryable=True)
        return outcome

    async def _execute(self, start: StartRun) -> RunResult:
        try:
            # 1-2. Resolve the spec against its Agent (once: the run's fixed input from now on); Pending.
            res = await self._begin(start)
            if res is None:
                return RunResult(phase=Phase.DELETED, error="the run object was deleted before it started")
            if res.resolved is None:
                problem = res.problem or "invalid spec"
                why = FailureReason.POLICY if res.problem_is_policy else FailureReason.INVALID_SPEC
                self._record.invalid_spec(problem)
                return await self._finish(Phase.FAILED, error=problem, failure=why)
            run = self._run = res.resolved
            self._gate.has_gate = run.gate_hook is not None
            if res.ignored and workflow.patched(FIELDS_IGNORED_PATCH):
                # Written with the next status write (Running at the latest), kept to the end like every condition.
                self._record.fields_ignored(res.ignored)
            if run.parent is not None and workflow.patched(SUB_AGENT_PATCH):
                self._record.sub_agent(run.parent)
            # 2b. A slot of the Agent, when its policy caps concurrent runs; nothing is created before.
            if res.slots is not None:
                self._state.step = "waiting for a slot"
                with tracing.span("waiting for a slot"):
                    await self._slots.wait(start.ref, run.agent, res.slots, check_seconds=self._watch.fallback,
                                           on_queue=self._queued)
            return await self._lifecycle(run)
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise asyncio.CancelledError() from e  # deleted while a step ran: no failure
            return await self._step_failed(e)

    async def _lifecycle(self, run: ResolvedRun) -> RunResult:
        # 3-5. preRun hooks, in a Job made after the run's RBAC and workspace.
        prepared = False
        agent: AgentOutcome | None = None
        failure: FailureReason | None = None
        if run.pre_run:
            hook = await self._hook_job(run, "prerun", prepare=True)
            prepared = True
            if hook.skip_reason is not None:
                return await self._finish(Phase.SKIPPED, result=hook.skip_reason)
            if not hook.ok:
                agent = AgentOutcome(status="error", error=f"preRun {hook.message}", exit_code=hook.exit_code or 1)
                failure = FailureReason.HOOK_FAILED
        # 6. The agent.
        if agent is None:
            agent = await self._agent(run, prepare=not prepared)
            failure = FailureReason.of_agent(agent.exit_code, agent.error, lost=agent.lost)
        if agent.status == "skipped":
            return await self._finish(Phase.SKIPPED, result=agent.response, exit_code=agent.exit_code)
        # 7. postRun hooks (after failures and timeouts too, with the real exit code), and the gate; a retry
        # verdict runs the agent and the gate again (with lifecycle.retry), so the agent may be a later attempt's.
        result = agent.response if agent.status == "success" else None
        gate: GateStatus | None = None
        if run.post_run and run.gate_hook is not None:
            gate, result, agent = await self._gate_and_postrun(run, agent, retry=failure != FailureReason.HOOK_FAILED)
            if self._attempt > 1:
                failure = FailureReason.of_agent(agent.exit_code, agent.error, lost=agent.lost)
                if agent.status == "skipped":
                    return await self._finish(Phase.SKIPPED, result=agent.response, exit_code=agent.exit_code)
        elif run.post_run:
            hook = await self._hook_job(run, "post-run", agent=agent)
            if not hook.ok:
                self._record.post_run_failed(hook.message)
        # 8. Finish: the phase follows the agent's outcome.
        if agent.cut_from:
            self._record.result_cut(agent)
        # Token usage and its cost: summed over the attempts (one, unless a retry verdict sent the agent back).
        usage = self._attempts.usage(agent.metrics)
        if agent.status == "success":
            return await self._finish(Phase.SUCCEEDED, result=result, token_usage=usage, exit_code=0, gate=gate)
        return await self._finish(Phase.FAILED, error=agent.error, exit_code=agent.exit_code, gate=gate,
                                  failure=failure or FailureReason.OTHER)

    # -- steps ---------------------------------------------------------------------------------------------

    async def _begin(self, start: StartRun) -> Resolution | None:
        wid = workflow.info().workflow_id
        try:
            res = await self._act(KubeActivities.begin_run, BeginRun(
                ref=start.ref, workflow_id=wid, started_at=rfc3339(workflow.now()),
                resource_version=start.resource_version, finalizers=start.finalizers, trace_id=self._trace_id),
                "resolve the spec against its Agent; Pending")
        except ActivityError as e:
            if isinstance(e.cause, ApplicationError) and e.cause.type == RUN_GONE:
                return None
            raise
        self._watch.fallback = max(1, res.fallback_poll_seconds)
        self._state.agent = res.agent_name  # the events name the run's Agent
        if res.agent_name:
            workflow.upsert_search_attributes([SA_AGENT.value_set(res.agent_name)])
        self._record.pending(res.resolved.task if res.resolved is not None else None)
        return res

    async def _hook_job(self, run: ResolvedRun, component: Component, *, prepare: bool = False,
                        agent: AgentOutcome | None = None, gate: GateStatus | None = None,
                        stop_when: Callable[[], bool] | None = None, until: datetime | None = None,
                        after_gate: tuple[str, str] | None = None) -> HookOutcome:
        """A Job of hooks, to its end. `gate`: the gate's Job (with GATE_PATCH, the gate hook alone, stopped
        at `until`); `after_gate` = (label, final result): the other postRun hooks once the gate is resolved."""
        hooks = run.hooks_of(component, gate_only=gate is not None and self._gate.strict)
        phase = Phase.POST_RUNNING if component == "post-run" else None
        what = f"gate hook {hooks[0].name}" if gate is not None and self._gate.strict and hooks else f"{component} hooks"
        with tracing.span(f"attempt {self._attempt}: {what}" if self._naming else what,
                          {"agentrun.hooks": ",".join(h.name for h in hooks)}):
            job = await self._start_job(run, component, prepare=prepare, phase=phase, agent=agent, gate=gate,
                                        after_gate=after_gate, attempt=self._attempt if gate is not None else 1)
            report = await self._watch.wait(job, deadline=timedelta(seconds=sum(h.timeout_seconds for h in hooks) + 60),
                                            hooks=hooks, stop_when=stop_when, until=until)
        return hooks_outcome(job, report, hooks, gate_timeout_seconds=run.gate_timeout_seconds)

    async def _agent(self, run: ResolvedRun, *, prepare: bool, task: str | None = None) -> AgentOutcome:
        """The agent's Job of this attempt, to its end (its own deadline, per attempt); `task`: a retried
        attempt's (the original task, the rejected output and the feedback). An agent whose pod was lost before
        it reported a result is started again (`_restart`), within what is left of the attempt's timeout."""
        started = workflow.now()
        restart, deadline = 0, run.timeout_seconds
        # After a wait (SPEC §10) the agent is started again (`resumed`, with the decisions `resume`); `since` counts
        # the restarts since then (it names the Job). From the first wait on, the attempt's time is its active time
        # (`used`): the agent's own count when it parked, plus each lost container's whole life.
        resumed, since, resume, used = 0, 0, None, 0.0
        while True:
            first = not restart and not resumed
            container_started = workflow.now()
            # The agent's pod runs in this span: its TRACEPARENT, so the agent's own spans are its children.
            name = "agent" + (f" (attempt {self._attempt})" if self._attempt > 1 else "") + (
                f" (resumed {resumed})" if resumed else "") + (f" (restart {restart})" if restart else "")
            with tracing.span(name, {"agentrun.attempt": self._attempt, "agentrun.restart": restart,
                                     "agentrun.resumed": resumed}):
                job = await self._start_job(run, "agent-run", prepare=prepare and first,
                                            phase=Phase.RUNNING if first else None, attempt=self._attempt,
                                            task=task, restart=since, deadline_seconds=None if first else deadline,
                                            resumed=resumed, resume=resume, restarts=restart)
                report = await self._watch.wait(job, deadline=timedelta(seconds=deadline)
                                                + policies.AGENT_DEADLINE_GRACE)
                if report.state.reason == "DeadlineExceeded":
                    await self._stop(job, "timed out")  # a timed-out agent's Job goes, whatever the cleanup policy
            agent = report.agent
            assert agent is not None
            if agent.status == "waiting":
                if not workflow.patched(TOOL_APPROVAL_PATCH) or run.tool_approval is None or agent.wait is None:
                    agent = AgentOutcome(status="error", exit_code=1, metrics=agent.metrics,
                                         error="the agent parked to wait for approvals this run cannot give")
                    break
                used = agent.metrics.active_ms / 1000
                resume = await self._park(run, agent)
                resumed, since = resumed + 1, 0
                deadline = self._resumed_deadline(run, used)
                continue
            if not agent.lost:
                break
            if resumed:
                used += (workflow.now() - container_started).total_seconds()
                left = int(run.timeout_seconds - used)
            else:
                left = run.timeout_seconds - int((workflow.now() - started).total_seconds())
            job_next = job_name(run.ref.name, "agent-run", self._attempt, since + 1, resumed)
            if not self._restart(run, agent, restart=restart, left=left, job=job_next):
                break
            restart, since = restart + 1, since + 1
            deadline = self._resumed_deadline(run, used) if resumed else left
        self._attempts.ran(agent.metrics)
        self._active_ms += agent.metrics.active_ms or int((used + (workflow.now() - container_started)
                                                           .total_seconds()) * 1000)
        return agent

    @staticmethod
    def _resumed_deadline(run: ResolvedRun, used: float) -> int:
        """The activeDeadlineSeconds of an agent started again after a wait: what is left of the attempt's active
        time, plus the grace its pod's start and the agent's cold start take (which its journal does not count;
        the agent ends itself when its RUN_TIMEOUT is used)."""
        left = max(run.timeout_seconds - used, 0.0)
        return int(left) + 1 + int(policies.AGENT_START_GRACE.total_seconds())

    async def _park(self, run: ResolvedRun, agent: AgentOutcome) -> str:
        """The agent parked with tool calls waiting for people (SPEC §10): its Jobs go (no pod of the run is left
        while it waits), the status shows the calls, and the workflow waits durably for a decision on each, until
        the policy's toolApproval.timeout (then its onTimeout decides the rest). Returns AGENT_RESUME, the decisions
        the agent started again goes on with."""
        wait, policy = agent.wait, run.tool_approval
        assert wait is not None and policy is not None
        requested = workflow.now()
        expires = requested + timedelta(seconds=policy.timeout_seconds)
        status = ToolApprovalStatus(state="pending", requested_at=rfc3339(requested), expires_at=rfc3339(expires),
                                    on_timeout=policy.on_timeout, attempt=self._attempt, round=wait.round,
                                    calls=wait.calls)
        self._tools.park(status)
        self._record.tool_calls_waiting(status)
        workflow.upsert_search_attributes([SA_TOOL_APPROVAL.value_set("pending")])
        self._state.step = "parking the agent: waiting for its pods to go"
        written = AgentRunStatus(tool_approval=status, token_usage=self._attempts.usage_now(agent.metrics),
                                 active_ms=self._active_ms + agent.metrics.active_ms, waited_ms=self._waited_ms)
        calls = ", ".join(f"{c.id} {c.tool}" for c in wait.calls)
        parked = await self._act(KubeActivities.park_agent, ParkAgent(
            ref=run.ref, jobs=list(self._made.jobs), events=self._record.take_events(),
            status=StatusUpdate(status=written, conditions=self._record.conditions)),
            f"park the agent, no pod left: {calls} wait for approval")
        self._record.retry_later(parked.unpublished)
        self._tools.open(parked.run_version, decided_at=rfc3339(workflow.now()))
        self._record.decisions_of(self._tools)
        self._state.step = f"waiting for approval of {calls}"
        remaining = (expires - workflow.now()).total_seconds()
        with tracing.span(f"waiting for approval of {calls}"):  # (no command: a span of the wait, no pod held)
            decided_in_time = await wait_until(lambda: self._tools.all_decided, seconds=max(remaining, 0.001))
        if not decided_in_time:
            self._tools.expire(on_timeout=policy.on_timeout, decided_at=rfc3339(workflow.now()),
                               why=f"the approval timed out: no decision within {policy.timeout_seconds}s "
                                   f"(toolApproval.onTimeout: {policy.on_timeout})")
            self._record.decisions_of(self._tools)
        decided = self._tools.close()
        self._waited_ms += int((workflow.now() - requested).total_seconds() * 1000)
        self._record.tool_calls_decided(decided)
        workflow.upsert_search_attributes([SA_TOOL_APPROVAL.value_set("decided")])
        self._resumed_status = AgentRunStatus(tool_approval=self._tools.status, tool_approvals=self._tools.kept(),
                                              waited_ms=self._waited_ms)
        return resume_env(TOOL_APPROVAL, wait.round, decided)

    def _restart(self, run: ResolvedRun, agent: AgentOutcome, *, restart: int, left: int, job: str) -> bool:
        """Whether a lost agent starts again (restart `restart + 1`, in Job `job`): while the run's restarts and its
        time last. Otherwise its outcome (an error naming the lost pod) says why it did not."""
        if restart >= run.agent_restarts:
            if run.agent_restarts:
                agent.error += f"; it was started again {restart} time(s), the most this run allows"
            return False
        if left < MIN_RESTART_SECONDS:
            agent.error += f"; {max(left, 0)}s of its timeout ({run.timeout_seconds}s) are left: not started again"
            return False
        if not workflow.patched(RESTART_PATCH):
            return False
        self._record.agent_restarted(agent.error, restart=restart + 1, most=run.agent_restarts, job=job)
        return True

    async def _start_job(self, run: ResolvedRun, component: Component, *, prepare: bool, phase: Phase | None,
                         agent: AgentOutcome | None = None, gate: GateStatus | None = None,
                         after_gate: tuple[str, str] | None = None, attempt: int = 1,
                         task: str | None = None, restart: int = 0, deadline_seconds: int | None = None,
                         resumed: int = 0, resume: str | None = None, restarts: int | None = None) -> JobRef:
        """Start a Job of the run, writing the status its start changes (run_status.py says which fields).
        `restart`: the agent's restarts since it was last `resumed` (they name its Job); `restarts`: in all."""
        gate_only = gate is not None and self._gate.strict
        req = job_request(run, component, workflow_id=workflow.info().workflow_id, attempt=attempt, task=task,
                          agent=agent, gate_only=gate_only, after_gate=after_gate, restart=restart,
                          deadline_seconds=deadline_seconds, resumed=resumed, resume=resume,
                          traceparent=tracing.current_traceparent())
        total = restarts if restarts is not None else restart
        status = job_status(phase, job_name(run.ref.name, component, attempt, restart, resumed),
                            conditions=self._record.conditions,
                            gate=self._gate.status(), attempt=attempt, attempts=self._attempts.kept(),
                            with_retry=run.retry is not None, pending_gate=gate, pod=self._pod, agent=agent,
                            gate_only=gate_only, after_gate=after_gate, restart=total if restart else 0,
                            resumed=self._resumed_status if resumed and not restart else None,
                            token_usage=self._attempts.usage(agent.metrics) if gate is not None and agent else None)
        if phase is not None:
            self._set_phase(phase)
        if gate is not None:
            self._record.emit("agent.run.gate.pending", {"gateTimeout": f"{run.gate_timeout_seconds}s"})
        started: JobStarted = await self._act(KubeActivities.start_job, StartJob(
            job=req, prepare=prepare, status=status, events=self._record.take_events(), clear_verdict=gate_only),
            job_summary(run, component, attempt, gate_only=gate_only, prepare=prepare, restart=restart,
                        resumed=resumed, restarts=total))
        self._record.retry_later(started.unpublished)
        if gate_only:
            self._gate.started(started.run_version)
            self._record.refusals_of(self._gate)
        self._made.started(started)
        self._state.jobs[component] = started.job.name
        return started.job

    async def _observe(self, job: JobRef, signal: JobFinished | None, *, timed_out: bool = False) -> JobReport:
        what = "read the outcome of" if signal is not None or timed_out else "look at"
        # The agent's tokens are priced as its outcome is read (models/pricing.py): by the run's provider, and its
        # model for tokens the agent attributed to none.
        pricing = (Pricing(provider=self._run.model.provider, model=self._run.model.model)
                   if job.component == "agent-run" and self._run is not None else None)
        report: JobReport = await self._act(KubeActivities.observe_job, ObserveJob(
            job=job, signal=signal, timed_out=timed_out, pricing=pricing), f"{what} Job {job.name}",
            local=self._observe_locally)
        if report.state.pod_name and job.component == "agent-run" and (report.state.finished or timed_out):
            self._pod = report.state.pod_name
        return report

    async def _stop(self, job: JobRef, why: str) -> None:
        await self._act(KubeActivities.delete_job, DeleteJob(job=job), f"stop Job {job.name}: {why}")

    async def _gate_and_postrun(self, run: ResolvedRun, agent: AgentOutcome, *,
                                retry: bool) -> tuple[GateStatus, str, AgentOutcome]:
        """postRun with a gate hook: each attempt's gate (a retry verdict sends the agent back, with
        lifecycle.retry and `retry`: an agent ran), then, once, the other postRun hooks, which see the final
        result and the verdict. Returns the gate's status, the final result and the last attempt's agent
        outcome (an attempt the agent skips ends the loop)."""
        label, final, _ = await self._attempt_gate(run, agent, retry=retry)
        try:
            while label == "retried":
                label, final, agent = await self._again(run, agent)
                if agent.status == "skipped":
                    return self._gate.status(), final, agent
        finally:
            self._naming = False
        if self._gate.strict and run.hooks_of("post-gate"):
            after = await self._hook_job(run, "post-gate", agent=agent, after_gate=(label, final))
            if not after.ok:
                self._record.post_run_failed(after.message)
        return self._gate.status(), final, agent

    async def _again(self, run: ResolvedRun, rejected: AgentOutcome) -> tuple[str, str, AgentOutcome]:
        """The gate sent the attempt back: after the backoff, the next attempt's agent (its own Jobs, a task
        that carries the original task, the rejected output and the feedback), then its gate."""
        assert run.retry is not None and self._gate.verdict is not None
        feedback = self._gate.verdict.response
        text = rejected.response if rejected.status == "success" else rejected.error
        if run.retry.backoff_seconds > 0:
            self._state.step = f"attempt {self._attempt} sent back: waiting {run.retry.backoff_seconds:g}s"
            await workflow.sleep(timedelta(seconds=run.retry.backoff_seconds),
                                 summary=f"attempt {self._attempt} sent back: backoff")
        self._attempt += 1
        self._naming = True
        agent = await self._agent(run, prepare=False, task=retry_task(task=run.task, rejected=text, feedback=feedback,
                                                                     attempt=self._attempt))
        if agent.status == "skipped":
            return "skipped", agent.response, agent
        label, final, _ = await self._attempt_gate(run, agent, retry=True)
        return label, final, agent

    async def _attempt_gate(self, run: ResolvedRun, agent: AgentOutcome, *, retry: bool) -> tuple[str, str, str]:
        """One attempt's gate: its hook alone, then the wait, durably and with no pod, for a verdict until
        gateTimeout (a gate hook still running then is stopped; `gate_hook_failed` says which failures resolve
        the gate at once); (label, final result, reason)."""
        gate = run.gate_hook
        assert gate is not None
        started = workflow.now()
        self._gate.open(rfc3339(started), self._attempt)
        self._record.refusals_of(self._gate)
        workflow.upsert_search_attributes([SA_GATE.value_set("pending")])
        gate_end = started + timedelta(seconds=run.gate_timeout_seconds)
        held = agent.response if agent.status == "success" else agent.error
        shown = cut_utf8(held, GATE_RESPONSE_SHOWN_BYTES)
        hook = await self._hook_job(run, "post-run", agent=agent, stop_when=lambda: self._gate.verdict is not None,
                                    gate=GateStatus(state="pending", requested_at=rfc3339(started), response=shown,
                                                    response_cut=True if shown != held else None),
                                    until=gate_end if self._gate.strict else None)
        gate_failed = gate_hook_failed(hook, gate.name, has_verdict=self._gate.verdict is not None)
        if not hook.ok and hook.message and (gate_failed or hook.failed_hook != gate.name):
            self._record.post_run_failed(hook.message)
        if self._gate.verdict is None and not gate_failed:
            if self._gate.strict and workflow.patched(CLEAN_AT_GATE_PATCH):
                if not run.hooks_of("post-gate") and run.retry is None:
                    await self._clean_up_at_gate(run)
                elif run.cleanup != "keep":
                    await self._finished_jobs_go(run)
            self._state.step = "waiting for a gate verdict"
            remaining = (gate_end - workflow.now()).total_seconds()
            with tracing.span("waiting for a gate verdict"):
                await wait_until(lambda: self._gate.verdict is not None, seconds=max(remaining, 0.001))
        chance, why = self._attempts.chance(run.retry, self._attempt) if retry else ("off", "")
        label, final, reason = self._gate.close(run, agent, hook_failed=gate_failed, decided_at=rfc3339(workflow.now()),
                                                retry=chance, exhausted_why=why)
        self._waited_ms += int((workflow.now() - started).total_seconds() * 1000)
        self._record.refusals_of(self._gate)
        workflow.upsert_search_attributes([SA_GATE.value_set(label)])
        self._record.gate_resolved(label, reason, self._attempt)
        if run.retry is not None:
            self._attempts.decided(self._attempt, label, self._gate.view, reason, agent.metrics)
        return label, final, reason

    async def _finish(self, phase: Phase, *, result: str | None = None, error: str | None = None,
                      token_usage: TokenUsage | None = None, exit_code: int | None = None,
                      gate: GateStatus | None = None, failure: FailureReason = FailureReason.OTHER) -> RunResult:
        """The run's end: its status (with every condition recorded) and events; the result."""
        self._gate.done = self._tools.done = True
        self._record.refusals_of(self._gate)
        with_retry = self._run is not None and self._run.retry is not None
        status = final_status(phase, completed_at=rfc3339(workflow.now()), workflow_id=workflow.info().workflow_id,
                              result=result, error=error, exit_code=exit_code, gate=gate, pod=self._pod,
                              attempt=self._attempt, attempts=self._attempts.kept() if with_retry else None,
                              token_usage=token_usage, active_ms=self._active_ms or None,
                              waited_ms=self._waited_ms if self._active_ms else None)
        self._state.result, self._state.error = result, error
        self._set_phase(phase)
        self._record.ended(status, failure)
        if workflow.patched(FINISH_PATCH):
            self._final = self._record.change(status)  # written by the cleanup step that follows, first thing
        else:
            try:
                await self._write(status, f"write status: {phase}")
            except ActivityError:
                workflow.logger.warning("the final status of the run could not be written")
        return RunResult(phase=phase, result=result, error=error)

    async def _step_failed(self, e: ActivityError) -> RunResult:
        """A step failed for good (a permanent refusal, or its retries ran out): the run fails, cleanup still runs."""
        cause = e.cause
        if isinstance(cause, ApplicationError) and cause.type == RUN_GONE:
            return RunResult(phase=Phase.FAILED, error=cause.message)  # nothing to write the failure to
        if isinstance(cause, ApplicationError) and cause.non_retryable:
            error = f"{self._step or e.activity_type}: {cause.message}"
            self._record.step_failed(cause)
            return await self._finish(Phase.FAILED, error=error)
        return await self._finish(Phase.FAILED, error=f"{e.message}: {cause}" if cause else str(e))

    async def _clean_up(self, *, kill: bool) -> None:
        """Remove what the run made and release the object, to the end even if cancelled meanwhile (the object
        was deleted): a cleanup stopped half way would leave its finalizer forever."""
        assert self._record.ref is not None
        self._state.step = "cleanup"
        req, summary = self._made.clean_up(self._record.ref, self._run, kill=kill, final=self._final)

        async def steps() -> None:
            if self._made.cleaned and not kill and self._final is not None:
                published = await self._final_status_alone(self._final)
            else:
                published = await self._act(KubeActivities.clean_up, req, summary, long=True)
            if published is not None:
                self._record.retry_later(published.unpublished)
            # Only now is nothing of the run executing (a killed run's pods are gone), so the slot is free.
            await self._slots.give_back()

        try:
            await to_the_end(steps())
        finally:
            self._state.step = "done"

    async def _clean_up_at_gate(self, run: ResolvedRun) -> None:
        """The cleanup, done as the gate begins to wait for a verdict that can start nothing more: the Jobs' logs
        kept, the Jobs (their pods), the workspace and every RBAC object of the run removed, and the finalizer
        released. So a run waits for people (for days) holding no pod, no permission and no finalizer, and the
        verdict costs one Kubernetes request, the final status (SPEC §3.9 as one step: approving 400 parked runs
        is bounded by the worker's client QPS).

        Why no finalizer while it waits. The finalizer makes a deletion something the bridge sees as a state
        (deletionTimestamp) even after a restart, so the workflow is always cancelled and its cleanup runs before
        the object goes (SPEC §3): it protects what the garbage collector cannot reach (a skill sidecar's
        cluster-scoped RBAC, which no namespaced owner can own), the pods the workflow may still start, and the
        name against a new run while the old one's objects are still there. A run at this point has none of
        these left: everything it made is gone (the cluster-scoped RBAC too) and no verdict starts anything. Deleted
        while it waits, the object goes at once; the bridge cancels the workflow on that DELETED event (a run
        deleted with no deletionTimestamp and no terminal phase), and a bridge that missed it leaves the workflow
        waiting until gateTimeout, holding nothing, its final status write finding the run gone. Every run that
        still executes, or waits with more to start, keeps the finalizer until its cleanup."""
        assert self._record.ref is not None
        req, summary = self._made.clean_up(self._record.ref, run, kill=False, final=None)
        self._state.step = "cleanup while waiting for a gate verdict"
        published = await self._act(KubeActivities.clean_up, req, f"waiting for a verdict: {summary}", long=True)
        if published is not None:
            self._record.retry_later(published.unpublished)
        self._made.cleaned_up()

    async def _finished_jobs_go(self, run: ResolvedRun) -> None:
        """As a gate begins to wait with more to start after its verdict (other postRun hooks, or a retry): the
        Jobs so far, all finished (the agent's, the hooks'), have their logs kept and go. Nothing reads them again
        (a retry or the later hooks run in Jobs of their own), and they carry ttlSecondsAfterFinished: left for the
        cleanup, a wait longer than that lost them, and their logs, to Kubernetes' TTL controller first."""
        for job in self._made.jobs:
            if job.uid not in self._made.gone:
                await self._act(KubeActivities.delete_job, DeleteJob(job=job),
                                f"waiting for a verdict: keep the logs of Job {job.name}, then delete it")
                self._made.gone.add(job.uid)

    async def _final_status_alone(self, final: StatusChange) -> Published | None:
        """The end of a run cleaned up at its gate: its final status and events, one local step; a run deleted
        meanwhile (nothing to write to) ends all the same, as the cleanup step's final write does."""
        try:
            # A local activity, in the workflow task that took the verdict: one status patch, no activity task
            # through the server (approving many parked runs is bounded by Temporal's work per verdict).
            published: Published = await self._act(KubeActivities.update_status, final,
                                                   f"write status: {final.update.status.phase}", local=True)
        except ActivityError as e:
            if not (isinstance(e.cause, ApplicationError) and e.cause.non_retryable):
                raise
            workflow.logger.warning("the final status of the run was not written: %s", e.cause)
            return None
        return published

    # -- status, conditions, events ------------------------------------------------------------------------

    def _set_phase(self, phase: Phase) -> None:
        self._state.phase = self._state.step = phase
        workflow.upsert_search_attributes([SA_PHASE.value_set(phase)])
        self._record.emit("agent.run.phase", {"phase": phase})

    async def _queued(self, message: str, position: int) -> None:
        self._state.step = f"waiting for a slot (position {position})" if position else "slot granted"
        self._record.queued(message, position)
        workflow.set_current_details(message if position else "")
        await self._write(AgentRunStatus(), f"write status: queued at position {position}" if position
                          else "write status: slot granted")

    async def _write(self, status: AgentRunStatus, summary: str) -> None:
        published: Published = await self._act(KubeActivities.update_status, self._record.change(status), summary)
        self._record.retry_later(published.unpublished)

    # -- activity plumbing -----------------------------------------------------------------------------------

    async def _act(self, fn: Callable[[KubeActivities, A], Awaitable[R]], arg: A, summary: str, *,
                   long: bool = False, local: bool = False) -> R:
        """One step (see `policies.step`); its summary names it in the Temporal UI, and the attempt it is of."""
        if self._naming:
            summary = f"attempt {self._attempt}: {summary}"
        self._step = summary
        with tracing.span(summary, {"agentrun.step": getattr(fn, "__name__", "")}):
            result = await policies.step(fn, arg, summary, long=long, local=local)
        self._step = ""
        return result
