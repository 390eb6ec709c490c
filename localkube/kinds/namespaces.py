"""Namespaces (pkg/registry/core/namespace/strategy.go): the `kubernetes` finalizer, the Active phase and the
`kubernetes.io/metadata.name` label a namespace starts with, a spec clients may not change, and `kubectl get ns`'
columns. Deleting a namespace marks it Terminating (`apiserver.py`); the namespace controller (`controllers.py`)
deletes what it holds, then the namespace.
"""

from __future__ import annotations

from .. import printers
from ..registry import ResourceType
from ..request import Ctx
from ..util import deep
from .base import Obj, Objects, Strategy


class NamespaceStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if subresource != "status":
            new["spec"] = deep(old.get("spec", {}))

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Status"), printers.age_col()],
                                   lambda o: [printers.name_of(o), printers.status_of(o).get("phase", ""),
                                              printers.age(o)])
