"""OpenTelemetry export, for the agent and the control plane alike: an OTLP exporter configured by the standard
``OTEL_*`` variables, behind a bounded queue, whose failures are counted and can never hold a run up.

Why it is not the SDK's pipeline as it comes: an unreachable collector must never fail or slow a run (SPEC §12).
The SDK's batch processor already exports off the caller's thread, but its exporters retry a refused connection
with backoff for up to their timeout, and a process that flushes its spans on the way out (the agent, at its end)
waits for that. So here:

- spans go through ``CountingProcessor``, which caps the batch processor's queue itself (the SDK would drop
  silently past ``OTEL_BSP_MAX_QUEUE_SIZE``) and counts what it drops;
- the exporter is wrapped by ``CountingExporter``, which counts what was delivered and what was not, and while the
  collector is known to be down (a failed export, or the reachability probe made at start) drops a batch at once
  instead of retrying, trying again once per ``DOWN_RETRY_SECONDS``;
- ``Export.close(budget)`` ends the pipeline within ``budget`` seconds whatever the collector does: nothing is
  sent to a collector known to be down, and an export still running at the deadline is cut short.

What is not delivered is counted as dropped: the control plane serves the count as a Prometheus counter, the agent
logs it and puts it in its result's metrics. This module imports nothing of OpenTelemetry until ``start`` is
called, so a run without tracing pays nothing for it (the agent's cold start matters: bench/agent.py).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_PROTOCOL = "http/protobuf"
# A collector that failed an export is not asked again for this long: batches meanwhile are dropped (and counted)
# at once, so a down collector costs the exporting thread no retries and the process's last flush no wait.
DOWN_RETRY_SECONDS = 10.0
# How long the reachability probe made at start waits for a TCP connection to the collector.
PROBE_TIMEOUT_SECONDS = 2.0
# Seconds one export may take (OTEL_EXPORTER_OTLP_TIMEOUT overrides): retries of a transient failure included.
DEFAULT_EXPORT_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_QUEUE = 2048
TRUE = ("1", "true", "yes", "on")


class ExportConfigError(ValueError):
    """An OTEL_* variable the exporter cannot work with; the message names it."""


def endpoint_of(env: Mapping[str, str]) -> str:
    return (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()


def wanted(env: Mapping[str, str]) -> bool:
    """Whether spans are exported: an OTLP endpoint is set, and neither the SDK nor the traces exporter is off."""
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() in TRUE:
        return False
    if (env.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower() == "none":
        return False
    return bool(endpoint_of(env))


def protocol_of(env: Mapping[str, str]) -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = (env.get(name) or "").strip()
        if value:
            if value not in PROTOCOLS:
                raise ExportConfigError(f"{name}={value!r}: the protocol is one of {', '.join(PROTOCOLS)}")
            return value
    return DEFAULT_PROTOCOL


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ExportConfigError(f"{name}={text!r} is not a number") from None
    if value <= 0:
        raise ExportConfigError(f"{name}={text!r} must be positive")
    return value


def export_timeout(env: Mapping[str, str]) -> float:
    """Seconds for one export: OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is in milliseconds, as the specification says."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        if (env.get(name) or "").strip():
            return _positive(env, name, 0) / 1000
    return DEFAULT_EXPORT_TIMEOUT_SECONDS


def address_of(endpoint: str, protocol: str) -> tuple[str, int] | None:
    """The collector's host and port, for the reachability probe (None: not told by the endpoint)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 4317 if protocol == "grpc" else 4318
    return parts.hostname, port


@dataclass
class SpanCounts:
    """Spans handed to the exporter and what became of them (thread-safe: the exporting thread writes)."""

    exported: int = 0
    dropped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, *, exported: int = 0, dropped: int = 0) -> None:
        with self._lock:
            self.exported += exported
            self.dropped += dropped


class Reachability:
    """Whether the collector answers, as far as we know: told by exports, and by one TCP probe made at start (in
    the background: a collector behind a black hole costs the probe's timeout on its own thread, nothing else)."""

    def __init__(self) -> None:
        self.down_since: float | None = None  # monotonic time the collector was last found down
        self.why = ""

    def failed(self, why: str) -> None:
        self.down_since, self.why = time.monotonic(), why

    def succeeded(self) -> None:
        self.down_since, self.why = None, ""

    @property
    def down(self) -> bool:
        return self.down_since is not None and time.monotonic() - self.down_since < DOWN_RETRY_SECONDS

    def probe(self, address: tuple[str, int] | None) -> threading.Thread | None:
        if address is None:
            return None

        def connect() -> None:
            try:
                socket.create_connection(address, timeout=PROBE_TIMEOUT_SECONDS).close()
            except OSError as e:
                self.failed(f"{address[0]}:{address[1]}: {e.strerror or e}")

        thread = threading.Thread(target=connect, name="otlp-probe", daemon=True)
        thread.start()
        return thread


class CountingExporter:
    """An exporter's stand-in that counts each batch as exported or dropped, and drops at once while the collector
    is known to be down (one batch per DOWN_RETRY_SECONDS still tries)."""

    def __init__(self, inner: Any, counts: SpanCounts, reach: Reachability) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.inner = inner
        self.counts = counts
        self.reach = reach
        self.closing = False
        self._shut = False
        self._ok, self._failure = SpanExportResult.SUCCESS, SpanExportResult.FAILURE

    def export(self, spans: Sequence[Any]) -> Any:
        if self.closing or self.reach.down:
            self.counts.add(dropped=len(spans))
            return self._failure
        try:
            result = self.inner.export(spans)
        except Exception as e:  # an exporter's bug is a failed export here, never the batch thread's death
            log.warning("exporting %d span(s) failed: %s", len(spans), e)
            result = self._failure
        if result == self._ok:
            self.reach.succeeded()
            self.counts.add(exported=len(spans))
        else:
            self.reach.failed("the last export failed")
            self.counts.add(dropped=len(spans))
        return result

    def shutdown(self) -> None:
        if not self._shut:  # once: close() shuts it before the batch processor's own shutdown does
            self._shut = True
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class CountingProcessor:
    """The batch processor behind a queue bound of our own, so that what does not fit is counted, not lost unseen.
    Spans the sampler dropped never reach a processor: only recorded spans count."""

    def __init__(self, batch: Any, exporter: CountingExporter, limit: int) -> None:
        self.batch = batch
        self.exporter = exporter
        self.limit = limit
        self.handed = 0  # spans handed to the batch processor

    @property
    def queued(self) -> int:
        c = self.exporter.counts
        return self.handed - c.exported - c.dropped

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.batch.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        if self.queued >= self.limit:
            self.exporter.counts.add(dropped=1)
            return
        self.handed += 1
        self.batch.on_end(span)

    def shutdown(self) -> None:
        self.batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.batch.force_flush(timeout_millis))

    def _on_ending(self, span: Any) -> None:
        """The SDK calls this on every processor (its SpanProcessor's own does nothing): neither do we."""


def traces_url(env: Mapping[str, str]) -> str:
    """The URL spans are sent to over OTLP/HTTP: the traces endpoint as given, else the general one with
    `/v1/traces` appended (as the specification says)."""
    own = (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
    if own:
        return own
    return endpoint_of(env).rstrip("/") + "/v1/traces"


def _exporter(env: Mapping[str, str], protocol: str, timeout: float, headers: Mapping[str, str] | None) -> Any:
    """The protocol's exporter, every setting passed from `env` (the agent's may be a mapping of its own, not the
    process's environment, which the SDK's exporters would read)."""
    hdrs = dict(headers) if headers else parse_headers(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                                                       or env.get("OTEL_EXPORTER_OTLP_HEADERS") or "") or None
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        endpoint = endpoint_of(env)
        return GrpcExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"), timeout=timeout, headers=hdrs)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=traces_url(env), timeout=timeout, headers=hdrs)


@dataclass
class Export:
    """A running pipeline: add `processor` to a tracer provider; `close` ends it within a budget."""

    processor: CountingProcessor
    exporter: CountingExporter
    counts: SpanCounts
    reach: Reachability
    endpoint: str
    protocol: str

    def close(self, budget: float) -> SpanCounts:
        """Deliver what is queued within `budget` seconds, then stop: a collector known to be down gets nothing
        (the rest is dropped at once), and an export still running at the deadline is cut short (its spans and
        whatever is left in the queue are dropped). Returns the counts, final."""
        if self.reach.down:
            self.exporter.closing = True
        done = threading.Event()

        def flush() -> None:
            try:
                self.processor.force_flush(int(budget * 1000))
            finally:
                done.set()

        threading.Thread(target=flush, name="otlp-flush", daemon=True).start()
        if not done.wait(budget):
            log.warning("spans not delivered within %.1fs to %s: the rest is dropped", budget, self.endpoint)
        self.exporter.closing = True
        self.exporter.shutdown()  # interrupts an exporter's retry backoff, if it is in one
        stopper = threading.Thread(target=self.processor.shutdown, name="otlp-stop", daemon=True)
        stopper.start()
        stopper.join(0.2)
        left = self.processor.queued
        if left > 0:
            self.counts.add(dropped=left)
        return self.counts


def start(env: Mapping[str, str], *, headers: Mapping[str, str] | None = None, probe: bool = True,
          schedule_delay_millis: float | None = None) -> Export:
    """The pipeline for the exporter the variables describe (``wanted(env)`` must be true). Raises
    ExportConfigError for a variable it cannot use; imports the SDK and the protocol's exporter only now."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint, protocol = endpoint_of(env), protocol_of(env)
    timeout = export_timeout(env)
    limit = int(_positive(env, "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE))
    counts, reach = SpanCounts(), Reachability()
    exporter = CountingExporter(_exporter(env, protocol, timeout, headers), counts, reach)
    # The SDK's own queue is larger than ours, so it never drops a span we did not count.
    kw: dict[str, Any] = {"max_queue_size": limit * 2}
    if schedule_delay_millis is not None and not (env.get("OTEL_BSP_SCHEDULE_DELAY") or "").strip():
        kw["schedule_delay_millis"] = schedule_delay_millis
    batch = BatchSpanProcessor(exporter, **kw)  # type: ignore[arg-type]
    if probe:
        reach.probe(address_of(endpoint, protocol))
    return Export(CountingProcessor(batch, exporter, limit), exporter, counts, reach, endpoint, protocol)


def parse_headers(text: str) -> dict[str, str]:
    """``name=value,name2=value2`` (OTEL_EXPORTER_OTLP_HEADERS' format: values URL-encoded) as a dict; entries
    without ``=`` are skipped."""
    from urllib.parse import unquote

    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            out[unquote(name.strip())] = unquote(value.strip())
    return out
