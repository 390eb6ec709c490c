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

import copy
import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

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

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH_YAML = "application/apply-patch+yaml"

# The Content-Types a PATCH route accepts, in the order the real server lists them in its 415 message
# (installer.go for built-in resources, customresource_handler.go for custom resources).
BUILTIN_PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)
CUSTOM_RESOURCE_PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH_YAML)

MAX_JSON_PATCH_OPERATIONS = 10000

# Lists merged element-by-element (patchStrategy=merge) and the key that identifies an element, by field
# name wherever it occurs. One exception is made because the name is ambiguous: "ports" is keyed by
# containerPort only directly under a container, by "port" for a Service's spec.ports, and is an atomic
# list elsewhere (NetworkPolicy, Endpoints ...), as in the real API types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "webhooks": "name",
}

# Lists of scalars with patchStrategy=merge: merged as ordered sets.
PRIMITIVE_MERGE_LISTS: frozenset[str] = frozenset({"finalizers"})

_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})

_DEFAULT_REASONS = {
    400: "BadRequest",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "",
}

# errors.NewGenericServerResponse(422, ...) replaces the library's error text with this sentence.
_GENERIC_422 = "the server rejected our request due to an error in our request"
# What go-restful's 415 becomes after apiserver's serviceErrorHandler (NewGenericServerResponse(415)).
_GENERIC_415 = "the server responded with the status code 415 but did not return more information"


class PatchError(ValueError):
    """The patch document is malformed or cannot be applied.

    `code` is the HTTP status the real API server answers with: 400 for a body that is not valid for
    the patch type (e.g. a JSON patch that is not a list of operations), 413 for a JSON patch of more
    than 10000 operations, 415 for a Content-Type the resource does not accept, 422 when a JSON patch
    operation fails (path missing, test op failed) or a strategic patch nests lists, and 500 for the
    strategic merge errors the real server does not classify (missing merge key, unknown `$patch`
    value ...), which it answers with 500 and an empty reason.

    `str(err)` / `message` is the library's error text. `reason` is the Status reason ("" is the
    real server's StatusReasonUnknown). `status_message` is the Status message the real server puts on
    the wire, which differs from `message` only for the 422s (replaced by a generic sentence) and the
    go-restful 415.
    """

    code: int
    reason: str
    message: str
    status_message: str

    def __init__(
        self,
        message: str,
        code: int,
        *,
        reason: str | None = None,
        status_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = _DEFAULT_REASONS.get(code, "") if reason is None else reason
        self.status_message = message if status_message is None else status_message


def _invalid(message: str) -> PatchError:
    return PatchError(message, 422, status_message=_GENERIC_422)


def _internal(message: str) -> PatchError:
    return PatchError(message, 500)


# ---------------------------------------------------------------------------------------------------
# Go formatting, for error messages that match the real server's text.


def _go_float(f: float) -> str:
    """fmt's %v of a float64: strconv 'g' with the shortest digits, exponent form below 1e-4 or from 1e6."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    sign, digits_t, exponent = Decimal(repr(f)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    exponent += len("".join(map(str, digits_t))) - len(digits)
    nd = len(digits)
    dp = nd + exponent
    neg = "-" if sign else ""
    exp = dp - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{digits}"
    if dp >= nd:
        return f"{neg}{digits}{'0' * (dp - nd)}"
    return f"{neg}{digits[:dp]}.{digits[dp:]}"


def _go_v(value: Any) -> str:
    """fmt's %v of a decoded JSON value (map keys sorted, as fmt prints them)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_v(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_v(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _go_type(value: Any) -> str:
    """reflect.TypeOf(value).String() for a value decoded into interface{}."""
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "%!s(<nil>)"


def _go_s(value: Any) -> str:
    """fmt's %s of an interface{} value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, dict | list):
        return _go_v(value)
    return f"%!s({_go_type(value)}={_go_v(value)})"


def _json_kind(value: Any) -> str:
    """The JSON value kind encoding/json names in an UnmarshalTypeError."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _go_quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _go_eq(a: Any, b: Any) -> bool:
    """Go's == on two interface{} values holding decoded JSON: same dynamic type and equal value."""
    return type(a) is type(b) and a == b


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


# ---------------------------------------------------------------------------------------------------
# JSON patch (RFC 6902), as evanphx/json-patch v4 Patch.Apply.


class _OpError(Exception):
    """A jsonpatch library error; its text is the Go error string."""


_INT64_MAX = 2**63 - 1


def _atoi(s: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise _OpError(f"strconv.Atoi: parsing {_go_quote(s)}: invalid syntax")
    n = int(s)
    if not -_INT64_MAX - 1 <= n <= _INT64_MAX:
        raise _OpError(f"strconv.Atoi: parsing {_go_quote(s)}: value out of range")
    return n


def _invalid_index(idx: int) -> _OpError:
    return _OpError(f"Unable to access invalid index: {idx}: invalid index referenced")


def _decode_pointer_token(token: str) -> str:
    # RFC 6901: "~1" -> "/" and "~0" -> "~" in a single left-to-right pass, so "~01" is "~1".
    return re.sub(r"~[01]", lambda m: "/" if m.group() == "~1" else "~", token)


def _array_index(lst: list[Any], key: str, *, size: int) -> int:
    idx = _atoi(key)
    if idx >= size:
        raise _invalid_index(idx)
    if idx < 0:
        if idx < -size:
            raise _invalid_index(idx)
        idx += size
    return idx


def _con_get(con: dict[str, Any] | list[Any], key: str) -> Any:
    if isinstance(con, dict):
        # A missing key and an explicit null are the same here (both a nil node in the library).
        return con.get(key)
    return con[_array_index(con, key, size=len(con))]


def _con_set(con: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
    else:
        con[_array_index(con, key, size=len(con))] = value


def _con_add(con: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
        return
    if key == "-":
        con.append(value)
        return
    try:
        idx = _array_index(con, key, size=len(con) + 1)
    except _OpError as e:
        if str(e).startswith("strconv."):
            raise _OpError(f"value was not a proper array index: '{key}': {e}") from None
        raise
    con.insert(idx, value)


def _con_remove(con: dict[str, Any] | list[Any], key: str) -> None:
    if isinstance(con, dict):
        if key not in con:
            raise _OpError(f"Unable to remove nonexistent key: {key}: missing value")
        del con[key]
    else:
        del con[_array_index(con, key, size=len(con))]


def _find_object(root: Any, path: str) -> tuple[dict[str, Any] | list[Any], str] | None:
    """findObject: the container holding the last token of `path`, and that token decoded."""
    split = path.split("/")
    if len(split) < 2:
        return None
    doc = root
    for part in split[1:-1]:
        try:
            nxt = _con_get(doc, _decode_pointer_token(part))
        except _OpError:
            return None
        if not isinstance(nxt, dict | list):
            return None
        doc = nxt
    return doc, _decode_pointer_token(split[-1])


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and len(a) == len(b)
            and all(k in b and _json_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if a is None:
        return b is None
    # The library compares the compacted JSON text of scalars, so 1 and 1.0 differ: compare types too.
    return _go_eq(a, b)


def _op_str(op: dict[str, Any], field: str) -> str | None:
    value = op.get(field)
    return value if isinstance(value, str) else None


def _apply_op(doc: list[Any], op: dict[str, Any]) -> None:
    """Apply one operation to doc[0] (a one-element holder, so `replace` of "" can swap the root)."""
    op_name = _op_str(op, "op")
    kind = "unknown" if op_name is None else op_name
    path = _op_str(op, "path")
    has_value = "value" in op
    value = op.get("value")

    if kind == "add":
        if path is None:
            raise _OpError("add operation failed to decode path: missing value")
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(f'add operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _con_add(found[0], found[1], copy.deepcopy(value))
        except _OpError as e:
            raise _OpError(f"error in add for path: '{path}': {e}") from None

    elif kind == "remove":
        if path is None:
            raise _OpError("remove operation failed to decode path: missing value")
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(f'remove operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _con_remove(*found)
        except _OpError as e:
            raise _OpError(f"error in remove for path: '{path}': {e}") from None

    elif kind == "replace":
        if path is None:
            raise _OpError(
                "replace operation failed to decode path: operation missing path field: missing value"
            )
        if path == "":
            if not isinstance(value, dict | list):
                raise _OpError("replace operation value must be object or array: %!w(<nil>)")
            doc[0] = copy.deepcopy(value)
            return
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(f"replace operation does not apply: doc is missing path: {path}: missing value")
        con, key = found
        try:
            _con_get(con, key)
        except _OpError:
            raise _OpError(
                f"replace operation does not apply: doc is missing key: {path}: missing value"
            ) from None
        # Not an error for an object key that does not exist: the library adds it.
        _con_set(con, key, copy.deepcopy(value))

    elif kind == "move":
        frm = _op_str(op, "from")
        if frm is None:
            raise _OpError(
                "move operation failed to decode from: operation, missing from field: missing value"
            )
        found = _find_object(doc[0], frm)
        if found is None:
            raise _OpError(f"move operation does not apply: doc is missing from path: {frm}: missing value")
        con, key = found
        try:
            moved = _con_get(con, key)
            _con_remove(con, key)
        except _OpError as e:
            raise _OpError(f"error in move for path: '{key}': {e}") from None
        if path is None:
            raise _OpError(
                "move operation failed to decode path: operation missing path field: missing value"
            )
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(
                f"move operation does not apply: doc is missing destination path: {path}: missing value"
            )
        try:
            _con_add(found[0], found[1], moved)
        except _OpError as e:
            raise _OpError(f"error in move for path: '{path}': {e}") from None

    elif kind == "test":
        if path is None:
            raise _OpError(
                "test operation failed to decode path: operation missing path field: missing value"
            )
        if path == "":
            if has_value and _json_equal(doc[0], value):
                return
            raise _OpError(f"testing value {path} failed: test failed")
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(f"test operation does not apply: is missing path: {path}: missing value")
        try:
            current = _con_get(*found)
        except _OpError as e:
            raise _OpError(f"error in test for path: '{path}': {e}") from None
        if current is None:
            # A missing key, or a null, matches an absent or null "value".
            if value is None:
                return
        elif has_value and _json_equal(current, value):
            return
        raise _OpError(f"testing value {path} failed: test failed")

    elif kind == "copy":
        frm = _op_str(op, "from")
        if frm is None:
            raise _OpError(
                "copy operation failed to decode from: operation, missing from field: missing value"
            )
        found = _find_object(doc[0], frm)
        if found is None:
            raise _OpError(f"copy operation does not apply: doc is missing from path: {frm}: missing value")
        try:
            copied = copy.deepcopy(_con_get(*found))  # a missing object key copies as null
        except _OpError as e:
            raise _OpError(f"error in copy for from: '{frm}': {e}") from None
        if path is None:
            raise _OpError("copy operation failed to decode path: missing value")
        found = _find_object(doc[0], path)
        if found is None:
            raise _OpError(
                f"copy operation does not apply: doc is missing destination path: {path}: missing value"
            )
        try:
            _con_add(found[0], found[1], copied)
        except _OpError as e:
            raise _OpError(f"error while adding value during copy: {e}") from None

    else:
        raise _OpError(f"Unexpected kind: {kind}")


def _decode_operations(operations: Any) -> list[dict[str, Any]]:
    """What the handler's strict decode into []jsonPatchOp accepts, with its error text."""
    prefix = "error decoding patch: json: cannot unmarshal"
    if operations is None:
        return []
    if not isinstance(operations, list):
        raise PatchError(
            f"{prefix} {_json_kind(operations)} into Go value of type []handlers.jsonPatchOp", 400
        )
    decoded: list[dict[str, Any]] = []
    for op in operations:
        if op is None:
            decoded.append({})
            continue
        if not isinstance(op, dict):
            raise PatchError(f"{prefix} {_json_kind(op)} into Go value of type handlers.jsonPatchOp", 400)
        for field, v in op.items():
            if field in ("op", "path", "from") and v is not None and not isinstance(v, str):
                raise PatchError(
                    f"{prefix} {_json_kind(v)} into Go struct field jsonPatchOp.{field} of type string", 400
                )
        decoded.append(op)
    if len(decoded) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(decoded)}",
            413,
        )
    return decoded


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations) to `target` and return the result.

    A body that is not a list of operation objects is a 400; an operation that does not apply is a 422
    whose message is the library's error, e.g. ``replace operation does not apply: doc is missing path:
    /spec/foo/bar: missing value``. Operations apply in order and all-or-nothing.
    """
    ops = _decode_operations(operations)
    if not isinstance(target, dict | list):
        raise _invalid(
            f"json: cannot unmarshal {_json_kind(target) if target is not None else 'null'} "
            "into Go value of type jsonpatch.partialDoc"
        )
    doc = [copy.deepcopy(target)]
    for op in ops:
        try:
            _apply_op(doc, op)
        except _OpError as e:
            raise _invalid(str(e)) from None
    return doc[0]


# ---------------------------------------------------------------------------------------------------
# Strategic merge patch, as k8s.io/apimachinery/pkg/util/strategicpatch (mergeMap and friends).

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

_ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
_ERR_LIST_OF_LISTS = "lists of lists are not supported"


def _no_merge_key(m: dict[str, Any], key: str) -> PatchError:
    return _internal(f"map: {_go_v(m)} does not contain declared merge key: {key}")


def _bad_arg_type(expected: str, actual: Any) -> PatchError:
    return _internal(f"expected a {expected}, but received a {_go_type(actual)}")


_MAP_T = "map[string]interface {}"
_SLICE_T = "[]interface {}"


def _patch_meta(parents: tuple[str, ...], field: str) -> tuple[str, str]:
    """(patchStrategy, patchMergeKey) of `field` in the map reached through `parents` (field names)."""
    if field == "ports":
        if parents and parents[-1] in _CONTAINER_LISTS:
            return "merge", "containerPort"
        if parents == ("spec",):
            return "merge", "port"
        return "", ""
    if field in MERGE_KEYS:
        return "merge", MERGE_KEYS[field]
    if field in PRIMITIVE_MERGE_LISTS:
        return "merge", ""
    return "", ""


def _is_directive_key(key: str) -> bool:
    return (
        key in (_DIRECTIVE, _RETAIN_KEYS)
        or key.startswith(_SET_ELEMENT_ORDER)
        or key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
    )


def _verbatim(value: Any) -> Any:
    """A patch value stored without merging, as it reads back from the real server.

    The real server stores such values as they are and then decodes the result into the typed object,
    which drops what no struct field holds: directive keys and null members. localkube keeps untyped
    objects, so it drops them here.
    """
    if isinstance(value, dict):
        return {k: _verbatim(v) for k, v in value.items() if v is not None and not _is_directive_key(k)}
    if isinstance(value, list):
        return [_verbatim(v) for v in value]
    return value


def _remove_directives(value: Any) -> tuple[bool, Any]:
    """removeDirectives: drop every map holding a `$patch` (the value itself, if it is one)."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return False, None
        kept: dict[str, Any] = {}
        for k, v in value.items():
            keep, v = _remove_directives(v)
            if keep:
                kept[k] = v
        return True, kept
    if isinstance(value, list):
        items: list[Any] = []
        for v in value:
            keep, v = _remove_directives(v)
            if keep:
                items.append(v)
        return True, items
    return True, value


def _store_unmerged(original: dict[str, Any], key: str, value: Any) -> None:
    """A patch value for a key the original lacks, or holds with another type: nulls are discarded
    first (discardNullValuesFromPatch), then maps carrying `$patch` are dropped (removeDirectives)."""
    keep, value = _remove_directives(_drop_nulls(value))
    if keep:
        original[key] = _verbatim(value)
    else:
        original.pop(key, None)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _slice_kind(*slices: list[Any]) -> str:
    """sliceElementType: the one element kind shared by every element of `slices`."""
    prev: str | None = None
    for s in slices:
        for v in s:
            current = _go_type(v)
            if prev is None:
                if v is None:
                    raise _internal("runtime error: invalid memory address or nil pointer dereference")
                prev = current
                if isinstance(v, list):
                    raise PatchError(_ERR_LIST_OF_LISTS, 422, status_message=_GENERIC_422)
            elif prev != current:
                raise _internal(f"list element types are not identical: {_go_v(list(slices))}")
    if prev is None:
        raise _internal("no elements in any of the given slices")
    return "map" if prev == _MAP_T else prev


def _extract_key(key: str, prefix: str) -> str:
    parts = key.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        if prefix == _DELETE_FROM_PRIMITIVE_LIST:
            raise PatchError(_ERR_PRIMITIVE_LIST, 400)
        raise PatchError(_ERR_SET_ELEMENT_ORDER, 400)
    return parts[1]


def _find_map(items: list[Any], key: str, value: Any) -> int | None:
    """findMapInSliceBasedOnKeyValue: index of the first map whose `key` equals `value`."""
    for i, v in enumerate(items):
        if not isinstance(v, dict):
            raise _internal(f"value for key {i} is not a map.")
        if key in v and _go_eq(v[key], value):
            return i
    return None


def _index(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    def val(item: Any) -> Any:
        if kind != "map":
            return item
        return item.get(merge_key) if isinstance(item, dict) else None

    wanted = val(value)
    for i, v in enumerate(items):
        if _go_eq(wanted, val(v)):
            return i
    return -1


def _validate_merge_key_in_lists(merge_key: str, *lists: list[Any]) -> None:
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP_T, item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)


def _extract_to_delete_items(items: list[Any]) -> tuple[list[Any], list[Any]]:
    keep: list[Any] = []
    delete: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type(_MAP_T, v)
        (delete if _go_eq(v.get(_DIRECTIVE), "delete") else keep).append(v)
    return keep, delete


def _insertion_sort(items: list[Any], less: Callable[[Any, Any], bool]) -> None:
    # sort.SliceStable sorts up to 20 elements by insertion sort; with the (not strictly weak) ordering
    # below, reproducing the algorithm reproduces where elements missing from the order end up.
    for i in range(1, len(items)):
        j = i
        while j > 0 and less(items[j], items[j - 1]):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1


def _normalize_slice_order(to_sort: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    to_delete: list[Any] = []
    if kind == "map":
        _validate_merge_key_in_lists(merge_key, to_sort, order)
        to_sort, to_delete = _extract_to_delete_items(to_sort)
    else:
        to_sort = list(to_sort)

    def less(a: Any, b: Any) -> bool:
        ia = _index(order, a, merge_key, kind)
        if ia >= 0:
            ib = _index(order, b, merge_key, kind)
            if ib >= 0:
                return ia < ib
        return True

    _insertion_sort(to_sort, less)
    return to_sort + to_delete


def _merge_sorted_slice(
    left: list[Any], right: list[Any], server_order: list[Any], merge_key: str, kind: str
) -> list[Any]:
    """Interleave server-only items (left) into patch items (right) by their order on the server."""
    out: list[Any] = []
    i = j = 0
    for _ in range(len(left) + len(right)):
        if i >= len(left) and j < len(right):
            out.append(right[j])
            j += 1
        elif j >= len(right) and i < len(left):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key, kind)
            ri = _index(server_order, right[j], merge_key, kind)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _normalize_element_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    patch = _normalize_slice_order(patch, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    return _merge_sorted_slice(server_only, patch, server_order, merge_key, kind)


def _partition_primitives(items: list[Any], partition_by: list[Any]) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for v in items:
        (inside if any(_go_eq(v, p) for p in partition_by) else outside).append(v)
    return inside, outside


def _partition_maps(items: list[Any], partition_by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type(_MAP_T, v)
        if merge_key not in v:
            raise _no_merge_key(v, merge_key)
        (inside if _find_map(partition_by, merge_key, v[merge_key]) is not None else outside).append(v)
    return inside, outside


# Go slices share their backing array: deleting from a list in place, or appending within its capacity,
# changes what every other slice over the same array sees. The server's element order depends on that
# (mergePatchIntoOriginal orders the result by the original list after mergeSlice has shifted and
# appended in place), so lists that get modified are modelled as Go slices, with the capacities
# encoding/json gives a decoded array (grown one append at a time) and Go's append growth.

# runtime/sizeclasses.go
_SIZE_CLASSES = (
    0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384,
    416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072,
    3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568,
    14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768,
)  # fmt: skip
_IFACE_SIZE = 16  # an interface{} element
_PAGE_SIZE = 8192


def _roundupsize(size: int) -> int:
    """runtime.roundupsize for a pointerful allocation (Go 1.22+, with the malloc header)."""
    req = size
    if req <= 32768 - 8:
        if req > 512:
            req += 8
        cls = next(c for c in _SIZE_CLASSES if c >= req)
        return cls - (req - size)
    return (req + _PAGE_SIZE - 1) // _PAGE_SIZE * _PAGE_SIZE


def _grow_cap(old_cap: int, new_len: int) -> int:
    """runtime.growslice's new capacity for a []interface{}."""
    double = old_cap + old_cap
    if new_len > double:
        new_cap = new_len
    elif old_cap < 256:
        new_cap = double
    else:
        new_cap = old_cap
        while new_cap < new_len:
            new_cap += (new_cap + 3 * 256) >> 2
    return _roundupsize(new_cap * _IFACE_SIZE) // _IFACE_SIZE


def _decoded_cap(length: int) -> int:
    cap = 0
    for n in range(1, length + 1):
        if n > cap:
            cap = _grow_cap(cap, n)
    return cap


class _GoSlice:
    """A Go slice header over a shared backing list."""

    __slots__ = ("arr", "cap", "ln", "off")

    def __init__(self, arr: list[Any], off: int, ln: int, cap: int) -> None:
        self.arr, self.off, self.ln, self.cap = arr, off, ln, cap

    @classmethod
    def decoded(cls, items: list[Any]) -> _GoSlice:
        cap = _decoded_cap(len(items))
        return cls([*items, *([None] * (cap - len(items)))], 0, len(items), cap)

    def items(self) -> list[Any]:
        return self.arr[self.off : self.off + self.ln]

    def get(self, i: int) -> Any:
        return self.arr[self.off + i]

    def set(self, i: int, value: Any) -> None:
        self.arr[self.off + i] = value

    def reslice(self, lo: int, hi: int | None = None) -> _GoSlice:
        hi = self.ln if hi is None else hi
        return _GoSlice(self.arr, self.off + lo, hi - lo, self.cap - lo)

    def append(self, *values: Any) -> _GoSlice:
        n = self.ln + len(values)
        if n <= self.cap:
            for i, v in enumerate(values):
                self.arr[self.off + self.ln + i] = v
            return _GoSlice(self.arr, self.off, n, self.cap)
        cap = _grow_cap(self.cap, n)
        return _GoSlice([*self.items(), *values, *([None] * (cap - n))], 0, n, cap)


def _deduplicate_scalars(s: _GoSlice) -> _GoSlice:
    # deduplicateScalars, in place, including the order it leaves elements in.
    length = s.ln - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _go_eq(s.get(i), s.get(j)):
                s.set(j, s.get(length))
                s = s.reslice(0, length)
                length -= 1
                j -= 1
            j += 1
        i += 1
    return s


def _merge_slice_with_special_elements(
    original: _GoSlice, patch: list[Any], merge_key: str
) -> tuple[_GoSlice, list[Any] | None]:
    plain: list[Any] = []
    replace = False
    for v in patch:
        if _DIRECTIVE not in v:
            plain.append(v)
            continue
        directive = v[_DIRECTIVE]
        if _go_eq(directive, "delete"):
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            value = v[merge_key]
            # deleteMatchingEntries: append(original[:i], original[i+1:]...), which shifts in place.
            while (idx := _find_map(original.items(), merge_key, value)) is not None:
                original = original.reslice(0, idx).append(*original.reslice(idx + 1).items())
        elif _go_eq(directive, "replace"):
            replace = True  # keep going: the other $patch elements are still validated and dropped
        elif _go_eq(directive, "merge"):
            raise _internal("merging lists cannot yet be specified in the patch")
        else:
            raise _internal(f"unknown patch type: {_go_s(directive)} in map: {_go_v(v)}")
    if replace:
        return _GoSlice.decoded([_verbatim(v) for v in plain]), None
    return original, plain


def _merge_slice(
    original: _GoSlice, patch: list[Any], parents: tuple[str, ...], merge_key: str, is_delete_list: bool
) -> list[Any]:
    """mergeSlice. `original` may be shared with the caller, which then sees the in-place changes."""
    if original.ln == 0 and not patch:
        return []
    kind = _slice_kind(original.items(), patch)
    if kind != "map":
        if is_delete_list:
            return [v for v in original.items() if not any(_go_eq(v, d) for d in patch)]
        merged = _deduplicate_scalars(original.append(*patch))
        order_patch = patch
    else:
        if merge_key == "":
            raise _internal("cannot merge lists without merge key for string")
        original, plain = _merge_slice_with_special_elements(original, patch, merge_key)
        order_patch = plain or []
        merged = original
        for v in order_patch:
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            idx = _find_map(merged.items(), merge_key, v[merge_key])
            if idx is None:
                merged = merged.append(_verbatim(v))
            else:
                merged.set(idx, _merge_map(merged.get(idx), v, parents))
    if merge_key == "":
        patch_items, server_only = _partition_primitives(merged.items(), order_patch)
    else:
        patch_items, server_only = _partition_maps(merged.items(), order_patch, merge_key)
    return _normalize_element_order(patch_items, server_only, order_patch, original.items(), merge_key, kind)


def _validate_patch_with_set_order_list(patch_list: list[Any], set_order: list[Any], merge_key: str) -> None:
    if not set_order or not patch_list:
        return
    non_delete = _extract_to_delete_items(patch_list)[0] if merge_key else patch_list
    pi = si = 0
    while pi < len(non_delete) and si < len(set_order):
        item = non_delete[pi]
        if isinstance(item, dict) and _DIRECTIVE in item:
            pi += 1
            continue
        if not merge_key:
            equal = _go_eq(item, set_order[si])
        else:
            order_item = set_order[si]
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP_T, item)
            if not isinstance(order_item, dict):
                raise _bad_arg_type(_MAP_T, order_item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            if merge_key not in order_item:
                raise _no_merge_key(order_item, merge_key)
            equal = _go_eq(item[merge_key], order_item[merge_key])
        if equal:
            pi += 1
        si += 1
    if pi < len(non_delete) and si >= len(set_order):
        raise _internal(
            f"The order in patch list:\n{_go_v(patch_list)}\n doesn't match {_SET_ELEMENT_ORDER} list:\n"
            f"{_go_v(set_order)}\n"
        )


def _merge_patch_into_original(
    original: dict[str, Any], patch: dict[str, Any], parents: tuple[str, ...]
) -> None:
    """Merge each `$setElementOrder/<field>` and its list, then order the result by the directive."""
    for key in list(patch):
        if not key.startswith(_SET_ELEMENT_ORDER) or key not in patch:
            continue
        set_order = patch.pop(key)
        if not isinstance(set_order, list):
            raise _bad_arg_type(_SLICE_T, set_order)
        field = _extract_key(key, _SET_ELEMENT_ORDER)
        found_original = field in original
        found_patch = field in patch
        original_slice = _GoSlice.decoded([])
        patch_list: list[Any] = []
        if found_original:
            if not isinstance(original[field], list):
                raise _bad_arg_type(_SLICE_T, original[field])
            original_slice = _GoSlice.decoded(original[field])
        if found_patch:
            if not isinstance(patch[field], list):
                raise _bad_arg_type(_SLICE_T, patch[field])
            patch_list = patch[field]
        strategy, merge_key = _patch_meta(parents, field)
        _validate_patch_with_set_order_list(patch_list, set_order, merge_key)

        from_patch_only = False
        if found_original and not found_patch:
            merged = original_slice.items()
        elif found_patch and not found_original:
            merged, from_patch_only = _remove_directives(patch_list)[1], True
        elif found_original and found_patch:
            if strategy == "merge":
                merged = _merge_slice(original_slice, patch_list, (*parents, field), merge_key, False)
            else:
                merged, from_patch_only = patch_list, True
        else:
            continue

        if merge_key == "":
            patch_items, server_only = _partition_primitives(merged, set_order)
        else:
            patch_items, server_only = _partition_maps(merged, set_order, merge_key)
        # The original list as mergeSlice left it: what it shifted and appended in place shows here.
        server_order = original_slice.items()
        kind = _slice_kind(server_order, patch_list)
        ordered = _normalize_element_order(patch_items, server_only, set_order, server_order, merge_key, kind)
        original[field] = _verbatim(ordered) if from_patch_only else ordered
        patch.pop(field, None)


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(_ERR_RETAIN_KEYS, 400)
    keep = {v for v in retain if isinstance(v, str)}
    for k, v in patch.items():
        if v is None or k.startswith(_DELETE_FROM_PRIMITIVE_LIST) or k.startswith(_SET_ELEMENT_ORDER):
            continue
        if k not in keep:
            raise PatchError(_ERR_RETAIN_KEYS, 400)
    for k in [k for k in original if k not in keep]:
        del original[k]


def _merge_map(
    original: dict[str, Any] | None, patch: dict[str, Any], parents: tuple[str, ...]
) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if _go_eq(directive, "replace"):
            return _verbatim({k: v for k, v in patch.items() if k != _DIRECTIVE})
        if _go_eq(directive, "delete"):
            return {}
        # Includes "merge": the real server accepts no $patch value other than replace/delete in a map.
        raise _internal(f"unknown patch type: {_go_s(directive)} in map: {_go_v(patch)}")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _merge_patch_into_original(original, patch, parents)

    for key, patch_v in list(patch.items()):
        k = key
        is_delete_list = False
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            k = _extract_key(key, _DELETE_FROM_PRIMITIVE_LIST)
            is_delete_list = True
        if patch_v is None:
            original.pop(k, None)
            continue
        if k not in original or _go_type(original[k]) != _go_type(patch_v):
            # Nothing to merge with; a deletion list for a list the original lacks is ignored.
            if not is_delete_list:
                _store_unmerged(original, k, patch_v)
            continue
        current = original[k]
        if isinstance(current, dict):
            original[k] = _merge_map(current, patch_v, (*parents, k))
        elif isinstance(current, list):
            strategy, merge_key = _patch_meta(parents, k)
            # A deletion list deletes whatever the field's strategy; other lists without one are replaced.
            if strategy == "merge" or is_delete_list:
                original[k] = _merge_slice(
                    _GoSlice.decoded(current), patch_v, (*parents, k), merge_key, is_delete_list
                )
            else:
                original[k] = _verbatim(patch_v)
        else:
            original[k] = patch_v
    return original


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to `target` and return the result.

    Maps merge recursively and `null` deletes a key. Lists whose field is in `MERGE_KEYS` merge element
    by element on that key; lists in `PRIMITIVE_MERGE_LISTS` merge as ordered sets; every other list is
    replaced. In a merged list, elements only the server has keep their relative order, and the patch's
    elements are placed by the patch's order — so a new element lands *before* the server's elements
    that follow none of the patch's (the real server's order, e.g. a container added by `kubectl patch`
    becomes the first container). Directives: `$patch: replace|delete` in a map or as a list element,
    `$retainKeys`, `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`. A `null` patch is a
    no-op.
    """
    if patch is None:
        return copy.deepcopy(target)
    if not isinstance(patch, dict):
        raise PatchError(f"json: cannot unmarshal {_json_kind(patch)} into Go value of type {_MAP_T}", 400)
    if target is not None and not isinstance(target, dict):
        raise TypeError(f"strategic merge patch target must be a dict, not {type(target).__name__}")
    return _merge_map(copy.deepcopy(target), copy.deepcopy(patch), ())


# ---------------------------------------------------------------------------------------------------
# The PATCH request body.


def _go_quote_char(ch: str) -> str:
    """encoding/json's quoteChar of the (first byte of the) offending character."""
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    byte = ch.encode("utf-8")[0]
    escapes = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}
    if byte in escapes:
        return f"'{escapes[byte]}'"
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    return f"'{chr(byte)}'"


def _innermost_container(text: str) -> str:
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def _go_syntax_error(text: str, err: json.JSONDecodeError) -> str:
    """encoding/json's SyntaxError text for the input Python's decoder rejected."""
    pos, msg = err.pos, err.msg
    if msg.startswith("Unterminated string") or (msg != "Extra data" and not text[pos:].strip(" \t\r\n")):
        return "unexpected end of JSON input"
    if msg.startswith("Unexpected UTF-8 BOM"):
        return "invalid character 'ï' looking for beginning of value"
    if msg.startswith("Invalid \\escape") and text[pos : pos + 1] == "\\":
        return f"invalid character {_go_quote_char(text[pos + 1 : pos + 2] or ' ')} in string escape code"
    if msg.startswith("Invalid \\u"):
        bad = next((c for c in text[pos + 2 : pos + 6] if c not in "0123456789abcdefABCDEF"), " ")
        return f"invalid character {_go_quote_char(bad)} in \\u hexadecimal character escape"
    if msg in ("Extra data", "Expecting value") or msg.startswith("Expecting ','"):
        # Python stops before a malformed literal or number that Go's scanner reads into.
        scanned = _scan_literal_or_number(text, pos, value_expected=msg == "Expecting value")
        if scanned is not None:
            return scanned
    quoted = _go_quote_char(text[pos])
    if msg == "Extra data":
        return f"invalid character {quoted} after top-level value"
    if msg.startswith("Invalid control character"):
        return f"invalid character {quoted} in string literal"
    if msg.startswith("Expecting property name"):
        return f"invalid character {quoted} looking for beginning of object key string"
    if msg.startswith("Expecting ':'"):
        return f"invalid character {quoted} after object key"
    if msg.startswith("Expecting ','"):
        where = "object key:value pair" if _innermost_container(text[:pos]) == "{" else "array element"
        return f"invalid character {quoted} after {where}"
    return f"invalid character {quoted} looking for beginning of value"


def _scan_literal_or_number(text: str, pos: int, *, value_expected: bool) -> str | None:
    """Go's error inside a true/false/null literal or a number whose start Python did not consume."""
    ch = text[pos]
    for literal in ("true", "false", "null"):
        if value_expected and ch == literal[0]:
            for i, expected in enumerate(literal):
                if pos + i >= len(text):
                    return "unexpected end of JSON input"
                if text[pos + i] != expected:
                    got, want = _go_quote_char(text[pos + i]), _go_quote_char(expected)
                    return f"invalid character {got} in literal {literal} (expecting {want})"
            return None
    digit_before = pos > 0 and text[pos - 1].isdigit()
    if (value_expected and ch == "-") or (not value_expected and ch in ".eE" and digit_before):
        i = pos + 1
        if ch in "eE" and i < len(text) and text[i] in "+-":
            i += 1
        if i >= len(text):
            return "unexpected end of JSON input"
        if not text[i].isdigit():
            where = {"-": "in numeric literal", ".": "after decimal point in numeric literal"}.get(
                ch, "in exponent of numeric literal"
            )
            return f"invalid character {_go_quote_char(text[i])} {where}"
    return None


class _NonFiniteNumber(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFiniteNumber(name)


def _decode_body(body: bytes | bytearray | str, prefix: str) -> Any:
    text = body if isinstance(body, str) else bytes(body).decode("utf-8", errors="replace")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise PatchError(prefix + _go_syntax_error(text, e), 400) from None
    except _NonFiniteNumber as e:
        where = "in numeric literal" if str(e).startswith("-") else "looking for beginning of value"
        raise PatchError(
            f"{prefix}invalid character {_go_quote_char(str(e).lstrip('-'))} {where}", 400
        ) from None


def _unsupported_media_type(accepted: tuple[str, ...]) -> PatchError:
    return PatchError(
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
        415,
    )


def _restful_consumes(content_type: str, consumes: tuple[str, ...]) -> bool:
    """go-restful's Route.matchesContentType, which routes built-in resources before the handler runs."""
    for part in (content_type or "application/octet-stream").split(","):
        if part.split(";", 1)[0].strip(" ") in consumes:
            return True
    return False


def _patch_type(content_type: str, strategic_allowed: bool) -> str:
    accepted = BUILTIN_PATCH_TYPES if strategic_allowed else CUSTOM_RESOURCE_PATCH_TYPES
    if strategic_allowed and not _restful_consumes(content_type, accepted):
        # Built-in resources are served through go-restful, which refuses the request itself.
        raise PatchError(_GENERIC_415, 415, reason="")
    idx = content_type.find(";")
    media_type = content_type[:idx] if idx > 0 else content_type
    if media_type not in accepted or media_type == APPLY_PATCH_YAML:
        # Server-side apply is not a patch this module applies; it must be routed elsewhere first.
        raise _unsupported_media_type(accepted)
    return media_type


def apply_patch(
    content_type: str, target: dict[str, Any], body: bytes, *, strategic_allowed: bool
) -> dict[str, Any]:
    """Apply a PATCH request body of the given Content-Type to `target`, as kube-apiserver does.

    `strategic_allowed` is False for custom resources, which refuse strategic merge patches with 415.
    Raises PatchError with the real server's status code (see PatchError). The result of a JSON patch
    that replaced the whole document with something other than an object is a 422, as decoding it into
    the object fails on the real server. Server-side apply (application/apply-patch+yaml) is not a
    patch this module applies: route it elsewhere before calling; here it is refused with 415.

    A built-in resource (`strategic_allowed`) answers a Content-Type its route does not list with
    go-restful's generic 415 (empty reason); a custom resource, and a type that passes routing but not
    the handler's exact comparison, get the "unknown format - accepted media types include" 415.
    """
    patch_type = _patch_type(content_type, strategic_allowed)
    if patch_type == JSON_PATCH:
        result = json_patch(target, _decode_body(body, "error decoding patch: "))
        if not isinstance(result, dict):
            patched = _go_quote(json.dumps(result, separators=(",", ":")))
            raise PatchError(
                f'"" is invalid: patch: Invalid value: {patched}: '
                f"json: cannot unmarshal {_json_kind(result)} into Go value of type {_MAP_T}",
                422,
            )
        return result
    if patch_type == MERGE_PATCH:
        patch = _decode_body(body, "error decoding patch: ")
        if patch is not None and not isinstance(patch, dict):
            raise PatchError(
                "error decoding patch: json: cannot unmarshal "
                f"{_json_kind(patch)} into Go value of type {_MAP_T}",
                400,
            )
        result = json_merge_patch(target, patch)
        assert isinstance(result, dict)
        return result
    return strategic_merge_patch(target, _decode_body(body, ""))
