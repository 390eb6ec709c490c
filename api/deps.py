"""What every API router shares: the process state, the bearer-token identity, the `namespace`
query parameter, and how a Kubernetes error becomes an HTTP one (SPEC §7).

They live apart from `api.main` so each resource's router (`api/schedules.py`, ...) can depend
on them while `api.main` imports the routers, without an import cycle.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, cast

from fastapi import Depends, HTTPException, Query, Request
from kubernetes import client
from kubernetes.client.rest import ApiException
from temporalio.client import Client

from .auth import TokenFile
from .settings import ApiSettings


class State:
    def __init__(self, settings: ApiSettings, kube: client.ApiClient, temporal: Client | None) -> None:
        self.settings = settings
        self.kube = kube
        self.custom = client.CustomObjectsApi(kube)
        self.temporal = temporal
        self.tokens = TokenFile(Path(settings.token_file) if settings.token_file else None)
        self.requests: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()


def kube_error(e: ApiException) -> HTTPException:
    try:
        detail = json.loads(e.body or "{}").get("message") or e.reason
    except ValueError:
        detail = e.reason
    code = e.status if e.status in (400, 403, 404, 409, 422) else 502
    return HTTPException(status_code=code, detail=str(detail))


def get_state(request: Request) -> State:
    return cast(State, request.app.state.agentrun)


StateDep = Annotated[State, Depends(get_state)]


def identity(request: Request, state: StateDep) -> str:
    if state.settings.insecure and not state.tokens.tokens():
        return "anonymous"
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    who = state.tokens.identity(header[7:].strip())
    if who is None:
        raise HTTPException(status_code=401, detail="invalid token", headers={"WWW-Authenticate": "Bearer"})
    return who


Identity = Annotated[str, Depends(identity)]
Namespace = Annotated[str, Query(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
