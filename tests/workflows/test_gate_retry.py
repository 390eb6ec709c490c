"""The gate's retry verdict (SPEC §4, lifecycle.retry) and Temporal-path verdicts, on the time-skipping server.

A retry verdict runs the agent again in the same workflow (attempt N's Jobs have their own names) with
a task carrying the original task, the rejected output and the feedback, after the backoff; then the
gate again, until a verdict that is not a retry, maxAttempts or maxChainTokens.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from models.gate import REJECTED_TEXT, GateView, Verdict
from models.resolve import ResolvedHook, ResolvedRetry
from models.steps import AgentOutcome, Metrics
from models.timestamps import parse_rfc3339
from tests.waiting import wait_for_async
from workflows.agent_run import AgentRunWorkflow, RunResult

from .cluster import FakeCluster, JobScript, resolved_run, run_result
from .test_agent_run_workflow import GATE_HOOK, NOTIFY, WAITING_GATE, Harness, env

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["env"]  # the module's time-skipping server, shared with test_agent_run_workflow's fixture

FEEDBACK = "include the word KIWI"


def _answer(text: str, tokens: int = 8) -> AgentOutcome:
    return AgentOutcome(status="success", response=text, metrics=Metrics(input_tokens=tokens // 2,
                                                                        output_tokens=tokens - tokens // 2))


def _retried(max_attempts: int = 3, *, backoff: float = 0, max_chain_tokens: int | None = None,
             post_run: list[ResolvedHook] | None = None) -> FakeCluster:
    run = resolved_run(post_run=post_run or [GATE_HOOK], retry=ResolvedRetry(
        max_attempts=max_attempts, backoff_seconds=backoff, max_chain_tokens=max_chain_tokens))
    return FakeCluster(run, jobs={"post-run": WAITING_GATE},
                       agents=[_answer("first draft"), _answer("second draft with KIWI"), _answer("third draft")])


async def _pending(handle: WorkflowHandle[AgentRunWorkflow, RunResult], attempt: int) -> GateView:
    """The gate of attempt `attempt` waits (the run's status query names the attempt's agent Job)."""
    async def waiting() -> GateView | None:
        view = await handle.query(AgentRunWorkflow.gate)
        jobs = (await handle.query(AgentRunWorkflow.status)).jobs
        agent_job = "r" if attempt == 1 else f"r-try{attempt}"
        return view if view.state == "pending" and jobs.get("agent-run") == agent_job else None
    return await wait_for_async(waiting, what=f"attempt {attempt}'s gate to wait")


def _retry(by: str = "alice") -> Verdict:
    return Verdict(action="retry", response=FEEDBACK, reason="no fruit", decided_by=by, source="api")


async def test_retry_then_approve_ends_approved_on_attempt_two_with_its_output(env: WorkflowEnvironment) -> None:
    cluster = _retried(post_run=[GATE_HOOK, NOTIFY])
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        sent_back = await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        assert (sent_back.state, sent_back.decided_by) == ("retried", "alice")
        await _pending(handle, 2)
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict,
                                           Verdict(action="approve", decided_by="bob", source="api"))
        assert (view.state, view.result) == ("approved", "second draft with KIWI")
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="second draft with KIWI")
    status = cluster.status()
    assert status["gate_verdict"] == "approved" and status["attempt"] == 2
    assert [(a["attempt"], a["verdict"], a["decided_by"], a["reason"], a["tokens"]) for a in status["attempts"]] == [
        (1, "retried", "alice", "no fruit", 8), (2, "approved", "bob", "approve via api", 8)]
    assert status["token_usage"]["total_tokens"] == 16, "the run's usage is summed over its attempts"
    # Attempt 2's Jobs have their own names; the other postRun hooks ran once, after the final gate.
    assert [(j.ref.component, j.ref.name) for j in cluster.created] == [
        ("agent-run", "r"), ("post-run", "r-postrun"), ("agent-run", "r-try2"), ("post-run", "r-try2-postrun"),
        ("post-gate", "r-postgate")]
    agent2 = [r for r in cluster.job_requests() if r.component == "agent-run"][1]
    assert agent2.attempt == 2 and agent2.task is not None
    assert agent2.task.startswith("say hi\n") and "first draft" in agent2.task and FEEDBACK in agent2.task
    gate2 = [r for r in cluster.job_requests() if r.component == "post-run"][1]
    assert (gate2.attempt, gate2.agent_result) == (2, "second draft with KIWI")
    after = cluster.job_requests()[-1]
    assert (after.gate_verdict, after.agent_result) == ("approved", "second draft with KIWI")
    completed = [e for e in cluster.events if e.topic == "agent.run.completed"]
    assert len(completed) == 1 and completed[0].data["response"] == "second draft with KIWI"
    # The attempt-2 agent Job's step wrote the attempt, the history so far and the gate that sent it back.
    start2 = [s for s in cluster.named("start_job") if s.job.component == "agent-run"][1]
    assert start2.status is not None
    written = start2.status.status
    assert written.attempt == 2 and written.job_name == "r-try2"
    assert written.gate is not None and written.gate.state == "retried"
    assert [a.verdict for a in written.attempts or []] == ["retried"]
    history = await handle.fetch_history()
    summaries = [json.loads(e.user_metadata.summary.data) for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes") and e.HasField("user_metadata")]
    assert "attempt 2: agent Job r-try2" in summaries and "attempt 2: gate hook approve" in summaries, summaries


async def test_a_run_always_sent_back_ends_retries_exhausted_at_max_attempts(env: WorkflowEnvironment) -> None:
    cluster = _retried(max_attempts=3)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        for attempt in (1, 2, 3):
            await _pending(handle, attempt)
            view = await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
            assert view.state == ("retried" if attempt < 3 else "retries-exhausted")
        result = await run_result(handle)
    assert result.phase == "Succeeded"
    assert result.result == "Response blocked: all 3 attempts were rejected by the gate (maxAttempts 3 reached)"
    assert FEEDBACK not in (result.result or ""), "the reviewer's feedback is no answer"
    status = cluster.status()
    assert status["gate_verdict"] == "retries-exhausted" and status["attempt"] == 3
    assert [a["verdict"] for a in status["attempts"]] == ["retried", "retried", "retries-exhausted"]
    assert [j.ref.name for j in cluster.created if j.ref.component == "agent-run"] == ["r", "r-try2", "r-try3"]
    assert len([e for e in cluster.events if e.topic == "agent.run.completed"]) == 1


async def test_max_chain_tokens_reached_ends_retries_exhausted_early(env: WorkflowEnvironment) -> None:
    cluster = _retried(max_attempts=5, max_chain_tokens=12)  # 8 tokens an attempt: 16 after the second
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        for attempt in (1, 2):
            await _pending(handle, attempt)
            await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        result = await run_result(handle)
    assert result.result == ("Response blocked: all 2 attempts were rejected by the gate "
                             "(maxChainTokens 12 reached: 16 tokens used)")
    status = cluster.status()
    assert status["gate_verdict"] == "retries-exhausted" and status["attempt"] == 2
    assert status["token_usage"]["total_tokens"] == 16
    assert len([j for j in cluster.created if j.ref.component == "agent-run"]) == 2


async def test_retry_without_lifecycle_retry_is_a_reject_with_the_blocked_text(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        assert (view.state, view.result) == ("rejected", REJECTED_TEXT)
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result=REJECTED_TEXT)
    status = cluster.status()
    assert status["gate_verdict"] == "rejected"
    assert "attempt" not in status and "attempts" not in status, "a run without lifecycle.retry has one attempt"
    assert [j.ref.component for j in cluster.created] == ["agent-run", "post-run"]


async def test_the_backoff_is_waited_before_the_next_attempt(env: WorkflowEnvironment) -> None:
    cluster = _retried(backoff=3600)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        await env.sleep(timedelta(hours=1, seconds=1))  # time skips only while the test waits on it
        await _pending(handle, 2)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", source="api"))
        await run_result(handle)
    decided = parse_rfc3339(cluster.status()["attempts"][0]["decided_at"])
    second = next(j for j in cluster.created if j.ref.name == "r-try2")
    assert decided is not None
    assert second.created - decided >= timedelta(hours=1), f"attempt 2 started {second.created - decided} later"


async def test_a_verdict_for_a_decided_attempt_is_refused_and_recorded(env: WorkflowEnvironment) -> None:
    cluster = _retried(backoff=600)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        # During the backoff: attempt 1 is decided and attempt 2's gate has not started.
        await handle.signal(AgentRunWorkflow.verdict, Verdict(action="approve", decided_by="eve"))
        await env.sleep(timedelta(seconds=601))
        await _pending(handle, 2)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", source="api"))
        result = await run_result(handle)
    assert result.result == "second draft with KIWI"
    cond = cluster.status()["conditions"]["VerdictRefused"]
    assert cond.reason == "AlreadyDecided" and cond.message.startswith("approve from temporal:eve (temporal) refused")


@pytest.mark.parametrize(("claimed", "recorded"), [("", "temporal:unknown"), ("carol", "temporal:carol")])
async def test_a_verdict_sent_straight_to_temporal_is_recorded_as_such(env: WorkflowEnvironment, claimed: str,
                                                                      recorded: str) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        await handle.signal(AgentRunWorkflow.verdict, Verdict(action="approve", decided_by=claimed))
        result = await run_result(handle)
    assert result.result == "hi there"
    gate = cluster.status()["gate"]
    assert gate["decided_by"] == recorded and gate["reason"] == "approve via temporal"


async def test_an_api_verdict_keeps_its_identity(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict,
                                           Verdict(action="approve", decided_by="alice@example.com", source="api"))
        await run_result(handle)
    assert view.decided_by == "alice@example.com"
    assert cluster.status()["gate"]["decided_by"] == "alice@example.com"


async def test_deletion_during_attempt_two_cleans_up_every_attempts_jobs(env: WorkflowEnvironment) -> None:
    cluster = _retried()
    cluster.jobs["agent-run@2"] = JobScript(finishes=False)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())

        async def attempt_two_runs() -> bool:
            state = await handle.query(AgentRunWorkflow.status)
            return state.jobs.get("agent-run") == "r-try2" and state.phase == "Running"

        await wait_for_async(attempt_two_runs, what="attempt 2's agent to run")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await run_result(handle)
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.kill
    assert [j.name for j in cleanup.jobs] == ["r", "r-postrun", "r-try2"], "every attempt's Jobs go"
    assert [n for n, _ in cluster.calls][-1] == "clean_up"
    assert not [e for e in cluster.events if e.topic == "agent.run.completed"], "no completion per attempt"


async def test_an_attempt_after_a_failed_agent_runs_again_and_its_success_counts(env: WorkflowEnvironment) -> None:
    cluster = _retried()
    cluster.agents = [AgentOutcome(status="error", error="model said no", exit_code=1), _answer("fine now")]
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _pending(handle, 1)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, _retry())
        await _pending(handle, 2)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", source="api"))
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="fine now"), "the phase follows the last attempt's agent"
    agent2 = [r for r in cluster.job_requests() if r.component == "agent-run"][1]
    assert agent2.task is not None and "model said no" in agent2.task

