"""The list-then-watch loop of client-go's reflector, shared by the worker's view of Jobs, pods and definitions
(kube/informer.py), the bridge's watches (bridge/watch.py) and the API's view of runs (api/runwatch.py).

One thread per stream: list (the stream replaces what it held of its scope), watch from the list's
resourceVersion, go on from the last event's (or bookmark's) version when a watch ends (a watch is renewed every
`watch_seconds` even when nothing happens), and list again after 410 Gone or any failure, with backoff. The watch
is read as JSON (`watch_events` below) and objects stay plain dicts; where they go is the subclass's
(`replace` after a list, `apply` for each event), called on the stream's thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client.rest import ApiException

from .errors import Gone, KubeError, NotFound, kube_error, typed_errors

WATCH_SECONDS = 300  # by default a watch is renewed this often (from where it was) even when nothing happens

Obj = dict[str, Any]


def watch_events(list_fn: Callable[..., Any], *, action: str, opened: Callable[[Any], None] | None = None,
                 **args: Any) -> Iterator[dict[str, Any]]:
    """One watch, read as JSON: each event (`type`, `object` as a plain dict; BOOKMARKs included) until the
    server ends it. An ERROR event raises its typed error (410 Gone: list again). Call `list_fn` as for a
    list (`timeout_seconds`, `resource_version`, selectors); the response is released at the end.
    `opened` is handed the streaming response (whose `shutdown()` ends a read that waits for an event)."""
    from kubernetes.watch.watch import iter_resp_lines

    with typed_errors(action):
        resp = list_fn(watch=True, _preload_content=False, **args)
        if opened is not None:
            opened(resp)
        try:
            for line in iter_resp_lines(resp):
                if not line.strip():
                    continue
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    status = ev.get("object") or {}
                    raise kube_error(ApiException(status=int(status.get("code") or 0),
                                                  reason=str(status.get("message") or "")), action=action)
                yield ev
        finally:
            resp.release_conn()


def without_managed_fields(obj: Obj) -> Obj:
    """The object as a view keeps it: managedFields (server-side apply's bookkeeping, often the largest part of an
    object) serve none of the readers and would multiply a view's memory."""
    m = obj.get("metadata") or {}
    return {**obj, "metadata": {k: v for k, v in m.items() if k != "managedFields"}}


class ListWatch:
    """One kind in one scope (`args`: the namespace, selectors), kept current by one daemon thread."""

    def __init__(self, list_fn: Callable[..., Any], *, name: str, args: dict[str, Any], stopping: threading.Event,
                 log: logging.Logger, watch_seconds: int = WATCH_SECONDS) -> None:
        self.list_fn, self.args, self.stopping, self.log = list_fn, args, stopping, log
        self.watch_seconds = watch_seconds
        self.synced = threading.Event()  # listed once: from now on, what the stream lacks is new or gone
        self.resp: Any = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def replace(self, items: list[Obj]) -> None:
        """Everything the list returned for this scope: whatever else the stream held of it is gone."""
        raise NotImplementedError

    def apply(self, typ: str, obj: Obj) -> None:
        """One ADDED, MODIFIED or DELETED event."""
        raise NotImplementedError

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        """Unblock a read waiting for the next event (set `stopping` first); the thread is a daemon."""
        resp = self.resp
        if resp is not None:
            with contextlib.suppress(Exception):  # best effort: the connection may be gone already
                resp.shutdown()

    def _list(self) -> str:
        with typed_errors(f"list ({self.thread.name})"):
            resp = self.list_fn(_preload_content=False, **self.args)
            try:
                listed = json.loads(resp.data)
            finally:
                resp.release_conn()
        self.replace(list(listed.get("items") or []))
        self.synced.set()
        return str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _watch(self, rv: str) -> str:
        """One watch from `rv` until it ends; the version to go on from."""
        try:
            for ev in watch_events(self.list_fn, action=f"watch ({self.thread.name})", opened=self._opened,
                                   resource_version=rv, timeout_seconds=self.watch_seconds,
                                   allow_watch_bookmarks=True, **self.args):
                if self.stopping.is_set():
                    break
                typ, obj = ev.get("type"), ev.get("object") or {}
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if typ in ("ADDED", "MODIFIED", "DELETED"):
                    self.apply(str(typ), obj)
        finally:
            self.resp = None
        return rv

    def _opened(self, resp: Any) -> None:
        self.resp = resp

    def _run(self) -> None:
        backoff = 0.5
        stop = self.stopping
        while not stop.is_set():
            try:
                rv = self._list()
                backoff = 0.5
                while not stop.is_set():  # each watch ends after watch_seconds; the next goes on from there
                    rv = self._watch(rv)
            except Gone:
                self.log.info("%s: resourceVersion expired, listing again", self.thread.name)
            except KubeError as e:
                if stop.is_set():
                    break
                # A kind the cluster does not serve (its CRD not installed): look again now and then.
                slow = isinstance(e, NotFound)
                self.log.log(logging.INFO if slow else logging.WARNING, "%s: %s; listing again in %.1fs",
                             self.thread.name, e, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 60 if slow else 10)
            except Exception as e:  # a decoding error, a bug: never die, never serve a stale view silently
                if stop.is_set():
                    break
                self.log.exception("%s failed (%s); listing again", self.thread.name, e)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)
