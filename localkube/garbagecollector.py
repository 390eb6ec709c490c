"""The garbage collector: owner references honoured the way kube-controller-manager's garbage collector does
(pkg/controller/garbagecollector).

- A graph of who owns what, kept from the store's events (`graph_builder.go`): uid -> the objects naming it in
  their ownerReferences, so finding an owner's dependents never scans a kind.
- An owner deleted in the background: its dependents are deleted (or, if another owner of theirs still exists,
  only that reference is removed).
- An owner with the `orphan` finalizer: its dependents lose their reference to it, then the finalizer goes.
- An owner with the `foregroundDeletion` finalizer: its dependents are deleted (those with dependents of their own
  in the foreground too) and the owner goes once no dependent with `blockOwnerDeletion` is left.
- An object whose owners are all gone (or never existed) is deleted.

Why a controller of its own: in kube-apiserver the API server only sets the finalizers and the deletionTimestamp;
the collector, a separate process, does the rest from what it watches. Here it runs on localkube's event loop and
writes through `APIServer` like any other controller. The other system finalizers have their own controllers:
pvc-protection in `controllers.PVCController`, a CRD's custom resources in `crdfinalizer.py`, a namespace's
content in `controllers.NamespaceController`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .apiserver import FOREGROUND, ORPHAN, APIServer
from .errors import StatusError
from .registry import ResourceType
from .request import INTERNAL, DeleteOptions
from .store import DELETED, Event, Obj
from .util import deep

log = logging.getLogger("localkube.garbagecollector")

TypeKey = tuple[str, str]


def _blocks(dependent: Obj, owner_uid: str) -> bool:
    return any(r.get("uid") == owner_uid and r.get("blockOwnerDeletion")
               for r in dependent["metadata"].get("ownerReferences") or [])


class GarbageCollector:
    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.store = api.store
        self.registry = api.registry
        # uid -> set of (group, resource, namespace, name) of objects naming it as an owner.
        self._dependents: dict[str, set[tuple[str, str, str, str]]] = {}
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.store.add_listener(self._on_event)
        for key, obj in self.store.iter_all():
            self._index_obj(key, obj)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())
        # Objects whose owners vanished while we were down (or never existed) are collected.
        for _key, obj in self.store.iter_all():
            if obj["metadata"].get("ownerReferences"):
                self._queue.put_nowait(("orphan-check", obj["metadata"]["uid"]))
            if obj["metadata"].get("deletionTimestamp"):
                self._queue.put_nowait(("finalizers", obj["metadata"]["uid"]))

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the graph ---------------------------------------------------------------------------

    def _on_event(self, ev: Event) -> None:
        m = ev.obj["metadata"]
        if ev.old is not None:
            for ref in ev.old["metadata"].get("ownerReferences") or []:
                deps = self._dependents.get(ref.get("uid", ""))
                if deps:
                    deps.discard((*ev.key, m.get("namespace", ""), m["name"]))
        if ev.type == DELETED:
            self._queue.put_nowait(("deleted", ev.obj))
            return
        self._index_obj(ev.key, ev.obj)
        if m.get("deletionTimestamp"):
            self._queue.put_nowait(("finalizers", m["uid"]))
        if m.get("ownerReferences"):
            self._queue.put_nowait(("orphan-check", m["uid"]))

    def _index_obj(self, key: TypeKey, obj: Obj) -> None:
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add((*key, m.get("namespace", ""), m["name"]))

    def dependents(self, uid: str, key: TypeKey) -> list[Obj]:
        """The stored objects of one type whose ownerReferences name `uid`, by name: from the owner index, no scan."""
        return sorted((obj for rt, obj in self._dependents_of(uid) if rt.key == key),
                      key=lambda o: str(o["metadata"]["name"]))

    def _dependents_of(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        out = []
        for grp, res, ns, name in list(self._dependents.get(uid, ())):
            rt = self.registry.by_key(grp, res)
            obj = self.store.get((grp, res), ns, name) if rt else None
            if rt is not None and obj is not None:
                out.append((rt, obj))
        return out

    def _locate(self, uid: str) -> tuple[ResourceType, Obj] | None:
        found = self.store.by_uid(uid)
        if found is None:
            return None
        rt = self.registry.by_key(*found[0])
        return (rt, found[1]) if rt is not None else None

    def _owner_exists(self, ref: Obj, ns: str) -> bool:
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        rt = self.registry.by_kind(group, str(ref.get("kind", "")))
        if rt is None:
            return True  # unknown kinds cannot be resolved; the real GC leaves such dependents alone too
        owner = self.store.get(rt.key, ns if rt.namespaced else "", str(ref.get("name", "")))
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    # -- the work ----------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            what, arg = await self._queue.get()
            try:
                if what == "deleted":
                    self._deleted(arg)
                elif what == "finalizers":
                    self._finalizers(arg)
                elif what == "orphan-check":
                    self._orphan_check(arg)
            except StatusError as e:
                log.debug("gc %s: %s", what, e.message)
            except Exception:
                log.exception("garbage collector step %s failed", what)

    def _deleted(self, obj: Obj) -> None:
        uid = obj["metadata"]["uid"]
        for rt, dep in self._dependents_of(uid):
            self._collect_dependent(rt, dep, uid, "Background")
        self._dependents.pop(uid, None)
        # An owner in foreground deletion may be waiting for this dependent.
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._queue.put_nowait(("finalizers", ref.get("uid")))

    def _collect_dependent(self, rt: ResourceType, dep: Obj, owner_uid: str, propagation: str) -> None:
        m = dep["metadata"]
        ns = m.get("namespace", "")
        others = [r for r in m.get("ownerReferences") or [] if r.get("uid") != owner_uid]
        if any(self._owner_exists(r, ns) for r in others):
            self._strip_owner(rt, dep, owner_uid)
            return
        try:
            self.api.delete(rt, ns, m["name"], DeleteOptions(propagation=propagation))
        except StatusError as e:
            if e.code != 404:
                raise

    def _strip_owner(self, rt: ResourceType, dep: Obj, owner_uid: str) -> None:
        new = deep(dep)
        new["metadata"]["ownerReferences"] = [
            r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
        ]
        if not new["metadata"]["ownerReferences"]:
            del new["metadata"]["ownerReferences"]
        self.api.write_update(rt, dep, new, INTERNAL)

    def _finalizers(self, uid: str | None) -> None:
        if not uid:
            return
        found = self._locate(uid)
        if found is None:
            return
        rt, obj = found
        m = obj["metadata"]
        if not m.get("deletionTimestamp"):
            return
        fins = m.get("finalizers") or []
        if ORPHAN in fins:
            for drt, dep in self._dependents_of(uid):
                self._strip_owner(drt, dep, uid)
            self.api.drop_finalizer(rt, obj, ORPHAN)
            return
        if FOREGROUND in fins:
            # Dependents are deleted (blocking ones in the foreground too); the owner goes once no
            # dependent with blockOwnerDeletion is left, as the real garbage collector does.
            for drt, dep in self._dependents_of(uid):
                if not dep["metadata"].get("deletionTimestamp"):
                    # As attemptToDeleteItem: a dependent that has dependents of its own goes in the
                    # foreground too (so the chain is waited for); a leaf goes in the background.
                    nested = bool(self._dependents_of(dep["metadata"]["uid"]))
                    self._collect_dependent(drt, dep, uid, "Foreground" if nested else "Background")
            if not any(_blocks(d, uid) for _, d in self._dependents_of(uid)):
                found = self._locate(uid)
                if found is not None:
                    self.api.drop_finalizer(found[0], found[1], FOREGROUND)

    def _orphan_check(self, uid: str) -> None:
        found = self._locate(uid)
        if found is None:
            return
        rt, obj = found
        m = obj["metadata"]
        refs = m.get("ownerReferences") or []
        if not refs or m.get("deletionTimestamp"):
            return
        ns = m.get("namespace", "")
        if all(not self._owner_exists(r, ns) for r in refs):
            try:
                self.api.delete(rt, ns, m["name"], DeleteOptions(propagation="Background"))
            except StatusError as e:
                if e.code != 404:
                    raise
