"""The response gate's wait is durable (SPEC §4): a manual gate keeps waiting, with no pod,
while the worker, the bridge and the Temporal server are each SIGKILLed and started again,
and is then approved through the API; an annotation verdict given while the bridge is down
is applied once the bridge is back."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from cli.stack import free_port, stop_process
from tests.e2e.conftest import Record, Recorder, Stack, agent, agent_run
from tests.waiting import wait_for

TOKEN = "t-carol-5555555555"
RBAC = [{"apiGroups": ["sympozium.ai"], "resources": ["agentruns"], "verbs": ["get", "patch"]}]
LIVE_POD_PHASES = {"Pending", "Running", "Unknown"}


@pytest.fixture(scope="module")
def api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """`python -m api` with a token file, as `agentrun up` runs it; a client carrying a valid token."""
    d = tmp_path_factory.mktemp("api-durability")
    tokens = d / "tokens"
    tokens.write_text(f"{TOKEN} carol@example.com\n")
    port = free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "api"], env=env, stdout=(d / "api.log").open("ab"),
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base), timeout=30, what="the API to be ready")
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
            yield c
    finally:
        stop_process(proc)


def _ready(base: str) -> bool:
    try:
        return httpx.get(base + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def gate_hook(script: str) -> dict[str, Any]:
    return {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", script]}


def _gate(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    return (((stack.get_run(ns, name) or {}).get("status") or {}).get("gate")) or {}


def _live_pods(stack: Stack, ns: str, name: str) -> list[str]:
    pods = stack.core.list_namespaced_pod(ns, label_selector=f"sympozium.ai/agent-run={name}").items
    return [p.metadata.name for p in pods if p.status.phase not in ("Succeeded", "Failed")]


def _waiting_without_pod(stack: Stack, ns: str, name: str) -> bool:
    run = stack.get_run(ns, name) or {}
    st = run.get("status") or {}
    return (st.get("phase") == "PostRunning" and (st.get("gate") or {}).get("state") == "pending"
            and not _live_pods(stack, ns, name))


def _assert_still_waiting(stack: Stack, ns: str, name: str, after: str) -> None:
    wait_for(lambda: _waiting_without_pod(stack, ns, name), timeout=30,
             what=f"the gate to be pending with no live pod after {after} (pods: {_live_pods(stack, ns, name)})")
    assert "gateVerdict" not in ((stack.get_run(ns, name) or {}).get("status") or {})


def _worker_polling(stack: Stack) -> bool:
    """The worker process now running (by its pid) polls the task queue of the stack."""
    identity = f"{stack.worker.proc.pid}@{socket.gethostname()}" if stack.worker.proc else "?"
    queue = stack.worker.env["AGENTRUN_TEMPORAL__TASK_QUEUE"]

    async def describe() -> bool:
        temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        resp = await temporal.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace="default", task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
        return any(p.identity == identity for p in resp.pollers)

    try:
        return asyncio.run(describe())
    except Exception:  # the server is still coming up
        return False


def _bridge_leading(stack: Stack) -> bool:
    """The bridge process now running (by its pid) holds the bridge's Lease."""
    identity = f"{socket.gethostname()}-{stack.bridge.proc.pid}" if stack.bridge.proc else "?"
    try:
        lease: Any = client.CoordinationV1Api(stack.api).read_namespaced_lease("agentrun-bridge", "default")
    except ApiException:
        return False
    return bool(lease.spec.holder_identity == identity)


def _pending_in_temporal(stack: Stack, wid: str) -> bool:
    """The workflow is listed by the gate's search attribute (what the Temporal UI filters on)."""
    async def listed() -> bool:
        temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        async for wf in temporal.list_workflows(f'GateState="pending" AND WorkflowId="{wid}"'):
            if wf.id == wid:
                return True
        return False

    try:
        return asyncio.run(listed())
    except Exception:
        return False


def _restart(kill: Callable[[], object], start: Callable[[], object], back: Callable[[], bool], what: str) -> None:
    """SIGKILL, start again at once (later tests need the process back), and wait until it is back."""
    try:
        kill()
    finally:
        start()
    wait_for(back, timeout=60, interval=0.2, what=f"the {what} to be back")


def _component(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get("sympozium.ai/component", ""))


def _no_live_pod_since(pods: Recorder, mark: int) -> None:
    """No pod event after `mark` shows a pod of the run that was not finished (or being deleted)."""
    for typ, obj in pods.snapshot()[mark:]:
        phase = (obj.get("status") or {}).get("phase")
        assert typ == "DELETED" or phase not in LIVE_POD_PHASES, (typ, obj["metadata"]["name"], phase)


def test_a_manual_gate_survives_worker_bridge_and_server_restarts_then_is_approved_through_the_api(
        api: httpx.Client, stack: Stack, namespace: str, record: Record) -> None:
    ns, name = namespace, "parked"
    sel = f"sympozium.ai/agent-run={name}"
    jobs, pods = record(ns, "jobs", label_selector=sel), record(ns, "pods", label_selector=sel)
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, lifecycle={"postRun": [gate_hook("true")], "gateTimeout": "10m"}))
    wait_for(lambda: _waiting_without_pod(stack, ns, name), timeout=60,
             what="the gate to wait with no pod running")
    wid = (stack.get_run(ns, name) or {})["status"]["workflowId"]
    wait_for(lambda: _pending_in_temporal(stack, wid), timeout=30, what="GateState=pending in Temporal")
    # Once the gate hook has ended, no pod of the run may be live until the verdict.
    pods.seen(lambda _t, o: _component(o) == "post-run" and (o.get("status") or {}).get("phase") == "Succeeded")
    mark = len(pods.snapshot())
    pending = api.get("/api/v1/runs", params={"namespace": ns, "gate": "pending"}).json()
    assert [r["name"] for r in pending] == [name], pending

    _restart(stack.worker.kill, stack.worker.start, lambda: _worker_polling(stack), "worker")
    _assert_still_waiting(stack, ns, name, "the worker restart")

    _restart(stack.bridge.kill, stack.bridge.start, lambda: _bridge_leading(stack), "bridge")
    _assert_still_waiting(stack, ns, name, "the bridge restart")

    _restart(stack.temporal.kill, stack.temporal.start, lambda: _worker_polling(stack), "Temporal server")
    _assert_still_waiting(stack, ns, name, "the Temporal server restart")
    assert stack.workflow_status(wid) == WorkflowExecutionStatus.RUNNING
    wait_for(lambda: _pending_in_temporal(stack, wid), timeout=30,
             what="GateState=pending in Temporal after its restart")
    _no_live_pod_since(pods, mark)

    # The API's Temporal client reconnects by itself: it is ready and its verdict goes through.
    assert api.get("/readyz").status_code == 200
    r = api.post(f"/api/v1/runs/{name}/gate-verdict", params={"namespace": ns},
                 json={"action": "approve", "reason": "survived three restarts"})
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["gate_verdict"] == "approved" and view["decided_by"] == "carol@example.com", view

    st = stack.wait_phase(ns, name, timeout=60)["status"]
    assert st["phase"] == "Succeeded" and st["gateVerdict"] == "approved", st
    assert st["result"] == "echo: hello", st
    assert st["gate"]["state"] == "approved" and st["gate"]["decidedBy"] == "carol@example.com", st["gate"]
    assert st["gate"]["reason"] == "survived three restarts", st["gate"]
    assert any(c["type"] == "GateResolved" and c["reason"] == "approved" for c in st["conditions"])
    wait_for(lambda: stack.workflow_status(wid) == WorkflowExecutionStatus.COMPLETED, timeout=15,
             what="the workflow to complete")
    # No step was repeated by any of the restarts: one Job and one pod per step.
    for component in ("agent-run", "post-run"):
        made_jobs = jobs.created(lambda o, c=component: _component(o) == c)  # type: ignore[misc]
        made_pods = pods.created(lambda o, c=component: _component(o) == c)  # type: ignore[misc]
        assert (len(made_jobs), len(made_pods)) == (1, 1), (component, made_jobs, made_pods)
    stack.wait_gone(ns, name)


def test_an_annotation_verdict_given_while_the_bridge_is_down_is_applied_when_it_is_back(
        stack: Stack, namespace: str) -> None:
    ns, name = namespace, "annotated"
    patch = {"metadata": {"annotations": {"sympozium.ai/gate-verdict": json.dumps({"action": "approve"})}}}
    script = f"kubectl patch agentrun \"$AGENT_RUN_ID\" --type=merge -p '{json.dumps(patch)}' && exit 0"
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run(name, task="sleep:2 hi", lifecycle={
        "postRun": [gate_hook(script)], "gateTimeout": "10m", "rbac": RBAC}))
    stack.wait_phase(ns, name, {"Running"})
    stack.bridge.kill()
    try:
        # Without the bridge the workflow still sees its Jobs end (the fallback check), runs the
        # gate hook, which annotates the run and exits 0; nobody turns the annotation into a signal.
        def annotated_and_waiting() -> bool:
            run = stack.get_run(ns, name) or {}
            notes = (run.get("metadata") or {}).get("annotations") or {}
            done = stack.batch.list_namespaced_job(
                ns, label_selector=f"sympozium.ai/agent-run={name},sympozium.ai/component=post-run").items
            return ("sympozium.ai/gate-verdict" in notes and _waiting_without_pod(stack, ns, name)
                    and any(j.status.succeeded for j in done))

        wait_for(annotated_and_waiting, timeout=60, interval=0.2,
                 what="the gate hook to annotate the run and end while the gate waits")
        st = (stack.get_run(ns, name) or {})["status"]
        assert st["phase"] == "PostRunning" and "gateVerdict" not in st, st
    finally:
        stack.bridge.start()
    wait_for(lambda: _bridge_leading(stack), timeout=30, what="the bridge to lead again")
    st = stack.wait_phase(ns, name, timeout=60)["status"]
    assert st["phase"] == "Succeeded" and st["gateVerdict"] == "approved", st
    assert st["result"] == "echo: hi", st
    assert st["gate"]["decidedBy"] == "unverified", st["gate"]  # no admission webhook vouches for the writer here
    stack.wait_gone(ns, name)
