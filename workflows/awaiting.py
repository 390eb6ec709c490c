"""Two ways of waiting that a workflow step needs, without exceptions as its control flow.

`wait_until` is `workflow.wait_condition` with a timeout that answers whether the condition came true
(the same timer command); `to_the_end` finishes a step even if the workflow is cancelled meanwhile, and
honours the cancellation once the step is done (cleanup must not stop half way: a deleted run's object
would keep its finalizer forever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow


async def wait_until(condition: Callable[[], bool], *, seconds: float) -> bool:
    """Wait durably for `condition`, at most `seconds`; whether it came true."""
    try:
        await workflow.wait_condition(condition, timeout=seconds)
    except TimeoutError:
        return False
    return True


async def to_the_end(step: Awaitable[None]) -> None:
    """Run `step` to its end even if the caller is cancelled meanwhile; that cancellation is raised after."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise
