"""Field selectors (k8s.io/apimachinery/pkg/fields): term splitting, value escaping, matching, and the refusal of a
field the kind does not support."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from .common import SelectorError, _go_quote
from .selectable import _KIND_FIELDS

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
