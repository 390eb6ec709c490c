"""A scripted fake model on 127.0.0.1 that speaks OpenAI chat-completions and Anthropic messages, streaming (SSE)
and not, and records what it was sent.

Shared by the agent program's tests (tests/agentrunner), the benchmark (bench/agent.py) and the end-to-end runs
that need a model to talk to (tests/e2e). The real SDKs (through pydantic-ai) talk to it, so what it answers must
be what the providers answer on the wire:

- ``script``: the turns to answer, in order — each a ``Turn`` (text, tool calls with their ids, usage with cached
  tokens). The wire format follows the request's path (``/chat/completions`` or ``/messages``) and its
  ``stream`` flag. When the script is used up, the last turn is repeated (a model that keeps calling a tool).
- ``statuses``: HTTP statuses to answer first, one request each (``[429]`` then the script: a retried 429), with a
  ``retry-after-ms`` of 1 so the SDKs' backoff stays short.
- ``reply``/``status``: without a script, the fixed JSON body and status of every answer (the older interface).
- ``delay``: seconds each answer waits (``release`` cuts it short).
- ``requests``: every request, decoded. ``closed_port_url()`` is a model that is down (connection refused).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATHS = ("/chat/completions",)
ANTHROPIC_PATHS = ("/messages",)


@dataclass
class Call:
    """A tool call the scripted model makes."""

    name: str
    args: dict[str, Any] | str  # a string is sent verbatim (a model that writes bad JSON)
    id: str = ""


@dataclass
class Turn:
    """One scripted answer: text and/or tool calls, and the usage the provider reports for it."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0  # OpenAI: part of input_tokens; Anthropic: cache_read_input_tokens beside them

    def arguments(self, call: Call) -> str:
        return call.args if isinstance(call.args, str) else json.dumps(call.args)


@dataclass
class Recorded:
    path: str
    authorization: str | None
    body: Any
    api_key: str | None = None  # the `api-key` header (Azure OpenAI)
    headers: dict[str, str] = field(default_factory=dict)
    at: float = 0.0  # time.monotonic() when it arrived (bench/agent.py's cold start)

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    def tool_results(self) -> list[str]:
        """The tool results this request carries back to the model, in order, as text (either wire format)."""
        out: list[str] = []
        for m in (self.body or {}).get("messages", []):
            if m.get("role") == "tool":
                content = m.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
            elif m.get("role") == "user" and isinstance(m.get("content"), list):
                for block in m["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        c = block.get("content")
                        if isinstance(c, list):
                            c = "".join(b.get("text", "") for b in c if isinstance(b, dict))
                        out.append(c if isinstance(c, str) else json.dumps(c))
        return out

    def tool_names(self) -> list[str]:
        """The tools offered in this request (either wire format)."""
        names = []
        for t in (self.body or {}).get("tools", []) or []:
            names.append(t.get("function", {}).get("name") if "function" in t else t.get("name"))
        return names


@dataclass
class FakeModelServer:
    """The model endpoint on 127.0.0.1; tests set ``script``/``statuses`` (or ``status``/``reply``/``delay``)."""

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
    routes: set[str] = field(default_factory=lambda: {"/v1/chat/completions", "/v1/messages"})
    release: threading.Event = field(default_factory=threading.Event)
    script: list[Turn] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    model: str = "fake-model"
    served: int = 0  # scripted turns answered so far
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def root_url(self) -> str:
        """The server's root (Anthropic's SDK takes the root, OpenAI's the /v1 URL)."""
        return self.base_url.removesuffix("/v1")

    def next_turn(self) -> Turn:
        with self.lock:
            turn = self.script[min(self.served, len(self.script) - 1)]
            self.served += 1
            return turn


def closed_port_url(path: str = "/v1") -> str:
    """The URL of a model that is down: a port of 127.0.0.1 that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


# -- the two wire formats ------------------------------------------------------------------------------------------

def _openai_message(turn: Turn, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [{"id": c.id or f"call_{n}_{i}", "type": "function",
                                  "function": {"name": c.name, "arguments": turn.arguments(c)}}
                                 for i, c in enumerate(turn.calls)]
    return message


def _openai_usage(turn: Turn) -> dict[str, Any]:
    return {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens,
            "prompt_tokens_details": {"cached_tokens": turn.cached_tokens}}


def openai_body(turn: Turn, n: int, model: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls" if turn.calls else "stop",
                         "message": _openai_message(turn, n)}],
            "usage": _openai_usage(turn)}


def openai_events(turn: Turn, n: int, model: str) -> Iterator[str]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1700000000, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) \
            + "\n\n"

    yield chunk({"role": "assistant", "content": ""})
    if turn.text:
        half = len(turn.text) // 2
        for piece in (turn.text[:half], turn.text[half:]):
            if piece:
                yield chunk({"content": piece})
    for i, c in enumerate(turn.calls):
        args = turn.arguments(c)
        yield chunk({"tool_calls": [{"index": i, "id": c.id or f"call_{n}_{i}", "type": "function",
                                     "function": {"name": c.name, "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]})
    yield chunk({}, "tool_calls" if turn.calls else "stop")
    yield "data: " + json.dumps({**base, "choices": [], "usage": _openai_usage(turn)}) + "\n\n"
    yield "data: [DONE]\n\n"


def _anthropic_content(turn: Turn, n: int) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for i, c in enumerate(turn.calls):
        args: Any = c.args if isinstance(c.args, dict) else {"_raw": c.args}  # tool_use input is an object
        content.append({"type": "tool_use", "id": c.id or f"toolu_{n}_{i}", "name": c.name, "input": args})
    return content


def _anthropic_usage(turn: Turn) -> dict[str, Any]:
    # Anthropic counts cached tokens beside the input tokens, not inside them.
    return {"input_tokens": turn.input_tokens - turn.cached_tokens, "output_tokens": turn.output_tokens,
            "cache_read_input_tokens": turn.cached_tokens, "cache_creation_input_tokens": 0}


def anthropic_body(turn: Turn, n: int, model: str) -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_content(turn, n), "stop_reason": "tool_use" if turn.calls else "end_turn",
            "stop_sequence": None, "usage": _anthropic_usage(turn)}


def anthropic_events(turn: Turn, n: int, model: str) -> Iterator[str]:
    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    usage = _anthropic_usage(turn)
    yield event("message_start", {"message": {"id": f"msg_{n}", "type": "message", "role": "assistant",
                                              "model": model, "content": [], "stop_reason": None,
                                              "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}})
    index = 0
    if turn.text:
        yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
        yield event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": turn.text}})
        yield event("content_block_stop", {"index": index})
        index += 1
    for i, c in enumerate(turn.calls):
        yield event("content_block_start", {"index": index, "content_block": {
            "type": "tool_use", "id": c.id or f"toolu_{n}_{i}", "name": c.name, "input": {}}})
        yield event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                      "partial_json": turn.arguments(c)}})
        yield event("content_block_stop", {"index": index})
        index += 1
    yield event("message_delta", {"delta": {"stop_reason": "tool_use" if turn.calls else "end_turn",
                                            "stop_sequence": None},
                                  "usage": {"output_tokens": turn.output_tokens}})
    yield event("message_stop", {})


@contextmanager
def serve_model() -> Iterator[FakeModelServer]:
    """The fake model on a free port of 127.0.0.1, for the `with` block."""
    state = FakeModelServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            recorded = Recorded(self.path, self.headers.get("Authorization"), body, self.headers.get("api-key"),
                                dict(self.headers.items()), time.monotonic())
            with state.lock:
                state.requests.append(recorded)
                pending = state.statuses.pop(0) if state.statuses else None
            if state.delay:
                state.release.wait(state.delay)
            if self.path not in state.routes:
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            if pending is not None:
                return self._json(pending, {"error": {"message": f"scripted status {pending}",
                                                      "type": "rate_limit_error" if pending == 429 else "api_error"}},
                                  {"retry-after-ms": "1", "retry-after": "0"})
            if not state.script:
                return self._json(state.status, state.reply)
            turn = state.next_turn()
            n = state.served
            anthropic = self.path.split("?")[0].endswith(ANTHROPIC_PATHS)
            if recorded.stream:
                events = anthropic_events(turn, n, state.model) if anthropic else openai_events(turn, n, state.model)
                return self._sse(events)
            return self._json(200, anthropic_body(turn, n, state.model) if anthropic
                              else openai_body(turn, n, state.model))

        def _json(self, status: int, reply: Any, headers: dict[str, str] | None = None) -> None:
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _sse(self, events: Iterator[str]) -> None:
            payload = "".join(events).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
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
