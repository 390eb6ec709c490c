"""Run-history pruning (SPEC §6) against the real Temporal dev server and localkube.

Passes are started the way production starts them, by the Temporal Schedule the bridge keeps
(triggered here instead of waiting out its interval), or by starting the workflow directly with
another global default. The schedule prunes every namespace of the shared stack with the
default of 50 runs per Agent, which no other test comes near.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleHandle,
    ScheduleOverlapPolicy,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RetryConfig, RPCError, RPCStatusCode
from temporalio.worker import Replayer, Worker

from activities.prune import PruneActivities
from bridge.prune import ensure_prune_schedule, keep_prune_schedule
from bridge.settings import BridgeSettings, PruneSettings
from cli.stack import TemporalDevServer, free_port
from kube import Kube
from models.prune import PRUNE_SCHEDULE_ID, AgentHistory, PruneRequest, PruneSummary
from models.settings import TemporalSettings
from tests.e2e.conftest import TERMINAL, Stack, agent, agent_run
from tests.waiting import wait_for
from workflows.prune import PruneHistoryWorkflow

T = TypeVar("T")
HISTORIES = Path(__file__).resolve().parents[1] / "workflows" / "histories"


async def eventually(probe: Callable[[], Awaitable[T | None]], *, within: float, what: str) -> T:
    """`tests.waiting.wait_for` for async probes: `within` seconds at most."""
    deadline = time.monotonic() + within
    while True:
        got = await probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what} (last: {got!r})")
        await asyncio.sleep(0.1)


async def connect(stack: Stack) -> Client:
    return await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)


def run_in_waves(stack: Stack, ns: str, waves: list[list[tuple[str, str]]]) -> None:
    """Create each wave's runs (name, agent) at once and wait for them to end before the next wave.

    So every run of a later wave is newer than every run of an earlier one, even at the
    one-second resolution of completedAt and creationTimestamp (names break ties in wave order).
    """
    for wave in waves:
        for name, agent_ref in wave:
            stack.create(ns, "agentruns", agent_run(name, task=f"task {name}", agent_ref=agent_ref))
        for name, _ in wave:
            stack.wait_phase(ns, name)


def assert_gone(stack: Stack, ns: str, names: list[str]) -> None:
    """Deleted for real: the objects are gone (finalizers released) and nothing of theirs is left."""
    for name in names:
        wait_for(lambda n=name: stack.get_run(ns, n) is None, timeout=30,  # type: ignore[misc]
                 what=f"pruned run {ns}/{name} to be gone")
        stack.wait_gone(ns, name)


def assert_untouched(stack: Stack, ns: str, names: list[str], phases: set[str] = TERMINAL) -> None:
    for name in names:
        obj = stack.get_run(ns, name)
        assert obj is not None, f"run {ns}/{name} was pruned"
        assert not obj["metadata"].get("deletionTimestamp"), f"run {ns}/{name} is being deleted"
        assert obj["status"]["phase"] in phases, obj["status"]


def history(summary: PruneSummary, ns: str, agent_name: str) -> AgentHistory:
    return next(h for h in summary.agents if (h.namespace, h.agent) == (ns, agent_name))


async def schedule_exists(handle: ScheduleHandle) -> int | None:
    """The schedule's action count (+1, so that 0 actions is truthy), once the bridge has made it."""
    try:
        return (await handle.describe()).info.num_actions + 1
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def trigger_pass(temporal: Client) -> list[PruneSummary]:
    """Trigger the bridge's schedule now and wait for the pass (and any tick that coincided) to end."""
    handle = temporal.get_schedule_handle(PRUNE_SCHEDULE_ID)
    before = await eventually(lambda: schedule_exists(handle), within=30,
                              what="the bridge to create the pruning schedule") - 1
    # Allow-all only for this manual trigger: a periodic tick running at this moment must not swallow it.
    await handle.trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL)

    async def started() -> list[str] | None:
        info = (await handle.describe()).info
        if info.num_actions <= before:
            return None
        new = info.recent_actions[-(info.num_actions - before):]
        return [a.action.workflow_id for a in new if isinstance(a.action, ScheduleActionExecutionStartWorkflow)]

    wids = await eventually(started, within=30, what="the triggered pass to start")
    summaries = [await temporal.get_workflow_handle(w, result_type=PruneSummary).result() for w in wids]
    await history_replays(temporal, wids[-1], "prune-pass")
    return summaries


async def history_replays(temporal: Client, workflow_id: str, name: str) -> None:
    """The pass's history replays; with AGENTRUN_RECORD_HISTORIES=1 it is kept for tests/workflows/test_replay.py
    (existing recordings are kept: that older histories still replay is the point)."""
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    replayer = Replayer(workflows=[PruneHistoryWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    path = HISTORIES / f"{name}.json"
    if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1" and not path.exists():
        path.write_text(history.to_json())


async def test_the_schedule_keeps_the_agents_limit_of_newest_terminal_runs_oldest_removed_running_untouched(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent("keep3", runHistoryLimit=3))
    stack.create(ns, "agents", agent("other"))
    stack.create(ns, "agentruns", agent_run("busy", task="sleep:120", agent_ref="keep3"))
    run_in_waves(stack, ns, [[("r1", "keep3"), ("r2", "keep3"), ("r3", "keep3"), ("o1", "other")],
                             [("r4", "keep3"), ("r5", "keep3"), ("r6", "keep3"), ("o2", "other")]])
    # The running run is the oldest of keep3's: were it counted or prunable, it would go first.
    stack.wait_phase(ns, "busy", {"Running"})

    temporal = await connect(stack)
    summaries = await trigger_pass(temporal)

    assert_gone(stack, ns, ["r1", "r2", "r3"])
    assert_untouched(stack, ns, ["r4", "r5", "r6", "o1", "o2"])
    assert_untouched(stack, ns, ["busy"], {"Running"})
    keep3 = [history(s, ns, "keep3") for s in summaries]
    assert sum(h.deleted for h in keep3) == 3
    assert (keep3[-1].limit, keep3[-1].limit_source, keep3[-1].untouched) == (3, "agent", 1)
    other = history(summaries[-1], ns, "other")
    assert (other.limit, other.limit_source, other.kept, other.deleted) == (50, "default", 2, 0)

    # The bridge made the schedule from the settings: every 5 minutes, overlapping ticks skipped,
    # on the worker's task queue, with the global default of 50 for every namespace.
    desc = await temporal.get_schedule_handle(PRUNE_SCHEDULE_ID).describe()
    assert [i.every for i in desc.schedule.spec.intervals] == [timedelta(minutes=5)]
    assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    action = desc.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert action.task_queue == stack.worker.env["AGENTRUN_TEMPORAL__TASK_QUEUE"]
    [req] = await temporal.data_converter.decode(list(action.args), [PruneRequest])
    assert req == PruneRequest(keep=50, namespaces=[])


@pytest.fixture
def second_namespace(stack: Stack) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    stack.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    stack.core.delete_namespace(name)


def legacy_instance(name: str, **defaults: Any) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumInstance", "metadata": {"name": name},
            "spec": {"provider": {"name": "echo", "model": "echo-1"}, "agents": {"default": defaults}}}


async def test_a_pass_uses_the_global_default_unless_the_agent_sets_a_limit_and_stays_in_its_namespaces(
        stack: Stack, namespace: str, second_namespace: str) -> None:
    ns, elsewhere = namespace, second_namespace
    stack.create(ns, "sympoziuminstances", legacy_instance("roomy", runHistoryLimit=2))
    stack.create(ns, "agents", agent("plain"))
    stack.create(elsewhere, "agents", agent("plain"))
    # "ghost" does not exist: its runs fail at once, and pruning falls back to the default for them.
    waves = [[(f"{a}-{i}", a) for a in ("roomy", "plain", "ghost")] for i in (1, 2)]
    run_in_waves(stack, ns, waves)
    run_in_waves(stack, elsewhere, [[("plain-1", "plain"), ("plain-2", "plain")]])

    # A worker of our own, reading two items per page, so the pass must follow continue tokens.
    temporal = await connect(stack)
    queue = f"prune-test-{uuid.uuid4().hex[:6]}"
    acts = PruneActivities(Kube(stack.api), page_size=2)
    async with Worker(temporal, task_queue=queue, workflows=[PruneHistoryWorkflow],
                      activities=[acts.prune_run_history]):
        summary = await temporal.execute_workflow(PruneHistoryWorkflow.run, PruneRequest(keep=1, namespaces=[ns]),
                                                  id=f"prune-test-{uuid.uuid4().hex[:6]}", task_queue=queue)

    assert summary.listed == 6 and summary.deleted == 2
    assert_gone(stack, ns, ["plain-1", "ghost-1"])
    assert_untouched(stack, ns, ["plain-2", "ghost-2", "roomy-1", "roomy-2"])
    assert_untouched(stack, elsewhere, ["plain-1", "plain-2"])
    by_agent = {h.agent: (h.limit, h.limit_source, h.kept, h.deleted) for h in summary.agents}
    assert by_agent == {"roomy": (2, "agent", 2, 0), "plain": (1, "default", 1, 1), "ghost": (1, "default", 1, 1)}


async def test_the_bridge_creates_then_updates_the_schedule_keeping_a_pause_and_removes_it_when_disabled(
        temporal: TemporalDevServer) -> None:
    client_ = await Client.connect(temporal.address, data_converter=pydantic_data_converter)
    sid = f"prune-{uuid.uuid4().hex[:8]}"

    def settings(**prune: Any) -> BridgeSettings:
        return BridgeSettings(temporal=TemporalSettings(address=temporal.address, task_queue="q"),
                              namespaces=["team-a"], prune=PruneSettings(schedule_id=sid, **prune))

    async def current() -> tuple[timedelta, PruneRequest, bool]:
        desc = await client_.get_schedule_handle(sid).describe()
        action = desc.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow) and action.task_queue == "q"
        [req] = await client_.data_converter.decode(list(action.args), [PruneRequest])
        return desc.schedule.spec.intervals[0].every, req, desc.schedule.state.paused

    await ensure_prune_schedule(client_, settings(keep=7, interval_seconds=3600))
    assert await current() == (timedelta(hours=1), PruneRequest(keep=7, namespaces=["team-a"]), False)

    await client_.get_schedule_handle(sid).pause(note="paused by an operator")
    await ensure_prune_schedule(client_, settings(keep=9, interval_seconds=600))
    assert await current() == (timedelta(minutes=10), PruneRequest(keep=9, namespaces=["team-a"]), True)

    await ensure_prune_schedule(client_, settings(enabled=False))
    with pytest.raises(RPCError) as gone:
        await client_.get_schedule_handle(sid).describe()
    assert gone.value.status == RPCStatusCode.NOT_FOUND
    await ensure_prune_schedule(client_, settings(enabled=False))  # already absent: nothing to do



async def test_while_temporal_is_unreachable_the_bridge_keeps_retrying_and_creates_the_schedule_once_it_is_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    # Lazy: the bridge's client may exist before Temporal answers; no client-side retries, so each
    # failed attempt surfaces at once and the bridge's own backoff is what is exercised.
    down = await Client.connect(f"127.0.0.1:{port}", lazy=True, data_converter=pydantic_data_converter,
                                retry_config=RetryConfig(max_retries=0))
    settings = BridgeSettings(temporal=TemporalSettings(address=f"127.0.0.1:{port}", task_queue="q"),
                              prune=PruneSettings(schedule_id="prune-retried"))
    task = asyncio.create_task(keep_prune_schedule(down, settings))
    server = TemporalDevServer(tmp_path / "temporal", port=port, headless=True)

    async def failure_logged() -> bool:
        return any("could not ensure schedule prune-retried" in r.message for r in caplog.records)

    try:
        await eventually(failure_logged, within=30, what="a failed attempt to be logged")
        assert not task.done(), "a failure to reach Temporal ended the schedule keeper"
        await asyncio.to_thread(server.start)
        await asyncio.wait_for(task, timeout=60)
        desc = await down.get_schedule_handle("prune-retried").describe()
        assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    finally:
        task.cancel()
        await asyncio.to_thread(server.stop)


def _cluster_grant(stack: Stack, name: str, labels: dict[str, str]) -> None:
    """A per-run ClusterRole and binding as a SkillPack sidecar's clusterRBAC makes them (activities/skill_manifests)."""
    meta = {"name": name, "labels": {"sympozium.ai/component": "skill", **labels}}
    stack.rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                    "metadata": meta, "rules": [{"apiGroups": [""], "resources": ["nodes"],
                                                                 "verbs": ["list"]}]})
    stack.rbac.create_cluster_role_binding({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": labels["agentrun.dev/run-namespace"]}]})


def _granted(stack: Stack, prefix: str) -> set[str]:
    roles = {r.metadata.name for r in stack.rbac.list_cluster_role().items if r.metadata.name.startswith(prefix)}
    bindings = {b.metadata.name for b in stack.rbac.list_cluster_role_binding().items
                if b.metadata.name.startswith(prefix)}
    assert roles == bindings, (roles, bindings)
    return roles


async def test_a_pass_removes_the_cluster_rbac_of_runs_that_are_gone_or_ended_and_keeps_a_running_ones(
        stack: Stack, namespace: str, second_namespace: str) -> None:
    ns, prefix = namespace, f"sweep-{uuid.uuid4().hex[:6]}"
    stack.create(ns, "agents", agent())
    run_in_waves(stack, ns, [[("done", "helper")]])
    stack.create(ns, "agentruns", agent_run("alive", task="sleep:60 hi"))
    alive = stack.wait_phase(ns, "alive", {"Running"})
    done = stack.get_run(ns, "done")
    assert done is not None
    for who, run, uid, where in (("alive", "alive", alive["metadata"]["uid"], ns),
                                 ("done", "done", done["metadata"]["uid"], ns),
                                 ("gone", "gone", "uid-of-a-run-deleted-without-cleanup", ns),
                                 ("other", "gone", "uid-elsewhere", second_namespace)):
        _cluster_grant(stack, f"{prefix}-{who}", {"sympozium.ai/agent-run": run, "agentrun.dev/run-uid": uid,
                                                  "agentrun.dev/run-namespace": where})
    temporal = await connect(stack)
    queue = f"prune-test-{uuid.uuid4().hex[:6]}"
    async with Worker(temporal, task_queue=queue, workflows=[PruneHistoryWorkflow],
                      activities=[PruneActivities(Kube(stack.api)).prune_run_history]):
        summary = await temporal.execute_workflow(PruneHistoryWorkflow.run, PruneRequest(keep=50, namespaces=[ns]),
                                                  id=f"prune-test-{uuid.uuid4().hex[:6]}", task_queue=queue)
    try:
        assert summary.cluster_rbac_removed == 4, summary
        assert _granted(stack, prefix) == {f"{prefix}-alive", f"{prefix}-other"}, \
            "a running run keeps its grant; another namespace's is not this pass's"
    finally:
        stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "alive")
        for name in _granted(stack, prefix):
            stack.rbac.delete_cluster_role_binding(name)
            stack.rbac.delete_cluster_role(name)
