"""The controllers of kube-controller-manager that the system relies on.

- namespaces: a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap in each; a namespace being deleted
  has its content deleted, then goes;
- jobs: pods per attempt, status counters and conditions, backoffLimit, activeDeadlineSeconds,
  suspend, podReplacementPolicy, pod tracking finalizers, and the TTL-after-finished cleanup;
- persistent volume claims: bind each claim to a directory under the state dir, remove the
  directory when the claim is gone, and let a claim being deleted go once no running pod uses it
  (the pvc-protection finalizer).

The garbage collector is in `garbagecollector.py`.

Each reacts to store events through a de-duplicating work queue and writes through
`APIServer`, exactly as a client would.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .admission_plugins import PVC_PROTECTION
from .apiserver import APIServer
from .errors import StatusError
from .garbagecollector import GarbageCollector
from .request import INTERNAL, DeleteOptions
from .store import DELETED, Event, Obj
from .util import (
    deep,
    get_condition,
    now,
    owner_ref,
    parse_time,
    rand_suffix,
    rfc3339,
    rfc3339_micro,
    set_condition,
)

log = logging.getLogger("localkube.controllers")

JOB_TRACKING = "batch.kubernetes.io/job-tracking"
PODS = ("", "pods")
JOBS = ("batch", "jobs")
PVCS = ("", "persistentvolumeclaims")
NAMESPACES = ("", "namespaces")
NAMESPACE_RECHECK_SECONDS = 0.2  # a namespace whose content is still going is looked at again after this
Key = tuple[str, str]


class WorkQueue:
    """Coalesces repeated requests for the same key; one worker drains it in order."""

    def __init__(self, name: str, handler: Callable[[Key], Awaitable[None]]) -> None:
        self.name = name
        self._handler = handler
        self._pending: dict[Key, None] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._timers: set[asyncio.TimerHandle] = set()

    def add(self, key: Key) -> None:
        self._pending[key] = None
        self._wake.set()

    def add_after(self, key: Key, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.add(key)

        handle = loop.call_later(max(delay, 0.0), fire)
        self._timers.add(handle)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        for t in self._timers:
            t.cancel()
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                key = next(iter(self._pending))
                del self._pending[key]
                try:
                    await self._handler(key)
                except StatusError as e:
                    log.info("%s %s: %s (retrying)", self.name, key, e.message)
                    self.add_after(key, 0.5)
                except Exception:
                    log.exception("%s %s failed (retrying)", self.name, key)
                    self.add_after(key, 1.0)


def record_event(api: APIServer, obj: Obj, reason: str, message: str, *, type_: str = "Normal",
                 component: str = "localkube") -> None:
    """A core/v1 Event about `obj`, as controllers emit them for `kubectl describe`."""
    m = obj["metadata"]
    ns = m.get("namespace") or "default"
    rt = api.registry.lookup("", "v1", "events")
    assert rt is not None
    ts = rfc3339()
    try:
        api.create(rt, ns, {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{m['name']}.{rand_suffix(8)}", "namespace": ns},
            "involvedObject": {"kind": obj.get("kind"), "namespace": m.get("namespace", ""), "name": m["name"],
                               "uid": m.get("uid"), "apiVersion": obj.get("apiVersion"),
                               "resourceVersion": m.get("resourceVersion")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": component}, "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
            "eventTime": None, "reportingComponent": component, "reportingInstance": "localkube",
        }, INTERNAL)
    except StatusError as e:  # events are best effort, as in Kubernetes
        log.debug("event not recorded: %s", e.message)


class NamespaceController:
    def __init__(self, api: APIServer, ca_pem: str = "") -> None:
        self.api = api
        self.ca_pem = ca_pem
        self.queue = WorkQueue("namespace", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.key == ("", "namespaces") and ev.type != DELETED:
            self.queue.add(("", ev.obj["metadata"]["name"]))
        elif ev.key in (("", "serviceaccounts"), ("", "configmaps")) and ev.type == DELETED:
            self.queue.add(("", ev.obj["metadata"].get("namespace", "")))

    def start(self) -> None:
        self.queue.start()
        for ns in self.api.store.select(("", "namespaces")):
            self.queue.add(("", ns["metadata"]["name"]))

    async def _sync(self, key: Key) -> None:
        ns = key[1]
        nsobj = self.api.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            return
        if nsobj["metadata"].get("deletionTimestamp"):
            self._delete_content(key)
            return
        sa_rt = self.api.registry.lookup("", "v1", "serviceaccounts")
        cm_rt = self.api.registry.lookup("", "v1", "configmaps")
        assert sa_rt and cm_rt
        if self.api.store.get(sa_rt.key, ns, "default") is None:
            self.api.create(sa_rt, ns, {"apiVersion": "v1", "kind": "ServiceAccount",
                                        "metadata": {"name": "default"}}, INTERNAL)
        if self.api.store.get(cm_rt.key, ns, "kube-root-ca.crt") is None:
            self.api.create(cm_rt, ns, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt",
                             "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to "
                                             "verify the kube-apiserver when using internal endpoints such as the "
                                             "internal service IP or kubernetes.default.svc. No other usage is "
                                             "guaranteed across distributions of Kubernetes clusters."}},
                "data": {"ca.crt": self.ca_pem},
            }, INTERNAL)


    def _delete_content(self, key: Key) -> None:
        """A namespace being deleted: everything in it is deleted, and the namespace goes once nothing is left
        (objects with finalizers of their own may take a while: looked at again meanwhile)."""
        ns = key[1]
        remaining = 0
        for rt in self.api.registry.all():
            if not rt.namespaced or rt.version not in rt.served_versions[:1]:
                continue
            for obj in self.api.store.select(rt.key, ns):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        self.api.delete(rt, ns, obj["metadata"]["name"], DeleteOptions(grace_period=None))
                    except StatusError:
                        pass
        nsobj = self.api.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            return
        if remaining:
            self.queue.add_after(key, NAMESPACE_RECHECK_SECONDS)
            return
        self.api.store.remove(NAMESPACES, nsobj)


class PVCController:
    """Binds claims to directories: the local stand-in for a dynamic provisioner."""

    def __init__(self, api: APIServer, volumes_dir: Path) -> None:
        self.api = api
        self.volumes_dir = volumes_dir
        # Each volume is open to every user a pod may run as (0777); the directory that holds them is not.
        volumes_dir.mkdir(parents=True, exist_ok=True)
        volumes_dir.chmod(0o700)
        self.queue = WorkQueue("pvc", self._sync)
        api.store.add_listener(self._on_event)

    def volume_path(self, pvc: Obj) -> Path:
        return self.volumes_dir / f"pvc-{pvc['metadata']['uid']}"

    def _on_event(self, ev: Event) -> None:
        if ev.key == PVCS:
            if ev.type == DELETED:
                shutil.rmtree(self.volume_path(ev.obj), ignore_errors=True)
            else:
                self.queue.add((ev.obj["metadata"]["namespace"], ev.obj["metadata"]["name"]))
        elif ev.key == PODS and (ev.type == DELETED or (ev.obj.get("status") or {}).get("phase") in
                                 ("Succeeded", "Failed")):
            # A pod that finished may release claims that are being deleted.
            for pvc in self.api.store.select(PVCS, ev.obj["metadata"]["namespace"]):
                if pvc["metadata"].get("deletionTimestamp"):
                    self.queue.add((pvc["metadata"]["namespace"], pvc["metadata"]["name"]))

    def start(self) -> None:
        self.queue.start()
        for pvc in self.api.store.select(PVCS):
            self.queue.add((pvc["metadata"]["namespace"], pvc["metadata"]["name"]))

    async def _sync(self, key: Key) -> None:
        pvc = self.api.store.get(PVCS, *key)
        if pvc is None:
            return
        rt = self.api.registry.lookup("", "v1", "persistentvolumeclaims")
        assert rt is not None
        if pvc["metadata"].get("deletionTimestamp"):
            if PVC_PROTECTION in (pvc["metadata"].get("finalizers") or []) and not self._in_use(pvc):
                self.api.drop_finalizer(rt, pvc, PVC_PROTECTION)
            return
        if (pvc.get("status") or {}).get("phase") == "Bound":
            return
        path = self.volume_path(pvc)
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        new = deep(pvc)
        new["spec"]["volumeName"] = f"pvc-{pvc['metadata']['uid']}"
        ann = new["metadata"].setdefault("annotations", {})
        ann["pv.kubernetes.io/bind-completed"] = "yes"
        ann["pv.kubernetes.io/bound-by-controller"] = "yes"
        ann["volume.kubernetes.io/storage-provisioner"] = "localkube.io/hostpath"
        new = self.api.update(rt, key[0], key[1], new, INTERNAL)
        new["status"] = {
            "phase": "Bound",
            "accessModes": list(new["spec"].get("accessModes") or []),
            "capacity": {"storage": new["spec"]["resources"]["requests"]["storage"]},
        }
        self.api.update(rt, key[0], key[1], new, INTERNAL, "status")


    def _in_use(self, pvc: Obj) -> bool:
        """Whether a pod that has not finished mounts the claim."""
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        for pod in self.api.store.select(PODS, ns):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for v in (pod.get("spec") or {}).get("volumes") or []:
                if ((v.get("persistentVolumeClaim") or {}).get("claimName")) == name:
                    return True
        return False


class JobController:
    def __init__(self, api: APIServer, gc: GarbageCollector, *, backoff_base: float = 10.0,
                 backoff_max: float = 360.0) -> None:
        self.api = api
        self.gc = gc  # its owner index finds a Job's pods
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.queue = WorkQueue("job", self._sync)
        self._not_before: dict[str, float] = {}
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.key == JOBS:
            self.queue.add((ev.obj["metadata"]["namespace"], ev.obj["metadata"]["name"]))
        elif ev.key == PODS:
            m = ev.obj["metadata"]
            for ref in m.get("ownerReferences") or []:
                if ref.get("kind") == "Job" and ref.get("controller"):
                    self.queue.add((m["namespace"], ref["name"]))
            if JOB_TRACKING in (m.get("finalizers") or []) and ev.type != DELETED:
                self.queue.add(("pod:" + m["namespace"], m["name"]))

    def start(self) -> None:
        self.queue.start()
        for job in self.api.store.select(JOBS):
            self.queue.add((job["metadata"]["namespace"], job["metadata"]["name"]))

    @property
    def _jobs_rt(self) -> Any:
        return self.api.registry.lookup("batch", "v1", "jobs")

    @property
    def _pods_rt(self) -> Any:
        return self.api.registry.lookup("", "v1", "pods")

    async def _sync(self, key: Key) -> None:
        if key[0].startswith("pod:"):
            self._release_orphan_pod(key[0][4:], key[1])
            return
        ns, name = key
        job = self.api.store.get(JOBS, ns, name)
        if job is None:
            return
        uid = job["metadata"]["uid"]
        pods = [p for p in self.gc.dependents(uid, PODS)
                if any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]
        spec = job["spec"]
        status = deep(job.get("status") or {})
        conds: list[Obj] = status.setdefault("conditions", [])
        terminal = [p for p in pods if _phase(p) in ("Succeeded", "Failed")
                    and JOB_TRACKING in (p["metadata"].get("finalizers") or [])]
        for p in terminal:
            if _phase(p) == "Succeeded":
                status["succeeded"] = status.get("succeeded", 0) + 1
            else:
                status["failed"] = status.get("failed", 0) + 1
        if terminal:
            last_finish = max(_finish_time(p) for p in terminal)
            failures = status.get("failed", 0)
            if any(_phase(p) == "Failed" for p in terminal) and failures:
                delay = min(self.backoff_base * (2 ** (failures - 1)), self.backoff_max)
                self._not_before[uid] = last_finish + delay
        active = [p for p in pods if _phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if _phase(p) not in ("Succeeded", "Failed") and p["metadata"].get("deletionTimestamp")]
        finished = _finished(job)
        deleting = job["metadata"].get("deletionTimestamp")
        if not finished and not deleting:
            if spec.get("suspend"):
                for p in active:
                    self._delete_pod(p)
                if not get_condition(job, "Suspended") or get_condition(job, "Suspended", ).get("status") != "True":  # type: ignore[union-attr]
                    set_condition(conds, "Suspended", "True", reason="JobSuspended", message="Job suspended")
                    record_event(self.api, job, "Suspended", "Job suspended", component="job-controller")
                status.pop("startTime", None)
                active = []
            else:
                if get_condition(job, "Suspended") is not None:
                    set_condition(conds, "Suspended", "False", reason="JobResumed", message="Job resumed")
                if not status.get("startTime"):
                    status["startTime"] = rfc3339()
                failure = self._failure(job, status)
                if failure is not None:
                    reason, message = failure
                    if get_condition({"status": status}, "FailureTarget") is None:
                        set_condition(conds, "FailureTarget", "True", reason=reason, message=message)
                        record_event(self.api, job, reason, message, type_="Warning", component="job-controller")
                    terminating += self._terminate(active)
                    active = []
                    if not terminating:
                        set_condition(conds, "Failed", "True", reason=reason, message=message)
                elif status.get("succeeded", 0) >= int(spec.get("completions") or 1):
                    if get_condition({"status": status}, "SuccessCriteriaMet") is None:
                        set_condition(conds, "SuccessCriteriaMet", "True", reason="CompletionsReached",
                                      message="Reached expected number of succeeded pods")
                    terminating += self._terminate(active)
                    active = []
                    if not terminating:
                        set_condition(conds, "Complete", "True", reason="CompletionsReached",
                                      message="Reached expected number of succeeded pods")
                        status["completionTime"] = rfc3339()
                        record_event(self.api, job, "Completed", "Job completed", component="job-controller")
                else:
                    # podReplacementPolicy Failed: a pod that is still terminating keeps its place until it has
                    # failed (TerminatingOrFailed, the default, replaces it at once).
                    replacing = len(terminating) if spec.get("podReplacementPolicy") == "Failed" else 0
                    want = min(int(spec.get("parallelism") or 1),
                               int(spec.get("completions") or 1) - status.get("succeeded", 0)) - len(active) - replacing
                    wait = self._not_before.get(uid, 0) - now().timestamp()
                    if want > 0 and wait > 0:
                        self.queue.add_after(key, wait)
                    elif want > 0:
                        for _ in range(want):
                            pod = self._create_pod(job)
                            if pod is None:
                                self.queue.add_after(key, 1.0)
                                break
                            active.append(pod)
                ads = spec.get("activeDeadlineSeconds")
                if ads and status.get("startTime") and not _finished({"status": status}):
                    left = parse_time(status["startTime"]).timestamp() + int(ads) - now().timestamp()
                    self.queue.add_after(key, max(left, 0) + 0.01)
        status["active"] = len(active)
        status["terminating"] = len(terminating)
        status["ready"] = sum(1 for p in active if _pod_ready(p))
        status["uncountedTerminatedPods"] = {}
        for k in ("succeeded", "failed"):
            status.setdefault(k, 0)
        if not conds:
            status.pop("conditions")
        if not status.get("succeeded"):
            status.pop("succeeded", None)
        if not status.get("failed"):
            status.pop("failed", None)
        if status != job.get("status"):
            new = deep(job)
            new["status"] = status
            self.api.update(self._jobs_rt, ns, name, new, INTERNAL, "status")
        for p in terminal:
            self._drop_tracking(p)
        self._schedule_ttl(job if status == job.get("status") else self.api.store.get(JOBS, ns, name))

    def _failure(self, job: Obj, status: Obj) -> tuple[str, str] | None:
        spec = job["spec"]
        if get_condition({"status": status}, "FailureTarget") is not None:
            c = get_condition({"status": status}, "FailureTarget")
            assert c is not None
            return str(c.get("reason")), str(c.get("message"))
        if status.get("failed", 0) > int(spec.get("backoffLimit", 6)):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        ads = spec.get("activeDeadlineSeconds")
        if ads and status.get("startTime"):
            if now().timestamp() >= parse_time(status["startTime"]).timestamp() + int(ads):
                return "DeadlineExceeded", "Job was active longer than specified deadline"
        return None

    def _create_pod(self, job: Obj) -> Obj | None:
        m = job["metadata"]
        template = deep(job["spec"]["template"])
        tm = template.get("metadata") or {}
        pod: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "generateName": f"{m['name']}-",
                "namespace": m["namespace"],
                "labels": tm.get("labels") or {},
                "annotations": tm.get("annotations") or {},
                "ownerReferences": [owner_ref(job)],
                "finalizers": [JOB_TRACKING],
            },
            "spec": template.get("spec") or {},
        }
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        try:
            created = self.api.create(self._pods_rt, m["namespace"], pod, INTERNAL)
        except StatusError as e:
            record_event(self.api, job, "FailedCreate", f"Error creating: {e.message}", type_="Warning",
                         component="job-controller")
            return None
        record_event(self.api, job, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}",
                     component="job-controller")
        return created

    def _terminate(self, pods: list[Obj]) -> list[Obj]:
        """Deletes the pods; returns those still terminating. The Job's terminal condition waits for them, as the real
        controller's does (FailureTarget or SuccessCriteriaMet first, Failed or Complete once no pod is left running):
        whoever sees the condition then also sees every pod counted."""
        left = []
        for p in pods:
            self._delete_pod(p)
            cur = self.api.store.get(PODS, p["metadata"]["namespace"], p["metadata"]["name"])
            if cur is not None and cur["metadata"]["uid"] == p["metadata"]["uid"] \
                    and _phase(cur) not in ("Succeeded", "Failed"):
                left.append(cur)
        return left

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self.api.delete(self._pods_rt, pod["metadata"]["namespace"], pod["metadata"]["name"], DeleteOptions())
        except StatusError as e:
            if e.code != 404:
                raise

    def _drop_tracking(self, pod: Obj) -> None:
        cur = self.api.store.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
        if cur is None or JOB_TRACKING not in (cur["metadata"].get("finalizers") or []):
            return
        new = deep(cur)
        new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != JOB_TRACKING]
        self.api.update(self._pods_rt, cur["metadata"]["namespace"], cur["metadata"]["name"], new, INTERNAL)

    def _release_orphan_pod(self, ns: str, name: str) -> None:
        """A tracked pod whose Job is gone (or which is being deleted and has finished) lets go."""
        pod = self.api.store.get(PODS, ns, name)
        if pod is None or JOB_TRACKING not in (pod["metadata"].get("finalizers") or []):
            return
        owner = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), None)
        job = self.api.store.get(JOBS, ns, owner["name"]) if owner else None
        if job is None or job["metadata"]["uid"] != (owner or {}).get("uid"):
            self._drop_tracking(pod)
        elif pod["metadata"].get("deletionTimestamp") and _phase(pod) in ("Succeeded", "Failed"):
            self.queue.add((ns, job["metadata"]["name"]))

    def _schedule_ttl(self, job: Obj | None) -> None:
        if job is None:
            return
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None or job["metadata"].get("deletionTimestamp"):
            return
        done = get_condition(job, "Complete") or get_condition(job, "Failed")
        if not done or done.get("status") != "True":
            return
        finished_at = parse_time(done["lastTransitionTime"]).timestamp()
        left = finished_at + int(ttl) - now().timestamp()
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        if left > 0:
            self.queue.add_after(key, left + 0.01)
            return
        try:
            self.api.delete(self._jobs_rt, key[0], key[1], DeleteOptions(propagation="Foreground",
                                                                         precondition_uid=job["metadata"]["uid"]))
        except StatusError as e:
            if e.code not in (404, 409):
                raise


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _finished(job: Obj) -> bool:
    for t in ("Complete", "Failed"):
        c = get_condition(job, t)
        if c is not None and c.get("status") == "True":
            return True
    return False


def _pod_ready(pod: Obj) -> bool:
    c = get_condition(pod, "Ready")
    return c is not None and c.get("status") == "True"


def _finish_time(pod: Obj) -> float:
    latest = 0.0
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        t = ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if t:
            latest = max(latest, parse_time(t).timestamp())
    return latest or now().timestamp()


__all__ = ["JobController", "NamespaceController", "PVCController", "WorkQueue", "record_event", "rfc3339_micro"]
