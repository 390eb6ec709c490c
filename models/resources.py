"""Container resources of a run's pods: Kubernetes quantities, the defaults, and the policy's caps (SPEC §1.5).

One runaway agent must not starve a node, so every container the worker makes carries requests and limits. The
agent container's come from the run (`spec.sandbox.resources`, Sympozium's field), else the Agent
(`spec.agents.default.resources`), key by key over `AGENT_DEFAULT`; hooks get `HOOK_DEFAULT`. A policy's
`sandboxPolicy.maxCPU`/`maxMemory` cap every container: a value someone asked for above the cap refuses the run
(`PolicyViolation` naming the field), a default above it is lowered to the cap. Resolution runs in
`models/resolve.py`, so admission and workflow start refuse the same runs.

Quantities are parsed as Kubernetes does (`resource.Quantity`): a decimal number, then a binary suffix
(Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m k M G T P E) or an exponent (`1e3`).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from .base import FieldProblem, K8sModel, PolicyViolation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"),
            "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
            "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                       r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?[0-9]+))?$")
CPU, MEMORY = "cpu", "memory"


def parse_quantity(text: str) -> Decimal:
    """A non-negative Kubernetes quantity as a number (cores for CPU, bytes for memory); ValueError if malformed."""
    m = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (like 500m, 2, 512Mi, 1Gi or 1G)")
    try:
        number = Decimal(m["num"])
        if m["exp"] is not None:
            return number * Decimal(10) ** int(m["exp"])
    except (InvalidOperation, OverflowError):
        raise ValueError(f"{text!r} is not a Kubernetes quantity (like 500m, 2, 512Mi, 1Gi or 1G)") from None
    suffix = m["suffix"] or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def _text(value: Any) -> Any:
    # YAML writes `cpu: 2` as a number; Kubernetes accepts both (int-or-string).
    if isinstance(value, bool):
        return value
    return str(value) if isinstance(value, int | float) else value


Quantity = Annotated[str, BeforeValidator(_text), WithJsonSchema({"x-kubernetes-int-or-string": True})]


class Resources(K8sModel):
    """A container's `resources` (requests and limits by resource name), as in a pod spec."""

    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {k: dict(v) for k, v in (("requests", self.requests), ("limits", self.limits)) if v}


# Sympozium gives its agent container 250m/512Mi → 1/1Gi and its hooks 100m/128Mi → 500m/512Mi.
AGENT_DEFAULT = Resources(requests={CPU: "100m", MEMORY: "256Mi"}, limits={CPU: "1", MEMORY: "1Gi"})
HOOK_DEFAULT = Resources(requests={CPU: "100m", MEMORY: "128Mi"}, limits={CPU: "500m", MEMORY: "512Mi"})
# Sympozium's sandbox sidecar (sleep infinity beside the agent).
SANDBOX_DEFAULT = Resources(requests={CPU: "100m", MEMORY: "256Mi"}, limits={CPU: "500m", MEMORY: "512Mi"})
# The tools container, where the agent's commands run when the run has no sandbox: it idles between commands, so it
# asks for little and may burst to what a build or a script needs.
TOOLS_DEFAULT = Resources(requests={CPU: "50m", MEMORY: "64Mi"}, limits={CPU: "1", MEMORY: "512Mi"})
# The setup and final containers of the hook Jobs (busybox: mkdir, a marker).
HELPER_DEFAULT = Resources(requests={CPU: "10m", MEMORY: "16Mi"}, limits={CPU: "100m", MEMORY: "64Mi"})


class Caps(K8sModel):
    """A policy's per-container caps (`sandboxPolicy.maxCPU`/`maxMemory`), and where they come from."""

    cpu: str = ""
    memory: str = ""
    where: str = ""  # 'policy "x"', for messages

    def of(self, key: str) -> tuple[str, str] | None:
        value = {CPU: self.cpu, MEMORY: self.memory}.get(key, "")
        return (value, "sandboxPolicy.maxCPU" if key == CPU else "sandboxPolicy.maxMemory") if value else None


def parse_resources(raw: Any, field: str) -> Resources | None:
    """`raw` (a `resources` object) checked: only requests and limits, every value a quantity; None if absent."""
    if raw in (None, {}):
        return None
    if not isinstance(raw, dict):
        raise FieldProblem(field, "must be an object with requests and/or limits")
    unknown = sorted(set(raw) - {"requests", "limits"})
    if unknown:
        raise FieldProblem(f"{field}.{unknown[0]}", "unknown field: resources has requests and limits")
    out = Resources()
    for kind in ("requests", "limits"):
        values = raw.get(kind) or {}
        if not isinstance(values, dict):
            raise FieldProblem(f"{field}.{kind}", "must be a map of resource name to quantity")
        for key, value in values.items():
            text = _text(value)
            if not isinstance(text, str):
                raise FieldProblem(f"{field}.{kind}.{key}", f"must be a quantity, got {type(value).__name__}")
            try:
                parse_quantity(text)
            except ValueError as e:
                raise FieldProblem(f"{field}.{kind}.{key}", str(e)) from None
            getattr(out, kind)[str(key)] = text
    return out


def resolve_resources(asked: list[tuple[Resources | None, str]], default: Resources, caps: Caps | None) -> Resources:
    """A container's resources: the first of `asked` (resources, field) that sets a key wins, else `default`.

    A request above its limit is an error when the limit was asked for, else the default limit rises to it. Any
    asked value above the policy's cap refuses the run naming the field; defaults are lowered to the cap."""
    out = Resources(requests=dict(default.requests), limits=dict(default.limits))
    origin: dict[tuple[str, str], str] = {}
    for resources, field in reversed(asked):  # the first one listed wins
        if resources is None:
            continue
        for kind in ("requests", "limits"):
            for key, value in getattr(resources, kind).items():
                getattr(out, kind)[key] = value
                origin[(kind, key)] = f"{field}.{kind}.{key}"
    if caps is not None:
        for kind in ("requests", "limits"):
            values = getattr(out, kind)
            for key, value in list(values.items()):
                cap = caps.of(key)
                if cap is None or parse_quantity(value) <= parse_quantity(cap[0]):
                    continue
                where = origin.get((kind, key))
                if where is not None:
                    raise PolicyViolation(where, f"{key} {value} exceeds the maximum {cap[0]} of {caps.where}, rule "
                                                 f"{cap[1]}")
                values[key] = cap[0]
    for key, request in list(out.requests.items()):
        limit = out.limits.get(key)
        if limit is None or parse_quantity(request) <= parse_quantity(limit):
            continue
        asked_request, asked_limit = origin.get(("requests", key)), origin.get(("limits", key))
        if asked_request is not None and asked_limit is not None:
            raise FieldProblem(asked_request, f"the {key} request {request} exceeds its limit {limit} ({asked_limit})")
        if asked_request is not None:
            out.limits[key] = request  # asked above the default limit: the limit follows it (both under the cap)
        else:
            out.requests[key] = limit  # a default request above an asked limit: as Kubernetes, request = limit
    return out
