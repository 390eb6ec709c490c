"""The dashboard's files as the API serves them: a strict Content-Security-Policy on each, and nothing in them
that turns data into HTML or script (the browser test is tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from api.main import DASHBOARD, create_app
from api.settings import ApiSettings

FILES = {"/": "text/html", "/dashboard.js": "text/javascript", "/dashboard.css": "text/css"}


@pytest.fixture
async def api() -> AsyncIterator[httpx.AsyncClient]:
    # No lifespan: these routes need neither Kubernetes nor Temporal.
    app = create_app(ApiSettings(insecure=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


@pytest.mark.parametrize(("path", "media_type"), FILES.items())
async def test_each_file_is_served_with_its_type_and_a_strict_policy(api: httpx.AsyncClient, path: str,
                                                                    media_type: str) -> None:
    r = await api.get(path)
    assert r.status_code == 200 and r.headers["content-type"].split(";")[0] == media_type
    csp = {d.split()[0]: d.split()[1:] for d in r.headers["content-security-policy"].split(";") if d.strip()}
    assert csp["default-src"] == ["'none'"] and csp["script-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'"] and csp["connect-src"] == ["'self'"]
    assert csp["base-uri"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"


async def test_the_files_are_the_ones_next_to_the_page(api: httpx.AsyncClient) -> None:
    for path in FILES:
        name = path.lstrip("/") or DASHBOARD.name
        assert (await api.get(path)).content == DASHBOARD.with_name(name).read_bytes()


def code(path: Path) -> str:
    """The script without its comments (which may name what the code must not use)."""
    return "\n".join(re.sub(r"(^|\s)//.*$", "", line) for line in path.read_text().splitlines())


def test_the_page_has_no_inline_script_style_or_event_handlers() -> None:
    html = DASHBOARD.read_text()
    assert re.findall(r"<script\b.*?</script>", html, re.S) == ['<script src="dashboard.js" defer></script>']
    assert "<style" not in html and re.search(r"\sstyle\s*=", html) is None
    assert re.search(r"\son[a-z]+\s*=", html) is None


def test_the_script_writes_text_only_and_keeps_the_token_in_memory() -> None:
    js = code(DASHBOARD.with_name("dashboard.js"))
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                   "localStorage", "sessionStorage", "document.cookie", "setAttribute(\"on", ".onclick"):
        assert banned not in js, banned
    assert "textContent" in js and "addEventListener" in js and "encodeURIComponent" in js
