"""The `SympoziumSchedule` resource (SPEC §1.4, §6) and how it maps onto a Temporal Schedule.

Pure functions only: `plan_schedule` validates a spec (cron, time zone, catch-up window)
into a `SchedulePlan` the bridge turns into a Temporal Schedule, raising `FieldProblem`
naming the field for anything invalid, so a bad schedule gets `phase: Error` and creates
nothing. `run_name` fixes the name of the run a tick creates, so a tick can never create two.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, BaseModel, Field, ValidationError

from .base import FieldProblem, K8sModel
from .bounds import TASK_MAX_BYTES, text_schema
from .duration import parse_duration


class ScheduleSpec(K8sModel):
    # `instanceRef` and `input` are the older names Sympozium's docs still show (as on AgentRun); the CRD keeps
    # them (models/crds.py) and presence is checked by `plan_schedule`, so either spelling works.
    agent_ref: str = Field("", validation_alias=AliasChoices("agentRef", "instanceRef", "agent_ref"),
                           serialization_alias="agentRef")
    schedule: str
    task: Annotated[str, text_schema(TASK_MAX_BYTES)] = Field("", validation_alias=AliasChoices("task", "input"),
                                                              serialization_alias="task")
    type: Literal["heartbeat", "scheduled", "sweep"] = "scheduled"
    suspend: bool = False
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = "Forbid"
    # New: IANA time zone of the cron (Sympozium uses the controller's local time).
    timezone: str = "UTC"
    # New: how late a tick may still start after downtime (Go duration); unset = no limit.
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
    observed_generation: int | None = None
    conditions: list[dict[str, str]] = Field(default_factory=list)

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ScheduleStatus:
        """The status of a schedule object as read; a field that does not fit (written by someone else) reads as
        unset rather than failing the reader."""
        raw = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            bad = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
            return cls.model_validate({k: v for k, v in (raw or {}).items() if k not in bad})

    def fields(self) -> dict[str, Any]:
        """The fields this status was given, camelCase, None included: a merge patch's null removes a field (a
        `nextRunTime` that no longer applies)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def merged_into(self, stored: dict[str, Any]) -> dict[str, Any]:
        """A stored status with these fields written over it, as a merge patch of them would leave it."""
        return {k: v for k, v in {**stored, **self.fields()}.items() if v is not None}


class ScheduleRef(BaseModel):
    """Identity of a SympoziumSchedule object; the Temporal Schedule's ID is derived from it."""

    namespace: str
    name: str
    uid: str


class SchedulePlan(BaseModel):
    """A validated schedule: exactly one of `cron` and `every_seconds` is set."""

    cron: str | None = None
    every_seconds: int | None = None
    timezone: str = "UTC"
    catchup_seconds: int | None = None
    overlap: Literal["Forbid", "Allow", "Replace"] = "Forbid"
    paused: bool = False
    trigger_immediately: bool = True


def temporal_schedule_id(ref: ScheduleRef) -> str:
    """One Temporal Schedule per schedule object; a recreated name (new uid) is a new schedule."""
    return f"sympozium-schedule/{ref.namespace}/{ref.name}/{ref.uid}"


def tick_workflow_id(ref: ScheduleRef) -> str:
    """Prefix of the tick workflows' IDs (Temporal appends the tick time)."""
    return f"agentrun-tick/{ref.namespace}/{ref.name}"


# robfig/cron descriptors, as Sympozium (Go) accepts them.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, {n: i + 1 for i, n in enumerate(
               ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
           ("day of week", 0, 7, {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}))
_ITEM = re.compile(r"^(\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/([0-9]+))?$")


def _value(text: str, field: str, lo: int, hi: int, names: dict[str, int]) -> int:
    v = names.get(text) if text in names else (int(text) if text.isdigit() else None)
    if v is None or not lo <= v <= hi:
        raise ValueError(f"{field} {text!r} is not in {lo}-{hi}")
    return v


def validate_cron(expr: str) -> str:
    """A 5-field cron (or a descriptor) in the normal form Temporal accepts; ValueError if invalid."""
    text = " ".join(expr.lower().split())
    if text.startswith("@"):
        if text not in DESCRIPTORS:
            raise ValueError(f"unknown descriptor {expr!r} (use @hourly, @daily, @weekly, @monthly, @yearly "
                             "or @every <duration>)")
        return DESCRIPTORS[text]
    parts = text.split(" ")
    if len(parts) != 5:
        raise ValueError(f"{expr!r} must have 5 fields (minute hour day-of-month month day-of-week), "
                         f"found {len(parts)}")
    out = []
    for part, (field, lo, hi, names) in zip(parts, _FIELDS, strict=True):
        for item in part.split(","):
            m = _ITEM.match(item)
            if m is None or item == "":
                raise ValueError(f"{field} {item!r} is not a cron field")
            rng, step = m.group(1), m.group(2)
            if step is not None and int(step) == 0:
                raise ValueError(f"{field} step in {item!r} must be positive")
            if rng == "*":
                continue
            if "-" in rng:
                a, b = rng.split("-", 1)
                va, vb = _value(a, field, lo, hi, names), _value(b, field, lo, hi, names)
                if va > vb:
                    raise ValueError(f"{field} range {rng!r} is backwards")
            else:
                _value(rng, field, lo, hi, names)
        # Month and weekday names as numbers: the one spelling every cron parser reads alike.
        out.append(re.sub(r"[a-z]+", lambda m, n=names: str(n.get(m.group(0), m.group(0))), part))  # type: ignore[misc]
    return " ".join(out)


def schedule_agent(spec: dict[str, Any]) -> str:
    """The Agent a raw schedule spec names, by its current or its older field name."""
    return str(spec.get("agentRef") or spec.get("instanceRef") or "")


def schedule_task(spec: dict[str, Any]) -> str:
    """The task of a raw schedule spec, by its current or its older field name."""
    return str(spec.get("task") or spec.get("input") or "")


def plan_schedule(spec: ScheduleSpec) -> SchedulePlan:
    """Validate a schedule spec; raises FieldProblem naming the field."""
    if not spec.agent_ref.strip():
        raise FieldProblem("spec.agentRef", "required: the name of an Agent in the same namespace "
                                            "(spec.instanceRef is accepted as its older name)")
    if not spec.task.strip():
        raise FieldProblem("spec.task", "required: the task each run is given (spec.input is accepted as its "
                                        "older name)")
    plan = SchedulePlan(overlap=spec.concurrency_policy, paused=spec.suspend,
                        trigger_immediately=spec.first_tick == "immediate")
    text = spec.schedule.strip()
    if text.lower().startswith("@every"):
        try:
            every = parse_duration(text[len("@every"):].strip())
        except ValueError as e:
            raise FieldProblem("spec.schedule", str(e)) from None
        if every.total_seconds() < 1:
            raise FieldProblem("spec.schedule", f"@every interval must be at least 1s, got {text!r}")
        plan.every_seconds = round(every.total_seconds())
    else:
        try:
            plan.cron = validate_cron(text)
        except ValueError as e:
            raise FieldProblem("spec.schedule", str(e)) from None
    tz = spec.timezone or "UTC"
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise FieldProblem("spec.timezone", f"{tz!r} is not an IANA time zone (e.g. Europe/Paris)") from None
    plan.timezone = tz
    if spec.catchup_window:
        try:
            window = parse_duration(spec.catchup_window)
        except ValueError as e:
            raise FieldProblem("spec.catchupWindow", str(e)) from None
        if window.total_seconds() <= 0:
            raise FieldProblem("spec.catchupWindow", f"must be positive, got {spec.catchup_window!r}")
        plan.catchup_seconds = max(1, round(window.total_seconds()))
    return plan


def run_name(schedule: str, tick: datetime, timezone: str) -> str:
    """`<schedule>-<YYYYMMDDHHMM>` of the tick in the schedule's zone (SPEC §6).

    A tick off the minute — the immediate first tick, a trigger, a sub-minute interval — adds its seconds
    (`<YYYYMMDDHHMMSS>`), so two ticks of one minute stay distinct runs."""
    local = tick.astimezone(ZoneInfo(timezone or "UTC"))
    stamp = local.strftime("%Y%m%d%H%M%S" if local.second else "%Y%m%d%H%M")
    return f"{schedule}-{stamp}"


# -- the tick workflow's typed I/O ---------------------------------------------------------------


class ScheduledTick(BaseModel):
    """The Temporal Schedule action's argument: which schedule ticked and how to treat the tick."""

    schedule: ScheduleRef
    timezone: str = "UTC"
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = "Forbid"
    catchup_seconds: int | None = None


class TickRequest(BaseModel):
    schedule: ScheduleRef
    tick_time: str  # RFC 3339, UTC
    timezone: str = "UTC"
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = "Forbid"
    tick_workflow_id: str = ""


class RunName(BaseModel):
    namespace: str
    name: str
    uid: str = ""


class TickPlan(BaseModel):
    """What a tick will do: create `run_name`, after removing `replace`; or nothing, and why."""

    run_name: str
    skip_reason: str | None = None
    replace: list[RunName] = Field(default_factory=list)


class RemoveRuns(BaseModel):
    runs: list[RunName]
    reason: str


class TickRecord(BaseModel):
    schedule: ScheduleRef
    tick_time: str
    run_name: str


class TickResult(BaseModel):
    run_name: str = ""
    phase: str = ""
    skipped: str | None = None
    error: str | None = None


class TickCreated(BaseModel):
    """The run a tick created (or found it had created already), or why it created none."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    skip_reason: str | None = None
