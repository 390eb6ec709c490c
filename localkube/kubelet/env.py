"""A container's environment and command line, as the kubelet computes them: `env` and `envFrom` (values,
`$(VAR)` expansion, Secret and ConfigMap keys, fieldRefs), the variables every container gets (the API server,
its kubeconfig, PATH), and `command` + `args`, or the image's entrypoint from the image map when there is no
command (images are not pulled here).
"""

from __future__ import annotations

import base64
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..apiserver import APIServer
from .runtime import NODE_NAME, TOKEN_DIR_IN_POD, ContainerConfigError

Obj = dict[str, Any]


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_KINDS = {"secrets": "Secret", "configmaps": "ConfigMap"}

# Images whose default entrypoint is a shell; anything else needs an explicit command or a map entry.
DEFAULT_IMAGE_MAP: dict[str, list[str]] = {
    "busybox": ["sh"],
    "alpine": ["/bin/sh"],
    "debian": ["bash"],
    "ubuntu": ["bash"],
    "bash": ["bash"],
    "python": ["python3"],
}


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: unknown references stay as written, $$ escapes."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return VAR_REF.sub(repl, text)


def image_base(image: str) -> str:
    """'docker.io/library/busybox:1.36@sha256:...' -> 'busybox'; 'ghcr.io/o/agent:v1' -> 'ghcr.io/o/agent'."""
    ref = image.split("@", 1)[0]
    name, _, tag = ref.rpartition(":")
    if name and "/" not in tag:
        ref = name
    for prefix in ("docker.io/library/", "docker.io/", "library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
    return ref


class Environment:
    """Computes containers' environments and command lines on one node."""

    def __init__(self, api: APIServer, *, server_url: str, pod_ips: dict[str, str],
                 image_map: dict[str, list[str]] | None = None) -> None:
        self.api = api
        self.server_url = server_url
        # Each running pod's own address, by pod uid (the kubelet's: shared, not copied).
        self.pod_ips = pod_ips
        self.image_map = {**DEFAULT_IMAGE_MAP, **(image_map or {})}
        self.venv_bin = str(Path(sys.executable).parent)

    def keys_from(self, ns: str, resource: str, src: Obj) -> dict[str, bytes]:
        obj = self.api.store.get(("", resource), ns, src.get("name", ""))
        optional = bool(src.get("optional"))
        if obj is None:
            if optional:
                return {}
            raise ContainerConfigError(f'{resource[:-1]} "{src.get("name")}" not found')
        data: dict[str, bytes] = {}
        for k, val in (obj.get("data") or {}).items():
            data[k] = base64.b64decode(val) if resource == "secrets" else str(val).encode()
        for k, val in (obj.get("binaryData") or {}).items():
            data[k] = base64.b64decode(val)
        items = src.get("items")
        if items:
            out = {}
            for it in items:
                if it["key"] not in data:
                    if optional:
                        continue
                    raise ContainerConfigError(f'couldn\'t find key {it["key"]} in {resource[:-1]} {ns}/{src.get("name")}')
                out[it["path"]] = data[it["key"]]
            return out
        return data

    def field_ref(self, pod: Obj, ref: Obj) -> str:
        path = ref.get("fieldPath", "")
        m = pod["metadata"]
        simple = {
            "metadata.name": m.get("name", ""),
            "metadata.namespace": m.get("namespace", ""),
            "metadata.uid": m.get("uid", ""),
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
            "spec.nodeName": NODE_NAME,
            "status.podIP": self.pod_ips.get(m.get("uid", ""), "127.0.0.1"),
            "status.hostIP": "127.0.0.1",
            "status.podIPs": self.pod_ips.get(m.get("uid", ""), "127.0.0.1"),
            "status.hostIPs": "127.0.0.1",
        }
        if path in simple:
            return str(simple[path])
        mm = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if mm:
            return str((m.get(mm.group(1)) or {}).get(mm.group(2), ""))
        if path in ("metadata.labels", "metadata.annotations"):
            d = m.get(path.split(".")[1]) or {}
            return "\n".join(f'{k}="{v}"' for k, v in sorted(d.items()))
        raise ContainerConfigError(f"unsupported fieldPath {path!r}")

    def env(self, pod: Obj, c: Obj) -> dict[str, str]:
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {
            "PATH": f"{self.venv_bin}:{DEFAULT_PATH}",
            "HOSTNAME": pod["metadata"]["name"],
            "HOME": "/root",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": self.server_url.rsplit(":", 1)[-1],
            "KUBERNETES_SERVICE_PORT_HTTPS": self.server_url.rsplit(":", 1)[-1],
            "KUBECONFIG": f"{TOKEN_DIR_IN_POD}/kubeconfig",
        }
        # An image mapped to this venv's Python imports the code localkube itself runs from: a checkout started
        # with PYTHONPATH (a git worktree sharing the venv) runs its own agent program, not the installed one.
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                data = self.keys_from(ns, "configmaps", src["configMapRef"])
            elif "secretRef" in src:
                data = self.keys_from(ns, "secrets", src["secretRef"])
            else:
                continue
            for k, v in data.items():
                env[prefix + k] = v.decode(errors="replace")
        for e in c.get("env") or []:
            name = e["name"]
            if "valueFrom" not in e:
                env[name] = expand(str(e.get("value", "")), env)
                continue
            vf = e["valueFrom"]
            if "secretKeyRef" in vf or "configMapKeyRef" in vf:
                resource = "secrets" if "secretKeyRef" in vf else "configmaps"
                ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef")
                data = self.keys_from(ns, resource, {"name": ref.get("name"), "optional": ref.get("optional")})
                if ref.get("key") not in data:
                    if ref.get("optional"):
                        continue
                    raise ContainerConfigError(f"couldn't find key {ref.get('key')} in {_KINDS[resource]} "
                                               f"{ns}/{ref.get('name')}")
                env[name] = data[ref["key"]].decode(errors="replace")
            elif "fieldRef" in vf:
                env[name] = self.field_ref(pod, vf["fieldRef"])
            elif "resourceFieldRef" in vf:
                env[name] = "0"
        return env

    def argv(self, c: Obj, env: dict[str, str]) -> list[str]:
        command = [expand(str(x), env) for x in c.get("command") or []]
        args = [expand(str(x), env) for x in c.get("args") or []]
        if not command:
            base = image_base(str(c.get("image", "")))
            entry = self.image_map.get(str(c.get("image", ""))) or self.image_map.get(base)
            if entry is None:
                raise ContainerConfigError(
                    f'image "{c.get("image")}" has no command and no entry in the image map; give the container a '
                    "command or add the image to localkube's image map")
            command = list(entry)
        return command + args
