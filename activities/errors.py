"""One place that decides which Kubernetes failures are retried (DESIGN house style 7).

400, 403, 422 and 404-on-create are the caller's mistake or a policy: retrying cannot help, so
they become non-retryable `ApplicationError`s with a typed reason and the run fails with a
clear message. 409, 429, 5xx and connection problems are transient and are retried by
Temporal's retry policy.
"""

from __future__ import annotations

import json

from kubernetes.client.rest import ApiException
from temporalio.exceptions import ApplicationError
from urllib3.exceptions import HTTPError

PERMANENT = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 405: "MethodNotAllowed", 415: "UnsupportedMediaType",
             422: "Invalid"}


def status_message(e: ApiException) -> str:
    try:
        body = json.loads(e.body or "{}")
        return str(body.get("message") or e.reason or "")
    except (ValueError, TypeError):
        return str(e.reason or e.body or "")


def kube_error(e: Exception, *, action: str, creating: bool = False) -> Exception:
    """The exception an activity raises for a failed Kubernetes call."""
    if isinstance(e, ApiException):
        msg = f"{action}: {status_message(e)} (HTTP {e.status})"
        if e.status in PERMANENT or (creating and e.status == 404):
            reason = PERMANENT.get(e.status, "NotFound")
            return ApplicationError(msg, type=f"Kubernetes{reason}", non_retryable=True)
        return ApplicationError(msg, type=f"KubernetesTransient{e.status}")
    if isinstance(e, (HTTPError, OSError, TimeoutError)):
        return ApplicationError(f"{action}: {e}", type="KubernetesUnavailable")
    return e
