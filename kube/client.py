"""One process's way to the cluster: the typed APIs it uses, one client-side rate limit, one call wrapper.

Every process (worker activities, bridge, API) calls the cluster through `Kube.call`, which runs the synchronous
`kubernetes` client on a thread behind a shared token bucket (client-go's QPS and burst) and turns every failure
into a typed error (kube/errors.py). Custom objects are reached through typed accessors (kube/resources.py), never
through `CustomObjectsApi` by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from .errors import typed_errors


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


__all__ = ["Kube", "RateLimiter"]
