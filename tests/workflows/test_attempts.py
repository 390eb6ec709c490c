"""Attempts: what a retry verdict means now, the attempts the status keeps, and the run's summed usage."""

from __future__ import annotations

from models.gate import ATTEMPTS_KEPT, GateView
from models.resolve import ResolvedRetry
from models.steps import Metrics
from workflows.attempts import Attempts


def test_a_retry_verdict_means_another_attempt_until_attempts_or_tokens_run_out() -> None:
    attempts = Attempts()
    assert attempts.chance(None, 1) == ("off", "")
    policy = ResolvedRetry(max_attempts=3, max_chain_tokens=100)
    assert attempts.chance(policy, 1) == ("again", "")
    assert attempts.chance(policy, 3) == ("exhausted", "maxAttempts 3 reached")
    attempts.ran(Metrics(input_tokens=70, output_tokens=30))
    assert attempts.chance(policy, 2) == ("exhausted", "maxChainTokens 100 reached: 100 tokens used")


def test_the_status_keeps_the_last_attempts_and_the_usage_is_their_sum() -> None:
    attempts = Attempts()
    assert attempts.kept() is None and not attempts.any_decided
    assert attempts.usage(Metrics(input_tokens=5, output_tokens=1)).total_tokens == 6  # none recorded: the agent's
    view = GateView(state="retried", decided_by="alice", decided_at="2026-01-01T00:00:00Z")
    for n in range(1, ATTEMPTS_KEPT + 3):
        attempts.ran(Metrics(input_tokens=n, output_tokens=1, tool_calls=1, duration_ms=10))
        attempts.decided(n, "retried", view, "not yet", Metrics())
    kept = attempts.kept()
    assert kept is not None and [a.attempt for a in kept] == list(range(3, ATTEMPTS_KEPT + 3))
    assert kept[-1].tokens == ATTEMPTS_KEPT + 3 and kept[-1].decided_by == "alice"
    usage = attempts.usage(Metrics())
    n = ATTEMPTS_KEPT + 2
    assert (usage.input_tokens, usage.output_tokens, usage.tool_calls, usage.duration_ms) == (n * (n + 1) // 2, n, n, 10 * n)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
