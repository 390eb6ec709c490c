"""RBAC's kinds (pkg/registry/rbac/*/strategy.go): a Role's or ClusterRole's rules each name verbs; a binding names
a role of a kind it may bind, and its roleRef never changes. And `kubectl get`'s columns for the four.
"""

from __future__ import annotations

import json
from typing import Any

from .. import printers
from ..registry import ResourceType
from ..request import Ctx
from .base import Cause, Obj, Strategy


def _binding_cells(b: Obj) -> list[Any]:
    ref = b.get("roleRef") or {}
    subjects = b.get("subjects") or []

    def names(kind: str) -> str:
        if kind == "ServiceAccount":
            return ", ".join(f"{s.get('namespace', '')}/{s.get('name', '')}" for s in subjects if s.get("kind") == kind)
        return ", ".join(str(s.get("name", "")) for s in subjects if s.get("kind") == kind)

    return [printers.name_of(b), f"{ref.get('kind', '')}/{ref.get('name', '')}", printers.age(b), names("User"), names("Group"),
            names("ServiceAccount")]


BINDING_COLUMNS = [printers.name_col(), printers.col("Role"), printers.age_col(), printers.wide("Users"),
                   printers.wide("Groups"), printers.wide("ServiceAccounts")]


class RoleStrategy(Strategy):
    """Role and ClusterRole."""

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        causes: list[Cause] = []
        for i, r in enumerate(obj.get("rules") or []):
            if not isinstance(r, dict) or not r.get("verbs"):
                causes.append((f"rules[{i}].verbs", "FieldValueRequired",
                               "Required value: verbs must contain at least one value"))
        return causes


class BindingStrategy(Strategy):
    """RoleBinding and ClusterRoleBinding."""

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        causes: list[Cause] = []
        kind = rt.kind
        ref = obj.get("roleRef")
        if not isinstance(ref, dict) or not ref.get("name"):
            causes.append(("roleRef.name", "FieldValueRequired", "Required value"))
        elif ref.get("kind") not in (("Role", "ClusterRole") if kind == "RoleBinding" else ("ClusterRole",)):
            causes.append(("roleRef.kind", "FieldValueNotSupported",
                           f'Unsupported value: "{ref.get("kind")}": supported values: '
                           + ('"Role", "ClusterRole"' if kind == "RoleBinding" else '"ClusterRole"')))
        if old is not None and old.get("roleRef") != ref:
            causes.append(("roleRef", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(ref)}: cannot change roleRef"))
        return causes

    def printer(self, rt: ResourceType) -> printers.Printer:
        return printers.cells_only(BINDING_COLUMNS, _binding_cells)
