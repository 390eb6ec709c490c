"""JSON patch (RFC 6902), as gopkg.in/evanphx/json-patch.v4 `Patch.Apply` implements it, with its departures from
the RFC that clients can observe: `replace` of a missing object key adds it, negative array indices count from the
end, `copy` from a missing key copies `null`, a `null` body is a no-op."""

from __future__ import annotations

import copy
import re
from typing import Any

from .errors import PatchError, _go_eq, _go_quote, _invalid, _json_kind

MAX_JSON_PATCH_OPERATIONS = 10000

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
