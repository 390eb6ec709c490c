"""localkube for tests: an in-process server on its own thread, and helpers for faults.

    with running_localkube(tmp_path) as lk:
        config.load_kube_config(str(lk.kubeconfig))

The server runs on a private event loop in a daemon thread, so tests drive it only over
HTTP, like any other client.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .main import LocalKube, Options


@dataclass
class Handle:
    kubeconfig: Path
    url: str
    token: str
    state_dir: Path
    server: LocalKube

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return admin_request(self.kubeconfig, method, path, body)

    def inject_fault(self, **spec: Any) -> int:
        return inject_fault(self.kubeconfig, **spec)

    def clear_faults(self) -> None:
        clear_faults(self.kubeconfig)

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.admin("GET", "/localkube/stats")
        return stats


def _server_and_token(kubeconfig: Path) -> tuple[str, str]:
    cfg = yaml.safe_load(kubeconfig.read_text())
    return cfg["clusters"][0]["cluster"]["server"], cfg["users"][0]["user"]["token"]


def ssl_context(kubeconfig: Path) -> ssl.SSLContext:
    """Trusts exactly the CA in the kubeconfig."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    return ssl.create_default_context(cadata=ca)


def admin_request(kubeconfig: Path, method: str, path: str, body: Any = None) -> Any:
    server, token = _server_and_token(kubeconfig)
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30, context=ssl_context(kubeconfig)) as resp:
        return json.loads(resp.read() or b"null")


def inject_fault(kubeconfig: Path, **spec: Any) -> int:
    """Make matching requests fail: verb, resource, group, namespace, name, subresource, code,
    times (-1 = always), delay_seconds, message."""
    return int(admin_request(kubeconfig, "POST", "/localkube/faults", spec)["id"])


def clear_faults(kubeconfig: Path) -> None:
    admin_request(kubeconfig, "DELETE", "/localkube/faults")


@contextlib.contextmanager
def running_localkube(state_dir: Path, **options: Any) -> Iterator[Handle]:
    opts = Options(state_dir=state_dir, **options)
    box: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        box["loop"] = loop

        async def main() -> None:
            lk = LocalKube(opts)
            box["lk"] = lk
            task = asyncio.create_task(lk.serve())
            ready = asyncio.create_task(lk.ready.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            started.set()
            await task

        try:
            loop.run_until_complete(main())
        except BaseException as e:  # surfaced to the test thread below
            box["error"] = e
            started.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="localkube", daemon=True)
    thread.start()
    if not started.wait(timeout=60):
        raise TimeoutError("localkube did not start within 60s")
    if "error" in box:
        raise RuntimeError("localkube failed to start") from box["error"]
    lk: LocalKube = box["lk"]
    server, token = _server_and_token(lk.kubeconfig)
    try:
        yield Handle(lk.kubeconfig, server, token, state_dir, lk)
    finally:
        box["loop"].call_soon_threadsafe(lk.request_stop)
        thread.join(timeout=30)
