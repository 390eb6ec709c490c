"""The `SympoziumSchedule` resource (SPEC §1.4): a cron that creates AgentRuns."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import K8sModel


class ScheduleSpec(K8sModel):
    agent_ref: str
    schedule: str
    task: str
    type: Literal["heartbeat", "scheduled", "sweep"] = "scheduled"
    suspend: bool = False
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = "Forbid"
    # New: IANA time zone of the cron (Sympozium uses the controller's local time).
    timezone: str = "UTC"
    # New: how far back missed ticks are still run after downtime (Go duration).
    catchup_window: str | None = None
    first_tick: Literal["immediate", "afterInterval"] = "immediate"
    include_memory: bool = True


class ScheduleStatus(K8sModel):
    phase: Literal["Active", "Suspended", "Error"] | None = None
    last_run_time: str | None = None
    next_run_time: str | None = None
    last_run_name: str | None = None
    total_runs: int = 0
    message: str | None = None
    conditions: list[dict[str, str]] = Field(default_factory=list)
