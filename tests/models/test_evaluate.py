"""A run evaluated against its Agent and policy: built-in policy names stand for their templates."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from models.base import PolicyViolation
from models.evaluate import Evaluation, evaluate_run, lifecycle_author


def _agent(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "helper", "namespace": "ns"},
            "spec": {"agents": {"default": {"model": "echo-1"}}, "authRefs": [{"provider": "echo"}], **spec}}


def _evaluate(agent: dict[str, Any], *policies: dict[str, Any], **run_spec: Any) -> Evaluation:
    objects = {("agents", "helper"): agent, **{("sympoziumpolicies", p["metadata"]["name"]): p for p in policies}}

    async def read(plural: str, name: str) -> dict[str, Any] | None:
        return objects.get((plural, name))

    run = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"},
           "spec": {"agentRef": "helper", "task": "t", **run_spec}}
    return asyncio.run(evaluate_run(run, read=read, default_image="agent:1"))


@pytest.mark.parametrize("agent", [_agent(policyRef="permissive"), _agent(policy="permissive")],
                         ids=["policyRef", "legacy-policy"])
def test_a_builtin_policy_name_needs_no_object(agent: dict[str, Any]) -> None:
    got = _evaluate(agent)
    assert got.problem is None and got.resolved is not None
    assert got.policy is not None and got.policy.name == "permissive" and got.policy.template == "Permissive"
    assert got.policy.max_depth == 5 and got.policy.max_concurrent == 10


def test_a_builtin_policy_without_an_object_enforces_its_template() -> None:
    got = _evaluate(_agent(policyRef="restrictive"))
    assert isinstance(got.problem, PolicyViolation)
    assert got.problem.field == "spec.sandbox.enabled"
    assert 'policy "restrictive" (template Restrictive)' in got.problem.message
    assert _evaluate(_agent(policyRef="default")).policy.approval_tools == ["execute_command"]  # type: ignore[union-attr]


def test_an_object_of_a_builtin_name_wins_over_the_builtin() -> None:
    mine = {"metadata": {"name": "restrictive"}, "spec": {"sandboxPolicy": {"required": False}}}
    got = _evaluate(_agent(policyRef="restrictive"), mine)
    assert got.problem is None and got.policy is not None and got.policy.template == ""


def test_a_policy_that_is_neither_an_object_nor_builtin_fails_saying_how_to_create_one() -> None:
    got = _evaluate(_agent(policyRef="network-isolated"))
    assert got.problem is not None and got.problem.field == "agent policyRef"
    assert got.problem.message.startswith('SympoziumPolicy "network-isolated" not found in namespace "ns": create it')
    assert "permissive, default, restrictive" in got.problem.message


def test_the_lifecycle_author_is_the_runs_creator_for_its_own_hooks_and_the_agents_author_for_inherited_ones() -> None:
    """What the worker records as status.lifecycleAuthor when the run starts: who wrote the hooks it executes (a gate
    hook's verdict counts under gatePolicy approvers only when that is not the run's creator)."""
    def run(**spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": "r", "namespace": "ns", "uid": "u",
                             "annotations": {"agentrun.dev/created-by": "bob"}},
                "spec": {"agentRef": "helper", "task": "t", **spec}}

    authored = _agent(agents={"default": {"model": "echo-1", "lifecycle": {"postRun": [
        {"name": "gate", "image": "busybox", "gate": True}]}}})
    authored["metadata"]["annotations"] = {"agentrun.dev/author": "alice"}
    read_agent = {("agents", "helper"): authored}

    async def read(plural: str, name: str) -> dict[str, Any] | None:
        return read_agent.get((plural, name))

    def author_of(obj: dict[str, Any]) -> str | None:
        return lifecycle_author(obj, asyncio.run(evaluate_run(obj, read=read, default_image="agent:1")))

    assert author_of(run()) == "alice"
    assert author_of(run(lifecycle={"postRun": [{"name": "mine", "image": "busybox", "gate": True}]})) == "bob"
    del authored["metadata"]["annotations"]
    assert author_of(run()) is None
    assert author_of(run(timeout="not a duration")) is None  # no resolved run, nothing executes
