"""Assembles localkube: store, API semantics, HTTP server, controllers and kubelet.

`LocalKube.serve()` runs everything on one event loop until stopped; it binds 127.0.0.1 only
and writes `<state-dir>/kubeconfig` (admin token, the chosen port) once it accepts requests.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import uvicorn
import yaml

from .admission_config import WebhookCredentials
from .apiserver import APIServer
from .certs import ensure_tls
from .controllers import JobController, NamespaceController, PVCController
from .crdfinalizer import CRDFinalizer
from .deployments import DeploymentController, ReplicaSetController
from .errors import StatusError
from .garbagecollector import GarbageCollector
from .kubelet import Kubelet
from .rbac import default_cluster_role_bindings, default_cluster_roles
from .registry import Registry
from .request import INTERNAL
from .server import App, Auth
from .services import EndpointsController, HostsFiles, ServiceProxy
from .store import Store

log = logging.getLogger("localkube")


@dataclass
class Options:
    state_dir: Path
    port: int = 0
    persist: bool = False
    max_pods: int = 16
    event_window: int = 10_000
    job_backoff_seconds: float = 10.0
    bookmark_interval: float = 5.0
    image_map: dict[str, list[str]] = field(default_factory=dict)
    # JSON lines, one per request: the user it authenticated as, its User-Agent, method, path, code.
    audit_log: Path | None = None
    # kube-apiserver's --admission-control-config-file: the client certificates (or tokens) webhooks are called with.
    admission_config: Path | None = None


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: str, *, namespace: str = "default") -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "localkube", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode()}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "localkube", "context": {"cluster": "localkube", "user": "admin",
                                                       "namespace": namespace}}],
        "current-context": "localkube",
        "preferences": {},
    }
    tmp = path.with_suffix(".tmp")
    write_private(tmp, yaml.safe_dump(cfg, sort_keys=False))
    tmp.replace(path)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _node_info() -> dict[str, str]:
    """The node's status.nodeInfo with every field a real kubelet reports (clients' models require them): this
    host's identifiers, kernel and OS, and localkube's runtime."""
    release = dict(line.split("=", 1) for line in _read("/etc/os-release").splitlines() if "=" in line)
    machine = _read("/etc/machine-id")
    return {"kubeletVersion": "v1.34.0-localkube", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64", "containerRuntimeVersion": "localkube://bwrap",
            "kernelVersion": os.uname().release, "osImage": release.get("PRETTY_NAME", "").strip('"') or "Linux",
            "machineID": machine, "systemUUID": machine, "bootID": _read("/proc/sys/kernel/random/boot_id")}


def write_private(path: Path, text: str) -> None:
    """Replace a file's contents, readable by its owner only from the start (a token, a kubeconfig)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def private_log(path: Path) -> IO[str]:
    """A text log appended to, line-buffered, readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a", buffering=1)


class LocalKube:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        opts.state_dir.mkdir(parents=True, exist_ok=True)
        # Everything under it is private to the user running localkube: its database holds every Secret, the pods'
        # directories their ServiceAccount tokens and logs, the volumes what the pods wrote.
        opts.state_dir.chmod(0o700)
        self.ready = asyncio.Event()
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._stop = asyncio.Event()

    @property
    def kubeconfig(self) -> Path:
        return self.opts.state_dir / "kubeconfig"

    def request_stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.should_exit = True

    async def serve(self) -> None:
        opts = self.opts
        db = opts.state_dir / "localkube.db" if opts.persist else None
        if db is None:
            # Without --persist a fresh start must not see an earlier run's objects or volumes.
            for stale in ("localkube.db", "localkube.db-wal", "localkube.db-shm"):
                (opts.state_dir / stale).unlink(missing_ok=True)
        store = Store(window=opts.event_window, db_path=db)
        registry = Registry()
        api = APIServer(store, registry)
        gc = GarbageCollector(api)
        if opts.admission_config is not None:
            api.webhooks.credentials = WebhookCredentials.load(opts.admission_config)
        auth = self._load_auth()
        # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says
        # TCP, and without it every keep-alive response waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", opts.port))
        self.port = sock.getsockname()[1]
        url = f"https://127.0.0.1:{self.port}"
        tls = ensure_tls(opts.state_dir / "pki")
        self._seed(api)
        pvcs = PVCController(api, opts.state_dir / "volumes")
        namespaces = NamespaceController(api, tls.ca_pem)
        jobs = JobController(api, gc, backoff_base=opts.job_backoff_seconds)
        crds = CRDFinalizer(api)
        replicasets = ReplicaSetController(api)
        deployments = DeploymentController(api)
        endpoints = EndpointsController(api)
        proxy = ServiceProxy(api)
        hosts = HostsFiles(api, opts.state_dir / "dns")
        kubelet = Kubelet(api, auth, pvcs, opts.state_dir, server_url=url, ca_pem=tls.ca_pem, max_pods=opts.max_pods,
                          image_map=opts.image_map, hosts=hosts)
        app = App(api, auth, logs=kubelet.logs, bookmark_interval=opts.bookmark_interval)
        app.host = f"127.0.0.1:{self.port}"
        # Every request's user and path: private, as the rest of the state.
        audit = private_log(opts.audit_log) if opts.audit_log is not None else None
        app.audit = audit
        self.app = app
        self.api = api
        gc.start()
        crds.start()
        namespaces.start()
        pvcs.start()
        jobs.start()
        replicasets.start()
        deployments.start()
        endpoints.start()
        proxy.start()
        kubelet.start()
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                timeout_keep_alive=75, timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)
        self._server = server
        serve_task = asyncio.create_task(server.serve(sockets=[sock]))
        # uvicorn exposes start-up only as a flag, so it is polled (briefly, once).
        while not server.started and not serve_task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if serve_task.done():
            await serve_task
        write_kubeconfig(self.kubeconfig, url, auth.admin_token, tls.ca_pem)
        (opts.state_dir / "localkube.json").write_text(json.dumps({"url": url, "port": self.port}))
        log.info("localkube serving on %s (state in %s)", url, opts.state_dir)
        self.ready.set()
        stop_task = asyncio.create_task(self._stop.wait())
        try:
            # uvicorn may stop on its own (it handles SIGINT/SIGTERM when on the main thread).
            await asyncio.wait({stop_task, serve_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_task.cancel()
            app.stop_streams()
            server.should_exit = True
            await kubelet.stop()
            await proxy.stop()
            await serve_task
            for c in (jobs, pvcs, namespaces, crds, replicasets, deployments, endpoints):
                await c.queue.stop()
            await gc.stop()
            store.close()
            if audit is not None:
                audit.close()

    def _load_auth(self) -> Auth:
        """With --persist the admin token survives restarts, so existing kubeconfigs keep working."""
        token_file = self.opts.state_dir / "admin-token"
        if self.opts.persist and token_file.exists():
            return Auth(admin_token=token_file.read_text().strip())
        auth = Auth()
        write_private(token_file, auth.admin_token)
        return auth

    def _seed(self, api: APIServer) -> None:
        """What a fresh cluster has: system namespaces, the node, a default StorageClass, RBAC defaults."""
        reg = api.registry

        def ensure(group: str, version: str, resource: str, ns: str, body: dict[str, object]) -> None:
            rt = reg.lookup(group, version, resource)
            assert rt is not None
            name = body["metadata"]["name"]  # type: ignore[index]
            if api.find(rt, ns, str(name)) is None:
                try:
                    api.create(rt, ns, body, INTERNAL)
                except StatusError as e:
                    log.warning("seeding %s/%s failed: %s", resource, name, e.message)

        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            ensure("", "v1", "namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        ensure("", "v1", "nodes", "", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "localkube", "labels": {"kubernetes.io/hostname": "localkube",
                                                         "kubernetes.io/os": "linux"}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "localkube kubelet is posting ready status"}],
                       "nodeInfo": _node_info()},
        })
        ensure("storage.k8s.io", "v1", "storageclasses", "", {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "standard",
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "localkube.io/hostpath", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
        })
        for role in default_cluster_roles():
            ensure("rbac.authorization.k8s.io", "v1", "clusterroles", "", role)
        for binding in default_cluster_role_bindings():
            ensure("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "", binding)
