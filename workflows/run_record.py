"""What a run has to say, kept until a step writes it: its conditions and its events (SPEC §3, §6).

AgentRunWorkflow only decides; every status write and every event goes out with the step that causes
it. This keeps what the workflow recorded in between: each condition (its transition time kept while
its status stays, so a rewrite does not look like a change), and the events emitted since the last
step, each with its sequence number fixed when emitted, so a retried step publishes a duplicate that
NATS drops, not a new event. Events NATS did not take with their step are retried here on their own,
an activity each, so the run never waits on NATS; the workflow lets them finish before it closes.

Deterministic: times are `workflow.now()`, and publishing is a workflow activity.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.events import EventActivities
    from models.agentrun import AgentRunStatus, Condition, ParentRef
    from models.approvals import ToolApprovalStatus, ToolDecisionRecord
    from models.events import EventValue, RunEvent, Topic
    from models.resolve import RunRef
    from models.run import ConditionType, FailureReason, Phase, Reason, RunState, StatusUpdate
    from models.steps import RESULT_MAX_BYTES, AgentOutcome, StatusChange
    from models.timestamps import rfc3339

    from . import policies
    from .gate import Gate, Refusal
    from .tool_approval import ToolApprovals, ToolRefusal


class RunRecord:
    def __init__(self, state: RunState) -> None:
        self.ref: RunRef | None = None  # the run, once it starts: events name it (signals may come before)
        self.begun = False  # begin_run wrote Pending: later writes patch fields of an existing status
        self._state = state  # the run as the workflow sees it: events name its Agent
        self._conditions: dict[str, Condition] = {}
        self._events: list[RunEvent] = []  # emitted, not yet handed to a step
        self._seq = 0
        self._retrying: list[asyncio.Task[None]] = []
        self._announced = 0  # tool decisions whose event is emitted

    # -- conditions ------------------------------------------------------------------------------------

    def cond(self, ctype: str, status: str, reason: str, message: str) -> Condition:
        """Record a condition (its transition time kept while its status stays); written with the next status."""
        old = self._conditions.get(ctype)
        since = old.last_transition_time if old is not None and old.status == status else rfc3339(workflow.now())
        cond = Condition(type=ctype, status=status, reason=reason, message=message, last_transition_time=since)
        self._conditions[ctype] = cond
        return cond

    @property
    def conditions(self) -> list[Condition]:
        """Every condition recorded so far: a status write carries them all (the workflow writes without a read)."""
        return list(self._conditions.values())

    def change(self, status: AgentRunStatus) -> StatusChange:
        """A status write: these fields, every condition recorded so far, and the events emitted since the last."""
        assert self.ref is not None
        return StatusChange(ref=self.ref, update=StatusUpdate(status=status, conditions=self.conditions),
                            events=self.take_events(), first=not self.begun)

    def refused(self, r: Refusal) -> None:
        """A verdict the gate refused: the last one in the conditions (with who sent it), an event each."""
        v = r.verdict
        self.cond(ConditionType.VERDICT_REFUSED, "True", r.reason,
                  f"{v.action} from {v.decided_by} ({v.source}) refused: {r.why}")
        self.emit("agent.run.gate.refused", {"action": v.action, "decidedBy": v.decided_by, "source": v.source,
                                             "reason": r.reason, "message": r.why})

    def refusals_of(self, gate: Gate) -> None:
        """The verdicts `gate` refused since the last call, each recorded as `refused` says. Before the run has
        started they wait for it (a verdict may come before the run does)."""
        if self.ref is None:
            return
        refusals, gate.refusals = gate.refusals, []
        for r in refusals:
            self.refused(r)

    def tool_refused(self, r: ToolRefusal) -> None:
        """A tool decision refused: the last one in the conditions (with who sent it), an event each."""
        d = r.decision
        self.cond(ConditionType.TOOL_DECISION_REFUSED, "True", r.reason,
                  f"{d.action} of call {d.call_id} from {d.decided_by} ({d.source}) refused: {r.why}")
        self.emit("agent.run.tool.refused", {"callId": d.call_id, "action": d.action, "decidedBy": d.decided_by,
                                             "source": d.source, "reason": r.reason, "message": r.why})

    def decisions_of(self, tools: ToolApprovals) -> None:
        """The tool decisions taken and refused since the last call: an event each (agent.run.tool.decided, or
        refused with ToolDecisionRefused)."""
        if self.ref is None:
            return
        refusals, tools.refusals = tools.refusals, []
        for r in refusals:
            self.tool_refused(r)
        for record in tools.records[self._announced:]:
            self.emit("agent.run.tool.decided", {"callId": record.call_id, "tool": record.tool,
                                                 "action": record.action, "decidedBy": record.decided_by,
                                                 "source": record.source})
        self._announced = len(tools.records)

    def tool_calls_waiting(self, status: ToolApprovalStatus) -> None:
        """The agent parked with these calls waiting for people (SPEC §10): the condition and the event."""
        calls = ", ".join(f"{c.id} ({c.tool})" for c in status.calls)
        self.cond(ConditionType.AWAITING_TOOL_APPROVAL, "True", Reason.CALLS_PENDING,
                  f"{len(status.calls)} tool call(s) wait for a decision: {calls}; until {status.expires_at}, then "
                  f"toolApproval.onTimeout: {status.on_timeout}")
        self.emit("agent.run.tool.pending", {"calls": [{"id": c.id, "tool": c.tool,
                                                        "argumentsSha256": c.arguments_sha256}
                                                       for c in status.calls]})

    def tool_calls_decided(self, records: list[ToolDecisionRecord]) -> None:
        said = "; ".join(f"{r.call_id} {r.action} by {r.decided_by}" for r in records)
        self.cond(ConditionType.AWAITING_TOOL_APPROVAL, "False", Reason.CALLS_DECIDED,
                  f"decided: {said}; the agent goes on from its journal")

    # What each condition of a run says: the workflow only says that it happened.

    def invalid_spec(self, problem: str) -> None:
        self.cond(ConditionType.VALIDATED, "False", Reason.INVALID_SPEC, problem)

    def fields_ignored(self, fields: list[str]) -> None:
        """The Sympozium fields of the run that have no effect here."""
        self.cond(ConditionType.FIELDS_IGNORED, "True", Reason.NO_EFFECT_HERE, "; ".join(fields))

    def sub_agent(self, parent: ParentRef) -> None:
        """The run is a sub-agent's: its parent run (which lists its children in status.delegates)."""
        self.cond(ConditionType.SUB_AGENT, "True", Reason.PARENT_RUN,
                  f"sub-agent of AgentRun {parent.run_name} (spawnDepth {parent.spawn_depth})")

    def queued(self, message: str, position: int) -> None:
        """The run's place in its Agent's queue (maxConcurrent); position 0: the slot is granted."""
        if position:
            self.cond(ConditionType.QUEUED, "True", Reason.MAX_CONCURRENT, message)
        else:
            self.cond(ConditionType.QUEUED, "False", Reason.SLOT_GRANTED, message)

    def post_run_failed(self, message: str) -> None:
        """A postRun Job failed: best-effort, so a condition says so and the phase stays (SPEC §3.8)."""
        self.cond(ConditionType.POST_RUN_FAILED, "True", Reason.POST_RUN_JOB_FAILED, f"postRun {message}")

    def step_failed(self, cause: ApplicationError) -> None:
        """A step failed for good: the refusal's type and message."""
        self.cond(ConditionType.STEP_FAILED, "True", cause.type or "Error", cause.message)

    def gate_resolved(self, label: str, reason: str, attempt: int) -> None:
        self.cond(ConditionType.GATE_RESOLVED, "True", label,
                  f"attempt {attempt} sent back: {reason}" if label == "retried" else reason)

    def agent_restarted(self, lost: str, *, restart: int, most: int, job: str) -> None:
        """The agent's pod was lost (`lost` says which and why): the agent starts again in `job`."""
        self.cond(ConditionType.AGENT_RESTARTED, "True", Reason.POD_LOST,
                  f"{lost}; started again in Job {job} (restart {restart} of {most}), continuing from its journal")

    def result_cut(self, agent: AgentOutcome) -> None:
        """The agent's response (or error) was cut to fit a payload and the status: by how much."""
        self.cond(ConditionType.RESULT_CUT, "True", Reason.RESULT_TOO_LARGE,
                  f"the agent's {'response' if agent.status == 'success' else 'error'} was cut to its "
                  f"first {RESULT_MAX_BYTES} of {agent.cut_from} bytes")

    # -- events ----------------------------------------------------------------------------------------

    def emit(self, topic: Topic, data: dict[str, EventValue]) -> None:
        """Queue an event for the next step to publish; its ID is fixed here, so a retry is a duplicate."""
        assert self.ref is not None
        self._seq += 1
        self._events.append(RunEvent(topic=topic, run_name=self.ref.name, namespace=self.ref.namespace,
                                     instance_name=self._state.agent, workflow_id=workflow.info().workflow_id,
                                     seq=self._seq, timestamp=rfc3339(workflow.now()), data=data))

    def ended(self, status: AgentRunStatus, failure: FailureReason) -> None:
        """The run's end (its last status): completed (with the response unless it failed), and failed, with why."""
        phase = status.phase
        outcome = "success" if phase == Phase.SUCCEEDED else "skipped" if phase == Phase.SKIPPED else "error"
        self.emit("agent.run.completed", {"status": outcome,
                                          "response": status.result if phase != Phase.FAILED else None,
                                          "error": status.error, "gateVerdict": status.gate_verdict})
        if phase == Phase.FAILED:
            self.emit("agent.run.failed", {"error": status.error, "reason": failure})

    def pending(self, task: str | None) -> None:
        """begin_run wrote Pending (later writes patch fields of an existing status): the events that say so,
        the run's start with its task (none for a spec that did not resolve) and its phase."""
        self.begun = True
        if task is not None:
            self.emit("agent.run.started", {"task": task})
        self.emit("agent.run.phase", {"phase": Phase.PENDING})

    def take_events(self) -> list[RunEvent]:
        """The events emitted since the last step, for the next step to publish."""
        events, self._events = self._events, []
        return events

    def retry_later(self, events: list[RunEvent]) -> None:
        """Events NATS did not take with their step: retried on their own, for up to an hour; the run goes on."""
        for event in events:
            self._retrying.append(asyncio.ensure_future(self._publish(event)))

    async def _publish(self, event: RunEvent) -> None:
        try:
            await workflow.execute_activity_method(
                EventActivities.publish_event, event, summary=f"event {event.topic}",
                start_to_close_timeout=policies.EVENT_CALL, schedule_to_close_timeout=policies.EVENT_BUDGET,
                retry_policy=policies.EVENT_RETRY)
        except (ActivityError, asyncio.CancelledError):
            workflow.logger.warning("event %s could not be published", event.message_id)

    async def flush(self) -> None:
        """Before the workflow closes: events still queued go out, and retried ones finish (within their budget)."""
        self.retry_later(self.take_events())
        for task in self._retrying:
            await task
        self._retrying.clear()
