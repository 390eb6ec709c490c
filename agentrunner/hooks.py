"""Phase hooks: code that runs before, after or on the failure of each phase of the loop.

The phases and their failure rules are the reactive-agents seed's (its 10-phase ExecutionEngine and lifecycle
hooks), as SPEC §9 states them:

- a failing ``before`` hook skips the phase, and the phase's ``on-error`` hooks run;
- a failing ``after`` hook is logged and changes nothing;
- a failing ``on-error`` hook is logged and never masks the original error.

Hooks run in registration order. They register in code (``HookRegistry.register``) or as installed entry points
of the group ``agentrun.phase_hooks``: each entry point is a callable taking the registry. The policy check and the
usage accounting are hooks themselves (agentrunner/loop.py registers them first).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

log = logging.getLogger(__name__)

PHASES = ("bootstrap", "guardrail", "cost-route", "strategy", "think", "act", "observe", "verify", "memory-flush",
          "complete")
TIMINGS = ("before", "after", "on-error")
ENTRY_POINT_GROUP = "agentrun.phase_hooks"
Timing = Literal["before", "after", "on-error"]
T = TypeVar("T")


@dataclass
class PhaseContext:
    """What a hook sees: the phase, the round, the tool call of an ``act`` phase, the run's state, and the error
    (for ``on-error``), and a person's decision on the call (``approval``, SPEC §10). ``data`` is for hooks to share
    values across phases."""

    phase: str
    round: int = 0
    call: Any = None
    approval: Any = None  # an ``act`` phase's decision by a person on this call (agentrunner/approvals.py), if any
    turn: Any = None
    result: Any = None
    error: BaseException | None = None
    run: Any = None
    data: dict[str, Any] = field(default_factory=dict)


Hook = Callable[[PhaseContext], Awaitable[None] | None]


class StopRun(Exception):
    """Raised by a hook to end the run with this error. Not a hook failure: no phase rule applies to it."""


@dataclass
class Skipped(Generic[T]):
    """A phase a failing ``before`` hook skipped; ``error`` is that hook's exception."""

    error: BaseException


@dataclass
class _Entry:
    name: str
    fn: Hook


class HookRegistry:
    def __init__(self) -> None:
        self._hooks: dict[tuple[str, str], list[_Entry]] = {}

    def register(self, phase: str, timing: Timing, fn: Hook, *, name: str = "") -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}: one of {', '.join(PHASES)}")
        if timing not in TIMINGS:
            raise ValueError(f"unknown timing {timing!r}: one of {', '.join(TIMINGS)}")
        self._hooks.setdefault((phase, timing), []).append(_Entry(name or getattr(fn, "__name__", "hook"), fn))

    def load_entry_points(self) -> list[str]:
        """Register the installed hooks of ENTRY_POINT_GROUP; returns their names. A plug-in that fails to load is
        logged and left out."""
        from importlib.metadata import entry_points

        loaded = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()(self)
            except Exception:
                log.exception("phase hook plug-in %s could not be loaded: left out", ep.name)
                continue
            loaded.append(ep.name)
        return loaded

    async def _call(self, entry: _Entry, ctx: PhaseContext) -> None:
        out = entry.fn(ctx)
        if inspect.isawaitable(out):
            await out

    async def _on_error(self, phase: str, ctx: PhaseContext, error: BaseException) -> None:
        ctx.error = error
        for entry in self._hooks.get((phase, "on-error"), []):
            try:
                await self._call(entry, ctx)
            except Exception:
                log.exception("on-error hook %s of phase %s failed (the original error stands: %s)", entry.name,
                              phase, error)

    async def run(self, phase: str, ctx: PhaseContext, body: Callable[[], Awaitable[T]]) -> T | Skipped[T]:
        """Run the phase's body between its hooks, with the seed's failure rules."""
        ctx.phase = phase
        for entry in self._hooks.get((phase, "before"), []):
            try:
                await self._call(entry, ctx)
            except StopRun:
                raise
            except Exception as exc:
                log.info("phase %s skipped: its before hook %s failed: %s", phase, entry.name, exc)
                await self._on_error(phase, ctx, exc)
                return Skipped(exc)
        try:
            result = await body()
        except StopRun:
            raise
        except Exception as exc:
            await self._on_error(phase, ctx, exc)
            raise
        ctx.result = result
        for entry in self._hooks.get((phase, "after"), []):
            try:
                await self._call(entry, ctx)
            except StopRun:
                raise
            except Exception:
                log.exception("after hook %s of phase %s failed (nothing changes)", entry.name, phase)
        return result
