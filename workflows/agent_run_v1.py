"""AgentRunWorkflow, version 1 (workflow type "AgentRunWorkflow"): kept, unchanged, for the runs that
started on it. New runs start the type "AgentRun" (workflows/agent_run.py), which does the same in
fewer steps; the worker hosts both, and this one can go once no "AgentRunWorkflow" execution is left
(`temporal workflow count --query 'WorkflowType="AgentRunWorkflow" AND ExecutionStatus="Running"'`).
Its recorded histories (tests/workflows/histories/*.json without the v2- prefix) replay against it.

One AgentRun custom resource, executed durably (SPEC §3).

The run reads as the phase list: resolve → RBAC → workspace → preRun → agent → postRun →
finish, with cleanup in a `finally` that also runs when the run is deleted (the workflow is
cancelled). It never polls a Job tightly: the bridge signals `job_finished`, and a slow
fallback check (an activity) covers a missed event. All I/O is in activities; this module
only decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from activities.events import EventActivities, RunEvent
    from activities.kube import RUN_GONE, KubeActivities
    from activities.results import AgentOutcome
    from activities.slots import SlotActivities
    from models.agentrun import AgentRunStatus, Condition, GateStatus, TokenUsage
    from models.gate import GateView, Verdict, resolve
    from models.names import hook_container, hook_of, workspace_name
    from models.resolve import ResolvedHook, ResolvedRun, RunRef
    from models.run import RunResult, RunState
    from models.search_attributes import SA_AGENT, SA_GATE, SA_NAME, SA_NAMESPACE, SA_PHASE
    from models.slots import (
        RELEASE_SIGNAL,
        SLOT_SIGNAL,
        SlotLimit,
        SlotNotice,
        SlotRelease,
        SlotRequest,
        slots_workflow_id,
    )
    from models.steps import (
        Cleanup,
        DeleteJob,
        HookOutcome,
        JobFinished,
        JobRef,
        JobRequest,
        JobState,
        Resolution,
        ResultRequest,
        StartRun,
        StatusWrite,
    )
    from models.timestamps import rfc3339

    from . import policies



class _Finished(Exception):
    """Raised by a step that ends the run early (skip, invalid spec)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(result.phase)
        self.result = result


HOOK_TIMEOUT = "HookTimeout"
# Before this patch, a run deleted while an activity ran ended Failed ("Activity cancelled") and was
# cleaned up without killing its Jobs; histories recorded so still replay that way.
CANCELLED_IN_A_STEP = "cancelled-in-a-step-v1"
STOPPED_FOR_VERDICT = "StoppedForVerdict"


def _timed_out_hook(state: JobState, hooks: list[ResolvedHook]) -> HookOutcome | None:
    """The outcome of a hook Job the workflow stopped because a hook (or the whole Job) ran out of time."""
    if state.reason not in (HOOK_TIMEOUT, "WorkflowDeadline"):
        return None
    running = hook_of(state.running_hook.container) if state.running_hook else ""
    hook = next((h for h in hooks if h.name == running), None)
    if hook is None:
        return HookOutcome(ok=False, exit_code=124, message=f"Job {state.job.name} did not finish in time")
    return HookOutcome(ok=False, failed_hook=hook.name, exit_code=124,
                       message=f'hook "{hook.name}" timed out after {hook.timeout_seconds}s')


def _failure_reason(error: str) -> str:
    """A coarse bucket for agent.run.failed, in the spirit of Sympozium's classifyFailureReason."""
    text = error.lower()
    for needle, reason in (("timeout", "timeout"), ("timed out", "timeout"), ("oom", "oom"),
                           ("policy", "policy"), ("denied", "policy"), ("429", "token_budget"),
                           ("quota", "token_budget"), ("http", "llm_error"), ("api error", "llm_error"),
                           ("hook", "hook_failed"), ("spec.", "invalid_spec")):
        if needle in text:
            return reason
    return "other"


def _run_gone(e: ActivityError) -> bool:
    return isinstance(e.cause, ApplicationError) and e.cause.type == RUN_GONE


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflowV1:
    def __init__(self) -> None:
        self._state = RunState()
        self._finished: dict[str, JobFinished] = {}
        self._ref: RunRef | None = None
        self._fallback = 60
        self._failing = False
        # The gate: None until resolution tells whether the run has one.
        self._has_gate: bool | None = None
        self._verdict: Verdict | None = None
        self._refused: list[Verdict] = []
        self._gate: GateView = GateView(state="none")
        self._done = False
        self._event_seq = 0
        self._events: list[Any] = []
        self._task = ""
        # maxConcurrent: the Agent's slots workflow once this run asked it for a slot (until given back).
        self._slots_wid: str | None = None
        self._slot: SlotNotice | None = None

    # -- handlers ------------------------------------------------------------------------------

    @workflow.signal
    def job_finished(self, event: JobFinished) -> None:
        """From the bridge: one of this run's Jobs completed or failed."""
        self._finished[event.uid] = event

    @workflow.query
    def status(self) -> RunState:
        return self._state

    @workflow.signal(name=SLOT_SIGNAL)
    def slot(self, notice: SlotNotice) -> None:
        """From the Agent's slots workflow: this run's new place in the queue, or its slot."""
        self._take_notice(notice)

    @workflow.query
    def gate(self) -> GateView:
        return self._gate

    @workflow.signal
    def verdict(self, verdict: Verdict) -> None:
        """A verdict without a reply (the annotation path, or when no worker can validate an Update).

        The first verdict wins; later ones are kept in `_refused` for the record."""
        if self._verdict is None and not self._done and self._has_gate is not False:
            self._verdict = verdict
        else:
            self._refused.append(verdict)

    @workflow.update
    async def submit_verdict(self, verdict: Verdict) -> GateView:
        """A verdict with a reply: accepted only while a gate can still take one; answers with the
        gate once it is resolved (a verdict given before the gate starts waiting is kept for it)."""
        self._verdict = verdict
        if self._gate.state != "pending":
            # Given before the gate started: kept, and applied when it starts.
            return GateView(state="accepted", reason="kept until the gate starts", decided_by=verdict.decided_by)
        await workflow.wait_condition(lambda: self._gate.gate_verdict is not None or self._done)
        return self._gate

    @submit_verdict.validator
    def _check_verdict(self, verdict: Verdict) -> None:
        if self._done:
            raise ValueError("the run has finished")
        if self._has_gate is False:
            raise ValueError("the run has no gate (no postRun hook with gate: true)")
        if self._verdict is not None or self._gate.gate_verdict is not None:
            raise ValueError("the gate already has a verdict")

    # -- run -------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: StartRun) -> RunResult:
        self._ref = start.ref
        workflow.upsert_search_attributes([SA_NAMESPACE.value_set(start.ref.namespace),
                                           SA_NAME.value_set(start.ref.name), SA_PHASE.value_set("Pending")])
        resolved: ResolvedRun | None = None
        try:
            try:
                # 1. Resolve the spec against the Agent, once; the result is the run's fixed input from now on.
                try:
                    res: Resolution = await self._act(KubeActivities.resolve_run, start,
                                                      "resolve spec against its Agent")
                except ActivityError as e:
                    if _run_gone(e):
                        return RunResult(phase="Deleted", error="the run object was deleted before it started")
                    raise
                self._fallback = max(1, res.fallback_poll_seconds)
                self._state.agent = res.agent_name
                if res.agent_name:
                    workflow.upsert_search_attributes([SA_AGENT.value_set(res.agent_name)])
                if res.resolved is not None:
                    self._task = res.resolved.task
                # 2. Pending, as soon as the workflow runs (Sympozium leaves the phase empty here).
                await self._phase("Pending", started_at=rfc3339(workflow.now()), workflow_id=workflow.info().workflow_id,
                                  observed_generation=start.ref.generation)
                if res.resolved is None:
                    problem = res.problem or "invalid spec"
                    await self._finish("Failed", error=problem,
                                       conditions=[self._cond("Validated", "False", "InvalidSpec", problem)])
                resolved = res.resolved
                assert resolved is not None
                self._has_gate = resolved.gate_hook is not None
                # 2b. A slot of the Agent, when its policy caps concurrent runs; nothing is created before.
                if res.slots is not None:
                    await self._wait_for_slot(resolved, res.slots)
                outcome = await self._execute(resolved)
            except _Finished as f:
                outcome = f.result
            except ActivityError as e:
                if is_cancelled_exception(e) and workflow.patched(CANCELLED_IN_A_STEP):
                    # Deleted while a step ran: the step was cancelled with the run, which is no failure.
                    raise asyncio.CancelledError() from e
                # A step failed for good (its retries ran out): the run fails, and cleanup still happens.
                outcome = await self._fail_quietly(f"{e.message}: {e.cause}" if e.cause else str(e))
        except asyncio.CancelledError:
            # The run object is being deleted: kill its Jobs, remove what it made, let the object go.
            self._state.step = "cancelled: cleaning up"
            await self._cleanup(start, resolved, kill=True)
            raise
        try:
            await self._cleanup(start, resolved, kill=False)
        except asyncio.CancelledError:
            pass  # deleted while cleaning up after it ended: the run's outcome stands
        await self._drain_events()
        return outcome

    # -- events (NATS JetStream, SPEC §5) ----------------------------------------------------------

    def _emit(self, topic: str, data: dict[str, str | int | None]) -> None:
        """Publish without waiting: a run never waits on NATS; each event has a stable ID."""
        assert self._ref is not None
        # Histories recorded before events existed replay without them (see tests/workflows).
        if not workflow.patched("run-events-v1"):
            return
        self._event_seq += 1
        event = RunEvent(topic=topic, run_name=self._ref.name, namespace=self._ref.namespace,
                         instance_name=self._state.agent, workflow_id=workflow.info().workflow_id,
                         seq=self._event_seq, timestamp=rfc3339(workflow.now()), data=data)
        self._events.append(workflow.start_activity_method(
            EventActivities.publish_event, event, summary=f"event {topic}",
            start_to_close_timeout=policies.EVENT_CALL, schedule_to_close_timeout=policies.EVENT_BUDGET,
            retry_policy=policies.EVENT_RETRY))

    async def _drain_events(self) -> None:
        """Before the workflow closes, let pending events finish (within their retry budget)."""
        for handle in self._events:
            try:
                await handle
            except (ActivityError, asyncio.CancelledError):
                workflow.logger.warning("an event of this run could not be published")
        self._events.clear()

    async def _fail_quietly(self, error: str) -> RunResult:
        try:
            await self._finish("Failed", error=error)
        except _Finished as f:
            return f.result
        except ActivityError:
            pass  # not even the status could be written; the workflow's own result still says why
        return RunResult(phase="Failed", error=error)

    async def _execute(self, run: ResolvedRun) -> RunResult:
        wid = workflow.info().workflow_id
        req = JobRequest(run=run, component="agent-run", workflow_id=wid)
        # 3. Lifecycle RBAC for the hooks (and the agent's permission-less account).
        await self._act(KubeActivities.ensure_lifecycle_rbac, req,
                        "lifecycle RBAC" if run.rbac else "agent service account")
        # 4. Workspace PVC, shared by hooks and agent.
        if run.has_hooks:
            await self._act(KubeActivities.ensure_workspace, req, f"workspace PVC {workspace_name(run.ref.name)}")
        # 5. preRun hooks.
        pre_failure: HookOutcome | None = None
        if run.pre_run:
            hook = await self._hooks(run, "prerun", req)
            if hook.skip_reason is not None:
                return await self._finish("Skipped", result=hook.skip_reason)
            if not hook.ok:
                pre_failure = hook
        # 6. The agent.
        if pre_failure is None:
            outcome = await self._agent(run, req)
        else:
            outcome = AgentOutcome(status="error", error=f"preRun {pre_failure.message}",
                                   exit_code=pre_failure.exit_code or 1)
        if outcome.status == "skipped":
            return await self._finish("Skipped", result=outcome.response)
        conditions: list[Condition] = []
        # 7. postRun hooks (they run after failures and timeouts too, with the real exit code),
        #    and the response gate when one of them has gate: true.
        gate: tuple[str, str] | None = None
        if run.post_run:
            text = outcome.response if outcome.status == "success" else outcome.error
            post_req = req.model_copy(update={"component": "post-run", "agent_exit_code": outcome.exit_code,
                                              "agent_result": text})
            await self._status(exit_code=outcome.exit_code)
            if run.gate_hook is not None:
                gate = await self._gate_and_postrun(run, post_req, outcome, conditions)
            else:
                hook = await self._hooks(run, "post-run", post_req)
                if not hook.ok:
                    conditions.append(self._cond("PostRunFailed", "True", "PostRunJobFailed",
                                                 f"postRun {hook.message}"))
        # 8. Finish: the phase follows the agent's outcome.
        usage = TokenUsage(input_tokens=outcome.metrics.input_tokens, output_tokens=outcome.metrics.output_tokens,
                           total_tokens=outcome.metrics.input_tokens + outcome.metrics.output_tokens,
                           tool_calls=outcome.metrics.tool_calls, duration_ms=outcome.metrics.duration_ms)
        extra: dict[str, Any] = {}
        if gate is not None:
            g = self._gate
            extra = {"gate_verdict": gate[0], "gate": GateStatus(state=gate[0], requested_at=g.requested_at,
                                                                 decided_at=g.decided_at, decided_by=g.decided_by,
                                                                 reason=g.reason)}
        if outcome.status == "success":
            return await self._finish("Succeeded", result=gate[1] if gate else outcome.response, token_usage=usage,
                                      exit_code=0 if run.post_run else None, conditions=conditions, **extra)
        return await self._finish("Failed", error=outcome.error, conditions=conditions,
                                  exit_code=outcome.exit_code if run.post_run else None, **extra)

    async def _gate_and_postrun(self, run: ResolvedRun, req: JobRequest, outcome: AgentOutcome,
                                conditions: list[Condition]) -> tuple[str, str]:
        """postRun with a gate hook: wait for a verdict (durably, with no pod) or gateTimeout.

        Returns (gateVerdict label, final result). A gate hook that exits 0 leaves the run waiting;
        one that fails without a verdict resolves the gate at once. A gate hook killed only for its
        own timeout (a Sympozium-style `sleep` approval hook) also leaves the run waiting."""
        gate = run.gate_hook
        assert gate is not None
        started = workflow.now()
        self._gate = GateView(state="pending", requested_at=rfc3339(started))
        workflow.upsert_search_attributes([SA_GATE.value_set("pending")])
        hook = await self._hooks(run, "post-run", req, stop_when=lambda: self._verdict is not None,
                                 gate_requested_at=rfc3339(started))
        gate_failed = (not hook.ok and hook.failed_hook == gate.name and hook.exit_code != 124
                       and self._verdict is None)
        if not hook.ok and hook.failed_hook != gate.name and hook.message:
            conditions.append(self._cond("PostRunFailed", "True", "PostRunJobFailed", f"postRun {hook.message}"))
        if gate_failed:
            conditions.append(self._cond("PostRunFailed", "True", "PostRunJobFailed", f"postRun {hook.message}"))
        if self._verdict is None and not gate_failed:
            self._state.step = "waiting for a gate verdict"
            remaining = started + timedelta(seconds=run.gate_timeout_seconds) - workflow.now()
            try:
                await workflow.wait_condition(lambda: self._verdict is not None,
                                              timeout=max(remaining.total_seconds(), 0.001))
            except TimeoutError:
                pass
        agent_text = outcome.response if outcome.status == "success" else ""
        label, final = resolve(self._verdict, agent_result=agent_text, gate_default=run.gate_default,
                               hook_failed=gate_failed)
        v = self._verdict
        decided_by = v.decided_by if v else "gate-default"
        reason = (v.reason or f"{v.action} via {v.source}") if v else (
            "gate hook failed without a verdict" if gate_failed else f"no verdict within {run.gate_timeout_seconds}s")
        self._gate = GateView(state=label, gate_verdict=label, requested_at=rfc3339(started), decided_at=rfc3339(workflow.now()),
                              decided_by=decided_by, reason=reason, result=final)
        workflow.upsert_search_attributes([SA_GATE.value_set(label)])
        conditions.append(self._cond("GateResolved", "True", label, reason))
        return label, final

    async def _hooks(self, run: ResolvedRun, component: str, req: JobRequest, *,
                     stop_when: Any = None, gate_requested_at: str | None = None) -> HookOutcome:
        hooks = run.pre_run if component == "prerun" else run.post_run
        job: JobRef = await self._act(KubeActivities.create_job, req.model_copy(update={"component": component}),
                                      f"{component} Job with {len(hooks)} hook(s)")
        self._state.jobs[component] = job.name
        if component == "post-run":
            extra: dict[str, Any] = {}
            if gate_requested_at is not None:
                extra["gate"] = GateStatus(state="pending", requested_at=gate_requested_at)
            await self._phase("PostRunning", post_run_job_name=job.name, **extra)
            if gate_requested_at is not None:
                self._emit("agent.run.gate.pending", {"gateTimeout": f"{run.gate_timeout_seconds}s"})
        state = await self._wait(job, deadline=timedelta(seconds=sum(h.timeout_seconds for h in hooks) + 60),
                                 hooks=hooks, stop_when=stop_when)
        if state.reason == STOPPED_FOR_VERDICT:
            return HookOutcome(ok=True, message="stopped: the gate has its verdict")
        timed_out = _timed_out_hook(state, hooks)
        if timed_out is not None:
            # The Job (and its pod) is gone already; which hook ran out of time is known from the wait.
            return timed_out
        outcome: HookOutcome = await self._act(KubeActivities.read_hook_outcome, state, f"read {component} outcome")
        return outcome

    async def _agent(self, run: ResolvedRun, req: JobRequest) -> AgentOutcome:
        job: JobRef = await self._act(KubeActivities.create_job, req, f"agent Job {run.ref.name}")
        self._state.jobs["agent-run"] = job.name
        await self._phase("Running", job_name=job.name)
        state = await self._wait(job, deadline=timedelta(seconds=run.timeout_seconds) + policies.AGENT_DEADLINE_GRACE)
        timed_out = state.reason in ("DeadlineExceeded", "WorkflowDeadline")
        outcome: AgentOutcome = await self._act(KubeActivities.read_agent_result,
                                                ResultRequest(job=job, timed_out=timed_out), "read the agent's result")
        if state.pod_name:
            await self._status(pod_name=state.pod_name)
        if timed_out:
            await self._act(KubeActivities.delete_job, DeleteJob(job=job), "delete the timed-out agent Job")
        return outcome

    async def _wait(self, job: JobRef, *, deadline: timedelta, hooks: list[ResolvedHook] | None = None,
                    stop_when: Any = None) -> JobState:
        """Wait for the Job: woken by the bridge's signal, or by the slow fallback check, or a deadline.

        With `stop_when` (the gate's verdict), the Job is stopped as soon as it holds."""
        end = workflow.now() + deadline
        by_container = {hook_container(job.component, h.name): h for h in hooks or []}
        hook_end: datetime | None = None
        while True:
            now = workflow.now()
            wake = min(float(self._fallback), (end - now).total_seconds())
            if by_container:
                # While hooks run, check at least as often as the shortest hook timeout allows.
                wake = min(wake, float(min(h.timeout_seconds for h in by_container.values())))
            if hook_end is not None:
                wake = min(wake, (hook_end - now).total_seconds())
            try:
                await workflow.wait_condition(
                    lambda: job.uid in self._finished or (stop_when is not None and stop_when()),
                    timeout=max(wake, 0.001))
            except TimeoutError:
                pass
            if stop_when is not None and stop_when() and job.uid not in self._finished:
                await self._act(KubeActivities.delete_job, DeleteJob(job=job), f"stop Job {job.name}: verdict given")
                return JobState(job=job, finished=True, succeeded=True, reason=STOPPED_FOR_VERDICT)
            state: JobState = await self._act(KubeActivities.check_job, job, f"check Job {job.name}")
            if state.finished:
                return state
            now = workflow.now()
            hook_end = None
            if state.running_hook is not None and state.running_hook.container in by_container:
                hook = by_container[state.running_hook.container]
                hook_end = _parse(state.running_hook.started_at) + timedelta(seconds=hook.timeout_seconds)
                if now >= hook_end:
                    await self._act(KubeActivities.delete_job, DeleteJob(job=job), f"stop Job {job.name}: hook timeout")
                    return state.model_copy(update={"finished": True, "succeeded": False, "reason": HOOK_TIMEOUT})
            if now >= end:
                await self._act(KubeActivities.delete_job, DeleteJob(job=job), f"stop Job {job.name}: deadline")
                return state.model_copy(update={"finished": True, "succeeded": False, "reason": "WorkflowDeadline"})
            self._finished.pop(job.uid, None)

    # -- maxConcurrent: a slot of the Agent ---------------------------------------------------------

    def _take_notice(self, notice: SlotNotice, *, reask: bool = False) -> None:
        """Keep the newest notice; a granted slot is never taken back.

        The reply to asking again is taken even if its `seq` is lower: a slots workflow that was
        terminated and started afresh counts from 1 again."""
        old = self._slot
        if old is None or (not old.granted and (reask or notice.seq > old.seq)):
            self._slot = notice

    def _slot_news(self, notice: SlotNotice) -> Callable[[], bool]:
        return lambda: self._slot is not notice

    async def _wait_for_slot(self, run: ResolvedRun, limit: SlotLimit) -> None:
        """Wait, durably and in creation order, for one of the Agent's maxConcurrent slots; the status says so."""
        assert self._ref is not None
        req = SlotRequest(namespace=run.ref.namespace, agent=run.agent, workflow_id=workflow.info().workflow_id,
                          run_name=run.ref.name, created_at=limit.created_at, limit=limit.limit,
                          policy=limit.policy, check_seconds=self._fallback)
        # Set before asking: a run cancelled while asking still gives back whatever it was given.
        self._slots_wid = slots_workflow_id(run.ref.namespace, run.agent)
        self._state.step = "waiting for a slot"
        self._take_notice(await self._ask_for_slot(req))
        told = 0
        while True:
            notice = self._slot
            assert notice is not None
            if notice.granted:
                break
            if notice.position != told:
                told = notice.position
                message = (f'waiting for a slot: Agent "{run.agent}" runs at most {notice.limit} at a time '
                           f'(maxConcurrent of SympoziumPolicy "{limit.policy}"); position {told} in the queue')
                self._state.step = f"waiting for a slot (position {told})"
                workflow.set_current_details(message)
                await self._conditions(self._cond("Queued", "True", "MaxConcurrent", message),
                                       summary=f"write status: queued at position {told}")
            try:
                await workflow.wait_condition(self._slot_news(notice), timeout=policies.SLOT_REASK)
            except TimeoutError:
                # No news for long: ask again (harmless), in case the slots workflow was terminated.
                self._take_notice(await self._ask_for_slot(req), reask=True)
        self._state.step = "slot granted"
        if told:
            workflow.set_current_details("")
            message = f'slot granted: Agent "{run.agent}" runs at most {notice.limit} at a time'
            await self._conditions(self._cond("Queued", "False", "SlotGranted", message),
                                   summary="write status: slot granted")

    async def _ask_for_slot(self, req: SlotRequest) -> SlotNotice:
        notice: SlotNotice = await workflow.execute_activity_method(
            SlotActivities.acquire_slot, req, summary=f"ask for a slot of Agent {req.agent} (maxConcurrent {req.limit})",
            start_to_close_timeout=policies.SLOT_CALL, schedule_to_close_timeout=policies.SLOT_STEP,
            retry_policy=policies.SLOT_RETRY,
            # Deleted while asking: the answer lands before the slot is given back, so nothing is left behind.
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        return notice

    async def _give_back_slot(self) -> None:
        """Give the slot back, or leave the queue, exactly once; the Agent's next waiting run may start."""
        if self._slots_wid is None:
            return
        slots, self._slots_wid = self._slots_wid, None
        try:
            await workflow.get_external_workflow_handle(slots).signal(
                RELEASE_SIGNAL, SlotRelease(workflow_id=workflow.info().workflow_id))
        except FailureError as e:
            # Not running: nothing is held there (its check frees holders that are gone anyway).
            workflow.logger.info("slots workflow %s is not running (%s); nothing to give back", slots, e)

    # -- status ----------------------------------------------------------------------------------

    @staticmethod
    def _cond(ctype: str, status: str, reason: str, message: str) -> Condition:
        return Condition(type=ctype, status=status, reason=reason, message=message,
                         last_transition_time=rfc3339(workflow.now()))

    async def _status(self, conditions: list[Condition] | None = None, **fields: Any) -> None:
        assert self._ref is not None
        status = AgentRunStatus.model_validate({k: v for k, v in fields.items()})
        write = StatusWrite(ref=self._ref, status=status, conditions=conditions or [])
        await self._act(KubeActivities.write_status, write, "write status: " + ", ".join(sorted(fields)))

    async def _conditions(self, *conditions: Condition, summary: str) -> None:
        """Upsert conditions only, leaving every other status field alone."""
        assert self._ref is not None
        write = StatusWrite(ref=self._ref, status=AgentRunStatus(), conditions=list(conditions))
        await self._act(KubeActivities.write_status, write, summary)

    async def _phase(self, phase: str, **fields: Any) -> None:
        self._state.phase = phase
        self._state.step = phase
        workflow.upsert_search_attributes([SA_PHASE.value_set(phase)])
        await self._status(phase=phase, **fields)
        if phase == "Pending" and self._task:
            self._emit("agent.run.started", {"task": self._task})
        self._emit("agent.run.phase", {"phase": phase})

    async def _finish(self, phase: str, *, result: str | None = None, error: str | None = None,
                      token_usage: TokenUsage | None = None, exit_code: int | None = None,
                      conditions: list[Condition] | None = None, **extra: Any) -> RunResult:
        self._done = True
        fields: dict[str, Any] = {"completed_at": rfc3339(workflow.now()), "workflow_id": workflow.info().workflow_id,
                                  **extra}
        if result is not None:
            fields["result"] = result
        if error is not None:
            fields["error"] = error
        if token_usage is not None and (token_usage.input_tokens or token_usage.output_tokens):
            fields["token_usage"] = token_usage
        if exit_code is not None:
            fields["exit_code"] = exit_code
        self._state.result, self._state.error = result, error
        self._state.phase = phase
        workflow.upsert_search_attributes([SA_PHASE.value_set(phase)])
        await self._status(conditions=conditions, phase=phase, **fields)
        self._emit("agent.run.phase", {"phase": phase})
        label = fields.get("gate_verdict")
        status = {"Succeeded": "success", "Skipped": "skipped"}.get(phase, "error")
        self._emit("agent.run.completed", {"status": status, "response": result if phase != "Failed" else None,
                                           "error": error, "gateVerdict": label})
        if phase == "Failed":
            self._emit("agent.run.failed", {"error": error, "reason": _failure_reason(error or "")})
        raise _Finished(RunResult(phase=phase, result=result, error=error))

    async def _cleanup(self, start: StartRun, run: ResolvedRun | None, *, kill: bool) -> None:
        """Remove what the run made and release the object, to the end even if cancelled meanwhile.

        A cancellation (the object was deleted) that arrives during cleanup must not stop it half
        way: the object would keep its finalizer forever. It is honoured once cleanup is done.
        """
        self._state.step = "cleanup"
        steps = asyncio.ensure_future(self._cleanup_steps(start, run, kill=kill))
        try:
            await asyncio.shield(steps)
        except asyncio.CancelledError:
            await steps
            raise
        finally:
            self._state.step = "done"

    async def _cleanup_steps(self, start: StartRun, run: ResolvedRun | None, *, kill: bool) -> None:
        if run is not None:  # an unresolved run created nothing but the finalizer
            req = Cleanup(run=run, ref=start.ref, keep_jobs=run.cleanup == "keep", kill_jobs=kill)
            await self._act(KubeActivities.cleanup, req, "clean up Jobs, workspace and RBAC", long=True)
        # Only now is nothing of the run executing (a killed run's pods are gone), so the slot is free.
        await self._give_back_slot()
        await self._act(KubeActivities.release_run, start, "release the run object", long=True)

    # -- activity plumbing -----------------------------------------------------------------------

    async def _act(self, fn: Any, arg: Any, summary: str, *, long: bool = False) -> Any:
        try:
            return await workflow.execute_activity_method(
                fn, arg, summary=summary,
                start_to_close_timeout=policies.KUBE_CALL,
                schedule_to_close_timeout=policies.CLEANUP_STEP if long else policies.KUBE_STEP,
                retry_policy=policies.KUBE_RETRY,
            )
        except ActivityError as e:
            cause = e.cause
            if (isinstance(cause, ApplicationError) and cause.non_retryable and not long and not self._failing
                    and not _run_gone(e)):
                self._failing = True
                # A permanent Kubernetes failure ends the run with a clear error (cleanup still runs).
                await self._finish("Failed", error=f"{summary}: {cause.message}",
                                   conditions=[self._cond("StepFailed", "True", cause.type or "Error", cause.message)])
            raise
