"""One long-lived Kubernetes watch per kind, delivered into asyncio.

The watch is read as JSON (`models.kube.watch_events`, shared with the worker's informer) on a
thread that hands events, as plain dicts, to the event loop. It starts with a full list (initial ADDED events), which is how
the bridge reconciles everything it missed while down; it resumes from the last
resourceVersion, and starts over from a fresh list after 410 Gone or any error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from models.kube import Gone, KubeError, watch_events

log = logging.getLogger("agentrun.bridge.watch")

Event = tuple[str, dict[str, Any]]


class KindWatcher:
    def __init__(self, list_fn: Callable[..., Any], *, name: str, **kwargs: Any) -> None:
        self.list_fn = list_fn
        self.name = name
        self.kwargs = kwargs
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _emit(self, event: Event) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.queue.put_nowait, event)

    def _run(self) -> None:
        rv = ""
        backoff = 0.5
        while not self._stop.is_set():
            try:
                kwargs = dict(self.kwargs, timeout_seconds=30, allow_watch_bookmarks=True)
                if rv:
                    kwargs["resource_version"] = rv
                for ev in watch_events(self.list_fn, action=f"watch {self.name}", **kwargs):
                    if self._stop.is_set():
                        break
                    typ, obj = ev.get("type"), ev.get("object") or {}
                    new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if new_rv:
                        rv = str(new_rv)
                    if typ in ("ADDED", "MODIFIED", "DELETED"):
                        self._emit((typ, obj))
                backoff = 0.5
            except Gone:
                log.info("watch %s: resourceVersion expired, relisting", self.name)
                rv = ""
                continue
            except KubeError as e:
                log.warning("%s; retrying", e)
                rv = ""
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10)
            except Exception as e:  # connection resets, decoding errors: start over, never die
                log.warning("watch %s failed: %s; retrying", self.name, e)
                rv = ""
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10)
