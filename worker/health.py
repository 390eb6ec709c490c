"""Probes and metrics for the worker and the bridge: GET /healthz, /readyz, /metrics.

The kubelet restarts a process whose /healthz stops answering and routes nothing to one whose
/readyz fails; Prometheus scrapes /metrics. Neither process serves HTTP otherwise, so this is a
few lines of asyncio rather than a web framework. The bridge uses it too (hence its place here,
next to the first of its two users).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from models.settings import HealthSettings

log = logging.getLogger("agentrun.health")


class Health:
    """What the probes report: `ready` is set by the process once it does its job; gauges are read at scrape."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.ready = False
        self.gauges: dict[str, Callable[[], float]] = {}
        # Counters read at scrape, each a dict of `<name>_total` -> value (the spans exported and dropped).
        self.counters: list[Callable[[], dict[str, float]]] = []

    def metrics(self) -> str:
        lines = [f"# TYPE agentrun_{self.component}_ready gauge",
                 f"agentrun_{self.component}_ready {1 if self.ready else 0}"]
        for name, read in sorted(self.gauges.items()):
            lines += [f"# TYPE {name} gauge", f"{name} {read():g}"]
        for read_counters in self.counters:
            for name, value in sorted(read_counters().items()):
                lines += [f"# TYPE {name.removesuffix('_total')} counter", f"{name} {value:g}"]
        return "\n".join(lines) + "\n"

    def answer(self, path: str) -> tuple[int, str, str]:
        if path == "/healthz":
            return 200, "text/plain", "ok\n"
        if path == "/readyz":
            return (200, "text/plain", "ready\n") if self.ready else (503, "text/plain", "not ready\n")
        if path == "/metrics":
            return 200, "text/plain; version=0.0.4", self.metrics()
        return 404, "text/plain", "not found\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            parts = request.decode("latin-1").split()
            # Headers are read and ignored; a probe sends a handful.
            while (await asyncio.wait_for(reader.readline(), timeout=5)) not in (b"\r\n", b"\n", b""):
                pass
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                code, kind, body = 405, "text/plain", "method not allowed\n"
            else:
                code, kind, body = self.answer(parts[1].split("?", 1)[0])
            data = body.encode()
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[code]
            head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
                    "Connection: close\r\n\r\n").encode()
            writer.write(head + (data if parts and parts[0] != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    async def serve(self, settings: HealthSettings) -> asyncio.Server | None:
        if not settings.port:
            return None
        server = await asyncio.start_server(self._handle, settings.host, settings.port)
        log.info("%s health on http://%s:%d (/healthz /readyz /metrics)", self.component, settings.host, settings.port)
        return server
