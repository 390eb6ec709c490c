"""The CRD finalizer (apiextensions-apiserver's pkg/controller/finalizer/crd_finalizer.go): a CustomResourceDefinition
being deleted first has its custom resources deleted; once none is left (those with finalizers of their own may
take a while), its resources stop being served and its `customresourcecleanup.apiextensions.k8s.io` finalizer goes,
so the CRD goes too.

Why a controller of its own: the API server only adds the finalizer when the CRD is deleted (`apiserver.py`); the
rest happens here, from the store's events, through `APIServer` like any other controller.
"""

from __future__ import annotations

from .apiserver import CRD_CLEANUP, APIServer
from .controllers import Key, WorkQueue
from .request import DeleteOptions
from .store import DELETED, Event

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")


class CRDFinalizer:
    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.queue = WorkQueue("crd-finalizer", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.key == CRDS:
            if ev.type != DELETED and ev.obj["metadata"].get("deletionTimestamp"):
                self.queue.add(("", ev.obj["metadata"]["name"]))
        elif ev.type == DELETED and (rt := self.api.registry.by_key(*ev.key)) is not None and rt.is_custom:
            # One of its custom resources went: a CRD waiting for them may go now.
            crd = f"{ev.key[1]}.{ev.key[0]}"
            found = self.api.store.get(CRDS, "", crd)
            if found is not None and found["metadata"].get("deletionTimestamp"):
                self.queue.add(("", crd))

    def start(self) -> None:
        self.queue.start()
        for crd in self.api.store.select(CRDS):
            if crd["metadata"].get("deletionTimestamp"):
                self.queue.add(("", crd["metadata"]["name"]))

    async def _sync(self, key: Key) -> None:
        obj = self.api.store.get(CRDS, "", key[1])
        if obj is None or not obj["metadata"].get("deletionTimestamp"):
            return
        if CRD_CLEANUP not in (obj["metadata"].get("finalizers") or []):
            return
        rt = self.api.registry.by_key(*CRDS)
        assert rt is not None
        spec = obj["spec"]
        crt = self.api.registry.by_key(spec["group"], spec["names"]["plural"])
        if crt is not None:
            for cr in self.api.store.select(crt.key):
                if not cr["metadata"].get("deletionTimestamp"):
                    self.api.delete(crt, cr["metadata"].get("namespace", ""), cr["metadata"]["name"], DeleteOptions())
            if self.api.store.count(crt.key):
                return  # custom resources with finalizers of their own hold the CRD
        self.api.registry.remove_group_resource(spec["group"], spec["names"]["plural"])
        self.api.store.drop_type((spec["group"], spec["names"]["plural"]))
        self.api.drop_finalizer(rt, obj, CRD_CLEANUP)
