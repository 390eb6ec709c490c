"""FailureReason.of_agent: how agent.run.failed names why the agent failed."""

from __future__ import annotations

import pytest

from models.run import FailureReason


@pytest.mark.parametrize(("exit_code", "error", "reason"), [
    (124, "anything", FailureReason.TIMEOUT),
    (137, "killed", FailureReason.OOM),
    (1, "HTTP 429: quota exceeded", FailureReason.TOKEN_BUDGET),
    (1, "the request timed out", FailureReason.TIMEOUT),
    (1, "API error from the model", FailureReason.LLM_ERROR),
    (1, "no such file", FailureReason.OTHER),
])
def test_an_agent_failure_is_named_by_its_exit_code_else_its_words(exit_code: int, error: str,
                                                                   reason: FailureReason) -> None:
    assert FailureReason.of_agent(exit_code, error) is reason
