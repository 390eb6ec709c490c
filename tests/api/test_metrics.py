"""The API's /metrics (prometheus_client, one registry per app) against localkube: requests by route with their
latency, runs by phase and waiting for a verdict from the API's watch, and verdicts decided elsewhere counted once
per run by source. (Verdicts through the API, on the real stack: tests/e2e/test_metrics.py.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from kubernetes import client

from api.deps import State
from api.main import create_app
from api.metrics import ApiMetrics
from api.runwatch import RunWatch
from api.settings import ApiSettings
from cli.up import install_crds
from localkube.testing import Handle
from models.names import AGENTRUNS, API_VERSION, GROUP, VERSION, lifecycle_subject
from tests.metrics import sample, samples
from tests.waiting import wait_for_async


async def serving(kube: client.ApiClient, localkube: Handle, settings: ApiSettings, *,
                  watch: dict[str, int] | None = None) -> AsyncIterator[tuple[httpx.AsyncClient, State]]:
    """The API in-process on localkube; `watch`: the RunWatch's own parameters (its metrics built on it)."""
    install_crds(localkube.kubeconfig)
    state = State(settings, kube, None)
    if watch is not None:
        state.runwatch = RunWatch(state.kube, settings.namespaces, **watch)
        state.metrics = ApiMetrics(state.runwatch)
    app = create_app(settings)
    app.state.agentrun = state  # the lifespan would connect to Temporal: start what it starts by hand
    await state.runwatch.start()
    await state.metrics.start()
    async with asyncio.timeout(30):
        await state.metrics.following.wait()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
            yield c, state
    finally:
        await state.metrics.stop()
        await state.runwatch.stop()


@pytest.fixture
async def api(kube: client.ApiClient, localkube: Handle) -> AsyncIterator[tuple[httpx.AsyncClient, State]]:
    async for served in serving(kube, localkube, ApiSettings(insecure=True)):
        yield served


class Runs:
    """AgentRun calls off the event loop (the API's watch applies changes on it)."""

    def __init__(self, kube: client.ApiClient, namespace: str) -> None:
        self.custom: Any = client.CustomObjectsApi(kube)
        self.namespace = namespace

    async def create(self, name: str) -> None:
        run = {"apiVersion": API_VERSION, "kind": "AgentRun", "metadata": {"name": name},
               "spec": {"agentRef": "helper", "task": "t", "agentId": "primary", "sessionKey": name}}
        await asyncio.to_thread(self.custom.create_namespaced_custom_object, GROUP, VERSION, self.namespace,
                                AGENTRUNS, run)

    async def status(self, name: str, **status: Any) -> None:
        """Write the status as the worker would."""
        await asyncio.to_thread(self.custom.patch_namespaced_custom_object_status, GROUP, VERSION, self.namespace,
                                AGENTRUNS, name, {"status": status})

    async def finished(self, name: str, **gate: Any) -> None:
        await self.create(name)
        await self.status(name, phase="Succeeded", gateVerdict=gate["state"], gate=gate)


@pytest.fixture
def runs(kube: client.ApiClient, namespace: str) -> Runs:
    return Runs(kube, namespace)


async def scrape(c: httpx.AsyncClient) -> str:
    r = await c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples(r.text)  # parses
    return r.text


async def test_requests_are_counted_by_route_template_and_status_with_their_latency(
        api: tuple[httpx.AsyncClient, State], namespace: str) -> None:
    c, _ = api
    before = await scrape(c)
    route = "/api/v1/runs/{name}"
    for name in ("a", "b"):
        assert (await c.get(f"/api/v1/runs/{name}", params={"namespace": namespace})).status_code == 404
    assert (await c.get("/nothing-here")).status_code == 404
    after = await scrape(c)

    def moved(name: str, **labels: str) -> float:
        return (sample(after, name, **labels) or 0) - (sample(before, name, **labels) or 0)
    assert moved("agentrun_api_requests_total", route=route, code="404") == 2, "one series per route, not per run"
    assert moved("agentrun_api_request_duration_seconds_count", route=route, method="GET") == 2
    assert moved("agentrun_api_request_duration_seconds_sum", route=route, method="GET") > 0
    assert moved("agentrun_api_requests_total", route="other", code="404") == 1
    assert not any(name == "agentrun_api_requests_total" and "/api/v1/runs/a" in dict(labels).values()
                   for name, labels in samples(after))


async def test_runs_are_gauged_by_phase_and_waiting_for_a_verdict_per_namespace(
        api: tuple[httpx.AsyncClient, State], namespace: str, runs: Runs) -> None:
    c, _ = api
    await runs.create("new")
    await runs.create("waiting")
    await runs.status("waiting", phase="PostRunning", gate={"state": "pending", "requestedAt": "2026-01-01T00:00:00Z"})
    await runs.create("done")
    await runs.status("done", phase="Succeeded")

    async def gauged() -> str | None:
        text = await scrape(c)
        return text if sample(text, "agentrun_runs", namespace=namespace, phase="Succeeded") == 1 else None
    text = await wait_for_async(gauged, timeout=30, what="the finished run in the gauges")
    assert sample(text, "agentrun_runs", namespace=namespace, phase="Pending") == 1, "no status yet: Pending"
    assert sample(text, "agentrun_runs", namespace=namespace, phase="PostRunning") == 1
    assert sample(text, "agentrun_runs_awaiting_verdict", namespace=namespace) == 1
    assert sample(text, "agentrun_api_runwatch_synced") == 1


async def test_verdicts_decided_elsewhere_are_counted_once_per_run_by_source_and_outcome(
        api: tuple[httpx.AsyncClient, State], namespace: str, runs: Runs) -> None:
    c, _ = api
    before = await scrape(c)

    def moved(text: str, source: str, outcome: str) -> float:
        labels = {"source": source, "outcome": outcome}
        return (sample(text, "agentrun_verdicts_total", **labels) or 0) - \
            (sample(before, "agentrun_verdicts_total", **labels) or 0)

    await runs.finished("by-hook", state="approved", source="annotation",
                        decidedBy=lifecycle_subject(namespace, "by-hook"))
    await runs.finished("by-someone", state="rejected", source="annotation", decidedBy="unverified")
    await runs.finished("timed-out", state="timeout", source="timeout", decidedBy="gate-default")
    await runs.finished("via-temporal", state="approved", source="temporal", decidedBy="temporal:bob")
    await runs.finished("via-api", state="approved", source="api", decidedBy="alice")
    # A later change of a counted run (the worker's cleanup, a label) does not count it again; the run after it is
    # counted after that change was seen (one subscriber, in order).
    await runs.status("by-hook", phase="Succeeded", completedAt="2026-01-01T00:00:00Z")
    await runs.finished("last", state="timeout", source="timeout", decidedBy="gate-default")

    async def counted() -> str | None:
        text = await scrape(c)
        return text if moved(text, "timeout", "timeout") == 2 else None
    text = await wait_for_async(counted, timeout=30, what="both timed-out runs counted")
    assert moved(text, "gate-hook", "approved") == 1, "an annotation the run's own gate hook wrote"
    assert moved(text, "annotation", "rejected") == 1
    assert moved(text, "temporal", "approved") == 1
    assert moved(text, "api", "approved") == 0, "an API verdict is counted where the API takes it"


async def test_a_count_that_falls_behind_the_watch_goes_over_its_list_and_counts_each_run_once(
        kube: client.ApiClient, localkube: Handle, namespace: str, runs: Runs) -> None:
    # The API watches only this namespace, and its metrics' subscription holds one event: a list that finds two
    # finished runs at once (while the server answered no list or watch, both were made) overflows it.
    served = serving(kube, localkube, ApiSettings(insecure=True, namespaces=[namespace]),
                     watch={"watch_seconds": 1, "queue_size": 1})
    c, state = await anext(served)
    try:
        before = await scrape(c)
        localkube.inject_fault(verb="watch", resource="agentruns", namespace=namespace, code=410, delay_seconds=0.2,
                               times=-1)
        listing = localkube.inject_fault(verb="list", resource="agentruns", namespace=namespace, code=500, times=-1)

        def refused_a_list() -> bool:
            return any(f["id"] == listing and f["hits"] >= 1 for f in localkube.admin("GET", "/localkube/faults")["faults"])
        await wait_for_async(lambda: asyncio.to_thread(refused_a_list), timeout=30, what="a list refused")
        for name in ("first", "second"):
            await runs.finished(name, state="timeout", source="timeout", decidedBy="gate-default")
        localkube.clear_faults()

        def timeouts(text: str) -> float:
            return (sample(text, "agentrun_verdicts_total", source="timeout", outcome="timeout") or 0) - \
                (sample(before, "agentrun_verdicts_total", source="timeout", outcome="timeout") or 0)

        async def counted(n: int) -> str | None:
            text = await scrape(c)
            return text if timeouts(text) >= n else None
        await wait_for_async(lambda: counted(2), timeout=60, what="both runs counted after the list")
        assert state.metrics.resyncs >= 1, "the list's two events overflowed the one-event queue"
        # A later change of a counted run does not count it again (the third run is counted after it).
        await runs.status("first", phase="Succeeded", completedAt="2026-01-01T00:00:00Z")
        await runs.finished("third", state="timeout", source="timeout", decidedBy="gate-default")
        text = await wait_for_async(lambda: counted(3), timeout=30, what="the third run counted")
        assert timeouts(text) == 3
    finally:
        localkube.clear_faults()
        with contextlib.suppress(StopAsyncIteration):
            await anext(served)


async def test_a_finished_runs_tokens_and_cost_are_counted_once_by_namespace_agent_and_model(
        api: tuple[httpx.AsyncClient, State], namespace: str, runs: Runs) -> None:
    c, _ = api
    usage = {"inputTokens": 1500, "outputTokens": 300, "cachedInputTokens": 500, "estimatedCostUSD": "0.0125",
             "models": [{"model": "gpt-4o", "calls": 2, "inputTokens": 1000, "outputTokens": 200,
                         "cachedInputTokens": 500, "estimatedCostUSD": "0.01"},
                        {"model": "gpt-4o-mini", "calls": 1, "inputTokens": 500, "outputTokens": 100,
                         "estimatedCostUSD": "0.0025"}]}
    await runs.create("running")
    await runs.status("running", phase="Running", tokenUsage=usage)  # not finished: not counted yet
    await runs.create("priced")
    await runs.status("priced", phase="Succeeded", tokenUsage=usage)
    await runs.status("priced", phase="Succeeded", tokenUsage=usage, completedAt="2026-01-01T00:00:00Z")
    await runs.create("unpriced")
    await runs.status("unpriced", phase="Succeeded", tokenUsage={"inputTokens": 10, "outputTokens": 1})
    at = {"namespace": namespace, "agent": "helper"}

    async def counted() -> str | None:
        text = await scrape(c)
        return text if sample(text, "agentrun_runs_unpriced_total", **at) == 1 else None
    text = await wait_for_async(counted, timeout=30, what="the unpriced run counted")
    assert sample(text, "agentrun_run_cost_usd_total", **at, model="gpt-4o") == pytest.approx(0.01)
    assert sample(text, "agentrun_run_cost_usd_total", **at, model="gpt-4o-mini") == pytest.approx(0.0025)
    assert sample(text, "agentrun_run_tokens_total", **at, model="gpt-4o", type="input") == 1000, "once per run"
    assert sample(text, "agentrun_run_tokens_total", **at, model="gpt-4o", type="cached") == 500
    assert sample(text, "agentrun_run_tokens_total", **at, model="gpt-4o-mini", type="output") == 100
    assert sample(text, "agentrun_run_tokens_total", **at, model="unknown", type="input") == 10


async def test_runs_waiting_for_a_tool_approval_and_each_tool_decision_are_counted_once_with_their_wait(
        api: tuple[httpx.AsyncClient, State], namespace: str, runs: Runs) -> None:
    c, _ = api
    before = await scrape(c)

    def moved(text: str, name: str, **labels: str) -> float:
        return (sample(text, name, **labels) or 0) - (sample(before, name, **labels) or 0)

    asked = "2026-01-01T00:00:00Z"
    await runs.create("parked")
    await runs.status("parked", phase="Running", toolApproval={"state": "pending", "requestedAt": asked, "round": 1,
                                                               "calls": [{"id": "c1", "tool": "execute_command", "arguments": "{}", "argumentsSha256": "0" * 64}]})
    await runs.create("decided")
    await runs.status("decided", phase="Running", toolApproval={"state": "decided", "requestedAt": asked, "round": 1},
                      toolApprovals=[
                          {"callId": "c1", "action": "approve", "source": "api", "decidedAt": "2026-01-01T00:00:30Z"},
                          {"callId": "c2", "action": "reject", "source": "timeout",
                           "decidedAt": "2026-01-01T00:30:00Z"}])
    # A later write that keeps the same decisions (the next round's status) counts none of them again.
    await runs.status("decided", phase="Running", toolApproval={"state": "pending", "requestedAt": asked, "round": 2})
    await runs.create("edited")
    await runs.status("edited", phase="Succeeded", toolApproval={"state": "decided", "requestedAt": asked, "round": 1},
                      toolApprovals=[
        {"callId": "e1", "action": "edit", "source": "annotation", "decidedAt": "2026-01-01T00:00:05Z"}])

    async def counted() -> str | None:
        text = await scrape(c)
        return text if moved(text, "agentrun_tool_decisions_total", action="edit", source="annotation") == 1 else None
    text = await wait_for_async(counted, timeout=30, what="the edited run's decision counted")
    assert sample(text, "agentrun_runs_awaiting_tool_approval", namespace=namespace) == 2, \
        "parked, and decided waiting for round 2; not the finished one"
    assert moved(text, "agentrun_tool_decisions_total", action="approve", source="api") == 1
    assert moved(text, "agentrun_tool_decisions_total", action="reject", source="timeout") == 1
    assert moved(text, "agentrun_tool_approval_wait_seconds_count") == 3
    assert moved(text, "agentrun_tool_approval_wait_seconds_sum") == 30 + 1800 + 5
