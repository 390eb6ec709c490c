"""The gate's retry verdict on the real stack (SPEC §4, lifecycle.retry): the agent runs again in the same
workflow, with the reviewer's feedback in its task, until the gate takes an answer or no attempt is left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.main import main as agentrun
from models.gate import REJECTED_TEXT
from tests.e2e.conftest import API_TOKENS, Stack, agent, agent_run
from tests.e2e.test_gate import RBAC, annotate, gate_hook
from tests.waiting import wait_for

FEEDBACK = "include the word KIWI"
RETRY = {"action": "retry", "response": FEEDBACK, "reason": "no fruit"}
# The gate hook approves an answer with KIWI in it and sends any other back with the feedback. The echo
# agent answers with its task, and a retried attempt's task carries the feedback: attempt 2 has KIWI.
KIWI_GATE = (f'if printf %s "$AGENT_RESULT" | grep -q KIWI; then {annotate({"action": "approve", "reason": "fruit"})}; '
             f"else {annotate(RETRY)}; fi")


def _retried(stack: Stack, ns: str, name: str, script: str, *, retry: dict[str, Any] | None,
             **spec: Any) -> dict[str, Any]:
    stack.create(ns, "agents", agent())
    lifecycle: dict[str, Any] = {"postRun": [gate_hook(script)], "rbac": RBAC}
    if retry is not None:
        lifecycle["retry"] = retry
    stack.create(ns, "agentruns", agent_run(name, lifecycle=lifecycle, **spec))
    return stack.wait_phase(ns, name, timeout=120)


def test_a_retry_verdict_runs_the_agent_again_with_the_feedback_and_attempt_two_is_approved(
        stack: Stack, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _retried(stack, namespace, "kiwi", KIWI_GATE, retry={"maxAttempts": 3}, cleanup="keep")
    st = run["status"]
    assert (st["phase"], st["gateVerdict"], st["attempt"]) == ("Succeeded", "approved", 2), st
    assert st["result"].startswith("echo: hello\n") and FEEDBACK in st["result"], st["result"]
    assert "echo: hello" in st["result"].split("previous answer", 1)[1], "the rejected output is in the task"
    attempts = st["attempts"]
    assert [(a["attempt"], a["verdict"], a["reason"]) for a in attempts] == [(1, "retried", "no fruit"),
                                                                            (2, "approved", "fruit")]
    assert all(a["tokens"] > 0 and a["decidedAt"] and a["decidedBy"] for a in attempts), attempts
    assert st["tokenUsage"]["totalTokens"] == sum(a["tokens"] for a in attempts), "usage is summed over attempts"
    # Attempt 2's Jobs have their own deterministic names; cleanup: keep leaves every attempt's agent Job (a gate
    # hook still running when its verdict arrives is stopped, its Job deleted, as on every gated run).
    jobs = set(stack.run_objects(namespace, "kiwi")["jobs"])
    assert {"kiwi", "kiwi-try2"} <= jobs <= {"kiwi", "kiwi-postrun", "kiwi-try2", "kiwi-try2-postrun"}, jobs
    assert (st["jobName"], st["postRunJobName"]) == ("kiwi-try2", "kiwi-try2-postrun")
    # `agentrun logs` reads the last attempt's agent, or the one asked for.
    (tmp_path / "endpoints.json").write_text(json.dumps({"kubeconfig": str(stack.kube.kubeconfig)}))
    capsys.readouterr()
    assert agentrun(["--state-dir", str(tmp_path), "logs", "kiwi", "-n", namespace]) == 0
    assert "KIWI" in capsys.readouterr().out
    assert agentrun(["--state-dir", str(tmp_path), "logs", "kiwi", "-n", namespace, "--attempt", "1"]) == 0
    first = capsys.readouterr().out
    assert "__SYMPOZIUM_RESULT__" in first and "KIWI" not in first


def test_a_gate_that_always_sends_the_answer_back_ends_retries_exhausted(stack: Stack, namespace: str) -> None:
    run = _retried(stack, namespace, "nokiwi", annotate(RETRY) + "; sleep 30", retry={"maxAttempts": 2})
    st = run["status"]
    assert (st["phase"], st["gateVerdict"], st["attempt"]) == ("Succeeded", "retries-exhausted", 2), st
    assert st["result"] == "Response blocked: all 2 attempts were rejected by the gate (maxAttempts 2 reached)"
    assert [a["verdict"] for a in st["attempts"]] == ["retried", "retries-exhausted"]
    assert any(c["type"] == "GateResolved" and c["reason"] == "retries-exhausted" for c in st["conditions"])
    stack.wait_gone(namespace, "nokiwi", ("jobs", "pods"))


def test_retry_without_lifecycle_retry_is_a_reject(stack: Stack, namespace: str) -> None:
    run = _retried(stack, namespace, "noretry", KIWI_GATE, retry=None)
    st = run["status"]
    assert (st["phase"], st["gateVerdict"], st["result"]) == ("Succeeded", "rejected", REJECTED_TEXT), st
    assert "attempt" not in st and "attempts" not in st
    assert st["jobName"] == "noretry"


def test_a_bad_lifecycle_retry_fails_the_run_naming_the_field(stack: Stack, namespace: str) -> None:
    run = _retried(stack, namespace, "badretry", "true", retry={"backoff": "a while"})
    st = run["status"]
    assert st["phase"] == "Failed" and st["error"].startswith("spec.lifecycle.retry.backoff: invalid duration"), st


def test_retry_through_the_api_and_the_cli(api_server: str, stack: Stack, namespace: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bob = next(t for t, who in API_TOKENS.items() if who == "bob@example.com")
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "api": api_server, "api_token": bob, "kubeconfig": str(stack.kube.kubeconfig),
        "temporal": stack.temporal.address}))
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("byhand", lifecycle={
        "postRun": [gate_hook("true")], "gateTimeout": "10m", "retry": {"maxAttempts": 2, "backoff": "1s"}}))

    def pending(job: str) -> bool:
        st = (stack.get_run(namespace, "byhand") or {}).get("status") or {}
        return (st.get("gate") or {}).get("state") == "pending" and st.get("jobName") == job

    wait_for(lambda: pending("byhand"), timeout=60, what="attempt 1's gate to wait")
    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {bob}"}, timeout=60) as api:
        r = api.post("/api/v1/runs/byhand/gate-verdict", params={"namespace": namespace}, json={"action": "retry"})
        assert r.status_code == 400 and "feedback" in r.json()["detail"]
        assert agentrun(["--state-dir", str(tmp_path), "retry", "byhand", "-n", namespace,
                         "--feedback", "shorter, please", "--reason", "too long"]) == 0
        assert capsys.readouterr().out == "agentrun/byhand: gate retried by bob@example.com\n"
        wait_for(lambda: pending("byhand-try2"), timeout=60, what="attempt 2's gate to wait")
        r = api.post("/api/v1/runs/byhand/gate-verdict", params={"namespace": namespace}, json={"action": "approve"})
        assert r.status_code == 200 and r.json()["gate_verdict"] == "approved", r.text
    st = stack.wait_phase(namespace, "byhand")["status"]
    assert st["gateVerdict"] == "approved" and "shorter, please" in st["result"]
    assert [(a["verdict"], a["decidedBy"], a["reason"]) for a in st["attempts"]] == [
        ("retried", "bob@example.com", "too long"), ("approved", "bob@example.com", "approve via api")]
