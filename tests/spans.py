"""The spans a test's own process ends, as OpenTelemetry's SDK hands them to a processor.

The test process sets up its telemetry once (tests/conftest.py) with this collector, which keeps spans only while
a test asks for them (the `spans` fixture), so a test reads exactly the spans its own code ended.
"""

from __future__ import annotations

import threading
from typing import Any


class SpanCollector:
    def __init__(self) -> None:
        self.active = False
        self.spans: list[Any] = []
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        if self.active:
            with self._lock:
                self.spans.append(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def take(self) -> list[Any]:
        with self._lock:
            out, self.spans = self.spans, []
        return out


COLLECTOR = SpanCollector()
