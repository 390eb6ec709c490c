"""Custom resources (apiextensions-apiserver's customresource strategy and table convertor): defaulted, pruned and
validated by their version's structural schema (`schema/`), printed with the CRD's additionalPrinterColumns.
"""

from __future__ import annotations

import json
from typing import Any

from .. import printers, schema
from ..errors import bad_request
from ..registry import ResourceType
from ..request import Ctx
from ..schema.jsonpath import json_path_get
from ..util import now, parse_time
from .base import Cause, Obj, Objects, Strategy


def _defaults(rt: ResourceType, obj: Obj, ctx: Ctx) -> None:
    """Defaulted and pruned by the version's structural schema; unknown fields refused (Strict) or warned of."""
    version_schema = rt.schema_for(rt.version)
    if not version_schema:
        return
    m = obj["metadata"]
    body = {k: v for k, v in obj.items() if k != "metadata"}
    body = schema.apply_defaults(body, version_schema)
    pruned, unknown = schema.prune(body, version_schema)
    if unknown and not ctx.internal:
        if ctx.field_validation == "Strict":
            raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{u.lstrip(".")}"'
                                                                    for u in unknown))
        if ctx.field_validation != "Ignore":
            ctx.warnings.extend(f'unknown field "{u.lstrip(".")}"' for u in unknown)
    obj.clear()
    obj.update(pruned)
    obj["metadata"] = m


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
            return printers.human_duration(now() - parse_time(value))
        except ValueError:
            return "<invalid>"
    return None


def _table(rt: ResourceType) -> printers.Printer:
    cols = rt.printer_columns(rt.version) or [
        # The server's default when a version declares no columns (serveDefaultColumnsIfEmpty).
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": printers.AGE_DESC}]
    defs = [printers.name_col()]
    defs += [printers.col(c.get("name", ""), c.get("type", "string"), c.get("format", ""), int(c.get("priority", 0)),
                          c.get("description", "")) for c in cols]

    def row_fn(o: Obj) -> printers.Row:
        return [printers.name_of(o)] + [_custom_cell(c, json_path_get(o, str(c.get("jsonPath", "")))) for c in cols], []

    return defs, row_fn


class CustomResourceStrategy(Strategy):
    def prepare_for_create(self, rt: ResourceType, obj: Obj, ctx: Ctx, objects: Objects) -> None:
        _defaults(rt, obj, ctx)

    def prepare_for_update(self, rt: ResourceType, new: Obj, old: Obj, ctx: Ctx, subresource: str) -> None:
        if subresource != "status":
            _defaults(rt, new, ctx)

    def validate(self, rt: ResourceType, obj: Obj, old: Obj | None, ctx: Ctx) -> list[Cause]:
        version_schema = rt.schema_for(rt.version)
        if not version_schema:
            return []
        return [(e.field, e.reason, e.message) for e in schema.validate_custom_resource(obj, version_schema)]

    def printer(self, rt: ResourceType) -> printers.Printer:
        return _table(rt)
