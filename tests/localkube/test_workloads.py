"""Jobs, PVCs and the kubelet, driven through the real `kubernetes` client and `kubectl`.

Containers are local processes under bubblewrap, so these tests synchronise with them through
files: a `hostPath` control directory (`/ctl` inside the pod) that the test can read and write,
or a PVC directory. Nothing here sleeps to synchronise; everything waits on an observable state.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from localkube.testing import Handle, running_localkube
from tests.conftest import Kubectl
from tests.waiting import wait_for

BUSYBOX = "busybox:1.36"
Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# builders and probes
# --------------------------------------------------------------------------------------------------


def container(name: str, script: str, **extra: Any) -> Obj:
    return {"name": name, "image": BUSYBOX, "command": ["sh", "-c", textwrap.dedent(script).strip()], **extra}


def pod_spec(*containers: Obj, init: list[Obj] | None = None, volumes: list[Obj] | None = None,
             restart: str = "Never", **extra: Any) -> Obj:
    spec: Obj = {"restartPolicy": restart, "containers": list(containers), **extra}
    if init:
        spec["initContainers"] = init
    if volumes:
        spec["volumes"] = volumes
    return spec


def pod(name: str, spec: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def job(name: str, spec: Obj, **job_spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, **job_spec, "template": {"spec": spec}}}


def host_dir(path: Path, name: str = "ctl") -> Obj:
    return {"name": name, "hostPath": {"path": str(path)}}


def ctl_mount(name: str = "ctl", path: str = "/ctl", **extra: Any) -> Obj:
    return {"name": name, "mountPath": path, **extra}


def claim(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}


def condition(obj: Any, ctype: str) -> Any:
    for c in (obj.status.conditions or []) if obj.status else []:
        if c.type == ctype and c.status == "True":
            return c
    return None


def read_text(path: Path) -> str:
    """The content of a file a container writes with `echo ... > file`, once a full line is in."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    return text if text.endswith("\n") else ""


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def dead(pid: int) -> bool:
    return not alive(pid)


def host_pid(pod_name: str, pid: int) -> int:
    """The host's pid of a container's process that wrote its own pid (`$$`): each container has a PID namespace of
    its own, so that is its pid in there. Found by its pod's HOSTNAME and the last pid of its NSpid line."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if f"HOSTNAME={pod_name}".encode() in env and nspid and int(nspid[-1]) == pid:
            return int(entry)
    raise AssertionError(f"no process of pod {pod_name} has pid {pid} in its namespace")


def status_of(err: ApiException) -> Obj:
    """The `kind: Status` body of an API error."""
    body: Obj = json.loads(err.body or "{}")
    assert body.get("kind") == "Status", body
    return body


def parse_ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00"))


class Cluster:
    """Typed-API helpers bound to one namespace."""

    def __init__(self, api: client.ApiClient, ns: str) -> None:
        self.ns = ns
        # Typed as Any on purpose: the client's models make every field Optional and its methods
        # want model objects, while these tests send plain manifests (as users do) and a None where
        # a value is expected fails the test anyway.
        self.core: Any = client.CoreV1Api(api)
        self.batch: Any = client.BatchV1Api(api)
        self.rbac: Any = client.RbacAuthorizationV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.ext: Any = client.ApiextensionsV1Api(api)

    def create_pod(self, body: Obj) -> Any:
        return self.core.create_namespaced_pod(self.ns, body)

    def create_job(self, body: Obj) -> Any:
        return self.batch.create_namespaced_job(self.ns, body)

    def read_pod(self, name: str) -> Any:
        return self.core.read_namespaced_pod(name, self.ns)

    def pod_gone(self, name: str) -> bool:
        try:
            self.core.read_namespaced_pod(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    def job_gone(self, name: str) -> bool:
        try:
            self.batch.read_namespaced_job(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    def wait_phase(self, name: str, *phases: str, timeout: float = 20) -> Any:
        def probe() -> Any:
            p = self.read_pod(name)
            return p if p.status and p.status.phase in phases else None
        return wait_for(probe, timeout=timeout, what=f"pod {name} in {phases}")

    def wait_job(self, name: str, ctype: str, timeout: float = 20) -> Any:
        def probe() -> Any:
            j = self.batch.read_namespaced_job(name, self.ns)
            return j if condition(j, ctype) else None
        return wait_for(probe, timeout=timeout, what=f"job {name} condition {ctype}")

    def job_pods(self, name: str) -> list[Any]:
        pods = self.core.list_namespaced_pod(self.ns, label_selector=f"job-name={name}").items
        return sorted(pods, key=lambda p: p.metadata.creation_timestamp)

    def log(self, name: str, **kw: Any) -> str:
        return str(self.core.read_namespaced_pod_log(name, self.ns, **kw))

    def grant(self, sa: str, name: str, rules: list[Obj]) -> None:
        self.rbac.create_namespaced_role(self.ns, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": rules})
        self.rbac.create_namespaced_role_binding(self.ns, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": self.ns}]})

    def service_account(self, name: str) -> None:
        self.core.create_namespaced_service_account(self.ns, {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})


@pytest.fixture
def k(kube: client.ApiClient, namespace: str) -> Cluster:
    return Cluster(kube, namespace)


@pytest.fixture
def ctl(tmp_path: Path) -> Path:
    """A host directory the test shares with its pods (mounted at /ctl)."""
    d = tmp_path / "ctl"
    d.mkdir()
    d.chmod(0o777)
    return d


def concurrently(*fns: Callable[[], Any]) -> list[Any]:
    with ThreadPoolExecutor(len(fns)) as pool:
        return [f.result() for f in [pool.submit(fn) for fn in fns]]


# --------------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------------


def test_job_runs_one_labelled_owned_pod_and_records_status_until_complete(
        k: Cluster, kubectl: Kubectl, ctl: Path) -> None:
    created = k.create_job(job("hello", pod_spec(
        container("main", "echo started > /ctl/started; while [ ! -e /ctl/go ]; do sleep 0.05; done; echo hi",
                  volumeMounts=[ctl_mount()]),
        volumes=[host_dir(ctl)])))
    uid = created.metadata.uid

    def running() -> Any:
        j = k.batch.read_namespaced_job("hello", k.ns)
        return j if j.status.active == 1 and j.status.ready == 1 and read_text(ctl / "started") else None
    active = wait_for(running, what="job active with its pod running and ready")
    assert active.status.start_time is not None
    assert active.status.completion_time is None
    assert not active.status.succeeded
    (ctl / "go").touch()

    done = kubectl("wait", "--for=condition=complete", "job/hello", "-n", k.ns, "--timeout=20s")
    assert done.returncode == 0, done.stderr
    j = k.batch.read_namespaced_job("hello", k.ns)
    assert j.status.succeeded == 1
    assert not j.status.active
    assert not j.status.failed
    assert j.status.completion_time >= j.status.start_time
    complete = condition(j, "Complete")
    assert complete.reason == "CompletionsReached"
    assert condition(j, "Failed") is None

    pods = k.job_pods("hello")
    assert len(pods) == 1
    p = pods[0]
    assert p.metadata.name.startswith("hello-")
    assert p.metadata.labels["job-name"] == "hello"
    assert p.metadata.labels["batch.kubernetes.io/job-name"] == "hello"
    assert p.metadata.labels["controller-uid"] == uid
    assert p.metadata.labels["batch.kubernetes.io/controller-uid"] == uid
    (ref,) = p.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == ("batch/v1", "Job", "hello", uid)
    assert ref.controller is True
    assert ref.block_owner_deletion is True
    assert p.status.phase == "Succeeded"
    assert not p.metadata.finalizers, "the job-tracking finalizer goes once the pod is counted"
    assert k.log(p.metadata.name) == "hi\n"
    logs = kubectl("logs", "job/hello", "-n", k.ns)
    assert (logs.returncode, logs.stdout) == (0, "hi\n"), logs.stderr


def test_job_with_completions_runs_pods_until_enough_succeed(k: Cluster) -> None:
    k.create_job(job("batch", pod_spec(container("main", "echo one")), completions=3, parallelism=2))
    j = k.wait_job("batch", "Complete")
    assert j.status.succeeded == 3
    pods = k.job_pods("batch")
    assert len(pods) == 3
    assert {p.status.phase for p in pods} == {"Succeeded"}


def test_failing_job_makes_backoff_limit_plus_one_attempts_then_fails_with_backoff_limit_exceeded(
        k: Cluster) -> None:
    k.create_job(job("flaky", pod_spec(container("main", "echo attempt; exit 3")), backoffLimit=2))
    j = k.wait_job("flaky", "Failed")
    failed = condition(j, "Failed")
    assert failed.reason == "BackoffLimitExceeded"
    assert j.status.failed == 3
    assert not j.status.succeeded
    assert not j.status.active
    assert j.status.start_time is not None
    assert j.status.completion_time is None
    assert condition(j, "Complete") is None

    pods = k.job_pods("flaky")
    assert len(pods) == 3
    for p in pods:
        assert p.status.phase == "Failed"
        (cs,) = p.status.container_statuses
        assert cs.state.terminated.exit_code == 3
        assert cs.state.terminated.reason == "Error"
    # A failed Job is final: no further attempts however long we look at it.
    assert len(k.job_pods("flaky")) == 3
    assert k.batch.read_namespaced_job("flaky", k.ns).status.failed == 3


def test_active_deadline_terminates_the_running_pod_then_kills_it_after_the_grace_period_and_fails_the_job(
        k: Cluster, ctl: Path) -> None:
    # The container ignores SIGTERM (it only records when it came) and keeps a heartbeat, so the last
    # beat tells when SIGKILL, after the grace period, stopped it, however late the test looks.
    script = """
        trap 'date +%s.%N >> /ctl/term' TERM
        echo $$$$ > /ctl/pid  # $$ is Kubernetes' escape for $
        while :; do date +%s.%N > /ctl/beat.new; mv /ctl/beat.new /ctl/beat; sleep 0.05; done
    """
    k.create_job(job("slow", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                      volumes=[host_dir(ctl)], terminationGracePeriodSeconds=2),
                     activeDeadlineSeconds=1))
    # The pod is found as soon as the Job makes it: once the 1 s deadline passes it is deleted, and it is gone a
    # grace period later, which on a loaded machine can come before the container has written its pid.
    (slow,) = wait_for(lambda: k.job_pods("slow"), what="the Job's pod")
    pid = int(wait_for(lambda: read_text(ctl / "pid"), what="container pid"))
    pid = host_pid(slow.metadata.name, pid)
    wait_for(partial(dead, pid), timeout=10, what="container killed")
    (term,) = map(float, (ctl / "term").read_text().split())
    last_beat = float((ctl / "beat").read_text())
    # Loose upper bound: on a loaded 2-core machine the kill can land a few seconds late.
    assert 1.0 <= last_beat - term <= 8.0, f"SIGKILL {last_beat - term:.2f}s after SIGTERM; grace period is 2s"

    j = k.wait_job("slow", "Failed", timeout=10)
    assert condition(j, "Failed").reason == "DeadlineExceeded"
    assert not j.status.active
    assert j.status.failed == 1
    wait_for(lambda: not k.job_pods("slow"), timeout=10, what="the deadline-killed pod to be deleted")


def test_a_job_whose_pod_never_ran_fails_at_its_deadline_with_the_pod_counted_and_gone(k: Cluster) -> None:
    """A pod no node fits is deleted at the Job's deadline: it ends Failed without ever running (as PodGC marks an
    unscheduled terminating pod), so the Job counts it, lets go of it, and only then writes Failed."""
    key = f"pool.localkube.test/{k.ns}-never"  # a label no node has
    k.create_job(job("stuck", {**pod_spec(container("main", "echo never")), "nodeSelector": {key: "gpu"}},
                     activeDeadlineSeconds=1))
    j = k.wait_job("stuck", "Failed", timeout=15)
    assert condition(j, "FailureTarget").reason == "DeadlineExceeded"
    assert condition(j, "Failed").reason == "DeadlineExceeded"
    assert not j.status.active and not j.status.terminating
    assert j.status.failed == 1
    wait_for(lambda: not k.job_pods("stuck"), timeout=10, what="the never-run pod to be deleted")


def test_pod_active_deadline_kills_the_pod_with_reason_deadline_exceeded(k: Cluster) -> None:
    k.create_pod(pod("capped", pod_spec(
        container("main", "trap 'echo got TERM' TERM; while :; do sleep 0.05; done"),
        activeDeadlineSeconds=1, terminationGracePeriodSeconds=1)))
    p = k.wait_phase("capped", "Failed", timeout=10)
    assert p.status.reason == "DeadlineExceeded"
    (cs,) = p.status.container_statuses
    assert cs.state.terminated.exit_code == 137  # SIGKILL after the ignored SIGTERM
    assert "got TERM" in k.log("capped")


def test_ttl_after_finished_deletes_the_job_and_its_pods(k: Cluster) -> None:
    k.create_job(job("brief", pod_spec(container("main", "true")), ttlSecondsAfterFinished=1))
    j = k.wait_job("brief", "Complete")
    assert j.spec.ttl_seconds_after_finished == 1
    assert len(k.job_pods("brief")) == 1
    wait_for(lambda: k.job_gone("brief"), timeout=10, what="job deleted by its TTL")
    wait_for(lambda: not k.job_pods("brief"), timeout=10, what="the job's pods deleted with it")


def test_suspended_job_creates_no_pods_until_resumed(k: Cluster) -> None:
    k.create_job(job("later", pod_spec(container("main", "echo resumed")), suspend=True))
    j = k.wait_job("later", "Suspended")
    assert condition(j, "Suspended").reason == "JobSuspended"
    assert k.job_pods("later") == []
    assert not j.status.active
    assert j.status.start_time is None

    k.batch.patch_namespaced_job("later", k.ns, {"spec": {"suspend": False}})
    j = k.wait_job("later", "Complete")
    pods = k.job_pods("later")
    assert len(pods) == 1
    assert k.log(pods[0].metadata.name) == "resumed\n"
    assert j.status.start_time is not None
    suspended = next(c for c in j.status.conditions if c.type == "Suspended")
    assert (suspended.status, suspended.reason) == ("False", "JobResumed")


def test_suspending_a_running_job_terminates_its_pod(k: Cluster, ctl: Path) -> None:
    script = "trap 'echo TERM > /ctl/term; exit 143' TERM; echo up > /ctl/up; while :; do sleep 0.05; done"
    k.create_job(job("pausable", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                          volumes=[host_dir(ctl)], terminationGracePeriodSeconds=5)))
    wait_for(lambda: read_text(ctl / "up"), what="job pod running")
    k.batch.patch_namespaced_job("pausable", k.ns, {"spec": {"suspend": True}})
    assert wait_for(lambda: read_text(ctl / "term"), what="SIGTERM to the suspended job's pod") == "TERM\n"
    wait_for(lambda: not k.job_pods("pausable"), timeout=10, what="suspended job's pod removed")
    j = k.wait_job("pausable", "Suspended")
    assert not j.status.active
    assert condition(j, "Failed") is None and condition(j, "Complete") is None


def test_job_replaces_a_deleted_pod_and_counts_it_as_failed(k: Cluster, ctl: Path) -> None:
    script = "echo $$$$ >> /ctl/pids; while [ ! -e /ctl/go ]; do sleep 0.05; done"
    k.create_job(job("resilient", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                           volumes=[host_dir(ctl)]), backoffLimit=1))
    wait_for(lambda: read_text(ctl / "pids"), what="first pod running")
    (first,) = k.job_pods("resilient")
    k.core.delete_namespaced_pod(first.metadata.name, k.ns)

    def replaced() -> Any:
        pods = [p for p in k.job_pods("resilient") if p.metadata.name != first.metadata.name]
        return pods if pods and len(read_text(ctl / "pids").split()) == 2 else None
    (second,) = wait_for(replaced, what="replacement pod running")
    (ctl / "go").touch()
    j = k.wait_job("resilient", "Complete")
    assert (j.status.failed, j.status.succeeded) == (1, 1)
    assert [p.metadata.name for p in k.job_pods("resilient")] == [second.metadata.name]


def test_deleting_a_job_terminates_its_running_pod(k: Cluster, kubectl: Kubectl, ctl: Path) -> None:
    script = "trap 'echo TERM > /ctl/term; exit 143' TERM; echo up > /ctl/up; while :; do sleep 0.05; done"
    k.create_job(job("doomed", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                        volumes=[host_dir(ctl)])))
    wait_for(lambda: read_text(ctl / "up"), what="job pod running")
    out = kubectl("delete", "job", "doomed", "-n", k.ns, "--wait=false")
    assert out.returncode == 0, out.stderr
    assert wait_for(lambda: read_text(ctl / "term"), what="SIGTERM to the job's pod") == "TERM\n"
    wait_for(lambda: k.job_gone("doomed") and not k.job_pods("doomed"), timeout=10, what="job and pod gone")


def test_job_whose_service_account_is_missing_records_failed_create_and_retries(k: Cluster) -> None:
    k.create_job(job("patient", pod_spec(container("main", "echo ok"), serviceAccountName="late")))

    def failed_create() -> Any:
        events = k.core.list_namespaced_event(k.ns).items
        return [e for e in events if e.reason == "FailedCreate" and e.involved_object.name == "patient"]
    (event, *_) = wait_for(failed_create, what="FailedCreate event")
    assert event.type == "Warning"
    assert event.involved_object.kind == "Job"
    assert 'serviceaccount "late" not found' in event.message
    assert k.job_pods("patient") == []

    k.service_account("late")
    k.wait_job("patient", "Complete")
    (p,) = k.job_pods("patient")
    assert p.spec.service_account_name == "late"


def test_pod_whose_service_account_does_not_exist_is_forbidden(k: Cluster) -> None:
    with pytest.raises(ApiException) as err:
        k.create_pod(pod("orphan", pod_spec(container("main", "true"), serviceAccountName="nobody")))
    assert err.value.status == 403
    status = status_of(err.value)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert 'serviceaccount "nobody" not found' in status["message"]


# --------------------------------------------------------------------------------------------------
# Volumes
# --------------------------------------------------------------------------------------------------


def test_pvc_binds_to_a_directory_that_is_removed_when_the_claim_is_deleted(
        k: Cluster, localkube: Handle, ctl: Path) -> None:
    created = k.core.create_namespaced_persistent_volume_claim(k.ns, claim("scratch"))
    assert created.status.phase == "Pending"

    def bound() -> Any:
        pvc = k.core.read_namespaced_persistent_volume_claim("scratch", k.ns)
        return pvc if pvc.status.phase == "Bound" else None
    pvc = wait_for(bound, what="PVC bound")
    assert pvc.spec.volume_name
    assert pvc.status.capacity == {"storage": "1Mi"}
    directory = localkube.state_dir / "volumes" / pvc.spec.volume_name
    assert directory.is_dir()

    script = "echo kept > /data/file; while [ ! -e /ctl/go ]; do sleep 0.05; done"
    k.create_pod(pod("writer", pod_spec(container("main", script, volumeMounts=[{"name": "d", "mountPath": "/data"},
                                                                              ctl_mount()]),
                                        volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "scratch"}},
                                                 host_dir(ctl)])))
    assert wait_for(lambda: read_text(directory / "file"), what="file written into the claim") == "kept\n"

    # In use by a running pod, the claim is protected: it lingers (and keeps its data) until the pod is done.
    k.core.delete_namespaced_persistent_volume_claim("scratch", k.ns)
    lingering = k.core.read_namespaced_persistent_volume_claim("scratch", k.ns)
    assert lingering.metadata.deletion_timestamp is not None
    assert "kubernetes.io/pvc-protection" in lingering.metadata.finalizers
    assert directory.is_dir()
    (ctl / "go").touch()
    k.wait_phase("writer", "Succeeded")

    def claim_gone() -> bool:
        try:
            k.core.read_namespaced_persistent_volume_claim("scratch", k.ns)
        except ApiException as e:
            return e.status == 404
        return False
    wait_for(claim_gone, what="PVC removed once unused")
    wait_for(lambda: not directory.exists(), what="PVC directory removed")


def test_init_containers_and_the_main_container_of_a_job_share_files_through_a_pvc(
        k: Cluster, kubectl: Kubectl) -> None:
    k.core.create_namespaced_persistent_volume_claim(k.ns, claim("workspace"))
    ws = [{"name": "ws", "mountPath": "/workspace"}]
    k.create_job(job("pipeline", pod_spec(
        container("main", "cat /workspace/steps", volumeMounts=ws),
        init=[container("fetch", "echo fetched > /workspace/steps; echo fetch done", volumeMounts=ws),
              container("build", "echo built >> /workspace/steps", volumeMounts=ws)],
        volumes=[{"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}}])))
    k.wait_job("pipeline", "Complete")
    (p,) = k.job_pods("pipeline")
    name = p.metadata.name
    assert k.log(name, container="main") == "fetched\nbuilt\n"
    logs = kubectl("logs", name, "-n", k.ns, "-c", "fetch")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == "fetch done\n"
    assert [s.name for s in p.status.init_container_statuses] == ["fetch", "build"]
    fetch, build = p.status.init_container_statuses
    (main,) = p.status.container_statuses
    for cs in (fetch, build, main):
        assert (cs.state.terminated.exit_code, cs.state.terminated.reason) == (0, "Completed")
    # Init containers run one after another, and before the main container.
    assert fetch.state.terminated.finished_at <= build.state.terminated.started_at
    assert build.state.terminated.finished_at <= main.state.terminated.started_at
    assert condition(p, "Initialized") is not None


def test_sub_path_mounts_a_subdirectory_of_the_claim(k: Cluster, localkube: Handle) -> None:
    k.core.create_namespaced_persistent_volume_claim(k.ns, claim("shared"))
    script = """
        echo nested > /sub/file
        cat /all/part/file
        ls /sub
    """
    k.create_pod(pod("subpath", pod_spec(
        container("main", script, volumeMounts=[{"name": "v", "mountPath": "/all"},
                                                {"name": "v", "mountPath": "/sub", "subPath": "part"}]),
        volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "shared"}}])))
    k.wait_phase("subpath", "Succeeded")
    assert k.log("subpath") == "nested\nfile\n"
    pvc = k.core.read_namespaced_persistent_volume_claim("shared", k.ns)
    assert (localkube.state_dir / "volumes" / pvc.spec.volume_name / "part" / "file").read_text() == "nested\n"


def test_read_only_mounts_reject_writes(k: Cluster) -> None:
    script = """
        echo seed > /rw/seed
        if { echo x > /ro/attempt; } 2>/dev/null; then echo writable; else echo refused; fi
        cat /ro/seed
    """
    k.create_pod(pod("readonly", pod_spec(
        container("main", script, volumeMounts=[{"name": "v", "mountPath": "/rw"},
                                                {"name": "v", "mountPath": "/ro", "readOnly": True}]),
        volumes=[{"name": "v", "emptyDir": {}}])))
    k.wait_phase("readonly", "Succeeded")
    assert k.log("readonly") == "refused\nseed\n"


def test_read_only_root_filesystem_allows_writes_only_to_volumes(k: Cluster) -> None:
    probe = f"/var/tmp/localkube-probe-{uuid.uuid4().hex}"
    script = f"""
        for f in {probe} /tmp/probe /data/probe; do
            if {{ echo x > $f; }} 2>/dev/null; then echo "$f writable"; else echo "$f refused"; fi
        done
    """
    k.create_pod(pod("rootfs", pod_spec(
        container("main", script, volumeMounts=[{"name": "v", "mountPath": "/data"}],
                  securityContext={"readOnlyRootFilesystem": True}),
        volumes=[{"name": "v", "emptyDir": {}}])))
    k.wait_phase("rootfs", "Succeeded")
    assert k.log("rootfs").splitlines() == [f"{probe} refused", "/tmp/probe refused", "/data/probe writable"]
    assert not os.path.exists(probe)


def test_config_map_and_secret_volumes_hold_their_keys_as_files(k: Cluster) -> None:
    k.core.create_namespaced_config_map(k.ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                                               "data": {"mode": "fast", "level": "3"}})
    k.core.create_namespaced_secret(k.ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                                           "stringData": {"password": "hunter2"}})
    script = """
        echo "$(cat /cfg/mode) $(cat /cfg/level) $(cat /secret/password) $(cat /picked/renamed)"
        ls /picked
        if { echo x > /cfg/mode; } 2>/dev/null; then echo writable; else echo read-only; fi
    """
    k.create_pod(pod("files", pod_spec(
        container("main", script, volumeMounts=[{"name": "cfg", "mountPath": "/cfg"},
                                                {"name": "creds", "mountPath": "/secret", "readOnly": True},
                                                {"name": "picked", "mountPath": "/picked"}]),
        volumes=[{"name": "cfg", "configMap": {"name": "cfg"}},
                 {"name": "creds", "secret": {"secretName": "creds"}},
                 {"name": "picked", "configMap": {"name": "cfg", "items": [{"key": "mode", "path": "renamed"}]}}])))
    k.wait_phase("files", "Succeeded")
    # configMap and secret volumes are read-only even when the mount does not say so.
    assert k.log("files") == "fast 3 hunter2 fast\nrenamed\nread-only\n"


# --------------------------------------------------------------------------------------------------
# Pod lifecycle and status
# --------------------------------------------------------------------------------------------------


def test_pod_status_goes_pending_running_succeeded_with_container_statuses(k: Cluster) -> None:
    since = k.core.list_namespaced_pod(k.ns).metadata.resource_version
    k.create_pod(pod("lifecycle", pod_spec(container("main", "sleep 0.3; echo done"),
                                           init=[container("prep", "echo prep")])))
    seen: dict[str, Any] = {}  # the first pod state observed in each phase
    phases: list[str] = []
    w = watch.Watch()
    for ev in w.stream(k.core.list_namespaced_pod, k.ns, field_selector="metadata.name=lifecycle",
                       resource_version=since, timeout_seconds=20):
        p = ev["object"]
        if p.status.phase not in seen:
            seen[p.status.phase] = p
            phases.append(p.status.phase)
        if p.status.phase in ("Succeeded", "Failed"):
            w.stop()
    assert phases == ["Pending", "Running", "Succeeded"]

    running = seen["Running"]
    (init,) = running.status.init_container_statuses
    assert init.state.terminated.exit_code == 0, "init containers finish before the pod runs"
    (main,) = running.status.container_statuses
    assert main.state.running.started_at is not None
    assert (main.ready, main.started) == (True, True)
    assert condition(running, "Initialized") is not None
    assert condition(running, "Ready") is not None

    p = k.read_pod("lifecycle")
    (init,) = p.status.init_container_statuses
    (main,) = p.status.container_statuses
    for cs in (init, main):
        t = cs.state.terminated
        assert (t.exit_code, t.reason) == (0, "Completed")
        assert t.started_at <= t.finished_at
        assert cs.ready is False
        assert cs.image == BUSYBOX
    assert init.state.terminated.finished_at <= main.state.terminated.started_at
    assert p.status.start_time is not None
    assert p.spec.node_name
    assert condition(p, "PodScheduled") is not None
    assert condition(p, "Ready") is None, "a finished pod is not ready"


def test_failing_container_fails_the_pod_with_its_exit_code(k: Cluster) -> None:
    k.create_pod(pod("broken", pod_spec(container("main", "echo oops >&2; exit 7"))))
    k.create_pod(pod("broken-init", pod_spec(container("main", "echo never"),
                                             init=[container("prep", "exit 2")])))
    p, q = concurrently(lambda: k.wait_phase("broken", "Failed"), lambda: k.wait_phase("broken-init", "Failed"))
    (cs,) = p.status.container_statuses
    assert (cs.state.terminated.exit_code, cs.state.terminated.reason) == (7, "Error")
    assert k.log("broken") == "oops\n"
    (init,) = q.status.init_container_statuses
    assert (init.state.terminated.exit_code, init.state.terminated.reason) == (2, "Error")
    (main,) = q.status.container_statuses
    assert main.state.terminated is None and main.state.running is None, "main never starts after a failed init"


def test_termination_message_is_the_file_the_container_wrote_or_with_fallback_its_log_tail(k: Cluster) -> None:
    long = "x" * 5000
    k.create_pod(pod("said", pod_spec(
        container("wrote", "printf 'skip: quiet hours' > /dev/termination-log; echo log only"),
        container("silent", "echo nothing written"),
        container("long", f"printf {long} > /dev/termination-log"),
        container("fallback", "echo first; echo last words; exit 3", terminationMessagePolicy="FallbackToLogsOnError"),
        container("fallback-ok", "echo fine", terminationMessagePolicy="FallbackToLogsOnError"))))
    p = k.wait_phase("said", "Failed")
    msg = {cs.name: cs.state.terminated.message for cs in p.status.container_statuses}
    assert msg["wrote"] == "skip: quiet hours"
    assert msg["silent"] is None, "no file written, policy File: no message"
    assert msg["long"] == "x" * 4096, "the kubelet reads at most 4096 bytes"
    assert msg["fallback"] == "first\nlast words\n"
    assert msg["fallback-ok"] is None, "the log is the message only for a failed container"
    assert k.log("said", container="wrote") == "log only\n"


def test_containers_of_a_pod_run_concurrently(k: Cluster) -> None:
    shared = [{"name": "shared", "mountPath": "/shared"}]
    k.create_pod(pod("pair", pod_spec(
        container("ping", "touch /shared/ping; while [ ! -e /shared/pong ]; do sleep 0.05; done; echo got pong",
                  volumeMounts=shared),
        container("pong", "while [ ! -e /shared/ping ]; do sleep 0.05; done; touch /shared/pong; echo got ping",
                  volumeMounts=shared),
        volumes=[{"name": "shared", "emptyDir": {}}])))
    k.wait_phase("pair", "Succeeded", timeout=10)
    assert k.log("pair", container="ping") == "got pong\n"
    assert k.log("pair", container="pong") == "got ping\n"


def test_pod_waits_in_container_creating_until_its_config_map_volume_exists(k: Cluster) -> None:
    k.create_pod(pod("early", pod_spec(container("main", "cat /cfg/greeting",
                                                 volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}]),
                                       volumes=[{"name": "cfg", "configMap": {"name": "late-cfg"}}])))

    def creating() -> Any:
        p = k.read_pod("early")
        statuses = p.status.container_statuses or []
        return p if statuses and statuses[0].state.waiting else None
    p = wait_for(creating, what="container waiting")
    assert p.status.phase == "Pending"
    assert p.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    with pytest.raises(ApiException) as err:
        k.log("early")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == 'container "main" in pod "early" is waiting to start: ContainerCreating'
    mount_events = wait_for(lambda: [e for e in k.core.list_namespaced_event(k.ns).items
                                     if e.reason == "FailedMount" and e.involved_object.name == "early"],
                            what="FailedMount event")
    assert 'configmap "late-cfg" not found' in mount_events[0].message

    k.core.create_namespaced_config_map(k.ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "late-cfg"}, "data": {"greeting": "hi"}})
    k.wait_phase("early", "Succeeded", timeout=10)
    assert k.log("early") == "hi"


def test_command_that_does_not_exist_fails_the_container_with_start_error(k: Cluster) -> None:
    k.create_pod(pod("typo", pod_spec({"name": "main", "image": BUSYBOX, "command": ["no-such-command-xyz"]})))
    p = k.wait_phase("typo", "Failed")
    (cs,) = p.status.container_statuses
    t = cs.state.terminated
    assert (t.exit_code, t.reason) == (128, "StartError")
    assert 'exec: "no-such-command-xyz": executable file not found in $PATH' in t.message


def test_restart_on_failure_backs_off_then_reruns_the_container_and_counts_restarts(k: Cluster, ctl: Path) -> None:
    script = """
        echo "run $(wc -l < /ctl/runs)"
        echo run >> /ctl/runs
        [ "$(wc -l < /ctl/runs)" -ge 2 ]
    """
    (ctl / "runs").touch()
    k.create_pod(pod("retry", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                       volumes=[host_dir(ctl)], restart="OnFailure")))

    def backing_off() -> Any:
        (cs,) = k.read_pod("retry").status.container_statuses or [None]
        return cs if cs and cs.state.waiting and cs.state.waiting.reason == "CrashLoopBackOff" else None
    cs = wait_for(backing_off, what="CrashLoopBackOff")
    assert cs.last_state.terminated.exit_code == 1
    assert cs.restart_count == 0
    assert "restarting failed container=main" in cs.state.waiting.message

    p = k.wait_phase("retry", "Succeeded", timeout=15)
    (cs,) = p.status.container_statuses
    assert cs.restart_count == 1
    assert cs.state.terminated.exit_code == 0
    assert cs.last_state.terminated.exit_code == 1
    assert (ctl / "runs").read_text() == "run\nrun\n"
    assert k.log("retry") == "run 1\n"


def test_deleting_a_pod_in_crash_loop_back_off_starts_no_further_container(k: Cluster, ctl: Path) -> None:
    k.create_pod(pod("crashy", pod_spec(container("main", "echo run >> /ctl/runs; exit 1", volumeMounts=[ctl_mount()]),
                                        volumes=[host_dir(ctl)], restart="Always")))

    def backing_off() -> Any:
        (cs,) = k.read_pod("crashy").status.container_statuses or [None]
        return cs if cs and cs.state.waiting and cs.state.waiting.reason == "CrashLoopBackOff" else None
    wait_for(backing_off, what="CrashLoopBackOff")
    assert k.read_pod("crashy").status.phase == "Running"
    k.core.delete_namespaced_pod("crashy", k.ns)
    wait_for(lambda: k.pod_gone("crashy"), timeout=3, what="pod removed without waiting out its back-off")
    assert (ctl / "runs").read_text() == "run\n"


def test_previous_logs_are_those_of_the_container_before_the_restart(k: Cluster, ctl: Path) -> None:
    script = "if [ -e /ctl/failed ]; then echo second; else touch /ctl/failed; echo first; exit 1; fi"
    k.create_pod(pod("again", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                       volumes=[host_dir(ctl)], restart="OnFailure")))
    k.wait_phase("again", "Succeeded", timeout=15)
    assert k.log("again") == "second\n"
    assert k.log("again", previous=True) == "first\n"


def test_container_env_resolves_values_references_secrets_config_maps_and_fields(k: Cluster) -> None:
    k.service_account("runner")
    k.core.create_namespaced_config_map(k.ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                                               "data": {"color": "blue", "size": "L"}})
    k.core.create_namespaced_secret(k.ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys"},
                                           "stringData": {"token": "s3cr3t", "user": "ann"}})
    env = [
        {"name": "GREETING", "value": "hello"},
        {"name": "PHRASE", "value": "$(GREETING) world"},
        {"name": "UNKNOWN", "value": "$(NOT_DEFINED)"},
        {"name": "ESCAPED", "value": "$$(GREETING)"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "token"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
        {"name": "OPTIONAL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "absent",
                                                               "optional": True}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
    ]
    names = ["GREETING", "PHRASE", "UNKNOWN", "ESCAPED", "TOKEN", "COLOR", "OPTIONAL", "POD_NAME", "POD_NAMESPACE",
             "POD_UID", "SA", "APP", "cfg_color", "cfg_size", "user", "PWD", "ARG"]
    script = "; ".join(f'echo "{n}=${{{n}-unset}}"' for n in names[:-1]) + '; echo "ARG=$1"; echo "UNAME=`uname -n`"'
    c = {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", script, "sh"], "args": ["$(PHRASE)!"],
         "env": env, "workingDir": "/usr/share",
         "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "cfg_"}, {"secretRef": {"name": "keys"}}]}
    body = pod("env", pod_spec(c, serviceAccountName="runner"))
    body["metadata"]["labels"] = {"app": "demo"}
    created = k.create_pod(body)
    k.wait_phase("env", "Succeeded")
    got = dict(line.split("=", 1) for line in k.log("env").splitlines())
    assert got == {
        "GREETING": "hello",
        "PHRASE": "hello world",
        "UNKNOWN": "$(NOT_DEFINED)",
        "ESCAPED": "$(GREETING)",
        "TOKEN": "s3cr3t",
        "COLOR": "blue",
        "OPTIONAL": "unset",
        "POD_NAME": "env",
        "POD_NAMESPACE": k.ns,
        "POD_UID": created.metadata.uid,
        "SA": "runner",
        "APP": "demo",
        "cfg_color": "blue",
        "cfg_size": "L",
        "user": "ann",
        "PWD": "/usr/share",
        "ARG": "hello world!",
        "UNAME": "env",
    }


def test_missing_secret_key_keeps_the_container_waiting_with_create_container_config_error(k: Cluster) -> None:
    k.core.create_namespaced_secret(k.ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "partial"},
                                           "stringData": {"present": "yes"}})
    k.create_pod(pod("needs-key", pod_spec(container("main", 'echo "key=$KEY"', env=[
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "partial", "key": "absent"}}}]))))

    def waiting() -> Any:
        p = k.read_pod("needs-key")
        for cs in p.status.container_statuses or []:
            if cs.state.waiting and cs.state.waiting.reason == "CreateContainerConfigError":
                return p, cs
        return None
    p, cs = wait_for(waiting, what="CreateContainerConfigError")
    assert p.status.phase == "Pending"
    assert cs.state.waiting.message == f"couldn't find key absent in Secret {k.ns}/partial"
    assert cs.state.running is None and cs.state.terminated is None

    # Like the real kubelet it keeps retrying, so supplying the key lets the container start.
    k.core.patch_namespaced_secret("partial", k.ns, {"stringData": {"absent": "found"}})
    k.wait_phase("needs-key", "Succeeded", timeout=15)
    assert k.log("needs-key") == "key=found\n"


def test_image_without_command_or_image_map_entry_fails_the_pod_with_a_clear_reason(k: Cluster) -> None:
    k.create_pod(pod("mystery", pod_spec({"name": "main", "image": "ghcr.io/example/agent:v1"})))
    k.create_pod(pod("mapped", pod_spec({"name": "main", "image": BUSYBOX})))
    p, _ = concurrently(lambda: k.wait_phase("mystery", "Failed"), lambda: k.wait_phase("mapped", "Succeeded"))
    (cs,) = p.status.container_statuses
    assert "ghcr.io/example/agent:v1" in cs.state.waiting.message
    assert "image map" in cs.state.waiting.message
    assert p.status.reason
    assert "ghcr.io/example/agent:v1" in p.status.message
    # busybox is in the default image map: its default command is a shell, which exits at end of input.
    (mapped,) = k.read_pod("mapped").status.container_statuses
    assert mapped.state.terminated.exit_code == 0


# --------------------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------------------


def test_logs_support_tail_lines_timestamps_and_container_selection(k: Cluster, kubectl: Kubectl) -> None:
    k.create_pod(pod("chatty", pod_spec(
        container("counter", "for i in 1 2 3 4 5; do echo line$i; done"),
        container("other", "echo from other; echo to stderr >&2"),
        init=[container("setup", "echo from init")])))
    k.wait_phase("chatty", "Succeeded")
    assert k.log("chatty", container="counter") == "line1\nline2\nline3\nline4\nline5\n"
    assert k.log("chatty", container="counter", tail_lines=2) == "line4\nline5\n"
    assert k.log("chatty", container="other") == "from other\nto stderr\n"
    assert k.log("chatty", container="setup") == "from init\n"

    stamped = k.log("chatty", container="counter", timestamps=True, tail_lines=1).splitlines()
    (line,) = stamped
    stamp, text = line.split(" ", 1)
    assert text == "line5"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", stamp), stamp
    assert abs(parse_ts(stamp) - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)

    with pytest.raises(ApiException) as err:
        k.log("chatty")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == (
        "a container name must be specified for pod chatty, choose one of: [counter other] "
        "or one of the init containers: [setup]")

    out = kubectl("logs", "chatty", "-n", k.ns, "-c", "counter", "--tail=1")
    assert (out.returncode, out.stdout) == (0, "line5\n"), out.stderr
    out = kubectl("logs", "chatty", "-n", k.ns, "-c", "setup")
    assert (out.returncode, out.stdout) == (0, "from init\n"), out.stderr


def test_follow_streams_new_lines_until_the_container_exits(k: Cluster, ctl: Path, kubectl: Kubectl) -> None:
    script = """
        echo first
        while [ ! -e /ctl/go ]; do sleep 0.05; done
        echo second
    """
    k.create_pod(pod("tail", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                      volumes=[host_dir(ctl)])))
    k.wait_phase("tail", "Running")
    wait_for(lambda: k.log("tail"), what="first line")
    resp = k.core.read_namespaced_pod_log("tail", k.ns, follow=True, _preload_content=False, _request_timeout=20)
    try:
        lines: Iterator[bytes] = iter(resp)
        assert next(lines) == b"first\n"
        assert k.read_pod("tail").status.phase == "Running"
        (ctl / "go").touch()
        assert next(lines) == b"second\n"
        assert list(lines) == [], "the stream ends when the container exits"
    finally:
        resp.release_conn()
    follow = kubectl("logs", "-f", "tail", "-n", k.ns, timeout=20)
    assert (follow.returncode, follow.stdout) == (0, "first\nsecond\n"), follow.stderr


# --------------------------------------------------------------------------------------------------
# Termination
# --------------------------------------------------------------------------------------------------


TRAPPING = """
    trap 'echo TERM >> /ctl/term; exit 0' TERM
    echo $$$$ > /ctl/pid  # $$ is Kubernetes' escape for $
    while :; do sleep 0.05; done
"""


def test_deleting_a_running_pod_sends_sigterm_and_the_pod_disappears_once_the_container_exits(
        k: Cluster, ctl: Path) -> None:
    k.create_pod(pod("graceful", pod_spec(container("main", TRAPPING, volumeMounts=[ctl_mount()]),
                                          volumes=[host_dir(ctl)], terminationGracePeriodSeconds=30)))
    pid = host_pid("graceful", int(wait_for(lambda: read_text(ctl / "pid"), what="container pid")))
    k.wait_phase("graceful", "Running")
    started = time.monotonic()
    deleting = k.core.delete_namespaced_pod("graceful", k.ns)
    assert deleting.metadata.deletion_timestamp is not None
    assert deleting.metadata.deletion_grace_period_seconds == 30
    assert wait_for(lambda: read_text(ctl / "term"), what="SIGTERM marker") == "TERM\n"
    # Gone as soon as the container exited, long before the 30s grace period.
    wait_for(lambda: k.pod_gone("graceful"), timeout=10, what="pod removed")
    assert time.monotonic() - started < 10
    assert not alive(pid)


def test_deleting_with_zero_grace_period_kills_at_once(k: Cluster, ctl: Path) -> None:
    k.create_pod(pod("abrupt", pod_spec(container("main", TRAPPING, volumeMounts=[ctl_mount()]),
                                        volumes=[host_dir(ctl)], terminationGracePeriodSeconds=30)))
    pid = host_pid("abrupt", int(wait_for(lambda: read_text(ctl / "pid"), what="container pid")))
    k.wait_phase("abrupt", "Running")
    k.core.delete_namespaced_pod("abrupt", k.ns, grace_period_seconds=0)
    assert k.pod_gone("abrupt"), "a zero grace period removes the pod from the API at once"
    wait_for(partial(dead, pid), timeout=3, what="container killed")
    assert not (ctl / "term").exists(), "SIGKILL gives the container no chance to run its TERM trap"


def test_a_second_delete_with_a_shorter_grace_period_kills_sooner(k: Cluster, tmp_path: Path) -> None:
    # Both containers ignore SIGTERM, so only the shortened grace period (1s, or 0 for a force delete)
    # ends them, long before the 30s they were first given.
    stubborn = """
        trap 'echo TERM >> /ctl/term' TERM
        echo $$$$ > /ctl/pid
        while :; do sleep 0.05; done
    """
    dirs = {name: tmp_path / name for name in ("shortened", "forced")}
    for name, d in dirs.items():
        d.mkdir()
        k.create_pod(pod(name, pod_spec(container("main", stubborn, volumeMounts=[ctl_mount()]),
                                        volumes=[host_dir(d)], terminationGracePeriodSeconds=30)))
    pids = {name: host_pid(name, int(wait_for(partial(read_text, d / "pid"), what=f"{name} pid")))
            for name, d in dirs.items()}
    for name, d in dirs.items():
        k.wait_phase(name, "Running")
        k.core.delete_namespaced_pod(name, k.ns)
        wait_for(partial(read_text, d / "term"), what=f"SIGTERM to {name}")
    started = time.monotonic()
    k.core.delete_namespaced_pod("shortened", k.ns, grace_period_seconds=1)
    k.core.delete_namespaced_pod("forced", k.ns, grace_period_seconds=0)
    assert k.pod_gone("forced")
    for name, pid in pids.items():
        wait_for(partial(dead, pid), timeout=5, what=f"{name} killed")
    wait_for(lambda: k.pod_gone("shortened"), timeout=5, what="shortened pod removed")
    assert time.monotonic() - started < 5


# The keeper holds a secret in its environment; the looker reads every process's environ it can see.
KEEPER = "echo up > /ctl/keeper; while [ ! -e /ctl/done ]; do sleep 0.05; done"
LOOKER = """
    while [ ! -e /ctl/keeper ]; do sleep 0.05; done
    for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done > /ctl/seen 2>/dev/null
    ls -d /proc/[0-9]* | wc -l > /ctl/count
    touch /ctl/done
"""


@pytest.mark.parametrize("shared", [False, True], ids=["own-namespaces", "shareProcessNamespace"])
def test_a_container_sees_the_processes_of_its_pods_other_containers_only_with_share_process_namespace(
        k: Cluster, tmp_path: Path, shared: bool) -> None:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    name = "shared" if shared else "apart"
    k.create_pod(pod(name, pod_spec(
        container("keeper", KEEPER, env=[{"name": "KEEPER_SECRET", "value": "s3cret-value"}],
                  volumeMounts=[ctl_mount()]),
        container("looker", LOOKER, volumeMounts=[ctl_mount()]),
        volumes=[host_dir(ctl)], shareProcessNamespace=shared)))
    assert k.wait_phase(name, "Succeeded", "Failed").status.phase == "Succeeded"
    seen = (ctl / "seen").read_text()
    assert "HOSTNAME=" + name in seen, "the looker reads its own processes' environment"
    if shared:
        assert "KEEPER_SECRET=s3cret-value" in seen, "one PID namespace for the pod: the keeper's process is visible"
    else:
        assert "KEEPER_SECRET" not in seen, "a PID namespace per container: the keeper's process is invisible"
        # Its own shell and the commands of its pipeline, under bwrap's reaper: nothing of the host's.
        assert int((ctl / "count").read_text()) < 10


def test_an_exec_probe_runs_in_its_containers_pid_namespace(k: Cluster, ctl: Path) -> None:
    probe = {"exec": {"command": ["sh", "-c", "grep -l probe-me /proc/[0-9]*/cmdline"]}, "periodSeconds": 1}
    k.create_pod(pod("probed", pod_spec(container(
        "main", ": probe-me; echo $$$$ > /ctl/pid; while [ ! -e /ctl/done ]; do sleep 0.05; done",
        volumeMounts=[ctl_mount()], readinessProbe=probe), volumes=[host_dir(ctl)])))
    wait_for(lambda: condition(k.read_pod("probed"), "Ready") and condition(k.read_pod("probed"), "Ready").status
             == "True", what="the probe to see the container's process")
    (ctl / "done").touch()
    k.wait_phase("probed", "Succeeded")


def test_evicting_a_pod_marks_it_a_disruption_target_then_deletes_it_and_its_job_counts_a_failure(
        k: Cluster, ctl: Path) -> None:
    # The container takes a second to stop: a Job that replaced a terminating pod at once (the default
    # podReplacementPolicy, TerminatingOrFailed) would have started its script a second time by then.
    script = """
        echo started >> /ctl/starts
        trap 'echo TERM >> /ctl/term; sleep 1; exit 0' TERM
        while :; do sleep 0.05; done
    """
    k.create_job(job("evicted", pod_spec(container("main", script, volumeMounts=[ctl_mount()]),
                                         volumes=[host_dir(ctl)]), backoffLimit=0, podReplacementPolicy="Failed"))
    wait_for(lambda: read_text(ctl / "starts"), what="the Job's pod running")
    (p,) = k.job_pods("evicted")
    k.core.create_namespaced_pod_eviction(p.metadata.name, k.ns, {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": p.metadata.name}})
    evicting = k.read_pod(p.metadata.name)
    assert evicting.metadata.deletion_timestamp is not None
    target = condition(evicting, "DisruptionTarget")
    assert (target.status, target.reason, target.message) == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    assert wait_for(lambda: read_text(ctl / "term"), what="SIGTERM to the evicted pod") == "TERM\n"
    failed = k.wait_job("evicted", "Failed")
    assert condition(failed, "Failed").reason == "BackoffLimitExceeded"
    wait_for(lambda: k.pod_gone(p.metadata.name), what="the evicted pod gone")
    assert (ctl / "starts").read_text() == "started\n", "podReplacementPolicy Failed: no pod replaced it meanwhile"
    with pytest.raises(ApiException) as err:  # the name must be the pod's
        k.core.create_namespaced_pod_eviction("nope", k.ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                             "metadata": {"name": "nope"}})
    assert err.value.status == 404


def test_concurrency_cap_keeps_extra_pods_pending_until_a_slot_frees(tmp_path: Path, ctl: Path) -> None:
    with running_localkube(tmp_path / "capped", max_pods=1) as lk:
        api = config.new_client_from_config(str(lk.kubeconfig))
        try:
            k = Cluster(api, "default")
            k.create_pod(pod("first", pod_spec(
                container("main", "while [ ! -e /ctl/go ]; do sleep 0.05; done", volumeMounts=[ctl_mount()]),
                volumes=[host_dir(ctl)])))
            k.wait_phase("first", "Running")
            k.create_pod(pod("second", pod_spec(container("main", "echo second ran"))))
            scheduled = wait_for(lambda: (lambda p: p if condition(p, "PodScheduled") else None)(k.read_pod("second")),
                                 what="second pod scheduled")
            assert scheduled.status.phase == "Pending"
            assert k.read_pod("second").status.phase == "Pending"
            assert k.read_pod("first").status.phase == "Running"
            # A queued pod has no processes to stop: deleting it does not wait for a slot.
            k.create_pod(pod("third", pod_spec(container("main", "echo third ran"))))
            wait_for(lambda: condition(k.read_pod("third"), "PodScheduled"), what="third pod scheduled")
            k.core.delete_namespaced_pod("third", "default")
            wait_for(lambda: k.pod_gone("third"), timeout=5, what="queued pod deleted")
            assert k.read_pod("first").status.phase == "Running"
            (ctl / "go").touch()
            k.wait_phase("first", "Succeeded")
            k.wait_phase("second", "Succeeded")
            first, second = k.read_pod("first"), k.read_pod("second")
            assert (second.status.container_statuses[0].state.terminated.started_at
                    >= first.status.container_statuses[0].state.terminated.finished_at)
            assert k.log("second") == "second ran\n"
        finally:
            api.close()


# --------------------------------------------------------------------------------------------------
# The API from inside a pod
# --------------------------------------------------------------------------------------------------


def test_kubectl_in_a_pod_acts_as_its_service_account_denied_without_a_role_and_allowed_with_one(
        k: Cluster) -> None:
    k.service_account("reader")
    script = """
        export HOME=/tmp
        kubectl get configmaps -o name
        echo "rc=$?"
    """
    k.create_pod(pod("denied", pod_spec(container("main", script), serviceAccountName="reader")))
    k.wait_phase("denied", "Succeeded")
    denied = k.log("denied")
    assert "forbidden" in denied.lower()
    assert f'User "system:serviceaccount:{k.ns}:reader" cannot list resource "configmaps"' in denied
    assert denied.endswith("rc=1\n")

    k.grant("reader", "read-configmaps", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
    k.create_pod(pod("allowed", pod_spec(container("main", script), serviceAccountName="reader")))
    k.wait_phase("allowed", "Succeeded")
    assert k.log("allowed") == "configmap/kube-root-ca.crt\nrc=0\n"


def test_pod_service_account_token_stops_working_once_the_pod_is_deleted(
        k: Cluster, kube: client.ApiClient, ctl: Path) -> None:
    k.create_pod(pod("leaker", pod_spec(
        container("main", "cat /var/run/secrets/kubernetes.io/serviceaccount/token > /ctl/token; echo >> /ctl/token",
                  volumeMounts=[ctl_mount()]),
        volumes=[host_dir(ctl)])))
    k.wait_phase("leaker", "Succeeded")
    token = (ctl / "token").read_text().strip()
    cfg = client.Configuration(host=kube.configuration.host, api_key={"authorization": f"Bearer {token}"})
    cfg.ssl_ca_cert = kube.configuration.ssl_ca_cert
    with client.ApiClient(cfg) as as_pod:
        secrets = client.CoreV1Api(as_pod)
        with pytest.raises(ApiException) as err:
            secrets.list_namespaced_secret(k.ns)
        assert err.value.status == 403, "while the pod exists its token authenticates (and RBAC denies)"
        k.core.delete_namespaced_pod("leaker", k.ns)
        wait_for(lambda: k.pod_gone("leaker"), what="pod deleted")
        with pytest.raises(ApiException) as err:
            secrets.list_namespaced_secret(k.ns)
        assert err.value.status == 401, "a token bound to a deleted pod is no longer valid"


@pytest.fixture
def widgets(k: Cluster) -> Iterator[tuple[str, str]]:
    """A namespaced custom resource `widgets` in a group unique to the test: (group, plural)."""
    group = f"{k.ns}.example.com"
    name = f"widgets.{group}"
    k.ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                   "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    })
    wait_for(lambda: condition(k.ext.read_custom_resource_definition(name), "Established"), what="CRD established")
    try:
        yield group, "widgets"
    finally:
        k.ext.delete_custom_resource_definition(name)


def test_pod_patches_a_custom_resource_with_kubectl_under_its_service_account(
        k: Cluster, widgets: tuple[str, str]) -> None:
    group, plural = widgets
    k.custom.create_namespaced_custom_object(group, "v1", k.ns, plural, {
        "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}})
    k.service_account("patcher")
    k.grant("patcher", "patch-widgets", [
        {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "patch"]},
        {"apiGroups": [group], "resources": ["widgets/status"], "verbs": ["get", "patch"]}])
    script = f"""
        export HOME=/tmp
        kubectl patch widgets.{group} w1 --type=merge -p '{{"spec":{{"size":3,"by":"'$POD'"}}}}' || exit 1
        kubectl patch widgets.{group} w1 --subresource=status --type=merge -p '{{"status":{{"phase":"Done"}}}}' || exit 1
        kubectl delete widgets.{group} w1
        echo "delete rc=$?"
    """
    k.create_pod(pod("hook", pod_spec(container("main", script, env=[
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]), serviceAccountName="patcher")))
    p = k.wait_phase("hook", "Succeeded", "Failed")
    out = k.log("hook")
    assert p.status.phase == "Succeeded", out
    cr = k.custom.get_namespaced_custom_object(group, "v1", k.ns, plural, "w1")
    assert cr["spec"] == {"size": 3, "by": "hook"}
    assert cr["status"] == {"phase": "Done"}
    # The Role grants get and patch only.
    assert "forbidden" in out.lower()
    assert out.endswith("delete rc=1\n")


def test_python_client_in_a_pod_uses_the_in_cluster_config(k: Cluster) -> None:
    k.grant("default", "read-pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    script = textwrap.dedent("""
        import os
        from kubernetes import client, config
        sa = "/var/run/secrets/kubernetes.io/serviceaccount"
        print("files", sorted(f for f in os.listdir(sa) if not f.startswith(".")))
        print("host", os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"].isdigit())
        config.load_incluster_config()
        ns = open(sa + "/namespace").read()
        me = client.CoreV1Api().read_namespaced_pod(os.environ["HOSTNAME"], ns)
        print("uid", me.metadata.uid)
        try:
            client.CoreV1Api().list_namespaced_secret(ns)
        except client.ApiException as e:
            print("secrets", e.status)
    """)
    created = k.create_pod(pod("incluster", pod_spec({"name": "main", "image": "python:3.11",
                                                      "command": [sys.executable, "-c", script]})))
    p = k.wait_phase("incluster", "Succeeded", "Failed", timeout=30)
    out = k.log("incluster")
    assert p.status.phase == "Succeeded", out
    assert out.splitlines() == ["files ['ca.crt', 'namespace', 'token']", "host 127.0.0.1 True",
                                f"uid {created.metadata.uid}", "secrets 403"]


def test_a_line_longer_than_a_log_entry_is_kept_whole_in_the_log(k: Cluster) -> None:
    # 100 KB on one line: the runtime splits it into partial entries, the log API joins them again.
    script = "python3 -c \"import sys; sys.stdout.write('x' * 100000 + '\\\\nend\\\\n')\""
    k.create_pod(pod("longline", pod_spec(container("main", script))))
    k.wait_phase("longline", "Succeeded")
    lines = k.log("longline").split("\n")
    assert len(lines[0]) == 100000 and set(lines[0]) == {"x"}
    assert lines[1] == "end"


def test_a_native_sidecar_runs_beside_the_main_container_and_is_stopped_when_it_ends(k: Cluster, ctl: Path) -> None:
    # An init container with restartPolicy: Always (Kubernetes 1.29+) is not waited for; the main container waits
    # for it here through the shared directory, and once the main container exits the sidecar is terminated, so
    # the pod succeeds although the sidecar would run forever.
    side = container("side", "trap 'echo stopped > /ctl/side-stopped; exit 0' TERM; echo up > /ctl/side-up; "
                             "while :; do sleep 0.05; done", restartPolicy="Always", volumeMounts=[ctl_mount()])
    main = container("main", "while [ ! -f /ctl/side-up ]; do sleep 0.05; done; echo saw the sidecar",
                     volumeMounts=[ctl_mount()])
    k.create_pod(pod("native", pod_spec(main, init=[side], volumes=[host_dir(ctl)],
                                        terminationGracePeriodSeconds=5)))
    p = k.wait_phase("native", "Succeeded", timeout=20)
    assert k.log("native", container="main").strip() == "saw the sidecar"
    assert (ctl / "side-stopped").read_text().strip() == "stopped"  # SIGTERM, within the grace period
    (cs,) = p.status.container_statuses
    assert cs.state.terminated.exit_code == 0


def test_a_pod_whose_node_selector_the_node_does_not_match_stays_pending_until_the_node_is_labelled(k: Cluster) -> None:
    """kube-scheduler's NodeAffinity filter on localkube's one node (localkube/scheduler.py): an unmatched nodeSelector
    leaves the pod unbound, Pending, with the real scheduler's condition and event; labelling the node schedules it;
    a selector the node matches runs at once."""
    key = f"pool.localkube.test/{k.ns}"  # this test's own label: the node is shared by the session's tests
    k.create_pod(pod("picky", {**pod_spec(container("main", "echo placed")), "nodeSelector": {key: "gpu"}}))
    k.create_pod(pod("easy", {**pod_spec(container("main", "echo anywhere")),
                              "nodeSelector": {"kubernetes.io/hostname": "localkube", "kubernetes.io/os": "linux"}}))
    k.wait_phase("easy", "Succeeded")

    def refused() -> Any:
        p = k.read_pod("picky")
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"), None)

    cond = wait_for(refused, what="the picky pod refused by the scheduler")
    assert cond.reason == "Unschedulable"
    assert cond.message == ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
                            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    picky = k.read_pod("picky")
    assert picky.status.phase == "Pending" and not picky.spec.node_name
    events = k.core.list_namespaced_event(k.ns, field_selector="involvedObject.name=picky").items
    assert [(e.type, e.reason, e.source.component) for e in events] == [
        ("Warning", "FailedScheduling", "default-scheduler")]
    try:
        k.core.patch_node("localkube", {"metadata": {"labels": {key: "cpu"}}})  # still not a match
        k.core.patch_node("localkube", {"metadata": {"labels": {key: "gpu"}}})
        k.wait_phase("picky", "Succeeded")
        assert k.read_pod("picky").spec.node_name == "localkube"
        assert k.log("picky") == "placed\n"
    finally:
        k.core.patch_node("localkube", {"metadata": {"labels": {key: None}}})
