"""Spans of a run's workflow (SPEC §12): the run, each of its steps, the agent and its hooks, the waits.

A workflow's code may open spans because the worker's tracer provider is Temporal's replay-safe one
(models/telemetry.py): IDs come from the workflow's deterministic randomness, start times from workflow time
while it replays, and a span already exported is not exported again by a replay. Opening a span emits no command,
and what it changes in a step's input (a pod's `TRACEPARENT`) is a payload, not a command: recorded histories
replay unchanged (tests/workflows/test_replay.py replays them with the interceptor). Temporal's OpenTelemetry
interceptor puts the current span on the headers of every activity, so each step runs in its span's trace.

Without a replay-safe provider (a test's worker with none), spans are OpenTelemetry's no-ops and every
traceparent here is "" : the run is simply not traced.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from models import tracecontext

TRACER = "agentrun.workflow"
Attributes = Mapping[str, str | int | bool]


def _tracer() -> otel_trace.Tracer:
    return otel_trace.get_tracer(TRACER)


def traceparent_of(span: Span) -> str:
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return ""
    return tracecontext.format_traceparent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags))


def current_traceparent() -> str:
    """The traceparent of the span the workflow is in ("" when none)."""
    return traceparent_of(otel_trace.get_current_span())


@contextmanager
def run_span(name: str, *, traceparent: str, attributes: Attributes | None = None) -> Iterator[Span]:
    """The run's span, the parent of all the others: a child of the span that started the workflow (the
    interceptor's context, from the bridge), else of `traceparent` (the run's trace as its input carries it: a
    schedule's tick, or a start without headers)."""
    context = None
    if not otel_trace.get_current_span().get_span_context().is_valid and tracecontext.valid(traceparent):
        context = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    with _tracer().start_as_current_span(name, context=context, kind=SpanKind.SERVER,
                                         attributes=dict(attributes or {})) as span:
        yield span


@contextmanager
def span(name: str, attributes: Attributes | None = None) -> Iterator[Span]:
    """A span of the run (a step, a Job's life, a wait) under the current one. A failure that leaves it marks it
    an error; cancellation (the run deleted) does not."""
    with _tracer().start_as_current_span(name, attributes=dict(attributes or {}), record_exception=False,
                                         set_status_on_exception=False) as s:
        try:
            yield s
        except Exception as e:
            s.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"))
            raise
