"""Go's formatting of values (fmt %v / %q, strconv, encoding/json), so the messages of field errors match the real
server's byte for byte."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

# --------------------------------------------------------------------------------------------------
# Go formatting (fmt %v / %q, encoding/json) so messages match byte for byte
# --------------------------------------------------------------------------------------------------


def _go_quote(s: str) -> str:
    """strconv.Quote."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _shortest(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of a finite f > 0 and the decimal point position."""
    t = Decimal(repr(f)).as_tuple()
    digits = "".join(str(d) for d in t.digits)
    exp = int(t.exponent)
    dp = len(digits) + exp
    digits = digits.rstrip("0") or "0"
    return digits, dp


def _fmt_e(digits: str, dp: int, *, json_style: bool) -> str:
    x = dp - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if x < 0 else "+"
    ax = abs(x)
    exp = f"{ax}" if (json_style and x < 0) else f"{ax:02d}"
    return f"{mant}e{sign}{exp}"


def _fmt_f(digits: str, dp: int) -> str:
    if dp <= 0:
        return "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return digits + "0" * (dp - len(digits))
    return digits[:dp] + "." + digits[dp:]


def _go_float(f: float) -> str:
    """fmt's %v of a float64 (strconv 'g', shortest)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    digits, dp = _shortest(abs(f))
    x = dp - 1
    body = _fmt_e(digits, dp, json_style=False) if (x < -4 or x >= 6) else _fmt_f(digits, dp)
    return ("-" if f < 0 else "") + body


def _go_json_float(f: float) -> str:
    """encoding/json's rendering of a float64."""
    if math.isnan(f) or math.isinf(f):
        return "null"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    a = abs(f)
    digits, dp = _shortest(a)
    body = _fmt_e(digits, dp, json_style=True) if (a < 1e-6 or a >= 1e21) else _fmt_f(digits, dp)
    return ("-" if f < 0 else "") + body


def _go_json_str(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
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
        elif o < 0x20 or ch in "<>&" or o in (0x2028, 0x2029):
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json(v: Any) -> str:
    """json.Marshal (compact, map keys sorted, HTML-safe escaping)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_json_float(v)
    if isinstance(v, str):
        return _go_json_str(v)
    if isinstance(v, Mapping):
        items = sorted((str(k), val) for k, val in v.items())
        return "{" + ",".join(f"{_go_json_str(k)}:{_go_json(val)}" for k, val in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_go_json(x) for x in v) + "]"
    return _go_json_str(str(v))


def _go_value(v: Any) -> str:
    """How field.Error.ErrorBody prints a bad value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, str):
        return _go_quote(v)
    return _go_json(v)


def _go_v(v: Any) -> str:
    """fmt's %v of a decoded JSON value (only used inside kube-openapi messages)."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{k}:{_go_v(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(_go_v(x) for x in v) + "]"
    return str(v)
