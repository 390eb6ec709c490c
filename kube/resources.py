"""Typed accessors of custom resources: `Resource(kube, group, version, plural)`, one per kind a process uses.

Every read and write of a custom object (an AgentRun, a schedule, a pack) goes through one of these instead of
`CustomObjectsApi` by hand, so a call names its kind once, is rate-limited and typed like every other call
(kube/client.py), and says what it was doing in its error. Namespaced kinds take the namespace first; a cluster-scoped
one (`namespaced=False`) ignores it, and `list` with no namespace lists every namespace.

`update_with_retry(ref, mutate)` is client-go's `retry.RetryOnConflict` around a read-modify-write: read the object,
let `mutate` change a copy (or say "no change" by returning None: nothing is written), write the change guarded by
the version read, and on 409 Conflict (someone wrote in between) read and mutate again, a bounded number of times with
a short jittered backoff (client-go's `DefaultRetry`: 5 steps of 10 ms). Nobody's write is lost: the write succeeds
only on the version `mutate` saw, so two writers that race both end up in the object. The write is a merge patch of
what `mutate` changed with `metadata.resourceVersion` in it (a replace in effect, needing only the `patch` verb the
chart grants, not `update`); with `status=True` it goes to the status subresource.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import functools
import random
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from models.names import GROUP, VERSION

from .client import Kube
from .errors import Conflict

Obj = dict[str, Any]
# What `mutate` returns: the object to write, or None for "no change" (nothing is written).
Mutate = Callable[[Obj], Awaitable[Obj | None] | Obj | None]

# client-go's retry.DefaultRetry: Steps 5, Duration 10ms, Factor 1.0, Jitter 0.1.
RETRY_STEPS = 5
RETRY_DELAY_SECONDS = 0.01
RETRY_JITTER = 0.1


class Ref(NamedTuple):
    """Which object: its namespace ("" for a cluster-scoped kind) and name."""

    namespace: str
    name: str


class Resource:
    """One kind of custom object, reached through one process's `Kube`."""

    def __init__(self, kube: Kube, group: str, version: str, plural: str, *, namespaced: bool = True,
                 kind: str = "") -> None:
        self.kube, self.group, self.version, self.plural = kube, group, version, plural
        self.namespaced = namespaced
        self.kind = kind or plural  # for the error messages: "read AgentRun ns/name"
        self._api = kube.custom

    def __repr__(self) -> str:
        return f"Resource({self.group}/{self.version} {self.plural})"

    def _where(self, ns: str, name: str = "") -> str:
        return "/".join(p for p in (ns if self.namespaced else "", name) if p)

    def _at(self, verb: str, ns: str) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The client's method for `verb` in this kind's scope (`get`: get_namespaced_custom_object or
        get_cluster_custom_object, and so on) and the leading arguments it takes."""
        head, _, tail = verb.partition("_custom_object")
        if self.namespaced:
            return getattr(self._api, f"{head}_namespaced_custom_object{tail}"), (self.group, self.version, ns,
                                                                                self.plural)
        return getattr(self._api, f"{head}_cluster_custom_object{tail}"), (self.group, self.version, self.plural)

    @staticmethod
    def _kw(content_type: str | None, kw: dict[str, Any]) -> dict[str, Any]:
        # Only when given: the client picks JSON patch for a list body and merge patch for a dict otherwise.
        return {**kw, "_content_type": content_type} if content_type else kw

    async def get(self, ns: str, name: str, *, action: str = "", **kw: Any) -> Obj:
        fn, args = self._at("get_custom_object", ns)
        got = await self.kube.call(fn, *args, name, action=action or f"read {self.kind} {self._where(ns, name)}", **kw)
        return cast(Obj, got)

    async def list(self, ns: str = "", *, action: str = "", **kw: Any) -> Obj:
        """The list object (`items`, `metadata.continue`); `ns` "" lists every namespace. `kw`: selectors, limit,
        _continue, as the client takes them."""
        fn, args = self.lister(ns)
        got = await self.kube.call(fn, *args, action=action or f"list {self.kind} in {ns or 'all namespaces'}", **kw)
        return cast(Obj, got)

    async def items(self, ns: str = "", *, action: str = "", **kw: Any) -> builtins.list[Obj]:
        return list((await self.list(ns, action=action, **kw)).get("items") or [])

    def lister(self, ns: str = "") -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The client's list method and its leading arguments for `ns` ("" : every namespace)."""
        if self.namespaced and ns:
            return self._api.list_namespaced_custom_object, (self.group, self.version, ns, self.plural)
        return self._api.list_cluster_custom_object, (self.group, self.version, self.plural)

    def list_fn(self, *, all_namespaces: bool = False) -> Callable[..., Any]:
        """The client's list call for a list + watch stream (kube/listwatch.py): a namespaced kind's takes the
        stream's `namespace=` argument; with `all_namespaces` (or a cluster-scoped kind) it takes none."""
        if self.namespaced and not all_namespaces:
            return functools.partial(self._api.list_namespaced_custom_object, self.group, self.version,
                                     plural=self.plural)
        return functools.partial(self._api.list_cluster_custom_object, self.group, self.version, self.plural)

    async def create(self, ns: str, body: Obj, *, action: str = "", **kw: Any) -> Obj:
        fn, args = self._at("create_custom_object", ns)
        name = str((body.get("metadata") or {}).get("name") or "")
        got = await self.kube.call(fn, *args, body, action=action or f"create {self.kind} {self._where(ns, name)}",
                                   **kw)
        return cast(Obj, got)

    async def patch(self, ns: str, name: str, body: Obj | builtins.list[Any], *, content_type: str | None = None,
                    action: str = "", **kw: Any) -> Obj:
        fn, args = self._at("patch_custom_object", ns)
        got = await self.kube.call(fn, *args, name, body, action=action or f"patch {self.kind} {self._where(ns, name)}",
                                   **self._kw(content_type, kw))
        return cast(Obj, got)

    async def patch_status(self, ns: str, name: str, body: Obj | builtins.list[Any], *, content_type: str | None = None,
                           action: str = "", **kw: Any) -> Obj:
        fn, args = self._at("patch_custom_object_status", ns)
        got = await self.kube.call(fn, *args, name, body,
                                   action=action or f"write status of {self.kind} {self._where(ns, name)}",
                                   **self._kw(content_type, kw))
        return cast(Obj, got)

    async def replace(self, ns: str, name: str, body: Obj, *, status: bool = False, action: str = "") -> Obj:
        fn, args = self._at("replace_custom_object_status" if status else "replace_custom_object", ns)
        what = f"status of {self.kind}" if status else self.kind
        got = await self.kube.call(fn, *args, name, body, action=action or f"replace {what} {self._where(ns, name)}")
        return cast(Obj, got)

    async def delete(self, ns: str, name: str, *, action: str = "", **kw: Any) -> Obj:
        """`kw`: `body` (propagationPolicy, preconditions), as the client takes it."""
        fn, args = self._at("delete_custom_object", ns)
        got = await self.kube.call(fn, *args, name, action=action or f"delete {self.kind} {self._where(ns, name)}",
                                   **kw)
        return cast(Obj, got)

    async def update_with_retry(self, ref: Ref | tuple[str, str], mutate: Mutate, *, status: bool = False,
                                first: Obj | None = None, steps: int = RETRY_STEPS, action: str = "") -> Obj | None:
        """Read, `mutate` a copy, write what changed guarded by the version read; on Conflict read and mutate again,
        at most `steps` times (then the last Conflict is raised). `first`: an object already read, for the first try.

        The write is a merge patch of the difference (`merge_patch`) carrying `metadata.resourceVersion`: a replace
        that needs only the `patch` verb (what the chart grants) and sends only what changed. Returns the object as
        stored, or None when `mutate` said there is nothing to change (returned None, or changed nothing). A
        NotFound (the object is gone), or whatever `mutate` raises, ends it at once: only a conflict is retried."""
        ns, name = ref
        where = self._where(ns, name)
        obj = first
        for step in range(steps):
            if obj is None:
                obj = await self.get(ns, name, action=f"read {self.kind} {where}")
            wanted = mutate(copy.deepcopy(obj))
            if isinstance(wanted, Awaitable):
                wanted = await wanted
            diff = merge_patch(obj, wanted) if wanted is not None else {}
            diff.pop("status" if not status else "spec", None)  # the other part is not this write's to change
            if not diff:
                return None
            diff["metadata"] = {**diff.get("metadata", {}), "resourceVersion": obj["metadata"]["resourceVersion"]}
            write = self.patch_status if status else self.patch
            try:
                return await write(ns, name, diff, content_type=MERGE_PATCH, action=action)
            except Conflict:
                if step == steps - 1:
                    raise
                obj = None
                await asyncio.sleep(RETRY_DELAY_SECONDS * (1 + RETRY_JITTER * random.random()))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def merge_patch(old: Obj, new: Obj) -> Obj:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: changed and added keys, None for removed ones,
    objects compared key by key, lists and scalars replaced whole (client-go's `CreateMergePatch`)."""
    out: Obj = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(before, dict):
            inner = merge_patch(before, value)
            if inner:
                out[key] = inner
        elif before is _MISSING or before != value:
            out[key] = value
    return out


_MISSING = object()
MERGE_PATCH = "application/merge-patch+json"


def sympozium(kube: Kube, plural: str, *, kind: str = "") -> Resource:
    """A kind of Sympozium's API group (models/names.py), e.g. `sympozium(kube, AGENTRUNS, kind="AgentRun")`."""
    return Resource(kube, GROUP, VERSION, plural, kind=kind)


__all__ = ["MERGE_PATCH", "RETRY_STEPS", "Mutate", "Obj", "Ref", "Resource", "merge_patch", "sympozium"]
