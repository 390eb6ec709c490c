"""`agentrun schedules list | get | trigger | pause | resume | backfill`: schedules from a terminal.

Unlike `agentrun list` (Kubernetes), these go through the HTTP API (cli/api.py), as verdicts do: it owns
what a schedule command must check (the bridge's validation, whether the object is mirrored into
Temporal yet, the backfill range `[start, end)` and its limits), so the command line and HTTP callers
get the same answers, and the API records who did it. Where the API is: cli/options.py. `list` and `get` print
the API's schedule objects with `-o json|yaml` (a list as `kind: List`), rows with `-o table|wide`; `get` prints
YAML unless asked otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

from models.schedule import ScheduleStatus

from . import output
from .api import Api, ApiError

PREFIX = "/api/v1/schedules"


def _fail(name: str, e: ApiError) -> int:
    print(f"sympoziumschedule/{name}: {e.detail}" if name else f"agentrun: {e.detail}", file=sys.stderr)
    return 1


HEADER = ("NAME", "AGENT", "SCHEDULE", "TIMEZONE", "PHASE", "SUSPEND", "LAST RUN", "NEXT RUN", "RUNS")
WIDE = ("LAST RUN TIME", "MESSAGE")


def _row(s: dict[str, Any], *, wide: bool) -> tuple[str, ...]:
    row = (s["name"], s["agent"], s["schedule"], s["timezone"], s.get("phase") or "",
           "yes" if s["suspend"] else "no", s.get("last_run_name") or "", s.get("next_run_time") or "",
           str(s["total_runs"]))
    return row + ((s.get("last_run_time") or "", s.get("message") or "") if wide else ())


def list_schedules(api: Api, namespace: str, *, fmt: str = "table") -> int:
    try:
        items = api.call("GET", PREFIX, namespace=namespace)
    except ApiError as e:
        return _fail("", e)
    if fmt in ("json", "yaml"):
        output.items(items, fmt)
    else:
        output.table(HEADER + (WIDE if fmt == "wide" else ()), [_row(s, wide=fmt == "wide") for s in items])
    return 0


def get_schedule(api: Api, namespace: str, name: str, *, fmt: str = "yaml") -> int:
    try:
        obj = api.call("GET", f"{PREFIX}/{name}", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    if fmt in ("json", "yaml"):
        output.document(obj, fmt)
    else:
        output.table(HEADER + (WIDE if fmt == "wide" else ()), [_row(_summary(obj), wide=fmt == "wide")])
    return 0


def _summary(obj: dict[str, Any]) -> dict[str, Any]:
    """A schedule object (what GET answers for one) as the list's summary fields."""
    meta, spec, st = obj.get("metadata") or {}, obj.get("spec") or {}, ScheduleStatus.of(obj)
    return {"name": meta.get("name", ""), "agent": str(spec.get("agentRef") or ""),
            "schedule": str(spec.get("schedule") or ""), "timezone": str(spec.get("timezone") or "UTC"),
            "suspend": bool(spec.get("suspend")), "phase": st.phase, "message": st.message,
            "last_run_time": st.last_run_time, "next_run_time": st.next_run_time, "last_run_name": st.last_run_name,
            "total_runs": st.total_runs}


def set_suspend(api: Api, namespace: str, name: str, *, suspend: bool) -> int:
    try:
        api.call("POST", f"{PREFIX}/{name}/{'pause' if suspend else 'resume'}", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: {'paused' if suspend else 'resumed'} (spec.suspend: {str(suspend).lower()})")
    return 0


def trigger(api: Api, namespace: str, name: str) -> int:
    try:
        out = api.call("POST", f"{PREFIX}/{name}/trigger", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: triggered ({out['detail']})")
    return 0


def backfill(api: Api, namespace: str, name: str, *, start: str, end: str) -> int:
    try:
        out = api.call("POST", f"{PREFIX}/{name}/backfill", namespace=namespace, body={"start": start, "end": end})
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: {out['ticks']} tick(s) in [{out['start']}, {out['end']}) backfilled")
    for run in out["runs"]:
        print(f"  agentrun/{run}")
    return 0
