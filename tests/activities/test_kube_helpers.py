"""The helpers behind KubeActivities (activities/run_object.py, run_made.py, job_reader.py) against localkube over
HTTP: the guarded writes of the run object, adoption and owned-only deletes of what a run made, a Job's state."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError

from activities.job_reader import state_of
from activities.run_made import RunMade
from activities.run_object import RUN_GONE, RunObject
from cli.up import install_crds
from kube import Kube, NotFound
from localkube.testing import Handle
from models.agentrun import AgentRunStatus, Condition
from models.names import API_VERSION, RUN_FINALIZER
from models.resolve import RunRef
from models.steps import JobRef, StatusWrite

Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def crds(localkube: Handle) -> None:
    install_crds(localkube.kubeconfig)


@pytest.fixture
def k(kube: client.ApiClient) -> Kube:
    return Kube(kube)


@pytest.fixture
def run_object(k: Kube) -> RunObject:
    return RunObject(k, default_image="agent:dev", fallback_poll_seconds=60)


async def _run(k: Kube, ns: str, name: str, finalizers: list[str] | None = None) -> Obj:
    body = {"apiVersion": API_VERSION, "kind": "AgentRun",
            "metadata": {"name": name, **({"finalizers": finalizers} if finalizers else {})},
            "spec": {"agentRef": "helper", "task": "say hi"}}
    return await RunObject(k, default_image="", fallback_poll_seconds=60).runs.create(ns, body)


def _ref(obj: Obj) -> RunRef:
    m = obj["metadata"]
    return RunRef(namespace=m["namespace"], name=m["name"], uid=m["uid"])


async def test_two_children_starting_at_once_are_both_listed_on_their_parent(
        k: Kube, run_object: RunObject, namespace: str) -> None:
    """Both children start from the same version of the parent, so one of the two writes conflicts: it reads the
    parent again and adds itself to the list the other wrote."""
    parent = await _run(k, namespace, "parent")
    children = [await _run(k, namespace, f"child-{i}") for i in range(2)]
    await asyncio.gather(*(run_object._link_parent(child, parent) for child in children))
    stored = await run_object.runs.get(namespace, "parent")
    assert sorted(d["childRunName"] for d in stored["status"]["delegates"]) == ["child-0", "child-1"]
    await run_object._link_parent(children[0], stored)  # a retried step lists nobody twice
    again = await run_object.runs.get(namespace, "parent")
    assert [d["childRunName"] for d in again["status"]["delegates"]] == \
        [d["childRunName"] for d in stored["status"]["delegates"]]
    child = await run_object.runs.get(namespace, "child-0")
    assert [o["uid"] for o in child["metadata"]["ownerReferences"]] == [parent["metadata"]["uid"]]


async def test_the_first_versions_status_write_upserts_conditions_and_keeps_their_transition_time(
        k: Kube, run_object: RunObject, namespace: str) -> None:
    ref = _ref(await _run(k, namespace, "merged"))
    validated = Condition(type="Validated", status="True", reason="Resolved", last_transition_time="2026-01-01T00:00:00Z")
    await run_object.merge_status(StatusWrite(ref=ref, status=AgentRunStatus(phase="Pending"), conditions=[validated]))
    later = validated.model_copy(update={"reason": "Again", "last_transition_time": "2026-02-02T00:00:00Z"})
    queued = Condition(type="Queued", status="False", reason="Slot")
    await run_object.merge_status(StatusWrite(ref=ref, status=AgentRunStatus(result="r"), conditions=[later, queued]))
    status = (await run_object.runs.get(namespace, "merged"))["status"]
    assert status["phase"] == "Pending" and status["result"] == "r", "fields not written are left as they were"
    conds = {c["type"]: c for c in status["conditions"]}
    assert list(conds) == ["Validated", "Queued"]
    assert conds["Validated"]["reason"] == "Again"
    assert conds["Validated"]["lastTransitionTime"] == "2026-01-01T00:00:00Z", "same status: the transition stays"
    with pytest.raises(ApplicationError) as replaced:
        await run_object.merge_status(StatusWrite(ref=ref.model_copy(update={"uid": "another"}),
                                                  status=AgentRunStatus(result="x")))
    assert replaced.value.type == RUN_GONE and replaced.value.non_retryable


async def test_release_removes_only_our_finalizer_and_only_from_our_object(
        k: Kube, run_object: RunObject, namespace: str) -> None:
    shared = _ref(await _run(k, namespace, "shared", ["example.com/keep", RUN_FINALIZER]))
    await run_object.release(shared)  # the fast patch's test fails on the list: the careful way
    assert (await run_object.runs.get(namespace, "shared"))["metadata"]["finalizers"] == ["example.com/keep"]
    ours = _ref(await _run(k, namespace, "ours", [RUN_FINALIZER]))
    await run_object.release(ours.model_copy(update={"uid": "another-object"}))
    assert (await run_object.runs.get(namespace, "ours"))["metadata"]["finalizers"] == [RUN_FINALIZER]
    await run_object.release(ours)
    assert not (await run_object.runs.get(namespace, "ours"))["metadata"].get("finalizers")
    await run_object.release(RunRef(namespace=namespace, name="never", uid="x"))  # gone already: done


def _cm(name: str, owner: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [
        {"apiVersion": API_VERSION, "kind": "AgentRun", "name": owner["metadata"]["name"],
         "uid": owner["metadata"]["uid"]}]}, "data": {"k": "v"}}


async def test_a_create_adopts_this_runs_object_and_waits_out_another_runs(k: Kube, namespace: str) -> None:
    made, core = RunMade(k), k.core
    ours, earlier = await _run(k, namespace, "ours"), await _run(k, namespace, "earlier")
    first = await made._create(core.create_namespaced_config_map, namespace, _cm("thing", ours),
                               read=core.read_namespaced_config_map, uid=ours["metadata"]["uid"])
    again = await made._create(core.create_namespaced_config_map, namespace, _cm("thing", ours),
                               read=core.read_namespaced_config_map, uid=ours["metadata"]["uid"])
    assert again.metadata.uid == first.metadata.uid, "a retried step adopts what it made"
    await made._create(core.create_namespaced_config_map, namespace, _cm("left", earlier),
                       read=core.read_namespaced_config_map, uid=earlier["metadata"]["uid"])
    with pytest.raises(ApplicationError) as leftover:
        await made._create(core.create_namespaced_config_map, namespace, _cm("left", ours),
                           read=core.read_namespaced_config_map, uid=ours["metadata"]["uid"])
    assert leftover.value.type == "LeftoverObject" and not leftover.value.non_retryable


async def test_a_delete_of_what_a_run_made_leaves_another_runs_object_of_that_name(
        k: Kube, namespace: str) -> None:
    made, core = RunMade(k), k.core
    ours, newer = await _run(k, namespace, "ours"), await _run(k, namespace, "newer")
    await k.call(core.create_namespaced_config_map, namespace, _cm("shared-name", newer), action="create")
    await made.delete_owned(core.delete_namespaced_config_map, core.read_namespaced_config_map, "shared-name",
                            namespace, ours["metadata"]["uid"])
    kept = await k.call(core.read_namespaced_config_map, "shared-name", namespace, action="read")
    assert not kept.metadata.deletion_timestamp
    await made.delete_owned(core.delete_namespaced_config_map, core.read_namespaced_config_map, "shared-name",
                            namespace, newer["metadata"]["uid"])
    with pytest.raises(NotFound):
        await k.call(core.read_namespaced_config_map, "shared-name", namespace, action="read")
    # A delete guarded by another uid (a newer object of the name) is done without deleting it.
    await k.call(core.create_namespaced_config_map, namespace, _cm("guarded", newer), action="create")
    await made.delete(core.delete_namespaced_config_map, "guarded", namespace, uid="not-this-one")
    assert (await k.call(core.read_namespaced_config_map, "guarded", namespace, action="read")).metadata.name


def test_a_jobs_state_is_its_terminal_condition() -> None:
    ref = JobRef(namespace="ns", name="j", uid="u", component="agent-run")

    def job(*conds: tuple[str, str, str]) -> client.V1Job:
        return client.V1Job(status=client.V1JobStatus(conditions=[
            client.V1JobCondition(type=t, status=s, reason=r) for t, s, r in conds]))
    running = state_of(ref, job(("Suspended", "False", "")))
    assert not running.finished
    failed = state_of(ref, job(("FailureTarget", "True", "DeadlineExceeded"), ("Failed", "True", "DeadlineExceeded")))
    assert failed.finished and not failed.succeeded and failed.reason == "DeadlineExceeded"
    done = state_of(ref, job(("SuccessCriteriaMet", "True", "CompletionsReached"), ("Complete", "True", "")))
    assert done.finished and done.succeeded
