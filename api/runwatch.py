"""The API's one view of the AgentRuns: one list + watch (per served namespace, or of all), however many browsers
follow the runs.

The console's live pages and the metrics read the runs from here, and whoever wants to hear of changes subscribes,
so a hundred open pages cost the cluster one watch, not a hundred (nor a poll each). The loop is client-go's
reflector (kube/listwatch.py): list, watch from the list's resourceVersion, go on from the last event or bookmark,
list again after 410 Gone or a failure. Its threads hand what they read to the event loop, which alone changes the
store and tells the subscribers, so readers on the loop need no lock and see each change with its event.

A list after a resumed or failed watch is told to subscribers as the differences it makes (ADDED, MODIFIED, DELETED,
as client-go's Replace does), so a subscriber sees every change even across a relist. Each subscriber has a bounded
queue: one that falls behind loses its queue and gets one RESYNC event instead, after which it reads `list()` again
(what it missed is all in there); nobody is silently short of an event, and a slow browser never holds the others up.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from kube import Kube
from kube.listwatch import WATCH_SECONDS, ListWatch, without_managed_fields
from kube.resources import sympozium
from models.names import AGENTRUNS

log = logging.getLogger("agentrun.api.runwatch")

Obj = dict[str, Any]
Objs = list[Obj]  # (RunWatch.list shadows the builtin in the class's annotations)
EventType = Literal["ADDED", "MODIFIED", "DELETED", "RESYNC"]
QUEUE_SIZE = 1000  # events a subscriber may be behind before it is told to read the whole list again


@dataclass(frozen=True)
class RunEvent:
    """A change of one run (`obj` as it is now, or as it was last for DELETED), or RESYNC (`obj` empty): this
    subscriber missed events and should read `RunWatch.list()` again. `obj` is shared: read it, do not change it."""

    type: EventType
    obj: Obj = field(default_factory=dict)


_END = None  # what ends a subscriber's iteration (the watch stopped)


class Subscription:
    """`with watch.subscribe() as sub: async for ev in sub: ...` (take `watch.list()` inside the `with` first for
    the state the events change: no event is lost between the two, both happen on the event loop)."""

    def __init__(self, watch: RunWatch, size: int) -> None:
        self._watch = watch
        self._queue: asyncio.Queue[RunEvent | None] = asyncio.Queue(size)
        self.resyncs = 0  # how often this subscriber fell behind

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self._watch._subscribers.discard(self)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> RunEvent:
        ev = await self._queue.get()
        if ev is _END:
            self._queue.put_nowait(_END)  # iterating again ends again
            raise StopAsyncIteration
        return ev

    def _drain(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()

    def _offer(self, ev: RunEvent) -> None:
        if self._queue.full():
            # The store already holds `ev`'s change, so RESYNC (read the list) covers it and all that was queued.
            self._drain()
            self.resyncs += 1
            ev = RunEvent("RESYNC")
        self._queue.put_nowait(ev)

    def _end(self) -> None:
        self._drain()
        self._queue.put_nowait(_END)


def _key(obj: Obj) -> tuple[str, str]:
    m = obj.get("metadata") or {}
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Stream(ListWatch):
    """The runs of one namespace ("" = all); its thread hands each list and event to the loop."""

    def __init__(self, watch: RunWatch, namespace: str, list_fn: Any) -> None:
        super().__init__(list_fn, name=f"runwatch-{namespace or 'all'}", args={"namespace": namespace} if namespace
                         else {}, stopping=watch._stopping, log=log, watch_seconds=watch.watch_seconds)
        self.watch, self.namespace = watch, namespace

    def _to_loop(self, fn: Any, *args: Any) -> None:
        loop = self.watch._loop
        if loop is None or self.stopping.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed while this thread read: nobody is listening
            loop.call_soon_threadsafe(fn, *args)

    def replace(self, items: list[Obj]) -> None:
        self._to_loop(self.watch._replace, self.namespace, [without_managed_fields(o) for o in items])

    def apply(self, typ: str, obj: Obj) -> None:
        self._to_loop(self.watch._apply, typ, without_managed_fields(obj))


class RunWatch:
    def __init__(self, kube: Kube, namespaces: list[str] | None = None, *, watch_seconds: int = WATCH_SECONDS,
                 queue_size: int = QUEUE_SIZE) -> None:
        self.watch_seconds = watch_seconds
        self.queue_size = queue_size
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runs: dict[tuple[str, str], Obj] = {}
        self._subscribers: set[Subscription] = set()
        self._synced = asyncio.Event()
        self._listed: set[str] = set()  # the streams (by namespace) that have listed once
        self.relists = 0  # lists after the first, per stream: each one a watch that could not go on
        runs = sympozium(kube, AGENTRUNS)
        self._streams = [_Stream(self, ns, runs.list_fn()) for ns in namespaces or []] or [
            _Stream(self, "", runs.list_fn(all_namespaces=True))]

    async def start(self) -> None:
        """Start the streams' threads and return at once; `wait_synced` says when the first lists are in."""
        self._loop = asyncio.get_running_loop()
        for s in self._streams:
            s.start()

    async def stop(self) -> None:
        self._stopping.set()
        for s in self._streams:
            s.close()
        for sub in list(self._subscribers):
            sub._end()
        for s in self._streams:  # a list under way finishes; a watch was unblocked by close()
            if s.thread.is_alive():
                await asyncio.to_thread(s.thread.join, 5)

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 (the interface the console codes against)
        """Every stream has listed once: from now on, a run the view lacks is new or gone."""
        try:
            async with asyncio.timeout(timeout):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def get(self, namespace: str, name: str) -> Obj | None:
        """The run as last seen (a copy); None when the view does not hold it."""
        obj = self._runs.get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, namespace: str | None = None) -> Objs:
        """The runs as last seen (copies), of one namespace or all, by namespace and name."""
        return [copy.deepcopy(o) for k, o in sorted(self._runs.items()) if namespace is None or k[0] == namespace]

    def namespaces(self) -> set[str]:
        """The namespaces the view holds runs of (no copies made)."""
        return {ns for ns, _ in list(self._runs)}

    def peek(self) -> Iterator[Obj]:
        """The runs as held, not copies, for readers on the loop that only look (the metrics' counts)."""
        return iter(list(self._runs.values()))

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self.queue_size)
        if self._stopping.is_set():
            sub._end()
        else:
            self._subscribers.add(sub)
        return sub

    def __len__(self) -> int:
        return len(self._runs)

    # -- changes (on the event loop, handed over by the streams' threads) ----------------------------------------

    def _tell(self, typ: EventType, obj: Obj) -> None:
        ev = RunEvent(typ, obj)
        for sub in list(self._subscribers):
            sub._offer(ev)

    def _replace(self, namespace: str, items: Objs) -> None:
        if namespace in self._listed:
            self.relists += 1
        listed = {_key(o): o for o in items}
        for key in [k for k in self._runs if (not namespace or k[0] == namespace) and k not in listed]:
            self._tell("DELETED", self._runs.pop(key))
        for key, obj in listed.items():
            old = self._runs.get(key)
            self._runs[key] = obj
            if old is None:
                self._tell("ADDED", obj)
            elif _rv(old) != _rv(obj):
                self._tell("MODIFIED", obj)
        self._listed.add(namespace)
        if len(self._listed) == len(self._streams):
            self._synced.set()

    def _apply(self, typ: str, obj: Obj) -> None:
        key = _key(obj)
        if typ == "DELETED":
            self._runs.pop(key, None)
            self._tell("DELETED", obj)
            return
        self._runs[key] = obj
        self._tell("ADDED" if typ == "ADDED" else "MODIFIED", obj)
