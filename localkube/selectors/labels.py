"""Label selectors (k8s.io/apimachinery/pkg/labels): the lexer, the parser, `NewRequirement`'s validation, matching,
and `metav1.LabelSelectorAsSelector`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from .common import (
    SelectorError,
    _aggregate,
    _field_invalid,
    _field_invalid_list,
    _go_quote,
    _is_valid_label_value,
    _parse_int64,
    _validate_label_key,
)

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
