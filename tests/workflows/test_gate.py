"""Gate: an Update's verdict is refused or taken by the run's rules, and when a failed gate hook resolves the gate."""

from __future__ import annotations

from models.gate import Verdict
from models.run import Reason
from models.steps import AgentOutcome, HookOutcome
from tests.workflows.cluster import hook, resolved_run
from workflows.gate import Gate, gate_hook_failed

APPROVE = Verdict(action="approve", decided_by="alice", source="api")


def test_a_strict_gate_refuses_an_update_before_it_waits_and_keeps_the_refusal_for_the_record() -> None:
    gate = Gate()
    gate.strict = True
    refusal = gate.submit(APPROVE)
    assert refusal is not None and refusal.reason == Reason.NO_GATE_WAITING
    assert gate.verdict is None and gate.refused == [APPROVE] and gate.refusals == [refusal]


def test_a_strict_gate_takes_an_update_while_it_waits() -> None:
    gate = Gate()
    gate.strict = True
    gate.open("2026-01-01T00:00:00Z")
    assert gate.waiting
    assert gate.submit(APPROVE) is None and gate.verdict == APPROVE and not gate.refusals


def test_a_strict_gate_refuses_a_second_verdict_and_any_after_the_run_ended() -> None:
    gate = Gate()
    gate.strict = True
    gate.open("2026-01-01T00:00:00Z")
    gate.submit(APPROVE)
    second = gate.submit(Verdict(action="reject", decided_by="bob", source="api"))
    assert second is not None and second.reason == Reason.ALREADY_DECIDED and gate.verdict == APPROVE
    gate.done = True
    late = gate.submit(APPROVE)
    assert late is not None and late.reason == Reason.RUN_FINISHED


def test_on_the_old_rules_an_update_before_the_gate_is_taken_for_when_it_starts() -> None:
    gate = Gate()
    assert gate.submit(APPROVE) is None and gate.verdict == APPROVE
    assert not gate.waiting and not gate.refused


def test_a_gate_hook_that_fails_without_a_verdict_resolves_the_gate() -> None:
    failed = HookOutcome(ok=False, failed_hook="approve", exit_code=1, message="exit 1")
    assert gate_hook_failed(failed, "approve", has_verdict=False)


def test_a_gate_hook_killed_for_its_own_timeout_or_after_a_verdict_leaves_the_gate_to_the_verdict() -> None:
    timed_out = HookOutcome(ok=False, failed_hook="approve", exit_code=124, message="timed out")
    assert not gate_hook_failed(timed_out, "approve", has_verdict=False)
    failed = HookOutcome(ok=False, failed_hook="approve", exit_code=1, message="exit 1")
    assert not gate_hook_failed(failed, "approve", has_verdict=True)
    assert not gate_hook_failed(HookOutcome(ok=True), "approve", has_verdict=False)
    other = HookOutcome(ok=False, failed_hook="notify", exit_code=1, message="exit 1")
    assert not gate_hook_failed(other, "approve", has_verdict=False)


def test_a_gate_without_a_verdict_resolves_by_its_default_and_says_it_waited_in_vain() -> None:
    gate = Gate()
    gate.strict = True
    gate.open("2026-01-01T00:00:00Z")
    run = resolved_run(post_run=[hook("approve", gate=True)], gate_timeout=30, gate_default="allow")
    label, final, reason = gate.close(run, AgentOutcome(status="success", response="hi"), hook_failed=False,
                                      decided_at="2026-01-01T00:00:30Z")
    assert (label, final, reason) == ("allowed-by-default", "hi", "no verdict within 30s")
    assert gate.view.decided_by == "gate-default" and gate.decided[1] == gate.view


def test_a_verdict_resolves_the_gate_over_a_failed_agent_with_no_text_of_its_own() -> None:
    gate = Gate()
    gate.strict = True
    gate.open("2026-01-01T00:00:00Z")
    gate.submit(APPROVE)
    run = resolved_run(post_run=[hook("approve", gate=True)])
    label, final, reason = gate.close(run, AgentOutcome(status="error", error="boom", response="unused"),
                                      hook_failed=False, decided_at="2026-01-01T00:00:10Z")
    assert (label, final, reason) == ("approved", "", "approve via api")
