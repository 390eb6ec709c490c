"""Waiting for a run's Job without polling it tightly (SPEC §3): the bridge's signal, a slow look, deadlines.

The bridge signals `job_finished` when one of the run's Jobs ends; a slow fallback look covers a
missed signal, and the watch looks sooner while a hook runs, so a hook's own timeout is kept. It
stops the Job when the gate's verdict came, when a hook, gateTimeout or the Job's deadline ran out.
Used by AgentRunWorkflow, which gives it its steps to look at and to stop a Job (activities); this
only decides when to call them, on workflow time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.names import hook_container, hook_of
    from models.resolve import ResolvedHook
    from models.run import Stopped
    from models.steps import HookOutcome, JobFinished, JobRef, JobReport, JobState
    from models.timestamps import parse_rfc3339

    from .awaiting import wait_until


class Observe(Protocol):
    """The step that looks at a Job (with the bridge's signal, if one came; `timed_out`: what it said so far)."""

    def __call__(self, job: JobRef, signal: JobFinished | None, *, timed_out: bool = False) -> Awaitable[JobReport]:
        ...


# The step that stops (deletes) a Job, and why.
Stop = Callable[[JobRef, str], Awaitable[None]]


class JobWatch:
    def __init__(self, observe: Observe, stop: Stop) -> None:
        self.finished: dict[str, JobFinished] = {}  # Job uid -> the bridge's signal
        self.fallback = 60  # seconds between looks at a Job when no signal comes
        self._observe = observe
        self._stop = stop

    async def wait(self, job: JobRef, *, deadline: timedelta, hooks: list[ResolvedHook] | None = None,
                   stop_when: Callable[[], bool] | None = None, until: datetime | None = None) -> JobReport:
        """Wait for the Job: woken by the bridge's signal, or by the slow fallback look, or a deadline.

        With `stop_when` (the gate's verdict), the Job is stopped as soon as it holds; at `until`
        (gateTimeout) it is stopped whatever it does."""
        end = workflow.now() + deadline
        if until is not None:
            end = min(end, until)
        by_container = {hook_container(job.component, h.name): h for h in hooks or []}
        hook_end: datetime | None = None
        while True:
            now = workflow.now()
            wake = min(float(self.fallback), (end - now).total_seconds())
            if by_container:
                # While hooks run, look at least as often as the shortest hook timeout allows.
                wake = min(wake, float(min(h.timeout_seconds for h in by_container.values())))
            if hook_end is not None:
                wake = min(wake, (hook_end - now).total_seconds())
            await wait_until(lambda: job.uid in self.finished or bool(stop_when and stop_when()),
                             seconds=max(wake, 0.001))
            if stop_when is not None and stop_when() and job.uid not in self.finished:
                await self._stop(job, "verdict given")
                return JobReport(state=JobState(job=job, finished=True, succeeded=True, reason=Stopped.VERDICT))
            report = await self._observe(job, self.finished.get(job.uid))
            state = report.state
            if state.finished:
                return report
            now = workflow.now()
            hook_end = None
            running = state.running_hook
            if running is not None and running.container in by_container:
                started = parse_rfc3339(running.started_at)
                assert started is not None
                hook_end = started + timedelta(seconds=by_container[running.container].timeout_seconds)
                if now >= hook_end:
                    await self._stop(job, "hook timeout")
                    return JobReport(state=state.model_copy(update={"finished": True, "reason": Stopped.HOOK_TIMEOUT}))
            if until is not None and now >= until:
                await self._stop(job, "gateTimeout")
                return JobReport(state=state.model_copy(update={"finished": True, "reason": Stopped.GATE_TIMEOUT}))
            if now >= end:
                if job.component == "agent-run":
                    report = await self._observe(job, None, timed_out=True)  # what the agent said so far
                await self._stop(job, "deadline")
                return report.model_copy(update={"state": state.model_copy(update={
                    "finished": True, "reason": Stopped.DEADLINE})})


def hooks_outcome(job: JobRef, report: JobReport, hooks: list[ResolvedHook], *,
                  gate_timeout_seconds: int) -> HookOutcome:
    """What `job`, a Job of hooks, came to: its own report, or why the watch stopped it (the verdict
    came, gateTimeout, or which hook ran out of time)."""
    if report.state.reason == Stopped.VERDICT:
        return HookOutcome(ok=True, message="stopped: the gate has its verdict")
    if report.state.reason == Stopped.GATE_TIMEOUT:
        return HookOutcome(ok=False, failed_hook=hooks[0].name, exit_code=124,
                           message=f"stopped: gateTimeout ({gate_timeout_seconds}s) reached")
    if report.hook is not None:
        return report.hook
    # Stopped by the workflow: which hook ran out of time is known from the wait.
    running = hook_of(report.state.running_hook.container) if report.state.running_hook else ""
    hook = next((h for h in hooks if h.name == running), None)
    if hook is None:
        return HookOutcome(ok=False, exit_code=124, message=f"Job {job.name} did not finish in time")
    return HookOutcome(ok=False, failed_hook=hook.name, exit_code=124,
                       message=f'hook "{hook.name}" timed out after {hook.timeout_seconds}s')
