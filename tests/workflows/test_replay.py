"""Recorded workflow histories (AgentRunWorkflow, ScheduledRunWorkflow, AgentSlotsWorkflow, PruneHistoryWorkflow)
replay with the current code, so a change that breaks determinism (reordered or renamed steps, new activities without versioning) fails CI.

The histories come from real runs (tests/e2e/test_record_histories.py). Refresh them only on
purpose, for a deliberate, versioned workflow change:

    AGENTRUN_RECORD_HISTORIES=1 .venv/bin/pytest tests/e2e/test_record_histories.py

(the slots and prune workflows' histories: tests/e2e/test_agent_slots.py and tests/e2e/test_prune.py, the same way.)
"""

from __future__ import annotations

import base64
import json
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
from workflows.agent_slots import AgentSlotsWorkflow
from workflows.prune import PruneHistoryWorkflow
from workflows.scheduled_run import ScheduledRunWorkflow

WORKFLOWS = [AgentRunWorkflow, AgentRunWorkflowV1, ScheduledRunWorkflow, AgentSlotsWorkflow, PruneHistoryWorkflow]

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
TEXTS = {p.stem: p.read_text() for p in HISTORIES}


def test_there_are_recorded_histories_of_both_versions() -> None:
    assert len([p for p in HISTORIES if not p.stem.startswith("v2-")]) >= 5
    assert len([p for p in HISTORIES if p.stem.startswith("v2-")]) >= 5
    assert len([p for p in HISTORIES if p.stem.startswith("v3-")]) >= 5


def test_the_tool_approval_shapes_are_recorded_behind_their_patch() -> None:
    """The v6 histories (tests/e2e/test_record_histories.py's tool-* shapes) took the tool-approvals branch: two
    rounds each decided by an Update, and a call the policy's timeout denied."""
    for shape, updates in (("v6-tool-approved-twice", 3), ("v6-tool-denied-by-timeout", 0)):
        events = json.loads(TEXTS[shape])["events"]
        patches = [base64.b64decode(p["data"]).decode() for e in events if "markerRecordedEventAttributes" in e
                   for p in e["markerRecordedEventAttributes"].get("details", {}).get("patch-data", {})
                   .get("payloads", [])]
        assert any('"id":"tool-approvals"' in p for p in patches), (shape, patches)
        accepted = [e for e in events if "workflowExecutionUpdateAcceptedEventAttributes" in e]
        assert len(accepted) == updates, shape  # round 1: an unknown call, then the approval; round 2: the approval


def test_the_slots_and_prune_workflows_have_recorded_histories() -> None:
    """Their shapes: a slots workflow that continued as new with its holders and queue, one that ended idle, and a
    pruning pass."""
    assert {"slots-continued-as-new", "slots-ended-idle", "prune-pass"} <= set(TEXTS)


def _patches(shape: str) -> list[str]:
    events = json.loads(TEXTS[shape])["events"]
    return [base64.b64decode(p["data"]).decode() for e in events if "markerRecordedEventAttributes" in e
            for p in e["markerRecordedEventAttributes"].get("details", {}).get("patch-data", {}).get("payloads", [])]


def test_the_v7_shapes_close_with_their_run_and_a_failed_run_fails() -> None:
    """The v7 histories took the events-outlive-run branch (every shape), and the failed run's ended failed."""
    v7 = [name for name in TEXTS if name.startswith("v7-")]
    assert len(v7) >= 10
    for shape in v7:
        assert any('"id":"events-outlive-run"' in p for p in _patches(shape)), shape
    failed = json.loads(TEXTS["v7-agent-failure"])["events"]
    assert any('"id":"failed-run-fails"' in p for p in _patches("v7-agent-failure"))
    assert "workflowExecutionFailedEventAttributes" in failed[-1], failed[-1].keys()


def _steps(shape: str) -> list[str]:
    """A history's activities (`local:` when local), signals (`signal:`) and patches (`patch:`), in order."""
    out: list[str] = []
    for e in json.loads(TEXTS[shape])["events"]:
        if "activityTaskScheduledEventAttributes" in e:
            out.append(e["activityTaskScheduledEventAttributes"]["activityType"]["name"])
        elif "workflowExecutionSignaledEventAttributes" in e:
            out.append(f"signal:{e['workflowExecutionSignaledEventAttributes']['signalName']}")
        elif "markerRecordedEventAttributes" in e:
            details = e["markerRecordedEventAttributes"].get("details", {})
            for p in details.get("patch-data", {}).get("payloads", []):
                out.append(f"patch:{json.loads(base64.b64decode(p['data']))['id']}")
            for p in details.get("data", {}).get("payloads", [])[:1]:
                out.append(f"local:{json.loads(base64.b64decode(p['data'])).get('activity_type', '')}")
    return out


def test_the_v8_gate_histories_clean_up_before_the_verdict() -> None:
    """Recorded with patch cleanup-before-gate-wait. A gate with nothing after it: the cleanup step runs before the
    verdict's signal, and the verdict's one step is the final status, a local activity. A gate with a hook after
    it: its finished Jobs go before the verdict, the cleanup (and the final status) after the hook."""
    alone = _steps("v8-gate-approved-after-cleanup")
    at = alone.index("patch:cleanup-before-gate-wait")
    assert alone[at + 1:] == ["clean_up", "signal:verdict", "patch:signed-verdicts", "patch:final-status-in-cleanup",
                              "local:update_status", "patch:events-outlive-run"], alone
    more = _steps("v8-gate-approved-after-jobs-gone")
    wait = more.index("patch:cleanup-before-gate-wait")
    assert more[wait + 1:wait + 4] == ["delete_job", "delete_job", "signal:verdict"], more
    assert more[-2:] == ["clean_up", "patch:events-outlive-run"] and more.count("clean_up") == 1, more


@pytest.mark.parametrize("name", sorted(TEXTS))
async def test_recorded_history_replays(name: str, spans: SpanCollector) -> None:
    """With Temporal's OpenTelemetry interceptor, as the worker runs them (its spans add headers, never commands),
    and a replay exports no span again: every span the workflow opens while it replays was exported the first time
    (the test process's tracer provider is the worker's replay-safe one: tests/conftest.py)."""
    history = WorkflowHistory.from_json(name, TEXTS[name])
    # The replayer picks the workflow by the type recorded in the history.
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter,
                        interceptors=[OpenTelemetryInterceptor()])
    await replayer.replay_workflow(history)
    assert not [s.name for s in spans.take() if s.instrumentation_scope.name == tracing.TRACER]
