"""Server-side printing: the `meta.k8s.io/v1 Table` form `kubectl get` asks for.

kubectl has no client-side printers for most kinds any more; without tables it shows only
names. Custom resources use their CRD's additionalPrinterColumns, as the real server does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from .registry import ResourceType
from .schema import json_path_get
from .util import now, parse_time

Obj = dict[str, Any]


def human_duration(d: dt.timedelta) -> str:
    """apimachinery's duration.HumanDuration."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        h = hours % 24
        return f"{days}d" if h == 0 else f"{days}d{h}h"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        dd = days % 365
        return f"{years}y" if dd == 0 else f"{years}y{dd}d"
    return f"{years}y"


def age(obj: Obj) -> str:
    ts = obj.get("metadata", {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    return human_duration(now() - parse_time(ts))


def _col(name: str, typ: str = "string", fmt: str = "", priority: int = 0, desc: str = "") -> Obj:
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": priority}


def _pod_status(p: Obj) -> str:
    st = p.get("status") or {}
    if p["metadata"].get("deletionTimestamp"):
        return "Terminating"
    reason = st.get("reason") or st.get("phase") or "Pending"
    for i, cs in enumerate(st.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        if "terminated" in state:
            return "Init:" + (state["terminated"].get("reason") or "Error")
        if "waiting" in state and state["waiting"].get("reason") not in (None, "PodInitializing"):
            return "Init:" + state["waiting"]["reason"]
        return f"Init:{i}/{len((p.get('spec') or {}).get('initContainers') or [])}"
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason"):
            reason = state["terminated"]["reason"]
    return str(reason)


def _pod_row(p: Obj) -> list[Any]:
    cs = (p.get("status") or {}).get("containerStatuses") or []
    total = len((p.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    return [p["metadata"]["name"], f"{ready}/{total}", _pod_status(p), restarts, age(p)]


def _job_row(j: Obj) -> list[Any]:
    st = j.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    if conds.get("Complete") == "True":
        status = "Complete"
    elif conds.get("Failed") == "True":
        status = "Failed"
    elif conds.get("FailureTarget") == "True":
        status = "FailureTarget"
    elif (j.get("spec") or {}).get("suspend"):
        status = "Suspended"
    else:
        status = "Running"
    completions = (j.get("spec") or {}).get("completions", 1)
    duration = ""
    if st.get("startTime"):
        end = parse_time(st["completionTime"]) if st.get("completionTime") else now()
        duration = human_duration(end - parse_time(st["startTime"]))
    return [j["metadata"]["name"], status, f"{st.get('succeeded', 0)}/{completions}", duration, age(j)]


def _pvc_row(c: Obj) -> list[Any]:
    st = c.get("status") or {}
    spec = c.get("spec") or {}
    cap = (st.get("capacity") or {}).get("storage", "")
    return [c["metadata"]["name"], st.get("phase", ""), spec.get("volumeName", ""), cap,
            ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                      "ReadWriteOncePod": "RWOP"}.get(m, m) for m in st.get("accessModes") or []),
            spec.get("storageClassName", ""), age(c)]


BUILTIN: dict[str, tuple[list[Obj], Callable[[Obj], list[Any]]]] = {
    "Pod": ([_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "integer"), _col("Age")],
            _pod_row),
    "Job": ([_col("Name", fmt="name"), _col("Status"), _col("Completions"), _col("Duration"), _col("Age")],
            _job_row),
    "PersistentVolumeClaim": (
        [_col("Name", fmt="name"), _col("Status"), _col("Volume"), _col("Capacity"), _col("Access Modes"),
         _col("StorageClass"), _col("Age")], _pvc_row),
    "Namespace": ([_col("Name", fmt="name"), _col("Status"), _col("Age")],
                  lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), age(o)]),
    "ConfigMap": ([_col("Name", fmt="name"), _col("Data", "integer"), _col("Age")],
                  lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                             age(o)]),
    "Secret": ([_col("Name", fmt="name"), _col("Type"), _col("Data", "integer"), _col("Age")],
               lambda o: [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}), age(o)]),
    "Event": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
              lambda o: [age(o), o.get("type", ""), o.get("reason", ""),
                         f"{(o.get('involvedObject') or {}).get('kind', '').lower()}/"
                         f"{(o.get('involvedObject') or {}).get('name', '')}", o.get("message", "")]),
    "Role": ([_col("Name", fmt="name"), _col("Created At")],
             lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]),
    "RoleBinding": ([_col("Name", fmt="name"), _col("Role"), _col("Age")],
                    lambda o: [o["metadata"]["name"],
                               f"{(o.get('roleRef') or {}).get('kind', '')}/{(o.get('roleRef') or {}).get('name', '')}",
                               age(o)]),
}


def to_table(rt: ResourceType, items: list[Obj], *, include: str, resource_version: str,
             cont: str | None = None) -> Obj:
    if rt.is_custom:
        cols = rt.printer_columns(rt.version)
        defs = [_col("Name", fmt="name", desc="Name must be unique within a namespace.")]
        defs += [_col(c.get("name", ""), c.get("type", "string"), c.get("format", ""), int(c.get("priority", 0)),
                      c.get("description", "")) for c in cols]
        has_age = any(c.get("jsonPath") == ".metadata.creationTimestamp" for c in cols)
        if not has_age:
            defs.append(_col("Age", "date"))

        def row_fn(o: Obj) -> list[Any]:
            cells: list[Any] = [o["metadata"]["name"]]
            for c in cols:
                v = json_path_get(o, str(c.get("jsonPath", "")))
                if c.get("jsonPath") == ".metadata.creationTimestamp" or (c.get("type") == "date" and v):
                    cells.append(human_duration(now() - parse_time(str(v))) if v else "<unknown>")
                else:
                    cells.append(v)
            if not has_age:
                cells.append(age(o))
            return cells
    elif rt.kind in BUILTIN:
        defs, row_fn = BUILTIN[rt.kind]  # type: ignore[assignment]
    else:
        defs = [_col("Name", fmt="name"), _col("Age")]

        def row_fn(o: Obj) -> list[Any]:
            return [o["metadata"]["name"], age(o)]

    rows = []
    for o in items:
        row: Obj = {"cells": row_fn(o)}
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
