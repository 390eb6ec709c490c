"""One trace per run on the real stack (SPEC §12): the API, the bridge, the worker and the agent export over OTLP/HTTP
to a receiver started here (decoded with opentelemetry-proto), and every span of a run is in the trace its
status.traceID names; the agent's execute_tool span names the tool and no span carries the prompt. With the
control plane's collector down (a closed port), a run succeeds in the same time and the worker counts the spans it
dropped.

Its own localkube, Temporal, worker, bridge and API: the session's bridge would start these runs' workflows too."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from cli.stack import TemporalDevServer, free_port
from cli.up import install_crds
from localkube.testing import running_localkube
from models.names import API_VERSION, GROUP, VERSION
from tests.e2e.conftest import AGENT_IMAGE, Proc, agent, allow, api_process
from tests.metrics import sample
from tests.otlp import Receiver, Span, closed_port, otlp_receiver
from tests.waiting import wait_for

TOKEN = "t-traces-e2e-0123456789"
OPERATOR = "tracer@example.com"
NS = "default"
SECRET_WORDS = "words-that-stay-off-spans"
TASK = f'tool:write_file {{"path": "/workspace/out.txt", "content": "x"}}\n{SECRET_WORDS}'


@dataclass
class TraceStack:
    kube: client.ApiClient
    base: str
    receiver: Receiver
    procs: dict[str, Proc]
    health: int
    logs: Path

    def create_run(self, *, traceparent: str = "") -> str:
        headers = {"Authorization": f"Bearer {TOKEN}", **({"traceparent": traceparent} if traceparent else {})}
        r = httpx.post(f"{self.base}/api/v1/runs", params={"namespace": NS}, headers=headers,
                       json={"agentRef": "traced", "task": TASK}, timeout=30)
        assert r.status_code == 201, r.text
        return str(r.json()["metadata"]["name"])

    def finished(self, name: str, timeout: float = 120) -> dict[str, Any]:
        custom: Any = client.CustomObjectsApi(self.kube)

        def done() -> dict[str, Any] | None:
            run: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "agentruns", name)
            return run if (run.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None
        return wait_for(done, timeout=timeout, what=f"run {name} to finish")

    def restart_control_plane(self, otlp_endpoint: str) -> None:
        for name in ("worker", "bridge"):
            p = self.procs[name]
            p.stop()
            p.env = {**p.env, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint}
            p.start()
        wait_for(lambda: (self.logs / "worker.log").read_text().count("worker polling") >= 2, timeout=90,
                 what="the restarted worker to poll")


@pytest.fixture(scope="module")
def trace_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStack]:
    d = tmp_path_factory.mktemp("traces")
    (d / "tokens").write_text(f"{TOKEN} {OPERATOR}\n")
    with otlp_receiver() as receiver, running_localkube(d / "kube", job_backoff_seconds=0.2, image_map={
            AGENT_IMAGE: [sys.executable, "-m", "agentrunner"]}) as lk:
        install_crds(lk.kubeconfig)
        kube = config.new_client_from_config(str(lk.kubeconfig))
        allow(kube, OPERATOR)
        temporal = TemporalDevServer(d / "temporal").start()
        health, port = free_port(), free_port()
        base = f"http://127.0.0.1:{port}"
        env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address,
               "AGENTRUN_KUBE__KUBECONFIG": str(lk.kubeconfig), "AGENTRUN_FALLBACK_POLL_SECONDS": "5",
               "PYTHONUNBUFFERED": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
               # The control plane's batches go at once: the test waits on the receiver, not on a 5 s schedule.
               "OTEL_BSP_SCHEDULE_DELAY": "200"}
        procs = {"worker": Proc("worker", [sys.executable, "-m", "worker"],
                                {**env, "AGENTRUN_HEALTH__PORT": str(health)}, d / "worker.log"),
                 "bridge": Proc("bridge", [sys.executable, "-m", "bridge"], env, d / "bridge.log")}
        for p in procs.values():
            p.start()
        client.CustomObjectsApi(kube).create_namespaced_custom_object(GROUP, VERSION, NS, "agents", {
            **agent("traced"), "apiVersion": API_VERSION,
            "spec": {**agent("traced")["spec"], "observability": {
                "enabled": True, "otlpEndpoint": receiver.url, "serviceName": "traced-agent"}}})
        try:
            with api_process({**env, "AGENTRUN_TOKEN_FILE": str(d / "tokens"), "AGENTRUN_PORT": str(port)},
                             d / "api.log", {base + "/readyz": True}):
                wait_for(lambda: "worker polling" in (d / "worker.log").read_text(), timeout=90,
                         what="the worker to poll")
                yield TraceStack(kube, base, receiver, procs, health, d)
        finally:
            kube.close()
            for p in procs.values():
                p.stop()
            temporal.stop()


def spans_of(receiver: Receiver, trace_id: str) -> list[Span]:
    return [s for s in receiver.snapshot() if s.trace_id == trace_id]


def test_the_control_planes_and_the_agents_spans_share_the_runs_trace(trace_stack: TraceStack) -> None:
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    name = trace_stack.create_run(traceparent=caller)
    run = trace_stack.finished(name)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    trace_id = run["status"]["traceID"]
    # Priced by the worker from the agent's tokens: echo is a local model, so 0 (never absent for a priced run).
    assert run["status"]["tokenUsage"]["estimatedCostUSD"] == "0" and run["status"]["tokenUsage"]["totalTokens"] > 0
    assert trace_id == "0af7651916cd43dd8448eb211c80319c", "the API continued its caller's trace"
    services = {"agentrun-api", "agentrun-bridge", "agentrun-worker", "traced-agent"}

    def all_there() -> list[Span] | None:
        got = spans_of(trace_stack.receiver, trace_id)
        return got if services <= {s.service for s in got} and any(
            s.name == f"AgentRun {NS}/{name}" for s in got) else None
    got = wait_for(all_there, timeout=30, what="every component's spans in the run's trace")
    by_name = {s.name: s for s in got}
    assert by_name["create AgentRun"].service == "agentrun-api"
    assert by_name[f"start AgentRun {NS}/{name}"].parent_id == by_name["create AgentRun"].span_id
    tool = by_name["execute_tool write_file"]
    assert tool.service == "traced-agent" and tool.attributes["gen_ai.tool.name"] == "write_file"
    # The agent's run is a child of the workflow's span for its pod.
    agent_span = by_name["agent"]
    invoke = next(s for s in got if s.name.startswith("invoke_agent"))
    assert agent_span.service == "agentrun-worker" and invoke.parent_id == agent_span.span_id
    ids = {s.span_id for s in got}
    orphans = [(s.service, s.name) for s in got if s.parent_id not in ids | {"b7ad6b7169203331"}]
    assert not orphans, f"one tree under the caller's span: {orphans}"
    assert SECRET_WORDS not in repr([(s.name, s.attributes) for s in trace_stack.receiver.snapshot()])


def test_with_the_collector_down_a_run_succeeds_as_fast_and_the_dropped_spans_are_counted(
        trace_stack: TraceStack) -> None:
    t0 = time.monotonic()
    up = trace_stack.finished(trace_stack.create_run())
    with_collector = time.monotonic() - t0
    assert up["status"]["phase"] == "Succeeded"
    trace_stack.restart_control_plane(closed_port())
    t0 = time.monotonic()
    down = trace_stack.finished(trace_stack.create_run())
    without = time.monotonic() - t0
    assert down["status"]["phase"] == "Succeeded" and len(down["status"]["traceID"]) == 32
    # Within noise: the exporter's timeouts and retries (5 s each) would show.
    assert without < with_collector + 4, (without, with_collector)

    def dropped() -> float | None:
        text = httpx.get(f"http://127.0.0.1:{trace_stack.health}/metrics", timeout=5).text
        n = sample(text, "agentrun_otel_spans_dropped_total")
        return n if n else None
    assert wait_for(dropped, timeout=30, what="the worker's dropped-span counter to move") > 0
