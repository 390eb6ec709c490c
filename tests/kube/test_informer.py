"""The worker's shared view of Jobs and pods follows the cluster (localkube over HTTP) without a request per look."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from cli.up import install_crds
from kube import Kube
from kube.informer import Informer, ended_at
from localkube.testing import Handle
from models.names import LABEL_RUN
from tests.waiting import wait_for


def _job(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "agent", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]}}}}


@pytest.fixture
def informer(kube: client.ApiClient, namespace: str) -> Iterator[Informer]:
    inf = Informer(Kube(kube), [namespace])
    inf.start()
    assert inf.wait_synced(30)
    yield inf
    inf.stop()


def test_a_runs_job_and_its_pod_are_seen_to_the_end_and_forgotten_when_deleted(
        kube: client.ApiClient, namespace: str, informer: Informer) -> None:
    batch: Any = client.BatchV1Api(kube)
    job = batch.create_namespaced_job(namespace, _job("r1", {LABEL_RUN: "r1"}))
    uid = job.metadata.uid

    def complete() -> bool:
        seen = informer.job(uid)
        return seen is not None and any(c.type == "Complete" and c.status == "True"
                                        for c in seen.status.conditions or [])
    wait_for(complete, timeout=30, what="the view to see the Job complete")
    pod = wait_for(lambda: (p := informer.pod_of(uid)) is not None and p.status.phase == "Succeeded" and p,
                   timeout=30, what="the view to see the pod succeed")
    assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == uid
    batch.delete_namespaced_job("r1", namespace, propagation_policy="Foreground")
    wait_for(lambda: informer.job(uid) is None and informer.pod_of(uid) is None, timeout=30,
             what="the view to forget the Job and its pod")


def test_jobs_that_are_not_a_runs_are_not_held(kube: client.ApiClient, namespace: str,
                                               informer: Informer) -> None:
    batch: Any = client.BatchV1Api(kube)
    other = batch.create_namespaced_job(namespace, _job("other", {"app": "x"}))
    ours = batch.create_namespaced_job(namespace, _job("ours", {LABEL_RUN: "ours"}))
    wait_for(lambda: informer.job(ours.metadata.uid) is not None, timeout=30, what="the run's Job in the view")
    assert informer.job(other.metadata.uid) is None


async def test_wait_pod_returns_the_pod_once_it_has_ended_and_none_when_the_view_never_gets_there(
        kube: client.ApiClient, namespace: str, informer: Informer) -> None:
    batch: Any = client.BatchV1Api(kube)
    job = batch.create_namespaced_job(namespace, _job("r2", {LABEL_RUN: "r2"}))

    def ended(p: dict[str, Any]) -> bool:
        return p["status"].get("phase") in ("Succeeded", "Failed")
    pod = await informer.wait_pod(job.metadata.uid, ended, within=30)
    assert pod is not None and pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0, "typed, with its status"
    assert pod.spec is None, "the view keeps metadata and status only"
    assert await informer.wait_pod(job.metadata.uid, lambda p: False, within=0.2) is None
    assert await informer.wait_pod("no-such-job", ended, within=0.2) is None
    assert not informer._waiters, "a waiter that gave up is forgotten"


def test_the_watch_goes_on_from_where_it_was_without_listing_again(
        kube: client.ApiClient, namespace: str, localkube: Handle) -> None:
    def requests(key: str) -> int:
        return int(localkube.stats()["requests"].get(key, 0))
    lists, watches = requests("list jobs"), requests("watch jobs")
    inf = Informer(Kube(kube), [namespace], watch_seconds=1)
    inf.start()
    try:
        assert inf.wait_synced(30)
        wait_for(lambda: requests("watch jobs") - watches >= 3, timeout=30,
                 what="three one-second watches of Jobs in a row")
        batch: Any = client.BatchV1Api(kube)
        job = batch.create_namespaced_job(namespace, _job("r3", {LABEL_RUN: "r3"}))
        wait_for(lambda: inf.job(job.metadata.uid) is not None, timeout=30, what="a Job made after those watches")
        assert requests("list jobs") - lists == 1, "listed once, at the start"
    finally:
        inf.stop()


def test_agents_and_policies_are_held_whole_while_they_exist_and_a_miss_says_nothing(
        kube: client.ApiClient, namespace: str, localkube: Handle, informer: Informer) -> None:
    install_crds(localkube.kubeconfig)
    custom: Any = client.CustomObjectsApi(kube)
    agent = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "helper"},
             "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo", "secret": ""}]}}
    custom.create_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agents", agent)
    held = wait_for(lambda: informer.definition("agents", namespace, "helper"), timeout=30,
                    what="the Agent in the view")
    assert held["spec"]["agents"]["default"]["model"] == "echo-1"
    assert "managedFields" not in held["metadata"]
    held["spec"]["agents"]["default"]["model"] = "changed by a reader"
    again = informer.definition("agents", namespace, "helper")
    assert again is not None and again["spec"]["agents"]["default"]["model"] == "echo-1", "readers get a copy"

    custom.patch_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agents", "helper",
                                          {"spec": {"agents": {"default": {"model": "echo-2"}}}})
    wait_for(lambda: (informer.definition("agents", namespace, "helper") or {}).get("spec", {})
             .get("agents", {}).get("default", {}).get("model") == "echo-2", timeout=30, what="the update")
    custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agents", "helper")
    wait_for(lambda: informer.definition("agents", namespace, "helper") is None, timeout=30,
             what="the deleted Agent forgotten")
    assert informer.definition("sympoziumpolicies", namespace, "never-made") is None


async def test_ended_jobs_and_pods_are_let_go_after_keep_ended_and_a_look_then_asks_the_api(
        kube: client.ApiClient, namespace: str) -> None:
    """A run parked at its gate for days holds nothing here: its ended Job and pod are let go (the clock is the
    view's own, moved on by the test instead of waiting five minutes)."""
    now = [time.time()]
    inf = Informer(Kube(kube), [namespace], keep_ended=300, clock=lambda: now[0])
    inf.start()
    try:
        assert inf.wait_synced(30)
        batch: Any = client.BatchV1Api(kube)
        done = batch.create_namespaced_job(namespace, _job("ended", {LABEL_RUN: "ended"})).metadata.uid
        busy_job = _job("busy", {LABEL_RUN: "busy"})
        busy_job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 60"]
        busy = batch.create_namespaced_job(namespace, busy_job).metadata.uid
        wait_for(lambda: (p := inf.pod_of(done)) is not None and p.status.phase == "Succeeded", timeout=30,
                 what="the view to see the pod succeed")
        # The Job's Complete condition comes after its pod's end (CI once swept between the two).
        wait_for(lambda: (j := inf.job(done)) is not None
                 and any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []),
                 timeout=30, what="the view to see the Job complete")
        wait_for(lambda: (p := inf.pod_of(busy)) is not None and p.status.phase == "Running", timeout=30,
                 what="the other pod to run")
        assert inf.sweep() == 0  # ended a moment ago: still held, for the step its end wakes
        assert inf.job(done) is not None

        now[0] += 301
        assert inf.sweep() == 2  # the ended Job and its pod
        assert inf.job(done) is None and inf.pod_of(done) is None
        assert inf.job(busy) is not None and inf.pod_of(busy) is not None  # running: held whatever its age
        async with asyncio.timeout(5):  # let go: no wait for the view, the caller asks the API server at once
            assert await inf.wait_pod(done, lambda p: True, within=30) is None

        # Listed again long after its end (a restarted worker), it is not held at all.
        fresh = Informer(Kube(kube), [namespace], keep_ended=300, clock=lambda: now[0])
        fresh.start()
        try:
            assert fresh.wait_synced(30)
            assert fresh.job(done) is None and fresh.pod_of(done) is None
            assert fresh.job(busy) is not None
        finally:
            fresh.stop()
        batch.delete_namespaced_job("busy", namespace, propagation_policy="Foreground")
    finally:
        inf.stop()


def test_when_a_job_or_pod_ended_is_read_from_its_status() -> None:
    now = 1_000.0
    job = {"status": {"completionTime": "2026-01-01T00:00:10Z",
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    assert ended_at("jobs", job, now) == datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC).timestamp()
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True",
                                         "lastTransitionTime": "2026-01-01T00:00:20Z"}]}}
    assert ended_at("jobs", failed, now) == datetime(2026, 1, 1, 0, 0, 20, tzinfo=UTC).timestamp()
    assert ended_at("jobs", {"status": {"active": 1}}, now) is None
    pod = {"status": {"phase": "Failed", "initContainerStatuses": [
        {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:05Z"}}}],
        "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-01-01T00:00:30Z"}}}]}}
    assert ended_at("pods", pod, now) == datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC).timestamp()
    assert ended_at("pods", {"status": {"phase": "Succeeded"}}, now) == now  # no time given: ended now
    assert ended_at("pods", {"status": {"phase": "Running"}}, now) is None
