"""A fake model: an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that records what it was sent.

Shared by the agent program's tests (tests/agentrunner) and the end-to-end runs that need a model to talk to
(tests/e2e/test_sympozium_lifecycle.py); tests set its `status`, `reply`, `delay` and `routes`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    authorization: str | None
    body: Any
    api_key: str | None = None  # the `api-key` header (Azure OpenAI)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeModelServer:
    """A chat-completions endpoint on 127.0.0.1; tests set ``status``/``reply``/``delay``."""

    base_url: str = ""
    status: int = 200
    reply: Any = field(default_factory=lambda: {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Hello from the fake model."}}],
        "usage": {"prompt_tokens": 17, "completion_tokens": 6, "total_tokens": 23},
    })
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    routes: set[str] = field(default_factory=lambda: {"/v1/chat/completions"})
    release: threading.Event = field(default_factory=threading.Event)



@contextmanager
def serve_model() -> Iterator[FakeModelServer]:
    """The fake model on a free port of 127.0.0.1, for the `with` block."""
    state = FakeModelServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.requests.append(Recorded(self.path, self.headers.get("Authorization"), json.loads(raw),
                                           self.headers.get("api-key"), dict(self.headers.items())))
            if state.delay:
                state.release.wait(state.delay)
            status, reply = (state.status, state.reply) if self.path in state.routes \
                else (404, {"error": "not found"})
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
