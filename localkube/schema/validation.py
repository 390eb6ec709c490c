"""Validation of a custom resource against its schema: kube-openapi's validator (k8s.io/kube-openapi/pkg/validation/
validate) error for error, then the x-kubernetes-list-type and x-kubernetes-embedded-resource checks, and the
entry points `validate`, `validate_custom_resource` and `format_invalid`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import (
    DUPLICATE,
    INVALID,
    REQUIRED,
    TYPE_INVALID,
    FieldError,
    _child,
    _fe,
    _index,
    _key,
    _not_supported,
    _too_long,
    _too_many,
)
from .formats import _check_format, _compile_pattern
from .gofmt import _go_float, _go_json, _go_quote, _go_v
from .nodes import (
    _additional,
    _as_schema,
    _go_deep_equal,
    _is_json_integer,
    _items,
    _json_equal,
    _kind,
    _props,
    _types,
)

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
