"""Which runs wait for a slot: those whose Agent's SympoziumPolicy sets subagentPolicy.maxConcurrent."""

from __future__ import annotations

import pytest

from models.base import FieldProblem
from models.policy import normalize_policy
from models.slots import SlotLimit, slot_limit


def _policy(subagent: dict[str, int] | None) -> dict[str, object]:
    spec = {"subagentPolicy": subagent} if subagent is not None else {}
    return {"metadata": {"name": "limits"}, "spec": spec}


def test_a_policy_with_max_concurrent_limits_the_agents_runs() -> None:
    got = slot_limit(normalize_policy(_policy({"maxConcurrent": 2})), created_at="2030-01-01T00:00:00Z")
    assert got == SlotLimit(limit=2, policy="limits", created_at="2030-01-01T00:00:00Z")


@pytest.mark.parametrize("subagent", [None, {"maxDepth": 3}, {"maxConcurrent": 0}])
def test_no_policy_no_max_concurrent_or_zero_means_no_limit(subagent: dict[str, int] | None) -> None:
    assert slot_limit(None) is None
    assert slot_limit(normalize_policy(_policy(subagent))) is None


def test_a_negative_max_concurrent_is_refused_naming_the_field() -> None:
    with pytest.raises(FieldProblem) as e:
        slot_limit(normalize_policy(_policy({"maxConcurrent": -1})))
    assert str(e.value) == ('SympoziumPolicy "limits" spec.subagentPolicy.maxConcurrent: '
                            "must be a positive number of concurrent runs, got -1")
