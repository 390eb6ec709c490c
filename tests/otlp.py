"""A small OTLP/HTTP trace receiver for tests: `POST /v1/traces` on 127.0.0.1, each body decoded with
opentelemetry-proto's own ExportTraceServiceRequest, as a collector would (protobuf; gzip if so encoded)."""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    kind: int


@dataclass
class Receiver:
    url: str
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> None:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        got = []
        for rs in req.resource_spans:
            res = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(Span(str(res.get("service.name", "")), s.name, s.trace_id.hex(), s.span_id.hex(),
                                    s.parent_span_id.hex(), {a.key: _value(a.value) for a in s.attributes}, s.kind))
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def snapshot(self) -> list[Span]:
        with self._lock:
            return list(self.spans)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            receiver.add(body)
            out = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> str:
    """An http:// endpoint on 127.0.0.1 where nothing listens (a collector that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
