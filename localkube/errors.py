"""The `kind: Status` failures of the real API server, as one exception type.

Clients branch on `reason` and `code` (the Python client's ApiException.status, kubectl's
`errors.IsNotFound` ...), so every error localkube returns goes through here.
"""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "Unknown")
        self.details = details
        # Response headers to send with the Status (the Warning headers collected before the failure).
        self.headers: list[tuple[bytes, bytes]] = []

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(qualified: str, name: str) -> dict[str, Any]:
    resource, _, group = qualified.partition(".")
    d: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        d["group"] = group
    return d


def not_found(qualified: str, name: str) -> StatusError:
    return StatusError(404, f'{qualified} "{name}" not found', details=_details(qualified, name))


def already_exists(qualified: str, name: str) -> StatusError:
    return StatusError(
        409, f'{qualified} "{name}" already exists', reason="AlreadyExists", details=_details(qualified, name)
    )


def conflict(qualified: str, name: str) -> StatusError:
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details=_details(qualified, name),
    )


def precondition_failed(qualified: str, name: str, key: str, detail: str) -> StatusError:
    """A failed uid/resourceVersion precondition: etcd's InvalidObj error, wrapped as a 409 Conflict."""
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": StorageError: invalid object, Code: 4, '
        f"Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {detail}",
        reason="Conflict",
        details=_details(qualified, name),
    )


def method_not_allowed() -> StatusError:
    return StatusError(405, "the server does not allow this method on the requested resource")


def bad_request(message: str) -> StatusError:
    return StatusError(400, message)


def invalid(kind_group: str, name: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """422 Invalid. `causes` are (field, reason, message) as field.ErrorList renders them."""
    rendered = [f"{f}: {m}" if f else m for f, _, m in causes]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    kind, _, group = kind_group.partition(".")
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes],
    }
    if group:
        details["group"] = group
    return StatusError(422, f'{kind_group} "{name}" is invalid: {text}', details=details)
