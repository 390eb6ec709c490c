"""Schedule specs: what becomes a Temporal Schedule, what is an Error, and how runs are named."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.base import FieldProblem
from models.bounds import TASK_MAX_BYTES
from models.crds import all_crds
from models.schedule import (
    ScheduleSpec,
    plan_schedule,
    run_name,
    schedule_agent,
    schedule_task,
    validate_cron,
)


def spec(cron: str, **fields: object) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"agentRef": "a", "schedule": cron, "task": "t", **fields})


@pytest.mark.parametrize(("cron", "normal"), [
    ("*/15 * * * *", "*/15 * * * *"),
    ("0 9 * * MON-FRI", "0 9 * * 1-5"),
    ("0 0 1 jan,jul *", "0 0 1 1,7 *"),
    ("0  0 31 2 *", "0 0 31 2 *"),  # valid, though February 31st never comes
    ("@hourly", "0 * * * *"),
    ("@daily", "0 0 * * *"),
    ("5-10/2 0-23 * * 0,7", "5-10/2 0-23 * * 0,7"),
])
def test_valid_crons_are_normalised(cron: str, normal: str) -> None:
    assert validate_cron(cron) == normal


@pytest.mark.parametrize(("cron", "message"), [
    ("61 * * * *", "minute '61' is not in 0-59"),
    ("* 24 * * *", "hour '24' is not in 0-23"),
    ("* * 0 * *", "day of month '0' is not in 1-31"),
    ("* * * 13 *", "month '13' is not in 1-12"),
    ("* * * * 8", "day of week '8' is not in 0-7"),
    ("* * *", "must have 5 fields"),
    ("*/0 * * * *", r"step in .\*/0. must be positive"),
    ("10-5 * * * *", "range '10-5' is backwards"),
    ("@fortnightly", "unknown descriptor"),
    ("* * * * funday", "day of week 'funday'"),
])
def test_invalid_crons_say_what_is_wrong(cron: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_cron(cron)


def test_plan_carries_zone_window_policy_and_suspend() -> None:
    plan = plan_schedule(spec("0 9 * * *", timezone="Europe/Paris", catchupWindow="5m",
                              concurrencyPolicy="Replace", suspend=True, firstTick="afterInterval"))
    assert (plan.cron, plan.timezone, plan.catchup_seconds) == ("0 9 * * *", "Europe/Paris", 300)
    assert (plan.overlap, plan.paused, plan.trigger_immediately) == ("Replace", True, False)


def test_every_interval_schedules_are_plans_with_seconds() -> None:
    assert plan_schedule(spec("@every 1h30m")).every_seconds == 5400
    with pytest.raises(FieldProblem, match=r"spec.schedule: .*at least 1s"):
        plan_schedule(spec("@every 10ms"))
    with pytest.raises(FieldProblem, match=r"spec\.schedule: invalid duration"):
        plan_schedule(spec("@every often"))


@pytest.mark.parametrize(("fields", "field"), [
    ({"schedule": "0 25 * * *"}, "spec.schedule"),
    ({"timezone": "Mars/Olympus"}, "spec.timezone"),
    ({"timezone": "../etc/passwd"}, "spec.timezone"),
    ({"catchupWindow": "soon"}, "spec.catchupWindow"),
    ({"catchupWindow": "-5m"}, "spec.catchupWindow"),
])
def test_invalid_specs_name_the_field(fields: dict[str, str], field: str) -> None:
    raw = {"agentRef": "a", "schedule": "0 9 * * *", "task": "t", **fields}
    with pytest.raises(FieldProblem) as e:
        plan_schedule(ScheduleSpec.model_validate(raw))
    assert e.value.field == field


def test_run_names_use_the_tick_in_the_schedules_zone() -> None:
    tick = datetime(2026, 7, 1, 7, 0, tzinfo=UTC)
    assert run_name("report", tick, "Europe/Paris") == "report-202607010900"  # CEST, UTC+2
    assert run_name("report", tick, "UTC") == "report-202607010700"
    # Sub-minute interval ticks keep their seconds, so two ticks in one minute are two runs.
    assert run_name("beat", datetime(2026, 7, 1, 7, 0, 42, tzinfo=UTC), "UTC") == "beat-20260701070042"


def test_instance_ref_and_input_are_the_older_names_of_agent_ref_and_task() -> None:
    older = ScheduleSpec.model_validate({"instanceRef": "a", "schedule": "@hourly", "input": "t"})
    assert (older.agent_ref, older.task) == ("a", "t")
    assert older.wire()["agentRef"] == "a" and older.wire()["task"] == "t"
    # Where both are given, the current name wins, as on AgentRun.
    both = ScheduleSpec.model_validate({"agentRef": "new", "instanceRef": "old", "schedule": "@hourly",
                                        "task": "new task", "input": "old task"})
    assert (both.agent_ref, both.task) == ("new", "new task")
    assert schedule_agent({"instanceRef": "a"}) == "a" and schedule_agent({"agentRef": "b", "instanceRef": "a"}) == "b"
    assert schedule_task({"input": "t"}) == "t" and schedule_task({}) == ""


@pytest.mark.parametrize(("fields", "named"), [
    ({"schedule": "@hourly", "task": "t"}, "spec.agentRef"),
    ({"agentRef": "a", "schedule": "@hourly"}, "spec.task"),
    ({"instanceRef": "a", "schedule": "@hourly", "input": "  "}, "spec.task"),
])
def test_a_schedule_without_an_agent_or_a_task_is_refused_naming_the_field(fields: dict[str, str], named: str) -> None:
    with pytest.raises(FieldProblem) as e:
        plan_schedule(ScheduleSpec.model_validate(fields))
    assert e.value.field == named
    assert "required" in str(e.value)


def test_the_crd_keeps_instance_ref_and_input_so_they_are_not_pruned() -> None:
    crd = all_crds()["sympoziumschedules.yaml"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["instanceRef"] == {"type": "string"}
    # the task's schema, its bound (models/bounds.py) included
    assert spec["properties"]["input"] == {"type": "string", "maxLength": TASK_MAX_BYTES}
    assert spec["required"] == ["schedule"]
