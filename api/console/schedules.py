"""The console's Schedules pages: the namespace's SympoziumSchedules (phase, cron, next and last run) and one
schedule's page with pause / resume / run now / backfill.

Each action calls the JSON API's own route function (api/schedules.py) with the session's identity, so the console
checks and refuses exactly what `POST /api/v1/schedules/{name}/...` does; every POST carries the session's CSRF token
(`csrf_checked`). The object is the source of truth: pause and resume write `spec.suspend` and the bridge mirrors it
(the phase follows), which the page says rather than pretending the phase changed at once.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from models.names import AGENTRUNS, LABEL_SCHEDULE

from .. import schedules as api
from ..access import Ask, Denied
from ..deps import Namespace, StateDep
from . import views
from .routes import CheckedForm, ConsoleError, ConsoleSession, Text, page, redirect

router = APIRouter(include_in_schema=False)

ACTIONS = ("pause", "resume", "trigger", "backfill")


def done_note(done: str, spec: dict[str, Any], ticks: int | None) -> str:
    """What the page says after an action (derived here, never taken from the URL as text)."""
    if done == "pause":
        return "Paused: the bridge suspends its Temporal Schedule (the phase follows); no tick runs until resumed."
    if done == "resume":
        return "Resumed: the bridge unpauses its Temporal Schedule (the phase follows)."
    if done == "trigger":
        policy = str(spec.get("concurrencyPolicy") or "Forbid")
        return api.TRIGGERED.get(policy, api.TRIGGERED["Forbid"]).capitalize() + "."
    if done == "backfill":
        return f"Backfill started: {ticks or 0} tick(s), each a run named after its tick time."
    return ""


def schedule_url(namespace: str, name: str, **extra: str) -> str:
    return f"/schedules/{quote(name, safe='')}?" + urlencode({"namespace": namespace, **extra})


def _detail(e: HTTPException) -> str:
    """An API refusal as one line of text (a 422's detail is a list of field problems)."""
    if isinstance(e.detail, list):
        return "; ".join(_problem(d) for d in e.detail if isinstance(d, dict))
    return str(e.detail)


def _problem(d: dict[str, Any]) -> str:
    field, msg = ".".join(str(p) for p in d.get("loc", [])[1:]), str(d.get("msg", ""))
    return msg if not field or msg.startswith(field) else f"{field}: {msg}"


@router.get("/schedules", response_class=HTMLResponse)
async def schedules_page(request: Request, who: ConsoleSession, state: StateDep,
                         namespace: Namespace = "default") -> HTMLResponse:
    rows = await api.list_schedules(state, who.caller, namespace)
    return page(request, "schedules.html", who=who, section="schedules", namespace=namespace, rows=rows)


@router.get("/schedules/{name}", response_class=HTMLResponse)
async def schedule_page(request: Request, name: str, who: ConsoleSession, state: StateDep,
                        namespace: Namespace = "default", done: Text = "",
                        ticks: int | None = Query(None, ge=0)) -> HTMLResponse:
    return await _schedule(request, who, state, namespace, name, done=done if done in ACTIONS else "",
                           ticks=ticks)


async def _schedule(request: Request, who: Any, state: Any, namespace: str, name: str, *, status: int = 200,
                    error: str = "", done: str = "", ticks: int | None = None,
                    form: dict[str, str] | None = None) -> HTMLResponse:
    try:
        obj = await api.get_schedule(name, state, who.caller, namespace)
    except Denied:
        raise
    except HTTPException as e:
        raise ConsoleError(e.status_code, _detail(e)) from e
    # The schedule's recent runs, which only a caller who may list runs sees.
    shown = await state.access.allowed(who.caller, Ask("list", AGENTRUNS, namespace))
    runs = [views.row(o) for o in (state.runwatch.list(namespace) if shown else [])
            if ((o.get("metadata") or {}).get("labels") or {}).get(LABEL_SCHEDULE) == name]
    runs.sort(key=lambda r: r.created, reverse=True)
    return page(request, "schedule.html", status=status, who=who, section="schedules", namespace=namespace,
                name=name, obj=obj, s=api._summary(obj), spec=obj.get("spec") or {}, st=obj.get("status") or {},
                runs=runs[:20], error=error, note=done_note(done, obj.get("spec") or {}, ticks), form=form or {})


@router.post("/schedules/{name}/{action}", response_class=HTMLResponse)
async def act(request: Request, name: str, action: str, who: ConsoleSession, form: CheckedForm, state: StateDep,
              namespace: Namespace = "default") -> Response:
    """Pause, resume, run now or backfill, through the JSON API's own code as the session's identity."""
    me = who.caller
    extra: dict[str, str] = {}
    try:
        if action == "pause":
            await api.pause_schedule(name, state, me, namespace)
        elif action == "resume":
            await api.resume_schedule(name, state, me, namespace)
        elif action == "trigger":
            await api.trigger_schedule(name, state, me, namespace)
        elif action == "backfill":
            try:
                window = api.BackfillRange.model_validate({"start": form.get("start", "").strip(),
                                                           "end": form.get("end", "").strip()})
            except ValidationError as e:
                raise HTTPException(status_code=422, detail="start and end must be RFC 3339 times with an offset "
                                                            f"(2026-01-01T09:00:00Z): {e.errors()[0]['msg']}") from e
            extra["ticks"] = str((await api.backfill_schedule(name, state, me, window, namespace)).ticks)
        else:
            raise ConsoleError(404, f"no schedule action {action!r} (pause, resume, trigger or backfill)")
    except Denied:
        raise
    except HTTPException as e:
        return await _schedule(request, who, state, namespace, name, status=e.status_code, error=_detail(e),
                               form=form)
    return redirect(schedule_url(namespace, name, done=action, **extra))
