"""Structural pruning (apiextensions-apiserver pkg/apiserver/schema/pruning): fields a schema does not declare are
dropped, and reported for fieldValidation=Strict|Warn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .nodes import _META_FIELDS, _additional, _as_schema, _clone, _items, _props

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
