"""W3C trace context as a run carries it (SPEC §12): the ``traceparent`` text on the run's annotation, in the
workflow's input, in each pod's ``TRACEPARENT``, and the trace ID in ``status.traceID``.

Pure functions over text, so the workflow can use them (no clock, no randomness): a malformed value is treated
as absent, never as an error, because the annotation is anyone's to write and a broken one must not stop a run.
"""

from __future__ import annotations

import re

# version 00: 2 hex, 32 hex trace ID (not all zeros), 16 hex span ID (not all zeros), 2 hex flags.
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
INVALID_TRACE_ID = "0" * 32
INVALID_SPAN_ID = "0" * 16


def parse(traceparent: str | None) -> tuple[str, str, int] | None:
    """(trace ID, parent span ID, flags) of a valid traceparent; None for anything else. Version ff is invalid,
    and a version other than 00 is read as 00 with what follows ignored (the specification's forward rule)."""
    m = _TRACEPARENT.match((traceparent or "").strip().lower())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == INVALID_TRACE_ID or span_id == INVALID_SPAN_ID:
        return None
    return trace_id, span_id, int(flags, 16)


def valid(traceparent: str | None) -> bool:
    return parse(traceparent) is not None


def trace_id_of(traceparent: str | None) -> str:
    """The 32-hex trace ID of a valid traceparent ("" otherwise)."""
    parsed = parse(traceparent)
    return parsed[0] if parsed else ""


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """The version-00 traceparent of a span context's numbers ("" for an invalid one)."""
    if not trace_id or not span_id:
        return ""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags & 0xff:02x}"
