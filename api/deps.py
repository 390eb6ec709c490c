"""What every API router shares: the process state, the bearer-token identity, the `namespace`
query parameter (how a failure becomes an HTTP answer is api/errors.py).

They live apart from `api.main` so each resource's router (`api/schedules.py`, ...) can depend
on them while `api.main` imports the routers, without an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

from fastapi import Depends, HTTPException, Query, Request
from kubernetes import client
from temporalio.client import Client

from models.informer import DEFINITIONS, Informer
from models.kube import Kube

from .auth import ANONYMOUS, Caller, TokenFile
from .metrics import ApiMetrics
from .runwatch import RunWatch
from .settings import ApiSettings


class State:
    def __init__(self, settings: ApiSettings, kube: client.ApiClient, temporal: Client | None) -> None:
        self.settings = settings
        self.kube = Kube(kube, qps=settings.kube.qps, burst=settings.kube.burst)
        self.custom = self.kube.custom
        self.temporal = temporal
        self.tokens = TokenFile(Path(settings.token_file) if settings.token_file else None)
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


def get_state(request: Request) -> State:
    return cast(State, request.app.state.agentrun)


StateDep = Annotated[State, Depends(get_state)]


def caller(request: Request, state: StateDep) -> Caller:
    if state.settings.insecure and not state.tokens.tokens():
        return ANONYMOUS
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    who = state.tokens.caller(header[7:].strip())
    if who is None:
        raise HTTPException(status_code=401, detail="invalid token", headers={"WWW-Authenticate": "Bearer"})
    return who


def identity(who: Annotated[Caller, Depends(caller)]) -> str:
    return who.identity


CallerDep = Annotated[Caller, Depends(caller)]
Identity = Annotated[str, Depends(identity)]
Namespace = Annotated[str, Query(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
