"""Services at work: Endpoints from the ready pods, a proxy on each ClusterIP port, and the pods' hosts files.

- EndpointsController keeps one `Endpoints` object per Service with a selector: the ready pods' IPs in
  `addresses`, the others in `notReadyAddresses`, ports resolved per pod (named targetPorts through the
  pods' containerPorts), as the real endpoints controller writes them.
- ServiceProxy listens on `<clusterIP>:<port>` for every ClusterIP Service port and forwards each
  connection to a ready endpoint, round-robin (kube-proxy's job); with no ready endpoint the connection
  is closed, as a client of a real Service without endpoints sees it refused.
- HostsFiles writes `<state>/dns/hosts-<namespace>` (network.hosts_file) whenever Services change, in
  place, so the bind mounts the kubelet made at /etc/hosts see the new content.

Addresses come from network.py (all in 127.0.0.0/8). Ports below 1024 need root to bind, as on any host.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from pathlib import Path
from typing import Any

from .apiserver import APIServer
from .controllers import WorkQueue
from .deployments import pod_ready
from .errors import StatusError
from .network import ENDPOINTS, SERVICES, hosts_file, target_port
from .request import INTERNAL, DeleteOptions
from .store import DELETED, Event, Obj
from .util import deep
from .workloads import selector_matches

log = logging.getLogger("localkube.services")

PODS = ("", "pods")
Key = tuple[str, str]


class EndpointsController:
    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.queue = WorkQueue("endpoints", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        m = ev.obj["metadata"]
        if ev.key == SERVICES:
            self.queue.add((m["namespace"], m["name"]))
        elif ev.key == PODS:
            labels = m.get("labels") or {}
            for svc in self.api.store.select(SERVICES, m["namespace"]):
                if selector_matches({"matchLabels": (svc.get("spec") or {}).get("selector") or {}}, labels):
                    self.queue.add((m["namespace"], svc["metadata"]["name"]))

    def start(self) -> None:
        self.queue.start()
        for svc in self.api.store.select(SERVICES):
            self.queue.add((svc["metadata"]["namespace"], svc["metadata"]["name"]))

    def _rt(self) -> Any:
        return self.api.registry.lookup("", "v1", "endpoints")

    async def _sync(self, key: Key) -> None:
        ns, name = key
        svc = self.api.store.get(SERVICES, ns, name)
        current = self.api.store.get(ENDPOINTS, ns, name)
        selector = (svc or {}).get("spec", {}).get("selector")
        if svc is None or not selector:
            # Endpoints of a Service without a selector are the user's to write; of a deleted one, the GC's.
            if svc is None and current is not None and _ours(current):
                with contextlib.suppress(StatusError):
                    self.api.delete(self._rt(), ns, name, DeleteOptions())
            return
        pods = [p for p in self.api.store.select(PODS, ns)
                if selector_matches({"matchLabels": selector}, p["metadata"].get("labels") or {})
                and (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        subsets: dict[tuple[tuple[str, int, str], ...], dict[str, list[Obj]]] = {}
        for pod in pods:
            ports = []
            for sp in svc["spec"].get("ports") or []:
                tp = target_port(sp, pod)
                if tp is not None:
                    ports.append((sp.get("name", ""), tp, sp.get("protocol", "TCP")))
            if not ports:
                continue
            address = {"ip": pod["status"]["podIP"], "nodeName": pod["spec"].get("nodeName", ""),
                       "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                                     "uid": pod["metadata"]["uid"]}}
            bucket = subsets.setdefault(tuple(ports), {"addresses": [], "notReadyAddresses": []})
            bucket["addresses" if pod_ready(pod) else "notReadyAddresses"].append(address)
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": name, "namespace": ns, "labels": dict(svc["metadata"].get("labels") or {})},
                     "subsets": []}
        body["metadata"]["labels"]["endpoints.kubernetes.io/managed-by"] = "endpoint-controller"
        for port_set, addrs in sorted(subsets.items()):
            subset: Obj = {"ports": [{**({"name": n} if n else {}), "port": p, "protocol": proto}
                                     for n, p, proto in port_set]}
            for k in ("addresses", "notReadyAddresses"):
                if addrs[k]:
                    subset[k] = sorted(addrs[k], key=lambda a: a["ip"])
            body["subsets"].append(subset)
        if not body["subsets"]:
            del body["subsets"]
        if current is None:
            self.api.create(self._rt(), ns, body, INTERNAL)
            return
        if current.get("subsets") != body.get("subsets"):
            new = deep(current)
            new["subsets"] = body.get("subsets", [])
            if not new["subsets"]:
                new.pop("subsets")
            self.api.update(self._rt(), ns, name, new, INTERNAL)


def _ours(endpoints: Obj) -> bool:
    return (endpoints["metadata"].get("labels") or {}).get("endpoints.kubernetes.io/managed-by") == \
        "endpoint-controller"


def ready_endpoints(api: APIServer, ns: str, name: str, port_name: str) -> list[tuple[str, int]]:
    ep = api.store.get(ENDPOINTS, ns, name)
    out: list[tuple[str, int]] = []
    for subset in (ep or {}).get("subsets") or []:
        port = next((p["port"] for p in subset.get("ports") or [] if p.get("name", "") == port_name), None)
        if port is None:
            continue
        out += [(a["ip"], int(port)) for a in subset.get("addresses") or []]
    return out


class ServiceProxy:
    """kube-proxy in user space: one listener per ClusterIP Service port, round-robin to ready endpoints."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.listeners: dict[tuple[str, int], tuple[Key, str, asyncio.Server]] = {}
        self._counter = itertools.count()
        self.queue = WorkQueue("service-proxy", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.key == SERVICES:
            self.queue.add(("", ""))

    def start(self) -> None:
        self.queue.start()
        self.queue.add(("", ""))

    async def stop(self) -> None:
        await self.queue.stop()
        for _, _, server in self.listeners.values():
            server.close()
        self.listeners.clear()

    async def _sync(self, _key: Key) -> None:
        wanted: dict[tuple[str, int], tuple[Key, str]] = {}
        for svc in self.api.store.select(SERVICES):
            ip = (svc.get("spec") or {}).get("clusterIP")
            if not ip or ip == "None" or svc["metadata"].get("deletionTimestamp"):
                continue
            key = (svc["metadata"]["namespace"], svc["metadata"]["name"])
            for p in svc["spec"].get("ports") or []:
                if p.get("protocol", "TCP") == "TCP":
                    wanted[(ip, int(p["port"]))] = (key, p.get("name", ""))
        for addr in list(self.listeners):
            if addr not in wanted or self.listeners[addr][:2] != wanted[addr]:
                self.listeners.pop(addr)[2].close()
        for addr, (key, port_name) in wanted.items():
            if addr in self.listeners:
                continue
            try:
                server = await asyncio.start_server(self._handler(key, port_name), addr[0], addr[1])
            except OSError as e:
                log.warning("service %s/%s: cannot listen on %s:%d (%s)", *key, *addr, e.strerror)
                continue
            self.listeners[addr] = (key, port_name, server)

    def _handler(self, key: Key, port_name: str) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            targets = ready_endpoints(self.api, key[0], key[1], port_name)
            if not targets:
                writer.close()
                return
            ip, port = targets[next(self._counter) % len(targets)]
            try:
                up_reader, up_writer = await asyncio.open_connection(ip, port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        return handle


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.close()


class HostsFiles:
    """The per-namespace hosts files the kubelet mounts at /etc/hosts, rewritten in place on Service changes."""

    def __init__(self, api: APIServer, directory: Path) -> None:
        self.api = api
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.key == SERVICES and (ev.type == DELETED or "clusterIP" in (ev.obj.get("spec") or {})):
            self.refresh()

    def path(self, namespace: str) -> Path:
        p = self.dir / f"hosts-{namespace}"
        if not p.exists():
            self._write(p, namespace)
        return p

    def refresh(self) -> None:
        for p in self.dir.glob("hosts-*"):
            self._write(p, p.name[len("hosts-"):])

    def _write(self, p: Path, namespace: str) -> None:
        text = hosts_file(namespace, self.api.store.select(SERVICES))
        # Truncate and write, never rename: the file is bind-mounted into running pods.
        with p.open("w") as f:
            f.write(text)
