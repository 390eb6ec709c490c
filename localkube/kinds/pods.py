"""Pods (pkg/registry/core/pod/strategy.go): container and spec defaults, the Pending status a pod starts in, the
pod spec's validation (shared with pod templates: `kinds/jobs.py`), what a pod update may change, graceful deletion,
and `kubectl get pods`' columns.
"""

from __future__ import annotations

import re
from typing import Any

from .. import printers
from ..registry import ResourceType
from ..request import Ctx, DeleteOptions
from ..util import DNS1123_LABEL, deep
from .base import Cause, Obj, Objects, Strategy
from .meta import LABEL_MSG

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def default_containers(spec: Obj) -> None:
    """Container defaults of a pod spec (pods and pod templates alike)."""
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        image = str(c.get("image") or "")
        tag = image.rsplit("/", 1)[-1]
        c.setdefault("imagePullPolicy", "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in tag
                     else "IfNotPresent")
        c.setdefault("resources", {})


def validate_pod_spec(spec: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(spec, dict):
        return [(path, "FieldValueRequired", "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append((f"{path}.containers", "FieldValueRequired", "Required value"))
        containers = []
    inits = spec.get("initContainers") or []
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)}
    seen: set[str] = set()
    for group, items in (("initContainers", inits), ("containers", containers)):
        for i, c in enumerate(items):
            p = f"{path}.{group}[{i}]"
            if not isinstance(c, dict):
                causes.append((p, "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            cname = c.get("name")
            if not cname:
                causes.append((f"{p}.name", "FieldValueRequired", "Required value"))
            elif not DNS1123_LABEL.match(str(cname)):
                causes.append((f"{p}.name", "FieldValueInvalid", f'Invalid value: "{cname}": {LABEL_MSG}'))
            elif cname in seen:
                causes.append((f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{cname}"'))
            else:
                seen.add(str(cname))
            if not c.get("image"):
                causes.append((f"{p}.image", "FieldValueRequired", "Required value"))
            crp = c.get("restartPolicy")
            if crp is not None and group == "containers":
                causes.append((f"{p}.restartPolicy", "FieldValueForbidden",
                               "Forbidden: may not be set for non-init containers"))
            elif crp not in (None, "Always"):
                causes.append((f"{p}.restartPolicy", "FieldValueNotSupported",
                               f'Unsupported value: "{crp}": supported values: "Always"'))
            for j, e in enumerate(c.get("env") or []):
                ename = e.get("name") if isinstance(e, dict) else None
                if not ename:
                    causes.append((f"{p}.env[{j}].name", "FieldValueRequired", "Required value"))
                elif not ENV_NAME.match(str(ename)):
                    causes.append((f"{p}.env[{j}].name", "FieldValueInvalid",
                                   f'Invalid value: "{ename}": a valid environment variable name must consist of '
                                   "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"))
            for j, vm in enumerate(c.get("volumeMounts") or []):
                if not isinstance(vm, dict) or vm.get("name") not in volumes:
                    causes.append((f"{p}.volumeMounts[{j}].name", "FieldValueNotFound",
                                   f'Not found: "{vm.get("name") if isinstance(vm, dict) else vm}"'))
                elif not str(vm.get("mountPath") or "").startswith("/"):
                    causes.append((f"{p}.volumeMounts[{j}].mountPath", "FieldValueRequired", "Required value"))
    rp = spec.get("restartPolicy")
    if rp not in (None, "Always", "OnFailure", "Never"):
        causes.append((f"{path}.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{rp}": supported values: "Always", "OnFailure", "Never"'))
    names = [v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)]
    for i, n in enumerate(names):
        if n in names[:i]:
            causes.append((f"{path}.volumes[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{n}"'))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and (not isinstance(ads, int) or ads <= 0):
        causes.append((f"{path}.activeDeadlineSeconds", "FieldValueInvalid",
                       f"Invalid value: {ads}: must be between 1 and 2147483647, inclusive"))
    return causes


def _validate_pod_update(new: Obj, old: Obj) -> list[Cause]:
    a, b = deep(new.get("spec") or {}), deep(old.get("spec") or {})
    for s in (a, b):
        s.pop("activeDeadlineSeconds", None)
        s.pop("tolerations", None)
        for c in (s.get("containers") or []) + (s.get("initContainers") or []):
            if isinstance(c, dict):
                c.pop("image", None)
    if a != b:
        return [("spec", "FieldValueForbidden",
                 "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                 "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                 "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                 "(allow it to be set to 1 if it was previously negative)")]
    return []


def _terminated_reason(term: Obj, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _pod_row(p: Obj) -> printers.Row:
    """printPod: status reason, readiness, restarts (with "(5m ago)"), and the wide cells."""
    spec, st = printers.spec_of(p), printers.status_of(p)
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
    if printers.deleting(p) and st.get("reason") == "NodeLost":
        reason = "Unknown"
    elif printers.deleting(p) and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_s = str(restarts)
    if restarts and last_restart:
        restarts_s = f"{restarts} ({printers.since(last_restart)} ago)"
    ips = st.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_s = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        gates_s = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    cells = [printers.name_of(p), f"{ready}/{total}", reason, restarts_s, printers.age(p),
             ip, spec.get("nodeName") or "<none>", st.get("nominatedNodeName") or "<none>", gates_s]
    conditions: list[Obj] = []
    if phase == "Succeeded":
        conditions = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                       "message": "The pod has completed successfully."}]
    elif phase == "Failed":
        conditions = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return cells, conditions


POD_COLUMNS = [printers.name_col(), printers.col("Ready"), printers.col("Status"), printers.col("Restarts"),
               printers.age_col(), printers.wide("IP"), printers.wide("Node"), printers.wide("Nominated Node"),
               printers.wide("Readiness Gates")]


class PodStrategy(Strategy):
    def defaults(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("securityContext", {})
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        default_containers(spec)

    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        causes = validate_pod_spec(obj.get("spec"), "spec")
        if old is not None and not ctx.internal:
            causes += _validate_pod_update(obj, old)
        return causes

    def grace_period(self, obj: Obj, opts: DeleteOptions) -> int | None:
        phase = (obj.get("status") or {}).get("phase")
        if not obj.get("spec", {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if opts.grace_period is not None:
            return max(opts.grace_period, 0)
        return int(obj.get("spec", {}).get("terminationGracePeriodSeconds", 30))

    def awaits_kubelet(self, obj: Obj) -> bool:
        """A running pod whose deletion is in progress waits for the kubelet's final delete."""
        return bool(obj["metadata"].get("deletionGracePeriodSeconds")) and (obj.get("status") or {}).get(
            "phase") not in ("Succeeded", "Failed")

    def printer(self, rt: ResourceType) -> printers.Printer:
        return POD_COLUMNS, _pod_row
