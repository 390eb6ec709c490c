"""PersistentVolumeClaims (pkg/registry/core/persistentvolumeclaim/strategy.go): the volume mode and the Pending
status a claim starts with, its validation (access modes, a storage request, a spec that does not change once
made), and `kubectl get pvc`'s columns. The default StorageClass and the pvc-protection finalizer are the
admission plug-ins' (`admission_plugins.py`).
"""

from __future__ import annotations

import re
from typing import Any

from .. import printers
from ..registry import ResourceType
from ..request import Ctx
from ..util import deep
from .base import Cause, Obj, Objects, Strategy


def _pvc_cells(c: Obj) -> list[Any]:
    st, spec = printers.status_of(c), printers.spec_of(c)
    phase = "Terminating" if printers.deleting(c) else st.get("phase", "")
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
    return [printers.name_of(c), phase, spec.get("volumeName", ""), capacity, modes, klass,
            spec.get("volumeAttributesClassName") or "<unset>", printers.age(c), spec.get("volumeMode") or "<unset>"]


PVC_COLUMNS = [printers.name_col(), printers.col("Status"), printers.col("Volume"), printers.col("Capacity"),
               printers.col("Access Modes"), printers.col("StorageClass"), printers.col("VolumeAttributesClass"),
               printers.age_col(), printers.wide("VolumeMode")]


class PersistentVolumeClaimStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        causes: list[Cause] = []
        modes = spec.get("accessModes")
        valid = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
        if not modes:
            causes.append(("spec.accessModes", "FieldValueRequired", "Required value: at least 1 access mode is required"))
        else:
            for m in modes:
                if m not in valid:
                    causes.append(("spec.accessModes", "FieldValueNotSupported",
                                   f'Unsupported value: "{m}": supported values: "ReadOnlyMany", "ReadWriteMany", '
                                   '"ReadWriteOnce", "ReadWriteOncePod"'))
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if not storage:
            causes.append(("spec.resources[storage]", "FieldValueRequired", "Required value"))
        elif not re.match(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$", str(storage)):
            causes.append(("spec.resources.requests[storage]", "FieldValueInvalid",
                           f'Invalid value: "{storage}": quantities must match the regular expression '
                           "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
        if old is not None:
            a, b = deep(spec), deep(old.get("spec") or {})
            for s in (a, b):
                s.pop("resources", None)
                s.pop("volumeName", None)
            if a != b:
                causes.append(("spec", "FieldValueForbidden",
                               "Forbidden: spec is immutable after creation except resources.requests and "
                               "volumeAttributesClassName for bound claims"))
        return causes

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(PVC_COLUMNS, _pvc_cells)
