"""String formats (kube-openapi strfmt.Default, loosely) and `pattern`s: Go RE2 syntax translated to Python `re`."""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import functools
import ipaddress
import re
from typing import Any

# --------------------------------------------------------------------------------------------------
# Formats (kube-openapi strfmt.Default, loosely)
# --------------------------------------------------------------------------------------------------

_RX_UUID = {
    "uuid": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I),
    "uuid3": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I),
    "uuid4": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I),
    "uuid5": re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I),
}
_RX_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$", re.ASCII)
_RX_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(z|[+-]\d{2}:\d{2})$", re.ASCII)
_RX_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
_RX_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_RX_SCALA_DURATION = re.compile(r"^\s*(?:\d+\s*[A-Za-zµ]+\s*)+$")
_RX_SCALA_PART = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_DURATION_UNITS = (
    ("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
    ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"),
)  # fmt: skip
_RX_HOSTNAME = re.compile(
    r"^([^\W_]((-?[^\W_]{0,62})?)|([^\W_](([^\W_-]|-){0,61}[^\W_])?\.)+[^\W_](-?[^\W_]){1,62})$"
)
_RX_MAC = re.compile(
    r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}"
    r"|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2,9})$"
)
_RX_EMAIL = re.compile(r"^(?:[^<>]*<\s*)?[^@\s<>]+@[^@\s<>]+(?:\s*>)?$")
_RX_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_BYTE = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*"
_RX_RGB = re.compile(rf"^rgb\({_BYTE},{_BYTE},{_BYTE}\)$", re.ASCII)
_RX_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", re.ASCII)
_RX_CREDITCARD = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
    r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
)
_RX_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _is_date(s: str) -> bool:
    m = _RX_DATE.match(s)
    if not m:
        return False
    try:
        _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    return True


def _is_datetime(s: str) -> bool:
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _RX_TIME.match(parts[1])
    if m is None:
        return False
    return m[1] <= "23" and m[2] <= "59" and m[3] <= "59"


def _is_duration(s: str) -> bool:
    if s == "0" or _RX_GO_DURATION.match(s):
        return True
    if not _RX_SCALA_DURATION.match(s):
        return False
    for _, unit in _RX_SCALA_PART.findall(s):
        u = unit.strip().lower()
        for variants in _DURATION_UNITS:
            if u in variants or u.startswith(variants[-1]):
                return True
    return False


def _is_uri(s: str) -> bool:
    if not s or any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return False
    if _RX_URI_SCHEME.match(s):
        rest = s.split(":", 1)[1]
        if rest.startswith("//"):
            host = rest[2:].split("/", 1)[0].split("?", 1)[0]
            return " " not in host
        return True
    return s.startswith("/")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def _is_isbn10(s: str) -> bool:
    s = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"[0-9]{9}[0-9X]", s):
        return False
    total = sum((i + 1) * (10 if c == "X" else int(c)) for i, c in enumerate(s))
    return total % 11 == 0


def _is_isbn13(s: str) -> bool:
    s = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"[0-9]{13}", s):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(s))
    return total % 10 == 0


def _is_ip(s: str, version: int) -> bool:
    if "%" in s:
        return False
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return ("." in s) if version == 4 else (":" in s)


def _is_cidr(s: str) -> bool:
    if "/" not in s or "%" in s:
        return False
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return True


def _is_base64(s: str) -> bool:
    if not _RX_BASE64.match(s):
        return False
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _check_format(fmt: str, s: str) -> bool:
    n = fmt.replace("-", "")
    checks: dict[str, Any] = {
        "datetime": _is_datetime,
        "date": _is_date,
        "duration": _is_duration,
        "byte": _is_base64,
        "uri": _is_uri,
        "email": lambda v: bool(_RX_EMAIL.match(v)),
        "hostname": lambda v: (
            bool(_RX_HOSTNAME.match(v)) and len(v) <= 255 and all(len(p) <= 63 for p in v.split("."))
        ),
        "ipv4": lambda v: _is_ip(v, 4),
        "ipv6": lambda v: _is_ip(v, 6),
        "cidr": _is_cidr,
        "mac": lambda v: bool(_RX_MAC.match(v)),
        "isbn": lambda v: _is_isbn10(v) or _is_isbn13(v),
        "isbn10": _is_isbn10,
        "isbn13": _is_isbn13,
        "creditcard": lambda v: (
            bool(_RX_CREDITCARD.match(re.sub(r"[^0-9]+", "", v))) and _luhn(re.sub(r"[^0-9]+", "", v))
        ),
        "ssn": lambda v: bool(_RX_SSN.match(v)),
        "hexcolor": lambda v: bool(_RX_HEXCOLOR.match(v)),
        "rgbcolor": lambda v: bool(_RX_RGB.match(v)),
        "bsonobjectid": lambda v: bool(re.fullmatch(r"[0-9a-fA-F]{24}", v)),
        "password": lambda v: True,
    }
    if n in _RX_UUID:
        return bool(_RX_UUID[n].match(s))
    check = checks.get(n)
    return True if check is None else bool(check(s))


# --------------------------------------------------------------------------------------------------
# Patterns: Go RE2 syntax translated to Python re
# --------------------------------------------------------------------------------------------------

_POSIX_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "0-9A-Za-z", "upper": "A-Z", "lower": "a-z",
    "space": r"\t\n\v\f\r ", "xdigit": "0-9A-Fa-f", "word": "0-9A-Za-z_", "blank": r"\t ",
    "punct": r"!-/:-@\[-`{-~", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": "!-~",
}  # fmt: skip
_UNSUPPORTED_PERL = ("(?=", "(?!", "(?<=", "(?<!")


def _re2_problem(pattern: str) -> str | None:
    """The Go regexp.Compile error for RE2-only restrictions Python would accept."""
    for bad in _UNSUPPORTED_PERL:
        if bad in pattern:
            return f"error parsing regexp: invalid or unsupported Perl syntax: `{bad}`"
    m = re.search(r"(?<!\\)(?:\\\\)*(\\[1-9])", pattern)
    if m:
        return f"error parsing regexp: invalid escape sequence: `{m[1]}`"
    return None


def _translate_pattern(p: str) -> str:
    multiline = bool(re.search(r"\(\?[a-zA-Z]*m", p))
    out: list[str] = []
    i, n = 0, len(p)
    in_class = False
    while i < n:
        c = p[i]
        if c == "\\" and i + 1 < n:
            nxt = p[i + 1]
            if nxt == "z" and not in_class:
                out.append(r"\Z")
            elif nxt in "pP" and i + 2 < n:
                # \pL / \p{L} / \p{N}: approximate the two Unicode classes CRDs use
                if p[i + 2] == "{":
                    end = p.find("}", i + 3)
                    name = p[i + 3 : end] if end != -1 else ""
                    consumed = (end + 1 - i) if end != -1 else 2
                else:
                    name, consumed = p[i + 2], 3
                cls = {"L": r"^\W\d_", "N": r"\d", "Nd": r"\d"}.get(name)
                if cls is None:
                    raise re.error(f"unsupported Unicode class \\{nxt}{{{name}}}")
                negate = nxt == "P"
                if in_class:
                    if negate:
                        raise re.error(f"unsupported negated class \\{nxt}{{{name}}} in brackets")
                    # best effort: digits, or ASCII + Latin letters
                    out.append(r"\d" if cls == r"\d" else "a-zA-Z\u00c0-\u024f")
                elif cls == r"\d":
                    out.append(r"\D" if negate else r"\d")
                else:
                    out.append(r"[\W\d_]" if negate else r"[^\W\d_]")
                i += consumed
                continue
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "[" and p.startswith("[:", i):
                end = p.find(":]", i + 2)
                name = p[i + 2 : end] if end != -1 else ""
                if name in _POSIX_CLASSES:
                    out.append(_POSIX_CLASSES[name])
                    i = end + 2
                    continue
            if c == "[":
                out.append(r"\[")
                i += 1
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and p[i] == "^":
                out.append("^")
                i += 1
            if i < n and p[i] == "]":
                out.append(r"\]")
                i += 1
            continue
        if c == "$" and not multiline:
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _compile_pattern(pattern: str) -> re.Pattern[str] | str:
    """The compiled pattern, or the compile error as text."""
    problem = _re2_problem(pattern)
    if problem:
        return problem
    try:
        translated = _translate_pattern(pattern)
        flags = 0 if re.search(r"\\[pP]", pattern) else re.ASCII
        return re.compile(translated, flags)
    except re.error as e:
        return f"error parsing regexp: {e}"
