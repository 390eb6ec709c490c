"""The agentrun HTTP API from the command line: where it is, and one authenticated call.

`agentrun schedules ...` and the gate verdicts (`approve`, `reject`, `rewrite`, `retry`) go through the API, so
that the command line gets the same checks and answers as every HTTP caller, and the API records who
did it (the token's identity, never a name the caller declares). The API is the one `agentrun up`
started (`<state-dir>/endpoints.json`), or AGENTRUN_API_URL with AGENTRUN_API_TOKEN.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .up import endpoints


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
        """`path` from the API's root (`/api/v1/...`); the answer's JSON, or ApiError."""
        try:
            r = httpx.request(method, self.url + path, params={"namespace": namespace}, json=body,
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
