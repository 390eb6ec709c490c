"""How a failure becomes an HTTP answer, in one place (SPEC §7).

Routes let typed Kubernetes errors (kube/errors.py) through, catching only what they answer
differently (a 404 that names the run); the handlers below map the rest once: the cluster's own
refusals keep their status and message, a cluster that does not answer is 503 with Retry-After,
and a bug is a 500 that says so (and is logged), never a 502 that blames someone else.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kube import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Transient,
    Unauthorized,
)

log = logging.getLogger("agentrun.api")

RETRY_AFTER_SECONDS = 5

# The cluster's answer to the API's own request, as the answer to the caller's.
STATUS: dict[type[KubeError], int] = {BadRequest: 400, Forbidden: 403, NotFound: 404, Conflict: 409, Gone: 409,
                                      Invalid: 422}


def http_status(e: KubeError) -> int:
    """The caller's status for a cluster failure. Unauthorized is the API's own credentials failing: a 502."""
    if isinstance(e, Transient):
        return 503
    if isinstance(e, Unauthorized):
        return 502
    return next((code for cls, code in STATUS.items() if isinstance(e, cls)), 502)


def install(app: FastAPI) -> None:
    @app.exception_handler(KubeError)
    async def kube_failed(request: Request, exc: KubeError) -> JSONResponse:
        code = http_status(exc)
        if code >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, exc)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if code == 503 else None
        detail = exc.message if code < 500 else f"kubernetes: {exc}"
        return JSONResponse(status_code=code, content={"detail": detail}, headers=headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}"})
