"""One long-lived Kubernetes watch per kind, delivered into asyncio.

The `kubernetes` client's watch is a blocking generator, so it runs on a thread and hands
events to the event loop. It starts with a full list (initial ADDED events), which is how
the bridge reconciles everything it missed while down; it resumes from the last
resourceVersion, and starts over from a fresh list after 410 Gone or any error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch

from models.kube import Gone, KubeError, typed_errors

log = logging.getLogger("agentrun.bridge.watch")

Event = tuple[str, dict[str, Any]]


class KindWatcher:
    def __init__(self, api: client.ApiClient, list_fn: Callable[..., Any], *, name: str, **kwargs: Any) -> None:
        self.api = api
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
            w = watch.Watch()
            try:
                kwargs = dict(self.kwargs, timeout_seconds=30, allow_watch_bookmarks=True)
                if rv:
                    kwargs["resource_version"] = rv
                with typed_errors(f"watch {self.name}"):
                    for ev in w.stream(self.list_fn, **kwargs):
                        if self._stop.is_set():
                            w.stop()
                            break
                        typ = ev["type"]
                        obj = ev["object"]
                        if not isinstance(obj, dict):
                            obj = self.api.sanitize_for_serialization(obj)
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
            finally:
                w.stop()
