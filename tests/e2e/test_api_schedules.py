"""Schedules through the HTTP API and `agentrun schedules` (SPEC §7, §1.4, §6), against the whole stack.

Schedules here tick only when told to (`QUIET_CRON`, February 29th, with `firstTick: afterInterval`, or suspended),
so every run a test sees comes from its own trigger or backfill.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.main import main as agentrun
from tests.e2e.conftest import API_TOKENS, QUIET_CRON, Stack, agent
from tests.e2e.test_schedules import PLURAL, phase, runs_of, schedule
from tests.waiting import wait_for

TOKEN = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")
QUIET = {"schedule": QUIET_CRON, "firstTick": "afterInterval"}
JAN_15_CRON = "0 8-9 15 1 *"


@pytest.fixture(scope="module")
def api(api_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        yield c


def create(api: httpx.Client, ns: str, name: str, **fields: Any) -> dict[str, Any]:
    r = api.post("/api/v1/schedules", params={"namespace": ns},
                 json={"name": name, "agentRef": "helper", "task": "hello", **QUIET, **fields})
    assert r.status_code == 201, r.text
    return dict(r.json())


def wait_phase(api: httpx.Client, ns: str, name: str, want: str) -> dict[str, Any]:
    """The object once the bridge has mirrored its current spec and written `want`."""
    def probe() -> dict[str, Any] | None:
        obj = api.get(f"/api/v1/schedules/{name}", params={"namespace": ns}).json()
        st, meta = obj.get("status") or {}, obj.get("metadata") or {}
        return obj if st.get("phase") == want and st.get("observedGeneration") == meta.get("generation") else None
    return wait_for(probe, timeout=30, interval=0.1, what=f"schedule {name} to be {want}")


def run_names(stack: Stack, ns: str, name: str) -> list[str]:
    return [r["metadata"]["name"] for r in runs_of(stack, ns, name)]


def test_a_schedule_is_created_listed_read_patched_and_deleted(api: httpx.Client, stack: Stack,
                                                               namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    made = create(api, namespace, "nightly", timezone="Europe/Paris")
    # Only what the caller gave (plus the CRD's defaults), and who asked for it.
    assert made["spec"]["schedule"] == QUIET_CRON and made["spec"]["timezone"] == "Europe/Paris"
    assert "catchupWindow" not in made["spec"]
    # (a schedule's author stamp, models/authorship.py: its ticks' runs are created in that name)
    notes = made["metadata"]["annotations"]
    assert (notes["agentrun.dev/author"], notes["agentrun.dev/author-groups"]) == ("alice@example.com", "[]")
    wait_phase(api, namespace, "nightly", "Active")
    listed = api.get("/api/v1/schedules", params={"namespace": namespace}).json()
    assert [(s["name"], s["agent"], s["schedule"], s["timezone"], s["phase"], s["suspend"], s["total_runs"])
            for s in listed] == [("nightly", "helper", QUIET_CRON, "Europe/Paris", "Active", False, 0)]
    assert listed[0]["next_run_time"]

    r = api.patch("/api/v1/schedules/nightly", params={"namespace": namespace},
                  json={"schedule": "0 9 * * *", "catchupWindow": "10m"})
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["schedule"] == "0 9 * * *" and r.json()["spec"]["task"] == "hello"
    obj = wait_phase(api, namespace, "nightly", "Active")
    # The bridge mirrored the edit: the next run is 09:00 in Paris, 07:00 or 08:00 UTC.
    nxt = datetime.fromisoformat(obj["status"]["nextRunTime"].replace("Z", "+00:00"))
    assert (nxt.hour, nxt.minute) in ((7, 0), (8, 0)), obj["status"]
    # A merge patch: null removes an optional field.
    r = api.patch("/api/v1/schedules/nightly", params={"namespace": namespace}, json={"catchupWindow": None})
    assert r.status_code == 200 and "catchupWindow" not in r.json()["spec"]

    assert api.delete("/api/v1/schedules/nightly", params={"namespace": namespace}).status_code == 204
    wait_for(lambda: api.get("/api/v1/schedules/nightly", params={"namespace": namespace}).status_code == 404,
             timeout=20, what="the bridge to release the deleted schedule")
    assert api.get("/api/v1/schedules", params={"namespace": namespace}).json() == []
    assert api.delete("/api/v1/schedules/nightly", params={"namespace": namespace}).status_code == 404
    assert api.patch("/api/v1/schedules/nightly", params={"namespace": namespace},
                     json={"task": "x"}).status_code == 404


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"schedule": "61 * * * *"}, "schedule", "spec.schedule: minute '61'"),
    ({"schedule": "@every soon"}, "schedule", "spec.schedule"),
    ({"timezone": "Mars/Olympus"}, "timezone", "spec.timezone: 'Mars/Olympus' is not an IANA time zone"),
    ({"catchupWindow": "a while"}, "catchupWindow", "spec.catchupWindow"),
    ({"schedule": "@every 99999999999999999h"}, "schedule", "spec.schedule: invalid duration '99999999999999999h': too long"),
    ({"catchupWindow": "99999999999999999h"}, "catchupWindow", "spec.catchupWindow: invalid duration '99999999999999999h': too long"),
    ({"concurrencyPolicy": "Sometimes"}, "concurrencyPolicy", ""),
    ({"cron": "* * * * *"}, "cron", ""),
    ({"task": ""}, "task", ""),
    ({"name": "Not_A_Name"}, "name", ""),
    ({"name": "n" * 49}, "name", ""),
])
def test_a_bad_schedule_is_refused_with_422_naming_the_field(api: httpx.Client, stack: Stack, namespace: str,
                                                             fields: dict[str, Any], field: str, words: str) -> None:
    stack.create(namespace, "agents", agent())
    body = {"name": "bad", "agentRef": "helper", "task": "hello", **QUIET, **fields}
    r = api.post("/api/v1/schedules", params={"namespace": namespace}, json=body)
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert any(p["loc"][:2] == ["body", field] and words in p["msg"] for p in problems), problems
    assert api.get("/api/v1/schedules", params={"namespace": namespace}).json() == []


def test_unknown_agent_is_404_a_legacy_instance_will_do_and_a_taken_name_is_409(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    r = api.post("/api/v1/schedules", params={"namespace": namespace},
                 json={"name": "orphan", "agentRef": "nobody", "task": "x", **QUIET})
    assert r.status_code == 404 and "nobody" in r.json()["detail"]
    stack.create(namespace, "sympoziuminstances", {**agent("legacy"), "kind": "SympoziumInstance"})
    create(api, namespace, "twin", agentRef="legacy")
    r = api.post("/api/v1/schedules", params={"namespace": namespace},
                 json={"name": "twin", "agentRef": "legacy", "task": "other", **QUIET})
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert api.get("/api/v1/schedules/twin", params={"namespace": namespace}).json()["spec"]["task"] == "hello"
    # An edit is checked like a creation, against the merged spec.
    for change, code in (({"agentRef": "nobody"}, 404), ({"timezone": "Nowhere/Land"}, 422),
                         ({"schedule": None}, 422), ({"name": "renamed"}, 422)):
        r = api.patch("/api/v1/schedules/twin", params={"namespace": namespace}, json=change)
        assert r.status_code == code, (change, r.text)
    spec = api.get("/api/v1/schedules/twin", params={"namespace": namespace}).json()["spec"]
    assert (spec["agentRef"], spec["schedule"], spec.get("timezone")) == ("legacy", QUIET_CRON, None)


def test_pause_and_resume_flip_spec_suspend_and_the_bridge_follows(api: httpx.Client, stack: Stack,
                                                                   namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    create(api, namespace, "nap")
    wait_phase(api, namespace, "nap", "Active")
    r = api.post("/api/v1/schedules/nap/pause", params={"namespace": namespace})
    assert r.status_code == 200 and r.json()["spec"]["suspend"] is True
    paused = wait_phase(api, namespace, "nap", "Suspended")
    assert "nextRunTime" not in paused["status"]
    r = api.post("/api/v1/schedules/nap/resume", params={"namespace": namespace})
    assert r.status_code == 200 and r.json()["spec"]["suspend"] is False
    assert wait_phase(api, namespace, "nap", "Active")["status"]["nextRunTime"]
    assert api.post("/api/v1/schedules/ghost/pause", params={"namespace": namespace}).status_code == 404


def test_trigger_runs_one_tick_now_and_is_refused_for_an_error_schedule(api: httpx.Client, stack: Stack,
                                                                       namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    create(api, namespace, "now", suspend=True)
    wait_phase(api, namespace, "now", "Suspended")
    r = api.post("/api/v1/schedules/now/trigger", params={"namespace": namespace})
    assert r.status_code == 202, r.text
    assert r.json()["schedule_id"].startswith(f"sympozium-schedule/{namespace}/now/")
    run = wait_for(lambda: next(iter(runs_of(stack, namespace, "now")), None), timeout=20, what="the triggered run")
    assert phase(stack.wait_phase(namespace, run["metadata"]["name"], timeout=30)) == "Succeeded"
    # The API refuses what the object cannot be: the bridge marks an invalid one Error (kubectl skips our check).
    stack.create(namespace, PLURAL, schedule("broken", "61 * * * *"))
    wait_phase(api, namespace, "broken", "Error")
    for op, body in (("trigger", None), ("backfill", {"start": "2026-01-15T08:00:00Z", "end": "2026-01-15T09:00:00Z"})):
        r = api.post(f"/api/v1/schedules/broken/{op}", params={"namespace": namespace}, json=body)
        assert r.status_code == 409 and "phase Error" in r.json()["detail"], r.text
    assert api.post("/api/v1/schedules/ghost/trigger", params={"namespace": namespace}).status_code == 404
    assert run_names(stack, namespace, "now") == [run["metadata"]["name"]]
    assert run_names(stack, namespace, "broken") == []


def test_trigger_and_backfill_are_refused_until_the_bridge_has_mirrored_the_schedule(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.bridge.kill()
    try:
        create(api, namespace, "early", suspend=True)
        for op, body in (("trigger", None), ("backfill", {"start": "2026-01-15T08:00:00Z",
                                                          "end": "2026-01-15T09:00:00Z"})):
            r = api.post(f"/api/v1/schedules/early/{op}", params={"namespace": namespace}, json=body)
            assert r.status_code == 409 and "not mirrored into Temporal yet" in r.json()["detail"], r.text
    finally:
        stack.bridge.start()
    wait_phase(api, namespace, "early", "Suspended")
    assert api.post("/api/v1/schedules/early/trigger", params={"namespace": namespace}).status_code == 202
    run = wait_for(lambda: next(iter(runs_of(stack, namespace, "early")), None), timeout=20, what="the run")
    stack.wait_phase(namespace, run["metadata"]["name"], timeout=30)


def test_backfill_runs_every_tick_from_start_up_to_but_not_including_end(api: httpx.Client, stack: Stack,
                                                                         namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    # Forbid: the ticks run one after another rather than being skipped as overlaps.
    create(api, namespace, "past", schedule="*/10 * * * *", suspend=True, timezone="Europe/Paris")
    wait_phase(api, namespace, "past", "Suspended")
    # A microsecond after the 07:50 tick, up to the 08:30 tick (09:30 in Paris): neither is in the range.
    r = api.post("/api/v1/schedules/past/backfill", params={"namespace": namespace},
                 json={"start": "2026-01-15T07:50:00.000001Z", "end": "2026-01-15T09:30:00+01:00"})
    assert r.status_code == 202, r.text
    # 08:00, 08:10, 08:20 UTC, named in Paris time.
    expected = ["past-202601150900", "past-202601150910", "past-202601150920"]
    assert (r.json()["ticks"], r.json()["runs"]) == (3, expected)
    wait_for(lambda: run_names(stack, namespace, "past") == expected, timeout=40, interval=0.2,
             what=f"runs {expected}")
    for name in expected:
        assert phase(stack.wait_phase(namespace, name, timeout=30)) == "Succeeded"
    assert run_names(stack, namespace, "past") == expected


BAD_RANGES = [
    ("2026-01-15T09:00:00Z", "2026-01-15T08:00:00Z", "must be after start"),
    ("2026-01-15T08:00:00Z", "2026-01-15T08:00:00Z", "must be after start"),
    ("2026-01-15T08:00:00Z", "2999-01-01T00:00:00Z", "in the future"),
    ("2024-01-01T00:00:00Z", "2025-06-01T00:00:00Z", "more than 366 days"),
    ("2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z", "more than 1000 ticks"),
    ("1960-01-01T00:00:00Z", "1960-01-02T00:00:00Z", "before 1970"),
    ("0001-01-01T00:00:00+01:00", "2026-01-15T09:00:00Z", "between 1970 and now"),
    ("2026-01-15T08:00:00", "2026-01-15T09:00:00Z", "timezone"),
    ("yesterday", "2026-01-15T09:00:00Z", "datetime"),
]


def test_a_backfill_range_that_is_not_a_bounded_past_range_is_refused(api: httpx.Client, stack: Stack,
                                                                      namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    create(api, namespace, "often", schedule="* * * * *", suspend=True)
    wait_phase(api, namespace, "often", "Suspended")
    for start, end, words in BAD_RANGES:
        r = api.post("/api/v1/schedules/often/backfill", params={"namespace": namespace},
                     json={"start": start, "end": end})
        assert r.status_code == 422 and words in json.dumps(r.json()["detail"]), (start, end, r.text)
    assert api.post("/api/v1/schedules/often/backfill", params={"namespace": namespace},
                    json={"start": "2026-01-15T08:00:00Z"}).status_code == 422
    assert run_names(stack, namespace, "often") == []


@pytest.mark.parametrize(("method", "path"), [
    ("GET", ""), ("POST", ""), ("GET", "/x"), ("PATCH", "/x"), ("DELETE", "/x"), ("POST", "/x/pause"),
    ("POST", "/x/resume"), ("POST", "/x/trigger"), ("POST", "/x/backfill"),
])
def test_every_schedule_route_needs_a_valid_token(api: httpx.Client, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token"}):
        r = httpx.request(method, f"{api.base_url}/api/v1/schedules{path}", headers=headers, json={})
        assert r.status_code == 401 and r.json()["detail"], (headers, r.text)


# -- the command line --------------------------------------------------------------------------------


@pytest.fixture
def state_dir(api_server: str, stack: Stack, tmp_path: Path) -> Path:
    """A state directory as `agentrun up` leaves it, pointing at the test stack's API."""
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "api": api_server, "api_token": TOKEN, "kubeconfig": str(stack.kube.kubeconfig),
        "temporal": stack.temporal.address}))
    return tmp_path


def test_agentrun_schedules_commands_list_get_pause_resume_trigger_and_backfill(
        api: httpx.Client, stack: Stack, namespace: str, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack.create(namespace, "agents", agent())
    # Quiet like QUIET_CRON, but with ticks in the hours the backfill below asks for: 08:00 and 09:00 of January 15th.
    create(api, namespace, "cli", concurrencyPolicy="Allow", schedule=JAN_15_CRON)
    wait_phase(api, namespace, "cli", "Active")

    def cli(*args: str) -> tuple[int, str, str]:
        code = agentrun(["--state-dir", str(state_dir), "schedules", *args, "-n", namespace])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = cli("list")
    header, row = out.splitlines()
    assert code == 0 and header.split()[:4] == ["NAME", "AGENT", "SCHEDULE", "TIMEZONE"]
    assert row.split()[:9] == ["cli", "helper", *JAN_15_CRON.split(), "UTC", "Active"]
    code, out, _ = cli("get", "cli")
    assert code == 0 and "name: cli" in out and "phase: Active" in out
    assert cli("pause", "cli")[:2] == (0, "sympoziumschedule/cli: paused (spec.suspend: true)\n")
    wait_phase(api, namespace, "cli", "Suspended")
    assert cli("resume", "cli")[0] == 0
    wait_phase(api, namespace, "cli", "Active")
    code, out, _ = cli("trigger", "cli")
    assert code == 0 and "triggered" in out
    wait_for(lambda: len(run_names(stack, namespace, "cli")) == 1, timeout=20, what="the triggered run")
    code, out, _ = cli("backfill", "cli", "--from", "2026-01-15T08:00:00Z", "--to", "2026-01-15T10:00:00Z")
    assert code == 0 and "2 tick(s)" in out, out
    assert "agentrun/cli-202601150800" in out and "agentrun/cli-202601150900" in out
    wait_for(lambda: {"cli-202601150800", "cli-202601150900"} <= set(run_names(stack, namespace, "cli")),
             timeout=20, what="the backfilled runs")
    # Failures say why on stderr and exit non-zero.
    code, out, err = cli("trigger", "ghost")
    assert code == 1 and out == "" and 'schedule "ghost" not found' in err
    code, _, err = cli("backfill", "cli", "--from", "2026-01-15T10:00:00Z", "--to", "2026-01-15T08:00:00Z")
    assert code == 1 and "end: " in err and "must be after start" in err
    for run in run_names(stack, namespace, "cli"):
        stack.wait_phase(namespace, run, timeout=30)


def test_agentrun_schedules_without_a_stack_or_api_url_says_so(tmp_path: Path) -> None:
    out = subprocess.run([str(Path(sys.executable).with_name("agentrun")), "--state-dir", str(tmp_path),
                          "schedules", "list"], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode != 0 and "no API to talk to" in out.stderr, out


def test_the_api_takes_and_shows_the_older_names_instance_ref_and_input(api: httpx.Client, stack: Stack,
                                                                        namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    r = api.post("/api/v1/schedules", params={"namespace": namespace},
                 json={"name": "older", "instanceRef": "helper", "input": "from the docs", **QUIET})
    assert r.status_code == 201, r.text
    assert {k: r.json()["spec"][k] for k in ("agentRef", "task")} == {"agentRef": "helper", "task": "from the docs"}
    assert "instanceRef" not in r.json()["spec"] and "input" not in r.json()["spec"]
    r = api.patch("/api/v1/schedules/older", params={"namespace": namespace}, json={"input": "changed"})
    assert r.status_code == 200 and r.json()["spec"]["task"] == "changed", r.text
    # An object written with the older names (kubectl apply of the docs' YAML) is listed with its Agent.
    body = schedule("applied", QUIET_CRON)
    body["spec"] = {"instanceRef": "helper", "input": "t", **QUIET}
    stack.create(namespace, PLURAL, body)
    wait_phase(api, namespace, "applied", "Active")
    listed = {s["name"]: s["agent"] for s in api.get("/api/v1/schedules", params={"namespace": namespace}).json()}
    assert listed == {"older": "helper", "applied": "helper"}
