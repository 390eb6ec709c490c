"""The PATCH request: its Content-Type (415 for one the resource does not accept), its body decoded with Go's
error texts, and `apply_patch`, as k8s.io/apiserver/pkg/endpoints/handlers/patch.go does it."""

from __future__ import annotations

import json
from typing import Any

from .errors import _GENERIC_415, PatchError, _go_quote, _json_kind
from .jsonmerge import json_merge_patch
from .jsonpatch import json_patch
from .strategic import _MAP_T, PatchMeta, strategic_merge_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH_YAML = "application/apply-patch+yaml"

# The Content-Types a PATCH route accepts, in the order the real server lists them in its 415 message
# (installer.go for built-in resources, customresource_handler.go for custom resources).
BUILTIN_PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)
CUSTOM_RESOURCE_PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH_YAML)

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
    content_type: str, target: dict[str, Any], body: bytes, *, strategic_allowed: bool, meta: PatchMeta | None = None
) -> dict[str, Any]:
    """Apply a PATCH request body of the given Content-Type to `target`, as kube-apiserver does.

    `strategic_allowed` is False for custom resources, which refuse strategic merge patches with 415.
    Raises PatchError with the real server's status code (see PatchError). The result of a JSON patch
    that replaced the whole document with something other than an object is a 422, as decoding it into
    the object fails on the real server. Server-side apply (application/apply-patch+yaml) is not a
    patch this module applies: route it elsewhere before calling; here it is refused with 415.

    A built-in resource (`strategic_allowed`) answers a Content-Type its route does not list with
    go-restful's generic 415 (empty reason); a custom resource, and a type that passes routing but not
    the handler's exact comparison, get the "unknown format - accepted media types include" 415. `meta`: the
    strategic merge tables (`strategic.PatchMeta`).
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
    return strategic_merge_patch(target, _decode_body(body, ""), meta)
