"""maxConcurrent (SympoziumPolicy `subagentPolicy.maxConcurrent`): runs of one Agent over the limit
wait for a slot, durably and in order, instead of failing, and say so in their status.

Every claim is checked against the whole stream of AgentRun events (the `record` fixture), not
only the final state: at no moment were two runs of the Agent executing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from models.slots import SlotsState, slots_workflow_id
from tests.conftest import Kubectl
from tests.e2e.conftest import Record, Recorder, Stack, agent, agent_run, condition
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1
from workflows.agent_slots import AgentSlotsWorkflow

EXECUTING = {"Running", "PostRunning"}
HISTORIES = Path(__file__).resolve().parents[1] / "workflows" / "histories"


def _agent_with_limit(stack: Stack, ns: str, limit: int = 1) -> None:
    stack.create(ns, "sympoziumpolicies", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "one-at-a-time"},
        "spec": {"subagentPolicy": {"maxConcurrent": limit}}})
    body = agent()
    body["spec"]["policyRef"] = "one-at-a-time"
    stack.create(ns, "agents", body)


def _queued_at(stack: Stack, ns: str, name: str, position: int) -> dict[str, Any]:
    """Wait until the run says it is waiting for a slot at `position`."""
    def probe() -> dict[str, Any] | None:
        run = stack.get_run(ns, name)
        cond = condition(run, "Queued") if run else None
        ok = cond and cond["status"] == "True" and f"position {position} in the queue" in cond["message"]
        return run if ok else None
    return wait_for(probe, timeout=30, what=f"{name} to be queued at position {position}")


def _most_executing_at_once(runs: Recorder) -> int:
    """Replays the event stream (one watch, so one order) and counts runs executing at each moment."""
    phase: dict[str, str] = {}
    most = 0
    for _typ, obj in runs.snapshot():
        phase[obj["metadata"]["name"]] = (obj.get("status") or {}).get("phase", "")
        most = max(most, sum(p in EXECUTING for p in phase.values()))
    return most


def _order_started(runs: Recorder) -> list[str]:
    """Run names in the order they first became Running."""
    out: list[str] = []
    for _typ, obj in runs.snapshot():
        name = obj["metadata"]["name"]
        if (obj.get("status") or {}).get("phase") == "Running" and name not in out:
            out.append(name)
    return out


def _queued_messages(runs: Recorder, name: str) -> list[tuple[str, str, str]]:
    """The distinct successive (status, reason, message) of the run's Queued condition."""
    out: list[tuple[str, str, str]] = []
    for _typ, obj in runs.snapshot():
        cond = condition(obj, "Queued") if obj["metadata"]["name"] == name else None
        if cond and (not out or out[-1] != (cond["status"], cond["reason"], cond["message"])):
            out.append((cond["status"], cond["reason"], cond["message"]))
    return out


def _slots_state(stack: Stack, ns: str, agent_name: str = "helper") -> SlotsState:
    async def query() -> SlotsState:
        client = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        handle = client.get_workflow_handle_for(AgentSlotsWorkflow.run, slots_workflow_id(ns, agent_name))
        return await handle.query(AgentSlotsWorkflow.state)
    return asyncio.run(query())


def _workflow_id(runs: Recorder, name: str) -> str:
    return next(str(o["status"]["workflowId"]) for _t, o in runs.snapshot()
                if o["metadata"]["name"] == name and (o.get("status") or {}).get("workflowId"))


def _history_replays(stack: Stack, workflow_id: str, shape: str) -> None:
    """The run's history replays; with AGENTRUN_RECORD_HISTORIES=1 it is kept for tests/workflows/test_replay.py."""
    async def replay() -> None:
        client = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        handle = client.get_workflow_handle(workflow_id)
        try:
            await handle.result()
        except WorkflowFailureError:  # a deleted run's workflow ends cancelled; its history is what matters
            pass
        history = await handle.fetch_history()
        replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1], data_converter=pydantic_data_converter)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
        path = HISTORIES / f"v2-{shape}.json"  # type "AgentRun"; the unprefixed ones are version 1
        if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1" and not path.exists():
            path.write_text(history.to_json())
    asyncio.run(replay())


def _three_runs_in_line(stack: Stack, ns: str, tasks: tuple[str, str, str]) -> None:
    """r1 runs; r2 and r3, created after it in that order, wait at positions 1 and 2."""
    stack.create(ns, "agentruns", agent_run("r1", task=tasks[0]))
    stack.wait_phase(ns, "r1", {"Running"}, timeout=30)
    stack.create(ns, "agentruns", agent_run("r2", task=tasks[1]))
    _queued_at(stack, ns, "r2", 1)
    stack.create(ns, "agentruns", agent_run("r3", task=tasks[2]))
    _queued_at(stack, ns, "r3", 2)


def test_max_concurrent_holds_runs_and_releases_them_one_by_one(stack: Stack, namespace: str,
                                                                 record: Record) -> None:
    ns = namespace
    runs = record(ns, "agentruns")
    _agent_with_limit(stack, ns)
    _three_runs_in_line(stack, ns, ("sleep:3 one", "sleep:1 two", "sleep:1 three"))
    # Waiting is Pending, with the reason in the status: the Agent, the limit, the policy, the place.
    r3 = stack.get_run(ns, "r3")
    assert r3 is not None and r3["status"]["phase"] == "Pending" and not stack.run_objects(ns, "r3")["jobs"]
    queued = condition(r3, "Queued")
    assert queued is not None and queued["reason"] == "MaxConcurrent", queued
    assert queued["message"] == ('waiting for a slot: Agent "helper" runs at most 1 at a time (maxConcurrent of '
                                 'SympoziumPolicy "one-at-a-time"); position 2 in the queue'), queued
    for name, word in (("r1", "one"), ("r2", "two"), ("r3", "three")):
        status = stack.wait_phase(ns, name, timeout=60)["status"]
        assert (status["phase"], status["result"]) == ("Succeeded", f"echo: {word}"), status
    for name in ("r1", "r2", "r3"):
        assert runs.final_phases(name) == ["Pending", "Running", "Succeeded"], (name, runs.phases(name))
    assert _most_executing_at_once(runs) == 1
    assert _order_started(runs) == ["r1", "r2", "r3"]
    # r3 moved up when r2 got the slot, then got its own; r1 never waited.
    assert [(s, r) for s, r, _m in _queued_messages(runs, "r3")] == [
        ("True", "MaxConcurrent"), ("True", "MaxConcurrent"), ("False", "SlotGranted")]
    assert [m.rsplit("; ", 1)[-1] for _s, _r, m in _queued_messages(runs, "r3")[:2]] == [
        "position 2 in the queue", "position 1 in the queue"]
    assert _queued_messages(runs, "r1") == []
    wait_for(lambda: _slots_state(stack, ns).holders == [], timeout=15, what="every slot to be given back")
    _history_replays(stack, _workflow_id(runs, "r3"), "max-concurrent-queued")


def test_queued_runs_survive_a_worker_kill_and_still_run_in_order(stack: Stack, namespace: str,
                                                                   record: Record) -> None:
    ns = namespace
    runs, jobs = record(ns, "agentruns"), record(ns, "jobs")
    _agent_with_limit(stack, ns)
    _three_runs_in_line(stack, ns, ("sleep:2 one", "two", "three"))
    stack.worker.kill()
    try:
        # r1's agent finishes while no worker is up: the slot is given back only by the restarted worker.
        wait_for(lambda: stack.batch.read_namespaced_job("r1", ns).status.succeeded, timeout=30,
                 what="r1's agent Job to finish while the worker is down")
    finally:
        stack.worker.start()
    for name in ("r1", "r2", "r3"):
        assert stack.wait_phase(ns, name, timeout=60)["status"]["phase"] == "Succeeded"
        assert runs.final_phases(name) == ["Pending", "Running", "Succeeded"], (name, runs.phases(name))
    assert _most_executing_at_once(runs) == 1
    assert _order_started(runs) == ["r1", "r2", "r3"]
    # Each run's agent Job was created exactly once.
    assert sorted(jobs.created().values()) == ["r1", "r2", "r3"]


def test_a_deleted_queued_run_leaves_the_queue_and_a_failed_run_frees_its_slot(stack: Stack, namespace: str,
                                                                                record: Record,
                                                                                kubectl: Kubectl) -> None:
    ns = namespace
    runs = record(ns, "agentruns")
    _agent_with_limit(stack, ns)
    _three_runs_in_line(stack, ns, ("sleep:3 fail:boom", "two", "three"))
    done = kubectl("delete", "agentrun", "r2", "-n", ns, "--timeout=30s")
    assert done.returncode == 0, done.stderr
    # r3 moves up while r1 still holds the slot.
    _queued_at(stack, ns, "r3", 1)
    r1 = stack.get_run(ns, "r1")
    assert r1 is not None and r1["status"]["phase"] == "Running", r1
    # r1 fails: its slot goes to r3.
    assert stack.wait_phase(ns, "r1", timeout=30)["status"]["phase"] == "Failed"
    assert stack.wait_phase(ns, "r3", timeout=30)["status"]["phase"] == "Succeeded"
    assert stack.get_run(ns, "r2") is None
    assert "Running" not in runs.phases("r2")
    assert _order_started(runs) == ["r1", "r3"]
    assert _most_executing_at_once(runs) == 1
    def emptied() -> SlotsState | None:
        state = _slots_state(stack, ns)
        return state if not state.holders and not state.queue else None
    state = wait_for(emptied, timeout=15, what="the Agent's slots to be empty")
    assert (state.limit, state.policy) == (1, "one-at-a-time")
    _history_replays(stack, _workflow_id(runs, "r2"), "max-concurrent-deleted-while-queued")



def test_a_negative_max_concurrent_fails_the_run_naming_the_field(stack: Stack, namespace: str) -> None:
    ns = namespace
    _agent_with_limit(stack, ns, limit=-1)
    stack.create(ns, "agentruns", agent_run("r1"))
    status = stack.wait_phase(ns, "r1", timeout=30)["status"]
    assert status["phase"] == "Failed", status
    assert status["error"] == ('SympoziumPolicy "one-at-a-time" spec.subagentPolicy.maxConcurrent: '
                               "must be a positive number of concurrent runs, got -1"), status
    assert not stack.run_objects(ns, "r1")["jobs"]
