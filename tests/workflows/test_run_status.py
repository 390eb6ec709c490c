"""run_status: which fields a Job's start and the run's end write, and what the hooks' Jobs are told."""

from __future__ import annotations

from models.agentrun import AttemptRecord, Condition, GateStatus, TokenUsage
from models.run import Phase
from models.steps import AgentOutcome
from tests.workflows.cluster import hook, resolved_run
from workflows.run_status import final_status, job_request, job_status, job_summary

COND = Condition(type="VerdictRefused", status="True", reason="NoGateWaiting", message="m",
                 last_transition_time="2026-01-01T00:00:00Z")
NOW = GateStatus(state="retried", decided_by="alice")
PENDING = GateStatus(state="pending", requested_at="2026-01-01T00:00:00Z")
KEPT = [AttemptRecord(attempt=1, verdict="retried", decided_by="alice", decided_at="2026-01-01T00:00:00Z", reason="r")]
FAILED_AGENT = AgentOutcome(status="error", error="boom", response="ignored", exit_code=3)


def test_the_agents_first_job_writes_running_and_its_name_without_conditions() -> None:
    update = job_status(Phase.RUNNING, "r", conditions=[COND], gate=NOW)
    assert update is not None and update.conditions is None
    assert update.status.model_fields_set == {"phase", "job_name"}
    assert (update.status.phase, update.status.job_name) == (Phase.RUNNING, "r")


def test_a_later_attempts_agent_says_which_attempt_and_that_the_last_gate_sent_it_back() -> None:
    update = job_status(Phase.RUNNING, "r-2", conditions=[COND], gate=NOW, attempt=2, attempts=KEPT, with_retry=True)
    assert update is not None and update.conditions == [COND]
    s = update.status
    assert (s.attempt, s.attempts, s.gate, s.job_name) == (2, KEPT, NOW, "r-2")


def test_a_first_attempt_with_retry_names_its_attempt_before_any_was_decided() -> None:
    update = job_status(Phase.RUNNING, "r", conditions=[], gate=NOW, attempt=1, attempts=None, with_retry=True)
    assert update is not None and update.status.attempt == 1 and update.status.attempts is None
    assert update.status.gate is None and update.conditions is None


def test_the_gates_job_writes_postrunning_the_pending_gate_the_pod_and_the_agents_exit_code() -> None:
    update = job_status(Phase.POST_RUNNING, "r-postrun", conditions=[COND], gate=NOW, pending_gate=PENDING,
                        pod="r-abc", agent=FAILED_AGENT, gate_only=True)
    assert update is not None and update.conditions == [COND]  # e.g. a verdict refused before the gate
    s = update.status
    assert (s.phase, s.post_run_job_name, s.gate, s.pod_name, s.exit_code) == (
        Phase.POST_RUNNING, "r-postrun", PENDING, "r-abc", 3)


def test_a_job_that_starts_no_phase_writes_nothing_unless_it_has_something_to_say() -> None:
    assert job_status(None, "r-prerun", conditions=[COND], gate=NOW) is None
    update = job_status(None, "r-post-gate", conditions=[COND], gate=NOW, agent=FAILED_AGENT,
                        after_gate=("rejected", "no"))
    assert update is not None and update.conditions == [COND]
    s = update.status
    assert s.model_fields_set == {"exit_code", "gate", "gate_verdict"}
    assert (s.exit_code, s.gate, s.gate_verdict) == (3, NOW, "rejected")


def test_postrun_hooks_see_the_agents_exit_code_and_text_and_after_the_gate_the_final_result() -> None:
    run = resolved_run(post_run=[hook("g", gate=True), hook("notify")])
    req = job_request(run, "post-run", workflow_id="w", attempt=1, task=None, agent=FAILED_AGENT, gate_only=True,
                      after_gate=None)
    assert (req.agent_exit_code, req.agent_result, req.gate_only, req.gate_verdict) == (3, "boom", True, None)
    ok = AgentOutcome(status="success", response="hi")
    req = job_request(run, "post-gate", workflow_id="w", attempt=1, task=None, agent=ok, gate_only=False,
                      after_gate=("rejected", "replaced"))
    assert (req.agent_exit_code, req.agent_result, req.gate_only, req.gate_verdict) == (0, "replaced", False,
                                                                                        "rejected")


def test_an_agents_job_carries_its_attempt_and_task_and_nothing_for_hooks() -> None:
    run = resolved_run()
    req = job_request(run, "agent-run", workflow_id="w", attempt=2, task="again", agent=None, gate_only=False,
                      after_gate=None)
    assert (req.attempt, req.task, req.workflow_id, req.run) == (2, "again", "w", run)
    assert not {"agent_exit_code", "agent_result", "gate_only", "gate_verdict"} & req.model_fields_set


def test_the_last_status_names_the_gates_verdict_and_keeps_attempts_and_a_real_token_usage() -> None:
    usage = TokenUsage(input_tokens=3, output_tokens=1, total_tokens=4)
    gate = GateStatus(state="approved")
    s = final_status(Phase.SUCCEEDED, completed_at="t", workflow_id="w", result="hi", exit_code=0, gate=gate,
                     pod="p", attempt=2, attempts=KEPT, token_usage=usage)
    assert (s.phase, s.completed_at, s.workflow_id, s.result, s.exit_code, s.pod_name) == (
        Phase.SUCCEEDED, "t", "w", "hi", 0, "p")
    assert (s.gate, s.gate_verdict, s.attempt, s.attempts, s.token_usage) == (gate, "approved", 2, KEPT, usage)


def test_the_last_status_leaves_out_an_empty_token_usage_and_attempts_never_decided() -> None:
    s = final_status(Phase.FAILED, completed_at="t", workflow_id="w", error="boom", attempt=1, attempts=None,
                     token_usage=TokenUsage())
    assert s.token_usage is None and s.attempt is None and s.attempts is None
    assert s.gate is None and s.gate_verdict is None and s.error == "boom"



def test_a_jobs_start_is_named_by_its_agent_job_its_gate_hook_or_its_hooks_count() -> None:
    run = resolved_run(pre_run=[hook("fetch")], post_run=[hook("notify"), hook("approve", gate=True)])
    assert job_summary(run, "agent-run", 2, gate_only=False, prepare=False) == "agent Job r-try2"
    assert job_summary(run, "post-run", 1, gate_only=True, prepare=False) == "gate hook approve"
    assert job_summary(run, "post-run", 1, gate_only=False, prepare=False) == "post-run Job with 2 hook(s)"
    assert job_summary(run, "post-gate", 1, gate_only=False, prepare=False) == "post-gate Job with 1 hook(s)"
    assert job_summary(run, "prerun", 1, gate_only=False, prepare=True) == "workspace, prerun Job with 1 hook(s)"


def test_the_first_job_of_a_run_without_hooks_or_rbac_makes_nothing_first() -> None:
    assert job_summary(resolved_run(), "agent-run", 1, gate_only=False, prepare=True) == "agent Job r"
