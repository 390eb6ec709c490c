"""`PatchError`, with the status code and reason the real server answers a patch with, and Go's formatting of
values for error texts that match the server's."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

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
