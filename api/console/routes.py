"""The console's routes: sign-in, the runs list, a run's page (gate bar, banner, logs), create and delete, and the
event stream that keeps open pages live. Every page is a template with autoescaping; every POST checks the session's
CSRF token; every action goes through api/runops.py as the JSON API does. Every page and action is authorised by
Kubernetes RBAC for the signed-in identity as the JSON API's routes are (api/access.py), and a refusal is a page that
says what is missing; the namespace switcher offers only the namespaces whose runs the identity may list."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, cast
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from markupsafe import escape

from kube import Kube, KubeError, NotFound
from kube.resources import sympozium
from models.agentrun import PHASES, TERMINAL_PHASES
from models.evaluate import AGENT_PLURALS, agent_name_of
from models.names import AGENTRUNS, AGENTS

from .. import runops
from ..access import Ask, Denied
from ..auth import Caller, ReviewUnavailable
from ..deps import Namespace, State, StateDep, client_of
from ..logs import NoLog, hooks, run_log
from ..settings import ApiSettings
from ..throttle import Throttled
from . import views
from .sessions import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_SECONDS,
    MemorySessions,
    SecretSessions,
    Session,
    SessionStore,
    SessionsUnavailable,
)

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                ".svg": "image/svg+xml"}
# No inline script or style anywhere, so scripts and styles come from this origin only; forms post here only.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
# The API's documentation page, the same but for images given as data: URIs (Swagger UI's stylesheet draws its icons
# so; an image runs nothing).
DOCS_HEADERS = {**HEADERS, "Content-Security-Policy": HEADERS["Content-Security-Policy"].replace(
    "img-src 'self'", "img-src 'self' data:")}
MAX_FORM_BYTES = 1024 * 1024
KEEPALIVE_SECONDS = 15.0
# Changes that arrive this close together reach a page as one message (a run's status is written in bursts).
COALESCE_SECONDS = 0.2
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                               undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
templates.filters["q"] = lambda v: quote(str(v), safe="")
templates.globals["PHASES"] = PHASES

router = APIRouter(include_in_schema=False)


# -- sessions ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Signed:
    session: Session
    caller: Caller


class SignInRequired(Exception):
    pass


class ConsoleError(Exception):
    """An answer shown as the error page (status, message as text)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def store(request: Request) -> SessionStore:
    return cast(SessionStore, request.app.state.console_sessions)


async def signed_in(request: Request) -> Signed:
    sessions = store(request)
    try:
        s = await sessions.get(request.cookies.get(COOKIE))
        who = await sessions.caller(s) if s is not None else None
    except ReviewUnavailable as e:
        raise ConsoleError(503, f"cannot ask the cluster who your token is: {e}") from None
    except SessionsUnavailable as e:
        raise ConsoleError(503, f"cannot read your session: {e}") from None
    if s is None or who is None:
        raise SignInRequired()
    return Signed(s, who)


ConsoleSession = Annotated[Signed, Depends(signed_in)]


async def form_of(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value each); a bigger body than a form needs is refused."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise ConsoleError(413, f"the form is larger than {MAX_FORM_BYTES} bytes")
    return {k: v[0] for k, v in parse_qs(body.decode(errors="replace"), keep_blank_values=True).items()}


async def csrf_checked(request: Request, who: ConsoleSession) -> dict[str, str]:
    """The form of a state-changing request that carries the session's CSRF token (field or header), else 403."""
    form = await form_of(request)
    if not who.session.csrf_ok(request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)):
        raise ConsoleError(403, "missing or wrong CSRF token: reload the page and try again")
    return form


CheckedForm = Annotated[dict[str, str], Depends(csrf_checked)]


def page(request: Request, template: str, *, status: int = 200, who: Signed | None = None,
         **ctx: Any) -> HTMLResponse:
    """A template as a response with the console's headers; `who` adds the signed-in identity and CSRF token."""
    ctx.setdefault("namespace", "default")
    ctx.setdefault("section", "")
    html = templates.get_template(template).render(
        me=who.caller.identity if who else "", csrf=who.session.csrf if who else "", path=request.url.path,
        status=status, **ctx)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


def run_url(namespace: str, name: str, **extra: str) -> str:
    return f"/runs/{quote(name, safe='')}?" + urlencode({"namespace": namespace, **extra})


def safe_next(url: str | None) -> str:
    """Only a path on this site (no scheme, no //host): an open redirect would make sign-in a phishing aid."""
    if not url or not url.startswith("/") or url.startswith("//") or "\\" in url:
        return "/runs"
    return url


# -- reading runs ------------------------------------------------------------------------------------------------

async def runs_in(state: State, who: Caller, namespace: str) -> list[dict[str, Any]]:
    """The namespace's runs from the API's watch (no request to the cluster), or listed while it has not synced;
    RBAC must let `who` list them."""
    await state.allow(who, "list", AGENTRUNS, namespace)
    watch = state.runwatch
    if watch.synced:
        return cast(list[dict[str, Any]], watch.list(namespace))
    items = await sympozium(state.kube, AGENTRUNS).list(namespace, action=f"list AgentRuns in {namespace}")
    return cast(list[dict[str, Any]], items.get("items", []))


async def one_run(state: State, who: Caller, namespace: str, name: str) -> dict[str, Any]:
    """The run, which RBAC must let `who` read."""
    await state.allow(who, "get", AGENTRUNS, namespace, name=name)
    try:
        return await runops.current_run(state, namespace, name)
    except HTTPException as e:
        raise ConsoleError(e.status_code, str(e.detail)) from e


async def namespaces(state: State, who: Caller, current: str) -> list[str]:
    """The namespaces the switcher offers: those the API's watch has runs in (and `default`) whose runs `who` may
    list, and the one shown."""
    allowed = await state.access.namespaces(who, state.runwatch.namespaces() | {"default"})
    return sorted({*allowed, current})


def filters(phase: str, agent: str, awaiting: str, schedule: str, sort: str, order: str,
            tools: str = "") -> views.Filters:
    return views.Filters(phase=phase, agent=agent, awaiting=awaiting in ("1", "on", "true"), schedule=schedule,
                         sort=sort if sort in views.SORTS else "created", desc=order != "asc",
                         tools=tools in ("1", "on", "true"))


Text = Annotated[str, Query(max_length=253)]


async def runs_context(state: State, who: Caller, namespace: str, f: views.Filters) -> dict[str, Any]:
    objs = await runs_in(state, who, namespace)
    rows = [views.row(o) for o in objs]
    query = {"namespace": namespace, "phase": f.phase, "agent": f.agent, "awaiting": "1" if f.awaiting else "",
             "schedule": f.schedule, "tools": "1" if f.tools else ""}
    return {"rows": f.apply(rows), "total": len(rows), "f": f, "namespace": namespace,
            "query": urlencode({**query, "sort": f.sort, "order": "desc" if f.desc else "asc"}),
            "base_query": urlencode(query),
            "agents": sorted({r.agent for r in rows}), "schedules": sorted({r.schedule for r in rows if r.schedule})}


# -- pages -------------------------------------------------------------------------------------------------------

@router.get("/")
async def home() -> RedirectResponse:
    return redirect("/runs")


@router.get("/signin", response_class=HTMLResponse)
async def signin_page(request: Request, next: str = "/runs") -> HTMLResponse:
    try:
        who: Signed | None = await signed_in(request)
    except SignInRequired:
        who = None
    return page(request, "signin.html", who=who, next=safe_next(next), error="", open=store(request).open)


# What a browser says of where a request comes from (Fetch Metadata); "none" is a typed address or a bookmark.
SAME_SITE_FETCHES = ("same-origin", "none")


@router.post("/signin", response_class=HTMLResponse)
async def signin(request: Request) -> Response:
    """No session exists yet, so no CSRF token can guard this form: a sign-in posted from another site (a page that
    would sign the visitor in as its author, whose verdicts the visitor would then give) is refused by the browser's
    own word on where it comes from."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in SAME_SITE_FETCHES:
        raise ConsoleError(403, "a sign-in must come from this console's own page")
    form = await form_of(request)
    sessions = store(request)
    nxt = safe_next(form.get("next"))
    try:
        s = await sessions.sign_in(form.get("token", "").strip(), client=client_of(request))
    except Throttled as e:
        refused = page(request, "signin.html", status=429, next=nxt, open=sessions.open,
                       error=f"Too many failed sign-ins from here: try again in {e.retry_after} seconds.")
        refused.headers["Retry-After"] = str(e.retry_after)
        return refused
    except ReviewUnavailable as e:
        return page(request, "signin.html", status=503, next=nxt, open=sessions.open,
                    error=f"Cannot ask the cluster who this token is: {e}")
    except SessionsUnavailable as e:
        return page(request, "signin.html", status=503, next=nxt, open=sessions.open,
                    error=f"Cannot keep a session now: {e}")
    if s is None:
        return page(request, "signin.html", status=401, next=nxt, error="That is not a valid API token.",
                    open=sessions.open)
    response = redirect(nxt)
    response.set_cookie(COOKIE, s.id, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


@router.post("/signout")
async def signout(request: Request, who: ConsoleSession, form: CheckedForm) -> Response:
    try:
        await store(request).sign_out(who.session.id)
    except SessionsUnavailable as e:
        raise ConsoleError(503, f"cannot end your session now (try again): {e}") from None
    response = redirect("/signin")
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(request: Request, who: ConsoleSession, state: StateDep, namespace: Namespace = "default",
                    phase: Text = "", agent: Text = "", awaiting: Text = "", schedule: Text = "",
                    sort: Text = "created", order: Text = "desc", tools: Text = "") -> HTMLResponse:
    ctx = await runs_context(state, who.caller, namespace, filters(phase, agent, awaiting, schedule, sort, order,
                                                                   tools))
    return page(request, "runs.html", who=who, section="runs", namespaces=await namespaces(state, who.caller, namespace),
                **ctx)


@router.get("/runs/table", response_class=HTMLResponse)
async def runs_table(request: Request, who: ConsoleSession, state: StateDep, namespace: Namespace = "default",
                     phase: Text = "", agent: Text = "", awaiting: Text = "", schedule: Text = "",
                     sort: Text = "created", order: Text = "desc", tools: Text = "") -> HTMLResponse:
    ctx = await runs_context(state, who.caller, namespace, filters(phase, agent, awaiting, schedule, sort, order,
                                                                   tools))
    return page(request, "_runs_table.html", who=who, **ctx)


async def agent_names(state: State, who: Caller, namespace: str) -> list[str]:
    """The Agents a new run may name, for the form's list: both kinds, Agents and the older SympoziumInstances
    (SPEC §1.1), each only when `who` may list it (a name not listed can still be typed)."""
    names: set[str] = set()
    for plural in AGENT_PLURALS:
        if not await state.access.allowed(who, Ask("list", plural, namespace)):
            continue
        items = await sympozium(state.kube, plural).list(namespace, action=f"list {plural} in {namespace}")
        names.update(str(o["metadata"]["name"]) for o in items.get("items", []))
    return sorted(names)


@router.get("/new-run", response_class=HTMLResponse)
async def new_run_page(request: Request, who: ConsoleSession, state: StateDep,
                       namespace: Namespace = "default") -> HTMLResponse:
    await state.allow(who.caller, "create", AGENTRUNS, namespace)
    return page(request, "new_run.html", who=who, section="runs", namespace=namespace,
                agents=await agent_names(state, who.caller, namespace), form={}, error="")


def parse_env(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not ENV_NAME.fullmatch(key):
            raise ValueError(f"env line {n} is not NAME=value (NAME: letters, digits and _, not first a digit)")
        env[key] = value
    return env


@router.post("/new-run", response_class=HTMLResponse)
async def new_run(request: Request, who: ConsoleSession, form: CheckedForm, state: StateDep,
                  namespace: Namespace = "default") -> Response:
    agent, task, model = form.get("agent", "").strip(), form.get("task", ""), form.get("model", "").strip()
    error, status = "", 400
    spec: dict[str, Any] = {"task": task, "agentId": "primary"}
    try:
        if not agent or not task.strip():
            raise ValueError("an agent and a task are required")
        env = parse_env(form.get("env", ""))
        if env:
            spec["env"] = env
        if model:
            spec["model"] = {"model": model}
        obj = await runops.create_run(state, who.caller, namespace, agent_ref=agent, spec=spec)
        return redirect(run_url(namespace, obj["metadata"]["name"]))
    except ValueError as e:
        error = str(e)
    except Denied:
        raise
    except HTTPException as e:
        error, status = str(e.detail), e.status_code
    except KubeError as e:
        error, status = e.message, 422 if e.status == 422 else 502
    return page(request, "new_run.html", status=status, who=who, section="runs", namespace=namespace,
                agents=await agent_names(state, who.caller, namespace), form=form, error=error)


async def run_context(state: State, who: Caller, namespace: str, name: str) -> dict[str, Any]:
    obj = await one_run(state, who, namespace, name)
    spec = obj.get("spec") or {}
    st = obj.get("status") or {}
    model = str((spec.get("model") or {}).get("model") or (spec.get("model") or {}).get("name") or "")
    if not model:
        with contextlib.suppress(KubeError):
            agent = await sympozium(state.kube, AGENTS).get(namespace, agent_name_of(obj),
                                                            action="read the run's Agent")
            default = (((agent.get("spec") or {}).get("agents") or {}).get("default") or {}).get("model")
            model = f"{default} (the Agent's default)" if default else ""
    ui = state.settings.temporal_ui_url.rstrip("/")
    wid = st.get("workflowId")
    temporal = (f"{ui}/namespaces/{quote(state.settings.temporal.namespace, safe='')}/workflows/"
                f"{quote(str(wid), safe='')}") if ui and wid else ""
    task = spec.get("task")
    return {"run": obj, "name": name, "namespace": namespace, "spec": spec, "st": st, "row": views.row(obj),
            "task": task if isinstance(task, str) else repr(task), "model": model,
            "timeline": views.timeline(obj), "banner": views.banner(obj), "gate_open": views.gate_open(obj),
            "calls": views.waiting_calls(obj),
            "retry": views.has_retry(obj), "created_by": views.created_by(obj), "temporal": temporal,
            "hooks": hooks(obj), "last_attempt": int(st.get("attempt") or 1), "log_attempt": None,
            "trace": views.trace_link(state.settings.trace_url_template, st.get("traceID"))}


@router.get("/runs/{name}", response_class=HTMLResponse)
async def run_page(request: Request, name: str, who: ConsoleSession, state: StateDep,
                   namespace: Namespace = "default", sent: Text = "") -> HTMLResponse:
    ctx = await run_context(state, who.caller, namespace, name)
    return page(request, "run.html", who=who, section="runs", error="",
                sent=sent if sent in runops.ACTIONS or sent in TOOL_SENT else "", **ctx)


PARTS = {"head": "_head.html", "detail": "_run_detail.html", "logs": "_logs.html"}


@router.get("/runs/{name}/part/{part}", response_class=HTMLResponse)
async def run_part(request: Request, name: str, part: str, who: ConsoleSession, state: StateDep,
                   namespace: Namespace = "default", attempt: int | None = Query(None, ge=1)) -> HTMLResponse:
    """A region of the run's page, fetched again when the page hears that the run changed (the logs: of the last
    attempt, or of `attempt`)."""
    if part not in PARTS:
        raise ConsoleError(404, f"no part {part!r} of a run's page")
    ctx = await run_context(state, who.caller, namespace, name)
    if attempt is not None:
        ctx["log_attempt"] = min(attempt, ctx["last_attempt"])
    return page(request, PARTS[part], who=who, error="", sent="", **ctx)


@router.post("/runs/{name}/verdict", response_class=HTMLResponse)
async def verdict(request: Request, name: str, who: ConsoleSession, form: CheckedForm, state: StateDep,
                  namespace: Namespace = "default") -> Response:
    action = form.get("action", "")
    await state.allow(who.caller, "get", AGENTRUNS, namespace, name=name)  # the page it answers with shows the run
    try:
        view = await runops.decide(state, who.caller, namespace, name, action=action,
                                   response=form.get("response", ""), reason=form.get("reason", ""))
    except HTTPException as e:
        ctx = await run_context(state, who.caller, namespace, name)
        return page(request, "run.html", status=e.status_code, who=who, section="runs", error=str(e.detail),
                    sent="", **ctx)
    return redirect(run_url(namespace, name, sent=action if view.state != "none" else ""))


# What the page says after a tool decision was accepted (the `sent` parameter of the redirect).
TOOL_SENT = {"tool-approve": "approve", "tool-reject": "reject", "tool-edit": "edit"}


@router.post("/runs/{name}/tool-decision", response_class=HTMLResponse)
async def tool_decision(request: Request, name: str, who: ConsoleSession, form: CheckedForm, state: StateDep,
                        namespace: Namespace = "default") -> Response:
    """The tool-approval bar's decision on one waiting call, through api/runops.py as the JSON API's: the call and
    the hash of the arguments the page showed, so a decision is for what the approver saw."""
    action = form.get("action", "")
    await state.allow(who.caller, "get", AGENTRUNS, namespace, name=name)  # the page it answers with shows the run
    try:
        arguments: Any = None
        if action == "edit":
            try:
                arguments = json.loads(form.get("arguments", ""))
            except ValueError as e:
                raise HTTPException(status_code=400, detail=f"the edited arguments are not JSON: {e}") from e
        await runops.decide_tool(state, who.caller, namespace, name, call_id=form.get("call", ""), action=action,
                                 arguments_sha256=form.get("sha256", ""), arguments=arguments,
                                 reason=form.get("reason", ""))
    except HTTPException as e:
        ctx = await run_context(state, who.caller, namespace, name)
        return page(request, "run.html", status=e.status_code, who=who, section="runs", error=str(e.detail),
                    sent="", **ctx)
    return redirect(run_url(namespace, name, sent=f"tool-{action}"))


@router.get("/runs/{name}/delete", response_class=HTMLResponse)
async def delete_page(request: Request, name: str, who: ConsoleSession, state: StateDep,
                      namespace: Namespace = "default") -> HTMLResponse:
    obj = await one_run(state, who.caller, namespace, name)
    return page(request, "delete.html", who=who, section="runs", namespace=namespace, name=name,
                row=views.row(obj), error="")


async def _delete_run(state: State, who: Caller, namespace: str, name: str) -> str:
    """Delete the run as the JSON API does; where to go next (the namespace's runs)."""
    try:
        await runops.delete_run(state, who, namespace, name)
    except Denied:
        raise
    except HTTPException as e:
        raise ConsoleError(e.status_code, str(e.detail)) from e
    return "/runs?" + urlencode({"namespace": namespace})


@router.post("/runs/{name}/delete", response_class=HTMLResponse)
async def delete(request: Request, name: str, who: ConsoleSession, form: CheckedForm, state: StateDep,
                 namespace: Namespace = "default") -> Response:
    return redirect(await _delete_run(state, who.caller, namespace, name))


@router.delete("/runs/{name}")
async def delete_htmx(request: Request, name: str, who: ConsoleSession, form: CheckedForm, state: StateDep,
                      namespace: Namespace = "default") -> Response:
    """The same, for an `hx-delete` (the CSRF token in its header): 204, and htmx goes to the runs list."""
    return Response(status_code=204, headers={"HX-Redirect": await _delete_run(state, who.caller, namespace, name)})


# -- live updates ------------------------------------------------------------------------------------------------

def sse(event: str, data: str = "") -> str:
    """One server-sent event; `data` may hold newlines (each line its own `data:` field)."""
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return f"event: {event}\n" + "".join(f"data: {line}\n" for line in lines) + "\n"


SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no", "X-Content-Type-Options": "nosniff"}


def _seen(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    st = obj.get("status") or {}
    ta = st.get("toolApproval") or {}
    tools = f"{ta.get('state') or ''}/{ta.get('requestedAt') or ''}"  # a new round of calls is a change too
    return (str(st.get("phase") or ""), str(st.get("attempt") or ""), str((st.get("gate") or {}).get("state") or ""),
            tools)


async def _events(state: State, namespace: str, run: str, shown: str) -> AsyncIterator[str]:
    """What changed in the namespace, as it happens: `runs` (any run), `run` and `phase` (the page's own run: any
    change, and one of its phase, attempt, gate state or tool approval), `approval` (a toast, as HTML, when a run
    starts waiting for a verdict, or its tool calls for a decision).

    A page is rendered before its stream connects (and a stream may connect again later): what changed in between
    is told at once, `runs` always (one list from memory) and `run` and `phase` when the run's resourceVersion is no
    longer `shown`, the one the page was rendered from."""
    yield "retry: 3000\n\n"
    watch = state.runwatch
    with watch.subscribe() as sub:
        objs = watch.list(namespace)
        seen = {str(o["metadata"]["name"]): _seen(o) for o in objs}
        first = [sse("runs")]
        if run:
            mine = next((o for o in objs if o["metadata"]["name"] == run), None)
            if mine is None or str(mine["metadata"].get("resourceVersion")) != shown:
                first += [sse("run"), sse("phase")]
        yield "".join(first)
        it = aiter(sub)
        while True:
            try:
                batch = [await asyncio.wait_for(anext(it), KEEPALIVE_SECONDS)]
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            except StopAsyncIteration:
                return
            with contextlib.suppress(TimeoutError, StopAsyncIteration):
                async with asyncio.timeout(COALESCE_SECONDS):
                    while len(batch) < 500:
                        batch.append(await anext(it))
            changed: dict[str, dict[str, Any] | None] = {}
            for ev in batch:
                if ev.type == "RESYNC":
                    current = {str(o["metadata"]["name"]): o for o in watch.list(namespace)}
                    changed |= {n: current.get(n) for n in set(seen) | set(current)}
                    continue
                meta = ev.obj.get("metadata") or {}
                if meta.get("namespace") == namespace:
                    changed[str(meta.get("name"))] = None if ev.type == "DELETED" else ev.obj
            if not changed:
                continue
            out = [sse("runs")]
            for name, obj in changed.items():
                before = seen.pop(name, ("", "", "", ""))
                if obj is None:
                    if name == run:
                        out += [sse("run"), sse("phase")]
                    continue
                now = seen[name] = _seen(obj)
                if now[2] == "pending" and before[2] != "pending" and now[0] not in TERMINAL_PHASES:
                    toast = templates.get_template("_toast.html").render(r=views.row(obj))
                    out.append(sse("approval", toast))
                if now[3].startswith("pending/") and now[3] != before[3] and now[0] not in TERMINAL_PHASES:
                    toast = templates.get_template("_toast.html").render(r=views.row(obj),
                                                                         calls=views.waiting_calls(obj))
                    out.append(sse("approval", toast))
                if name == run:
                    out.append(sse("run"))
                    if now != before:
                        out.append(sse("phase"))
            yield "".join(out)


@router.get("/events")
async def events(request: Request, who: ConsoleSession, state: StateDep, namespace: Namespace = "default",
                 run: Text = "", rv: Text = "") -> StreamingResponse:
    """Server-sent events for a page of `namespace` (and of `run`, rendered from its resourceVersion `rv`): they tell
    of every run of the namespace, so RBAC must let the caller list them."""
    await state.allow(who.caller, "list", AGENTRUNS, namespace)
    return StreamingResponse(_events(state, namespace, run, rv), media_type="text/event-stream",
                             headers=SSE_HEADERS)


async def _log_events(state: State, who: Caller, namespace: str, name: str, hook: str | None, attempt: int | None
                      ) -> AsyncIterator[str]:
    """The log as `log` events of escaped text (the page appends them to a <pre>), then `end`, always: a stream
    that just stopped would make the browser connect again and append the whole log twice."""
    yield "retry: 3000\n\n"
    try:
        run = await one_run(state, who, namespace, name)
        _target, chunks = await run_log(state.kube, namespace, run, hook=hook, attempt=attempt, follow=True)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        empty = True
        async for chunk in chunks:
            text = decoder.decode(chunk)
            if text:
                empty = False
                yield sse("log", str(escape(text)))
        tail = decoder.decode(b"", final=True)
        if tail or empty:
            yield sse("log", str(escape(tail or "(no output)")))
    except (NoLog, ConsoleError) as e:
        yield sse("log", str(escape(f"({e})")))
    except HTTPException as e:  # RBAC's refusal (or the cluster could not say)
        yield sse("log", str(escape(f"({e.detail})")))
    except NotFound as e:
        yield sse("log", str(escape(f"(no log: {e.message})")))
    except KubeError as e:
        yield sse("log", str(escape(f"(no log yet: {e.message})")))
    yield sse("end", "")


@router.get("/runs/{name}/log-stream")
async def log_stream(name: str, who: ConsoleSession, state: StateDep, namespace: Namespace = "default",
                     hook: Text = "", attempt: int | None = Query(None, ge=1)) -> StreamingResponse:
    await state.allow(who.caller, "get", AGENTRUNS, namespace, name=name)
    return StreamingResponse(_log_events(state, who.caller, namespace, name, hook or None, attempt),
                             media_type="text/event-stream", headers=SSE_HEADERS)


# -- the API's documentation -------------------------------------------------------------------------------------

@router.get("/docs", response_class=HTMLResponse)
async def docs(request: Request) -> HTMLResponse:
    """Swagger UI over /openapi.json, from this origin's vendored files and under the console's policy (FastAPI's own
    page loads unpinned scripts from a CDN and runs an inline one)."""
    html = templates.get_template("docs.html").render(openapi=request.app.openapi_url or "/openapi.json")
    return HTMLResponse(html, headers=DOCS_HEADERS)


# -- static files and installation -------------------------------------------------------------------------------

@router.get("/static/{file}")
async def static(file: str) -> Response:
    path = STATIC / file
    media = STATIC_TYPES.get(path.suffix)
    if media is None or "/" in file or file.startswith(".") or not path.is_file():
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(path.read_bytes(), media_type=media, headers={**HEADERS, "Cache-Control": "no-cache"})


async def error_page(request: Request, status: int, message: str) -> Response:
    try:
        who: Signed | None = await signed_in(request)
    except (SignInRequired, ConsoleError):
        who = None
    namespace = request.query_params.get("namespace") or "default"
    return page(request, "error.html", status=status, who=who, message=message, namespace=namespace)


def install(app: FastAPI, settings: ApiSettings) -> None:
    """The console's routes at `/` and its sessions: in memory until `keep_sessions` (api/main.py's lifespan) moves
    them to Secrets of AGENTRUN_SESSION_NAMESPACE."""
    app.state.console_sessions = SessionStore(app.state.auth, insecure=settings.insecure)

    @app.exception_handler(SignInRequired)
    async def sign_in_first(request: Request, exc: SignInRequired) -> Response:
        target = "/signin?" + urlencode({"next": request.url.path + (f"?{request.url.query}" if request.url.query
                                                                      else "")})
        if request.headers.get("hx-request") or request.url.path in ("/events",) or \
                request.url.path.endswith("/log-stream") or request.method != "GET":
            return Response("sign in first", status_code=401, media_type="text/plain",
                            headers={"HX-Redirect": target, **HEADERS})
        return redirect(target)

    @app.exception_handler(ConsoleError)
    async def console_error(request: Request, exc: ConsoleError) -> Response:
        return await error_page(request, exc.status, exc.message)

    @app.exception_handler(Denied)
    async def denied(request: Request, exc: Denied) -> Response:
        """RBAC's refusal: JSON on the API's own routes, a page that says what is missing on the console's."""
        if request.url.path.startswith(("/api/", "/codec/")):
            return JSONResponse(status_code=403, content={"detail": exc.detail})
        return await error_page(request, 403, f"{exc.detail}. Ask an administrator of the namespace for that role.")

    app.include_router(router)


def keep_sessions(app: FastAPI, kube: Kube, namespace: str) -> None:
    """Sessions as Secrets of `namespace` (sessions.py), shared by every API process there; "" keeps them in memory."""
    cast(SessionStore, app.state.console_sessions).kept = SecretSessions(kube, namespace) if namespace else MemorySessions()
