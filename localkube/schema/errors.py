"""Field errors as kube-apiserver reports them (k8s.io/apimachinery/pkg/util/validation/field): the CauseType
reasons, `FieldError`, its constructors and field paths, so a refused custom resource names the very fields and
words a real server does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .gofmt import _go_quote, _go_value

# metav1.CauseType values (k8s.io/apimachinery/pkg/util/validation/field.ErrorType).
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"

_LABELS = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    TYPE_INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    DUPLICATE: "Duplicate value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
}
# Error types whose body never shows the bad value (field.Error.ErrorBody).
_NO_VALUE_TYPES = {REQUIRED, FORBIDDEN, TOO_LONG}



class _Omit:
    """Marker for field errors that print no value (field's omitValue)."""


_OMIT = _Omit()


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error`` as kube-apiserver reports it (also one ``details.causes`` entry).

    ``field`` is the path as the server prints it (``spec.items[0].name``; ``<nil>`` for errors the
    server attaches to no field, e.g. failed ``anyOf``/``oneOf``), ``reason`` the metav1.CauseType
    and ``message`` the cause message (``ErrorBody``), e.g. ``Required value``.
    """

    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# --------------------------------------------------------------------------------------------------
# field.Error constructors and field.Path rendering
# --------------------------------------------------------------------------------------------------


def _fe(path: str | None, etype: str, value: Any = _OMIT, detail: str = "") -> FieldError:
    label = _LABELS[etype]
    if etype in _NO_VALUE_TYPES or isinstance(value, _Omit):
        body = label
    else:
        body = f"{label}: {_go_value(value)}"
    if detail:
        body += f": {detail}"
    return FieldError("<nil>" if path is None else path, etype, body)


def _not_supported(path: str | None, value: Any, valid: Sequence[str]) -> FieldError:
    detail = ("supported values: " + ", ".join(_go_quote(v) for v in valid)) if valid else ""
    return _fe(path, NOT_SUPPORTED, value, detail)


def _too_long(path: str | None, max_len: int) -> FieldError:
    if max_len >= 0:
        detail = f"may not be more than {max_len} {'byte' if max_len == 1 else 'bytes'}"
    else:
        detail = "value is too long"
    return _fe(path, TOO_LONG, detail=detail)


def _too_many(path: str | None, actual: int, max_items: int) -> FieldError:
    if max_items >= 0:
        detail = f"must have at most {max_items} {'item' if max_items == 1 else 'items'}"
    else:
        detail = "has too many items"
    return _fe(path, TOO_MANY, actual if actual >= 0 else _OMIT, detail)


# field.Path with None as the nil path.
def _child(p: str | None, name: str) -> str:
    return name if p is None else f"{p}.{name}"


def _index(p: str | None, i: int) -> str:
    return f"[{i}]" if p is None else f"{p}[{i}]"


def _key(p: str | None, k: str) -> str:
    return f"[{k}]" if p is None else f"{p}[{k}]"
