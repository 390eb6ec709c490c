"""Server-side printing: the `meta.k8s.io/v1 Table` form `kubectl get` asks for.

kubectl has no client-side printers for most kinds any more; without tables it shows only
names. The rows follow kube-apiserver's printers (pkg/printers/internalversion): the server
always fills the `-o wide` cells too (columns with priority 1), and kubectl hides them unless
asked. Each kind's columns are its strategy's (`kinds/`); custom resources use their CRD's
additionalPrinterColumns, as the real server does; a kind without a printer gets the default
"Name, Created At" table. The shared helpers are in `printers.py`.
"""

from __future__ import annotations

from typing import Any

from .kinds import strategy_for
from .printers import human_duration
from .registry import ResourceType

Obj = dict[str, Any]

__all__ = ["human_duration", "to_table"]


def to_table(rt: ResourceType, items: list[Obj], *, include: str, resource_version: str,
             cont: str | None = None) -> Obj:
    defs, row_fn = strategy_for(rt).printer(rt)
    rows = []
    for o in items:
        cells, conditions = row_fn(o)
        row: Obj = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o.get("metadata", {})}
        rows.append(row)
    md: Obj = {"resourceVersion": resource_version}
    if cont:
        md["continue"] = cont
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows}
