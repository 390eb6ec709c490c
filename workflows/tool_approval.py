"""Tool calls waiting for people inside one run (SPEC §10): which decision counts, what is refused and why, and the
decisions the resumed agent gets.

Pure state, used by AgentRunWorkflow's handlers and its agent step; it never waits or calls out. One round of calls
waits at a time (the agent's container ended with them; no pod of the run exists). A decision counts only while its
call waits, once, for the arguments that wait (the hash), from an identity the run can name: one sent before any call
waits, for a call that does not wait, for other arguments, a second time, or by an annotation older than the wait or
whose writer no admission webhook vouched for, is refused, and every refusal is kept with who sent it for the run's
conditions and events. A decision that arrives while the agent is being parked (its Jobs going, the status not yet
written) waits for the round to open, so none is lost to that race.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.approvals import (
        DECISIONS_KEPT,
        TIMEOUT_SOURCE,
        PendingCall,
        ToolApprovalStatus,
        ToolApprovalView,
        ToolDecision,
        ToolDecisionRecord,
    )
    from models.names import UNVERIFIED
    from models.run import Reason

# One refusal for a run that has ended, however the decision reaches it.
FINISHED = "the run has finished: no tool call waits for a decision any more"


@dataclass
class ToolRefusal:
    decision: ToolDecision
    reason: Reason
    why: str


def _version(v: str | None) -> int | None:
    return int(v) if v is not None and v.isdigit() else None


class ToolApprovals:
    def __init__(self) -> None:
        self.status: ToolApprovalStatus | None = None  # the round waiting (state pending), or the last one
        self.parking = False  # the agent ended waiting: its Jobs are going, the round is not open yet
        self.done = False  # the run has finished
        self.records: list[ToolDecisionRecord] = []  # every decision of the run, in order
        self.refusals: list[ToolRefusal] = []  # refused, not yet recorded in the run's conditions and events
        self.decided: dict[str, ToolDecisionRecord] = {}  # this round's decisions, by call id
        self._earlier: dict[str, ToolDecisionRecord] = {}  # earlier rounds' decisions, by call id (the last)
        self._from_version: int | None = None
        self._held: list[ToolDecision] = []  # signalled while parking: taken or refused once the round opens

    # -- the round's life ---------------------------------------------------------------------------------------

    @property
    def waiting(self) -> bool:
        return self.status is not None and self.status.state == "pending" and not self.parking

    @property
    def calls(self) -> dict[str, PendingCall]:
        return {c.id: c for c in self.status.calls} if self.status is not None else {}

    @property
    def all_decided(self) -> bool:
        return self.waiting and all(c in self.decided for c in self.calls)

    def park(self, status: ToolApprovalStatus) -> None:
        """The agent ended with these calls waiting; the park step runs (the round opens when it is done)."""
        self.parking = True
        self.status = status
        self.decided = {}

    def open(self, run_version: str | None, decided_at: str) -> None:
        """No pod of the run is left and the status shows the calls: decisions count from now. Decisions signalled
        while parking are taken (or refused) now, in the order they came."""
        self.parking = False
        self._from_version = _version(run_version)
        held, self._held = self._held, []
        for d in held:
            self.offer(d, decided_at=decided_at)

    def expire(self, *, on_timeout: str, why: str, decided_at: str) -> list[ToolDecisionRecord]:
        """The wait ran out: every call without a decision gets the policy's (toolApproval.onTimeout)."""
        out = []
        for call in self.calls.values():
            if call.id in self.decided:
                continue
            action = "approve" if on_timeout == "allow" else "reject"
            out.append(self._take(ToolDecision(call_id=call.id, action=action, arguments_sha256=call.arguments_sha256,
                                               reason=why, decided_by=TIMEOUT_SOURCE), call, source=TIMEOUT_SOURCE,
                                  decided_at=decided_at))
        return out

    def close(self) -> list[ToolDecisionRecord]:
        """The round is decided: its decisions, in the order of its calls (for the agent started again)."""
        assert self.status is not None
        self.status = self.status.model_copy(update={"state": "decided"})
        for record in self.decided.values():
            self._earlier[record.call_id] = record
        return [self.decided[c.id] for c in self.status.calls if c.id in self.decided]

    def kept(self) -> list[ToolDecisionRecord]:
        """`status.toolApprovals`: the newest DECISIONS_KEPT."""
        return list(self.records[-DECISIONS_KEPT:])

    # -- decisions ----------------------------------------------------------------------------------------------

    def refusal(self, d: ToolDecision) -> ToolRefusal | None:
        """Why `d` cannot be taken now, or None."""
        if self.done:
            return ToolRefusal(d, Reason.RUN_FINISHED, FINISHED)
        if d.source == "annotation" and d.decided_by == UNVERIFIED:
            return ToolRefusal(d, Reason.UNVERIFIED_WRITER,
                               "no admission webhook vouches for who wrote the tool-verdict annotation in this "
                               "namespace, so it decides nothing: decide through the API, or install the webhooks")
        if self.waiting and d.source == "annotation" and self._older(d):
            return ToolRefusal(d, Reason.OLDER_THAN_WAIT,
                               "the annotation was written before the calls it decides were waiting")
        call = self.calls.get(d.call_id) if self.waiting else None
        if call is None:
            earlier = self.decided.get(d.call_id) or self._earlier.get(d.call_id)
            if earlier is not None:
                return ToolRefusal(d, Reason.ALREADY_DECIDED, f"call {d.call_id} was already decided "
                                   f"({earlier.action} by {earlier.decided_by})")
            if not self.waiting:
                return ToolRefusal(d, Reason.NO_CALL_PENDING, "no tool call is waiting for a decision")
            return ToolRefusal(d, Reason.UNKNOWN_CALL, f"no call {d.call_id} is waiting for a decision (waiting: "
                               f"{', '.join(sorted(self.calls)) or 'none'})")
        taken = self.decided.get(d.call_id)
        if taken is not None:
            return ToolRefusal(d, Reason.ALREADY_DECIDED, f"call {d.call_id} was already decided ({taken.action} by "
                               f"{taken.decided_by})")
        if d.arguments_sha256 != call.arguments_sha256:
            return ToolRefusal(d, Reason.OTHER_ARGUMENTS, f"argumentsSha256 {d.arguments_sha256} is not the hash of "
                               f"call {d.call_id}'s arguments ({call.arguments_sha256}): the decision is for other "
                               "arguments than the ones waiting")
        if d.action == "edit" and not d.arguments:
            return ToolRefusal(d, Reason.BAD_DECISION, "an edit needs the edited arguments")
        return None

    def submit(self, d: ToolDecision, *, decided_at: str) -> ToolRefusal | ToolDecisionRecord:
        """An Update's decision (never while parking: the handler waits that out): taken, or refused and kept."""
        refusal = self.refusal(d)
        if refusal is not None:
            self.refusals.append(refusal)
            return refusal
        return self._take(d, self.calls[d.call_id], source=d.source if not d.decided_by.startswith("temporal:")
                          else "temporal", decided_at=decided_at)

    def offer(self, d: ToolDecision, *, decided_at: str) -> None:
        """A signal's decision (the annotation path): held while parking, else taken or refused."""
        if self.parking and not self.done:
            self._held.append(d)
            return
        self.submit(d, decided_at=decided_at)

    def view(self, record: ToolDecisionRecord) -> ToolApprovalView:
        waiting = [c for c in self.calls if c not in self.decided]
        return ToolApprovalView(call_id=record.call_id, action=record.action, decided_by=record.decided_by,
                                source=record.source, arguments_sha256=record.arguments_sha256, waiting=waiting,
                                resumed=not waiting)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _take(self, d: ToolDecision, call: PendingCall, *, source: str, decided_at: str) -> ToolDecisionRecord:
        assert self.status is not None
        record = ToolDecisionRecord(call_id=call.id, tool=call.tool, action=d.action,
                                    arguments_sha256=call.arguments_sha256,
                                    arguments=d.arguments if d.action == "edit" else None,
                                    decided_by=d.decided_by or "unknown", source=source, reason=d.reason or None,
                                    decided_at=decided_at, attempt=self.status.attempt)
        self.decided[call.id] = record
        self.records.append(record)
        return record

    def _older(self, d: ToolDecision) -> bool:
        seen = _version(d.resource_version)
        return self._from_version is not None and seen is not None and seen <= self._from_version
