"""The response gate inside one run (SPEC §4): which verdict counts, what the API sees, how it resolves.

Pure state, used by AgentRunWorkflow's handlers and its postRun step; it never waits or calls out.

A verdict counts only while the gate waits (`strict`, every run started since verdicts became
authentic): one sent before the gate starts is refused, and so is an annotation verdict the bridge
saw in a version of the run older than the gate (the gate's step removes the annotation first and
notes the run's version). Every refusal is kept, with who sent it, for the run's conditions and
events. Runs started before keep the old rules: the first verdict wins, whenever it came.

A retried run opens the gate once per attempt: each attempt's gate takes its own verdict, and one that
comes after an attempt was decided is refused ("already decided"), as after the last.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.agentrun import GateStatus
    from models.gate import GateView, Label, RetryChance, Verdict, resolve
    from models.resolve import ResolvedRun
    from models.run import Reason
    from models.steps import AgentOutcome, HookOutcome


@dataclass
class Refusal:
    verdict: Verdict
    reason: Reason
    why: str


def _version(v: str | None) -> int | None:
    """A resourceVersion as a number (etcd's revision, what every API server gives), or None."""
    return int(v) if v is not None and v.isdigit() else None


def _source(v: Verdict | None, *, hook_failed: bool) -> str:
    """Where the gate's verdict came from, as the status records it: a verdict's way in (one recorded as
    `temporal:<claim>` came straight to Temporal whatever it claimed), else what decided without one."""
    if v is None:
        return "gate-hook" if hook_failed else "timeout"
    return "temporal" if v.decided_by.startswith("temporal:") else v.source


def gate_hook_failed(hook: HookOutcome, gate_hook: str, *, has_verdict: bool) -> bool:
    """The gate's Job came to `hook`: did the gate hook fail without a verdict (which resolves the gate at
    once)? A gate hook killed only for its own timeout (exit 124: a Sympozium-style `sleep` approval hook)
    leaves the run waiting, like one that exits 0."""
    return not hook.ok and hook.failed_hook == gate_hook and hook.exit_code != 124 and not has_verdict


# One refusal for a run that has ended, however the verdict reaches it (the API says the same when the run's status
# or Temporal already shows the end), so a caller is told the same thing whichever happened first.
FINISHED = "the run has finished: its gate can no longer take a verdict"


class Gate:
    def __init__(self) -> None:
        self.has_gate: bool | None = None  # None until the run is resolved
        self.strict = False  # verdicts only while the gate waits (set once the run starts, if it is new enough)
        self.verdict: Verdict | None = None  # the first verdict that counts wins
        self.refused: list[Verdict] = []  # the others, kept for the record
        self.refusals: list[Refusal] = []  # refused, not yet recorded in the run's conditions and events
        self.view = GateView(state="none")
        self.done = False  # the run has finished: no verdict is taken any more
        self.attempt = 1  # the attempt whose gate is open (or was last)
        self.decided: dict[int, GateView] = {}  # each attempt's gate as it was resolved
        self._early: list[Verdict] = []  # offered before the gate started
        self._unchecked: list[Verdict] = []  # annotation verdicts while the gate's version is not known yet
        self._from_version: int | None = None
        self._version_known = False

    # -- the ways a verdict arrives -------------------------------------------------------------------

    def offer(self, verdict: Verdict) -> None:
        """A verdict without a reply (the annotation path, a plain signal): taken if the gate can take it."""
        if self.done or self.has_gate is False or self.verdict is not None or self.view.gate_verdict is not None:
            self._refuse(verdict)
        elif self.view.state != "pending":
            self._early.append(verdict)  # the gate decides when it starts (it knows then which rules apply)
        elif self.strict and verdict.source == "annotation" and not self._version_known:
            self._unchecked.append(verdict)
        elif self.strict and verdict.source == "annotation" and self._older(verdict):
            self._refuse(verdict, Reason.OLDER_THAN_GATE, "the annotation was written before the gate started")
        else:
            self.verdict = verdict

    def refusal(self, verdict: Verdict) -> Refusal | None:
        """Why the Update's verdict cannot be taken now (strict runs), or None."""
        if self.done:
            return Refusal(verdict, Reason.RUN_FINISHED, FINISHED)
        if self.has_gate is False:
            return Refusal(verdict, Reason.NO_GATE, "the run has no gate (no postRun hook with gate: true)")
        if self.verdict is not None or self.view.gate_verdict is not None:
            return Refusal(verdict, Reason.ALREADY_DECIDED, "the gate already has a verdict")
        if self.view.state != "pending":
            return Refusal(verdict, Reason.NO_GATE_WAITING, "no gate is waiting")
        return None

    def refuse(self, refusal: Refusal) -> None:
        self.refused.append(refusal.verdict)
        self.refusals.append(refusal)

    def check(self, verdict: Verdict) -> None:
        """The Update's validator for runs on the old rules: refuse (the caller sees why) what the gate cannot take."""
        if self.done:
            raise ValueError(FINISHED)
        if self.has_gate is False:
            raise ValueError("the run has no gate (no postRun hook with gate: true)")
        if self.verdict is not None or self.view.gate_verdict is not None:
            raise ValueError("the gate already has a verdict")

    def submit(self, verdict: Verdict) -> Refusal | None:
        """The Update's verdict: strict runs refuse what the gate cannot take now (kept for the record, and
        returned: the caller sees why); else it is taken (on the old rules `check` has validated it)."""
        refusal = self.refusal(verdict) if self.strict else None
        if refusal is not None:
            self.refuse(refusal)
        else:
            self.accept(verdict)
        return refusal

    @property
    def waiting(self) -> bool:
        """The gate has started waiting (and not yet resolved)."""
        return self.view.state == "pending"

    def accept(self, verdict: Verdict) -> bool:
        """The Update's verdict (validated); False when the gate has not started waiting (old rules: kept for then)."""
        self.verdict = verdict
        return self.view.state == "pending"

    @property
    def answered(self) -> bool:
        return self.view.gate_verdict is not None or self.done

    def answered_for(self, attempt: int) -> bool:
        """Attempt `attempt`'s gate is resolved (later attempts may have opened theirs since)."""
        return attempt in self.decided or self.done

    def view_of(self, attempt: int) -> GateView:
        return self.decided.get(attempt, self.view)

    def status(self) -> GateStatus:
        """The gate as the run's status shows it."""
        v = self.view
        return GateStatus(state=v.state, requested_at=v.requested_at, decided_at=v.decided_at,
                          decided_by=v.decided_by, source=v.source, reason=v.reason)

    # -- the gate's own life -------------------------------------------------------------------------

    def open(self, requested_at: str, attempt: int = 1) -> None:
        """The gate starts waiting. Verdicts offered before: refused (strict), else the first one counts.
        A later attempt's gate starts afresh: no verdict, and the run's version at its start still to learn."""
        if attempt > 1:
            self.verdict, self._unchecked, self._from_version, self._version_known = None, [], None, False
        self.attempt = attempt
        self.view = GateView(state="pending", requested_at=requested_at)
        early, self._early = self._early, []
        for v in early:
            if self.strict:
                self._refuse(v, Reason.NO_GATE_WAITING, "sent before the gate started")
            else:
                self.offer(v)

    def started(self, run_version: str | None) -> None:
        """The gate's step removed any older verdict annotation; the run's version then was `run_version`."""
        self._from_version, self._version_known = _version(run_version), True
        unchecked, self._unchecked = self._unchecked, []
        for v in unchecked:
            self.offer(v)

    def close(self, run: ResolvedRun, agent: AgentOutcome, *, hook_failed: bool, decided_at: str,
              retry: RetryChance = "off", exhausted_why: str = "") -> tuple[Label, str, str]:
        """Resolve `run`'s gate over `agent`'s outcome as SPEC §4's table says: (label, final result, reason).
        `retry`: what a retry verdict means for this attempt (no lifecycle.retry, another attempt, none left and why)."""
        agent_text = agent.response if agent.status == "success" else ""
        for late in self._unchecked:  # the gate ended before its step said which version it started at
            self._refuse(late, Reason.OLDER_THAN_GATE, "the gate ended before it could tell the verdict's age")
        self._unchecked = []
        label, final = resolve(self.verdict, agent_result=agent_text, gate_default=run.gate_default,
                               hook_failed=hook_failed, retry=retry, attempts=self.attempt, exhausted_why=exhausted_why)
        v = self.verdict
        if v is not None:
            reason = v.reason or f"{v.action} via {v.source}"
            if label == "retries-exhausted":
                reason = f"{reason}; {exhausted_why}"
        elif hook_failed:
            reason = "gate hook failed without a verdict"
        else:
            reason = f"no verdict within {run.gate_timeout_seconds}s"
        self.view = GateView(state=label, gate_verdict=label, requested_at=self.view.requested_at,
                             decided_at=decided_at, decided_by=v.decided_by if v else "gate-default",
                             source=_source(v, hook_failed=hook_failed),
                             reason=reason, result=final)
        self.decided[self.attempt] = self.view
        return label, final, reason

    # -- helpers ----------------------------------------------------------------------------------------

    def _older(self, verdict: Verdict) -> bool:
        seen = _version(verdict.resource_version)
        return self._from_version is not None and seen is not None and seen <= self._from_version

    def _refuse(self, verdict: Verdict, reason: Reason | None = None, why: str = "") -> None:
        if reason is None:
            r = self.refusal(verdict)
            reason, why = (r.reason, r.why) if r is not None else (Reason.ALREADY_DECIDED, "the gate already has a verdict")
        if self.strict:
            self.refuse(Refusal(verdict, reason, why))
        else:
            self.refused.append(verdict)
