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

from .defaulting import apply_defaults
from .errors import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    FieldError,
)
from .jsonpath import json_path_get
from .pruning import prune, prune_nulls
from .structural import check_structural
from .validation import format_invalid, validate, validate_custom_resource

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
