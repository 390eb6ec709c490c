"""Metrics on the real stack: the API's /metrics moves as runs wait, are approved through it and time out (read
with prometheus_client's parser), and a worker serves the Temporal SDK's own metrics at AGENTRUN_METRICS_ADDRESS."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli.stack import free_port, stop_process
from tests.e2e.conftest import API_TOKENS, Stack, agent, agent_run
from tests.metrics import sample, samples
from tests.waiting import wait_for

TOKEN = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")
GATE = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}


@pytest.fixture(scope="module")
def api(api_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        yield c


def scrape(api: httpx.Client) -> str:
    r = httpx.get(str(api.base_url) + "/metrics", timeout=10)
    assert r.status_code == 200
    samples(r.text)  # parses
    return r.text


def test_api_metrics_move_as_runs_wait_get_approved_through_the_api_and_time_out(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    before = scrape(api)

    def moved(text: str, name: str, **labels: str) -> float:
        return (sample(text, name, **labels) or 0) - (sample(before, name, **labels) or 0)

    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("approved", lifecycle={"postRun": [GATE], "gateTimeout": "10m"}))
    def gated() -> str | None:
        t = scrape(api)
        return t if sample(t, "agentrun_runs_awaiting_verdict", namespace=namespace) == 1 else None
    waiting = wait_for(gated, timeout=90, what="the run waiting at its gate, in the gauge")
    assert sample(waiting, "agentrun_runs", namespace=namespace, phase="PostRunning") == 1

    r = api.post("/api/v1/runs/approved/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert r.status_code == 200, r.text
    stack.wait_phase(namespace, "approved")
    stack.create(namespace, "agentruns", agent_run("timed-out", lifecycle={"postRun": [GATE], "gateTimeout": "2s"}))
    stack.wait_phase(namespace, "timed-out")

    def settled() -> str | None:
        t = scrape(api)
        done = sample(t, "agentrun_runs", namespace=namespace, phase="Succeeded") == 2
        return t if done and moved(t, "agentrun_verdicts_total", source="timeout", outcome="timeout") >= 1 else None
    after = wait_for(settled, timeout=30, what="both runs finished and counted in /metrics")
    assert sample(after, "agentrun_runs_awaiting_verdict", namespace=namespace) in (None, 0)
    assert moved(after, "agentrun_verdicts_total", source="api", outcome="approved") == 1
    assert moved(after, "agentrun_gate_verdicts_total", outcome="approved") == 1
    assert moved(after, "agentrun_verdict_duration_seconds_count") == 1
    assert moved(after, "agentrun_verdict_duration_seconds_sum") > 0
    route = "/api/v1/runs/{name}/gate-verdict"
    assert moved(after, "agentrun_api_requests_total", route=route, code="200") == 1
    assert moved(after, "agentrun_api_request_duration_seconds_count", route=route, method="POST") == 1
    # Other tests' runs share the session API (it serves every namespace): only this one's counts are exact.
    assert moved(after, "agentrun_verdicts_total", source="timeout", outcome="timeout") >= 1


def test_a_worker_serves_the_temporal_sdks_metrics_at_its_metrics_address(stack: Stack, tmp_path: Path) -> None:
    port = free_port()
    # Its own task queue: it must not take the session's runs; its pollers are what it reports on.
    env = {**stack.worker.env, "AGENTRUN_TEMPORAL__TASK_QUEUE": "metrics-probe",
           "AGENTRUN_METRICS_ADDRESS": f"127.0.0.1:{port}"}
    with (tmp_path / "worker.log").open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def scraped() -> str | None:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
            except httpx.HTTPError:
                return None
            return r.text if r.status_code == 200 and "temporal_num_pollers" in r.text else None
        text = wait_for(scraped, timeout=60, what="the worker's SDK metrics with its pollers")
        families = {name for name, _ in samples(text)}
        assert any(name.startswith("temporal_") for name in families)
        pollers = [v for (name, labels), v in samples(text).items()
                   if name == "temporal_num_pollers" and ("task_queue", "metrics-probe") in labels]
        assert pollers and max(pollers) > 0, "the worker polls its task queue"
        assert proc.poll() is None
    finally:
        stop_process(proc)


def test_a_bad_metrics_address_stops_the_worker_with_one_line(stack: Stack) -> None:
    env = {**stack.worker.env, "AGENTRUN_TEMPORAL__TASK_QUEUE": "metrics-bad", "AGENTRUN_METRICS_ADDRESS": "9464"}
    out = subprocess.run([sys.executable, "-m", "worker"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "AGENTRUN_METRICS_ADDRESS: '9464' is not host:port" in out.stderr
    assert "Traceback" not in out.stderr
