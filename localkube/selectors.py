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

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

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


# --------------------------------------------------------------------------------------------------
# Label selectors (k8s.io/apimachinery/pkg/labels)
# --------------------------------------------------------------------------------------------------

# selection.Operator values, as upstream spells them.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_VALID_OPERATORS = (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST)


@dataclass(frozen=True)
class Requirement:
    """One label requirement (``labels.Requirement``). Build it with :func:`new_requirement`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = _parse_int64(labels[self.key]) if isinstance(labels[self.key], str) else None
            want = _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        text = ("!" if self.operator == DOES_NOT_EXIST else "") + self.key
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return text
        text += {
            EQUALS: "=",
            DOUBLE_EQUALS: "==",
            NOT_EQUALS: "!=",
            IN: " in ",
            NOT_IN: " notin ",
            GREATER_THAN: ">",
            LESS_THAN: "<",
        }.get(self.operator, "")
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if self.operator in (IN, NOT_IN):
            return f"{text}({values})"
        return text + values


def new_requirement(
    key: str, operator: str, values: list[str] | None, *, path: str | None = None
) -> Requirement:
    """``labels.NewRequirement``: validate and build one requirement, raising :class:`SelectorError`.

    ``path`` is the field path prefix used in error messages (``None`` as for ``labels.Parse``).
    """

    def child(name: str) -> str:
        return name if path is None else f"{path}.{name}"

    vals = list(values) if values else []
    errs: list[str] = []
    key_err = _validate_label_key(key, child("key"))
    if key_err:
        errs.append(key_err)
    value_path = child("values")
    if operator in (IN, NOT_IN):
        if not vals:
            errs.append(
                _field_invalid_list(
                    value_path, values, "for 'in', 'notin' operators, values set can't be empty"
                )
            )
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errs.append(
                _field_invalid_list(value_path, values, "exact-match compatibility requires one single value")
            )
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errs.append(
                _field_invalid_list(
                    value_path, values, "values set must be empty for exists and does not exist"
                )
            )
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errs.append(
                _field_invalid_list(
                    value_path, values, "for 'Gt', 'Lt' operators, exactly one value is required"
                )
            )
        for i, v in enumerate(vals):
            if _parse_int64(v) is None:
                errs.append(
                    _field_invalid(
                        f"{value_path}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                )
    else:
        supported = ", ".join(_go_quote(o) for o in _VALID_OPERATORS)
        errs.append(
            f"{child('operator')}: Unsupported value: {_go_quote(operator)}: supported values: {supported}"
        )
    for i, v in enumerate(vals):
        value_errs = _is_valid_label_value(v)
        if value_errs:
            errs.append(_field_invalid(f"{value_path}[{i}][{key}]", v, "; ".join(value_errs)))
    if errs:
        raise SelectorError(_aggregate(errs))
    return Requirement(key, operator, tuple(vals))


class LabelSelector:
    """A parsed label selector: the AND of its requirements (or the special "nothing" selector)."""

    __slots__ = ("_nothing", "_requirements")

    def __init__(self, requirements: tuple[Requirement, ...] = (), *, nothing: bool = False) -> None:
        # Upstream sorts by key (stable), which also fixes the String() form.
        self._requirements = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        return self._requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        present: Mapping[str, str] = labels if labels is not None else {}
        return all(r.matches(present) for r in self._requirements)

    def is_empty(self) -> bool:
        """True when the selector does not restrict anything (``Selector.Empty()``)."""
        return not self._nothing and not self._requirements

    def is_nothing(self) -> bool:
        return self._nothing

    def requires_exact_match(self, key: str) -> str | None:
        """``Selector.RequiresExactMatch``: the single value ``key`` must have, if the selector fixes one."""
        for r in self._requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._requirements)

    def __repr__(self) -> str:
        return "LabelSelector(nothing)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self._requirements))


def everything() -> LabelSelector:
    """``labels.Everything()``."""
    return LabelSelector()


def nothing() -> LabelSelector:
    """``labels.Nothing()``."""
    return LabelSelector(nothing=True)


class _Tok(IntEnum):
    ERROR = 0
    END_OF_STRING = 1
    CLOSED_PAR = 2
    COMMA = 3
    DOES_NOT_EXIST = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GREATER_THAN = 7
    IDENTIFIER = 8
    IN = 9
    LESS_THAN = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_STRING_TO_TOKEN = {
    ")": _Tok.CLOSED_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.DOES_NOT_EXIST,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GREATER_THAN,
    "in": _Tok.IN,
    "<": _Tok.LESS_THAN,
    "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN,
    "(": _Tok.OPEN_PAR,
}
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")


class _Lexer:
    """Port of ``labels.Lexer``; a NUL character reads as end of input, exactly as in Go."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0

    def read(self) -> str:
        if self.pos < len(self.s):
            ch = self.s[self.pos]
            self.pos += 1
            return ch
        return "\0"

    def unread(self) -> None:
        self.pos -= 1

    def scan_id_or_keyword(self) -> tuple[_Tok, str]:
        buf: list[str] = []
        while True:
            ch = self.read()
            if ch == "\0":
                break
            if ch in _SPECIAL or ch in _WHITESPACE:
                self.unread()
                break
            buf.append(ch)
        lit = "".join(buf)
        return _STRING_TO_TOKEN.get(lit, _Tok.IDENTIFIER), lit

    def scan_special_symbol(self) -> tuple[_Tok, str]:
        last: tuple[_Tok, str] | None = None
        buf = ""
        while True:
            ch = self.read()
            if ch == "\0":
                break
            if ch in _SPECIAL:
                buf += ch
                tok = _STRING_TO_TOKEN.get(buf)
                if tok is not None:
                    last = (tok, buf)
                elif last is not None:
                    self.unread()
                    break
            else:
                self.unread()
                break
        if last is None:
            return _Tok.ERROR, f"error expected: keyword found '{buf}'"
        return last

    def lex(self) -> tuple[_Tok, str]:
        ch = self.read()
        while ch in _WHITESPACE:
            ch = self.read()
        if ch == "\0":
            return _Tok.END_OF_STRING, ""
        self.unread()
        if ch in _SPECIAL:
            return self.scan_special_symbol()
        return self.scan_id_or_keyword()


class _Parser:
    """Port of ``labels.Parser`` (recursive descent over the pre-scanned token list)."""

    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self.items: list[tuple[_Tok, str]] = []
        while True:
            item = lexer.lex()
            self.items.append(item)
            if item[0] == _Tok.END_OF_STRING:
                break
        self.position = 0

    def _at(self, index: int, values: bool) -> tuple[_Tok, str]:
        tok, lit = self.items[min(index, len(self.items) - 1)]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENTIFIER
        return tok, lit

    def lookahead(self, values: bool = True) -> tuple[_Tok, str]:
        return self._at(self.position, values)

    def consume(self, values: bool = True) -> tuple[_Tok, str]:
        self.position += 1
        return self._at(self.position - 1, values)

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_Tok.IDENTIFIER, _Tok.DOES_NOT_EXIST):
                try:
                    requirements.append(self.parse_requirement())
                except SelectorError as err:
                    raise SelectorError(f"unable to parse requirement: {err}") from None
                tok, lit = self.consume()
                if tok == _Tok.END_OF_STRING:
                    return requirements
                if tok == _Tok.COMMA:
                    tok2, lit2 = self.lookahead()
                    if tok2 not in (_Tok.IDENTIFIER, _Tok.DOES_NOT_EXIST):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok == _Tok.END_OF_STRING:
                return requirements
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        operator = self.parse_operator()
        if operator in (IN, NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return new_requirement(key, operator, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        tok, lit = self.consume()
        if tok == _Tok.DOES_NOT_EXIST:
            operator = DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _Tok.IDENTIFIER:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key_err = _validate_label_key(lit, "<nil>")
        if key_err:
            raise SelectorError(key_err)
        if self.lookahead()[0] in (_Tok.END_OF_STRING, _Tok.COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return lit, operator

    def parse_operator(self) -> str:
        tok, lit = self.consume(values=False)
        operator = {
            _Tok.IN: IN,
            _Tok.EQUALS: EQUALS,
            _Tok.DOUBLE_EQUALS: DOUBLE_EQUALS,
            _Tok.GREATER_THAN: GREATER_THAN,
            _Tok.LESS_THAN: LESS_THAN,
            _Tok.NOT_IN: NOT_IN,
            _Tok.NOT_EQUALS: NOT_EQUALS,
        }.get(tok)
        if operator is None:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operator

    def parse_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _Tok.OPEN_PAR:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_Tok.IDENTIFIER, _Tok.COMMA):
            values = self.parse_identifiers_list()
            if self.consume()[0] != _Tok.CLOSED_PAR:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok == _Tok.CLOSED_PAR:
            self.consume()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _Tok.IDENTIFIER:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _Tok.COMMA:
                    continue
                if tok2 == _Tok.CLOSED_PAR:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _Tok.COMMA:
                if not values:
                    values.add("")  # "(,"
                tok2 = self.lookahead()[0]
                if tok2 == _Tok.CLOSED_PAR:
                    values.add("")  # ",)"
                    return values
                if tok2 == _Tok.COMMA:
                    self.consume()
                    values.add("")  # ",,"
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_Tok.END_OF_STRING, _Tok.COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _Tok.IDENTIFIER:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """``labels.Parse``: parse the ``labelSelector`` query-parameter syntax.

    Raises :class:`SelectorError` carrying the message kube-apiserver answers with (HTTP 400).
    """
    return LabelSelector(tuple(_Parser(text).parse()))


_DICT_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(sel: Mapping[str, Any] | None) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector`` for the JSON form of a ``metav1.LabelSelector``.

    ``None`` selects nothing; a selector without ``matchLabels`` and ``matchExpressions`` (``{}``)
    selects everything. Invalid keys, values or operators raise :class:`SelectorError`.
    """
    if sel is None:
        return nothing()
    if not isinstance(sel, Mapping):
        raise SelectorError(f"invalid label selector: expected an object, got {type(sel).__name__}")
    match_labels = sel.get("matchLabels") or {}
    match_expressions = sel.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise SelectorError("invalid label selector: matchLabels must be an object")
    if not isinstance(match_expressions, list):
        raise SelectorError("invalid label selector: matchExpressions must be a list")
    if len(match_labels) + len(match_expressions) == 0:
        return everything()
    requirements: list[Requirement] = []
    # Go iterates the map in random order; sorting makes the reported error deterministic.
    for key in sorted(match_labels, key=str):
        value = match_labels[key]
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError("invalid label selector: matchLabels keys and values must be strings")
        requirements.append(new_requirement(key, EQUALS, [value]))
    for expr in match_expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("invalid label selector: matchExpressions entries must be objects")
        raw_operator = expr.get("operator") or ""
        key = expr.get("key") or ""
        values = expr.get("values") or []
        if not isinstance(raw_operator, str) or not isinstance(key, str):
            raise SelectorError("invalid label selector: key and operator must be strings")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError("invalid label selector: values must be a list of strings")
        operator = _DICT_OPERATORS.get(raw_operator)
        if operator is None:
            raise SelectorError(f"{_go_quote(raw_operator)} is not a valid label selector operator")
        requirements.append(new_requirement(key, operator, list(values)))
    return LabelSelector(tuple(requirements))


# --------------------------------------------------------------------------------------------------
# Field selectors (k8s.io/apimachinery/pkg/fields)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """One field term: ``operator`` is ``"="`` (``=`` and ``==`` are the same) or ``"!="``."""

    field: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_field_value(self.value)}"


class FieldSelector:
    """A parsed field selector: the AND of its terms."""

    __slots__ = ("_terms",)

    def __init__(self, terms: tuple[FieldRequirement, ...] = ()) -> None:
        self._terms = tuple(terms)

    @property
    def requirements(self) -> tuple[FieldRequirement, ...]:
        return self._terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(t.matches(fields) for t in self._terms)

    def keys(self) -> set[str]:
        return {t.field for t in self._terms}

    def is_empty(self) -> bool:
        return not self._terms

    def requires_exact_match(self, field: str) -> str | None:
        """``Selector.RequiresExactMatch``: the value ``field`` must equal, if an ``=`` term fixes one."""
        for t in self._terms:
            if t.field == field and t.operator == "=":
                return t.value
        return None

    def __str__(self) -> str:
        return ",".join(str(t) for t in self._terms)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._terms == other._terms

    def __hash__(self) -> int:
        return hash(self._terms)


def escape_field_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(s: str) -> str:
    """``fields.UnescapeValue``."""
    if not any(c in s for c in "\\,="):
        return s
    out: list[str] = []
    in_slash = False
    for c in s:
        if in_slash:
            if c in "\\,=":
                out.append(c)
            else:
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            in_slash = False
            continue
        if c == "\\":
            in_slash = True
        elif c in ",=":
            # Upstream formats the rune with %v, i.e. as its code point number.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(selector: str) -> list[str]:
    """``fields.splitTerms``: split on unescaped commas, keeping escapes in place."""
    if not selector:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(selector):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


_TERM_OPERATORS = ("!=", "==", "=")


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``fields.splitTerm``: split at the first recognised operator."""
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


# spec.host is accepted for Pods for old v1 clients and rewritten to spec.nodeName.
_FIELD_ALIASES = {"spec.host": "spec.nodeName"}


def parse_field_selector(text: str, supported: Collection[str], *, kind: str | None = None) -> FieldSelector:
    """``fields.ParseSelector`` followed by kube-apiserver's field-label conversion.

    Terms whose field is not in ``supported`` raise :class:`SelectorError` with
    ``field label not supported: <field>``. Syntax errors are reported before unsupported fields, and
    terms are checked in sorted order, as upstream does.

    ``kind`` is optional: pass the kind of a *built-in* resource that has no field-label conversion
    function of its own (ConfigMap, Deployment, ...) to get the message kube-apiserver's default
    conversion uses for those (``"x" is not a known field selector: only "metadata.name",
    "metadata.namespace"``). Leave it ``None`` for custom resources.
    """
    terms: list[FieldRequirement] = []
    for part in sorted(_split_terms(text)):
        if part == "":
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        value = _unescape_field_value(rhs)
        terms.append(FieldRequirement(lhs, "!=" if op == "!=" else "=", value))
    converted: list[FieldRequirement] = []
    for term in terms:
        name = term.field
        if name not in supported:
            alias = _FIELD_ALIASES.get(name)
            if alias is not None and alias in supported:
                name = alias
            elif kind is not None and kind not in _KIND_FIELDS:
                raise SelectorError(
                    f'{_go_quote(name)} is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"'
                )
            else:
                raise SelectorError(f"field label not supported: {name}")
        converted.append(FieldRequirement(name, term.operator, term.value))
    return FieldSelector(tuple(converted))


# --------------------------------------------------------------------------------------------------
# Selectable fields per kind (kube-apiserver registry strategies + field-label conversion functions)
# --------------------------------------------------------------------------------------------------

_META_NAME = "metadata.name"
_META_NAMESPACE = "metadata.namespace"
_META_FIELDS = (_META_NAME, _META_NAMESPACE)

# Kinds with their own field-label conversion function, mapped to the fields it accepts.
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        *_META_FIELDS,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        # Accepted by the conversion function but absent from the pod field set, so it only ever
        # compares against "" (as upstream).
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    "Event": (
        *_META_FIELDS,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Secret": (*_META_FIELDS, "type"),
    "Namespace": (_META_NAME, "status.phase"),
    "Node": (_META_NAME, "spec.unschedulable"),
    "Service": (*_META_FIELDS, "spec.clusterIP", "spec.type"),
    "ReplicationController": (*_META_FIELDS, "status.replicas"),
    "Job": (*_META_FIELDS, "status.successful"),
    "CertificateSigningRequest": (_META_NAME, "spec.signerName"),
    "ClusterTrustBundle": (_META_NAME, "spec.signerName"),
}


def supported_fields(kind: str) -> frozenset[str]:
    """The field labels kube-apiserver accepts in a ``fieldSelector`` for ``kind``.

    Kinds without their own conversion function (ConfigMap, Deployment, custom resources, ...) accept
    ``metadata.name`` and ``metadata.namespace``. Note the upstream quirks kept here: Namespace, Node,
    CertificateSigningRequest and ClusterTrustBundle reject ``metadata.namespace``, and Pod accepts
    ``status.podIPs`` although its value always reads as ``""``.
    """
    return frozenset(_KIND_FIELDS.get(kind, _META_FIELDS))


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sub(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _int_str(value: Any) -> str:
    try:
        return str(int(value or 0))
    except (TypeError, ValueError):
        return "0"


def object_fields(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    """The field set kube-apiserver matches field selectors against (``GetAttrs`` of the registry).

    Always contains ``metadata.name`` and ``metadata.namespace`` (``""`` for cluster-scoped objects).
    Values the real server would have filled in through API defaulting on create (Pod
    ``restartPolicy``/``schedulerName``/``phase``, Secret ``type``, Namespace ``phase``, Service
    ``type``) are reported with those defaults when the stored object lacks them.
    """
    meta = _sub(obj, "metadata")
    spec = _sub(obj, "spec")
    status = _sub(obj, "status")
    fields: dict[str, str] = {
        _META_NAME: _str(meta.get("name")),
        _META_NAMESPACE: _str(meta.get("namespace")),
    }
    if kind == "Pod":
        pod_ips = status.get("podIPs")
        pod_ip = _str(status.get("podIP"))
        if not pod_ip and isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
            pod_ip = _str(pod_ips[0].get("ip"))
        fields.update(
            {
                "spec.nodeName": _str(spec.get("nodeName")),
                "spec.restartPolicy": _str(spec.get("restartPolicy")) or "Always",
                "spec.schedulerName": _str(spec.get("schedulerName")) or "default-scheduler",
                "spec.serviceAccountName": _str(spec.get("serviceAccountName") or spec.get("serviceAccount")),
                "spec.hostNetwork": "true" if spec.get("hostNetwork") is True else "false",
                "status.phase": _str(status.get("phase")) or "Pending",
                "status.podIP": pod_ip,
                "status.nominatedNodeName": _str(status.get("nominatedNodeName")),
            }
        )
    elif kind == "Event":
        involved = _sub(obj, "involvedObject")
        reporting = _str(obj.get("reportingComponent"))
        fields.update(
            {
                "involvedObject.kind": _str(involved.get("kind")),
                "involvedObject.namespace": _str(involved.get("namespace")),
                "involvedObject.name": _str(involved.get("name")),
                "involvedObject.uid": _str(involved.get("uid")),
                "involvedObject.apiVersion": _str(involved.get("apiVersion")),
                "involvedObject.resourceVersion": _str(involved.get("resourceVersion")),
                "involvedObject.fieldPath": _str(involved.get("fieldPath")),
                "reason": _str(obj.get("reason")),
                "reportingComponent": reporting,
                "source": _str(_sub(obj, "source").get("component")) or reporting,
                "type": _str(obj.get("type")),
            }
        )
    elif kind == "Secret":
        fields["type"] = _str(obj.get("type")) or "Opaque"
    elif kind == "Namespace":
        fields["status.phase"] = _str(status.get("phase")) or "Active"
    elif kind == "Node":
        fields["spec.unschedulable"] = "true" if spec.get("unschedulable") is True else "false"
    elif kind == "Service":
        fields["spec.clusterIP"] = _str(spec.get("clusterIP"))
        fields["spec.type"] = _str(spec.get("type")) or "ClusterIP"
    elif kind == "ReplicationController":
        fields["status.replicas"] = _int_str(status.get("replicas"))
    elif kind == "Job":
        fields["status.successful"] = _int_str(status.get("succeeded"))
    elif kind in ("CertificateSigningRequest", "ClusterTrustBundle"):
        fields["spec.signerName"] = _str(spec.get("signerName"))
    return fields
