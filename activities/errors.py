"""The one place that decides which Kubernetes failures an activity retries (DESIGN house style 7).

A refused request (400, 401, 403, 405, 415, 422, and a 404 on create: the namespace is missing)
is the caller's mistake or a policy: retrying cannot help, so it becomes a non-retryable
`ApplicationError` with a typed reason and the run fails with a clear message. 409, 410, 429,
5xx, other 404s and connection problems are transient and are retried by Temporal's retry policy.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from temporalio.exceptions import ApplicationError

from kube import BadRequest, Forbidden, Invalid, KubeError, NotFound, Transient, Unauthorized

P = ParamSpec("P")
R = TypeVar("R")

_PERMANENT: dict[type[KubeError], str] = {BadRequest: "BadRequest", Unauthorized: "Unauthorized",
                                           Forbidden: "Forbidden", Invalid: "Invalid"}


def application_error(e: KubeError, *, creating: bool = False) -> ApplicationError:
    """The `ApplicationError` an activity raises for a failed Kubernetes call (`creating`: a 404 is permanent)."""
    if isinstance(e, Transient) and not e.status:
        return ApplicationError(str(e), type="KubernetesUnavailable")
    for cls, reason in _PERMANENT.items():
        if isinstance(e, cls):
            if cls is BadRequest and e.status in (405, 415):
                reason = {405: "MethodNotAllowed", 415: "UnsupportedMediaType"}[e.status]
            return ApplicationError(str(e), type=f"Kubernetes{reason}", non_retryable=True)
    if creating and isinstance(e, NotFound):
        return ApplicationError(str(e), type="KubernetesNotFound", non_retryable=True)
    return ApplicationError(str(e), type=f"KubernetesTransient{e.status}")


def kube_activity(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap an activity: a `KubeError` that escapes it leaves as the `ApplicationError` above."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except KubeError as e:
            raise application_error(e) from e

    return wrapper
