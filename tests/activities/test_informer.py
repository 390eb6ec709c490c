"""The worker's shared view of Jobs and pods follows the cluster (localkube over HTTP) without a request per look."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from activities.informer import JobInformer
from models.kube import Kube
from models.names import LABEL_RUN
from tests.waiting import wait_for


def _job(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "agent", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]}}}}


@pytest.fixture
def informer(kube: client.ApiClient, namespace: str) -> Iterator[JobInformer]:
    inf = JobInformer(Kube(kube), [namespace])
    inf.start()
    assert inf.wait_synced(30)
    yield inf
    inf.stop()


def test_a_runs_job_and_its_pod_are_seen_to_the_end_and_forgotten_when_deleted(
        kube: client.ApiClient, namespace: str, informer: JobInformer) -> None:
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
                                               informer: JobInformer) -> None:
    batch: Any = client.BatchV1Api(kube)
    other = batch.create_namespaced_job(namespace, _job("other", {"app": "x"}))
    ours = batch.create_namespaced_job(namespace, _job("ours", {LABEL_RUN: "ours"}))
    wait_for(lambda: informer.job(ours.metadata.uid) is not None, timeout=30, what="the run's Job in the view")
    assert informer.job(other.metadata.uid) is None
