"""The codec server (SPEC §7): `POST /codec/encode` and `/codec/decode` in Temporal's codec-server protocol, so the
Temporal UI and `temporal --codec-endpoint` show an authenticated operator the payloads that Temporal only ever
stores encrypted (models/codec.py).

Both take and answer `{"payloads": [{"metadata": {name: base64}, "data": base64}]}`. A caller is authenticated by
the API's bearer tokens (`Authorization: Bearer <token>`, which `temporal --codec-auth` and a Temporal UI that
passes its users' access tokens send; a Kubernetes token too, api/auth.py), or in a browser by the web console's
session (signing in to the console signs in to the codec: its cookie goes to every path of this host, and holds no
token) or by a cookie that `GET /codec/login` sets for a Temporal UI without single sign-on. A Temporal UI on another
origin sends those cookies with "include cross-origin credentials"; the embedded stack's UI has the codec on its own
origin (cli/uifront.py), so it sends them with nothing to set. Browsers may call these routes from the origins of
`AGENTRUN_CODEC_CORS_ORIGINS` only, and no other route of the API answers cross-origin requests.

A payload does not say which run (or namespace) it belongs to, so decoding shows whatever a history holds: the caller
must be allowed to read runs in every namespace the API serves (`get agentruns` there; cluster-wide when it serves
all of them: api/access.py), however it signed in. Encoding is allowed to the same callers: the Temporal UI encodes
what its users type (a signal's or an update's input) so that it is stored encrypted like the rest, and since verdicts
are signed with a key the codec never uses (models/signing.py), being able to encrypt gives no authority: a verdict
encrypted here is still recorded as sent straight to Temporal.
"""

from __future__ import annotations

import base64
import html
import json
from typing import Annotated, Any, cast
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.common.v1 import Payload

from models.codec import CodecError, EncryptionCodec
from models.names import AGENTRUNS

from .auth import ANONYMOUS, Caller, ReviewUnavailable
from .bodies import MAX_BODY_BYTES
from .console.sessions import COOKIE as CONSOLE_COOKIE
from .console.sessions import SessionStore, SessionsUnavailable
from .deps import State, StateDep, authenticate, bearer
from .settings import ApiSettings

PREFIX = "/codec"
COOKIE = "agentrun_codec"
COOKIE_SECONDS = 8 * 3600

router = APIRouter(prefix=PREFIX, tags=["codec"])


async def codec_caller(request: Request, state: StateDep) -> Caller:
    """The bearer token, else the console's session, else the login cookie (all three stand for the API's tokens, or
    a Kubernetes token), of a caller who may read every run."""
    if state.open:
        return ANONYMOUS
    token = bearer(request)
    if not token:
        sessions: SessionStore | None = getattr(request.app.state, "console_sessions", None)
        if sessions is not None:
            try:
                session = await sessions.get(request.cookies.get(CONSOLE_COOKIE))
                console = await sessions.caller(session) if session is not None else None
            except ReviewUnavailable as e:
                raise HTTPException(status_code=503, detail=f"cannot ask the cluster who the session's token is: {e}",
                                    headers={"Retry-After": "5"}) from None
            except SessionsUnavailable as e:
                raise HTTPException(status_code=503, detail=f"cannot read the console's session: {e}",
                                    headers={"Retry-After": "5"}) from None
            if console is not None:
                await _may_read_every_run(state, console)
                return console
        token = request.cookies.get(COOKIE, "")
    if not token:
        raise HTTPException(status_code=401, detail="missing bearer token (or the codec login cookie)",
                            headers={"WWW-Authenticate": "Bearer"})
    who = await authenticate(request, token, via="codec")
    await _may_read_every_run(state, who)
    return who


async def _may_read_every_run(state: State, who: Caller) -> None:
    """`get agentruns` in every namespace the API serves ("": all of them, i.e. cluster-wide)."""
    for ns in state.settings.namespaces or [""]:
        await state.allow(who, "get", AGENTRUNS, ns)


CodecCaller = Annotated[Caller, Depends(codec_caller)]


def get_codec(request: Request) -> EncryptionCodec | None:
    return cast(EncryptionCodec | None, request.app.state.codec)


CodecDep = Annotated[EncryptionCodec | None, Depends(get_codec)]


class BadBody(ValueError):
    pass


def _bytes(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise BadBody(f"{where} must be a base64 string")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError as e:
        raise BadBody(f"{where} is not base64 ({e})") from e


def parse_payloads(body: bytes) -> list[Payload]:
    """The protocol's body, strictly: protobuf's own JSON parser takes malformed base64 for empty bytes."""
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadBody(f"not JSON ({e})") from e
    items = doc.get("payloads", []) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise BadBody("payloads must be a list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("metadata", {}), dict):
            raise BadBody(f"payloads[{i}] must be an object with metadata (an object) and data")
        metadata = {str(k): _bytes(v, f"payloads[{i}].metadata.{k}") for k, v in item.get("metadata", {}).items()}
        out.append(Payload(metadata=metadata, data=_bytes(item.get("data", ""), f"payloads[{i}].data")))
    return out


async def _payloads(request: Request) -> list[Payload]:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise HTTPException(status_code=413, detail=f"body over {MAX_BODY_BYTES} bytes: send fewer payloads at once")
    try:
        return parse_payloads(body)
    except BadBody as e:
        raise HTTPException(status_code=400, detail=f'body is not {{"payloads": [{{"metadata": {{name: base64}}, '
                                                    f'"data": base64}}]}}: {e}') from e


def _json(payloads: list[Payload]) -> dict[str, Any]:
    return {"payloads": [{"metadata": {k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
                          "data": base64.b64encode(p.data).decode()} for p in payloads]}


# The protocol's body both ways, for the OpenAPI document (parsed by hand above: strict base64).
PAYLOADS_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"payloads": {"type": "array", "items": {
    "type": "object", "properties": {"metadata": {"type": "object", "additionalProperties": {
        "type": "string", "format": "byte"}}, "data": {"type": "string", "format": "byte"}}}}}}
PAYLOADS_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": PAYLOADS_SCHEMA}}}}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"schema": PAYLOADS_SCHEMA}}},
    400: {"description": "not a payloads body, or a payload that cannot be decrypted (the message names the key ID, "
                         "or says that it was altered)"},
    401: {"description": "missing or invalid token"},
    403: {"description": "RBAC does not let the caller read runs in every namespace the API serves (get agentruns)"},
    413: {"description": "body over 64 MiB"},
    429: {"description": "too many failed attempts from this client: retry after Retry-After seconds"}}


@router.post("/encode", openapi_extra=PAYLOADS_BODY, responses=RESPONSES)
async def encode(request: Request, who: CodecCaller, codec: CodecDep) -> JSONResponse:
    """Encrypt with the writing key (without keys configured the payloads come back as they are, as Temporal
    would store them)."""
    payloads = await _payloads(request)
    return JSONResponse(_json(await codec.encode(payloads) if codec is not None else payloads))


@router.post("/decode", openapi_extra=PAYLOADS_BODY, responses=RESPONSES)
async def decode(request: Request, who: CodecCaller, codec: CodecDep) -> JSONResponse:
    """Decrypt with the key each payload names; unencrypted payloads come back as they are."""
    payloads = await _payloads(request)
    try:
        out = await codec.decode(payloads) if codec is not None else payloads
    except CodecError as e:
        raise HTTPException(status_code=400, detail=str(e)) from e
    return JSONResponse(_json(out))


LOGIN_HEADERS = {"Content-Security-Policy": "default-src 'none'; form-action 'self'; base-uri 'none'; "
                                            "frame-ancestors 'none'",
                 "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def _page(message: str, *, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><meta charset=utf-8><title>agentrun codec login</title>"
        f"<p>{html.escape(message)}</p>"
        f'<form method=post action="{PREFIX}/login"><label>API token <input type=password name=token '
        "autocomplete=off required></label> <button>Sign in</button></form>"
        "<p>Then, in the Temporal UI's codec server settings, enter this API's <code>/codec</code> endpoint, turn on "
        "<i>Include cross-origin credentials</i> and use the browser's setting.</p>",
        status_code=status, headers=LOGIN_HEADERS)


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
async def login_page() -> HTMLResponse:
    return _page("Sign in with an API token so the Temporal UI can decode payloads in this browser.")


@router.post("/login", response_class=HTMLResponse, include_in_schema=False)
async def login(request: Request, state: StateDep) -> Response:
    """Sets the token as an HttpOnly, SameSite=Strict cookie scoped to /codec: the browser sends it to the codec
    routes only, and only from pages of the same site (the Temporal UI beside the API). Wrong tokens are throttled
    as on every other door (api/throttle.py)."""
    form = parse_qs((await request.body()).decode(errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    try:
        who = await authenticate(request, token, via="codec")
    except HTTPException as e:
        if e.status_code == 401:
            return _page("That is not a valid API token.", status=401)
        page = _page(str(e.detail), status=e.status_code)
        page.headers.update(e.headers or {})
        return page
    page = _page(f"Signed in as {who.identity} for {COOKIE_SECONDS // 3600} hours: the Temporal UI can decode "
                 "payloads in this browser.")
    page.set_cookie(COOKIE, token, max_age=COOKIE_SECONDS, path=PREFIX, httponly=True, samesite="strict",
                    secure=request.url.scheme == "https")
    return page


@router.post("/logout", response_class=HTMLResponse, include_in_schema=False)
async def logout() -> Response:
    page = _page("Signed out: the Temporal UI shows encrypted payloads in this browser again.")
    page.delete_cookie(COOKIE, path=PREFIX)
    return page


class CodecCors:
    """CORS for the codec routes alone, for the Temporal UI's origins (credentials allowed: the login cookie)."""

    def __init__(self, app: ASGIApp, *, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(app, allow_origins=origins, allow_methods=["POST"], allow_headers=["*"],
                                   allow_credentials=True, max_age=600)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX + "/"):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def install(app: FastAPI, settings: ApiSettings) -> None:
    """The codec routes, their keys (a bad key file stops the API here) and their CORS."""
    app.state.codec = settings.temporal.codec()
    if settings.codec_cors_origins:
        app.add_middleware(CodecCors, origins=settings.codec_cors_origins)
    app.include_router(router)
