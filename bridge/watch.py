"""One long-lived Kubernetes list + watch per kind, delivered into asyncio.

The loop is the reflector of `kube/listwatch.py`, shared with the worker's informer and the API's run watch: a
list, then watches from its resourceVersion, resumed from the last event or bookmark, and a fresh list after 410
Gone or any error. The bridge keeps no view of its own: each listed object is handed on as ADDED (which is how it
reconciles everything it missed while down or while the watch was broken), and each event as it comes, as plain
dicts, from the stream's thread to the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from kube.listwatch import ListWatch, Obj

log = logging.getLogger("agentrun.bridge.watch")

Event = tuple[str, dict[str, Any]]


class KindWatcher(ListWatch):
    def __init__(self, list_fn: Callable[..., Any], *, name: str, **kwargs: Any) -> None:
        super().__init__(list_fn, name=f"watch-{name}", args=kwargs, stopping=threading.Event(), log=log)
        self.name = name
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        super().start()

    def stop(self) -> None:
        self.stopping.set()
        self.close()

    def replace(self, items: list[Obj]) -> None:
        for obj in items:
            self._emit(("ADDED", obj))

    def apply(self, typ: str, obj: Obj) -> None:
        self._emit((typ, obj))

    def _emit(self, event: Event) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.queue.put_nowait, event)
