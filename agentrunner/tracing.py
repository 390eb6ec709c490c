"""The agent's spans (SPEC §12), after the OpenTelemetry GenAI conventions: ``invoke_agent <agent>`` for the run,
``chat <model>`` per model call, ``execute_tool <name>`` per tool call, children of the span the control plane
started the agent's pod in (``TRACEPARENT``).

The loop drives the model layer itself (agentrunner/loop.py), not pydantic-ai's ``Agent``, and replays model turns
from its journal after a restart; pydantic-ai's ``InstrumentedModel`` would see neither replays nor our tool calls,
and would import the SDK in every run. So the spans are made here, with the ``gen_ai.*`` attributes: provider,
request and response model, token counts (input including cached ones, and ``gen_ai.usage.cache_read.input_tokens``).
Prompts, outputs, tool arguments and results stay off spans unless the Agent's ``observability.captureContent``
asks (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).

Tracing is on when the pod has an OTLP endpoint (its Agent's observability); otherwise ``NoSpans`` does nothing
and nothing of OpenTelemetry is imported (the agent's cold start: bench/agent.py). Export goes through
agentrunner/otel.py: a collector that is down never slows the run nor its exit, and what was not delivered is
counted (the result's ``metrics.spansDropped``, and the log).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentrunner import otel

if TYPE_CHECKING:
    from agentrunner.config import Config
    from agentrunner.providers.base import ModelTurn, ToolCall, ToolResult

log = logging.getLogger("agentrunner.tracing")

TRACER = "agentrunner"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SECRET_HEADERS_ENV = "AGENT_OTLP_SECRET_HEADERS"  # the Agent's headersSecretRef, by secretKeyRef
# How long the agent waits at its end for its last spans (nothing when the collector is known to be down).
CLOSE_BUDGET_SECONDS = 2.0
# The agent's spans are few and its life short: export a batch soon rather than every 5 s.
SCHEDULE_DELAY_MILLIS = 500
CONTENT_MAX_CHARS = 8192
# gen_ai.provider.name's well-known values, by our provider names; others keep theirs.
PROVIDER_NAMES = {"bedrock": "aws.bedrock", "azure-openai": "azure.ai.openai", "google": "gcp.gen_ai",
                  "x-ai": "x_ai", "mistral": "mistral_ai"}


class NoSpans:
    """Tracing off: every span is a no-op."""

    enabled = False
    capture = False

    @contextmanager
    def run(self, config: Config) -> Iterator[Any]:
        yield None

    @contextmanager
    def chat(self, provider: str, model: str) -> Iterator[Any]:
        yield None

    def chat_done(self, span: Any, turn: ModelTurn) -> None:
        return None

    @contextmanager
    def tool(self, call: ToolCall) -> Iterator[Any]:
        yield None

    def tool_done(self, span: Any, result: ToolResult) -> None:
        return None

    def run_done(self, span: Any, result: Any) -> None:
        return None

    def close(self) -> dict[str, int]:
        return {}


def provider_name(provider: str) -> str:
    return PROVIDER_NAMES.get(provider, provider or "unknown")


class Spans(NoSpans):
    """Tracing on: an SDK tracer provider of the agent's own, exporting through agentrunner/otel.py."""

    enabled = True

    def __init__(self, env: Mapping[str, str]) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers = {**otel.parse_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""),
                   **otel.parse_headers(env.get(SECRET_HEADERS_ENV) or "")}
        self.export = otel.start(env, headers=headers or None, schedule_delay_millis=SCHEDULE_DELAY_MILLIS)
        attrs: dict[str, Any] = dict(otel.parse_headers(env.get("OTEL_RESOURCE_ATTRIBUTES") or ""))
        attrs["service.name"] = (env.get("OTEL_SERVICE_NAME") or "").strip() or "agentrun-agent"
        sampler: Sampler = ALWAYS_ON
        if (env.get("OTEL_TRACES_SAMPLER") or "").strip() == "traceidratio":
            try:
                sampler = TraceIdRatioBased(min(max(float(env.get("OTEL_TRACES_SAMPLER_ARG") or "1"), 0.0), 1.0))
            except ValueError:
                log.warning("OTEL_TRACES_SAMPLER_ARG is not a number: every trace is sampled")
        # The agent's own provider, not the global one: nothing else in the process records into it.
        self.provider = TracerProvider(sampler=sampler, resource=Resource.create(attrs), shutdown_on_exit=False)
        self.provider.add_span_processor(self.export.processor)  # type: ignore[arg-type]
        self.tracer = self.provider.get_tracer(TRACER)
        self.parent = TraceContextTextMapPropagator().extract({"traceparent": env.get("TRACEPARENT") or ""})
        self.capture = (env.get(CAPTURE_ENV) or "").strip().lower() in otel.TRUE
        log.info("spans: exported to %s (%s)%s", self.export.endpoint, self.export.protocol,
                 ", with prompts and outputs" if self.capture else "")

    @contextmanager
    def run(self, config: Config) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind

        agent = config.instance_name or config.agent_id or "agent"
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider_name(config.provider), "gen_ai.request.model": config.model,
            "gen_ai.conversation.id": config.session_key, "agentrun.run": config.run_id,
            "k8s.namespace.name": config.namespace}
        if self.capture:
            attrs["gen_ai.input.messages"] = _content([{"role": "user", "parts": [
                {"type": "text", "content": config.task}]}])
            if config.system_prompt:
                attrs["gen_ai.system_instructions"] = _content([{"type": "text", "content": config.system_prompt}])
        with self.tracer.start_as_current_span(f"invoke_agent {agent}", context=self.parent, kind=SpanKind.INTERNAL,
                                               attributes={k: v for k, v in attrs.items() if v}) as span:
            yield span

    def run_done(self, span: Any, result: Any) -> None:
        from opentelemetry.trace import Status, StatusCode

        m = result.metrics
        span.set_attributes({"gen_ai.usage.input_tokens": m.input_tokens, "gen_ai.usage.output_tokens": m.output_tokens,
                             "gen_ai.usage.cache_read.input_tokens": m.cached_input_tokens,
                             "agentrun.tool_calls": m.tool_calls, "agentrun.status": result.status})
        if result.status == "error":
            span.set_status(Status(StatusCode.ERROR, result.error[:500]))
        elif self.capture and result.response:
            span.set_attribute("gen_ai.output.messages", _content([{"role": "assistant", "parts": [
                {"type": "text", "content": result.response}]}]))

    @contextmanager
    def chat(self, provider: str, model: str) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind

        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(provider),
                 "gen_ai.request.model": model}
        with self.tracer.start_as_current_span(f"chat {model}".strip(), kind=SpanKind.CLIENT,
                                               attributes={k: v for k, v in attrs.items() if v}) as span:
            yield span

    def chat_done(self, span: Any, turn: ModelTurn) -> None:
        u = turn.usage
        span.set_attributes({"gen_ai.usage.input_tokens": u.input_tokens, "gen_ai.usage.output_tokens": u.output_tokens,
                             "gen_ai.usage.cache_read.input_tokens": u.cached_input_tokens,
                             "gen_ai.response.finish_reasons": ["tool_calls" if turn.calls else "stop"]})
        if turn.model:
            span.set_attribute("gen_ai.response.model", turn.model)
        if self.capture:
            parts: list[dict[str, Any]] = [{"type": "text", "content": turn.text}] if turn.text else []
            parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls]
            span.set_attribute("gen_ai.output.messages", _content([{"role": "assistant", "parts": parts}]))

    @contextmanager
    def tool(self, call: ToolCall) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind

        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                 "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"}
        if self.capture:
            attrs["gen_ai.tool.call.arguments"] = call.arguments[:CONTENT_MAX_CHARS]
        with self.tracer.start_as_current_span(f"execute_tool {call.name}", kind=SpanKind.INTERNAL,
                                               attributes=attrs) as span:
            yield span

    def tool_done(self, span: Any, result: ToolResult) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("agentrun.tool.status", result.status)
        if result.status != "ok":
            span.set_status(Status(StatusCode.ERROR, result.status))
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", result.content[:CONTENT_MAX_CHARS])

    def close(self) -> dict[str, int]:
        """End the export within CLOSE_BUDGET_SECONDS; the spans exported and dropped."""
        counts = self.export.close(CLOSE_BUDGET_SECONDS)
        if counts.dropped:
            log.warning("spans: %d exported, %d dropped (%s)", counts.exported, counts.dropped,
                        self.export.reach.why or "not delivered")
        else:
            log.info("spans: %d exported", counts.exported)
        return {"spansExported": counts.exported, "spansDropped": counts.dropped}


def _content(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:CONTENT_MAX_CHARS]


def start(env: Mapping[str, str]) -> NoSpans:
    """Spans when the pod has an OTLP endpoint, else none; a configuration the exporter cannot use is logged and
    the run goes on untraced (a trace is never worth a failed run)."""
    if not otel.wanted(env):
        return NoSpans()
    try:
        return Spans(env)
    except (otel.ExportConfigError, ImportError) as e:
        log.warning("spans are not exported: %s", e)
        return NoSpans()
