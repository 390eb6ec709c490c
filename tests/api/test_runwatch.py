"""The API's one view of the runs follows the cluster (localkube over HTTP): every change is seen and told to
subscribers, across resumed watches and a relist after 410 Gone, and a subscriber that falls behind is told so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes import client

from api.runwatch import RunEvent, RunWatch, Subscription
from cli.up import install_crds
from kube import Kube
from localkube.testing import Handle
from models.names import AGENTRUNS, API_VERSION, GROUP, VERSION
from tests.waiting import wait_for_async


@pytest.fixture(autouse=True)
def crds(localkube: Handle) -> None:
    install_crds(localkube.kubeconfig)


def _run(name: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AgentRun", "metadata": {"name": name},
            "spec": {"agentRef": "helper", "task": "say hi", "agentId": "primary", "sessionKey": name}}


class Runs:
    """AgentRun calls off the event loop (the view's changes are applied on it)."""

    def __init__(self, kube: client.ApiClient, namespace: str) -> None:
        self.custom: Any = client.CustomObjectsApi(kube)
        self.namespace = namespace

    async def create(self, name: str) -> dict[str, Any]:
        return dict(await asyncio.to_thread(self.custom.create_namespaced_custom_object, GROUP, VERSION,
                                            self.namespace, AGENTRUNS, _run(name)))

    async def label(self, name: str, value: str) -> None:
        await asyncio.to_thread(self.custom.patch_namespaced_custom_object, GROUP, VERSION, self.namespace,
                                AGENTRUNS, name, {"metadata": {"labels": {"mark": value}}})

    async def delete(self, name: str) -> None:
        await asyncio.to_thread(self.custom.delete_namespaced_custom_object, GROUP, VERSION, self.namespace,
                                AGENTRUNS, name)


@pytest.fixture
def runs(kube: client.ApiClient, namespace: str) -> Runs:
    return Runs(kube, namespace)


@pytest.fixture
async def started() -> AsyncIterator[Callable[..., Any]]:
    """Start RunWatches (stopped at the end) that have listed once."""
    watches: list[RunWatch] = []

    async def start(watch: RunWatch) -> RunWatch:
        watches.append(watch)
        await watch.start()
        assert await watch.wait_synced(30)
        return watch
    yield start
    for w in watches:
        await w.stop()


async def next_event(sub: Subscription, match: Callable[[RunEvent], bool], *, within: float = 30) -> RunEvent:
    """The subscriber's next event that `match`es (others in between are skipped)."""
    async with asyncio.timeout(within):
        async for ev in sub:
            if match(ev):
                return ev
    raise AssertionError("the subscription ended")


def of(name: str, typ: str) -> Callable[[RunEvent], bool]:
    return lambda ev: ev.type == typ and ev.obj["metadata"]["name"] == name


def requests(localkube: Handle, key: str) -> int:
    return int(localkube.stats()["requests"].get(key, 0))


async def test_a_run_created_changed_and_deleted_is_seen_and_told_to_subscribers_in_order(
        kube: client.ApiClient, namespace: str, other_namespace: str, runs: Runs,
        started: Callable[..., Any]) -> None:
    watch: RunWatch = await started(RunWatch(Kube(kube)))
    with watch.subscribe() as sub:
        await runs.create("r1")
        added = await next_event(sub, of("r1", "ADDED"))
        assert added.obj["spec"]["task"] == "say hi"
        seen = watch.get(namespace, "r1")
        assert seen is not None and "managedFields" not in seen["metadata"], "whole objects without managedFields"
        assert [r["metadata"]["name"] for r in watch.list(namespace)] == ["r1"]
        assert watch.list(other_namespace) == []
        assert watch.get(other_namespace, "r1") is None
        assert namespace in watch.namespaces() and other_namespace not in watch.namespaces()

        await runs.label("r1", "blue")
        modified = await next_event(sub, lambda ev: ev.type != "RESYNC" and ev.obj["metadata"]["name"] == "r1")
        assert modified.type == "MODIFIED" and modified.obj["metadata"]["labels"]["mark"] == "blue"
        assert (watch.get(namespace, "r1") or {})["metadata"]["labels"]["mark"] == "blue"

        copy = watch.get(namespace, "r1")
        assert copy is not None
        copy["spec"]["task"] = "changed by a reader"
        assert (watch.get(namespace, "r1") or {})["spec"]["task"] == "say hi", "readers get a copy"

        await runs.delete("r1")
        deleted = await next_event(sub, lambda ev: ev.type != "RESYNC" and ev.obj["metadata"]["name"] == "r1")
        assert deleted.type == "DELETED"
        assert watch.get(namespace, "r1") is None
        assert namespace not in watch.namespaces(), "a namespace is held while it has runs"
    assert sub not in watch._subscribers, "leaving the with-block unsubscribes"


async def test_the_watch_goes_on_from_where_it_was_without_listing_again(
        kube: client.ApiClient, namespace: str, localkube: Handle, runs: Runs, started: Callable[..., Any]) -> None:
    lists, watches = requests(localkube, "list agentruns"), requests(localkube, "watch agentruns")
    watch: RunWatch = await started(RunWatch(Kube(kube), [namespace], watch_seconds=1))
    await wait_for_async(lambda: asyncio.sleep(0, requests(localkube, "watch agentruns") - watches >= 3),
                         timeout=30, what="three one-second watches of runs in a row")
    with watch.subscribe() as sub:
        await runs.create("after-watches")
        await next_event(sub, of("after-watches", "ADDED"))
    assert requests(localkube, "list agentruns") - lists == 1, "listed once, at the start"
    assert watch.relists == 0


async def test_after_410_gone_it_lists_again_and_tells_subscribers_what_changed_meanwhile(
        kube: client.ApiClient, namespace: str, localkube: Handle, runs: Runs, started: Callable[..., Any]) -> None:
    await runs.create("before")
    watch: RunWatch = await started(RunWatch(Kube(kube), [namespace], watch_seconds=1))
    assert watch.get(namespace, "before") is not None
    # From now on every watch of this namespace's runs answers 410 Gone (a little late, so the loop is paced): the
    # view learns of changes only by listing again.
    localkube.inject_fault(verb="watch", resource="agentruns", namespace=namespace, code=410,
                                   delay_seconds=0.2, times=-1)
    try:
        with watch.subscribe() as sub:
            await wait_for_async(lambda: asyncio.sleep(0, watch.relists >= 1), timeout=30,
                                 what="a list after the first 410")
            await runs.create("during")
            await next_event(sub, of("during", "ADDED"))
            await runs.label("during", "green")
            modified = await next_event(sub, of("during", "MODIFIED"))
            assert modified.obj["metadata"]["labels"]["mark"] == "green"
            await runs.delete("before")
            deleted = await next_event(sub, of("before", "DELETED"))
            assert deleted.obj["spec"]["task"] == "say hi", "a run gone at a relist is told as it was last seen"
            assert [r["metadata"]["name"] for r in watch.list(namespace)] == ["during"]
    finally:
        localkube.clear_faults()
    relists = watch.relists
    with watch.subscribe() as sub:
        await runs.create("after")
        await next_event(sub, of("after", "ADDED"))
    assert watch.relists - relists <= 1, "the watch goes on again once the server stops answering 410"


async def test_a_subscriber_that_falls_behind_is_told_to_resync_and_the_list_holds_what_it_missed(
        kube: client.ApiClient, namespace: str, runs: Runs, started: Callable[..., Any]) -> None:
    watch: RunWatch = await started(RunWatch(Kube(kube), [namespace], queue_size=2))
    names = [f"r{i}" for i in range(5)]
    with watch.subscribe() as slow:
        for name in names:
            await runs.create(name)
        await wait_for_async(lambda: asyncio.sleep(0, len(watch.list(namespace)) == 5), timeout=30,
                             what="the five runs in the view")
        first = await next_event(slow, lambda ev: True)
        assert first == RunEvent("RESYNC"), "the first thing a subscriber that fell behind hears"
        assert slow.resyncs >= 1
        assert sorted(r["metadata"]["name"] for r in watch.list(namespace)) == names
        # Once told, it hears what comes next.
        await runs.delete("r0")
        await next_event(slow, of("r0", "DELETED"))


async def test_stopping_the_watch_ends_every_subscription(kube: client.ApiClient, namespace: str) -> None:
    watch = RunWatch(Kube(kube), [namespace])
    await watch.start()
    assert await watch.wait_synced(30)
    with watch.subscribe() as sub:
        await watch.stop()
        async with asyncio.timeout(5):
            assert [ev async for ev in sub] == []
    with watch.subscribe() as late:
        async with asyncio.timeout(5):
            assert [ev async for ev in late] == [], "a subscription after stop() ends at once"
    assert not any(s.thread.is_alive() for s in watch._streams), "the threads are gone"
