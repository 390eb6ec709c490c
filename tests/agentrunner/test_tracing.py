"""The agent's GenAI spans (agentrunner/tracing.py), as its container runs it (`python -m agentrunner`), exported
over OTLP/HTTP to a receiver started here and decoded with opentelemetry-proto: `invoke_agent`, `chat <model>` and
`execute_tool <name>` in the trace TRACEPARENT names, token counts on them, no prompt text unless asked; a
collector that is down neither fails nor slows the run, and the result counts the spans it dropped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.otlp import Receiver, closed_port, otlp_receiver
from tests.waiting import wait_for

from .helpers import Dirs, run_agent

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT_SPAN}-01"
SECRET_WORDS = "the-secret-prompt-words"
TASK = f'tool:write_file {{"path": "/workspace/note.txt", "content": "hi"}}\n{SECRET_WORDS}'


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path).make()


@pytest.fixture
def receiver() -> object:
    with otlp_receiver() as r:
        yield r


def traced_env(endpoint: str, **more: str) -> dict[str, str]:
    return {"MODEL_PROVIDER": "echo", "MODEL_NAME": "echo-1", "TRACEPARENT": TRACEPARENT,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": "agent-under-test", "INSTANCE_NAME": "helper", **more}


def test_the_agents_spans_follow_the_genai_conventions_in_the_runs_trace(dirs: Dirs, receiver: Receiver) -> None:
    run = run_agent(dirs, TASK, **traced_env(receiver.url))
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = run.result["metrics"]
    assert metrics["spansExported"] >= 4 and metrics["spansDropped"] == 0
    spans = {s.name: s for s in receiver.snapshot()}
    assert {"invoke_agent helper", "chat echo-1", "execute_tool write_file"} <= set(spans), sorted(spans)
    assert {s.trace_id for s in spans.values()} == {TRACE}, "every span in the run's trace"
    root = spans["invoke_agent helper"]
    assert root.parent_id == PARENT_SPAN, "a child of the control plane's span for the agent's pod"
    assert root.service == "agent-under-test"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.provider.name"] == "echo" and root.attributes["gen_ai.request.model"] == "echo-1"
    assert root.attributes["gen_ai.usage.input_tokens"] == metrics["inputTokens"] > 0
    chats = [s for s in receiver.snapshot() if s.name == "chat echo-1"]
    assert len(chats) == 2 and all(c.parent_id == root.span_id for c in chats)
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == metrics["inputTokens"]
    assert all("gen_ai.usage.cache_read.input_tokens" in c.attributes for c in chats)
    tool = spans["execute_tool write_file"]
    assert tool.parent_id == root.span_id
    assert tool.attributes["gen_ai.tool.name"] == "write_file" and tool.attributes["gen_ai.operation.name"] == \
        "execute_tool"
    everything = repr([(s.name, s.attributes) for s in receiver.snapshot()])
    assert SECRET_WORDS not in everything and "note.txt" not in everything, "no prompt or arguments by default"


def test_content_goes_on_spans_only_when_the_agents_observability_asks(dirs: Dirs, receiver: Receiver) -> None:
    run = run_agent(dirs, TASK, **traced_env(receiver.url, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"))
    assert run.returncode == 0, run.stderr[-2000:]
    spans = {s.name: s for s in receiver.snapshot()}
    assert SECRET_WORDS in spans["invoke_agent helper"].attributes["gen_ai.input.messages"]
    assert "note.txt" in spans["execute_tool write_file"].attributes["gen_ai.tool.call.arguments"]


def test_headers_from_the_agents_secret_reach_the_collector(dirs: Dirs) -> None:
    """The headers Secret's value (AGENT_OTLP_SECRET_HEADERS, by secretKeyRef) goes with each export."""
    import http.server
    import threading

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization") or "")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = run_agent(dirs, "hello", **traced_env(f"http://127.0.0.1:{server.server_address[1]}",
                                                   AGENT_OTLP_SECRET_HEADERS="Authorization=Bearer%20s3cret"))
        assert run.returncode == 0
        wait_for(lambda: bool(seen), timeout=10, what="an export")
        assert seen[0] == "Bearer s3cret"
    finally:
        server.shutdown()
        server.server_close()


def test_a_collector_that_is_down_neither_fails_nor_slows_the_run_and_the_drops_are_counted(dirs: Dirs) -> None:
    def timed(**env: str) -> tuple[float, dict[str, object]]:
        t0 = time.monotonic()
        run = run_agent(dirs, TASK, **env)
        assert run.returncode == 0 and run.result["status"] == "success", run.stderr[-2000:]
        return time.monotonic() - t0, run.result

    untraced, plain = timed(MODEL_PROVIDER="echo", MODEL_NAME="echo-1")
    down, result = timed(**traced_env(closed_port()))
    metrics = result["metrics"]
    assert isinstance(metrics, dict) and metrics["spansDropped"] >= 4 and metrics["spansExported"] == 0
    assert "spansDropped" not in plain["metrics"]  # type: ignore[operator]
    # The same run (a process start dominates): the SDK's import, never a wait on the collector. Generous for a
    # loaded CI machine; the exporter's own timeout (5 s) and retries would exceed it.
    assert down < untraced + 2.5, (down, untraced)
