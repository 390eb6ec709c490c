"""The Agent's slots workflow on its own, against the real Temporal dev server: the semaphore behind
maxConcurrent. Runs are stood in for by a small workflow that keeps the `slot` signals it gets
(the slots workflow only knows runs by workflow ID and that signal), so each claim takes a second.

The whole path through AgentRuns is in test_max_concurrent.py.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from activities.slots import SlotActivities
from cli.stack import TemporalDevServer
from models.slots import SLOT_SIGNAL, SlotEntry, SlotNotice, SlotRelease, SlotRequest, SlotsState
from tests.waiting import wait_for_async
from workflows.agent_slots import AgentSlotsWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "workflows" / "histories"


@workflow.defn(sandboxed=False)
class SlotProbeWorkflow:
    """Stands in for a run: keeps every `slot` notice it receives, until told to stop."""

    def __init__(self) -> None:
        self._notices: list[SlotNotice] = []
        self._stopped = False

    @workflow.signal(name=SLOT_SIGNAL)
    def slot(self, notice: SlotNotice) -> None:
        self._notices.append(notice)

    @workflow.signal
    def stop(self) -> None:
        self._stopped = True

    @workflow.query
    def notices(self) -> list[SlotNotice]:
        return self._notices

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._stopped)


@dataclass
class Slots:
    client: Client
    queue: str
    prefix: str

    async def start(self, **state: object) -> WorkflowHandle[AgentSlotsWorkflow, None]:
        initial = SlotsState.model_validate({"namespace": "ns", "agent": self.prefix, **state})
        started = await self.client.start_workflow(AgentSlotsWorkflow.run, initial, id=f"agentslots/ns/{self.prefix}",
                                                   task_queue=self.queue)
        # Not tied to the first run: the workflow continues as new.
        return self.client.get_workflow_handle_for(AgentSlotsWorkflow.run, started.id)

    async def probe(self, name: str) -> WorkflowHandle[SlotProbeWorkflow, None]:
        return await self.client.start_workflow(SlotProbeWorkflow.run, id=f"{self.prefix}-{name}", task_queue=self.queue)

    def request(self, name: str, created_at: str, limit: int = 1, check_seconds: int = 60) -> SlotRequest:
        return SlotRequest(namespace="ns", agent=self.prefix, workflow_id=f"{self.prefix}-{name}", run_name=name,
                           created_at=created_at, limit=limit, policy="limits", check_seconds=check_seconds)


@pytest.fixture
async def slots(temporal: TemporalDevServer) -> AsyncIterator[Slots]:
    client = await Client.connect(temporal.address, data_converter=pydantic_data_converter)
    queue = f"slots-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=[AgentSlotsWorkflow, SlotProbeWorkflow],
                      activities=SlotActivities().all()):
        yield Slots(client, queue, f"a{uuid.uuid4().hex[:6]}")


async def _last(probe: WorkflowHandle[SlotProbeWorkflow, None], *, granted: bool, position: int = 0) -> SlotNotice:
    async def check() -> SlotNotice | None:
        seen = await probe.query(SlotProbeWorkflow.notices)
        last = seen[-1] if seen else None
        return last if last and (last.granted, last.position) == (granted, position) else None
    return await wait_for_async(check, timeout=10, what=f"{probe.id} to hear granted={granted} position={position}")


def _ids(entries: list[SlotEntry]) -> list[str]:
    return [e.run_name for e in entries]


async def _state(sem: WorkflowHandle[AgentSlotsWorkflow, None], holders: list[str], queue: list[str]) -> None:
    async def check() -> bool:
        state = await sem.query(AgentSlotsWorkflow.state)
        return (_ids(state.holders), _ids(state.queue)) == (holders, queue)
    await wait_for_async(check, timeout=10, what=f"holders {holders} and queue {queue}")


async def test_slots_go_in_creation_order_and_waiters_hear_their_place(slots: Slots) -> None:
    sem = await slots.start()
    p1, p2, p3 = [await slots.probe(n) for n in ("p1", "p2", "p3")]
    first = await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p1", "2030-01-01T00:00:02Z"))
    second = await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p2", "2030-01-01T00:00:03Z"))
    # p3 asks last but its run was created first: it goes ahead of p2, which is told it moved back.
    third = await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p3", "2030-01-01T00:00:01Z"))
    assert (first.granted, second.granted, second.position, third.granted, third.position) == (True, False, 1, False, 1)
    await _last(p2, granted=False, position=2)
    # Asking again changes nothing.
    again = await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p2", "2030-01-01T00:00:03Z"))
    assert (again.granted, again.position) == (False, 2)

    await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=p1.id))
    await _last(p3, granted=True)
    await _last(p2, granted=False, position=1)
    await _state(sem, ["p3"], ["p2"])
    assert not await p1.query(SlotProbeWorkflow.notices)  # its answer came with its request


async def test_the_latest_limit_wins_without_taking_slots_back(slots: Slots) -> None:
    sem = await slots.start(limit=2)
    probes = [await slots.probe(f"p{i}") for i in range(1, 6)]
    replies = [await sem.execute_update(AgentSlotsWorkflow.acquire,
                                        slots.request(f"p{i}", f"2030-01-01T00:00:0{i}Z", limit=2))
               for i in range(1, 5)]
    assert [r.granted for r in replies] == [True, True, False, False]
    # A run resolved after the policy was raised to 3 brings the new limit: p3 gets the third slot.
    fifth = await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p5", "2030-01-01T00:00:05Z", limit=3))
    assert (fifth.granted, fifth.position, fifth.limit) == (False, 2, 3)
    await _last(probes[2], granted=True)
    # Lowered to 1: nobody loses a slot, and nobody gets one until only one holder is left.
    await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("p5", "2030-01-01T00:00:05Z", limit=1))
    for p in probes[:2]:
        await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=p.id))
    await _state(sem, ["p3"], ["p4", "p5"])
    await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=probes[2].id))
    await _last(probes[3], granted=True)


async def test_slots_of_terminated_runs_are_freed(slots: Slots) -> None:
    sem = await slots.start()
    p1, p2, p3 = [await slots.probe(n) for n in ("p1", "p2", "p3")]
    for i, name in enumerate(("p1", "p2", "p3")):
        await sem.execute_update(AgentSlotsWorkflow.acquire,
                                 slots.request(name, f"2030-01-01T00:00:0{i}Z", check_seconds=1))
    # The holder and the next in line are terminated: neither ever gives anything back.
    await p1.terminate("test")
    await p2.terminate("test")
    # The holder check finds p1 gone; p2's grant cannot be delivered, so its place goes too.
    await _last(p3, granted=True)
    await _state(sem, ["p3"], [])


async def test_it_continues_as_new_with_its_state_and_ends_when_idle(slots: Slots) -> None:
    sem = await slots.start(max_history_events=40, idle_seconds=1)
    first_run = (await sem.describe()).run_id
    holder, waiter = await slots.probe("holder"), await slots.probe("waiter")
    await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("holder", "2030-01-01T00:00:00Z"))
    # Churn: other runs come and go while one holds and one waits, until the history is long.
    await sem.execute_update(AgentSlotsWorkflow.acquire, slots.request("waiter", "2030-01-01T00:00:01Z"))
    for i in range(12):
        churn = slots.request(f"churn{i}", f"2030-01-01T00:01:{i:02d}Z")
        await sem.execute_update(AgentSlotsWorkflow.acquire, churn)
        await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=churn.workflow_id))
    first = await slots.client.get_workflow_handle(sem.id, run_id=first_run).describe()
    assert first.status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    await _state(sem, ["holder"], ["waiter"])
    await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=holder.id))
    await _last(waiter, granted=True)
    await sem.signal(AgentSlotsWorkflow.release, SlotRelease(workflow_id=waiter.id))

    async def ended() -> bool:
        return (await sem.describe()).status == WorkflowExecutionStatus.COMPLETED
    await wait_for_async(ended, timeout=15, what="the idle slots workflow to end")
    # Both runs' histories replay (the first continued as new, the last ended idle); with
    # AGENTRUN_RECORD_HISTORIES=1 they are kept for tests/workflows/test_replay.py.
    last_run = (await sem.describe()).run_id
    await _history_replays(slots.client, sem.id, first_run, "slots-continued-as-new")
    await _history_replays(slots.client, sem.id, last_run, "slots-ended-idle")


async def _history_replays(client: Client, workflow_id: str, run_id: str | None, name: str) -> None:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    replayer = Replayer(workflows=[AgentSlotsWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    path = HISTORIES / f"{name}.json"  # existing recordings are kept: that older histories still replay is the point
    if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1" and not path.exists():
        path.write_text(history.to_json())
