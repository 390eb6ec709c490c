"""The web console the API serves at `/`: server-rendered Jinja2 pages (autoescaped, so whatever a run holds is
text), htmx for the live parts, and no JavaScript build.

Why this stack: a Python team keeps it alive with what it already knows (templates and FastAPI routes); the one
script is htmx with its SSE extension, vendored from the npm registry (static/VENDORED.md), and no page has inline
script or style, so the pages' Content-Security-Policy allows scripts from the API's own origin only.

- Sign-in exchanges an API token for a server-side session (`sessions.py`: a sealed Secret per session, shared by
  every API process); every POST needs the session's CSRF token.
- Live updates come from the API's one AgentRun watch (`api/runwatch.py`, `State.runwatch`): `/events` tells each
  open page, over server-sent events, which runs changed; the page then fetches its fragment again from the same
  in-memory view, so no browser polls and none costs the cluster a request per change.
- Actions call the JSON API's own code (`api/runops.py`): the same `gatePolicy` check, the same recorded identity.

Pages built on this one (schedules, agents, policies) use `page()`, `ConsoleSession`, `csrf_checked` and extend
`base.html` (its `nav` names them).
"""

from __future__ import annotations

from fastapi import FastAPI

from ..settings import ApiSettings
from . import definitions, routes, schedules
from .routes import ConsoleSession, csrf_checked, keep_sessions, page, templates

__all__ = ["ConsoleSession", "csrf_checked", "install", "keep_sessions", "page", "templates"]


def install(app: FastAPI, settings: ApiSettings) -> None:
    """The console's routes and sessions, and the pages built on them (Schedules, Agents, Policies)."""
    routes.install(app, settings)
    app.include_router(schedules.router)
    app.include_router(definitions.router)
