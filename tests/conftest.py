"""Shared fixtures: one localkube for the session, a fresh namespace per test, kubectl."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from localkube.testing import Handle, running_localkube
from models import telemetry
from tests.spans import COLLECTOR, SpanCollector

KUBECTL = str(Path(sys.executable).parent / "kubectl")
AUDIT_LOG = "audit.log"  # in the session localkube's state directory

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def pytest_configure(config: pytest.Config) -> None:
    """The test process's own telemetry, as a worker's (a replay-safe tracer provider: models/telemetry.py), every
    span recorded for the tests that read them (`spans`); nothing is exported."""
    telemetry.setup("tests", env={}, processor=COLLECTOR)


@pytest.fixture
def spans() -> Iterator[SpanCollector]:
    """The spans this test's process ends, from now until the test's end (`spans.take()`)."""
    COLLECTOR.take()
    COLLECTOR.active = True
    yield COLLECTOR
    COLLECTOR.active = False
    COLLECTOR.take()


@pytest.fixture(scope="session")
def localkube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Handle]:
    # The agent image runs the reference agent program, as `agentrun up` maps it.
    image_map = {"ghcr.io/sympozium-ai/sympozium/agent-runner:latest": [sys.executable, "-m", "agentrunner"]}
    state = tmp_path_factory.mktemp("localkube")
    # The audit log lets a test count the requests one component made in its namespace.
    with running_localkube(state, job_backoff_seconds=0.2, bookmark_interval=0.5, image_map=image_map,
                           audit_log=state / AUDIT_LOG) as lk:
        yield lk


@pytest.fixture
def kube(localkube: Handle) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    yield api
    api.close()


def _fresh_namespace(kube: client.ApiClient) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(kube)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})  # type: ignore[arg-type]
    yield name
    core.delete_namespace(name)


@pytest.fixture
def namespace(kube: client.ApiClient) -> Iterator[str]:
    yield from _fresh_namespace(kube)


@pytest.fixture
def other_namespace(kube: client.ApiClient) -> Iterator[str]:
    """A second namespace, for what must stay inside the first."""
    yield from _fresh_namespace(kube)


@pytest.fixture
def kubectl(localkube: Handle, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """Runs the real kubectl against localkube; returns the CompletedProcess (check=False)."""
    cache = tmp_path_factory.mktemp("kubectl-cache")
    env = {**os.environ, "KUBECONFIG": str(localkube.kubeconfig), "HOME": str(cache)}

    def run(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KUBECTL, *args], env=env, input=input, capture_output=True, text=True,
                              timeout=timeout)

    return run
