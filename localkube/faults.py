"""Fault injection: make matching requests fail or stall, a given number of times.

Tests of retry behaviour need the API server to misbehave on cue (a 500 on the third Job
create, a 429 storm on status patches, a slow list). Faults are registered through the
admin-only `/localkube/faults` endpoint or `localkube.testing.inject_fault`.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import asdict, dataclass
from typing import Any

from .errors import REASONS, StatusError
from .registry import ResourceType

VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*"}


@dataclass
class Fault:
    id: int
    verb: str
    resource: str
    group: str | None
    namespace: str | None
    name: str | None
    subresource: str | None
    code: int
    times: int
    delay_seconds: float
    message: str
    hits: int = 0

    def matches(self, verb: str, rt: ResourceType, ns: str, name: str, sub: str) -> bool:
        if self.times == 0:
            return False
        if self.verb not in ("*", verb):
            return False
        if self.resource not in ("*", rt.resource):
            return False
        if self.group is not None and self.group != rt.group:
            return False
        if self.namespace is not None and self.namespace != ns:
            return False
        if self.name is not None and self.name != name:
            return False
        return self.subresource is None or self.subresource == sub


class FaultInjector:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, spec: Any) -> int:
        if not isinstance(spec, dict):
            raise ValueError("fault must be an object")
        verb = str(spec.get("verb", "*"))
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; one of {sorted(VERBS)}")
        code = int(spec.get("code", 0))
        delay = float(spec.get("delay_seconds", 0))
        if code == 0 and delay <= 0:
            raise ValueError("a fault needs a status code, a delay, or both")
        if code and not 400 <= code <= 599:
            raise ValueError("code must be an HTTP error status (400-599)")
        times = int(spec.get("times", 1))
        if times == 0 or times < -1:
            raise ValueError("times must be positive, or -1 for always")
        fault = Fault(
            id=next(self._ids),
            verb=verb,
            resource=str(spec.get("resource", "*")),
            group=spec.get("group"),
            namespace=spec.get("namespace"),
            name=spec.get("name"),
            subresource=spec.get("subresource"),
            code=code,
            times=times,
            delay_seconds=delay,
            message=str(spec.get("message") or f"injected fault ({code or 'delay'})"),
        )
        self._faults.append(fault)
        return fault.id

    def clear(self) -> None:
        self._faults.clear()

    def describe(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self._faults]

    async def apply(self, verb: str, rt: ResourceType, ns: str, name: str, sub: str) -> None:
        for f in self._faults:
            if f.matches(verb, rt, ns, name, sub):
                f.hits += 1
                if f.times > 0:
                    f.times -= 1
                if f.delay_seconds:
                    await asyncio.sleep(f.delay_seconds)
                if f.code:
                    err = StatusError(f.code, f.message, reason=REASONS.get(f.code, "InternalError"))
                    if f.code == 429:
                        err.details = {"retryAfterSeconds": 1}
                    raise err
                return
