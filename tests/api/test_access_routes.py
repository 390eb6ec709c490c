"""Every route of the JSON API and every page and action of the console is authorised (issue 27, hole 8): a caller whose
identity RBAC grants nothing gets a 403 from each, whatever it asks, and a caller it grants everything in the namespace
gets past the check. Enumerated from the app's own OpenAPI document, so a route added without the check fails here.

In-process, with the session's localkube for the reviews and no Temporal (nothing here gets that far)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from api.main import State, create_app
from api.settings import ApiSettings
from cli.roles import bind, ensure_roles, user
from localkube.testing import Handle

NOBODY, EVERYTHING = "t-nobody-routes-0123", "t-everything-routes-0123"
# A valid body for each route that takes one, so that what answers is the authorisation, not validation.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/runs"): {"agentRef": "helper", "task": "x"},
    ("POST", "/api/v1/runs/{name}/gate-verdict"): {"action": "approve"},
    ("POST", "/api/v1/runs/{name}/tool-approvals"): {"callId": "c1", "action": "approve", "argumentsSha256": "0" * 64},
    ("POST", "/api/v1/schedules"): {"name": "s", "agentRef": "helper", "schedule": "@daily", "task": "x"},
    ("PATCH", "/api/v1/schedules/{name}"): {"task": "y"},
    ("POST", "/api/v1/schedules/{name}/backfill"): {"start": "2025-01-01T00:00:00Z", "end": "2025-01-02T00:00:00Z"},
}
# The console's pages and actions (GET pages; POSTs carry the session's CSRF token).
CONSOLE = [("GET", "/runs"), ("GET", "/runs/table"), ("GET", "/runs/r"), ("GET", "/runs/r/part/detail"),
           ("GET", "/runs/r/delete"), ("GET", "/new-run"), ("GET", "/events"), ("GET", "/runs/r/log-stream"),
           ("GET", "/schedules"), ("GET", "/schedules/s"), ("GET", "/agents"), ("GET", "/agents/a"),
           ("GET", "/policies"), ("GET", "/policies/p"), ("POST", "/runs/r/verdict"),
           ("POST", "/runs/r/tool-decision"), ("POST", "/runs/r/delete"),
           ("DELETE", "/runs/r"), ("POST", "/new-run"), ("POST", "/schedules/s/pause"), ("POST", "/schedules/s/resume"),
           ("POST", "/schedules/s/trigger"), ("POST", "/schedules/s/backfill")]


@pytest.fixture(scope="module")
def kube(localkube: Handle) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ensure_roles(api)
    yield api
    api.close()


@pytest.fixture
async def app(tmp_path: Path, kube: client.ApiClient, namespace: str) -> AsyncIterator[httpx.AsyncClient]:
    bind(kube, "everything", [user("everything@example.com")], namespace=namespace)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{NOBODY} nobody@example.com\n{EVERYTHING} everything@example.com\n")
    settings = ApiSettings(token_file=str(tokens))
    a = create_app(settings)
    a.state.agentrun = State(settings, kube, None, a.state.auth)
    ROUTES[:] = sorted((m.upper(), path) for path, ops in a.openapi()["paths"].items() if path.startswith("/api/")
                       for m in ops)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://api") as c:
        yield c


ROUTES: list[tuple[str, str]] = []  # the app's /api/ routes, as the fixture found them


async def test_every_api_route_refuses_an_identity_rbac_grants_nothing(app: httpx.AsyncClient, namespace: str) -> None:
    assert len(ROUTES) >= 15, ROUTES
    answers = {}
    for method, path in ROUTES:
        url = path.replace("{name}", "r")
        r = await app.request(method, url, params={"namespace": namespace}, json=BODIES.get((method, path)),
                              headers={"Authorization": f"Bearer {NOBODY}"})
        answers[(method, path)] = (r.status_code, r.json().get("detail", "") if r.status_code == 403 else r.text)
    refused = {k: v for k, v in answers.items() if v[0] != 403 or '"nobody@example.com" may not' not in v[1]}
    assert refused == {}, refused


async def test_an_identity_rbac_grants_everything_in_the_namespace_gets_past_every_check(
        app: httpx.AsyncClient, namespace: str) -> None:
    """Whatever each route answers then (404: no such run; 409, 503: no Temporal here), it is not RBAC's 403."""
    assert len(ROUTES) >= 15, ROUTES
    for method, path in ROUTES:
        r = await app.request(method, path.replace("{name}", "r"), params={"namespace": namespace},
                              json=BODIES.get((method, path)), headers={"Authorization": f"Bearer {EVERYTHING}"})
        assert r.status_code != 403, (method, path, r.text)


async def test_every_console_page_and_action_refuses_an_identity_rbac_grants_nothing(app: httpx.AsyncClient,
                                                                                    namespace: str) -> None:
    signed = await app.post("/signin", data={"token": NOBODY, "next": "/signin"})
    assert signed.status_code == 303, signed.text
    m = re.search(r'name="csrf" value="([^"]+)"', (await app.get("/signin")).text)
    assert m
    for method, path in CONSOLE:
        data = {"csrf": m.group(1), "action": "approve", "agent": "helper", "task": "x", "start": "2025-01-01T00:00:00Z",
                "end": "2025-01-02T00:00:00Z"} if method != "GET" else None
        r = await app.request(method, path, params={"namespace": namespace}, data=data,
                              headers={"X-CSRF-Token": m.group(1)} if method == "DELETE" else {})
        assert r.status_code == 403 and "nobody@example.com" in r.text and "Not allowed" in r.text, \
            (method, path, r.status_code, r.text[:400])
