"""Container resources: Kubernetes quantities, defaults, the Agent's and the run's asks, the policy's caps."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from models.agent import normalize_agent
from models.base import FieldProblem, PolicyViolation
from models.policy import normalize_policy
from models.resolve import resolve_run
from models.resources import AGENT_DEFAULT, HOOK_DEFAULT, parse_quantity


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), ("1.5", Decimal("1.5")), ("1Gi", Decimal(2**30)),
    ("512Mi", Decimal(512 * 2**20)), ("1G", Decimal(10**9)), ("128k", Decimal(128000)), ("1e3", Decimal(1000)),
    ("100n", Decimal("1e-7")), (".5", Decimal("0.5")), ("2Ki", Decimal(2048)),
])
def test_kubernetes_quantities_parse_as_the_apiserver_reads_them(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1 Gi", "-1", "1gi", "Gi", "1.2.3", "1KB", "one"])
def test_malformed_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def agent(resources: dict[str, Any] | None = None, policy_ref: str = "") -> Any:
    default: dict[str, Any] = {"model": "gpt"}
    if resources is not None:
        default["resources"] = resources
    return normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                            "spec": {"agents": {"default": default}, "policyRef": policy_ref}})


def run(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "r1", "namespace": "ns", "uid": "u1"},
            "spec": {"agentRef": "helper", "task": "t", **(spec or {})}}


def policy(**sandbox: Any) -> Any:
    return normalize_policy({"metadata": {"name": "small"}, "spec": {"sandboxPolicy": sandbox}})


def test_without_asks_the_agent_and_hooks_get_the_defaults() -> None:
    r = resolve_run(run(), agent(), default_image="x")
    assert r.resources == AGENT_DEFAULT and r.hook_resources == HOOK_DEFAULT
    assert r.resources.wire() == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                  "limits": {"cpu": "1", "memory": "1Gi"}}


def test_the_agents_resources_apply_key_by_key_and_the_runs_sandbox_resources_win() -> None:
    a = agent({"limits": {"cpu": 2, "memory": "2Gi"}, "requests": {"ephemeral-storage": "1Gi"}})
    r = resolve_run(run(), a, default_image="x")
    assert r.resources.limits == {"cpu": "2", "memory": "2Gi"}
    assert r.resources.requests == {"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "1Gi"}
    r = resolve_run(run({"sandbox": {"resources": {"limits": {"memory": "768Mi"}}}}), a, default_image="x")
    assert r.resources.limits == {"cpu": "2", "memory": "768Mi"}


def test_a_request_above_the_default_limit_raises_the_limit_and_a_default_request_follows_a_lower_limit() -> None:
    r = resolve_run(run({"sandbox": {"resources": {"requests": {"memory": "3Gi"}, "limits": {"cpu": "50m"}}}}),
                    agent(), default_image="x")
    assert r.resources.limits == {"cpu": "50m", "memory": "3Gi"}
    assert r.resources.requests == {"cpu": "50m", "memory": "3Gi"}


def test_an_asked_request_above_its_asked_limit_fails_naming_the_field() -> None:
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({"sandbox": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}),
                    agent(), default_image="x")
    assert e.value.field == "spec.sandbox.resources.requests.cpu"


@pytest.mark.parametrize(("resources", "field"), [
    ({"limits": {"cpu": "lots"}}, "spec.sandbox.resources.limits.cpu"),
    ({"limits": ["1"]}, "spec.sandbox.resources.limits"),
])
def test_a_malformed_resources_field_fails_naming_it(resources: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldProblem) as e:
        resolve_run(run({"sandbox": {"resources": resources}}), agent(), default_image="x")
    assert e.value.field == field


def test_asking_more_than_the_policys_max_memory_is_refused_naming_the_field_and_rule() -> None:
    with pytest.raises(PolicyViolation) as e:
        resolve_run(run({"sandbox": {"resources": {"limits": {"memory": "2Gi"}}}}), agent(), default_image="x",
                    policy=policy(maxMemory="1Gi"))
    assert e.value.field == "spec.sandbox.resources.limits.memory"
    assert 'memory 2Gi exceeds the maximum 1Gi of policy "small", rule sandboxPolicy.maxMemory' in str(e.value)
    with pytest.raises(PolicyViolation) as e:
        resolve_run(run(), agent({"requests": {"cpu": "1500m"}}), default_image="x", policy=policy(maxCPU=1))
    assert e.value.field == "agent spec.agents.default.resources.requests.cpu"


def test_defaults_above_the_policys_caps_are_lowered_to_them() -> None:
    r = resolve_run(run(), agent(), default_image="x", policy=policy(maxCPU="250m", maxMemory="200Mi"))
    assert r.resources.wire() == {"requests": {"cpu": "100m", "memory": "200Mi"},
                                  "limits": {"cpu": "250m", "memory": "200Mi"}}
    assert r.hook_resources.wire() == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                       "limits": {"cpu": "250m", "memory": "200Mi"}}
    within = resolve_run(run({"sandbox": {"resources": {"limits": {"memory": "1G"}}}}), agent(), default_image="x",
                         policy=policy(maxMemory="1Gi"))
    assert within.resources.limits["memory"] == "1G"


def test_a_policy_with_a_malformed_cap_is_invalid_naming_the_field() -> None:
    with pytest.raises(FieldProblem) as e:
        policy(maxCPU="two")
    assert e.value.field == "spec.sandboxPolicy.maxCPU"
