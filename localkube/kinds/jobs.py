"""Jobs (pkg/registry/batch/job/strategy.go): the selector and pod-template labels a Job is given, its defaults, the
status it starts with, its validation (the pod template's through `kinds/pods.py`), and `kubectl get jobs`' columns.
"""

from __future__ import annotations

import json
from typing import Any

from .. import printers
from ..registry import ResourceType
from ..request import Ctx
from ..util import now, parse_time
from .base import Cause, Obj, Objects, Strategy
from .pods import default_containers, validate_pod_spec


def _job_cells(j: Obj) -> list[Any]:
    spec, st = printers.spec_of(j), printers.status_of(j)
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
        duration = printers.human_duration(end - parse_time(st["startTime"]))
    if printers.has_condition(j, "Complete"):
        status = "Complete"
    elif printers.has_condition(j, "Failed"):
        status = "Failed"
    elif printers.deleting(j):
        status = "Terminating"
    elif printers.has_condition(j, "Suspended"):
        status = "Suspended"
    elif printers.has_condition(j, "FailureTarget"):
        status = "FailureTarget"
    elif printers.has_condition(j, "SuccessCriteriaMet"):
        status = "SuccessCriteriaMet"
    else:
        status = "Running"
    containers = ((printers.spec_of(j).get("template") or {}).get("spec") or {}).get("containers") or []
    return [printers.name_of(j), status, completions, duration, printers.age(j),
            ",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers),
            printers.format_label_selector(spec.get("selector"))]


JOB_COLUMNS = [printers.name_col(), printers.col("Status"), printers.col("Completions"), printers.col("Duration"),
               printers.age_col(), printers.wide("Containers"), printers.wide("Images"), printers.wide("Selector")]


class JobStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        spec = obj.setdefault("spec", {})
        m = obj["metadata"]
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", None)
        if spec.get("manualSelector") is None:
            spec.pop("manualSelector")
        template = spec.get("template")
        if isinstance(template, dict):
            tmeta = template.setdefault("metadata", {})
            labels = tmeta.setdefault("labels", {})
            if not spec.get("manualSelector"):
                labels["batch.kubernetes.io/controller-uid"] = m["uid"]
                labels["controller-uid"] = m["uid"]
                labels["batch.kubernetes.io/job-name"] = m["name"]
                labels["job-name"] = m["name"]
                spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": m["uid"]}}
            tspec = template.setdefault("spec", {})
            tspec.setdefault("dnsPolicy", "ClusterFirst")
            tspec.setdefault("schedulerName", "default-scheduler")
            tspec.setdefault("terminationGracePeriodSeconds", 30)
            tspec.setdefault("securityContext", {})
            default_containers(tspec)
        obj["status"] = {}

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        spec = obj.get("spec")
        causes: list[Cause] = []
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        name = obj["metadata"]["name"]
        if len(name) > 63:
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{name}": must be no more than 63 characters'))
        template = spec.get("template")
        if not isinstance(template, dict):
            return [*causes, ("spec.template", "FieldValueRequired", "Required value")]
        causes += validate_pod_spec(template.get("spec"), "spec.template.spec")
        rp = (template.get("spec") or {}).get("restartPolicy")
        if rp not in ("OnFailure", "Never"):
            if rp is None:
                causes.append(("spec.template.spec.restartPolicy", "FieldValueRequired",
                               'Required value: valid values: "OnFailure", "Never"'))
            else:
                causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                               f'Unsupported value: "{rp}": supported values: "OnFailure", "Never"'))
        for f in ("backoffLimit", "ttlSecondsAfterFinished", "parallelism", "completions"):
            v = spec.get(f)
            if v is not None and (not isinstance(v, int) or v < 0):
                causes.append((f"spec.{f}", "FieldValueInvalid",
                               f"Invalid value: {json.dumps(v)}: must be greater than or equal to 0"))
        ads = spec.get("activeDeadlineSeconds")
        if ads is not None and (not isinstance(ads, int) or ads <= 0):
            causes.append(("spec.activeDeadlineSeconds", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(ads)}: must be greater than or equal to 0"))
        if old is not None:
            ospec = old.get("spec") or {}
            if spec.get("selector") != ospec.get("selector"):
                causes.append(("spec.selector", "FieldValueInvalid", "Invalid value: field is immutable"))
            if spec.get("template") != ospec.get("template") and not ospec.get("suspend"):
                causes.append(("spec.template", "FieldValueInvalid",
                               "Invalid value: field is immutable"))
            if spec.get("completions") != ospec.get("completions"):
                causes.append(("spec.completions", "FieldValueInvalid", "Invalid value: field is immutable"))
        return causes

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(JOB_COLUMNS, _job_cells)
