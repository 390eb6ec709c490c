"""`agentrun schedules list | get | trigger | pause | resume | backfill`: schedules from a terminal.

Unlike `agentrun list` (Kubernetes) and `approve` (Temporal), these go through the HTTP API: it owns
what a schedule command must check (the bridge's validation, whether the object is mirrored into
Temporal yet, the backfill range `[start, end)` and its limits), so the command line and HTTP callers
get the same answers, and the API records who did it. The API is the one `agentrun up` started
(`<state-dir>/endpoints.json`), or AGENTRUN_API_URL with AGENTRUN_API_TOKEN.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from .up import endpoints

PREFIX = "/api/v1/schedules"


class ApiError(Exception):
    """The API refused (its status and detail) or could not be reached (status 0)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class Api:
    url: str
    token: str

    @classmethod
    def locate(cls, state_dir: Path) -> Api:
        url, token = os.environ.get("AGENTRUN_API_URL", ""), os.environ.get("AGENTRUN_API_TOKEN", "")
        if url:
            return cls(url.rstrip("/"), token)
        if (state_dir / "endpoints.json").exists():
            info = endpoints(state_dir)
            if info.get("api"):
                return cls(str(info["api"]).rstrip("/"), str(info.get("api_token", "")))
        raise SystemExit(f"no API to talk to: no stack in {state_dir} (run `agentrun up`) and AGENTRUN_API_URL "
                         "is not set")

    def call(self, method: str, path: str, *, namespace: str, body: dict[str, Any] | None = None) -> Any:
        try:
            r = httpx.request(method, self.url + PREFIX + path, params={"namespace": namespace}, json=body,
                              headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        except httpx.HTTPError as e:
            raise ApiError(0, f"cannot reach the API at {self.url}: {e}") from e
        if r.status_code >= 400:
            raise ApiError(r.status_code, _detail(r))
        return r.json() if r.content else None


def _detail(r: httpx.Response) -> str:
    try:
        detail = r.json().get("detail")
    except ValueError:
        return f"HTTP {r.status_code}: {r.text.strip()[:200]}"
    if isinstance(detail, list):  # validation problems: say where each one is
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('msg', '')}"
                         for d in detail if isinstance(d, dict))
    return str(detail)


def _fail(name: str, e: ApiError) -> int:
    print(f"sympoziumschedule/{name}: {e.detail}" if name else e.detail, file=sys.stderr)
    return 1


def table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def list_schedules(api: Api, namespace: str) -> int:
    try:
        items = api.call("GET", "", namespace=namespace)
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
        obj = api.call("GET", f"/{name}", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(yaml.safe_dump(obj, sort_keys=False), end="")
    return 0


def set_suspend(api: Api, namespace: str, name: str, *, suspend: bool) -> int:
    try:
        api.call("POST", f"/{name}/{'pause' if suspend else 'resume'}", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: {'paused' if suspend else 'resumed'} (spec.suspend: {str(suspend).lower()})")
    return 0


def trigger(api: Api, namespace: str, name: str) -> int:
    try:
        out = api.call("POST", f"/{name}/trigger", namespace=namespace)
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: triggered ({out['detail']})")
    return 0


def backfill(api: Api, namespace: str, name: str, *, start: str, end: str) -> int:
    try:
        out = api.call("POST", f"/{name}/backfill", namespace=namespace, body={"start": start, "end": end})
    except ApiError as e:
        return _fail(name, e)
    print(f"sympoziumschedule/{name}: {out['ticks']} tick(s) in [{out['start']}, {out['end']}) backfilled")
    for run in out["runs"]:
        print(f"  agentrun/{run}")
    return 0
