"""The whole stack for end-to-end tests: the session's localkube, a Temporal dev server,
and the worker and bridge as real processes (so tests can kill and restart them)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from cli.stack import TemporalDevServer, stop_process
from localkube.testing import Handle
from models.crds import all_crds
from tests.waiting import wait_for

TERMINAL = {"Succeeded", "Failed", "Skipped"}


@dataclass
class Proc:
    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        stop_process(self.proc)


@dataclass
class Stack:
    kube: Handle
    temporal: TemporalDevServer
    worker: Proc
    bridge: Proc
    api: client.ApiClient

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def create(self, ns: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.create_namespaced_custom_object(
            "sympozium.ai", "v1alpha1", ns, plural, body))

    def get_run(self, ns: str, name: str) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], self.custom.get_namespaced_custom_object(
                "sympozium.ai", "v1alpha1", ns, "agentruns", name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def wait_phase(self, ns: str, name: str, phases: set[str] = TERMINAL, timeout: float = 60) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            run = self.get_run(ns, name)
            return run if run and (run.get("status") or {}).get("phase") in phases else None
        return wait_for(probe, timeout=timeout, interval=0.1, what=f"run {ns}/{name} to reach {sorted(phases)}")


def _env(kubeconfig: Path, temporal: TemporalDevServer, task_queue: str) -> dict[str, str]:
    return {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address, "AGENTRUN_TEMPORAL__TASK_QUEUE": task_queue,
            "AGENTRUN_KUBE__KUBECONFIG": str(kubeconfig), "AGENTRUN_FALLBACK_POLL_SECONDS": "5",
            "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal"), headless=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stack(localkube: Handle, temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ext = client.ApiextensionsV1Api(api)
    for crd in all_crds().values():
        try:
            ext.create_custom_resource_definition(crd)  # type: ignore[arg-type]
        except ApiException as e:
            if e.status != 409:
                raise
    logs = tmp_path_factory.mktemp("procs")
    env = _env(localkube.kubeconfig, temporal, f"agentrun-{uuid.uuid4().hex[:6]}")
    worker = Proc("worker", [sys.executable, "-m", "worker"], env, logs / "worker.log")
    bridge = Proc("bridge", [sys.executable, "-m", "bridge"], env, logs / "bridge.log")
    worker.start()
    bridge.start()
    yield Stack(localkube, temporal, worker, bridge, api)
    bridge.stop()
    worker.stop()


AGENT_IMAGE = "ghcr.io/sympozium-ai/sympozium/agent-runner:latest"


def agent(name: str = "helper", **defaults: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": name},
            "spec": {"agents": {"default": {"model": "echo-1", **defaults}},
                     "authRefs": [{"provider": "echo", "secret": ""}]}}


def agent_run(name: str, task: str = "hello", agent_ref: str = "helper", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": name},
            "spec": {"agentRef": agent_ref, "task": task, **spec}}
