"""Against a Temporal namespace that has never seen agentrun (no search attributes), the worker registers them
at start-up and runs succeed; its probes and metrics answer on the health port.

A stack of its own (localkube, a bare Temporal dev server, worker and bridge processes), so that the session's
bridge, which watches every namespace of the session's localkube, never sees these runs."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from cli.stack import TemporalDevServer, free_port
from cli.up import install_crds
from localkube.testing import running_localkube
from models.search_attributes import SEARCH_ATTRIBUTES
from tests.e2e.conftest import AGENT_IMAGE, Proc, agent, agent_run
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def bare_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[client.ApiClient, dict[str, int], Path]]:
    d = tmp_path_factory.mktemp("any-temporal")
    image_map = {AGENT_IMAGE: [sys.executable, "-m", "agentrunner"]}
    with running_localkube(d / "kube", job_backoff_seconds=0.2, image_map=image_map) as lk:
        install_crds(lk.kubeconfig)
        temporal = TemporalDevServer(d / "temporal", headless=True, search_attributes=False).start()
        ports = {"worker": free_port(), "bridge": free_port()}
        env = {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address,
               "AGENTRUN_KUBE__KUBECONFIG": str(lk.kubeconfig), "AGENTRUN_FALLBACK_POLL_SECONDS": "5",
               "PYTHONUNBUFFERED": "1"}
        procs = [Proc(name, [sys.executable, "-m", name],
                      {**env, "AGENTRUN_HEALTH__PORT": str(ports[name])}, d / f"{name}.log")
                 for name in ("worker", "bridge")]
        for p in procs:
            p.start()
        api = config.new_client_from_config(str(lk.kubeconfig))
        try:
            yield api, ports, d
        finally:
            api.close()
            for p in procs:
                p.stop()
            temporal.stop()


def _get(port: int, path: str) -> httpx.Response | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2)
    except httpx.HTTPError:
        return None


def test_the_worker_registers_the_search_attributes_and_a_run_succeeds(
        bare_stack: tuple[client.ApiClient, dict[str, int], Path]) -> None:
    api, ports, logs = bare_stack
    wait_for(lambda: (r := _get(ports["worker"], "/readyz")) is not None and r.status_code == 200, timeout=60,
             what="the worker to be ready")
    log = (logs / "worker.log").read_text()
    assert f"registered search attributes {', '.join(SEARCH_ATTRIBUTES)} in namespace default" in log
    ns = f"t-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agents", agent())
    custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", agent_run("first"))

    def phase() -> str | None:
        run: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
            "sympozium.ai", "v1alpha1", ns, "agentruns", "first")
        got = (run.get("status") or {}).get("phase")
        return got if got in ("Succeeded", "Failed") else None

    assert wait_for(phase, timeout=90, what="the run to finish") == "Succeeded"


def test_probes_and_metrics_of_the_worker_and_the_bridge(
        bare_stack: tuple[client.ApiClient, dict[str, int], Path]) -> None:
    _, ports, _ = bare_stack
    for name, port in ports.items():
        wait_for(lambda port=port: (r := _get(port, "/readyz")) is not None and r.status_code == 200,  # type: ignore[misc]
                 timeout=60, what=f"the {name} to be ready")
        health = _get(port, "/healthz")
        assert health is not None and health.status_code == 200
        metrics = _get(port, "/metrics")
        assert metrics is not None and f"agentrun_{name}_ready 1" in metrics.text
        missing = _get(port, "/nothing")
        assert missing is not None and missing.status_code == 404
    wait_for(lambda: "agentrun_bridge_leader 1" in (_get(ports["bridge"], "/metrics") or httpx.Response(500)).text,
             timeout=30, what="the only bridge to lead")
