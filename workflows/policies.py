"""Timeouts and retry policies of the AgentRun workflow's activities, in one place, and the one way a run's
step is executed with them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

S = TypeVar("S")
A = TypeVar("A")
R = TypeVar("R")

# Kubernetes calls: transient failures (409/429/5xx, connection errors) retry with backoff, for
# long enough to ride out an API server restart; permanent ones are non-retryable errors.
KUBE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=0,  # bounded by schedule_to_close below
)
KUBE_CALL = timedelta(seconds=30)  # one attempt
KUBE_STEP = timedelta(minutes=10)  # all attempts of one step

# Cleanup must eventually happen; it retries for longer.
CLEANUP_STEP = timedelta(hours=1)

# Events: NATS being down never fails a run; each event is retried for up to an hour, so events
# published late still arrive, and the run's own outcome never waits on them.
EVENT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=30), maximum_attempts=0)
EVENT_CALL = timedelta(seconds=10)
EVENT_BUDGET = timedelta(hours=1)

# Extra time after the agent's own deadline before the workflow stops waiting for the Job.
AGENT_DEADLINE_GRACE = timedelta(seconds=30)
# An agent started again after a wait (SPEC §10) has what is left of its active time (its RUN_TIMEOUT counts it from
# its journal), and its Job's activeDeadlineSeconds this much more: its pod's start and the agent's cold start, which
# the journal does not count.
AGENT_START_GRACE = timedelta(seconds=30)

# Schedule ticks: removing replaced runs waits for their own cleanup (which retries for up to
# CLEANUP_STEP), heartbeating while it waits.
REMOVE_RUNS_STEP = timedelta(hours=1)
REMOVE_RUNS_HEARTBEAT = timedelta(seconds=30)

# Run-history pruning: one activity lists and deletes, heartbeating per page and per delete, so a
# stuck attempt is noticed within the heartbeat timeout and retried; a pass gives up after the step
# budget and the next scheduled pass starts afresh.
PRUNE_HEARTBEAT = timedelta(minutes=2)
PRUNE_CALL = timedelta(minutes=15)
PRUNE_STEP = timedelta(hours=1)

# maxConcurrent slots. Asking for a slot is one call to Temporal itself (update-with-start of the
# Agent's slots workflow), retried like a Kubernetes call; a run that cannot even ask fails.
SLOT_RETRY = KUBE_RETRY
SLOT_CALL = timedelta(seconds=30)  # one attempt
SLOT_STEP = timedelta(minutes=10)  # all attempts of one request
# A waiting run asks again this often, so it finds its place again if its Agent's slots workflow
# was terminated (a fresh one starts); asking again is otherwise harmless.
SLOT_REASK = timedelta(minutes=5)
# The slots workflow's look at its holders (are their workflows still running?) gives up after
# this and tries again at its next check.
SLOT_CHECK_STEP = timedelta(minutes=1)
# With no holder and no waiter for this long, an Agent's slots workflow ends (the next run starts
# a new one).
SLOTS_IDLE = timedelta(minutes=5)


async def step(fn: Callable[[S, A], Awaitable[R]], arg: A, summary: str, *, long: bool = False,
               local: bool = False) -> R:
    """A run's step: one activity, retried while its failure is transient (KUBE_RETRY), each attempt within
    KUBE_CALL and all of them within KUBE_STEP (CLEANUP_STEP when `long`). `local`: run as a local activity inside
    the current workflow task: a read with no effect, or one idempotent write (a run's final status once nothing
    of it is left to clean up)."""
    schedule_to_close = CLEANUP_STEP if long else KUBE_STEP
    if not local:
        return await workflow.execute_activity_method(fn, arg, summary=summary, start_to_close_timeout=KUBE_CALL,
                                                      schedule_to_close_timeout=schedule_to_close,
                                                      retry_policy=KUBE_RETRY)
    try:
        return await workflow.execute_local_activity_method(fn, arg, summary=summary, start_to_close_timeout=KUBE_CALL,
                                                            schedule_to_close_timeout=schedule_to_close,
                                                            retry_policy=KUBE_RETRY)
    except ApplicationError as e:
        # A local activity's own permanent failure arrives unwrapped: the run sees the same ActivityError (the
        # step's error as its cause) whichever way the step ran.
        raise ActivityError(e.message, scheduled_event_id=0, started_event_id=0, identity="",
                            activity_type=getattr(fn, "__name__", ""), activity_id="", retry_state=None) from e
