"""What kube-apiserver does to a custom resource with its CRD version's structural ``openAPIV3Schema``.

Why this exists: localkube serves custom resources wire-compatibly, so a create/update must be
pruned, defaulted and validated the way ``k8s.io/apiextensions-apiserver`` does it (structural
pruning and defaulting, kube-openapi validation, list-type and embedded-resource checks), and a
rejected request must carry the very field paths, ``metav1.CauseType`` reasons and messages a real
server prints (``spec.timeout: Invalid value: "integer": spec.timeout in body must be of type
string: "integer"``), because clients and people match on them.  Everything here is a pure function
over JSON-like Python values (dict, list, str, int, float, bool, None); inputs are never mutated.

The real server's order for a write is: :func:`prune` (unknown fields, reported for
``fieldValidation=Strict|Warn``), :func:`prune_nulls`, :func:`apply_defaults`, then
:func:`validate_custom_resource`; a failure becomes a 422 whose message is :func:`format_invalid`.

Known, deliberate gaps (documented rather than faked):

* ``x-kubernetes-validations`` (CEL rules) are NOT evaluated; they are ignored.
* Ratcheting (``CRDValidationRatcheting``) is not modelled: updates are validated like creates.
* ObjectMeta of the resource (and of embedded resources) is validated elsewhere, not here.
* ``format``: like the server, formats it does not support (``int32``, ``int64``, ``float``,
  ``double``, anything unknown) are ignored.  Supported string formats are checked loosely
  (``date-time``, ``date``, ``duration``, ``byte``, ``uri``, ``email``, ``hostname``, ``ipv4``,
  ``ipv6``, ``cidr``, ``mac``, ``uuid*``, ``isbn*``, ``creditcard``, ``ssn``, ``hexcolor``,
  ``rgbcolor``, ``bsonobjectid``, ``password``).
* ``pattern`` is Go RE2 syntax on the server; here it is translated to Python ``re`` (ASCII
  classes, ``$`` as end of text, POSIX classes) which covers the patterns CRDs use in practice.
* Error order: the server iterates Go maps (random order); here errors follow schema
  declaration order, then data order.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as _dt
import functools
import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

__all__ = [
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NOT_SUPPORTED",
    "REQUIRED",
    "TOO_LONG",
    "TOO_MANY",
    "TYPE_INVALID",
    "FieldError",
    "apply_defaults",
    "check_structural",
    "format_invalid",
    "json_path_get",
    "prune",
    "prune_nulls",
    "validate",
    "validate_custom_resource",
]

# metav1.CauseType values (k8s.io/apimachinery/pkg/util/validation/field.ErrorType).
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"

_LABELS = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    TYPE_INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    DUPLICATE: "Duplicate value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
}
# Error types whose body never shows the bad value (field.Error.ErrorBody).
_NO_VALUE_TYPES = {REQUIRED, FORBIDDEN, TOO_LONG}

_META_FIELDS = ("apiVersion", "kind", "metadata")
_DEFAULT_SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"


class _Omit:
    """Marker for field errors that print no value (field's omitValue)."""


_OMIT = _Omit()


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error`` as kube-apiserver reports it (also one ``details.causes`` entry).

    ``field`` is the path as the server prints it (``spec.items[0].name``; ``<nil>`` for errors the
    server attaches to no field, e.g. failed ``anyOf``/``oneOf``), ``reason`` the metav1.CauseType
    and ``message`` the cause message (``ErrorBody``), e.g. ``Required value``.
    """

    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# --------------------------------------------------------------------------------------------------
# Go formatting (fmt %v / %q, encoding/json) so messages match byte for byte
# --------------------------------------------------------------------------------------------------


def _go_quote(s: str) -> str:
    """strconv.Quote."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _shortest(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of a finite f > 0 and the decimal point position."""
    t = Decimal(repr(f)).as_tuple()
    digits = "".join(str(d) for d in t.digits)
    exp = int(t.exponent)
    dp = len(digits) + exp
    digits = digits.rstrip("0") or "0"
    return digits, dp


def _fmt_e(digits: str, dp: int, *, json_style: bool) -> str:
    x = dp - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if x < 0 else "+"
    ax = abs(x)
    exp = f"{ax}" if (json_style and x < 0) else f"{ax:02d}"
    return f"{mant}e{sign}{exp}"


def _fmt_f(digits: str, dp: int) -> str:
    if dp <= 0:
        return "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return digits + "0" * (dp - len(digits))
    return digits[:dp] + "." + digits[dp:]


def _go_float(f: float) -> str:
    """fmt's %v of a float64 (strconv 'g', shortest)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    digits, dp = _shortest(abs(f))
    x = dp - 1
    body = _fmt_e(digits, dp, json_style=False) if (x < -4 or x >= 6) else _fmt_f(digits, dp)
    return ("-" if f < 0 else "") + body


def _go_json_float(f: float) -> str:
    """encoding/json's rendering of a float64."""
    if math.isnan(f) or math.isinf(f):
        return "null"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    a = abs(f)
    digits, dp = _shortest(a)
    body = _fmt_e(digits, dp, json_style=True) if (a < 1e-6 or a >= 1e21) else _fmt_f(digits, dp)
    return ("-" if f < 0 else "") + body


def _go_json_str(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif o < 0x20 or ch in "<>&" or o in (0x2028, 0x2029):
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json(v: Any) -> str:
    """json.Marshal (compact, map keys sorted, HTML-safe escaping)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_json_float(v)
    if isinstance(v, str):
        return _go_json_str(v)
    if isinstance(v, Mapping):
        items = sorted((str(k), val) for k, val in v.items())
        return "{" + ",".join(f"{_go_json_str(k)}:{_go_json(val)}" for k, val in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_go_json(x) for x in v) + "]"
    return _go_json_str(str(v))


def _go_value(v: Any) -> str:
    """How field.Error.ErrorBody prints a bad value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, str):
        return _go_quote(v)
    return _go_json(v)


def _go_v(v: Any) -> str:
    """fmt's %v of a decoded JSON value (only used inside kube-openapi messages)."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{k}:{_go_v(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(_go_v(x) for x in v) + "]"
    return str(v)


# --------------------------------------------------------------------------------------------------
# field.Error constructors and field.Path rendering
# --------------------------------------------------------------------------------------------------


def _fe(path: str | None, etype: str, value: Any = _OMIT, detail: str = "") -> FieldError:
    label = _LABELS[etype]
    if etype in _NO_VALUE_TYPES or isinstance(value, _Omit):
        body = label
    else:
        body = f"{label}: {_go_value(value)}"
    if detail:
        body += f": {detail}"
    return FieldError("<nil>" if path is None else path, etype, body)


def _not_supported(path: str | None, value: Any, valid: Sequence[str]) -> FieldError:
    detail = ("supported values: " + ", ".join(_go_quote(v) for v in valid)) if valid else ""
    return _fe(path, NOT_SUPPORTED, value, detail)


def _too_long(path: str | None, max_len: int) -> FieldError:
    if max_len >= 0:
        detail = f"may not be more than {max_len} {'byte' if max_len == 1 else 'bytes'}"
    else:
        detail = "value is too long"
    return _fe(path, TOO_LONG, detail=detail)


def _too_many(path: str | None, actual: int, max_items: int) -> FieldError:
    if max_items >= 0:
        detail = f"must have at most {max_items} {'item' if max_items == 1 else 'items'}"
    else:
        detail = "has too many items"
    return _fe(path, TOO_MANY, actual if actual >= 0 else _OMIT, detail)


# field.Path with None as the nil path.
def _child(p: str | None, name: str) -> str:
    return name if p is None else f"{p}.{name}"


def _index(p: str | None, i: int) -> str:
    return f"[{i}]" if p is None else f"{p}[{i}]"


def _key(p: str | None, k: str) -> str:
    return f"[{k}]" if p is None else f"{p}[{k}]"


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


# --------------------------------------------------------------------------------------------------
# Pruning
# --------------------------------------------------------------------------------------------------


def prune(obj: Any, schema: Mapping[str, Any], *, is_resource_root: bool = True) -> tuple[Any, list[str]]:
    """Drop fields the schema does not declare; return ``(pruned copy, unknown field paths)``.

    Structural pruning: a field survives if it is in ``properties`` or the object has
    ``additionalProperties``; everything under ``x-kubernetes-preserve-unknown-fields: true`` is
    kept (declared properties below it are still pruned); ``x-kubernetes-embedded-resource``
    objects keep ``apiVersion``/``kind`` (strings) and ``metadata`` (an object, not pruned here).
    The resource root is treated as an embedded resource, so ``apiVersion``, ``kind`` and
    ``metadata`` stay (dropped silently only if they have the wrong JSON type).

    The paths are what the server reports for ``fieldValidation=Strict`` (``strict decoding error:
    unknown field "spec.foo"``) or ``Warn``: no leading dot, ``[i]`` for list items, sorted.
    """
    out = _clone(obj)
    s = _as_schema(schema)
    if is_resource_root:
        s = dict(s or {})
        s["x-kubernetes-embedded-resource"] = True
    unknown: list[str] = []
    _prune(out, s, (), unknown)
    return out, sorted(unknown)


def _append_key(parent: tuple[str, ...], k: str) -> tuple[str, ...]:
    return (*parent, ("." + k) if parent else k)


def _record(unknown: list[str] | None, parent: tuple[str, ...], k: str) -> None:
    if unknown is not None:
        unknown.append("".join(_append_key(parent, k)))


def _prune(x: Any, s: Mapping[str, Any] | None, parent: tuple[str, ...], unknown: list[str] | None) -> None:
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields") is True:
        _skip_prune(x, s, parent, unknown)
        return
    if isinstance(x, dict):
        if s is None:
            for k in list(x):
                _record(unknown, parent, k)
                del x[k]
            return
        props = _props(s)
        has_ap, ap = _additional(s)
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        for k in list(x):
            v = x[k]
            if embedded:
                if k in ("apiVersion", "kind") and isinstance(v, str):
                    continue
                if k == "metadata" and isinstance(v, dict):
                    continue
            if k in props:
                _prune(v, _as_schema(props[k]), _append_key(parent, k), unknown)
            elif has_ap:
                _prune(v, ap, _append_key(parent, k), unknown)
            else:
                if k not in _META_FIELDS or parent:
                    _record(unknown, parent, k)
                del x[k]
    elif isinstance(x, list):
        items = None if s is None else _items(s)
        for i, v in enumerate(x):
            _prune(v, items, (*parent, f"[{i}]"), unknown)


def _skip_prune(
    x: Any, s: Mapping[str, Any] | None, parent: tuple[str, ...], unknown: list[str] | None
) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        props = _props(s)
        has_ap, ap = _additional(s)
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        for k in list(x):
            if embedded and k in _META_FIELDS:
                continue
            if k in props:
                _prune(x[k], _as_schema(props[k]), _append_key(parent, k), unknown)
            elif has_ap:
                _prune(x[k], ap, _append_key(parent, k), unknown)
    elif isinstance(x, list):
        items = _items(s)
        for i, v in enumerate(x):
            _skip_prune(v, items, (*parent, f"[{i}]"), unknown)


def prune_nulls(obj: Any, schema: Mapping[str, Any]) -> Any:
    """Drop ``null`` fields whose schema is neither ``nullable`` nor has a ``default``.

    The server does this right after pruning (``PruneNonNullableNullsWithoutDefaults``), so a
    ``"field": null`` is treated as absent (it may then be defaulted, or be ``Required value``).
    Nulls inside lists are kept (and fail type validation).  Returns a new value.
    """
    out = _clone(obj)
    _prune_nulls(out, _as_schema(schema))
    return out


def _prune_nulls(x: Any, s: Mapping[str, Any] | None) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        props = _props(s)
        _, ap = _additional(s)
        for k in list(x):
            sub = _as_schema(props[k]) if k in props else ap
            if sub is None:
                continue
            v = x[k]
            if v is None and not sub.get("nullable") and sub.get("default") is None:
                del x[k]
                continue
            _prune_nulls(v, sub)
    elif isinstance(x, list):
        items = _items(s)
        for v in x:
            _prune_nulls(v, items)


# --------------------------------------------------------------------------------------------------
# Defaulting
# --------------------------------------------------------------------------------------------------


def apply_defaults(obj: Any, schema: Mapping[str, Any]) -> Any:
    """Return a copy of ``obj`` with the schema's ``default`` values applied (structural defaulting).

    A property's default is applied when the property is absent, or ``null`` while the property
    is not ``nullable``; the same holds for ``items`` and ``additionalProperties`` entries that are
    ``null``.  Defaulting recurses into objects, arrays and maps, including into the default
    values just inserted (so ``default: {}`` picks up nested defaults); inserted defaults are
    pruned against their schema first.  ``default: null`` counts as no default.
    """
    out = _clone(obj)
    return _default(out, _as_schema(schema))


def _default_value(s: Mapping[str, Any]) -> Any:
    d = _clone(s.get("default"))
    _prune(d, s, (), None)
    return d


def _has_default(s: Mapping[str, Any] | None) -> bool:
    return s is not None and s.get("default") is not None


def _default(x: Any, s: Mapping[str, Any] | None) -> Any:
    if s is None:
        return x
    if isinstance(x, dict):
        props = _props(s)
        for k, p in props.items():
            ps = _as_schema(p)
            if ps is None or not _has_default(ps):
                continue
            if k not in x or (x[k] is None and not ps.get("nullable")):
                x[k] = _default_value(ps)
        _, ap = _additional(s)
        for k in list(x):
            if k in props:
                x[k] = _default(x[k], _as_schema(props[k]))
            elif ap is not None:
                if x[k] is None and not ap.get("nullable") and _has_default(ap):
                    x[k] = _default_value(ap)
                x[k] = _default(x[k], ap)
    elif isinstance(x, list):
        items = _items(s)
        for i in range(len(x)):
            if x[i] is None and items is not None and not items.get("nullable") and _has_default(items):
                x[i] = _default_value(items)
            x[i] = _default(x[i], items)
    return x


# --------------------------------------------------------------------------------------------------
# kube-openapi validation (k8s.io/kube-openapi/pkg/validation/validate), error for error
# --------------------------------------------------------------------------------------------------

# The formats the server keeps (apiextensions StripUnsupportedFormatsPostProcess); "-" is ignored.
_SUPPORTED_FORMATS = frozenset(
    {
        "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
        "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
        "byte", "password", "date", "duration", "datetime",
    }
)  # fmt: skip


def _format(s: Mapping[str, Any]) -> str:
    f = s.get("format")
    if not isinstance(f, str) or not f:
        return ""
    return f if f.replace("-", "") in _SUPPORTED_FORMATS else ""


@dataclass
class _OErr:
    """An error as kube-openapi produces it (errors.Validation, or a composite errors.New)."""

    code: str
    name: str | None  # None: not an errors.Validation (anyOf/oneOf/allOf/not)
    message: str
    value: Any = None
    valid: Any = None
    values: Sequence[Any] = ()


class _Result:
    """validate.Result: errors deduplicated by message, plus the MatchCount used by anyOf/oneOf."""

    def __init__(self, errors: Sequence[_OErr] = ()) -> None:
        self.errors: list[_OErr] = []
        self._seen: set[str] = set()
        self.count = 0
        self.add(*errors)

    def add(self, *errors: _OErr) -> None:
        for e in errors:
            if e.message not in self._seen:
                self._seen.add(e.message)
                self.errors.append(e)

    def merge(self, *others: _Result | None) -> _Result:
        for o in others:
            if o is not None:
                self.add(*o.errors)
                self.count += o.count
        return self

    def inc(self) -> None:
        self.count += 1

    @property
    def valid(self) -> bool:
        return not self.errors


def _type_error(path: str, type_name: str, value: str) -> _OErr:
    return _OErr("type", path, f"{path} in body must be of type {type_name}: {_go_quote(value)}", value)


def _schema_info(v: Any) -> tuple[str, str]:
    k = _kind(v)
    if k == "integer":
        return k, "int64"
    if k == "number":
        return k, "float64"
    if k == "null":
        return "", ""
    return k, ""


def _validate_type(data: Any, s: Mapping[str, Any], path: str) -> _Result:
    types = _types(s)
    fmt = _format(s)
    ok = _Result()
    ok.inc()
    if data is None:
        if types and "null" not in types and not s.get("nullable"):
            return _Result([_type_error(path, ",".join(types), "null")])
        return ok
    kind = _kind(data)
    sch_type, data_fmt = _schema_info(data)
    is_float_int = sch_type == "number" and "integer" in types and _is_json_integer(float(data))
    is_int_float = sch_type == "integer" and "number" in types
    if (
        kind not in ("string", "array")
        and fmt
        and not (sch_type in types or data_fmt == fmt or is_float_int or is_int_float)
    ):
        return _Result([_type_error(path, fmt, data_fmt)])
    if not ("number" in types or "integer" in types) and fmt and kind in ("string", "array"):
        return ok
    if not (sch_type in types or is_float_int or is_int_float):
        return _Result([_type_error(path, ",".join(types), sch_type)])
    return ok


def _composite(msg: str) -> _OErr:
    return _OErr("composite", None, msg)


def _validate_props(data: Any, s: Mapping[str, Any], path: str) -> _Result:
    main = _Result()
    qpath = _go_quote(path)
    any_of = [x for x in (s.get("anyOf") or []) if isinstance(x, Mapping)]
    if any_of:
        best: _Result | None = None
        first_ok: _Result | None = None
        for sub in any_of:
            r = _validate_node(data, sub, path)
            if r.valid:
                best = None
                first_ok = first_ok or r
                break
            if best is None or r.count > best.count:
                best = r
        if first_ok is None:
            main.add(_composite(f"{qpath} must validate at least one schema (anyOf)"))
        main.merge(best if best is not None else first_ok)
    one_of = [x for x in (s.get("oneOf") or []) if isinstance(x, Mapping)]
    if one_of:
        best = None
        first_ok = None
        validated = 0
        for sub in one_of:
            r = _validate_node(data, sub, path)
            if r.valid:
                validated += 1
                best = None
                first_ok = first_ok or r
                continue
            if validated == 0 and (best is None or r.count > best.count):
                best = r
        if validated != 1:
            extra = "Found none valid" if validated == 0 else f"Found {validated} valid alternatives"
            main.add(_composite(f"{qpath} must validate one and only one schema (oneOf). {extra}"))
            main.merge(best)
        else:
            main.merge(first_ok)
    all_of = [x for x in (s.get("allOf") or []) if isinstance(x, Mapping)]
    if all_of:
        validated = 0
        for sub in all_of:
            r = _validate_node(data, sub, path)
            if r.valid:
                validated += 1
            main.merge(r)
        if validated != len(all_of):
            extra = ". None validated" if validated == 0 else ""
            main.add(_composite(f"{qpath} must validate all the schemas (allOf){extra}"))
    not_s = _as_schema(s.get("not"))
    if not_s is not None and _validate_node(data, not_s, path).valid:
        main.add(_composite(f"{qpath} must not validate the schema (not)"))
    main.inc()
    return main


def _validate_string(data: str, s: Mapping[str, Any], path: str) -> _Result | None:
    n = len(data)  # runes, as utf8.RuneCount
    max_len = s.get("maxLength")
    if max_len is not None and n > int(max_len):
        msg = f"{path} in body should be at most {int(max_len)} chars long"
        return _Result([_OErr("too_long", path, msg, data, int(max_len))])
    min_len = s.get("minLength")
    if min_len is not None and n < int(min_len):
        msg = f"{path} in body should be at least {int(min_len)} chars long"
        return _Result([_OErr("too_short", path, msg, data)])
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern:
        rx = _compile_pattern(pattern)
        if isinstance(rx, str):
            msg = f"{path} in body should match '{pattern}, but pattern is invalid: {rx}'"
            return _Result([_OErr("pattern", path, msg, data)])
        if not rx.search(data):
            return _Result([_OErr("pattern", path, f"{path} in body should match '{pattern}'", data)])
    return None


def _validate_format(data: str, s: Mapping[str, Any], path: str) -> _Result | None:
    fmt = _format(s)
    if _check_format(fmt, data):
        return None
    return _Result([_type_error(path, fmt, data)])


def _validate_number(data: int | float, s: Mapping[str, Any], path: str) -> _Result:
    res = _Result()
    res_mult, res_min, res_max = _Result(), _Result(), _Result()
    is_int = isinstance(data, int)
    mult = s.get("multipleOf")
    if isinstance(mult, (int, float)) and not isinstance(mult, bool):
        if is_int and float(mult).is_integer() and mult != 0:
            factor = int(mult)
            if factor < 0:
                msg = f"factor MultipleOf declared for {path} must be positive: {factor}"
                res_mult.add(_OErr("multiple_positive", path, msg, factor))
            elif data % factor != 0:
                msg = f"{path} in body should be a multiple of {factor}"
                res_mult.add(_OErr("multiple", path, msg, data))
        else:
            ffactor = float(mult)
            if ffactor < 0:
                msg = f"factor MultipleOf declared for {path} must be positive: {_go_float(ffactor)}"
                res_mult.add(_OErr("multiple_positive", path, msg, ffactor))
            else:
                fdata = float(data)
                if ffactor == 0:
                    quotient = math.inf
                elif ffactor < 1:
                    quotient = 1 / ffactor * fdata
                else:
                    quotient = fdata / ffactor
                if not _is_json_integer(quotient):
                    msg = f"{path} in body should be a multiple of {_go_float(ffactor)}"
                    res_mult.add(_OErr("multiple", path, msg, data))
    for key, excl_key, res_x, is_min in (
        ("minimum", "exclusiveMinimum", res_min, True),
        ("maximum", "exclusiveMaximum", res_max, False),
    ):
        bound = s.get(key)
        if not isinstance(bound, (int, float)) or isinstance(bound, bool):
            continue
        excl = bool(s.get(excl_key))
        if is_int:
            lim: int | float = int(float(bound))  # int64(max): truncation, as the server does
            shown = str(lim)
        else:
            lim = float(bound)
            shown = _go_float(lim)
        if is_min:
            failed = data <= lim if excl else data < lim
            word = "greater than" if excl else "greater than or equal to"
        else:
            failed = data >= lim if excl else data > lim
            word = "less than" if excl else "less than or equal to"
        if failed:
            res_x.add(
                _OErr("min" if is_min else "max", path, f"{path} in body should be {word} {shown}", data)
            )
    res.merge(res_mult, res_min, res_max)
    res.inc()
    return res


def _validate_slice(data: Sequence[Any], s: Mapping[str, Any], path: str) -> _Result:
    res = _Result()
    items = _items(s)
    if items is not None:
        for i, v in enumerate(data):
            res.merge(_validate_node(v, items, f"{path}[{i}]"))
    size = len(data)
    min_items = s.get("minItems")
    if min_items is not None and size < int(min_items):
        msg = f"{path} in body should have at least {int(min_items)} items"
        res.add(_OErr("min_items", path, msg, size))
    max_items = s.get("maxItems")
    if max_items is not None and size > int(max_items):
        msg = f"{path} in body should have at most {int(max_items)} items"
        res.add(_OErr("max_items", path, msg, size, int(max_items)))
    if s.get("uniqueItems"):
        seen: list[Any] = []
        for v in data:
            if any(_go_deep_equal(v, u) for u in seen):
                res.add(_OErr("unique", path, f"{path} in body shouldn't contain duplicates"))
                break
            seen.append(v)
    res.inc()
    return res


def _validate_enum(data: Any, s: Mapping[str, Any], path: str) -> _Result | None:
    enum = s.get("enum")
    if not isinstance(enum, (list, tuple)) or not enum:
        return None
    if data is None:
        # The server compares nothing against null (reflect on a nil value) and so rejects null;
        # listing null in the enum is honoured here as the intuitive escape hatch.
        if any(e is None for e in enum):
            return None
    elif any(e is not None and _json_equal(data, e) for e in enum):
        return None
    msg = f"{path} in body should be one of {_go_v(list(enum))}"
    return _Result([_OErr("enum", path, msg, data, values=list(enum))])


def _validate_object(data: Mapping[str, Any], s: Mapping[str, Any], path: str) -> _Result:
    n = len(data)
    min_p = s.get("minProperties")
    if min_p is not None and n < int(min_p):
        msg = f"{path} in body should have at least {int(min_p)} properties"
        return _Result([_OErr("too_few_props", path, msg, n, int(min_p))])
    max_p = s.get("maxProperties")
    if max_p is not None and n > int(max_p):
        msg = f"{path} in body should have at most {int(max_p)} properties"
        return _Result([_OErr("too_many_props", path, msg, n, int(max_p))])
    res = _Result()
    props = _props(s)
    ap = s.get("additionalProperties")
    if ap is False:
        for k in data:
            if k not in props:
                res.add(_OErr("not_allowed", path, f"{path}.{k} in body is a forbidden property", k))
    elif isinstance(ap, Mapping):
        for k, v in data.items():
            if k not in props:
                res.merge(_validate_node(v, ap, f"{path}.{k}"))
    for pname, pschema in props.items():
        if pname in data:
            rname = pname if path == "" else f"{path}.{pname}"
            res.merge(_validate_node(data[pname], _as_schema(pschema), rname))
    for k in s.get("required") or []:
        if k not in data:
            name = f"{path}.{k}"
            res.add(_OErr("required", name, f"{name} in body is required"))
    return res


def _validate_node(data: Any, s: Mapping[str, Any] | None, path: str) -> _Result:
    """SchemaValidator.Validate: the validators in kube-openapi's order, with its MatchCount."""
    res = _Result()
    if s is None:
        return res
    if data is None:
        res.merge(_validate_type(data, s, path), _validate_enum(data, s, path))
        return res
    kind = _kind(data)
    steps: list[_Result | None] = []
    if _types(s) or _format(s):
        steps.append(_validate_type(data, s, path))
    steps.append(_validate_props(data, s, path))
    if kind == "string":
        steps.append(_validate_string(data, s, path))
        if _format(s):
            steps.append(_validate_format(data, s, path))
    if kind in ("integer", "number"):
        steps.append(_validate_number(data, s, path))
    if kind == "array":
        steps.append(_validate_slice(data, s, path))
    steps.append(_validate_enum(data, s, path))
    if kind == "object":
        steps.append(_validate_object(data, s, path))
    for r in steps:
        res.merge(r)
        res.inc()
    res.inc()
    return res


def _to_field_errors(errors: Sequence[_OErr], fld: str | None) -> list[FieldError]:
    """apiextensions' kubeOpenAPIResultToFieldErrors."""
    out: list[FieldError] = []
    for e in errors:
        if e.name is None:
            out.append(_fe(fld, INVALID, "", e.message))
            continue
        path = fld
        if e.name and e.name != ".":
            path = _child(fld, e.name[1:] if e.name.startswith(".") else e.name)
        value = "" if e.value is None else e.value
        if e.code == "required":
            out.append(_fe(path, REQUIRED))
        elif e.code == "enum":
            values = [v if isinstance(v, str) else _go_json(v) for v in e.values]
            out.append(_not_supported(path, e.value, values))
        elif e.code == "too_long":
            out.append(_too_long(path, e.valid if isinstance(e.valid, int) else -1))
        elif e.code in ("max_items", "too_many_props"):
            actual = e.value if isinstance(e.value, int) else -1
            out.append(_too_many(path, actual, e.valid if isinstance(e.valid, int) else -1))
        elif e.code == "type":
            out.append(_fe(path, TYPE_INVALID, value, e.message))
        else:
            out.append(_fe(path, INVALID, value, e.message))
    return out


def _openapi_errors(
    obj: Any, schema: Mapping[str, Any] | None, root: str, fld: str | None
) -> list[FieldError]:
    return _to_field_errors(_validate_node(obj, schema, root).errors, fld)


# --------------------------------------------------------------------------------------------------
# x-kubernetes-list-type and x-kubernetes-embedded-resource checks
# --------------------------------------------------------------------------------------------------


def _scalar_key(v: Any) -> Any:
    """A hashable identity for a JSON value with Go's map[interface{}] semantics for scalars."""
    if isinstance(v, (Mapping, list, tuple)):
        return ("json", _go_json(v))
    return (type(v).__name__, v)


class _Unspecified:
    pass


_UNSPECIFIED = _Unspecified()


def _list_type_errors(path: str | None, s: Mapping[str, Any] | None, obj: Any) -> list[FieldError]:
    if s is None:
        return []
    if isinstance(obj, (list, tuple)):
        return _list_type_array(path, s, obj)
    if isinstance(obj, Mapping):
        errs: list[FieldError] = []
        _, ap = _additional(s)
        if ap is not None:
            for k, v in obj.items():
                errs += _list_type_errors(_key(path, k), ap, v)
        props = _props(s)
        for k, v in obj.items():
            if k in props:
                errs += _list_type_errors(_child(path, k), _as_schema(props[k]), v)
        return errs
    return []


def _first_duplicates(keys: Sequence[Any]) -> list[int]:
    """Index of each value's second appearance (the server reports only that one)."""
    seen: dict[Any, int] = {}
    out: list[int] = []
    for i, k in enumerate(keys):
        seen[k] = seen.get(k, 0) + 1
        if seen[k] == 2:
            out.append(i)
    return out


def _list_type_array(path: str | None, s: Mapping[str, Any], obj: Sequence[Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    list_type = s.get("x-kubernetes-list-type")
    if list_type == "set" and len(obj) > 1:
        for i in _first_duplicates([_scalar_key(x) for x in obj]):
            errs.append(_fe(_index(path, i), DUPLICATE, obj[i]))
    elif list_type == "map":
        bad = next((i for i, x in enumerate(obj) if x is not None and not isinstance(x, Mapping)), None)
        if bad is not None:
            errs.append(
                _fe(_index(path, bad), INVALID, obj[bad], "must be an object for an array of list-type map")
            )
        elif len(obj) > 1:
            key_fields = [str(k) for k in (s.get("x-kubernetes-list-map-keys") or [])]
            keys = []
            for x in obj:
                row = x if isinstance(x, Mapping) else {}
                keys.append(tuple(_scalar_key(row.get(k, _UNSPECIFIED)) for k in key_fields))
            for i in _first_duplicates(keys):
                row = obj[i] if isinstance(obj[i], Mapping) else {}
                errs.append(_fe(_index(path, i), DUPLICATE, {k: row.get(k) for k in key_fields}))
    items = _items(s)
    if items is not None:
        for i, v in enumerate(obj):
            errs += _list_type_errors(_index(path, i), items, v)
    return errs


_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def _embedded_errors(path: str | None, x: Any, s: Mapping[str, Any] | None) -> list[FieldError]:
    """schemaobjectmeta.Validate: apiVersion/kind of x-kubernetes-embedded-resource objects."""
    if s is None:
        return []
    errs: list[FieldError] = []
    if isinstance(x, Mapping):
        if s.get("x-kubernetes-embedded-resource"):
            errs += _embedded_resource_errors(path, x)
        props = _props(s)
        _, ap = _additional(s)
        for k, v in x.items():
            if k in props:
                errs += _embedded_errors(_child(path, k), v, _as_schema(props[k]))
            elif ap is not None:
                errs += _embedded_errors(_key(path, k), v, ap)
    elif isinstance(x, (list, tuple)):
        items = _items(s)
        for i, v in enumerate(x):
            errs += _embedded_errors(_index(path, i), v, items)
    return errs


def _embedded_resource_errors(path: str | None, x: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if "apiVersion" not in x:
        errs.append(_fe(_child(path, "apiVersion"), REQUIRED, detail="must not be empty"))
    if "kind" not in x:
        errs.append(_fe(_child(path, "kind"), REQUIRED, detail="must not be empty"))
    for k, v in x.items():
        if k == "apiVersion":
            p = _child(path, "apiVersion")
            if not isinstance(v, str):
                errs.append(_fe(p, INVALID, v, "must be a string"))
            elif not v:
                errs.append(_fe(p, INVALID, v, "must not be empty"))
            elif v != "/" and v.count("/") > 1:
                errs.append(_fe(p, INVALID, v, f"unexpected GroupVersion string: {v}"))
        elif k == "kind":
            p = _child(path, "kind")
            if not isinstance(v, str):
                errs.append(_fe(p, INVALID, v, "must be a string"))
            elif not v:
                errs.append(_fe(p, INVALID, v, "must not be empty"))
            else:
                problems = []
                if len(v) > 63:
                    problems.append("must be no more than 63 characters")
                if not _DNS1035.match(v.lower()):
                    problems.append(_DNS1035_MSG)
                if problems:
                    detail = "may have mixed case, but should otherwise match: " + ",".join(problems)
                    errs.append(_fe(p, INVALID, v, detail))
    return errs


# --------------------------------------------------------------------------------------------------
# Public validation entry points
# --------------------------------------------------------------------------------------------------


def validate(obj: Any, schema: Mapping[str, Any], *, root_path: str = "") -> list[FieldError]:
    """Validate ``obj`` against an OpenAPI v3 (Kubernetes structural) schema, as the server does.

    Supported: ``type`` (object, array, string, integer, number, boolean), ``nullable``,
    ``required``, ``enum``, ``pattern``, ``minLength``/``maxLength``, ``minimum``/``maximum`` with
    boolean ``exclusiveMinimum``/``exclusiveMaximum``, ``multipleOf``, ``minItems``/``maxItems``,
    ``uniqueItems``, ``minProperties``/``maxProperties``, ``properties``, ``additionalProperties``
    (bool or schema), ``items``, ``allOf``/``anyOf``/``oneOf``/``not``, ``format`` (see module
    docstring), ``x-kubernetes-int-or-string``, ``x-kubernetes-list-type: set|map`` with
    ``x-kubernetes-list-map-keys`` (``Duplicate value``) and ``x-kubernetes-embedded-resource``
    (``apiVersion``/``kind`` required).  ``x-kubernetes-validations`` (CEL) is NOT supported and is
    ignored.  Like the server, a JSON float with an integral value is accepted as an integer; a
    bool never is.

    ``root_path`` names ``obj`` (e.g. ``"spec"``) and prefixes every path and message.  Errors
    come back in the server's order: schema errors, then embedded-resource, then list-type ones.
    """
    s = _as_schema(schema)
    errs = _openapi_errors(obj, s, root_path, None)
    root = root_path or None
    errs += _embedded_errors(root, obj, s)
    errs += _list_type_errors(root, s, obj)
    return errs


def validate_custom_resource(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[FieldError]:
    """The schema check the server runs on a custom resource's create/update.

    Validates the whole object against the version's ``openAPIV3Schema`` except ``metadata``: of
    the schema's ``metadata`` only what a CRD may say there (``type: object`` and the ``name`` /
    ``generateName`` properties) is applied; ObjectMeta itself is validated elsewhere.
    """
    s = _as_schema(schema)
    if s is not None and "metadata" in _props(s):
        meta = _as_schema(_props(s)["metadata"]) or {}
        kept = {k: v for k, v in _props(meta).items() if k in ("name", "generateName")}
        restricted: dict[str, Any] = {"type": "object"}
        if kept:
            restricted["properties"] = kept
        s = {**s, "properties": {**_props(s), "metadata": restricted}}
    return validate(obj, s or {})


def format_invalid(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> str:
    """The message of the 422 ``Invalid`` Status (apierrors.NewInvalid).

    ``Kind.group "name" is invalid: <err>`` for one distinct error, ``[<err1>, <err2>]`` for
    several (identical errors are listed once), just ``... is invalid`` for none.
    """
    qualified = f"{kind}.{group}" if group else kind
    head = f"{qualified} {_go_quote(name)} is invalid"
    seen: list[str] = []
    for e in errors:
        text = str(e)
        if text not in seen:
            seen.append(text)
    if not seen:
        return head
    if len(seen) == 1:
        return f"{head}: {seen[0]}"
    return f"{head}: [{', '.join(seen)}]"


# --------------------------------------------------------------------------------------------------
# Formats (kube-openapi strfmt.Default, loosely)
# --------------------------------------------------------------------------------------------------

_RX_UUID = {
    "uuid": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I),
    "uuid3": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I),
    "uuid4": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I),
    "uuid5": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I),
}
_RX_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$", re.ASCII)
_RX_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(z|[+-]\d{2}:\d{2})$", re.ASCII)
_RX_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
_RX_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_RX_SCALA_DURATION = re.compile(r"^\s*(?:\d+\s*[A-Za-zµ]+\s*)+$")
_RX_SCALA_PART = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_DURATION_UNITS = (
    ("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
    ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"),
)  # fmt: skip
_RX_HOSTNAME = re.compile(
    r"^([^\W_]((-?[^\W_]{0,62})?)|([^\W_](([^\W_-]|-){0,61}[^\W_])?\.)+[^\W_](-?[^\W_]){1,62})$"
)
_RX_MAC = re.compile(
    r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}"
    r"|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2,9})$"
)
_RX_EMAIL = re.compile(r"^(?:[^<>]*<\s*)?[^@\s<>]+@[^@\s<>]+(?:\s*>)?$")
_RX_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_BYTE = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*"
_RX_RGB = re.compile(rf"^rgb\({_BYTE},{_BYTE},{_BYTE}\)$", re.ASCII)
_RX_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", re.ASCII)
_RX_CREDITCARD = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
    r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
)
_RX_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _is_date(s: str) -> bool:
    m = _RX_DATE.match(s)
    if not m:
        return False
    try:
        _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    return True


def _is_datetime(s: str) -> bool:
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _RX_TIME.match(parts[1])
    if m is None:
        return False
    return m[1] <= "23" and m[2] <= "59" and m[3] <= "59"


def _is_duration(s: str) -> bool:
    if s == "0" or _RX_GO_DURATION.match(s):
        return True
    if not _RX_SCALA_DURATION.match(s):
        return False
    for _, unit in _RX_SCALA_PART.findall(s):
        u = unit.strip().lower()
        for variants in _DURATION_UNITS:
            if u in variants or u.startswith(variants[-1]):
                return True
    return False


def _is_uri(s: str) -> bool:
    if not s or any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return False
    if _RX_URI_SCHEME.match(s):
        rest = s.split(":", 1)[1]
        if rest.startswith("//"):
            host = rest[2:].split("/", 1)[0].split("?", 1)[0]
            return " " not in host
        return True
    return s.startswith("/")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def _is_isbn10(s: str) -> bool:
    s = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"[0-9]{9}[0-9X]", s):
        return False
    total = sum((i + 1) * (10 if c == "X" else int(c)) for i, c in enumerate(s))
    return total % 11 == 0


def _is_isbn13(s: str) -> bool:
    s = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"[0-9]{13}", s):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(s))
    return total % 10 == 0


def _is_ip(s: str, version: int) -> bool:
    if "%" in s:
        return False
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return ("." in s) if version == 4 else (":" in s)


def _is_cidr(s: str) -> bool:
    if "/" not in s or "%" in s:
        return False
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return True


def _is_base64(s: str) -> bool:
    if not _RX_BASE64.match(s):
        return False
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _check_format(fmt: str, s: str) -> bool:
    n = fmt.replace("-", "")
    checks: dict[str, Any] = {
        "datetime": _is_datetime,
        "date": _is_date,
        "duration": _is_duration,
        "byte": _is_base64,
        "uri": _is_uri,
        "email": lambda v: bool(_RX_EMAIL.match(v)),
        "hostname": lambda v: (
            bool(_RX_HOSTNAME.match(v)) and len(v) <= 255 and all(len(p) <= 63 for p in v.split("."))
        ),
        "ipv4": lambda v: _is_ip(v, 4),
        "ipv6": lambda v: _is_ip(v, 6),
        "cidr": _is_cidr,
        "mac": lambda v: bool(_RX_MAC.match(v)),
        "isbn": lambda v: _is_isbn10(v) or _is_isbn13(v),
        "isbn10": _is_isbn10,
        "isbn13": _is_isbn13,
        "creditcard": lambda v: (
            bool(_RX_CREDITCARD.match(re.sub(r"[^0-9]+", "", v))) and _luhn(re.sub(r"[^0-9]+", "", v))
        ),
        "ssn": lambda v: bool(_RX_SSN.match(v)),
        "hexcolor": lambda v: bool(_RX_HEXCOLOR.match(v)),
        "rgbcolor": lambda v: bool(_RX_RGB.match(v)),
        "bsonobjectid": lambda v: bool(re.fullmatch(r"[0-9a-fA-F]{24}", v)),
        "password": lambda v: True,
    }
    if n in _RX_UUID:
        return bool(_RX_UUID[n].match(s))
    check = checks.get(n)
    return True if check is None else bool(check(s))


# --------------------------------------------------------------------------------------------------
# Patterns: Go RE2 syntax translated to Python re
# --------------------------------------------------------------------------------------------------

_POSIX_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "0-9A-Za-z", "upper": "A-Z", "lower": "a-z",
    "space": r"\t\n\v\f\r ", "xdigit": "0-9A-Fa-f", "word": "0-9A-Za-z_", "blank": r"\t ",
    "punct": r"!-/:-@\[-`{-~", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": "!-~",
}  # fmt: skip
_UNSUPPORTED_PERL = ("(?=", "(?!", "(?<=", "(?<!")


def _re2_problem(pattern: str) -> str | None:
    """The Go regexp.Compile error for RE2-only restrictions Python would accept."""
    for bad in _UNSUPPORTED_PERL:
        if bad in pattern:
            return f"error parsing regexp: invalid or unsupported Perl syntax: `{bad}`"
    m = re.search(r"(?<!\\)(?:\\\\)*(\\[1-9])", pattern)
    if m:
        return f"error parsing regexp: invalid escape sequence: `{m[1]}`"
    return None


def _translate_pattern(p: str) -> str:
    multiline = bool(re.search(r"\(\?[a-zA-Z]*m", p))
    out: list[str] = []
    i, n = 0, len(p)
    in_class = False
    while i < n:
        c = p[i]
        if c == "\\" and i + 1 < n:
            nxt = p[i + 1]
            if nxt == "z" and not in_class:
                out.append(r"\Z")
            elif nxt in "pP" and i + 2 < n:
                # \pL / \p{L} / \p{N}: approximate the two Unicode classes CRDs use
                if p[i + 2] == "{":
                    end = p.find("}", i + 3)
                    name = p[i + 3 : end] if end != -1 else ""
                    consumed = (end + 1 - i) if end != -1 else 2
                else:
                    name, consumed = p[i + 2], 3
                cls = {"L": r"^\W\d_", "N": r"\d", "Nd": r"\d"}.get(name)
                if cls is None:
                    raise re.error(f"unsupported Unicode class \\{nxt}{{{name}}}")
                negate = nxt == "P"
                if in_class:
                    if negate:
                        raise re.error(f"unsupported negated class \\{nxt}{{{name}}} in brackets")
                    # best effort: digits, or ASCII + Latin letters
                    out.append(r"\d" if cls == r"\d" else "a-zA-Z\u00c0-\u024f")
                elif cls == r"\d":
                    out.append(r"\D" if negate else r"\d")
                else:
                    out.append(r"[\W\d_]" if negate else r"[^\W\d_]")
                i += consumed
                continue
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "[" and p.startswith("[:", i):
                end = p.find(":]", i + 2)
                name = p[i + 2 : end] if end != -1 else ""
                if name in _POSIX_CLASSES:
                    out.append(_POSIX_CLASSES[name])
                    i = end + 2
                    continue
            if c == "[":
                out.append(r"\[")
                i += 1
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and p[i] == "^":
                out.append("^")
                i += 1
            if i < n and p[i] == "]":
                out.append(r"\]")
                i += 1
            continue
        if c == "$" and not multiline:
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _compile_pattern(pattern: str) -> re.Pattern[str] | str:
    """The compiled pattern, or the compile error as text."""
    problem = _re2_problem(pattern)
    if problem:
        return problem
    try:
        translated = _translate_pattern(pattern)
        flags = 0 if re.search(r"\\[pP]", pattern) else re.ASCII
        return re.compile(translated, flags)
    except re.error as e:
        return f"error parsing regexp: {e}"


# --------------------------------------------------------------------------------------------------
# CRD schema checks (structural schema + the main apiextensions OpenAPI restrictions)
# --------------------------------------------------------------------------------------------------

_ROOT, _ITEM, _FIELD = 0, 1, 2
_V3_TYPES = ("array", "boolean", "integer", "number", "object", "string")


@dataclass(frozen=True)
class _Ssv:
    allow_defaults: bool = True
    disallow_reason: str = ""
    inside_meta: bool = False


def check_structural(schema: Mapping[str, Any], *, path: str = _DEFAULT_SCHEMA_PATH) -> list[str]:
    """Errors the server returns when a CRD's ``openAPIV3Schema`` is not acceptable.

    Each entry is ``"<field>: <message>"`` as printed by kube-apiserver, with fields under
    ``path`` (default ``spec.versions[0].schema.openAPIV3Schema``; pass the real index).  Covered:

    * structural invariants (``ValidateStructural``): ``type`` required at every level (except
      ``x-kubernetes-int-or-string`` / ``x-kubernetes-preserve-unknown-fields``), ``items``
      required for arrays, object at the root, no ``additionalProperties`` at the root, root
      ``metadata`` restricted to ``name``/``generateName``, embedded-resource rules, no ``type`` /
      ``default`` / ``nullable`` / ``description`` / ... inside ``anyOf``/``allOf``/``oneOf``/``not``
      (the int-or-string ``anyOf`` excepted), value validations only on declared fields, valid
      ``pattern`` (sorted, as the server sorts them);
    * apiextensions restrictions: unknown ``type``, ``$ref``, ``id``, ``patternProperties``,
      ``definitions``, ``dependencies``, ``additionalItems``, ``uniqueItems: true``,
      ``additionalProperties`` with ``properties``, ``x-kubernetes-preserve-unknown-fields:
      false``, list/map-type rules, defaults in top-level metadata;
    * defaults (only when all of the above pass): must be pruned and valid against their schema.

    Not covered: CEL (``x-kubernetes-validations``) compilation and cost, and the ObjectMeta
    validation of defaults inside embedded resources.
    """
    s = _as_schema(schema) or {}
    structural = _structural_invariants(s, _ROOT, path) + _completeness(s, s, path, path)
    errs = sorted(str(e) for e in structural)
    errs += [str(e) for e in _openapi_schema_checks(s, path, True, _Ssv())]
    if not errs:
        errs += [str(e) for e in _default_checks(s, path, is_root=True)]
    return errs


def _truthy_keys(m: Mapping[str, Any]) -> list[str]:
    return [k for k, v in m.items() if v not in (None, False, "", {}, [])]


def _is_ios_any_of(s: Mapping[str, Any]) -> bool:
    a = s.get("anyOf")
    return isinstance(a, (list, tuple)) and list(a) == [{"type": "integer"}, {"type": "string"}]


def _is_ios_all_of(s: Mapping[str, Any]) -> bool:
    a = s.get("allOf")
    return isinstance(a, (list, tuple)) and len(a) >= 1 and isinstance(a[0], Mapping) and _is_ios_any_of(a[0])


def _structural_invariants(s: Mapping[str, Any] | None, lvl: int, p: str) -> list[FieldError]:
    if s is None:
        return []
    errs: list[FieldError] = []
    t = _stype(s)
    items = _items(s)
    if t == "array" and items is None:
        errs.append(_fe(_child(p, "items"), REQUIRED, detail="must be specified"))
    errs += _structural_invariants(items, _ITEM, _child(p, "items"))
    props = _props(s)
    for k, v in props.items():
        errs += _structural_invariants(_as_schema(v), _FIELD, _key(_child(p, "properties"), k))
    has_ap, ap = _additional(s)
    if has_ap:
        if lvl == _ROOT:
            errs.append(
                _fe(_child(p, "additionalProperties"), FORBIDDEN, detail="must not be used at the root")
            )
        errs += _structural_invariants(ap, _FIELD, _child(p, "additionalProperties"))
    ios = bool(s.get("x-kubernetes-int-or-string"))
    pu = s.get("x-kubernetes-preserve-unknown-fields") is True
    emb = bool(s.get("x-kubernetes-embedded-resource"))
    if ios and pu:
        detail = "must be false if x-kubernetes-int-or-string is true"
        errs.append(_fe(_child(p, "x-kubernetes-preserve-unknown-fields"), INVALID, True, detail))
    if ios and emb:
        detail = "must be false if x-kubernetes-int-or-string is true"
        errs.append(_fe(_child(p, "x-kubernetes-embedded-resource"), INVALID, True, detail))
    errs += _value_validation(s, _is_ios_any_of(s), _is_ios_all_of(s), lvl, p)
    check_meta = lvl == _ROOT or emb
    if emb and t != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        if not t:
            errs.append(_fe(_child(p, "type"), REQUIRED, detail=detail))
        else:
            errs.append(_fe(_child(p, "type"), INVALID, t, detail))
    elif not t and not ios and not pu:
        detail = {
            _ROOT: "must not be empty at the root",
            _ITEM: "must not be empty for specified array items",
            _FIELD: "must not be empty for specified object fields",
        }[lvl]
        errs.append(_fe(_child(p, "type"), REQUIRED, detail=detail))
    if emb and has_ap:
        detail = "must not be used if x-kubernetes-embedded-resource is set"
        errs.append(_fe(_child(p, "additionalProperties"), FORBIDDEN, detail=detail))
    if lvl == _ROOT and t and t != "object":
        errs.append(_fe(_child(p, "type"), INVALID, t, "must be object at the root"))
    pp = _child(p, "properties")
    if check_meta:
        for name, want in (("kind", "string"), ("apiVersion", "string"), ("metadata", "object")):
            sub = _as_schema(props.get(name))
            if name in props and (sub is None or _stype(sub) != want):
                got = "" if sub is None else _stype(sub)
                errs.append(_fe(_child(_key(pp, name), "type"), INVALID, got, f"must be {want}"))
    meta = _as_schema(props.get("metadata"))
    if meta is not None and lvl == _ROOT:
        rest = dict(meta)
        mprops = _props(meta)
        names = set(mprops)
        if names and names <= {"name", "generateName"}:
            rest.pop("properties", None)
        rest.pop("type", None)
        rest.pop("default", None)
        if _truthy_keys(rest):
            detail = (
                "must not specify anything other than name and generateName, "
                "but metadata is implicitly specified"
            )
            errs.append(_fe(_key(pp, "metadata"), FORBIDDEN, detail=detail))
    if emb and not pu and not props:
        detail = (
            "must not be empty if x-kubernetes-embedded-resource is true "
            "without x-kubernetes-preserve-unknown-fields"
        )
        errs.append(_fe(_child(p, "properties"), REQUIRED, detail=detail))
    return errs


def _value_validation(
    v: Mapping[str, Any], skip_any: bool, skip_all_any: bool, lvl: int, p: str
) -> list[FieldError]:
    errs: list[FieldError] = []
    if not skip_any:
        for i, sub in enumerate(v.get("anyOf") or []):
            errs += _nested_value_validation(
                _as_schema(sub), False, False, lvl, _index(_child(p, "anyOf"), i)
            )
    for i, sub in enumerate(v.get("allOf") or []):
        errs += _nested_value_validation(
            _as_schema(sub), skip_all_any and i == 0, False, lvl, _index(_child(p, "allOf"), i)
        )
    for i, sub in enumerate(v.get("oneOf") or []):
        errs += _nested_value_validation(_as_schema(sub), False, False, lvl, _index(_child(p, "oneOf"), i))
    errs += _nested_value_validation(_as_schema(v.get("not")), False, False, lvl, _child(p, "not"))
    pattern = v.get("pattern")
    if isinstance(pattern, str) and pattern:
        compiled = _compile_pattern(pattern)
        if isinstance(compiled, str):
            detail = f"must be a valid regular expression, but isn't: {compiled}"
            errs.append(_fe(_child(p, "pattern"), INVALID, pattern, detail))
    return errs


_NESTED_FORBIDDEN = (
    ("type", lambda v: bool(v), "must be empty to be structural"),
    ("additionalProperties", lambda v: v is not None, "must be undefined to be structural"),
    ("default", lambda v: v is not None, "must be undefined to be structural"),
    ("title", lambda v: bool(v), "must be empty to be structural"),
    ("description", lambda v: bool(v), "must be empty to be structural"),
    ("nullable", lambda v: v is True, "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", lambda v: v is True, "must be false to be structural"),
    ("x-kubernetes-embedded-resource", lambda v: v is True, "must be false to be structural"),
    ("x-kubernetes-int-or-string", lambda v: v is True, "must be false to be structural"),
    ("x-kubernetes-list-map-keys", lambda v: bool(v), "must be empty to be structural"),
    ("x-kubernetes-list-type", lambda v: v is not None, "must be undefined to be structural"),
)


def _nested_value_validation(
    v: Mapping[str, Any] | None, skip_any: bool, skip_all_any: bool, lvl: int, p: str
) -> list[FieldError]:
    if v is None:
        return []
    errs = _value_validation(v, skip_any, skip_all_any, lvl, p)
    errs += _nested_value_validation(_items(v), False, False, lvl, _child(p, "items"))
    props = _props(v)
    for k, f in props.items():
        errs += _nested_value_validation(
            _as_schema(f), False, False, _FIELD, _key(_child(p, "properties"), k)
        )
    for key, present, detail in _NESTED_FORBIDDEN:
        if key in v and present(v[key]):
            errs.append(_fe(_child(p, key), FORBIDDEN, detail=detail))
    if "metadata" in props:
        errs.append(
            _fe(
                _key(_child(p, "properties"), "metadata"),
                FORBIDDEN,
                detail="must not be specified in a nested context",
            )
        )
    return errs


def _completeness(
    v: Mapping[str, Any] | None, s: Mapping[str, Any] | None, sp: str, vp: str
) -> list[FieldError]:
    """validateValueValidationCompleteness: what anyOf/allOf/oneOf/not mention must exist outside."""
    if v is None:
        return []
    if s is None:
        return [_fe(sp, REQUIRED, detail=f"because it is defined in {vp}")]
    errs = _nested_completeness(_as_schema(v.get("not")), s, sp, _child(vp, "not"))
    for key in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(v.get(key) or []):
            errs += _nested_completeness(_as_schema(sub), s, sp, _index(_child(vp, key), i))
    return errs


def _nested_completeness(
    v: Mapping[str, Any] | None, s: Mapping[str, Any], sp: str, vp: str
) -> list[FieldError]:
    if v is None:
        return []
    errs = _completeness(v, s, sp, vp)
    v_items = _items(v)
    if v_items is not None:
        s_items = _items(s)
        if s_items is None:
            errs.append(
                _fe(_child(sp, "items"), REQUIRED, detail=f"because it is defined in {_child(vp, 'items')}")
            )
        else:
            errs += _nested_completeness(v_items, s_items, _child(sp, "items"), _child(vp, "items"))
    s_props = _props(s)
    for k, vf in _props(v).items():
        spk = _key(_child(sp, "properties"), k)
        vpk = _key(_child(vp, "properties"), k)
        sf = _as_schema(s_props.get(k))
        if k not in s_props or sf is None:
            errs.append(_fe(spk, REQUIRED, detail=f"because it is defined in {vpk}"))
        else:
            errs += _nested_completeness(_as_schema(vf), sf, spk, vpk)
    return errs


def _ssv_checks(s: Mapping[str, Any], p: str, ssv: _Ssv) -> list[FieldError]:
    errs: list[FieldError] = []
    t = s.get("type")
    if isinstance(t, str) and t and t not in _V3_TYPES:
        errs.append(_not_supported(_child(p, "type"), t, _V3_TYPES))
    if "default" in s and not ssv.allow_defaults:
        detail = "must not be set" + (f" {ssv.disallow_reason}" if ssv.disallow_reason else "")
        errs.append(_fe(_child(p, "default"), FORBIDDEN, detail=detail))
    if s.get("id"):
        errs.append(_fe(_child(p, "id"), FORBIDDEN, detail="id is not supported"))
    if s.get("additionalItems") is not None:
        errs.append(_fe(_child(p, "additionalItems"), FORBIDDEN, detail="additionalItems is not supported"))
    for key in ("patternProperties", "definitions"):
        if s.get(key):
            errs.append(_fe(_child(p, key), FORBIDDEN, detail=f"{key} is not supported"))
    if s.get("dependencies") is not None:
        errs.append(_fe(_child(p, "dependencies"), FORBIDDEN, detail="dependencies is not supported"))
    if s.get("$ref") is not None:
        errs.append(_fe(_child(p, "$ref"), FORBIDDEN, detail="$ref is not supported"))
    if t == "null":
        detail = "type cannot be set to null, use nullable as an alternative"
        errs.append(_fe(_child(p, "type"), FORBIDDEN, detail=detail))
    if isinstance(s.get("items"), (list, tuple)):
        detail = "items must be a schema object and not an array"
        errs.append(_fe(_child(p, "items"), FORBIDDEN, detail=detail))
    if ssv.inside_meta and s.get("x-kubernetes-embedded-resource"):
        detail = "must not be used inside of resource meta"
        errs.append(_fe(_child(p, "x-kubernetes-embedded-resource"), FORBIDDEN, detail=detail))
    return errs


def _openapi_schema_checks(s: Mapping[str, Any] | None, p: str, is_root: bool, ssv: _Ssv) -> list[FieldError]:
    """ValidateCustomResourceDefinitionOpenAPISchema (the parts that are not CEL)."""
    if s is None:
        return []
    errs = _ssv_checks(s, p, ssv)
    if s.get("uniqueItems") is True:
        detail = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        errs.append(_fe(_child(p, "uniqueItems"), FORBIDDEN, detail=detail))
    props = _props(s)
    ap = s.get("additionalProperties")
    if ap is not None:
        if props and (ap is False or isinstance(ap, Mapping)):
            detail = "additionalProperties and properties are mutual exclusive"
            errs.append(_fe(_child(p, "additionalProperties"), FORBIDDEN, detail=detail))
        sub = ssv
        if ssv.inside_meta:
            sub = replace(
                ssv,
                allow_defaults=False,
                disallow_reason="inside additionalProperties applying to object metadata",
            )
        errs += _openapi_schema_checks(_as_schema(ap), _child(p, "additionalProperties"), False, sub)
    emb = bool(s.get("x-kubernetes-embedded-resource"))
    for name, ps in props.items():
        sub = ssv
        if (is_root or emb) and name in _META_FIELDS:
            sub = replace(sub, inside_meta=True)
            if is_root:
                sub = replace(sub, allow_defaults=False, disallow_reason=f"in top-level {name}")
        errs += _openapi_schema_checks(_as_schema(ps), _key(_child(p, "properties"), name), False, sub)
    errs += _openapi_schema_checks(_as_schema(s.get("not")), _child(p, "not"), False, ssv)
    for key in ("allOf", "oneOf", "anyOf"):
        for i, sub_s in enumerate(s.get(key) or []):
            errs += _openapi_schema_checks(_as_schema(sub_s), _index(_child(p, key), i), False, ssv)
    errs += _openapi_schema_checks(_items(s), _child(p, "items"), False, ssv)
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        detail = "must be true or undefined"
        errs.append(_fe(_child(p, "x-kubernetes-preserve-unknown-fields"), INVALID, False, detail))
    errs += _list_schema_checks(s, p)
    return errs


def _list_schema_checks(s: Mapping[str, Any], p: str) -> list[FieldError]:
    errs: list[FieldError] = []
    t = _stype(s)
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None:
        detail = "must be object if x-kubernetes-map-type is specified"
        if t != "object":
            errs.append(
                _fe(_child(p, "type"), REQUIRED, detail=detail)
                if not t
                else _fe(_child(p, "type"), INVALID, t, detail)
            )
        if map_type not in ("atomic", "granular"):
            errs.append(_not_supported(_child(p, "x-kubernetes-map-type"), map_type, ["atomic", "granular"]))
    list_type = s.get("x-kubernetes-list-type")
    keys = list(s.get("x-kubernetes-list-map-keys") or [])
    if list_type is not None and t != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        errs.append(
            _fe(_child(p, "type"), REQUIRED, detail=detail)
            if not t
            else _fe(_child(p, "type"), INVALID, t, detail)
        )
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(_not_supported(_child(p, "x-kubernetes-list-type"), list_type, ["atomic", "set", "map"]))
    if keys:
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            errs.append(_fe(_child(p, "x-kubernetes-list-type"), REQUIRED, detail=detail))
        elif list_type != "map":
            errs.append(_fe(_child(p, "x-kubernetes-list-type"), INVALID, list_type, detail))
    if list_type == "map":
        if not keys:
            detail = "must not be empty if x-kubernetes-list-type is map"
            errs.append(_fe(_child(p, "x-kubernetes-list-map-keys"), REQUIRED, detail=detail))
        items = _items(s)
        if items is None:
            detail = "must have a schema if x-kubernetes-list-type is map"
            errs.append(_fe(_child(p, "items"), REQUIRED, detail=detail))
        elif _stype(items) != "object":
            detail = "must be object if parent array's x-kubernetes-list-type is map"
            errs.append(_fe(_child(_child(p, "items"), "type"), INVALID, _stype(items), detail))
        else:
            iprops = _props(items)
            seen: set[str] = set()
            for k in keys:
                ks = _as_schema(iprops.get(k))
                if ks is None:
                    detail = "entries must all be names of item properties"
                    errs.append(_fe(_child(p, "x-kubernetes-list-map-keys"), INVALID, keys, detail))
                elif _stype(ks) in ("array", "object"):
                    detail = "must be a scalar type if parent array's x-kubernetes-list-type is map"
                    kp = _child(_key(_child(_child(p, "items"), "properties"), k), "type")
                    errs.append(_fe(kp, INVALID, _stype(items), detail))
                if k in seen:
                    detail = "must not contain duplicate entries"
                    errs.append(_fe(_child(p, "x-kubernetes-list-map-keys"), INVALID, keys, detail))
                seen.add(str(k))
    return errs


def _default_checks(s: Mapping[str, Any] | None, p: str, *, is_root: bool = False) -> list[FieldError]:
    """structuraldefaulting.ValidateDefaults: defaults must be pruned and valid."""
    if s is None:
        return []
    errs: list[FieldError] = []
    if "default" in s and s["default"] is not None and not is_root:
        d = s["default"]
        dp = _child(p, "default")
        pruned, _ = prune(d, s, is_resource_root=bool(s.get("x-kubernetes-embedded-resource")))
        if not _json_equal(pruned, d):
            errs.append(_fe(dp, INVALID, d, "must not have unknown fields"))
        if s.get("x-kubernetes-embedded-resource") and isinstance(d, Mapping):
            errs += _embedded_resource_errors(dp, d)
        errs += _openapi_errors(d, s, "", dp)
    errs += _default_checks(_items(s), _child(p, "items"))
    for k, ps in _props(s).items():
        if is_root and k in _META_FIELDS:
            continue
        errs += _default_checks(_as_schema(ps), _key(_child(p, "properties"), k))
    return errs


# --------------------------------------------------------------------------------------------------
# JSONPath for additionalPrinterColumns
# --------------------------------------------------------------------------------------------------

_JP_FILTER = re.compile(r"^\s*@((?:\.[\w\-/]+|\['[^']*'\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*$")


def json_path_get(obj: Any, jsonpath: str) -> Any:
    """Evaluate a CRD ``additionalPrinterColumns`` JSONPath; the first match, or None when absent.

    Supports ``.field`` (``\\.`` escapes a dot), ``['quoted.key']``, ``[n]`` (negative counts
    from the end), ``[*]``/``.*``, ``[a:b]`` slices, ``..field`` recursive descent and filters
    ``[?(@.type=='Ready')]`` (``==, !=, <, <=, >, >=`` or bare existence).  ``{...}`` braces are
    accepted.  As the server's table printer, only the first result is used.
    """
    try:
        steps = _jp_parse(jsonpath)
    except ValueError:
        return None
    nodes: list[Any] = [obj]
    for step in steps:
        nodes = [r for n in nodes for r in _jp_apply(step, n)]
        if not nodes:
            return None
    return nodes[0]


def _jp_parse(expr: str) -> list[tuple[Any, ...]]:
    e = expr.strip()
    if e.startswith("{") and e.endswith("}"):
        e = e[1:-1].strip()
    if e.startswith("$"):
        e = e[1:]
    if e and e[0] not in ".[":
        e = "." + e
    steps: list[tuple[Any, ...]] = []
    i, n = 0, len(e)
    while i < n:
        c = e[i]
        if c == ".":
            recursive = i + 1 < n and e[i + 1] == "."
            i += 2 if recursive else 1
            if i < n and e[i] == "*":
                steps.append(("recurse", None) if recursive else ("wild",))
                i += 1
                continue
            name_chars: list[str] = []
            while i < n and e[i] not in ".[":
                if e[i] == "\\" and i + 1 < n:
                    name_chars.append(e[i + 1])
                    i += 2
                    continue
                name_chars.append(e[i])
                i += 1
            name = "".join(name_chars)
            if recursive:
                steps.append(("recurse", name or None))
            elif name:
                steps.append(("field", name))
        elif c == "[":
            end = _jp_bracket_end(e, i)
            steps.append(_jp_bracket(e[i + 1 : end].strip()))
            i = end + 1
        else:
            raise ValueError(f"unexpected {c!r} in JSONPath")
    return steps


def _jp_bracket_end(e: str, start: int) -> int:
    quote = ""
    depth = 0
    for j in range(start, len(e)):
        ch = e[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unterminated [")


def _jp_bracket(inner: str) -> tuple[Any, ...]:
    if inner == "*":
        return ("wild",)
    if inner.startswith("?(") and inner.endswith(")"):
        m = _JP_FILTER.match(inner[2:-1])
        if not m:
            raise ValueError("unsupported filter")
        path = [a or b for a, b in re.findall(r"\.([\w\-/]+)|\['([^']*)'\]", m[1])]
        literal = _jp_literal(m[3]) if m[2] else None
        return ("filter", path, m[2], literal)
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return ("field", inner[1:-1])
    if ":" in inner:
        parts = [p.strip() for p in inner.split(":")]
        nums = [int(p) if p else None for p in parts]
        return ("slice", *nums[:3], *([None] * (3 - len(nums))))
    return ("index", int(inner))


def _jp_literal(text: str) -> Any:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t in ("true", "false"):
        return t == "true"
    if t == "null":
        return None
    try:
        return int(t)
    except ValueError:
        return float(t)


def _jp_children(n: Any) -> list[Any]:
    if isinstance(n, Mapping):
        return [n[k] for k in sorted(n)]
    if isinstance(n, (list, tuple)):
        return list(n)
    return []


def _jp_descendants(n: Any) -> list[Any]:
    out = [n]
    for c in _jp_children(n):
        out += _jp_descendants(c)
    return out


def _jp_filter_match(node: Any, path: Sequence[str], op: str | None, literal: Any) -> bool:
    cur = node
    for k in path:
        if not isinstance(cur, Mapping) or k not in cur:
            return False
        cur = cur[k]
    if op is None:
        return cur is not None and cur is not False
    if op in ("==", "!="):
        return _json_equal(cur, literal) == (op == "==")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (cur, literal))
    if not numbers and not (isinstance(cur, str) and isinstance(literal, str)):
        return False
    return bool({"<": cur < literal, "<=": cur <= literal, ">": cur > literal, ">=": cur >= literal}[op])


def _jp_apply(step: tuple[Any, ...], n: Any) -> list[Any]:
    kind = step[0]
    if kind == "field":
        return [n[step[1]]] if isinstance(n, Mapping) and step[1] in n else []
    if kind == "index":
        if isinstance(n, (list, tuple)) and -len(n) <= step[1] < len(n):
            return [n[step[1]]]
        return []
    if kind == "wild":
        return _jp_children(n)
    if kind == "slice":
        return list(n[slice(step[1], step[2], step[3])]) if isinstance(n, (list, tuple)) else []
    if kind == "recurse":
        nodes = _jp_descendants(n)
        if step[1] is None:
            return nodes[1:]
        return [d[step[1]] for d in nodes if isinstance(d, Mapping) and step[1] in d]
    if kind == "filter":
        if not isinstance(n, (list, tuple)):
            return []
        return [x for x in n if _jp_filter_match(x, step[1], step[2], step[3])]
    return []
