"""Run events on NATS JetStream (SPEC §5), with the real nats-server of the e2e stack."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from cli.stack import NatsServer
from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for_async


async def run_events(url: str, run_name: str, *, want: int, within: float = 30) -> list[dict[str, Any]]:
    """Every event of one run in the stream, read from the beginning, once `want` have arrived."""
    import time

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + within
        while True:
            try:
                sub = await js.pull_subscribe("sympozium.>",
                                              config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
            except nats.js.errors.NotFoundError:  # the stream appears with the first event
                if time.monotonic() > deadline:
                    return []
                await asyncio.sleep(0.2)
                continue
            got: list[dict[str, Any]] = []
            try:
                while True:
                    msgs = await sub.fetch(200, timeout=1)
                    got += [json.loads(m.data) for m in msgs]
            except (nats.errors.TimeoutError, TimeoutError):
                pass
            await sub.unsubscribe()
            mine = [e for e in got if e["metadata"]["agentRunID"] == run_name]
            if len(mine) >= want or time.monotonic() > deadline:
                return mine
    finally:
        await nc.close()


def needs_nats(stack: Stack) -> NatsServer:
    if stack.nats is None:
        pytest.skip("nats-server is not installed")
    return stack.nats


async def test_a_gated_run_publishes_started_phases_gate_pending_and_one_completed(stack: Stack,
                                                                                   namespace: str) -> None:
    server = needs_nats(stack)
    stack.create(namespace, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    stack.create(namespace, "agentruns", agent_run("ev", lifecycle={"postRun": [gate], "gateTimeout": "2s",
                                                                     "gateDefault": "allow"}))
    stack.wait_phase(namespace, "ev")
    events = await run_events(server.url, "ev", want=7)
    topics = [e["topic"] for e in events]
    assert topics[0] == "agent.run.started" and events[0]["data"]["task"] == "hello"
    phases = [e["data"]["phase"] for e in events if e["topic"] == "agent.run.phase"]
    assert phases == ["Pending", "Running", "PostRunning", "Succeeded"]
    assert topics.count("agent.run.gate.pending") == 1
    completed = [e for e in events if e["topic"] == "agent.run.completed"]
    assert len(completed) == 1, "exactly one completion event"
    assert completed[0]["data"]["gateVerdict"] == "allowed-by-default"
    assert completed[0]["data"]["response"].startswith("echo: hello")
    assert topics.index("agent.run.gate.pending") < topics.index("agent.run.completed"), "held back while gated"
    env = completed[0]
    assert set(env) == {"topic", "timestamp", "metadata", "data"}
    assert env["metadata"] == {"agentRunID": "ev", "instanceName": "helper", "namespace": namespace}


async def test_a_failed_run_publishes_failed_with_a_reason(stack: Stack, namespace: str) -> None:
    server = needs_nats(stack)
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("boom", task="fail:model said no"))
    run = stack.wait_phase(namespace, "boom")
    # Its workflow ended failed, with the run's error, so the Temporal UI's status filter finds it.
    temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    handle = temporal.get_workflow_handle(run["status"]["workflowId"])

    async def ended() -> WorkflowExecutionStatus | None:
        status = (await handle.describe()).status
        return None if status == WorkflowExecutionStatus.RUNNING else status
    assert await wait_for_async(ended, timeout=15, what="the run's workflow to end") == WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as ended_failed:
        await handle.result()
    cause = ended_failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "RunFailed"
    assert cause.message == run["status"]["error"] == "model said no"
    events = await run_events(server.url, "boom", want=5)
    failed = [e for e in events if e["topic"] == "agent.run.failed"]
    assert len(failed) == 1 and failed[0]["data"]["error"] == "model said no"
    assert [e["data"]["status"] for e in events if e["topic"] == "agent.run.completed"] == ["error"]


async def test_with_nats_down_the_run_completes_and_its_events_arrive_once_nats_is_back(stack: Stack,
                                                                                        namespace: str) -> None:
    server = needs_nats(stack)
    server.stop()
    try:
        stack.create(namespace, "agents", agent())
        stack.create(namespace, "agentruns", agent_run("offline"))
        run = stack.wait_phase(namespace, "offline", timeout=60)
        assert run["status"]["phase"] == "Succeeded"
        # Its workflow closes with the run, NATS or no NATS (a schedule's concurrencyPolicy counts on it): the
        # events still to publish went to a RunEvents workflow of their own.
        temporal = await Client.connect(stack.temporal.address)
        handle = temporal.get_workflow_handle(run["status"]["workflowId"])

        async def closed() -> WorkflowExecutionStatus | None:
            status = (await handle.describe()).status
            return None if status == WorkflowExecutionStatus.RUNNING else status
        assert await wait_for_async(closed, timeout=15, what="the run's workflow to close while NATS is down") \
            == WorkflowExecutionStatus.COMPLETED
        outbox = temporal.get_workflow_handle(f"{handle.id}/events")
        assert (await outbox.describe()).status == WorkflowExecutionStatus.RUNNING, "its events wait for NATS"
    finally:
        server.start()
    events = await run_events(server.url, "offline", want=6, within=60)
    topics = [e["topic"] for e in events]
    assert topics.count("agent.run.completed") == 1 and topics.count("agent.run.started") == 1
    assert len({json.dumps(e, sort_keys=True) for e in events}) == len(events), "each event arrived once"
