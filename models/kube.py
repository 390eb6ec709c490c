"""The one Kubernetes access layer: typed errors, the client-side rate limit, one call wrapper.

Every process (worker activities, bridge, API, CLI) calls the cluster through `Kube.call`, which
runs the synchronous `kubernetes` client on a thread behind a shared token bucket and turns every
failure into one of the errors below, in the shape of kopf's `_cogs/clients/errors.py`. Callers
write `except NotFound:` and never compare status codes; each boundary maps these errors once:
activities to retryable or non-retryable `ApplicationError` (activities/errors.py), the API to
HTTP (api/errors.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError


class KubeError(Exception):
    """A failed call: what was being done, the HTTP status (0 when no answer came) and the server's message."""

    status_codes: ClassVar[tuple[int, ...]] = ()
    transient: ClassVar[bool] = False

    def __init__(self, action: str, message: str, *, status: int = 0, reason: str = "",
                 causes: list[str] | None = None) -> None:
        self.action, self.message, self.status, self.reason = action, message, status, reason
        self.causes = causes or []  # the Status's details.causes messages (e.g. which field, which patch test)
        suffix = f" (HTTP {status})" if status else ""
        super().__init__(f"{action}: {message}{suffix}")


class ClientError(KubeError):
    """The request was refused (4xx): repeating it unchanged will not help, except where a subclass says."""


class BadRequest(ClientError):
    status_codes = (400, 405, 415)


class Unauthorized(ClientError):
    status_codes = (401,)


class Forbidden(ClientError):
    status_codes = (403,)


class NotFound(ClientError):
    status_codes = (404,)


class Conflict(ClientError):
    """409: the object exists already (reason AlreadyExists), or it changed since it was read."""

    status_codes = (409,)

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Gone(ClientError):
    """410: a watch's resourceVersion is too old; list again."""

    status_codes = (410,)


class Invalid(ClientError):
    """422: the object does not pass validation; the message names the field."""

    status_codes = (422,)


class Transient(KubeError):
    """429, 5xx, or no answer at all: worth retrying with backoff."""

    transient = True


_BY_STATUS: dict[int, type[KubeError]] = {
    code: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict, Gone, Invalid)
    for code in cls.status_codes}


def _status_body(e: ApiException) -> tuple[str, str, list[str]]:
    """The Status object's message, reason and causes, or the HTTP reason when the body is not one."""
    try:
        body = json.loads(e.body or "{}")
    except (ValueError, TypeError):
        return str(e.reason or e.body or ""), "", []
    if not isinstance(body, dict):
        return str(e.reason or ""), "", []
    details = body.get("details")
    if not isinstance(details, dict):
        details = {}
    causes = [str(c.get("message") or "") for c in details.get("causes") or [] if isinstance(c, dict)]
    return str(body.get("message") or e.reason or ""), str(body.get("reason") or ""), causes


def kube_error(e: BaseException, *, action: str) -> KubeError:
    """The typed error for a failed call; anything that is not a Kubernetes or connection failure is not ours."""
    if isinstance(e, KubeError):
        return e
    if isinstance(e, ApiException):
        message, reason, causes = _status_body(e)
        status = int(e.status or 0)
        cls = _BY_STATUS.get(status, Transient if status in (0, 429) or status >= 500 else ClientError)
        return cls(action, message, status=status, reason=reason, causes=causes)
    if isinstance(e, (HTTPError, OSError, TimeoutError)):
        return Transient(action, str(e) or type(e).__name__)
    raise TypeError(f"{action}: {type(e).__name__} is not a Kubernetes failure") from e


def finalizer_added(meta: dict[str, Any], finalizer: str) -> dict[str, Any] | None:
    """The merge patch that adds `finalizer` to an object read as `meta`; None when it has it already.

    The patch carries the resourceVersion read, so it fails with Conflict if the object changed since."""
    fins = list(meta.get("finalizers") or [])
    if finalizer in fins:
        return None
    return {"metadata": {"finalizers": [*fins, finalizer], "resourceVersion": meta["resourceVersion"]}}


def finalizer_removed(meta: dict[str, Any], finalizer: str) -> dict[str, Any] | None:
    """The merge patch that removes `finalizer` (None when it is not there); it fails with Conflict if the object changed."""
    fins = list(meta.get("finalizers") or [])
    if finalizer not in fins:
        return None
    return {"metadata": {"finalizers": [f for f in fins if f != finalizer], "resourceVersion": meta["resourceVersion"]}}


class RateLimiter:
    """A token bucket: at most `qps` calls per second on average, bursts up to `burst`."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.qps)


class Kube:
    """One process's way to the cluster: the typed APIs it uses, one limiter, one wrapper."""

    def __init__(self, api: client.ApiClient, *, qps: float = 50.0, burst: int = 100,
                 limiter: RateLimiter | None = None) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.limiter = limiter or RateLimiter(qps, burst)

    async def call(self, fn: Callable[..., Any], *args: Any, action: str, **kw: Any) -> Any:
        """Run a client call on a thread behind the rate limit; every failure is a `KubeError`.

        Returns Any because the client's models are attribute bags."""
        await self.limiter.acquire()
        with typed_errors(action):
            return await asyncio.to_thread(fn, *args, **kw)


def watch_events(list_fn: Callable[..., Any], *, action: str, opened: Callable[[Any], None] | None = None,
                 **args: Any) -> Iterator[dict[str, Any]]:
    """One watch, read as JSON: each event (`type`, `object` as a plain dict; BOOKMARKs included) until the
    server ends it. An ERROR event raises its typed error (410 Gone: list again). Call `list_fn` as for a
    list (`timeout_seconds`, `resource_version`, selectors); the response is released at the end.
    `opened` is handed the streaming response (whose `shutdown()` ends a read that waits for an event)."""
    from kubernetes.watch.watch import iter_resp_lines

    with typed_errors(action):
        resp = list_fn(watch=True, _preload_content=False, **args)
        if opened is not None:
            opened(resp)
        try:
            for line in iter_resp_lines(resp):
                if not line.strip():
                    continue
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    status = ev.get("object") or {}
                    raise kube_error(ApiException(status=int(status.get("code") or 0),
                                                  reason=str(status.get("message") or "")), action=action)
                yield ev
        finally:
            resp.release_conn()


@contextmanager
def typed_errors(action: str) -> Iterator[None]:
    """The same mapping for code that calls the client directly (threads of their own, the CLI)."""
    try:
        yield
    except (ApiException, HTTPError, OSError, TimeoutError) as e:
        raise kube_error(e, action=action) from e


__all__ = ["BadRequest", "ClientError", "Conflict", "Forbidden", "Gone", "Invalid", "Kube", "KubeError",
           "NotFound", "RateLimiter", "Transient", "Unauthorized", "finalizer_added", "finalizer_removed", "kube_error", "typed_errors",
           "watch_events"]
