"""What every kind shares: the validation of an object's name and metadata (apimachinery's ValidateObjectMeta) and
the typed decoding of its labels and annotations.

Why a module of its own: every strategy's errors come after these, and the generic store asks for them the same way
for every kind, built-in or custom.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import bad_request
from ..registry import ResourceType
from ..util import DNS1123_LABEL, DNS1123_SUBDOMAIN, go_kind
from .base import Cause, Obj, TypedMap

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def check_typed_maps(rt: ResourceType, obj: Obj, kind_maps: list[TypedMap]) -> None:
    """The typed decoding of the real server: a map of strings that holds something else cannot be
    decoded at all, so it is a 400 before any validation (not a 422)."""
    m = obj.get("metadata") or {}
    fields: list[TypedMap] = [("ObjectMeta", f"metadata.{f}", m.get(f), "string") for f in ("labels", "annotations")]
    for struct, path, value, elem in fields + kind_maps:
        if value is None:
            continue
        if not isinstance(value, dict):
            bad, go_type = value, f"map[string]{elem}"
        else:
            wrong = [v for v in value.values() if not isinstance(v, str) and v is not None]
            if not wrong:
                continue
            bad, go_type = wrong[0], elem
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: cannot unmarshal '
            f"{go_kind(bad)} into Go struct field {struct}.{path} of type {go_type}"
        )


def validate_name(rt: ResourceType, name: str) -> list[Cause]:
    if rt.name_rule == "path":
        if name in (".", ".."):
            return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": may not be \'{name}\'')]
        for bad in ("/", "%"):
            if bad in name:
                return [("metadata.name", "FieldValueInvalid",
                         f'Invalid value: "{name}": may not contain \'{bad}\'')]
        return []
    if rt.name_rule == "label":
        if len(name) > 63:
            return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": must be no more than 63 characters')]
        if not DNS1123_LABEL.match(name):
            return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {LABEL_MSG}')]
        return []
    if len(name) > 253:
        return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": must be no more than 253 characters')]
    if not DNS1123_SUBDOMAIN.match(name):
        return [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {SUBDOMAIN_MSG}')]
    return []


def validate_meta(m: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    # Label and annotation types were checked when the body was decoded (check_typed_maps).
    for k, v in (m.get("labels") or {}).items():
        if not isinstance(v, str):
            continue
        prefix, _, lname = k.rpartition("/")
        if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(lname) > 63 or not LABEL_NAME.match(lname):
            causes.append(("metadata.labels", "FieldValueInvalid",
                           f'Invalid value: "{k}": name part must consist of alphanumeric characters, \'-\', \'_\' '
                           "or '.', and must start and end with an alphanumeric character"))
        if len(v) > 63 or not LABEL_VALUE.match(v):
            causes.append(("metadata.labels", "FieldValueInvalid",
                           f'Invalid value: "{v}": a valid label must be an empty string or consist of alphanumeric '
                           "characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    if sum(len(k) + len(v) for k, v in (m.get("annotations") or {}).items() if isinstance(v, str)) > 262144:
        causes.append(("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes"))
    controllers = 0
    for i, ref in enumerate(m.get("ownerReferences") or []):
        if not isinstance(ref, dict):
            causes.append((f"metadata.ownerReferences[{i}]", "FieldValueInvalid", "Invalid value: must be an object"))
            continue
        for f in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(f):
                causes.append((f"metadata.ownerReferences[{i}].{f}", "FieldValueRequired", "Required value"))
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        causes.append(("metadata.ownerReferences", "FieldValueInvalid",
                       "Invalid value: only one reference can have Controller set to true"))
    return causes
