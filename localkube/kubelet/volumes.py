"""A pod's volumes as host directories: emptyDirs, hostPaths, PVCs (the directory the PVC controller bound the claim
to), and the API-data volumes (configMap, secret, downwardAPI, projected, with the pod's ServiceAccount token and a
kubeconfig carrying it), written readable by their owner only.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from ..apiserver import APIServer
from ..authn import Auth
from ..controllers import PVCController
from .env import Environment
from .runtime import ContainerConfigError, PodRun, write_private

Obj = dict[str, Any]


class Volumes:
    def __init__(self, api: APIServer, auth: Auth, pvcs: PVCController, env: Environment, *, server_url: str,
                 ca_pem: str) -> None:
        self.api = api
        self.auth = auth
        self.pvcs = pvcs
        self.env = env
        self.server_url = server_url
        self.ca_pem = ca_pem

    def volume(self, run: PodRun, pod: Obj, v: Obj) -> Path:
        ns = run.namespace
        name = v["name"]
        base = run.dir / "volumes" / name
        if "emptyDir" in v:
            base.mkdir(parents=True, exist_ok=True)
            return base
        if "hostPath" in v:
            p = Path(v["hostPath"]["path"])
            if v["hostPath"].get("type") in ("DirectoryOrCreate",):
                p.mkdir(parents=True, exist_ok=True)
            return p
        if "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"]["claimName"]
            pvc = self.api.store.get(("", "persistentvolumeclaims"), ns, claim)
            if pvc is None:
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" not found')
            if pvc["metadata"].get("deletionTimestamp"):
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" is being deleted')
            if (pvc.get("status") or {}).get("phase") != "Bound":
                raise ContainerConfigError(f'persistentvolumeclaim "{claim}" is not bound')
            return self.pvcs.volume_path(pvc)
        files: dict[str, bytes] = {}
        if "configMap" in v:
            files = self.env.keys_from(ns, "configmaps", v["configMap"])
        elif "secret" in v:
            src = dict(v["secret"])
            src["name"] = src.get("secretName", "")
            files = self.env.keys_from(ns, "secrets", src)
        elif "projected" in v:
            for s in v["projected"].get("sources") or []:
                if "serviceAccountToken" in s:
                    token = self.auth.issue(ns, pod["spec"].get("serviceAccountName", "default"), run.name, run.uid)
                    files[s["serviceAccountToken"].get("path", "token")] = token.encode()
                    self._write_kubeconfig(run, token)
                elif "configMap" in s:
                    files.update(self.env.keys_from(ns, "configmaps", s["configMap"]))
                elif "secret" in s:
                    files.update(self.env.keys_from(ns, "secrets", s["secret"]))
                elif "downwardAPI" in s:
                    for item in s["downwardAPI"].get("items") or []:
                        files[item["path"]] = self.env.field_ref(pod, item.get("fieldRef") or {}).encode()
        elif "downwardAPI" in v:
            for item in v["downwardAPI"].get("items") or []:
                files[item["path"]] = self.env.field_ref(pod, item.get("fieldRef") or {}).encode()
        else:
            raise ContainerConfigError(f'volume "{name}" has a type localkube does not support')
        base.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            write_private(p, data)
        return base

    def _write_kubeconfig(self, run: PodRun, token: str) -> None:
        d = run.dir / "localkube"
        d.mkdir(parents=True, exist_ok=True)
        cfg = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "localkube", "cluster": {
                "server": self.server_url,
                "certificate-authority-data": base64.b64encode(self.ca_pem.encode()).decode()}}],
            "users": [{"name": "pod", "user": {"token": token}}],
            "contexts": [{"name": "pod", "context": {"cluster": "localkube", "user": "pod",
                                                     "namespace": run.namespace}}],
            "current-context": "pod",
        }
        write_private(d / "kubeconfig", yaml.safe_dump(cfg).encode())
