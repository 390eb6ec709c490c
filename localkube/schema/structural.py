"""Whether a CRD's `openAPIV3Schema` is acceptable: the structural schema invariants and the apiextensions OpenAPI
restrictions, with the messages kube-apiserver prints (`check_structural`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import FORBIDDEN, INVALID, REQUIRED, FieldError, _child, _fe, _index, _key, _not_supported
from .formats import _compile_pattern
from .nodes import (
    _DEFAULT_SCHEMA_PATH,
    _META_FIELDS,
    _additional,
    _as_schema,
    _items,
    _json_equal,
    _props,
    _stype,
)
from .pruning import prune
from .validation import _embedded_resource_errors, _openapi_errors

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
