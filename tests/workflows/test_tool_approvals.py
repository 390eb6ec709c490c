"""Tool calls that wait for people (SPEC §10), the workflow's side, on the time-skipping server: the agent parks, the
workflow removes every Job of the run (the park step returns once no pod is left), waits durably for a decision on
each call until the policy's toolApproval.timeout, and starts the agent again with the decisions; refusals each have
their own reason and leave the run as it was; parked time is not run time.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from models.approvals import (
    AgentWait,
    PendingCall,
    ToolApprovalStatus,
    ToolDecision,
    canonical_arguments,
    sha256_hex,
)
from models.gate import Verdict
from models.names import UNVERIFIED
from models.resolve import ResolvedRetry, ResolvedToolApproval
from models.search_attributes import SA_TOOL_APPROVAL
from models.steps import AgentOutcome, Metrics
from tests.waiting import wait_for_async
from workflows.agent_run import AgentRunWorkflow, RunResult

from .cluster import FakeCluster, JobScript, resolved_run
from .test_agent_run_workflow import GATE_HOOK, WAITING_GATE, Harness, env

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["env"]  # the module's time-skipping server, shared with test_agent_run_workflow's fixture

ASK = ResolvedToolApproval(timeout_seconds=1800, on_timeout="deny")


def call(cid: str, tool: str = "execute_command", **args: Any) -> PendingCall:
    text = canonical_arguments(json.dumps(args or {"command": "echo hi >> counter"}))
    return PendingCall(id=cid, tool=tool, arguments=text, arguments_sha256=sha256_hex(text))


def waiting(*calls: PendingCall, round_: int = 1, active_ms: int = 2000) -> AgentOutcome:
    return AgentOutcome(status="waiting", has_marker=True, wait=AgentWait(kind="tool-approval", round=round_,
                                                                          calls=list(calls)),
                        metrics=Metrics(input_tokens=4, output_tokens=2, active_ms=active_ms))


DONE = AgentOutcome(status="success", response="all done", has_marker=True,
                    metrics=Metrics(input_tokens=10, output_tokens=5, active_ms=3000))
C1 = call("c1")
C2 = call("c2", "write_file", path="x", content="y")


def parked(*containers: AgentOutcome, tool_approval: ResolvedToolApproval = ASK, timeout: int = 600,
           jobs: dict[str, JobScript] | None = None, **kw: Any) -> FakeCluster:
    return FakeCluster(resolved_run(tool_approval=tool_approval, timeout=timeout, **kw), containers=list(containers),
                       jobs=jobs or {})


def decision(c: PendingCall, action: str = "approve", *, by: str = "alice", sha: str | None = None,
             **kw: Any) -> ToolDecision:
    return ToolDecision(call_id=c.id, action=action, arguments_sha256=sha or c.arguments_sha256, decided_by=by,
                        source="api", **kw)


async def pending(handle: WorkflowHandle[AgentRunWorkflow, RunResult], round_: int = 1,
                  attempt: int = 1) -> ToolApprovalStatus:
    async def now() -> ToolApprovalStatus | None:
        st = await handle.query(AgentRunWorkflow.tool_approval)
        return st if st is not None and st.state == "pending" and st.round == round_ and st.attempt == attempt \
            and (await handle.query(AgentRunWorkflow.status)).step.startswith("waiting for approval") else None
    return await wait_for_async(now, what=f"round {round_}'s calls to wait for approval")


async def refused(handle: WorkflowHandle[AgentRunWorkflow, RunResult], d: ToolDecision) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as e:
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, d)
    return str(getattr(e.value.cause, "message", e.value.cause))


def resumes(cluster: FakeCluster) -> list[dict[str, Any]]:
    return [json.loads(r.resume) for r in cluster.job_requests() if r.resume is not None]


async def test_an_approved_call_parks_the_agent_with_no_pod_and_resumes_it_with_the_decision(
        env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1), DONE)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        status = await pending(handle)
        assert [c.id for c in status.calls] == ["c1"]
        (park,) = cluster.named("park_agent")
        assert [j.name for j in park.jobs] == ["r"] and all(j.deleted for j in cluster.created), \
            "every Job of the run goes before the calls are shown as waiting"
        written = park.status.status
        assert written.tool_approval is not None and written.tool_approval.state == "pending"
        assert written.tool_approval.calls[0].arguments == '{"command":"echo hi >> counter"}'
        assert written.token_usage is not None and written.token_usage.total_tokens == 6
        cond = {c.type: c for c in park.status.conditions or []}["AwaitingToolApproval"]
        assert cond.status == "True" and "c1 (execute_command)" in cond.message
        assert [e.topic for e in park.events] == ["agent.run.tool.pending"]
        assert park.events[0].data["calls"] == [{"id": "c1", "tool": "execute_command",
                                                 "argumentsSha256": C1.arguments_sha256}]
        desc = await handle.describe()
        assert desc.typed_search_attributes.get(SA_TOOL_APPROVAL) == "pending"
        view = await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C1))
        assert (view.call_id, view.action, view.decided_by, view.waiting, view.resumed) == (
            "c1", "approve", "alice", [], True)
        result = await handle.result()
    assert result == RunResult(phase="Succeeded", result="all done")
    assert [j.ref.name for j in cluster.created] == ["r", "r-resume1"]
    assert [start.prepare for start in cluster.named("start_job")] == [True, False], \
        "the resumed agent gets the run's workspace and journal as they are: nothing is provisioned again"
    (resume,) = resumes(cluster)
    assert resume == {"kind": "tool-approval", "round": 1, "decisions": [
        {"callId": "c1", "action": "approve", "argumentsSha256": C1.arguments_sha256, "decidedBy": "alice",
         "source": "api"}]}
    st = cluster.status()
    assert st["tool_approval"]["state"] == "decided"
    assert [(d["call_id"], d["action"], d["decided_by"], d["source"]) for d in st["tool_approvals"]] == [
        ("c1", "approve", "alice", "api")]
    assert st["conditions"]["AwaitingToolApproval"].status == "False"
    assert [e.data["action"] for e in cluster.events if e.topic == "agent.run.tool.decided"] == ["approve"]
    assert (await handle.describe()).typed_search_attributes.get(SA_TOOL_APPROVAL) == "decided"


async def test_reject_and_edit_reach_the_agent_and_the_audit_keeps_both_arguments(env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1, C2), DONE)
    edited = canonical_arguments('{"command": "echo safe"}')
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        first = await handle.execute_update(AgentRunWorkflow.decide_tool_call,
                                            decision(C1, "edit", by="carol", arguments=edited))
        assert first.waiting == ["c2"] and not first.resumed
        await handle.execute_update(AgentRunWorkflow.decide_tool_call,
                                    decision(C2, "reject", by="bob", reason="not that file"))
        await handle.result()
    (resume,) = resumes(cluster)
    assert [(d["callId"], d["action"], d.get("arguments"), d.get("reason")) for d in resume["decisions"]] == [
        ("c1", "edit", edited, None), ("c2", "reject", None, "not that file")]
    audit = cluster.status()["tool_approvals"]
    assert audit[0]["arguments_sha256"] == C1.arguments_sha256 and audit[0]["arguments"] == edited, \
        "the audit shows what was asked (its hash) and what ran (the edit)"
    assert (audit[1]["decided_by"], audit[1]["reason"]) == ("bob", "not that file")


async def test_each_refused_decision_has_its_own_reason_and_the_run_goes_on(env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1), DONE, jobs={"agent-run": JobScript(finishes=False)})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await wait_for_async(lambda: _created(cluster, 1), what="the agent's Job")
        early = await refused(handle, decision(C1))
        assert early == "no tool call is waiting for a decision"
        job = cluster.created[0]
        job.finished = True
        await handle.signal(AgentRunWorkflow.job_finished, _finished(job))
        await pending(handle)
        assert "no call c9 is waiting" in await refused(handle, ToolDecision(
            call_id="c9", action="approve", arguments_sha256=C1.arguments_sha256, source="api", decided_by="a"))
        other = await refused(handle, decision(C1, sha=sha256_hex('{"command":"rm -rf /"}')))
        assert other.startswith("argumentsSha256 ") and "other arguments than the ones waiting" in other
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C1, by="alice"))
        second = await refused(handle, decision(C1, "reject", by="mallory"))
        assert second == "call c1 was already decided (approve by alice)"
        await wait_for_async(lambda: _created(cluster, 2), what="the agent started again")
        again = cluster.created[1]
        again.finished = True
        await handle.signal(AgentRunWorkflow.job_finished, _finished(again))
        result = await handle.result()
    assert result.phase == "Succeeded"
    (resume,) = resumes(cluster)
    assert [d["decidedBy"] for d in resume["decisions"]] == ["alice"], "the first decision counted"
    reasons = [e.data["reason"] for e in cluster.events if e.topic == "agent.run.tool.refused"]
    assert reasons == ["NoCallPending", "UnknownCall", "OtherArguments", "AlreadyDecided"]
    assert cluster.status()["conditions"]["ToolDecisionRefused"].reason == "AlreadyDecided"


async def _created(cluster: FakeCluster, n: int) -> bool | None:
    return len(cluster.created) >= n or None


def _finished(job: Any) -> Any:
    from models.steps import JobFinished
    return JobFinished(name=job.ref.name, uid=job.ref.uid, succeeded=True)


async def test_no_decision_within_the_policys_timeout_denies_and_the_model_is_told(env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1), DONE, tool_approval=ResolvedToolApproval(timeout_seconds=5, on_timeout="deny"))
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        await env.sleep(timedelta(seconds=6))
        result = await handle.result()
    assert result.phase == "Succeeded"
    (resume,) = resumes(cluster)
    (d,) = resume["decisions"]
    assert (d["action"], d["source"], d["decidedBy"]) == ("reject", "timeout", "timeout")
    assert d["reason"] == "the approval timed out: no decision within 5s (toolApproval.onTimeout: deny)"
    assert cluster.status()["tool_approvals"][0]["source"] == "timeout"


async def test_on_timeout_allow_approves_what_nobody_decided(env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1, C2), DONE, tool_approval=ResolvedToolApproval(timeout_seconds=5, on_timeout="allow"))
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C2, "reject", reason="no"))
        await env.sleep(timedelta(seconds=6))
        await handle.result()
    (resume,) = resumes(cluster)
    assert [(d["callId"], d["action"], d["source"]) for d in resume["decisions"]] == [
        ("c1", "approve", "timeout"), ("c2", "reject", "api")]


async def test_two_rounds_of_approvals_in_one_run(env: WorkflowEnvironment) -> None:
    c3 = call("c3", command="echo two")
    cluster = parked(waiting(C1), waiting(c3, round_=2, active_ms=4000), DONE)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle, 1)
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C1))
        await pending(handle, 2)
        assert "already decided" in await refused(handle, decision(C1)), "round 1's call is decided for good"
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(c3, by="bob"))
        result = await handle.result()
    assert result.phase == "Succeeded"
    assert [j.ref.name for j in cluster.created] == ["r", "r-resume1", "r-resume2"]
    assert [r["round"] for r in resumes(cluster)] == [1, 2]
    assert [d["call_id"] for d in cluster.status()["tool_approvals"]] == ["c1", "c3"]
    parks = cluster.named("park_agent")
    assert [[j.name for j in p.jobs] for p in parks] == [["r"], ["r", "r-resume1"]]


async def test_parked_time_is_not_run_time(env: WorkflowEnvironment) -> None:
    """timeout 25s, 40s parked: the agent started again has what is left of its active time (25s less the 5s its
    journal counted), plus the start grace; the run succeeds, and its status says how the time went."""
    cluster = parked(waiting(C1, active_ms=5000), DONE.model_copy(update={"metrics": Metrics(active_ms=9000)}),
                     timeout=25)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        await env.sleep(timedelta(seconds=40))
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C1))
        result = await handle.result()
    assert result.phase == "Succeeded"
    first, again = [r for r in cluster.job_requests() if r.component == "agent-run"]
    assert first.deadline_seconds is None, "the first container has the run's timeout"
    assert again.deadline_seconds == 20 + 1 + 30
    st = cluster.status()
    assert st["active_ms"] == 9000 and st["waited_ms"] >= 40_000


async def test_annotation_decisions_count_only_from_a_vouched_writer_after_the_wait_began(
        env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1, C2), DONE)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        version = cluster.run_version  # the park step cleared the annotation: later versions are newer
        await handle.signal(AgentRunWorkflow.tool_decision, ToolDecision(
            call_id="c1", action="approve", arguments_sha256=C1.arguments_sha256, source="annotation",
            decided_by=UNVERIFIED, resource_version=str(version + 1)))
        await handle.signal(AgentRunWorkflow.tool_decision, ToolDecision(
            call_id="c1", action="approve", arguments_sha256=C1.arguments_sha256, source="annotation",
            decided_by="alice", resource_version=str(version)))
        await handle.signal(AgentRunWorkflow.tool_decision, ToolDecision(
            call_id="c1", action="approve", arguments_sha256=C1.arguments_sha256, source="annotation",
            decided_by="alice", resource_version=str(version + 2)))
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C2))
        await handle.result()
    reasons = [e.data["reason"] for e in cluster.events if e.topic == "agent.run.tool.refused"]
    assert reasons == ["UnverifiedWriter", "OlderThanWait"]
    (resume,) = resumes(cluster)
    assert [(d["callId"], d["source"], d["decidedBy"]) for d in resume["decisions"]] == [
        ("c1", "annotation", "alice"), ("c2", "api", "alice")]


async def test_a_decision_straight_to_temporal_names_what_it_claims(env: WorkflowEnvironment) -> None:
    cluster = parked(waiting(C1), DONE)
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()
        await pending(handle)
        view = await handle.execute_update(AgentRunWorkflow.decide_tool_call, ToolDecision(
            call_id="c1", action="approve", arguments_sha256=C1.arguments_sha256, decided_by="ops"))
        await handle.result()
    assert (view.decided_by, view.source) == ("temporal:ops", "temporal")


async def test_approvals_inside_a_gate_retry_attempt(env: WorkflowEnvironment) -> None:
    run = resolved_run(post_run=[GATE_HOOK], retry=ResolvedRetry(max_attempts=2), tool_approval=ASK)
    cluster = FakeCluster(run, jobs={"post-run": WAITING_GATE},
                          containers=[DONE, waiting(C1), DONE.model_copy(update={"response": "second"})])
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()

        async def gate_pending() -> bool | None:
            return (await handle.query(AgentRunWorkflow.gate)).state == "pending" or None
        await wait_for_async(gate_pending, what="attempt 1's gate")
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(
            action="retry", response="again", decided_by="rev", source="api"))
        status = await pending(handle, attempt=2)
        assert status.attempt == 2
        await handle.execute_update(AgentRunWorkflow.decide_tool_call, decision(C1))
        await wait_for_async(gate_pending, what="attempt 2's gate")
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(
            action="approve", decided_by="rev", source="api"))
        result = await handle.result()
    assert result == RunResult(phase="Succeeded", result="second")
    assert [j.ref.name for j in cluster.created if j.ref.component == "agent-run"] == ["r", "r-try2",
                                                                                      "r-try2-resume1"]
    assert cluster.status()["tool_approvals"][0]["attempt"] == 2


async def test_the_gate_shows_the_held_response_and_token_usage_while_it_waits(env: WorkflowEnvironment) -> None:
    cluster = FakeCluster(resolved_run(post_run=[GATE_HOOK]), jobs={"post-run": WAITING_GATE})
    h = Harness(env, cluster)
    async with h.worker:
        handle = await h.start()

        async def gate_pending() -> bool | None:
            return (await handle.query(AgentRunWorkflow.gate)).state == "pending" or None
        await wait_for_async(gate_pending, what="the gate")
        (gate_start,) = [s for s in cluster.named("start_job") if s.job.component == "post-run"]
        assert gate_start.status is not None
        written = gate_start.status.status
        assert written.gate is not None and written.gate.response == "hi there"
        assert written.token_usage is not None and written.token_usage.total_tokens == 8
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="r",
                                                                              source="api"))
        await handle.result()
    final = cluster.status()
    assert final["gate"].get("response") is None, "the final gate status carries no copy of the response"
