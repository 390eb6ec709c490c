"""`SelectorError`, and the Go formatting and name validation both kinds of selector use for error texts that are
byte-identical to upstream's."""

from __future__ import annotations

import re


class SelectorError(ValueError):
    """Malformed selector.

    ``str(err)`` is the message the real kube-apiserver puts in its 400 ``BadRequest`` Status, e.g.
    ``unable to parse requirement: ...`` / ``found ',', expected: ...`` for label selectors and
    ``invalid selector: ...`` / ``field label not supported: ...`` for field selectors.
    """


# --------------------------------------------------------------------------------------------------
# Go-compatible formatting helpers (error texts must be byte-identical to upstream's)
# --------------------------------------------------------------------------------------------------

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(s: str) -> str:
    """``strconv.Quote`` / ``fmt.Sprintf("%q", s)``."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _go_json_string(s: str) -> str:
    """One string as Go's ``encoding/json`` marshals it (HTML-safe escaping included)."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20 or ch in "<>&" or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json_string_list(values: list[str] | None) -> str:
    if not values:  # append([]string(nil), ...) of nothing is a nil slice, which marshals as null
        return "null"
    return "[" + ",".join(_go_json_string(v) for v in values) + "]"


def _field_invalid(path: str, bad_value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()`` for a string value."""
    return f"{path}: Invalid value: {_go_quote(bad_value)}: {detail}"


def _field_invalid_list(path: str, bad_value: list[str] | None, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()`` for a ``[]string`` value (JSON rendered)."""
    return f"{path}: Invalid value: {_go_json_string_list(bad_value)}: {detail}"


def _aggregate(messages: list[str]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: de-duplicated, bracketed when more than one."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _go_len(s: str) -> int:
    """Go's ``len(string)`` counts UTF-8 bytes."""
    return len(s.encode("utf-8", "surrogatepass"))


_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int64(s: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``; ``None`` where Go returns an error."""
    if not _INT_RE.fullmatch(s):
        return None
    value = int(s)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value


# --------------------------------------------------------------------------------------------------
# k8s.io/apimachinery/pkg/util/validation: qualified names (label keys) and label values
# --------------------------------------------------------------------------------------------------

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(_QNAME_FMT)
_QNAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_QNAME_MAX = 63
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError`` (including upstream's double space before ``or``)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += "'" + example + "', "
    return msg + "regex used for validation is '" + fmt + "')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if _go_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _is_qualified_name(value: str) -> list[str]:
    """``validation.IsQualifiedName``: the rules for a label key."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _go_len(name) > _QNAME_MAX:
        errs.append("name part " + _max_len_error(_QNAME_MAX))
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def _is_valid_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if _go_len(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _validate_label_key(key: str, path: str) -> str | None:
    errs = _is_qualified_name(key)
    return _field_invalid(path, key, "; ".join(errs)) if errs else None
