"""Service networking on one host, without root or network namespaces.

All of 127.0.0.0/8 reaches `lo` on Linux, so any address in it can be bound with no set-up. localkube
gives every pod an address of its own from POD_NET and every ClusterIP Service one from SERVICE_NET;
`services.py` proxies each Service port to the ready endpoints and keeps a hosts file per namespace
that the kubelet mounts at the pods' /etc/hosts (`<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`,
`<svc>.<ns>.svc.cluster.local`). Pods still share the host's network namespace: two pods binding
0.0.0.0 on one port collide, so servers in pods should bind their pod IP (downward API status.podIP).

Pure functions over objects here; the controllers are in `services.py`.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]

SERVICES = ("", "services")
ENDPOINTS = ("", "endpoints")


def _block() -> int:
    """Two localkubes on one host (two test sessions at once) must not hand out the same addresses: each may be
    given its own block, LOCALKUBE_NETWORK_BLOCK (0-9, default 0): Services from 127.(96+block).0.0/16, pods from
    127.(244+block).0.0/16."""
    raw = os.environ.get("LOCALKUBE_NETWORK_BLOCK", "0") or "0"
    if not raw.isdigit() or int(raw) > 9:
        raise ValueError(f"LOCALKUBE_NETWORK_BLOCK must be a number from 0 to 9, not {raw!r}")
    return int(raw)


SERVICE_NET = ipaddress.ip_network(f"127.{96 + _block()}.0.0/16")
POD_NET = ipaddress.ip_network(f"127.{244 + _block()}.0.0/16")
CLUSTER_DOMAIN = "cluster.local"


def _free(net: ipaddress.IPv4Network | ipaddress.IPv6Network, used: set[str]) -> str:
    for ip in net.hosts():
        if int(ip) - int(net.network_address) < 10:
            continue  # the first few are kept free, as a real service CIDR keeps .1 for `kubernetes`
        if str(ip) not in used:
            return str(ip)
    raise RuntimeError(f"no free address left in {net}")


def allocate_pod_ip(used: Iterable[str]) -> str:
    return _free(POD_NET, set(used))


def default_service(obj: Obj, existing: list[Obj]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
    if spec.get("clusterIP") != "None":
        if not spec.get("clusterIP"):
            used = {str((s.get("spec") or {}).get("clusterIP")) for s in existing}
            spec["clusterIP"] = _free(SERVICE_NET, used)
        spec["clusterIPs"] = [spec["clusterIP"]]
    else:
        spec["clusterIPs"] = ["None"]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    obj["status"] = {"loadBalancer": {}}


def keep_cluster_ip(new: Obj, old: Obj) -> None:
    """clusterIP is immutable; an update that leaves it out keeps the allocated one (as `kubectl apply` does)."""
    spec = new.setdefault("spec", {})
    old_spec = old.get("spec") or {}
    for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        if not spec.get(k) and k in old_spec:
            spec[k] = old_spec[k]
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))


def validate_service(obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    ports = spec.get("ports") or []
    if not ports and spec.get("clusterIP") != "None":
        causes.append(("spec.ports", "FieldValueRequired", "Required value"))
    names = [p.get("name", "") for p in ports if isinstance(p, dict)]
    for i, p in enumerate(ports):
        if not isinstance(p, dict):
            continue
        port = p.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            causes.append((f"spec.ports[{i}].port", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(port)}: must be between 1 and 65535, inclusive"))
        if len(ports) > 1 and not p.get("name"):
            causes.append((f"spec.ports[{i}].name", "FieldValueRequired", "Required value"))
    if len(set(names)) != len(names):
        causes.append(("spec.ports", "FieldValueDuplicate", "Duplicate value"))
    ip = spec.get("clusterIP")
    if ip not in (None, "", "None"):
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            causes.append(("spec.clusterIP", "FieldValueInvalid",
                           f"Invalid value: {json.dumps(ip)}: must be a valid IP address"))
    return causes


def target_port(port: Obj, pod: Obj) -> int | None:
    """A Service port's targetPort on one pod: a number, or a name looked up in the pod's containerPorts."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for cp in c.get("ports") or []:
            if cp.get("name") == target and cp.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return int(cp["containerPort"])
    return None


def hosts_file(namespace: str, services: list[Obj]) -> str:
    """/etc/hosts for the pods of `namespace`: every Service's long names, and the short names of its own."""
    lines = ["# written by localkube: Services of the cluster (kept up to date)",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for s in sorted(services, key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"])):
        ip = (s.get("spec") or {}).get("clusterIP")
        if not ip or ip == "None":
            continue
        name, ns = s["metadata"]["name"], s["metadata"]["namespace"]
        names = [f"{name}.{ns}.svc.{CLUSTER_DOMAIN}", f"{name}.{ns}.svc", f"{name}.{ns}"]
        if ns == namespace:
            names.append(name)
        lines.append(f"{ip}\t{' '.join(names)}")
    return "\n".join(lines) + "\n"
