"""models/gate.py: SPEC §4's resolution table with retry, the retried task's frame, Temporal-path verdicts."""

from __future__ import annotations

import pytest

from models.gate import (
    REJECTED_TEXT,
    RETRY_PART_MAX_BYTES,
    Verdict,
    marked,
    parse_annotation,
    resolve,
    retry_task,
)

RETRY = Verdict(action="retry", response="say KIWI", source="api", decided_by="alice")


@pytest.mark.parametrize(("chance", "label", "final"), [
    ("again", "retried", ""),
    ("exhausted", "retries-exhausted", "Response blocked: all 3 attempts were rejected by the gate (maxAttempts 3 reached)"),
    ("off", "rejected", REJECTED_TEXT),
])
def test_a_retry_verdict_resolves_by_what_is_left(chance: str, label: str, final: str) -> None:
    got = resolve(RETRY, agent_result="draft", gate_default="block", hook_failed=False, retry=chance,  # type: ignore[arg-type]
                  attempts=3, exhausted_why="maxAttempts 3 reached")
    assert got == (label, final)
    assert "KIWI" not in got[1], "the feedback is never the answer"


def test_the_retried_task_carries_the_task_the_rejected_output_and_the_feedback() -> None:
    task = retry_task(task="Write a haiku.", rejected="old pond", feedback="say KIWI", attempt=2)
    assert task.startswith("Write a haiku.\n\n")
    assert task.index("old pond") < task.index("say KIWI")
    assert "attempt 1" in task and "attempt 2" in task


def test_each_part_of_the_retried_task_is_cut_at_a_character_boundary() -> None:
    long = "é" * RETRY_PART_MAX_BYTES  # two bytes each: twice the bound
    task = retry_task(task="t", rejected=long, feedback="f" * (3 * RETRY_PART_MAX_BYTES), attempt=2)
    assert ("é" * (RETRY_PART_MAX_BYTES // 2)) in task and ("é" * (RETRY_PART_MAX_BYTES // 2 + 1)) not in task
    assert "f" * RETRY_PART_MAX_BYTES in task and "f" * (RETRY_PART_MAX_BYTES + 1) not in task
    assert task.count(f"[... cut to its first {RETRY_PART_MAX_BYTES} bytes]") == 2
    assert len(task.encode()) < 3 * RETRY_PART_MAX_BYTES


@pytest.mark.parametrize(("verdict", "by"), [
    (Verdict(action="approve"), "temporal:unknown"),
    (Verdict(action="approve", decided_by="temporal"), "temporal:unknown"),
    (Verdict(action="approve", decided_by="carol"), "temporal:carol"),
    (Verdict(action="approve", decided_by="temporal:carol"), "temporal:carol"),
    (Verdict(action="approve", decided_by="alice@example.com", source="api"), "alice@example.com"),
    (Verdict(action="approve", decided_by="unverified", source="annotation"), "unverified"),
])
def test_only_verdicts_sent_straight_to_temporal_are_marked(verdict: Verdict, by: str) -> None:
    assert marked(verdict).decided_by == by


def test_a_retry_annotation_is_a_verdict() -> None:
    v = parse_annotation('{"action": "retry", "response": "include KIWI", "reason": "no fruit"}')
    assert v is not None and (v.action, v.response, v.reason, v.source) == ("retry", "include KIWI", "no fruit",
                                                                            "annotation")


@pytest.mark.parametrize(("sealed", "by"), [(True, "alice@example.com"), (None, "alice@example.com"),
                                            (False, "temporal:alice@example.com")])
@pytest.mark.parametrize("source", ["api", "annotation"])
def test_a_verdict_claiming_our_api_or_bridge_counts_only_if_it_arrived_sealed(sealed: bool | None, by: str,
                                                                                source: str) -> None:
    # sealed: encrypted with the installation's key (True), plain while a key is set (False), no key set (None).
    v = Verdict(action="approve", decided_by="alice@example.com", source=source, sealed=sealed)
    got = marked(v)
    assert got.decided_by == by and got.source == source, "the source stays: the gate's rules read it"


def test_the_seal_is_never_sent() -> None:
    v = Verdict(action="approve", decided_by="alice", source="api", sealed=True)
    assert "sealed" not in v.model_dump() and "sealed" not in v.model_dump_json()
