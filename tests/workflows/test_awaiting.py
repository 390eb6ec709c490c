"""to_the_end: a step cancelled meanwhile still runs to its end, and the cancellation is raised after."""

from __future__ import annotations

import asyncio

import pytest

from workflows.awaiting import to_the_end


async def test_a_step_cancelled_meanwhile_finishes_and_the_cancellation_follows() -> None:
    done: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def step() -> None:
        started.set()
        await release.wait()  # a plain await here would be cancelled, and the step never finish
        done.append("step")

    outer = asyncio.ensure_future(to_the_end(step()))
    await started.wait()
    outer.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert done == ["step"]


async def test_a_step_not_cancelled_just_runs() -> None:
    done: list[str] = []

    async def step() -> None:
        done.append("step")

    await to_the_end(step())
    assert done == ["step"]
