"""The HTTP API against the whole stack: runs, gate verdicts, auth, probes (SPEC §7)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.main import main as agentrun
from cli.stack import free_port
from models.gate import BLOCKED_TEXT
from tests.e2e.conftest import API_TOKENS, Stack, agent, agent_run
from tests.waiting import wait_for

TOKEN = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")


@pytest.fixture(scope="module")
def api(api_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        yield c


def test_the_api_refuses_to_start_without_tokens_unless_told_to(stack: Stack, tmp_path: Path) -> None:
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tmp_path / "none"), "AGENTRUN_PORT": str(free_port()),
           "AGENTRUN_TOKEN_REVIEW": "false"}  # with Kubernetes tokens asked of the cluster, it is not open
    out = subprocess.run([sys.executable, "-m", "api"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "refusing to start without API tokens" in (out.stderr + out.stdout)


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/v1/runs"), ("GET", "/api/v1/runs/x"), ("POST", "/api/v1/runs"), ("DELETE", "/api/v1/runs/x"),
    ("POST", "/api/v1/runs/x/gate-verdict"),
])
@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", "Basic abc"])
def test_every_api_route_needs_a_valid_token(api: httpx.Client, method: str, path: str, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    r = httpx.request(method, str(api.base_url) + path, headers=headers, json={})
    assert r.status_code == 401 and "detail" in r.json()


def test_probes_and_metrics_are_open(api: httpx.Client) -> None:
    base = str(api.base_url)
    assert httpx.get(base + "/healthz").text == "ok"
    assert httpx.get(base + "/readyz").status_code == 200
    assert "agentrun_api_requests_total" in httpx.get(base + "/metrics").text


def test_runs_are_created_listed_read_and_deleted(api: httpx.Client, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    r = api.post("/api/v1/runs", params={"namespace": namespace}, json={"agentRef": "helper", "task": "via api"})
    assert r.status_code == 201, r.text
    name = r.json()["metadata"]["name"]
    assert name.startswith("helper-") and r.json()["metadata"]["labels"]["sympozium.ai/instance"] == "helper"
    assert r.json()["spec"]["agentId"] == "primary" and r.json()["spec"]["sessionKey"].startswith("session-")
    run = stack.wait_phase(namespace, name)
    assert run["status"]["result"].startswith("echo: via api")
    listed = api.get("/api/v1/runs", params={"namespace": namespace}).json()
    assert [x["name"] for x in listed] == [name] and listed[0]["phase"] == "Succeeded"
    assert api.get(f"/api/v1/runs/{name}", params={"namespace": namespace}).json()["status"]["phase"] == "Succeeded"
    assert api.delete(f"/api/v1/runs/{name}", params={"namespace": namespace}).status_code == 204
    wait_for(lambda: stack.get_run(namespace, name) is None, what="the run to go")
    assert api.delete(f"/api/v1/runs/{name}", params={"namespace": namespace}).status_code == 404
    assert api.get(f"/api/v1/runs/{name}", params={"namespace": namespace}).status_code == 404


@pytest.mark.parametrize(("body", "code"), [
    ({"agentRef": "nobody", "task": "x"}, 404),
    ({"agentRef": "helper"}, 422),
    ({"task": "x"}, 422),
    ({"agentRef": "helper", "task": ""}, 422),
    ("not json", 422),
])
def test_bad_run_requests_get_clear_errors(api: httpx.Client, stack: Stack, namespace: str, body: Any,
                                           code: int) -> None:
    stack.create(namespace, "agents", agent())
    kw: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
    r = api.post("/api/v1/runs", params={"namespace": namespace}, **kw)
    assert r.status_code == code and "detail" in r.json()


def _gated(stack: Stack, ns: str, name: str, **lifecycle: Any) -> dict[str, Any]:
    stack.create(ns, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    stack.create(ns, "agentruns", agent_run(name, lifecycle={"postRun": [gate], "gateTimeout": "10m", **lifecycle}))
    wait_for(lambda: ((stack.get_run(ns, name) or {}).get("status", {}).get("gate") or {}).get("state") == "pending",
             timeout=60, what="the gate to be pending")
    return stack.get_run(ns, name) or {}


def test_approve_through_the_api_records_the_caller_and_a_second_verdict_is_refused(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    _gated(stack, namespace, "appr")
    pending = api.get("/api/v1/runs", params={"namespace": namespace, "gate": "pending"}).json()
    assert [x["name"] for x in pending] == ["appr"]
    r = api.post("/api/v1/runs/appr/gate-verdict", params={"namespace": namespace},
                 json={"action": "approve", "reason": "ok"})
    assert r.status_code == 200, r.text
    assert r.json()["gate_verdict"] == "approved" and r.json()["decided_by"] == "alice@example.com"
    second = api.post("/api/v1/runs/appr/gate-verdict", params={"namespace": namespace},
                      json={"action": "reject", "response": "no"})
    assert second.status_code == 409 and second.json()["detail"]
    st = stack.wait_phase(namespace, "appr")["status"]
    assert st["gateVerdict"] == "approved" and st["result"].startswith("echo: hello")
    assert st["gate"]["decidedBy"] == "alice@example.com"


def test_a_verdict_before_the_gate_waits_is_409_and_the_gate_still_waits_later(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    stack.create(namespace, "agentruns", agent_run("soon", task="sleep:3 x",
                                                   lifecycle={"postRun": [gate], "gateTimeout": "10m"}))
    stack.wait_phase(namespace, "soon", {"Running"})
    r = api.post("/api/v1/runs/soon/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert (r.status_code, r.json()["detail"]) == (409, "no gate is waiting")
    wait_for(lambda: ((stack.get_run(namespace, "soon") or {}).get("status", {}).get("gate") or {}).get("state")
             == "pending", timeout=60, what="the gate to be pending")
    r = api.post("/api/v1/runs/soon/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert r.status_code == 200 and r.json()["decided_by"] == "alice@example.com"


def test_the_cli_gives_verdicts_through_the_api_as_the_tokens_identity(
        api_server: str, stack: Stack, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bob = next(t for t, who in API_TOKENS.items() if who == "bob@example.com")
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "api": api_server, "api_token": bob, "kubeconfig": str(stack.kube.kubeconfig),
        "temporal": stack.temporal.address}))
    _gated(stack, namespace, "viacli")
    stack.create(namespace, "agentruns", agent_run("nogate", task="sleep:3 x"))
    stack.wait_phase(namespace, "nogate", {"Running"})
    assert agentrun(["--state-dir", str(tmp_path), "approve", "nogate", "-n", namespace]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agentrun/nogate: refused: ") and "no gate" in err, err
    code = agentrun(["--state-dir", str(tmp_path), "reject", "viacli", "-n", namespace, "--response", "not this"])
    out = capsys.readouterr().out
    assert (code, out) == (0, "agentrun/viacli: gate rejected by bob@example.com\n")
    st = stack.wait_phase(namespace, "viacli")["status"]
    assert st["gate"]["decidedBy"] == "bob@example.com" and st["result"] == "not this"


@pytest.mark.parametrize(("body", "code"), [
    ({"action": "maybe"}, 400),
    ({"action": "reject"}, 400),
    ({"action": "rewrite", "response": ""}, 400),
    ("{not json", 400),
    ([1, 2], 400),
])
def test_malformed_verdicts_are_refused_with_400(api: httpx.Client, stack: Stack, namespace: str, body: Any,
                                                 code: int) -> None:
    _gated(stack, namespace, "bad")
    kw: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
    r = api.post("/api/v1/runs/bad/gate-verdict", params={"namespace": namespace}, **kw)
    assert r.status_code == code and r.json()["detail"]
    assert (stack.get_run(namespace, "bad") or {})["status"]["gate"]["state"] == "pending"


def test_verdicts_for_unknown_finished_and_ungated_runs(api: httpx.Client, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    assert api.post("/api/v1/runs/ghost/gate-verdict", params={"namespace": namespace},
                    json={"action": "approve"}).status_code == 404
    stack.create(namespace, "agentruns", agent_run("plain", task="sleep:2 x"))
    stack.wait_phase(namespace, "plain", {"Running"})
    r = api.post("/api/v1/runs/plain/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert r.status_code == 409 and "no gate" in r.json()["detail"]
    stack.wait_phase(namespace, "plain")
    r = api.post("/api/v1/runs/plain/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert r.status_code == 409


def test_a_blocked_run_keeps_the_blocked_text_when_time_runs_out(api: httpx.Client, stack: Stack,
                                                                 namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    stack.create(namespace, "agentruns", agent_run("late", lifecycle={"postRun": [gate], "gateTimeout": "2s"}))
    st = stack.wait_phase(namespace, "late")["status"]
    assert st["gateVerdict"] == "timeout" and st["result"] == BLOCKED_TEXT
    r = api.post("/api/v1/runs/late/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
    assert r.status_code == 409


NESTED = "[" * 100_000 + "]" * 100_000
SURROGATE = '"lone \\ud800 half"'


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/api/v1/runs/r/gate-verdict"), ("POST", "/codec/encode"), ("POST", "/codec/decode"),
    ("POST", "/admission/agentruns"), ("POST", "/admission/agentruns/mutate"), ("POST", "/api/v1/runs"),
    ("POST", "/api/v1/schedules"), ("PATCH", "/api/v1/schedules/s"),
])
def test_deeply_nested_json_is_a_400_on_every_route_that_reads_a_body(api: httpx.Client, namespace: str,
                                                                      method: str, path: str) -> None:
    """Issue 27, hole 9: Python's parser recursed into a RecursionError (a 500) on the verdict, codec and admission
    routes; the body is refused before any route parses it."""
    r = api.request(method, path, params={"namespace": namespace}, content=NESTED,
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.json()["detail"] == "body: JSON nested deeper than 100 levels"


def test_a_lone_surrogate_in_a_task_reason_or_schedule_task_is_a_400_and_nothing_is_written(
        api: httpx.Client, stack: Stack, namespace: str) -> None:
    """Issue 27, hole 9: JSON may spell half a surrogate pair, which no UTF-8 encoder takes (a 500 when written on)."""
    ns = {"namespace": namespace}
    _gated(stack, namespace, "held")
    bodies = [("POST", "/api/v1/runs", '{"agentRef": "helper", "task": ' + SURROGATE + "}"),
              ("POST", "/api/v1/runs/held/gate-verdict", '{"action": "approve", "reason": ' + SURROGATE + "}"),
              ("POST", "/api/v1/schedules", '{"name": "s", "agentRef": "helper", "schedule": "@daily", "task": '
               + SURROGATE + "}")]
    for method, path, body in bodies:
        r = api.request(method, path, params=ns, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert "lone UTF-16 surrogate (\\ud800)" in r.json()["detail"], r.text
    # (afterInterval: no immediate first tick, whose run would race the listing of runs below)
    assert api.post("/api/v1/schedules", params=ns, json={"name": "s", "agentRef": "helper", "schedule": "@daily",
                                                          "task": "fine", "firstTick": "afterInterval"}
                    ).status_code == 201
    r = api.patch("/api/v1/schedules/s", params=ns, content='{"task": ' + SURROGATE + "}",
                  headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert api.get("/api/v1/schedules/s", params=ns).json()["spec"]["task"] == "fine"
    assert [run["name"] for run in api.get("/api/v1/runs", params=ns).json()] == ["held"]
    assert (stack.get_run(namespace, "held") or {})["status"]["gate"]["state"] == "pending"
    # A pair of halves is one character, and stays one.
    r = api.post("/api/v1/runs", params=ns, content='{"agentRef": "helper", "task": "smile \\ud83d\\ude00"}',
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 201 and r.json()["spec"]["task"] == "smile \U0001f600", r.text
