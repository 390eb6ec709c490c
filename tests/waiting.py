"""Waiting on conditions with deadlines (never a bare sleep as synchronisation)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition") -> T:
    """Call `probe` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


async def wait_for_async(probe: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, interval: float = 0.1,  # noqa: ASYNC109
                         what: str = "condition") -> T:
    """`wait_for` for probes that are coroutines (Temporal client calls inside async tests)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
