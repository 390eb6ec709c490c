"""The control plane's traces (SPEC §12): one tracer provider per process, set up the same way in the worker, the
bridge and the API from the standard ``OTEL_*`` variables.

A run's trace is always there, exported or not: the API and the bridge start it, the workflow carries it (its
spans, and Temporal's OpenTelemetry interceptor on the headers of what it schedules), each pod gets it as
``TRACEPARENT``, and ``status.traceID`` names it. So the tracer provider exists in every process even without a
collector, with a sampler that records nothing (the spans' IDs are still made, and still handed on); with an OTLP
endpoint, spans are recorded as the ``OTEL_TRACES_SAMPLER`` says and exported off the hot path
(agentrunner/otel.py: a bounded queue, short timeouts, dropped spans counted).

The provider is Temporal's replay-safe one (`temporalio.contrib.opentelemetry.create_tracer_provider`): inside a
workflow, span and trace IDs come from the workflow's deterministic randomness and a span is not exported again
when its workflow is replayed, so a run's workflow spans are the same spans however often it is woken on another
worker. The interceptor (`OpenTelemetryInterceptor`) refuses to run a workflow without it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner import otel

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

log = logging.getLogger("agentrun.telemetry")

# How long a process waits for its last spans to reach the collector when it stops (a collector known to be down
# gets none: agentrunner/otel.py).
SHUTDOWN_BUDGET_SECONDS = 2.0
METRIC_DROPPED = "agentrun_otel_spans_dropped_total"
METRIC_EXPORTED = "agentrun_otel_spans_exported_total"


@dataclass
class Telemetry:
    component: str
    provider: Any  # temporalio.contrib.opentelemetry.ReplaySafeTracerProvider
    export: otel.Export | None  # None: no collector, nothing recorded

    @property
    def exporting(self) -> bool:
        return self.export is not None

    @property
    def dropped(self) -> int:
        return self.export.counts.dropped if self.export is not None else 0

    @property
    def exported(self) -> int:
        return self.export.counts.exported if self.export is not None else 0

    def tracer(self, name: str) -> Tracer:
        return self.provider.get_tracer(name)

    def counters(self) -> dict[str, float]:
        """The Prometheus counters of this process's spans (agentrun_otel_spans_*_total)."""
        return {METRIC_EXPORTED: float(self.exported), METRIC_DROPPED: float(self.dropped)}

    def shutdown(self, budget: float = SHUTDOWN_BUDGET_SECONDS) -> None:
        if self.export is not None:
            counts = self.export.close(budget)
            log.info("spans: %d exported, %d dropped", counts.exported, counts.dropped)


_lock = threading.Lock()
_current: Telemetry | None = None


def setup(component: str, env: Mapping[str, str] | None = None, *, processor: Any = None) -> Telemetry:
    """This process's telemetry, made at the first call (OpenTelemetry's global tracer provider can be set once per
    process; later calls, from any component, return the first one). Raises otel.ExportConfigError for an OTEL_*
    variable the exporter cannot use. `processor`: a span processor of the caller's too, every span recorded (tests
    read the spans so)."""
    global _current
    with _lock:
        if _current is not None:
            return _current
        environ = os.environ if env is None else env
        import opentelemetry.trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
        from temporalio.contrib.opentelemetry import create_tracer_provider

        export = otel.start(environ) if otel.wanted(environ) else None
        service = (environ.get("OTEL_SERVICE_NAME") or "").strip() or f"agentrun-{component}"
        resource = Resource.create({"service.name": service, "service.namespace": "agentrun",
                                    "agentrun.component": component})
        # Exit handling is ours (shutdown, bounded): the SDK's own would wait up to 30 s for a collector that is down.
        recording = export is not None or processor is not None
        provider = create_tracer_provider(sampler=None if recording else ALWAYS_OFF, resource=resource,
                                          shutdown_on_exit=False)
        if processor is not None:
            provider.add_span_processor(processor)
        if export is not None:
            provider.add_span_processor(export.processor)  # type: ignore[arg-type]
            log.info("%s exports spans to %s (%s)", component, export.endpoint, export.protocol)
        opentelemetry.trace.set_tracer_provider(provider)
        _current = Telemetry(component, provider, export)
        return _current


def current() -> Telemetry | None:
    return _current
