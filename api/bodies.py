"""What a request body may be, checked once for every route before any route parses it (SPEC §7: no input ever yields
a 500).

Python's JSON parser recurses once per level of nesting, and so do pydantic and the code that later walks what was
parsed: a body of a hundred thousand `[` raised RecursionError (a 500) on the verdict, codec and admission routes.
And JSON may spell a lone UTF-16 surrogate (`"\\ud800"`), which parses into a Python string that no UTF-8 encoder
takes: a task, a verdict's reason or a schedule's task holding one failed when it was written on (a 500 again).

So `BodyGuard` reads each body once (at most `MAX_BODY_BYTES`: 413 beyond) and answers 400 with a JSON `detail` to one
nested deeper than `MAX_DEPTH` or holding a lone surrogate, before routing; every other body reaches the route as it
came. Forms (the console's, the codec login's) are no JSON and are not looked at: their fields are decoded from UTF-8
with replacement, so they cannot carry a surrogate.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Deep enough for any object of ours, in an AdmissionReview (a hook's env valueFrom is ~12 levels), and for free-form
# fields such as an object task; far below where parsing or walking what was parsed recurses too deeply.
MAX_DEPTH = 100
# The largest body any route takes: the codec's batches of payloads (api/codec.py; Temporal caps a payload at 2 MiB by
# default, and a batch of a history's payloads stays well under this).
MAX_BODY_BYTES = 64 * 1024 * 1024
METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")

# A string literal (skipped whole, at C speed) or a bracket: only brackets outside strings count towards depth.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
# Any escaped surrogate at all: only then is the body parsed to tell a pair (one character) from a lone half.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class BadBody(ValueError):
    """Why a body is refused; the message is the 400's detail."""


def depth(body: bytes) -> int:
    """How deeply the JSON text nests arrays and objects (0 for a scalar), without parsing it."""
    deepest = level = 0
    for m in _TOKENS.finditer(body):
        token = m.group()
        if token in (b"[", b"{"):
            level += 1
            deepest = max(deepest, level)
        elif token in (b"]", b"}"):
            level -= 1
    return deepest


def _strings(value: Any) -> list[str]:
    """Every string in a parsed JSON value, keys included (iteratively: the value may be MAX_DEPTH deep)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            out.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def check(body: bytes) -> None:
    """Raises BadBody for JSON nested deeper than MAX_DEPTH or holding a lone surrogate. Anything that is not JSON
    passes: the route says what it expected."""
    if depth(body) > MAX_DEPTH:
        raise BadBody(f"body: JSON nested deeper than {MAX_DEPTH} levels")
    if not _SURROGATE_ESCAPE.search(body):
        return
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return
    for s in _strings(value):
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            bad = s[e.start]
            raise BadBody(f"body: a string holds a lone UTF-16 surrogate (\\u{ord(bad):04x}), which is no Unicode "
                          f"character: {s[:40].encode('utf-8', 'backslashreplace').decode()!r}") from None


class BodyGuard:
    """ASGI middleware: every request body with a method that carries one is read, checked, and handed on whole."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS:
            await self.app(scope, receive, send)
            return
        ctype = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1").lower()
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                await self.app(scope, _replay(b"".join(chunks), receive, message), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(send, 413, f"body over {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if not ctype.startswith(FORMS):
            try:
                check(body)
            except BadBody as e:
                await _refuse(send, 400, str(e))
                return
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """A receive that gives the whole body once, then whatever the client sends next (its disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if first is not None:
            return first
        return await receive()

    return again


async def _refuse(send: Send, status: int, detail: str) -> None:
    payload = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
