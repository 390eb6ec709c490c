"""Recorded workflow histories (AgentRunWorkflow, ScheduledRunWorkflow) replay with the current code, so a change that breaks
determinism (reordered or renamed steps, new activities without versioning) fails CI.

The histories come from real runs (tests/e2e/test_record_histories.py). Refresh them only on
purpose, for a deliberate, versioned workflow change:

    AGENTRUN_RECORD_HISTORIES=1 .venv/bin/pytest tests/e2e/test_record_histories.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.spans import SpanCollector
from workflows import tracing
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1
from workflows.scheduled_run import ScheduledRunWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
TEXTS = {p.stem: p.read_text() for p in HISTORIES}


def test_there_are_recorded_histories_of_both_versions() -> None:
    assert len([p for p in HISTORIES if not p.stem.startswith("v2-")]) >= 5
    assert len([p for p in HISTORIES if p.stem.startswith("v2-")]) >= 5
    assert len([p for p in HISTORIES if p.stem.startswith("v3-")]) >= 5


@pytest.mark.parametrize("name", sorted(TEXTS))
async def test_recorded_history_replays(name: str, spans: SpanCollector) -> None:
    """With Temporal's OpenTelemetry interceptor, as the worker runs them (its spans add headers, never commands),
    and a replay exports no span again: every span the workflow opens while it replays was exported the first time
    (the test process's tracer provider is the worker's replay-safe one: tests/conftest.py)."""
    history = WorkflowHistory.from_json(name, TEXTS[name])
    # The replayer picks the workflow by the type recorded in the history.
    replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1, ScheduledRunWorkflow],
                        data_converter=pydantic_data_converter, interceptors=[OpenTelemetryInterceptor()])
    await replayer.replay_workflow(history)
    assert not [s.name for s in spans.take() if s.instrumentation_scope.name == tracing.TRACER]
