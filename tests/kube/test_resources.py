"""Typed accessors of custom resources against localkube over HTTP: every verb in both scopes, typed errors for
404/409/422, and `update_with_retry` really racing another writer (client-go's RetryOnConflict): both changes kept."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kube import Conflict, Invalid, Kube, NotFound, Resource
from kube.resources import merge_patch
from tests.waiting import wait_for

Obj = dict[str, Any]


def _crd(group: str, scope: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "required": ["size"], "properties": {
                                       "size": {"type": "integer"}}, "x-kubernetes-preserve-unknown-fields": True},
                                   "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.fixture(params=["Namespaced", "Cluster"])
def widgets(request: pytest.FixtureRequest, kube: client.ApiClient) -> Iterator[Resource]:
    """A `widgets` kind in a group of the test's own, namespaced or cluster-scoped."""
    scope = request.param
    group = f"w{uuid.uuid4().hex[:8]}.example.com"
    ext: Any = client.ApiextensionsV1Api(kube)
    ext.create_custom_resource_definition(_crd(group, scope))

    def established() -> bool:
        crd = ext.read_custom_resource_definition(f"widgets.{group}")
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])
    wait_for(established, timeout=30, what="the CRD to be established")
    try:
        yield Resource(Kube(kube), group, "v1", "widgets", namespaced=scope == "Namespaced", kind="Widget")
    finally:
        ext.delete_custom_resource_definition(f"widgets.{group}")


def _widget(res: Resource, name: str, size: int = 1) -> Obj:
    return {"apiVersion": f"{res.group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}


async def test_every_verb_reaches_the_object_in_its_scope(widgets: Resource, namespace: str) -> None:
    made = await widgets.create(namespace, _widget(widgets, "w1"))
    assert made["metadata"].get("namespace", "") == (namespace if widgets.namespaced else "")
    assert (await widgets.get(namespace, "w1"))["metadata"]["uid"] == made["metadata"]["uid"]
    assert [o["metadata"]["name"] for o in await widgets.items(namespace)] == ["w1"]
    assert [o["metadata"]["name"] for o in await widgets.items()] == ["w1"]  # every namespace
    patched = await widgets.patch(namespace, "w1", {"spec": {"size": 2}})
    assert patched["spec"] == {"size": 2}
    # A JSON patch when asked for one (the finalizer release's form).
    patched = await widgets.patch(namespace, "w1", [{"op": "replace", "path": "/spec/size", "value": 3}],
                                  content_type="application/json-patch+json")
    assert patched["spec"] == {"size": 3}
    status = await widgets.patch_status(namespace, "w1", {"status": {"phase": "Done"}, "spec": {"size": 9}})
    assert status["status"] == {"phase": "Done"} and status["spec"] == {"size": 3}, "status writes only status"
    await widgets.delete(namespace, "w1")
    with pytest.raises(NotFound):
        await widgets.get(namespace, "w1")


async def test_failures_are_typed_404_409_422_and_say_what_was_done(widgets: Resource, namespace: str) -> None:
    with pytest.raises(NotFound) as missing:
        await widgets.get(namespace, "nope")
    assert missing.value.status == 404 and str(missing.value).startswith("read Widget ")
    await widgets.create(namespace, _widget(widgets, "w2"))
    with pytest.raises(Conflict) as twice:
        await widgets.create(namespace, _widget(widgets, "w2"))
    assert twice.value.already_exists
    first = await widgets.get(namespace, "w2")
    await widgets.patch(namespace, "w2", {"spec": {"size": 5}})
    with pytest.raises(Conflict) as stale:
        await widgets.patch(namespace, "w2", {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]},
                                              "spec": {"size": 6}})
    assert not stale.value.already_exists
    with pytest.raises(Invalid) as invalid:
        await widgets.create(namespace, {**_widget(widgets, "w3"), "spec": {"size": "large"}},
                             action="create Widget w3")
    assert invalid.value.status == 422 and "spec.size" in str(invalid.value)
    assert str(invalid.value).startswith("create Widget w3: ")


async def test_update_with_retry_keeps_both_of_two_racing_writers_changes(widgets: Resource, namespace: str) -> None:
    """Writer A reads, writer B writes meanwhile, A's write conflicts: A reads again, mutates again, and writes.
    The interleaving is forced (A waits inside its mutate until B has written), so the conflict always happens."""
    await widgets.create(namespace, _widget(widgets, "race"))
    b_wrote = asyncio.Event()
    a_saw: list[dict[str, str]] = []

    async def a(obj: Obj) -> Obj:
        a_saw.append(dict(obj["metadata"].get("labels") or {}))
        if len(a_saw) == 1:
            b_task.set_result(None)  # let B go, now that A has read
            await b_wrote.wait()
        obj["metadata"].setdefault("labels", {})["a"] = "1"
        return obj

    def b(obj: Obj) -> Obj:
        obj["metadata"].setdefault("labels", {})["b"] = "1"
        return obj

    b_task: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def writer_b() -> None:
        await b_task
        await widgets.update_with_retry((namespace, "race"), b)
        b_wrote.set()

    stored, _ = await asyncio.gather(widgets.update_with_retry((namespace, "race"), a), writer_b())
    assert a_saw == [{}, {"b": "1"}], "A conflicted once, read B's write, and mutated again"
    assert stored is not None and stored["metadata"]["labels"] == {"a": "1", "b": "1"}
    assert (await widgets.get(namespace, "race"))["metadata"]["labels"] == {"a": "1", "b": "1"}


async def test_concurrent_writers_lose_no_update(widgets: Resource, namespace: str) -> None:
    """Two writers each count up a status field five times at once: every increment lands (a lost update would
    leave the count short)."""
    await widgets.create(namespace, _widget(widgets, "count"))

    def bump(obj: Obj) -> Obj:
        status = obj.setdefault("status", {})
        status["count"] = int(status.get("count") or 0) + 1
        return obj

    async def writer() -> None:
        for _ in range(5):
            await widgets.update_with_retry((namespace, "count"), bump, status=True, steps=50)

    await asyncio.gather(writer(), writer())
    assert (await widgets.get(namespace, "count"))["status"]["count"] == 10


async def test_no_change_writes_nothing(widgets: Resource, namespace: str) -> None:
    made = await widgets.create(namespace, _widget(widgets, "same"))
    assert await widgets.update_with_retry((namespace, "same"), lambda obj: None) is None
    assert await widgets.update_with_retry((namespace, "same"), lambda obj: obj) is None  # changed nothing
    assert (await widgets.get(namespace, "same"))["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


async def test_update_with_retry_gives_up_with_the_conflict_after_its_steps(widgets: Resource,
                                                                           namespace: str) -> None:
    """A writer that always loses (someone writes between every read and write) stops after `steps` tries."""
    await widgets.create(namespace, _widget(widgets, "busy"))
    tries = 0

    async def always_overtaken(obj: Obj) -> Obj:
        nonlocal tries
        tries += 1
        await widgets.patch(namespace, "busy", {"spec": {"size": 100 + tries}})
        obj["spec"]["size"] = 50  # differs from what was read: there is something to write
        return obj

    with pytest.raises(Conflict):
        await widgets.update_with_retry((namespace, "busy"), always_overtaken, steps=3)
    assert tries == 3


async def test_a_gone_object_ends_update_with_retry_as_not_found(widgets: Resource, namespace: str) -> None:
    with pytest.raises(NotFound):
        await widgets.update_with_retry((namespace, "never"), lambda obj: obj)


def test_the_merge_patch_holds_what_changed_and_nulls_what_went() -> None:
    old = {"metadata": {"labels": {"a": "1", "b": "2"}, "name": "x"}, "spec": {"list": [1, 2], "n": 1}}
    new = {"metadata": {"labels": {"a": "1", "c": "3"}, "name": "x"}, "spec": {"list": [1], "n": 1}, "status": {}}
    assert merge_patch(old, new) == {"metadata": {"labels": {"b": None, "c": "3"}}, "spec": {"list": [1]},
                                     "status": {}}
    assert merge_patch(old, old) == {}
