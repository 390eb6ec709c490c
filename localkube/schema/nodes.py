"""Reading a structural schema node: its properties, items, additionalProperties and types, and JSON value
helpers with Go's equality."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

_META_FIELDS = ("apiVersion", "kind", "metadata")
_DEFAULT_SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"
# --------------------------------------------------------------------------------------------------
# Schema access helpers
# --------------------------------------------------------------------------------------------------


def _as_schema(s: Any) -> Mapping[str, Any] | None:
    return s if isinstance(s, Mapping) else None


def _props(s: Mapping[str, Any]) -> Mapping[str, Any]:
    p = s.get("properties")
    return p if isinstance(p, Mapping) else {}


def _items(s: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return _as_schema(s.get("items"))


def _additional(s: Mapping[str, Any]) -> tuple[bool, Mapping[str, Any] | None]:
    """(additionalProperties present, its schema if it is one) — as the structural schema sees it."""
    ap = s.get("additionalProperties")
    if ap is None:
        return False, None
    return True, _as_schema(ap)


def _types(s: Mapping[str, Any]) -> list[str]:
    if s.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    t = s.get("type")
    if isinstance(t, str):
        return [t] if t else []
    if isinstance(t, (list, tuple)):
        return [str(x) for x in t]
    return []


def _stype(s: Mapping[str, Any]) -> str:
    t = s.get("type")
    return t if isinstance(t, str) else ""


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return ""


def _clone(v: Any) -> Any:
    """Deep copy into plain dict/list (so callers' Mappings and tuples are never touched)."""
    if isinstance(v, Mapping):
        return {k: _clone(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clone(x) for x in v]
    return copy.deepcopy(v)


def _is_json_integer(f: float) -> bool:
    """swag.IsFloat64AJSONInteger (1e-9 relative tolerance, towards the truncated value)."""
    if math.isnan(f) or math.isinf(f) or f < -(2**53) + 1 or f > 2**53 - 1:
        return False
    if f == math.trunc(f):
        return True
    if f <= 0 or f < 1:
        return False
    g = float(math.trunc(f))
    return (f - g) / (f + g) < 1e-9


def _json_equal(a: Any, b: Any) -> bool:
    """JSON value equality (numbers by value, bool never equal to a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _go_deep_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual over decoded JSON: int64(1) and float64(1) differ."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_go_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_go_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)
