"""The body guard (api/bodies.py): what it refuses before any route parses a body, and what it lets through whole.
Through the live API, every route that reads a body: tests/e2e/test_api.py."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI, Request

from api.bodies import MAX_DEPTH, BadBody, BodyGuard, check, depth


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert depth(b'"[[[{"') == 0 and depth(b"3") == 0
    assert depth(b'{"a": [1, {"b": "]]]}"}]}') == 3
    assert depth(b'["\\"[[[", [[]]]') == 3  # an escaped quote does not end the string


def test_json_nested_past_the_limit_is_refused_and_at_the_limit_taken() -> None:
    check(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    with pytest.raises(BadBody, match=f"nested deeper than {MAX_DEPTH} levels"):
        check(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    with pytest.raises(BadBody):
        check(b"{" * 100_000)  # not even JSON: refused before a parser recurses into it


@pytest.mark.parametrize("text", ['"\\ud800"', '"x\\uDC00"', '{"\\ud83d": 1}', '["ok", {"k": ["\\udbff!"]}]'])
def test_a_lone_surrogate_anywhere_is_refused(text: str) -> None:
    with pytest.raises(BadBody, match="lone UTF-16 surrogate"):
        check(text.encode())


@pytest.mark.parametrize("text", ['"\\ud83d\\ude00"', '"\\\\ud800"', '"plain"', "not json \\ud800 at all"])
def test_pairs_escaped_backslashes_and_non_json_pass(text: str) -> None:
    check(text.encode())


async def _echo(guarded: FastAPI, **kw: object) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guarded), base_url="http://t") as c:
        return await c.post("/echo", **kw)  # type: ignore[arg-type]


def _app(max_bytes: int = 1024) -> FastAPI:
    app = FastAPI()
    app.add_middleware(BodyGuard, max_bytes=max_bytes)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"length": len(await request.body())}

    return app


async def test_the_route_gets_the_body_whole_and_forms_are_not_read_as_json() -> None:
    body = json.dumps({"task": "x" * 500}).encode()
    assert (await _echo(_app(), content=body)).json() == {"length": len(body)}
    form = b"token=" + b"%5B" * 150 + b"[" * 150
    r = await _echo(_app(), content=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.json() == {"length": len(form)}


async def test_a_body_over_the_limit_is_413_and_a_refused_one_400_with_a_detail() -> None:
    r = await _echo(_app(max_bytes=10), content=b"x" * 11)
    assert r.status_code == 413 and r.json() == {"detail": "body over 10 bytes"}
    r = await _echo(_app(), content=b'{"reason": "\\udfff"}')
    assert r.status_code == 400 and "lone UTF-16 surrogate (\\udfff)" in r.json()["detail"]
