"""Services and Endpoints (pkg/registry/core/service): a Service's defaults and its cluster IP, allocated from
localkube's service network and kept across updates that leave it out (`network.py`), its validation, and
`kubectl get`'s columns for both.
"""

from __future__ import annotations

from typing import Any

from .. import network, printers
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Objects, Strategy


def _service_cells(s: Obj) -> list[Any]:
    spec = printers.spec_of(s)
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [printers.name_of(s), spec.get("type", "ClusterIP"), spec.get("clusterIP", ""), "<none>",
            ports or "<none>", printers.age(s), selector]


def _endpoints_cells(e: Obj) -> list[Any]:
    addrs = [f"{a['ip']}:{p['port']}" for sub in e.get("subsets") or [] for a in sub.get("addresses") or []
             for p in sub.get("ports") or []]
    shown = ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "")
    return [printers.name_of(e), shown or "<none>", printers.age(e)]


class ServiceStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        network.default_service(obj, objects.select(network.SERVICES))

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if subresource != "status":
            network.keep_cluster_ip(new, old)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        return network.validate_service(obj)

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(
            [printers.name_col(), printers.col("Type"), printers.col("Cluster-IP"), printers.col("External-IP"),
             printers.col("Port(s)"), printers.age_col(), printers.wide("Selector")],
            _service_cells)


class EndpointsStrategy(Strategy):
    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only([printers.name_col(), printers.col("Endpoints"), printers.age_col()],
                                   _endpoints_cells)
