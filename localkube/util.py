"""Small helpers shared by the server, the controllers and the kubelet."""

from __future__ import annotations

import datetime as dt
import pickle
import re
import secrets
from typing import Any

Obj = dict[str, Any]

# The alphabet of apimachinery's utilrand.String (no vowels, no look-alikes).
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def rand_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_ALPHANUMS) for _ in range(n))


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(t: dt.datetime | None = None) -> str:
    """Second precision, as metav1.Time marshals."""
    return (t or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t: dt.datetime | None = None) -> str:
    """metav1.MicroTime (events, leases)."""
    return (t or now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s: str) -> dt.datetime:
    s = s.replace("Z", "+00:00")
    return dt.datetime.fromisoformat(s)


def deep(obj: Any) -> Any:
    """A deep copy of a stored object (plain JSON data): a pickle round trip, ~7x faster than copy.deepcopy
    for an object the size of a Pod, and the deepest-copied thing in a busy localkube."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


def meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def set_condition(conditions: list[Obj], ctype: str, status: str, *, reason: str = "", message: str = "",
                  probe_time: bool = False) -> list[Obj]:
    """Upsert a condition by type, keeping lastTransitionTime when the status does not change."""
    ts = rfc3339()
    for c in conditions:
        if c.get("type") == ctype:
            if c.get("status") != status:
                c["lastTransitionTime"] = ts
            c["status"] = status
            if reason:
                c["reason"] = reason
            if message:
                c["message"] = message
            if probe_time:
                c["lastProbeTime"] = ts
            return conditions
    c = {"type": ctype, "status": status, "lastTransitionTime": ts}
    if probe_time:
        c["lastProbeTime"] = ts
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    conditions.append(c)
    return conditions


def get_condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def owner_ref(owner: Obj, *, controller: bool = True, block: bool = True) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


def go_kind(value: Any) -> str:
    """How Go's encoding/json names a JSON value's kind in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
