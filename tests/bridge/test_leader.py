"""Leader election between bridge replicas, against localkube's Lease API."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
import yaml
from kubernetes import client, config

from bridge.leader import LeaderElector
from localkube.testing import Handle


@pytest.fixture
def lease_name(localkube: Handle) -> Iterator[str]:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    yield name
    localkube.clear_faults()


def _elector(kube: client.ApiClient, name: str, identity: str) -> LeaderElector:
    return LeaderElector(kube, namespace="default", name=name, identity=identity, lease_seconds=3,
                         renew_seconds=0.5)


def test_one_leader_and_a_takeover_after_a_clean_release(kube: client.ApiClient, lease_name: str) -> None:
    async def go() -> None:
        a, b = _elector(kube, lease_name, "a"), _elector(kube, lease_name, "b")
        ta = asyncio.create_task(a.run())
        await asyncio.wait_for(a.is_leader.wait(), 10)
        tb = asyncio.create_task(b.run())
        await asyncio.sleep(0)  # b starts trying while a holds the lease
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(b.is_leader.wait(), 2)  # four of b's attempts: the lease is a's
        ta.cancel()
        await asyncio.to_thread(a.release)
        await asyncio.wait_for(b.is_leader.wait(), 3)  # released: b need not wait for the lease to expire
        tb.cancel()
        spec = client.CoordinationV1Api(kube).read_namespaced_lease(lease_name, "default").spec
        assert spec is not None and (spec.holder_identity, spec.lease_transitions) == ("b", 1)

    asyncio.run(go())


class StallingProxy:
    """A TCP proxy in front of localkube that can stop passing bytes: a partition that leaves connections open,
    so requests hang rather than fail."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.stalled = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                while self.stalled.is_set():
                    time.sleep(0.05)  # hold the bytes: the peer waits, as behind a dead link
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s_ in (src, dst):
                s_.close()

    def close(self) -> None:
        self.listener.close()


def test_a_hung_renewal_makes_the_leader_step_down_before_anyone_else_leads(
        kube: client.ApiClient, localkube: Handle, lease_name: str) -> None:
    """The leader's link to the API server stalls (requests hang, nothing fails); it must stop acting (lost)
    before the follower takes the lease over, so the two never lead at once."""
    kubeconfig = yaml.safe_load(localkube.kubeconfig.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    url = urlparse(cluster["server"])
    proxy = StallingProxy((url.hostname or "127.0.0.1", url.port or 443))
    cluster["server"] = f"https://127.0.0.1:{proxy.port}"
    behind = config.new_client_from_config_dict(kubeconfig)

    async def go() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        a, b = _elector(behind, lease_name, "a"), _elector(kube, lease_name, "b")
        ta = asyncio.create_task(a.run())
        tb: asyncio.Task[None] | None = None
        try:
            await asyncio.wait_for(a.is_leader.wait(), 10)
            tb = asyncio.create_task(b.run())
            proxy.stalled.set()
            await asyncio.wait_for(a.lost.wait(), 10)
            lost_at = loop.time()
            assert not a.is_leader.is_set()
            await asyncio.wait_for(b.is_leader.wait(), 10)
            b_leads_at = loop.time()
            assert not a.is_leader.is_set(), "a leads again while its link is stalled"
            return lost_at, b_leads_at
        finally:
            proxy.stalled.clear()  # a request still hanging in a worker thread ends, so the loop can close
            for t in (ta, tb):
                if t is not None:
                    t.cancel()

    try:
        lost_at, b_leads_at = asyncio.run(go())
    finally:
        proxy.stalled.clear()
        proxy.close()
        behind.close()
    assert lost_at < b_leads_at


def test_a_deadline_that_outlasts_the_lease_is_refused(kube: client.ApiClient) -> None:
    with pytest.raises(ValueError, match="less than the lease"):
        LeaderElector(kube, namespace="default", name="x", identity="a", lease_seconds=15, renew_seconds=5,
                      renew_deadline=10)
