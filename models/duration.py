"""Go-style durations (`30s`, `5m`, `1h30m`, `1.5h`, `300ms`), as Sympozium YAML writes them.

Kubernetes and Sympozium parse these with Go's `time.ParseDuration`; we accept exactly that
grammar so a value valid there is valid here and vice versa.
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_MAX_SECONDS = (2**63 - 1) / 1e9
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
# The same grammar, whole-string, for CRD `pattern`s.
DURATION_PATTERN = r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration; raises ValueError naming the bad input."""
    if not isinstance(text, str):
        raise ValueError(f"duration must be a string like '5m', got {text!r}")
    s = text.strip()
    if not s:
        raise ValueError("duration is empty")
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return timedelta(0)
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}: expected a number followed by a unit "
                             "(ns, us, ms, s, m, h), e.g. '90s' or '1h30m'")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if total > _GO_MAX_SECONDS:
        # Go's time.ParseDuration refuses what does not fit an int64 of nanoseconds (~292 years).
        raise ValueError(f"invalid duration {text!r}: too long (at most about 292 years)")
    return timedelta(seconds=sign * total)


def format_duration(d: timedelta) -> str:
    """Go's Duration.String() for whole and fractional seconds: 1h30m0s, 5m0s, 1.5s."""
    total = d.total_seconds()
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rem = divmod(total, 3600)
    minutes, seconds = divmod(rem, 60)
    sec = f"{seconds:.9f}".rstrip("0").rstrip(".")
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{sec}s"
    if minutes:
        return f"{sign}{int(minutes)}m{sec}s"
    return f"{sign}{sec}s"
