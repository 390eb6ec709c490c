"""Server-side printing: the `meta.k8s.io/v1 Table` form `kubectl get` asks for.

kubectl has no client-side printers for most kinds any more; without tables it shows only
names. The rows follow kube-apiserver's printers (pkg/printers/internalversion): the server
always fills the `-o wide` cells too (columns with priority 1), and kubectl hides them unless
asked. Custom resources use their CRD's additionalPrinterColumns, as the real server does; a
kind without a printer gets the default "Name, Created At" table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from .registry import ResourceType
from .schema import json_path_get
from .selectors import SelectorError, label_selector_from_dict
from .util import now, parse_time

Obj = dict[str, Any]

NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, although some "
             "resources may allow a client to request the generation of an appropriate name automatically. "
             "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
             "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
AGE_DESC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is "
            "not guaranteed to be set in happens-before order across separate operations. Clients may not set "
            "this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
            "Read-only. Null for lists. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")


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


def since(ts: Any) -> str:
    """translateTimestampSince: "<unknown>" for a zero time."""
    if not ts or not isinstance(ts, str):
        return "<unknown>"
    try:
        return human_duration(now() - parse_time(ts))
    except ValueError:
        return "<invalid>"


def age(obj: Obj) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"))


def _col(name: str, typ: str = "string", fmt: str = "", priority: int = 0, desc: str = "") -> Obj:
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": priority}


def _name_col() -> Obj:
    return _col("Name", fmt="name", desc=NAME_DESC)


def _age_col() -> Obj:
    return _col("Age", desc=AGE_DESC)


def _wide(name: str, desc: str = "") -> Obj:
    return _col(name, priority=1, desc=desc)


def _st(o: Obj) -> Obj:
    st = o.get("status")
    return st if isinstance(st, dict) else {}


def _spec(o: Obj) -> Obj:
    sp = o.get("spec")
    return sp if isinstance(sp, dict) else {}


def _name(o: Obj) -> str:
    return str(o.get("metadata", {}).get("name", ""))


def _deleting(o: Obj) -> bool:
    return bool(o.get("metadata", {}).get("deletionTimestamp"))


def format_label_selector(sel: Any) -> str:
    """metav1.FormatLabelSelector."""
    try:
        text = str(label_selector_from_dict(sel))
    except SelectorError:
        return "<error>"
    return text or "<none>"


# -- pods ------------------------------------------------------------------------------------------

def _terminated_reason(term: Obj, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _pod_cells(p: Obj) -> tuple[list[Any], list[Obj]]:
    """printPod: status reason, readiness, restarts (with "(5m ago)"), and the wide cells."""
    spec, st = _spec(p), _st(p)
    phase = st.get("phase") or ""
    reason = st.get("reason") or phase
    for c in st.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}

    def sidecar(name: Any) -> bool:
        return (init_specs.get(name) or {}).get("restartPolicy") == "Always"

    total = len(spec.get("containers") or []) + sum(1 for n in init_specs if sidecar(n))
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last = ""

    def later(a: str, b: Any) -> str:
        return b if isinstance(b, str) and b > a else a

    initializing = False
    for i, cs in enumerate(st.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        last_term = (cs.get("lastState") or {}).get("terminated") or {}
        last_restart = later(last_restart, last_term.get("finishedAt"))
        if sidecar(cs.get("name")):
            sidecar_restarts += int(cs.get("restartCount") or 0)
            sidecar_last = later(sidecar_last, last_term.get("finishedAt"))
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if sidecar(cs.get("name")) and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in st.get("conditions") or [])
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last
        has_running = False
        for cs in reversed(st.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = later(last_restart, ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif term is not None:
                reason = _terminated_reason(term)
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
            reason = "Running" if pod_ready else "NotReady"
    if _deleting(p) and st.get("reason") == "NodeLost":
        reason = "Unknown"
    elif _deleting(p) and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_s = str(restarts)
    if restarts and last_restart:
        restarts_s = f"{restarts} ({since(last_restart)} ago)"
    ips = st.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_s = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        gates_s = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    cells = [_name(p), f"{ready}/{total}", reason, restarts_s, age(p),
             ip, spec.get("nodeName") or "<none>", st.get("nominatedNodeName") or "<none>", gates_s]
    conditions: list[Obj] = []
    if phase == "Succeeded":
        conditions = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                       "message": "The pod has completed successfully."}]
    elif phase == "Failed":
        conditions = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return cells, conditions


# -- other built-in kinds --------------------------------------------------------------------------

def _has_condition(o: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in _st(o).get("conditions") or [])


def _job_row(j: Obj) -> list[Any]:
    spec, st = _spec(j), _st(j)
    succeeded = int(st.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    if st.get("startTime"):
        end = parse_time(st["completionTime"]) if st.get("completionTime") else now()
        duration = human_duration(end - parse_time(st["startTime"]))
    if _has_condition(j, "Complete"):
        status = "Complete"
    elif _has_condition(j, "Failed"):
        status = "Failed"
    elif _deleting(j):
        status = "Terminating"
    elif _has_condition(j, "Suspended"):
        status = "Suspended"
    elif _has_condition(j, "FailureTarget"):
        status = "FailureTarget"
    elif _has_condition(j, "SuccessCriteriaMet"):
        status = "SuccessCriteriaMet"
    else:
        status = "Running"
    containers = ((_spec(j).get("template") or {}).get("spec") or {}).get("containers") or []
    return [_name(j), status, completions, duration, age(j),
            ",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers),
            format_label_selector(spec.get("selector"))]


def _pvc_row(c: Obj) -> list[Any]:
    st, spec = _st(c), _spec(c)
    phase = "Terminating" if _deleting(c) else st.get("phase", "")
    capacity = modes = ""
    if spec.get("volumeName"):
        capacity = str((st.get("capacity") or {}).get("storage", ""))
        have = set(st.get("accessModes") or [])
        modes = ",".join(short for mode, short in (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"),
                                                   ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))
                         if mode in have)
    klass = (c["metadata"].get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    if klass is None:
        klass = spec.get("storageClassName") or ""
    return [_name(c), phase, spec.get("volumeName", ""), capacity, modes, klass,
            spec.get("volumeAttributesClassName") or "<unset>", age(c), spec.get("volumeMode") or "<unset>"]


def _node_row(n: Obj) -> list[Any]:
    st, labels = _st(n), n["metadata"].get("labels") or {}
    status = [("Ready" if c.get("status") == "True" else "NotReady")
              for c in st.get("conditions") or [] if c.get("type") == "Ready"][:1] or ["Unknown"]
    if _spec(n).get("unschedulable"):
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

    return [_name(n), ",".join(status), ",".join(sorted(roles)) or "<none>", age(n), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _event_row(e: Obj) -> list[Any]:
    first = since(e.get("firstTimestamp")) if e.get("firstTimestamp") else since(e.get("eventTime"))
    last = since(e.get("lastTimestamp")) if e.get("lastTimestamp") else first
    count = e.get("count") or 1
    series = e.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"))
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
            first, int(count), _name(e)]


def _binding_row(b: Obj) -> list[Any]:
    ref = b.get("roleRef") or {}
    subjects = b.get("subjects") or []

    def names(kind: str) -> str:
        if kind == "ServiceAccount":
            return ", ".join(f"{s.get('namespace', '')}/{s.get('name', '')}" for s in subjects if s.get("kind") == kind)
        return ", ".join(str(s.get("name", "")) for s in subjects if s.get("kind") == kind)

    return [_name(b), f"{ref.get('kind', '')}/{ref.get('name', '')}", age(b), names("User"), names("Group"),
            names("ServiceAccount")]


def _storage_class_row(s: Obj) -> list[Any]:
    ann = s["metadata"].get("annotations") or {}
    default = "true" in (ann.get("storageclass.kubernetes.io/is-default-class"),
                         ann.get("storageclass.beta.kubernetes.io/is-default-class"))
    return [_name(s) + (" (default)" if default else ""), s.get("provisioner", ""), s.get("reclaimPolicy") or "Delete",
            s.get("volumeBindingMode") or "Immediate", bool(s.get("allowVolumeExpansion")), age(s)]


def _created_at(o: Obj) -> list[Any]:
    return [_name(o), o.get("metadata", {}).get("creationTimestamp")]


_BINDING_COLS = [_name_col(), _col("Role"), _age_col(), _wide("Users"), _wide("Groups"), _wide("ServiceAccounts")]
_CREATED_AT_COLS = [_name_col(), _col("Created At", "date", desc=AGE_DESC)]

def _containers_cells(o: Obj) -> list[Any]:
    containers = ((_spec(o).get("template") or {}).get("spec") or {}).get("containers") or []
    return [",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers),
            format_label_selector(_spec(o).get("selector"))]


def _deployment_row(d: Obj) -> list[Any]:
    st = _st(d)
    return [_name(d), f"{st.get('readyReplicas', 0)}/{_spec(d).get('replicas', 1)}", st.get("updatedReplicas", 0),
            st.get("availableReplicas", 0), age(d), *_containers_cells(d)]


def _replicaset_row(r: Obj) -> list[Any]:
    st = _st(r)
    return [_name(r), _spec(r).get("replicas", 1), st.get("replicas", 0), st.get("readyReplicas", 0), age(r),
            *_containers_cells(r)]


def _service_row(s: Obj) -> list[Any]:
    spec = _spec(s)
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [_name(s), spec.get("type", "ClusterIP"), spec.get("clusterIP", ""), "<none>", ports or "<none>", age(s),
            selector]


def _endpoints_row(e: Obj) -> list[Any]:
    addrs = [f"{a['ip']}:{p['port']}" for sub in e.get("subsets") or [] for a in sub.get("addresses") or []
             for p in sub.get("ports") or []]
    shown = ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "")
    return [_name(e), shown or "<none>", age(e)]


BUILTIN: dict[str, tuple[list[Obj], Callable[[Obj], list[Any]]]] = {
    "Job": ([_name_col(), _col("Status"), _col("Completions"), _col("Duration"), _age_col(), _wide("Containers"),
             _wide("Images"), _wide("Selector")], _job_row),
    "PersistentVolumeClaim": (
        [_name_col(), _col("Status"), _col("Volume"), _col("Capacity"), _col("Access Modes"), _col("StorageClass"),
         _col("VolumeAttributesClass"), _age_col(), _wide("VolumeMode")], _pvc_row),
    "Namespace": ([_name_col(), _col("Status"), _age_col()],
                  lambda o: [_name(o), _st(o).get("phase", ""), age(o)]),
    "Node": ([_name_col(), _col("Status"), _col("Roles"), _age_col(), _col("Version"), _wide("Internal-IP"),
              _wide("External-IP"), _wide("OS-Image"), _wide("Kernel-Version"), _wide("Container-Runtime")],
             _node_row),
    "ConfigMap": ([_name_col(), _col("Data", "integer"), _age_col()],
                  lambda o: [_name(o), len(o.get("data") or {}) + len(o.get("binaryData") or {}), age(o)]),
    "Secret": ([_name_col(), _col("Type"), _col("Data", "integer"), _age_col()],
               lambda o: [_name(o), o.get("type", ""), len(o.get("data") or {}), age(o)]),
    "ServiceAccount": ([_name_col(), _col("Secrets", "integer"), _age_col()],
                       lambda o: [_name(o), len(o.get("secrets") or []), age(o)]),
    "Event": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _wide("Subobject"), _wide("Source"),
               _col("Message"), _wide("First Seen"), _wide("Count"), _col("Name", fmt="name", priority=1)],
              _event_row),
    "Role": (_CREATED_AT_COLS, _created_at),
    "ClusterRole": (_CREATED_AT_COLS, _created_at),
    "RoleBinding": (_BINDING_COLS, _binding_row),
    "ClusterRoleBinding": (_BINDING_COLS, _binding_row),
    "Lease": ([_name_col(), _col("Holder"), _age_col()],
              lambda o: [_name(o), _spec(o).get("holderIdentity") or "", age(o)]),
    "ValidatingWebhookConfiguration": ([_name_col(), _col("Webhooks", "integer"), _age_col()],
                                       lambda o: [_name(o), len(o.get("webhooks") or []), age(o)]),
    "MutatingWebhookConfiguration": ([_name_col(), _col("Webhooks", "integer"), _age_col()],
                                     lambda o: [_name(o), len(o.get("webhooks") or []), age(o)]),
    "RuntimeClass": ([_name_col(), _col("Handler"), _age_col()], lambda o: [_name(o), o.get("handler") or "", age(o)]),
    "StorageClass": ([_name_col(), _col("Provisioner"), _col("ReclaimPolicy"), _col("VolumeBindingMode"),
                      _col("AllowVolumeExpansion"), _age_col()], _storage_class_row),
    "Deployment": ([_name_col(), _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"),
                    _age_col(), _wide("Containers"), _wide("Images"), _wide("Selector")], _deployment_row),
    "ReplicaSet": ([_name_col(), _col("Desired", "integer"), _col("Current", "integer"), _col("Ready", "integer"),
                    _age_col(), _wide("Containers"), _wide("Images"), _wide("Selector")], _replicaset_row),
    "Service": ([_name_col(), _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _age_col(),
                 _wide("Selector")], _service_row),
    "Endpoints": ([_name_col(), _col("Endpoints"), _age_col()], _endpoints_row),
}

POD_COLUMNS = [_name_col(), _col("Ready"), _col("Status"), _col("Restarts"), _age_col(), _wide("IP"), _wide("Node"),
               _wide("Nominated Node"), _wide("Readiness Gates")]


def _custom_cell(col: Obj, value: Any) -> Any:
    """The apiextensions table convertor: typed cells, `None` when the path finds nothing."""
    if value is None:
        return None
    typ = col.get("type", "string")
    if typ == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (dict, list)):
            return json.dumps(value, separators=(",", ":"))
        return str(value)
    if typ == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if typ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ == "boolean" and isinstance(value, bool):
        return value
    if typ == "date" and isinstance(value, str):
        try:
            return human_duration(now() - parse_time(value))
        except ValueError:
            return "<invalid>"
    return None


def _custom_table(rt: ResourceType) -> tuple[list[Obj], Callable[[Obj], list[Any]]]:
    cols = rt.printer_columns(rt.version) or [
        # The server's default when a version declares no columns (serveDefaultColumnsIfEmpty).
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": AGE_DESC}]
    defs = [_name_col()]
    defs += [_col(c.get("name", ""), c.get("type", "string"), c.get("format", ""), int(c.get("priority", 0)),
                  c.get("description", "")) for c in cols]

    def row_fn(o: Obj) -> list[Any]:
        return [_name(o)] + [_custom_cell(c, json_path_get(o, str(c.get("jsonPath", "")))) for c in cols]

    return defs, row_fn


def _printer(rt: ResourceType) -> tuple[list[Obj], Callable[[Obj], tuple[list[Any], list[Obj]]]]:
    """Column definitions and a row function giving (cells, row conditions)."""
    if rt.is_custom:
        defs, cells_fn = _custom_table(rt)
    elif rt.kind == "Pod":
        return POD_COLUMNS, _pod_cells
    elif rt.kind in BUILTIN:
        defs, cells_fn = BUILTIN[rt.kind]
    else:
        defs, cells_fn = _CREATED_AT_COLS, _created_at
    return defs, lambda o: (cells_fn(o), [])


def to_table(rt: ResourceType, items: list[Obj], *, include: str, resource_version: str,
             cont: str | None = None) -> Obj:
    defs, row_fn = _printer(rt)
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
