"""The response gate inside one run (SPEC §4): which verdict counts, what the API sees, how it resolves.

Pure state, used by AgentRunWorkflow's handlers and its postRun step; it never waits or calls out.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.gate import GateView, Label, Verdict, resolve


class Gate:
    def __init__(self) -> None:
        self.has_gate: bool | None = None  # None until the run is resolved
        self.verdict: Verdict | None = None  # the first verdict wins
        self.refused: list[Verdict] = []  # later ones, kept for the record
        self.view = GateView(state="none")
        self.done = False  # the run has finished: no verdict is taken any more

    # -- the three ways a verdict arrives -------------------------------------------------------------

    def offer(self, verdict: Verdict) -> None:
        """A verdict without a reply (the annotation path, a plain signal): taken if the gate can still take one."""
        if self.verdict is None and not self.done and self.has_gate is not False:
            self.verdict = verdict
        else:
            self.refused.append(verdict)

    def check(self, verdict: Verdict) -> None:
        """The Update's validator: refuse (the caller sees why) what the gate cannot take."""
        if self.done:
            raise ValueError("the run has finished")
        if self.has_gate is False:
            raise ValueError("the run has no gate (no postRun hook with gate: true)")
        if self.verdict is not None or self.view.gate_verdict is not None:
            raise ValueError("the gate already has a verdict")

    def accept(self, verdict: Verdict) -> bool:
        """The Update's verdict (validated); False when the gate has not started waiting (it is kept for then)."""
        self.verdict = verdict
        return self.view.state == "pending"

    @property
    def answered(self) -> bool:
        return self.view.gate_verdict is not None or self.done

    # -- the gate's own life -------------------------------------------------------------------------

    def open(self, requested_at: str) -> None:
        self.view = GateView(state="pending", requested_at=requested_at)

    def close(self, *, agent_text: str, gate_default: str, gate_timeout_seconds: int, hook_failed: bool,
              decided_at: str) -> tuple[Label, str, str]:
        """Resolve as SPEC §4's table says: (label, final result, reason)."""
        label, final = resolve(self.verdict, agent_result=agent_text, gate_default=gate_default,
                               hook_failed=hook_failed)
        v = self.verdict
        if v is not None:
            reason = v.reason or f"{v.action} via {v.source}"
        elif hook_failed:
            reason = "gate hook failed without a verdict"
        else:
            reason = f"no verdict within {gate_timeout_seconds}s"
        self.view = GateView(state=label, gate_verdict=label, requested_at=self.view.requested_at,
                             decided_at=decided_at, decided_by=v.decided_by if v else "gate-default",
                             reason=reason, result=final)
        return label, final, reason
