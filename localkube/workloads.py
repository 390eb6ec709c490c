"""apps/v1 Deployments and ReplicaSets: defaults and validation, as the real API server applies them.

Pure functions over objects; the controllers that act on them are in `deployments.py`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]

TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


def set_defaults(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("minReadySeconds", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    if obj.get("kind") == "Deployment":
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.setdefault("rollingUpdate", {})
            ru.setdefault("maxSurge", "25%")
            ru.setdefault("maxUnavailable", "25%")
    else:
        spec.pop("revisionHistoryLimit", None)
        spec.pop("progressDeadlineSeconds", None)
    template = spec.setdefault("template", {})
    tspec = template.setdefault("spec", {})
    tspec.setdefault("restartPolicy", "Always")
    tspec.setdefault("terminationGracePeriodSeconds", 30)
    tspec.setdefault("dnsPolicy", "ClusterFirst")
    tspec.setdefault("schedulerName", "default-scheduler")
    tspec.setdefault("securityContext", {})


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def selector_matches(selector: Obj, labels: dict[str, str]) -> bool:
    return bool(selector) and _matches(selector, labels)


def validate(obj: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(("spec.selector", "FieldValueRequired", "Required value"))
    elif not _matches(selector, labels):
        causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                       f"Invalid value: {json.dumps(labels, separators=(',', ':'))}: `selector` does not match "
                       "template `labels`"))
    if old is not None and (old.get("spec") or {}).get("selector") != selector:
        causes.append(("spec.selector", "FieldValueInvalid",
                       f"Invalid value: {json.dumps(selector, separators=(',', ':'))}: field is immutable"))
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(("spec.replicas", "FieldValueInvalid",
                       f"Invalid value: {replicas}: must be greater than or equal to 0"))
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers")
    if not containers:
        causes.append(("spec.template.spec.containers", "FieldValueRequired", "Required value"))
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy", "Always")
    if restart != "Always":
        causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{restart}": supported values: "Always"'))
    return causes


def template_hash(template: Obj) -> str:
    """A stable name suffix for a pod template (the real controller uses an fnv hash; any stable one serves)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(digest[:16], 16)
    out = ""
    for _ in range(10):
        n, r = divmod(n, len(alphabet))
        out += alphabet[r]
    return out


def scaled(value: Any, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int, or a percentage of `total`."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        whole, rest = divmod(pct * total, 100)
        return whole + (1 if round_up and rest else 0)
    return int(text)
