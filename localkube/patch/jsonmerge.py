"""JSON merge patch (RFC 7386), as gopkg.in/evanphx/json-patch.v4 `MergePatch` implements it."""

from __future__ import annotations

import copy
from typing import Any

from .errors import PatchError, _internal

# ---------------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386), as evanphx/json-patch v4 MergePatch.


def _prune_nulls(value: Any) -> Any:
    """pruneNulls: drop null members of objects, recursively; null array elements are kept."""
    if isinstance(value, dict):
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for v in value.values():
            _prune_nulls(v)
    elif isinstance(value, list):
        for v in value:
            if v is not None:
                _prune_nulls(v)
    return value


def _merge_docs(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            doc.pop(k, None)
        elif doc.get(k) is None:
            doc[k] = _prune_nulls(v)
        else:
            doc[k] = _merge_node(doc[k], v)


def _merge_node(cur: Any, patch: Any) -> Any:
    if not isinstance(cur, dict):
        return _prune_nulls(patch)
    if not isinstance(patch, dict):
        # The library returns a non-object patch value as it is, without pruning nulls inside it.
        return patch
    _merge_docs(cur, patch)
    return cur


def json_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch to `target` and return the result.

    As the real server's library does: a `null` or scalar patch is rejected (400 "Invalid JSON Patch")
    where the RFC would return it, and a `null` target is an error (500 "Invalid JSON Document").
    """
    if target is None:
        raise _internal("Invalid JSON Document")
    if patch is None:
        raise PatchError("Invalid JSON Patch", 400)
    if isinstance(patch, dict):
        if isinstance(target, dict):
            doc = copy.deepcopy(target)
            _merge_docs(doc, copy.deepcopy(patch))
            return doc
        return _prune_nulls(copy.deepcopy(patch))
    if isinstance(patch, list):
        return _prune_nulls(copy.deepcopy(patch))
    raise PatchError("Invalid JSON Patch", 400)
