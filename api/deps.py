"""What every API router shares: the process state, the caller (authenticated: api/auth.py) and what it may do
(authorised: api/access.py), the `namespace` query parameter (how a failure becomes an HTTP answer is api/errors.py).

They live apart from `api.main` so each resource's router (`api/schedules.py`, ...) can depend
on them while `api.main` imports the routers, without an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

from fastapi import Depends, HTTPException, Query, Request
from kubernetes import client
from temporalio.client import Client

from kube import Kube
from kube.informer import DEFINITIONS, Informer
from models import telemetry

from .access import Access, Denied
from .auth import (
    ANONYMOUS,
    Authenticator,
    Caller,
    ReviewUnavailable,
    TokenFile,
    TokenReviews,
    Unauthenticated,
)
from .metrics import ApiMetrics
from .runwatch import RunWatch
from .settings import ApiSettings
from .throttle import Throttled


class State:
    def __init__(self, settings: ApiSettings, kube: client.ApiClient, temporal: Client | None,
                 auth: Authenticator | None = None) -> None:
        if auth is None:
            auth = Authenticator(TokenFile(Path(settings.token_file) if settings.token_file else None), reviews=None)
        self.settings = settings
        # The process's traces (models/telemetry.py): runs created here start theirs in this tracer's spans.
        self.telemetry = telemetry.setup("api")
        self.tracer = self.telemetry.tracer("agentrun.api")
        self.kube = Kube(kube, qps=settings.kube.qps, burst=settings.kube.burst)
        self.temporal = temporal
        # Signs the API's verdicts (models/signing.py); the codec routes never use it.
        self.signer = settings.temporal.signer()
        self.auth = auth
        self.tokens = auth.tokens
        # Started and stopped by the app's lifespan (api/main.py), as are the metrics' verdict counts from it.
        self.runwatch = RunWatch(self.kube, settings.namespaces)
        # Agents, SympoziumInstances and SympoziumPolicies as last seen: a verdict's authority is read from here, so
        # deciding a run costs no request for them (one the view lacks is read from the API server).
        self.definitions = Informer(self.kube, settings.namespaces or None, kinds=DEFINITIONS)
        self.metrics = ApiMetrics(self.runwatch)
        # Verdicts through the API by outcome (`state.verdicts[outcome] += 1`); verdicts refused before they
        # reached a workflow by "<via> <rule>" (via: admission or api). Both are Prometheus counters (api/metrics.py).
        self.verdicts = self.metrics.verdicts_by_outcome
        self.refusals = self.metrics.refusals
        # Tokens not in the token file are asked of the cluster; failures are counted from now on.
        if settings.token_review:
            auth.reviews = TokenReviews(self.kube, audiences=settings.token_review_audiences)
        auth.count = lambda via, reason: self.metrics.auth_failures.labels(via, reason).inc()
        self.access = Access(self.kube, open=self.open)

    @property
    def open(self) -> bool:
        """An --insecure API without tokens: every caller is anonymous and may do anything."""
        return self.settings.insecure and not self.tokens.tokens()

    async def allow(self, who: Caller, verb: str, resource: str, namespace: str, *, name: str = "") -> None:
        """Raises 403 (api/access.py `Denied`, counted) unless Kubernetes RBAC lets `who` do it."""
        try:
            await self.access.require(who, verb, resource, namespace, name=name)
        except Denied:
            self.metrics.access_denied.labels(verb, resource).inc()
            raise


def get_state(request: Request) -> State:
    return cast(State, request.app.state.agentrun)


StateDep = Annotated[State, Depends(get_state)]


def client_of(request: Request) -> str:
    """The client's address, as the throttle keys it (behind a trusted proxy, the one it forwarded for:
    AGENTRUN_FORWARDED_ALLOW_IPS)."""
    return request.client.host if request.client is not None else "unknown"


async def authenticate(request: Request, token: str, *, via: str) -> Caller:
    """The caller a presented token belongs to, or the HTTP refusal: 401, 429 (Retry-After) or 503."""
    auth = cast(Authenticator, request.app.state.auth)
    try:
        return await auth.authenticate(token, client=client_of(request), via=via)
    except Unauthenticated as e:
        raise HTTPException(status_code=401, detail=str(e), headers={"WWW-Authenticate": "Bearer"}) from None
    except Throttled as e:
        raise HTTPException(status_code=429, detail=f"too many failed attempts: retry in {e.retry_after}s",
                            headers={"Retry-After": str(e.retry_after)}) from None
    except ReviewUnavailable as e:
        raise HTTPException(status_code=503, detail=f"cannot ask the cluster who the token is: {e}",
                            headers={"Retry-After": "5"}) from None


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else ""


async def caller(request: Request, state: StateDep) -> Caller:
    if state.open:
        return ANONYMOUS
    return await authenticate(request, bearer(request), via="bearer")


CallerDep = Annotated[Caller, Depends(caller)]
Namespace = Annotated[str, Query(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
