"""Kubernetes timestamps (RFC 3339, UTC), written and read in one place.

`metav1.Time` fields (creationTimestamp, status times) carry whole seconds; `metav1.MicroTime` (a
Lease's renewTime) carries microseconds. Deterministic: safe inside workflows (give them
`workflow.now()`). A naive datetime is taken as UTC, never as the server's local time.
"""

from __future__ import annotations

from datetime import UTC, datetime


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def rfc3339(t: datetime) -> str:
    """`2026-11-25T03:55:23Z`: a `metav1.Time`."""
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t: datetime) -> str:
    """`2026-11-25T03:55:23.123456Z`: a `metav1.MicroTime`."""
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_exact(t: datetime) -> str:
    """Microseconds only when there are any (a bound given to the second stays so)."""
    return _utc(t).isoformat().replace("+00:00", "Z")


def parse_rfc3339(value: object) -> datetime | None:
    """An aware UTC datetime, or None for anything that is not a timestamp (missing, empty, malformed)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return _utc(datetime.fromisoformat(value))
    except ValueError:
        return None
