"""The agentrun HTTP API from the command line: one authenticated call.

User actions go through the API — creating and deleting runs (`agentrun run`, `agentrun delete`), the gate
verdicts (`approve`, `reject`, `rewrite`, `retry`) and `agentrun schedules ...` — so that the command line gets the
same checks and answers as every HTTP caller, and the API records who did it (the token's identity, never a name
the caller declares). Where the API and its token come from: cli/options.py (`--api`, `--token`, the stack's
endpoints.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from .options import Target


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
    def of(cls, target: Target) -> Api:
        url, token = target.api_url_and_token()
        return cls(url, token)

    def call(self, method: str, path: str, *, namespace: str, body: dict[str, Any] | None = None) -> Any:
        """`path` from the API's root (`/api/v1/...`); the answer's JSON, or ApiError."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            r = httpx.request(method, self.url + path, params={"namespace": namespace}, json=body, headers=headers,
                              timeout=60)
        except httpx.HTTPError as e:
            raise ApiError(0, f"cannot reach the API at {self.url}: {e}") from e
        if r.status_code >= 400:
            raise ApiError(r.status_code, _detail(r))
        try:
            return r.json() if r.content else None
        except ValueError as e:
            raise ApiError(r.status_code, f"{self.url} did not answer JSON (is it the agentrun API?)") from e


def _detail(r: httpx.Response) -> str:
    try:
        detail = r.json().get("detail")
    except (ValueError, AttributeError):
        return f"HTTP {r.status_code}: {r.text.strip()[:200]}"
    if isinstance(detail, list):  # validation problems: say where each one is
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('msg', '')}"
                         for d in detail if isinstance(d, dict))
    return str(detail) if detail else f"HTTP {r.status_code}"
