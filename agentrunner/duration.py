"""Go-style durations (``30s``, ``5m``, ``1h30m``, ``300ms``) for ``RUN_TIMEOUT``.

The workflow passes the run's ``spec.timeout`` through unchanged, so the agent must read
exactly Go's ``time.ParseDuration`` grammar. The control plane has its own parser in
``models.duration``; this copy keeps the agent image free of the control plane's
dependencies (pydantic, kubernetes, temporalio).
"""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # Go accepts both micro signs
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_seconds(text: str) -> float:
    """Parse a Go duration into seconds; raises ValueError quoting the bad input."""
    s = text.strip()
    if not s:
        raise ValueError("duration is empty")
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(
                f"invalid duration {text!r}: expected a number followed by a unit "
                "(ns, us, ms, s, m, h), e.g. '90s' or '1h30m'"
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total
