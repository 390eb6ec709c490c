"""The typed Kubernetes errors, in the shape of kopf's `_cogs/clients/errors.py`.

Every call to the cluster (kube/client.py's `Kube.call`, a watch, the CLI's own threads) turns its failure into one
of these, so callers write `except NotFound:` and never compare status codes; each boundary maps them once:
activities to retryable or non-retryable `ApplicationError` (activities/errors.py), the API to HTTP (api/errors.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

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


@contextmanager
def typed_errors(action: str) -> Iterator[None]:
    """The same mapping for code that calls the client directly (threads of their own, the CLI)."""
    try:
        yield
    except (ApiException, HTTPError, OSError, TimeoutError) as e:
        raise kube_error(e, action=action) from e


__all__ = ["BadRequest", "ClientError", "Conflict", "Forbidden", "Gone", "Invalid", "KubeError", "NotFound", "Transient",
           "Unauthorized", "kube_error", "typed_errors"]
