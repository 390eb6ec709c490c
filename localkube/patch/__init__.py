"""The three PATCH body formats of kube-apiserver, applied to plain JSON values.

Why this exists: localkube answers PATCH requests from kubectl, client-go and the Python client, and those
clients depend on the exact results the real server produces — list order after a strategic merge,
which operations of a JSON patch fail, what status code a malformed body gets. This module ports the
code the real server runs rather than the RFCs alone:

* JSON merge patch (RFC 7386) as gopkg.in/evanphx/json-patch.v4 ``MergePatch`` implements it;
* JSON patch (RFC 6902) as the same library's ``Patch.Apply`` implements it, including its departures
  from the RFC that clients can observe: ``replace`` of a missing object key adds it, negative array
  indices count from the end, ``copy`` from a missing key copies ``null``, a ``null`` body is a no-op;
* strategic merge patch as k8s.io/apimachinery/pkg/util/strategicpatch ``StrategicMergeMapPatch``
  implements it (checked against the apply half of that package's test fixtures), with the per-type Go
  struct tags replaced by the field-name tables ``MERGE_KEYS`` and ``PRIMITIVE_MERGE_LISTS`` (localkube
  has no typed schemas). Element order follows the server's algorithm, down to the Go slice aliasing it
  depends on; notably an element the patch adds lands *before* the elements only the server has.
  Values stored without merging are cleaned the way decoding into the typed object cleans them on the
  real server (null members and directive keys dropped).

Error codes follow k8s.io/apiserver/pkg/endpoints/handlers/patch.go: a body the patch type cannot decode
is 400, a JSON patch operation that does not apply is 422, and strategic merge errors are classified by
``interpretStrategicMergePatchError``: 400 for malformed directives, 422 for lists of lists, and — for
everything else, e.g. a list element without its merge key or an unknown ``$patch`` value — the plain Go
error reaches the client as a 500 with an empty reason and the error text as message (kubectl prints it
as ``Error from server: map: map[image:nginx] does not contain declared merge key: name``).

All functions deep-copy; their inputs are never modified.
"""

from __future__ import annotations

from typing import Any

from . import handler, strategic
from .errors import PatchError
from .handler import (
    APPLY_PATCH_YAML,
    BUILTIN_PATCH_TYPES,
    CUSTOM_RESOURCE_PATCH_TYPES,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
)
from .jsonmerge import json_merge_patch
from .jsonpatch import MAX_JSON_PATCH_OPERATIONS, json_patch
from .strategic import MERGE_KEYS, PRIMITIVE_MERGE_LISTS

__all__ = [
    "APPLY_PATCH_YAML",
    "BUILTIN_PATCH_TYPES",
    "CUSTOM_RESOURCE_PATCH_TYPES",
    "JSON_PATCH",
    "MAX_JSON_PATCH_OPERATIONS",
    "MERGE_KEYS",
    "MERGE_PATCH",
    "PRIMITIVE_MERGE_LISTS",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]


# The package's tables are the ones in force: `MERGE_KEYS` is the very dict `strategic.py` defines, and whoever
# rebinds `PRIMITIVE_MERGE_LISTS` here (a test of upstream's fixtures) is heard by both entry points below.


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`strategic.strategic_merge_patch` with the package's tables."""
    return strategic.strategic_merge_patch(target, patch, strategic.PatchMeta(MERGE_KEYS, PRIMITIVE_MERGE_LISTS))


def apply_patch(content_type: str, target: dict[str, Any], body: bytes, *, strategic_allowed: bool) -> dict[str, Any]:
    """`handler.apply_patch` with the package's tables."""
    return handler.apply_patch(content_type, target, body, strategic_allowed=strategic_allowed,
                               meta=strategic.PatchMeta(MERGE_KEYS, PRIMITIVE_MERGE_LISTS))
