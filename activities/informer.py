"""A worker's shared view of the runs' Jobs and their pods: one list + watch per kind and namespace.

In the manner of client-go's informers: each stream lists (replacing what it held), then watches
from the list's resourceVersion, and lists again after 410 Gone or any failure. The AgentRun
steps answer their looks at a Job from here (is it finished, which hook runs, which pod), so a
run waiting on a Job costs no request at all; what the view has not seen yet (a Job made a moment
ago, a pod whose end has not arrived) is asked of the API server as before. The bridge's
Job-finished signal stays the fast path; this makes the slow fallback look free.

The objects are the client's typed models (V1Job, V1Pod), only of the run's Jobs and pods (the
`sympozium.ai/agent-run` label), held while they exist in the cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch

from models.kube import Gone, Kube, KubeError, typed_errors
from models.names import LABEL_RUN

log = logging.getLogger("agentrun.worker.informer")

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
WATCH_SECONDS = 300  # a watch is renewed this often (from where it was) even when nothing happens


class _Stream:
    """One kind in one namespace ("" = all): list, then watch; the store's entries of this scope are its own."""

    def __init__(self, informer: JobInformer, kind: str, namespace: str, list_fn: Callable[..., Any]) -> None:
        self.informer, self.kind, self.namespace, self.list_fn = informer, kind, namespace, list_fn
        self.synced = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"informer-{kind}-{namespace or 'all'}", daemon=True)

    def _args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"label_selector": LABEL_RUN}
        if self.namespace:
            args["namespace"] = self.namespace
        return args

    def _run(self) -> None:
        backoff = 0.5
        stop = self.informer.stopping
        while not stop.is_set():
            w = watch.Watch()
            try:
                with typed_errors(f"list {self.kind}"):
                    listed = self.list_fn(**self._args())
                self.informer._replace(self.kind, self.namespace, listed.items)
                self.synced.set()
                rv = listed.metadata.resource_version
                backoff = 0.5
                while not stop.is_set():  # each watch ends after WATCH_SECONDS; the next goes on from there
                    with typed_errors(f"watch {self.kind}"):
                        for ev in w.stream(self.list_fn, resource_version=rv, timeout_seconds=WATCH_SECONDS,
                                           allow_watch_bookmarks=True, **self._args()):
                            if stop.is_set():
                                break
                            obj = ev["object"]
                            if ev["type"] == "DELETED":
                                self.informer._remove(self.kind, obj)
                            elif ev["type"] in ("ADDED", "MODIFIED"):
                                self.informer._put(self.kind, obj)
                    rv = w.resource_version or rv  # the last event's or bookmark's version
            except Gone:
                log.info("%s: resourceVersion expired, listing again", self.thread.name)
            except KubeError as e:
                log.warning("%s: %s; listing again in %.1fs", self.thread.name, e, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)
            except Exception as e:  # a decoding error, a bug: never die, never serve a stale view silently
                log.exception("%s failed (%s); listing again", self.thread.name, e)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)
            finally:
                w.stop()


class JobInformer:
    def __init__(self, kube: Kube, namespaces: list[str] | None = None) -> None:
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._jobs: dict[str, Any] = {}  # Job uid -> V1Job
        self._pods: dict[str, Any] = {}  # pod uid -> V1Pod
        self._by_job: dict[str, set[str]] = {}  # Job uid -> its pods' uids
        self._streams: list[_Stream] = []
        for ns in namespaces or [""]:
            if ns:
                self._streams += [_Stream(self, "jobs", ns, kube.batch.list_namespaced_job),
                                  _Stream(self, "pods", ns, kube.core.list_namespaced_pod)]
            else:
                self._streams += [_Stream(self, "jobs", "", kube.batch.list_job_for_all_namespaces),
                                  _Stream(self, "pods", "", kube.core.list_pod_for_all_namespaces)]

    def start(self) -> None:
        for s in self._streams:
            s.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    @property
    def synced(self) -> bool:
        """Every stream has listed once: from now on, what the view lacks is new or gone."""
        return all(s.synced.is_set() for s in self._streams)

    def wait_synced(self, timeout: float) -> bool:
        return all(s.synced.wait(timeout) for s in self._streams)

    # -- reads (the event loop) ------------------------------------------------------------------------

    def job(self, uid: str) -> Any | None:
        return self._jobs.get(uid) if self.synced else None

    def pod_of(self, job_uid: str) -> Any | None:
        """The Job's newest pod, as last seen."""
        if not self.synced:
            return None
        with self._lock:
            pods = [self._pods[u] for u in self._by_job.get(job_uid, ())]
        return max(pods, key=lambda p: p.metadata.creation_timestamp) if pods else None

    def __len__(self) -> int:
        return len(self._jobs) + len(self._pods)

    # -- writes (the stream threads) -----------------------------------------------------------------------

    def _replace(self, kind: str, namespace: str, items: list[Any]) -> None:
        with self._lock:
            store: dict[str, Any] = self._jobs if kind == "jobs" else self._pods
            for uid, obj in list(store.items()):
                if not namespace or obj.metadata.namespace == namespace:
                    self._drop(kind, uid)
            for obj in items:
                self._add(kind, obj)

    def _put(self, kind: str, obj: Any) -> None:
        with self._lock:
            self._add(kind, obj)

    def _remove(self, kind: str, obj: Any) -> None:
        with self._lock:
            self._drop(kind, obj.metadata.uid)

    def _add(self, kind: str, obj: Any) -> None:
        # Only metadata and status are read from the view: the spec (the pod template, every env var) and the
        # managed fields are most of an object's memory, so they are not kept.
        obj.spec = None
        obj.metadata.managed_fields = None
        obj.metadata.annotations = None
        uid = obj.metadata.uid
        if kind == "jobs":
            self._jobs[uid] = obj
            return
        self._pods[uid] = obj
        job = (obj.metadata.labels or {}).get(CONTROLLER_UID)
        if job:
            self._by_job.setdefault(job, set()).add(uid)

    def _drop(self, kind: str, uid: str) -> None:
        if kind == "jobs":
            self._jobs.pop(uid, None)
            return
        pod = self._pods.pop(uid, None)
        job = (pod.metadata.labels or {}).get(CONTROLLER_UID) if pod is not None else None
        if job and job in self._by_job:
            self._by_job[job].discard(uid)
            if not self._by_job[job]:
                del self._by_job[job]
