"""A run's workflow traces itself (SPEC §12): its spans join the trace it was started in, each pod is handed its own
span as TRACEPARENT, status.traceID names the trace, and a workflow woken again and again (replayed from its
history each time) exports each span once, with the same IDs.

The SDK's time-skipping server with the activities scripted by name (tests/workflows/cluster.py), a worker with
Temporal's OpenTelemetry interceptor, and the test process's replay-safe tracer provider (tests/conftest.py)."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from models import tracecontext
from models.search_attributes import SEARCH_ATTRIBUTES
from models.steps import StartRun
from tests.spans import SpanCollector
from workflows import tracing
from workflows.agent_run import AgentRunWorkflow, workflow_id

from .cluster import FakeCluster, hook, resolved_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    server = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    assert server
    async with await WorkflowEnvironment.start_time_skipping(data_converter=pydantic_data_converter,
                                                             test_server_existing_path=server) as env:
        await env.client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes=dict.fromkeys(SEARCH_ATTRIBUTES, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD)))
        yield env


async def run_traced(env: WorkflowEnvironment, cluster: FakeCluster, *, traceparent: str = "",
                     cached: int = 100) -> None:
    assert cluster.run is not None
    queue = f"q-{uuid.uuid4()}"
    async with Worker(env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=cluster.activities(),
                      interceptors=[OpenTelemetryInterceptor()], max_cached_workflows=cached):
        handle = await env.client.start_workflow(AgentRunWorkflow.run, StartRun(ref=cluster.run.ref,
                                                                                traceparent=traceparent),
                                                 id=workflow_id(cluster.run.ref), task_queue=queue)
        await handle.result()


def workflow_spans(spans: SpanCollector) -> list[Any]:
    return [s for s in spans.take() if s.instrumentation_scope.name == tracing.TRACER]


def hex_id(n: int, width: int) -> str:
    return f"{n:0{width}x}"


async def test_the_workflows_spans_join_the_runs_trace_and_each_pod_gets_its_own_span(
        env: WorkflowEnvironment, spans: SpanCollector) -> None:
    cluster = FakeCluster(run=resolved_run(pre_run=[hook("fetch")], post_run=[hook("report")]))
    await run_traced(env, cluster, traceparent=PARENT)
    got = workflow_spans(spans)
    by_name = {s.name: s for s in got}
    root = by_name["AgentRun ns/r"]
    assert {hex_id(s.context.trace_id, 32) for s in got} == {TRACE}, "every span is in the run's trace"
    assert hex_id(root.parent.span_id, 16) == "00f067aa0ba902b7", "the run's span continues where it was started"
    ids = {s.context.span_id for s in got}
    assert all(s.parent is not None and s.parent.span_id in ids for s in got if s is not root), \
        "every other span is under the run's"
    assert {"agent", "prerun hooks", "post-run hooks", "resolve the spec against its Agent; Pending"} <= set(by_name)
    # Each Job's pod runs in its own span: the agent's, the hooks'.
    pods = {req.component: req.traceparent for req in cluster.job_requests()}
    agent = by_name["agent"].context
    assert pods["agent-run"] == tracecontext.format_traceparent(agent.trace_id, agent.span_id, 1)
    prerun = by_name["prerun hooks"].context
    assert pods["prerun"] == tracecontext.format_traceparent(prerun.trace_id, prerun.span_id, 1)
    assert tracecontext.trace_id_of(pods["post-run"]) == TRACE
    # status.traceID, written with Pending.
    assert [b.trace_id for b in cluster.named("begin_run")] == [TRACE]
    step = by_name["resolve the spec against its Agent; Pending"]
    assert step.attributes["agentrun.step"] == "begin_run" and step.parent.span_id == root.context.span_id


async def test_a_run_started_without_a_trace_begins_one_and_says_which(env: WorkflowEnvironment,
                                                                       spans: SpanCollector) -> None:
    cluster = FakeCluster(run=resolved_run())
    await run_traced(env, cluster)
    got = workflow_spans(spans)
    root = next(s for s in got if s.name == "AgentRun ns/r")
    assert root.parent is None
    trace = hex_id(root.context.trace_id, 32)
    assert [b.trace_id for b in cluster.named("begin_run")] == [trace] and trace != "0" * 32
    assert tracecontext.trace_id_of(cluster.job_requests()[0].traceparent) == trace


async def test_a_workflow_replayed_at_every_task_exports_each_span_once_with_the_same_ids(
        env: WorkflowEnvironment, spans: SpanCollector) -> None:
    """A worker that keeps no workflow in its cache replays the whole history at each task (as a run woken on
    another worker does): the spans are the replay-safe provider's, so none is exported twice, none is lost, and
    the IDs handed to the pods are those of the exported spans."""
    cached = FakeCluster(run=resolved_run(name="r", post_run=[hook("report")]))
    await run_traced(env, cached, traceparent=PARENT)
    reference = sorted(s.name for s in workflow_spans(spans))
    evicted = FakeCluster(run=resolved_run(name="r", post_run=[hook("report")]))
    await run_traced(env, evicted, traceparent=PARENT, cached=0)
    got = workflow_spans(spans)
    assert sorted(s.name for s in got) == reference, "the same spans, each once"
    assert len({s.context.span_id for s in got}) == len(got)
    exported = {tracecontext.format_traceparent(s.context.trace_id, s.context.span_id, 1) for s in got}
    assert {r.traceparent for r in evicted.job_requests()} <= exported
