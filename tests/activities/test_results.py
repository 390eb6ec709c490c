"""Reading the agent's result marker and the preRun skip marker."""

import datetime as dt
import json

from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodStatus,
)

from activities.results import agent_outcome, lost_outcome, lost_why, parse_marker, skip_reason
from models.steps import RESULT_MAX_BYTES

M = "__SYMPOZIUM_RESULT__{}__SYMPOZIUM_END__"


def test_the_last_marker_wins() -> None:
    log = "x\n" + M.format('{"status":"success","response":"first"}') + "\n" + \
        M.format('{"status":"success","response":"second"}') + "\n"
    assert agent_outcome(log, 0).response == "second"


def test_success_marker_with_metrics() -> None:
    out = agent_outcome(M.format('{"status":"success","response":"ok","metrics":{"inputTokens":10,'
                                 '"outputTokens":20,"toolCalls":1,"durationMs":5}}'), 0)
    assert out.status == "success" and out.response == "ok" and out.has_marker
    assert (out.metrics.input_tokens, out.metrics.output_tokens, out.metrics.tool_calls) == (10, 20, 1)


def test_a_success_marker_wins_over_a_failed_exit_code() -> None:
    out = agent_outcome(M.format('{"status":"success","response":"fine"}'), 2)
    assert out.status == "success" and out.exit_code == 0


def test_error_marker_reports_the_error_and_discards_usage() -> None:
    out = agent_outcome(M.format('{"status":"error","error":"HTTP 429","metrics":{"inputTokens":3}}'), 1)
    assert out.status == "error" and out.error == "HTTP 429" and out.exit_code == 1
    assert out.metrics.input_tokens == 0


def test_negative_metrics_zero_all_of_them() -> None:
    out = agent_outcome(M.format('{"status":"success","metrics":{"inputTokens":-1,"outputTokens":5}}'), 0)
    assert out.metrics.output_tokens == 0


def test_no_marker_and_a_failure_names_the_exit_code_and_last_lines() -> None:
    out = agent_outcome("starting\npanic: nil pointer\n", 2)
    assert out.status == "error" and out.exit_code == 2
    assert out.error.startswith("agent container exited with code 2") and "panic: nil pointer" in out.error


def test_timeout_is_reported_with_exit_code_124() -> None:
    out = agent_outcome("working...", None, timed_out=True)
    assert out.status == "error" and out.error == "timeout" and out.exit_code == 124


def test_skipped_marker_and_default_reason() -> None:
    assert agent_outcome(M.format('{"status":"skipped"}'), 0).response == "preRun hook requested skip"


def test_malformed_marker_json_counts_as_no_marker() -> None:
    assert parse_marker(M.format("{not json")) is None


def test_skip_reason_from_the_prerun_done_container() -> None:
    assert skip_reason("__AGENTRUN_SKIP__queue empty\n") == "queue empty"
    assert skip_reason("__AGENTRUN_SKIP__") == "preRun hook requested skip"
    assert skip_reason("") is None


def test_a_response_too_large_for_a_payload_is_cut_on_a_character_boundary_and_says_so() -> None:
    big = "é" * RESULT_MAX_BYTES  # two bytes each: twice the limit
    out = agent_outcome(M.format(json.dumps({"status": "success", "response": big})), 0)
    assert out.status == "success" and out.cut_from == 2 * RESULT_MAX_BYTES
    assert len(out.response.encode()) == RESULT_MAX_BYTES and set(out.response) == {"é"}
    small = agent_outcome(M.format('{"status":"success","response":"ok"}'), 0)
    assert (small.response, small.cut_from) == ("ok", 0)


def test_an_error_too_large_is_cut_as_well() -> None:
    out = agent_outcome(M.format(json.dumps({"status": "error", "error": "x" * (RESULT_MAX_BYTES + 10)})), 1)
    assert out.status == "error" and len(out.error) == RESULT_MAX_BYTES and out.cut_from == RESULT_MAX_BYTES + 10


def test_cached_input_tokens_are_read_and_never_more_than_the_input() -> None:
    out = agent_outcome(M.format('{"status":"success","metrics":{"inputTokens":100,"outputTokens":5,'
                                 '"cachedInputTokens":60,"models":[{"model":"m","calls":2}]}}'), 0)
    assert (out.metrics.input_tokens, out.metrics.cached_input_tokens) == (100, 60)
    odd = agent_outcome(M.format('{"status":"success","metrics":{"inputTokens":10,"cachedInputTokens":60}}'), 0)
    assert odd.metrics.cached_input_tokens == 10, "cached tokens are part of the input, never beyond it"


def _pod(*, conditions: list[V1PodCondition] | None = None, reason: str | None = None, deleting: bool = False,
         agent: V1ContainerStateTerminated | None = None) -> V1Pod:
    return V1Pod(metadata=V1ObjectMeta(name="p", deletion_timestamp=dt.datetime.now(dt.UTC) if deleting else None),
                 status=V1PodStatus(phase="Failed", reason=reason, conditions=conditions, container_statuses=[
                     V1ContainerStatus(name="agent", image="a", image_id="", ready=False, restart_count=0,
                                       state=V1ContainerState(terminated=agent))] if agent else None))


def test_a_pod_ended_from_outside_is_lost_and_one_the_agent_ended_is_not() -> None:
    exited = V1ContainerStateTerminated(exit_code=1, reason="Error")
    assert lost_why(None) == "is gone (deleted)"
    assert lost_why(_pod(deleting=True, agent=exited)) == "was deleted"
    evicted = V1PodCondition(type="DisruptionTarget", status="True", reason="EvictionByEvictionAPI")
    assert lost_why(_pod(conditions=[evicted], deleting=True)) == "was evicted"
    gc = V1PodCondition(type="DisruptionTarget", status="True", reason="DeletionByPodGC")
    assert lost_why(_pod(conditions=[gc])) == "was deleted by the pod garbage collector (its node is gone)"
    assert lost_why(_pod(reason="Evicted", agent=V1ContainerStateTerminated(exit_code=137))) == \
        "was evicted by its node's kubelet"
    unknown = V1ContainerStateTerminated(exit_code=137, reason="ContainerStatusUnknown")
    assert lost_why(_pod(agent=unknown)) == "was lost with its node (its container could not be located)"
    # The agent's own end: an error, a crash, the kernel's OOM kill.
    assert lost_why(_pod(agent=exited)) is None
    assert lost_why(_pod(agent=V1ContainerStateTerminated(exit_code=137, reason="OOMKilled"))) is None
    assert lost_why(_pod(conditions=[V1PodCondition(type="DisruptionTarget", status="False")], agent=exited)) is None


def test_a_lost_outcome_names_the_pod_and_keeps_what_the_agent_said() -> None:
    plain = lost_outcome("r", "r-x", "was deleted", 143)
    assert (plain.status, plain.lost, plain.exit_code) == ("error", "was deleted", 143)
    assert plain.error == "the agent's pod r-x of Job r was deleted before it reported a result"
    said = agent_outcome(M.format('{"status":"error","error":"terminated"}'), 143)
    kept = lost_outcome("r", "r-x", "was evicted", 143, said=said)
    assert kept.error == "terminated (the agent's pod r-x of Job r was evicted)" and kept.has_marker
    assert lost_outcome("r", None, "is gone (deleted)", None).exit_code == 1
