"""The kinds with little of their own beyond `kubectl get`'s columns: Nodes, Events, ServiceAccounts, Leases,
StorageClasses, and RuntimeClasses (whose handler is validated: pkg/registry/node/runtimeclass/strategy.go).
"""

from __future__ import annotations

import re
from typing import Any

from .. import printers
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Strategy

RUNTIME_HANDLER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _node_cells(n: Obj) -> list[Any]:
    st, labels = printers.status_of(n), n["metadata"].get("labels") or {}
    status = [("Ready" if c.get("status") == "True" else "NotReady")
              for c in st.get("conditions") or [] if c.get("type") == "Ready"][:1] or ["Unknown"]
    if printers.spec_of(n).get("unschedulable"):
        status.append("SchedulingDisabled")
    roles = set()
    for k, v in labels.items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/"):]:
            roles.add(k[len("node-role.kubernetes.io/"):])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    info = st.get("nodeInfo") or {}

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in st.get("addresses") or [] if a.get("type") == kind), "<none>")

    return [printers.name_of(n), ",".join(status), ",".join(sorted(roles)) or "<none>", printers.age(n),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _event_cells(e: Obj) -> list[Any]:
    first = printers.since(e.get("firstTimestamp")) if e.get("firstTimestamp") else printers.since(e.get("eventTime"))
    last = printers.since(e.get("lastTimestamp")) if e.get("lastTimestamp") else first
    count = e.get("count") or 1
    series = e.get("series")
    if isinstance(series, dict):
        last = printers.since(series.get("lastObservedTime"))
        count = series.get("count") or 0
    inv = e.get("involvedObject") or {}
    target = str(inv.get("kind", "")).lower()
    if inv.get("name"):
        target += f"/{inv['name']}"
    source = e.get("source") or {}
    component = source.get("component") or e.get("reportingComponent") or ""
    instance = source.get("host") or e.get("reportingInstance") or ""
    return [last, e.get("type", ""), e.get("reason", ""), target, inv.get("fieldPath", ""),
            f"{component}, {instance}" if instance else component, str(e.get("message", "")).strip(),
            first, int(count), printers.name_of(e)]


def _storage_class_cells(s: Obj) -> list[Any]:
    ann = s["metadata"].get("annotations") or {}
    default = "true" in (ann.get("storageclass.kubernetes.io/is-default-class"),
                         ann.get("storageclass.beta.kubernetes.io/is-default-class"))
    return [printers.name_of(s) + (" (default)" if default else ""), s.get("provisioner", ""),
            s.get("reclaimPolicy") or "Delete", s.get("volumeBindingMode") or "Immediate",
            bool(s.get("allowVolumeExpansion")), printers.age(s)]


class NodeStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.name_col(), printers.col("Status"), printers.col("Roles"), printers.age_col(),
             printers.col("Version"), printers.wide("Internal-IP"), printers.wide("External-IP"),
             printers.wide("OS-Image"), printers.wide("Kernel-Version"), printers.wide("Container-Runtime")],
            _node_cells)


class EventStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.col("Last Seen"), printers.col("Type"), printers.col("Reason"), printers.col("Object"),
             printers.wide("Subobject"), printers.wide("Source"), printers.col("Message"), printers.wide("First Seen"),
             printers.wide("Count"), printers.col("Name", fmt="name", priority=1)],
            _event_cells)


class ServiceAccountStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Secrets", "integer"), printers.age_col()],
                                   lambda o: [printers.name_of(o), len(o.get("secrets") or []), printers.age(o)])


class LeaseStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Holder"), printers.age_col()],
                                   lambda o: [printers.name_of(o), printers.spec_of(o).get("holderIdentity") or "",
                                              printers.age(o)])


class StorageClassStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.name_col(), printers.col("Provisioner"), printers.col("ReclaimPolicy"),
             printers.col("VolumeBindingMode"), printers.col("AllowVolumeExpansion"), printers.age_col()],
            _storage_class_cells)


class RuntimeClassStrategy(Strategy):
    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        handler = obj.get("handler")
        if not handler:
            return [("handler", "FieldValueRequired", "Required value")]
        if not isinstance(handler, str) or not RUNTIME_HANDLER.match(handler):
            return [("handler", "FieldValueInvalid", f'Invalid value: "{handler}": a lowercase RFC 1123 '
                     "label must consist of lower case alphanumeric characters or '-'")]
        if old is not None and old.get("handler") != handler:
            return [("handler", "FieldValueInvalid", f'Invalid value: "{handler}": field is immutable')]
        return []

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Handler"), printers.age_col()],
                                   lambda o: [printers.name_of(o), o.get("handler") or "", printers.age(o)])
