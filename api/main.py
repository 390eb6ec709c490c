"""The HTTP API (FastAPI): runs and gate verdicts (SPEC §7), probes and metrics; schedules in `schedules.py`.

Runs are created as AgentRun objects (never bare workflows); reads come from the objects.
Gate verdicts go to the run's workflow as a Temporal Update, so the caller learns at once
whether the verdict was accepted, after the run's Agent's policy (`gatePolicy`) has said that the token's
identity may decide it (`api/authority.py`). Every `/api/` route needs a bearer token (api/auth.py), and Kubernetes
RBAC must let its caller do what it asks in the namespace asked for (api/access.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from kubernetes import client
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client

from kube.resources import sympozium
from models import bounds
from models.approvals import ToolApprovalView
from models.evaluate import agent_name_of
from models.gate import GateView
from models.names import AGENTRUNS
from models.settings import user_agent
from models.timestamps import parse_rfc3339

from . import admission, codec, console, errors, grants, logs, metrics, runops, schedules
from .auth import Authenticator, TokenFile
from .bodies import BodyGuard
from .deps import CallerDep, Namespace, State, StateDep
from .settings import ApiSettings
from .throttle import FailureThrottle

log = logging.getLogger("agentrun.api")


class RunSummary(BaseModel):
    name: str
    namespace: str
    agent: str
    phase: str | None = None
    gate: str | None = None
    gate_verdict: str | None = None
    tool_approval: str | None = None  # "pending" while tool calls wait for a decision (SPEC §10)
    created_at: str | None = None
    age_seconds: int | None = None


class ModelOverride(BaseModel):
    """The model fields an AgentRun accepts (its CRD's `spec.model`); anything else is refused."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = None
    model: str | None = None
    baseURL: str | None = None
    thinking: str | None = None
    authSecretRef: str | None = None
    nodeSelector: dict[str, str] | None = None


class CreateRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agentRef: str = Field(min_length=1)
    # Bounded as the AgentRun CRD bounds them (models/bounds.py: characters here; admission counts bytes).
    task: str = Field(min_length=1, max_length=bounds.TASK_MAX_BYTES)
    agentId: str = "primary"
    sessionKey: str | None = None
    systemPrompt: str | None = Field(None, max_length=bounds.SYSTEM_PROMPT_MAX_BYTES)
    timeout: str | None = None
    env: dict[str, str] = {}
    model: ModelOverride | None = None


class VerdictBody(BaseModel):
    """Documents the verdict body; it is parsed by hand (not by FastAPI) so that bad verdicts
    answer 400 as SPEC §7 says. `response` is required for reject, rewrite and retry (for retry it is the
    reviewer's feedback, which the agent's next attempt gets with its task; without lifecycle.retry a retry
    is a reject)."""

    action: Literal["approve", "reject", "rewrite", "retry"]
    response: str = ""
    reason: str = ""


runs = APIRouter(prefix="/api/v1/runs", tags=["runs"])


def _summary(obj: dict[str, Any]) -> RunSummary:
    meta = obj.get("metadata") or {}
    st = obj.get("status") or {}
    created = meta.get("creationTimestamp")
    t = parse_rfc3339(created)
    age = int((datetime.now(UTC) - t).total_seconds()) if t is not None else None
    return RunSummary(name=meta.get("name", ""), namespace=meta.get("namespace", ""),
                      agent=agent_name_of(obj), phase=st.get("phase"),
                      gate=(st.get("gate") or {}).get("state"), gate_verdict=st.get("gateVerdict"),
                      tool_approval=(st.get("toolApproval") or {}).get("state"), created_at=created, age_seconds=age)


async def _read_run(state: State, ns: str, name: str) -> dict[str, Any]:
    return await runops.read_run(state, ns, name)


@runs.get("", response_model=list[RunSummary])
async def list_runs(state: StateDep, who: CallerDep, namespace: Namespace = "default",
                    phase: str | None = None, gate: str | None = None,
                    tool_approval: Annotated[str | None, Query(alias="toolApproval")] = None) -> list[RunSummary]:
    await state.allow(who, "list", AGENTRUNS, namespace)
    items = cast(dict[str, Any], await sympozium(state.kube, AGENTRUNS).list(
        namespace, action=f"list AgentRuns in {namespace}"))
    out = [_summary(o) for o in items.get("items", [])]
    if phase:
        out = [r for r in out if r.phase == phase]
    if gate:
        out = [r for r in out if r.gate == gate]
    if tool_approval:
        out = [r for r in out if r.tool_approval == tool_approval]
    return out


@runs.get("/{name}")
async def get_run(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default") -> dict[str, Any]:
    await state.allow(who, "get", AGENTRUNS, namespace, name=name)
    return await _read_run(state, namespace, name)


@runs.post("", status_code=201)
async def create_run(body: CreateRun, request: Request, state: StateDep, who: CallerDep,
                     namespace: Namespace = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"task": body.task, "agentId": body.agentId}
    if body.sessionKey:
        spec["sessionKey"] = body.sessionKey
    for key in ("systemPrompt", "timeout"):
        if getattr(body, key):
            spec[key] = getattr(body, key)
    if body.model is not None:
        spec["model"] = body.model.model_dump(exclude_none=True)
    if body.env:
        spec["env"] = body.env
    # A caller's W3C traceparent header puts the run in the caller's trace.
    return await runops.create_run(state, who, namespace, agent_ref=body.agentRef, spec=spec,
                                   traceparent=request.headers.get("traceparent", ""))


@runs.delete("/{name}", status_code=204)
async def delete_run(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default") -> Response:
    await runops.delete_run(state, who, namespace, name)
    return Response(status_code=204)


@runs.post("/{name}/gate-verdict", response_model=GateView,
           openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
               "schema": VerdictBody.model_json_schema()}}}},
           responses={400: {"description": "not a verdict (bad JSON, unknown action, missing response)"},
                      401: {"description": "missing or invalid token"},
                      403: {"description": "RBAC does not let this identity approve the run, or the run's policy "
                                           "does not let it decide (gatePolicy)"},
                      404: {"description": "no such run"},
                      409: {"description": "no gate can take a verdict (none, not waiting yet, decided, or run finished)"}})
async def gate_verdict(name: str, request: Request, state: StateDep, caller: CallerDep,
                       namespace: Namespace = "default") -> GateView:
    try:
        raw = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HTTPException(status_code=400, detail=f"body is not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise HTTPException(status_code=400, detail="body must be an object {action, response, reason}")
    response = raw.get("response") or ""
    reason = raw.get("reason", "")
    runops.check_verdict(raw.get("action"), response, reason)
    return await runops.decide(state, caller, namespace, name, action=raw["action"], response=response,
                               reason=reason or "")


class ToolDecisionBody(BaseModel):
    """Documents the tool decision body (SPEC §10); it is parsed by hand so that a bad decision answers 400 naming
    the field. `argumentsSha256` is the waiting call's (status.toolApproval.calls[].argumentsSha256: SHA-256 of its
    arguments as RFC 8785 canonical JSON): a decision is for exactly the arguments that wait. `arguments` (a JSON
    object) only with edit."""

    callId: str
    action: Literal["approve", "reject", "edit"]
    argumentsSha256: str
    arguments: dict[str, Any] | None = None
    reason: str = ""


@runs.post("/{name}/tool-approvals", response_model=ToolApprovalView,
           openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
               "schema": ToolDecisionBody.model_json_schema()}}}},
           responses={400: {"description": "not a decision (bad JSON, unknown action, no hash, edit without "
                                           "arguments)"},
                      401: {"description": "missing or invalid token"},
                      403: {"description": "RBAC does not let this identity approve the run, or the run's policy "
                                           "does not let it decide (gatePolicy, or an account runs execute as)"},
                      404: {"description": "no such run"},
                      409: {"description": "no call waits, an unknown call, other arguments than the waiting ones, "
                                           "a call already decided, or the run finished"}})
async def tool_approvals(name: str, request: Request, state: StateDep, caller: CallerDep,
                         namespace: Namespace = "default") -> ToolApprovalView:
    try:
        raw = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HTTPException(status_code=400, detail=f"body is not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise HTTPException(status_code=400, detail="body must be an object {callId, action, argumentsSha256, "
                                                    "arguments?, reason?}")
    fields = {"call_id": raw.get("callId"), "action": raw.get("action"),
              "arguments_sha256": raw.get("argumentsSha256"), "arguments": raw.get("arguments"),
              "reason": raw.get("reason", "")}
    runops.check_tool_decision(**fields)
    return await runops.decide_tool(state, caller, namespace, name, **fields)


probes = APIRouter(tags=["probes"])


@probes.get("/healthz", response_class=PlainTextResponse)
async def healthz() -> str:
    return "ok"


@probes.get("/readyz", response_class=PlainTextResponse)
async def readyz(state: StateDep) -> PlainTextResponse:
    problems = []
    try:
        await asyncio.to_thread(client.VersionApi(state.kube.api).get_code)
    except Exception as e:
        problems.append(f"kubernetes: {e}")
    if state.temporal is None:
        problems.append("temporal: not connected")
    if problems:
        return PlainTextResponse("\n".join(problems), status_code=503)
    return PlainTextResponse("ok")


def create_app(settings: ApiSettings, *, kube: client.ApiClient | None = None,
               temporal: Client | None = None) -> FastAPI:
    # Made now, not in the lifespan: the console's sign-in needs it even before (its TokenReview comes with the
    # lifespan's Kubernetes client).
    auth = Authenticator(TokenFile(Path(settings.token_file) if settings.token_file else None), reviews=None,
                         throttle=FailureThrottle(burst=settings.failed_auth_burst,
                                                  refill_seconds=settings.failed_auth_refill_seconds))
    if not settings.insecure and not auth.tokens.tokens() and not settings.token_review:
        raise SystemExit("refusing to start without API tokens: set AGENTRUN_TOKEN_FILE (lines of 'token identity'), "
                         "leave AGENTRUN_TOKEN_REVIEW on (Kubernetes tokens), or pass --insecure explicitly")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        t = temporal
        if t is None:
            t = await settings.temporal.connect(traced=True)
        state = app.state.agentrun = State(settings, kube or settings.kube.api_client(user_agent=user_agent("api")), t,
                                           auth)
        console.keep_sessions(app, state.kube, settings.session_namespace)
        await state.runwatch.start()
        state.definitions.start()
        await state.metrics.start()
        try:
            yield
        finally:
            await state.metrics.stop()
            state.definitions.stop()
            await state.runwatch.stop()

    # /docs is the console's page (Swagger UI vendored, under the console's Content-Security-Policy: api/console); no
    # /redoc (FastAPI's pages load unpinned scripts from a CDN on this origin).
    app = FastAPI(title="agentrun", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="AgentRuns on Temporal: runs, response-gate verdicts, probes.")

    # Every body is read and checked once, before any route parses it (api/bodies.py); inside the metrics' middleware,
    # so its refusals are counted too.
    app.add_middleware(BodyGuard)
    app.state.auth = auth
    metrics.install(app)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": jsonable(exc.errors())})

    errors.install(app)

    app.include_router(runs)
    app.include_router(logs.router)
    app.include_router(schedules.router)
    app.include_router(probes)
    codec.install(app, settings)
    app.include_router(admission.router)  # called by the kube-apiserver over TLS: no bearer token
    app.include_router(grants.router)  # the same, for Agents, SkillPacks, packs and schedules
    console.install(app, settings)  # the web console at / (after the API's routes: its paths never shadow theirs)
    return app


def jsonable(errors: Any) -> Any:
    return json.loads(json.dumps(errors, default=str))
