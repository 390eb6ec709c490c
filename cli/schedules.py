"""`agentrun schedules list | get | trigger | pause | resume | backfill`: schedules from a terminal.

Unlike `agentrun list` (Kubernetes), these go through the HTTP API (cli/api.py), as verdicts do: it owns
what a schedule command must check (the bridge's validation, whether the object is mirrored into
Temporal yet, the backfill range `[start, end)` and its limits), so the command line and HTTP callers
get the same answers, and the API records who did it. The API is the one `agentrun up` started
(`<state-dir>/endpoints.json`), or AGENTRUN_API_URL with AGENTRUN_API_TOKEN.
"""

from __future__ import annotations

import sys

import yaml

from .api import Api, ApiError

PREFIX = "/api/v1/schedules"


def _fail(name: str, e: ApiError) -> int:
    print(f"sympoziumschedule/{name}: {e.detail}" if name else e.detail, file=sys.stderr)
    return 1


def table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def list_schedules(api: Api, namespace: str) -> int:
    try:
        items = api.call("GET", PREFIX, namespace=namespace)
    except ApiError as e:
        return _fail("", e)
    rows: list[tuple[str, ...]] = [("NAME", "AGENT", "SCHEDULE", "TIMEZONE", "PHASE", "SUSPEND", "LAST RUN",
                                    "NEXT RUN", "RUNS")]
    for s in items:
        rows.append((s["name"], s["agent"], s["schedule"], s["timezone"], s.get("phase") or "",
                     "yes" if s["suspend"] else "no", s.get("last_run_name") or "", s.get("next_run_time") or "",
                     str(s["total_runs"])))
    table(rows)
    return 0


def get_schedule(api: Api, namespace: str, name: str) -> int:
    try:
        obj = api.call("GET", f"{PREFIX}/{name}", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(yaml.safe_dump(obj, sort_keys=False), end="")
    return 0


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
