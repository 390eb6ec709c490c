"""The JSONPath kube-apiserver evaluates for a CRD's additionalPrinterColumns (k8s.io/client-go/util/jsonpath, the
subset printer columns use): `json_path_get`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .nodes import _json_equal

# --------------------------------------------------------------------------------------------------
# JSONPath for additionalPrinterColumns
# --------------------------------------------------------------------------------------------------

_JP_FILTER = re.compile(r"^\s*@((?:\.[\w\-/]+|\['[^']*'\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*$")


def json_path_get(obj: Any, jsonpath: str) -> Any:
    """Evaluate a CRD ``additionalPrinterColumns`` JSONPath; the first match, or None when absent.

    Supports ``.field`` (``\\.`` escapes a dot), ``['quoted.key']``, ``[n]`` (negative counts
    from the end), ``[*]``/``.*``, ``[a:b]`` slices, ``..field`` recursive descent and filters
    ``[?(@.type=='Ready')]`` (``==, !=, <, <=, >, >=`` or bare existence).  ``{...}`` braces are
    accepted.  As the server's table printer, only the first result is used.
    """
    try:
        steps = _jp_parse(jsonpath)
    except ValueError:
        return None
    nodes: list[Any] = [obj]
    for step in steps:
        nodes = [r for n in nodes for r in _jp_apply(step, n)]
        if not nodes:
            return None
    return nodes[0]


def _jp_parse(expr: str) -> list[tuple[Any, ...]]:
    e = expr.strip()
    if e.startswith("{") and e.endswith("}"):
        e = e[1:-1].strip()
    if e.startswith("$"):
        e = e[1:]
    if e and e[0] not in ".[":
        e = "." + e
    steps: list[tuple[Any, ...]] = []
    i, n = 0, len(e)
    while i < n:
        c = e[i]
        if c == ".":
            recursive = i + 1 < n and e[i + 1] == "."
            i += 2 if recursive else 1
            if i < n and e[i] == "*":
                steps.append(("recurse", None) if recursive else ("wild",))
                i += 1
                continue
            name_chars: list[str] = []
            while i < n and e[i] not in ".[":
                if e[i] == "\\" and i + 1 < n:
                    name_chars.append(e[i + 1])
                    i += 2
                    continue
                name_chars.append(e[i])
                i += 1
            name = "".join(name_chars)
            if recursive:
                steps.append(("recurse", name or None))
            elif name:
                steps.append(("field", name))
        elif c == "[":
            end = _jp_bracket_end(e, i)
            steps.append(_jp_bracket(e[i + 1 : end].strip()))
            i = end + 1
        else:
            raise ValueError(f"unexpected {c!r} in JSONPath")
    return steps


def _jp_bracket_end(e: str, start: int) -> int:
    quote = ""
    depth = 0
    for j in range(start, len(e)):
        ch = e[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unterminated [")


def _jp_bracket(inner: str) -> tuple[Any, ...]:
    if inner == "*":
        return ("wild",)
    if inner.startswith("?(") and inner.endswith(")"):
        m = _JP_FILTER.match(inner[2:-1])
        if not m:
            raise ValueError("unsupported filter")
        path = [a or b for a, b in re.findall(r"\.([\w\-/]+)|\['([^']*)'\]", m[1])]
        literal = _jp_literal(m[3]) if m[2] else None
        return ("filter", path, m[2], literal)
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return ("field", inner[1:-1])
    if ":" in inner:
        parts = [p.strip() for p in inner.split(":")]
        nums = [int(p) if p else None for p in parts]
        return ("slice", *nums[:3], *([None] * (3 - len(nums))))
    return ("index", int(inner))


def _jp_literal(text: str) -> Any:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t in ("true", "false"):
        return t == "true"
    if t == "null":
        return None
    try:
        return int(t)
    except ValueError:
        return float(t)


def _jp_children(n: Any) -> list[Any]:
    if isinstance(n, Mapping):
        return [n[k] for k in sorted(n)]
    if isinstance(n, (list, tuple)):
        return list(n)
    return []


def _jp_descendants(n: Any) -> list[Any]:
    out = [n]
    for c in _jp_children(n):
        out += _jp_descendants(c)
    return out


def _jp_filter_match(node: Any, path: Sequence[str], op: str | None, literal: Any) -> bool:
    cur = node
    for k in path:
        if not isinstance(cur, Mapping) or k not in cur:
            return False
        cur = cur[k]
    if op is None:
        return cur is not None and cur is not False
    if op in ("==", "!="):
        return _json_equal(cur, literal) == (op == "==")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (cur, literal))
    if not numbers and not (isinstance(cur, str) and isinstance(literal, str)):
        return False
    return bool({"<": cur < literal, "<=": cur <= literal, ">": cur > literal, ">=": cur >= literal}[op])


def _jp_apply(step: tuple[Any, ...], n: Any) -> list[Any]:
    kind = step[0]
    if kind == "field":
        return [n[step[1]]] if isinstance(n, Mapping) and step[1] in n else []
    if kind == "index":
        if isinstance(n, (list, tuple)) and -len(n) <= step[1] < len(n):
            return [n[step[1]]]
        return []
    if kind == "wild":
        return _jp_children(n)
    if kind == "slice":
        return list(n[slice(step[1], step[2], step[3])]) if isinstance(n, (list, tuple)) else []
    if kind == "recurse":
        nodes = _jp_descendants(n)
        if step[1] is None:
            return nodes[1:]
        return [d[step[1]] for d in nodes if isinstance(d, Mapping) and step[1] in d]
    if kind == "filter":
        if not isinstance(n, (list, tuple)):
            return []
        return [x for x in n if _jp_filter_match(x, step[1], step[2], step[3])]
    return []
