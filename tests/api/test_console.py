"""The console's sign-in, sessions and CSRF, and its files as served (the browser tests are tests/e2e/test_console.py).

The app runs in-process without its lifespan: these routes refuse or redirect before they touch Kubernetes or
Temporal, which is what is under test.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from api.auth import Authenticator, TokenFile
from api.console.routes import STATIC, TEMPLATES, safe_next
from api.console.sessions import COOKIE, SessionStore, seal, secret_name, unseal
from api.main import create_app
from api.settings import ApiSettings

TOKEN = "t-console-0123456789"
OTHER = "t-console-other-98765"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN} alice@example.com reviewers\n{OTHER} bob@example.com\n")
    return path


def connect(app: object, base: str = "http://console.test") -> httpx.AsyncClient:
    # No lifespan: these answers need neither Kubernetes nor Temporal.
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base,  # type: ignore[arg-type]
                             follow_redirects=False)


@pytest.fixture
async def client(token_file: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with connect(create_app(ApiSettings(token_file=str(token_file)))) as c:
        yield c


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> str:
    """Signs in; returns the page's CSRF token (from the runs page's sign-out form)."""
    r = await client.post("/signin", data={"token": token, "next": "/signin"})
    assert r.status_code == 303, r.text
    page = await client.get("/signin")  # any page of a signed-in session shows its CSRF token in the sign-out form
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m, page.text
    return m.group(1)


async def test_sign_in_sets_an_httponly_strict_session_cookie_that_is_not_the_token(client: httpx.AsyncClient) -> None:
    r = await client.post("/signin", data={"token": TOKEN, "next": "/runs?namespace=x"})
    assert r.status_code == 303 and r.headers["location"] == "/runs?namespace=x"
    cookie = r.headers["set-cookie"]
    attrs = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
    assert {"httponly", "path", "max-age"} <= attrs and "samesite=strict" in cookie.lower()
    assert "secure" not in attrs  # plain HTTP here; over HTTPS it is Secure (below)
    value = client.cookies[COOKIE]
    assert TOKEN not in value and hashlib.sha256(TOKEN.encode()).hexdigest() not in value and len(value) >= 40


async def test_the_cookie_is_secure_over_https(token_file: Path) -> None:
    app = create_app(ApiSettings(token_file=str(token_file)))
    async with connect(app, "https://console.test") as c:
        r = await c.post("/signin", data={"token": TOKEN})
    assert r.status_code == 303 and "secure" in {a.strip().lower() for a in r.headers["set-cookie"].split(";")}


async def test_a_sign_in_posted_from_another_site_is_refused(client: httpx.AsyncClient) -> None:
    """No session exists yet to hold a CSRF token: the browser's Sec-Fetch-Site decides, and a cross-site sign-in
    (which would sign the visitor in as the attacker) sets no cookie."""
    for site in ("cross-site", "same-site"):
        r = await client.post("/signin", data={"token": TOKEN}, headers={"Sec-Fetch-Site": site})
        assert r.status_code == 403 and COOKIE not in r.headers.get("set-cookie", ""), site
        assert "must come from this console" in r.text
    for site in ("same-origin", "none"):
        r = await client.post("/signin", data={"token": TOKEN}, headers={"Sec-Fetch-Site": site})
        assert r.status_code == 303 and COOKIE in r.headers["set-cookie"], site


async def test_a_wrong_token_is_refused_as_text(client: httpx.AsyncClient) -> None:
    r = await client.post("/signin", data={"token": "<b>nope</b>"})
    assert r.status_code == 401 and "not a valid API token" in r.text
    assert "<b>nope</b>" not in r.text and COOKIE not in r.headers.get("set-cookie", "")


async def test_pages_send_the_unsigned_to_sign_in_and_fragments_get_401(client: httpx.AsyncClient) -> None:
    r = await client.get("/runs?namespace=team-a")
    assert r.status_code == 303 and r.headers["location"] == "/signin?next=%2Fruns%3Fnamespace%3Dteam-a"
    r = await client.get("/runs/table", headers={"HX-Request": "true"})
    assert r.status_code == 401 and r.headers["hx-redirect"].startswith("/signin?next=")
    assert (await client.get("/events")).status_code == 401
    assert (await client.get("/")).headers["location"] == "/runs"


@pytest.mark.parametrize(("method", "path"), [("POST", "/runs/r1/verdict"), ("POST", "/new-run"),
                                              ("POST", "/runs/r1/delete"), ("DELETE", "/runs/r1"),
                                              ("POST", "/signout")])
async def test_state_changing_requests_without_the_csrf_token_are_refused(client: httpx.AsyncClient, method: str,
                                                                    path: str) -> None:
    csrf = await sign_in(client)
    body = {"action": "approve", "reason": "x", "agent": "a", "task": "t"}
    r = await client.request(method, path, data=body)
    assert r.status_code == 403 and "CSRF" in r.text
    r = await client.request(method, path, data={**body, "csrf": csrf[:-2] + "xx"})
    assert r.status_code == 403
    r = await client.request(method, path, data=body, headers={"X-CSRF-Token": "wrong"})
    assert r.status_code == 403
    # Without a session the same request is told to sign in (no CSRF token can help it).
    client.cookies.clear()
    r = await client.request(method, path, data={**body, "csrf": csrf})
    assert r.status_code == 401


async def test_sign_out_needs_the_csrf_token_and_ends_the_session(client: httpx.AsyncClient) -> None:
    csrf = await sign_in(client)
    assert (await client.get("/signin")).text.count("Sign out") == 1
    r = await client.post("/signout", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/signin"
    assert (await client.get("/runs")).status_code == 303  # the cookie is cleared, and the session gone
    client.cookies.set(COOKIE, "anything")
    assert (await client.get("/runs")).status_code == 303


def revoke_alice(token_file: Path) -> None:
    token_file.write_text(f"{OTHER} bob@example.com\n# alice's token revoked\n")
    os.utime(token_file, (1, 1))  # a new mtime: the token file is read again


async def test_a_token_removed_from_the_file_ends_its_sessions(token_file: Path) -> None:
    app = create_app(ApiSettings(token_file=str(token_file)))
    async with connect(app) as alice, connect(app) as bob:
        await sign_in(alice)
        await sign_in(bob, OTHER)
        assert "alice@example.com" in (await alice.get("/signin")).text
        revoke_alice(token_file)
        assert (await alice.get("/runs")).status_code == 303
        assert "alice@example.com" not in (await alice.get("/signin")).text
        assert "bob@example.com" in (await bob.get("/signin")).text


def authenticator(path: Path) -> Authenticator:
    return Authenticator(TokenFile(path), reviews=None)


async def test_sessions_expire_and_keep_no_token(token_file: Path) -> None:
    store = SessionStore(authenticator(token_file), seconds=-1)
    s = await store.sign_in(TOKEN)
    assert s is not None and s.identity == "alice@example.com"
    assert TOKEN not in repr(s) and await store.get(s.id) is None and len(store) == 0
    live = SessionStore(authenticator(token_file))
    s2 = await live.sign_in(TOKEN)
    assert s2 is not None and await live.get(s2.id) is s2 and s2.csrf != s2.id
    assert await live.sign_in("") is None and await live.sign_in("nope") is None
    assert not s2.csrf_ok("") and not s2.csrf_ok(None) and s2.csrf_ok(s2.csrf)


async def test_insecure_without_tokens_signs_anyone_in_as_anonymous(tmp_path: Path) -> None:
    store = SessionStore(authenticator(tmp_path / "none"), insecure=True)
    s = await store.sign_in("")
    assert s is not None and s.identity == "anonymous" and await store.get(s.id) is s


async def test_sign_in_only_goes_on_to_this_site() -> None:
    assert safe_next("/runs/x?namespace=a") == "/runs/x?namespace=a"
    for bad in ("//evil.example/x", "https://evil.example", "/\\evil.example", "", None, "runs"):
        assert safe_next(bad) == "/runs"


# -- the files, as the dashboard's were checked -------------------------------------------------------------------

def csp(headers: dict[str, str] | object) -> dict[str, list[str]]:
    value = headers["content-security-policy"]  # type: ignore[index]
    return {d.split()[0]: d.split()[1:] for d in value.split(";") if d.strip()}


@pytest.mark.parametrize(("path", "media_type"), [("/signin", "text/html"), ("/static/htmx.min.js", "text/javascript"),
                                                  ("/static/sse.min.js", "text/javascript"),
                                                  ("/static/console.css", "text/css")])
async def test_each_file_is_served_with_its_type_and_a_strict_policy(client: httpx.AsyncClient, path: str, media_type: str) -> None:
    r = await client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].split(";")[0] == media_type
    policy = csp(r.headers)
    assert policy["default-src"] == ["'none'"] and policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
    assert policy["base-uri"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"


async def test_static_serves_only_its_own_files(client: httpx.AsyncClient) -> None:
    for name in ("htmx.min.js", "sse.min.js", "console.css"):
        assert (await client.get(f"/static/{name}")).content == (STATIC / name).read_bytes()
    for bad in ("VENDORED.md", "..%2Froutes.py", ".hidden.js", "nope.js"):
        assert (await client.get(f"/static/{bad}")).status_code == 404


async def test_the_vendored_scripts_are_the_ones_recorded() -> None:
    recorded = dict(re.findall(r"\| `([\w.-]+\.(?:js|css))` \| `[^`]+` \| `[^`]+` \| `([0-9a-f]{64})` \|",
                               (STATIC / "VENDORED.md").read_text()))
    assert set(recorded) == {"htmx.min.js", "sse.min.js", "swagger-ui-bundle.js", "swagger-ui.css"}
    for name, digest in recorded.items():
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name


async def test_templates_have_no_inline_script_style_or_handlers_and_never_turn_off_escaping() -> None:
    for path in TEMPLATES.glob("*.html"):
        html = path.read_text()
        scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S)
        assert all(body == "" for body in scripts), path.name
        assert all(re.search(r'src="/static/[\w.-]+\.js"', tag) for tag in re.findall(r"<script\b[^>]*>", html))
        assert "<style" not in html and re.search(r"\sstyle\s*=", html) is None, path.name
        assert re.search(r"\son[a-z]+\s*=", html) is None, path.name
        assert "|safe" not in html.replace(" ", "") and "autoescape" not in html, path.name
        assert "hx-on" not in html and "js:" not in html, path.name


async def test_the_api_docs_are_served_from_this_origin_under_the_consoles_policy(client: httpx.AsyncClient) -> None:
    """Issue 27, hole 13: FastAPI's /docs and /redoc loaded unpinned scripts from a CDN, with an inline script, on
    the console's origin and with no Content-Security-Policy. /docs is Swagger UI from vendored files under the
    console's policy (images may also be data: URIs); /redoc is gone."""
    r = await client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    policy = csp(r.headers)
    assert policy["default-src"] == ["'none'"] and policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"] and policy["frame-ancestors"] == ["'none'"]
    assert r.headers["x-content-type-options"] == "nosniff"
    references = re.findall(r'(?:src|href)="([^"]*)"', r.text)
    assert references and all(ref.startswith("/static/") for ref in references), references
    assert all(body == "" for body in re.findall(r"<script\b[^>]*>(.*?)</script>", r.text, re.S))
    for ref in references:
        assert (await client.get(ref)).status_code == 200, ref
    assert (await client.get("/redoc")).status_code == 404
    assert (await client.get("/openapi.json")).json()["info"]["title"] == "agentrun"


async def test_a_sealed_session_opens_only_with_its_id_and_under_its_own_name(token_file: Path) -> None:
    """What a session Secret holds (api/console/sessions.py) is bound to the session ID (the key) and to the Secret's
    name (associated data): moved under another session's name, or altered by a byte, it opens for no one."""
    store = SessionStore(authenticator(token_file))
    s, other = await store.sign_in(TOKEN), await store.sign_in(OTHER)
    assert s is not None and other is not None
    secret = seal(s)
    opened = unseal(s.id, secret)
    assert opened is not None and (opened.identity, opened.csrf, opened.token_digest) == (s.identity, s.csrf,
                                                                                        s.token_digest)
    assert secret["metadata"]["name"] == secret_name(s.id) != secret_name(other.id)
    assert unseal(other.id, secret) is None
    moved = {**secret, "metadata": {**secret["metadata"], "name": secret_name(other.id)}}
    assert unseal(other.id, moved) is None
    sealed = bytearray(base64.b64decode(secret["data"]["session"]))
    sealed[-1] ^= 1
    assert unseal(s.id, {**secret, "data": {"session": base64.b64encode(bytes(sealed)).decode()}}) is None
    assert unseal(s.id, {**secret, "data": {}}) is None
