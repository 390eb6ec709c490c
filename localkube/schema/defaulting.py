"""Structural defaulting (apiextensions-apiserver pkg/apiserver/schema/defaulting): a schema's `default`s applied
to what a custom resource leaves out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .nodes import _additional, _as_schema, _clone, _items, _props
from .pruning import _prune

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
