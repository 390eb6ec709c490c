"""CustomResourceDefinitions (apiextensions-apiserver's pkg/registry/customresourcedefinition/strategy.go): the
accepted names, Established condition and stored versions a CRD gets, and its validation (group, names, scope,
exactly one storage version, a structural schema for each version, what may not change). Registering the resources
a CRD serves is the generic store's (`apiserver.py`); deleting its custom resources before it goes is the CRD
finalizer's (`crdfinalizer.py`).
"""

from __future__ import annotations

from ..registry import ResourceType
from ..request import Ctx
from ..schema import check_structural
from ..util import set_condition
from .base import Cause, Obj, Objects, Strategy


def _crd_status(obj: Obj) -> None:
    """The names a CRD is accepted with and its Established condition: localkube serves it at once."""
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    accepted = {k: v for k, v in names.items()}
    if names.get("kind") and "listKind" not in accepted:
        accepted["listKind"] = names["kind"] + "List"
    if names.get("kind") and "singular" not in accepted:
        accepted["singular"] = str(names["kind"]).lower()
    status = obj.setdefault("status", {})
    conds = status.setdefault("conditions", [])
    set_condition(conds, "NamesAccepted", "True", reason="NoConflicts", message="no conflicts found")
    set_condition(conds, "Established", "True", reason="InitialNamesAccepted",
                  message="the initial names have been accepted")
    status["acceptedNames"] = accepted
    stored = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
    sv = status.setdefault("storedVersions", [])
    for v in stored:
        if v not in sv:
            sv.append(v)
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", str(names.get("kind", "")) + "List")
    for v in spec.get("versions") or []:
        if isinstance(v, dict):
            v.setdefault("served", True)


class CustomResourceDefinitionStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        _crd_status(obj)

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if subresource != "status":
            _crd_status(new)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [("spec", "FieldValueRequired", "Required value")]
        causes: list[Cause] = []
        group = spec.get("group") or ""
        names = spec.get("names") or {}
        if not group:
            causes.append(("spec.group", "FieldValueRequired", "Required value"))
        elif "." not in group:
            causes.append(("spec.group", "FieldValueInvalid", f'Invalid value: "{group}": should be a domain with at least one dot'))
        for f in ("plural", "kind"):
            if not names.get(f):
                causes.append((f"spec.names.{f}", "FieldValueRequired", "Required value"))
        if names.get("plural") and group and obj["metadata"]["name"] != f"{names['plural']}.{group}":
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural+"."+spec.group'))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(("spec.scope", "FieldValueNotSupported",
                           f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"'))
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            causes.append(("spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version"))
        else:
            if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
                causes.append(("spec.versions", "FieldValueInvalid",
                               "Invalid value: must have exactly one version marked as storage version"))
            for i, v in enumerate(versions):
                if not isinstance(v, dict) or not v.get("name"):
                    causes.append((f"spec.versions[{i}].name", "FieldValueRequired", "Required value"))
                    continue
                schema = ((v.get("schema") or {}).get("openAPIV3Schema"))
                if schema is None:
                    causes.append((f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueRequired",
                                   "Required value: schemas are required"))
                elif isinstance(schema, dict):
                    for msg in check_structural(schema):
                        causes.append((f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueInvalid", msg))
        if old is not None:
            ospec = old.get("spec") or {}
            if ospec.get("group") != spec.get("group"):
                causes.append(("spec.group", "FieldValueInvalid", "Invalid value: field is immutable"))
            if (ospec.get("names") or {}).get("plural") != names.get("plural"):
                causes.append(("status.acceptedNames.plural", "FieldValueInvalid", "Invalid value: field is immutable"))
            if ospec.get("scope") != spec.get("scope"):
                causes.append(("spec.scope", "FieldValueInvalid", "Invalid value: field is immutable"))
        return causes
