"""A worker's shared view of the runs' Jobs and pods, and of the Agents and policies runs resolve
against: one list + watch per kind and namespace.

In the manner of client-go's informers (the loop is kube/listwatch.py): each stream lists
(replacing what it held), then watches from the list's resourceVersion, goes on from the last
event's (or bookmark's) version when a watch ends, and lists again after 410 Gone or any failure.
The AgentRun steps answer their looks at a Job from here (is it finished, which hook runs, which pod), so a run waiting on a Job costs no request
at all; what the view has not seen yet (a Job made a moment ago) is asked of the API server as
before. The bridge's Job-finished signal stays the fast path; `wait_pod` lets the step that it wakes
wait a moment for the pod's end to arrive here instead of listing pods. A run's Agent and policy are
read from here too when the view holds them; one it does not hold (not seen yet, or no such object)
is read from the API server, so the view never answers "not found" on its own.

The streams read the watch as JSON and keep plain dicts: of Jobs and pods only metadata (identity,
labels) and status, since the spec (the pod template, every env var) was most of the memory, and
decoding every event into the client's typed models is work nobody reads. Readers get the client's
typed models (V1Job, V1Pod), decoded on each read.
Only the run's Jobs and pods (the `sympozium.ai/agent-run` label) are held, while they exist, and a Job or pod
that ended is let go `keep_ended` seconds after its end (default five minutes: the step that the end wakes, and the
slow fallback look, read it well before). A run parked at its gate for days has only ended Jobs and pods, and
nobody looks at them again until cleanup, which deletes by label; holding them cost about 20 KB a run. A look
at one let go is answered by the API server, as for one not seen yet.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from models.names import GROUP, LABEL_RUN, VERSION

from .client import Kube
from .listwatch import WATCH_SECONDS, ListWatch, without_managed_fields
from .resources import Resource

log = logging.getLogger("agentrun.worker.informer")

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
_KEEP_METADATA = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp", "resourceVersion")
_TYPES = {"jobs": "V1Job", "pods": "V1Pod"}
# The definitions a run is resolved against (models/evaluate.py), held whole but for managedFields.
DEFINITIONS = ("agents", "sympoziuminstances", "sympoziumpolicies")

Obj = dict[str, Any]


def _trimmed(kind: str, obj: Obj) -> Obj:
    m = obj.get("metadata") or {}
    if kind in DEFINITIONS:
        return without_managed_fields(obj)
    return {"metadata": {k: m[k] for k in _KEEP_METADATA if k in m}, "status": obj.get("status") or {}}


# Ended Jobs and pods are let go this long after they ended.
KEEP_ENDED_SECONDS = 300.0
# How often the view looks for ended objects to let go.
SWEEP_SECONDS = 30.0


def _epoch(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def ended_at(kind: str, obj: Obj, now: float) -> float | None:
    """When a Job or pod ended (seconds since the epoch, by the API server's clock; `now` when it does not say),
    or None while it has not."""
    status = obj.get("status") or {}
    if kind == "jobs":
        done = [c for c in status.get("conditions") or []
                if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"]
        if not done:
            return None
        return _epoch(status.get("completionTime")) or _epoch(done[0].get("lastTransitionTime")) or now
    if status.get("phase") not in ("Succeeded", "Failed"):
        return None
    finished = [_epoch(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
                for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]]
    return max((t for t in finished if t is not None), default=None) or now


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _key(obj: Obj) -> tuple[str, str]:
    m = obj.get("metadata") or {}
    return str(m.get("namespace") or ""), str(m.get("name") or "")


class _Stream(ListWatch):
    """One kind in one namespace ("" = all): the store's entries of this scope are its own."""

    def __init__(self, informer: Informer, kind: str, namespace: str, list_fn: Callable[..., Any]) -> None:
        args: dict[str, Any] = {}
        if kind not in DEFINITIONS:
            args["label_selector"] = LABEL_RUN
        if namespace:
            args["namespace"] = namespace
        super().__init__(list_fn, name=f"informer-{kind}-{namespace or 'all'}", args=args, stopping=informer.stopping,
                         log=log, watch_seconds=informer.watch_seconds)
        self.informer, self.kind, self.namespace = informer, kind, namespace

    def replace(self, items: list[Obj]) -> None:
        self.informer._replace(self.kind, self.namespace, [_trimmed(self.kind, o) for o in items])

    def apply(self, typ: str, obj: Obj) -> None:
        if typ == "DELETED":
            self.informer._remove(self.kind, obj)
        else:
            self.informer._put(self.kind, _trimmed(self.kind, obj))


class Informer:
    def __init__(self, kube: Kube, namespaces: list[str] | None = None, *,
                 watch_seconds: int = WATCH_SECONDS, kinds: tuple[str, ...] = (*_TYPES, *DEFINITIONS),
                 keep_ended: float = KEEP_ENDED_SECONDS, clock: Callable[[], float] = time.time) -> None:
        """`kinds`: what to hold, of jobs, pods and DEFINITIONS (the API holds only the definitions); `keep_ended`:
        how long after its end a Job or pod is still held; `clock`: the wall clock that is compared with the API
        server's end times."""
        unknown = set(kinds) - {*_TYPES, *DEFINITIONS}
        if unknown:
            raise ValueError(f"an informer holds jobs, pods and {', '.join(DEFINITIONS)}, not {sorted(unknown)}")
        self.stopping = threading.Event()
        self.watch_seconds = watch_seconds
        self._api = kube.api
        self._lock = threading.Lock()
        self._jobs: dict[str, Obj] = {}  # Job uid -> trimmed Job
        self._pods: dict[str, Obj] = {}  # pod uid -> trimmed pod
        self._by_job: dict[str, set[str]] = {}  # Job uid -> its pods' uids
        self.keep_ended, self._clock = keep_ended, clock
        self._ended: dict[tuple[str, str], float] = {}  # (kind, uid) -> when it ended, for those held
        self._let_go: set[str] = set()  # Jobs whose pods were let go: a look at them asks the API server at once
        self._sweeper = threading.Thread(target=self._sweep_loop, name="informer-sweep", daemon=True)
        self._defs: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in DEFINITIONS}  # (namespace, name) -> object
        # Job uid -> what `wait_pod` callers wait on: woken whenever one of its pods changes.
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._streams: list[_Stream] = []
        for ns in namespaces or [""]:
            lists: dict[str, Callable[..., Any]] = (
                {"jobs": kube.batch.list_namespaced_job, "pods": kube.core.list_namespaced_pod} if ns else
                {"jobs": kube.batch.list_job_for_all_namespaces, "pods": kube.core.list_pod_for_all_namespaces})
            for plural in DEFINITIONS:
                lists[plural] = Resource(kube, GROUP, VERSION, plural).list_fn(all_namespaces=not ns)
            self._streams += [_Stream(self, kind, ns, lists[kind]) for kind in kinds]

    def start(self) -> None:
        for s in self._streams:
            s.start()
        if any(s.kind in _TYPES for s in self._streams):
            self._sweeper.start()

    def stop(self) -> None:
        self.stopping.set()
        for s in self._streams:
            s.close()

    @property
    def synced(self) -> bool:
        """Every Job and pod stream has listed once: from now on, what the view lacks of them is new or gone."""
        return all(s.synced.is_set() for s in self._streams if s.kind in _TYPES)

    def wait_synced(self, timeout: float) -> bool:
        return all(s.synced.wait(timeout) for s in self._streams if s.kind in _TYPES)

    # -- reads (the event loop) ------------------------------------------------------------------------

    def _typed(self, kind: str, obj: Obj | None) -> Any | None:
        if obj is None:
            return None
        return self._api.deserialize(json.dumps(obj), _TYPES[kind], "application/json")

    def job(self, uid: str) -> Any | None:
        """The Job (a V1Job of metadata and status) as last seen; None when not seen (or not synced)."""
        return self._typed("jobs", self._jobs.get(uid)) if self.synced else None

    def _newest_pod(self, job_uid: str) -> Obj | None:
        with self._lock:
            pods = [self._pods[u] for u in self._by_job.get(job_uid, ())]
        return max(pods, key=lambda p: str(p["metadata"].get("creationTimestamp") or "")) if pods else None

    def pod_of(self, job_uid: str) -> Any | None:
        """The Job's newest pod (a V1Pod of metadata and status), as last seen."""
        return self._typed("pods", self._newest_pod(job_uid)) if self.synced else None

    def definition(self, plural: str, namespace: str, name: str) -> Obj | None:
        """An Agent, SympoziumInstance or SympoziumPolicy as last seen (a copy of it); None when the view does
        not hold it, which says nothing about whether it exists: ask the API server then."""
        with self._lock:
            obj = self._defs.get(plural, {}).get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def wait_pod(self, job_uid: str, until: Callable[[Obj], bool], within: float) -> Any | None:
        """The Job's newest pod once `until(pod)` holds for it (a plain dict of metadata and status),
        waiting at most `within` seconds for the view to get there; None if it does not."""
        if not self.synced:
            return None
        with self._lock:
            if job_uid in self._let_go and job_uid not in self._by_job:
                return None  # it ended long ago: the view no longer holds it
        loop, woken = asyncio.get_running_loop(), asyncio.Event()
        entry = (loop, woken)
        with self._lock:
            self._waiters.setdefault(job_uid, []).append(entry)
        try:
            async with asyncio.timeout(within):
                while True:
                    woken.clear()
                    pod = self._newest_pod(job_uid)
                    if pod is not None and until(pod):
                        return self._typed("pods", pod)
                    await woken.wait()
        except TimeoutError:
            return None
        finally:
            with self._lock:
                waiters = self._waiters.get(job_uid, [])
                if entry in waiters:
                    waiters.remove(entry)
                if not waiters:
                    self._waiters.pop(job_uid, None)

    def __len__(self) -> int:
        return len(self._jobs) + len(self._pods) + sum(len(d) for d in self._defs.values())

    # -- writes (the stream threads) -----------------------------------------------------------------------

    def _replace(self, kind: str, namespace: str, items: list[Obj]) -> None:
        with self._lock:
            if kind in DEFINITIONS:
                store = self._defs[kind]
                for key in [k for k in store if not namespace or k[0] == namespace]:
                    del store[key]
            else:
                held = self._jobs if kind == "jobs" else self._pods
                for uid, obj in list(held.items()):
                    if not namespace or obj["metadata"].get("namespace") == namespace:
                        self._drop(kind, uid)
            for obj in items:
                self._add(kind, obj)

    def _put(self, kind: str, obj: Obj) -> None:
        with self._lock:
            self._add(kind, obj)

    def sweep(self) -> int:
        """Let go of the Jobs and pods that ended over `keep_ended` seconds ago; how many."""
        now = self._clock()
        with self._lock:
            old = [key for key, end in self._ended.items() if now - end > self.keep_ended]
            for kind, uid in old:
                self._let_go_of(kind, uid)
        return len(old)

    def _sweep_loop(self) -> None:
        while not self.stopping.wait(SWEEP_SECONDS):
            self.sweep()

    def _let_go_of(self, kind: str, uid: str) -> None:
        obj = self._pods.get(uid) if kind == "pods" else None
        self._drop(kind, uid)
        job = (obj["metadata"].get("labels") or {}).get(CONTROLLER_UID) if obj is not None else None
        if job:
            self._let_go.add(job)

    def _remove(self, kind: str, obj: Obj) -> None:
        with self._lock:
            if kind in DEFINITIONS:
                self._defs[kind].pop(_key(obj), None)
            else:
                self._drop(kind, _uid(obj))
                if kind == "jobs":
                    self._let_go.discard(_uid(obj))

    def _add(self, kind: str, obj: Obj) -> None:
        if kind in DEFINITIONS:
            self._defs[kind][_key(obj)] = obj
            return
        uid = _uid(obj)
        now = self._clock()
        end = ended_at(kind, obj, now)
        if end is not None and now - end > self.keep_ended:
            self._let_go_of(kind, uid)  # listed (or changed) long after its end: not held
            if kind == "pods" and (job := (obj["metadata"].get("labels") or {}).get(CONTROLLER_UID)):
                self._let_go.add(job)
            return
        if end is not None:
            self._ended[(kind, uid)] = end
        if kind == "jobs":
            self._jobs[uid] = obj
            return
        self._pods[uid] = obj
        job = (obj["metadata"].get("labels") or {}).get(CONTROLLER_UID)
        if job:
            self._let_go.discard(job)
            self._by_job.setdefault(job, set()).add(uid)
            for loop, woken in self._waiters.get(job, ()):
                loop.call_soon_threadsafe(woken.set)

    def _drop(self, kind: str, uid: str) -> None:
        self._ended.pop((kind, uid), None)
        if kind == "jobs":
            self._jobs.pop(uid, None)
            return
        pod = self._pods.pop(uid, None)
        job = (pod["metadata"].get("labels") or {}).get(CONTROLLER_UID) if pod is not None else None
        if job and job in self._by_job:
            self._by_job[job].discard(uid)
            if not self._by_job[job]:
                del self._by_job[job]
