"""What the bridge remembers stays bounded: entries go when their run or Job ends or is deleted, and a cap
holds where a deletion was never seen. Driven through the bridge's own event handlers, with a real Temporal dev
server (workflows started, Jobs signalled) and localkube."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from activities.manifests import ANNOTATION_WORKFLOW
from bridge.main import Bridge, Memo
from bridge.settings import BridgeSettings
from cli.stack import TemporalDevServer
from models.settings import TemporalSettings


@pytest.fixture
def temporal(tmp_path: Path) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path / "temporal", headless=True).start()
    yield server
    server.stop()


def test_the_oldest_entries_go_beyond_the_limit() -> None:
    memo = Memo(limit=3)
    for k in "abcd":
        memo.add(k, k.upper())
    assert len(memo) == 3 and "a" not in memo and memo.get("d") == "D"
    memo.add("b", "B2")  # re-adding makes it the newest
    memo.add("e")
    assert "c" not in memo and "b" in memo and memo.get("b") == "B2"
    memo.discard("b")
    memo.discard("never-there")
    assert "b" not in memo and len(memo) == 2


def _run(name: str, uid: str, phase: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                           "metadata": {"name": name, "namespace": "default", "uid": uid, "generation": 1},
                           "spec": {"agentRef": "helper", "task": "t"}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def _job(uid: str, wid: str) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "default", "uid": uid, "annotations": {ANNOTATION_WORKFLOW: wid}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}


def test_runs_and_jobs_are_forgotten_when_they_end_or_go(temporal: TemporalDevServer, kube: client.ApiClient) -> None:
    async def go() -> None:
        settings = BridgeSettings(temporal=TemporalSettings(address=temporal.address,
                                                            task_queue=f"memo-{uuid.uuid4().hex[:6]}"))
        bridge = Bridge(settings, kube, await settings.temporal.connect())
        ended, deleted = (f"r-{uuid.uuid4().hex[:6]}", str(uuid.uuid4())), (f"r-{uuid.uuid4().hex[:6]}", str(uuid.uuid4()))
        wids = {}
        for name, uid in (ended, deleted):
            await bridge.on_run("ADDED", _run(name, uid))  # starts its workflow (no worker polls the queue)
            wids[name] = f"agentrun/default/{name}/{uid}"
            assert wids[name] in bridge._started
            desc = await bridge.temporal.get_workflow_handle(wids[name]).describe()
            assert desc.status is not None and desc.status.name == "RUNNING"
        job_uid = str(uuid.uuid4())
        await bridge.on_job("MODIFIED", _job(job_uid, wids[ended[0]]))
        assert job_uid in bridge._signalled
        history = [e async for e in bridge.temporal.get_workflow_handle(wids[ended[0]]).fetch_history_events()]
        assert any(e.HasField("workflow_execution_signaled_event_attributes") for e in history)

        await bridge.on_run("MODIFIED", _run(*ended, phase="Succeeded"))
        await bridge.on_run("DELETED", _run(*deleted))
        await bridge.on_job("DELETED", _job(job_uid, wids[ended[0]]))
        assert len(bridge._started) == 0 and len(bridge._signalled) == 0 and len(bridge._verdicts) == 0
        for wid in wids.values():
            await bridge.temporal.get_workflow_handle(wid).terminate("test over")

    asyncio.run(go())
