"""Deployments and ReplicaSets (pkg/registry/apps/{deployment,replicaset}/strategy.go): their defaults and
validation (`workloads.py`, which their controllers share) and `kubectl get`'s columns.
"""

from __future__ import annotations

from typing import Any

from .. import printers, workloads
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Objects, Strategy


def _deployment_cells(d: Obj) -> list[Any]:
    st = printers.status_of(d)
    return [printers.name_of(d), f"{st.get('readyReplicas', 0)}/{printers.spec_of(d).get('replicas', 1)}",
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0), printers.age(d),
            *printers.containers_cells(d)]


def _replicaset_cells(r: Obj) -> list[Any]:
    st = printers.status_of(r)
    return [printers.name_of(r), printers.spec_of(r).get("replicas", 1), st.get("replicas", 0),
            st.get("readyReplicas", 0), printers.age(r), *printers.containers_cells(r)]


class WorkloadStrategy(Strategy):
    """Deployment and ReplicaSet."""

    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        workloads.set_defaults(obj)

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if subresource != "status":
            workloads.set_defaults(new)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        return workloads.validate(obj, old)

    def printer(self, rt: ResourceType) -> printers.Printer:
        if rt.kind == "Deployment":
            return printers.cells_only(
                [printers.name_col(), printers.col("Ready"), printers.col("Up-to-date", "integer"),
                 printers.col("Available", "integer"), printers.age_col(), printers.wide("Containers"),
                 printers.wide("Images"), printers.wide("Selector")],
                _deployment_cells)
        return printers.cells_only(
            [printers.name_col(), printers.col("Desired", "integer"), printers.col("Current", "integer"),
             printers.col("Ready", "integer"), printers.age_col(), printers.wide("Containers"),
             printers.wide("Images"), printers.wide("Selector")],
            _replicaset_cells)
