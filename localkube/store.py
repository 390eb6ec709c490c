"""Object storage for localkube: what etcd plus the watch cache are to kube-apiserver.

It holds every object by (resource type, namespace, name), hands out one global, strictly
increasing resourceVersion, keeps a bounded window of past events so that a watch can resume
from an old resourceVersion (and get 410 Gone when it is too old), and optionally writes
everything through to SQLite so objects and the event window survive a restart.

It knows nothing about API semantics (validation, finalizers, garbage collection): that is
`apiserver.py`. All calls happen on the server's single event loop, so there is no locking.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
# (group, resource) identifies a resource type independently of its version.
TypeKey = tuple[str, str]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class Expired(Exception):
    """The requested resourceVersion is older than the retained event window."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass
class Event:
    rv: int
    type: str
    key: TypeKey
    obj: Obj
    old: Obj | None = None


@dataclass(eq=False)
class Watcher:
    """One open watch; the server drains `queue`. Filtering by selector happens in the server."""

    key: TypeKey
    namespace: str | None
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


def object_rv(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


class Store:
    def __init__(self, *, window: int = 10_000, db_path: Path | None = None) -> None:
        self._objects: dict[TypeKey, dict[tuple[str, str], Obj]] = {}
        # uid -> where the object lives: the garbage collector looks objects up by uid (owners, finalizers).
        self._uids: dict[str, tuple[TypeKey, str, str]] = {}
        self._events: deque[Event] = deque()
        self._window = window
        self._watchers: set[Watcher] = set()
        self._listeners: list[Callable[[Event], None]] = []
        self.rv = 0
        # The oldest resourceVersion a watch may resume from without 410.
        self._horizon = 0
        self._db: sqlite3.Connection | None = None
        if db_path is not None:
            self._open_db(db_path)

    # -- persistence ------------------------------------------------------------------------

    def _open_db(self, path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS objects (grp TEXT, resource TEXT, ns TEXT, name TEXT, body TEXT,"
            " PRIMARY KEY (grp, resource, ns, name))"
        )
        db.execute(
            "CREATE TABLE IF NOT EXISTS events (rv INTEGER PRIMARY KEY, type TEXT, grp TEXT, resource TEXT,"
            " body TEXT, old TEXT)"
        )
        db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._db = db
        row = db.execute("SELECT v FROM meta WHERE k='rv'").fetchone()
        self.rv = int(row[0]) if row else 0
        row = db.execute("SELECT v FROM meta WHERE k='horizon'").fetchone()
        self._horizon = int(row[0]) if row else 0
        for grp, resource, ns, name, body in db.execute("SELECT grp, resource, ns, name, body FROM objects"):
            obj = json.loads(body)
            self._objects.setdefault((grp, resource), {})[(ns, name)] = obj
            self._index((grp, resource), ns, name, obj)
        for rv, typ, grp, resource, body, old in db.execute(
            "SELECT rv, type, grp, resource, body, old FROM events ORDER BY rv"
        ):
            self._events.append(
                Event(rv, typ, (grp, resource), json.loads(body), json.loads(old) if old else None)
            )

    def _persist(self, ev: Event, ns: str, name: str) -> None:
        db = self._db
        if db is None:
            return
        grp, resource = ev.key
        body = json.dumps(ev.obj)
        db.execute("BEGIN")
        if ev.type == DELETED:
            db.execute(
                "DELETE FROM objects WHERE grp=? AND resource=? AND ns=? AND name=?", (grp, resource, ns, name)
            )
        else:
            db.execute(
                "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?)",
                (grp, resource, ns, name, body),
            )
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
            (ev.rv, ev.type, grp, resource, body, json.dumps(ev.old) if ev.old else None),
        )
        db.execute("INSERT OR REPLACE INTO meta VALUES ('rv', ?)", (str(self.rv),))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('horizon', ?)", (str(self._horizon),))
        db.execute("DELETE FROM events WHERE rv <= ?", (self._horizon,))
        db.execute("COMMIT")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        for w in list(self._watchers):
            w.queue.put_nowait(None)

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: TypeKey, namespace: str, name: str) -> Obj | None:
        """The stored object itself: callers must deep-copy before changing it."""
        return self._objects.get(key, {}).get((namespace, name))

    def select(self, key: TypeKey, namespace: str | None = None) -> list[Obj]:
        """Objects sorted by namespace then name, as etcd's key order gives them."""
        bucket = self._objects.get(key, {})
        items = sorted(bucket.items())
        return [o for (ns, _), o in items if namespace is None or ns == namespace]

    def by_uid(self, uid: str) -> tuple[TypeKey, Obj] | None:
        """The stored object with this uid (and its type), from an index: no scan."""
        where = self._uids.get(uid)
        if where is None:
            return None
        key, ns, name = where
        obj = self.get(key, ns, name)
        return (key, obj) if obj is not None else None

    def iter_all(self) -> Iterator[tuple[TypeKey, Obj]]:
        for key, bucket in list(self._objects.items()):
            for obj in list(bucket.values()):
                yield key, obj

    def count(self, key: TypeKey) -> int:
        return len(self._objects.get(key, {}))

    # -- writes -----------------------------------------------------------------------------

    def _commit(self, typ: str, key: TypeKey, obj: Obj, old: Obj | None) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        bucket = self._objects.setdefault(key, {})
        if typ == DELETED:
            bucket.pop((ns, name), None)
            self._uids.pop(str(meta.get("uid") or ""), None)
        else:
            bucket[(ns, name)] = obj
            self._index(key, ns, name, obj)
        ev = Event(self.rv, typ, key, obj, old)
        self._events.append(ev)
        while len(self._events) > self._window:
            self._horizon = self._events.popleft().rv
        self._persist(ev, ns, name)
        for listener in self._listeners:
            listener(ev)
        for w in self._watchers:
            if w.key == key and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait(ev)
        return obj

    def _index(self, key: TypeKey, ns: str, name: str, obj: Obj) -> None:
        uid = obj["metadata"].get("uid")
        if uid:
            self._uids[str(uid)] = (key, ns, name)

    def put(self, key: TypeKey, obj: Obj) -> Obj:
        """Insert or replace; the caller has done all checks. Returns the stored object."""
        meta = obj["metadata"]
        old = self.get(key, meta.get("namespace", ""), meta["name"])
        return self._commit(MODIFIED if old is not None else ADDED, key, obj, old)

    def remove(self, key: TypeKey, obj: Obj) -> Obj:
        """Final removal. Like etcd, the DELETED event carries a fresh resourceVersion."""
        gone = copy.deepcopy(obj)
        return self._commit(DELETED, key, gone, obj)

    def drop_type(self, key: TypeKey) -> None:
        """Forget a resource type's bucket once it is empty (a deleted CRD)."""
        if not self._objects.get(key):
            self._objects.pop(key, None)

    # -- watch ------------------------------------------------------------------------------

    def add_listener(self, fn: Callable[[Event], None]) -> None:
        """Synchronous in-process subscription for controllers: called for every commit."""
        self._listeners.append(fn)

    def open_watch(self, key: TypeKey, namespace: str | None, since: int) -> tuple[Watcher, list[Event]]:
        """Register a watcher and return the retained events after `since` to replay first."""
        if since < self._horizon:
            raise Expired(since, self._horizon + 1)
        backlog = [
            ev
            for ev in self._events
            if ev.rv > since and ev.key == key
            and (namespace is None or ev.obj["metadata"].get("namespace", "") == namespace)
        ]
        w = Watcher(key, namespace)
        self._watchers.add(w)
        return w, backlog

    def close_watch(self, w: Watcher) -> None:
        self._watchers.discard(w)

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)
