"""The whole stack for end-to-end tests: the session's localkube, a Temporal dev server,
and the worker and bridge as real processes (so tests can kill and restart them)."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from cli.roles import bind, ensure_roles, user
from cli.stack import NatsServer, TemporalDevServer, free_port, stop_process
from cli.up import install_crds
from localkube.testing import Handle
from tests.waiting import wait_for

TERMINAL = {"Succeeded", "Failed", "Skipped"}
# A schedule that ticks only when a test triggers or backfills it: midnight of February 29th, next in 2028.
# (`@every 1h` looked quiet but Temporal aligns intervals to the epoch, so it ticks at every full hour and a
# test running across one saw a run it had not asked for.)
QUIET_CRON = "0 0 29 2 *"


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
    nats: NatsServer | None = None

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

    # -- plain Kubernetes reads ------------------------------------------------------------------
    # Typed as Any: the client's models declare every field Optional, which only adds noise to asserts.

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def batch(self) -> Any:
        return client.BatchV1Api(self.api)

    @property
    def rbac(self) -> Any:
        return client.RbacAuthorizationV1Api(self.api)

    def run_objects(self, ns: str, run: str) -> dict[str, list[str]]:
        """Names of the run's Jobs, pods, PVCs and lifecycle RBAC objects that exist right now."""
        sel = f"sympozium.ai/agent-run={run}"
        lc = f"sympozium-lifecycle-{run}"
        out = {
            "jobs": [j.metadata.name for j in self.batch.list_namespaced_job(ns, label_selector=sel).items],
            "pods": [p.metadata.name for p in self.core.list_namespaced_pod(ns, label_selector=sel).items],
            "pvcs": [p.metadata.name for p in self.core.list_namespaced_persistent_volume_claim(ns).items
                     if p.metadata.name == f"{run}-workspace"],
            "roles": [r.metadata.name for r in self.rbac.list_namespaced_role(ns).items if r.metadata.name == lc],
            "rolebindings": [r.metadata.name for r in self.rbac.list_namespaced_role_binding(ns).items
                             if r.metadata.name == lc],
            "serviceaccounts": [a.metadata.name for a in self.core.list_namespaced_service_account(ns).items
                                if a.metadata.name == lc],
        }
        return out

    def wait_gone(self, ns: str, run: str, kinds: tuple[str, ...] = ("jobs", "pods", "pvcs", "roles", "rolebindings",
                                                                      "serviceaccounts"),
                  timeout: float = 30) -> None:
        def probe() -> bool:
            objs = self.run_objects(ns, run)
            return not any(objs[k] for k in kinds)
        wait_for(probe, timeout=timeout, interval=0.1,
                 what=f"{', '.join(kinds)} of run {run} to be gone (now: {self.run_objects(ns, run)})")

    def pod_log(self, ns: str, run: str, component: str, container: str) -> str:
        """The log of one container of the run's (last) pod of `component` (prerun, agent-run, post-run)."""
        pods = self.core.list_namespaced_pod(
            ns, label_selector=f"sympozium.ai/agent-run={run},sympozium.ai/component={component}").items
        assert pods, f"no {component} pod of run {run}"
        pod = sorted(pods, key=lambda p: p.metadata.creation_timestamp)[-1]
        return cast(str, self.core.read_namespaced_pod_log(pod.metadata.name, ns, container=container))

    def workflow_status(self, workflow_id: str) -> WorkflowExecutionStatus | None:
        async def describe() -> WorkflowExecutionStatus | None:
            temporal = await Client.connect(self.temporal.address, data_converter=pydantic_data_converter)
            return (await temporal.get_workflow_handle(workflow_id).describe()).status
        return asyncio.run(describe())


class Recorder:
    """Every event of one kind in one namespace since it was made: a list, then a watch on a thread.

    Tests assert on what ever existed (phases in order, how many pods were ever created), not
    only on what is left at the end.
    """

    def __init__(self, api: client.ApiClient, list_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.api = api
        self.list_fn = list_fn
        self.args = args
        self.kwargs = kwargs
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        initial = api.sanitize_for_serialization(list_fn(*args, **kwargs))
        self._rv = str(initial["metadata"]["resourceVersion"])
        for item in initial.get("items") or []:
            self.events.append(("ADDED", item))
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.list_fn, *self.args, resource_version=self._rv, timeout_seconds=2,
                                   allow_watch_bookmarks=True, **self.kwargs):
                    obj = ev["raw_object"]
                    self._rv = str(obj["metadata"]["resourceVersion"])
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self.events.append((ev["type"], obj))
                    if self._stop.is_set():
                        break
            except Exception:  # a dropped watch resumes from the last resourceVersion
                self._stop.wait(0.2)
            finally:
                w.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def snapshot(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self.events)

    def phases(self, name: str) -> list[str]:
        """The distinct successive status.phase values an object went through."""
        out: list[str] = []
        for _typ, obj in self.snapshot():
            if obj["metadata"]["name"] != name:
                continue
            phase = (obj.get("status") or {}).get("phase")
            if phase and (not out or out[-1] != phase):
                out.append(phase)
        return out

    def final_phases(self, name: str, timeout: float = 10) -> list[str]:
        """`phases(name)` once the watch has delivered a terminal phase (it may lag a GET slightly)."""
        wait_for(lambda: (self.phases(name) or [""])[-1] in TERMINAL, timeout=timeout,
                 what=f"the watch to see {name} end (seen: {self.phases(name)})")
        return self.phases(name)

    def seen(self, predicate: Callable[[str, dict[str, Any]], bool], timeout: float = 10) -> None:
        """Wait until the watch has delivered an event (type, object) that matches."""
        wait_for(lambda: any(predicate(t, o) for t, o in self.snapshot()), timeout=timeout,
                 what="the watch to deliver a matching event")

    def created(self, predicate: Callable[[dict[str, Any]], bool] = lambda _o: True) -> dict[str, str]:
        """uid → name of every object ever seen that matches."""
        return {obj["metadata"]["uid"]: obj["metadata"]["name"] for _t, obj in self.snapshot() if predicate(obj)}


Record = Callable[..., Recorder]
Faults = Callable[..., int]


@pytest.fixture
def faults(stack: Stack) -> Iterator[Faults]:
    """`faults(ns, verb=..., resource=..., code=..., times=...)`: localkube faults scoped to one namespace.

    All faults are cleared afterwards (the e2e tests run one at a time)."""

    def inject(namespace: str, **spec: Any) -> int:
        return stack.kube.inject_fault(namespace=namespace, **spec)

    yield inject
    stack.kube.clear_faults()


@pytest.fixture
def record(stack: Stack) -> Iterator[Record]:
    """`record(ns, "agentruns" | "jobs" | "pods" | "persistentvolumeclaims" | "roles", label_selector=...)`."""
    made: list[Recorder] = []
    lists: dict[str, Callable[[str], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
        "agentruns": lambda ns: (stack.custom.list_namespaced_custom_object,
                                 ("sympozium.ai", "v1alpha1", ns, "agentruns")),
        "jobs": lambda ns: (stack.batch.list_namespaced_job, (ns,)),
        "pods": lambda ns: (stack.core.list_namespaced_pod, (ns,)),
        "persistentvolumeclaims": lambda ns: (stack.core.list_namespaced_persistent_volume_claim, (ns,)),
        "roles": lambda ns: (stack.rbac.list_namespaced_role, (ns,)),
        "rolebindings": lambda ns: (stack.rbac.list_namespaced_role_binding, (ns,)),
        "serviceaccounts": lambda ns: (stack.core.list_namespaced_service_account, (ns,)),
    }

    def make(ns: str, kind: str, **kwargs: Any) -> Recorder:
        fn, args = lists[kind](ns)
        r = Recorder(stack.api, fn, *args, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


def _env(kubeconfig: Path, temporal: TemporalDevServer, task_queue: str) -> dict[str, str]:
    return {**os.environ, "AGENTRUN_TEMPORAL__ADDRESS": temporal.address, "AGENTRUN_TEMPORAL__TASK_QUEUE": task_queue,
            "AGENTRUN_KUBE__KUBECONFIG": str(kubeconfig), "AGENTRUN_FALLBACK_POLL_SECONDS": "5",
            # A killed bridge's successor takes the Lease over within seconds, not the default 15s.
            "AGENTRUN_LEASE_SECONDS": "3", "AGENTRUN_LEASE_RENEW_SECONDS": "1", "PYTHONUNBUFFERED": "1",
            # Schedules are checked against Temporal every 2s, not every minute.
            "AGENTRUN_SCHEDULE_RESYNC_SECONDS": "2"}


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal"), headless=True).start()
    yield server
    server.stop()


def allow(api: client.ApiClient, *identities: str, binding: str = "e2e") -> None:
    """The API's ClusterRoles (viewer, editor, approver) for these token identities in every namespace: the tests
    that use them are about what the API does, not about RBAC (tests/e2e/test_api_access.py is)."""
    ensure_roles(api)
    bind(api, binding, [user(who.split()[0]) for who in identities])


@pytest.fixture(scope="session")
def stack(localkube: Handle, temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    install_crds(localkube.kubeconfig)
    allow(api, *API_TOKENS.values(), *OTHER_IDENTITIES)
    logs = tmp_path_factory.mktemp("procs")
    env = _env(localkube.kubeconfig, temporal, f"agentrun-{uuid.uuid4().hex[:6]}")
    nats = NatsServer(tmp_path_factory.mktemp("nats")).start() if NatsServer.available() else None
    if nats is not None:
        env["AGENTRUN_NATS__URL"] = nats.url
    worker = Proc("worker", [sys.executable, "-m", "worker"], env, logs / "worker.log")
    bridge = Proc("bridge", [sys.executable, "-m", "bridge"], env, logs / "bridge.log")
    worker.start()
    bridge.start()
    yield Stack(localkube, temporal, worker, bridge, api, nats)
    bridge.stop()
    worker.stop()
    if nats is not None:
        nats.stop()


# Where the session's API says the Temporal UI is (its dev server runs headless: the console's links point there).
TEMPORAL_UI = "http://127.0.0.1:8233"
# Bearer tokens of the session's API process and the identities they map to.
API_TOKENS = {"t-alice-0123456789": "alice@example.com", "t-bob-9876543210": "bob@example.com",
              "t-fuzz-0123456789abcdef": "fuzzer@example.com"}
# Identities other modules' own API processes use (test_gate_durability, test_policy), allowed as those above.
OTHER_IDENTITIES = ("carol@example.com", "ops@example.com")


@pytest.fixture(scope="session")
def api_server(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m api` with a token file (API_TOKENS), as `agentrun up` runs it; yields its base URL.

    One process for the session: the API holds no state of its own, every test uses its own namespace."""
    d = tmp_path_factory.mktemp("api")
    tokens = d / "tokens"
    tokens.write_text("# token identity\n" + "".join(f"{t} {who}\n" for t, who in API_TOKENS.items()))
    port = free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port),
           "AGENTRUN_TEMPORAL_UI_URL": TEMPORAL_UI,
           # The console's sessions as `agentrun up` keeps them: sealed Secrets (api/console/sessions.py).
           "AGENTRUN_SESSION_NAMESPACE": "default",
           # Every test's requests come from this one host, the wrong tokens of tests about 401s too: the throttle
           # of failed credentials keeps its defaults on an API of its own (tests/e2e/test_api_access.py).
           "AGENTRUN_FAILED_AUTH_BURST": "100000"}
    base = f"http://127.0.0.1:{port}"
    with api_process(env, d / "api.log", {base + "/readyz": True}):
        yield base


@contextmanager
def api_process(env: dict[str, str], log: Path, ready: dict[str, ssl.SSLContext | bool]) -> Iterator[None]:
    """`python -m api` with `env`, until every URL of `ready` answers 200 (verified as its value says); stopped on
    exit."""
    proc = subprocess.Popen([sys.executable, "-m", "api"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)

    def up() -> bool:
        try:
            return all(httpx.get(url, timeout=1, verify=verify).status_code == 200 for url, verify in ready.items())
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=30, what="the API to be ready")
        yield
    finally:
        stop_process(proc)


AGENT_IMAGE = "ghcr.io/sympozium-ai/sympozium/agent-runner:latest"


def agent(name: str = "helper", **defaults: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": name},
            "spec": {"agents": {"default": {"model": "echo-1", **defaults}},
                     "authRefs": [{"provider": "echo", "secret": ""}]}}


def agent_run(name: str, task: str = "hello", agent_ref: str = "helper", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun", "metadata": {"name": name},
            "spec": {"agentRef": agent_ref, "task": task, **spec}}


def hook(name: str, script: str, **fields: Any) -> dict[str, Any]:
    """A lifecycle hook running `script` with the host's sh (localkube runs busybox commands on the host)."""
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", script], **fields}


def condition(run: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (run.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def ensure_runtime_class(api: client.ApiClient, name: str) -> None:
    """A RuntimeClass of that name exists (cluster-scoped, so shared by the session's tests; never deleted)."""
    node: Any = client.NodeV1Api(api)
    try:
        node.create_runtime_class(
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name})
    except ApiException as e:
        if e.status != 409:
            raise
