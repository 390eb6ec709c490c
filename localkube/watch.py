"""Watches: a chunked stream of ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events, as kube-apiserver serves them
(k8s.io/apiserver/pkg/endpoints/handlers/watch.go and the cacher's initial events).

Why a module of its own: a watch is the one long-lived request, with its own rules (resume from a resourceVersion,
410 Expired outside the retained window, `sendInitialEvents` with its closing bookmark, selector transitions seen
as ADDED/DELETED, periodic bookmarks, events batched per write); `server.py` routes to `serve` with the request's
selectors already parsed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from . import tables
from .apiserver import APIServer
from .errors import StatusError, bad_request
from .registry import ResourceType
from .store import ADDED, DELETED, Event, Expired, Obj, object_rv

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _drain(queue: asyncio.Queue[Event | None]) -> tuple[list[Event], bool]:
    """What a watch's queue holds now, taken without waiting; True when the watch was closed (None queued)."""
    out: list[Event] = []
    while True:
        try:
            ev = queue.get_nowait()
        except asyncio.QueueEmpty:
            return out, False
        if ev is None:
            return out, True
        out.append(ev)


def _line(obj: Obj) -> bytes:
    """One line of a watch stream."""
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


async def watch_disconnect(receive: Receive, disconnected: asyncio.Event) -> None:
    """Set `disconnected` when the client goes away during a streamed response."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            disconnected.set()
            return


async def serve(send: Send, receive: Receive, *, api: APIServer, rt: ResourceType, ns: str | None,
                match: Callable[[Obj], bool], query: dict[str, str], table: bool, bookmark_interval: float,
                stopping: asyncio.Event) -> None:
    """One watch request, answered as a chunked stream of events until its timeout, the client's going away or
    `stopping`. `match`: the request's label and field selectors (and name, for the deprecated watch path)."""
    rv_s = query.get("resourceVersion", "")
    try:
        timeout = float(query.get("timeoutSeconds") or 1800)
    except ValueError as e:
        raise bad_request("invalid timeoutSeconds") from e
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    send_initial = query.get("sendInitialEvents") == "true"
    include = query.get("includeObject", "Metadata")
    store = api.store
    initial: list[Event] = []
    if rv_s in ("", "0") or send_initial:
        since = store.rv
        watcher, backlog = store.open_watch(rt.key, ns, since)
        initial = [Event(object_rv(o), ADDED, rt.key, o) for o in store.select(rt.key, ns)]
    else:
        try:
            since = int(rv_s)
        except ValueError as e:
            raise bad_request(f"invalid resource version: {rv_s!r}") from e
        try:
            watcher, backlog = store.open_watch(rt.key, ns, since)
        except Expired as e:
            await _stream_start(send)
            status = StatusError(410, f"too old resource version: {e.requested} ({e.oldest})", reason="Expired")
            await _stream_send(send, {"type": "ERROR", "object": status.status()})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
    disconnected = asyncio.Event()
    watcher_task = asyncio.create_task(watch_disconnect(receive, disconnected))
    try:
        await _stream_start(send)
        for ev in initial:
            if match(ev.obj):
                await _stream_send(send, _event_body(api, rt, ev.type, ev.obj, table, include))
        if send_initial and bookmarks:
            await _stream_send(send, _bookmark(rt, str(since), initial_end=True))
        for ev in backlog:
            await _deliver(send, api, rt, ev, match, table, include)
        deadline = time.monotonic() + timeout
        while not disconnected.is_set() and not stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            wait = min(remaining, bookmark_interval) if bookmarks else remaining
            try:
                item = await asyncio.wait_for(watcher.queue.get(), timeout=min(wait, 1.0))
            except TimeoutError:
                if bookmarks and time.monotonic() - getattr(watcher, "_last", 0) >= bookmark_interval:
                    watcher._last = time.monotonic()  # type: ignore[attr-defined]
                    await _stream_send(send, _bookmark(rt, str(store.rv)))
                continue
            if item is None:
                break
            # Everything else already queued goes out with it, in one write: one event per turn of
            # the event loop cannot keep up with a busy kind (pods) when the loop is loaded.
            more, closed = _drain(watcher.queue)
            lines = [line for ev in [item, *more] if (line := _render(api, rt, ev, match, table, include))]
            if lines:
                await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
            if closed:
                break
        if bookmarks and not disconnected.is_set():
            # Events still queued for this watch are sent before the closing bookmark: a client
            # resuming from the bookmark's resourceVersion must not skip them. The queue is drained
            # and store.rv read with no await in between, so every event up to that rv is in `lines`.
            queued, _ = _drain(watcher.queue)
            lines = [line for ev in queued if (line := _render(api, rt, ev, match, table, include))]
            lines.append(_line(_bookmark(rt, str(store.rv))))
            await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass
    finally:
        store.close_watch(watcher)
        watcher_task.cancel()

async def _deliver(send: Send, api: APIServer, rt: ResourceType, ev: Event, match: Callable[[Obj], bool],
                   table: bool, include: str) -> None:
    line = _render(api, rt, ev, match, table, include)
    if line is not None:
        await send({"type": "http.response.body", "body": line, "more_body": True})

def _render(api: APIServer, rt: ResourceType, ev: Event, match: Callable[[Obj], bool], table: bool,
            include: str) -> bytes | None:
    """The watch event line this watch sees for `ev` (None: not one of its objects before or after)."""
    now_match = match(ev.obj)
    was_match = ev.old is not None and match(ev.old)
    if ev.type == DELETED:
        typ = DELETED if now_match or was_match else ""
    elif ev.type == ADDED or ev.old is None:
        typ = ADDED if now_match else ""
    elif now_match and was_match:
        typ = "MODIFIED"
    elif now_match:
        typ = ADDED
    elif was_match:
        typ = DELETED
    else:
        typ = ""
    if not typ:
        return None
    return _line(_event_body(api, rt, typ, ev.obj, table, include))

def _event_body(api: APIServer, rt: ResourceType, typ: str, obj: Obj, table: bool, include: str) -> Obj:
    o = api.present(rt, obj)
    if table:
        return {"type": typ, "object": tables.to_table(rt, [o], include=include,
                                                       resource_version=o["metadata"]["resourceVersion"])}
    return {"type": typ, "object": o}

def _bookmark(rt: ResourceType, rv: str, initial_end: bool = False) -> Obj:
    md: Obj = {"resourceVersion": rv}
    if initial_end:
        md["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": md}}

async def _stream_start(send: Send, ctype: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", ctype), (b"transfer-encoding", b"chunked"),
                            (b"cache-control", b"no-cache, private")]})

async def _stream_send(send: Send, obj: Obj) -> None:
    await send({"type": "http.response.body", "body": _line(obj), "more_body": True})
