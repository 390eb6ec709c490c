"""Label and field selectors with the semantics of the real kube-apiserver.

localkube answers ``list`` and ``watch`` requests from ordinary Kubernetes clients (kubectl, client-go,
the Python client, controllers). Those clients send ``labelSelector`` and ``fieldSelector`` query
parameters and embed ``metav1.LabelSelector`` objects in Deployments, Services and custom resources; they
expect exactly the objects a real cluster would return, and for a malformed selector the very same
400 ``BadRequest`` message text. This module is a faithful, dependency-free port of
``k8s.io/apimachinery/pkg/labels`` (lexer, parser, ``NewRequirement`` validation, matching),
``k8s.io/apimachinery/pkg/fields`` (term splitting, value escaping, matching),
``metav1.LabelSelectorAsSelector`` and of the per-kind "selectable fields" and field-label conversion
functions of kube-apiserver.

Semantics reproduced from upstream:

* Label selectors: ``=``, ``==``, ``!=``, ``in (...)``, ``notin (...)``, ``key`` (exists), ``!key``
  (does not exist), ``>`` / ``<`` (integer comparison), comma = AND. ``!=`` and ``notin`` match objects
  that lack the key; ``>``/``<`` never match an object whose label is missing or not an integer.
  ``in``/``notin`` are keywords only in operator position, so ``in=notin`` is a valid selector. Keys are
  qualified names (optional DNS-1123 subdomain prefix and ``/``), values at most 63 characters.
  The empty selector matches everything. Error texts are upstream's (``unable to parse requirement:
  <nil>: Invalid value: ...``, ``found 'x', expected: ...``).
* ``metav1.LabelSelector``: ``None`` selects nothing, ``{}`` selects everything.
* Field selectors: ``a=b``, ``a==b``, ``a!=b``, comma = AND, no whitespace trimming, values may escape
  ``\\,``, ``\\=`` and ``\\\\``. A field that is absent from an object's field set reads as ``""``. An
  unsupported field is rejected with kube-apiserver's message (``field label not supported: <field>``).
"""

from __future__ import annotations

from .common import SelectorError
from .fields import FieldRequirement, FieldSelector, escape_field_value, parse_field_selector
from .labels import (
    LabelSelector,
    Requirement,
    everything,
    label_selector_from_dict,
    new_requirement,
    nothing,
    parse_label_selector,
)
from .selectable import object_fields, supported_fields

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "escape_field_value",
    "everything",
    "label_selector_from_dict",
    "new_requirement",
    "nothing",
    "object_fields",
    "parse_field_selector",
    "parse_label_selector",
    "supported_fields",
]
