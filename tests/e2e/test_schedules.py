"""SympoziumSchedules on Temporal Schedules (SPEC §6), end to end.

Ticks come from Temporal itself: short intervals, `trigger` and `backfill` on the real
Temporal Schedule, never wall-clock waits of minutes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio.client import Client, ScheduleBackfill, ScheduleHandle, ScheduleOverlapPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from models.schedule import ScheduleRef, TickResult, temporal_schedule_id
from tests.conftest import AUDIT_LOG
from tests.e2e.conftest import QUIET_CRON, TERMINAL, Record, Stack, agent
from tests.waiting import wait_for, wait_for_async
from workflows.scheduled_run import ScheduledRunWorkflow

GROUP, VERSION, PLURAL = "sympozium.ai", "v1alpha1", "sympoziumschedules"
LEASE_NAMESPACE, LEASE_NAME = "default", "agentrun-bridge"  # the bridges' Lease (bridge/settings.py's defaults)


def schedule(name: str, cron: str, task: str = "hello", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SympoziumSchedule", "metadata": {"name": name},
            "spec": {"agentRef": "helper", "schedule": cron, "task": task, **spec}}


@pytest.fixture
async def temporal_client(stack: Stack) -> AsyncIterator[Client]:
    yield await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)


def get_schedule(stack: Stack, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return cast(dict[str, Any], stack.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def wait_status(stack: Stack, ns: str, name: str, what: str, pred: Any, timeout: float = 30) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = get_schedule(stack, ns, name)
        return obj if obj is not None and pred(obj.get("status") or {}) else None
    return wait_for(probe, timeout=timeout, interval=0.1, what=f"schedule {name}: {what}")


def handle_of(temporal: Client, stack: Stack, ns: str, name: str) -> ScheduleHandle:
    obj = get_schedule(stack, ns, name)
    assert obj is not None
    m = obj["metadata"]
    return temporal.get_schedule_handle(temporal_schedule_id(ScheduleRef(namespace=ns, name=name, uid=m["uid"])))


def audit_lines(stack: Stack) -> int:
    return len((stack.kube.state_dir / AUDIT_LOG).read_text().splitlines())


def runs_of(stack: Stack, ns: str, name: str) -> list[dict[str, Any]]:
    out: Any = stack.custom.list_namespaced_custom_object(GROUP, VERSION, ns, "agentruns",
                                                          label_selector=f"sympozium.ai/schedule={name}")
    items: list[dict[str, Any]] = out["items"]
    return sorted(items, key=lambda r: r["metadata"]["name"])


def phase(run: dict[str, Any]) -> str:
    return str((run.get("status") or {}).get("phase") or "")


async def schedule_exists(handle: ScheduleHandle) -> bool:
    try:
        await handle.describe()
        return True
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return False
        raise


def test_interval_schedule_creates_one_run_per_tick_named_by_tick_time_and_owned(
        stack: Stack, namespace: str, record: Record) -> None:
    stack.create(namespace, "agents", agent())
    runs = record(namespace, "agentruns")
    sched = stack.create(namespace, PLURAL, schedule("beat", "@every 2s", type="heartbeat",
                                                     concurrencyPolicy="Allow", firstTick="afterInterval"))
    made = wait_for(lambda: (lambda rs: rs if len(rs) >= 3 else None)(runs_of(stack, namespace, "beat")),
                    timeout=40, what="three ticks")
    stack.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "beat", {"spec": {"suspend": True}})
    for run in made[:3]:
        meta = run["metadata"]
        # Named by the tick time: an interval of 2s ticks on even seconds (UTC).
        stamp = meta["name"].removeprefix("beat-")
        # A tick on a whole minute is named by the minute alone, as cron ticks are.
        tick = datetime.strptime(stamp, "%Y%m%d%H%M%S" if len(stamp) == 14 else "%Y%m%d%H%M").replace(tzinfo=UTC)
        assert tick.second % 2 == 0, meta["name"]
        assert meta["annotations"]["agentrun.dev/tick-time"] == tick.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert meta["ownerReferences"][0]["uid"] == sched["metadata"]["uid"]
        assert meta["ownerReferences"][0]["kind"] == "SympoziumSchedule"
        assert meta["labels"]["sympozium.ai/schedule"] == "beat"
        assert meta["labels"]["sympozium.ai/instance"] == "helper"
        assert meta["labels"]["sympozium.ai/type"] == "heartbeat"
        # Only the schedule's fields (and the CRD's defaults): the rest comes from the Agent.
        assert run["spec"] == {"agentRef": "helper", "task": "hello", "cleanup": "delete", "mode": "task"}
        done = stack.wait_phase(namespace, meta["name"])
        assert phase(done) == "Succeeded"
    # No tick created two runs: every run ever created has its own name.
    names = list(runs.created().values())
    assert len(names) == len(set(names))
    status = wait_status(stack, namespace, "beat", "counts its runs",
                         lambda s: s.get("totalRuns", 0) >= 3 and s.get("phase") == "Suspended")
    assert status["status"]["lastRunName"] in names
    assert "nextRunTime" not in status["status"]


def bridge_kubeconfig(stack: Stack, namespace: str, name: str, path: Path) -> str:
    """A kubeconfig for one bridge replica with a user of its own (a ServiceAccount the bridge's powers are bound
    to), so localkube's audit log tells the replicas' requests apart; returns that user's name."""
    core, rbac = stack.core, stack.rbac
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role_binding({
        "metadata": {"name": f"{namespace}-{name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    config = yaml.safe_load(stack.kube.kubeconfig.read_text())
    for u in config["users"]:
        u["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return f"system:serviceaccount:{namespace}:{name}"


def acting_order(stack: Stack, since: int, users: set[str]) -> list[str]:
    """Whose request each of `users`' requests was, in the order localkube served them, leaving out the Lease (which
    followers read and try to take: taking part in the election is not acting)."""
    lines = (stack.kube.state_dir / AUDIT_LOG).read_text().splitlines()[since:]
    out = []
    for line in lines:
        r = json.loads(line)
        if r["user"] in users and "/leases" not in r["path"]:
            out.append(r["user"])
    return out


def lease_transitions(stack: Stack) -> int | None:
    """How often the bridges' Lease changed hands; None while there is none (its first holder creates it)."""
    try:
        lease: Any = client.CoordinationV1Api(stack.api).read_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return int(lease.spec.lease_transitions or 0)


async def test_two_bridges_never_create_two_runs_for_one_tick(stack: Stack, namespace: str, record: Record,
                                                              temporal_client: Client, tmp_path: Path) -> None:
    """Two bridge replicas, each with a Kubernetes user of its own: only the Lease holder acts. Runs are made by the
    tick's workflow and Temporal Schedules are unique by ID, so run counts alone cannot show two bridges acting at
    once; localkube's audit log can: the replicas' requests (but on the Lease) never interleave, their holder
    changing at most as often as the Lease changed hands (a replica that loses it stops before another can take
    it: bridge/leader.py). Both acting (a broken election) interleaves them at every resync."""
    users = {}
    bridges = []
    for name in ("bridge-a", "bridge-b"):
        kubeconfig = tmp_path / f"{name}.kubeconfig"
        users[name] = bridge_kubeconfig(stack, namespace, name, kubeconfig)
        bridges.append(stack.bridge.__class__(
            name, stack.bridge.args, {**stack.bridge.env, "AGENTRUN_IDENTITY": name,
                                      "AGENTRUN_KUBE__KUBECONFIG": str(kubeconfig)},
            stack.bridge.log.with_name(f"{name}.log")))
    # The stack's bridge stands down (a clean stop gives the Lease up), so the two replicas are the only bridges.
    stack.bridge.stop()
    since = audit_lines(stack)
    transitions = lease_transitions(stack)
    for b in bridges:
        b.start()
    try:
        stack.create(namespace, "agents", agent())
        runs = record(namespace, "agentruns")
        stack.create(namespace, PLURAL, schedule("twice", QUIET_CRON, concurrencyPolicy="Allow",
                                                 firstTick="afterInterval"))
        wait_status(stack, namespace, "twice", "Active", lambda s: s.get("phase") == "Active")
        handle = handle_of(temporal_client, stack, namespace, "twice")
        for _ in range(3):
            await handle.trigger()
            await asyncio.sleep(1.1)  # each tick in its own second: run names carry the tick's second
        wait_for(lambda: len(runs_of(stack, namespace, "twice")) >= 3, timeout=30, what="three runs")
        for run in runs_of(stack, namespace, "twice"):
            stack.wait_phase(namespace, run["metadata"]["name"])
        desc = await handle.describe()
        # Exactly one run per tick that Temporal started, and exactly one Temporal Schedule for the object.
        assert desc.info.num_actions == 3
        assert len(set(runs.created().values())) == 3
        listed = [s async for s in await temporal_client.list_schedules()
                  if s.id.startswith(f"sympozium-schedule/{namespace}/twice/")]
        assert len(listed) == 1
        # (localkube logs a request when it ends: the leader's lists and writes by now, not its open watches.)
        order = acting_order(stack, since, set(users.values()))
        assert order, "neither replica acted"
        changes = sum(1 for a, b in itertools.pairwise(order) if a != b)
        # The first replica to lead takes the Lease over from the stack's bridge (one change of hands) or creates
        # it (none); any later change of hands is from one replica to the other.
        between = (lease_transitions(stack) or 0) - (transitions + 1 if transitions is not None else 0)
        assert changes <= between, (
            f"the replicas' requests interleave ({changes} changes of hands; the Lease went from one replica to "
            f"the other {between} times): {order}")
    finally:
        for b in bridges:
            b.stop()
        stack.bridge.start()
        for name in users:
            stack.rbac.delete_cluster_role_binding(f"{namespace}-{name}")


async def test_forbid_skips_ticks_while_a_run_is_active_and_resumes_after(
        stack: Stack, namespace: str, record: Record, temporal_client: Client) -> None:
    # Each run waits at a manual gate until the test approves it, so it is active for as long as the test
    # needs, however slowly a loaded machine hands the triggers to Temporal's scheduler.
    stack.create(namespace, "agents", agent(lifecycle={"postRun": [HOLD_GATE], "gateTimeout": "10m"}))
    runs = record(namespace, "agentruns")
    stack.create(namespace, PLURAL, schedule("solo", QUIET_CRON, firstTick="afterInterval"))
    wait_status(stack, namespace, "solo", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "solo")
    await handle.trigger()
    first = wait_for(lambda: next(iter(runs_of(stack, namespace, "solo")), None), timeout=20, what="the first run")
    _wait_gate_pending(stack, namespace, first["metadata"]["name"])
    await handle.trigger()
    await handle.trigger()
    try:
        await wait_for_async(lambda: _skipped(handle, 2), timeout=60, what="two skipped ticks")
    except AssertionError as e:
        raise AssertionError(f"{e}; {await _schedule_counts(handle)}, first run "
                             f"{(stack.get_run(namespace, first['metadata']['name']) or {}).get('status')}") from e
    assert [r["metadata"]["name"] for r in runs_of(stack, namespace, "solo")] == [first["metadata"]["name"]]
    _approve(stack, namespace, first["metadata"]["name"])
    assert phase(stack.wait_phase(namespace, first["metadata"]["name"], timeout=30)) == "Succeeded"
    await wait_for_async(lambda: _no_running_ticks(temporal_client, namespace, "solo"), timeout=30,
                         what="the first tick to close")
    # The scheduler learns of the tick's end on its own time: a trigger before that is one more overlap skip
    # (CI once saw no second run, 20 s after such a trigger).
    await wait_for_async(lambda: _scheduler_idle(handle), timeout=30, what="the scheduler to see the first tick end")
    # Run names carry the tick's second: a trigger in the first tick's second names the first run again (CI once
    # got there within that second; the tick then finds the run and must not run it twice), so the next one waits.
    tick_time = datetime.strptime(first["metadata"]["annotations"]["agentrun.dev/tick-time"], "%Y-%m-%dT%H:%M:%SZ")
    wait_for(lambda: datetime.now(UTC) >= tick_time.replace(tzinfo=UTC) + timedelta(seconds=1), timeout=5,
             what="a second after the first tick's")
    await handle.trigger()
    try:
        second = wait_for(lambda: (lambda rs: rs[1] if len(rs) == 2 else None)(runs_of(stack, namespace, "solo")),
                          timeout=60, what="a second run after the first ended")
    except AssertionError as e:
        raise AssertionError(f"{e}; {await _schedule_counts(handle)}") from e
    _wait_gate_pending(stack, namespace, second["metadata"]["name"])
    _approve(stack, namespace, second["metadata"]["name"])
    assert phase(stack.wait_phase(namespace, second["metadata"]["name"], timeout=30)) == "Succeeded"
    # Never two at once: the second was created only after the first was terminal.
    assert _max_active(runs) == 1
    # And each run's workflow ran once.
    for run in runs_of(stack, namespace, "solo"):
        wid = run["status"]["workflowId"]
        assert len([w async for w in temporal_client.list_workflows(f'WorkflowId = "{wid}"')]) == 1, wid


# A gate hook that leaves the run waiting for a verdict (SPEC §4).
HOLD_GATE = {"name": "hold", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}


def _wait_gate_pending(stack: Stack, ns: str, name: str) -> None:
    wait_for(lambda: ((stack.get_run(ns, name) or {}).get("status") or {}).get("gate", {}).get("state") == "pending",
             timeout=60, what=f"run {name} to wait at its gate")


def _approve(stack: Stack, ns: str, name: str) -> None:
    """The Sympozium way of giving a verdict: an annotation on the run, which the bridge forwards."""
    stack.custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "agentruns", name,
        {"metadata": {"annotations": {"sympozium.ai/gate-verdict": json.dumps({"action": "approve"})}}})


async def _skipped(handle: ScheduleHandle, n: int) -> bool:
    return (await handle.describe()).info.num_actions_skipped_overlap >= n


async def _schedule_counts(handle: ScheduleHandle) -> str:
    """What the scheduler says of the schedule, for a failure message."""
    info = (await handle.describe()).info
    return (f"schedule: {info.num_actions} actions, {info.num_actions_skipped_overlap} skipped, "
            f"running {info.running_actions}")


async def _scheduler_idle(handle: ScheduleHandle) -> bool:
    return not (await handle.describe()).info.running_actions


async def _no_running_ticks(temporal: Client, ns: str, name: str) -> bool:
    q = 'WorkflowType = "ScheduledRunWorkflow" AND ExecutionStatus = "Running"'
    return not [w async for w in temporal.list_workflows(q) if w.id.startswith(f"agentrun-tick/{ns}/{name}-")]


def _max_active(rec: Any) -> int:
    """The most runs that were ever non-terminal at the same moment, from the watch's event order."""
    active: set[str] = set()
    most = 0
    for typ, obj in rec.snapshot():
        name = obj["metadata"]["name"]
        if typ == "DELETED" or phase(obj) in TERMINAL:
            active.discard(name)
        else:
            active.add(name)
        most = max(most, len(active))
    return most


async def test_allow_overlaps_runs(stack: Stack, namespace: str, record: Record, temporal_client: Client) -> None:
    # The runs wait at a manual gate until the test approves them: the first is still active when the second starts.
    stack.create(namespace, "agents", agent(lifecycle={"postRun": [HOLD_GATE], "gateTimeout": "10m"}))
    runs = record(namespace, "agentruns")
    stack.create(namespace, PLURAL, schedule("many", QUIET_CRON, concurrencyPolicy="Allow",
                                             firstTick="afterInterval"))
    wait_status(stack, namespace, "many", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "many")
    await handle.trigger()
    wait_for(lambda: len(runs_of(stack, namespace, "many")) == 1, timeout=20, what="the first run")
    await asyncio.sleep(1.1)  # the next trigger must fall in another second: run names carry the tick's second
    await handle.trigger()
    both = wait_for(lambda: (lambda rs: rs if len(rs) == 2 else None)(runs_of(stack, namespace, "many")),
                    timeout=20, what="a second, overlapping run")
    for r in both:
        _wait_gate_pending(stack, namespace, r["metadata"]["name"])
    for r in both:
        _approve(stack, namespace, r["metadata"]["name"])
        assert phase(stack.wait_phase(namespace, r["metadata"]["name"], timeout=30)) == "Succeeded"
    assert _max_active(runs) == 2


async def test_replace_cancels_the_running_run_with_its_cleanup_and_starts_the_next(
        stack: Stack, namespace: str, temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("swap", QUIET_CRON, task="sleep:120", concurrencyPolicy="Replace",
                                             firstTick="afterInterval"))
    wait_status(stack, namespace, "swap", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "swap")
    await handle.trigger()
    old = wait_for(lambda: next(iter(runs_of(stack, namespace, "swap")), None), timeout=20, what="the first run")
    old_name = old["metadata"]["name"]
    stack.wait_phase(namespace, old_name, {"Running"}, timeout=20)
    wait_for(lambda: stack.run_objects(namespace, old_name)["pods"], timeout=20, what="the first run's pod")
    await asyncio.sleep(1.1)  # a tick in another second, so a distinct run name
    await handle.trigger()
    new = wait_for(lambda: next((r for r in runs_of(stack, namespace, "swap") if r["metadata"]["name"] != old_name),
                                None), timeout=60, what="the replacing run")
    # The old run went first, with its Jobs and pods: its workflow's cleanup ran.
    assert stack.get_run(namespace, old_name) is None
    stack.wait_gone(namespace, old_name)
    stack.wait_phase(namespace, new["metadata"]["name"], {"Running"}, timeout=20)
    await handle.delete()  # the schedule object's deletion is covered below; stop the long run here
    stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agentruns",
                                                 new["metadata"]["name"])


def test_schedule_at_nine_paris_time_next_runs_at_eight_or_seven_utc(stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("report", "0 9 * * *", timezone="Europe/Paris",
                                             firstTick="afterInterval"))
    obj = wait_status(stack, namespace, "report", "has a next run", lambda s: s.get("nextRunTime"))
    paris = ZoneInfo("Europe/Paris")
    now = datetime.now(paris)
    nine = now.replace(hour=9, minute=0, second=0, microsecond=0)
    if nine <= now:
        nine = (nine + timedelta(days=1)).replace(hour=9)
        nine = datetime(nine.year, nine.month, nine.day, 9, tzinfo=paris)
    expected = nine.astimezone(UTC)
    assert expected.hour in (7, 8)  # CEST or CET
    assert obj["status"]["nextRunTime"] == expected.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert obj["status"]["phase"] == "Active"


async def test_invalid_cron_or_zone_is_an_error_and_creates_nothing(stack: Stack, namespace: str,
                                                                     temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("badcron", "61 * * * *"))
    stack.create(namespace, PLURAL, schedule("badzone", "0 9 * * *", timezone="Mars/Olympus"))
    stack.create(namespace, PLURAL, schedule("never", "0 0 31 2 *"))
    bad = wait_status(stack, namespace, "badcron", "Error", lambda s: s.get("phase") == "Error")
    assert bad["status"]["message"].startswith("spec.schedule: minute '61'")
    zone = wait_status(stack, namespace, "badzone", "Error", lambda s: s.get("phase") == "Error")
    assert "spec.timezone" in zone["status"]["message"] and "Mars/Olympus" in zone["status"]["message"]
    for name in ("badcron", "badzone"):
        assert not await schedule_exists(handle_of(temporal_client, stack, namespace, name))
    # February 31st never comes: Active, but no next run.
    never = wait_status(stack, namespace, "never", "Active", lambda s: s.get("phase") == "Active")
    assert "nextRunTime" not in never["status"]
    assert await schedule_exists(handle_of(temporal_client, stack, namespace, "never"))
    # Fixing the cron makes it Active.
    stack.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "badcron",
                                                {"spec": {"schedule": QUIET_CRON, "firstTick": "afterInterval"}})
    fixed = wait_status(stack, namespace, "badcron", "Active", lambda s: s.get("phase") == "Active")
    assert fixed["status"].get("nextRunTime") and "message" not in fixed["status"]
    assert runs_of(stack, namespace, "badcron") == []


async def test_suspend_pauses_and_resume_unpauses_the_temporal_schedule(stack: Stack, namespace: str,
                                                                        temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("nap", "*/5 * * * *", firstTick="afterInterval"))
    wait_status(stack, namespace, "nap", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "nap")
    stack.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "nap", {"spec": {"suspend": True}})
    obj = wait_status(stack, namespace, "nap", "Suspended", lambda s: s.get("phase") == "Suspended")
    assert "nextRunTime" not in obj["status"]
    assert (await handle.describe()).schedule.state.paused
    stack.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "nap", {"spec": {"suspend": False}})
    obj = wait_status(stack, namespace, "nap", "Active again", lambda s: s.get("phase") == "Active")
    assert not (await handle.describe()).schedule.state.paused
    nxt = datetime.fromisoformat(obj["status"]["nextRunTime"].replace("Z", "+00:00"))
    assert nxt.minute % 5 == 0 and nxt > datetime.now(UTC)


async def test_deleting_the_schedule_removes_its_temporal_schedule_and_runs(
        stack: Stack, namespace: str, temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("gone", QUIET_CRON, task="sleep:120", concurrencyPolicy="Allow"))
    # firstTick: immediate (the default) triggers once on creation.
    run = wait_for(lambda: next(iter(runs_of(stack, namespace, "gone")), None), timeout=20, what="the immediate tick")
    stack.wait_phase(namespace, run["metadata"]["name"], {"Running"}, timeout=20)
    handle = handle_of(temporal_client, stack, namespace, "gone")
    stack.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_for(lambda: get_schedule(stack, namespace, "gone") is None, timeout=20, what="the schedule object to go")
    assert not await schedule_exists(handle)
    wait_for(lambda: stack.get_run(namespace, run["metadata"]["name"]) is None, timeout=30,
             what="the schedule's run to be deleted with it")
    stack.wait_gone(namespace, run["metadata"]["name"])


async def test_backfill_creates_exactly_the_runs_of_the_range(stack: Stack, namespace: str,
                                                              temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("past", "* * * * *", timezone="Europe/Paris",
                                             firstTick="afterInterval", suspend=True))
    wait_status(stack, namespace, "past", "Suspended", lambda s: s.get("phase") == "Suspended")
    handle = handle_of(temporal_client, stack, namespace, "past")
    start = datetime(2026, 1, 15, 8, 0, tzinfo=UTC)
    # [08:00, 08:03) UTC: three ticks, named in Paris time (UTC+1 in January).
    await handle.backfill(ScheduleBackfill(start_at=start - timedelta(seconds=1), end_at=start + timedelta(minutes=2),
                                           overlap=ScheduleOverlapPolicy.BUFFER_ALL))
    expected = ["past-202601150900", "past-202601150901", "past-202601150902"]
    wait_for(lambda: [r["metadata"]["name"] for r in runs_of(stack, namespace, "past")] == expected, timeout=40,
             what=f"runs {expected}", interval=0.2)
    for name in expected:
        assert phase(stack.wait_phase(namespace, name, timeout=30)) == "Succeeded"
    assert [r["metadata"]["name"] for r in runs_of(stack, namespace, "past")] == expected


async def test_ticks_missed_beyond_the_catchup_window_are_dropped(stack: Stack, namespace: str,
                                                                  temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    # The window leaves the worker 20s to come back (its start takes seconds on a loaded machine: a tick triggered
    # while it was down must still be inside the window then), and the downtime is longer than the window.
    stack.create(namespace, PLURAL, schedule("late", QUIET_CRON, concurrencyPolicy="Allow", catchupWindow="20s",
                                             firstTick="afterInterval"))
    wait_status(stack, namespace, "late", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "late")
    stack.bridge.kill()
    stack.worker.kill()
    try:
        await handle.trigger()  # tick A: started by Temporal now, picked up by no worker
        await asyncio.sleep(22)  # the downtime under test: longer than the 20s window
        await handle.trigger()  # tick B: within the window when the worker is back (it starts in < 20s)
    finally:
        stack.worker.start()
        stack.bridge.start()
    ticks = await wait_for_async(lambda: _closed_ticks(temporal_client, namespace, "late", 2), timeout=60,
                                 what="both ticks to finish")
    results = sorted(ticks, key=lambda r: r[0])
    assert "beyond catchupWindow" in (results[0][1].skipped or ""), results
    assert results[1][1].skipped is None and results[1][1].run_name
    names = [r["metadata"]["name"] for r in runs_of(stack, namespace, "late")]
    assert names == [results[1][1].run_name]
    assert phase(stack.wait_phase(namespace, names[0], timeout=30)) == "Succeeded"


async def _closed_ticks(temporal: Client, ns: str, name: str, n: int) -> list[tuple[datetime, TickResult]] | None:
    out = []
    async for w in temporal.list_workflows('WorkflowType = "ScheduledRunWorkflow"'):
        if not w.id.startswith(f"agentrun-tick/{ns}/{name}-") or w.status is None or w.status.name == "RUNNING":
            continue
        handle = temporal.get_workflow_handle_for(ScheduledRunWorkflow.run, w.id, run_id=w.run_id)
        out.append((w.start_time, await handle.result()))
    return out if len(out) >= n else None


async def test_a_temporal_schedule_deleted_behind_our_back_is_recreated(stack: Stack, namespace: str,
                                                                        temporal_client: Client) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("phoenix", QUIET_CRON, firstTick="afterInterval"))
    wait_status(stack, namespace, "phoenix", "Active", lambda s: s.get("phase") == "Active")
    handle = handle_of(temporal_client, stack, namespace, "phoenix")
    await handle.delete()
    await wait_for_async(lambda: schedule_exists(handle), timeout=30, what="the bridge to recreate the schedule")
    nxt = (await handle.describe()).info.next_action_times
    assert nxt and nxt[0].minute == 0 and nxt[0].second == 0
    assert runs_of(stack, namespace, "phoenix") == []  # recreated, not triggered: it has a past


async def test_history_of_a_tick_replays(stack: Stack, namespace: str, temporal_client: Client) -> None:
    """Like tests/e2e/test_record_histories.py, for ScheduledRunWorkflow: with
    AGENTRUN_RECORD_HISTORIES=1 the history is kept in tests/workflows/histories/ for CI replays."""
    stack.create(namespace, "agents", agent())
    stack.create(namespace, PLURAL, schedule("rec", QUIET_CRON, firstTick="afterInterval"))
    wait_status(stack, namespace, "rec", "Active", lambda s: s.get("phase") == "Active")
    await handle_of(temporal_client, stack, namespace, "rec").trigger()
    ticks = await wait_for_async(lambda: _closed_ticks(temporal_client, namespace, "rec", 1), timeout=60,
                                 what="the tick to finish")
    assert ticks[0][1].phase == "Succeeded"
    tick_ids = [w.id async for w in temporal_client.list_workflows('WorkflowType = "ScheduledRunWorkflow"')
                if w.id.startswith(f"agentrun-tick/{namespace}/rec-")]
    assert len(tick_ids) == 1
    tick_id = tick_ids[0]
    history = await temporal_client.get_workflow_handle(tick_id).fetch_history()
    replayer = Replayer(workflows=[ScheduledRunWorkflow], data_converter=pydantic_data_converter)
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None
    if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1":
        # v2-: a tick that starts the type "AgentRun"; v3-: recorded after a tick starts its run's workflow only
        # if that ID never ran (patch tick-child-once).
        _save_history("v3-scheduled-tick", history.to_json())


def _save_history(name: str, text: str) -> None:
    """Existing recordings are kept: that older histories still replay is the point."""
    path = Path(__file__).resolve().parents[1] / "workflows" / "histories" / f"{name}.json"
    if not path.exists():
        path.write_text(text)


def test_older_field_names_instance_ref_and_input_make_the_same_schedule(stack: Stack, namespace: str) -> None:
    """Sympozium's docs still write `instanceRef` and `input`: the object keeps them (no pruning) and its ticks
    create runs of that Agent with that task; a schedule with neither name is an Error naming the field."""
    stack.create(namespace, "agents", agent())
    body = schedule("older", QUIET_CRON)
    body["spec"] = {"instanceRef": "helper", "schedule": QUIET_CRON, "input": "from the older names"}
    stored = stack.create(namespace, PLURAL, body)
    assert stored["spec"]["instanceRef"] == "helper" and stored["spec"]["input"] == "from the older names"
    [run] = wait_for(lambda: runs_of(stack, namespace, "older") or None, timeout=30, what="the first tick's run")
    assert run["spec"]["agentRef"] == "helper" and run["spec"]["task"] == "from the older names"
    assert run["metadata"]["labels"]["sympozium.ai/instance"] == "helper"
    assert phase(stack.wait_phase(namespace, run["metadata"]["name"])) == "Succeeded"

    nameless = schedule("nameless", QUIET_CRON)
    nameless["spec"] = {"schedule": QUIET_CRON, "task": "t"}
    stack.create(namespace, PLURAL, nameless)
    bad = wait_status(stack, namespace, "nameless", "Error", lambda s: s.get("phase") == "Error")
    assert bad["status"]["message"].startswith("spec.agentRef: required")
