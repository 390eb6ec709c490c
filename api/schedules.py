"""Schedules over HTTP (SPEC §7, §1.4, §6): SympoziumSchedule CRUD, pause/resume, trigger, backfill.

The object is the source of truth. Create, edit, pause and resume write the object and the bridge
mirrors it into its Temporal Schedule; writing to Temporal directly would be undone by the bridge's
next sync. Only what the object cannot express goes to Temporal: a manual trigger and a backfill,
both on the Temporal Schedule the bridge made for this very object (its ID carries the uid).

Specs are checked with the bridge's own `plan_schedule` before they are written, so a bad cron,
zone or catch-up window is a 422 naming the field instead of an object that goes `phase: Error`.

Backfill runs every tick of the schedule in `[start, end)`: a tick exactly at `start` runs, one
exactly at `end` does not, so consecutive ranges never run a tick twice. Temporal's own backfill
runs the ticks in `(start_at - 1ms, end_at]` (measured on the dev server), so the API passes
`start` rounded up to the second (ticks fall on whole seconds) and `end - 1µs`. The range must
lie in the past, span at most `MAX_BACKFILL_SPAN` and hold at most `MAX_BACKFILL_TICKS` ticks:
each tick is a run of the agent, and a Temporal Schedule buffers 1000 pending starts by default.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Body, HTTPException, Response
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy
from temporalio.service import RPCError, RPCStatusCode

from kube import Conflict, NotFound
from kube.resources import sympozium
from models.base import FieldProblem, parse
from models.bounds import TASK_MAX_BYTES
from models.names import AGENTRUNS, AGENTS, API_VERSION, SCHEDULES
from models.schedule import (
    ScheduleRef,
    ScheduleSpec,
    ScheduleStatus,
    plan_schedule,
    run_name,
    schedule_agent,
    temporal_schedule_id,
)
from models.timestamps import rfc3339_exact

from .auth import Caller
from .deps import CallerDep, Namespace, State, StateDep

MAX_BACKFILL_TICKS = 1000
MAX_BACKFILL_SPAN = timedelta(days=366)
# Temporal's backfill range includes its end; ours does not. Its timestamps carry nanoseconds.
JUST_BEFORE = timedelta(microseconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# With Forbid and Replace the ticks of a backfill run one after another (none is skipped or
# cancels another); with Allow they may overlap, as that schedule's own ticks do.
BACKFILL_OVERLAP = {"Forbid": ScheduleOverlapPolicy.BUFFER_ALL, "Replace": ScheduleOverlapPolicy.BUFFER_ALL,
                    "Allow": ScheduleOverlapPolicy.ALLOW_ALL}
# A tick's run is `<schedule>-<YYYYMMDDHHMMSS>` and carries its name as a label value (at most 63
# characters), so a schedule's name leaves room for the 15-character suffix.
MAX_NAME = 63 - len("-YYYYMMDDHHMMSS")
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
REQUIRED = ("agentRef", "schedule", "task")
TRIGGERED = {
    "Forbid": "a tick was started now; it creates no run while a run of this schedule is still active "
              "(concurrencyPolicy Forbid)",
    "Allow": "a tick was started now; it creates a run named after the tick time",
    "Replace": "a tick was started now; it replaces a run of this schedule that is still active "
               "(concurrencyPolicy Replace)",
}

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"])

ScheduleType = Literal["heartbeat", "scheduled", "sweep"]
Overlap = Literal["Forbid", "Allow", "Replace"]
FirstTick = Literal["immediate", "afterInterval"]
AgentName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
Text = Annotated[str, Field(min_length=1)]
# A schedule's task, bounded as the CRD bounds it (models/bounds.py): each tick's run carries it.
Task = Annotated[str, Field(min_length=1, max_length=TASK_MAX_BYTES)]


class CreateSchedule(BaseModel):
    """A new SympoziumSchedule: `name` plus its spec (SPEC §1.4); omitted fields take the CRD's defaults."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME, pattern=DNS_LABEL)
    # instanceRef / input: the older names Sympozium's docs still show; stored under the current names.
    agentRef: AgentName = Field(validation_alias=AliasChoices("agentRef", "instanceRef"))
    schedule: Text = Field(description="5-field cron, a descriptor (@hourly, ...) or @every <duration>")
    task: Task = Field(validation_alias=AliasChoices("task", "input"))
    type: ScheduleType | None = None
    suspend: bool | None = None
    concurrencyPolicy: Overlap | None = None
    timezone: str | None = Field(None, description="IANA time zone of the cron (default UTC)")
    catchupWindow: str | None = Field(None, description="how late a missed tick may still run (Go duration)")
    firstTick: FirstTick | None = None
    includeMemory: bool | None = None


class ScheduleChanges(BaseModel):
    """A JSON merge patch of the spec: given fields replace, `null` resets an optional field."""

    model_config = ConfigDict(extra="forbid")

    agentRef: AgentName | None = Field(None, validation_alias=AliasChoices("agentRef", "instanceRef"))
    schedule: Text | None = None
    task: Task | None = Field(None, validation_alias=AliasChoices("task", "input"))
    type: ScheduleType | None = None
    suspend: bool | None = None
    concurrencyPolicy: Overlap | None = None
    timezone: str | None = None
    catchupWindow: str | None = None
    firstTick: FirstTick | None = None
    includeMemory: bool | None = None


class BackfillRange(BaseModel):
    """RFC 3339 times with an offset; every tick in `[start, end)` runs."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime
    end: AwareDatetime


class ScheduleSummary(BaseModel):
    name: str
    namespace: str
    agent: str = ""
    schedule: str = ""
    timezone: str = "UTC"
    suspend: bool = False
    phase: str | None = None
    message: str | None = None
    last_run_time: str | None = None
    next_run_time: str | None = None
    last_run_name: str | None = None
    total_runs: int = 0


class Triggered(BaseModel):
    name: str
    namespace: str
    schedule_id: str
    detail: str


class Backfilled(BaseModel):
    name: str
    namespace: str
    schedule_id: str
    start: str
    end: str
    ticks: int
    runs: list[str] = Field(description="the runs the ticks create, named after their tick times")


def _not_found(ns: str, name: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f'schedule "{name}" not found in namespace "{ns}"')


def _summary(obj: dict[str, Any]) -> ScheduleSummary:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    st = ScheduleStatus.of(obj)
    return ScheduleSummary(
        name=meta.get("name", ""), namespace=meta.get("namespace", ""), agent=schedule_agent(spec),
        schedule=str(spec.get("schedule") or ""), timezone=str(spec.get("timezone") or "UTC"),
        suspend=bool(spec.get("suspend")), phase=st.phase, message=st.message, last_run_time=st.last_run_time,
        next_run_time=st.next_run_time, last_run_name=st.last_run_name, total_runs=st.total_runs)


def _invalid(p: FieldProblem) -> HTTPException:
    """A spec problem as FastAPI reports body problems: 422, located at the body field it names."""
    field = p.field.removeprefix("spec.")
    return HTTPException(status_code=422, detail=[{"loc": ["body", *field.split(".")], "msg": str(p),
                                                   "type": "value_error"}])


def _validate(spec: dict[str, Any]) -> None:
    """The bridge's own check, so what the API writes the bridge can mirror."""
    try:
        plan_schedule(parse(ScheduleSpec, spec, "spec"))
    except FieldProblem as p:
        raise _invalid(p) from None


async def _kube(state: State, fn: Any, *args: Any, action: str) -> dict[str, Any]:
    return cast(dict[str, Any], await state.kube.call(fn, *args, action=action))


async def _read(state: State, ns: str, name: str) -> dict[str, Any]:
    try:
        return await sympozium(state.kube, SCHEDULES).get(
            ns, name, action=f"read SympoziumSchedule {ns}/{name}")
    except NotFound as e:
        raise _not_found(ns, name) from e


async def _require_agent(state: State, ns: str, name: str) -> None:
    """The Agent must exist, under its current kind or the legacy one (SPEC §1.1)."""
    for plural in (AGENTS, "sympoziuminstances"):
        try:
            await sympozium(state.kube, plural).get(ns, name, action=f"read {plural} {ns}/{name}")
            return
        except NotFound:
            continue
    raise HTTPException(status_code=404, detail=f'agent "{name}" not found in namespace "{ns}"')


async def _patch(state: State, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return await sympozium(state.kube, SCHEDULES).patch(ns, name, body,
                                                            action=f"update SympoziumSchedule {ns}/{name}")
    except NotFound as e:
        raise _not_found(ns, name) from e


async def _may_tick(state: State, who: Caller, namespace: str, name: str) -> None:
    """A tick now (trigger, backfill) acts on the schedule and creates runs: RBAC must allow both."""
    await state.allow(who, "patch", SCHEDULES, namespace, name=name)
    await state.allow(who, "create", AGENTRUNS, namespace)


def _temporal(state: State) -> Client:
    if state.temporal is None:
        raise HTTPException(status_code=503, detail="temporal is not connected")
    return state.temporal


def _mirrored(obj: dict[str, Any]) -> str:
    """The Temporal Schedule ID of an object the bridge has mirrored as it is now; 409 otherwise."""
    meta = obj["metadata"]
    st = obj.get("status") or {}
    name = meta["name"]
    if meta.get("deletionTimestamp"):
        raise HTTPException(status_code=409, detail=f"schedule {name} is being deleted")
    # Until the bridge has mirrored the latest spec, Temporal would tick with the previous one (and
    # a phase of Error may be about a spec that was fixed since).
    if not st.get("phase") or st.get("observedGeneration") != meta.get("generation", 1):
        raise HTTPException(status_code=409, detail=f"schedule {name} is not mirrored into Temporal yet; "
                                                    "retry in a moment")
    if st.get("phase") == "Error":
        why = f": {st['message']}" if st.get("message") else ""
        raise HTTPException(status_code=409, detail=f"schedule {name} is in phase Error{why}")
    return temporal_schedule_id(ScheduleRef(namespace=meta["namespace"], name=name, uid=meta["uid"]))


def _temporal_error(e: RPCError, name: str) -> HTTPException:
    if e.status == RPCStatusCode.NOT_FOUND:
        return HTTPException(status_code=409, detail=f"schedule {name} has no Temporal Schedule (not mirrored yet, "
                                                     "or being deleted); retry in a moment")
    if e.status == RPCStatusCode.INVALID_ARGUMENT:
        return HTTPException(status_code=422, detail=f"temporal refused it: {e.message}")
    return HTTPException(status_code=503, detail=f"temporal is unavailable: {e.message}")


@router.get("", response_model=list[ScheduleSummary])
async def list_schedules(state: StateDep, who: CallerDep, namespace: Namespace = "default") -> list[ScheduleSummary]:
    await state.allow(who, "list", SCHEDULES, namespace)
    items = await sympozium(state.kube, SCHEDULES).list(
        namespace, action=f"list SympoziumSchedules in {namespace}")
    return sorted((_summary(o) for o in items.get("items", [])), key=lambda s: s.name)


@router.get("/{name}", responses={404: {"description": "no such schedule"}})
async def get_schedule(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default") -> dict[str, Any]:
    await state.allow(who, "get", SCHEDULES, namespace, name=name)
    return await _read(state, namespace, name)


@router.post("", status_code=201, responses={
    404: {"description": "the Agent does not exist"}, 409: {"description": "a schedule of that name exists"},
    422: {"description": "invalid body: unknown field, bad cron, time zone or catchupWindow (named in loc)"}})
async def create_schedule(body: CreateSchedule, state: StateDep, who: CallerDep,
                          namespace: Namespace = "default") -> dict[str, Any]:
    await state.allow(who, "create", SCHEDULES, namespace)
    spec = body.model_dump(exclude={"name"}, exclude_none=True)
    _validate(spec)
    await _require_agent(state, namespace, body.agentRef)
    obj = {"apiVersion": API_VERSION, "kind": "SympoziumSchedule",
           "metadata": {"name": body.name, "annotations": who.stamp(SCHEDULES)}, "spec": spec}
    try:
        return await sympozium(state.kube, SCHEDULES).create(
            namespace, obj, action=f"create SympoziumSchedule {namespace}/{body.name}")
    except Conflict as e:
        raise HTTPException(status_code=409,
                            detail=f'schedule "{body.name}" already exists in namespace "{namespace}"') from e


@router.patch("/{name}", responses={
    404: {"description": "no such schedule, or the new Agent does not exist"},
    422: {"description": "invalid change; the merged spec is checked as on create"}})
async def update_schedule(name: str, changes: ScheduleChanges, state: StateDep, who: CallerDep,
                          namespace: Namespace = "default") -> dict[str, Any]:
    await state.allow(who, "patch", SCHEDULES, namespace, name=name)
    given = changes.model_dump(exclude_unset=True)
    for key in REQUIRED:
        if key in given and given[key] is None:
            raise HTTPException(status_code=422, detail=[{"loc": ["body", key], "msg": f"spec.{key} is required",
                                                          "type": "missing"}])
    obj = await _read(state, namespace, name)
    if given.get("agentRef"):
        await _require_agent(state, namespace, given["agentRef"])
    # Validated against the object as read, written only if it is still that version; a concurrent
    # change (the bridge's finalizer or status) means read, merge and check again.

    def changed(obj: dict[str, Any]) -> dict[str, Any]:
        merged = {**(obj.get("spec") or {}), **given}
        obj["spec"] = {k: v for k, v in merged.items() if v is not None}
        _validate(obj["spec"])
        if set(given) - {"suspend"}:
            # What the schedule's runs are given changes: the caller becomes its author (models/authorship.py).
            meta = obj["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}), **who.stamp(SCHEDULES)}
        return obj

    try:
        stored = await sympozium(state.kube, SCHEDULES).update_with_retry(
            (namespace, name), changed, first=obj, action=f"update SympoziumSchedule {namespace}/{name}")
    except NotFound as e:
        raise _not_found(namespace, name) from e
    except Conflict as e:
        raise HTTPException(status_code=409, detail=f"schedule {name} kept changing while it was updated; retry") from e
    return stored if stored is not None else obj


@router.delete("/{name}", status_code=204, responses={404: {"description": "no such schedule"}})
async def delete_schedule(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default") -> Response:
    # The bridge's finalizer deletes the Temporal Schedule; the runs are owned by the object and go with it.
    await state.allow(who, "delete", SCHEDULES, namespace, name=name)
    try:
        await sympozium(state.kube, SCHEDULES).delete(namespace, name,
                                                      action=f"delete SympoziumSchedule {namespace}/{name}")
    except NotFound as e:
        raise _not_found(namespace, name) from e
    return Response(status_code=204)


@router.post("/{name}/pause", responses={404: {"description": "no such schedule"}})
async def pause_schedule(name: str, state: StateDep, who: CallerDep, namespace: Namespace = "default") -> dict[str, Any]:
    """Sets `spec.suspend: true`; the bridge pauses the Temporal Schedule and writes `phase: Suspended`."""
    await state.allow(who, "patch", SCHEDULES, namespace, name=name)
    return await _patch(state, namespace, name, {"spec": {"suspend": True}})


@router.post("/{name}/resume", responses={404: {"description": "no such schedule"}})
async def resume_schedule(name: str, state: StateDep, who: CallerDep,
                          namespace: Namespace = "default") -> dict[str, Any]:
    """Sets `spec.suspend: false`; the bridge unpauses the Temporal Schedule and writes `phase: Active`."""
    await state.allow(who, "patch", SCHEDULES, namespace, name=name)
    return await _patch(state, namespace, name, {"spec": {"suspend": False}})


@router.post("/{name}/trigger", status_code=202, response_model=Triggered, responses={
    404: {"description": "no such schedule"},
    409: {"description": "the schedule is in phase Error, being deleted, or not mirrored into Temporal yet"}})
async def trigger_schedule(name: str, state: StateDep, who: CallerDep,
                           namespace: Namespace = "default") -> Triggered:
    """One tick now, as if the schedule had fired (its concurrencyPolicy applies: Forbid skips it while
    a run of the schedule is active). Works on a suspended schedule too."""
    await _may_tick(state, who, namespace, name)
    obj = await _read(state, namespace, name)
    sid = _mirrored(obj)
    try:
        await _temporal(state).get_schedule_handle(sid).trigger()
    except RPCError as e:
        raise _temporal_error(e, name) from e
    policy = str((obj.get("spec") or {}).get("concurrencyPolicy") or "Forbid")
    return Triggered(name=name, namespace=namespace, schedule_id=sid, detail=TRIGGERED.get(policy, TRIGGERED["Forbid"]))


@router.post("/{name}/backfill", status_code=202, response_model=Backfilled, responses={
    404: {"description": "no such schedule"},
    409: {"description": "the schedule is in phase Error, being deleted, or not mirrored into Temporal yet"},
    422: {"description": "not a past range [start, end) of at most 366 days and 1000 ticks"}})
async def backfill_schedule(name: str, state: StateDep, who: CallerDep, window: Annotated[BackfillRange, Body()],
                            namespace: Namespace = "default") -> Backfilled:
    """Runs every tick of the schedule in `[start, end)`, also on a suspended schedule."""
    await _may_tick(state, who, namespace, name)
    start, end = _check_range(window)
    obj = await _read(state, namespace, name)
    sid = _mirrored(obj)
    spec = obj.get("spec") or {}
    temporal = _temporal(state)
    # Temporal's backfill takes ticks after start_at - 1ms: from the first whole second at or after
    # start, that is exactly the ticks from start on (they fall on whole seconds).
    first = _whole_second_at_or_after(start)
    try:
        ticks = await _ticks(temporal, sid, first, end)
        if len(ticks) > MAX_BACKFILL_TICKS:
            raise HTTPException(status_code=422, detail=f"[{rfc3339_exact(start)}, {rfc3339_exact(end)}) holds more than "
                                                        f"{MAX_BACKFILL_TICKS} ticks; backfill it in parts")
        if ticks:
            overlap = BACKFILL_OVERLAP.get(str(spec.get("concurrencyPolicy") or "Forbid"),
                                           ScheduleOverlapPolicy.BUFFER_ALL)
            await temporal.get_schedule_handle(sid).backfill(
                ScheduleBackfill(start_at=first, end_at=end - JUST_BEFORE, overlap=overlap))
    except RPCError as e:
        raise _temporal_error(e, name) from e
    zone = str(spec.get("timezone") or "UTC")
    return Backfilled(name=name, namespace=namespace, schedule_id=sid, start=rfc3339_exact(start), end=rfc3339_exact(end),
                      ticks=len(ticks), runs=[run_name(name, t, zone) for t in ticks])


def _whole_second_at_or_after(t: datetime) -> datetime:
    return t if not t.microsecond else t.replace(microsecond=0) + timedelta(seconds=1)


def _range_problem(field: str, msg: str) -> HTTPException:
    return HTTPException(status_code=422, detail=[{"loc": ["body", field], "msg": msg, "type": "value_error"}])


def _check_range(window: BackfillRange) -> tuple[datetime, datetime]:
    try:
        start, end = window.start.astimezone(UTC), window.end.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00
        raise _range_problem("start", "start and end must be times between 1970 and now") from None
    if start < EPOCH:
        raise _range_problem("start", f"start ({rfc3339_exact(start)}) must not be before {rfc3339_exact(EPOCH)}")
    if end <= start:
        raise _range_problem("end", f"end ({rfc3339_exact(end)}) must be after start ({rfc3339_exact(start)})")
    now = datetime.now(UTC)
    if end > now:
        raise _range_problem("end", f"end ({rfc3339_exact(end)}) is in the future: backfill runs past ticks only "
                                    f"(now is {rfc3339_exact(now)})")
    if end - start > MAX_BACKFILL_SPAN:
        raise _range_problem("end", f"the range spans more than {MAX_BACKFILL_SPAN.days} days; backfill it in parts")
    return start, end


async def _ticks(temporal: Client, sid: str, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's tick times in `[start, end)`, as Temporal computes them; stops past the limit.

    Temporal answers `(from, to]`, a bounded number at a time, hence the shifted bounds and the pages."""
    out: list[datetime] = []
    cursor, last = start - JUST_BEFORE, end - JUST_BEFORE
    while len(out) <= MAX_BACKFILL_TICKS:
        resp = await temporal.workflow_service.list_schedule_matching_times(ListScheduleMatchingTimesRequest(
            namespace=temporal.namespace, schedule_id=sid, start_time=_pb(cursor), end_time=_pb(last)))
        page = [t.ToDatetime(tzinfo=UTC) for t in resp.start_time]
        page = [t for t in page if cursor < t <= last]
        if not page:
            break
        out += page
        cursor = page[-1]
    return out


def _pb(t: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(t)
    return ts
